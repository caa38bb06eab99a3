# shellcheck shell=sh
# Whether a build's configuration still matches what is installed, and the
# closing line of tests/run-all.sh.  POSIX sh functions, sourced by
# tests/run-all.sh and tests/t0065-run-all-reconfigures.sh; configure runs
# it as `sh tests/lib/configured.sh record FEATURE=yes|no ...` to write
# config.deps.
#
# Why: `sh deploy/local/demo.sh` configures with the build dependencies only;
# `sh tests/run-all.sh` installs the test ones (check) afterwards.  make
# does not notice a package installed since configure, so every C test
# stayed compiled out while the closing line said nothing of it.

# The packages configure looks for, as "FEATURE PACKAGE": FEATURE is the name
# configure records its finding under (found FEATURE yes|no).
deps_packages() {
    cat <<'EOF'
check check
gloo libgloo-dev
microhttpd libmicrohttpd-dev
etcd etcd-server
etcdctl etcd-client
openssl openssl
help2man help2man
python python3
grpc libgrpc-dev
protobuf-c libprotobuf-c-dev
protoc-c protobuf-c-compiler
EOF
}

# deps_version PACKAGE: its installed version, "none", or "unknown" (no dpkg).
deps_version() {
    command -v dpkg-query > /dev/null 2>&1 || { echo unknown; return; }
    v=$(dpkg-query -W -f='${db:Status-Abbrev} ${Version}' "$1" 2> /dev/null) || v=""
    case $v in
    ii*) echo "$v" | awk '{print $2}' ;;
    *) echo none ;;
    esac
}

# deps_installed: "package NAME VERSION" for each package configure looks for.
deps_installed() {
    deps_packages | while read -r _f p; do
        echo "package $p $(deps_version "$p")"
    done
}

# deps_record FEATURE=yes|no ...: config.deps's content (configure writes it).
deps_record() {
    echo "# Written by configure: what it found, and the versions of the packages it looks for."
    echo "# tests/run-all.sh configures again when these no longer match what is installed"
    echo "# (tests/lib/configured.sh)."
    for a in "$@"; do
        echo "found ${a%%=*} ${a#*=}"
    done
    deps_installed
}

# deps_stale RECORD [NOW]: whether the configuration recorded in RECORD
# (config.deps) is out of date against NOW (deps_installed's output, in a
# file; default: what is installed now).  Prints why, one reason a line, and
# returns 0 when it is out of date; prints nothing and returns 1 when not.
deps_stale() {
    [ -f "$1" ] || {
        echo "no config.deps: this build was configured before configure recorded what it found ($1)"
        return 0
    }
    if [ -n "${2:-}" ]; then now=$(cat "$2"); else now=$(deps_installed); fi
    why=$(
        echo "$now" | while read -r _k p v; do
            [ -n "$p" ] || continue
            was=$(sed -n "s/^package $p //p" "$1" | head -n1)
            if [ -z "$was" ]; then
                echo "$p: not recorded by configure (now $v)"
            elif [ "$was" != "$v" ]; then
                case $was in
                none) echo "$p $v installed since configure ran" ;;
                *) echo "$p: $was when configure ran, $v now" ;;
                esac
            fi
        done
        sed -n 's/^found \([^ ]*\) no$/\1/p' "$1" | while read -r f; do
            p=$(deps_packages | sed -n "s/^$f //p")
            [ -n "$p" ] || continue
            v=$(echo "$now" | sed -n "s/^package $p //p" | head -n1)
            case ${v:-none} in
            none | unknown) ;;
            *) echo "configure found no $f, and $p $v is installed" ;;
            esac
        done
    )
    [ -n "$why" ] || return 1
    echo "$why"
    return 0
}

# configure_again_if_stale: in a configured build directory, configure again
# with the options it was configured with (config.status --recheck) when
# deps_stale says what configure found has changed; says why.
configure_again_if_stale() {
    why=$(deps_stale config.deps) || return 0
    echo "configuring again, with the same options, because what configure found has changed:"
    printf '%s\n' "$why" | while read -r l; do echo "  $l"; done
    ./config.status --recheck && ./config.status
}

# tests_summary STATUS TEST_SUITE_LOG RECORD PROGRAMS: the closing line,
# "N passed, N failed, N skipped (N results of N test programs)", and what
# configure compiled out (no check: the C test programs; no Gloo: its shim's).  Returns STATUS,
# or 1 when test programs were compiled out: a run that could not run them
# did not pass.
tests_summary() {
    st=$1 log=$2 rec=$3 progs=$4
    field() { sed -n "s/^# $1: *//p" "$log" 2> /dev/null | head -n1; }
    pass=$(field PASS) fail=$(field FAIL) err=$(field ERROR) skip=$(field SKIP)
    xfail=$(field XFAIL) xpass=$(field XPASS) total=$(field TOTAL)
    line="${pass:-0} passed, $((${fail:-0} + ${err:-0} + ${xpass:-0})) failed, ${skip:-0} skipped"
    [ "${xfail:-0}" = 0 ] || line="$line, $xfail expected failures"
    line="$line (${total:-0} results of $progs test programs)"
    if grep -qx "found check no" "$rec" 2> /dev/null; then
        line="$line; NOT RUN: the C test programs (unit and integration), compiled out because configure found no check (apt-get install check, then sh tests/run-all.sh)"
        [ "$st" != 0 ] || st=1
    elif grep -qx "found gloo no" "$rec" 2> /dev/null; then
        line="$line; NOT RUN: worker/test/test_gloo_shim, compiled out because configure found no Gloo (apt-get install libgloo-dev, then sh tests/run-all.sh)"
        [ "$st" != 0 ] || st=1
    fi
    echo "$line"
    return "$st"
}

# As a command (configure): sh configured.sh record FEATURE=yes|no ...
if [ "${0##*/}" = configured.sh ] && [ "${1:-}" = record ]; then
    shift
    deps_record "$@"
fi
