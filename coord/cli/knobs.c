/* The table of knobs and the driver of parsing: flags, then environment
 * aliases, then the rules across knobs (knob_rules.c); the values
 * themselves are parsed in knob_parse.c, --help and the dump are
 * knob_help.c's.
 *
 * Adding a knob: a field in ec_config_t, an id in ec_knob_id_t, a row in
 * knobs[] below.  Parsing, env aliases, help and dump follow from the row;
 * only rules that tie several knobs together need code (knob_rules.c).
 * knobs_impl.h says which file does what.
 */
#include "knobs.h"
#include "knobs_impl.h"
#include "env_contract.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define L EC_CMD_LAUNCH
#define S EC_CMD_STATUS
#define C EC_CMD_CHECK
#define OFF(field) offsetof(ec_config_t, field)


static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const rebuilds[] = {"restart", "inprocess", NULL};

/* clang-format off */
const ec_knob_t ec__knobs[EC_K__COUNT] = {
    /* ---- etcd ---------------------------------------------------------- */
    [EC_K_ELASTIC_SERVER] = {
        .id = EC_K_ELASTIC_SERVER, .name = "elastic_server",
        .spellings = {"elastic_server"},
        .env = {EC_ENV_ELASTIC_SERVER, "PADDLE_ELASTIC_SERVER"},
        .type = EC_KT_STRLIST, .cmds = L | S | C, .flags = EC_KF_EMPTY_OK,
        .def = "", .def_help = "empty: launch and check run an embedded etcd",
        .metavar = "HOST:PORT[,...]", .example = "10.0.0.1:2379", .group = "etcd",
        .help = "etcd endpoints, comma separated; every node of a job names the same "
                "etcd. Empty: `ecoord launch` and `ecoord check` run an embedded etcd on "
                "this node; `ecoord status` needs the job's.",
        .offset = OFF(elastic_server), .check = ec__knob_check_endpoint},
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
        .offset = OFF(master), .check = ec__knob_check_endpoint},
    [EC_K_ETCD_PREFIX] = {
        .id = EC_K_ETCD_PREFIX, .name = "etcd_prefix",
        .spellings = {"etcd_prefix"}, .env = {EC_ENV_ETCD_PREFIX},
        .type = EC_KT_STRING, .cmds = L | S | C, .flags = EC_KF_EMPTY_OK,
        .max = 256, .def = "", .def_help = "none: keys start at /JOB_ID/",
        .metavar = "/PREFIX", .example = "/ecoord", .group = "etcd",
        .help = "key prefix for an etcd shared with other users: keys become "
                "/PREFIX/JOB_ID/... It starts with '/' and does not end with one.",
        .offset = OFF(etcd_prefix), .check = ec__knob_check_prefix},
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
        .offset = OFF(etcd_proxy), .check = ec__knob_check_proxy},
    [EC_K_ETCD_WAIT] = {
        .id = EC_K_ETCD_WAIT, .name = "etcd_wait",
        .spellings = {"etcd_wait"}, .env = {"ECOORD_ETCD_WAIT"},
        .type = EC_KT_SECONDS, .cmds = L, .min = 0, .max = 86400000,
        .def = "60", .def_help = "60 (0: give up at once)",
        .metavar = "SECONDS", .example = "600", .group = "etcd",
        .help = "at start, how long to wait for an etcd that does not answer yet (pods and "
                "etcd started together, etcd restarting) before giving up with exit 1; the "
                "first failure is said at once. What waiting cannot fix (a TLS etcd reached "
                "plain, a failed TLS handshake, a refused login) ends it at once.",
        .offset = OFF(etcd_wait_ms)},

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
        .offset = OFF(job_id), .check = ec__knob_check_job_id},
    [EC_K_ROLE] = {
        .id = EC_K_ROLE, .name = "role",
        .spellings = {"role"}, .env = {"ECOORD_ROLE"},
        .type = EC_KT_STRING, .cmds = L, .max = 128,
        .def = "default", .metavar = "NAME", .example = "trainer", .group = "job",
        .help = "the processes' ROLE_NAME, as torchrun's --role sets it; every process of the "
                "job has the same role.",
        .offset = OFF(role), .check = ec__knob_check_role},
    [EC_K_RUN_MODE] = {
        .id = EC_K_RUN_MODE, .name = "run_mode",
        .spellings = {"run_mode"}, .env = {"ECOORD_RUN_MODE", "PADDLE_RUN_MODE"},
        .type = EC_KT_STRING, .cmds = L | C, .max = 64,
        .def = "collective", .metavar = "collective", .example = "collective", .group = "job",
        .help = "Paddle's run mode, accepted so Paddle command lines keep working: ecoord runs "
                "collective jobs only (every process a trainer), so collective is the one value.",
        .offset = OFF(run_mode), .check = ec__knob_check_run_mode},
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
        .offset = OFF(node_id), .check = ec__knob_check_node_id},
    [EC_K_HOST] = {
        .id = EC_K_HOST, .name = "host",
        .spellings = {"host"}, .env = {"ECOORD_HOST", "POD_IP"},
        .type = EC_KT_STRING, .cmds = L | C, .flags = EC_KF_EMPTY_OK,
        .max = 255, .def = "", .def_help = "POD_IP, else detected",
        .metavar = "ADDR", .example = "10.0.0.7", .group = "this node",
        .help = "address the other nodes reach this node's processes at; set it when "
                "the machine has several interfaces (docker0, lo, ...).",
        .offset = OFF(host), .check = ec__knob_check_host},
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
    /* Restart mode's stop barrier (coord/core/stop_barrier.h). */
    [EC_K_STOP_BARRIER] = {
        .id = EC_K_STOP_BARRIER, .name = "stop_barrier",
        .spellings = {"stop_barrier"}, .env = {"ECOORD_STOP_BARRIER"},
        .type = EC_KT_BOOL, .cmds = L, .def = "true", .example = "false",
        .group = "this node",
        .help = "restart mode: start a rank's process only once the node that held that rank "
                "before has stopped its own, or can no longer have one. A rank taken from a "
                "frozen node, or from one whose host vanished, then waits for what was left "
                "of that node's lease (up to --lease_ttl); false starts it at once, and the "
                "old process may run beside it until its own node's fence or watchdog "
                "stops it.",
        .offset = OFF(stop_barrier)},
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
        .offset = OFF(hang_timeout), .check = ec__knob_check_hang_timeout},
    /* A pause (ecw_progress_pause, ecoord.progress.paused) is a promise to
     * come back; one never kept (a checkpoint stuck on its storage) would
     * otherwise excuse the job's silence for ever (coord/agent/progress.c). */
    [EC_K_MAX_PAUSE] = {
        .id = EC_K_MAX_PAUSE, .name = "max_pause",
        .spellings = {"max_pause"}, .env = {"ECOORD_MAX_PAUSE"},
        .type = EC_KT_SECONDS, .cmds = L, .min = 0, .max = 604800000,
        .def = "3600", .def_help = "3600: an hour", .metavar = "SECONDS", .example = "7200",
        .group = "hangs and stragglers",
        .help = "the longest a declared pause (a checkpoint: ecw_progress_pause/resume, "
                "ecoord.progress.paused) excuses a rank's silence; past it the pause counts as "
                "silence from its start, so --hang_timeout names the node. 0: a pause excuses "
                "silence however long it lasts.",
        .offset = OFF(max_pause_ms)},
    [EC_K_STRAGGLER_FACTOR] = {
        .id = EC_K_STRAGGLER_FACTOR, .name = "straggler_factor",
        .spellings = {"straggler_factor"}, .env = {"ECOORD_STRAGGLER_FACTOR"},
        .type = EC_KT_STRING, .cmds = L, .max = 32,
        .def = "off", .def_help = "off: stragglers are only reported (ecoord status, metrics)",
        .metavar = "FACTOR|off", .example = "2", .group = "hangs and stragglers",
        .help = "a node whose median step time over a sliding window is more than FACTOR "
                "times the job's median (3 nodes or more reporting steps) is treated as a "
                "suspect and evicted, at most once every 10 minutes. A number above 1.",
        .offset = OFF(straggler_factor), .check = ec__knob_check_straggler},

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

const ec__command_t ec__commands[] = {
    {EC_CMD_LAUNCH, "launch", "ecoord launch [FLAGS] [--] PROGRAM [ARGS...]",
     "Join (or start) an elastic job and run PROGRAM's processes on this node, "
     "restarting or rebuilding them as nodes come and go."},
    {EC_CMD_STATUS, "status", "ecoord status [FLAGS]",
     "Show a job's nodes, its current epoch and its recent failures."},
    {EC_CMD_CHECK, "check", "ecoord check [FLAGS]",
     "Run the checks that catch the usual failures (devices, ports, etcd, a collective "
     "across all nodes) before training."},
};
const size_t ec__ncommands = sizeof(ec__commands) / sizeof(ec__commands[0]);


/* The environment ecoord reads besides its knobs' aliases (above), with
 * why: with the aliases, every variable any part of ecoord reads.  (The
 * agent also hands the training processes its whole environment, and
 * `ecoord check` publishes an allowlist of it: coord/check/command.h.) */
const ec__env_note_t ec__env_other[] = {
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
    {"PYTHON_EXEC", "`ecoord torchrun`: the script's interpreter when neither --python nor "
                    "ECOORD_PYTHON is given, as torchrun reads it"},
    {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",
     "`ecoord torchrun`: the prefix of each line --tee shows, with $role_name, $rank, "
     "$local_rank and $hostname, as torchrun reads it"},
    {"PET_*", "`ecoord torchrun`: PET_<FLAG> (PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR, "
              "PET_RDZV_ENDPOINT, ...) for each torchrun flag not on its command line, as "
              "torchrun reads them (Kubeflow's PyTorchJob sets them)"},
};
const size_t ec__nenv_other = sizeof(ec__env_other) / sizeof(ec__env_other[0]);

static int env_listed(const char *name)
{
    for (int i = 0; i < EC_K__COUNT; i++)
        for (int a = 0; a < 3 && ec__knobs[i].env[a]; a++)
            if (!strcmp(ec__knobs[i].env[a], name))
                return 1;
    for (size_t i = 0; i < ec__nenv_other; i++) {
        const char *o = ec__env_other[i].name;
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
    return &ec__knobs[id];
}

ec_cmd_t ec_config_cmd(const char *subcommand)
{
    for (size_t i = 0; subcommand && i < ec__ncommands; i++)
        if (strcmp(subcommand, ec__commands[i].name) == 0)
            return ec__commands[i].cmd;
    return 0;
}

const char *ec_config_cmd_name(ec_cmd_t cmd)
{
    for (size_t i = 0; i < ec__ncommands; i++)
        if (cmd == ec__commands[i].cmd)
            return ec__commands[i].name;
    return "?";
}

void ec__knob_warnf(ec_config_t *cfg, const char *fmt, ...)
{
    if (cfg->nwarnings >= EC_CONFIG_MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cfg->warnings[cfg->nwarnings++], sizeof(cfg->warnings[0]), fmt, ap);
    va_end(ap);
}

void ec_config_release(ec_config_t *cfg)
{
    if (!cfg)
        return;
    int saved = errno;
    for (int i = 0; i < EC_K__COUNT; i++)
        ec__knob_free_field(cfg, &ec__knobs[i]);
    size_t size = cfg->size;
    const char *hostname = cfg->hostname;
    memset(cfg, 0, sizeof(*cfg));
    cfg->size = size;
    cfg->hostname = hostname;
    cfg->prog_index = -1;
    errno = saved;
}

/* ------------------------------------------------------------------------ */
/* flag lookup                                                              */

/* ------------------------------------------------------------------------ */
/* flag lookup and suggestions                                              */

static const ec_knob_t *find_flag(const char *norm, const char **spelling)
{
    for (int i = 0; i < EC_K__COUNT; i++)
        for (int j = 0; j < 3 && ec__knobs[i].spellings[j]; j++)
            if (strcmp(norm, ec__knobs[i].spellings[j]) == 0) {
                *spelling = ec__knobs[i].spellings[j];
                return &ec__knobs[i];
            }
    return NULL;
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

static int cmd_list(unsigned cmds, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ec__ncommands; i++)
        if (cmds & ec__commands[i].cmd)
            used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s'ecoord %s'",
                                     used ? " and " : "", ec__commands[i].name);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* parse                                                                    */

/* Whether a word reads as a boolean value (true, false, yes, no, on, off),
 * in any case: after a boolean flag written without '=' it was meant as
 * its value. */
static bool bool_word(const char *w)
{
    static const char *const words[] = {"true", "false", "yes", "no", "on", "off"};
    for (size_t j = 0; j < sizeof(words) / sizeof(words[0]); j++)
        if (!strcasecmp(w, words[j]))
            return true;
    return false;
}

/* Could argv token t be the separate value of knob k?  Not when it looks
 * like a flag, except a negative number for a knob that takes one. */
static int takes_as_value(const ec_knob_t *k, const char *t)
{
    if (t[0] != '-' || t[1] == '\0')
        return 1;
    long long x;
    return k->type == EC_KT_INT && k->min < 0 && ec__knob_parse_ll(t, &x) == 0;
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
            return ec__knob_unknown_flag("-", typed, norm, cfg->cmd, err);
        }
        if (!k)
            return ec__knob_unknown_flag("--", typed, norm, cfg->cmd, err);
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
        else if (k->type == EC_KT_BOOL && cfg->cmd == EC_CMD_LAUNCH && i + 1 < argc &&
                 bool_word(argv[i + 1]))
            /* `--stop_barrier false ./prog` would run false as the program */
            return ec_errorf(err, EC_EINVAL,
                             "--%s takes no separate value, and '%s' would run as the program: "
                             "write --%s=%s (or put the program after '--')",
                             typed, argv[i + 1], typed, argv[i + 1]);
        else if (k->type == EC_KT_BOOL)
            v = "true"; /* never takes the next word: `--watch prog` stays unambiguous */
        else if (i + 1 < argc && takes_as_value(k, argv[i + 1]))
            v = argv[++i];
        else if (i + 1 < argc)
            return ec_errorf(err, EC_EINVAL,
                             "--%s needs a value but is followed by %s; write --%s=%s, e.g. "
                             "--%s=%s (a value that starts with '-' must be written with '=')",
                             typed, argv[i + 1], spelling, k->metavar, spelling,
                             ec__knob_example(k));
        else
            return ec_errorf(err, EC_EINVAL, "--%s needs a value; write --%s=%s, e.g. --%s=%s",
                             typed, spelling, k->metavar, spelling, ec__knob_example(k));
        ec__knob_describe(where, sizeof(where), "--", typed, v, "");
        snprintf(fix, sizeof(fix), "--%s=", spelling);
        int rc = ec__knob_set_value(cfg, k, v, where, fix, err);
        if (rc)
            return rc;
        if (cfg->src[k->id].kind == EC_SRC_FLAG && raw[k->id] && strcmp(raw[k->id], v) != 0)
            ec__knob_warnf(cfg, "--%s given twice (%s, then %s): the last one wins", k->name,
                           raw[k->id], v);
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
        const ec_knob_t *k = &ec__knobs[i];
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
                    ec__knob_warnf(cfg, "%s=%s is ignored: --%s on the command line wins",
                                   k->env[j], secret ? "(hidden)" : v, cfg->src[i].name);
                continue;
            }
            if (won) {
                if (strcmp(v, won_v) != 0)
                    ec__knob_warnf(cfg, "%s=%s is ignored: %s=%s takes precedence", k->env[j],
                                   secret ? "(hidden)" : v, won, secret ? "(hidden)" : won_v);
                continue;
            }
            ec__knob_describe(where, sizeof(where), "", k->env[j], secret ? "(hidden)" : v,
                              " (environment)");
            snprintf(fix, sizeof(fix), "%s=", k->env[j]);
            int rc = ec__knob_set_value(cfg, k, v, where, fix, err);
            if (rc)
                return rc;
            cfg->src[i] = (ec_source_t){EC_SRC_ENV, k->env[j]};
            won = k->env[j];
            won_v = v;
        }
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
        snprintf(where, sizeof(where), "default of %s", ec__knobs[i].name);
        if ((rc = ec__knob_set_value(cfg, &ec__knobs[i], ec__knobs[i].def, where, "", err))) {
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
    if ((rc = ec__knob_resolve(cfg, env, env_arg, err)))
        return rc;
    return ec_config_validate(cfg, env, env_arg, err);
}
