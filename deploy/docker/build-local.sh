#!/bin/sh
# Build the image of deploy/docker/Dockerfile where no registry is reachable
# (or none is wanted): the debian:12 base is made here from Debian's own
# archive with mmdebstrap and imported, then buildah builds the Dockerfile on
# it, with the base given as --build-arg DEBIAN (in Docker's image format,
# which keeps the Dockerfile's SHELL; the OCI format drops it).
#
#   deploy/docker/build-local.sh [TAG] [-- BUILD-ARGS...]
#
# Needs, all Debian 12 packages: mmdebstrap, buildah and what it pulls in
# (crun, fuse-overlayfs or the vfs driver, uidmap); root or a user with
# subuids.  The base is localhost/debian-local:12 (made once; delete
# it to refresh).  TAG defaults to localhost/ecoord:0.1.0.  Set STORAGE=vfs
# where overlay mounts are not allowed (inside another container).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
tag=${1:-localhost/ecoord:0.1.0}
[ $# -gt 0 ] && shift
[ "${1:-}" = -- ] && shift
command -v buildah >/dev/null 2>&1 || { echo "$0: buildah is missing (apt-get install buildah)" >&2; exit 1; }
b() { buildah ${STORAGE:+--storage-driver="$STORAGE"} "$@"; }
base=localhost/debian-local:12
if ! b inspect --type image "$base" >/dev/null 2>&1; then
    command -v mmdebstrap >/dev/null 2>&1 || { echo "$0: mmdebstrap is missing (apt-get install mmdebstrap)" >&2; exit 1; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # Debian's minbase, as the official image has it (apt, no recommends).
    mmdebstrap --variant=minbase --include=ca-certificates bookworm "$tmp/root.tar"
    ctr=$(b from scratch)
    b add "$ctr" "$tmp/root.tar" /
    b config --cmd /bin/bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
    b commit --rm "$ctr" "$base"
fi
b bud --format=docker --isolation=chroot --layers --ignorefile "$here/Dockerfile.dockerignore" --build-arg DEBIAN="$base" -f "$here/Dockerfile" -t "$tag" "$@" "$top"
echo "built $tag on $base"
