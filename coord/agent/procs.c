/* Local training processes. */
#define _GNU_SOURCE
#include "procs.h"
#include "clock.h"
#include "child.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "janitor.h"
#include "log.h"
#include "strbuf.h"

/* What the agent keeps of each rank's output when no file holds it all:
 * enough for a failure report's last lines. */
#define RING_BYTES 16384
/* The stderr console queue's size (stdout's is the agent's, launch.c). */
#define ERR_QUEUE_BYTES (1u << 20)

/* A line a rank has begun on the console waits this long for its end
 * before it is shown as it is (a progress bar redrawn with \r). */
#define PARTIAL_LINE_MS 100
#define LINE_MAX_BYTES 4096

/* One output pipe of a rank and where what comes out of it goes.  The
 * console gets whole lines, so that the ranks' lines do not cut into each
 * other (python -u writes a print's pieces one by one). */
typedef struct stream {
    int fd;        /* read end, non-blocking; -1: none */
    int file;      /* its file; -1: none */
    ec_con_t con;
    ec_outq_t *q;  /* the console it goes to */
    bool bol;      /* the console is at the start of one of its lines */
    char pend[LINE_MAX_BYTES]; /* the line begun, not yet shown */
    size_t npend;
    int64_t pend_since;
} stream_t;

typedef struct rank {
    pid_t pid;
    char log[600];     /* for messages: its file, or where its output went */
    char file[600];    /* the file holding all its output (Paddle); "" none */
    off_t start_off;   /* where this start's output begins in it (its marker) */
    char dir[PATH_MAX]; /* torchrun with --log_dir: its attempt directory */
    int dir_attempt;   /* the attempt dir is for; -1 none yet */
    ec_rank_plan_t plan;
    stream_t s[2];     /* stdout (both when merged), stderr */
    char ring[RING_BYTES]; /* the last bytes of its output, circular */
    size_t ring_head, ring_len;
    uint64_t bytes;
    char prefix[256];  /* "[default0]:", or the template's (ec_procs_set_prefix) */
} rank_t;

/* A child of ours as /proc shows it: pid and start time (in clock ticks
 * since boot) tell a process apart from a later one with the same pid. */
typedef struct kid {
    pid_t pid;
    unsigned long long start;
    char state;
} kid_t;

struct ec_procs {
    int nproc;
    char *const *argv;
    ec_outq_t *console;
    ec_outq_t *err_q;  /* the agent's stderr (torchrun style; ours) */
    ec_procs_style_t style;
    char role[128];    /* torchrun's role, for the default prefix */
    int ep;            /* epoll set of every stream's fd */
    char state_dir[PATH_MAX];
    bool private_dir;  /* state_dir is ours to remove */
    int dir_lock;      /* flock on state_dir/.ecoord-agent.lock: one agent per log dir (-1 none) */
    char run_dir[PATH_MAX]; /* torchrun with --log_dir: <log_dir>/<run_id>_XXXXXX; "" none */
    char base_dir[PATH_MAX]; /* torchrun's torchelastic_XXXXXX when files but no --log_dir */
    rank_t *r;
    kid_t *others; /* children we had before any rank: not ours to stop */
    int nothers;
    pid_t termed[256]; /* orphans already sent SIGTERM in this stop */
    int ntermed;
    ec_janitor_t *jan; /* kills what the ranks started if we die (NULL: none) */
    pid_t left[64];    /* groups of reaped ranks that still had members */
    int nleft;
    kid_t told[64];    /* orphans the janitor was told about (a ring) */
    int ntold, told_next;
    int64_t next_tell; /* when ec_procs_reap looks for new orphans again */
    const volatile sig_atomic_t *abort; /* non-zero: no more grace */
};

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* State and start time of one process, from /proc/<pid>/stat (fields 3,
 * 4 and 22; the command name before them may hold spaces and ')'). */
static bool read_stat(pid_t pid, char *state, int *ppid, unsigned long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len <= 0)
        return false;
    buf[len] = '\0';
    char *rp = strrchr(buf, ')');
    return rp && sscanf(rp + 1, " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                                "%*d %*d %*d %llu", state, ppid, start) == 3;
}

static bool add_kid(kid_t **out, int *n, int *cap, pid_t pid)
{
    char state;
    int ppid;
    unsigned long long start;
    if (!read_stat(pid, &state, &ppid, &start) || ppid != getpid())
        return true; /* gone, or reaped and reused already: not ours */
    for (int i = 0; i < *n; i++)
        if ((*out)[i].pid == pid)
            return true;
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 16;
        kid_t *k = realloc(*out, (size_t)c * sizeof(kid_t));
        if (!k)
            return false;
        *out = k;
        *cap = c;
    }
    (*out)[(*n)++] = (kid_t){pid, start, state};
    return true;
}

/* The children of this process (of every thread): from
 * /proc/self/task/<tid>/children, or where the kernel lacks those
 * (CONFIG_PROC_CHILDREN) by scanning every /proc/<pid>/stat for our pid as
 * parent.  Returns the count. */
static int list_kids(kid_t **out)
{
    *out = NULL;
    int n = 0, cap = 0;
    bool have_children_files = false;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char path[96];
        snprintf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        have_children_files = true;
        int pid;
        while (fscanf(f, "%d", &pid) == 1)
            if (!add_kid(out, &n, &cap, (pid_t)pid))
                break;
        fclose(f);
    }
    if (d)
        closedir(d);
    if (have_children_files)
        return n;
    if (!(d = opendir("/proc")))
        return 0;
    while ((e = readdir(d)))
        if (e->d_name[0] >= '1' && e->d_name[0] <= '9' && !add_kid(out, &n, &cap, (pid_t)atoi(e->d_name)))
            break;
    closedir(d);
    return n;
}

static int rank_of(const ec_procs_t *p, pid_t pid)
{
    for (int i = 0; i < p->nproc; i++)
        if (p->r[i].pid == pid)
            return i;
    return -1;
}

static bool is_other(const ec_procs_t *p, pid_t pid, unsigned long long start, bool check_start)
{
    for (int i = 0; i < p->nothers; i++)
        if (p->others[i].pid == pid && (!check_start || p->others[i].start == start))
            return true;
    return false;
}

/* A reaped rank's group: gone for the janitor once it has no member left;
 * until then (what a rank that exited left running) it stays known, and is
 * checked again by prune_left.  This is bookkeeping (the janitor closes the
 * group's pidfd): a group kept by mistake — kill(-pgid, 0) seeing a later
 * group that reused the number — costs nothing, the janitor signals by
 * pidfd and cannot reach that one (coord/agent/janitor.c). */
static void group_reaped(ec_procs_t *p, pid_t pgid)
{
    if (kill(-pgid, 0) < 0 && errno == ESRCH) {
        ec_janitor_group_gone(p->jan, pgid);
        return;
    }
    for (int i = 0; i < p->nleft; i++)
        if (p->left[i] == pgid)
            return;
    if (p->nleft < (int)(sizeof(p->left) / sizeof(p->left[0])))
        p->left[p->nleft++] = pgid; /* else the janitor keeps it: harmless, it checks */
}

static void prune_left(ec_procs_t *p)
{
    for (int i = 0; i < p->nleft;)
        if (kill(-p->left[i], 0) < 0 && errno == ESRCH) {
            ec_janitor_group_gone(p->jan, p->left[i]);
            p->left[i] = p->left[--p->nleft];
        } else {
            i++;
        }
}

/* Orphans we adopted (a rank or a helper died under them) are announced to
 * the janitor, with what setsid() away from the ranks' groups: unreaped
 * children, so the pidfds it gets are certainly theirs. */
static void tell_orphans(ec_procs_t *p)
{
    if (!p->jan)
        return;
    kid_t *k;
    int n = list_kids(&k);
    for (int i = 0; i < n; i++) {
        if (rank_of(p, k[i].pid) >= 0 || is_other(p, k[i].pid, k[i].start, true) || k[i].state == 'Z')
            continue;
        bool known = false;
        int cap = (int)(sizeof(p->told) / sizeof(p->told[0]));
        for (int t = 0; t < p->ntold && !known; t++)
            known = p->told[t].pid == k[i].pid && p->told[t].start == k[i].start;
        if (known)
            continue;
        p->told[p->told_next] = k[i];
        p->told_next = (p->told_next + 1) % cap;
        if (p->ntold < cap)
            p->ntold++;
        ec_janitor_orphan(p->jan, k[i].pid);
    }
    free(k);
}

/* torchrun's Std: "0".."3" for every rank, or "LR:V,..." (others 0).
 * Returns the value for rank r, or -1 when malformed. */
static int std_of(const char *v, int r)
{
    if (!v || !*v)
        return 0;
    if (strlen(v) == 1)
        return *v >= '0' && *v <= '3' ? *v - '0' : -1;
    int val = 0;
    for (const char *p = v; *p;) {
        char *end;
        errno = 0;
        long lr = strtol(p, &end, 10);
        if (errno || end == p || !isdigit((unsigned char)*p) || *end != ':' || end[1] < '0' ||
            end[1] > '3' || (end[2] != ',' && end[2] != '\0') || (end[2] == ',' && !end[3]))
            return -1;
        if (lr == r)
            val = end[1] - '0';
        p = end[2] == ',' ? end + 3 : end + 2;
    }
    return val;
}

static bool in_filter(const char *filter, int r)
{
    if (!filter || !*filter)
        return true;
    for (const char *p = filter; *p;) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p) {
            p++;
            continue;
        }
        if (x == r)
            return true;
        p = end;
    }
    return false;
}

int ec_procs_plan(ec_procs_style_t style, const char *redirects, const char *tee,
                  const char *ranks_filter, int r, ec_rank_plan_t *out, ec_error_t *err)
{
    memset(out, 0, sizeof(*out));
    if (style == EC_PROCS_PADDLE) {
        out->merged = 1;
        out->out.file = 1;
        out->out.con = r == 0 ? EC_CON_PLAIN : EC_CON_NONE;
        return 0;
    }
    int rd = std_of(redirects, r), tv = std_of(tee, r);
    if (rd < 0 || tv < 0)
        return ec_errorf(err, EC_EINVAL, "%s=%s: write 0 (none), 1 (stdout), 2 (stderr), 3 (both), "
                                         "or LOCAL_RANK:N pairs such as 0:1,1:2",
                         rd < 0 ? "--redirects" : "--tee", rd < 0 ? redirects : tee);
    bool shown = in_filter(ranks_filter, r);
    ec_stream_plan_t *sp[2] = {&out->out, &out->err};
    for (int i = 0; i < 2; i++) {
        int bit = 1 << i; /* Std.OUT = 1, Std.ERR = 2 */
        /* a tee is a redirect and a tail of the file (torchrun) */
        sp[i]->file = ((rd | tv) & bit) != 0;
        sp[i]->con = !sp[i]->file ? EC_CON_PLAIN : (tv & bit) ? EC_CON_PREFIXED : EC_CON_NONE;
        if (!shown)
            sp[i]->con = EC_CON_NONE;
    }
    return 0;
}

/* The length of the identifier at s ([_A-Za-z][_A-Za-z0-9]*, Python's
 * Template.idpattern), 0 if none. */
static size_t ident_len(const char *s)
{
    size_t n = 0;
    if (s[0] == '_' || isalpha((unsigned char)s[0]))
        for (n = 1; s[n] == '_' || isalnum((unsigned char)s[n]); n++)
            ;
    return n;
}

void ec_procs_prefix_format(const char *tmpl, const char *role, int64_t rank, int local_rank,
                            const char *hostname, char *out, size_t len)
{
    char srank[24], slocal[16];
    snprintf(srank, sizeof(srank), rank < 0 ? "?" : "%lld", (long long)rank);
    snprintf(slocal, sizeof(slocal), "%d", local_rank);
    const char *names[] = {"role_name", "rank", "local_rank", "hostname"};
    const char *vals[] = {role && *role ? role : "default", srank, slocal,
                          hostname ? hostname : ""};
    ec_strbuf_t b = EC_STRBUF_INIT;
    for (const char *p = tmpl ? tmpl : ""; *p;) {
        if (*p != '$') {
            ec_strbuf_putn(&b, p++, 1);
            continue;
        }
        if (p[1] == '$') { /* $$: one $ */
            ec_strbuf_putn(&b, p, 1);
            p += 2;
            continue;
        }
        bool braced = p[1] == '{';
        const char *id = p + 1 + braced;
        size_t n = ident_len(id);
        const char *val = NULL;
        if (n && (!braced || id[n] == '}'))
            for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !val; i++)
                if (strlen(names[i]) == n && !strncmp(names[i], id, n))
                    val = vals[i];
        if (!val) { /* not ours, or not a placeholder: as it is */
            ec_strbuf_putn(&b, p++, 1);
            continue;
        }
        ec_strbuf_puts(&b, val);
        p = id + n + braced;
    }
    char *s = ec_strbuf_take(&b);
    snprintf(out, len, "%s", s ? s : "");
    free(s);
}

void ec_procs_set_prefix(ec_procs_t *p, int r, const char *prefix)
{
    if (!p || r < 0 || r >= p->nproc)
        return;
    rank_t *k = &p->r[r];
    if (prefix && *prefix)
        snprintf(k->prefix, sizeof(k->prefix), "%s", prefix);
    else
        snprintf(k->prefix, sizeof(k->prefix), "[%.120s%d]:", p->role, r);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* mkdir -p; 0 or -1 with errno. */
static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *q = buf + 1; *q; q++) {
        if (*q != '/')
            continue;
        *q = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -1;
        *q = '/';
    }
    return mkdir(buf, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* One agent per log directory: its workerlog.N, progress.N and error
 * files are per local rank, not per node, and a second agent would write
 * over the first's.  An flock, held as long as the agent lives (released
 * by the kernel when it dies). */
static int lock_dir(ec_procs_t *p, ec_error_t *err)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/.ecoord-agent.lock", p->state_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        ec_log(EC_LOG_WARN, "cannot create %s (%s): a second agent given this --log_dir would "
                            "not be refused", path, strerror(errno));
        return 0;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char buf[32] = "";
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        close(fd);
        if (e != EWOULDBLOCK) {
            ec_log(EC_LOG_WARN, "cannot lock %s (%s): a second agent given this --log_dir "
                                "would not be refused", path, strerror(e));
            return 0;
        }
        return ec_errorf(err, EC_EINVAL, "--log_dir '%s' is in use by another agent on this "
                         "host (pid %s): its workerlog.N, progress.N and error files are per "
                         "local rank, and two agents would write over each other's; give each "
                         "agent a --log_dir of its own (for instance log/<node id>)",
                         p->state_dir, *buf ? buf : "?");
    }
    char pid[32];
    int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)n, 0) < 0)
        ec_log(EC_LOG_DEBUG, "cannot write %s: %s", path, strerror(errno));
    p->dir_lock = fd;
    return 0;
}

ec_procs_t *ec_procs_create(const ec_procs_opts_t *o, ec_error_t *err)
{
    ec_procs_opts_t opt = EC_PROCS_OPTS_INIT;
    memcpy(&opt, o, o->size < sizeof(opt) ? o->size : sizeof(opt));
    int nproc = opt.nproc;
    const char *log_dir = opt.log_dir ? opt.log_dir : "";
    bool torch = opt.style == EC_PROCS_TORCHRUN;
    struct stat st;
    if (!torch && mkdir(log_dir, 0755) < 0 && errno != EEXIST) {
        ec_errorf(err, EC_EIO, "cannot create --log_dir '%s': %s", log_dir, strerror(errno));
        return NULL;
    }
    if (*log_dir && stat(log_dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        ec_errorf(err, EC_EINVAL, "--log_dir '%s' is not a directory: give a directory (made if "
                  "missing) for the processes' logs", log_dir);
        return NULL;
    }
    if (torch && *log_dir && make_dirs(log_dir) < 0) {
        ec_errorf(err, EC_EIO, "cannot create --log_dir '%s': %s", log_dir, strerror(errno));
        return NULL;
    }
    ec_procs_t *p = calloc(1, sizeof(*p));
    if (!p || !(p->r = calloc((size_t)nproc, sizeof(rank_t)))) {
        free(p);
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    p->nproc = nproc;
    p->dir_lock = -1;
    snprintf(p->role, sizeof(p->role), "%s", opt.role && *opt.role ? opt.role : "default");
    p->argv = opt.argv;
    p->console = opt.console;
    p->style = opt.style;
    p->ep = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < nproc; i++) {
        rank_t *k = &p->r[i];
        k->s[0].fd = k->s[1].fd = k->s[0].file = k->s[1].file = -1;
        k->dir_attempt = -1;
        if (ec_procs_plan(opt.style, opt.redirects, opt.tee, opt.ranks_filter, i, &k->plan, err) < 0)
            goto fail;
        ec_procs_set_prefix(p, i, NULL);
    }
    /* the directory of the agent's own per-rank files: log_dir (Paddle),
     * else one of its own, private, removed at the end */
    if (!torch) {
        if (!realpath(log_dir, p->state_dir))
            snprintf(p->state_dir, sizeof(p->state_dir), "%s", log_dir);
        for (int i = 0; i < nproc; i++) {
            /* absolute: failure records are read from anywhere (ecoord status) */
            snprintf(p->r[i].file, sizeof(p->r[i].file), "%s/workerlog.%d", p->state_dir, i);
            snprintf(p->r[i].log, sizeof(p->r[i].log), "%s", p->r[i].file);
        }
    } else {
        const char *tmp = opt.tmpdir && *opt.tmpdir ? opt.tmpdir : "/tmp";
        snprintf(p->state_dir, sizeof(p->state_dir), "%s/ecoord-torchrun-XXXXXX", tmp);
        if (!mkdtemp(p->state_dir)) {
            ec_errorf(err, EC_EIO, "cannot create a private directory in %s: %s (set TMPDIR)", tmp,
                      strerror(errno));
            goto fail;
        }
        p->private_dir = true;
        /* a stream kept in a file without --log_dir: torchrun makes a
         * directory of its own for it (tempfile.mkdtemp("torchelastic_")),
         * and leaves it */
        bool files = false;
        for (int i = 0; i < nproc; i++)
            files |= p->r[i].plan.out.file || p->r[i].plan.err.file;
        if (!*log_dir && files) {
            snprintf(p->base_dir, sizeof(p->base_dir), "%s/torchelastic_XXXXXX", tmp);
            if (!mkdtemp(p->base_dir)) {
                ec_errorf(err, EC_EIO, "cannot create a log directory in %s: %s (pass --log_dir)",
                          tmp, strerror(errno));
                goto fail;
            }
            chmod(p->base_dir, 0755);
            log_dir = p->base_dir;
            ec_log(EC_LOG_INFO, "no --log_dir: the files --redirects and --tee ask for go under "
                                "%s, as torchrun's would", p->base_dir);
        }
        if (*log_dir) {
            /* torchrun: <log_dir>/<run_id>_XXXXXX, one per agent run */
            snprintf(p->run_dir, sizeof(p->run_dir), "%s/%.150s_XXXXXX", log_dir,
                     opt.run_id && *opt.run_id ? opt.run_id : "none");
            if (!mkdtemp(p->run_dir)) {
                ec_errorf(err, EC_EIO, "cannot create a directory in --log_dir '%s': %s", log_dir,
                          strerror(errno));
                goto fail;
            }
            chmod(p->run_dir, 0755);
        }
        for (int i = 0; i < nproc; i++)
            snprintf(p->r[i].log, sizeof(p->r[i].log),
                     "the console only (torchrun keeps a file with --log_dir and --redirects or "
                     "--tee)");
    }
    if (torch && !(p->err_q = ec_outq_create(STDERR_FILENO, ERR_QUEUE_BYTES,
                                               "torchrun's --redirects and --tee keep a rank's "
                                               "output in a file")))
        ec_log(EC_LOG_WARN, "cannot start the stderr writer (%s): the ranks' stderr goes to "
                            "stdout", strerror(errno));
    /* Orphaned descendants of the ranks (a daemon, a setsid() helper, what
     * a dead rank leaves behind) become our children, to be stopped with
     * the ranks and reaped, instead of running on under init. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        ec_log(EC_LOG_WARN, "cannot become a child subreaper (%s): processes started by the "
                            "training processes may outlive them", strerror(errno));
    /* Before any rank, and before the children are listed: the janitor is
     * one of the children that are not ours to stop. */
    ec_error_t jerr = {0};
    if (!(p->jan = ec_janitor_start(&jerr)))
        ec_log(EC_LOG_WARN, "%s: processes started by the training processes will outlive the "
                            "agent if it is killed", jerr.msg);
    p->nothers = list_kids(&p->others);
    /* After the janitor's fork, which would hold the lock too */
    if (!torch && lock_dir(p, err) < 0)
        goto fail_started;
    return p;
fail_started:
    ec_procs_destroy(p);
    return NULL;
fail:
    if (p->ep >= 0)
        close(p->ep);
    if (p->private_dir)
        nftw(p->state_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(p->r);
    free(p);
    return NULL;
}

ec_procs_t *ec_procs_new(int nproc, const char *log_dir, char *const *argv, ec_outq_t *console,
                         ec_error_t *err)
{
    ec_procs_opts_t o = EC_PROCS_OPTS_INIT;
    o.nproc = nproc;
    o.log_dir = log_dir;
    o.argv = argv;
    o.console = console;
    return ec_procs_create(&o, err);
}

const char *ec_procs_run_dir(const ec_procs_t *p)
{
    return p->run_dir;
}

const char *ec_procs_state_dir(const ec_procs_t *p)
{
    return p->state_dir;
}

/* torchrun with --log_dir: rank r's directory in attempt, made. */
static int attempt_dir(ec_procs_t *p, int r, int attempt)
{
    rank_t *k = &p->r[r];
    if (k->dir_attempt == attempt)
        return 0;
    snprintf(k->dir, sizeof(k->dir), "%s/attempt_%d/%d", p->run_dir, attempt, r);
    if (make_dirs(k->dir) < 0)
        return -1;
    k->dir_attempt = attempt;
    return 0;
}

int ec_procs_error_file(ec_procs_t *p, int r, int attempt, char *buf, size_t len)
{
    if (p->style == EC_PROCS_TORCHRUN && p->run_dir[0]) {
        if (attempt_dir(p, r, attempt) < 0)
            return -1;
        snprintf(buf, len, "%s/error.json", p->r[r].dir);
        return 0;
    }
    snprintf(buf, len, "%s/error.%d.json", p->state_dir, r);
    return 0;
}

/* The child, between fork and exec: only async-signal-safe calls.  out,
 * err: its stdout and stderr. */
static void child(ec_procs_t *p, pid_t parent, int out, int err_fd, int errw, char *const *envp)
{
    /* The agent's handlers mean nothing here; a signal that arrives before
     * exec must act as it will on the program.  Its own process group; no
     * orphan keeps training under a stale rank. */
    setpgid(0, 0);
    int e = 0;
    if (ec_child_reset(SIGKILL, parent) < 0) {
        e = ESRCH;
    } else {
        /* (the pipes are above 2: the agent's 0, 1 and 2 are open) */
        dup2(out, 1);
        dup2(err_fd, 2);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        if (nul > 2)
            close(nul);
        execvpe(p->argv[0], p->argv, envp);
        e = errno;
    }
    ssize_t w = write(errw, &e, sizeof(e));
    (void)w;
    _exit(127);
}

/* Reap pid, waiting at most ms. */
static bool reap_within(pid_t pid, int *status, long ms)
{
    int64_t deadline = ec_mono_ms() + ms;
    for (;;) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR))
            return w == pid;
        if (ec_mono_ms() >= deadline)
            return false;
        pause_ms(1);
    }
}

/* What the ring keeps of rank r's output: its last RING_BYTES. */
static void ring_put(rank_t *k, const char *buf, size_t n)
{
    if (n >= RING_BYTES) {
        buf += n - RING_BYTES;
        n = RING_BYTES;
        k->ring_head = k->ring_len = 0;
    }
    size_t tail = (k->ring_head + k->ring_len) % RING_BYTES;
    size_t first = n < RING_BYTES - tail ? n : RING_BYTES - tail;
    memcpy(k->ring + tail, buf, first);
    memcpy(k->ring, buf + first, n - first);
    k->ring_len += n;
    if (k->ring_len > RING_BYTES) { /* the oldest bytes were written over */
        k->ring_head = (k->ring_head + k->ring_len - RING_BYTES) % RING_BYTES;
        k->ring_len = RING_BYTES;
    }
}

/* Close stream s of rank r (its pipe and file). */
static void stream_close(ec_procs_t *p, stream_t *st)
{
    if (st->fd >= 0) {
        if (p->ep >= 0)
            epoll_ctl(p->ep, EPOLL_CTL_DEL, st->fd, NULL);
        close(st->fd);
        st->fd = -1;
    }
    if (st->file >= 0) {
        close(st->file);
        st->file = -1;
    }
}

/* Console output being gathered, written to the queue in one piece: the
 * queue's writer then writes large pieces, as the ranks' output came. */
typedef struct {
    char buf[16384];
    size_t len;
} conbuf_t;

static void con_flush(conbuf_t *c, ec_outq_t *q)
{
    if (c->len && q)
        ec_outq_write(q, c->buf, c->len);
    c->len = 0;
}

static void con_put(conbuf_t *c, ec_outq_t *q, const char *b, size_t n)
{
    if (c->len + n > sizeof(c->buf))
        con_flush(c, q);
    if (n > sizeof(c->buf)) {
        if (q)
            ec_outq_write(q, b, n);
        return;
    }
    memcpy(c->buf + c->len, b, n);
    c->len += n;
}

/* Move the pending part of stream st's line into c: whole (it ended) or as
 * far as it got (partial: full, waited long enough, EOF). */
static void take_pending(const rank_t *k, stream_t *st, conbuf_t *c)
{
    if (!st->npend)
        return;
    if (st->bol && st->con == EC_CON_PREFIXED)
        con_put(c, st->q, k->prefix, strlen(k->prefix));
    con_put(c, st->q, st->pend, st->npend);
    st->bol = st->pend[st->npend - 1] == '\n';
    st->npend = 0;
}

static void show_pending(const rank_t *k, stream_t *st)
{
    conbuf_t c;
    c.len = 0;
    take_pending(k, st, &c);
    con_flush(&c, st->q);
}

/* Copy n bytes that came out of stream si of rank r where they go. */
static void deliver(ec_procs_t *p, int r, int si, const char *buf, size_t n)
{
    rank_t *k = &p->r[r];
    stream_t *st = &k->s[si];
    if (st->file >= 0) {
        ssize_t w = write(st->file, buf, n); /* the file gets everything */
        (void)w;
    }
    ring_put(k, buf, n);
    k->bytes += n;
    if (st->con == EC_CON_NONE)
        return;
    /* the console what it can take, whole lines (torchrun's tee puts
     * "[role N]:" before each), a line begun kept until it ends */
    static conbuf_t c;
    c.len = 0;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(buf + i, '\n', n - i);
        size_t seg = nl ? (size_t)(nl - (buf + i)) + 1 : n - i;
        size_t take = seg < sizeof(st->pend) - st->npend ? seg : sizeof(st->pend) - st->npend;
        if (!st->npend)
            st->pend_since = ec_mono_ms();
        memcpy(st->pend + st->npend, buf + i, take);
        st->npend += take;
        i += take;
        if (st->pend[st->npend - 1] == '\n' || st->npend == sizeof(st->pend))
            take_pending(k, st, &c);
    }
    con_flush(&c, st->q);
}

/* Read what stream si of rank r has now (at most budget bytes); on EOF
 * close it.  Returns the bytes read. */
static size_t drain(ec_procs_t *p, int r, int si, size_t budget)
{
    stream_t *st = &p->r[r].s[si];
    char buf[8192];
    size_t total = 0;
    while (st->fd >= 0 && total < budget) {
        ssize_t n = read(st->fd, buf, sizeof(buf));
        if (n > 0) {
            deliver(p, r, si, buf, (size_t)n);
            total += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0) { /* writers gone: the rank and what it started exited */
            show_pending(&p->r[r], st);
            if (st->con != EC_CON_NONE && !st->bol && st->q)
                ec_outq_write(st->q, "\n", 1); /* its last line had no end */
            st->bol = true;
            stream_close(p, st);
        }
        break;
    }
    return total;
}

/* Open rank r's file for stream si in attempt (torchrun) or its workerlog
 * (Paddle); -1 with errno. */
static int open_file(ec_procs_t *p, int r, int si, int attempt)
{
    rank_t *k = &p->r[r];
    if (p->style == EC_PROCS_PADDLE)
        return open(k->file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (attempt_dir(p, r, attempt) < 0)
        return -1;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/%s.log", k->dir, si ? "stderr" : "stdout");
    /* a start of the same attempt rewrites them, as torchrun its directory */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0 && (si == 1 || !k->plan.err.file))
        snprintf(k->log, sizeof(k->log), "%s", path); /* stderr's first: the traceback */
    return fd;
}

/* Close what is left of a start that failed: the pipes' ends still open
 * (-1: closed) and the rank's log files. */
static void start_undo(ec_procs_t *p, rank_t *k, int pipes[2][2])
{
    for (int si = 0; si < 2; si++) {
        for (int end = 0; end < 2; end++)
            if (pipes[si][end] >= 0)
                close(pipes[si][end]);
        stream_close(p, &k->s[si]);
    }
}

/* The rank's log files and output pipes (piped: through us), the marker
 * written first, and the pipe the child reports a failed exec on.  0, or an
 * error with everything closed again. */
static int start_streams(ec_procs_t *p, int r, int attempt, const char *marker, bool piped,
                         int pipes[2][2], int errp[2], ec_error_t *err)
{
    rank_t *k = &p->r[r];
    int nstreams = k->plan.merged ? 1 : 2;
    ec_stream_plan_t *sp[2] = {&k->plan.out, &k->plan.err};
    int e = 0, rc = 0;
    for (int si = 0; si < nstreams && !e; si++) {
        if (sp[si]->file && (k->s[si].file = open_file(p, r, si, attempt)) < 0) {
            e = errno;
            rc = ec_errorf(err, EC_EIO, "cannot open the log of local rank %d: %s", r,
                           strerror(e));
            break;
        }
        if (piped && pipe2(pipes[si], O_CLOEXEC) < 0) {
            e = errno;
            rc = ec_errorf(err, EC_ESYS, "pipe: %s", strerror(e));
        }
    }
    if (!e && marker) {
        if (p->style == EC_PROCS_TORCHRUN)
            ring_put(k, marker, strlen(marker)); /* torchrun's files hold the program's output */
        else if (k->s[0].file >= 0) {
            off_t at = lseek(k->s[0].file, 0, SEEK_END); /* appended: after a run's, a restart's */
            k->start_off = at > 0 ? at : 0;
            ssize_t w = write(k->s[0].file, marker, strlen(marker));
            (void)w;
        }
    }
    if (!e && pipe2(errp, O_CLOEXEC) < 0) {
        e = errno;
        rc = ec_errorf(err, EC_ESYS, "pipe: %s", strerror(e));
    }
    if (e)
        start_undo(p, k, pipes);
    return rc;
}

/* EOF: exec succeeded (the pipe is close-on-exec); an errno: it failed.
 * A program on a hung filesystem may take long to exec: past the
 * deadline it counts as started, and a failure shows as its exit. */
static int await_exec(int fd)
{
    int child_errno = 0;
    struct pollfd pf = {fd, POLLIN, 0};
    int64_t deadline = ec_mono_ms() + 10000;
    for (;;) {
        int n = poll(&pf, 1, (int)(deadline - ec_mono_ms() > 0 ? deadline - ec_mono_ms() : 0));
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0) {
            ssize_t got;
            do
                got = read(fd, &child_errno, sizeof(child_errno));
            while (got < 0 && errno == EINTR);
            if (got != (ssize_t)sizeof(child_errno))
                child_errno = 0;
        }
        break;
    }
    return child_errno;
}

/* The started rank's output: each pipe read without blocking and watched
 * with epoll, its lines queued for the console. */
static void watch_streams(ec_procs_t *p, int r, int pipes[2][2])
{
    rank_t *k = &p->r[r];
    int nstreams = k->plan.merged ? 1 : 2;
    ec_stream_plan_t *sp[2] = {&k->plan.out, &k->plan.err};
    for (int si = 0; si < 2; si++) {
        stream_t *st = &k->s[si];
        st->con = si < nstreams ? sp[si]->con : EC_CON_NONE;
        st->q = p->style == EC_PROCS_TORCHRUN && si == 1 && p->err_q ? p->err_q : p->console;
        st->bol = true;
        if (pipes[si][0] < 0)
            continue;
        st->fd = pipes[si][0];
        fcntl(st->fd, F_SETFL, O_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)(r * 2 + si)};
        if (p->ep >= 0 && epoll_ctl(p->ep, EPOLL_CTL_ADD, st->fd, &ev) < 0)
            ec_log(EC_LOG_WARN, "cannot watch local rank %d's output (%s): it is read only when "
                                "the rank exits", r, strerror(errno));
    }
}

int ec_procs_start(ec_procs_t *p, int r, int attempt, char *const *envp, const char *marker,
                   ec_error_t *err)
{
    rank_t *k = &p->r[r];
    /* what an earlier run of this rank left: its pipes go with it (a
     * descendant still writing to them gets EPIPE) */
    for (int si = 0; si < 2; si++) {
        drain(p, r, si, 1u << 20);
        stream_close(p, &k->s[si]);
    }
    int pipes[2][2] = {{-1, -1}, {-1, -1}}, errp[2] = {-1, -1};
    /* Paddle's ranks but 0: straight into the file, nothing through us */
    bool piped = p->style == EC_PROCS_TORCHRUN || k->plan.out.con != EC_CON_NONE;
    int rc = start_streams(p, r, attempt, marker, piped, pipes, errp, err);
    if (rc)
        return rc;
    int child_out = piped ? pipes[0][1] : k->s[0].file;
    int child_err = !k->plan.merged ? pipes[1][1] : child_out;
    /* No signal handler of ours may run in the child before it resets them. */
    sigset_t saved;
    ec_child_fork_begin(&saved);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        child(p, parent, child_out, child_err, errp[1], envp);
    int fork_errno = errno;
    ec_child_fork_end(&saved);
    close(errp[1]);
    for (int si = 0; si < 2; si++)
        if (pipes[si][1] >= 0) {
            close(pipes[si][1]);
            pipes[si][1] = -1;
        }
    if (pid < 0) {
        close(errp[0]);
        start_undo(p, k, pipes);
        return ec_errorf(err, EC_ESYS, "fork: %s", strerror(fork_errno));
    }
    setpgid(pid, pid);
    /* Announced at once, while the child is unreaped: were the agent killed
     * now, what the program starts would otherwise be missed. */
    ec_janitor_group(p->jan, pid);
    int child_errno = await_exec(errp[0]);
    close(errp[0]);
    if (child_errno) {
        if (!reap_within(pid, NULL, EC_PROCS_KILL_WAIT_MS))
            kill(pid, SIGKILL); /* left to ec_procs_reap as an orphan */
        else
            group_reaped(p, pid);
        start_undo(p, k, pipes);
        return ec_errorf(err, EC_ESYS,
                         "cannot run '%s': %s (check the program after '--': that it exists on "
                         "this node, is in PATH or given with its path, and is executable)",
                         p->argv[0], strerror(child_errno));
    }
    k->pid = pid;
    watch_streams(p, r, pipes);
    if (!piped) {
        close(k->s[0].file); /* the child has it */
        k->s[0].file = -1;
    }
    return 0;
}

/* Lines begun long enough ago are shown as far as they got. */
static void show_stale(ec_procs_t *p)
{
    int64_t now = ec_mono_ms();
    for (int r = 0; r < p->nproc; r++)
        for (int si = 0; si < 2; si++) {
            stream_t *st = &p->r[r].s[si];
            if (st->npend && now - st->pend_since >= PARTIAL_LINE_MS)
                show_pending(&p->r[r], st);
        }
}

void ec_procs_pump(ec_procs_t *p)
{
    show_stale(p);
    if (p->ep < 0) {
        for (int r = 0; r < p->nproc; r++)
            for (int si = 0; si < 2; si++)
                drain(p, r, si, 1u << 16);
        return;
    }
    /* at most 1 MiB a call: chatty ranks must not hold the main loop */
    struct epoll_event ev[64];
    size_t total = 0;
    for (int round = 0; round < 16 && total < (1u << 20); round++) {
        int n = epoll_wait(p->ep, ev, 64, 0);
        if (n <= 0)
            return;
        for (int i = 0; i < n; i++) {
            int r = (int)(ev[i].data.u32 / 2), si = (int)(ev[i].data.u32 % 2);
            if (r < p->nproc)
                total += drain(p, r, si, 1u << 16);
        }
    }
}

int ec_procs_out_fd(const ec_procs_t *p)
{
    return p->ep;
}

static void rank_reaped(ec_procs_t *p, int i)
{
    group_reaped(p, p->r[i].pid);
    p->r[i].pid = 0;
    /* its last words, before anyone reads its tail */
    for (int si = 0; si < 2; si++)
        drain(p, i, si, 1u << 20);
}

int ec_procs_reap(ec_procs_t *p, int *r, int *status)
{
    /* Look at exited children without reaping (WNOWAIT): a rank's exit is
     * the caller's; an orphan's is reaped here; another's (the embedded
     * etcd's) is left to its owner, and hides the ones behind it, which the
     * per-rank waits below and the next stop still find. */
    bool reaped = false;
    for (int guard = 0; guard < 256; guard++) {
        siginfo_t si;
        si.si_pid = 0;
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
            break;
        if (rank_of(p, si.si_pid) >= 0)
            break;
        if (p->jan && si.si_pid == ec_janitor_pid(p->jan)) {
            waitpid(si.si_pid, NULL, WNOHANG);
            ec_janitor_lost(p->jan);
            continue;
        }
        if (is_other(p, si.si_pid, 0, false))
            break;
        waitpid(si.si_pid, NULL, WNOHANG);
        reaped = true;
    }
    int found = 0;
    for (int i = 0; i < p->nproc && !found; i++) {
        if (p->r[i].pid <= 0)
            continue;
        int st;
        if (waitpid(p->r[i].pid, &st, WNOHANG) == p->r[i].pid) {
            rank_reaped(p, i);
            *r = i;
            *status = st;
            found = 1;
        }
    }
    /* A death under a rank's tree may have made orphans of its children,
     * and emptied groups the janitor still knows; a death deeper down (a
     * helper's parent) tells us nothing: look once a second too. */
    int64_t now = ec_mono_ms();
    if (reaped || found || now >= p->next_tell) {
        tell_orphans(p);
        prune_left(p);
        p->next_tell = now + EC_PROCS_ORPHAN_SCAN_MS;
    }
    return found;
}

int ec_procs_running(const ec_procs_t *p)
{
    int n = 0;
    for (int i = 0; i < p->nproc; i++)
        n += p->r[i].pid > 0;
    return n;
}

pid_t ec_procs_pid(const ec_procs_t *p, int r)
{
    return r >= 0 && r < p->nproc ? p->r[r].pid : 0;
}

/* Each running rank's whole process group.  Only while the rank is not
 * reaped: its pid, and so its group id, cannot be reused until then. */
static void signal_ranks(ec_procs_t *p, int sig)
{
    for (int i = 0; i < p->nproc; i++)
        if (p->r[i].pid > 0)
            kill(-p->r[i].pid, sig);
}

void ec_procs_kill_rank(ec_procs_t *p, int r)
{
    if (p && r >= 0 && r < p->nproc && p->r[r].pid > 0)
        kill(-p->r[r].pid, SIGKILL);
}

static bool termed(ec_procs_t *p, pid_t pid)
{
    for (int i = 0; i < p->ntermed; i++)
        if (p->termed[i] == pid)
            return true;
    if (p->ntermed < (int)(sizeof(p->termed) / sizeof(p->termed[0])))
        p->termed[p->ntermed++] = pid;
    return false;
}

/* Orphaned descendants: every child that is neither a rank nor someone
 * else's.  Reap the exited ones, send sig (0: none; SIGTERM once each) to
 * the others, and return how many are left.  Race-free: a child's pid stays
 * ours until we reap it.  A descendant whose parent is still alive is not a
 * child yet; it becomes one when that parent dies, so callers repeat this
 * until nothing is left, one generation at a time. */
static int sweep(ec_procs_t *p, int sig)
{
    kid_t *k;
    int n = list_kids(&k), left = 0;
    for (int i = 0; i < n; i++) {
        if (rank_of(p, k[i].pid) >= 0 || is_other(p, k[i].pid, k[i].start, true))
            continue;
        if (waitpid(k[i].pid, NULL, WNOHANG) == k[i].pid)
            continue;
        if (sig == SIGKILL || (sig && !termed(p, k[i].pid)))
            kill(k[i].pid, sig);
        left++;
    }
    free(k);
    return left;
}

void ec_procs_stop_all(ec_procs_t *p, int64_t grace_ms)
{
    p->ntermed = 0;
    signal_ranks(p, SIGTERM);
    /* A rank stopped by SIGSTOP or a debugger (found hung, say) acts on
     * SIGTERM only once it runs again, as systemd does it. */
    signal_ranks(p, SIGCONT);
    int left = sweep(p, SIGTERM);
    if (!ec_procs_running(p) && !left) {
        prune_left(p);
        return;
    }
    int64_t deadline = ec_mono_ms() + grace_ms;
    while (ec_mono_ms() < deadline && !(p->abort && *p->abort)) {
        int r, st;
        while (ec_procs_reap(p, &r, &st))
            ;
        ec_procs_pump(p);
        left = sweep(p, SIGTERM);
        if (!ec_procs_running(p) && !left) {
            prune_left(p);
            return;
        }
        pause_ms(5); /* reaping poll interval */
    }
    ec_procs_kill_all(p);
}

void ec_procs_set_abort(ec_procs_t *p, const volatile sig_atomic_t *abort_flag)
{
    if (p)
        p->abort = abort_flag;
}

/* One line per process that outlived SIGKILL: what it is and its state. */
static void report_stuck(ec_procs_t *p)
{
    kid_t *k;
    int n = list_kids(&k);
    for (int i = 0; i < n; i++) {
        if (is_other(p, k[i].pid, k[i].start, true))
            continue;
        int r = rank_of(p, k[i].pid);
        char what[64];
        if (r >= 0)
            snprintf(what, sizeof(what), "local rank %d", r);
        else
            snprintf(what, sizeof(what), "a process started by a rank");
        ec_log(EC_LOG_ERROR, "%s (pid %d, state %c%s) did not exit within %d ms of SIGKILL: left "
                             "behind (reaped if it ever exits); check `cat /proc/%d/stack`",
               what, (int)k[i].pid, k[i].state,
               k[i].state == 'D' ? ": uninterruptible sleep, e.g. stuck I/O or a hung device" : "",
               EC_PROCS_KILL_WAIT_MS, (int)k[i].pid);
    }
    free(k);
}

void ec_procs_kill_all(ec_procs_t *p)
{
    int64_t deadline = ec_mono_ms() + EC_PROCS_KILL_WAIT_MS;
    for (;;) {
        signal_ranks(p, SIGKILL);
        for (int i = 0; i < p->nproc; i++)
            if (p->r[i].pid > 0 && waitpid(p->r[i].pid, NULL, WNOHANG) == p->r[i].pid)
                rank_reaped(p, i);
        int left = sweep(p, SIGKILL);
        if (!ec_procs_running(p) && !left) {
            prune_left(p);
            break;
        }
        if (ec_mono_ms() >= deadline) {
            report_stuck(p);
            for (int i = 0; i < p->nproc; i++)
                p->r[i].pid = 0; /* from now on orphans like any other */
            break;
        }
        pause_ms(2);
    }
    ec_procs_pump(p);
}

void ec_procs_deadline(ec_procs_t *p, int64_t kill_at_ms)
{
    if (p)
        ec_janitor_deadline(p->jan, kill_at_ms);
}

void ec_procs_destroy(ec_procs_t *p)
{
    if (!p)
        return;
    ec_procs_kill_all(p);
    ec_janitor_stop(p->jan); /* everything is stopped: it exits without killing */
    if (p->dir_lock >= 0)
        close(p->dir_lock);
    for (int r = 0; r < p->nproc; r++)
        for (int si = 0; si < 2; si++) {
            drain(p, r, si, 1u << 20);
            stream_close(p, &p->r[r].s[si]);
        }
    if (p->ep >= 0)
        close(p->ep);
    if (p->err_q) {
        ec_outq_flush(p->err_q, 2000);
        ec_outq_destroy(p->err_q);
    }
    if (p->private_dir)
        nftw(p->state_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(p->others);
    free(p->r);
    free(p);
}

const char *ec_procs_log_path(const ec_procs_t *p, int r)
{
    return p->r[r].log;
}

const char *ec_procs_log_file(const ec_procs_t *p, int r)
{
    return p->r[r].file[0] ? p->r[r].file : NULL;
}

uint64_t ec_procs_output_bytes(const ec_procs_t *p, int r)
{
    return r >= 0 && r < p->nproc ? p->r[r].bytes : 0;
}

/* Keep line in lines[0..n), the last n of them. */
static int keep_line(char **lines, int n, int count, const char *line, size_t len)
{
    if (count == n) {
        free(lines[0]);
        memmove(lines, lines + 1, (size_t)(n - 1) * sizeof(char *));
        count--;
    }
    lines[count] = strndup(line, len);
    return lines[count] ? count + 1 : count;
}

int ec_procs_tail(const ec_procs_t *p, int r, int n, char ***lines)
{
    *lines = calloc((size_t)n + 1, sizeof(char *));
    if (!*lines)
        return EC_ENOMEM;
    const rank_t *k = &p->r[r];
    int count = 0;
    if (!k->file[0]) {
        /* the kept lines: the ring, oldest first, less a first line cut */
        char *buf = malloc(RING_BYTES + 1);
        if (!buf)
            return 0;
        for (size_t i = 0; i < k->ring_len; i++)
            buf[i] = k->ring[(k->ring_head + i) % RING_BYTES];
        size_t len = k->ring_len, at = 0;
        if (len == RING_BYTES) {
            char *nl = memchr(buf, '\n', len);
            at = nl ? (size_t)(nl - buf) + 1 : 0;
        }
        while (at < len) {
            char *nl = memchr(buf + at, '\n', len - at);
            size_t l = nl ? (size_t)(nl - (buf + at)) : len - at;
            count = keep_line(*lines, n, count, buf + at, l > 1023 ? 1023 : l);
            at += l + 1;
        }
        free(buf);
        return count;
    }
    FILE *f = fopen(k->file, "r");
    if (!f)
        return 0;
    if (k->start_off > 0 && fseeko(f, k->start_off, SEEK_SET) != 0)
        rewind(f);
    char buf[1024];
    while (fgets(buf, sizeof(buf), f)) {
        buf[strcspn(buf, "\n")] = '\0';
        count = keep_line(*lines, n, count, buf, strlen(buf));
    }
    fclose(f);
    return count;
}
