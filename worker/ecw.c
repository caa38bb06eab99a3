/* The worker library's handle: lifecycle, the rebuild loop, state recovery
 * and the collectives' common path.  See ecw.h for the contract and
 * ecw_impl.h for the layout of the files. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "ecw_impl.h"
#include "clock.h"
#include "probe.h"
#include "suspects.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "rank.h"

/* The public codes are ecoord's, under the library's own prefix. */
#define ECW__SAME(name, val, text) \
    _Static_assert((int)ECW_##name == (int)EC_##name, "ECW_" #name " differs from EC_" #name);
EC_ERRNO_MAP(ECW__SAME)
ECW_ERRNO_MAP(ECW__SAME) /* and both ways: a code added to one map only fails here */
#undef ECW__SAME
_Static_assert(ECW_ERRMSG_MAX == EC_ERRMSG_MAX, "message sizes differ");
_Static_assert((int)ECW_LOG_ERROR == (int)EC_LOG_ERROR, "log levels differ");

/* ---- small helpers ------------------------------------------------------------------- */

void ecw__log(ecw_t *w, ecw_log_level_t lvl, const char *fmt, ...)
{
    if (!w->o.log_cb || lvl < w->o.log_level)
        return;
    int saved = errno;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    w->o.log_cb(lvl, buf, w->o.log_arg);
    errno = saved;
}

/* restart: 0, 1 while the first caller writes restart_why, 2 once it is written. */
void ecw__restart(ecw_t *w, const char *fmt, ...)
{
    int saved = errno;
    int none = 0;
    if (atomic_compare_exchange_strong(&w->restart, &none, 1)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->restart_why, sizeof(w->restart_why), fmt, ap);
        va_end(ap);
        atomic_store(&w->restart, 2);
        ecw__log(w, ECW_LOG_ERROR, "-restart %s: this process must exit; the agent starts a "
                 "new one in its place", w->restart_why);
    }
    atomic_store(&w->broken, 1);
    errno = saved;
}

const char *ecw__restart_why(const ecw_t *w)
{
    return atomic_load(&w->restart) == 2 ? w->restart_why : "the GPU state is lost";
}

void *ecw__user_stream(const ecw_t *w)
{
    return w->user_stream;
}

static int restart_err(ecw_t *w, const char *what, ec_error_t *err)
{
    return ec_errorf(err, EC_ERESTART, "%s: %s; exit this process (non-zero) so that the agent "
                     "restarts it: the new one rejoins through the restart epoch and takes the "
                     "state from its peers", what, ecw__restart_why(w));
}

void ecw__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms)
{
    int64_t left = deadline_ms - ec_mono_ms();
    if (left <= 0)
        return;
    struct timespec ts = ec_deadline_ts(left);
    pthread_cond_timedwait(cv, mu, &ts);
}

int ecw__out(ecw_error_t *u, const ec_error_t *e, int rc)
{
    if (u && rc < 0) {
        u->code = rc;
        snprintf(u->msg, sizeof(u->msg), "%s", e->msg[0] ? e->msg : ec_strerror(rc));
    }
    return rc;
}

const char *ecw_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
#define ECW__TEXT(name, val, text) \
    case (val):                    \
        return text;
        ECW_ERRNO_MAP(ECW__TEXT)
#undef ECW__TEXT
    }
    return "unknown error";
}

const char *ecw_err_name(int code)
{
    switch (code) {
    case 0:
        return "ECW_OK";
#define ECW__NAME(name, val, text) \
    case (val):                    \
        return "ECW_" #name;
        ECW_ERRNO_MAP(ECW__NAME)
#undef ECW__NAME
    }
    return "ECW_UNKNOWN";
}

const char *ecw_backend_name(ecw_backend_t b)
{
    switch (b) {
    case ECW_BACKEND_AUTO: return "auto";
    case ECW_BACKEND_GLOO: return "gloo";
    case ECW_BACKEND_NCCL: return "nccl";
    case ECW_BACKEND_NONE: return "none";
    }
    return "unknown";
}

size_t ecw_dtype_size(ecw_dtype_t dt)
{
    switch (dt) {
    case ECW_F32: return 4;
    case ECW_F64: return 8;
    case ECW_I32: return 4;
    case ECW_I64: return 8;
    case ECW_F16: return 2;
    case ECW_BF16: return 2;
    case ECW_U8: return 1;
    }
    return 0;
}

/* ---- accessors ------------------------------------------------------------------------- */

uint64_t ecw_epoch(const ecw_t *w) { return w ? atomic_load(&w->cur_num) : 0; }
int ecw_rank(const ecw_t *w) { return w ? atomic_load(&w->rank) : -1; }
int ecw_world_size(const ecw_t *w) { return w ? atomic_load(&w->world) : 0; }
int ecw_nnodes(const ecw_t *w) { return w ? atomic_load(&w->nnodes) : 0; }
int ecw_member_index(const ecw_t *w) { return w ? atomic_load(&w->m_id) : -1; }
int ecw_nproc(const ecw_t *w) { return w ? atomic_load(&w->nproc) : 0; }
int ecw_local_rank(const ecw_t *w) { return w ? w->o.local_rank : -1; }
const char *ecw_node_id(const ecw_t *w) { return w ? w->o.node_id : NULL; }
uint64_t ecw_latest_epoch(const ecw_t *w) { return w ? atomic_load(&w->latest_num) : 0; }

ecw_backend_t ecw_backend(const ecw_t *w)
{
    if (w && w->be == &ecw__none_backend)
        return ECW_BACKEND_NONE;
#ifdef HAVE_NCCL
    if (w && w->be == &ecw__nccl_backend)
        return ECW_BACKEND_NCCL;
#endif
    return ECW_BACKEND_GLOO;
}

int ecw_epoch_pending(const ecw_t *w)
{
    if (!w)
        return 0;
    uint64_t cur = atomic_load(&w->cur_num);
    return !cur || atomic_load(&w->broken) || atomic_load(&w->latest_num) > cur;
}

/* ---- the communicator ----------------------------------------------------------------- */

/* Destroy the communicator kept for the next build, if any (training
 * thread only). */
static void drop_prev(ecw_t *w)
{
    void *c = w->prev_comm;
    w->prev_comm = NULL;
    if (c)
        ecw__retire(w, w->prev_be, c); /* off this thread when its teardown is slow */
}

/* Abort and destroy the communicator (training thread only).  keep: a
 * communicator the backend may derive the next one from (be->reusable:
 * NCCL's shrink) is kept in w->prev_comm for the next build instead; it
 * takes no collective meanwhile (w->comm is NULL). */
static void drop_comm(ecw_t *w, bool keep)
{
    pthread_mutex_lock(&w->comm_mu);
    void *c = w->comm;
    w->comm = NULL;
    atomic_store(&w->target_num, 0);
    atomic_store(&w->cur_num, 0);
    pthread_mutex_unlock(&w->comm_mu);
    if (c && keep && w->be->reusable && w->be->reusable(c)) {
        drop_prev(w);
        w->prev_comm = c;
        w->prev_be = w->be;
        ecw__log(w, ECW_LOG_DEBUG, "communicator kept for the next epoch's build");
        pthread_mutex_lock(&w->mu);
        if (!w->latest_abort_us)
            w->latest_abort_us = ec_wall_us();
        pthread_mutex_unlock(&w->mu);
    } else if (c) {
        /* destroyed beside the next one's build when its teardown is
         * slow (NCCL's abort): never before it (retire.c) */
        ecw__retire(w, w->be, c);
        pthread_mutex_lock(&w->mu);
        if (!w->latest_abort_us)
            w->latest_abort_us = ec_wall_us();
        pthread_mutex_unlock(&w->mu);
    }
}

/* What rebuild needs of the newest epoch, copied under w->mu. */
typedef struct snap {
    uint64_t number;
    int world, nproc, nmembers, m_id;
    uint64_t incarnation; /* of this node, as the epoch admitted it (m_id >= 0) */
    char host[EC_HOST_MAX + 1];
    int64_t seen_us, abort_us;
} snap_t;

/* Wait for an epoch >= floor; false at the deadline. */
static bool newest(ecw_t *w, uint64_t floor, int64_t deadline, snap_t *s)
{
    if (!ecw__wait_newer(w, floor > 0 ? floor - 1 : 0, deadline))
        return false;
    pthread_mutex_lock(&w->mu);
    bool ok = w->latest != NULL && w->latest->number >= floor;
    if (ok) {
        const ec_epoch_t *ep = w->latest;
        s->number = ep->number;
        s->world = ep->world_size;
        s->nproc = ep->nproc;
        s->nmembers = ep->nmembers;
        s->m_id = ec_epoch_find_member(ep, w->o.node_id);
        s->host[0] = '\0';
        s->incarnation = 0;
        if (s->m_id >= 0) {
            snprintf(s->host, sizeof(s->host), "%s", ep->members[s->m_id].host);
            s->incarnation = ep->members[s->m_id].incarnation;
        }
        s->seen_us = w->latest_seen_us;
        s->abort_us = w->latest_abort_us;
    }
    pthread_mutex_unlock(&w->mu);
    return ok;
}

static void set_backend(ecw_t *w, const ecw__backend_t *be)
{
    pthread_mutex_lock(&w->comm_mu);
    w->be = be;
    pthread_mutex_unlock(&w->comm_mu);
}

static const ecw__backend_t *backend_named(const char *name)
{
#ifdef HAVE_GLOO
    if (!strcmp(name, "gloo"))
        return &ecw__gloo_backend;
#endif
#ifdef HAVE_NCCL
    if (!strcmp(name, "nccl"))
        return &ecw__nccl_backend;
#endif
    return NULL;
}

/* Every member of an epoch runs the same backend: rank 0's.  Resolved
 * alone, "auto" could be NCCL on a node with a GPU and Gloo on one without
 * (or where libnccl is missing), and the two halves would each wait for the
 * other until the deadline.  Rank 0 writes the backend it resolved under the
 * epoch's keys (epochs/<n>/comm/backend); every other rank reads it before
 * building: an "auto" rank follows it when it can, an explicit choice that
 * differs, or a rank that cannot follow, fails at once with what to set.
 * One etcd write and one read per rebuild.  Backend none builds no
 * communicator and takes no part. */
static int agree_backend(ecw_t *w, const snap_t *s, int rank, int64_t deadline,
                         ec_error_t *err)
{
    const ecw__backend_t *own = w->own_be;
    if (own == &ecw__none_backend)
        return 0;
    if (rank == 0) {
        int rc = ecw__comm_put(w, s->number, "backend", own->name, strlen(own->name), err);
        if (rc < 0)
            return ec_error_prefix(err, "publishing the backend of epoch %" PRIu64, s->number);
        set_backend(w, own);
        return 0;
    }
    char got[16] = "";
    /* Rank 0 says its backend first thing in its build: a rank 0 silent
     * for a connect's bound (timeout_ms) is as gone as a peer that never
     * publishes its address, and is given up on and reported the same way,
     * not waited for to the end of the rebuild. */
    int64_t connect_by = ec_mono_ms() + w->o.timeout_ms;
    bool connect_bound = connect_by < deadline;
    if (connect_bound)
        deadline = connect_by;
    for (;;) {
        /* in slices, to give up as soon as the epoch is superseded */
        int64_t left = deadline - ec_mono_ms();
        void *val = NULL;
        size_t len = 0;
        int rc = ecw__comm_get(w, s->number, "backend", &val, &len,
                               left > 200 ? 200 : left > 0 ? (int)left : 0, NULL, err);
        if (rc == 0) {
            snprintf(got, sizeof(got), "%.*s", (int)(len < sizeof(got) ? len : sizeof(got) - 1),
                     (const char *)val);
            free(val);
            break;
        }
        if (rc == EC_ETIMEDOUT && left <= 200) {
            if (connect_bound)
                return ec_errorf(err, EC_ETIMEDOUT, "rank 0 of epoch %" PRIu64 " did not "
                                 "publish its backend within %d ms (it has not started, or "
                                 "died): wait for the next epoch", s->number, w->o.timeout_ms);
            return ec_errorf(err, EC_ETIMEDOUT, "rank 0 of epoch %" PRIu64 " did not publish "
                             "its backend by the rebuild deadline (it has not started, or died): "
                             "wait for the next epoch", s->number);
        }
        if (rc != EC_ETIMEDOUT)
            return rc;
        if (atomic_load(&w->latest_num) > s->number || atomic_load(&w->finalizing))
            return ec_errorf(err, EC_EABORTED, "epoch %" PRIu64 " was superseded while waiting "
                             "for rank 0's backend", s->number);
    }
    const ecw__backend_t *theirs = backend_named(got);
    if (theirs == own) {
        set_backend(w, own);
        return 0;
    }
    if (w->o.backend == ECW_BACKEND_AUTO && theirs) {
        if (!strcmp(got, "nccl") && !w->nccl_ok)
            return ec_errorf(err, EC_ENOTFOUND, "rank 0 of epoch %" PRIu64 " runs nccl, but "
                             "this process cannot: %s; set ECOORD_WORKER_BACKEND=gloo for the "
                             "whole job, or make NCCL and a GPU usable on node %s", s->number,
                             w->no_nccl_why, w->o.node_id);
        ecw__log(w, ECW_LOG_INFO, "backend auto: rank 0 of epoch %" PRIu64 " runs %s; this "
                 "process follows it", s->number, theirs->name);
        set_backend(w, theirs);
        return 0;
    }
    return ec_errorf(err, EC_EINVAL, "rank 0 of epoch %" PRIu64 " runs backend '%s', this "
                     "process %s (ECOORD_WORKER_BACKEND=%s here, %s): every member must run the "
                     "same one; set ECOORD_WORKER_BACKEND to one value for the whole job",
                     s->number, got, own->name, ecw_backend_name(w->o.backend),
                     theirs ? "which differs" : "and this library has no such backend");
}

/* Build one epoch's communicator.  0, or an error (the comm is dropped). */
static int build(ecw_t *w, const snap_t *s, int rank, int64_t deadline, ec_error_t *err)
{
    ecw__build_t b = {
        .epoch = s->number,
        .rank = rank,
        .world = s->world,
        .host = w->o.host ? w->o.host : s->host,
        .device = w->o.device >= 0 ? w->o.device
                                   : (w->ndevices > 0 ? w->o.local_rank % w->ndevices : 0),
        .timeout_ms = w->o.timeout_ms,
        .deadline_ms = deadline,
    };
    void *c = NULL;
    w->probe_at_ms = ec_mono_ms() + w->o.suspect_after_ms;
    int rc = agree_backend(w, s, rank, deadline, err);
    char **ids = NULL;
    int nids = 0, nalloc = 0;
    if (rc == 0) {
        if (w->prev_comm && w->prev_be != w->be)
            drop_prev(w); /* rank 0 changed the backend */
        b.prev = w->prev_comm; /* the backend's from here */
        w->prev_comm = NULL;
        /* the members, for a backend that derives the new communicator
         * from the previous one; none known if the epoch moved on */
        pthread_mutex_lock(&w->mu);
        const ec_epoch_t *ep = w->latest;
        /* a view of a split epoch holds some members only: none known
         * (NCCL then builds anew instead of shrinking) */
        if (ep && ep->number == s->number && ep->present == ep->nmembers &&
            (ids = calloc((size_t)ep->nmembers, sizeof(*ids)))) {
            nids = nalloc = ep->nmembers;
            for (int i = 0; i < nalloc; i++)
                if (!(ids[i] = strdup(ep->members[i].node_id)))
                    nids = -1;
        }
        pthread_mutex_unlock(&w->mu);
        if (nids > 0) {
            b.nmembers = nids;
            b.nproc = s->nproc;
            b.node_ids = (const char *const *)ids;
        }
        rc = w->be->create(w, &b, &c, err);
        for (int i = 0; i < nalloc; i++)
            free(ids[i]);
        free(ids);
    }
    if (rc < 0) {
        w->probe_at_ms = 0;
        return rc;
    }
    pthread_mutex_lock(&w->comm_mu);
    w->comm = c;
    atomic_store(&w->target_num, s->number);
    pthread_mutex_unlock(&w->comm_mu);
    /* The watcher aborts comms older than the newest epoch, and saw the
     * target only from here on: check what it may have missed. */
    if (atomic_load(&w->latest_num) > s->number)
        w->be->abort(c);
    rc = w->be->connect(c, err);
    w->probe_at_ms = 0;
    if (rc == 0 && atomic_load(&w->latest_num) > s->number)
        rc = ec_errorf(err, EC_EABORTED, "epoch %" PRIu64 " was superseded as it connected",
                       s->number);
    if (rc < 0)
        drop_comm(w, false);
    return rc;
}

static void report_suspects(ecw_t *w, uint64_t cur);

/* No epoch this process could join came by its deadline: say which wait
 * ran out, with the last epoch tried (why). */
static int no_epoch(ecw_t *w, bool admission, const char *why, ec_error_t *err)
{
    if (admission)
        return ec_errorf(err, EC_ETIMEDOUT, "node %s was not admitted to an epoch "
                         "within %d ms (ECOORD_WORKER_ADMIT_TIMEOUT_MS; the last one: "
                         "%s)", w->o.node_id, w->o.admit_timeout_ms, why);
    return ec_errorf(err, EC_ETIMEDOUT, "no epoch this process could join within %d "
                     "ms (the last one tried: %s); is the agent running, and with "
                     "--rebuild=inprocess?", w->o.rebuild_timeout_ms, why);
}

/* Whether epoch s leaves this process out: its node is not a member (a
 * standby, or not admitted yet), or it was planned before this process was
 * started (its node stepping out for it, or taken over by a new agent).
 * Says why in why[len]; *waiting: the wait is the admission's (no deadline
 * but admit_timeout_ms). */
static bool left_out(ecw_t *w, const snap_t *s, bool ahead, bool *waiting, char *why, size_t len)
{
    if (s->m_id < 0) {
        snprintf(why, len, "node %s is not in epoch %" PRIu64 " (a standby, or not admitted "
                 "yet)", w->o.node_id, s->number);
        ecw__log(w, ECW_LOG_INFO, "%s: waiting for an epoch that includes it", why);
        *waiting = ahead;
        return true;
    }
    if (w->o.incarnation && s->incarnation < w->o.incarnation) {
        snprintf(why, len, "epoch %" PRIu64 " admitted node %s's incarnation %" PRIu64
                 ", this process belongs to %" PRIu64, s->number, w->o.node_id, s->incarnation,
                 w->o.incarnation);
        ecw__log(w, ECW_LOG_INFO, "%s: waiting for an epoch that admits it", why);
        *waiting = true;
        return true;
    }
    return false;
}

/* Epoch s's communicator is built: this process is rank `rank` of it. */
static void adopt(ecw_t *w, const snap_t *s, int rank, int64_t t0, int64_t tb)
{
    atomic_store(&w->rank, rank);
    atomic_store(&w->world, s->world);
    atomic_store(&w->nnodes, s->nmembers);
    atomic_store(&w->m_id, s->m_id);
    atomic_store(&w->nproc, s->nproc);
    atomic_store(&w->built_num, s->number);
    atomic_store(&w->broken, 0);
    atomic_store(&w->cur_num, s->number);
    ecw__timing_mark(w, s->number, ECW__T_READY);
    int64_t now = ec_mono_ms();
    ecw__log(w, ECW_LOG_INFO, "+comm epoch %" PRIu64 " rank=%d world=%d backend=%s "
             "ready in %" PRId64 " ms (connect %" PRId64 " ms)", s->number, rank,
             s->world, w->be->name, now - t0, now - tb);
}

static int rebuild(ecw_t *w, ec_error_t *err)
{
    if (atomic_load(&w->restart))
        return restart_err(w, "ecw_rebuild", err);
    if (w->req)
        return ec_errorf(err, EC_EINVAL, "ecw_rebuild: an ecw_iallreduce is in flight on this "
                         "handle: ecw_wait for it first (an epoch change ends it at once)");
    int64_t t0 = ec_mono_ms();
    int64_t deadline = t0 + w->o.rebuild_timeout_ms;
    uint64_t cur = atomic_load(&w->cur_num);
    if (cur && !atomic_load(&w->broken) && atomic_load(&w->latest_num) == cur)
        return 0; /* nothing changed: the communicator is the newest epoch's */
    uint64_t floor = w->o.start_epoch > 0 ? w->o.start_epoch : 1;
    if (cur + 1 > floor)
        floor = cur + 1;
    if (w->failed_num + 1 > floor)
        floor = w->failed_num + 1;
    /* Nothing can be built, nor claimed, while etcd is away; and a
     * communicator built then could train past our lease. */
    int frc = ecw__fence_wait(w, "ecw_rebuild", deadline, err);
    if (frc < 0)
        return frc;
    drop_comm(w, true);
    atomic_store(&w->broken, 0);
    /* The agent may have a new lease since the last epoch (etcd was away
     * longer than its TTL): the keys of this one go on that.  Best effort:
     * a put on a lease that is gone follows it too (store.c). */
    ecw__lease_follow(w, 0, NULL);
    char why[EC_ERRMSG_MAX] = "no epoch was published";
    int rc0;
    /* A process its agent started ahead of its node's admission (boots
     * gated: the agent set the incarnation it belongs to) waits to be
     * admitted (this node in no epoch yet, a standby, or out while one of
     * its processes boots) outside the rebuild: that wait has no deadline
     * but admit_timeout_ms, and the rebuild's starts once an epoch includes
     * the node.  Any other process waits within the rebuild's deadline. */
    bool ahead = w->o.incarnation != 0;
    bool waiting = ahead && atomic_load(&w->latest_num) == 0; /* the job forms */
    int64_t admit_deadline = w->o.admit_timeout_ms > 0 ? t0 + w->o.admit_timeout_ms : INT64_MAX;
    for (;;) {
        if (atomic_load(&w->finalizing))
            return ec_errorf(err, EC_EABORTED, "ecw_rebuild: the handle is being finalized");
        snap_t s;
        int64_t tw = ec_mono_ms();
        int64_t dl = waiting ? (admit_deadline - tw > 500 ? tw + 500 : admit_deadline)
                             : deadline;
        if (!newest(w, floor, dl, &s)) {
            if (waiting && ec_mono_ms() < admit_deadline)
                continue; /* still not admitted: wait on (finalize ends it) */
            return no_epoch(w, waiting, why, err);
        }
        floor = s.number + 1; /* whatever happens, never this epoch again */
        if (left_out(w, &s, ahead, &waiting, why, sizeof(why)))
            continue;
        if (waiting) {
            waiting = false;
            deadline = ec_mono_ms() + w->o.rebuild_timeout_ms;
        }
        if (w->o.local_rank >= s.nproc)
            return ec_errorf(err, EC_EINVAL, "local rank %d, but epoch %" PRIu64 " has %d "
                             "processes per node", w->o.local_rank, s.number, s.nproc);
        int rank = (int)ec_rank(s.m_id, s.nproc, w->o.local_rank);
        if ((rc0 = ecw__fence_wait(w, "ecw_rebuild", deadline, err)) < 0)
            return rc0;
        bool takeover = w->o.restart_mode && s.number == w->o.start_epoch;
        int rc = ecw__claim(w, s.number, rank, takeover, err);
        if ((rc == EC_EUNAVAILABLE || rc == EC_ETIMEDOUT) && ec_mono_ms() < deadline) {
            /* etcd briefly away: try this epoch again (the wait above
             * returns at once while it is still the newest) */
            snprintf(why, sizeof(why), "claiming rank %d of epoch %" PRIu64 ": %s", rank,
                     s.number, err ? err->msg : ec_strerror(rc));
            floor = s.number;
            struct timespec pause = {0, 100 * 1000000L};
            nanosleep(&pause, NULL);
            continue;
        }
        if (rc < 0)
            return rc;
        if (rc == 0) {
            snprintf(why, sizeof(why), "rank %d of epoch %" PRIu64 " belonged to a process "
                     "this one replaces", rank, s.number);
            ecw__log(w, ECW_LOG_INFO, "%s: waiting for the restart epoch", why);
            continue;
        }
        ecw__log(w, ECW_LOG_DEBUG, "claimed rank %d of epoch %" PRIu64 ": connecting", rank,
                 s.number);
        pthread_mutex_lock(&w->mu);
        w->timing = (ecw__timing_t){.epoch = s.number, .rank = rank, .seen_us = s.seen_us,
                                    .aborted_us = s.abort_us};
        pthread_mutex_unlock(&w->mu);
        int64_t tb = ec_mono_ms();
        rc = build(w, &s, rank, deadline, err);
        if (rc == 0) {
            adopt(w, &s, rank, t0, tb);
            return 0;
        }
        if (atomic_load(&w->latest_num) > s.number) {
            ecw__log(w, ECW_LOG_INFO, "building epoch %" PRIu64 " stopped: epoch %" PRIu64
                     " published meanwhile", s.number, atomic_load(&w->latest_num));
            snprintf(why, sizeof(why), "epoch %" PRIu64 " superseded", s.number);
            continue;
        }
        if (rc == EC_EINVAL || rc == EC_ENOMEM || rc == EC_ENOTFOUND || rc == EC_ERESTART)
            return rc; /* not something a new epoch fixes */
        /* A peer that never joined or broke off the build: if its agent is
         * silent too, say so now, exactly as after a failed collective,
         * rather than leave it to its lease's expiry. */
        if (rc != EC_EABORTED && !atomic_load(&w->finalizing))
            report_suspects(w, s.number);
        w->failed_num = s.number;
        snprintf(why, sizeof(why), "building epoch %" PRIu64 " failed: %s", s.number,
                 err ? err->msg : ec_strerror(rc));
        ecw__log(w, ECW_LOG_WARN, "%s; waiting for the next epoch", why);
    }
}

int ecw_rebuild(ecw_t *w, ecw_error_t *uerr)
{
    ec_error_t err = {0};
    if (!w)
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EINVAL, "ecw_rebuild: NULL handle"));
    return ecw__out(uerr, &err, rebuild(w, &err));
}

/* ---- collectives ------------------------------------------------------------------------ */

static int begin(ecw_t *w, const char *what, ec_error_t *err)
{
    if (!w)
        return ec_errorf(err, EC_EINVAL, "%s: NULL handle", what);
    if (atomic_load(&w->finalizing))
        return ec_errorf(err, EC_EABORTED, "%s: the handle is being finalized", what);
    if (atomic_load(&w->restart))
        return restart_err(w, what, err);
    if (w->req)
        return ec_errorf(err, EC_EINVAL, "%s: an ecw_iallreduce is in flight on this handle: "
                         "ecw_wait for it first", what);
    if (w->be == &ecw__none_backend)
        return ec_errorf(err, EC_EINVAL, "%s: backend none builds no communicator "
                         "(ECOORD_WORKER_BACKEND=none): run collectives on the program's own "
                         "group, or use backend gloo or nccl", what);
    uint64_t cur = atomic_load(&w->cur_num), latest = atomic_load(&w->latest_num);
    if (!cur || !w->comm)
        return ec_errorf(err, EC_EINVAL, "%s: no communicator (the last ecw_rebuild failed): "
                         "call ecw_rebuild", what);
    if (latest > cur)
        return ec_errorf(err, EC_EEPOCHCHANGED, "%s: epoch %" PRIu64 " was published; this "
                         "communicator is epoch %" PRIu64 "'s: call ecw_rebuild, then "
                         "ecw_sync_state", what, latest, cur);
    if (atomic_load(&w->broken))
        return ec_errorf(err, EC_EIO, "%s: the communicator of epoch %" PRIu64 " failed "
                         "earlier and no new epoch came: call ecw_rebuild", what, cur);
    /* Counted first, checked next; the fence sets its flag first, then
     * looks at the count: it aborts this collective or this check refuses
     * it.  end() uncounts. */
    atomic_fetch_add(&w->in_coll, 1);
    ecw__progress_coll_enter(); /* "waiting on peers", for the agent's hang detection */
    int rc = ecw__fence_check(w, what, err);
    if (rc < 0) {
        atomic_fetch_sub(&w->in_coll, 1);
        ecw__progress_coll_exit(0);
    }
    return rc;
}

typedef struct {
    const ec_keys_t *keys;
    const ec_kv_list_t *recs;
} port_ctx_t;

static uint16_t member_port(const char *id, void *arg)
{
    port_ctx_t *x = arg;
    return ec_probe_port_in(x->keys, x->recs, id);
}

/* A collective failed and no newer epoch is out yet: find which members'
 * agents are silent (coord/core/suspects.c) and report them under
 * epochs/<cur>/suspect/<node>/rank<local rank>, on the node's lease.  The leader probes them
 * itself and evicts the silent ones at once, instead of waiting for their
 * leases to expire.  Best effort: any failure here only means the lease
 * expiry will find the dead node instead. */
static void report_suspects(ecw_t *w, uint64_t cur)
{
    ec_epoch_t *ep = NULL;
    pthread_mutex_lock(&w->mu);
    if (w->latest && w->latest->number == cur)
        ep = ec_epoch_dup(w->latest);
    pthread_mutex_unlock(&w->mu);
    if (!ep)
        return;
    char prefix[EC_KEY_MAX];
    ec_kv_list_t l = {0};
    char **silent = NULL;
    int nd = 0;
    /* the probe ports are in the epoch (an older leader's: in the records,
     * then read: every process of every node reading every record is what
     * a failure that takes them all cost) */
    bool known = ec_probe_ports_known(ep, w->o.node_id, 0); /* its view's (follow.c) */
    if (!known && (ec_key_nodes_prefix(&w->keys, prefix, sizeof(prefix)) < 0 ||
                   ec_etcd_get_prefix(w->etcd, prefix, 0, &l, NULL) < 0))
        goto out;
    port_ctx_t x = {&w->keys, &l};
    /* no verifier: the worker library links no crypto; an answer naming the
     * member counts (the agents' own probes check the proof) */
    nd = ec_probe_members(ep, w->o.node_id, 0, known ? NULL : member_port, &x, NULL, 200, &silent);
    if (nd > 0) {
        char val[4096] = "";
        size_t used = 0;
        for (int i = 0; i < nd; i++) {
            size_t li = strlen(silent[i]);
            if (used + li + 2 >= sizeof(val))
                break;
            if (used)
                val[used++] = ',';
            memcpy(val + used, silent[i], li + 1);
            used += li;
        }
        char key[EC_KEY_MAX];
        /* a key of this process's own: the agent's report (its ring, a
         * dead local process) and the other processes' stay as they are */
        char src[32];
        snprintf(src, sizeof(src), "rank%d", w->o.local_rank >= 0 ? w->o.local_rank : 0);
        if (ec_key_epoch_suspect_src(&w->keys, cur, w->o.node_id, src, key, sizeof(key)) > 0 &&
            ecw__put(w, key, val, strlen(val), NULL) == 0)
            ecw__log(w, ECW_LOG_WARN, "epoch %" PRIu64 ": no answer from the agents of %s; "
                     "reported them so the leader can evict them", cur, val);
    }
out:
    ec_ids_free(silent, nd > 0 ? nd : 0);
    ec_kv_list_free(&l);
    ec_epoch_free(ep);
}

int ecw_report_failure(ecw_t *w, ecw_error_t *uerr)
{
    ec_error_t err = {0};
    if (!w)
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EINVAL, "ecw_report_failure: NULL handle"));
    if (atomic_load(&w->finalizing))
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EABORTED, "ecw_report_failure: the "
                                              "handle is being finalized"));
    uint64_t cur = atomic_load(&w->cur_num);
    if (!cur)
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EINVAL, "ecw_report_failure: no epoch "
                                              "was built yet (ecw_init or ecw_rebuild first)"));
    atomic_store(&w->broken, 1);
    if (atomic_load(&w->latest_num) <= cur) {
        ecw__log(w, ECW_LOG_WARN, "epoch %" PRIu64 ": the program's collective failed; probing "
                 "the members' agents", cur);
        report_suspects(w, cur);
    }
    return 0;
}

void ecw__build_tick(ecw_t *w, uint64_t epoch)
{
    if (!w->probe_at_ms || ec_mono_ms() < w->probe_at_ms)
        return;
    if (atomic_load(&w->latest_num) == epoch && !atomic_load(&w->finalizing))
        report_suspects(w, epoch);
    w->probe_at_ms = ec_mono_ms() + ECW__PROBE_EVERY_MS;
}

static int end(ecw_t *w, const char *what, int rc, ec_error_t *err)
{
    atomic_fetch_sub(&w->in_coll, 1);
    ecw__progress_coll_exit(rc == 0);
    uint64_t cur = atomic_load(&w->cur_num);
    if (rc == EC_ERESTART) {
        /* No epoch fixes a lost GPU: say so now, not after epoch_wait_ms. */
        atomic_store(&w->broken, 1);
        return rc;
    }
    if (rc < 0 && rc != EC_EINVAL && atomic_load(&w->fenced) &&
        atomic_load(&w->latest_num) <= cur) {
        /* The fence aborted it (or a peer's fence aborted theirs): this
         * communicator is done, but no peer is to blame. */
        atomic_store(&w->broken, 1);
        char was[EC_ERRMSG_MAX];
        snprintf(was, sizeof(was), "%s", err ? err->msg : "");
        ecw__fence_check(w, what, err);
        if (err) {
            size_t n = strlen(err->msg);
            snprintf(err->msg + n, sizeof(err->msg) - n, " [the %s in epoch %" PRIu64 " was "
                     "aborted: %.200s]", what, cur, was);
        }
        return ECW_EUNCONFIRMED;
    }
    if (rc == 0) {
        if (w->first_marked != cur) {
            w->first_marked = cur;
            ecw__timing_mark(w, cur, ECW__T_FIRST);
        }
        return 0;
    }
    if (rc == EC_EINVAL)
        return rc; /* bad arguments: nothing was sent, the communicator is fine */
    atomic_store(&w->broken, 1);
    if (atomic_load(&w->finalizing))
        return rc;
    /* A peer died or stalled, or the watcher aborted us: if the coordinator
     * publishes the epoch that replaces it, the caller has one thing to do. */
    if (atomic_load(&w->latest_num) <= cur && rc != EC_EABORTED)
        report_suspects(w, cur);
    if (atomic_load(&w->latest_num) > cur ||
        ecw__wait_newer(w, cur, ec_mono_ms() + w->o.epoch_wait_ms)) {
        uint64_t latest = atomic_load(&w->latest_num);
        ecw__log(w, ECW_LOG_INFO, "%s in epoch %" PRIu64 " ended by epoch %" PRIu64 " (%s)",
                 what, cur, latest, ec_err_name(rc));
        char was[EC_ERRMSG_MAX];
        snprintf(was, sizeof(was), "%s", err ? err->msg : "");
        return ec_errorf(err, EC_EEPOCHCHANGED, "%s in epoch %" PRIu64 ": epoch %" PRIu64
                         " was published: call ecw_rebuild, then ecw_sync_state (%.300s)",
                         what, cur, latest, was);
    }
    ec_error_prefix(err, "%s in epoch %" PRIu64 ", and no new epoch within %d ms", what, cur,
                    w->o.epoch_wait_ms);
    return rc;
}

static int allreduce_in(ecw_t *w, void *buf, size_t count, ecw_dtype_t dt, ecw_op_t op,
                        bool host, ec_error_t *err)
{
    int rc = begin(w, "allreduce", err);
    if (rc < 0)
        return rc;
    return end(w, "allreduce", w->be->allreduce(w->comm, buf, count, dt, op, host, err), err);
}

int ecw_allreduce(ecw_t *w, void *buf, size_t count, ecw_dtype_t dtype, ecw_op_t op,
                  ecw_error_t *uerr)
{
    ec_error_t err = {0};
    return ecw__out(uerr, &err, allreduce_in(w, buf, count, dtype, op, false, &err));
}

int ecw_broadcast(ecw_t *w, void *buf, size_t count, ecw_dtype_t dtype, int root,
                  ecw_error_t *uerr)
{
    ec_error_t err = {0};
    int rc = begin(w, "broadcast", &err);
    if (rc == 0)
        rc = end(w, "broadcast", w->be->broadcast(w->comm, buf, count, dtype, root, &err), &err);
    return ecw__out(uerr, &err, rc);
}

int ecw_allgather(ecw_t *w, const void *sendbuf, void *recvbuf, size_t count, ecw_dtype_t dtype,
                  ecw_error_t *uerr)
{
    ec_error_t err = {0};
    int rc = begin(w, "allgather", &err);
    if (rc == 0)
        rc = end(w, "allgather",
                 w->be->allgather(w->comm, sendbuf, recvbuf, count, dtype, &err), &err);
    return ecw__out(uerr, &err, rc);
}

int ecw_barrier(ecw_t *w, ecw_error_t *uerr)
{
    ec_error_t err = {0};
    int rc = begin(w, "barrier", &err);
    if (rc == 0)
        rc = end(w, "barrier", w->be->barrier(w->comm, &err), &err);
    return ecw__out(uerr, &err, rc);
}

/* ---- the asynchronous allreduce ------------------------------------------------------------ */

struct ecw_request {
    ecw_t *w;
    void *buf;
    size_t count;
    ecw_dtype_t dt;
    ecw_op_t op;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* done */
    bool done;
    int rc;
    ec_error_t err;
};

/* The request's thread: the blocking backend call.  The training thread
 * leaves w->comm alone meanwhile (every other call is refused while
 * w->req is set), and the watcher and the fence abort it as they abort a
 * blocking collective. */
static void *request_main(void *p)
{
    ecw_request_t *r = p;
    ec_error_t e = {0};
    int rc = r->w->be->allreduce(r->w->comm, r->buf, r->count, r->dt, r->op, false, &e);
    pthread_mutex_lock(&r->mu);
    r->rc = rc;
    r->err = e;
    r->done = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void request_free(ecw_request_t *r)
{
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

int ecw_iallreduce(ecw_t *w, void *buf, size_t count, ecw_dtype_t dtype, ecw_op_t op,
                   ecw_request_t **req, ecw_error_t *uerr)
{
    ec_error_t err = {0};
    if (!req)
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EINVAL, "ecw_iallreduce: NULL req"));
    *req = NULL;
    int rc = begin(w, "iallreduce", &err); /* refuses while a request is in flight */
    if (rc < 0)
        return ecw__out(uerr, &err, rc);
    ecw_request_t *r = calloc(1, sizeof(*r));
    if (!r) {
        atomic_fetch_sub(&w->in_coll, 1);
        ecw__progress_coll_exit(0);
        return ecw__out(uerr, &err, ec_errorf(&err, EC_ENOMEM, "out of memory"));
    }
    *r = (ecw_request_t){.w = w, .buf = buf, .count = count, .dt = dtype, .op = op};
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    int e = pthread_create(&r->th, NULL, request_main, r);
    if (e) {
        request_free(r);
        atomic_fetch_sub(&w->in_coll, 1);
        ecw__progress_coll_exit(0);
        return ecw__out(uerr, &err, ec_errorf(&err, EC_ESYS, "ecw_iallreduce: cannot start its "
                                              "thread: %s", strerror(e)));
    }
    w->req = r;
    *req = r;
    return 0;
}

int ecw_wait(ecw_request_t *r, int timeout_ms, ecw_error_t *uerr)
{
    ec_error_t err = {0};
    if (!r)
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EINVAL, "ecw_wait: NULL request"));
    int64_t deadline = ec_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    pthread_mutex_lock(&r->mu);
    while (!r->done && ec_mono_ms() < deadline)
        ecw__cond_wait_until(&r->cv, &r->mu, deadline);
    bool done = r->done;
    pthread_mutex_unlock(&r->mu);
    if (!done)
        return ECW_WAIT_PENDING;
    pthread_join(r->th, NULL);
    ecw_t *w = r->w;
    err = r->err;
    w->req = NULL; /* the handle takes calls again */
    int rc = end(w, "allreduce", r->rc, &err);
    request_free(r);
    return ecw__out(uerr, &err, rc);
}

/* Finalize with a request in flight: end it (the abort releases it at once
 * for Gloo; NCCL's thread sees the flag within a poll and aborts, within its
 * bounded teardown) and free it. */
static void request_drop(ecw_t *w)
{
    ecw_request_t *r = w->req;
    if (!r)
        return;
    pthread_mutex_lock(&w->comm_mu);
    if (w->comm)
        w->be->abort(w->comm);
    pthread_mutex_unlock(&w->comm_mu);
    pthread_join(r->th, NULL);
    atomic_fetch_sub(&w->in_coll, 1);
    ecw__progress_coll_exit(0);
    w->req = NULL;
    request_free(r);
}

int ecw_set_stream(ecw_t *w, void *stream, ecw_error_t *uerr)
{
    ec_error_t err = {0};
    if (!w)
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EINVAL, "ecw_set_stream: NULL handle"));
    w->user_stream = stream;
    return 0;
}

/* ---- state recovery ------------------------------------------------------------------------ */

/* Broadcast len bytes of state from rank src, all or nothing: the other
 * ranks receive into a staging buffer (in the memory the backend's
 * collectives take) and copy it over state only once the broadcast
 * completed here.  An epoch change or a failure mid-way leaves state as it
 * was: never partly overwritten bytes under the old step (issue 13). */
static int broadcast_state(ecw_t *w, void *state, size_t len, int src, ec_error_t *err)
{
    const ecw__backend_t *be = w->be;
    void *stage = NULL;
    bool staged = atomic_load(&w->rank) != src;
    if (staged) {
        int rc = be->stage_alloc ? be->stage_alloc(w->comm, len, &stage, err)
                                 : ((stage = malloc(len)) ? 0 : EC_ENOMEM);
        if (rc < 0)
            return rc == EC_ENOMEM && !be->stage_alloc
                       ? ec_errorf(err, EC_ENOMEM, "ecw_sync_state: no memory to stage %zu "
                                   "bytes of state (it needs twice the state's size while "
                                   "it receives)", len)
                       : rc;
    }
    int rc = begin(w, "state broadcast", err);
    if (rc == 0)
        rc = end(w, "state broadcast",
                 be->broadcast(w->comm, staged ? stage : state, len, ECW_U8, src, err), err);
    if (rc == 0 && staged) {
        if (be->stage_commit)
            rc = be->stage_commit(w->comm, state, stage, len, err);
        else
            memcpy(state, stage, len);
    }
    if (staged) {
        if (be->stage_free)
            be->stage_free(w->comm, stage);
        else
            free(stage);
    }
    return rc;
}

static int sync_state(ecw_t *w, void *state, size_t len, int64_t *step, int *src_rank,
                      ec_error_t *err)
{
    if (!w || !step || (len && !state) || len > (size_t)INT64_MAX)
        return ec_errorf(err, EC_EINVAL, "ecw_sync_state: NULL handle, step or state");
    if (w->be == &ecw__none_backend)
        return ec_errorf(err, EC_EINVAL, "ecw_sync_state: backend none builds no communicator "
                         "to carry state (ECOORD_WORKER_BACKEND=none): sync it over the "
                         "program's own group");
    int64_t mine = *step < 0 ? -1 : *step;
    /* One agreement: greatest step, least step, and the sizes (all as maxima). */
    int64_t a[4] = {mine, -mine, (int64_t)len, -(int64_t)len};
    int rc = allreduce_in(w, a, 4, ECW_I64, ECW_MAX, true, err);
    if (rc < 0)
        return rc;
    int64_t max_step = a[0], min_step = -a[1];
    if (a[2] != -a[3])
        return ec_errorf(err, EC_EINVAL, "ecw_sync_state: members pass states of different "
                         "sizes (%" PRId64 " to %" PRId64 " bytes); this one passed %zu: every "
                         "member must pass the same layout", -a[3], a[2], len);
    int src = -1;
    if (max_step >= 0 && min_step == max_step) {
        src = 0; /* everyone holds that step already: nothing to copy */
    } else if (max_step >= 0) {
        int64_t who = mine == max_step ? atomic_load(&w->rank) : INT64_MAX;
        if ((rc = allreduce_in(w, &who, 1, ECW_I64, ECW_MIN, true, err)) < 0)
            return rc;
        src = (int)who;
        if (len && (rc = broadcast_state(w, state, len, src, err)) < 0)
            return rc;
        ecw__log(w, ECW_LOG_INFO, "+state step %" PRId64 " from rank %d (this rank had %" PRId64
                 ")", max_step, src, mine);
    }
    *step = max_step;
    if (src_rank)
        *src_rank = src;
    ecw__timing_mark(w, atomic_load(&w->cur_num), ECW__T_SYNCED);
    return 0;
}

int ecw_sync_state(ecw_t *w, void *state, size_t len, int64_t *step, int *src_rank,
                   ecw_error_t *uerr)
{
    ec_error_t err = {0};
    return ecw__out(uerr, &err, sync_state(w, state, len, step, src_rank, &err));
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

static void log_forward(ec_log_level_t lvl, const char *msg, void *arg)
{
    ecw_t *w = arg;
    w->o.log_cb((ecw_log_level_t)lvl, msg, w->o.log_arg);
}

/* What this process would run alone; agree_backend makes it the job's. */
static int pick_backend(ecw_t *w, ec_error_t *err)
{
    ecw_backend_t want = w->o.backend;
    if (want == ECW_BACKEND_NONE) {
        w->be = w->own_be = &ecw__none_backend;
        return 0;
    }
#ifdef HAVE_NCCL
    if (want != ECW_BACKEND_GLOO) {
        /* loads libcudart and libnccl: a Gloo job never does */
        ec_error_t why = {0};
        w->ndevices = ecw__nccl_device_count(w, &why);
        w->nccl_ok = w->ndevices > 0;
        if (w->nccl_ok) {
            w->be = w->own_be = &ecw__nccl_backend;
            return 0;
        }
        snprintf(w->no_nccl_why, sizeof(w->no_nccl_why), "%s", why.msg);
        if (want == ECW_BACKEND_NCCL)
            return ec_errorf(err, EC_ENOTFOUND, "backend nccl asked for, but %s", why.msg);
        ecw__log(w, ECW_LOG_INFO, "backend auto: %s; using gloo", why.msg);
    }
#else
    snprintf(w->no_nccl_why, sizeof(w->no_nccl_why), "this library was built without NCCL "
             "(configure found no CUDA/NCCL headers; see --with-cuda)");
    if (want == ECW_BACKEND_NCCL)
        return ec_errorf(err, EC_EINVAL, "backend nccl asked for, but %s", w->no_nccl_why);
    if (want == ECW_BACKEND_AUTO)
        ecw__log(w, ECW_LOG_INFO, "backend auto: %s; using gloo", w->no_nccl_why);
#endif
#ifdef HAVE_GLOO
    w->be = w->own_be = &ecw__gloo_backend;
    return 0;
#else
    return ec_errorf(err, EC_EINVAL, "no backend: this library was built without Gloo "
                     "(apt-get install libgloo-dev and reconfigure) and %s", w->no_nccl_why);
#endif
}

/* The password in o.etcd_password_file (one trailing newline dropped),
 * malloc'd; "" when no file is named.  NULL with err on failure. */
static char *read_password(const ecw__opts_t *o, ec_error_t *err)
{
    if (!*o->etcd_password_file)
        return strdup("");
    FILE *f = fopen(o->etcd_password_file, "re");
    if (!f) {
        ec_errorf(err, EC_EINVAL, "cannot read the etcd password file %s: %s (ecoord launch "
                  "names it in ECOORD_ETCD_PASSWORD_FILE; was it removed?)",
                  o->etcd_password_file, strerror(errno));
        return NULL;
    }
    char *buf = calloc(1, 4097);
    size_t n = buf ? fread(buf, 1, 4096, f) : 0;
    fclose(f);
    if (!buf) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    if (n && buf[n - 1] == '\n')
        buf[--n] = '\0';
    if (n && buf[n - 1] == '\r')
        buf[--n] = '\0';
    return buf;
}

static void make_token(ecw_t *w)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
        r = (uint64_t)ec_wall_us() ^ ((uint64_t)getpid() << 32);
    snprintf(w->token, sizeof(w->token), "%.40s:%d:%016" PRIx64, w->o.node_id, (int)getpid(), r);
}

int ecw_init(const ecw_options_t *opts, ecw_t **outp, ecw_error_t *uerr)
{
    ec_error_t err = {0};
    if (!outp)
        return ecw__out(uerr, &err, ec_errorf(&err, EC_EINVAL, "ecw_init: NULL out pointer"));
    *outp = NULL;
    ecw_t *w = calloc(1, sizeof(*w));
    if (!w)
        return ecw__out(uerr, &err, ec_errorf(&err, EC_ENOMEM, "out of memory"));
    atomic_store(&w->m_id, -1);
    int rc = ecw__opts_resolve(opts, &w->o, &err);
    if (rc < 0) {
        free(w);
        return ecw__out(uerr, &err, rc);
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->comm_mu, NULL);
    ecw__retire_init(w);
    pthread_mutex_init(&w->fence_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->fence_cv, &ca);
    pthread_condattr_destroy(&ca);
    make_token(w);
    atomic_store(&w->lease, w->o.lease);
    if (w->o.log_cb)
        ec_log_set_sink(log_forward, w, (ec_log_level_t)w->o.log_level);
    char desc[1024];
    ecw__opts_describe(&w->o, desc, sizeof(desc));
    ecw__log(w, ECW_LOG_DEBUG, "ecw options: %s", desc);

    if ((rc = ec_keys_init(&w->keys, w->o.etcd_prefix, w->o.job_id, &err)) < 0)
        goto fail;
    if ((rc = pick_backend(w, &err)) < 0)
        goto fail;
    ec_etcd_opts_t eo = EC_ETCD_OPTS_INIT;
    eo.endpoints = w->o.etcd_endpoints;
    eo.ca_file = *w->o.etcd_cacert ? w->o.etcd_cacert : NULL;
    eo.cert_file = *w->o.etcd_cert ? w->o.etcd_cert : NULL;
    eo.key_file = *w->o.etcd_key ? w->o.etcd_key : NULL;
    eo.user = *w->o.etcd_user ? w->o.etcd_user : NULL;
    eo.http_proxy = *w->o.etcd_proxy ? w->o.etcd_proxy : NULL;
    char *password = eo.user ? read_password(&w->o, &err) : NULL;
    if (eo.user && !password) {
        rc = err.code ? err.code : EC_EINVAL;
        goto fail;
    }
    eo.password = password;
    w->etcd = ec_etcd_create(&eo, &err);
    if (w->etcd && (rc = ecw__fence_start(w, &eo, &err)) < 0) {
        ec_etcd_destroy(w->etcd); /* before the password goes: one unwind below */
        w->etcd = NULL;
    } else {
        rc = 0;
    }
    if (password) {
        memset(password, 0, strlen(password));
        free(password);
    }
    if (!w->etcd) {
        rc = rc < 0 ? rc : err.code ? err.code : EC_EUNAVAILABLE;
        goto fail;
    }
    if ((rc = ecw__follow_start(w, &err)) < 0)
        goto fail;
#ifdef HAVE_NCCL
    if (w->be == &ecw__nccl_backend) {
        /* the CUDA context belongs to the boot, not to the first epoch */
        ec_error_t werr = {0};
        int dev = w->o.device >= 0 ? w->o.device
                                   : (w->ndevices > 0 ? w->o.local_rank % w->ndevices : 0);
        if (ecw__nccl_warm(w, dev, &werr) < 0)
            ecw__log(w, ECW_LOG_WARN, "%s", werr.msg);
    }
#endif
    /* Booted: the agent admits this process's node once every local rank
     * says so (coord/core/progress_file.h); the wait for that is below. */
    ecw__progress_ready();
    if ((rc = rebuild(w, &err)) < 0)
        goto fail;
    *outp = w;
    return 0;
fail:
    ecw_finalize(w);
    return ecw__out(uerr, &err, rc);
}

void ecw_finalize(ecw_t *w)
{
    if (!w)
        return;
    int saved = errno;
    atomic_store(&w->finalizing, 1);
    /* Calls from other threads (ecw_wait_epoch, ecw_epoch_get) end with
     * ECW_EABORTED; one inside an etcd request ends with the request. */
    bool drained = ecw__api_drain(w, 10000);
    ecw__fence_stop(w);
    ecw__follow_stop(w); /* no abort from the watcher after this */
    request_drop(w);
    if (w->be)
        drop_comm(w, false);
    drop_prev(w);
    /* the retired communicators' threads log through w: not freed under
     * them (each teardown has its own deadline, backend_nccl.c) */
    if (!ecw__retire_drain(w, 60000)) {
        ecw__log(w, ECW_LOG_ERROR, "ecw_finalize: a retired communicator's teardown did not "
                 "end within 60 s; the handle is left allocated");
        errno = saved;
        return;
    }
    if (!drained) {
        /* Freeing now would pull the handle from under them: leak it. */
        ecw__log(w, ECW_LOG_ERROR, "ecw_finalize: calls from other threads did not return "
                 "within 10 s; the handle is left allocated");
        errno = saved;
        return;
    }
    ec_etcd_destroy(w->etcd);
    if (w->o.log_cb)
        ec_log_set_sink(NULL, NULL, EC_LOG_INFO);
    ec_epoch_free(w->latest);
    ecw__opts_free(&w->o);
    pthread_mutex_destroy(&w->mu);
    pthread_mutex_destroy(&w->comm_mu);
    ecw__retire_fini(w);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->fence_mu);
    pthread_cond_destroy(&w->fence_cv);
    free(w);
    errno = saved;
}
