/* The rules that tie several knobs together: defaults that depend on other
 * knobs or on the machine (--nproc_per_node from the GPUs, the node id from
 * the host name, the failure policy, --master as --elastic_server, the
 * password file), then ec_config_validate's checks across knobs. */
#include "knobs_impl.h"
#include "env_contract.h"
#include "gpus.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

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
        snprintf(buf, len, "--%s=%s (default: %s)", ec__knobs[id].name, value, s->name);
    else
        snprintf(buf, len, "--%s=%s (default)", ec__knobs[id].name, value);
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
        ec__knob_warnf(cfg, "--etcd_password_file=%s can be read by other users; chmod 600 it",
                       path);
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
    ec__knob_free_secret(&cfg->etcd_password);
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
    for (int i = 0; (rc = ec__knob_next_item(&p, item, sizeof(item))) != -1; i++) {
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
    if (!(cfg->cmd & ec__knobs[EC_K_MASTER].cmds) || !cfg->master[0])
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
            ec__knob_warnf(cfg, "%s is ignored: not an etcd:// address (Paddle's HTTP master "
                                "has no use in ecoord, which meets its peers in etcd)",
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
            ec__knob_warnf(cfg, "%s is ignored: %s takes precedence", where, ewhere);
            return 0;
        }
        ec__knob_warnf(cfg, "%s is ignored: %s takes precedence", ewhere, where);
    }
    int rc = ec__knob_set_value(cfg, &ec__knobs[EC_K_ELASTIC_SERVER], eps, where,
                                "--master=etcd://", err);
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
            ec__knob_warnf(cfg, "--max_restart=%d has no effect with %s%s=-1: the first failure "
                                "stops the job; pass --elastic_level=1 to restart",
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
int ec__knob_resolve(ec_config_t *cfg, ec_getenv_fn env, void *env_arg, ec_error_t *err)
{
    int rc;
    if ((rc = resolve_master(cfg, err)))
        return rc;
    {
        long long ms = -1;
        double x = 0;
        if (cfg->hang_timeout && ec__knob_hang_timeout_ms(cfg->hang_timeout, &ms) == 0)
            cfg->hang_timeout_ms = ms;
        if (cfg->straggler_factor && ec__knob_straggler_factor(cfg->straggler_factor, &x) == 0)
            cfg->straggler_factor_x = x;
    }
    if (cfg->cmd & ec__knobs[EC_K_NPROC_PER_NODE].cmds) {
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
            ec__knob_warnf(cfg,
                           "--nproc_per_node=%d uses only the first %d of the %d devices in --gpus",
                           cfg->nproc_per_node, cfg->nproc_per_node, cfg->gpus.n);
    }
    /* node_id: flag, ECOORD_NODE_ID, POD_NAME (all applied by now), then the
     * host name: the one place this default is decided. */
    if ((cfg->cmd & ec__knobs[EC_K_NODE_ID].cmds) && !cfg->node_id[0]) {
        if (!cfg->hostname || !cfg->hostname[0])
            return ec_errorf(err, EC_EINVAL,
                             "cannot name this node: no --node_id, ECOORD_NODE_ID or POD_NAME, "
                             "and no host name; pass --node_id=NAME, e.g. --node_id=node-3");
        char where[300];
        snprintf(where, sizeof(where), "host name '%.200s' (the default node id)", cfg->hostname);
        if ((rc = ec__knob_check_node_id(cfg->hostname, where, "--node_id=", err)))
            return rc;
        char *s = strdup(cfg->hostname);
        if (!s)
            return ec_errorf(err, EC_ENOMEM, "out of memory");
        free(cfg->node_id);
        cfg->node_id = s;
        cfg->src[EC_K_NODE_ID].name = "host name";
    }
    if (cfg->cmd & ec__knobs[EC_K_ELASTIC_LEVEL].cmds)
        resolve_failure_policy(cfg);
    if (cfg->src[EC_K_JOB_ID].kind == EC_SRC_DEFAULT)
        ec__knob_warnf(cfg, "no --job_id: using '%s'; two jobs on one etcd with the same id join "
                            "each other; pass --job_id=NAME",
                       cfg->job_id);
    if (cfg->src[EC_K_PORT_RANGE].kind != EC_SRC_DEFAULT) {
        cfg->port_lo = cfg->port_range.min;
        cfg->port_hi = cfg->port_range.max;
    } else {
        cfg->port_lo = cfg->start_port;
        cfg->port_hi = 65535;
    }
    if ((cfg->cmd & ec__knobs[EC_K_ETCD_PASSWORD_FILE].cmds) && cfg->etcd_password_file[0]) {
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

/* ------------------------------------------------------------------------ */
/* cross-field validation                                                   */

static int check_devices(const ec_config_t *cfg, ec_getenv_fn env, void *env_arg,
                         ec_error_t *err)
{
    char np_s[300], g_s[256], gl[200];
    char nps[16];
    snprintf(nps, sizeof(nps), "%d", cfg->nproc_per_node);
    origin(cfg, EC_K_NPROC_PER_NODE, nps, np_s, sizeof(np_s));
    ec__knob_fmt_intlist(&cfg->gpus, gl, sizeof(gl));
    origin(cfg, EC_K_GPUS, gl, g_s, sizeof(g_s));
    ec_gpus_t g;
    return ec_gpus_plan(env ? env("CUDA_VISIBLE_DEVICES", env_arg) : NULL, cfg->dev_gpus,
                        cfg->gpus.v, cfg->gpus.n, cfg->nproc_per_node, g_s, np_s, &g, err);
}

/* --np: MIN >= 1 and MIN <= MAX. */
static int check_np(const ec_config_t *cfg, ec_error_t *err)
{
    char a[300], v[64];
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
    return 0;
}

/* --start_port or --port_range, not both, leaving the ports this node
 * reserves. */
static int check_ports(const ec_config_t *cfg, ec_error_t *err)
{
    char a[300], b[300], v[64];
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
    int probe = cfg->cmd == EC_CMD_LAUNCH;
    int need = cfg->nproc_per_node + 1 + probe, have = cfg->port_hi - cfg->port_lo + 1;
    if (cfg->port_lo >= 1 && have >= need)
        return 0;
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
                     a, have < 0 ? 0 : have, have == 1 ? "" : "s", need, cfg->nproc_per_node,
                     probe ? ", one where the agent answers liveness probes" : "");
}

/* A client certificate with its key; every file knob of the command
 * readable. */
static int check_tls_files(const ec_config_t *cfg, ec_error_t *err)
{
    char a[300];
    if (!cfg->etcd_cert[0] != !cfg->etcd_key[0])
        return ec_errorf(err, EC_EINVAL,
                         "%s is given without %s; a client certificate needs its key: pass "
                         "both --etcd_cert=PATH and --etcd_key=PATH",
                         cfg->etcd_cert[0] ? "--etcd_cert" : "--etcd_key",
                         cfg->etcd_cert[0] ? "--etcd_key" : "--etcd_cert");
    for (int i = 0; i < EC_K__COUNT; i++) {
        const ec_knob_t *k = &ec__knobs[i];
        if (!(k->flags & EC_KF_FILE) || !(k->cmds & cfg->cmd))
            continue;
        const char *path = *FIELD(cfg, k, char *);
        if (path && path[0] && access(path, R_OK) != 0) {
            origin(cfg, i, path, a, sizeof(a));
            return ec_errorf(err, EC_EIO, "%s: cannot read it (%s); check the path", a,
                             strerror(errno));
        }
    }
    return 0;
}

/* An etcd user and a password, both or neither. */
static int check_auth(const ec_config_t *cfg, ec_error_t *err)
{
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
    return 0;
}

/* What runs: a module is run by an interpreter; launch needs a program. */
static int check_program(const ec_config_t *cfg, ec_error_t *err)
{
    if ((cfg->cmd & ec__knobs[EC_K_MODULE].cmds) && cfg->module && cfg->no_python)
        return ec_errorf(err, EC_EINVAL,
                         "--module and --no_python contradict each other: a module is run by "
                         "the interpreter (python -u -m PROGRAM); drop one");
    if (cfg->cmd == EC_CMD_LAUNCH && cfg->prog_argc == 0)
        return ec_errorf(err, EC_EINVAL,
                         "ecoord launch needs the training program to run: ecoord launch "
                         "[FLAGS] [--] PROGRAM [ARGS...], e.g. ecoord launch --np=2:4 python "
                         "train.py");
    return 0;
}

int ec_config_validate(const ec_config_t *cfg, ec_getenv_fn env, void *env_arg,
                       ec_error_t *err)
{
    if (!cfg || !ec_config_cmd(ec_config_cmd_name(cfg->cmd)))
        return ec_errorf(err, EC_EINVAL, "ec_config_validate: cfg has not been parsed");
    /* Each check for the commands that have the knob it starts from, in
     * this order: the first problem is the one reported. */
    unsigned cmd = cfg->cmd;
    int rc = 0;
    if (!rc && (cmd & ec__knobs[EC_K_NP].cmds))
        rc = check_np(cfg, err);
    if (!rc && (cmd & ec__knobs[EC_K_GPUS].cmds))
        rc = check_devices(cfg, env, env_arg, err);
    if (!rc && (cmd & ec__knobs[EC_K_PORT_RANGE].cmds))
        rc = check_ports(cfg, err);
    if (!rc && (cmd & ec__knobs[EC_K_ETCD_CERT].cmds))
        rc = check_tls_files(cfg, err);
    if (!rc && (cmd & ec__knobs[EC_K_ETCD_USER].cmds))
        rc = check_auth(cfg, err);
    if (!rc)
        rc = check_program(cfg, err);
    return rc;
}
