#!/bin/sh
# Rule checked: the layers of the house (docs/how-it-works.md, "Layout") hold.
#   coord/util < coord/etcd < coord/core < coord/node < coord/cli
#     < coord/agent < coord/check, coord/status < coord/main.c
# 1. Every `#include "x.h"` in coord/ and worker/ names a header of the
#    includer's own layer or a lower one (check and status do not include
#    each other); the worker library includes only coord/util, coord/etcd and
#    coord/core, and of the core not the planner, the history checker or the
#    probe's proof (HMAC: the worker library links no crypto library).
# 2. The worker library (libecworker.so) defines no symbol that the planner,
#    the history checker, the node coordinator, the cli, the agent, the check
#    or the status command define: it does not link them.
# 3. The checker itself refuses an include that goes up a layer (a
#    synthetic tree), so a broken check cannot pass silently.
# 4. The names of the agent-worker environment (coord/core/env_contract.h)
#    are spelt nowhere else in coord/ and worker/.
# 5. One knob table per program reads the environment: getenv() is called in
#    coord/ only by coord/cli/knobs.c (ec_config_environ, which reads only
#    the names of its table) and in worker/ only by worker/options.c's table.
# 6. Clocks and deadlines are read in one place: clock_gettime() appears in
#    coord/ and worker/ only in coord/util/clock.h.
# 7. The pure core (libeccore) does no I/O: its objects call nothing of the
#    etcd client or of the core's I/O part (libeccore_io: epoch_fetch.c,
#    probe.c, suspects.c), and no system call that reads, writes, opens or
#    connects.
# 8. The node coordinator's concerns own their state: each part of struct
#    ec_node (coord/node/node_impl.h: n->loop, n->reg, n->feed, n->el,
#    n->pub, n->ev, n->hang, n->ring) is named only in its owner's file; the
#    others go through that file's ec__<concern>_* calls.  The check also
#    refuses a synthetic breach, so a broken check cannot pass silently.
set -u
src=${EC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${EC_BUILDDIR:-$src}
tmp=$(mktemp -d /tmp/ec-t0050-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
echo "1..8"

# layer_of FILE (a path under a tree root): prints the layer number and name
layer_of() {
    case $1 in
    coord/util/*) echo "0 util" ;;
    coord/etcd/*) echo "1 etcd" ;;
    proto/*) echo "1 proto" ;;
    coord/core/planner.* | coord/core/history.* | coord/core/probe_proof.*) echo "2 plan" ;;
    coord/core/*) echo "2 core" ;;
    coord/node/*) echo "3 node" ;;
    coord/cli/*) echo "4 cli" ;;
    coord/agent/*) echo "5 agent" ;;
    coord/check/*) echo "6 check" ;;
    coord/status/*) echo "6 status" ;;
    coord/main.c) echo "7 main" ;;
    worker/*) echo "W worker" ;;
    *) echo "- other" ;;
    esac
}

# check_tree ROOT: prints one line per include that breaks the layering;
# exits 0 when there is none.
check_tree() {
    root=$1
    bad=0
    # every header of the tree, by base name (names are unique: -I paths)
    (cd "$root" && find coord worker proto -name '*.h' -o -name '*.proto' 2>/dev/null) |
        sed 's/\.proto$/.pb-c.h/' >"$tmp/headers"
    files=$(cd "$root" && find coord worker -path '*/test' -prune -o -path '*/examples' -prune -o \
        -path '*/python' -prune -o \( -name '*.c' -o -name '*.h' -o -name '*.cc' \) -print | sort)
    for f in $files; do
        set -- $(layer_of "$f")
        fl=$1 fname=$2
        for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$root/$f"); do
            [ "$inc" = config.h ] && continue
            h=$(grep -m1 "/$inc\$" "$tmp/headers" || true)
            if [ -z "$h" ]; then
                echo "$f includes \"$inc\", which is no header of coord/, worker/ or proto/"
                bad=1
                continue
            fi
            set -- $(layer_of "$h")
            hl=$1 hname=$2
            if [ "$fname" = worker ]; then
                case $hname in
                util | etcd | proto | core | worker) ;;
                *)
                    echo "$f (worker library) includes $h ($hname): the worker library uses only util, etcd and core (not the planner)"
                    bad=1
                    ;;
                esac
                continue
            fi
            if [ "$hname" = worker ]; then
                echo "$f ($fname) includes $h: the coordinator never includes the worker library"
                bad=1
                continue
            fi
            [ "$hname" = plan ] && hname=core
            if [ "$hl" -gt "$fl" ] || { [ "$hl" = "$fl" ] && [ "$fl" = 6 ] && [ "$hname" != "$fname" ]; }; then
                echo "$f ($fname) includes $h ($hname): a layer may include only its own and lower layers"
                bad=1
            fi
        done
    done
    return $bad
}

if check_tree "$src" >"$tmp/out" 2>&1; then
    echo "ok 1 - every include in coord/ and worker/ stays in its layer or goes down"
else
    echo "not ok 1 - includes that break the layering:"
    sed 's/^/# /' "$tmp/out"
fi

# 2: symbols
so=$build/.libs/libecworker.so
if [ ! -f "$so" ]; then
    echo "ok 2 - worker library symbols # SKIP libecworker.so is not built"
else
    : >"$tmp/upper"
    for o in "$build"/coord/cli/.libs/*.o "$build"/coord/node/.libs/*.o \
        "$build"/coord/agent/.libs/*.o "$build"/coord/check/.libs/*.o \
        "$build"/coord/status/.libs/*.o "$build"/coord/core/.libs/libecplan_la-*.o \
        "$build"/coord/core/.libs/libecproof_la-*.o; do
        [ -f "$o" ] || continue
        nm --defined-only -g "$o" | awk '$2 ~ /^[TDBR]$/ {print $3}' >>"$tmp/upper"
    done
    nm --defined-only "$so" | awk '{print $3}' | sort -u >"$tmp/worker"
    sort -u "$tmp/upper" >"$tmp/upper.s"
    if [ ! -s "$tmp/upper.s" ]; then
        echo "not ok 2 - found no object files of the agent's layers under $build/coord"
    else
        comm -12 "$tmp/worker" "$tmp/upper.s" >"$tmp/both"
        if [ -s "$tmp/both" ]; then
            echo "not ok 2 - libecworker.so defines symbols of the planner, node, cli or agent:"
            sed 's/^/# /' "$tmp/both"
        else
            echo "ok 2 - libecworker.so defines none of the $(wc -l <"$tmp/upper.s") symbols of the planner, history, node, cli, agent, check and status"
        fi
    fi
fi

# 3: the checker refuses what it must
mkdir -p "$tmp/t/coord/core" "$tmp/t/coord/node" "$tmp/t/worker" "$tmp/t/proto"
printf '#include "node.h"\n' >"$tmp/t/coord/core/keys.c"
printf '/* node */\n' >"$tmp/t/coord/node/node.h"
printf '#include "planner.h"\n' >"$tmp/t/worker/ecw.c"
printf '/* plan */\n' >"$tmp/t/coord/core/planner.h"
if check_tree "$tmp/t" >"$tmp/out2" 2>&1; then
    echo "not ok 3 - the checker accepted a core file including a node coordinator header"
elif grep -q 'keys.c (core) includes coord/node/node.h' "$tmp/out2" &&
    grep -q 'worker/ecw.c (worker library) includes coord/core/planner.h' "$tmp/out2"; then
    echo "ok 3 - the checker refuses an include up a layer and the worker including the planner"
else
    echo "not ok 3 - the checker refused, but not for the planted includes:"
    sed 's/^/# /' "$tmp/out2"
fi

# 4: the environment contract between the agent and the worker library is
# written once (coord/core/env_contract.h): no C file spells its names
names=$(sed -n 's/^#define EC_ENV_[A-Z0-9_]* "\([^"]*\)".*/\1/p' "$src/coord/core/env_contract.h")
: >"$tmp/spelled"
for nm in $names; do
    (cd "$src" && grep -rln --include='*.c' --include='*.h' --include='*.cc' "\"$nm\"" coord worker |
        grep -v -e '^coord/core/env_contract.h$' -e '/test/' | sed "s|\$|: \"$nm\"|") >>"$tmp/spelled"
done
if [ -z "$names" ]; then
    echo "not ok 4 - no names found in coord/core/env_contract.h"
elif [ -s "$tmp/spelled" ]; then
    echo "not ok 4 - names of the environment contract spelt outside coord/core/env_contract.h:"
    sed 's/^/# /' "$tmp/spelled"
else
    echo "ok 4 - the $(echo "$names" | wc -w) names of the agent-worker environment are spelt only in coord/core/env_contract.h"
fi

# 5: every getenv in a knob table
(cd "$src" && grep -rn --include='*.c' --include='*.cc' 'getenv *(' coord worker |
    grep -v -e '/test/' -e '/examples/' -e '^[^:]*:[0-9]*: *\(/\*\|\*\)') >"$tmp/getenv" || true
grep -v -e '^coord/cli/knobs.c:' -e '^worker/options.c:' "$tmp/getenv" >"$tmp/getenv.out" || true
nk=$(grep -c '^coord/cli/knobs.c:' "$tmp/getenv" || true)
nw=$(grep -c '^worker/options.c:' "$tmp/getenv" || true)
if [ -s "$tmp/getenv.out" ] || [ "$nk" != 1 ] || [ "$nw" != 1 ]; then
    echo "not ok 5 - getenv() outside the one read of each knob table (knobs.c: $nk, options.c: $nw, want 1 each):"
    sed 's/^/# /' "$tmp/getenv"
else
    echo "ok 5 - getenv() is called once in coord/ (coord/cli/knobs.c) and once in worker/ (worker/options.c)"
fi

# 6: one place reads the clocks
(cd "$src" && grep -rn --include='*.c' --include='*.cc' --include='*.h' 'clock_gettime *(' coord worker |
    grep -v -e '/test/' -e '/examples/' -e '^coord/util/clock.h:') >"$tmp/clocks" || true
if [ -s "$tmp/clocks" ]; then
    echo "not ok 6 - clock_gettime() outside coord/util/clock.h (use ec_mono_ms, ec_deadline_ts, ...):"
    sed 's/^/# /' "$tmp/clocks"
else
    echo "ok 6 - clocks and deadlines are read only in coord/util/clock.h"
fi

# 7: the pure core calls no I/O.  Objects are read from the libraries
# themselves (only their own members), not from the build folders, where
# objects of an older layout may linger.
# members_nm ARCHIVE PREFIX NM-FLAGS...: "member symbol" per line, for the
# members whose name starts with PREFIX
members_nm() {
    a=$1 p=$2
    shift 2
    nm "$@" "$a" 2>/dev/null | awk -v p="$p" '
        /^[^ ]+\.o:$/ { m = substr($0, 1, length($0) - 1); next }
        index(m, p) == 1 && NF >= 2 { print m, $NF }'
}
if [ ! -f "$build/.libs/libeccore.a" ]; then
    echo "ok 7 - the pure core does no I/O # SKIP libeccore is not built"
else
    {
        members_nm "$build/.libs/libecetcd.a" libecetcd_la- --defined-only -g
        members_nm "$build/.libs/libeccore_io.a" libeccore_io_la- --defined-only -g
    } | awk '{print $2}' >"$tmp/io"
    for f in open openat fopen read write pread pwrite send sendto sendmsg recv recvfrom recvmsg \
        socket connect accept bind listen poll epoll_wait select getaddrinfo getrandom ioctl; do
        echo "$f" >>"$tmp/io"
    done
    sort -u "$tmp/io" >"$tmp/io.s"
    members_nm "$build/.libs/libeccore.a" libeccore_la- -u | sort -k2 >"$tmp/core_u"
    join -1 2 -2 1 -o 1.1,1.2 "$tmp/core_u" "$tmp/io.s" >"$tmp/impure"
    nobj=$(ar t "$build/.libs/libeccore.a" | grep -c '^libeccore_la-')
    if [ "$nobj" -eq 0 ]; then
        echo "not ok 7 - found no objects of libeccore in $build/.libs/libeccore.a"
    elif [ -s "$tmp/impure" ]; then
        echo "not ok 7 - the pure core (libeccore) calls I/O (move it to libeccore_io):"
        sed 's/^/# /' "$tmp/impure"
    else
        echo "ok 7 - the pure core (libeccore, $nobj objects) calls nothing of etcd, of libeccore_io or of the system's I/O"
    fi
fi

# 8: each concern's part of struct ec_node is named only in its own file.
# owner_breaches DIR: "file:line: n->part. (owned by owner.c)" per breach.
owner_breaches() {
    for pair in loop:node.c reg:node_register.c feed:node_model.c el:node_election.c \
        pub:node_publish.c ev:node_evict.c hang:node_hang.c ring:node_ring.c; do
        part=${pair%%:*} owner=${pair#*:}
        (cd "$1" && grep -n "n->$part\." node*.c node_impl.h 2>/dev/null) | grep -v "^$owner:" |
            sed "s/\$/   [n->$part. is $owner's]/"
    done
}
mkdir -p "$tmp/own"
cp "$src"/coord/node/node*.c "$src"/coord/node/node_impl.h "$tmp/own/"
echo 'static void breach(ec_node_t *n) { n->hang.at = 0; }' >>"$tmp/own/node_ring.c"
owner_breaches "$src/coord/node" >"$tmp/own.out"
owner_breaches "$tmp/own" >"$tmp/own.syn"
nparts=$(grep -c '^    struct ec__[a-z]* [a-z]*;$' "$src/coord/node/node_impl.h")
if [ -s "$tmp/own.out" ]; then
    echo "not ok 8 - a concern's state is named outside its file (add a call to the owner instead):"
    sed 's/^/# /' "$tmp/own.out"
elif ! grep -q 'node_ring.c:.*n->hang\.' "$tmp/own.syn"; then
    echo "not ok 8 - the check missed a synthetic breach (node_ring.c writing n->hang.at)"
elif [ "$nparts" -ne 8 ]; then
    echo "not ok 8 - struct ec_node has $nparts concern parts, the check knows 8: update it"
else
    echo "ok 8 - each of the $nparts concerns' parts of struct ec_node is named only in its own file"
fi
