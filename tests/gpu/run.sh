#!/bin/sh
# ecoord's GPU suite, run from its bundle (tests/gpu/bundle.sh) on a machine
# with a GPU, its driver, CUDA and NCCL, and nothing else of ours: no Debian
# packages, no network.  One line per check, PASS/FAIL/SKIP NAME: what it
# saw, then the figures; the whole under 5 minutes (each check has its own
# timeout).  Exit 0 unless a check failed.  Without a GPU it runs what needs
# none (the bundle loads) and says SKIP for the rest.
#
#   sh run.sh [OUT_DIR]          (from the unpacked bundle)
#   env: CHECKS (names to run, default all), PY (the interpreter with torch:
#   python3 on PATH), REPS (benchmark repetitions, 1)
set -u
B=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$(mktemp -d /tmp/ecoord-gpu-run-XXXXXX)}
mkdir -p "$OUT"
export ETCD="$B/bin/etcd" PATH="$B/bin:$PATH"
PY=${PY:-$(command -v python3 || echo python3)}
REPS=${REPS:-1}
fails=0
t_start=$(date +%s)
say() {  # RESULT NAME WHAT
    printf '%s %s: %s\n' "$1" "$2" "$3"
    [ "$1" = FAIL ] && fails=$((fails + 1))
    return 0
}
want() {  # NAME: whether CHECKS asks for it
    [ -z "${CHECKS:-}" ] && return 0
    case " $CHECKS " in *" $1 "*) return 0 ;; esac
    return 1
}
figures() { sed 's/^/    /' "$1"; }
# awk: "p50/max" of v[1..k] (sorts v)
P50_AWK='function p50(v, k,   i, j, t) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
    if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }; return v[int((k + 1) / 2)] "/" v[k] }'
# Where a survivor's rebuild went, from the newest recovery bench's kept logs
# (removal scenarios: node, leave): the build (ecw_rebuild's "ready in") and
# the first collectives on the new communicator (linreg's rebuilt ms less
# the build: ecw_sync_state), p50/max over the survivors, and the leader's
# epoch transaction (etcd's commit: the "txn N ms" of its +published line);
# then the logs go
# unless KEEP was set.  NCCL connects a communicator's transports at its
# first collective unless NCCL_RUNTIME_CONNECT=0.
split_times() {
    d=$(ls -dt /tmp/ec-bench-recovery-* 2>/dev/null | head -n 1)
    [ -n "$d" ] || return 0
    for sc in node leave; do
        cat "$d"/r-inprocess-$sc-*/*/workerlog.0 2>/dev/null | awk -v sc="$sc" "$P50_AWK"'
            /\+comm epoch [0-9]+ rank=.* ready in / {
                for (i = 1; i <= NF; i++) { if ($i == "epoch") e = $(i + 1); if ($i == "in") r = $(i + 1) }
                if (e > 1) ready = r }
            /linreg event=rebuilt epoch=/ {
                split($0, a, "epoch="); split(a[2], b, " "); split($0, c, " ms="); split(c[2], m, " ")
                if (b[1] > 1 && ready != "") { n++; bu[n] = ready; fc[n] = m[1] - ready; ready = "" } }
            END { if (n) printf "    %s: a survivor built in %s ms (p50/max), then its first collectives took %s ms (%d survivors)\n", sc, p50(bu, n), p50(fc, n), n }'
        # etcd's share of the publication: the leader's transaction
        cat "$d"/r-inprocess-$sc-*.console 2>/dev/null | awk -v sc="$sc" "$P50_AWK"'
            /\+published epoch [0-9]+ .*txn [0-9]+ ms/ {
                for (i = 1; i <= NF; i++) { if ($i == "epoch") e = $(i + 1); if ($i == "txn") t = $(i + 1) }
                if (e > 1) tx[++n] = t + 0 }
            END { if (n) printf "    %s: the leader'"'"'s epoch transaction took %s ms (p50/max, %d epochs)\n", sc, p50(tx, n), n }'
    done
    [ -n "${KEEP:-}" ] || rm -rf "$d"
}
# The same for the torch bench's survivors: the notice to the new epoch
# (epoch_ms), the wait for rank 0's store (store_ms), the state sync
# (sync_ms), p50/max; and how many rebuilds began with torch's own error
# ("NCCL communicator was aborted": a collective that reached torch while
# the group's abort ran, and waited for it) rather than ecoord.torch's check.
torch_split() {
    d=$(ls -dt /tmp/ec-bench-torch-* 2>/dev/null | head -n 1)
    [ -n "$d" ] || return 0
    for sc in kill9 leave; do
        cat "$d"/t-inprocess-$sc-*/*/workerlog.0 2>/dev/null | awk -v sc="$sc" "$P50_AWK"'
            /^torch_ddp event=epoch-changed/ && /aborted on rank/ { torch_err++ }
            /^torch_ddp rebuilt / && !/ epoch=1 / {
                for (i = 1; i <= NF; i++) { split($i, kv, "=")
                    if (kv[1] == "epoch_ms") e[++n] = kv[2] + 0
                    if (kv[1] == "store_ms") st[n] = kv[2] + 0
                    if (kv[1] == "sync_ms") sy[n] = kv[2] + 0 } }
            END { if (n) printf "    %s: notice to epoch %s ms, store %s ms, sync %s ms (p50/max, %d rebuilds; %d began with torch'"'"'s own abort error)\n", sc, p50(e, n), p50(st, n), p50(sy, n), n, torch_err + 0 }'
    done
    [ -n "${KEEP:-}" ] || rm -rf "$d"
}

# 1. the bundle loads here: every binary finds every library it needs
if want loader; then
    missing=""
    for f in ecoord .libs/libecworker.so.0 worker/examples/linreg worker/test/test_worker_prog \
        tests/t4000-worker; do
        m=$(ldd "$B/$f" 2>&1 | grep "not found" | awk '{print $1}' | tr '\n' ' ')
        [ -n "$m" ] && missing="$missing $f: $m;"
    done
    if [ -n "$missing" ]; then
        say FAIL loader "libraries not found:$missing"
    elif ! v=$("$B/ecoord" --version 2>&1) || ! "$ETCD" --version >/dev/null 2>&1; then
        say FAIL loader "ecoord --version or etcd --version failed: $v"
    else
        say PASS loader "every binary loads; $v"
    fi
fi

# 2. a GPU?
gpu=""
if command -v nvidia-smi >/dev/null 2>&1; then
    gpu=$(timeout 20 nvidia-smi -L 2>/dev/null | head -n 1)
fi
[ -z "$gpu" ] && [ -e /dev/nvidia0 ] && gpu="/dev/nvidia0 (no nvidia-smi)"
if [ -z "$gpu" ]; then
    for c in smoke t4000-nccl c-worker-one-gpu c-worker-shrink c-worker-eager-connect torch-nccl-smoke torch-nccl-one-gpu illegal-address; do
        want $c && say SKIP $c "no GPU here (nvidia-smi -L lists none, no /dev/nvidia0)"
    done
    echo "gpu suite: $fails failed, $(( $(date +%s) - t_start )) s, no GPU; output in $OUT"
    [ $fails -eq 0 ]
    exit
fi
echo "device: $gpu"
command -v nvidia-smi >/dev/null 2>&1 &&
    timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
    sed 's/^/device: /'

# 3. the NCCL backend's pieces (tests/gpu/smoke.c)
if want smoke; then
    if [ ! -x "$B/tests/gpu/smoke" ]; then
        say SKIP smoke "not in the bundle (built where CUDA's headers were missing)"
    elif timeout 120 "$B/tests/gpu/smoke" > "$OUT/smoke.txt" 2>&1; then
        say PASS smoke "$(grep -c '^ok' "$OUT/smoke.txt") checks ok"; figures "$OUT/smoke.txt"
    else
        say FAIL smoke "see below"; figures "$OUT/smoke.txt"
    fi
fi

# 4. t4000's GPU cases: a one-rank communicator rebuilt per epoch (with its
# rebuild timings), the NCCL already loaded, the backends' agreement
if want t4000-nccl; then
    cases=nccl_rebuilds_per_epoch,auto_takes_the_nccl_already_loaded,members_refuse_a_backend_other_than_rank_0s
    (cd "$B" && EC_TEST_ONLY=$cases ECW_TEST_WORKER="$B/worker/test/test_worker_prog" \
        timeout 180 "$B/tests/t4000-worker") > "$OUT/t4000.txt" 2>&1
    nok=$(grep -c '^ok' "$OUT/t4000.txt"); nbad=$(grep -c '^not ok' "$OUT/t4000.txt")
    if [ "$nbad" -eq 0 ] && [ "$nok" -ge 3 ]; then
        say PASS t4000-nccl "$nok cases"
    else
        say FAIL t4000-nccl "$nok passed, $nbad failed (of 3)"
    fi
    grep '^#\|^not ok' "$OUT/t4000.txt" | grep -v '^# *$' | sed 's/^/    /'
fi

# 5. the C worker, 3 agents x 1 process on the one GPU: kill -9 of a node, a
# graceful leave, a join; every survivor stepping again (ms from the change)
if want c-worker-one-gpu; then
    if (cd "$B" && KEEP=1 ONE_GPU=1 NPROC=1 LINREG_ARGS="--backend nccl" MODES=inprocess \
        SCENARIOS="node leave scaleup" timeout 240 sh tests/bench/bench_recovery.sh "$REPS" 3 \
        "$OUT/c-worker.json") > "$OUT/c-worker.txt" 2>&1 &&
        [ "$(grep -c '^inprocess ' "$OUT/c-worker.txt")" -eq 3 ]; then
        say PASS c-worker-one-gpu "node kill, leave and join recovered"
    else
        say FAIL c-worker-one-gpu "not every scenario recovered"
    fi
    figures "$OUT/c-worker.txt"
    split_times
fi

# 5b. the same with ECOORD_WORKER_NCCL_REBUILD=shrink: an epoch that only
# removes ranks shrinks the communicator (NCCL_SHRINK_ABORT for one the epoch
# cut off) instead of a full init; measured against 5's figures
if want c-worker-shrink; then
    if (cd "$B" && KEEP=1 ONE_GPU=1 NPROC=1 LINREG_ARGS="--backend nccl" MODES=inprocess \
        ECOORD_WORKER_NCCL_REBUILD=shrink SCENARIOS="node leave" timeout 180 \
        sh tests/bench/bench_recovery.sh "$REPS" 3 "$OUT/c-worker-shrink.json") \
        > "$OUT/c-worker-shrink.txt" 2>&1 &&
        [ "$(grep -c '^inprocess ' "$OUT/c-worker-shrink.txt")" -eq 2 ]; then
        say PASS c-worker-shrink "node kill and leave recovered with shrink"
    else
        say FAIL c-worker-shrink "not every scenario recovered"
    fi
    figures "$OUT/c-worker-shrink.txt"
    split_times
fi

# 5c. the same with NCCL_RUNTIME_CONNECT=0: NCCL connects every transport in
# the init instead of at the first collective (its default since 2.22); the
# splits say whether the sum moves
if want c-worker-eager-connect; then
    if (cd "$B" && KEEP=1 ONE_GPU=1 NPROC=1 LINREG_ARGS="--backend nccl" MODES=inprocess \
        NCCL_RUNTIME_CONNECT=0 SCENARIOS="node leave" timeout 180 \
        sh tests/bench/bench_recovery.sh "$REPS" 3 "$OUT/c-worker-eager.json") \
        > "$OUT/c-worker-eager.txt" 2>&1 &&
        [ "$(grep -c '^inprocess ' "$OUT/c-worker-eager.txt")" -eq 2 ]; then
        say PASS c-worker-eager-connect "node kill and leave recovered with NCCL_RUNTIME_CONNECT=0"
    else
        say FAIL c-worker-eager-connect "not every scenario recovered"
    fi
    figures "$OUT/c-worker-eager.txt"
    split_times
fi

# 6a. ecoord.torch's NCCL path in one process (no agent: a 1-rank group):
# its NCCL warm-up and the first group's build after it, backend choice,
# state sync and DDP on CUDA tensors, torch's own abort timed
if want torch-nccl-smoke; then
    if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        say SKIP torch-nccl-smoke "$PY has no torch with CUDA (set PY)"
    elif (cd "$B" && ECOORD_LIBECWORKER="$B/.libs/libecworker.so.0" \
        timeout 120 "$PY" tests/progs/torch_nccl_smoke.py) > "$OUT/torch-smoke.txt" 2>&1 &&
        grep -q '^OK' "$OUT/torch-smoke.txt"; then
        say PASS torch-nccl-smoke "$(grep 'nccl warm-up' "$OUT/torch-smoke.txt"); $(grep 'torch abort' "$OUT/torch-smoke.txt")"
    else
        say FAIL torch-nccl-smoke "see below"; figures "$OUT/torch-smoke.txt"
    fi
fi

# 6. the same under ecoord.torch (DDP over NCCL), and a hang: a process of
# one node sleeping outside its collectives while the others wait in DDP's
# allreduce is named (ecoord.torch marks a bucket until a CUDA event after
# it is done: its "evidence" line must show the others "waited ... inside a
# collective")
if want torch-nccl-one-gpu; then
    if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        say SKIP torch-nccl-one-gpu "$PY has no torch with CUDA (set PY)"
    elif (cd "$B" && KEEP=1 ONE_GPU=1 NPROC=1 TORCH_DDP_BACKEND=nccl PY="$PY" MODES=inprocess \
        SCENARIOS="kill9 leave join hang" ECOORD_LIBECWORKER="$B/.libs/libecworker.so.0" \
        timeout 300 sh tests/bench/bench_torch_inprocess.sh "$REPS" 3) > "$OUT/torch.txt" 2>&1 &&
        [ "$(grep -c '^inprocess ' "$OUT/torch.txt")" -eq 4 ]; then
        say PASS torch-nccl-one-gpu "kill -9, leave and join recovered in place; the hung node named"
    else
        say FAIL torch-nccl-one-gpu "not every scenario recovered"
    fi
    [ -f "$OUT/torch.txt" ] && figures "$OUT/torch.txt"
    torch_split
fi

# 7. a kernel's illegal address reaching the caller as ECW_ERESTART, and the
# agent seeing the process exit for it (tests/gpu/illegal.cu: one rank under
# an agent, its own etcd; last, as it faults its CUDA context)
if want illegal-address; then
    if [ ! -x "$B/tests/gpu/illegal" ]; then
        say SKIP illegal-address "not in the bundle (built where nvcc was missing)"
    elif ! ep=$(sh "$B/deploy/local/etcd.sh" "$OUT/illegal-etcd" 2>"$OUT/illegal-etcd.err"); then
        say FAIL illegal-address "etcd did not start: $(cat "$OUT/illegal-etcd.err")"
    else
        # shellcheck disable=SC2086 # ENDPOINT PID DIR
        set -- $ep
        (cd "$B" && timeout 90 "$B/ecoord" launch --elastic_server="$1" --job_id=illegal --np=1 \
            --nproc_per_node=1 --max_restart=0 --log_dir="$OUT/illegal" -- "$B/tests/gpu/illegal") \
            > "$OUT/illegal.txt" 2>&1
        arc=$?
        kill "$2" 2>/dev/null
        line=$(grep -h "^illegal-address" "$OUT/illegal/workerlog.0" 2>/dev/null | tail -n 1)
        case $line in
            "illegal-address PASS"*) say PASS illegal-address "${line#illegal-address PASS: } (agent exit $arc)" ;;
            *) say FAIL illegal-address "${line:-no result line} (agent exit $arc)"
               tail -n 20 "$OUT/illegal.txt" | sed 's/^/    /' ;;
        esac
    fi
fi

echo "gpu suite: $fails failed, $(( $(date +%s) - t_start )) s on $gpu; output in $OUT"
[ $fails -eq 0 ]
