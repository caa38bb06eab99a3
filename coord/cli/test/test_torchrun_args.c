/* The rule under test: a torchrun command line means the same under
 * `ecoord torchrun`, by translation onto the one knob table: each torchrun
 * flag lands on its knob (or is accepted with a warning saying what ecoord
 * does instead, or refused with why), or read from PET_<FLAG> when not on
 * the command line, as torchrun reads them; the rendezvous forms where one
 * node hosts the store (static: --node_rank, --master_addr/--master_port;
 * c10d: --rdzv_endpoint) have that node serve the etcd every node uses; the
 * program and its arguments are found and passed as torchrun finds them,
 * torchrun's defaults hold where they differ from ecoord launch's, and
 * nothing is matched by a prefix.
 */
#include "torchrun_args.h"

#include <ec_check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARGS(...) ((char *[]){__VA_ARGS__, NULL})

static ec_torchrun_t t;
static ec_config_t cfg;
static ec_error_t err;
static const ec_torchrun_host_t host = {.ngpus = 4, .ncpus = 16};
static const ec_torchrun_host_t no_gpu = {.ngpus = 0, .ncpus = 8};

/* The environment of a run: NAME=VALUE strings, NULL-ended (none: NULL). */
static const char **run_env;

static const char *test_env(const char *name, void *arg)
{
    (void)arg;
    size_t n = strlen(name);
    for (const char **e = run_env; e && *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}
#define ENVV(...) ((const char *[]){__VA_ARGS__, NULL})

static int argc_of(char **argv)
{
    int n = 0;
    while (argv[n])
        n++;
    return n;
}

/* translate, parse as launch, apply torchrun's defaults */
static int run(const ec_torchrun_host_t *h, char **argv)
{
    ec_torchrun_release(&t);
    ec_config_release(&cfg);
    ec_error_clear(&err);
    int rc = ec_torchrun_translate(argc_of(argv), argv, h, test_env, NULL, &t, &err);
    if (rc || t.help)
        return rc;
    rc = ec_config_parse(&cfg, "launch", t.argc, t.argv, test_env, NULL, &err);
    return rc ? rc : ec_torchrun_apply(&t, &cfg, test_env, NULL, &err);
}

#define OK(h, ...) ck_assert_msg(run(h, ARGS(__VA_ARGS__)) == 0, "refused: %s", err.msg)
#define REFUSED(needle, ...)                                                        \
    do {                                                                            \
        ck_assert_int_eq(run(&host, ARGS(__VA_ARGS__)), EC_EINVAL);                 \
        ck_assert_msg(strstr(err.msg, (needle)), "'%s' not in: %s", (needle), err.msg); \
    } while (0)

static int warned(const char *needle)
{
    for (int i = 0; i < cfg.nwarnings; i++)
        if (strstr(cfg.warnings[i], needle))
            return 1;
    return 0;
}

static void setup(void)
{
    ec_config_t fresh = EC_CONFIG_INITIALIZER;
    cfg = fresh;
    cfg.hostname = "host-a";
    memset(&t, 0, sizeof(t));
    run_env = NULL;
}

static void teardown(void)
{
    ec_torchrun_release(&t);
    ec_config_release(&cfg);
}

START_TEST(torchrun_flags_land_on_knobs)
{
    OK(&host, "--nnodes=2:4", "--nproc_per_node=8", "--rdzv_backend=etcd",
       "--rdzv_endpoint=10.0.0.5:2379", "--rdzv_id=job7", "--max_restarts=2", "--role=trainer",
       "--log_dir=/tmp/l", "--local_addr=10.0.0.9", "--rdzv_conf=last_call_timeout=12",
       "train.py", "--lr=0.1");
    ck_assert_int_eq(cfg.np.min, 2);
    ck_assert_int_eq(cfg.np.max, 4);
    ck_assert_int_eq(cfg.nproc_per_node, 8);
    ck_assert_int_eq(cfg.elastic_server.n, 1);
    ck_assert_str_eq(cfg.elastic_server.v[0], "10.0.0.5:2379");
    ck_assert_str_eq(cfg.job_id, "job7");
    ck_assert_int_eq(cfg.max_restart, 2);
    ck_assert_str_eq(cfg.role, "trainer");
    ck_assert_str_eq(cfg.log_dir, "/tmp/l");
    ck_assert_str_eq(cfg.host, "10.0.0.9");
    ck_assert_int_eq(cfg.elastic_timeout_ms, 12000);
    ck_assert_int_eq(cfg.prog_argc, 2);
    ck_assert_str_eq(cfg.prog_argv[0], "train.py");
    ck_assert_str_eq(cfg.prog_argv[1], "--lr=0.1");
    /* torch 2's dashed spellings, separate values, every etcd backend name */
    const char *backends[] = {"etcd", "etcd-v2", "etcd-v3"};
    for (int i = 0; i < 3; i++) {
        char be[64];
        snprintf(be, sizeof(be), "--rdzv-backend=%s", backends[i]);
        OK(&host, "--nproc-per-node", "2", be, "--rdzv-endpoint", "etcd.local", "t.py");
        ck_assert_int_eq(cfg.nproc_per_node, 2);
        ck_assert_str_eq(cfg.elastic_server.v[0], "etcd.local:2379"); /* etcd's port */
    }
    /* -m and --no_python */
    OK(&host, "--standalone", "-m", "pkg.train", "--x");
    ck_assert_int_eq(cfg.module, 1);
    ck_assert_str_eq(cfg.prog_argv[0], "pkg.train");
    OK(&host, "--standalone", "--no_python", "./run.sh");
    ck_assert_int_eq(cfg.no_python, 1);
    /* etcd TLS through --rdzv_conf, as torch's etcd rendezvous takes it */
    OK(&host, "--rdzv_backend=etcd", "--rdzv_endpoint=e:2379",
       "--rdzv_conf=protocol=https,cacert=/dev/null", "t.py");
    ck_assert_str_eq(cfg.elastic_server.v[0], "https://e:2379");
    ck_assert_str_eq(cfg.etcd_cacert, "/dev/null");
}
END_TEST

START_TEST(nproc_per_node_words)
{
    OK(&host, "--standalone", "--nproc_per_node=gpu", "t.py");
    ck_assert_int_eq(cfg.nproc_per_node, 4);
    OK(&host, "--standalone", "--nproc_per_node=cpu", "t.py");
    ck_assert_int_eq(cfg.nproc_per_node, 16);
    OK(&host, "--standalone", "--nproc_per_node=auto", "t.py");
    ck_assert_int_eq(cfg.nproc_per_node, 4);
    OK(&no_gpu, "--standalone", "--nproc_per_node=auto", "t.py");
    ck_assert_int_eq(cfg.nproc_per_node, 8);
    ck_assert_int_eq(run(&no_gpu, ARGS("--standalone", "--nproc_per_node=gpu", "t.py")), EC_EINVAL);
    ck_assert(strstr(err.msg, "no GPU"));
    REFUSED("--nproc_per_node=many", "--nproc_per_node=many", "t.py");
}
END_TEST

START_TEST(torchrun_defaults_where_they_differ)
{
    /* no --max_restarts: torchrun restarts nothing */
    OK(&host, "--standalone", "t.py");
    ck_assert_int_eq(cfg.max_restart, 0);
    ck_assert_int_eq(cfg.src[EC_K_MAX_RESTART].kind, EC_SRC_DEFAULT);
    ck_assert_ptr_nonnull(strstr(cfg.src[EC_K_MAX_RESTART].name, "torchrun"));
    /* torchrun gives up a rendezvous after 600 s */
    ck_assert_int_eq(cfg.join_timeout_ms, 600000);
    OK(&host, "--standalone", "--rdzv_conf=timeout=30", "t.py");
    ck_assert_int_eq(cfg.join_timeout_ms, 30000);
    OK(&host, "--standalone", "t.py");
    /* any script runs under the interpreter, as torchrun runs it */
    ck_assert_int_eq(cfg.prog_always_python, 1);
    /* a failed node exits 1 as torchrun does, not Paddle's 101 */
    ck_assert_int_eq(cfg.fixed_failure_exit, 1);
    /* --standalone: an etcd of this node's own, so no warning about a shared job id */
    ck_assert_int_eq(cfg.elastic_server.n, 0);
    ck_assert(!warned("no --job_id"));
    /* no rendezvous flag at all, one node: the same */
    OK(&host, "--nproc_per_node=2", "t.py");
    ck_assert_int_eq(cfg.elastic_server.n, 0);
    ck_assert_int_eq(cfg.np.max, 1);
}
END_TEST

START_TEST(refused_with_why)
{
    REFUSED("--rdzv_endpoint", "--rdzv_backend=etcd", "t.py");
    REFUSED("each node needs its --node_rank", "--nnodes=2", "t.py");
    REFUSED("--rdzv_endpoint=HOST:PORT", "--rdzv_backend=c10d", "--nnodes=2", "t.py");
    REFUSED("single-node job", "--standalone", "--nnodes=1:2", "t.py");
    REFUSED("ecoord coordinates through etcd", "--rdzv_backend=zookeeper", "t.py");
    REFUSED("no training script given", "--standalone");
    REFUSED("takes no value", "--standalone=1", "t.py");
    REFUSED("needs a value", "--rdzv_id", "--standalone", "t.py");
    REFUSED("contradict", "--standalone", "--run_path", "--no_python", "t.py");
}
END_TEST

/* torchrun's static rendezvous (SLURM and hand-written multi-node recipes:
 * --nnodes=N --node_rank=K --master_addr=A --master_port=P): node_rank 0
 * hosts the store at A:P, so it serves the job's etcd there; every other
 * node uses A:P as --elastic_server; each node's node_rank is its place. */
START_TEST(static_rendezvous_node_rank_0_serves_the_etcd_the_others_use)
{
    OK(&host, "--nnodes=2", "--node_rank=0", "--master_addr=10.0.0.1", "--master_port=23456",
       "--nproc_per_node=2", "t.py");
    ck_assert_int_eq(cfg.elastic_server.n, 0); /* its own, on A:P */
    ck_assert_int_eq(cfg.torchrun.serve, 1);
    ck_assert_str_eq(cfg.torchrun.serve_host, "10.0.0.1");
    ck_assert_int_eq(cfg.torchrun.serve_port, 23456);
    ck_assert_int_eq(cfg.torchrun.static_rdzv, 1);
    ck_assert_int_eq(cfg.torchrun.node_rank, 0);
    ck_assert_int_eq(cfg.np.min, 2);
    ck_assert_int_eq(cfg.np.max, 2);
    ck_assert_str_eq(cfg.job_id, "none"); /* torchrun's --rdzv_id default: the etcd is the job's */
    ck_assert(!warned("no --job_id"));
    OK(&host, "--nnodes", "2", "--node_rank", "1", "--master_addr", "10.0.0.1", "--master_port",
       "23456", "t.py");
    ck_assert_int_eq(cfg.elastic_server.n, 1);
    ck_assert_str_eq(cfg.elastic_server.v[0], "10.0.0.1:23456");
    ck_assert_int_eq(cfg.torchrun.serve, 0);
    ck_assert_int_eq(cfg.torchrun.node_rank, 1);
    /* torchrun's defaults: 127.0.0.1:29500; --rdzv_id is the job id */
    OK(&host, "--nnodes=3", "--node_rank=2", "--rdzv_id=j7", "t.py");
    ck_assert_str_eq(cfg.elastic_server.v[0], "127.0.0.1:29500");
    ck_assert_str_eq(cfg.job_id, "j7");
    /* a static endpoint instead of --master_*, as torchrun takes it */
    OK(&host, "--nnodes=2", "--node_rank=1", "--rdzv_endpoint=[fd00::1]:7000", "t.py");
    ck_assert_str_eq(cfg.elastic_server.v[0], "[fd00::1]:7000");
    ck_assert_str_eq(cfg.torchrun.serve_host, "fd00::1");
    /* wrong ones, with what to write instead */
    REFUSED("node ranks go from 0 to 1", "--nnodes=2", "--node_rank=2", "t.py");
    REFUSED("write a node rank", "--nnodes=2", "--node_rank=-1", "t.py");
    REFUSED("its size is fixed", "--nnodes=1:3", "--node_rank=0", "t.py");
    REFUSED("a port from 1 to 65535", "--nnodes=2", "--node_rank=0", "--master_port=99999", "t.py");
    REFUSED("needs a port", "--nnodes=2", "--node_rank=0", "--rdzv_endpoint=host", "t.py");
    /* one node with no address at all: an etcd of its own on a free port */
    OK(&host, "--nproc_per_node=2", "t.py");
    ck_assert_int_eq(cfg.torchrun.serve, 0);
    ck_assert_int_eq(cfg.elastic_server.n, 0);
}
END_TEST

/* torchrun's c10d rendezvous (--rdzv_backend=c10d --rdzv_endpoint=HOST[:PORT],
 * port 29400 when left out): the node HOST names hosts the store, so every
 * node names HOST:PORT as its etcd and the one that owns the address serves
 * it (decided at start: coord/agent/launch.c); rdzv_conf's is_host decides
 * as in torchrun. */
START_TEST(c10d_rendezvous_the_endpoint_node_serves_the_etcd)
{
    OK(&host, "--nnodes=1:4", "--rdzv_backend=c10d", "--rdzv_endpoint=node1:1234", "--rdzv_id=j",
       "t.py");
    ck_assert_str_eq(cfg.elastic_server.v[0], "node1:1234");
    ck_assert_int_eq(cfg.torchrun.serve, 2);
    ck_assert_str_eq(cfg.torchrun.serve_host, "node1");
    ck_assert_int_eq(cfg.torchrun.serve_port, 1234);
    ck_assert_int_eq(cfg.torchrun.static_rdzv, 0);
    ck_assert_str_eq(cfg.job_id, "j");
    ck_assert_int_eq(cfg.np.min, 1);
    ck_assert_int_eq(cfg.np.max, 4);
    OK(&host, "--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=node1", "t.py");
    ck_assert_str_eq(cfg.elastic_server.v[0], "node1:29400");
    OK(&host, "--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=node1",
       "--rdzv_conf=is_host=false", "t.py");
    ck_assert_int_eq(cfg.torchrun.serve, 0);
    OK(&host, "--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=node1",
       "--rdzv_conf=is_host=1", "t.py");
    ck_assert_int_eq(cfg.torchrun.serve, 1);
    ck_assert_int_eq(cfg.elastic_server.n, 0);
    REFUSED("write true or false", "--rdzv_backend=c10d", "--rdzv_endpoint=h",
            "--rdzv_conf=is_host=maybe", "t.py");
    /* torchrun's "stacked single-node" idiom: port 0, a free port */
    OK(&host, "--rdzv_backend=c10d", "--rdzv_endpoint=localhost:0", "--nnodes=1", "t.py");
    ck_assert_int_eq(cfg.elastic_server.n, 0);
    ck_assert_int_eq(cfg.torchrun.serve, 0);
    REFUSED("works for one node only", "--rdzv_backend=c10d", "--rdzv_endpoint=h:0",
            "--nnodes=2", "t.py");
    /* --node_rank and --master_* mean nothing here, as in torchrun */
    OK(&host, "--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=h:5", "--node_rank=1",
       "--master_addr=x", "t.py");
    ck_assert(warned("--node_rank=1 is ignored, as torchrun ignores it"));
    ck_assert(warned("--master_addr=x is ignored"));
    ck_assert_int_eq(cfg.torchrun.static_rdzv, 0);
    OK(&host, "--rdzv_backend=c10d", "--node_rank=0", "t.py"); /* one node: its own etcd */
    ck_assert_int_eq(cfg.elastic_server.n, 0);
    ck_assert_int_eq(cfg.torchrun.serve, 0);
}
END_TEST

/* Each torchrun flag not on the command line comes from PET_<FLAG>, as
 * torchrun's argparse actions read them (Kubeflow's PyTorchJob sets
 * PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR,
 * PET_MASTER_PORT, or PET_RDZV_* for elastic jobs): the flag wins, an empty
 * one is unset, a boolean is an integer. */
START_TEST(pet_variables_are_read_as_torchrun_reads_them)
{
    run_env = ENVV("PET_NNODES=2", "PET_NPROC_PER_NODE=4", "PET_NODE_RANK=1",
                   "PET_MASTER_ADDR=10.1.1.1", "PET_MASTER_PORT=23456", "PET_MAX_RESTARTS=2");
    OK(&host, "t.py");
    ck_assert_int_eq(cfg.np.max, 2);
    ck_assert_int_eq(cfg.nproc_per_node, 4);
    ck_assert_int_eq(cfg.torchrun.node_rank, 1);
    ck_assert_str_eq(cfg.elastic_server.v[0], "10.1.1.1:23456");
    ck_assert_int_eq(cfg.max_restart, 2);
    /* the flag wins */
    OK(&host, "--nproc_per_node=1", "--node_rank=0", "t.py");
    ck_assert_int_eq(cfg.nproc_per_node, 1);
    ck_assert_int_eq(cfg.torchrun.serve, 1);
    /* elastic PyTorchJob */
    run_env = ENVV("PET_NNODES=1:3", "PET_RDZV_BACKEND=c10d", "PET_RDZV_ENDPOINT=job-master-0:23456",
                   "PET_RDZV_ID=pj");
    OK(&host, "t.py");
    ck_assert_str_eq(cfg.elastic_server.v[0], "job-master-0:23456");
    ck_assert_str_eq(cfg.job_id, "pj");
    ck_assert_int_eq(cfg.np.max, 3);
    /* booleans: an integer, 0 off */
    run_env = ENVV("PET_STANDALONE=1");
    OK(&host, "t.py");
    ck_assert_str_eq(cfg.job_id, "standalone");
    run_env = ENVV("PET_STANDALONE=0", "PET_NNODES=2");
    REFUSED("each node needs its --node_rank", "t.py");
    run_env = ENVV("PET_STANDALONE=yes");
    REFUSED("PET_STANDALONE=yes", "t.py");
    /* empty: unset */
    run_env = ENVV("PET_NNODES=", "PET_RDZV_BACKEND=");
    OK(&host, "t.py");
    ck_assert_int_eq(cfg.np.max, 1);
    /* a bad value is named by its variable */
    run_env = ENVV("PET_NNODES=2", "PET_NODE_RANK=x");
    REFUSED("PET_NODE_RANK=x", "t.py");
    run_env = ENVV("PET_TEE=9");
    REFUSED("PET_TEE=9", "--standalone", "t.py");
}
END_TEST

/* What torchrun reads of its environment besides PET_*: PYTHON_EXEC, the
 * script's interpreter (ecoord's --python and ECOORD_PYTHON win over it),
 * and TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, the prefix of the lines --tee
 * shows (filled per rank by the agent: ec_procs_prefix_format). */
START_TEST(python_exec_and_the_prefix_template_are_read_as_torchrun_reads_them)
{
    run_env = ENVV("PYTHON_EXEC=/opt/py/bin/python3.11",
                   "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=[rank${rank}]: ");
    OK(&host, "t.py");
    ck_assert_str_eq(cfg.python, "/opt/py/bin/python3.11");
    ck_assert_int_eq(cfg.src[EC_K_PYTHON].kind, EC_SRC_ENV);
    ck_assert_str_eq(cfg.src[EC_K_PYTHON].name, "PYTHON_EXEC");
    ck_assert_str_eq(cfg.torchrun.prefix_template, "[rank${rank}]: ");
    OK(&host, "--python=/usr/bin/python3", "t.py");
    ck_assert_str_eq(cfg.python, "/usr/bin/python3");
    run_env = ENVV("PYTHON_EXEC=/opt/py/bin/python3.11", "ECOORD_PYTHON=/usr/bin/python3");
    OK(&host, "t.py");
    ck_assert_str_eq(cfg.python, "/usr/bin/python3");
    ck_assert_str_eq(cfg.src[EC_K_PYTHON].name, "ECOORD_PYTHON");
    ck_assert_str_eq(cfg.torchrun.prefix_template, "");
    /* empty: unset */
    run_env = ENVV("PYTHON_EXEC=", "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=");
    OK(&host, "t.py");
    ck_assert_int_eq(cfg.src[EC_K_PYTHON].kind, EC_SRC_DEFAULT);
    ck_assert_str_eq(cfg.torchrun.prefix_template, "");
    /* longer than the agent keeps: refused, with its length */
    char big[400] = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE=";
    size_t n = strlen(big);
    memset(big + n, 'x', 300);
    big[n + 300] = '\0';
    run_env = ENVV(big);
    REFUSED("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE is 300 characters long", "t.py");
}
END_TEST

/* torchrun's console and files: -r/--redirects, -t/--tee and
 * --local_ranks_filter reach the agent (coord/agent/procs.h), and no log
 * directory is made unless --log_dir names one (torchrun writes nothing in
 * the working directory). */
START_TEST(console_and_files_as_torchrun)
{
    OK(&host, "--standalone", "-r", "0:2,1:3", "--tee=1", "--local-ranks-filter=0", "t.py");
    ck_assert_str_eq(cfg.torchrun.redirects, "0:2,1:3");
    ck_assert_str_eq(cfg.torchrun.tee, "1");
    ck_assert_str_eq(cfg.torchrun.ranks_filter, "0");
    ck_assert_int_eq(cfg.torchrun.on, 1);
    ck_assert_str_eq(cfg.log_dir, "");
    OK(&host, "--standalone", "--log_dir=/tmp/tl", "--rdzv_id=r1", "t.py");
    ck_assert_str_eq(cfg.log_dir, "/tmp/tl");
    ck_assert_str_eq(cfg.torchrun.run_id, "standalone");
    OK(&host, "--standalone", "t.py");
    ck_assert_str_eq(cfg.torchrun.redirects, "");
    REFUSED("comma separated", "--standalone", "--local_ranks_filter=a", "t.py");
}
END_TEST

START_TEST(accepted_with_a_warning)
{
    OK(&host, "--standalone", "--monitor_interval=5", "--start_method=spawn", "-r", "3",
       "--tee=0:1,1:2", "--rdzv_conf=join_timeout=900,read_timeout=60", "t.py");
    ck_assert(warned("--monitor_interval=5 has no effect"));
    ck_assert(warned("--start_method=spawn has no effect"));
    ck_assert(!warned("--redirects")); /* done, as torchrun does them */
    ck_assert(!warned("--tee"));
    ck_assert_int_eq(cfg.join_timeout_ms, 900000); /* mapped, not ignored */
    ck_assert(warned("read_timeout=60 is ignored"));
    REFUSED("write 0 (none)", "--standalone", "--redirects=7", "t.py");
    REFUSED("spawn, fork or forkserver", "--standalone", "--start_method=clone", "t.py");
}
END_TEST

START_TEST(program_found_as_torchrun_finds_it)
{
    /* the first word that is not a flag; after it everything is the program's */
    OK(&host, "--standalone", "train.py", "--nnodes=5", "--", "-x");
    ck_assert_int_eq(cfg.prog_argc, 4);
    ck_assert_str_eq(cfg.prog_argv[1], "--nnodes=5");
    ck_assert_str_eq(cfg.prog_argv[2], "--");
    ck_assert_int_eq(cfg.np.max, 1);
    /* -- ends the flags */
    OK(&host, "--standalone", "--", "--weird-name.py", "a");
    ck_assert_str_eq(cfg.prog_argv[0], "--weird-name.py");
    /* ecoord's own flags pass through to the table, with separate values */
    OK(&host, "--standalone", "--lease_ttl", "5", "--grace_period=1", "t.py");
    ck_assert_int_eq(cfg.lease_ttl_ms, 5000);
    ck_assert_int_eq(cfg.grace_period_ms, 1000);
}
END_TEST

START_TEST(no_prefix_matching_and_did_you_mean)
{
    REFUSED("did you mean --nproc_per_node", "--nproc=2", "t.py");
    REFUSED("did you mean --rdzv_endpoint", "--rdzv_endpont=e:1", "t.py");
    REFUSED("did you mean --max_restarts", "--max_restartz=1", "t.py");
    REFUSED("spelled in full", "--rdzv=etcd", "t.py");
    /* a typo of an ecoord flag gets the table's own suggestion */
    REFUSED("did you mean --lease_ttl", "--standalone", "--lease_tt=3", "t.py");
    REFUSED("-m, -r and -t", "-x", "t.py");
}
END_TEST

START_TEST(help_and_lifecycle)
{
    ck_assert_int_eq(
        ec_torchrun_translate(2, ARGS("--nnodes=2", "--help"), &host, NULL, NULL, &t, &err), 0);
    ck_assert_int_eq(t.help, 1);
    char *h = ec_torchrun_help();
    ck_assert_ptr_nonnull(strstr(h, "--rdzv_endpoint"));
    ck_assert_ptr_nonnull(strstr(h, "--node_rank"));
    free(h);
    ec_torchrun_release(&t);
    ec_torchrun_release(&t);
    ec_torchrun_release(NULL);
    /* a failed translation leaves nothing to release */
    ck_assert_int_eq(ec_torchrun_translate(1, ARGS("--node_rank=1"), &host, NULL, NULL, &t, &err),
                     EC_EINVAL);
    ck_assert_ptr_null(t.argv);
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("torchrun_args", setup, teardown,
                          EC_CHECK_TESTS(
                              torchrun_flags_land_on_knobs,
                              nproc_per_node_words,
                              torchrun_defaults_where_they_differ,
                              refused_with_why,
                              static_rendezvous_node_rank_0_serves_the_etcd_the_others_use,
                              c10d_rendezvous_the_endpoint_node_serves_the_etcd,
                              pet_variables_are_read_as_torchrun_reads_them,
                              python_exec_and_the_prefix_template_are_read_as_torchrun_reads_them,
                              console_and_files_as_torchrun,
                              accepted_with_a_warning,
                              program_found_as_torchrun_finds_it,
                              no_prefix_matching_and_did_you_mean,
                              help_and_lifecycle));
}

EC_CHECK_MAIN(suite)
