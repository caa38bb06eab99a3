#!/bin/sh
# Build the libFuzzer targets (clang, -fsanitize=fuzzer,address,undefined)
# outside automake's build: the library sources they exercise are compiled
# again here with coverage instrumentation.  Incremental: a target is rebuilt
# only when a source is newer than it.
#
#   tests/fuzz/build.sh [OUT]      default OUT: ./build/fuzz (git-ignored)
#
# Exit 0: built.  Exit 77: clang or libFuzzer is missing (the message says
# which package to install).  Anything else: a build error.
set -eu
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-build/fuzz}
CC=${FUZZ_CC:-clang}
TARGETS="fuzz_records fuzz_flags fuzz_endpoints fuzz_planner"

command -v "$CC" >/dev/null 2>&1 || { echo "no $CC (apt-get install clang libclang-rt-14-dev)"; exit 77; }
command -v protoc-c >/dev/null 2>&1 || { echo "no protoc-c (apt-get install protobuf-c-compiler)"; exit 77; }
PBC_CFLAGS=$(pkg-config --cflags libprotobuf-c 2>/dev/null || true)
PBC_LIBS=$(pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c)
mkdir -p "$OUT/obj" "$OUT/proto"
OUT=$(cd "$OUT" && pwd)

# libFuzzer's runtime ships in libclang-rt-*-dev: probe for it once.
if [ ! -f "$OUT/.probe-ok" ]; then
    printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}\n' \
        > "$OUT/probe.c"
    if ! "$CC" -fsanitize=fuzzer,address,undefined "$OUT/probe.c" -o "$OUT/probe" 2>"$OUT/probe.log"; then
        echo "$CC cannot link -fsanitize=fuzzer (apt-get install libclang-rt-14-dev): $(head -n1 "$OUT/probe.log")"
        exit 77
    fi
    touch "$OUT/.probe-ok"
fi

# newer FILE DEP...: true when FILE is missing or older than a DEP.
newer() {
    f=$1
    shift
    [ -e "$f" ] || return 0
    for d in "$@"; do [ -n "$(find "$d" -newer "$f" 2>/dev/null)" ] && return 0; done
    return 1
}

if newer "$OUT/proto/ecoord.pb-c.c" "$SRC/proto/ecoord.proto"; then
    protoc-c --c_out="$OUT/proto" --proto_path="$SRC/proto" "$SRC/proto/ecoord.proto"
fi

SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"
CFLAGS="-std=gnu11 -g -O1 -fno-omit-frame-pointer -Wall -Wno-unused-function $SAN"
INC="-I$SRC/coord/util -I$SRC/coord/etcd -I$SRC/coord/core -I$SRC/coord/cli -I$OUT/proto -I$SRC/tests/fuzz $PBC_CFLAGS"
LIBSRC="coord/util/error.c coord/util/log.c coord/util/strbuf.c coord/core/keys.c
coord/core/records.c coord/core/node_record.c coord/core/job_records.c coord/core/epoch_record.c
coord/core/epoch_split.c coord/core/epoch_view.c coord/core/history.c coord/core/planner.c coord/core/rank.c
coord/cli/knobs.c coord/util/gpus.c coord/cli/torchrun_args.c coord/etcd/endpoints.c"
# the knob table's parsers, rules and help (coord/cli/knobs_impl.h)
LIBSRC="$LIBSRC coord/cli/knob_parse.c coord/cli/knob_suggest.c coord/cli/knob_rules.c coord/cli/knob_help.c"
OBJS=""
for s in $LIBSRC; do
    o="$OUT/obj/$(echo "$s" | tr / _).o"
    if newer "$o" "$SRC/$s" "$SRC"/coord/*/*.h; then
        # shellcheck disable=SC2086
        "$CC" $CFLAGS -fsanitize=fuzzer-no-link $INC -c "$SRC/$s" -o "$o"
    fi
    OBJS="$OBJS $o"
done
o="$OUT/obj/ecoord.pb-c.o"
if newer "$o" "$OUT/proto/ecoord.pb-c.c"; then
    # shellcheck disable=SC2086
    "$CC" $CFLAGS -w $INC -c "$OUT/proto/ecoord.pb-c.c" -o "$o"
fi
OBJS="$OBJS $o"

for t in $TARGETS; do
    # shellcheck disable=SC2086
    if newer "$OUT/$t" "$SRC/tests/fuzz/$t.c" "$SRC/tests/fuzz/fuzz.h" $OBJS; then
        # shellcheck disable=SC2086
        "$CC" $CFLAGS -fsanitize=fuzzer $INC "$SRC/tests/fuzz/$t.c" $OBJS $PBC_LIBS -o "$OUT/$t"
    fi
done
# shellcheck disable=SC2086
if newer "$OUT/seeds" "$SRC/tests/fuzz/seeds.c" $OBJS; then
    # shellcheck disable=SC2086
    "$CC" $CFLAGS $INC "$SRC/tests/fuzz/seeds.c" $OBJS $PBC_LIBS -o "$OUT/seeds"
fi
echo "fuzz targets in $OUT: $TARGETS"
