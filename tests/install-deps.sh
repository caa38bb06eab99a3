#!/bin/sh
# Install what ecoord needs, from Debian's packages only.  Idempotent:
# installs nothing when everything is already there.
#   tests/install-deps.sh          everything: build, run, and all tests
#   tests/install-deps.sh build    build and run only (the demo)
set -eu
BUILD="build-essential autoconf automake libtool pkg-config libgrpc-dev libprotobuf-c-dev
protobuf-c-compiler etcd-server etcd-client libgloo-dev libmicrohttpd-dev libssl-dev python3"
TEST="check openssl iproute2 procps python3-torch help2man shellcheck clang libclang-rt-14-dev patchelf"
PKGS=$BUILD
[ "${1:-all}" = build ] || PKGS="$BUILD $TEST"
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
