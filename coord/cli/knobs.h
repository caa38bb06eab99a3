/* ecoord's knobs: one table drives flag parsing, environment aliases,
 * validation, --help and the configuration block printed at start.
 *
 * Rules every knob follows (the same rules the help text states):
 *  - Flags are spelled in full.  Dashes and underscores are interchangeable
 *    (--job-id == --job_id); nothing else is: no prefix matching, ever, so
 *    --np can never be swallowed by --nproc_per_node (Paddle's argparse trap).
 *  - --name=VALUE and --name VALUE are both accepted; booleans are bare
 *    (--json) or --json=true|false.  A separate VALUE may not start with '-'
 *    unless it is a negative number for a knob that takes one.
 *  - An environment alias applies only when the flag is not on the command
 *    line: an explicit flag always wins, even when it repeats the default
 *    (Paddle compares the value with the default instead; we track where each
 *    value came from).  When a knob has several aliases, the first one listed
 *    that is set and non-empty wins: ECOORD_<NAME> before the Paddle spelling,
 *    because ECOORD_ is set on purpose for ecoord while PADDLE_ variables are
 *    often inherited from an older pod spec.  Empty variables count as unset.
 *  - For `launch`, the first argument that is not a flag, or everything after
 *    `--`, is the training program; it and its arguments are passed through
 *    untouched (`ecoord launch --np=2 prog --np=5` gives prog --np=5).
 *  - There is no password flag.  A command line is readable by every user on
 *    the host (ps, /proc/PID/cmdline) and lands in shell history and job
 *    specs; the etcd password comes only from ECOORD_ETCD_PASSWORD or the file
 *    named by --etcd_password_file.
 */
#ifndef EC_KNOBS_H
#define EC_KNOBS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "log.h"

/* Subcommands, as a bit mask so a knob can belong to several. */
typedef enum {
    EC_CMD_LAUNCH = 1u << 0,
    EC_CMD_STATUS = 1u << 1,
    EC_CMD_CHECK = 1u << 2,
} ec_cmd_t;
#define EC_CMD_ALL (EC_CMD_LAUNCH | EC_CMD_STATUS | EC_CMD_CHECK)

/* One id per row of the table; cfg->src[] is indexed by it. */
typedef enum {
    EC_K_ELASTIC_SERVER,
    EC_K_MASTER,        /* Paddle's --master=etcd://...: resolved into elastic_server */
    EC_K_ETCD_PREFIX,
    EC_K_ETCD_CACERT,
    EC_K_ETCD_CERT,
    EC_K_ETCD_KEY,
    EC_K_ETCD_USER,
    EC_K_ETCD_PASSWORD, /* environment only: no flag, by design */
    EC_K_ETCD_PASSWORD_FILE,
    EC_K_ETCD_PROXY,
    EC_K_ETCD_WAIT,
    EC_K_JOB_ID,
    EC_K_ROLE,
    EC_K_RUN_MODE,      /* Paddle's; "collective" is the only one */
    EC_K_NP,
    EC_K_ELASTIC_LEVEL,
    EC_K_MAX_RESTART,
    EC_K_FIXED_FAILURE_EXIT,
    EC_K_NODE_FAILURE_EXIT,
    EC_K_ELASTIC_TIMEOUT,
    EC_K_JOIN_TIMEOUT,
    EC_K_REPLACE_WAIT,
    EC_K_JOIN_READY_TIMEOUT,
    EC_K_EPOCH_CHUNK_MEMBERS,
    EC_K_REBUILD,
    EC_K_NODE_ID,
    EC_K_HOST,
    EC_K_GPUS,
    EC_K_NPROC_PER_NODE,
    EC_K_START_PORT,
    EC_K_PORT_RANGE,
    EC_K_LEASE_TTL,
    EC_K_LEASE_MARGIN,
    EC_K_GRACE_PERIOD,
    EC_K_PEER_PROBE_INTERVAL,
    EC_K_PEER_PAUSE_TOLERANCE,
    EC_K_STOP_BARRIER,
    EC_K_HANG_TIMEOUT,
    EC_K_MAX_PAUSE,
    EC_K_STRAGGLER_FACTOR,
    EC_K_PYTHON,
    EC_K_NO_PYTHON,
    EC_K_MODULE,
    EC_K_LOG_DIR,
    EC_K_LOG_LEVEL,
    EC_K_METRICS_PORT,
    EC_K_JSON,
    EC_K_WATCH,
    EC_K__COUNT
} ec_knob_id_t;

typedef enum {
    EC_KT_STRING,  /* char *                                          */
    EC_KT_STRLIST, /* ec_strlist_t: comma list of strings             */
    EC_KT_INT,     /* int, bounds min..max                            */
    EC_KT_SECONDS, /* int64_t milliseconds; typed as seconds (0.5 ok) */
    EC_KT_BOOL,    /* int 0/1                                         */
    EC_KT_ENUM,    /* int: index into choices[]                       */
    EC_KT_RANGE,   /* ec_range_t: "A" or "A:B" (np), "LO-HI" (ports)  */
    EC_KT_INTLIST, /* ec_intlist_t: comma list of ints                */
    EC_KT_SECRET,  /* char *, environment only, never displayed       */
} ec_knob_type_t;

typedef enum {
    EC_SRC_DEFAULT = 0, /* the table's default (or one derived from other knobs) */
    EC_SRC_FLAG,        /* the command line                                       */
    EC_SRC_ENV,         /* an environment alias                                   */
    EC_SRC_FILE,        /* read from a file (the password)                        */
} ec_src_kind_t;

/* Where a value came from.  name: FLAG: the spelling used, without the
 * dashes ("nnodes"); ENV: the variable ("PADDLE_ELASTIC_NP"); FILE: the path;
 * DEFAULT: NULL, or what the default was derived from ("number of --gpus",
 * "host name").  Static strings, or strings owned by the same ec_config_t. */
typedef struct {
    ec_src_kind_t kind;
    const char *name;
} ec_source_t;

typedef struct {
    int min, max;
} ec_range_t;

typedef struct {
    int n;
    char **v;
} ec_strlist_t;

typedef struct {
    int n;
    int *v;
} ec_intlist_t;

typedef enum { EC_REBUILD_RESTART = 0, EC_REBUILD_INPROCESS = 1 } ec_rebuild_t;

/* Knob flags. */
#define EC_KF_EMPTY_OK (1u << 0) /* an empty value is meaningful               */
#define EC_KF_WHOLE    (1u << 1) /* SECONDS: whole seconds only (etcd lease)    */
#define EC_KF_FILE     (1u << 2) /* STRING: a path that must be readable        */

/* One row of the table.  Read-only; see ec_config_knob(). */
typedef struct ec_knob {
    ec_knob_id_t id;
    const char *name;          /* canonical, with underscores: "job_id"              */
    const char *spellings[3];  /* flag names without "--", underscores, NULL-ended;  */
                               /* spellings[0] == name; none for environment-only     */
    const char *env[3];        /* aliases in precedence order, NULL-ended            */
    ec_knob_type_t type;
    unsigned cmds;             /* EC_CMD_* mask: the subcommands that use it          */
    unsigned flags;            /* EC_KF_*                                            */
    long long min, max;        /* INT, INTLIST items, RANGE ends: value bounds;      */
                               /* SECONDS: milliseconds; STRING: length              */
    const char *def;           /* default, parsed like a flag value                  */
    const char *def_help;      /* how --help states the default, when def says less  */
    const char *const *choices;/* ENUM names (index = stored value), NULL-ended      */
    const char *metavar;       /* "MIN[:MAX]"                                        */
    const char *example;       /* a valid value, for messages: "2:4"                 */
    const char *group;         /* help section                                       */
    const char *help;
    /* internal */
    size_t offset;             /* typed field in ec_config_t                         */
    char sep;                  /* RANGE: ':' or '-'                                  */
    const char *part[2];       /* RANGE: names of the two ends ("MIN", "MAX")        */
    int (*check)(const char *value, const char *where, const char *fix, ec_error_t *err);
} ec_knob_t;

#define EC_CONFIG_MAX_WARNINGS 8

/* The parsed configuration.  Initialize with EC_CONFIG_INITIALIZER, parse,
 * use, then ec_config_release().  Every string field is non-NULL after a
 * successful parse ("" = not given); all fields hold a value (the default)
 * even for knobs the subcommand does not use. */
typedef struct ec_config {
    size_t size;          /* sizeof(ec_config_t): set by EC_CONFIG_INITIALIZER */

    /* Input, set by the caller before ec_config_parse(): this machine's host
     * name, the last fallback for --node_id.  Borrowed. */
    const char *hostname;

    ec_cmd_t cmd;         /* the subcommand parsed */
    int help;             /* --help/-h was given: print ec_config_help(); nothing
                           * after it was parsed and nothing was validated */

    /* etcd */
    ec_strlist_t elastic_server; /* endpoints; n == 0: run an embedded etcd */
    char *master;                /* as given ("" = not given); an etcd:// URL is copied
                                  * into elastic_server by the parse */
    char *etcd_prefix;           /* "" or "/a/b" (starts with '/', no trailing '/') */
    char *etcd_cacert, *etcd_cert, *etcd_key; /* paths, readable at validation time */
    char *etcd_user;
    char *etcd_password;         /* secret: ECOORD_ETCD_PASSWORD or the file's content */
    char *etcd_password_file;
    char *etcd_proxy;            /* "" or http://HOST:PORT: the proxy etcd is reached through */
    int64_t etcd_wait_ms;        /* how long launch waits for an etcd that does not answer */

    /* job */
    char *job_id;                /* [A-Za-z0-9._-]{1,128}, not "." or ".." */
    char *run_mode;              /* "collective" (Paddle's flag; nothing else is accepted) */
    char *role;                  /* torchrun's ROLE_NAME */
    ec_range_t np;               /* nodes: min..max; min == max: fixed size */
    int elastic_level;           /* Paddle's -1|0|1; resolved: 1 when fault tolerance was
                                  * asked for by another knob (--max_restart, an --np
                                  * range, a failure exit code) */
    int max_restart;             /* resolved: 0 when elastic_level <= 0 unless given */
    int fail_fast;               /* resolved: elastic_level -1: the first failure stops
                                  * the node, fails the job, and the agent exits with
                                  * the failed process's code */
    int fixed_failure_exit;      /* exit code of a node leaving a fixed-size job failed */
    int node_failure_exit;       /* exit code of a node leaving an elastic job failed */
    int epoch_chunk_members;     /* an epoch of more members is split (the leader's) */
    int64_t elastic_timeout_ms;
    int64_t join_timeout_ms;     /* 0: wait for the job to form as long as it takes */
    int64_t replace_wait_ms;
    int64_t join_ready_timeout_ms; /* in place: a boot's bound; 0: boots are not waited for */
    ec_rebuild_t rebuild;

    /* this node */
    char *node_id;               /* resolved: flag, ECOORD_NODE_ID, POD_NAME, hostname */
    char *host;                  /* "" = auto-detect later */
    ec_intlist_t gpus;           /* as CUDA_VISIBLE_DEVICES lists them (coord/util/gpus.h);
                                  * n == 0: not given */
    int nproc_per_node;          /* resolved: flag/env, else gpus.n, else the GPUs
                                  * shown (CUDA_VISIBLE_DEVICES, /dev), else 1 */
    int dev_gpus;                /* resolved: /dev/nvidiaN count (ECOORD_DEV_DIR, a
                                  * test hook, instead of /dev) when neither
                                  * CUDA_VISIBLE_DEVICES nor --gpus is set, else 0 */
    int start_port;
    ec_range_t port_range;       /* as given; {0, 0} when not given */
    int port_lo, port_hi;        /* resolved: the ports this node may open */
    int64_t lease_ttl_ms;        /* whole seconds */
    int lease_margin_pct;        /* percent of the TTL: fence that long before it ends */
    int64_t grace_period_ms;
    int64_t peer_probe_interval_ms; /* 0: agents do not watch each other */
    int64_t peer_pause_tolerance_ms; /* silence a watched peer may show before it is reported */
    int stop_barrier;            /* restart mode: a rank starts after its last holder stopped */
    char *hang_timeout;          /* as given: "auto", "off", or seconds */
    int64_t hang_timeout_ms;     /* resolved: > 0 every program, 0 off, -1 auto
                                  * (EC_HANG_AUTO_MS for programs that report progress) */
    int64_t max_pause_ms;        /* a declared pause excuses silence this long; 0: forever */
    char *straggler_factor;      /* as given: "off" or a number > 1 */
    double straggler_factor_x;   /* resolved: 0 off */

    /* the program (coord/agent/program.h turns these into a command) */
    char *python;                /* interpreter of a .py program or a module */
    int no_python;               /* run the program as given, never through python */
    int module;                  /* the program is a Python module: python -u -m PROG */

    /* output */
    char *log_dir;
    ec_log_level_t log_level;
    int metrics_port;            /* 0 = off */
    int json;
    int watch;

    /* Where each value came from. */
    ec_source_t src[EC_K__COUNT];

    /* The training program (launch): prog_argv points into the caller's argv
     * (borrowed; argv[argc] must be NULL, as main's is, for execvp).
     * prog_index is its index in argv, or -1 with prog_argc 0, prog_argv NULL. */
    int prog_index;
    int prog_argc;
    char **prog_argv;
    /* Not a knob: set by `ecoord torchrun` (coord/cli/torchrun_args.h), whose
     * PROGRAM runs under the interpreter whatever its name unless
     * --no_python, as torchrun runs it.  0 after a parse. */
    int prog_always_python;
    /* Not knobs either: set by `ecoord torchrun` (ec_torchrun_apply) where
     * torchrun behaves otherwise than Paddle's launcher.  All 0 after a
     * parse. */
    struct {
        int on;              /* torchrun's interpreter (one that imports torch),
                              * console and files (coord/agent/procs.h) */
        char redirects[128]; /* -r/--redirects as given: "0".."3" or "LR:V,..." */
        char tee[128];       /* -t/--tee, the same form */
        char ranks_filter[128]; /* --local_ranks_filter: "0,1"; "": every rank */
        /* TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: the tee's prefix, with
         * $role_name, $rank, $local_rank (ec_procs_prefix_format); "":
         * torchrun's "[<role><local_rank>]:" */
        char prefix_template[256];
        char run_id[130];    /* --rdzv_id: its --log_dir subdirectory's prefix */
        /* The etcd this node serves to the job's other nodes (torchrun's
         * static and c10d rendezvous, where one node hosts the store):
         * 0 none; 1 this node serves it (static, node_rank 0); 2 it does
         * if serve_host names this machine and serve_port is free, else it
         * is a client of the node that does (c10d).  The others reach it
         * as elastic_server serve_host:serve_port. */
        int serve;
        char serve_host[256];
        int serve_port;
        int static_rdzv;     /* torchrun's static rendezvous (--node_rank, fixed
                              * --nnodes): node_rank is this node's M_id in
                              * the first epoch */
        int node_rank;
    } torchrun;

    /* Things worth telling the user that are not errors (the default job id
     * may collide, an environment alias was overridden...).  The library
     * never prints: the caller logs these. */
    int nwarnings;
    char warnings[EC_CONFIG_MAX_WARNINGS][256];
} ec_config_t;

#define EC_CONFIG_INITIALIZER {.size = sizeof(ec_config_t)}

/* Environment lookup: return the value of name or NULL.  Tests pass their
 * own; the binary passes ec_config_environ. */
typedef const char *(*ec_getenv_fn)(const char *name, void *arg);

/* The process environment (getenv); arg is ignored.  The only getenv() in
 * ecoord: everything else reads the environment through the config. */
const char *ec_config_environ(const char *name, void *arg);

/* Parse the arguments of one subcommand ("launch", "status", "check").
 * argv holds the arguments AFTER the subcommand name (main passes argc - 2,
 * argv + 2); it is not modified and must outlive cfg (prog_argv points into
 * it).  Applies defaults, then flags, then environment aliases for knobs whose
 * flag was not given, then derived defaults (nproc_per_node, node_id), reads
 * the password file, then runs ec_config_validate().
 *
 * cfg must have been initialized with EC_CONFIG_INITIALIZER (or released);
 * whatever it held is released first, except size and hostname.
 * Returns 0, or EC_EINVAL (usage: unknown or misspelled flag, missing value,
 * value out of bounds, failed cross-check), EC_EIO (a file named by a flag
 * cannot be read) or EC_ENOMEM, with err (may be NULL) saying which flag and
 * how to fix it.  On error cfg still holds valid, releasable contents.
 * --help/-h stops parsing: returns 0 with cfg->help set. */
int ec_config_parse(ec_config_t *cfg, const char *subcommand, int argc, char **argv,
                    ec_getenv_fn env, void *env_arg, ec_error_t *err);

/* The cross-field checks, for the knobs cfg->cmd uses: np bounds, --gpus
 * against --nproc_per_node, CUDA_VISIBLE_DEVICES (read through env) against
 * both, ports, TLS and auth pairs, readable TLS files, a program for launch.
 * ec_config_parse() runs it; call it again after changing cfg by hand.
 * Returns 0 or EC_EINVAL/EC_EIO with err filled. */
int ec_config_validate(const ec_config_t *cfg, ec_getenv_fn env, void *env_arg,
                       ec_error_t *err);

/* Free what parse allocated (the password is wiped first).  Accepts NULL;
 * keeps size and hostname so cfg can be parsed again.  Preserves errno. */
void ec_config_release(ec_config_t *cfg);

/* --help for a subcommand, rendered from the table: usage, rules, then every
 * knob the subcommand uses with its spellings, default and environment
 * aliases.  subcommand NULL: the list of subcommands.  Returns a malloc'd
 * string the caller frees, or NULL (unknown subcommand, out of memory). */
char *ec_config_help(const char *subcommand);

/* The configuration block: one line per knob cfg->cmd uses,
 *   "name: value (source: flag --spelling|env NAME|default[: why]|file PATH)"
 * then "program: ..." for launch.  The password is never shown, only whether
 * it is set.  Returns a malloc'd string the caller frees, or NULL. */
char *ec_config_dump(const ec_config_t *cfg);
/* One line for the console: every knob given (flag, environment or file)
 * with its value and source, the count of those at their default, and how
 * to see them all (the dump, at debug level).  malloc'd; NULL on no memory. */
char *ec_config_summary(const ec_config_t *cfg);

/* Edit distance (optimal string alignment, case-insensitive) between two
 * short names, for "did you mean" messages; 99 when either is longer than
 * 63 characters. */
int ec_config_distance(const char *a, const char *b);
/* The knob spelled name (without dashes, dashes and underscores alike), or
 * NULL. */
const ec_knob_t *ec_config_find_flag(const char *name);

/* The table: row id (0 <= id < EC_K__COUNT), NULL when out of range. */
const ec_knob_t *ec_config_knob(int id);
/* "launch" -> EC_CMD_LAUNCH; 0 when unknown. */
ec_cmd_t ec_config_cmd(const char *subcommand);
/* EC_CMD_LAUNCH -> "launch"; "?" when not exactly one known command. */
const char *ec_config_cmd_name(ec_cmd_t cmd);

#endif
