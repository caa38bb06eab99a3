/* The table of knobs and everything it drives: parsing, environment
 * aliases, validation, --help and the configuration dump.
 *
 * Adding a knob: a field in ec_config_t, an id in ec_knob_id_t, a row in
 * knobs[] below.  Parsing, env aliases, help and dump follow from the row;
 * only rules that tie several knobs together need code (resolve() and
 * ec_config_validate()).
 */
#include "knobs.h"
#include "env_contract.h"
#include "gpus.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define L EC_CMD_LAUNCH
#define S EC_CMD_STATUS
#define C EC_CMD_CHECK
#define OFF(field) offsetof(ec_config_t, field)

#define JOB_ID_MAX 128
#define NODE_ID_MAX 253
#define PASSWORD_MAX 4096

#define PASSWORD_WHY                                                                   \
    "there is no password flag: a command line is visible to every user on the host " \
    "(ps, /proc/PID/cmdline) and is kept in shell history and job specs; set "        \
    "ECOORD_ETCD_PASSWORD or pass --etcd_password_file=PATH (a file only you can read)"

static int check_endpoint(const char *v, const char *where, const char *fix, ec_error_t *err);
static int check_prefix(const char *v, const char *where, const char *fix, ec_error_t *err);
static int check_job_id(const char *v, const char *where, const char *fix, ec_error_t *err);
static int check_node_id(const char *v, const char *where, const char *fix, ec_error_t *err);
static int check_host(const char *v, const char *where, const char *fix, ec_error_t *err);
static int check_proxy(const char *v, const char *where, const char *fix, ec_error_t *err);
static int check_run_mode(const char *v, const char *where, const char *fix, ec_error_t *err);
static int check_role(const char *v, const char *where, const char *fix, ec_error_t *err);
static int check_hang_timeout(const char *v, const char *where, const char *fix, ec_error_t *err);
static int check_straggler(const char *v, const char *where, const char *fix, ec_error_t *err);
static void origin(const ec_config_t *cfg, int id, const char *value, char *buf, size_t len);

static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const rebuilds[] = {"restart", "inprocess", NULL};

/* clang-format off */
static const ec_knob_t knobs[EC_K__COUNT] = {
    /* ---- etcd ---------------------------------------------------------- */
    [EC_K_ELASTIC_SERVER] = {
        .id = EC_K_ELASTIC_SERVER, .name = "elastic_server",
        .spellings = {"elastic_server"},
        .env = {EC_ENV_ELASTIC_SERVER, "PADDLE_ELASTIC_SERVER"},
        .type = EC_KT_STRLIST, .cmds = L | S | C, .flags = EC_KF_EMPTY_OK,
        .def = "", .def_help = "empty: run an embedded etcd",
        .metavar = "HOST:PORT[,...]", .example = "10.0.0.1:2379", .group = "etcd",
        .help = "etcd endpoints, comma separated; every node of a job names the same "
                "etcd. Empty runs an embedded etcd on this node.",
        .offset = OFF(elastic_server), .check = check_endpoint},
    /* Paddle's current launcher names its rendezvous server --master: an
     * etcd:// URL there means etcd (its ETCDMaster); a bare HOST:PORT is
     * a master Paddle serves over HTTP from one node, which ecoord has no
     * use for.  resolve_master() turns the first into elastic_server. */
    [EC_K_MASTER] = {
        .id = EC_K_MASTER, .name = "master",
        .spellings = {"master"}, .env = {"ECOORD_MASTER", "PADDLE_MASTER"},
        .type = EC_KT_STRING, .cmds = L | S | C, .flags = EC_KF_EMPTY_OK,
        .max = 4096, .def = "", .def_help = "none",
        .metavar = "etcd://HOST:PORT[,HOST:PORT...]", .example = "etcd://10.0.0.1:2379",
        .group = "etcd",
        .help = "Paddle's spelling of --elastic_server: etcd:// followed by the etcd "
                "endpoints. Paddle's HTTP master (a bare HOST:PORT) is not used: ecoord meets "
                "its peers in etcd. An inherited PADDLE_MASTER without etcd:// is ignored.",
        .offset = OFF(master), .check = check_endpoint},
    [EC_K_ETCD_PREFIX] = {
        .id = EC_K_ETCD_PREFIX, .name = "etcd_prefix",
        .spellings = {"etcd_prefix"}, .env = {EC_ENV_ETCD_PREFIX},
        .type = EC_KT_STRING, .cmds = L | S | C, .flags = EC_KF_EMPTY_OK,
        .max = 256, .def = "", .def_help = "none: keys start at /JOB_ID/",
        .metavar = "/PREFIX", .example = "/ecoord", .group = "etcd",
        .help = "key prefix for an etcd shared with other users: keys become "
                "/PREFIX/JOB_ID/... It starts with '/' and does not end with one.",
        .offset = OFF(etcd_prefix), .check = check_prefix},
    [EC_K_ETCD_CACERT] = {
        .id = EC_K_ETCD_CACERT, .name = "etcd_cacert",
        .spellings = {"etcd_cacert"}, .env = {EC_ENV_ETCD_CACERT},
        .type = EC_KT_STRING, .cmds = L | S | C, .flags = EC_KF_EMPTY_OK | EC_KF_FILE,
        .max = PATH_MAX, .def = "", .def_help = "none: plain TCP unless the endpoints say https",
        .metavar = "PATH", .example = "/etc/ecoord/ca.pem", .group = "etcd",
        .help = "CA certificate that signed the etcd servers' certificates (TLS).",
        .offset = OFF(etcd_cacert)},
    [EC_K_ETCD_CERT] = {
        .id = EC_K_ETCD_CERT, .name = "etcd_cert",
        .spellings = {"etcd_cert"}, .env = {EC_ENV_ETCD_CERT},
        .type = EC_KT_STRING, .cmds = L | S | C, .flags = EC_KF_EMPTY_OK | EC_KF_FILE,
        .max = PATH_MAX, .def = "", .def_help = "none",
        .metavar = "PATH", .example = "/etc/ecoord/client.pem", .group = "etcd",
        .help = "client certificate for etcd TLS; goes with --etcd_key.",
        .offset = OFF(etcd_cert)},
    [EC_K_ETCD_KEY] = {
        .id = EC_K_ETCD_KEY, .name = "etcd_key",
        .spellings = {"etcd_key"}, .env = {EC_ENV_ETCD_KEY},
        .type = EC_KT_STRING, .cmds = L | S | C, .flags = EC_KF_EMPTY_OK | EC_KF_FILE,
        .max = PATH_MAX, .def = "", .def_help = "none",
        .metavar = "PATH", .example = "/etc/ecoord/client-key.pem", .group = "etcd",
        .help = "private key of --etcd_cert.",
        .offset = OFF(etcd_key)},
    [EC_K_ETCD_USER] = {
        .id = EC_K_ETCD_USER, .name = "etcd_user",
        .spellings = {"etcd_user"}, .env = {EC_ENV_ETCD_USER},
        .type = EC_KT_STRING, .cmds = L | S | C, .flags = EC_KF_EMPTY_OK,
        .max = 256, .def = "", .def_help = "none: no etcd authentication",
        .metavar = "NAME", .example = "trainer", .group = "etcd",
        .help = "etcd user; its password comes from ECOORD_ETCD_PASSWORD or "
                "--etcd_password_file.",
        .offset = OFF(etcd_user)},
    [EC_K_ETCD_PASSWORD] = {
        .id = EC_K_ETCD_PASSWORD, .name = "etcd_password",
        .spellings = {NULL}, .env = {EC_ENV_ETCD_PASSWORD},
        .type = EC_KT_SECRET, .cmds = L | S | C, .flags = EC_KF_EMPTY_OK,
        .max = PASSWORD_MAX, .def = "", .def_help = "none",
        .metavar = "PASSWORD", .group = "etcd",
        .help = "password of --etcd_user, from the environment only. There is no "
                "password flag: a command line is visible to every user on the host "
                "(ps, /proc/PID/cmdline) and is kept in shell history and job specs.",
        .offset = OFF(etcd_password)},
    [EC_K_ETCD_PASSWORD_FILE] = {
        .id = EC_K_ETCD_PASSWORD_FILE, .name = "etcd_password_file",
        .spellings = {"etcd_password_file"}, .env = {EC_ENV_ETCD_PASSWORD_FILE},
        .type = EC_KT_STRING, .cmds = L | S | C, .flags = EC_KF_EMPTY_OK,
        .max = PATH_MAX, .def = "", .def_help = "none",
        .metavar = "PATH", .example = "/run/secrets/etcd", .group = "etcd",
        .help = "file holding the password of --etcd_user (a trailing newline is "
                "ignored); make it readable by you only (chmod 600).",
        .offset = OFF(etcd_password_file)},
    [EC_K_ETCD_PROXY] = {
        .id = EC_K_ETCD_PROXY, .name = "etcd_proxy",
        .spellings = {"etcd_proxy"}, .env = {EC_ENV_ETCD_PROXY},
        .type = EC_KT_STRING, .cmds = L | S | C, .flags = EC_KF_EMPTY_OK,
        .max = 1024, .def = "", .def_help = "none",
        .metavar = "http://HOST:PORT", .example = "http://proxy.example:3128", .group = "etcd",
        .help = "reach etcd through this HTTP CONNECT proxy. By default etcd connections "
                "go straight to etcd: the proxy variables of the environment (http_proxy, "
                "https_proxy, grpc_proxy, ...), which many clusters set, are never used for "
                "them, and the training processes do not get those variables.",
        .offset = OFF(etcd_proxy), .check = check_proxy},

    /* ---- job ----------------------------------------------------------- */
    [EC_K_JOB_ID] = {
        .id = EC_K_JOB_ID, .name = "job_id",
        .spellings = {"job_id"},
        .env = {EC_ENV_JOB_ID, "PADDLE_ELASTIC_JOB_ID", EC_ENV_PADDLE_JOB_ID},
        .type = EC_KT_STRING, .cmds = L | S | C,
        .max = JOB_ID_MAX, .def = "default",
        .def_help = "default (with a warning: two jobs on one etcd with the same id join "
                    "each other)",
        .metavar = "NAME", .example = "job1", .group = "job",
        .help = "name of the job; every node of the job uses the same. Letters, digits, "
                "'.', '_' and '-', 1 to 128 characters.",
        .offset = OFF(job_id), .check = check_job_id},
    [EC_K_ROLE] = {
        .id = EC_K_ROLE, .name = "role",
        .spellings = {"role"}, .env = {"ECOORD_ROLE"},
        .type = EC_KT_STRING, .cmds = L, .max = 128,
        .def = "default", .metavar = "NAME", .example = "trainer", .group = "job",
        .help = "the processes' ROLE_NAME, as torchrun's --role sets it; every process of the "
                "job has the same role.",
        .offset = OFF(role), .check = check_role},
    [EC_K_RUN_MODE] = {
        .id = EC_K_RUN_MODE, .name = "run_mode",
        .spellings = {"run_mode"}, .env = {"ECOORD_RUN_MODE", "PADDLE_RUN_MODE"},
        .type = EC_KT_STRING, .cmds = L | C, .max = 64,
        .def = "collective", .metavar = "collective", .example = "collective", .group = "job",
        .help = "Paddle's run mode, accepted so Paddle command lines keep working: ecoord runs "
                "collective jobs only (every process a trainer), so collective is the one value.",
        .offset = OFF(run_mode), .check = check_run_mode},
    [EC_K_NP] = {
        .id = EC_K_NP, .name = "np",
        .spellings = {"np", "nnodes"},
        .env = {"ECOORD_NP", "PADDLE_ELASTIC_NP", "PADDLE_NNODES"},
        .type = EC_KT_RANGE, .cmds = L | C, .min = 1, .max = 65536,
        .def = "1", .metavar = "MIN[:MAX]", .example = "2:4", .group = "job",
        .help = "number of nodes: N for a fixed size (fault tolerance only), MIN:MAX to "
                "train on any count in between. Not --nproc_per_node, which counts "
                "processes on one node.",
        .offset = OFF(np), .sep = ':', .part = {"MIN", "MAX"}},
    /* Paddle's: -1 (its default) stops at the first failure; ecoord's
     * restart-and-replace machinery is its fault tolerance, on when the
     * user asks for it (resolve_failure_policy()). */
    [EC_K_ELASTIC_LEVEL] = {
        .id = EC_K_ELASTIC_LEVEL, .name = "elastic_level",
        .spellings = {"elastic_level"},
        .env = {"ECOORD_ELASTIC_LEVEL", "PADDLE_ELASTIC_LEVEL"},
        .type = EC_KT_INT, .cmds = L, .min = -1, .max = 1,
        .def = "-1", .def_help = "-1, as in Paddle, unless --max_restart, --np=MIN:MAX "
                                 "(MIN < MAX), --fixed_failure_exit or --node_failure_exit "
                                 "is given, which mean 1",
        .metavar = "-1|0|1", .example = "1", .group = "job",
        .help = "what a failed training process does, as Paddle's launcher: -1 fault "
                "tolerance off: the first failure stops this node's processes, fails the "
                "job (every node stops) and the agent exits with the process's exit code "
                "(128+signal if it was killed); 0: the failed node leaves at once (exit "
                "--fixed_failure_exit, --node_failure_exit in an elastic job) and the others "
                "wait for a replacement or go on within --nnodes=MIN:MAX; 1: its processes "
                "are restarted in a new epoch, up to --max_restart times, then as 0.",
        .offset = OFF(elastic_level)},
    [EC_K_MAX_RESTART] = {
        .id = EC_K_MAX_RESTART, .name = "max_restart",
        .spellings = {"max_restart"}, .env = {"ECOORD_MAX_RESTART", "PADDLE_MAX_RESTART"},
        .type = EC_KT_INT, .cmds = L, .min = 0, .max = 100000,
        .def = "3", .def_help = "3 with fault tolerance (--elastic_level=1), 0 without (-1, "
                                "Paddle's default) and with --elastic_level=0; 0 under "
                                "ecoord torchrun, as torchrun's --max_restarts",
        .metavar = "N", .example = "3", .group = "job",
        .help = "restarts of this node's processes after failures before the node gives up "
                "and leaves the job. Giving it turns fault tolerance on (--elastic_level=1).",
        .offset = OFF(max_restart)},
    [EC_K_FIXED_FAILURE_EXIT] = {
        .id = EC_K_FIXED_FAILURE_EXIT, .name = "fixed_failure_exit",
        .spellings = {"fixed_failure_exit"}, .env = {"ECOORD_FIXED_FAILURE_EXIT"},
        .type = EC_KT_INT, .cmds = L, .min = 1, .max = 255,
        .def = "101", .def_help = "101, Paddle's (1 under ecoord torchrun, torchrun's)",
        .metavar = "CODE", .example = "1", .group = "job",
        .help = "with fault tolerance on: exit code of a node that leaves a fixed-size job "
                "(MIN = MAX) after --max_restart: 101 tells a scheduler to restart the pod; "
                "an elastic job's node exits --node_failure_exit. Giving it turns fault "
                "tolerance on.",
        .offset = OFF(fixed_failure_exit)},
    [EC_K_NODE_FAILURE_EXIT] = {
        .id = EC_K_NODE_FAILURE_EXIT, .name = "node_failure_exit",
        .spellings = {"node_failure_exit"}, .env = {"ECOORD_NODE_FAILURE_EXIT"},
        .type = EC_KT_INT, .cmds = L, .min = 1, .max = 255,
        .def = "1", .metavar = "CODE", .example = "101", .group = "job",
        .help = "with fault tolerance on: exit code of a node that leaves an elastic job "
                "after --max_restart while the job goes on without it: 1 (Paddle's) reads as "
                "a failure; under a scheduler that fails the whole job on 1 (a Kubernetes "
                "Job's podFailurePolicy), 101 asks for a new pod instead. Giving it turns "
                "fault tolerance on.",
        .offset = OFF(node_failure_exit)},
    [EC_K_ELASTIC_TIMEOUT] = {
        .id = EC_K_ELASTIC_TIMEOUT, .name = "elastic_timeout",
        .spellings = {"elastic_timeout"},
        .env = {"ECOORD_ELASTIC_TIMEOUT", "PADDLE_ELASTIC_TIMEOUT"},
        .type = EC_KT_SECONDS, .cmds = L | C, .min = 0, .max = 86400000,
        .def = "30", .metavar = "SECONDS", .example = "30", .group = "job",
        .help = "how long the node count must stay stable before training starts below "
                "MAX; reaching MAX starts at once.",
        .offset = OFF(elastic_timeout_ms)},
    [EC_K_EPOCH_CHUNK_MEMBERS] = {
        .id = EC_K_EPOCH_CHUNK_MEMBERS, .name = "epoch_chunk_members",
        .spellings = {"epoch_chunk_members"}, .env = {"ECOORD_EPOCH_CHUNK_MEMBERS"},
        .type = EC_KT_INT, .cmds = L, .min = 1, .max = 65536,
        .def = "256", .metavar = "N", .example = "256", .group = "job",
        .help = "an epoch of more than N nodes is published in chunks of N members plus an "
                "index (no etcd request carries the whole member table, and a node reads "
                "only its own chunk); the leader's value is used.",
        .offset = OFF(epoch_chunk_members)},
    [EC_K_JOIN_TIMEOUT] = {
        .id = EC_K_JOIN_TIMEOUT, .name = "join_timeout",
        .spellings = {"join_timeout"}, .env = {"ECOORD_JOIN_TIMEOUT"},
        .type = EC_KT_SECONDS, .cmds = L, .min = 0, .max = 86400000,
        .def = "0", .def_help = "0: as long as it takes (600 under ecoord torchrun, torchrun's)",
        .metavar = "SECONDS", .example = "600", .group = "job",
        .help = "give up (exit 1) when the job has not formed, no epoch with at least MIN "
                "nodes, this long after start; torchrun's join_timeout.",
        .offset = OFF(join_timeout_ms)},
    [EC_K_REPLACE_WAIT] = {
        .id = EC_K_REPLACE_WAIT, .name = "replace_wait",
        .spellings = {"replace_wait"}, .env = {"ECOORD_REPLACE_WAIT"},
        .type = EC_KT_SECONDS, .cmds = L, .min = 0, .max = 86400000,
        .def = "0", .metavar = "SECONDS", .example = "60", .group = "job",
        .help = "after a node is lost, how long to wait for a replacement before going "
                "on without it (0: at once).",
        .offset = OFF(replace_wait_ms)},
    [EC_K_JOIN_READY_TIMEOUT] = {
        .id = EC_K_JOIN_READY_TIMEOUT, .name = "join_ready_timeout",
        .spellings = {"join_ready_timeout"}, .env = {"ECOORD_JOIN_READY_TIMEOUT"},
        .type = EC_KT_SECONDS, .cmds = L, .min = 0, .max = 86400000,
        .def = "300", .metavar = "SECONDS", .example = "600", .group = "job",
        .help = "in place (--rebuild=inprocess): a node's processes start before it is "
                "admitted and it is admitted only once every one of them is ready (ecw_init, "
                "ecoord.torch's init), so the job never waits for their boot; a process not "
                "ready this long after its start is a failure (restarted within "
                "--max_restart) and is not admitted.  0: no boot gate (processes start "
                "when their node is admitted, as before).",
        .offset = OFF(join_ready_timeout_ms)},
    [EC_K_REBUILD] = {
        .id = EC_K_REBUILD, .name = "rebuild",
        .spellings = {"rebuild"}, .env = {EC_ENV_REBUILD},
        .type = EC_KT_ENUM, .cmds = L | C, .choices = rebuilds,
        .def = "restart", .metavar = "restart|inprocess", .example = "inprocess",
        .group = "job",
        .help = "how training follows a membership change: restart stops and restarts "
                "the processes with the new environment; inprocess lets the worker "
                "library rebuild its communicator in place.",
        .offset = OFF(rebuild)},

    /* ---- this node ----------------------------------------------------- */
    [EC_K_NODE_ID] = {
        .id = EC_K_NODE_ID, .name = "node_id",
        .spellings = {"node_id"}, .env = {EC_ENV_NODE_ID, EC_ENV_POD_NAME},
        .type = EC_KT_STRING, .cmds = L | C, .flags = EC_KF_EMPTY_OK,
        .max = NODE_ID_MAX, .def = "", .def_help = "POD_NAME, else the host name",
        .metavar = "NAME", .example = "node-3", .group = "this node",
        .help = "this node's name in the job, unique within it. Letters, digits, '.', "
                "'_' and '-'.",
        .offset = OFF(node_id), .check = check_node_id},
    [EC_K_HOST] = {
        .id = EC_K_HOST, .name = "host",
        .spellings = {"host"}, .env = {"ECOORD_HOST", "POD_IP"},
        .type = EC_KT_STRING, .cmds = L | C, .flags = EC_KF_EMPTY_OK,
        .max = 255, .def = "", .def_help = "POD_IP, else detected",
        .metavar = "ADDR", .example = "10.0.0.7", .group = "this node",
        .help = "address the other nodes reach this node's processes at; set it when "
                "the machine has several interfaces (docker0, lo, ...).",
        .offset = OFF(host), .check = check_host},
    [EC_K_GPUS] = {
        .id = EC_K_GPUS, .name = "gpus",
        .spellings = {"gpus", "devices"}, .env = {"ECOORD_GPUS", "PADDLE_DEVICES"},
        .type = EC_KT_INTLIST, .cmds = L | C, .flags = EC_KF_EMPTY_OK,
        .min = 0, .max = 4095, .def = "", .def_help = "none given",
        .metavar = "ID[,ID...]", .example = "0,1,2,3", .group = "this node",
        .help = "GPUs for this node's processes, one each, as CUDA_VISIBLE_DEVICES lists "
                "them (CUDA ordinals when it is unset), as Paddle's --devices; the processes "
                "see only these (CUDA_VISIBLE_DEVICES narrowed to them) and local rank i "
                "gets the i-th, FLAGS_selected_gpus=i.",
        .offset = OFF(gpus)},
    [EC_K_NPROC_PER_NODE] = {
        .id = EC_K_NPROC_PER_NODE, .name = "nproc_per_node",
        .spellings = {"nproc_per_node"},
        .env = {"ECOORD_NPROC_PER_NODE", "PADDLE_NPROC_PER_NODE"},
        .type = EC_KT_INT, .cmds = L | C, .min = 1, .max = 1024,
        .def = "1", .def_help = "the number of --gpus, else the GPUs CUDA_VISIBLE_DEVICES shows, else "
                    "the /dev/nvidiaN count, else 1",
        .metavar = "N", .example = "8", .group = "this node",
        .help = "processes (ranks) per node; every node runs the same number. Not "
                "--np, which counts nodes.",
        .offset = OFF(nproc_per_node)},
    [EC_K_START_PORT] = {
        .id = EC_K_START_PORT, .name = "start_port",
        .spellings = {"start_port"}, .env = {"ECOORD_START_PORT", "PADDLE_START_PORT"},
        .type = EC_KT_INT, .cmds = L | C, .min = 1, .max = 65535,
        .def = "6070", .def_help = "6070, as Paddle's launcher",
        .metavar = "PORT", .example = "6070", .group = "this node",
        .help = "first port this node's processes listen on, counting up past ports in use "
                "(a line names them). Keep it below the kernel's ephemeral range "
                "(/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default), where an "
                "outgoing connection can take a port first: a warning names ports taken "
                "there. Where only some ports are open, use --port_range instead.",
        .offset = OFF(start_port)},
    [EC_K_PORT_RANGE] = {
        .id = EC_K_PORT_RANGE, .name = "port_range",
        .spellings = {"port_range"}, .env = {"ECOORD_PORT_RANGE"},
        .type = EC_KT_RANGE, .cmds = L | C, .flags = EC_KF_EMPTY_OK,
        .min = 1, .max = 65535, .def = "", .def_help = "none: --start_port upward",
        .metavar = "LO-HI", .example = "36000-36100", .group = "this node",
        .help = "the only ports this node may open, both ends included; for sites "
                "whose firewall opens a fixed range. Excludes --start_port.",
        .offset = OFF(port_range), .sep = '-', .part = {"LO", "HI"}},
    [EC_K_LEASE_TTL] = {
        .id = EC_K_LEASE_TTL, .name = "lease_ttl",
        .spellings = {"lease_ttl"}, .env = {"ECOORD_LEASE_TTL"},
        .type = EC_KT_SECONDS, .cmds = L | C, .flags = EC_KF_WHOLE,
        .min = 2000, .max = 3600000, .def = "10",
        .metavar = "SECONDS", .example = "10", .group = "this node",
        .help = "etcd lease on this node's keys, whole seconds, at least 2: a node that "
                "stops renewing it for this long is gone.",
        .offset = OFF(lease_ttl_ms)},
    /* A share of the TTL, not seconds: what it guards against (clock-rate
     * difference between this host and etcd's, scheduling delay of the
     * agent's loop) grows with the span measured, and a fraction stays valid
     * whatever --lease_ttl is; at most half, so that the fence stays well
     * clear of the keepalive's own refresh period (TTL/3). */
    [EC_K_LEASE_MARGIN] = {
        .id = EC_K_LEASE_MARGIN, .name = "lease_margin",
        .spellings = {"lease_margin"}, .env = {"ECOORD_LEASE_MARGIN"},
        .type = EC_KT_INT, .cmds = L, .min = 5, .max = 50,
        .def = "20", .metavar = "PERCENT", .example = "20", .group = "this node",
        .help = "percent of --lease_ttl: a node whose lease has not been confirmed for "
                "the TTL minus this margin stops its processes (in place: the worker "
                "library refuses collectives) before etcd can expire the lease and the "
                "others re-form without it. 20 with a 10 s TTL: 2 s early.",
        .offset = OFF(lease_margin_pct)},
    [EC_K_GRACE_PERIOD] = {
        .id = EC_K_GRACE_PERIOD, .name = "grace_period",
        .spellings = {"grace_period"}, .env = {"ECOORD_GRACE_PERIOD"},
        .type = EC_KT_SECONDS, .cmds = L | C, .min = 0, .max = 3600000,
        .def = "5", .metavar = "SECONDS", .example = "5", .group = "this node",
        .help = "when stopping processes, time between SIGTERM and SIGKILL.",
        .offset = OFF(grace_period_ms)},
    /* Each agent probes its 2 successors in the job's sorted node order
     * (node_ring.c): a ring, so the traffic per node does not grow with the
     * job.  A peer is reported once its probes failed twice in a row (a
     * miss is retried at once with more attempts) and it was silent for
     * --peer_pause_tolerance (coord/core/detector.h), and the leader
     * probes it once more before evicting it. */
    [EC_K_PEER_PROBE_INTERVAL] = {
        .id = EC_K_PEER_PROBE_INTERVAL, .name = "peer_probe_interval",
        .spellings = {"peer_probe_interval"}, .env = {"ECOORD_PEER_PROBE_INTERVAL"},
        .type = EC_KT_SECONDS, .cmds = L, .min = 0, .max = 60000,
        .def = "0.25", .metavar = "SECONDS", .example = "0.25", .group = "this node",
        .help = "how often this node's agent probes the agents of the next two nodes in "
                "the job; a node that stops answering is reported silent, and it is "
                "evicted (and the job re-forms) in about a second, long before its "
                "--lease_ttl ends (see --peer_pause_tolerance). 0: off, a lost node is "
                "found by its peers' failing processes or its lease.",
        .offset = OFF(peer_probe_interval_ms)},
    /* The one bound of the failure detector a user may need to move: how
     * long an agent may be silent (a GC pause, swapping, a debugger) before
     * it is taken for dead; loss and slow links need no knob (retries and
     * deadlines that follow each peer's round trips). */
    [EC_K_PEER_PAUSE_TOLERANCE] = {
        .id = EC_K_PEER_PAUSE_TOLERANCE, .name = "peer_pause_tolerance",
        .spellings = {"peer_pause_tolerance"}, .env = {"ECOORD_PEER_PAUSE_TOLERANCE"},
        .type = EC_KT_SECONDS, .cmds = L, .min = 100, .max = 600000,
        .def = "0.7", .metavar = "SECONDS", .example = "3", .group = "this node",
        .help = "how long a watched node's agent may go without answering a probe (paused "
                "by garbage collection, swapping or a debugger) before its watchers report "
                "it; an agent silent for less is never evicted. An agent that is gone (its "
                "port refuses) is reported at once. Raising it delays finding a node whose "
                "agent hangs or whose host vanished by as much.",
        .offset = OFF(peer_pause_tolerance_ms)},
    /* Hangs and stragglers (coord/core/hang_policy.h): the leader's values
     * decide.  Not a SECONDS knob: "auto" (the default) is on only for
     * programs that report progress, whose steps are known. */
    [EC_K_HANG_TIMEOUT] = {
        .id = EC_K_HANG_TIMEOUT, .name = "hang_timeout",
        .spellings = {"hang_timeout"}, .env = {"ECOORD_HANG_TIMEOUT"},
        .type = EC_KT_STRING, .cmds = L, .max = 32,
        .def = "auto", .def_help = "auto: 300 s for programs that report progress "
                                   "(ecw_progress_step, ecoord.progress), off for others",
        .metavar = "SECONDS|auto|off", .example = "600", .group = "hangs and stragglers",
        .help = "when the job's ranks make no progress for this long (no step reported, or "
                "for programs that report none, no log output), the leader names the node "
                "whose ranks stopped while the others wait on it and records why; that node's "
                "agent restarts its processes and the job re-forms (evicted instead if its "
                "agent does not react). Declare checkpoints with ecw_progress_pause/resume. A "
                "number turns it on for every program; off (or 0) turns it off.",
        .offset = OFF(hang_timeout), .check = check_hang_timeout},
    [EC_K_STRAGGLER_FACTOR] = {
        .id = EC_K_STRAGGLER_FACTOR, .name = "straggler_factor",
        .spellings = {"straggler_factor"}, .env = {"ECOORD_STRAGGLER_FACTOR"},
        .type = EC_KT_STRING, .cmds = L, .max = 32,
        .def = "off", .def_help = "off: stragglers are only reported (ecoord status, metrics)",
        .metavar = "FACTOR|off", .example = "2", .group = "hangs and stragglers",
        .help = "a node whose median step time over a sliding window is more than FACTOR "
                "times the job's median (3 nodes or more reporting steps) is treated as a "
                "suspect and evicted, at most once every 10 minutes. A number above 1.",
        .offset = OFF(straggler_factor), .check = check_straggler},

    /* ---- program ------------------------------------------------------- */
    /* Paddle's launcher and torchrun run the script with their own
     * interpreter (sys.executable -u), which imports paddle or torch; ecoord
     * is not Python, so it looks for one (coord/agent/program.h): the first
     * python3 on PATH that imports what the program needs, unless told. */
    [EC_K_PYTHON] = {
        .id = EC_K_PYTHON, .name = "python",
        .spellings = {"python"}, .env = {"ECOORD_PYTHON"},
        .type = EC_KT_STRING, .cmds = L, .max = PATH_MAX,
        .def = "python3",
        .def_help = "the first python3 on PATH that imports torch (ecoord torchrun) or paddle "
                    "(a PROGRAM that imports paddle); for any other PROGRAM the first python3 "
                    "on PATH",
        .metavar = "PATH", .example = "/usr/bin/python3", .group = "program",
        .help = "the interpreter that runs a PROGRAM ending in .py (or a --module), as "
                "INTERPRETER -u PROGRAM ARGS..., the way Paddle's launcher and torchrun run "
                "it; a name is looked up in PATH. It must import what the program needs "
                "(checked before the node joins: exit 1 if not).",
        .offset = OFF(python)},
    [EC_K_NO_PYTHON] = {
        .id = EC_K_NO_PYTHON, .name = "no_python",
        .spellings = {"no_python"}, .env = {"ECOORD_NO_PYTHON"},
        .type = EC_KT_BOOL, .cmds = L, .def = "false", .example = "true",
        .group = "program",
        .help = "run PROGRAM as given even when it ends in .py (it then needs its execute "
                "bit and a #! line).",
        .offset = OFF(no_python)},
    [EC_K_MODULE] = {
        .id = EC_K_MODULE, .name = "module",
        .spellings = {"module"}, .env = {"ECOORD_MODULE"},
        .type = EC_KT_BOOL, .cmds = L, .def = "false", .example = "true",
        .group = "program",
        .help = "PROGRAM names a Python module: run INTERPRETER -u -m PROGRAM ARGS... "
                "(torchrun's -m).",
        .offset = OFF(module)},

    /* ---- output -------------------------------------------------------- */
    [EC_K_LOG_DIR] = {
        .id = EC_K_LOG_DIR, .name = "log_dir",
        .spellings = {"log_dir"}, .env = {"ECOORD_LOG_DIR", "PADDLE_LOG_DIR"},
        .type = EC_KT_STRING, .cmds = L | C, .max = PATH_MAX,
        .def = "log", .metavar = "DIR", .example = "log", .group = "output",
        .help = "directory for workerlog.N (one per local process: its stdout and stderr; "
                "local rank 0's is also on the console, as Paddle's launcher shows it) and "
                "endpoints.log. Under ecoord torchrun, torchrun's --log_dir (ecoord torchrun "
                "--help).",
        .offset = OFF(log_dir)},
    [EC_K_LOG_LEVEL] = {
        .id = EC_K_LOG_LEVEL, .name = "log_level",
        .spellings = {"log_level"}, .env = {"ECOORD_LOG_LEVEL"},
        .type = EC_KT_ENUM, .cmds = L | S | C, .choices = log_levels,
        .def = "info", .metavar = "debug|info|warn|error", .example = "debug",
        .group = "output",
        .help = "least severe message ecoord prints (case does not matter).",
        .offset = OFF(log_level)},
    [EC_K_METRICS_PORT] = {
        .id = EC_K_METRICS_PORT, .name = "metrics_port",
        .spellings = {"metrics_port"}, .env = {"ECOORD_METRICS_PORT"},
        .type = EC_KT_INT, .cmds = L, .min = 0, .max = 65535,
        .def = "0", .def_help = "0: off", .metavar = "PORT", .example = "9400",
        .group = "output",
        .help = "serve Prometheus metrics on this port; 0 turns them off.",
        .offset = OFF(metrics_port)},
    [EC_K_JSON] = {
        .id = EC_K_JSON, .name = "json",
        .spellings = {"json"}, .env = {"ECOORD_JSON"},
        .type = EC_KT_BOOL, .cmds = S | C, .def = "false", .example = "true",
        .group = "output",
        .help = "print machine-readable JSON instead of text.",
        .offset = OFF(json)},
    [EC_K_WATCH] = {
        .id = EC_K_WATCH, .name = "watch",
        .spellings = {"watch"}, .env = {"ECOORD_WATCH"},
        .type = EC_KT_BOOL, .cmds = S, .def = "false", .example = "true",
        .group = "output",
        .help = "keep printing as the job changes, until interrupted.",
        .offset = OFF(watch)},
};
/* clang-format on */

static const char *const groups[] = {"etcd",    "job",    "this node", "hangs and stragglers",
                                     "program", "output", NULL};

/* Spellings users bring from other launchers that ecoord deliberately lacks:
 * a pointed answer beats "unknown flag". */
static const struct {
    const char *name, *why;
} unsupported[] = {
    {"etcd_password", PASSWORD_WHY},
    {"password", PASSWORD_WHY},
    {"ips", "ecoord finds the nodes through etcd: drop --ips and start every node with "
            "the same --elastic_server and --job_id"},
    {"rank", "the leader assigns node ranks: drop --rank"},
};

static const struct {
    ec_cmd_t cmd;
    const char *name, *usage, *summary;
} commands[] = {
    {EC_CMD_LAUNCH, "launch", "ecoord launch [FLAGS] [--] PROGRAM [ARGS...]",
     "Join (or start) an elastic job and run PROGRAM's processes on this node, "
     "restarting or rebuilding them as nodes come and go."},
    {EC_CMD_STATUS, "status", "ecoord status [FLAGS]",
     "Show a job's nodes, its current epoch and its recent failures."},
    {EC_CMD_CHECK, "check", "ecoord check [FLAGS]",
     "Run the checks that catch the usual failures (devices, ports, etcd, a collective "
     "across all nodes) before training."},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* ------------------------------------------------------------------------ */
/* small helpers                                                            */

#define FIELD(cfg, k, T) ((T *)((char *)(cfg) + (k)->offset))

/* ENUM knobs are stored through an int *. */
_Static_assert(sizeof(ec_rebuild_t) == sizeof(int), "ec_rebuild_t is not int-sized");
_Static_assert(sizeof(ec_log_level_t) == sizeof(int), "ec_log_level_t is not int-sized");

/* The environment ecoord reads besides its knobs' aliases (above), with
 * why: with the aliases, every variable any part of ecoord reads.  (The
 * agent also hands the training processes its whole environment, and
 * `ecoord check` publishes an allowlist of it: coord/check/command.h.) */
static const struct {
    const char *name, *why;
} env_other[] = {
    {"PATH", "where the training program and the etcd binary are looked for"},
    {"ETCD", "the etcd binary the embedded etcd runs (default: etcd on PATH)"},
    {"TMPDIR", "where the embedded etcd keeps its data (default /tmp)"},
    {"XDG_RUNTIME_DIR", "where the etcd password file of the training processes goes (else "
                        "TMPDIR)"},
    {"CUDA_VISIBLE_DEVICES", "the GPUs this node may use; --gpus indexes into it"},
    {"ECOORD_DEV_DIR", "where /dev/nvidiaN are counted (default /dev; for tests)"},
    {"NCCL_HOSTID", "`ecoord check`: NCCL's identity of this machine"},
    {"ECOORD_CHECK_ALLREDUCE", "`ecoord check`: the collective program to run"},
    /* never used for etcd (gRPC would: coord/etcd/etcd.h), nor passed to the
     * training processes (coord/agent/env.c); named when etcd is unavailable */
    {"grpc_proxy", "never used (nor the ones below): named when etcd is unavailable; "
                   "--etcd_proxy chooses a proxy for etcd"},
    {"https_proxy", "see grpc_proxy"},
    {"http_proxy", "see grpc_proxy"},
    {"HTTPS_PROXY", "see grpc_proxy"},
    {"HTTP_PROXY", "see grpc_proxy"},
    {"all_proxy", "see grpc_proxy"},
    {"ALL_PROXY", "see grpc_proxy"},
    {"PET_*", "`ecoord torchrun`: PET_<FLAG> (PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR, "
              "PET_RDZV_ENDPOINT, ...) for each torchrun flag not on its command line, as "
              "torchrun reads them (Kubeflow's PyTorchJob sets them)"},
};

/* What `ecoord launch` exits with, for --help (coord/agent/launch.c decides). */
static const struct {
    const char *code, *why;
} exit_codes[] = {
    {"0", "the job completed: every process of every node exited 0."},
    {"CODE", "fault tolerance off (--elastic_level=-1, the default without --max_restart or "
             "an --np range): a training process failed and this is its exit code, or "
             "128+N when signal N killed it; the job is failed and the other nodes exit 1."},
    {"1", "this node cannot or must not go on: a configuration error found before the job "
          "(no program, no etcd, a wrong interpreter), the job did not form within "
          "--join_timeout, the job failed (another node's failure with fault tolerance off), "
          "or an elastic job's node gave up after --max_restart (--node_failure_exit); under "
          "ecoord torchrun every failure, as torchrun's."},
    {"2", "usage: an unknown flag or a bad value; nothing was started."},
    {"101", "fault tolerance on: this node's processes failed past --max_restart in a "
            "fixed-size job and the node left it: replace this node (a new pod), the others "
            "wait for it (--fixed_failure_exit)."},
    {"128+N", "the agent was stopped by signal N: 143 (SIGTERM) and 130 (SIGINT) after a "
              "graceful leave."},
};

static int env_listed(const char *name)
{
    for (int i = 0; i < EC_K__COUNT; i++)
        for (int a = 0; a < 3 && knobs[i].env[a]; a++)
            if (!strcmp(knobs[i].env[a], name))
                return 1;
    for (size_t i = 0; i < sizeof(env_other) / sizeof(env_other[0]); i++) {
        const char *o = env_other[i].name;
        size_t n = strlen(o);
        if (n && o[n - 1] == '*' ? !strncmp(o, name, n - 1) : !strcmp(o, name))
            return 1;
    }
    return 0;
}

/* The one getenv of ecoord: only the names of this table. */
const char *ec_config_environ(const char *name, void *arg)
{
    (void)arg;
    if (!name || !env_listed(name)) {
        ec_log(EC_LOG_ERROR, "internal: environment variable %s read outside the knob table; "
               "add it to coord/cli/knobs.c", name ? name : "(null)");
        return NULL;
    }
    return getenv(name);
}

const ec_knob_t *ec_config_knob(int id)
{
    if (id < 0 || id >= EC_K__COUNT)
        return NULL;
    return &knobs[id];
}

ec_cmd_t ec_config_cmd(const char *subcommand)
{
    for (size_t i = 0; subcommand && i < NCOMMANDS; i++)
        if (strcmp(subcommand, commands[i].name) == 0)
            return commands[i].cmd;
    return 0;
}

const char *ec_config_cmd_name(ec_cmd_t cmd)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (cmd == commands[i].cmd)
            return commands[i].name;
    return "?";
}

static void warnf(ec_config_t *cfg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnf(ec_config_t *cfg, const char *fmt, ...)
{
    if (cfg->nwarnings >= EC_CONFIG_MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cfg->warnings[cfg->nwarnings++], sizeof(cfg->warnings[0]), fmt, ap);
    va_end(ap);
}

static void free_strlist(ec_strlist_t *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->n = 0;
    l->v = NULL;
}

static void free_secret(char **p)
{
    if (*p) {
        explicit_bzero(*p, strlen(*p));
        free(*p);
        *p = NULL;
    }
}

/* Release one knob's storage (strings and lists). */
static void free_field(ec_config_t *cfg, const ec_knob_t *k)
{
    switch (k->type) {
    case EC_KT_STRING:
        free(*FIELD(cfg, k, char *));
        *FIELD(cfg, k, char *) = NULL;
        break;
    case EC_KT_SECRET:
        free_secret(FIELD(cfg, k, char *));
        break;
    case EC_KT_STRLIST:
        free_strlist(FIELD(cfg, k, ec_strlist_t));
        break;
    case EC_KT_INTLIST:
        free(FIELD(cfg, k, ec_intlist_t)->v);
        FIELD(cfg, k, ec_intlist_t)->v = NULL;
        FIELD(cfg, k, ec_intlist_t)->n = 0;
        break;
    default:
        break;
    }
}

void ec_config_release(ec_config_t *cfg)
{
    if (!cfg)
        return;
    int saved = errno;
    for (int i = 0; i < EC_K__COUNT; i++)
        free_field(cfg, &knobs[i]);
    size_t size = cfg->size;
    const char *hostname = cfg->hostname;
    memset(cfg, 0, sizeof(*cfg));
    cfg->size = size;
    cfg->hostname = hostname;
    cfg->prog_index = -1;
    errno = saved;
}

/* Strict decimal integer: optional '-', digits, nothing else. */
static int parse_ll(const char *s, long long *out)
{
    const char *p = s;
    if (*p == '-')
        p++;
    if (!isdigit((unsigned char)*p))
        return -1;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q))
            return -1;
    errno = 0;
    char *end;
    long long x = strtoll(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = x;
    return 0;
}

/* Seconds as typed ("30", "0.5", at most 3 decimals) to milliseconds. */
static int parse_seconds(const char *s, long long *ms)
{
    long long whole = 0, frac = 0;
    int nint = 0, nfrac = 0;
    const char *p = s;
    for (; isdigit((unsigned char)*p); p++, nint++) {
        if (nint >= 12)
            return -1;
        whole = whole * 10 + (*p - '0');
    }
    if (nint == 0)
        return -1;
    if (*p == '.') {
        for (p++; isdigit((unsigned char)*p); p++, nfrac++) {
            if (nfrac >= 3)
                return -1;
            frac = frac * 10 + (*p - '0');
        }
        if (nfrac == 0)
            return -1;
    }
    if (*p)
        return -1;
    for (; nfrac < 3; nfrac++)
        frac *= 10;
    *ms = whole * 1000 + frac;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(s, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

/* Next comma-separated item of *p, spaces around it trimmed, into buf.
 * Returns 0 with *p advanced, -1 at the end, -2 when the item is too long. */
static int next_item(const char **p, char *buf, size_t len)
{
    if (!*p)
        return -1;
    const char *s = *p, *comma = strchr(s, ',');
    const char *e = comma ? comma : s + strlen(s);
    *p = comma ? comma + 1 : NULL;
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if ((size_t)(e - s) >= len)
        return -2;
    memcpy(buf, s, (size_t)(e - s));
    buf[e - s] = '\0';
    return 0;
}

/* What a seconds value looks like to a person: 30, 0.5, 1.25. */
static void fmt_seconds(long long ms, char *buf, size_t len)
{
    if (ms % 1000 == 0)
        snprintf(buf, len, "%lld", ms / 1000);
    else {
        char tmp[32];
        snprintf(tmp, sizeof(tmp), "%lld.%03lld", ms / 1000, ms % 1000);
        size_t n = strlen(tmp);
        while (tmp[n - 1] == '0')
            tmp[--n] = '\0';
        snprintf(buf, len, "%s", tmp);
    }
}

static const char *example_of(const ec_knob_t *k)
{
    return k->example ? k->example : k->def;
}

/* ------------------------------------------------------------------------ */
/* value checks of single knobs                                             */

static int name_chars(const char *v, const char *what, size_t max, const char *where,
                      const char *fix, const char *example, ec_error_t *err)
{
    size_t n = strlen(v);
    const char *rule = "letters, digits, '.', '_' and '-'";
    if (n == 0)
        return ec_errorf(err, EC_EINVAL, "%s: a %s cannot be empty; use %s, e.g. %s%s", where,
                         what, rule, fix, example);
    if (n > max)
        return ec_errorf(err, EC_EINVAL,
                         "%s: a %s has at most %zu characters (this one has %zu); shorten it, "
                         "e.g. %s%s",
                         where, what, max, n, fix, example);
    if (strcmp(v, ".") == 0 || strcmp(v, "..") == 0)
        return ec_errorf(err, EC_EINVAL, "%s: '%s' is not a usable %s; pick a name, e.g. %s%s",
                         where, v, what, fix, example);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (isalnum(*p) && *p < 0x80)
            continue;
        if (*p == '.' || *p == '_' || *p == '-')
            continue;
        if (*p >= 0x80)
            return ec_errorf(err, EC_EINVAL,
                             "%s: a %s must be plain ASCII (%s); found a non-ASCII "
                             "character at byte %td; e.g. %s%s",
                             where, what, rule, (const char *)p - v, fix, example);
        if (isgraph(*p))
            return ec_errorf(err, EC_EINVAL,
                             "%s: '%c' is not allowed in a %s, which may use only %s "
                             "(it becomes part of etcd keys); e.g. %s%s",
                             where, *p, what, rule, fix, example);
        return ec_errorf(err, EC_EINVAL,
                         "%s: a %s may use only %s; found a space or control character at "
                         "byte %td; e.g. %s%s",
                         where, what, rule, (const char *)p - v, fix, example);
    }
    return 0;
}

static int check_job_id(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    return name_chars(v, "job id", JOB_ID_MAX, where, fix, "job1", err);
}

static int check_node_id(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    if (!*v) /* empty: resolved later from POD_NAME or the host name */
        return 0;
    return name_chars(v, "node id", NODE_ID_MAX, where, fix, "node-3", err);
}

static int no_space(const char *v, const char *where, const char *what, ec_error_t *err)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (!isgraph(*p))
            return ec_errorf(err, EC_EINVAL,
                             "%s: %s contains a space or a non-printable character; remove it",
                             where, what);
    return 0;
}

static int check_endpoint(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    (void)fix;
    return no_space(v, where, "an endpoint", err);
}

static int check_host(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    if (no_space(v, where, "the address", err))
        return err ? err->code : EC_EINVAL;
    if (strpbrk(v, ",/"))
        return ec_errorf(err, EC_EINVAL,
                         "%s: give one address or host name, without ',' or '/', e.g. "
                         "%s10.0.0.7",
                         where, fix);
    return 0;
}

/* What gRPC takes as a channel's proxy: http://HOST:PORT (it speaks plain
 * HTTP CONNECT to the proxy; another scheme is ignored with a log line). */
static int check_proxy(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    if (!*v)
        return 0;
    if (no_space(v, where, "the proxy", err))
        return err ? err->code : EC_EINVAL;
    const char *hp = !strncmp(v, "http://", 7) ? v + 7 : NULL;
    const char *colon = hp ? strrchr(hp, ':') : NULL;
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!hp || !colon || colon == hp || strpbrk(hp, "/@") || !end || *end || port < 1 ||
        port > 65535)
        return ec_errorf(err, EC_EINVAL,
                         "%s: write the proxy as http://HOST:PORT (gRPC reaches etcd through "
                         "an HTTP CONNECT proxy, and only one named so), e.g. "
                         "%shttp://proxy.example:3128",
                         where, fix);
    return 0;
}

static int check_role(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    (void)fix;
    return no_space(v, where, "the role", err);
}

/* --hang_timeout: "auto", "off", or seconds (at most 3 decimals, 0.1 to
 * 86400); *ms gets -1, 0 or the milliseconds. */
static int hang_timeout_ms(const char *v, long long *ms)
{
    if (!strcasecmp(v, "auto")) {
        *ms = -1;
        return 0;
    }
    if (!strcasecmp(v, "off") || !strcmp(v, "0")) {
        *ms = 0;
        return 0;
    }
    return parse_seconds(v, ms) || *ms < 100 || *ms > 86400000 ? -1 : 0;
}

static int check_hang_timeout(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    long long ms;
    if (hang_timeout_ms(v, &ms) == 0)
        return 0;
    return ec_errorf(err, EC_EINVAL, "%s: not auto, off or a number of seconds from 0.1 to "
                     "86400; e.g. %s600 (10 minutes: above your longest step and collective)",
                     where, fix);
}

static int straggler_factor(const char *v, double *x)
{
    if (!strcasecmp(v, "off") || !strcmp(v, "0")) {
        *x = 0;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d > 1.0) || d > 1000.0)
        return -1;
    *x = d;
    return 0;
}

static int check_straggler(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    double x;
    if (straggler_factor(v, &x) == 0)
        return 0;
    return ec_errorf(err, EC_EINVAL, "%s: not off or a number above 1 (how many times slower "
                     "than the median a node may be); e.g. %s2", where, fix);
}

static int check_run_mode(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    if (strcasecmp(v, "collective") == 0)
        return 0;
    return ec_errorf(err, EC_EINVAL,
                     "%s: ecoord runs collective jobs only (every process a trainer, no "
                     "parameter servers); run a parameter-server job with Paddle's own launcher, "
                     "or write %scollective",
                     where, fix);
}

static int check_prefix(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    if (!*v)
        return 0;
    if (no_space(v, where, "the prefix", err))
        return err ? err->code : EC_EINVAL;
    size_t n = strlen(v);
    if (v[0] != '/' || (n > 1 && v[n - 1] == '/') || n == 1 || strstr(v, "//"))
        return ec_errorf(err, EC_EINVAL,
                         "%s: a key prefix starts with '/', does not end with '/' and has no "
                         "empty parts, e.g. %s/ecoord",
                         where, fix);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* setting one knob from text                                               */

static int set_range(ec_config_t *cfg, const ec_knob_t *k, const char *v, const char *where,
                     const char *fix, ec_error_t *err)
{
    ec_range_t *r = FIELD(cfg, k, ec_range_t);
    const char *a = k->part[0], *b = k->part[1];
    int single_ok = k->sep == ':';
    char form[96];
    if (single_ok)
        snprintf(form, sizeof(form), "%sN for a fixed size or %s%s%c%s", fix, fix, a, k->sep, b);
    else
        snprintf(form, sizeof(form), "%s%s%c%s", fix, a, k->sep, b);
    if (!*v && (k->flags & EC_KF_EMPTY_OK)) {
        r->min = r->max = 0;
        return 0;
    }
    char lo_s[32], hi_s[32];
    const char *sep = strchr(v, k->sep);
    size_t nlo = sep ? (size_t)(sep - v) : strlen(v);
    if (nlo >= sizeof(lo_s) || (sep && strlen(sep + 1) >= sizeof(hi_s)))
        goto syntax;
    memcpy(lo_s, v, nlo);
    lo_s[nlo] = '\0';
    if (sep)
        strcpy(hi_s, sep + 1);
    else if (single_ok)
        strcpy(hi_s, lo_s);
    else
        goto syntax;
    long long lo, hi;
    if (parse_ll(lo_s, &lo) || parse_ll(hi_s, &hi))
        goto syntax;
    if (lo < k->min || hi < k->min || lo > k->max || hi > k->max)
        return ec_errorf(err, EC_EINVAL,
                         "%s: %s and %s must be between %lld and %lld; write %s with %lld <= %s "
                         "<= %s, e.g. %s%s",
                         where, a, b, k->min, k->max, form, k->min, a, b, fix, example_of(k));
    if (lo > hi)
        return ec_errorf(err, EC_EINVAL,
                         "%s: %s (%lld) is greater than %s (%lld); write %s%s%c%s with %s <= %s, "
                         "e.g. %s%s",
                         where, a, lo, b, hi, fix, a, k->sep, b, a, b, fix, example_of(k));
    r->min = (int)lo;
    r->max = (int)hi;
    return 0;
syntax:
    return ec_errorf(err, EC_EINVAL, "%s: not a %s; write %s, e.g. %s%s", where,
                     single_ok ? "node count" : "port range", form, fix, example_of(k));
}

static int set_strlist(ec_config_t *cfg, const ec_knob_t *k, const char *v, const char *where,
                       const char *fix, ec_error_t *err)
{
    ec_strlist_t nl = {0, NULL};
    char item[1024];
    const char *p = v;
    int rc;
    if (!*v)
        goto done;
    while ((rc = next_item(&p, item, sizeof(item))) != -1) {
        if (rc == -2) {
            rc = ec_errorf(err, EC_EINVAL, "%s: an entry is longer than %zu characters", where,
                           sizeof(item) - 1);
            goto error;
        }
        if (!*item) {
            rc = ec_errorf(err, EC_EINVAL,
                           "%s: entry %d is empty; separate entries with single commas, e.g. "
                           "%s%s",
                           where, nl.n + 1, fix, example_of(k));
            goto error;
        }
        if (k->check && (rc = k->check(item, where, fix, err)))
            goto error;
        char **nv = realloc(nl.v, sizeof(char *) * (size_t)(nl.n + 1));
        if (!nv)
            goto nomem;
        nl.v = nv;
        if (!(nl.v[nl.n] = strdup(item)))
            goto nomem;
        nl.n++;
    }
done:
    free_strlist(FIELD(cfg, k, ec_strlist_t));
    *FIELD(cfg, k, ec_strlist_t) = nl;
    return 0;
nomem:
    rc = ec_errorf(err, EC_ENOMEM, "out of memory parsing %s", where);
error:
    free_strlist(&nl);
    return rc;
}

static int set_intlist(ec_config_t *cfg, const ec_knob_t *k, const char *v, const char *where,
                       const char *fix, ec_error_t *err)
{
    ec_intlist_t nl = {0, NULL};
    char item[32];
    const char *p = v;
    int rc;
    if (!*v)
        goto done;
    while ((rc = next_item(&p, item, sizeof(item))) != -1) {
        long long x;
        if (rc == -2 || !*item || parse_ll(item, &x)) {
            rc = ec_errorf(err, EC_EINVAL,
                           "%s: entry %d ('%s') is not a device id; write ids separated by "
                           "commas, e.g. %s%s",
                           where, nl.n + 1, rc == -2 ? "..." : item, fix, example_of(k));
            goto error;
        }
        if (x < k->min || x > k->max) {
            rc = ec_errorf(err, EC_EINVAL, "%s: id %lld is out of range %lld..%lld; e.g. %s%s",
                           where, x, k->min, k->max, fix, example_of(k));
            goto error;
        }
        int *nv = realloc(nl.v, sizeof(int) * (size_t)(nl.n + 1));
        if (!nv) {
            rc = ec_errorf(err, EC_ENOMEM, "out of memory parsing %s", where);
            goto error;
        }
        nl.v = nv;
        nl.v[nl.n++] = (int)x;
    }
done:
    free(FIELD(cfg, k, ec_intlist_t)->v);
    *FIELD(cfg, k, ec_intlist_t) = nl;
    return 0;
error:
    free(nl.v);
    return rc;
}

/* Parse v for knob k into cfg.  where names the value for messages
 * ("--np=4:2", "ECOORD_NP=4:2 (environment)"); fix is how to write it again
 * ("--np=", "ECOORD_NP=").  On error cfg is unchanged. */
static int set_value(ec_config_t *cfg, const ec_knob_t *k, const char *v, const char *where,
                     const char *fix, ec_error_t *err)
{
    long long x;
    int b, rc;
    const char *unit = k->type == EC_KT_SECONDS ? " seconds" : "";

    switch (k->type) {
    case EC_KT_STRING:
    case EC_KT_SECRET:
        if (k->check && (rc = k->check(v, where, fix, err)))
            return rc;
        if (!*v && !(k->flags & EC_KF_EMPTY_OK))
            return ec_errorf(err, EC_EINVAL, "%s: needs a value, e.g. %s%s", where, fix,
                             example_of(k));
        if (k->max && strlen(v) > (size_t)k->max)
            return ec_errorf(err, EC_EINVAL, "%s: longer than %lld characters", where, k->max);
        char *s = strdup(v);
        if (!s)
            return ec_errorf(err, EC_ENOMEM, "out of memory parsing %s", where);
        free_field(cfg, k);
        *FIELD(cfg, k, char *) = s;
        return 0;
    case EC_KT_STRLIST:
        return set_strlist(cfg, k, v, where, fix, err);
    case EC_KT_INTLIST:
        return set_intlist(cfg, k, v, where, fix, err);
    case EC_KT_RANGE:
        return set_range(cfg, k, v, where, fix, err);
    case EC_KT_INT:
        if (parse_ll(v, &x))
            return ec_errorf(err, EC_EINVAL, "%s: not a whole number; e.g. %s%s", where, fix,
                             example_of(k));
        if (x < k->min || x > k->max)
            return ec_errorf(err, EC_EINVAL, "%s: out of range: allowed %lld to %lld; e.g. %s%s",
                             where, k->min, k->max, fix, example_of(k));
        *FIELD(cfg, k, int) = (int)x;
        return 0;
    case EC_KT_SECONDS:
        if (parse_seconds(v, &x))
            return ec_errorf(err, EC_EINVAL,
                             "%s: not a number of seconds (digits, at most 3 decimals, no "
                             "unit); e.g. %s%s",
                             where, fix, example_of(k));
        if (x < k->min || x > k->max) {
            char lo[32], hi[32];
            fmt_seconds(k->min, lo, sizeof(lo));
            fmt_seconds(k->max, hi, sizeof(hi));
            return ec_errorf(err, EC_EINVAL, "%s: out of range: allowed %s to %s%s; e.g. %s%s",
                             where, lo, hi, unit, fix, example_of(k));
        }
        if ((k->flags & EC_KF_WHOLE) && x % 1000)
            return ec_errorf(err, EC_EINVAL,
                             "%s: must be whole seconds (etcd leases count in seconds); e.g. "
                             "%s%s",
                             where, fix, example_of(k));
        *FIELD(cfg, k, int64_t) = x;
        return 0;
    case EC_KT_BOOL:
        if (parse_bool(v, &b))
            return ec_errorf(err, EC_EINVAL,
                             "%s: not a boolean; write true or false (1/0, yes/no, on/off)",
                             where);
        *FIELD(cfg, k, int) = b;
        return 0;
    case EC_KT_ENUM:
        for (int i = 0; k->choices[i]; i++)
            if (strcasecmp(v, k->choices[i]) == 0) {
                *FIELD(cfg, k, int) = i;
                return 0;
            }
        return ec_errorf(err, EC_EINVAL, "%s: must be one of %s; e.g. %s%s", where, k->metavar,
                         fix, example_of(k));
    }
    return ec_errorf(err, EC_EINTERNAL, "%s: knob %s has an unknown type", where, k->name);
}

/* "--np=4:2", with a long value shortened so the message keeps its advice. */
static void describe(char *buf, size_t len, const char *pre, const char *name, const char *v,
                     const char *post)
{
    if (strlen(v) > 80)
        snprintf(buf, len, "%s%s=%.60s...%s", pre, name, v, post);
    else
        snprintf(buf, len, "%s%s=%s%s", pre, name, v, post);
}

/* ------------------------------------------------------------------------ */
/* flag lookup and suggestions                                              */

static const ec_knob_t *find_flag(const char *norm, const char **spelling)
{
    for (int i = 0; i < EC_K__COUNT; i++)
        for (int j = 0; j < 3 && knobs[i].spellings[j]; j++)
            if (strcmp(norm, knobs[i].spellings[j]) == 0) {
                *spelling = knobs[i].spellings[j];
                return &knobs[i];
            }
    return NULL;
}

/* Optimal string alignment distance, case-insensitive; short strings only. */
static int distance(const char *a, const char *b)
{
    int n = (int)strlen(a), m = (int)strlen(b);
    if (n > 63 || m > 63)
        return 99;
    int d[64][64];
    for (int i = 0; i <= n; i++)
        d[i][0] = i;
    for (int j = 0; j <= m; j++)
        d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == tolower((unsigned char)b[j - 1]) &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

int ec_config_distance(const char *a, const char *b)
{
    return distance(a, b);
}

const ec_knob_t *ec_config_find_flag(const char *name)
{
    char norm[64];
    size_t n = strlen(name);
    if (n >= sizeof(norm))
        return NULL;
    for (size_t i = 0; i <= n; i++)
        norm[i] = name[i] == '-' ? '_' : name[i];
    const char *spelling;
    return find_flag(norm, &spelling);
}

/* First clause of a knob's help: "number of nodes". */
static void gist(const ec_knob_t *k, char *buf, size_t len)
{
    size_t n = strcspn(k->help, ":;.,");
    if (n < len) {
        memcpy(buf, k->help, n);
        buf[n] = '\0';
        return;
    }
    n = len - 4; /* cut at a word and say so */
    while (n > 0 && k->help[n] != ' ')
        n--;
    snprintf(buf, len, "%.*s...", (int)n, k->help);
}

/* "did you mean --nproc_per_node (processes (ranks) per node)?" for a typed
 * name that matches nothing.  An abbreviation is never accepted, but it says
 * what was meant, so spellings the typed name begins are suggested first; then
 * the closest spelling by edit distance, when close enough to be a typo. */
static void suggest(const char *typed, ec_cmd_t cmd, char *buf, size_t len)
{
    size_t tl = strlen(typed), used = 0;
    int found = 0;
    buf[0] = '\0';
    for (int pass = 0; pass < 2 && !found; pass++) /* this subcommand's knobs first */
        for (int i = 0; i < EC_K__COUNT; i++) {
            const ec_knob_t *k = &knobs[i];
            if (((k->cmds & cmd) != 0) != (pass == 0))
                continue;
            for (int j = 0; j < 3 && k->spellings[j]; j++)
                if (tl && strncasecmp(typed, k->spellings[j], tl) == 0 && found < 4) {
                    char g[48];
                    gist(k, g, sizeof(g));
                    used += (size_t)snprintf(buf + used, used < len ? len - used : 0,
                                             "%s--%s (%s)", found ? ", " : "", k->spellings[j], g);
                    found++;
                }
        }
    if (found)
        return;
    int best = 99;
    const ec_knob_t *bk = NULL;
    const char *bs = NULL;
    for (int i = 0; i < EC_K__COUNT; i++)
        for (int j = 0; j < 3 && knobs[i].spellings[j]; j++) {
            int d = distance(typed, knobs[i].spellings[j]);
            if (d < best || (d == best && bk && !(bk->cmds & cmd) && (knobs[i].cmds & cmd))) {
                best = d;
                bk = &knobs[i];
                bs = knobs[i].spellings[j];
            }
        }
    int limit = tl <= 4 ? 1 : (int)(tl / 3 > 2 ? tl / 3 : 2);
    if (bk && best <= limit) {
        char g[48];
        gist(bk, g, sizeof(g));
        snprintf(buf, len, "--%s (%s)", bs, g);
    }
}

static int unknown_flag(const char *dashes, const char *typed, const char *norm, ec_cmd_t cmd,
                        ec_error_t *err)
{
    for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
        if (strcmp(norm, unsupported[i].name) == 0)
            return ec_errorf(err, EC_EINVAL, "%s%s is not accepted: %s", dashes, typed,
                             unsupported[i].why);
    char sug[256];
    suggest(norm, cmd, sug, sizeof(sug));
    if (sug[0])
        return ec_errorf(err, EC_EINVAL,
                         "unknown flag %s%s; did you mean %s? Flags must be spelled in full "
                         "(abbreviations are never expanded); see ecoord %s --help",
                         dashes, typed, sug, ec_config_cmd_name(cmd));
    return ec_errorf(err, EC_EINVAL, "unknown flag %s%s; see ecoord %s --help for the flags",
                     dashes, typed, ec_config_cmd_name(cmd));
}

static int cmd_list(unsigned cmds, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (cmds & commands[i].cmd)
            used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s'ecoord %s'",
                                     used ? " and " : "", commands[i].name);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* parse                                                                    */

/* Could argv token t be the separate value of knob k?  Not when it looks
 * like a flag, except a negative number for a knob that takes one. */
static int takes_as_value(const ec_knob_t *k, const char *t)
{
    if (t[0] != '-' || t[1] == '\0')
        return 1;
    long long x;
    return k->type == EC_KT_INT && k->min < 0 && parse_ll(t, &x) == 0;
}

static int parse_args(ec_config_t *cfg, int argc, char **argv, const char **raw, ec_error_t *err)
{
    char where[200], fix[80], norm[64], typed[64];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            if (i + 1 < argc)
                cfg->prog_index = i + 1;
            break;
        }
        if (a[0] != '-' || a[1] == '\0') {
            cfg->prog_index = i;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cfg->help = 1;
            return 0;
        }
        int single = a[1] != '-';
        const char *name = a + (single ? 1 : 2);
        const char *eq = strchr(name, '=');
        size_t nl = eq ? (size_t)(eq - name) : strlen(name);
        if (nl >= sizeof(norm))
            nl = sizeof(norm) - 1;
        memcpy(typed, name, nl);
        typed[nl] = '\0';
        for (size_t j = 0; j <= nl; j++)
            norm[j] = typed[j] == '-' ? '_' : typed[j];
        const char *spelling = NULL;
        const ec_knob_t *k = find_flag(norm, &spelling);
        if (single) {
            if (k)
                return ec_errorf(err, EC_EINVAL,
                                 "%s: single-dash flags are not accepted; write --%s%s", a,
                                 typed, eq ? eq : "");
            return unknown_flag("-", typed, norm, cfg->cmd, err);
        }
        if (!k)
            return unknown_flag("--", typed, norm, cfg->cmd, err);
        if (!(k->cmds & cfg->cmd)) {
            char cl[128];
            cmd_list(k->cmds, cl, sizeof(cl));
            return ec_errorf(err, EC_EINVAL,
                             "--%s is not a flag of 'ecoord %s'; it belongs to %s: drop it here",
                             typed, ec_config_cmd_name(cfg->cmd), cl);
        }
        const char *v;
        if (eq)
            v = eq + 1;
        else if (k->type == EC_KT_BOOL)
            v = "true"; /* never takes the next word: `--watch prog` stays unambiguous */
        else if (i + 1 < argc && takes_as_value(k, argv[i + 1]))
            v = argv[++i];
        else if (i + 1 < argc)
            return ec_errorf(err, EC_EINVAL,
                             "--%s needs a value but is followed by %s; write --%s=%s, e.g. "
                             "--%s=%s (a value that starts with '-' must be written with '=')",
                             typed, argv[i + 1], spelling, k->metavar, spelling, example_of(k));
        else
            return ec_errorf(err, EC_EINVAL, "--%s needs a value; write --%s=%s, e.g. --%s=%s",
                             typed, spelling, k->metavar, spelling, example_of(k));
        describe(where, sizeof(where), "--", typed, v, "");
        snprintf(fix, sizeof(fix), "--%s=", spelling);
        int rc = set_value(cfg, k, v, where, fix, err);
        if (rc)
            return rc;
        if (cfg->src[k->id].kind == EC_SRC_FLAG && raw[k->id] && strcmp(raw[k->id], v) != 0)
            warnf(cfg, "--%s given twice (%s, then %s): the last one wins", k->name, raw[k->id],
                  v);
        cfg->src[k->id] = (ec_source_t){EC_SRC_FLAG, spelling};
        raw[k->id] = v;
    }
    if (cfg->prog_index >= 0) {
        if (cfg->cmd != EC_CMD_LAUNCH)
            return ec_errorf(err, EC_EINVAL,
                             "'ecoord %s' takes no program, but got '%s'; a program goes to "
                             "'ecoord launch' (a flag needs its leading --)",
                             ec_config_cmd_name(cfg->cmd), argv[cfg->prog_index]);
        cfg->prog_argc = argc - cfg->prog_index;
        cfg->prog_argv = argv + cfg->prog_index;
    }
    return 0;
}

/* Environment aliases, for the knobs this subcommand uses whose flag was not
 * given.  The first alias listed that is set (non-empty) wins. */
static int apply_env(ec_config_t *cfg, ec_getenv_fn env, void *env_arg, const char **raw,
                     ec_error_t *err)
{
    char where[200], fix[80];
    for (int i = 0; i < EC_K__COUNT; i++) {
        const ec_knob_t *k = &knobs[i];
        if (!(k->cmds & cfg->cmd))
            continue;
        const char *won = NULL, *won_v = NULL;
        for (int j = 0; j < 3 && k->env[j]; j++) {
            const char *v = env ? env(k->env[j], env_arg) : NULL;
            if (!v || !*v)
                continue;
            int secret = k->type == EC_KT_SECRET;
            if (cfg->src[i].kind == EC_SRC_FLAG) {
                if (strcmp(v, raw[i]) != 0)
                    warnf(cfg, "%s=%s is ignored: --%s on the command line wins", k->env[j],
                          secret ? "(hidden)" : v, cfg->src[i].name);
                continue;
            }
            if (won) {
                if (strcmp(v, won_v) != 0)
                    warnf(cfg, "%s=%s is ignored: %s=%s takes precedence", k->env[j],
                          secret ? "(hidden)" : v, won, secret ? "(hidden)" : won_v);
                continue;
            }
            describe(where, sizeof(where), "", k->env[j], secret ? "(hidden)" : v,
                     " (environment)");
            snprintf(fix, sizeof(fix), "%s=", k->env[j]);
            int rc = set_value(cfg, k, v, where, fix, err);
            if (rc)
                return rc;
            cfg->src[i] = (ec_source_t){EC_SRC_ENV, k->env[j]};
            won = k->env[j];
            won_v = v;
        }
    }
    return 0;
}

static int read_password_file(ec_config_t *cfg, ec_error_t *err)
{
    const char *path = cfg->etcd_password_file;
    char buf[PASSWORD_MAX + 2];
    ssize_t n = 0, r;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ec_errorf(err, EC_EIO, "--etcd_password_file=%s: cannot open it (%s); check the path",
                         path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) == 0 && (st.st_mode & 077))
        warnf(cfg, "--etcd_password_file=%s can be read by other users; chmod 600 it", path);
    while ((r = read(fd, buf + n, sizeof(buf) - 1 - (size_t)n)) > 0)
        n += r;
    int saved = errno;
    close(fd);
    int rc = 0;
    if (r < 0)
        rc = ec_errorf(err, EC_EIO, "--etcd_password_file=%s: cannot read it (%s)", path,
                       strerror(saved));
    else if (n > PASSWORD_MAX)
        rc = ec_errorf(err, EC_EINVAL,
                       "--etcd_password_file=%s: longer than %d bytes; is it the right file?",
                       path, PASSWORD_MAX);
    if (rc)
        goto out;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    buf[n] = '\0';
    if (n == 0) {
        rc = ec_errorf(err, EC_EINVAL, "--etcd_password_file=%s is empty; write the password in it",
                       path);
        goto out;
    }
    free_secret(&cfg->etcd_password);
    if (!(cfg->etcd_password = strdup(buf))) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory reading --etcd_password_file");
        goto out;
    }
    cfg->src[EC_K_ETCD_PASSWORD] = (ec_source_t){EC_SRC_FILE, cfg->etcd_password_file};
out:
    explicit_bzero(buf, sizeof(buf));
    return rc;
}

/* The endpoints of a --master=etcd://A[,etcd://B|,B] URL, comma-joined
 * entry for entry (an empty one stays, for the list's own message), into
 * buf (at least as long as v); -1 when it is not an etcd:// URL, -2 when an
 * entry is too long to be an endpoint. */
static int master_endpoints(const char *v, char *buf, size_t len)
{
    static const char scheme[] = "etcd://";
    size_t sl = sizeof(scheme) - 1, used = 0;
    if (strncasecmp(v, scheme, sl) != 0)
        return -1;
    buf[0] = '\0';
    char item[1024];
    const char *p = v + sl;
    int rc;
    for (int i = 0; (rc = next_item(&p, item, sizeof(item))) != -1; i++) {
        if (rc == -2)
            return -2;
        const char *e = item;
        if (strncasecmp(e, scheme, sl) == 0)
            e += sl;
        size_t n = strlen(e);
        while (n > 0 && e[n - 1] == '/') /* etcd://h:p/ */
            n--;
        used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%.*s",
                                 i ? "," : "", (int)n, e);
    }
    return 0;
}

/* --master (Paddle's name for the rendezvous server): an etcd:// URL is
 * --elastic_server under another name.  When both are given, the rule for
 * a flag and its aliases applies between them too: the command line beats
 * the environment; two different values at the same level are an error on
 * the command line and a warning (elastic_server wins) in the environment. */
static int resolve_master(ec_config_t *cfg, ec_error_t *err)
{
    const ec_source_t *ms = &cfg->src[EC_K_MASTER], *es = &cfg->src[EC_K_ELASTIC_SERVER];
    if (!(cfg->cmd & knobs[EC_K_MASTER].cmds) || !cfg->master[0])
        return 0;
    char where[300], eps[4096], cur[4096];
    origin(cfg, EC_K_MASTER, cfg->master, where, sizeof(where));
    int mrc = master_endpoints(cfg->master, eps, sizeof(eps));
    if (mrc == -2)
        return ec_errorf(err, EC_EINVAL, "%s: an entry is longer than an endpoint can be", where);
    if (mrc < 0) {
        /* ecoord sets PADDLE_MASTER for its own training processes, and a
         * Paddle pod spec may carry its HTTP master: neither is for us. */
        if (ms->kind == EC_SRC_ENV && strcmp(ms->name, "PADDLE_MASTER") == 0) {
            warnf(cfg, "%s is ignored: not an etcd:// address (Paddle's HTTP master has no use "
                       "in ecoord, which meets its peers in etcd)",
                  where);
            return 0;
        }
        return ec_errorf(err, EC_EINVAL,
                         "%s: ecoord meets its peers in etcd, not at a master process; write "
                         "--master=etcd://HOST:PORT[,HOST:PORT...] or --elastic_server=HOST:PORT",
                         where);
    }
    if (es->kind != EC_SRC_DEFAULT) {
        size_t used = 0;
        cur[0] = '\0';
        for (int i = 0; i < cfg->elastic_server.n; i++)
            used += (size_t)snprintf(cur + used, used < sizeof(cur) ? sizeof(cur) - used : 0,
                                     "%s%s", i ? "," : "", cfg->elastic_server.v[i]);
        char ewhere[300];
        origin(cfg, EC_K_ELASTIC_SERVER, cur, ewhere, sizeof(ewhere));
        if (strcmp(cur, eps) == 0)
            return 0;
        if (es->kind == EC_SRC_FLAG && ms->kind == EC_SRC_FLAG)
            return ec_errorf(err, EC_EINVAL,
                             "%s and %s name different etcd servers; keep one (they are the "
                             "same flag under Paddle's and ecoord's names)",
                             where, ewhere);
        if (es->kind == EC_SRC_FLAG || ms->kind != EC_SRC_FLAG) {
            warnf(cfg, "%s is ignored: %s takes precedence", where, ewhere);
            return 0;
        }
        warnf(cfg, "%s is ignored: %s takes precedence", ewhere, where);
    }
    int rc = set_value(cfg, &knobs[EC_K_ELASTIC_SERVER], eps, where, "--master=etcd://", err);
    if (rc)
        return rc;
    if (cfg->elastic_server.n == 0)
        return ec_errorf(err, EC_EINVAL,
                         "%s names no endpoint; write --master=etcd://HOST:PORT, e.g. "
                         "--master=etcd://10.0.0.1:2379",
                         where);
    cfg->src[EC_K_ELASTIC_SERVER] = *ms;
    return 0;
}

/* What a failed process does (--elastic_level), as the launcher the user
 * came from: Paddle's default (-1) stops at the first failure and exits with
 * the process's code; fault tolerance (restarts, then the node leaves and
 * exits --fixed_failure_exit or --node_failure_exit) is on when asked for:
 * --elastic_level=0|1, or a knob that only means something with it
 * (--max_restart, --np=MIN:MAX with MIN < MAX, either failure exit code).
 * `ecoord torchrun` sets torchrun's policy afterwards (ec_torchrun_apply). */
static void resolve_failure_policy(ec_config_t *cfg)
{
    const ec_source_t *lv = &cfg->src[EC_K_ELASTIC_LEVEL];
    const char *asked = NULL;
    if (cfg->src[EC_K_MAX_RESTART].kind != EC_SRC_DEFAULT)
        asked = "--max_restart";
    else if (cfg->np.min < cfg->np.max)
        asked = "--np=MIN:MAX";
    else if (cfg->src[EC_K_FIXED_FAILURE_EXIT].kind != EC_SRC_DEFAULT)
        asked = "--fixed_failure_exit";
    else if (cfg->src[EC_K_NODE_FAILURE_EXIT].kind != EC_SRC_DEFAULT)
        asked = "--node_failure_exit";
    if (lv->kind == EC_SRC_DEFAULT) {
        cfg->fail_fast = asked == NULL;
        if (asked) {
            cfg->elastic_level = 1;
            cfg->src[EC_K_ELASTIC_LEVEL].name = asked[2] == 'n' && asked[3] == 'p'
                                                    ? "fault tolerance: --np=MIN:MAX"
                                                    : "fault tolerance asked for";
        }
    } else {
        cfg->fail_fast = cfg->elastic_level < 0;
        if (cfg->fail_fast && asked && cfg->src[EC_K_MAX_RESTART].kind != EC_SRC_DEFAULT)
            warnf(cfg, "--max_restart=%d has no effect with %s%s=-1: the first failure stops "
                       "the job; pass --elastic_level=1 to restart",
                  cfg->max_restart, lv->kind == EC_SRC_FLAG ? "--" : "",
                  lv->name ? lv->name : "elastic_level");
    }
    if (cfg->src[EC_K_MAX_RESTART].kind == EC_SRC_DEFAULT && cfg->elastic_level <= 0) {
        cfg->max_restart = 0;
        cfg->src[EC_K_MAX_RESTART].name = cfg->elastic_level < 0
                                              ? "--elastic_level=-1: stop at the first failure"
                                              : "--elastic_level=0: a failed node leaves";
    }
}

/* Defaults that depend on other knobs or on the machine, and warnings. */
static int resolve(ec_config_t *cfg, ec_getenv_fn env, void *env_arg, ec_error_t *err)
{
    int rc;
    if ((rc = resolve_master(cfg, err)))
        return rc;
    {
        long long ms = -1;
        double x = 0;
        if (cfg->hang_timeout && hang_timeout_ms(cfg->hang_timeout, &ms) == 0)
            cfg->hang_timeout_ms = ms;
        if (cfg->straggler_factor && straggler_factor(cfg->straggler_factor, &x) == 0)
            cfg->straggler_factor_x = x;
    }
    if (cfg->cmd & knobs[EC_K_NPROC_PER_NODE].cmds) {
        /* Like Paddle's launcher: one process per GPU the node shows, when
         * the user says neither how many nor which. */
        const char *cvd = env ? env("CUDA_VISIBLE_DEVICES", env_arg) : NULL;
        const char *dev_dir = env ? env("ECOORD_DEV_DIR", env_arg) : NULL;
        cfg->dev_gpus = 0;
        if (!cvd && cfg->gpus.n == 0)
            cfg->dev_gpus = ec_gpus_count_dev(dev_dir && *dev_dir ? dev_dir : "/dev");
        if (cfg->src[EC_K_NPROC_PER_NODE].kind == EC_SRC_DEFAULT) {
            int nvis;
            if (cfg->gpus.n > 0) {
                cfg->nproc_per_node = cfg->gpus.n;
                cfg->src[EC_K_NPROC_PER_NODE].name = "number of --gpus";
            } else if (cvd && (nvis = ec_gpus_count_visible(cvd, NULL)) > 0) {
                cfg->nproc_per_node = nvis;
                cfg->src[EC_K_NPROC_PER_NODE].name = "GPUs in CUDA_VISIBLE_DEVICES";
            } else if (!cvd && cfg->dev_gpus > 0) {
                cfg->nproc_per_node = cfg->dev_gpus;
                cfg->src[EC_K_NPROC_PER_NODE].name = "GPUs of this machine (/dev/nvidiaN)";
            }
        }
        if (cfg->gpus.n > cfg->nproc_per_node)
            warnf(cfg, "--nproc_per_node=%d uses only the first %d of the %d devices in --gpus",
                  cfg->nproc_per_node, cfg->nproc_per_node, cfg->gpus.n);
    }
    /* node_id: flag, ECOORD_NODE_ID, POD_NAME (all applied by now), then the
     * host name: the one place this default is decided. */
    if ((cfg->cmd & knobs[EC_K_NODE_ID].cmds) && !cfg->node_id[0]) {
        if (!cfg->hostname || !cfg->hostname[0])
            return ec_errorf(err, EC_EINVAL,
                             "cannot name this node: no --node_id, ECOORD_NODE_ID or POD_NAME, "
                             "and no host name; pass --node_id=NAME, e.g. --node_id=node-3");
        char where[300];
        snprintf(where, sizeof(where), "host name '%.200s' (the default node id)", cfg->hostname);
        if ((rc = check_node_id(cfg->hostname, where, "--node_id=", err)))
            return rc;
        char *s = strdup(cfg->hostname);
        if (!s)
            return ec_errorf(err, EC_ENOMEM, "out of memory");
        free(cfg->node_id);
        cfg->node_id = s;
        cfg->src[EC_K_NODE_ID].name = "host name";
    }
    if (cfg->cmd & knobs[EC_K_ELASTIC_LEVEL].cmds)
        resolve_failure_policy(cfg);
    if (cfg->src[EC_K_JOB_ID].kind == EC_SRC_DEFAULT)
        warnf(cfg, "no --job_id: using '%s'; two jobs on one etcd with the same id join each "
                   "other; pass --job_id=NAME",
              cfg->job_id);
    if (cfg->src[EC_K_PORT_RANGE].kind != EC_SRC_DEFAULT) {
        cfg->port_lo = cfg->port_range.min;
        cfg->port_hi = cfg->port_range.max;
    } else {
        cfg->port_lo = cfg->start_port;
        cfg->port_hi = 65535;
    }
    if ((cfg->cmd & knobs[EC_K_ETCD_PASSWORD_FILE].cmds) && cfg->etcd_password_file[0]) {
        if (cfg->src[EC_K_ETCD_PASSWORD].kind != EC_SRC_DEFAULT)
            return ec_errorf(err, EC_EINVAL,
                             "both ECOORD_ETCD_PASSWORD and --etcd_password_file=%s give a "
                             "password; keep one (unset ECOORD_ETCD_PASSWORD or drop the file)",
                             cfg->etcd_password_file);
        if ((rc = read_password_file(cfg, err)))
            return rc;
    }
    return 0;
}

int ec_config_parse(ec_config_t *cfg, const char *subcommand, int argc, char **argv,
                    ec_getenv_fn env, void *env_arg, ec_error_t *err)
{
    const char *raw[EC_K__COUNT] = {0};
    int rc;
    if (!cfg || cfg->size != sizeof(ec_config_t))
        return ec_errorf(err, EC_EINVAL,
                         "ec_config_parse: cfg was not initialized with EC_CONFIG_INITIALIZER");
    if (argc < 0 || (argc > 0 && !argv))
        return ec_errorf(err, EC_EINVAL, "ec_config_parse: bad argc/argv");
    ec_config_release(cfg);
    cfg->cmd = ec_config_cmd(subcommand);
    /* Defaults first, for every knob, so every field is valid and
     * releasable whatever happens next. */
    for (int i = 0; i < EC_K__COUNT; i++) {
        char where[80];
        snprintf(where, sizeof(where), "default of %s", knobs[i].name);
        if ((rc = set_value(cfg, &knobs[i], knobs[i].def, where, "", err))) {
            ec_error_prefix(err, "internal error in the knob table");
            return rc;
        }
    }
    if (!cfg->cmd)
        return ec_errorf(err, EC_EINVAL, "unknown subcommand '%s'; use launch, status or check",
                         subcommand ? subcommand : "(none)");
    if ((rc = parse_args(cfg, argc, argv, raw, err)))
        return rc;
    if (cfg->help)
        return 0;
    if ((rc = apply_env(cfg, env, env_arg, raw, err)))
        return rc;
    if ((rc = resolve(cfg, env, env_arg, err)))
        return rc;
    return ec_config_validate(cfg, env, env_arg, err);
}

/* ------------------------------------------------------------------------ */
/* cross-field validation                                                   */

/* How the user gave knob id: "--nproc_per_node=4", "ECOORD_NPROC_PER_NODE=4",
 * "--nproc_per_node=4 (default: number of --gpus)". */
static void origin(const ec_config_t *cfg, int id, const char *value, char *buf, size_t len)
{
    const ec_source_t *s = &cfg->src[id];
    if (s->kind == EC_SRC_FLAG)
        snprintf(buf, len, "--%s=%s", s->name, value);
    else if (s->kind == EC_SRC_ENV)
        snprintf(buf, len, "%s=%s", s->name, value);
    else if (s->name)
        snprintf(buf, len, "--%s=%s (default: %s)", knobs[id].name, value, s->name);
    else
        snprintf(buf, len, "--%s=%s (default)", knobs[id].name, value);
}

static int fmt_intlist(const ec_intlist_t *l, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < l->n; i++)
        used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%d", i ? "," : "",
                                 l->v[i]);
    return 0;
}

static int check_devices(const ec_config_t *cfg, ec_getenv_fn env, void *env_arg,
                         ec_error_t *err)
{
    char np_s[300], g_s[256], gl[200];
    char nps[16];
    snprintf(nps, sizeof(nps), "%d", cfg->nproc_per_node);
    origin(cfg, EC_K_NPROC_PER_NODE, nps, np_s, sizeof(np_s));
    fmt_intlist(&cfg->gpus, gl, sizeof(gl));
    origin(cfg, EC_K_GPUS, gl, g_s, sizeof(g_s));
    ec_gpus_t g;
    return ec_gpus_plan(env ? env("CUDA_VISIBLE_DEVICES", env_arg) : NULL, cfg->dev_gpus,
                        cfg->gpus.v, cfg->gpus.n, cfg->nproc_per_node, g_s, np_s, &g, err);
}

int ec_config_validate(const ec_config_t *cfg, ec_getenv_fn env, void *env_arg,
                       ec_error_t *err)
{
    int rc;
    char a[300], b[300], v[64];
    if (!cfg || !ec_config_cmd(ec_config_cmd_name(cfg->cmd)))
        return ec_errorf(err, EC_EINVAL, "ec_config_validate: cfg has not been parsed");
    unsigned cmd = cfg->cmd;

    if (cmd & knobs[EC_K_NP].cmds) {
        snprintf(v, sizeof(v), "%d:%d", cfg->np.min, cfg->np.max);
        origin(cfg, EC_K_NP, v, a, sizeof(a));
        if (cfg->np.min < 1)
            return ec_errorf(err, EC_EINVAL, "%s: the node count must be at least 1, e.g. --np=2:4",
                             a);
        if (cfg->np.min > cfg->np.max)
            return ec_errorf(err, EC_EINVAL,
                             "%s: MIN (%d) is greater than MAX (%d); write --np=MIN:MAX with "
                             "MIN <= MAX, e.g. --np=2:4",
                             a, cfg->np.min, cfg->np.max);
    }
    if (cmd & knobs[EC_K_GPUS].cmds) {
        if ((rc = check_devices(cfg, env, env_arg, err)))
            return rc;
    }
    if (cmd & knobs[EC_K_PORT_RANGE].cmds) {
        if (cfg->src[EC_K_START_PORT].kind != EC_SRC_DEFAULT &&
            cfg->src[EC_K_PORT_RANGE].kind != EC_SRC_DEFAULT) {
            snprintf(v, sizeof(v), "%d", cfg->start_port);
            origin(cfg, EC_K_START_PORT, v, a, sizeof(a));
            snprintf(v, sizeof(v), "%d-%d", cfg->port_range.min, cfg->port_range.max);
            origin(cfg, EC_K_PORT_RANGE, v, b, sizeof(b));
            return ec_errorf(err, EC_EINVAL,
                             "%s and %s both say where ports go; keep one (--port_range where "
                             "only a fixed range is open)",
                             a, b);
        }
        /* One port per local process, plus one for the rendezvous store rank 0
         * hosts (MASTER_PORT), plus (launch) one where the agent answers its
         * peers' liveness probes: what launch.c and check/command.c reserve. */
        int probe = cmd == EC_CMD_LAUNCH;
        int need = cfg->nproc_per_node + 1 + probe, have = cfg->port_hi - cfg->port_lo + 1;
        if (cfg->port_lo < 1 || have < need) {
            int id = cfg->src[EC_K_PORT_RANGE].kind != EC_SRC_DEFAULT ? EC_K_PORT_RANGE
                                                                      : EC_K_START_PORT;
            if (id == EC_K_PORT_RANGE)
                snprintf(v, sizeof(v), "%d-%d", cfg->port_lo, cfg->port_hi);
            else
                snprintf(v, sizeof(v), "%d", cfg->port_lo);
            origin(cfg, id, v, a, sizeof(a));
            return ec_errorf(err, EC_EINVAL,
                             "%s leaves %d port%s but this node needs %d (one per process of "
                             "--nproc_per_node=%d, one for the rendezvous store%s); widen the "
                             "range",
                             a, have < 0 ? 0 : have, have == 1 ? "" : "s", need,
                             cfg->nproc_per_node,
                             probe ? ", one where the agent answers liveness probes" : "");
        }
    }
    if (cmd & knobs[EC_K_ETCD_CERT].cmds) {
        if (!cfg->etcd_cert[0] != !cfg->etcd_key[0])
            return ec_errorf(err, EC_EINVAL,
                             "%s is given without %s; a client certificate needs its key: pass "
                             "both --etcd_cert=PATH and --etcd_key=PATH",
                             cfg->etcd_cert[0] ? "--etcd_cert" : "--etcd_key",
                             cfg->etcd_cert[0] ? "--etcd_key" : "--etcd_cert");
        for (int i = 0; i < EC_K__COUNT; i++) {
            const ec_knob_t *k = &knobs[i];
            if (!(k->flags & EC_KF_FILE) || !(k->cmds & cmd))
                continue;
            const char *path = *FIELD(cfg, k, char *);
            if (path && path[0] && access(path, R_OK) != 0) {
                origin(cfg, i, path, a, sizeof(a));
                return ec_errorf(err, EC_EIO, "%s: cannot read it (%s); check the path", a,
                                 strerror(errno));
            }
        }
    }
    if (cmd & knobs[EC_K_ETCD_USER].cmds) {
        int has_pw = cfg->etcd_password && cfg->etcd_password[0];
        if (cfg->etcd_user[0] && !has_pw)
            return ec_errorf(err, EC_EINVAL,
                             "--etcd_user=%s has no password; set ECOORD_ETCD_PASSWORD or pass "
                             "--etcd_password_file=PATH",
                             cfg->etcd_user);
        if (!cfg->etcd_user[0] && has_pw)
            return ec_errorf(err, EC_EINVAL,
                             "an etcd password is set (%s) but no user; pass --etcd_user=NAME "
                             "or drop the password",
                             cfg->src[EC_K_ETCD_PASSWORD].kind == EC_SRC_FILE
                                 ? "--etcd_password_file"
                                 : EC_ENV_ETCD_PASSWORD);
    }
    if ((cmd & knobs[EC_K_MODULE].cmds) && cfg->module && cfg->no_python)
        return ec_errorf(err, EC_EINVAL,
                         "--module and --no_python contradict each other: a module is run by "
                         "the interpreter (python -u -m PROGRAM); drop one");
    if (cmd == EC_CMD_LAUNCH && cfg->prog_argc == 0)
        return ec_errorf(err, EC_EINVAL,
                         "ecoord launch needs the training program to run: ecoord launch "
                         "[FLAGS] [--] PROGRAM [ARGS...], e.g. ecoord launch --np=2:4 python "
                         "train.py");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* help and dump                                                            */

/* Print text wrapped at width, each line indented by indent. */
static void wrap(FILE *f, const char *text, int indent, int width)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        int room = width - indent, n = (int)strlen(p);
        if (n > room) {
            n = room;
            while (n > 0 && p[n] != ' ')
                n--;
            if (n == 0) /* one long word: let it overflow */
                n = (int)strcspn(p, " ");
        }
        fprintf(f, "%*s%.*s\n", indent, "", n, p);
        p += n;
    }
}

static void help_knob(FILE *f, const ec_knob_t *k)
{
    char line[512];
    size_t used = 0;
    if (!k->spellings[0]) {
        fprintf(f, "  env %s\n", k->env[0]);
    } else {
        for (int j = 0; j < 3 && k->spellings[j]; j++) {
            if (k->type == EC_KT_BOOL)
                used += (size_t)snprintf(line + used, sizeof(line) - used, "%s--%s",
                                         j ? ", " : "", k->spellings[j]);
            else
                used += (size_t)snprintf(line + used, sizeof(line) - used, "%s--%s=%s",
                                         j ? ", " : "", k->spellings[j], k->metavar);
        }
        fprintf(f, "  %s\n", line);
    }
    wrap(f, k->help, 6, 79);
    used = 0;
    line[0] = '\0';
    if (k->type != EC_KT_BOOL)
        used += (size_t)snprintf(line, sizeof(line), "default: %s",
                                 k->def_help ? k->def_help : k->def);
    if (k->spellings[0] && k->env[0]) {
        used += (size_t)snprintf(line + used, sizeof(line) - used, "%senv: ", used ? "; " : "");
        for (int j = 0; j < 3 && k->env[j]; j++)
            used += (size_t)snprintf(line + used, sizeof(line) - used, "%s%s", j ? ", " : "",
                                     k->env[j]);
        if (k->env[1])
            used += (size_t)snprintf(line + used, sizeof(line) - used, " (first set wins)");
    }
    if (line[0])
        wrap(f, line, 6, 79);
}

char *ec_config_help(const char *subcommand)
{
    char *buf = NULL;
    size_t len = 0;
    ec_cmd_t cmd = 0;
    size_t ci = 0;
    if (subcommand) {
        for (ci = 0; ci < NCOMMANDS; ci++)
            if (strcmp(subcommand, commands[ci].name) == 0)
                break;
        if (ci == NCOMMANDS)
            return NULL;
        cmd = commands[ci].cmd;
    }
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    if (!cmd) {
        fprintf(f, "usage: ecoord COMMAND [FLAGS]\n\ncommands:\n");
        for (size_t i = 0; i < NCOMMANDS; i++) {
            fprintf(f, "  %s\n", commands[i].name);
            wrap(f, commands[i].summary, 6, 79);
        }
        fprintf(f, "\nSee ecoord COMMAND --help for a command's flags.\n");
    } else {
        fprintf(f, "usage: %s\n\n", commands[ci].usage);
        wrap(f, commands[ci].summary, 0, 79);
        fprintf(f, "\n");
        wrap(f,
             "Write --name=VALUE or --name VALUE; dashes and underscores are the same "
             "(--job-id is --job_id). Flags are spelled in full: abbreviations are never "
             "accepted. An environment variable applies only when its flag is not given: "
             "the flag wins.",
             0, 79);
        if (cmd == EC_CMD_LAUNCH) {
            fprintf(f, "\n");
            wrap(f,
                 "PROGRAM is the first word that is not a flag, or whatever follows --; it "
                 "and its arguments are passed through untouched.",
                 0, 79);
        }
        for (int g = 0; groups[g]; g++) {
            int any = 0;
            for (int i = 0; i < EC_K__COUNT; i++) {
                const ec_knob_t *k = &knobs[i];
                if (!(k->cmds & cmd) || strcmp(k->group, groups[g]) != 0)
                    continue;
                if (!any++)
                    fprintf(f, "\n%s:\n", groups[g]);
                help_knob(f, k);
            }
        }
        fprintf(f, "\n  -h, --help\n      this text.\n");
        if (cmd == EC_CMD_LAUNCH) {
            fprintf(f, "\nexit codes:\n");
            for (size_t i = 0; i < sizeof(exit_codes) / sizeof(exit_codes[0]); i++) {
                fprintf(f, "  %s\n", exit_codes[i].code);
                wrap(f, exit_codes[i].why, 6, 79);
            }
        }
        fprintf(f, "\nenvironment read besides the aliases above:\n");
        for (size_t i = 0; i < sizeof(env_other) / sizeof(env_other[0]); i++) {
            fprintf(f, "  %s\n", env_other[i].name);
            wrap(f, env_other[i].why, 6, 79);
        }
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The value of knob k as the dump shows it. */
static void fmt_value(const ec_config_t *cfg, const ec_knob_t *k, char *buf, size_t len)
{
    size_t used = 0;
    switch (k->type) {
    case EC_KT_STRING: {
        const char *s = *FIELD(cfg, k, char *);
        snprintf(buf, len, "%s", s && *s ? s : "(not set)");
        break;
    }
    case EC_KT_SECRET: {
        const char *s = *FIELD(cfg, k, char *);
        snprintf(buf, len, "%s", s && *s ? "(set, hidden)" : "(not set)");
        break;
    }
    case EC_KT_STRLIST: {
        const ec_strlist_t *l = FIELD(cfg, k, ec_strlist_t);
        buf[0] = '\0';
        for (int i = 0; i < l->n; i++)
            used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s",
                                     i ? "," : "", l->v[i]);
        if (!l->n)
            snprintf(buf, len, "(not set)");
        break;
    }
    case EC_KT_INTLIST:
        fmt_intlist(FIELD(cfg, k, ec_intlist_t), buf, len);
        if (!FIELD(cfg, k, ec_intlist_t)->n)
            snprintf(buf, len, "(not set)");
        break;
    case EC_KT_INT:
        snprintf(buf, len, "%d", *FIELD(cfg, k, int));
        break;
    case EC_KT_SECONDS:
        fmt_seconds(*FIELD(cfg, k, int64_t), buf, len);
        used = strlen(buf);
        snprintf(buf + used, len - used, "s");
        break;
    case EC_KT_BOOL:
        snprintf(buf, len, "%s", *FIELD(cfg, k, int) ? "true" : "false");
        break;
    case EC_KT_ENUM:
        snprintf(buf, len, "%s", k->choices[*FIELD(cfg, k, int)]);
        break;
    case EC_KT_RANGE: {
        const ec_range_t *r = FIELD(cfg, k, ec_range_t);
        if (!r->min && !r->max)
            snprintf(buf, len, "(not set)");
        else if (r->min == r->max && k->sep == ':')
            snprintf(buf, len, "%d", r->min);
        else
            snprintf(buf, len, "%d%c%d", r->min, k->sep, r->max);
        break;
    }
    }
}

char *ec_config_summary(const ec_config_t *cfg)
{
    char *buf = NULL;
    size_t len = 0;
    if (!cfg || !cfg->cmd)
        return NULL;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    int given = 0, defaults = 0;
    fputs("configuration:", f);
    for (int i = 0; i < EC_K__COUNT; i++) {
        const ec_knob_t *k = &knobs[i];
        if (!(k->cmds & cfg->cmd))
            continue;
        const ec_source_t *src = &cfg->src[i];
        if (src->kind != EC_SRC_FLAG && src->kind != EC_SRC_ENV && src->kind != EC_SRC_FILE) {
            defaults++;
            continue;
        }
        char v[1024];
        fmt_value(cfg, k, v, sizeof(v));
        fprintf(f, " %s=%s (%s%s)", k->name, v, src->kind == EC_SRC_FLAG ? "--" : "",
                src->name ? src->name : "?");
        given++;
    }
    if (!given)
        fputs(" every knob at its default", f);
    fprintf(f, "; %d at their defaults (--log_level=debug lists every knob and where it came "
            "from)", defaults);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

char *ec_config_dump(const ec_config_t *cfg)
{
    char *buf = NULL;
    size_t len = 0;
    if (!cfg || !cfg->cmd)
        return NULL;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    for (int i = 0; i < EC_K__COUNT; i++) {
        const ec_knob_t *k = &knobs[i];
        if (!(k->cmds & cfg->cmd))
            continue;
        char v[1024];
        fmt_value(cfg, k, v, sizeof(v));
        const ec_source_t *s = &cfg->src[i];
        switch (s->kind) {
        case EC_SRC_FLAG:
            fprintf(f, "%s: %s (source: flag --%s)\n", k->name, v, s->name);
            break;
        case EC_SRC_ENV:
            fprintf(f, "%s: %s (source: env %s)\n", k->name, v, s->name);
            break;
        case EC_SRC_FILE:
            fprintf(f, "%s: %s (source: file %s)\n", k->name, v, s->name);
            break;
        default:
            if (s->name)
                fprintf(f, "%s: %s (source: default: %s)\n", k->name, v, s->name);
            else
                fprintf(f, "%s: %s (source: default)\n", k->name, v);
        }
    }
    if (cfg->cmd == EC_CMD_LAUNCH && cfg->prog_argc > 0) {
        fprintf(f, "program:");
        for (int i = 0; i < cfg->prog_argc; i++) {
            const char *a = cfg->prog_argv[i];
            if (*a && !strpbrk(a, " \t\n'\"\\$`"))
                fprintf(f, " %s", a);
            else { /* shell-quote, so the line can be pasted back */
                fputs(" '", f);
                for (; *a; a++)
                    *a == '\'' ? fputs("'\\''", f) : fputc(*a, f);
                fputc('\'', f);
            }
        }
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
