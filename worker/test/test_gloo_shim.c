/* The rule: a Gloo communicator built by the shim computes exact collectives
 * across processes; ecw_gloo_abort() from another thread releases a
 * collective (or a connect) blocked on a live but silent peer within a bounded
 * time with EC_EABORTED, and closes no socket but the communicator's own; a
 * peer killed mid-collective makes the others fail fast with "peer closed";
 * the survivors then rebuild under a new prefix and carry on.
 *
 * Every member is a process forked here (Gloo contexts must not cross fork),
 * rendezvousing through files in a temporary directory on 127.0.0.1.  Children
 * never call Check: they report lines ("ready", "done ...", "fail ...") on a
 * pipe and the parent asserts.  Nothing waits by sleeping: every wait is on an
 * event (pipe, condition variable, inotify, waitpid) with a deadline. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "ec_check.h"
#include "gloo_file_store.h"
#include "gloo_shim.h"

/* ---- clocks and deadlines ------------------------------------------------- */

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static struct timespec abs_deadline(double ms_from_now)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = ts.tv_nsec + (long long)(ms_from_now * 1e6);
    ts.tv_sec += ns / 1000000000LL;
    ts.tv_nsec = ns % 1000000000LL;
    return ts;
}

/* ---- children -------------------------------------------------------------- */

#define MAX_CHILDREN 8

typedef struct {
    pid_t pid;
    int from; /* parent reads the child's report lines */
    int to;   /* parent writes commands */
    char acc[8192];
    size_t len;
} child_t;

static child_t *g_children[MAX_CHILDREN];
static int g_nchildren;
static char g_dir[256];

/* In a child: where to report and where commands arrive. */
static int c_report = -1, c_cmd = -1;

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof(buf) - 2)
        n = (int)sizeof(buf) - 2;
    for (int i = 0; i < n; i++)
        if (buf[i] == '\n')
            buf[i] = ' ';
    buf[n++] = '\n';
    if (write(c_report, buf, (size_t)n) < 0) {
        /* the parent is gone; PDEATHSIG will end us */
    }
}

/* A failed check in a child: report it and exit; never returns. */
#define CK(cond, ...)                                                   \
    do {                                                                \
        if (!(cond)) {                                                  \
            char m_[1024];                                              \
            snprintf(m_, sizeof(m_), __VA_ARGS__);                      \
            report("fail line %d: %s: %s", __LINE__, #cond, m_);        \
            _exit(1);                                                   \
        }                                                               \
    } while (0)

/* Read one line from fd into line, using acc as the carry-over buffer.
 * 1: a line; 0: end of file; -1: deadline. */
static int read_line(int fd, char *acc, size_t *len, size_t cap, char *line, size_t n,
                     double ms)
{
    double deadline = mono_ms() + ms;
    for (;;) {
        char *nl = memchr(acc, '\n', *len);
        if (nl) {
            size_t l = (size_t)(nl - acc);
            size_t c = l < n - 1 ? l : n - 1;
            memcpy(line, acc, c);
            line[c] = '\0';
            memmove(acc, nl + 1, *len - l - 1);
            *len -= l + 1;
            return 1;
        }
        double left = deadline - mono_ms();
        if (left <= 0)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)left + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        if (*len == cap)
            *len = 0; /* a line longer than the buffer: drop it */
        ssize_t got = read(fd, acc + *len, cap - *len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return 0;
        *len += (size_t)got;
    }
}

/* In a child: wait for the next command line. */
static int wait_cmd(char *line, size_t n, double ms)
{
    static char acc[1024];
    static size_t len;
    return read_line(c_cmd, acc, &len, sizeof(acc), line, n, ms);
}

typedef int (*child_fn)(int rank, int nranks, void *arg);

static void spawn(child_t *c, child_fn fn, int rank, int nranks, void *arg)
{
    int up[2], down[2];
    ck_assert_int_eq(pipe2(up, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(down, O_CLOEXEC), 0);
    ck_assert_int_lt(g_nchildren, MAX_CHILDREN);
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* Die with the parent, even if it fails an assertion mid-test. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(99);
        for (int i = 0; i < g_nchildren; i++) {
            close(g_children[i]->from);
            close(g_children[i]->to);
        }
        close(up[0]);
        close(down[1]);
        c_report = up[1];
        c_cmd = down[0];
        _exit(fn(rank, nranks, arg));
    }
    close(up[1]);
    close(down[0]);
    memset(c, 0, sizeof(*c));
    c->pid = pid;
    c->from = up[0];
    c->to = down[1];
    g_children[g_nchildren++] = c;
}

/* In the parent: the child's next line starting with want (a "fail" line or
 * silence fails the test). */
static void expect(child_t *c, const char *want, char *line, size_t n, double ms)
{
    for (;;) {
        int r = read_line(c->from, c->acc, &c->len, sizeof(c->acc), line, n, ec_test_ms(ms));
        ck_assert_msg(r != -1, "child %d: no '%s' within %.0f ms", (int)c->pid, want, ms);
        ck_assert_msg(r != 0, "child %d exited before '%s'", (int)c->pid, want);
        ck_assert_msg(strncmp(line, "fail", 4) != 0, "child %d: %s", (int)c->pid, line);
        if (strncmp(line, want, strlen(want)) == 0)
            return;
        fprintf(stderr, "# child %d: %s\n", (int)c->pid, line);
    }
}

static void send_cmd(child_t *c, const char *cmd)
{
    char buf[256];
    int n = snprintf(buf, sizeof(buf), "%s\n", cmd);
    ck_assert_int_eq(write(c->to, buf, (size_t)n), n);
}

/* In the parent: the child's exit status, after its report pipe closes. */
static int reap(child_t *c, double ms)
{
    char line[1024];
    for (;;) {
        int r = read_line(c->from, c->acc, &c->len, sizeof(c->acc), line, sizeof(line),
                          ec_test_ms(ms));
        ck_assert_msg(r != -1, "child %d did not exit within %.0f ms", (int)c->pid, ms);
        if (r == 0)
            break;
        ck_assert_msg(strncmp(line, "fail", 4) != 0, "child %d: %s", (int)c->pid, line);
    }
    int st = 0;
    ck_assert_int_eq(waitpid(c->pid, &st, 0), c->pid);
    c->pid = 0;
    return st;
}

static void kill_child(child_t *c)
{
    if (c->pid > 0) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        c->pid = 0;
    }
}

/* Kill what is left of this test's children and close their pipes. */
static void forget_children(void)
{
    for (int i = 0; i < g_nchildren; i++) {
        kill_child(g_children[i]);
        close(g_children[i]->from);
        close(g_children[i]->to);
    }
    g_nchildren = 0;
}

static void setup(void)
{
    snprintf(g_dir, sizeof(g_dir), "/tmp/ecw-gloo-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    g_nchildren = 0;
}

static void teardown(void)
{
    forget_children();
    DIR *d = opendir(g_dir);
    if (d) {
        struct dirent *e;
        char p[600];
        while ((e = readdir(d)))
            if (e->d_name[0] != '.' || strncmp(e->d_name, ".tmp", 4) == 0) {
                snprintf(p, sizeof(p), "%s/%s", g_dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(g_dir);
}

/* ---- helpers for members ---------------------------------------------------- */

typedef struct {
    gloo_file_store_t fs;
    ecw_gloo_store_t vt;
} store_t;

static ecw_gloo_options_t member_opts(store_t *s, int rank, int nranks, const char *prefix,
                                      int timeout_ms)
{
    gloo_file_store_init(&s->fs, g_dir, &s->vt);
    ecw_gloo_options_t o = ECW_GLOO_OPTIONS_INIT;
    o.rank = rank;
    o.nranks = nranks;
    o.hostname = "127.0.0.1";
    o.store = &s->vt;
    o.prefix = prefix;
    o.timeout_ms = timeout_ms;
    return o;
}

static ecw_gloo_t *member(store_t *s, int rank, int nranks, const char *prefix, int timeout_ms)
{
    ecw_gloo_options_t o = member_opts(s, rank, nranks, prefix, timeout_ms);
    ec_error_t err;
    ec_error_clear(&err);
    ecw_gloo_t *g = ecw_gloo_create(&o, &err);
    CK(g != NULL, "rank %d create under %s: %s", rank, prefix, err.msg);
    return g;
}

static double get_val(const void *buf, ecw_gloo_dtype_t dt, size_t k)
{
    switch (dt) {
    case ECW_GLOO_F32: return ((const float *)buf)[k];
    case ECW_GLOO_F64: return ((const double *)buf)[k];
    case ECW_GLOO_I32: return ((const int32_t *)buf)[k];
    case ECW_GLOO_I64: return (double)((const int64_t *)buf)[k];
    case ECW_GLOO_U8: return ((const uint8_t *)buf)[k];
    }
    return NAN;
}

static void set_val(void *buf, ecw_gloo_dtype_t dt, size_t k, double v)
{
    switch (dt) {
    case ECW_GLOO_F32: ((float *)buf)[k] = (float)v; break;
    case ECW_GLOO_F64: ((double *)buf)[k] = v; break;
    case ECW_GLOO_I32: ((int32_t *)buf)[k] = (int32_t)v; break;
    case ECW_GLOO_I64: ((int64_t *)buf)[k] = (int64_t)v; break;
    case ECW_GLOO_U8: ((uint8_t *)buf)[k] = (uint8_t)v; break;
    }
}

static int is_int(ecw_gloo_dtype_t dt)
{
    return dt == ECW_GLOO_I32 || dt == ECW_GLOO_I64 || dt == ECW_GLOO_U8;
}

/* Rank r's element k, and the exact result of each op over nranks ranks.
 * Small integers (and a 2^40 offset for i64) are exact in every dtype. */
static double elem(ecw_gloo_dtype_t dt, int r, size_t k)
{
    double m = (double)(k % 101 + 1);
    return (r + 1) * m - 2 + (dt == ECW_GLOO_I64 ? 1099511627776.0 : 0);
}

static double expected(ecw_gloo_dtype_t dt, ecw_gloo_op_t op, int nranks, size_t k)
{
    double sum = 0, mn = INFINITY, mx = -INFINITY;
    for (int r = 0; r < nranks; r++) {
        double v = elem(dt, r, k);
        sum += v;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    switch (op) {
    case ECW_GLOO_SUM: return sum;
    case ECW_GLOO_MIN: return mn;
    case ECW_GLOO_MAX: return mx;
    case ECW_GLOO_AVG:
        return is_int(dt) ? (double)((long long)sum / nranks) : sum / nranks;
    }
    return NAN;
}

static const ecw_gloo_dtype_t kDtypes[] = {ECW_GLOO_F32, ECW_GLOO_F64, ECW_GLOO_I32,
                                           ECW_GLOO_I64};
static const ecw_gloo_op_t kOps[] = {ECW_GLOO_SUM, ECW_GLOO_AVG, ECW_GLOO_MIN, ECW_GLOO_MAX};
static const char *const kDtypeNames[] = {"?", "f32", "f64", "i32", "i64", "u8"};
static const char *const kOpNames[] = {"?", "sum", "min", "max", "avg"};

/* Every dtype x op on n elements: exact results. */
static void check_allreduce_all(ecw_gloo_t *g, int rank, int nranks, size_t n)
{
    void *buf = malloc(n * 8);
    CK(buf != NULL, "malloc");
    for (size_t d = 0; d < sizeof(kDtypes) / sizeof(kDtypes[0]); d++)
        for (size_t o = 0; o < sizeof(kOps) / sizeof(kOps[0]); o++) {
            ecw_gloo_dtype_t dt = kDtypes[d];
            ecw_gloo_op_t op = kOps[o];
            for (size_t k = 0; k < n; k++)
                set_val(buf, dt, k, elem(dt, rank, k));
            ec_error_t err;
            ec_error_clear(&err);
            int rc = ecw_gloo_allreduce(g, buf, n, dt, op, &err);
            CK(rc == 0, "allreduce %s %s: %s", kDtypeNames[dt], kOpNames[op], err.msg);
            for (size_t k = 0; k < n; k++) {
                double want = expected(dt, op, nranks, k), got = get_val(buf, dt, k);
                CK(got == want, "allreduce %s %s on %d ranks, element %zu: got %.17g, want %.17g",
                   kDtypeNames[dt], kOpNames[op], nranks, k, got, want);
            }
        }
    free(buf);
}

/* Broadcast from every root, allgather (copying and in place), barrier. */
static void check_others(ecw_gloo_t *g, int rank, int nranks)
{
    ec_error_t err;
    ec_error_clear(&err);
    for (int root = 0; root < nranks; root++) {
        uint8_t bytes[5000];
        for (size_t i = 0; i < sizeof(bytes); i++)
            bytes[i] = rank == root ? (uint8_t)(i * 7 + 3 + root) : 0;
        CK(ecw_gloo_broadcast(g, bytes, sizeof(bytes), ECW_GLOO_U8, root, &err) == 0,
           "broadcast u8 from %d: %s", root, err.msg);
        for (size_t i = 0; i < sizeof(bytes); i++)
            CK(bytes[i] == (uint8_t)(i * 7 + 3 + root), "broadcast from %d, byte %zu", root, i);
        double d[3] = {0, 0, 0};
        if (rank == root)
            d[0] = 0.25, d[1] = -1e300, d[2] = root;
        CK(ecw_gloo_broadcast(g, d, 3, ECW_GLOO_F64, root, &err) == 0, "broadcast f64: %s",
           err.msg);
        CK(d[0] == 0.25 && d[1] == -1e300 && d[2] == root, "broadcast f64 from %d", root);
    }
    int64_t send[4], recv[4 * 8];
    for (int j = 0; j < 4; j++)
        send[j] = rank * 100 + j + (1LL << 35);
    CK(ecw_gloo_allgather(g, send, recv, 4, ECW_GLOO_I64, &err) == 0, "allgather: %s", err.msg);
    for (int r = 0; r < nranks; r++)
        for (int j = 0; j < 4; j++)
            CK(recv[r * 4 + j] == r * 100 + j + (1LL << 35), "allgather [%d][%d]", r, j);
    int32_t inplace[3 * 8];
    for (int i = 0; i < 3 * nranks; i++)
        inplace[i] = i / 3 == rank ? -(rank * 10 + i % 3) : 12345;
    CK(ecw_gloo_allgather(g, NULL, inplace, 3, ECW_GLOO_I32, &err) == 0,
       "allgather in place: %s", err.msg);
    for (int i = 0; i < 3 * nranks; i++)
        CK(inplace[i] == -((i / 3) * 10 + i % 3), "allgather in place [%d] = %d", i, inplace[i]);
    for (int i = 0; i < 3; i++)
        CK(ecw_gloo_barrier(g, &err) == 0, "barrier: %s", err.msg);
    /* Bad arguments fail without communicating or breaking the communicator. */
    CK(ecw_gloo_allreduce(g, send, 1, (ecw_gloo_dtype_t)99, ECW_GLOO_SUM, &err) == EC_EINVAL,
       "bad dtype");
    CK(ecw_gloo_broadcast(g, send, 1, ECW_GLOO_I64, nranks, &err) == EC_EINVAL, "bad root");
    CK(ecw_gloo_allreduce(g, NULL, 0, ECW_GLOO_F32, ECW_GLOO_SUM, &err) == 0, "empty");
    CK(ecw_gloo_barrier(g, &err) == 0, "barrier after bad arguments: %s", err.msg);
}

/* Mean microseconds per call of allreduce on n floats. */
static double time_allreduce(ecw_gloo_t *g, size_t n, int iters)
{
    float *buf = calloc(n, sizeof(float));
    ec_error_t err;
    CK(buf != NULL, "calloc");
    for (int i = 0; i < 20; i++)
        CK(ecw_gloo_allreduce(g, buf, n, ECW_GLOO_F32, ECW_GLOO_SUM, &err) == 0, "%s", err.msg);
    double t0 = mono_ms();
    for (int i = 0; i < iters; i++)
        CK(ecw_gloo_allreduce(g, buf, n, ECW_GLOO_F32, ECW_GLOO_SUM, &err) == 0, "%s", err.msg);
    double us = (mono_ms() - t0) * 1e3 / iters;
    free(buf);
    return us;
}

/* Run op(arg) on this thread while another thread waits until it has been
 * blocked for hold_ms (after pre(pre_arg), if given, returns), checks that it
 * is still blocked, and aborts g.  Returns op's result; *abort_ms is the time
 * from the abort() call to op's return, *blocked whether op was still blocked
 * when abort was called. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, done, blocked;
    double hold_ms, t_abort;
    ecw_gloo_t *g;
    void (*pre)(void *);
    void *pre_arg;
} abort_ctl_t;

static void *abort_thread(void *arg)
{
    abort_ctl_t *a = arg;
    pthread_mutex_lock(&a->mu);
    while (!a->entered)
        pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
    if (a->pre)
        a->pre(a->pre_arg);
    struct timespec dl = abs_deadline(a->hold_ms);
    pthread_mutex_lock(&a->mu);
    while (!a->done && pthread_cond_timedwait(&a->cv, &a->mu, &dl) != ETIMEDOUT) {
    }
    a->blocked = !a->done;
    pthread_mutex_unlock(&a->mu);
    if (!a->blocked)
        return NULL;
    a->t_abort = mono_ms();
    ecw_gloo_abort(a->g);
    ecw_gloo_abort(a->g); /* idempotent */
    return NULL;
}

static int abort_while(ecw_gloo_t *g, int (*op)(void *), void *arg, double hold_ms,
                       void (*pre)(void *), void *pre_arg, double *abort_ms, int *blocked)
{
    abort_ctl_t a = {.hold_ms = hold_ms, .g = g, .pre = pre, .pre_arg = pre_arg};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a.cv, &ca);
    pthread_mutex_init(&a.mu, NULL);
    pthread_t t;
    CK(pthread_create(&t, NULL, abort_thread, &a) == 0, "pthread_create");
    pthread_mutex_lock(&a.mu);
    a.entered = 1;
    pthread_cond_broadcast(&a.cv);
    pthread_mutex_unlock(&a.mu);
    int rc = op(arg);
    double t_ret = mono_ms();
    pthread_mutex_lock(&a.mu);
    a.done = 1;
    pthread_cond_broadcast(&a.cv);
    pthread_mutex_unlock(&a.mu);
    pthread_join(t, NULL);
    *blocked = a.blocked;
    *abort_ms = a.blocked ? t_ret - a.t_abort : -1;
    return rc;
}

typedef struct {
    ecw_gloo_t *g;
    ec_error_t err;
    size_t n;
} op_arg_t;

static int op_allreduce(void *p)
{
    op_arg_t *o = p;
    float buf[64] = {1};
    ec_error_clear(&o->err);
    return ecw_gloo_allreduce(o->g, buf, o->n, ECW_GLOO_F32, ECW_GLOO_SUM, &o->err);
}

static int op_connect(void *p)
{
    op_arg_t *o = p;
    ec_error_clear(&o->err);
    return ecw_gloo_connect(o->g, &o->err);
}

/* A loopback TCP connection that the communicator must leave alone: both
 * ends in this process, on the same address as the Gloo sockets. */
typedef struct {
    int a, b;
} bystander_t;

static bystander_t bystander_open(void)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    CK(l >= 0 && bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 1) == 0 &&
           getsockname(l, (struct sockaddr *)&sa, &sl) == 0,
       "bystander listen: %s", strerror(errno));
    bystander_t s = {.a = socket(AF_INET, SOCK_STREAM, 0)};
    CK(connect(s.a, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bystander connect: %s",
       strerror(errno));
    s.b = accept(l, NULL, NULL);
    CK(s.b >= 0, "bystander accept: %s", strerror(errno));
    close(l);
    return s;
}

static void bystander_check_one(int from, int to, const char *msg)
{
    size_t n = strlen(msg);
    char buf[64] = {0};
    CK(write(from, msg, n) == (ssize_t)n, "bystander write: %s", strerror(errno));
    struct pollfd p = {.fd = to, .events = POLLIN};
    CK(poll(&p, 1, (int)ec_test_ms(2000)) == 1, "bystander: no data");
    CK(read(to, buf, sizeof(buf)) == (ssize_t)n && memcmp(buf, msg, n) == 0,
       "bystander read: got '%s'", buf);
}

static void bystander_check(bystander_t s)
{
    int e = 0;
    socklen_t l = sizeof(e);
    CK(getsockopt(s.a, SOL_SOCKET, SO_ERROR, &e, &l) == 0 && e == 0, "bystander error %d", e);
    bystander_check_one(s.a, s.b, "ping");
    bystander_check_one(s.b, s.a, "pong");
}

/* Destroy (timed) and rebuild among ranks 0..nranks-1 under prefix: the path
 * every survivor takes into the next epoch. */
static void rebuild_and_check(int rank, int nranks, const char *prefix, double *rebuild_ms)
{
    store_t s;
    double t0 = mono_ms();
    ecw_gloo_t *g = member(&s, rank, nranks, prefix, (int)ec_test_ms(5000));
    *rebuild_ms = mono_ms() - t0;
    CK(ecw_gloo_nranks(g) == nranks && ecw_gloo_rank(g) == rank, "size/rank");
    check_allreduce_all(g, rank, nranks, 33);
    check_others(g, rank, nranks);
    ecw_gloo_destroy(g);
}

/* Abort-thread hook: wait for the parent's "abort". */
static void wait_abort_cmd(void *unused)
{
    char cmd[64];
    (void)unused;
    CK(wait_cmd(cmd, sizeof(cmd), ec_test_ms(10000)) == 1, "no abort command");
}

/* ---- 1. collectives on 3 ranks, exact results, latency ----------------------- */

static int member_collectives(int rank, int nranks, void *arg)
{
    (void)arg;
    store_t s;
    ecw_gloo_t *g = member(&s, rank, nranks, "coll/epoch1", (int)ec_test_ms(5000));
    check_allreduce_all(g, rank, nranks, 1);
    check_allreduce_all(g, rank, nranks, 1001);
    check_others(g, rank, nranks);
    double us1 = time_allreduce(g, 1, 200);
    double us1k = time_allreduce(g, 1024, 100);
    double us1m = time_allreduce(g, 262144, 5);
    double t0 = mono_ms();
    ec_error_t err;
    for (int i = 0; i < 100; i++)
        CK(ecw_gloo_barrier(g, &err) == 0, "barrier: %s", err.msg);
    double usb = (mono_ms() - t0) * 1e3 / 100;
    ecw_gloo_destroy(g);
    report("done allreduce_1xf32_us=%.1f allreduce_1024xf32_us=%.1f allreduce_1MiB_us=%.0f "
           "barrier_us=%.1f", us1, us1k, us1m, usb);
    return 0;
}

START_TEST(test_collectives_three_ranks)
{
    child_t c[3];
    char line[1024];
    double t0 = mono_ms();
    for (int r = 0; r < 3; r++)
        spawn(&c[r], member_collectives, r, 3, NULL);
    for (int r = 0; r < 3; r++) {
        expect(&c[r], "done", line, sizeof(line), 20000);
        if (r == 0)
            fprintf(stderr, "# 3 ranks on loopback, rank 0: %s\n", line + 5);
    }
    for (int r = 0; r < 3; r++)
        ck_assert_int_eq(reap(&c[r], 5000), 0);
    fprintf(stderr, "# collectives test: %.0f ms\n", mono_ms() - t0);
}
END_TEST

/* ---- 2. abort releases a collective blocked on a stopped peer ----------------- */

static int member_silent_peer(int rank, int nranks, void *arg)
{
    (void)arg;
    char cmd[64];
    bystander_t by = bystander_open(); /* before the communicator exists */
    store_t s;
    ecw_gloo_t *g = member(&s, rank, nranks, "silent/epoch1", (int)ec_test_ms(10000));
    ec_error_t err;
    CK(ecw_gloo_barrier(g, &err) == 0, "barrier: %s", err.msg);
    report("ready");
    if (rank == 2) { /* the parent stops us here and kills us later */
        wait_cmd(cmd, sizeof(cmd), ec_test_ms(60000));
        return 0;
    }
    CK(wait_cmd(cmd, sizeof(cmd), ec_test_ms(10000)) == 1, "no go");

    op_arg_t o = {.g = g, .n = 16};
    int rc;
    double abort_ms = -1, t_ret;
    if (rank == 0) {
        int blocked;
        rc = abort_while(g, op_allreduce, &o, 200, NULL, NULL, &abort_ms, &blocked);
        t_ret = mono_ms();
        CK(blocked, "allreduce with a stopped peer returned %d before the abort: %s", rc,
           o.err.msg);
        CK(rc == EC_EABORTED, "allreduce after abort: %d %s", rc, o.err.msg);
        CK(abort_ms < ec_test_ms(1000), "abort took %.1f ms", abort_ms);
        report("aborted at=%.3f abort_ms=%.3f msg=%s", t_ret - abort_ms, abort_ms, o.err.msg);
    } else {
        /* Rank 1 waits on the stopped rank 2, so rank 0 closing its
         * connections need not wake it (Gloo fails only the operations
         * pending on a broken pair): like every member at an epoch change,
         * it aborts its own communicator when told. */
        int blocked;
        rc = abort_while(g, op_allreduce, &o, 0, wait_abort_cmd, NULL, &abort_ms, &blocked);
        t_ret = mono_ms();
        if (blocked) {
            CK(rc == EC_EABORTED, "rank 1 after abort: %d %s", rc, o.err.msg);
            CK(abort_ms < ec_test_ms(1000), "abort took %.1f ms", abort_ms);
        } else {
            CK(rc == EC_EIO && strstr(o.err.msg, "peer closed"), "rank 1: %d %s", rc, o.err.msg);
        }
        report("released blocked_until_abort=%d abort_ms=%.3f msg=%s", blocked, abort_ms,
               o.err.msg);
    }
    /* The communicator stays unusable: later calls fail at once. */
    double t1 = mono_ms();
    rc = ecw_gloo_barrier(g, &err);
    CK(rc == EC_EABORTED || (rank == 1 && rc == EC_EIO), "barrier after failure: %d %s", rc,
       err.msg);
    CK(mono_ms() - t1 < 50, "barrier after failure took %.1f ms", mono_ms() - t1);

    bystander_check(by);
    t1 = mono_ms();
    ecw_gloo_destroy(g);
    double destroy_ms = mono_ms() - t1;
    CK(destroy_ms < ec_test_ms(1000), "destroy took %.1f ms", destroy_ms);
    bystander_check(by);

    double rebuild_ms;
    rebuild_and_check(rank, 2, "silent/epoch2", &rebuild_ms);
    bystander_check(by);
    report("done destroy_ms=%.2f rebuild_ms=%.2f", destroy_ms, rebuild_ms);
    return 0;
}

START_TEST(test_abort_releases_blocked_collective)
{
    child_t c[3];
    char line[1024], l1[1024];
    double t0 = mono_ms();
    for (int r = 0; r < 3; r++)
        spawn(&c[r], member_silent_peer, r, 3, NULL);
    for (int r = 0; r < 3; r++)
        expect(&c[r], "ready", line, sizeof(line), 10000);
    /* Rank 2 stays alive (its kernel still acknowledges) but says nothing. */
    ck_assert_int_eq(kill(c[2].pid, SIGSTOP), 0);
    int st;
    ck_assert_int_eq(waitpid(c[2].pid, &st, WUNTRACED), c[2].pid);
    ck_assert(WIFSTOPPED(st));
    send_cmd(&c[0], "go");
    send_cmd(&c[1], "go");
    expect(&c[0], "aborted", line, sizeof(line), 10000);
    fprintf(stderr, "# rank 0: %s\n", line);
    send_cmd(&c[1], "abort");
    expect(&c[1], "released", l1, sizeof(l1), 10000);
    fprintf(stderr, "# rank 1: %s\n", l1);
    for (int r = 0; r < 2; r++) {
        expect(&c[r], "done", line, sizeof(line), 10000);
        fprintf(stderr, "# rank %d: %s\n", r, line);
    }
    for (int r = 0; r < 2; r++)
        ck_assert_int_eq(reap(&c[r], 5000), 0);
    kill_child(&c[2]);
    fprintf(stderr, "# silent-peer test: %.0f ms\n", mono_ms() - t0);
}
END_TEST

/* ---- 3. a peer killed mid-collective fails the others fast --------------------- */

static int member_killed_peer(int rank, int nranks, void *arg)
{
    (void)arg;
    char cmd[64];
    store_t s;
    char host[32];
    snprintf(host, sizeof(host), "127.0.0.%d", 10 + rank); /* distinct addresses */
    ecw_gloo_options_t o = member_opts(&s, rank, nranks, "kill/epoch1", (int)ec_test_ms(10000));
    o.hostname = host;
    ec_error_t err;
    ecw_gloo_t *g = ecw_gloo_create(&o, &err);
    CK(g != NULL, "create: %s", err.msg);
    CK(ecw_gloo_barrier(g, &err) == 0, "barrier: %s", err.msg);
    report("ready");
    if (rank == 2) { /* silent until the parent kills us */
        wait_cmd(cmd, sizeof(cmd), ec_test_ms(60000));
        return 0;
    }
    CK(wait_cmd(cmd, sizeof(cmd), ec_test_ms(10000)) == 1, "no go");
    /* 16 MiB: more than the sockets buffer, so writes to rank 2 are still
     * queued in Gloo's event loop when it dies.  They then fail with EPIPE,
     * which raises SIGPIPE: this process must survive it (SIGPIPE is left at
     * its default, fatal disposition here). */
    size_t n = 2u << 20;
    double *buf = calloc(n, sizeof(double));
    CK(buf != NULL, "calloc");
    CK(signal(SIGPIPE, SIG_DFL) != SIG_ERR, "signal");
    report("entered");
    int rc = ecw_gloo_allreduce(g, buf, n, ECW_GLOO_F64, ECW_GLOO_SUM, &err);
    double t_ret = mono_ms();
    free(buf);
    CK(rc == EC_EIO && strstr(err.msg, "peer closed"), "allreduce: %d %s", rc, err.msg);
    report("broke at=%.3f msg=%s", t_ret, err.msg);
    double t1 = mono_ms();
    ecw_gloo_destroy(g);
    double destroy_ms = mono_ms() - t1;
    CK(destroy_ms < ec_test_ms(1000), "destroy took %.1f ms", destroy_ms);
    double rebuild_ms;
    rebuild_and_check(rank, 2, "kill/epoch2", &rebuild_ms);
    report("done destroy_ms=%.2f rebuild_ms=%.2f", destroy_ms, rebuild_ms);
    return 0;
}

START_TEST(test_killed_peer_fails_fast)
{
    child_t c[3];
    char line[1024];
    double t0 = mono_ms();
    for (int r = 0; r < 3; r++)
        spawn(&c[r], member_killed_peer, r, 3, NULL);
    for (int r = 0; r < 3; r++)
        expect(&c[r], "ready", line, sizeof(line), 10000);
    send_cmd(&c[0], "go");
    send_cmd(&c[1], "go");
    expect(&c[0], "entered", line, sizeof(line), 10000);
    expect(&c[1], "entered", line, sizeof(line), 10000);
    double t_kill = mono_ms();
    kill_child(&c[2]);
    for (int r = 0; r < 2; r++) {
        expect(&c[r], "broke", line, sizeof(line), 10000);
        double at = atof(strstr(line, "at=") + 3);
        fprintf(stderr, "# rank %d failed %.2f ms after SIGKILL of rank 2: %s\n", r,
                at - t_kill, strstr(line, "msg=") + 4);
        ck_assert_double_lt(at - t_kill, ec_test_ms(1000));
    }
    for (int r = 0; r < 2; r++) {
        expect(&c[r], "done", line, sizeof(line), 10000);
        fprintf(stderr, "# rank %d: %s\n", r, line);
        ck_assert_int_eq(reap(&c[r], 5000), 0);
    }
    fprintf(stderr, "# killed-peer test: %.0f ms\n", mono_ms() - t0);
}
END_TEST

/* ---- 4. abort and deadline during the connect ----------------------------------- */

/* Rank 0 of 2 whose peer never shows up: abort while it waits for the
 * rendezvous; then the same with no abort, which must end at the deadline. */
static int member_alone(int rank, int nranks, void *arg)
{
    (void)arg;
    bystander_t by = bystander_open();
    store_t s;
    ecw_gloo_options_t o = member_opts(&s, rank, nranks, "alone/epoch1", (int)ec_test_ms(10000));
    ec_error_t err;
    op_arg_t a = {.g = ecw_gloo_new(&o, &err)};
    CK(a.g != NULL, "new: %s", err.msg);
    double abort_ms;
    int blocked;
    int rc = abort_while(a.g, op_connect, &a, 200, NULL, NULL, &abort_ms, &blocked);
    CK(blocked && rc == EC_EABORTED, "connect: blocked=%d rc=%d %s", blocked, rc, a.err.msg);
    CK(abort_ms < ec_test_ms(1000), "abort took %.1f ms", abort_ms);
    CK(ecw_gloo_barrier(a.g, &err) == EC_EABORTED, "barrier after abort: %s", err.msg);
    ecw_gloo_destroy(a.g);
    bystander_check(by);

    o.prefix = "alone/epoch2";
    o.timeout_ms = 300;
    double t0 = mono_ms();
    ecw_gloo_t *g = ecw_gloo_create(&o, &err);
    double took = mono_ms() - t0;
    CK(g == NULL && err.code == EC_ETIMEDOUT && strstr(err.msg, "did not publish"),
       "create with a missing peer: %s", err.msg);
    CK(took >= 290 && took < ec_test_ms(1500), "timeout after %.1f ms", took);
    report("done store_abort_ms=%.2f timeout_ms=%.1f msg=%s", abort_ms, took, err.msg);
    return 0;
}

/* A member on its own loopback address under a given prefix. */
typedef struct {
    const char *prefix;
    const char *host;
} where_t;

/* Rank 1 publishes its address and stops itself (SIGSTOP in the store's
 * set): a member that joined and went silent before connecting. */
static int member_publish_and_stop(int rank, int nranks, void *arg)
{
    where_t *w = arg;
    store_t s;
    ecw_gloo_options_t o = member_opts(&s, rank, nranks, w->prefix, (int)ec_test_ms(10000));
    o.hostname = w->host;
    s.fs.stop_after_set = 1;
    ec_error_t err;
    ecw_gloo_t *g = ecw_gloo_create(&o, &err);
    ecw_gloo_destroy(g);
    return 0;
}

typedef struct {
    store_t *s;
    char key[128];
} wait_key_t;

static void wait_for_key(void *p)
{
    wait_key_t *w = p;
    void *val = NULL;
    size_t len;
    ec_error_t err;
    int rc = w->s->vt.get(w->s->vt.arg, w->key, &val, &len, (int)ec_test_ms(10000), &err);
    free(val);
    CK(rc == 0, "key %s never appeared: %s", w->key, err.msg);
}

/* Rank 0 against the stopped rank 1.  Of the two ends of a Gloo pair, the
 * one with the lower address listens and waits for the other to connect.
 * Below the stopped peer's address, rank 0 waits in the connect, and the
 * abort must release that wait (it shuts down the pair's listening socket).
 * Above it, rank 0 connects (the stopped peer's kernel completes the
 * handshake), so the connect succeeds and the abort must release the first
 * collective instead.  Reports which path it took. */
static int member_connect_to_stopped(int rank, int nranks, void *arg)
{
    where_t *wh = arg;
    bystander_t by = bystander_open();
    store_t s;
    ecw_gloo_options_t o = member_opts(&s, rank, nranks, wh->prefix, (int)ec_test_ms(10000));
    o.hostname = wh->host;
    ec_error_t err;
    op_arg_t a = {.g = ecw_gloo_new(&o, &err), .n = 8};
    CK(a.g != NULL, "new: %s", err.msg);
    wait_key_t w = {.s = &s};
    snprintf(w.key, sizeof(w.key), "%s/1", wh->prefix);
    double abort_ms;
    int blocked;
    int rc = abort_while(a.g, op_connect, &a, 200, wait_for_key, &w, &abort_ms, &blocked);
    const char *path = "listen";
    if (!blocked) {
        CK(rc == 0, "connect: %d %s", rc, a.err.msg);
        path = "collective";
        rc = abort_while(a.g, op_allreduce, &a, 200, NULL, NULL, &abort_ms, &blocked);
        CK(blocked, "allreduce with a stopped peer returned %d: %s", rc, a.err.msg);
    }
    CK(rc == EC_EABORTED, "%s abort: %d %s", path, rc, a.err.msg);
    CK(abort_ms < ec_test_ms(1000), "%s abort took %.1f ms", path, abort_ms);
    double t0 = mono_ms();
    ecw_gloo_destroy(a.g);
    double destroy_ms = mono_ms() - t0;
    CK(destroy_ms < ec_test_ms(1000), "destroy took %.1f ms", destroy_ms);
    bystander_check(by);
    report("done path=%s abort_ms=%.3f destroy_ms=%.2f msg=%s", path, abort_ms, destroy_ms,
           a.err.msg);
    return 0;
}

START_TEST(test_abort_and_deadline_during_connect)
{
    child_t c0, c1;
    char line[1024];
    double t0 = mono_ms();
    spawn(&c0, member_alone, 0, 2, NULL);
    expect(&c0, "done", line, sizeof(line), 10000);
    fprintf(stderr, "# %s\n", line);
    ck_assert_int_eq(reap(&c0, 5000), 0);
    forget_children();

    /* The stopped member on 127.0.0.2; rank 0 below it, then above it. */
    static where_t stopped[2] = {{"stopped/epoch1", "127.0.0.2"}, {"stopped/epoch2", "127.0.0.2"}};
    static where_t live[2] = {{"stopped/epoch1", "127.0.0.1"}, {"stopped/epoch2", "127.0.0.3"}};
    int listen_path = 0, collective_path = 0;
    for (int i = 0; i < 2; i++) {
        spawn(&c1, member_publish_and_stop, 1, 2, &stopped[i]);
        spawn(&c0, member_connect_to_stopped, 0, 2, &live[i]);
        expect(&c0, "done", line, sizeof(line), 10000);
        fprintf(stderr, "# rank 0 on %s, stopped rank 1 on %s: %s\n", live[i].host,
                stopped[i].host, line);
        listen_path += strstr(line, "path=listen") != NULL;
        collective_path += strstr(line, "path=collective") != NULL;
        ck_assert_int_eq(reap(&c0, 5000), 0);
        forget_children(); /* kills the stopped rank 1 */
    }
    /* Whatever order Gloo uses, opposite addresses take opposite paths. */
    ck_assert_int_eq(listen_path, 1);
    ck_assert_int_eq(collective_path, 1);
    fprintf(stderr, "# connect-abort test: %.0f ms\n", mono_ms() - t0);
}
END_TEST

/* ---- 5. one rank, and arguments ---------------------------------------------------- */

static int member_single(int rank, int nranks, void *arg)
{
    (void)arg;
    store_t s;
    ecw_gloo_t *g = member(&s, rank, nranks, "single/epoch1", (int)ec_test_ms(5000));
    check_allreduce_all(g, rank, nranks, 17);
    check_others(g, rank, nranks);
    ec_error_t err;
    CK(ecw_gloo_connect(g, &err) == EC_EINVAL, "second connect");
    ecw_gloo_destroy(g);
    report("done");
    return 0;
}

START_TEST(test_single_rank_and_arguments)
{
    ec_error_t err;
    store_t s;
    ecw_gloo_options_t o = member_opts(&s, 0, 2, "args", 1000);

    ck_assert_ptr_null(ecw_gloo_new(NULL, &err));
    ck_assert_int_eq(err.code, EC_EINVAL);
    o.rank = 2;
    ck_assert_ptr_null(ecw_gloo_new(&o, &err));
    ck_assert_int_eq(err.code, EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "rank 2"));
    o.rank = 0;
    o.store = NULL;
    ck_assert_ptr_null(ecw_gloo_new(&o, &err));
    o.store = &s.vt;
    o.prefix = "";
    ck_assert_ptr_null(ecw_gloo_new(&o, &err));
    o.prefix = "args";
    o.timeout_ms = 0;
    ck_assert_ptr_null(ecw_gloo_new(&o, &err));
    o.timeout_ms = 1000;
    o.size = 8;
    ck_assert_ptr_null(ecw_gloo_new(&o, &err));
    o.size = sizeof(o);

    /* Not connected: collectives refuse without touching the network. */
    ecw_gloo_t *g = ecw_gloo_new(&o, &err);
    ck_assert_ptr_nonnull(g);
    float f = 1;
    ck_assert_int_eq(ecw_gloo_allreduce(g, &f, 1, ECW_GLOO_F32, ECW_GLOO_SUM, &err), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "not connected"));
    ecw_gloo_abort(g);
    ck_assert_int_eq(ecw_gloo_barrier(g, &err), EC_EABORTED);
    ck_assert_int_eq(ecw_gloo_connect(g, &err), EC_EABORTED);
    errno = 1234;
    ecw_gloo_destroy(g);
    ck_assert_int_eq(errno, 1234);
    ecw_gloo_destroy(NULL);
    ecw_gloo_abort(NULL);
    ck_assert_int_eq(ecw_gloo_barrier(NULL, &err), EC_EINVAL);
    ck_assert_int_eq(ecw_gloo_rank(NULL), -1);
    ck_assert_uint_eq(ecw_gloo_dtype_size(ECW_GLOO_I64), 8);
    ck_assert_uint_eq(ecw_gloo_dtype_size((ecw_gloo_dtype_t)0), 0);

    child_t c;
    char line[256];
    spawn(&c, member_single, 0, 1, NULL);
    expect(&c, "done", line, sizeof(line), 10000);
    ck_assert_int_eq(reap(&c, 5000), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gloo_shim");
    TCase *tc = tcase_create("gloo");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, (double)ec_test_ms(60000) / 1000.0);
    tcase_add_test(tc, test_single_rank_and_arguments);
    tcase_add_test(tc, test_collectives_three_ranks);
    tcase_add_test(tc, test_abort_releases_blocked_collective);
    tcase_add_test(tc, test_killed_peer_fails_fast);
    tcase_add_test(tc, test_abort_and_deadline_during_connect);
    suite_add_tcase(s, tc);
    return s;
}

EC_CHECK_MAIN(suite)
