#!/bin/sh
# Rule checked: the README's two commands work in either order.
# `sh deploy/local/demo.sh` configures with the build dependencies only (no
# `check`); `sh tests/run-all.sh` then installs `check`, and used to run
# `make check` on that configuration: every C test compiled out, and a
# closing line of "46 passed, 0 failed, 1 skipped" that warned of nothing.
# 1. configure records what it found and the versions of the packages it
#    looks for (config.deps); tests/run-all.sh configures again when that
#    record is missing or no longer matches what is installed
#    (tests/lib/configured.sh, deps_stale), on faked records and on a real
#    configure of a copy of this tree that could not see `check`;
# 2. the closing line counts the results and the test programs that ran, and
#    says so, and fails, when the C test programs were compiled out
#    (tests_summary);
# 3. tests/run-all.sh uses both, and .ci/run still runs exactly it.
set -u
src=${EC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d /tmp/ec-t0065-XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
. "$src/tests/lib/configured.sh"
n=0
ok() { n=$((n + 1)); echo "ok $n - $(printf '%s\n' "$1" | paste -s -d ';' -)"; }
notok() {
    n=$((n + 1))
    echo "not ok $n - $1"
    shift
    for l in "$@"; do echo "$l" | sed 's/^/# /'; done
}
echo "1..10"

# A record as configure writes it: found lines, then package versions.
record() {  # record CHECK_FOUND CHECK_VERSION GRPC_VERSION
    echo "# test record"
    echo "found check $1"
    echo "found gloo yes"
    echo "package check $2"
    echo "package libgloo-dev 0.0~git20230519-1"
    echo "package libgrpc-dev $3"
}
installed() {  # installed CHECK_VERSION GRPC_VERSION: what dpkg says now
    echo "package check $1"
    echo "package libgloo-dev 0.0~git20230519-1"
    echo "package libgrpc-dev $2"
}

# 1: the same record and the same packages: nothing to do
record yes 0.15.2-2 1.51.1-3 > "$tmp/rec"
installed 0.15.2-2 1.51.1-3 > "$tmp/now"
if why=$(deps_stale "$tmp/rec" "$tmp/now"); then
    notok "an unchanged machine is not configured again" "$why"
else
    ok "an unchanged machine is not configured again"
fi

# stale NAME PATTERN RECORD NOW: deps_stale says out of date, and why
# matches PATTERN (a case pattern)
stale() {
    if why=$(deps_stale "$3" "$4"); then
        # shellcheck disable=SC2254 # a pattern, on purpose
        case $why in
        $2) ok "$1 ($why)"; return ;;
        esac
    fi
    notok "$1" "${why:-deps_stale says it is up to date}"
}

# 2: no record (a configure from before it was written): configure again
installed 0.15.2-2 1.51.1-3 > "$tmp/now"
stale "no record: configure again, saying why" "*config.deps*" "$tmp/none" "$tmp/now"

# 3: the demo's configure (no check), then check installed by run-all.sh
record no none 1.51.1-3 > "$tmp/rec"
stale "check installed since configure: configure again" "*check*0.15.2-2*installed*" \
    "$tmp/rec" "$tmp/now"

# 4: configure did not find check although its package was there (a
#    configure that could not see it): configure again
record no 0.15.2-2 1.51.1-3 > "$tmp/rec"
stale "check there but not found by configure: configure again" "*found no check*" \
    "$tmp/rec" "$tmp/now"

# 5: a dependency upgraded
record yes 0.15.2-2 1.51.1-3 > "$tmp/rec"
installed 0.15.2-2 1.51.1-4 > "$tmp/now"
stale "a dependency upgraded: configure again" "*libgrpc-dev*1.51.1-3*1.51.1-4*" "$tmp/rec" \
    "$tmp/now"

# 6, 7: the closing line
cat > "$tmp/test-suite.log" <<'EOF'
=================================
   ecoord 0.1.0: ./test-suite.log
=================================

# TOTAL: 47
# PASS:  46
# SKIP:  1
# XFAIL: 0
# FAIL:  0
# XPASS: 0
# ERROR: 0
EOF
record no none 1.51.1-3 > "$tmp/rec"
line=$(tests_summary 0 "$tmp/test-suite.log" "$tmp/rec" 9); rc=$?
case "$rc $line" in
0*) notok "C tests compiled out: said, and a failure" "exit 0: $line" ;;
*"46 passed, 0 failed, 1 skipped"*"9 test programs"*"compiled out"*"apt-get install check"*)
    ok "C tests compiled out: said, and a failure ($line)" ;;
*) notok "C tests compiled out: said, and a failure" "$line" ;;
esac
record yes 0.15.2-2 1.51.1-3 > "$tmp/rec"
line=$(tests_summary 0 "$tmp/test-suite.log" "$tmp/rec" 52); rc=$?
if [ "$rc" = 0 ] && [ "$line" = "46 passed, 0 failed, 1 skipped (47 results of 52 test programs)" ]; then
    ok "all compiled in: the plain count ($line)"
else
    notok "all compiled in: the plain count" "exit $rc: $line"
fi

# 8: a real configure, of a copy of this tree, that cannot see check (a
#    pkg-config that does not know it while HIDE_CHECK is set): its record
#    says so, deps_stale asks for a configure where check is installed, and
#    configure_again_if_stale (what run-all.sh runs) configures with check
if [ ! -x "$src/configure" ]; then
    ok "# SKIP no configure script in $src (autoreconf -fi)"
elif ! git -C "$src" rev-parse --git-dir > /dev/null 2>&1; then
    ok "# SKIP $src is not a git checkout: no list of its sources to copy"
else
    # the copy's make is its own, not this `make check`'s (TESTS=... and all)
    unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
    mkdir "$tmp/tree" "$tmp/bin"
    (cd "$src" && git ls-files --cached --others --exclude-standard | tar -cf - -T -) |
        tar -xf - -C "$tmp/tree"
    for f in configure config.h.in Makefile.in aclocal.m4 build-aux m4; do
        cp -pR "$src/$f" "$tmp/tree/" 2>/dev/null
    done
    # what autoreconf made counts as newer than its sources (a source edited
    # since would make make run autoreconf and configure in the copy)
    (cd "$tmp/tree" && touch aclocal.m4 && touch configure config.h.in && touch Makefile.in)
    cat > "$tmp/bin/pkg-config" <<'EOF'
#!/bin/sh
[ -z "${HIDE_CHECK:-}" ] || for a in "$@"; do case $a in check*) exit 1 ;; esac; done
exec /usr/bin/pkg-config "$@"
EOF
    chmod +x "$tmp/bin/pkg-config"
    if (cd "$tmp/tree" && HIDE_CHECK=1 ./configure PKG_CONFIG="$tmp/bin/pkg-config" \
        > configure.out 2>&1); then
        rec="$tmp/tree/config.deps"
        if ! grep -qx "found check no" "$rec" 2>/dev/null; then
            notok "configure records what it found" "$(cat "$rec" 2>/dev/null || echo "no $rec")"
        elif [ "$(deps_version check)" = none ]; then
            ok "# SKIP check is not installed here: nothing newer to configure for"
        else
            if ! why=$(deps_stale "$rec"); then
                notok "a configure that did not see check is out of date" "$(cat "$rec")"
            elif make -s -C "$tmp/tree" list-tests 2>&1 | grep -qx coord/cli/test/test_knobs; then
                notok "a configure that did not see check compiles the C tests out" \
                    "$(make -s -C "$tmp/tree" list-tests 2>&1 | head -3)"
            elif (cd "$tmp/tree" && configure_again_if_stale > again.out 2>&1) &&
                grep -qx "found check yes" "$rec" &&
                make -s -C "$tmp/tree" list-tests 2>&1 | grep -qx coord/cli/test/test_knobs; then
                ok "a configure that did not see check is configured again, with it ($why)"
            else
                notok "a configure that did not see check is configured again, with it" \
                    "$(tail -5 "$tmp/tree/again.out")" "$(cat "$rec")"
            fi
        fi
    else
        notok "configure a copy of the tree" "$(tail -5 "$tmp/tree/configure.out")"
    fi
fi

# 9, 10: run-all.sh uses them; CI runs exactly run-all.sh
t="tests/run-all.sh configures with configure_again_if_stale and closes with tests_summary"
if grep -q 'configure_again_if_stale' "$src/tests/run-all.sh" &&
    grep -q 'tests_summary' "$src/tests/run-all.sh"; then ok "$t"; else notok "$t"; fi
if [ "$(grep -v '^#' "$src/.ci/run" | grep -v '^$')" = "exec sh tests/run-all.sh" ]; then
    ok ".ci/run runs exactly sh tests/run-all.sh"
else
    notok ".ci/run runs exactly sh tests/run-all.sh" "$(cat "$src/.ci/run")"
fi
