#!/bin/sh
# Rule checked: the ecoord Python package mirrors ecw_options_t exactly
# (ctypes field offsets and size equal the C compiler's for worker/ecw.h),
# and its error codes and names are libecworker's own.  A field added to the
# struct without its mirror fails here, not as a corrupted ecw_init.  The
# pure-Python progress writer (ecoord.progress) stores at the progress file's
# C offsets (coord/core/progress_file.h), and its collective marks (what
# ecoord.torch hands torch) nest, count a completed one as progress, end when
# a poll says so (a CUDA event over NCCL), and are forgotten with an aborted
# group (a collective torch never ends).
set -u
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
SRCDIR=${EC_SRCDIR:-${srcdir:-.}}
BUILDDIR=${EC_BUILDDIR:-.}
export ECOORD_LIBECWORKER=$BUILDDIR/.libs/libecworker.so.0
[ -f "$ECOORD_LIBECWORKER" ] || { echo "1..0 # SKIP libecworker not built"; exit 0; }
T=$(mktemp -d /tmp/ec-t3250-XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "1..3"
fields=$(PYTHONPATH="$SRCDIR/worker/python" $PY -c \
    'from ecoord._ecw import Options; print(" ".join(f for f, _ in Options._fields_))')
# printf, not echo: dash's echo would turn the C escapes into newlines.
{
    printf '%s\n' '#include <stddef.h>' '#include <stdio.h>' '#include "ecw.h"' 'int main(void) {' \
        '  printf("size %zu\n", sizeof(ecw_options_t));'
    for f in $fields; do printf '  printf("%s %%zu\\n", offsetof(ecw_options_t, %s));\n' "$f" "$f"; done
    printf '%s\n' '  ecw_options_t o = ECW_OPTIONS_INIT;' \
        '  printf("init %d %d %d %d %d %d\n", o.from_env, o.backend, o.local_rank, o.device,' \
        '         o.log_level, (int)ECW_BACKEND_NONE);' '  return 0; }'
} > "$T/abi.c"
if cc -I"$SRCDIR/worker" -o "$T/abi" "$T/abi.c" 2>"$T/cc.log"; then
    "$T/abi" > "$T/c.txt"
    PYTHONPATH="$SRCDIR/worker/python" $PY -c '
import ctypes
from ecoord import _ecw
o = _ecw.Options()
print("size", ctypes.sizeof(_ecw.Options))
for f, _ in _ecw.Options._fields_:
    print(f, getattr(_ecw.Options, f).offset)
print("init", o.from_env, o.backend, o.local_rank, o.device, o.log_level, _ecw.BACKEND_NONE)
' > "$T/py.txt"
    diff "$T/c.txt" "$T/py.txt" > "$T/diff" && echo "ok 1 - ctypes ecw_options_t matches the C layout ($(head -n1 "$T/c.txt"))" ||
        { echo "not ok 1 - ctypes ecw_options_t differs from the C layout"; sed 's/^/# /' "$T/diff"; }
else
    echo "not ok 1 - cannot compile the layout probe"; head -n 20 "$T/cc.log" | sed 's/^/# /'
fi
out=$(PYTHONPATH="$SRCDIR/worker/python" $PY -c '
from ecoord import _ecw
bad = [k for k, v in _ecw._CODES.items() if _ecw._lib_err_name(v) != "ECW_" + k]
print("mismatch:", bad) if bad else print("all", len(_ecw._CODES), "codes")
raise SystemExit(1 if bad else 0)
' 2>&1)
[ $? = 0 ] && echo "ok 2 - error codes are libecworker's ($out)" || echo "not ok 2 - error codes: $out"

{
    printf '%s\n' '#include <stddef.h>' '#include <stdio.h>' '#include "progress_file.h"' 'int main(void) {'
    for f in step step_ns coll_done_ns coll_enter_ns paused_ns resumed_ns; do
        printf '  printf("%s %%zu\\n", offsetof(ec_progress_slot_t, %s));\n' "$f" "$f"
    done
    printf '%s\n' '  return 0; }'
} > "$T/prog.c"
if cc -I"$SRCDIR/coord/core" -o "$T/prog" "$T/prog.c" 2>"$T/cc2.log"; then
    "$T/prog" > "$T/cp.txt"
    : > "$T/progress.0"
    truncate -s 64 "$T/progress.0"
    out=$(ECOORD_PROGRESS_FILE="$T/progress.0" PYTHONPATH="$SRCDIR/worker/python" $PY -c '
import struct, sys
from ecoord import progress as p
offs = dict(l.split() for l in open(sys.argv[1]))
mine = {"step": p._OFF_STEP, "step_ns": p._OFF_STEP_NS, "coll_done_ns": p._OFF_COLL_DONE_NS,
        "coll_enter_ns": p._OFF_COLL_ENTER_NS, "paused_ns": p._OFF_PAUSED_NS,
        "resumed_ns": p._OFF_RESUMED_NS}
bad = [k for k, v in mine.items() if int(offs[k]) != v]
assert not bad, "offsets differ from the C header: %s" % bad
def word(name):
    return struct.unpack_from("<q", open(sys.argv[2], "rb").read(), int(offs[name]))[0]
t1 = p._collective_begin()
t2 = p._collective_begin()
entered = word("coll_enter_ns")
assert entered > 0, "not inside after a begin"
p._collective_end(t1, True)
assert word("coll_enter_ns") == entered, "one of two ended: still inside since the first"
assert word("coll_done_ns") > 0, "a completed collective is not progress"
p._collective_end(t2, False)
assert word("coll_enter_ns") == 0, "both ended: still inside"
t3 = p._collective_begin()
p._collectives_forgotten()
assert word("coll_enter_ns") == 0, "an aborted group still holds the rank inside"
t4 = p._collective_begin()
p._collective_end(t3, True)  # the aborted era ending late changes nothing
assert word("coll_enter_ns") > 0, "a forgotten collective ended a live one"
p._collective_end(t4, True)
assert word("coll_enter_ns") == 0
# an end only a poll tells (a CUDA event over NCCL): inside until it says done
import time
done, asked = [False], [0]
def poll():
    asked[0] += 1
    return done[0]
t5 = p._collective_begin()
p._collective_end_when(t5, poll)
deadline = time.monotonic() + 10
while asked[0] < 2 and time.monotonic() < deadline:
    time.sleep(0.01)
assert asked[0] >= 2, "the poller never asked twice in 10 s"
assert word("coll_enter_ns") > 0, "ended before its poll said done"
done[0] = True
deadline = time.monotonic() + 10
while word("coll_enter_ns") != 0 and time.monotonic() < deadline:
    time.sleep(0.01)
assert word("coll_enter_ns") == 0, "still inside 10 s after its poll said done"
t6 = p._collective_begin()
p._collective_end_when(t6, lambda: False)
p._collectives_forgotten()  # an aborted group: its pending ends go too
assert word("coll_enter_ns") == 0 and not p._pending, "a forgotten collective still pending"
print("offsets and marks as the agent reads them")
' "$T/cp.txt" "$T/progress.0" 2>&1)
    [ $? = 0 ] && echo "ok 3 - ecoord.progress: $out" || { echo "not ok 3 - ecoord.progress"; echo "$out" | sed 's/^/# /'; }
else
    echo "not ok 3 - cannot compile the progress layout probe"; head -n 20 "$T/cc2.log" | sed 's/^/# /'
fi
