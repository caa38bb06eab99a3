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

void ec__check_run_collective(ck_t *x, int nnodes, bool gpus, const char *job)
{
    const ec_config_t *cfg = x->cfg;
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
    /* <log_dir>/check/<node_id>/: several nodes may share a machine and a log_dir */
    char dir[PATH_MAX], log[PATH_MAX + 32];
    snprintf(dir, sizeof(dir), "%s/check", cfg->log_dir);
    mkdir(cfg->log_dir, 0755);
    mkdir(dir, 0755);
    snprintf(dir, sizeof(dir), "%s/check/%s", cfg->log_dir, f->node_id);
    mkdir(dir, 0755);
    snprintf(log, sizeof(log), "%s/launch.log", dir);
    snprintf(x->coll_log, sizeof(x->coll_log), "%s", log);
    char a_eps[600], a_job[EC_JOB_ID_MAX + 32], a_np[32], a_nproc[32], a_host[128], a_id[300],
        a_log[PATH_MAX + 16], a_to[48], a_ttl[48], a_bytes[48], a_gpus[1200] = "",
        a_prefix[300] = "", a_ca[PATH_MAX + 20] = "", a_cert[PATH_MAX + 20] = "",
        a_key[PATH_MAX + 20] = "", a_user[300] = "", a_pwf[PATH_MAX + 30] = "";
    snprintf(a_eps, sizeof(a_eps), "--elastic_server=%s", x->endpoints);
    snprintf(a_job, sizeof(a_job), "--job_id=%s", job);
    snprintf(a_np, sizeof(a_np), "--np=%d", nnodes);
    snprintf(a_nproc, sizeof(a_nproc), "--nproc_per_node=%d", cfg->nproc_per_node);
    snprintf(a_host, sizeof(a_host), "--host=%s", f->host);
    /* the id this node published under (a duplicate got <id>.dup-<nonce>) */
    const char *pub_id = strrchr(x->k_self, '/') ? strrchr(x->k_self, '/') + 1 : f->node_id;
    snprintf(a_id, sizeof(a_id), "--node_id=%s", pub_id);
    snprintf(a_log, sizeof(a_log), "--log_dir=%s", dir);
    snprintf(a_to, sizeof(a_to), "--elastic_timeout=%lld",
             (long long)(cfg->elastic_timeout_ms / 1000 + 1));
    snprintf(a_ttl, sizeof(a_ttl), "--lease_ttl=%lld", (long long)(cfg->lease_ttl_ms / 1000));
    snprintf(a_bytes, sizeof(a_bytes), "--bytes=%lld", gpus ? 256LL << 20 : 16LL << 20);
    const char *argv[32];
    int ac = 0;
    argv[ac++] = exe;
    argv[ac++] = "launch";
    argv[ac++] = a_eps;
    argv[ac++] = a_job;
    argv[ac++] = a_np;
    argv[ac++] = a_nproc;
    argv[ac++] = a_host;
    argv[ac++] = a_id;
    argv[ac++] = a_log;
    argv[ac++] = a_to;
    argv[ac++] = a_ttl;
    argv[ac++] = "--max_restart=0";
    if (cfg->gpus.n) {
        size_t used = (size_t)snprintf(a_gpus, sizeof(a_gpus), "--gpus=");
        for (int i = 0; i < cfg->gpus.n && used < sizeof(a_gpus) - 8; i++)
            used += (size_t)snprintf(a_gpus + used, sizeof(a_gpus) - used, "%s%d", i ? "," : "",
                                     cfg->gpus.v[i]);
        argv[ac++] = a_gpus;
    }
#define PASS_FLAG(buf, flag, val)                                     \
    if ((val) && *(val)) {                                            \
        snprintf(buf, sizeof(buf), "--" flag "=%s", (val));           \
        argv[ac++] = buf;                                             \
    }
    PASS_FLAG(a_prefix, "etcd_prefix", cfg->etcd_prefix);
    PASS_FLAG(a_ca, "etcd_cacert", cfg->etcd_cacert);
    PASS_FLAG(a_cert, "etcd_cert", cfg->etcd_cert);
    PASS_FLAG(a_key, "etcd_key", cfg->etcd_key);
    PASS_FLAG(a_user, "etcd_user", cfg->etcd_user);
    PASS_FLAG(a_pwf, "etcd_password_file", cfg->etcd_password_file);
#undef PASS_FLAG
    argv[ac++] = "--";
    argv[ac++] = prog;
    argv[ac++] = a_bytes;
    argv[ac] = NULL;

    ec_log(EC_LOG_INFO, "running the allreduce job %s (%s; log %s)", job, prog, log);
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
    if (pid < 0) {
        f->coll = EC_CHECK_COLL_FAIL;
        snprintf(f->coll_why, sizeof(f->coll_why), "cannot start ecoord launch: %s",
                 strerror(errno));
        return;
    }
    int64_t deadline = ec_mono_ms() + COLL_EXTRA_MS;
    int st = 0;
    pid_t r = 0;
    while ((r = waitpid(pid, &st, WNOHANG)) == 0 && !*x->abort && ec_mono_ms() < deadline) {
        struct timespec ts = {0, 50 * 1000000L}; /* polls the child: no event to wait on */
        nanosleep(&ts, NULL);
    }
    if (r == 0) {
        /* deadline or signal: stop it, give it its grace, then kill */
        kill(pid, SIGTERM);
        int64_t grace = ec_mono_ms() + 3000;
        while ((r = waitpid(pid, &st, WNOHANG)) == 0 && ec_mono_ms() < grace) {
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (r == 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
        }
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
