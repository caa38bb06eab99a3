#!/bin/sh
# The main job on a fresh machine: install what is missing, build, and run.
# Until the launcher lands this is a smoke run of the etcd client against an
# embedded loopback etcd (it starts and stops its own etcd).
set -eu
cd "$(dirname "$0")/../.."
sh tests/install-deps.sh
[ -x configure ] || autoreconf -fi
[ -f Makefile ] || ./configure
make -j"$(nproc)" >/dev/null
make bench >/dev/null
exec tests/bench/bench_etcd 1000
