#!/bin/sh
# Install what ecoord needs to build and test, from Debian's packages only.
# Idempotent: installs nothing when everything is already there.
set -eu
PKGS="build-essential autoconf automake libtool pkg-config libgrpc-dev libprotobuf-c-dev
protobuf-c-compiler check etcd-server etcd-client libgloo-dev openssl iproute2 procps
python3-torch"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
