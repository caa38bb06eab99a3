#!/bin/sh
# Rule checked: `make install` (into a DESTDIR) puts in place what an
# operator and a program linking the worker library need: an ecoord that
# runs; libecworker with its header and a pkg-config file that compiles,
# links and runs a program against the installed copy; the systemd units
# with the installed paths substituted; the example environment file; man
# pages made from --help (or the --help text when help2man is missing); the
# ecoord Python package, which imports with the system's python3 and loads
# the installed libecworker (found relative to itself, so also in DESTDIR);
# an ecoord-torchrun link that runs as `ecoord torchrun` (its --help, and a
# --standalone job of one process when an etcd binary is there), and that
# `make uninstall` removes.
set -u
build=${EC_BUILDDIR:-$(cd "$(dirname "$0")/.." && pwd)}
dest=$(mktemp -d /tmp/ec-t6200-XXXXXX)
trap 'rm -rf "$dest"' EXIT
echo "1..12"
n=0
fails=0
result() { # COND-STATUS NAME
    n=$((n + 1))
    if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}
# The installation directories as the Makefile expands them.
# shellcheck disable=SC2016 # $($*) is make's syntax
var() { env -u MAKEFLAGS -u MFLAGS make -s -C "$build" --no-print-directory --eval='print-%: ; @echo $($*)' "print-$1"; }

# A make of our own, not the jobserver of the `make check` that runs us.
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$build" install DESTDIR="$dest" >"$dest.log" 2>&1
rc=$?
result $rc "make install DESTDIR=... succeeds"
[ $rc = 0 ] || sed 's/^/# /' "$dest.log" | tail -n 30
rm -f "$dest.log"

bindir=$(var bindir); libdir=$(var libdir); includedir=$(var includedir)
sysconfdir=$(var sysconfdir); mandir=$(var mandir); docdir=$(var docdir)
unitdir=$(var systemdsystemunitdir)

out=$("$dest$bindir/ecoord" --version 2>&1) && "$dest$bindir/ecoord" launch --help >/dev/null 2>&1
result $? "the installed ecoord runs ($out)"

# ecoord-torchrun: the installed ecoord under torchrun's name.
tr=$dest$bindir/ecoord-torchrun
if [ -L "$tr" ] && [ "$(readlink "$tr")" = ecoord ]; then
    out=$("$tr" --help 2>&1) && echo "$out" | grep -q '^usage: ecoord torchrun '
    result $? "the installed ecoord-torchrun (a link to ecoord) shows torchrun's usage"
else
    echo "# $bindir/ecoord-torchrun is not a link to ecoord: $(ls -l "$tr" 2>&1)"
    result 1 "the installed ecoord-torchrun (a link to ecoord) shows torchrun's usage"
fi
if [ -x /usr/bin/etcd ] || command -v etcd >/dev/null 2>&1; then
    # One node, one process: torchrun's --standalone, the program as given.
    # shellcheck disable=SC2016 # expanded by the training process's shell, not this one
    out=$(cd "$dest" && timeout $((60 * ${EC_TEST_TIMEOUT_MULTIPLIER:-1})) "$tr" --standalone \
        --nproc_per_node=1 --log_dir="$dest/trlog" --no_python /bin/sh -c \
        'echo "seen rank=$RANK world=$WORLD_SIZE" > "$0/seen"' "$dest" 2>&1)
    rc=$?
    if [ $rc = 0 ] && grep -qx 'seen rank=0 world=1' "$dest/seen" 2>/dev/null; then
        result 0 "ecoord-torchrun --standalone --nproc_per_node=1 runs a program as rank 0 of 1"
    else
        echo "$out" | tail -n 15 | sed 's/^/# /'
        result 1 "ecoord-torchrun --standalone --nproc_per_node=1 runs a program as rank 0 of 1 (exit $rc)"
    fi
else
    echo "# no etcd binary: the --standalone run is skipped"
    result 0 "ecoord-torchrun --standalone (skipped: no etcd)"
fi

# A program built only from what was installed, through pkg-config.
ok=1
if [ -f "$dest$libdir/pkgconfig/ecoord-worker.pc" ] && [ -f "$dest$includedir/ecw.h" ]; then
    flags=$(PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_LIBDIR=$dest$libdir/pkgconfig \
        pkg-config --cflags --libs ecoord-worker) || flags=
    cat >"$dest/prog.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include <ecw.h>
int main(void) { return strcmp(ecw_err_name(ECW_EEPOCHCHANGED), "ECW_EEPOCHCHANGED") != 0; }
EOF
    echo "# pkg-config --cflags --libs ecoord-worker: $flags"
    # shellcheck disable=SC2086
    if cc -o "$dest/prog" "$dest/prog.c" $flags && LD_LIBRARY_PATH=$dest$libdir "$dest/prog"; then
        ok=0
    fi
else
    echo "# missing: $libdir/pkgconfig/ecoord-worker.pc or $includedir/ecw.h"
fi
result $ok "a program compiles, links and runs against the installed libecworker via pkg-config"

# No CUDA or NCCL library among what the installed library needs: neither
# in its NEEDED entries nor anywhere in what the loader resolves for it.
ok=1
lib=$dest$libdir/libecworker.so.0
if [ -f "$lib" ]; then
    needed=$(LC_ALL=C readelf -d "$lib" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    echo "# libecworker NEEDED: $needed"
    if echo "$needed" | grep -Eq 'libcuda|libnccl|libnvrtc|libcublas'; then
        echo "# libecworker links a CUDA or NCCL library"
    elif LD_LIBRARY_PATH=$dest$libdir ldd "$lib" | grep -Ei 'libcuda|libnccl'; then
        echo "# libecworker pulls in a CUDA or NCCL library (above)"
    else
        ok=0
    fi
else
    echo "# missing: $libdir/libecworker.so.0"
fi
result $ok "the installed libecworker links no CUDA or NCCL library (ldd)"

# Nor does the collective `ecoord check` runs (it takes the runtime the
# library loaded): it must start where CUDA is absent or of another version.
ok=1
prog=$dest$bindir/ecoord-allreduce
if [ -f "$prog" ]; then
    needed=$(LC_ALL=C readelf -d "$prog" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    echo "# ecoord-allreduce NEEDED: $needed"
    if echo "$needed" | grep -Eq 'libcuda|libnccl|libnvrtc|libcublas'; then
        echo "# ecoord-allreduce links a CUDA or NCCL library"
    else
        ok=0
    fi
else
    echo "# missing: $bindir/ecoord-allreduce"
fi
result $ok "the installed ecoord-allreduce links no CUDA or NCCL library"

ok=0
if [ "$unitdir" = no ] || [ -z "$unitdir" ]; then
    echo "# configured --without-systemdsystemunitdir"
else
    for u in ecoord-agent@.service ecoord-etcd.service; do
        f=$dest$unitdir/$u
        if [ ! -f "$f" ]; then echo "# $unitdir/$u not installed"; ok=1; continue; fi
        if grep -n '@[a-zA-Z_]*@' "$f"; then echo "# $u: placeholder left"; ok=1; fi
    done
    grep -q "^ExecStart=$bindir/ecoord launch" "$dest$unitdir/ecoord-agent@.service" 2>/dev/null ||
        { echo "# ecoord-agent@.service does not run $bindir/ecoord"; ok=1; }
    grep -q "^EnvironmentFile=$sysconfdir/ecoord/%i.env" "$dest$unitdir/ecoord-agent@.service" 2>/dev/null ||
        { echo "# ecoord-agent@.service does not read $sysconfdir/ecoord/%i.env"; ok=1; }
fi
result $ok "systemd units installed with installed paths ($unitdir)"

[ -f "$dest$sysconfdir/ecoord/job.env.example" ]
result $? "the example environment file is in $sysconfdir/ecoord"

if [ -f "$dest$mandir/man1/ecoord-launch.1" ]; then
    grep -q 'metrics_port' "$dest$mandir/man1/ecoord-launch.1"
    result $? "man pages from --help ($mandir/man1/ecoord-launch.1)"
else
    grep -q -- '--metrics_port' "$dest$docdir/ecoord-launch.txt" 2>/dev/null
    result $? "--help text installed in $docdir (no help2man)"
fi
pythondir=$(var pythondir)
if [ -z "$pythondir" ]; then
    echo "# configured without Python: no package installed"; result 0 "no Python package (no python3 at configure)"
else
    # Outside the build tree, with nothing but the installed copy on the path.
    out=$(cd / && env -u ECOORD_LIBECWORKER PYTHONPATH="$dest$pythondir" /usr/bin/python3 -c '
import sys, ecoord
p = ecoord.library_path()
print(p, ecoord.strerror(-15))
sys.exit(not (ecoord.__file__.startswith(sys.argv[1]) and p.startswith(sys.argv[2])))
' "$dest$pythondir" "$dest$libdir" 2>&1)
    rc=$?
    echo "# $out"
    if [ $rc = 0 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        out=$(cd / && env -u ECOORD_LIBECWORKER PYTHONPATH="$dest$pythondir" /usr/bin/python3 -c \
            'import ecoord.torch as t; print(t.__file__)' 2>&1) || rc=1
        echo "# $out"
    fi
    result $rc "the ecoord package in $pythondir imports with /usr/bin/python3 and loads the installed libecworker"
fi
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$build" uninstall DESTDIR="$dest" >"$dest.log" 2>&1
rc=$?
if [ $rc = 0 ] && [ ! -e "$dest$bindir/ecoord-torchrun" ] && [ ! -L "$dest$bindir/ecoord-torchrun" ] &&
    [ ! -e "$dest$bindir/ecoord" ]; then
    result 0 "make uninstall removes ecoord and the ecoord-torchrun link"
else
    sed 's/^/# /' "$dest.log" | tail -n 10
    find "$dest$bindir" -maxdepth 1 2>&1 | sed 's/^/# /'
    result 1 "make uninstall removes ecoord and the ecoord-torchrun link (exit $rc)"
fi
rm -f "$dest.log"
[ "$fails" = 0 ]
