/* `ecoord torchrun ARGS...`: torchrun's command line, translated word by
 * word into `ecoord launch` arguments for the one knob table (coord/cli/knobs.h),
 * so switching from torchrun is changing one word.  Pure: what it needs to
 * know about the machine (GPUs, CPUs) comes in ec_torchrun_host_t.
 *
 * torchrun flags (torch 1.13's run.py, and torch 2's dashed spellings) map
 * onto knobs: --nnodes -> --np, --nproc_per_node (N, gpu, cpu, auto),
 * --rdzv_endpoint of an etcd (--rdzv_backend etcd, etcd-v2, etcd-v3) ->
 * --elastic_server, --rdzv_id -> --job_id, --rdzv_conf's last_call_timeout
 * -> --elastic_timeout, its join_timeout/timeout -> --join_timeout (default
 * 600 s, as in torchrun) and its etcd TLS keys, --max_restarts (default 0, as
 * in torchrun) -> --max_restart, --standalone -> an embedded etcd, --role,
 * --log_dir, --local_addr -> --host, -m -> --module, --no_python; and onto
 * ec_torchrun_t, for what only `ecoord torchrun` does (cfg->torchrun):
 * -r/--redirects, -t/--tee, --local_ranks_filter, and the rendezvous where
 * one node hosts the store (c10d with --rdzv_endpoint=HOST[:PORT], port
 * 29400 when left out; static with --node_rank, --master_addr and
 * --master_port): that node serves an etcd at that address and every node
 * uses it as --elastic_server.  Flags with no counterpart are accepted with
 * a warning saying so (--monitor_interval, --start_method, --run_path, other
 * --rdzv_conf keys, --node_rank/--master_* where torchrun ignores them too).
 * Each flag not on the command line is read from PET_<FLAG> as torchrun
 * reads it (Kubeflow's PyTorchJob sets them).  An unknown flag close to a
 * torchrun flag gets "did you mean"; any other flag goes to the knob table
 * as it is, so ecoord's own flags work here too.  Never a prefix match. */
#ifndef EC_TORCHRUN_ARGS_H
#define EC_TORCHRUN_ARGS_H

#include "error.h"
#include "knobs.h"

typedef struct ec_torchrun_host {
    int ngpus; /* GPUs this node shows its processes (CUDA_VISIBLE_DEVICES, else devices) */
    int ncpus; /* online CPUs */
} ec_torchrun_host_t;

#define EC_TORCHRUN_MAX_WARNINGS 8

typedef struct ec_torchrun {
    int argc;
    char **argv;          /* the `ecoord launch` arguments; malloc'd, NULL-terminated */
    int help;             /* -h/--help: print ec_torchrun_help() */
    int max_restarts_set; /* --max_restarts was given */
    int join_timeout_set; /* --rdzv_conf join_timeout or timeout was given */
    /* for cfg->torchrun (knobs.h says what each means) */
    char redirects[128], tee[128], ranks_filter[128];
    int serve;            /* 0, 1, 2: knobs.h, cfg->torchrun.serve */
    char serve_host[256];
    int serve_port;
    int static_rdzv, node_rank;
    int nwarnings;
    char warnings[EC_TORCHRUN_MAX_WARNINGS][256];
} ec_torchrun_t;

/* Translate argv (the arguments after "torchrun"), with PET_* read through
 * env (may be NULL: none).  Returns 0, EC_EINVAL with err naming the flag
 * (or variable) and the fix, or EC_ENOMEM.  On error *out holds nothing to
 * release. */
int ec_torchrun_translate(int argc, char *const *argv, const ec_torchrun_host_t *host,
                          ec_getenv_fn env, void *env_arg, ec_torchrun_t *out, ec_error_t *err);
/* After cfg was parsed from t->argv as "launch": torchrun's defaults where
 * they differ from ecoord's (--max_restarts 0, its failure policy, no
 * --log_dir), cfg->torchrun from t, and t's warnings appended to cfg's.
 * Returns what ec_config_validate returns. */
int ec_torchrun_apply(const ec_torchrun_t *t, ec_config_t *cfg, ec_getenv_fn env, void *env_arg,
                      ec_error_t *err);
void ec_torchrun_release(ec_torchrun_t *t); /* accepts NULL; preserves errno */
/* `ecoord torchrun --help`, malloc'd. */
char *ec_torchrun_help(void);

#endif
