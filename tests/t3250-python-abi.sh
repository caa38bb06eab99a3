#!/bin/sh
# Rule checked: the ecoord Python package mirrors ecw_options_t exactly
# (ctypes field offsets and size equal the C compiler's for worker/ecw.h),
# and its error codes and names are libecworker's own.  A field added to the
# struct without its mirror fails here, not as a corrupted ecw_init.
set -u
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
SRCDIR=${EC_SRCDIR:-${srcdir:-.}}
BUILDDIR=${EC_BUILDDIR:-.}
export ECOORD_LIBECWORKER=$BUILDDIR/.libs/libecworker.so.0
[ -f "$ECOORD_LIBECWORKER" ] || { echo "1..0 # SKIP libecworker not built"; exit 0; }
T=$(mktemp -d /tmp/ec-t3250-XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "1..2"
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
