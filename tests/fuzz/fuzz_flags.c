/* libFuzzer target: the knob table's parser (coord/cli/knobs.c) fed arbitrary
 * command lines and environments, as `ecoord launch|status|check` is by
 * users, pod specs and inherited PADDLE_* variables; and `ecoord torchrun`'s
 * translation (coord/cli/torchrun_args.c) in front of it.
 *
 * Input: the first byte picks the subcommand (0 launch, 1 status, 2 check,
 * 3 torchrun); the rest is split at NUL
 * bytes into tokens.  A token starting with '\x01' is an environment entry
 * NAME=VALUE (seen only through the getenv function we pass, never the real
 * environment); every other token is an argv element.
 *
 * Properties: no crash, leak or undefined behaviour; parse returns 0 or one
 * of its documented codes with a message; after a successful parse every
 * string knob is non-NULL, np is MIN <= MAX, nproc_per_node >= 1, the port
 * range is ordered, the configuration validates again, and the dump and
 * --help render; parsing again into the same config (release + reuse) gives
 * the same result.  torchrun: the translation returns 0 or a documented code
 * with a message, its argv is NULL-terminated, and what it gives the table
 * parses (or is refused) like any launch command line, with the same checks
 * after torchrun's defaults are applied. */
#include <string.h>

#include "fuzz.h"
#include "knobs.h"
#include "torchrun_args.h"

#define MAXTOK 64

typedef struct {
    int n;
    const char *name[MAXTOK], *value[MAXTOK];
} env_t;

static const char *fuzz_env(const char *name, void *arg)
{
    const env_t *e = arg;
    for (int i = e->n - 1; i >= 0; i--) /* the last definition wins, as in a shell */
        if (!strcmp(e->name[i], name))
            return e->value[i];
    return NULL;
}

/* Paths a fuzzed flag may name: never device or proc files (reading
 * /dev/stdin or a FIFO would block the run). */
static int safe_token(const char *s)
{
    return !strstr(s, "/dev") && !strstr(s, "/proc") && !strstr(s, "/sys");
}

static void check_cfg(const ec_config_t *c, const char *sub, env_t *env)
{
    FUZZ_CHECK(c->cmd == ec_config_cmd(sub), "cmd %d for %s", c->cmd, sub);
    if (c->help) {
        char *h = ec_config_help(sub);
        FUZZ_CHECK(h && *h, "no help for %s", sub);
        free(h);
        return;
    }
    FUZZ_CHECK(c->etcd_prefix && c->job_id && c->node_id && c->host && c->log_dir &&
                   c->etcd_cacert && c->etcd_cert && c->etcd_key && c->etcd_user &&
                   c->etcd_password_file,
               "a string knob is NULL after a successful parse");
    FUZZ_CHECK(c->np.min >= 1 && c->np.min <= c->np.max, "np %d:%d", c->np.min, c->np.max);
    FUZZ_CHECK(c->nproc_per_node >= 1, "nproc_per_node %d", c->nproc_per_node);
    FUZZ_CHECK(c->port_lo <= c->port_hi, "ports %d-%d", c->port_lo, c->port_hi);
    FUZZ_CHECK(c->elastic_timeout_ms >= 0 && c->lease_ttl_ms >= 0, "negative time");
    for (int i = 0; i < c->elastic_server.n; i++)
        FUZZ_CHECK(c->elastic_server.v[i] != NULL, "endpoint %d NULL", i);
    FUZZ_CHECK(c->prog_argc == 0 || (c->prog_argv && c->prog_argv[0]), "program");
    ec_error_t err = {0};
    FUZZ_CHECK(ec_config_validate(c, fuzz_env, env, &err) == 0,
               "a parsed configuration does not validate: %s", err.msg);
    char *d = ec_config_dump(c);
    FUZZ_CHECK(d != NULL, "no dump");
    if (c->etcd_password && *c->etcd_password && strlen(c->etcd_password) >= 4)
        FUZZ_CHECK(!strstr(d, c->etcd_password), "the dump shows the password");
    free(d);
}

/* `ecoord torchrun ARGV`: translate, parse as launch, apply. */
static void torchrun(int argc, char **argv, env_t *env)
{
    static const ec_torchrun_host_t host = {.ngpus = 2, .ncpus = 4};
    ec_torchrun_t t;
    ec_error_t err = {0};
    int rc = ec_torchrun_translate(argc, argv, &host, fuzz_env, env, &t, &err);
    if (rc < 0) {
        FUZZ_CHECK((rc == EC_EINVAL || rc == EC_ENOMEM) && err.code == rc && err.msg[0],
                   "translate returned %d with message '%s'", rc, err.msg);
        FUZZ_CHECK(t.argv == NULL && t.argc == 0, "a failed translation left arguments");
        return;
    }
    FUZZ_CHECK(t.argv && !t.argv[t.argc], "translated argv not NULL-terminated");
    if (!t.help) {
        ec_config_t cfg = EC_CONFIG_INITIALIZER;
        cfg.hostname = "fuzz-host";
        rc = ec_config_parse(&cfg, "launch", t.argc, t.argv, fuzz_env, env, &err);
        if (rc == 0 && !cfg.help)
            rc = ec_torchrun_apply(&t, &cfg, fuzz_env, env, &err);
        if (rc < 0)
            FUZZ_CHECK((rc == EC_EINVAL || rc == EC_EIO || rc == EC_ENOMEM) && err.msg[0],
                       "torchrun: parse returned %d with message '%s'", rc, err.msg);
        else
            check_cfg(&cfg, "launch", env);
        ec_config_release(&cfg);
    }
    ec_torchrun_release(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *subs[] = {"launch", "status", "check", "torchrun"};
    if (size < 1 || size > 4096)
        return 0;
    const char *sub = subs[data[0] % 4];
    char *copy = malloc(size); /* tokens: data[1..] split at NUL, NUL-terminated */
    memcpy(copy, data + 1, size - 1);
    copy[size - 1] = '\0';
    char *argv[MAXTOK + 1];
    int argc = 0;
    env_t env = {0};
    char *end = copy + size - 1; /* the NUL that ends the last token */
    for (char *p = copy, *next; size > 1 && p <= end; p = next) {
        next = p + strlen(p) + 1; /* before the '=' below is cut */
        if (!safe_token(p))
            goto out;
        if (p[0] == '\x01') {
            char *eq = strchr(p + 1, '=');
            if (eq && env.n < MAXTOK) {
                *eq = '\0';
                env.name[env.n] = p + 1;
                env.value[env.n++] = eq + 1;
            }
        } else if (argc < MAXTOK) {
            argv[argc++] = p;
        }
    }
    argv[argc] = NULL;
    if (!strcmp(sub, "torchrun")) {
        torchrun(argc, argv, &env);
        goto out;
    }

    ec_config_t cfg = EC_CONFIG_INITIALIZER;
    cfg.hostname = "fuzz-host";
    ec_error_t err = {0};
    int rc = ec_config_parse(&cfg, sub, argc, argv, fuzz_env, &env, &err);
    if (rc < 0)
        FUZZ_CHECK((rc == EC_EINVAL || rc == EC_EIO || rc == EC_ENOMEM) && err.code == rc &&
                       err.msg[0],
                   "parse returned %d with message '%s'", rc, err.msg);
    else
        check_cfg(&cfg, sub, &env);
    /* Parse again into the same config: release and reuse are clean, and the
     * parser is deterministic. */
    ec_error_t err2 = {0};
    int rc2 = ec_config_parse(&cfg, sub, argc, argv, fuzz_env, &env, &err2);
    FUZZ_CHECK(rc2 == rc && !strcmp(err.msg, err2.msg), "second parse: %d '%s' vs %d '%s'", rc,
               err.msg, rc2, err2.msg);
    ec_config_release(&cfg);
out:
    free(copy);
    return 0;
}
