/* `ecoord check`'s allreduce: an ordinary job of the worker library, run
 * through `ecoord launch` on every node (the contract is in command.h). */
#include "command_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "clock.h"
#include "gather.h"
#include "log.h"

static void coll_parse(ec_check_facts_t *f, const char *log)
{
    FILE *in = fopen(log, "r");
    char line[1024], last[1024] = "";
    while (in && fgets(line, sizeof(line), in)) {
        const char *m = strstr(line, "ecoord-allreduce: ");
        if (m)
            snprintf(last, sizeof(last), "%s", m + 18);
    }
    if (in)
        fclose(in);
    last[strcspn(last, "\n")] = '\0';
    char backend[16];
    int ranks;
    long long bytes;
    double secs, bw;
    if (sscanf(last, "ok backend=%15s ranks=%d bytes=%lld seconds=%lf busbw_gbps=%lf", backend,
               &ranks, &bytes, &secs, &bw) == 5) {
        f->coll = EC_CHECK_COLL_OK;
        snprintf(f->coll_backend, sizeof(f->coll_backend), "%s", backend);
        f->coll_ranks = ranks;
        f->coll_bytes = bytes;
        f->coll_seconds = secs;
        f->coll_busbw_gbps = bw;
    } else if (!f->coll_why[0]) {
        f->coll = EC_CHECK_COLL_FAIL;
        snprintf(f->coll_why, sizeof(f->coll_why), "%s (log: %s)",
                 last[0] ? last : "no result line from the allreduce program", log);
    }
}

/* The allreduce job's id: one per run of the check (named after the
 * leader's nonce), so a finished job's status never meets the next run. */
void ec__check_coll_job_id(const ck_t *x, const char *lnonce, char *buf, size_t len)
{
    snprintf(buf, len, "%.*s.check-%.8s", EC_JOB_ID_MAX - 15, x->cfg->job_id, lnonce);
}

/* <log_dir>/check/<node_id>/ (several nodes may share a machine and a
 * log_dir) and the launch's log in it. */
static void coll_log_dir(ck_t *x, char *dir, size_t dlen, char *log, size_t llen)
{
    const char *log_dir = x->cfg->log_dir;
    snprintf(dir, dlen, "%s/check", log_dir);
    mkdir(log_dir, 0755);
    mkdir(dir, 0755);
    snprintf(dir, dlen, "%s/check/%s", log_dir, x->self.node_id);
    mkdir(dir, 0755);
    snprintf(log, llen, "%s/launch.log", dir);
    snprintf(x->coll_log, sizeof(x->coll_log), "%s", log);
}

/* `ecoord launch`'s command line for the allreduce job, and the strings it
 * points into. */
typedef struct {
    const char *argv[32];
    int ac;
    char eps[600], job[EC_JOB_ID_MAX + 32], np[32], nproc[32], host[128], id[300],
        log[PATH_MAX + 16], to[48], ttl[48], bytes[48], gpus[1200], prefix[300],
        ca[PATH_MAX + 20], cert[PATH_MAX + 20], key[PATH_MAX + 20], user[300],
        pwf[PATH_MAX + 30];
} coll_args_t;

/* Adds "--flag=val" (kept in buf) when val is set. */
static void pass_flag(coll_args_t *a, char *buf, size_t len, const char *flag, const char *val)
{
    if (!val || !*val)
        return;
    snprintf(buf, len, "--%s=%s", flag, val);
    a->argv[a->ac++] = buf;
}

/* The flags the launch shares with this check: etcd, its credentials, the
 * node, the GPUs. */
static void coll_flags(ck_t *x, coll_args_t *a, int nnodes, const char *job, const char *dir)
{
    const ec_config_t *cfg = x->cfg;
    const ec_check_facts_t *f = &x->self;
    snprintf(a->eps, sizeof(a->eps), "--elastic_server=%s", x->endpoints);
    snprintf(a->job, sizeof(a->job), "--job_id=%s", job);
    snprintf(a->np, sizeof(a->np), "--np=%d", nnodes);
    snprintf(a->nproc, sizeof(a->nproc), "--nproc_per_node=%d", cfg->nproc_per_node);
    snprintf(a->host, sizeof(a->host), "--host=%s", f->host);
    /* the id this node published under (a duplicate got <id>.dup-<nonce>) */
    const char *pub_id = strrchr(x->k_self, '/') ? strrchr(x->k_self, '/') + 1 : f->node_id;
    snprintf(a->id, sizeof(a->id), "--node_id=%s", pub_id);
    snprintf(a->log, sizeof(a->log), "--log_dir=%s", dir);
    snprintf(a->to, sizeof(a->to), "--elastic_timeout=%lld",
             (long long)(cfg->elastic_timeout_ms / 1000 + 1));
    snprintf(a->ttl, sizeof(a->ttl), "--lease_ttl=%lld", (long long)(cfg->lease_ttl_ms / 1000));
    const char *fixed[] = {a->eps, a->job, a->np, a->nproc, a->host, a->id, a->log, a->to,
                           a->ttl, "--max_restart=0"};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        a->argv[a->ac++] = fixed[i];
    if (cfg->gpus.n) {
        size_t used = (size_t)snprintf(a->gpus, sizeof(a->gpus), "--gpus=");
        for (int i = 0; i < cfg->gpus.n && used < sizeof(a->gpus) - 8; i++)
            used += (size_t)snprintf(a->gpus + used, sizeof(a->gpus) - used, "%s%d",
                                     i ? "," : "", cfg->gpus.v[i]);
        a->argv[a->ac++] = a->gpus;
    }
    pass_flag(a, a->prefix, sizeof(a->prefix), "etcd_prefix", cfg->etcd_prefix);
    pass_flag(a, a->ca, sizeof(a->ca), "etcd_cacert", cfg->etcd_cacert);
    pass_flag(a, a->cert, sizeof(a->cert), "etcd_cert", cfg->etcd_cert);
    pass_flag(a, a->key, sizeof(a->key), "etcd_key", cfg->etcd_key);
    pass_flag(a, a->user, sizeof(a->user), "etcd_user", cfg->etcd_user);
    pass_flag(a, a->pwf, sizeof(a->pwf), "etcd_password_file", cfg->etcd_password_file);
}

/* exe launch <flags> -- prog --bytes=N */
static void coll_argv(ck_t *x, coll_args_t *a, const char *exe, const char *prog, int nnodes,
                      bool gpus, const char *job, const char *dir)
{
    a->ac = 0;
    a->argv[a->ac++] = exe;
    a->argv[a->ac++] = "launch";
    coll_flags(x, a, nnodes, job, dir);
    snprintf(a->bytes, sizeof(a->bytes), "--bytes=%lld", gpus ? 256LL << 20 : 16LL << 20);
    a->argv[a->ac++] = "--";
    a->argv[a->ac++] = prog;
    a->argv[a->ac++] = a->bytes;
    a->argv[a->ac] = NULL;
}

/* Starts exe argv with stdout and stderr to log; the pid, or -1 with errno. */
static pid_t coll_spawn(const char *exe, const char *const *argv, const char *log)
{
    pid_t parent = getpid();
    sigset_t saved;
    ec_child_fork_begin(&saved);
    pid_t pid = fork();
    if (pid == 0) {
        if (ec_child_reset(SIGKILL, parent) < 0)
            _exit(127);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    int fork_errno = errno;
    ec_child_fork_end(&saved);
    errno = fork_errno;
    return pid;
}

/* Waits for pid until COLL_EXTRA_MS or an abort; true and *st when it
 * ended, false when it had to be stopped (SIGTERM, a grace, then SIGKILL). */
static bool coll_wait(ck_t *x, pid_t pid, int *st)
{
    int64_t deadline = ec_mono_ms() + COLL_EXTRA_MS;
    pid_t r = 0;
    while ((r = waitpid(pid, st, WNOHANG)) == 0 && !*x->abort && ec_mono_ms() < deadline) {
        struct timespec ts = {0, 50 * 1000000L}; /* polls the child: no event to wait on */
        nanosleep(&ts, NULL);
    }
    if (r != 0)
        return true;
    kill(pid, SIGTERM);
    int64_t grace = ec_mono_ms() + 3000;
    while ((r = waitpid(pid, st, WNOHANG)) == 0 && ec_mono_ms() < grace) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, st, 0);
    }
    return false;
}

void ec__check_run_collective(ck_t *x, int nnodes, bool gpus, const char *job)
{
    ec_check_facts_t *f = &x->self;
    char prog[PATH_MAX], why[256] = "", exe[PATH_MAX];
    ec_check_find_coll_prog(x->env, x->env_arg, prog, sizeof(prog), why, sizeof(why));
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (!prog[0] || n <= 0) {
        f->coll = EC_CHECK_COLL_SKIP;
        snprintf(f->coll_why, sizeof(f->coll_why), "%s", why[0] ? why : "no ecoord binary");
        return;
    }
    exe[n] = '\0';
    char dir[PATH_MAX], log[PATH_MAX + 32];
    coll_log_dir(x, dir, sizeof(dir), log, sizeof(log));
    coll_args_t a;
    coll_argv(x, &a, exe, prog, nnodes, gpus, job, dir);

    ec_log(EC_LOG_INFO, "running the allreduce job %s (%s; log %s)", job, prog, log);
    pid_t pid = coll_spawn(exe, a.argv, log);
    if (pid < 0) {
        f->coll = EC_CHECK_COLL_FAIL;
        snprintf(f->coll_why, sizeof(f->coll_why), "cannot start ecoord launch: %s",
                 strerror(errno));
        return;
    }
    int st = 0;
    if (!coll_wait(x, pid, &st)) {
        /* deadline or signal */
        f->coll = EC_CHECK_COLL_FAIL;
        snprintf(f->coll_why, sizeof(f->coll_why),
                 "the allreduce job did not finish within "
                 "%lld s: a node died or never joined it (log: %s)",
                 (long long)(COLL_EXTRA_MS / 1000), log);
        return;
    }
    coll_parse(f, log);
    if (f->coll == EC_CHECK_COLL_OK && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        f->coll = EC_CHECK_COLL_FAIL;
        snprintf(f->coll_why, sizeof(f->coll_why), "ecoord launch ended with status %d after "
                 "the allreduce (log: %s)", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
                 log);
    }
}

/* Why the allreduce cannot run everywhere, or "" when it can. */
void ec__check_coll_decide(ck_t *x, const snap_t *snap, char *why, size_t len, bool *gpus)
{
    why[0] = '\0';
    *gpus = false;
    char missing[512] = "";
    int nmiss = 0;
    pthread_mutex_lock(&x->lock);
    for (int i = 0; i < snap->n; i++) {
        peer_t *p = ec__check_peer_get(x, snap->keys[i], false);
        if (!p || !p->valid)
            continue;
        *gpus |= p->f.driver;
        if (!p->f.coll_prog && strlen(missing) + strlen(p->f.node_id) + 3 < sizeof(missing)) {
            snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
                     nmiss ? ", " : "", p->f.node_id);
            nmiss++;
        }
    }
    pthread_mutex_unlock(&x->lock);
    if (!x->self.coll_prog) {
        char prog[PATH_MAX];
        ec_check_find_coll_prog(x->env, x->env_arg, prog, sizeof(prog), why, len);
    } else if (nmiss) {
        snprintf(why, len, "the worker library's allreduce program is missing on %s", missing);
    }
}
