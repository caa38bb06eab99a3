/* Integration-test harness helpers. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void ec_test_require_etcd(void)
{
    /* First thing in main, before any thread (etcd.h: EC_ETCD_POLL_ENV). */
    setenv(EC_ETCD_POLL_ENV, EC_ETCD_POLL_MS, 0);
    if (!ec_embed_find_etcd(getenv("ETCD"), getenv("PATH"))) {
        printf("1..0 # SKIP no etcd binary (apt-get install etcd-server)\n");
        exit(0);
    }
}

ec_embed_t *ec_test_etcd_start(const ec_embed_opts_t *opts)
{
    ec_error_t err = {0};
    ec_embed_opts_t o = EC_EMBED_OPTS_INIT;
    if (opts)
        memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
    o.size = sizeof(o);
    /* The environment the tests run in (make check sets ETCD): the library
     * reads none itself. */
    if (!o.etcd_path || !*o.etcd_path)
        o.etcd_path = getenv("ETCD");
    if (!o.search_path)
        o.search_path = getenv("PATH");
    if (!o.tmpdir)
        o.tmpdir = getenv("TMPDIR");
    if (getenv("EC_KEEP_ETCD_DIR"))
        o.keep_dir = 1;
    ec_embed_t *e = ec_embed_start(&o, &err);
    ck_assert_msg(e != NULL, "cannot start etcd: %s", err.msg);
    return e;
}

ec_etcd_t *ec_test_client(const char *endpoint)
{
    ec_error_t err = {0};
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = endpoint;
    ec_etcd_t *c = ec_etcd_create(&o, &err);
    ck_assert_msg(c != NULL, "cannot connect to %s: %s", endpoint, err.msg);
    return c;
}

int64_t ec_test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL); /* the polling interval of ec_test_wait, not a synchronisation */
}

bool ec_test_wait(bool (*cond)(void *), void *arg, long timeout_ms)
{
    int64_t deadline = ec_test_now_ms() + ec_test_ms(timeout_ms);
    for (;;) {
        if (cond(arg))
            return true;
        if (ec_test_now_ms() > deadline)
            return false;
        pause_ms(2);
    }
}

bool ec_test_holds(bool (*cond)(void *), void *arg, long span_ms)
{
    int64_t end = ec_test_now_ms() + span_ms;
    while (ec_test_now_ms() < end) {
        if (!cond(arg))
            return false;
        pause_ms(20);
    }
    return cond(arg);
}

int ec_test_run(char *const argv[], char *out, size_t outlen)
{
    int pipefd[2];
    if (pipe(pipefd) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 1);
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        close(pipefd[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(pipefd[1]);
    size_t used = 0;
    char buf[1024];
    ssize_t r;
    while ((r = read(pipefd[0], buf, sizeof(buf))) > 0) {
        if (out && used + 1 < outlen) {
            size_t n = (size_t)r < outlen - used - 1 ? (size_t)r : outlen - used - 1;
            memcpy(out + used, buf, n);
            used += n;
        }
    }
    if (out && outlen)
        out[used] = '\0';
    close(pipefd[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- processes ---------------------------------------------------------- */

#include <fcntl.h>
#include <pthread.h>
#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>

#include "ec_http.h"
#include "epoch_fetch.h"
#include "history.h"
#include "keys.h"
#include "records.h"

/* Whether every thread of pid is stopped (state T or t in its stat). */
static bool all_stopped(void *arg)
{
    pid_t pid = *(pid_t *)arg;
    char dir[64];
    snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool all = true;
    int n = 0;
    struct dirent *de;
    while (all && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[128], buf[512];
        snprintf(path, sizeof(path), "%s/%s/stat", dir, de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* a thread that just exited */
        size_t len = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[len] = '\0';
        const char *rp = strrchr(buf, ')'); /* the state follows the name */
        all = rp && rp[1] == ' ' && (rp[2] == 'T' || rp[2] == 't');
        n++;
    }
    closedir(d);
    return all && n > 0;
}

void ec_test_sigstop(pid_t pid)
{
    ck_assert_int_eq(kill(pid, SIGSTOP), 0);
    ck_assert_msg(ec_test_wait(all_stopped, &pid, 5000), "process %d did not stop within 5 s",
                  (int)pid);
}

pid_t ec_test_spawn(char *const argv[], const char *logpath)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    return pid;
}

int ec_test_reap(pid_t pid, long timeout_ms)
{
    int64_t deadline = ec_test_now_ms() + ec_test_ms(timeout_ms);
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (r < 0 || ec_test_now_ms() > deadline)
            return -1;
        pause_ms(2);
    }
}

void ec_test_write_file(const char *path, const char *text, unsigned mode)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(path, (mode_t)mode), 0);
}

bool ec_test_file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[4096];
    bool hit = false;
    while (!hit && fgets(line, sizeof(line), f))
        hit = strstr(line, needle) != NULL;
    fclose(f);
    return hit;
}

typedef struct {
    const char *path, *needle;
} file_needle_t;

static bool file_has(void *arg)
{
    file_needle_t *f = arg;
    return ec_test_file_contains(f->path, f->needle);
}

bool ec_test_wait_file(const char *path, const char *needle, long timeout_ms)
{
    file_needle_t f = {path, needle};
    return ec_test_wait(file_has, &f, timeout_ms);
}

const char *ec_test_env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v && *v ? v : def;
}

const char *ec_test_bin(const char *env, const char *fallback)
{
    return ec_test_env_or(env, fallback);
}

bool ec_test_exists(void *path)
{
    return access((const char *)path, F_OK) == 0;
}

void ec_test_pace_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The keys of a job root "[<prefix>]/<job>/". */
static int root_keys(const char *root, ec_keys_t *k)
{
    char r[1024];
    snprintf(r, sizeof(r), "%s", root);
    size_t n = strlen(r);
    while (n && r[n - 1] == '/')
        r[--n] = '\0';
    char *slash = strrchr(r, '/');
    if (!slash)
        return ec_keys_init(k, NULL, r, NULL);
    *slash = '\0';
    return ec_keys_init(k, r[0] ? r : NULL, slash + 1, NULL);
}

struct ec_epoch *ec_test_epoch(ec_etcd_t *c, const char *root)
{
    char key[1024];
    snprintf(key, sizeof(key), "%sepoch", root);
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) < 0 || !found)
        return NULL;
    ec_epoch_t *ep = NULL;
    ec_keys_t k;
    if (root_keys(root, &k) == 0)
        ec_epoch_fetch(c, &k, kv.value, kv.value_len, key, &ep, NULL, NULL, NULL);
    ec_kv_free(&kv);
    return ep;
}

typedef struct {
    ec_etcd_t *c;
    const char *root;
    const ec_test_epoch_want_t *want;
} epoch_wait_t;

static bool epoch_as_wanted(void *arg)
{
    epoch_wait_t *e = arg;
    const ec_test_epoch_want_t *w = e->want;
    ec_epoch_t *ep = ec_test_epoch(e->c, e->root);
    bool ok = ep && ep->number >= w->min && (!w->max || ep->number <= w->max) &&
              (w->world < 0 || ep->world_size == w->world) &&
              (!w->without || ec_epoch_find_member(ep, w->without) < 0);
    ec_epoch_free(ep);
    return ok;
}

struct ec_epoch *ec_test_wait_epoch(ec_etcd_t *c, const char *root,
                                    const ec_test_epoch_want_t *want, long timeout_ms)
{
    epoch_wait_t e = {c, root, want};
    return ec_test_wait(epoch_as_wanted, &e, timeout_ms) ? ec_test_epoch(c, root) : NULL;
}

int64_t ec_test_lease_of(ec_etcd_t *c, const char *root, const char *node)
{
    ec_keys_t k;
    char key[EC_KEY_MAX];
    if (root_keys(root, &k) < 0 || ec_key_node(&k, node, key, sizeof(key)) < 0)
        return -1;
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, key, &kv, &found, NULL, NULL) < 0 || !found)
        return -1;
    int64_t l = kv.lease;
    ec_kv_free(&kv);
    return l;
}

typedef struct {
    ec_etcd_t *c;
    const char *root, *node;
    int64_t old;
} relet_t;

static bool lease_remade(void *arg)
{
    relet_t *r = arg;
    int64_t l = ec_test_lease_of(r->c, r->root, r->node);
    return l > 0 && l != r->old;
}

bool ec_test_wait_lease_remade(ec_etcd_t *c, const char *root, const char *node, int64_t old,
                               long timeout_ms)
{
    relet_t r = {c, root, node, old};
    return ec_test_wait(lease_remade, &r, timeout_ms);
}

long ec_test_etcd_watch_streams(ec_embed_t *etcd)
{
    size_t cap = 4u << 20;
    char *resp = malloc(cap);
    ck_assert_ptr_nonnull(resp);
    ck_assert_int_eq(ec_http_request(ec_embed_port(etcd), "GET", "/metrics", resp, cap), 200);
    double v = ec_prom_value(ec_http_body(resp), "grpc_server_started_total{grpc_method=\"Watch\","
                             "grpc_service=\"etcdserverpb.Watch\",grpc_type=\"bidi_stream\"}", -1);
    free(resp);
    ck_assert_msg(v >= 0, "etcd's /metrics has no grpc_server_started_total of Watch");
    return (long)v;
}

bool ec_test_only_registered(ec_etcd_t *c, const char *root, const char *const *ids, int n)
{
    ec_keys_t keys;
    char prefix[EC_KEY_MAX];
    if (root_keys(root, &keys) < 0 || ec_key_nodes_prefix(&keys, prefix, sizeof(prefix)) < 0)
        return false;
    ec_kv_list_t l;
    if (ec_etcd_get_prefix(c, prefix, 0, &l, NULL) < 0)
        return false;
    bool ok = true;
    for (size_t i = 0; ok && i < l.n; i++) {
        const char *id = l.kvs[i].key + strlen(prefix);
        size_t len = strcspn(id, "/");
        ok = false;
        for (int k = 0; !ok && k < n; k++)
            ok = strlen(ids[k]) == len && !strncmp(id, ids[k], len);
    }
    ec_kv_list_free(&l);
    return ok;
}

struct ec_epoch *ec_test_need_epoch(ec_etcd_t *c, const char *root, uint64_t number, int world,
                                    long timeout_ms)
{
    ec_test_epoch_want_t w = {.min = number, .world = world};
    ec_epoch_t *ep = ec_test_wait_epoch(c, root, &w, timeout_ms);
    ck_assert_msg(ep, "no epoch >= %llu of world %d at %s within %ld ms",
                  (unsigned long long)number, world, root, timeout_ms);
    return ep;
}

/* ---- leadership observer and history check ------------------------------- */

struct ec_test_obs {
    ec_etcd_t *c;
    char root[512];
    char leader_key[600], sentinel[600];
    ec_watch_t *w;
    pthread_mutex_t lock;
    ec_leader_obs_t obs[256];
    char ids[256][256];
    int nobs;
    int64_t sentinel_rev;
};

/* The open leadership (end_rev 0) ends at rev; lock held. */
static void obs_end(ec_test_obs_t *o, int64_t rev)
{
    if (o->nobs > 0 && o->obs[o->nobs - 1].end_rev == 0)
        o->obs[o->nobs - 1].end_rev = rev;
}

static void obs_cb(const ec_watch_event_t *ev, void *arg)
{
    ec_test_obs_t *o = arg;
    if (ev->type == EC_WATCH_DELETE) {
        /* The leader key went (lease expired or revoked, deleted): from this
         * revision on its holder is deposed and may write nothing. */
        pthread_mutex_lock(&o->lock);
        if (!strcmp(ev->kv->key, o->leader_key))
            obs_end(o, ev->revision);
        pthread_mutex_unlock(&o->lock);
        return;
    }
    if (ev->type != EC_WATCH_PUT)
        return;
    pthread_mutex_lock(&o->lock);
    if (!strcmp(ev->kv->key, o->leader_key) && o->nobs < 256 && ev->kv->version == 1) {
        obs_end(o, ev->revision); /* a create always follows a delete; in case */
        snprintf(o->ids[o->nobs], sizeof(o->ids[0]), "%s", (char *)ev->kv->value);
        o->obs[o->nobs].node_id = o->ids[o->nobs];
        o->obs[o->nobs].create_rev = ev->kv->create_revision;
        o->obs[o->nobs].end_rev = 0;
        o->nobs++;
    } else if (!strcmp(ev->kv->key, o->sentinel)) {
        o->sentinel_rev = ev->revision;
    }
    pthread_mutex_unlock(&o->lock);
}

/* Observers still running: a failed assertion skips the test's own
 * ec_test_obs_stop, and its watch must not outlive the client. */
static ec_test_obs_t *live_obs[16];

void ec_test_obs_stop_all(void)
{
    for (int i = 0; i < 16; i++)
        if (live_obs[i])
            ec_test_obs_stop(live_obs[i]);
}

ec_test_obs_t *ec_test_obs_start(ec_etcd_t *c, const char *root)
{
    ec_test_obs_t *o = calloc(1, sizeof(*o));
    for (int i = 0; i < 16; i++)
        if (!live_obs[i]) {
            live_obs[i] = o;
            break;
        }
    o->c = c;
    snprintf(o->root, sizeof(o->root), "%s", root);
    snprintf(o->leader_key, sizeof(o->leader_key), "%sleader", root);
    snprintf(o->sentinel, sizeof(o->sentinel), "%szz-test-sentinel", root);
    pthread_mutex_init(&o->lock, NULL);
    ec_error_t err = {0};
    /* Watch from an explicit revision: a watch "from now" could be created
     * on the server after the sentinel write below and miss it. */
    int64_t now_rev = 0;
    ck_assert_int_eq(ec_etcd_status(c, &now_rev, NULL, 0, &err), 0);
    o->w = ec_watch_start(c, root, true, now_rev + 1, obs_cb, o, &err);
    ck_assert_msg(o->w != NULL, "observer watch: %s", err.msg);
    int64_t rev;
    ck_assert_int_eq(ec_etcd_put(c, o->sentinel, "x", 1, 0, &rev, &err), 0);
    int64_t deadline = ec_test_now_ms() + ec_test_ms(5000);
    bool ok = false;
    while (!ok && ec_test_now_ms() < deadline) {
        pthread_mutex_lock(&o->lock);
        ok = o->sentinel_rev >= rev;
        pthread_mutex_unlock(&o->lock);
        if (!ok)
            pause_ms(2);
    }
    if (!ok) {
        ec_watch_stop(o->w); /* before failing: the test's teardown destroys c */
        ck_abort_msg("observer watch never delivered the sentinel");
    }
    return o;
}

int ec_test_obs_check(ec_test_obs_t *o, int min_nodes, int max_nodes, int nproc)
{
    ec_error_t err = {0};
    int64_t rev;
    ck_assert_int_eq(ec_etcd_put(o->c, o->sentinel, "y", 1, 0, &rev, &err), 0);
    int64_t deadline = ec_test_now_ms() + ec_test_ms(5000);
    for (;;) { /* every leadership up to now has been observed */
        pthread_mutex_lock(&o->lock);
        bool ok = o->sentinel_rev >= rev;
        pthread_mutex_unlock(&o->lock);
        if (ok)
            break;
        ck_assert_msg(ec_test_now_ms() < deadline, "observer watch fell behind");
        pause_ms(2);
    }
    char prefix[600];
    snprintf(prefix, sizeof(prefix), "%sepochs/", o->root);
    ec_kv_list_t l;
    ck_assert_int_eq(ec_etcd_get_prefix(o->c, prefix, 0, &l, &err), 0);
    ec_epoch_t **eps = calloc(l.n + 1, sizeof(*eps));
    int64_t *mods = calloc(l.n + 1, sizeof(*mods));
    size_t n = 0;
    for (size_t i = 0; i < l.n; i++) {
        const char *rest = l.kvs[i].key + strlen(prefix);
        if (strchr(rest, '/'))
            continue; /* per-epoch worker keys */
        ec_keys_t k;
        ck_assert_int_eq(root_keys(o->root, &k), 0);
        ec_epoch_split_t info;
        int split = ec_epoch_head_info(l.kvs[i].value, l.kvs[i].value_len, NULL, &info, NULL);
        if (split == 1)
            ec_epoch_split_free(&info);
        int rc = ec_epoch_from_listing(&k, &l, l.kvs[i].value, l.kvs[i].value_len, l.kvs[i].key,
                                       &eps[n], &err);
        if (rc < 0 && split == 1)
            continue; /* a split epoch's parts are kept for the last few epochs only */
        ck_assert_msg(rc == 0, "history: %s", err.msg);
        mods[n] = l.kvs[i].mod_revision; /* epochs/<n> is written in the epoch's txn */
        n++;
    }
    ec_history_opts_t ho = EC_HISTORY_OPTS_INIT;
    ho.min_nodes = min_nodes;
    ho.max_nodes = max_nodes;
    ho.nproc = nproc;
    ho.consecutive = 1;
    ho.mod_revs = mods;
    ec_history_stats_t st = {0};
    pthread_mutex_lock(&o->lock);
    int rc = ec_history_check((const ec_epoch_t *const *)eps, n, o->obs, (size_t)o->nobs, &ho, &st, &err);
    int nobs = o->nobs;
    pthread_mutex_unlock(&o->lock);
    printf("# history: %d epochs, %ld ranks, %d leaderships checked (%d observed)\n", st.epochs,
           st.ranks, st.leaderships, nobs);
    ck_assert_msg(rc == 0, "epoch history violates an invariant: %s", err.msg);
    for (size_t i = 0; i < n; i++)
        ec_epoch_free(eps[i]);
    free(eps);
    free(mods);
    ec_kv_list_free(&l);
    return st.epochs;
}

void ec_test_obs_stop(ec_test_obs_t *o)
{
    if (!o)
        return;
    for (int i = 0; i < 16; i++)
        if (live_obs[i] == o)
            live_obs[i] = NULL;
    ec_watch_stop(o->w);
    pthread_mutex_destroy(&o->lock);
    free(o);
}

void ec_test_up(ec_embed_t **etcd, ec_etcd_t **c, char *tmp, size_t tmplen, const char *name)
{
    *etcd = ec_test_etcd_start(NULL);
    *c = ec_test_client(ec_embed_endpoint(*etcd));
    snprintf(tmp, tmplen, "/tmp/ec-%s-XXXXXX", name);
    ck_assert_ptr_nonnull(mkdtemp(tmp));
}

void ec_test_down(ec_embed_t **etcd, ec_etcd_t **c)
{
    ec_etcd_destroy(*c);
    *c = NULL;
    ec_embed_stop(*etcd);
    *etcd = NULL;
}

void ec_test_kill_all(pid_t *pids, int *n)
{
    for (int i = 0; i < *n; i++) {
        kill(pids[i], SIGCONT);
        kill(pids[i], SIGKILL);
        ec_test_reap(pids[i], 5000);
    }
    *n = 0;
}
