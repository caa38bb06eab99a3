/* The rule under test: one table of knobs decides how every flag is spelled,
 * which environment variable stands in for it and when, what values it takes,
 * what --help says and what the configuration block shows; nothing outside
 * the table is accepted, nothing is matched by prefix (--np is never
 * --nproc_per_node), an explicit flag always beats the environment, the
 * training program's own arguments are never touched, and the etcd password
 * never appears on a command line or in the dump.
 */
#include "knobs.h"
#include "netaddr.h"

#include <ctype.h>
#include <ec_check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ec_config_t cfg;
static ec_error_t err;
static char tmp_path[64];   /* a readable file, for path knobs           */
static char pw_path[64];    /* a file holding "s3cr3t-pw\n"               */

#define ARGS(...) ((char *[]){__VA_ARGS__ __VA_OPT__(, ) NULL})
#define ENV(...) ((const char *[]){__VA_ARGS__, NULL})
#define NOENV ((const char *[]){NULL})
#define NOARGS ((char *[]){NULL})

#define SECRET "s3cr3t-pw"

static const char *test_env(const char *name, void *arg)
{
    const char *const *e = arg;
    size_t n = strlen(name);
    for (; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    /* the same on every machine: no /dev/nvidiaN unless a test says so */
    if (!strcmp(name, "ECOORD_DEV_DIR"))
        return "/nonexistent/ecoord-test-dev";
    return NULL;
}

/* The argv handed to the parser must outlive cfg (prog_argv points into it),
 * while the macros below build it in a block scope: keep a copy here. */
static char *argv_store[64];

static int parse(const char *sub, const char **env, char **argv)
{
    int argc = 0;
    while (argv[argc] && argc < 63) {
        argv_store[argc] = argv[argc];
        argc++;
    }
    argv_store[argc] = NULL;
    return ec_config_parse(&cfg, sub, argc, argv_store, test_env, env, &err);
}

#define OK(sub, env, ...)                                                       \
    do {                                                                        \
        int rc_ = parse(sub, env, ARGS(__VA_ARGS__));                           \
        ck_assert_msg(rc_ == 0, "expected success, got %s: %s", ec_err_name(rc_), err.msg); \
    } while (0)
#define FAILS(want, sub, env, ...)                                              \
    do {                                                                        \
        int rc_ = parse(sub, env, ARGS(__VA_ARGS__));                           \
        ck_assert_msg(rc_ == (want), "expected %s, got %s (%s)", ec_err_name(want), \
                      ec_err_name(rc_), err.msg);                              \
        ck_assert_int_eq(err.code, (want));                                     \
    } while (0)
#define HAS(hay, needle)                                                        \
    ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' not found in: %.400s", (needle), (hay))
#define HASNT(hay, needle)                                                      \
    ck_assert_msg(strstr((hay), (needle)) == NULL, "'%s' unexpectedly in: %.400s", (needle), (hay))

static void write_file(const char *path, const char *content, mode_t mode)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(content, f);
    fclose(f);
    chmod(path, mode);
}

static void setup(void)
{
    ec_config_t fresh = EC_CONFIG_INITIALIZER;
    cfg = fresh;
    cfg.hostname = "host-a";
    ec_error_clear(&err);
    strcpy(tmp_path, "/tmp/ec_cfg_file_XXXXXX");
    int fd = mkstemp(tmp_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    strcpy(pw_path, "/tmp/ec_cfg_pw_XXXXXX");
    fd = mkstemp(pw_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    write_file(pw_path, SECRET "\n", 0600);
}

static void teardown(void)
{
    ec_config_release(&cfg);
    unlink(tmp_path);
    unlink(pw_path);
}

/* The dump line for a knob, without the trailing newline. */
static const char *dump_line(const char *name)
{
    static char line[1024];
    char *d = ec_config_dump(&cfg);
    ck_assert_ptr_nonnull(d);
    char key[64];
    snprintf(key, sizeof(key), "%s: ", name);
    line[0] = '\0';
    for (char *p = d; p && *p;) {
        char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (strncmp(p, key, strlen(key)) == 0 && n < sizeof(line)) {
            memcpy(line, p, n);
            line[n] = '\0';
            break;
        }
        p = nl ? nl + 1 : NULL;
    }
    free(d);
    return line;
}

static int has_warning(const char *needle)
{
    for (int i = 0; i < cfg.nwarnings; i++)
        if (strstr(cfg.warnings[i], needle))
            return 1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The table itself                                                         */

START_TEST(table_rows_are_complete_and_consistent)
{
    for (int i = 0; i < EC_K__COUNT; i++) {
        const ec_knob_t *k = ec_config_knob(i);
        ck_assert_ptr_nonnull(k);
        ck_assert_int_eq(k->id, i);
        ck_assert_ptr_nonnull(k->name);
        ck_assert_ptr_nonnull(k->help);
        ck_assert_ptr_nonnull(k->group);
        ck_assert_ptr_nonnull(k->def);
        ck_assert_uint_ne(k->cmds, 0);
        /* spellings[0] is the name, except for the environment-only password */
        if (k->type == EC_KT_SECRET)
            ck_assert_ptr_null(k->spellings[0]);
        else
            ck_assert_str_eq(k->spellings[0], k->name);
        /* every knob has ECOORD_<NAME> among its aliases */
        char want[64];
        snprintf(want, sizeof(want), "ECOORD_%s", k->name);
        for (char *p = want; *p; p++)
            *p = (char)toupper((unsigned char)*p);
        int found = 0;
        for (int j = 0; j < 3 && k->env[j]; j++)
            found |= strcmp(k->env[j], want) == 0;
        ck_assert_msg(found, "%s lacks the %s alias", k->name, want);
        /* no spelling appears twice in the table */
        for (int j = 0; j < 3 && k->spellings[j]; j++)
            for (int i2 = 0; i2 < EC_K__COUNT; i2++)
                for (int j2 = 0; j2 < 3 && ec_config_knob(i2)->spellings[j2]; j2++)
                    if (i2 != i || j2 != j)
                        ck_assert_str_ne(k->spellings[j], ec_config_knob(i2)->spellings[j2]);
    }
    ck_assert_ptr_null(ec_config_knob(EC_K__COUNT));
    ck_assert_ptr_null(ec_config_knob(-1));
    ck_assert_int_eq(ec_config_cmd("launch"), EC_CMD_LAUNCH);
    ck_assert_int_eq(ec_config_cmd("status"), EC_CMD_STATUS);
    ck_assert_int_eq(ec_config_cmd("check"), EC_CMD_CHECK);
    ck_assert_int_eq(ec_config_cmd("lau"), 0);
    ck_assert_str_eq(ec_config_cmd_name(EC_CMD_CHECK), "check");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Every spelling and every alias, table-driven                             */

/* A valid value for each knob, what the dump shows for it, and what else the
 * knob needs to pass validation.  "@" stands for tmp_path, "#" for pw_path. */
static const struct {
    int id;
    const char *value, *shown;
    const char *extra_arg, *extra_env;
} samples[] = {
    {EC_K_ELASTIC_SERVER, "10.0.0.1:2379,10.0.0.2:2379", "10.0.0.1:2379,10.0.0.2:2379", NULL, NULL},
    {EC_K_MASTER, "etcd://10.0.0.1:2379", "etcd://10.0.0.1:2379", NULL, NULL},
    {EC_K_ETCD_PREFIX, "/ecoord", "/ecoord", NULL, NULL},
    {EC_K_ETCD_CACERT, "@", "@", NULL, NULL},
    {EC_K_ETCD_CERT, "@", "@", "--etcd_key=@", NULL},
    {EC_K_ETCD_KEY, "@", "@", "--etcd_cert=@", NULL},
    {EC_K_ETCD_USER, "trainer", "trainer", NULL, "ECOORD_ETCD_PASSWORD=pw"},
    {EC_K_ETCD_PASSWORD, "pw", "(set, hidden)", "--etcd_user=trainer", NULL},
    {EC_K_ETCD_PASSWORD_FILE, "#", "#", "--etcd_user=trainer", NULL},
    {EC_K_ETCD_PROXY, "http://10.0.0.9:3128", "http://10.0.0.9:3128", NULL, NULL},
    {EC_K_ETCD_WAIT, "600", "600s", NULL, NULL},
    {EC_K_JOB_ID, "job1", "job1", NULL, NULL},
    {EC_K_RUN_MODE, "collective", "collective", NULL, NULL},
    {EC_K_ROLE, "trainer", "trainer", NULL, NULL},
    {EC_K_NP, "2:4", "2:4", NULL, NULL},
    {EC_K_ELASTIC_LEVEL, "1", "1", NULL, NULL},
    {EC_K_MAX_RESTART, "7", "7", NULL, NULL},
    {EC_K_FIXED_FAILURE_EXIT, "1", "1", NULL, NULL},
    {EC_K_NODE_FAILURE_EXIT, "101", "101", NULL, NULL},
    {EC_K_EPOCH_CHUNK_MEMBERS, "16", "16", NULL, NULL},
    {EC_K_ELASTIC_TIMEOUT, "45", "45s", NULL, NULL},
    {EC_K_JOIN_TIMEOUT, "600", "600s", NULL, NULL},
    {EC_K_REPLACE_WAIT, "60", "60s", NULL, NULL},
    {EC_K_JOIN_READY_TIMEOUT, "600", "600s", NULL, NULL},
    {EC_K_REBUILD, "inprocess", "inprocess", NULL, NULL},
    {EC_K_NODE_ID, "node-3", "node-3", NULL, NULL},
    {EC_K_HOST, "10.0.0.7", "10.0.0.7", NULL, NULL},
    {EC_K_GPUS, "0,1", "0,1", NULL, NULL},
    {EC_K_NPROC_PER_NODE, "2", "2", NULL, NULL},
    {EC_K_START_PORT, "40000", "40000", NULL, NULL},
    {EC_K_PORT_RANGE, "36000-36100", "36000-36100", NULL, NULL},
    {EC_K_LEASE_TTL, "20", "20s", NULL, NULL},
    {EC_K_LEASE_MARGIN, "25", "25", NULL, NULL},
    {EC_K_GRACE_PERIOD, "0.5", "0.5s", NULL, NULL},
    {EC_K_PEER_PROBE_INTERVAL, "0.5", "0.5s", NULL, NULL},
    {EC_K_PEER_PAUSE_TOLERANCE, "3", "3s", NULL, NULL},
    {EC_K_STOP_BARRIER, "true", "true", NULL, NULL},
    {EC_K_HANG_TIMEOUT, "600", "600", NULL, NULL},
    {EC_K_MAX_PAUSE, "7200", "7200s", NULL, NULL},
    {EC_K_STRAGGLER_FACTOR, "2.5", "2.5", NULL, NULL},
    {EC_K_PYTHON, "/usr/bin/python3", "/usr/bin/python3", NULL, NULL},
    {EC_K_NO_PYTHON, "true", "true", NULL, NULL},
    {EC_K_MODULE, "true", "true", NULL, NULL},
    {EC_K_LOG_DIR, "/tmp/logs", "/tmp/logs", NULL, NULL},
    {EC_K_LOG_LEVEL, "DEBUG", "debug", NULL, NULL},
    {EC_K_METRICS_PORT, "9400", "9400", NULL, NULL},
    {EC_K_JSON, "true", "true", NULL, NULL},
    {EC_K_WATCH, "true", "true", NULL, NULL},
};
#define NSAMPLES (int)(sizeof(samples) / sizeof(samples[0]))

static void subst(char *out, size_t len, const char *prefix, const char *in)
{
    size_t used = (size_t)snprintf(out, len, "%s", prefix);
    for (; in && *in && used + 64 < len; in++) {
        if (*in == '@')
            used += (size_t)snprintf(out + used, len - used, "%s", tmp_path);
        else if (*in == '#')
            used += (size_t)snprintf(out + used, len - used, "%s", pw_path);
        else
            out[used++] = *in, out[used] = '\0';
    }
}

static const char *cmd_for(const ec_knob_t *k)
{
    return (k->cmds & EC_CMD_LAUNCH) ? "launch" : "status";
}

/* Parse sub with args (plus the sample's extras and "prog" for launch) and
 * env; check that knob id was set from source kind/name and shows `shown`. */
static void expect_set(int si, char **args, int nargs, const char *env1, ec_src_kind_t kind,
                       const char *src_name)
{
    const ec_knob_t *k = ec_config_knob(samples[si].id);
    char extra_arg[256], extra_env[256], env1s[256], shown[256], want[512];
    char *argv[8];
    const char *env[4] = {NULL};
    int argc = 0, nenv = 0;
    for (int i = 0; i < nargs; i++)
        argv[argc++] = args[i];
    if (samples[si].extra_arg) {
        subst(extra_arg, sizeof(extra_arg), "", samples[si].extra_arg);
        argv[argc++] = extra_arg;
    }
    if (k->cmds & EC_CMD_LAUNCH)
        argv[argc++] = "prog";
    argv[argc] = NULL;
    if (env1) {
        subst(env1s, sizeof(env1s), "", env1);
        env[nenv++] = env1s;
    }
    if (samples[si].extra_env) {
        subst(extra_env, sizeof(extra_env), "", samples[si].extra_env);
        env[nenv++] = extra_env;
    }
    int rc = ec_config_parse(&cfg, cmd_for(k), argc, argv, test_env, env, &err);
    ck_assert_msg(rc == 0, "%s (%s): %s", k->name, argv[0], err.msg);
    ck_assert_int_eq(cfg.src[k->id].kind, kind);
    ck_assert_str_eq(cfg.src[k->id].name, src_name);
    subst(shown, sizeof(shown), "", samples[si].shown);
    const char *line = dump_line(k->name);
    if (kind == EC_SRC_FLAG)
        snprintf(want, sizeof(want), "%s: %s (source: flag --%s)", k->name, shown, src_name);
    else
        snprintf(want, sizeof(want), "%s: %s (source: env %s)", k->name, shown, src_name);
    ck_assert_str_eq(line, want);
}

START_TEST(every_spelling_in_every_form)
{
    int covered[EC_K__COUNT] = {0};
    for (int si = 0; si < NSAMPLES; si++) {
        const ec_knob_t *k = ec_config_knob(samples[si].id);
        covered[k->id] = 1;
        for (int j = 0; j < 3 && k->spellings[j]; j++) {
            const char *sp = k->spellings[j];
            char value[256], eq[300], dashed[300], flag[128];
            subst(value, sizeof(value), "", samples[si].value);
            snprintf(eq, sizeof(eq), "--%s=%s", sp, value);
            /* --name=value */
            expect_set(si, ARGS(eq), 1, NULL, EC_SRC_FLAG, sp);
            /* --name value (booleans: bare --name) */
            snprintf(flag, sizeof(flag), "--%s", sp);
            if (k->type == EC_KT_BOOL)
                expect_set(si, ARGS(flag), 1, NULL, EC_SRC_FLAG, sp);
            else
                expect_set(si, ARGS(flag, value), 2, NULL, EC_SRC_FLAG, sp);
            /* --na-me=value: dashes for underscores */
            if (strchr(sp, '_')) {
                snprintf(dashed, sizeof(dashed), "--%s=%s", sp, value);
                for (char *p = dashed + 2; *p && *p != '='; p++)
                    if (*p == '_')
                        *p = '-';
                expect_set(si, ARGS(dashed), 1, NULL, EC_SRC_FLAG, sp);
            }
        }
    }
    for (int i = 0; i < EC_K__COUNT; i++)
        ck_assert_msg(covered[i], "no sample for knob %s", ec_config_knob(i)->name);
}
END_TEST

START_TEST(every_env_alias_applies_when_flag_absent)
{
    for (int si = 0; si < NSAMPLES; si++) {
        const ec_knob_t *k = ec_config_knob(samples[si].id);
        for (int j = 0; j < 3 && k->env[j]; j++) {
            char kv[300];
            snprintf(kv, sizeof(kv), "%s=%s", k->env[j], samples[si].value);
            expect_set(si, NULL, 0, kv, EC_SRC_ENV, k->env[j]);
        }
    }
}
END_TEST

START_TEST(defaults_for_launch)
{
    OK("launch", NOENV, "prog");
    ck_assert_int_eq(cfg.cmd, EC_CMD_LAUNCH);
    ck_assert_int_eq(cfg.elastic_server.n, 0);
    ck_assert_str_eq(cfg.etcd_prefix, "");
    ck_assert_str_eq(cfg.etcd_cacert, "");
    ck_assert_str_eq(cfg.etcd_user, "");
    ck_assert_str_eq(cfg.etcd_password, "");
    ck_assert_str_eq(cfg.job_id, "default");
    ck_assert_int_eq(cfg.np.min, 1);
    ck_assert_int_eq(cfg.np.max, 1);
    ck_assert_int_eq(cfg.elastic_level, -1);
    ck_assert_int_eq(cfg.max_restart, 0); /* Paddle's: stop at the first failure */
    ck_assert_int_eq(cfg.fail_fast, 1);
    ck_assert_int_eq(cfg.elastic_timeout_ms, 30000);
    ck_assert_int_eq(cfg.replace_wait_ms, 0);
    ck_assert_int_eq(cfg.rebuild, EC_REBUILD_RESTART);
    ck_assert_str_eq(cfg.node_id, "host-a");
    ck_assert_str_eq(cfg.src[EC_K_NODE_ID].name, "host name");
    ck_assert_str_eq(cfg.host, "");
    ck_assert_int_eq(cfg.gpus.n, 0);
    ck_assert_int_eq(cfg.nproc_per_node, 1);
    ck_assert_int_eq(cfg.start_port, 6070); /* Paddle's; below the ephemeral range */
    ck_assert_int_eq(cfg.port_lo, 6070);
    ck_assert_int_eq(cfg.port_hi, 65535);
    ck_assert_int_eq(cfg.lease_ttl_ms, 10000);
    ck_assert_int_eq(cfg.grace_period_ms, 5000);
    ck_assert_int_eq(cfg.peer_probe_interval_ms, 250);
    ck_assert_str_eq(cfg.log_dir, "log");
    ck_assert_int_eq(cfg.log_level, EC_LOG_INFO);
    ck_assert_int_eq(cfg.metrics_port, 0);
    ck_assert_int_eq(cfg.json, 0);
    ck_assert_int_eq(cfg.watch, 0);
    ck_assert_int_eq(cfg.help, 0);
    for (int i = 0; i < EC_K__COUNT; i++)
        ck_assert_int_eq(cfg.src[i].kind, EC_SRC_DEFAULT);
    /* the default job id may collide: say so */
    ck_assert(has_warning("--job_id"));
    ck_assert_str_eq(dump_line("job_id"), "job_id: default (source: default)");
    ck_assert_str_eq(dump_line("elastic_timeout"), "elastic_timeout: 30s (source: default)");
    ck_assert_str_eq(dump_line("node_id"), "node_id: host-a (source: default: host name)");
}
END_TEST

START_TEST(no_job_id_warning_when_given)
{
    OK("launch", NOENV, "--job_id=job1", "prog");
    ck_assert(!has_warning("--job_id"));
    OK("status", ENV("PADDLE_ELASTIC_JOB_ID=job2"));
    ck_assert_str_eq(cfg.job_id, "job2");
    ck_assert(!has_warning("--job_id"));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Flag versus environment                                                  */

START_TEST(flag_beats_env)
{
    OK("launch", ENV("ECOORD_JOB_ID=fromenv", "PADDLE_ELASTIC_NP=3"), "--job_id=fromflag",
       "--np=2", "prog");
    ck_assert_str_eq(cfg.job_id, "fromflag");
    ck_assert_int_eq(cfg.np.min, 2);
    ck_assert_int_eq(cfg.src[EC_K_JOB_ID].kind, EC_SRC_FLAG);
    ck_assert(has_warning("ECOORD_JOB_ID=fromenv is ignored"));
    ck_assert(has_warning("PADDLE_ELASTIC_NP=3 is ignored"));
}
END_TEST

START_TEST(flag_at_default_value_still_beats_env)
{
    /* Paddle would let the env win here (value == default); ecoord tracks
     * that the flag was given. */
    OK("launch", ENV("ECOORD_MAX_RESTART=9"), "--max_restart=3", "prog");
    ck_assert_int_eq(cfg.max_restart, 3);
    ck_assert_int_eq(cfg.src[EC_K_MAX_RESTART].kind, EC_SRC_FLAG);
}
END_TEST

START_TEST(env_applies_only_at_default)
{
    OK("launch", ENV("ECOORD_MAX_RESTART=9", "ECOORD_LOG_DIR=/x"), "--log_dir=/y", "prog");
    ck_assert_int_eq(cfg.max_restart, 9);
    ck_assert_int_eq(cfg.src[EC_K_MAX_RESTART].kind, EC_SRC_ENV);
    ck_assert_str_eq(cfg.log_dir, "/y");
    ck_assert_str_eq(dump_line("max_restart"), "max_restart: 9 (source: env ECOORD_MAX_RESTART)");
    ck_assert_str_eq(dump_line("log_dir"), "log_dir: /y (source: flag --log_dir)");
}
END_TEST

START_TEST(ecoord_alias_beats_paddle_alias)
{
    OK("status", ENV("PADDLE_ELASTIC_JOB_ID=paddlejob", "ECOORD_JOB_ID=ourjob"));
    ck_assert_str_eq(cfg.job_id, "ourjob");
    ck_assert_str_eq(cfg.src[EC_K_JOB_ID].name, "ECOORD_JOB_ID");
    ck_assert(has_warning("PADDLE_ELASTIC_JOB_ID=paddlejob is ignored"));
    OK("status", ENV("PADDLE_ELASTIC_JOB_ID=paddlejob"));
    ck_assert_str_eq(cfg.job_id, "paddlejob");
    ck_assert_str_eq(cfg.src[EC_K_JOB_ID].name, "PADDLE_ELASTIC_JOB_ID");
    OK("launch", ENV("POD_IP=10.1.1.1", "ECOORD_HOST=10.2.2.2"), "prog");
    ck_assert_str_eq(cfg.host, "10.2.2.2");
    OK("launch", ENV("POD_IP=10.1.1.1"), "prog");
    ck_assert_str_eq(cfg.host, "10.1.1.1");
    ck_assert_str_eq(dump_line("host"), "host: 10.1.1.1 (source: env POD_IP)");
    OK("launch", ENV("POD_IP=10.1.1.1"), "--host=10.3.3.3", "prog");
    ck_assert_str_eq(cfg.host, "10.3.3.3");
}
END_TEST

START_TEST(empty_env_is_unset)
{
    OK("launch", ENV("ECOORD_JOB_ID=", "PADDLE_ELASTIC_JOB_ID=pj", "POD_IP="), "prog");
    ck_assert_str_eq(cfg.job_id, "pj");
    ck_assert_int_eq(cfg.src[EC_K_HOST].kind, EC_SRC_DEFAULT);
}
END_TEST

START_TEST(bad_env_value_names_the_variable)
{
    FAILS(EC_EINVAL, "launch", ENV("PADDLE_ELASTIC_NP=4:2"), "prog");
    HAS(err.msg, "PADDLE_ELASTIC_NP=4:2");
    HAS(err.msg, "MIN (4) is greater than MAX (2)");
    /* an env value shadowed by a flag is not even parsed */
    OK("launch", ENV("PADDLE_ELASTIC_NP=garbage"), "--np=2", "prog");
    ck_assert_int_eq(cfg.np.max, 2);
    /* env for a knob this subcommand does not use is not read */
    OK("status", ENV("ECOORD_NP=garbage"));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* --np and --nproc_per_node                                                */

START_TEST(np_forms)
{
    OK("launch", NOENV, "--np=2", "prog");
    ck_assert_int_eq(cfg.np.min, 2);
    ck_assert_int_eq(cfg.np.max, 2);
    ck_assert_str_eq(dump_line("np"), "np: 2 (source: flag --np)");
    OK("launch", NOENV, "--np", "2:4", "prog");
    ck_assert_int_eq(cfg.np.min, 2);
    ck_assert_int_eq(cfg.np.max, 4);
    OK("launch", NOENV, "--nnodes=3:3", "prog");
    ck_assert_int_eq(cfg.np.min, 3);
    ck_assert_int_eq(cfg.np.max, 3);
    ck_assert_str_eq(cfg.src[EC_K_NP].name, "nnodes");

    FAILS(EC_EINVAL, "launch", NOENV, "--np=4:2", "prog");
    ck_assert_str_eq(err.msg, "--np=4:2: MIN (4) is greater than MAX (2); write --np=MIN:MAX "
                              "with MIN <= MAX, e.g. --np=2:4");
    FAILS(EC_EINVAL, "launch", NOENV, "--np=abc", "prog");
    HAS(err.msg, "--np=abc: not a node count");
    FAILS(EC_EINVAL, "launch", NOENV, "--np=0", "prog");
    HAS(err.msg, "--np=0");
    HAS(err.msg, "between 1 and");
    char *bad[] = {"", "2:", ":4", "2:4:6", "-1", "0:4", "1:99999999", "2.5", " 2", "2-4"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char a[64];
        snprintf(a, sizeof(a), "--np=%s", bad[i]);
        FAILS(EC_EINVAL, "launch", NOENV, a, "prog");
        HAS(err.msg, a);
    }
}
END_TEST

START_TEST(np_is_never_nproc_per_node)
{
    OK("launch", NOENV, "--np=2:4", "prog");
    ck_assert_int_eq(cfg.nproc_per_node, 1);
    ck_assert_int_eq(cfg.src[EC_K_NPROC_PER_NODE].kind, EC_SRC_DEFAULT);
    OK("launch", NOENV, "--nproc_per_node=2", "prog");
    ck_assert_int_eq(cfg.np.min, 1);
    ck_assert_int_eq(cfg.np.max, 1);
    ck_assert_int_eq(cfg.nproc_per_node, 2);
    ck_assert_int_eq(cfg.src[EC_K_NP].kind, EC_SRC_DEFAULT);
}
END_TEST

START_TEST(no_prefix_matching_anywhere)
{
    FAILS(EC_EINVAL, "launch", NOENV, "--nproc=2", "prog");
    HAS(err.msg, "unknown flag --nproc");
    HAS(err.msg, "--nproc_per_node");
    HAS(err.msg, "spelled in full");
    HASNT(err.msg, "--np ");
    char *abbrev[] = {"--nproc_per=2", "--job=j",    "--elastic_serv=x", "--max=1",
                            "--log=debug",   "--nnode=2",  "--n=2",            "--lease=5",
                            "--NP=2",        "--Job_id=j", "--np_=2",          "--jso"};
    for (size_t i = 0; i < sizeof(abbrev) / sizeof(abbrev[0]); i++) {
        FAILS(EC_EINVAL, "launch", NOENV, abbrev[i], "prog");
        HAS(err.msg, "unknown flag");
    }
    FAILS(EC_EINVAL, "launch", NOENV, "--job=j", "prog");
    HAS(err.msg, "did you mean --job_id");
    FAILS(EC_EINVAL, "launch", NOENV, "--elastic=1", "prog");
    HAS(err.msg, "--elastic_server");
    HAS(err.msg, "--elastic_level");
    /* a typo is answered with the closest spelling */
    FAILS(EC_EINVAL, "launch", NOENV, "--nproc_per_nod=2", "prog");
    HAS(err.msg, "did you mean --nproc_per_node");
    FAILS(EC_EINVAL, "launch", NOENV, "--max_restrat=2", "prog");
    HAS(err.msg, "did you mean --max_restart");
    FAILS(EC_EINVAL, "launch", NOENV, "--zzzzzzzz=2", "prog");
    HASNT(err.msg, "did you mean");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Values and bounds                                                        */

START_TEST(job_id_validation)
{
    OK("status", NOENV, "--job_id=Job_1.a-b");
    ck_assert_str_eq(cfg.job_id, "Job_1.a-b");
    FAILS(EC_EINVAL, "status", NOENV, "--job_id=a/b");
    HAS(err.msg, "'/'");
    HAS(err.msg, "--job_id=a/b");
    char longid[200] = "--job_id=";
    memset(longid + 9, 'j', 129);
    longid[9 + 129] = '\0';
    FAILS(EC_EINVAL, "status", NOENV, longid);
    HAS(err.msg, "at most 128");
    longid[9 + 128] = '\0';
    OK("status", NOENV, longid);
    ck_assert_uint_eq(strlen(cfg.job_id), 128);
    FAILS(EC_EINVAL, "status", NOENV, "--job_id=");
    HAS(err.msg, "empty");
    FAILS(EC_EINVAL, "status", NOENV, "--job_id=j\xc3\xb6""b");
    HAS(err.msg, "non-ASCII");
    FAILS(EC_EINVAL, "status", NOENV, "--job_id=a b");
    FAILS(EC_EINVAL, "status", NOENV, "--job_id=..");
    FAILS(EC_EINVAL, "status", NOENV, "--job_id=job*");
    FAILS(EC_EINVAL, "status", ENV("ECOORD_JOB_ID=x/y"));
    HAS(err.msg, "ECOORD_JOB_ID=x/y");
}
END_TEST

START_TEST(gpus_parsing_and_counts)
{
    OK("launch", NOENV, "--gpus=0,1,2,3", "prog");
    ck_assert_int_eq(cfg.gpus.n, 4);
    ck_assert_int_eq(cfg.gpus.v[3], 3);
    ck_assert_int_eq(cfg.nproc_per_node, 4); /* default follows --gpus */
    ck_assert_str_eq(dump_line("nproc_per_node"),
                     "nproc_per_node: 4 (source: default: number of --gpus)");
    OK("launch", NOENV, "--devices", "4, 5", "prog");
    ck_assert_int_eq(cfg.gpus.n, 2);
    ck_assert_int_eq(cfg.gpus.v[0], 4);
    ck_assert_int_eq(cfg.gpus.v[1], 5);
    char *bad[] = {"--gpus=0,,1", "--gpus=a", "--gpus=0,0", "--gpus=-1", "--gpus=1.5",
                         "--gpus=99999", "--gpus=0,"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        FAILS(EC_EINVAL, "launch", NOENV, bad[i], "prog");
        HAS(err.msg, bad[i]);
    }
    FAILS(EC_EINVAL, "launch", NOENV, "--gpus=0,0", "prog");
    HAS(err.msg, "twice");

    /* more ranks than listed GPUs: an error naming both flags */
    FAILS(EC_EINVAL, "launch", NOENV, "--gpus=0,1", "--nproc_per_node=4", "prog");
    HAS(err.msg, "--nproc_per_node=4");
    HAS(err.msg, "--gpus=0,1");
    FAILS(EC_EINVAL, "launch", ENV("ECOORD_NPROC_PER_NODE=3"), "--gpus=0,1", "prog");
    HAS(err.msg, "ECOORD_NPROC_PER_NODE=3");
    /* fewer ranks than GPUs: allowed, with a warning */
    OK("launch", NOENV, "--gpus=0,1,2", "--nproc_per_node=2", "prog");
    ck_assert_int_eq(cfg.nproc_per_node, 2);
    ck_assert(has_warning("first 2 of the 3"));
}
END_TEST

START_TEST(cuda_visible_devices_checks)
{
    FAILS(EC_EINVAL, "launch", ENV("CUDA_VISIBLE_DEVICES=0,1"), "--nproc_per_node=4", "prog");
    HAS(err.msg, "CUDA_VISIBLE_DEVICES=0,1");
    HAS(err.msg, "only 2 GPUs");
    HAS(err.msg, "--nproc_per_node=2");
    OK("launch", ENV("CUDA_VISIBLE_DEVICES=0,1,2,3"), "--nproc_per_node=4", "prog");
    /* nproc derived from --gpus is checked too */
    FAILS(EC_EINVAL, "launch", ENV("CUDA_VISIBLE_DEVICES=2"), "--gpus=2,3", "prog");
    HAS(err.msg, "CUDA_VISIBLE_DEVICES=2");
    /* CUDA stops at the first invalid entry */
    FAILS(EC_EINVAL, "launch", ENV("CUDA_VISIBLE_DEVICES=0,1,-1,2"), "--nproc_per_node=3", "prog");
    HAS(err.msg, "only 2 GPUs");
    /* UUIDs count */
    OK("launch", ENV("CUDA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb"), "--nproc_per_node=2", "prog");
    FAILS(EC_EINVAL, "launch", ENV("CUDA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb"),
          "--nproc_per_node=3", "prog");
    /* --gpus ids must be entries of CUDA_VISIBLE_DEVICES when it is set */
    OK("launch", ENV("CUDA_VISIBLE_DEVICES=4,5"), "--gpus=4,5", "prog");
    FAILS(EC_EINVAL, "launch", ENV("CUDA_VISIBLE_DEVICES=4,5"), "--gpus=0", "prog");
    HAS(err.msg, "device 0");
    HAS(err.msg, "CUDA_VISIBLE_DEVICES=4,5");
    /* no GPU visible: fine for a CPU run, an error with --gpus */
    OK("launch", ENV("CUDA_VISIBLE_DEVICES="), "--nproc_per_node=2", "prog");
    FAILS(EC_EINVAL, "launch", ENV("CUDA_VISIBLE_DEVICES="), "--gpus=0", "prog");
    HAS(err.msg, "hides every GPU");
    /* --gpus names GPUs as CUDA_VISIBLE_DEVICES lists them (Paddle's rule) */
    OK("launch", ENV("CUDA_VISIBLE_DEVICES=4,5,6,7"), "--gpus=6,7", "prog");
    ck_assert_int_eq(cfg.nproc_per_node, 2);
    FAILS(EC_EINVAL, "launch", ENV("CUDA_VISIBLE_DEVICES=4,5,6,7"), "--gpus=2,3", "prog");
    HAS(err.msg, "device 2");
    /* UUIDs cannot be named by number */
    FAILS(EC_EINVAL, "launch", ENV("CUDA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb"), "--gpus=0", "prog");
    HAS(err.msg, "UUID");
    /* no --nproc_per_node: one process per GPU shown, as Paddle's launcher */
    OK("launch", ENV("CUDA_VISIBLE_DEVICES=3,5,7"), "prog");
    ck_assert_int_eq(cfg.nproc_per_node, 3);
    ck_assert_str_eq(cfg.src[EC_K_NPROC_PER_NODE].name, "GPUs in CUDA_VISIBLE_DEVICES");
    OK("launch", ENV("CUDA_VISIBLE_DEVICES=-1"), "prog");
    ck_assert_int_eq(cfg.nproc_per_node, 1);
    OK("launch", NOENV, "prog");
    ck_assert_int_eq(cfg.nproc_per_node, 1);
    /* status does not care */
    OK("status", ENV("CUDA_VISIBLE_DEVICES=0", "ECOORD_NPROC_PER_NODE=8"));
}
END_TEST

START_TEST(port_range_parsing)
{
    OK("launch", NOENV, "--port_range=36000-36100", "prog");
    ck_assert_int_eq(cfg.port_range.min, 36000);
    ck_assert_int_eq(cfg.port_range.max, 36100);
    ck_assert_int_eq(cfg.port_lo, 36000);
    ck_assert_int_eq(cfg.port_hi, 36100);
    OK("launch", NOENV, "--start_port", "40000", "prog");
    ck_assert_int_eq(cfg.port_lo, 40000);
    ck_assert_int_eq(cfg.port_hi, 65535);
    FAILS(EC_EINVAL, "launch", NOENV, "--port_range=36100-36000", "prog");
    HAS(err.msg, "LO (36100) is greater than HI (36000)");
    HAS(err.msg, "--port_range=LO-HI");
    char *bad[] = {"--port_range=0-10", "--port_range=1-70000", "--port_range=36000",
                         "--port_range=a-b",  "--port_range=36000:36100", "--port_range=-5-10",
                         "--start_port=0",    "--start_port=65536"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        FAILS(EC_EINVAL, "launch", NOENV, bad[i], "prog");
        HAS(err.msg, bad[i]);
    }
    /* one or the other, not both */
    FAILS(EC_EINVAL, "launch", NOENV, "--start_port=40000", "--port_range=36000-36100", "prog");
    HAS(err.msg, "--start_port=40000");
    HAS(err.msg, "--port_range=36000-36100");
    /* enough ports for what the agent reserves: the processes, the store,
     * and the port where it answers its peers' liveness probes (N+2);
     * `ecoord check` opens no probe port (N+1) */
    FAILS(EC_EINVAL, "launch", NOENV, "--port_range=36000-36002", "--nproc_per_node=2", "prog");
    HAS(err.msg, "needs 4");
    HAS(err.msg, "liveness probes");
    OK("launch", NOENV, "--port_range=36000-36003", "--nproc_per_node=2", "prog");
    FAILS(EC_EINVAL, "check", NOENV, "--port_range=36000-36001", "--nproc_per_node=2");
    HAS(err.msg, "needs 3");
    OK("check", NOENV, "--port_range=36000-36002", "--nproc_per_node=2");
    FAILS(EC_EINVAL, "launch", NOENV, "--start_port=65535", "prog");
}
END_TEST

START_TEST(bounds_and_types)
{
    FAILS(EC_EINVAL, "launch", NOENV, "--lease_ttl=1", "prog");
    HAS(err.msg, "--lease_ttl=1: out of range: allowed 2 to 3600 seconds");
    OK("launch", NOENV, "--lease_ttl=2", "prog");
    ck_assert_int_eq(cfg.lease_ttl_ms, 2000);
    FAILS(EC_EINVAL, "launch", NOENV, "--lease_ttl=2.5", "prog");
    HAS(err.msg, "whole seconds");
    OK("launch", NOENV, "--elastic_timeout=0.25", "prog");
    ck_assert_int_eq(cfg.elastic_timeout_ms, 250);
    char *bad[] = {"--elastic_timeout=abc", "--elastic_timeout=30s", "--elastic_timeout=-1",
                         "--elastic_timeout=0.0001", "--elastic_timeout=1e3",
                         "--max_restart=-1",      "--max_restart=x",  "--max_restart=3.5",
                         "--elastic_level=2",     "--elastic_level=-2",
                         "--metrics_port=70000",  "--log_level=verbose", "--rebuild=reboot",
                         "--grace_period=99999",  "--nproc_per_node=0", "--log_dir="};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        FAILS(EC_EINVAL, "launch", NOENV, bad[i], "prog");
        HAS(err.msg, bad[i]);
    }
    /* a negative value as a separate word, where the knob takes one */
    OK("launch", NOENV, "--elastic_level", "-1", "prog");
    ck_assert_int_eq(cfg.src[EC_K_ELASTIC_LEVEL].kind, EC_SRC_FLAG);
    OK("launch", NOENV, "--elastic_level", "0", "prog");
    ck_assert_int_eq(cfg.elastic_level, 0);
    OK("launch", NOENV, "--log-level", "Warn", "--rebuild=InProcess", "prog");
    ck_assert_int_eq(cfg.log_level, EC_LOG_WARN);
    ck_assert_int_eq(cfg.rebuild, EC_REBUILD_INPROCESS);
    OK("status", NOENV, "--json=false", "--watch=1");
    ck_assert_int_eq(cfg.json, 0);
    ck_assert_int_eq(cfg.watch, 1);
    FAILS(EC_EINVAL, "status", NOENV, "--json=maybe");
    HAS(err.msg, "--json=maybe");
    OK("status", ENV("ECOORD_JSON=yes"));
    ck_assert_int_eq(cfg.json, 1);
}
END_TEST

START_TEST(missing_values)
{
    FAILS(EC_EINVAL, "status", NOENV, "--job_id");
    HAS(err.msg, "--job_id needs a value");
    FAILS(EC_EINVAL, "launch", NOENV, "--job_id", "--np=2", "prog");
    HAS(err.msg, "--job_id needs a value but is followed by --np=2");
    FAILS(EC_EINVAL, "launch", NOENV, "--max_restart", "-1", "prog");
    HAS(err.msg, "--max_restart needs a value");
    FAILS(EC_EINVAL, "launch", NOENV, "--np", "--", "prog");
    HAS(err.msg, "--np needs a value");
    /* a boolean never eats the next word */
    OK("status", NOENV, "--json", "--watch");
    ck_assert_int_eq(cfg.json, 1);
    ck_assert_int_eq(cfg.watch, 1);
    FAILS(EC_EINVAL, "status", NOENV, "--watch", "true");
    HAS(err.msg, "takes no program, but got 'true'");
    FAILS(EC_EINVAL, "check", NOENV, "--json", "false");
    HAS(err.msg, "takes no program, but got 'false'");
    /* nor does launch run a value meant for it as the program */
    FAILS(EC_EINVAL, "launch", NOENV, "--stop_barrier", "false", "./prog");
    HAS(err.msg, "--stop_barrier=false");
    FAILS(EC_EINVAL, "launch", NOENV, "--stop-barrier", "TRUE", "./prog");
    HAS(err.msg, "--stop-barrier=TRUE");
    OK("launch", NOENV, "--stop_barrier", "--", "false"); /* the program, said so */
    ck_assert_int_eq(cfg.stop_barrier, 1);
    OK("launch", NOENV, "--stop_barrier=false", "./prog");
    ck_assert_int_eq(cfg.stop_barrier, 0);
    /* and --help shows a boolean's value and default */
    char *h = ec_config_help("launch");
    HAS(h, "--stop_barrier[=BOOL]");
    char *at = strstr(h, "--stop_barrier[=BOOL]");
    ck_assert_ptr_nonnull(at);
    char *next = strstr(at + 1, "\n  --");
    if (next)
        *next = '\0';
    HAS(at, "default: true");
    free(h);
}
END_TEST

START_TEST(strings_with_rules)
{
    OK("status", NOENV, "--elastic_server=a:2379, b:2379");
    ck_assert_int_eq(cfg.elastic_server.n, 2);
    ck_assert_str_eq(cfg.elastic_server.v[0], "a:2379");
    ck_assert_str_eq(cfg.elastic_server.v[1], "b:2379");
    OK("status", ENV("PADDLE_ELASTIC_SERVER=a:1"), "--elastic_server=");
    ck_assert_int_eq(cfg.elastic_server.n, 0); /* explicit empty: embedded etcd */
    FAILS(EC_EINVAL, "status", NOENV, "--elastic_server=a:1,,b:2");
    HAS(err.msg, "entry 2 is empty");
    FAILS(EC_EINVAL, "status", NOENV, "--elastic_server=a b:1");
    OK("status", NOENV, "--etcd_prefix=/team/ecoord");
    ck_assert_str_eq(cfg.etcd_prefix, "/team/ecoord");
    char *bad[] = {"--etcd_prefix=ecoord", "--etcd_prefix=/a/", "--etcd_prefix=/",
                         "--etcd_prefix=/a//b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        FAILS(EC_EINVAL, "status", NOENV, bad[i]);
        HAS(err.msg, bad[i]);
        HAS(err.msg, "starts with '/'");
    }
    FAILS(EC_EINVAL, "launch", NOENV, "--host=a,b", "prog");
    FAILS(EC_EINVAL, "launch", NOENV, "--host=a b", "prog");
    HAS(err.msg, "--host=a b");
    FAILS(EC_EINVAL, "launch", NOENV, "--node_id=n/1", "prog");
}
END_TEST

START_TEST(node_id_resolution)
{
    OK("launch", ENV("ECOORD_NODE_ID=envnode", "POD_NAME=pod-1"), "--node_id=flagnode", "prog");
    ck_assert_str_eq(cfg.node_id, "flagnode");
    OK("launch", ENV("ECOORD_NODE_ID=envnode", "POD_NAME=pod-1"), "prog");
    ck_assert_str_eq(cfg.node_id, "envnode");
    OK("launch", ENV("POD_NAME=pod-1"), "prog");
    ck_assert_str_eq(cfg.node_id, "pod-1");
    ck_assert_str_eq(dump_line("node_id"), "node_id: pod-1 (source: env POD_NAME)");
    OK("launch", NOENV, "prog");
    ck_assert_str_eq(cfg.node_id, "host-a");
    cfg.hostname = "bad host";
    FAILS(EC_EINVAL, "launch", NOENV, "prog");
    HAS(err.msg, "bad host");
    HAS(err.msg, "--node_id=");
    cfg.hostname = NULL;
    FAILS(EC_EINVAL, "launch", NOENV, "prog");
    HAS(err.msg, "--node_id=NAME");
    OK("status", NOENV); /* status has no node of its own */
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Subcommands, program arguments, help                                     */

START_TEST(program_args_pass_through)
{
    char **argv = ARGS("--np=2", "prog", "--np=5", "--job_id", "x");
    int rc = ec_config_parse(&cfg, "launch", 5, argv, test_env, NOENV, &err);
    ck_assert_msg(rc == 0, "%s", err.msg);
    ck_assert_int_eq(cfg.np.max, 2);
    ck_assert_str_eq(cfg.job_id, "default");
    ck_assert_int_eq(cfg.prog_index, 1);
    ck_assert_int_eq(cfg.prog_argc, 4);
    ck_assert_ptr_eq(cfg.prog_argv, argv + 1);
    ck_assert_str_eq(cfg.prog_argv[1], "--np=5");
    ck_assert_ptr_null(cfg.prog_argv[cfg.prog_argc]);
    ck_assert_str_eq(dump_line("program"), "program: prog --np=5 --job_id x");

    argv = ARGS("--np=2", "--", "--weird-prog", "--np=9");
    rc = ec_config_parse(&cfg, "launch", 4, argv, test_env, NOENV, &err);
    ck_assert_msg(rc == 0, "%s", err.msg);
    ck_assert_int_eq(cfg.np.max, 2);
    ck_assert_int_eq(cfg.prog_index, 2);
    ck_assert_int_eq(cfg.prog_argc, 2);
    ck_assert_str_eq(cfg.prog_argv[0], "--weird-prog");

    OK("launch", NOENV, "python", "-m", "train", "--help");
    ck_assert_int_eq(cfg.help, 0);
    ck_assert_int_eq(cfg.prog_argc, 4);
    OK("launch", NOENV, "-", "x");
    ck_assert_str_eq(cfg.prog_argv[0], "-");

    FAILS(EC_EINVAL, "launch", NOENV, "--np=2");
    HAS(err.msg, "needs the training program");
    FAILS(EC_EINVAL, "launch", NOENV, "--np=2", "--");
    HAS(err.msg, "needs the training program");
    FAILS(EC_EINVAL, "status", NOENV, "prog");
    HAS(err.msg, "takes no program");
    FAILS(EC_EINVAL, "check", NOENV, "--", "prog");
}
END_TEST

START_TEST(subcommand_scoping)
{
    FAILS(EC_EINVAL, "launch", NOENV, "--watch", "prog");
    HAS(err.msg, "--watch is not a flag of 'ecoord launch'");
    HAS(err.msg, "'ecoord status'");
    FAILS(EC_EINVAL, "status", NOENV, "--np=2");
    HAS(err.msg, "'ecoord launch' and 'ecoord check'");
    OK("status", NOENV, "--json", "--watch", "--job_id=j");
    OK("check", NOENV, "--json", "--np=2:3", "--gpus=0");
    ck_assert_int_eq(cfg.cmd, EC_CMD_CHECK);
    FAILS(EC_EINVAL, "check", NOENV, "--watch");
    FAILS(EC_EINVAL, "lanch", NOENV, "prog");
    HAS(err.msg, "unknown subcommand 'lanch'");
    FAILS(EC_EINVAL, NULL, NOENV, "prog");
}
END_TEST

START_TEST(single_dash_and_unsupported_flags)
{
    FAILS(EC_EINVAL, "launch", NOENV, "-np=2", "prog");
    HAS(err.msg, "write --np=2");
    FAILS(EC_EINVAL, "launch", NOENV, "-x", "prog");
    HAS(err.msg, "unknown flag -x");
    FAILS(EC_EINVAL, "launch", NOENV, "--ips=a,b", "prog");
    HAS(err.msg, "--elastic_server");
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Paddle's current launcher, word for word                                 */

/* Paddle's current launcher names its rendezvous server --master (env
 * PADDLE_MASTER); an etcd:// URL there is what ecoord calls
 * --elastic_server.  Paddle's other master, a bare HOST:PORT served over
 * HTTP by one of the nodes, has no counterpart: refused when typed, ignored
 * with a warning when inherited (ecoord itself sets PADDLE_MASTER for the
 * training processes). */
START_TEST(paddle_master_etcd_url_is_elastic_server)
{
    OK("launch", NOENV, "--master=etcd://10.0.0.1:2379,10.0.0.2:2379", "prog");
    ck_assert_int_eq(cfg.elastic_server.n, 2);
    ck_assert_str_eq(cfg.elastic_server.v[0], "10.0.0.1:2379");
    ck_assert_str_eq(cfg.elastic_server.v[1], "10.0.0.2:2379");
    ck_assert_int_eq(cfg.src[EC_K_ELASTIC_SERVER].kind, EC_SRC_FLAG);
    ck_assert_str_eq(cfg.src[EC_K_ELASTIC_SERVER].name, "master");
    ck_assert_str_eq(dump_line("elastic_server"),
                     "elastic_server: 10.0.0.1:2379,10.0.0.2:2379 (source: flag --master)");
    /* every entry may carry the scheme; status and check take it too */
    OK("status", NOENV, "--master", "etcd://10.0.0.1:2379,etcd://10.0.0.2:2379");
    ck_assert_int_eq(cfg.elastic_server.n, 2);
    ck_assert_str_eq(cfg.elastic_server.v[1], "10.0.0.2:2379");
    OK("check", NOENV, "--master=etcd://10.0.0.9:2379");
    ck_assert_str_eq(cfg.elastic_server.v[0], "10.0.0.9:2379");
    /* the environment */
    OK("launch", ENV("PADDLE_MASTER=etcd://10.0.0.3:2379"), "prog");
    ck_assert_int_eq(cfg.elastic_server.n, 1);
    ck_assert_str_eq(cfg.elastic_server.v[0], "10.0.0.3:2379");
    ck_assert_int_eq(cfg.src[EC_K_ELASTIC_SERVER].kind, EC_SRC_ENV);
    ck_assert_str_eq(cfg.src[EC_K_ELASTIC_SERVER].name, "PADDLE_MASTER");
    /* Paddle's HTTP master */
    FAILS(EC_EINVAL, "launch", NOENV, "--master=10.0.0.1:8090", "prog");
    HAS(err.msg, "--master=10.0.0.1:8090");
    HAS(err.msg, "etcd://");
    HAS(err.msg, "--elastic_server");
    FAILS(EC_EINVAL, "launch", NOENV, "--master=etcd://", "prog");
    HAS(err.msg, "--master");
    FAILS(EC_EINVAL, "launch", NOENV, "--master=etcd://,a:1", "prog");
    HAS(err.msg, "entry 1 is empty");
    OK("launch", ENV("PADDLE_MASTER=10.0.0.1:8090"), "prog");
    ck_assert_int_eq(cfg.elastic_server.n, 0);
    ck_assert(has_warning("PADDLE_MASTER=10.0.0.1:8090 is ignored"));
    /* both on the command line: the same servers, or keep one */
    OK("launch", NOENV, "--master=etcd://a:1", "--elastic_server=a:1", "prog");
    ck_assert_str_eq(cfg.elastic_server.v[0], "a:1");
    FAILS(EC_EINVAL, "launch", NOENV, "--master=etcd://a:1", "--elastic_server=b:2", "prog");
    HAS(err.msg, "keep one");
    /* a flag beats the environment, whichever spelling each uses */
    OK("launch", ENV("PADDLE_MASTER=etcd://e:1"), "--elastic_server=f:2", "prog");
    ck_assert_str_eq(cfg.elastic_server.v[0], "f:2");
    ck_assert(has_warning("PADDLE_MASTER=etcd://e:1 is ignored"));
    OK("launch", ENV("PADDLE_ELASTIC_SERVER=e:1"), "--master=etcd://f:2", "prog");
    ck_assert_str_eq(cfg.elastic_server.v[0], "f:2");
    ck_assert(has_warning("PADDLE_ELASTIC_SERVER=e:1 is ignored"));
    /* no prefix matching */
    FAILS(EC_EINVAL, "launch", NOENV, "--mast=etcd://a:1", "prog");
    HAS(err.msg, "did you mean --master");
}
END_TEST

/* ecoord runs collective jobs (every process a trainer); Paddle's
 * parameter-server modes are refused by name, not by "unknown flag". */
START_TEST(run_mode_collective_only)
{
    OK("launch", NOENV, "--run_mode=collective", "prog");
    ck_assert_int_eq(cfg.src[EC_K_RUN_MODE].kind, EC_SRC_FLAG);
    OK("launch", ENV("PADDLE_RUN_MODE=collective"), "prog");
    ck_assert_str_eq(cfg.src[EC_K_RUN_MODE].name, "PADDLE_RUN_MODE");
    const char *other[] = {"ps", "ps-heter", "rpc", "auto"};
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        char a[64];
        snprintf(a, sizeof(a), "--run_mode=%s", other[i]);
        FAILS(EC_EINVAL, "launch", NOENV, a, "prog");
        HAS(err.msg, a);
        HAS(err.msg, "collective jobs only");
    }
    FAILS(EC_EINVAL, "launch", ENV("PADDLE_RUN_MODE=ps"), "prog");
    HAS(err.msg, "PADDLE_RUN_MODE=ps");
    HAS(err.msg, "collective jobs only");
    FAILS(EC_EINVAL, "launch", NOENV, "--run=collective", "prog");
    HAS(err.msg, "unknown flag --run");
}
END_TEST

/* What Paddle's current launcher reads from the environment, read by ecoord
 * for the same knobs (and after ECOORD_ and the older elastic names). */
START_TEST(paddle_launcher_env_aliases_apply)
{
    OK("launch",
       ENV("PADDLE_JOB_ID=pj", "PADDLE_NNODES=2:4", "PADDLE_NPROC_PER_NODE=2",
           "PADDLE_LOG_DIR=/tmp/plog", "PADDLE_MAX_RESTART=5"),
       "prog");
    ck_assert_str_eq(cfg.job_id, "pj");
    ck_assert_str_eq(cfg.src[EC_K_JOB_ID].name, "PADDLE_JOB_ID");
    ck_assert_int_eq(cfg.np.min, 2);
    ck_assert_int_eq(cfg.np.max, 4);
    ck_assert_str_eq(cfg.src[EC_K_NP].name, "PADDLE_NNODES");
    ck_assert_int_eq(cfg.nproc_per_node, 2);
    ck_assert_str_eq(cfg.src[EC_K_NPROC_PER_NODE].name, "PADDLE_NPROC_PER_NODE");
    ck_assert_str_eq(cfg.log_dir, "/tmp/plog");
    ck_assert_str_eq(cfg.src[EC_K_LOG_DIR].name, "PADDLE_LOG_DIR");
    ck_assert_int_eq(cfg.max_restart, 5);
    ck_assert_str_eq(cfg.src[EC_K_MAX_RESTART].name, "PADDLE_MAX_RESTART");
    /* ECOORD_ first, then the older elastic launcher's name, then Paddle's */
    OK("launch", ENV("PADDLE_JOB_ID=new", "PADDLE_ELASTIC_JOB_ID=old", "ECOORD_JOB_ID=ours"),
       "prog");
    ck_assert_str_eq(cfg.job_id, "ours");
    OK("launch", ENV("PADDLE_JOB_ID=new", "PADDLE_ELASTIC_JOB_ID=old"), "prog");
    ck_assert_str_eq(cfg.job_id, "old");
    ck_assert(has_warning("PADDLE_JOB_ID=new is ignored"));
    OK("launch", ENV("PADDLE_NNODES=3", "PADDLE_ELASTIC_NP=2"), "prog");
    ck_assert_int_eq(cfg.np.max, 2);
    /* the flag wins */
    OK("launch", ENV("PADDLE_NPROC_PER_NODE=4"), "--nproc_per_node=1", "prog");
    ck_assert_int_eq(cfg.nproc_per_node, 1);
    /* the rest of what that launcher reads that ecoord has a knob for */
    OK("launch", ENV("PADDLE_DEVICES=0,1", "PADDLE_START_PORT=6070", "PADDLE_ELASTIC_LEVEL=1"),
       "prog");
    ck_assert_int_eq(cfg.gpus.n, 2);
    ck_assert_str_eq(cfg.src[EC_K_GPUS].name, "PADDLE_DEVICES");
    ck_assert_int_eq(cfg.nproc_per_node, 2);
    ck_assert_int_eq(cfg.start_port, 6070);
    ck_assert_int_eq(cfg.elastic_level, 1);
    ck_assert_int_eq(cfg.fail_fast, 0); /* fault tolerance, as that launcher's level 1 */
    ck_assert_int_eq(cfg.max_restart, 3);
}
END_TEST

START_TEST(help_flag_stops_parsing)
{
    OK("launch", NOENV, "--np=2", "--help", "--bogus");
    ck_assert_int_eq(cfg.help, 1);
    OK("status", NOENV, "-h");
    ck_assert_int_eq(cfg.help, 1);
    FAILS(EC_EINVAL, "launch", NOENV, "--bogus", "--help");
}
END_TEST

/* A failed process does what it does under the launcher the user came
 * from: Paddle's default (--elastic_level=-1) stops at the first failure
 * and exits with the process's code; fault tolerance (restarts, then the
 * node leaves with 101 or --node_failure_exit) is on only when asked for,
 * by --elastic_level 0|1 or by a knob that means nothing without it. */
START_TEST(a_failure_stops_the_job_unless_fault_tolerance_is_asked_for)
{
    OK("launch", NOENV, "--nproc_per_node=2", "prog");
    ck_assert_int_eq(cfg.fail_fast, 1);
    ck_assert_int_eq(cfg.max_restart, 0);
    ck_assert_int_eq(cfg.elastic_level, -1);
    HAS(dump_line("max_restart"), "--elastic_level=-1");
    ck_assert(!has_warning("elastic_level"));
    /* each way of asking for fault tolerance */
    static char asks[][2][32] = {{"--max_restart=2", "2"},          {"--elastic_level=1", "3"},
                                 {"--np=1:3", "3"},                 {"--fixed_failure_exit=142", "3"},
                                 {"--node_failure_exit=101", "3"}, {"--elastic_level=0", "0"}};
    for (size_t i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
        OK("launch", NOENV, asks[i][0], "prog");
        ck_assert_msg(cfg.fail_fast == 0, "%s left fault tolerance off", asks[i][0]);
        ck_assert_msg(cfg.max_restart == atoi(asks[i][1]), "%s: --max_restart=%d, want %s",
                      asks[i][0], cfg.max_restart, asks[i][1]);
        ck_assert_msg(cfg.elastic_level >= 0, "%s: elastic_level %d", asks[i][0],
                      cfg.elastic_level);
    }
    /* the environment asks as the flags do */
    OK("launch", ENV("PADDLE_MAX_RESTART=5"), "prog");
    ck_assert_int_eq(cfg.fail_fast, 0);
    ck_assert_int_eq(cfg.max_restart, 5);
    OK("launch", ENV("ECOORD_ELASTIC_LEVEL=0"), "prog");
    ck_assert_int_eq(cfg.fail_fast, 0);
    ck_assert_int_eq(cfg.max_restart, 0);
    /* an explicit -1 wins over the others, and says what it makes of them */
    OK("launch", NOENV, "--elastic_level=-1", "--np=2:4", "prog");
    ck_assert_int_eq(cfg.fail_fast, 1);
    ck_assert_int_eq(cfg.max_restart, 0);
    OK("launch", NOENV, "--elastic_level=-1", "--max_restart=3", "prog");
    ck_assert_int_eq(cfg.fail_fast, 1);
    ck_assert(has_warning("--max_restart=3 has no effect with --elastic_level=-1"));
    /* --help says what each level does, and nothing about being ignored */
    char *h = ec_config_help("launch");
    char *at = strstr(h, "--elastic_level=");
    ck_assert_ptr_nonnull(at);
    char *next = strstr(at + 1, "\n  --");
    if (next)
        *next = '\0'; /* this knob's entry only */
    HASNT(at, "ignored");
    HAS(at, "the first failure");
    HAS(at, "process's exit code");
    free(h);
    FAILS(EC_EINVAL, "launch", NOENV, "--elastic_level=2", "prog"); /* still Paddle's values */
    /* status and check have no failure policy */
    OK("status", NOENV);
    ck_assert_int_eq(cfg.fail_fast, 0);
}
END_TEST

/* Every code the agent exits with is in `ecoord launch --help`. */
START_TEST(help_lists_every_exit_code)
{
    char *h = ec_config_help("launch");
    char *at = strstr(h, "\nexit codes:\n");
    ck_assert_msg(at, "no exit code section in ecoord launch --help");
    const char *codes[] = {"\n  0\n", "\n  1\n", "\n  2\n", "\n  101\n", "\n  CODE\n",
                           "\n  128+N\n"};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        ck_assert_msg(strstr(at, codes[i]), "exit code %s missing", codes[i] + 3);
    HAS(at, "--elastic_level=-1");
    HAS(at, "--fixed_failure_exit");
    free(h);
    h = ec_config_help("status");
    HASNT(h, "exit codes:");
    free(h);
}
END_TEST

START_TEST(help_mentions_every_knob_of_its_subcommand)
{
    const char *subs[] = {"launch", "status", "check"};
    for (size_t s = 0; s < 3; s++) {
        char *h = ec_config_help(subs[s]);
        ck_assert_ptr_nonnull(h);
        ec_cmd_t cmd = ec_config_cmd(subs[s]);
        HAS(h, "usage: ecoord ");
        HAS(h, subs[s]);
        for (int i = 0; i < EC_K__COUNT; i++) {
            const ec_knob_t *k = ec_config_knob(i);
            char pat[96];
            for (int j = 0; j < 3 && k->spellings[j]; j++) {
                snprintf(pat, sizeof(pat), k->type == EC_KT_BOOL ? "--%s[=BOOL]" : "--%s=",
                         k->spellings[j]);
                if (k->cmds & cmd)
                    HAS(h, pat);
                else
                    HASNT(h, pat);
            }
            if (k->cmds & cmd) {
                for (int j = 0; j < 3 && k->env[j]; j++)
                    HAS(h, k->env[j]);
                /* the stated default, a boolean's too */
                snprintf(pat, sizeof(pat), "default: %s", k->def_help ? k->def_help : k->def);
                pat[40] = '\0'; /* wrapping may split long ones */
                HAS(h, pat);
            }
        }
        free(h);
    }
    char *h = ec_config_help("launch");
    HAS(h, "default: 6070");
    HAS(h, "default: -1");
    HAS(h, "PROGRAM");
    HAS(h, "env ECOORD_ETCD_PASSWORD");
    HAS(h, "There is no password");
    free(h);
    h = ec_config_help(NULL);
    ck_assert_ptr_nonnull(h);
    HAS(h, "launch");
    HAS(h, "status");
    HAS(h, "check");
    free(h);
    ck_assert_ptr_null(ec_config_help("bogus"));
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Secrets and the dump                                                     */

START_TEST(password_never_on_command_line)
{
    FAILS(EC_EINVAL, "status", NOENV, "--etcd_password=" SECRET);
    HAS(err.msg, "ECOORD_ETCD_PASSWORD");
    HAS(err.msg, "--etcd_password_file");
    HAS(err.msg, "ps");
    HASNT(err.msg, SECRET);
    FAILS(EC_EINVAL, "status", NOENV, "--etcd-password", SECRET);
    HAS(err.msg, "no password flag");
    FAILS(EC_EINVAL, "status", NOENV, "--password=x");
    HAS(err.msg, "no password flag");
    /* a rejected password from the environment is not echoed either */
    static char big[5200] = "ECOORD_ETCD_PASSWORD=";
    while (strlen(big) < 5000)
        strcat(big, SECRET);
    FAILS(EC_EINVAL, "status", ENV(big), "--etcd_user=u");
    HAS(err.msg, "ECOORD_ETCD_PASSWORD");
    HASNT(err.msg, SECRET);
}
END_TEST

START_TEST(dump_hides_password_and_marks_sources)
{
    OK("launch", ENV("ECOORD_ETCD_PASSWORD=" SECRET, "PADDLE_ELASTIC_SERVER=e:2379"),
       "--etcd_user=trainer", "--nnodes", "2:4", "prog", SECRET);
    ck_assert_str_eq(cfg.etcd_password, SECRET);
    char *d = ec_config_dump(&cfg);
    ck_assert_ptr_nonnull(d);
    /* the program line repeats argv, which is the user's; the config lines
     * never contain the password */
    char *prog = strstr(d, "\nprogram:");
    ck_assert_ptr_nonnull(prog);
    *prog = '\0';
    HASNT(d, SECRET);
    free(d);
    ck_assert_str_eq(dump_line("etcd_password"),
                     "etcd_password: (set, hidden) (source: env ECOORD_ETCD_PASSWORD)");
    ck_assert_str_eq(dump_line("etcd_user"), "etcd_user: trainer (source: flag --etcd_user)");
    ck_assert_str_eq(dump_line("np"), "np: 2:4 (source: flag --nnodes)");
    ck_assert_str_eq(dump_line("elastic_server"),
                     "elastic_server: e:2379 (source: env PADDLE_ELASTIC_SERVER)");
    ck_assert_str_eq(dump_line("max_restart"), "max_restart: 3 (source: default)");
    for (int i = 0; i < cfg.nwarnings; i++)
        HASNT(cfg.warnings[i], SECRET);
    /* only this subcommand's knobs */
    ck_assert_str_eq(dump_line("watch"), "");
    /* --nnodes=2:4 is an elastic job: fault tolerance on */
    ck_assert_str_eq(dump_line("elastic_level"),
                     "elastic_level: 1 (source: default: fault tolerance: --np=MIN:MAX)");

    /* the one line the console prints (the dump is at debug level): what
     * was set and where from, never the password, and how to see the rest */
    char *one = ec_config_summary(&cfg);
    ck_assert_ptr_nonnull(one);
    ck_assert_ptr_null(strchr(one, '\n'));
    HASNT(one, SECRET);
    HAS(one, "np=2:4 (--nnodes)");
    HAS(one, "elastic_server=e:2379 (PADDLE_ELASTIC_SERVER)");
    HAS(one, "etcd_password=(set, hidden) (ECOORD_ETCD_PASSWORD)");
    HAS(one, "--log_level=debug");
    HASNT(one, "max_restart"); /* defaults are not listed */
    free(one);

    char pwf[128];
    snprintf(pwf, sizeof(pwf), "--etcd_password_file=%s", pw_path);
    OK("status", NOENV, "--etcd_user=u", pwf);
    ck_assert_str_eq(cfg.etcd_password, SECRET); /* trailing newline dropped */
    char want[256];
    snprintf(want, sizeof(want), "etcd_password: (set, hidden) (source: file %s)", pw_path);
    ck_assert_str_eq(dump_line("etcd_password"), want);
    d = ec_config_dump(&cfg);
    HASNT(d, SECRET);
    free(d);
    OK("status", NOENV);
    ck_assert_str_eq(dump_line("etcd_password"), "etcd_password: (not set) (source: default)");
}
END_TEST

START_TEST(auth_and_tls_pairs)
{
    char pwf[128], cert[128], key[128], cacert[128];
    snprintf(pwf, sizeof(pwf), "--etcd_password_file=%s", pw_path);
    snprintf(cert, sizeof(cert), "--etcd_cert=%s", tmp_path);
    snprintf(key, sizeof(key), "--etcd_key=%s", tmp_path);
    snprintf(cacert, sizeof(cacert), "--etcd_cacert=%s", tmp_path);

    FAILS(EC_EINVAL, "status", NOENV, "--etcd_user=u");
    HAS(err.msg, "no password");
    FAILS(EC_EINVAL, "status", ENV("ECOORD_ETCD_PASSWORD=pw"));
    HAS(err.msg, "--etcd_user=NAME");
    FAILS(EC_EINVAL, "status", ENV("ECOORD_ETCD_PASSWORD=pw"), "--etcd_user=u", pwf);
    HAS(err.msg, "keep one");
    FAILS(EC_EIO, "status", NOENV, "--etcd_user=u", "--etcd_password_file=/nonexistent/pw");
    HAS(err.msg, "/nonexistent/pw");
    write_file(pw_path, "\n", 0600);
    FAILS(EC_EINVAL, "status", NOENV, "--etcd_user=u", pwf);
    HAS(err.msg, "empty");
    write_file(pw_path, "pw\n", 0644);
    OK("status", NOENV, "--etcd_user=u", pwf);
    ck_assert(has_warning("chmod 600"));

    FAILS(EC_EINVAL, "status", NOENV, cert);
    HAS(err.msg, "--etcd_key");
    FAILS(EC_EINVAL, "status", NOENV, key);
    HAS(err.msg, "--etcd_cert");
    OK("status", NOENV, cert, key, cacert);
    FAILS(EC_EIO, "status", NOENV, "--etcd_cacert=/nonexistent/ca.pem");
    HAS(err.msg, "--etcd_cacert=/nonexistent/ca.pem");
}
END_TEST

START_TEST(repeated_flag_last_wins_with_warning)
{
    OK("launch", NOENV, "--np=2", "--nnodes=3", "prog");
    ck_assert_int_eq(cfg.np.min, 3);
    ck_assert_str_eq(cfg.src[EC_K_NP].name, "nnodes");
    ck_assert(has_warning("given twice"));
}
END_TEST

START_TEST(lifecycle)
{
    ec_config_t raw = {0};
    ck_assert_int_eq(ec_config_parse(&raw, "status", 0, NOARGS, test_env, NOENV, &err),
                     EC_EINVAL);
    HAS(err.msg, "EC_CONFIG_INITIALIZER");
    ec_config_release(NULL);
    /* parse again and again over the same struct: no leak, no stale value */
    OK("status", NOENV, "--job_id=a", "--elastic_server=x:1,y:2");
    OK("status", NOENV);
    ck_assert_str_eq(cfg.job_id, "default");
    ck_assert_int_eq(cfg.elastic_server.n, 0);
    ck_assert_str_eq(cfg.hostname, "host-a");
    /* a failed parse leaves a releasable config */
    FAILS(EC_EINVAL, "status", NOENV, "--elastic_server=a,,b");
    ec_config_release(&cfg);
    ec_config_release(&cfg);
    ck_assert_int_eq(cfg.size, sizeof(ec_config_t));
    /* validate on its own, after a change by hand */
    OK("launch", NOENV, "--gpus=0,1", "prog");
    ck_assert_int_eq(ec_config_validate(&cfg, test_env, NOENV, &err), 0);
    cfg.nproc_per_node = 3;
    ck_assert_int_eq(ec_config_validate(&cfg, test_env, NOENV, &err), EC_EINVAL);
    HAS(err.msg, "--gpus=0,1");
    cfg.nproc_per_node = 2;
    cfg.gpus.v[1] = 0;
    ck_assert_int_eq(ec_config_validate(&cfg, test_env, NOENV, &err), EC_EINVAL);
    HAS(err.msg, "twice");
    cfg.gpus.v[1] = 1;
    cfg.np.min = 4;
    cfg.np.max = 2;
    ck_assert_int_eq(ec_config_validate(&cfg, test_env, NOENV, &err), EC_EINVAL);
    HAS(err.msg, "MIN (4) is greater than MAX (2)");
    cfg.np.min = 0;
    ck_assert_int_eq(ec_config_validate(&cfg, test_env, NOENV, &err), EC_EINVAL);
    HAS(err.msg, "at least 1");
    cfg.np.min = 1;
    ck_assert_int_eq(ec_config_validate(&cfg, test_env, NOENV, &err), 0);
    /* env function may be NULL: no environment */
    ck_assert_int_eq(ec_config_parse(&cfg, "status", 0, NOARGS, NULL, NULL, &err), 0);
}
END_TEST

/* --hang_timeout: auto (the default) is -1, off and 0 are 0, seconds are
 * milliseconds; --straggler_factor: off or a number above 1.  Nonsense is
 * refused with what to write. */
START_TEST(hang_knobs_resolve_and_refuse_nonsense)
{
    const char *ok[][3] = {{"--hang_timeout=auto", "-1", "0"},
                           {"--hang_timeout=off", "0", "0"},
                           {"--hang_timeout=2.5", "2500", "0"},
                           {"--straggler_factor=1.5", "-1", "1.5"}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char **argv = ARGS((char *)ok[i][0], "prog");
        int rc = ec_config_parse(&cfg, "launch", 2, argv, test_env, NOENV, &err);
        ck_assert_msg(rc == 0, "%s: %s", ok[i][0], err.msg);
        ck_assert_int_eq(cfg.hang_timeout_ms, atoll(ok[i][1]));
        ck_assert(cfg.straggler_factor_x == atof(ok[i][2]));
    }
    const char *bad[] = {"--hang_timeout=soon", "--hang_timeout=0.01", "--straggler_factor=1",
                         "--straggler_factor=x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char **argv = ARGS((char *)bad[i], "prog");
        int rc = ec_config_parse(&cfg, "launch", 2, argv, test_env, NOENV, &err);
        ck_assert_msg(rc != 0, "%s accepted", bad[i]);
        ck_assert_msg(strstr(err.msg, "e.g."), "%s: %s", bad[i], err.msg);
    }
}
END_TEST

/* The one getenv of ecoord reads only the names of the knob table: its
 * aliases and the other variables it lists (and shows in --help). */
START_TEST(environment_read_only_through_the_table)
{
    setenv("ECOORD_NOT_A_KNOB_AT_ALL", "x", 1);
    ck_assert_ptr_null(ec_config_environ("ECOORD_NOT_A_KNOB_AT_ALL", NULL));
    unsetenv("ECOORD_NOT_A_KNOB_AT_ALL");
    setenv("ECOORD_NP", "2:4", 1);
    ck_assert_str_eq(ec_config_environ("ECOORD_NP", NULL), "2:4");
    unsetenv("ECOORD_NP");
    setenv("TMPDIR", "/tmp", 1);
    ck_assert_str_eq(ec_config_environ("TMPDIR", NULL), "/tmp");
    char *h = ec_config_help("launch");
    ck_assert_ptr_nonnull(h);
    ck_assert_msg(strstr(h, "environment read besides") && strstr(h, "XDG_RUNTIME_DIR"),
                  "launch --help does not list the environment it reads");
    free(h);
}
END_TEST

/* The ports a node opens by default lie below the kernel's ephemeral range
 * (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 unless changed),
 * where an outgoing connection can hold one before a process binds it (one
 * run lost an agent that way with the old default, 36000); ports that do
 * lie there are named with the fix, unless the kernel keeps them out of it
 * (ip_local_reserved_ports). */
START_TEST(default_ports_lie_below_the_ephemeral_range)
{
    OK("launch", NOENV, "prog");
    int lo = 32768, hi = 60999; /* Linux's default */
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        ck_assert_int_eq(fscanf(f, "%d %d", &lo, &hi), 2);
        fclose(f);
    }
    /* room below it for a few agents of 8 processes on one host */
    ck_assert_msg(cfg.start_port + 4 * 10 <= lo, "default --start_port=%d, ephemeral range %d-%d",
                  cfg.start_port, lo, hi);
    HAS(ec_config_knob(EC_K_START_PORT)->help, "ephemeral");

    char note[512];
    uint16_t p[4] = {36000, 36001, 36002, 36003};
    ec_ports_ephemeral_note(p, 4, 32768, 60999, "", note, sizeof(note));
    HAS(note, "36000-36003");
    HAS(note, "32768-60999");
    HAS(note, "--start_port");
    HAS(note, "ip_local_reserved_ports");
    ec_ports_ephemeral_note(p, 4, 32768, 60999, "36000-36010,40000", note, sizeof(note));
    ck_assert_str_eq(note, "");            /* the kernel keeps them out of its range */
    ec_ports_ephemeral_note(p, 4, 32768, 60999, "36001", note, sizeof(note));
    HAS(note, "36000");                     /* only one of them reserved */
    uint16_t q[3] = {6070, 6071, 6072};
    ec_ports_ephemeral_note(q, 3, 32768, 60999, "", note, sizeof(note));
    ck_assert_str_eq(note, "");
    ec_ports_ephemeral_note(q, 3, 1024, 65000, "", note, sizeof(note)); /* a widened range */
    HAS(note, "6070-6072");
}
END_TEST

/* --etcd_proxy: an HTTP CONNECT proxy for etcd only when asked; what gRPC
 * cannot use is refused with the form it needs. */
START_TEST(etcd_proxy_takes_an_http_url)
{
    OK("launch", NOENV, "prog");
    ck_assert_str_eq(cfg.etcd_proxy, "");
    OK("status", ENV("ECOORD_ETCD_PROXY=http://proxy.example:3128"));
    ck_assert_str_eq(cfg.etcd_proxy, "http://proxy.example:3128");
    const char *bad[] = {"https://proxy:3128", "proxy:3128", "socks5://p:1080", "http://",
                         "http://proxy", "http://proxy:0", "http://proxy:99999", NULL};
    for (int i = 0; bad[i]; i++) {
        char flag[128];
        snprintf(flag, sizeof(flag), "--etcd_proxy=%s", bad[i]);
        FAILS(EC_EINVAL, "launch", NOENV, flag, "prog");
        HAS(err.msg, "http://HOST:PORT");
    }
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("config", setup, teardown,
                          EC_CHECK_TESTS(
                              table_rows_are_complete_and_consistent,
                              every_spelling_in_every_form,
                              every_env_alias_applies_when_flag_absent,
                              defaults_for_launch,
                              no_job_id_warning_when_given,
                              flag_beats_env,
                              flag_at_default_value_still_beats_env,
                              env_applies_only_at_default,
                              ecoord_alias_beats_paddle_alias,
                              empty_env_is_unset,
                              bad_env_value_names_the_variable,
                              np_forms,
                              np_is_never_nproc_per_node,
                              no_prefix_matching_anywhere,
                              job_id_validation,
                              gpus_parsing_and_counts,
                              cuda_visible_devices_checks,
                              port_range_parsing,
                              bounds_and_types,
                              missing_values,
                              strings_with_rules,
                              node_id_resolution,
                              program_args_pass_through,
                              subcommand_scoping,
                              single_dash_and_unsupported_flags,
                              paddle_master_etcd_url_is_elastic_server,
                              run_mode_collective_only,
                              paddle_launcher_env_aliases_apply,
                              help_flag_stops_parsing,
                              help_mentions_every_knob_of_its_subcommand,
                              a_failure_stops_the_job_unless_fault_tolerance_is_asked_for,
                              help_lists_every_exit_code,
                              password_never_on_command_line,
                              dump_hides_password_and_marks_sources,
                              auth_and_tls_pairs,
                              repeated_flag_last_wins_with_warning,
                              lifecycle,
                              hang_knobs_resolve_and_refuse_nonsense,
                              environment_read_only_through_the_table,
                              default_ports_lie_below_the_ephemeral_range,
                              etcd_proxy_takes_an_http_url));
}

EC_CHECK_MAIN(suite)
