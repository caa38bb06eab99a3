/* `ecoord check`: verify a multi-node environment before training.
 *
 * Run on every node with the job's --elastic_server, --job_id and --np (and
 * the --gpus, --nproc_per_node, --host and ports training will use); without
 * --elastic_server it checks this node alone with an embedded etcd.  Each
 * node gathers its facts (coord/check/gather.c), publishes them under
 * <job>/check/nodes/<node_id> on a lease, waits for the others, probes every
 * node's published ports over TCP, runs the allreduce test when the worker
 * library provides it, and then one node (the first to create
 * <job>/check/report) compares everyone's facts and publishes the report.
 * Every node prints the same report: one line per check (PASS, WARN, FAIL,
 * SKIP), what was found, and for WARN and FAIL the fix.  It never uses the
 * training job's keys and leaves no key behind when it ends.
 *
 * It never hangs: arrivals are awaited for --elastic_timeout, every later
 * wait has a deadline of its own, and a node that does not arrive or does
 * not finish is reported (by name when it arrived at all).  SIGINT/SIGTERM
 * end it within a fraction of a second, with its keys revoked.
 *
 * Environment read (through the knob table's ec_config_environ, the one
 * getenv of ecoord): CUDA_VISIBLE_DEVICES, NCCL_HOSTID, NCCL_SOCKET_IFNAME,
 * GLOO_SOCKET_IFNAME, and ECOORD_CHECK_ALLREDUCE (below).  For the
 * variables-differ check it also walks `environ` and publishes only an
 * allowlist: NCCL_*, CUDA_*, GLOO_*, TORCH_NCCL_*, TORCH_DISTRIBUTED_*,
 * UCX_*, FI_*, LD_LIBRARY_PATH, LD_PRELOAD, PYTHONPATH, PYTHONHOME and
 * OMP_NUM_THREADS (never the rest of the environment, which may hold
 * secrets); CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES and NCCL_HOSTID are
 * per-machine and are compared by the GPU and host-name checks instead.
 *
 * The allreduce test is an ordinary job of the worker library, started the
 * way training is (coord/ never links worker/): every node runs
 *   ecoord launch --elastic_server=E --job_id=<job_id>.check-<run> --np=K
 *       --nproc_per_node=N [--gpus=G] --host=H --node_id=ID
 *       --log_dir=<log_dir>/check/<node_id> --max_restart=0 -- PROG --bytes=B
 * where <run> names this run of the check (the leader's nonce, so a finished
 * job's status never meets the next run; the leader removes the job's keys
 * once every node is done) and PROG is $ECOORD_CHECK_ALLREDUCE, else
 * `ecoord-allreduce` in the directory of the ecoord binary.  Local rank 0 of each node prints exactly
 * one result line, which the launch console carries:
 *   ecoord-allreduce: ok backend=nccl|gloo ranks=W bytes=B seconds=S busbw_gbps=X
 *   ecoord-allreduce: FAIL <what went wrong>
 * (B is the buffer size in bytes, S the time of one verified allreduce of it,
 * X the bus bandwidth 2*(W-1)/W*B/S in GB/s).  Without PROG on every node the
 * check is SKIPped with the reason.
 */
#ifndef EC_CHECK_COMMAND_H
#define EC_CHECK_COMMAND_H

#include <stdio.h>

#include "knobs.h"

/* Run `ecoord check` for a parsed config (cfg->cmd == EC_CMD_CHECK).  The
 * report goes to out (text, or JSON with --json); progress and errors to
 * errout.  Returns the process exit code: 0 nothing failed, 1 some check
 * failed (or the check could not run: the message says why), 2 usage,
 * 128+signal when interrupted. */
int ec_cmd_check(const ec_config_t *cfg, FILE *out, FILE *errout);

#endif
