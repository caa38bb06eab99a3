/* Embedded loopback etcd: fork/exec the etcd binary into a private temp dir
 * and poll its log for readiness with a deadline. */
#define _GNU_SOURCE
#include "embed.h"
#include "clock.h"
#include "child.h"
#include "procstat.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct ec_embed {
    ec_embed_opts_t o;
    char etcd[512];
    char dir[256];
    char log[300];
    char endpoint[80];
    int client_port, peer_port;
    pid_t pid;
    char *cert, *key, *ca;
};

const char *ec_embed_find_etcd(const char *hint, const char *path)
{
    static char found[512];
    if (hint && *hint && access(hint, X_OK) == 0) {
        snprintf(found, sizeof(found), "%s", hint);
        return found;
    }
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s:/usr/bin:/usr/local/bin", path ? path : "");
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(found, sizeof(found), "%s/etcd", d);
        if (access(found, X_OK) == 0)
            return found;
    }
    return NULL;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &l) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(p);
    return 0;
}

/* Each data dir says who made it: "owner" holds that process's pid and
 * start time (/proc/<pid>/stat field 22), so that a dir whose owner died
 * without stopping it (kill -9, a crash: etcd dies with it) is found.  Not
 * written for a dir kept on purpose (keep_dir). */
#define OWNER_FILE "owner"
#define DIR_PREFIX "ecoord-etcd-"

static void write_owner(const char *dir)
{
    char path[300], buf[64];
    unsigned long long start = 0;
    if (!ec_proc_stat(getpid(), NULL, NULL, &start))
        return;
    snprintf(path, sizeof(path), "%s/" OWNER_FILE, dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    int n = snprintf(buf, sizeof(buf), "%d %llu\n", (int)getpid(), start);
    ssize_t w = write(fd, buf, (size_t)n);
    (void)w;
    close(fd);
}

/* Whether dir's owner file names a process that is gone (or another one
 * under its pid); false when there is no owner file or it cannot be read. */
static bool owner_gone(const char *dir)
{
    char path[300], buf[64];
    snprintf(path, sizeof(path), "%s/" OWNER_FILE, dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    int pid = 0;
    unsigned long long start = 0, now = 0;
    if (n <= 0)
        return false;
    buf[n] = '\0';
    if (sscanf(buf, "%d %llu", &pid, &start) != 2 || pid <= 0)
        return false;
    return !ec_proc_stat((pid_t)pid, NULL, NULL, &now) || now != start;
}

/* Remove the data dirs under tmp that an embedded etcd of a process now
 * gone left behind (each holds a whole etcd: ~120 MB). */
static void sweep_stale(const char *tmp)
{
    DIR *d = opendir(tmp);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, DIR_PREFIX, sizeof(DIR_PREFIX) - 1) ||
            strlen(de->d_name) != sizeof(DIR_PREFIX) - 1 + 6)
            continue;
        char dir[512];
        snprintf(dir, sizeof(dir), "%s/%s", tmp, de->d_name);
        if (owner_gone(dir))
            nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
}

static bool log_has(const char *path, const char *needle, char *tail, size_t tlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[4096];
    bool hit = false;
    if (tail && tlen)
        tail[0] = '\0';
    while (fgets(line, sizeof(line), f)) {
        if (strstr(line, needle))
            hit = true;
        if (tail && tlen && (strstr(line, "\"level\":\"error\"") || strstr(line, "\"level\":\"fatal\"") ||
                             strstr(line, "\"level\":\"warn\"")))
            snprintf(tail, tlen, "%s", line);
    }
    fclose(f);
    return hit;
}

static int spawn(ec_embed_t *e, ec_error_t *err)
{
    char client[64], peer[64], cluster[96], datadir[300];
    const char *scheme = e->cert ? "https" : "http";
    snprintf(client, sizeof(client), "%s://127.0.0.1:%d", scheme, e->client_port);
    snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", e->peer_port);
    snprintf(cluster, sizeof(cluster), "ec=%s", peer);
    snprintf(datadir, sizeof(datadir), "%s/data", e->dir);
    const char *argv[48];
    int n = 0;
    argv[n++] = e->etcd;
    argv[n++] = "--name=ec";
    argv[n++] = "--data-dir";
    argv[n++] = datadir;
    argv[n++] = "--listen-client-urls";
    argv[n++] = client;
    argv[n++] = "--advertise-client-urls";
    argv[n++] = client;
    argv[n++] = "--listen-peer-urls";
    argv[n++] = peer;
    argv[n++] = "--initial-advertise-peer-urls";
    argv[n++] = peer;
    argv[n++] = "--initial-cluster";
    argv[n++] = cluster;
    /* One member: a short election timeout only makes startup faster. */
    argv[n++] = "--heartbeat-interval=50";
    argv[n++] = "--election-timeout=250";
    argv[n++] = "--logger=zap";
    argv[n++] = "--log-outputs=stderr";
    char certarg[600], keyarg[600], caarg[600];
    if (e->cert) {
        snprintf(certarg, sizeof(certarg), "--cert-file=%s", e->cert);
        snprintf(keyarg, sizeof(keyarg), "--key-file=%s", e->key);
        argv[n++] = certarg;
        argv[n++] = keyarg;
        if (e->ca) {
            snprintf(caarg, sizeof(caarg), "--trusted-ca-file=%s", e->ca);
            argv[n++] = caarg;
            argv[n++] = "--client-cert-auth";
        }
    }
    for (int i = 0; e->o.extra_args && e->o.extra_args[i] && n < 47; i++)
        argv[n++] = e->o.extra_args[i];
    argv[n] = NULL;
    /* Readiness is read from a fresh log: keep the last run's aside. */
    char prev[320];
    snprintf(prev, sizeof(prev), "%s.prev", e->log);
    rename(e->log, prev);
    pid_t parent = getpid();
    sigset_t saved;
    ec_child_fork_begin(&saved);
    pid_t pid = fork();
    int fork_errno = errno;
    if (pid == 0) {
        if (ec_child_reset(SIGKILL, parent) < 0)
            _exit(127);
        int fd = open(e->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        setpgid(0, 0); /* a ^C on the terminal is ours to forward, not etcd's */
        execv(e->etcd, (char *const *)argv);
        _exit(127);
    }
    ec_child_fork_end(&saved);
    if (pid < 0)
        return ec_errorf(err, EC_ESYS, "cannot fork etcd: %s", strerror(fork_errno));
    e->pid = pid;
    int64_t deadline = ec_mono_ms() + e->o.start_timeout_ms;
    char tail[512];
    while (ec_mono_ms() < deadline) {
        if (log_has(e->log, "serving client traffic", NULL, 0))
            return 0;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            e->pid = 0;
            log_has(e->log, "", tail, sizeof(tail));
            /* its log goes with its temp dir: what it said is quoted here */
            char how[48];
            if (WIFEXITED(st))
                snprintf(how, sizeof(how), "with code %d", WEXITSTATUS(st));
            else
                snprintf(how, sizeof(how), "on signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
            return ec_errorf(err, EC_EIO, "%s exited at start %s: %s", e->etcd,
                             how, tail[0] ? tail : "it logged no error line (is that an etcd "
                                                   "binary? try it with --version)");
        }
        struct timespec ts = {0, 10 * 1000 * 1000}; /* poll the log every 10 ms */
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    e->pid = 0;
    log_has(e->log, "", tail, sizeof(tail));
    return ec_errorf(err, EC_ETIMEDOUT, "%s did not serve clients within %d "
                     "ms%s%s", e->etcd, e->o.start_timeout_ms, tail[0] ? "; its last words: " : "",
                     tail);
}

ec_embed_t *ec_embed_start(const ec_embed_opts_t *opts, ec_error_t *err)
{
    ec_embed_t *e = calloc(1, sizeof(*e));
    if (!e) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    if (opts)
        memcpy(&e->o, opts, opts->size < sizeof(e->o) ? opts->size : sizeof(e->o));
    if (e->o.start_timeout_ms <= 0)
        e->o.start_timeout_ms = 15000;
    const char *etcd = ec_embed_find_etcd(e->o.etcd_path, e->o.search_path);
    if (!etcd) {
        ec_errorf(err, EC_ENOTFOUND,
                  "no etcd binary found (looked at $ETCD, PATH, /usr/bin and /usr/local/bin): "
                  "install it with "
                  "'apt-get install etcd-server', or give --elastic_server");
        free(e);
        return NULL;
    }
    snprintf(e->etcd, sizeof(e->etcd), "%s", etcd);
    const char *tmp = e->o.tmpdir && *e->o.tmpdir ? e->o.tmpdir : "/tmp";
    sweep_stale(tmp);
    snprintf(e->dir, sizeof(e->dir), "%s/" DIR_PREFIX "XXXXXX", tmp);
    if (!mkdtemp(e->dir)) {
        ec_errorf(err, EC_ESYS, "cannot create a temp dir for etcd under %s (%s): %s", tmp,
                  e->o.tmpdir && *e->o.tmpdir ? "$TMPDIR" : "the default, /tmp",
                  strerror(errno));
        free(e);
        return NULL;
    }
    if (!e->o.keep_dir)
        write_owner(e->dir);
    snprintf(e->log, sizeof(e->log), "%s/etcd.log", e->dir);
    if (e->o.cert_file) {
        e->cert = strdup(e->o.cert_file);
        e->key = e->o.key_file ? strdup(e->o.key_file) : NULL;
        e->ca = e->o.ca_file ? strdup(e->o.ca_file) : NULL;
    }
    int rc = -1;
    for (int attempt = 0; attempt < 3 && rc < 0; attempt++) {
        /* A free port can be taken between the probe and etcd's bind: retry. */
        e->client_port = e->o.client_port > 0 ? e->o.client_port : free_port();
        e->peer_port = free_port();
        if (e->peer_port == e->client_port)
            e->peer_port = free_port();
        rc = spawn(e, err);
        if (e->o.client_port > 0)
            break;
    }
    if (rc < 0) {
        ec_embed_stop(e);
        return NULL;
    }
    snprintf(e->endpoint, sizeof(e->endpoint), "%s127.0.0.1:%d", e->cert ? "https://" : "",
             e->client_port);
    return e;
}

const char *ec_embed_endpoint(const ec_embed_t *e) { return e->endpoint; }
int ec_embed_port(const ec_embed_t *e) { return e->client_port; }
pid_t ec_embed_pid(const ec_embed_t *e) { return e->pid; }
const char *ec_embed_dir(const ec_embed_t *e) { return e->dir; }

void ec_embed_kill(ec_embed_t *e, int sig)
{
    if (!e || e->pid <= 0)
        return;
    kill(e->pid, sig);
    waitpid(e->pid, NULL, 0);
    e->pid = 0;
}

int ec_embed_restart(ec_embed_t *e, ec_error_t *err)
{
    if (e->pid > 0)
        ec_embed_kill(e, SIGKILL);
    int rc = -1;
    int64_t deadline = ec_mono_ms() + e->o.start_timeout_ms;
    /* The old process's port may linger briefly: retry within the deadline. */
    while (rc < 0 && ec_mono_ms() < deadline)
        rc = spawn(e, err);
    return rc;
}

void ec_embed_stop(ec_embed_t *e)
{
    if (!e)
        return;
    int saved = errno;
    if (e->pid > 0) {
        kill(e->pid, SIGTERM);
        int64_t deadline = ec_mono_ms() + 5000;
        while (waitpid(e->pid, NULL, WNOHANG) == 0) {
            if (ec_mono_ms() > deadline) {
                kill(e->pid, SIGKILL);
                waitpid(e->pid, NULL, 0);
                break;
            }
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        e->pid = 0;
    }
    if (e->dir[0] && !e->o.keep_dir)
        nftw(e->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(e->cert);
    free(e->key);
    free(e->ca);
    free(e);
    errno = saved;
}
