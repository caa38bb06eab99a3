/* The worker library's insides, shared by its files and by nothing else.
 *
 * Files, in reading order:
 *   options.c        the knob table: options from the agent's environment
 *   ecw.c            the handle: init/finalize, collectives, rebuild, state sync
 *   follow.c         the epoch watch, the abort on a new epoch, the service
 *                    thread that writes per-epoch timings
 *   fence.c          collectives only while the node's lease is confirmed
 *   store.c          per-epoch keys in etcd: claims, the NCCL id, Gloo's
 *                    rendezvous store; the node's lease, followed
 *   backend_gloo.c   Gloo through the C shim (gloo_shim.h)
 *   backend_nccl.c   NCCL, non-blocking init polled against deadline and abort
 *   backend_none.c   no communicator: epochs and claims only (ECW_BACKEND_NONE)
 *   epoch_kv.c       a program's per-epoch key/value (ecw_epoch_put/get)
 *
 * Internal names carry a double underscore (ecw__) and are not exported.
 */
#ifndef ECW_IMPL_H
#define ECW_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ecw.h"
#include "clock.h"
#include "epoch_check.h"
#include "error.h"
#include "etcd.h"
#include "keys.h"
#include "records.h"

/* ---- backends -------------------------------------------------------------------- */

/* What a backend needs to build one epoch's communicator. */
typedef struct ecw__build {
    uint64_t epoch;
    int rank, world;
    const char *host;      /* Gloo bind address */
    int device;            /* NCCL device */
    int timeout_ms;        /* each collective */
    int64_t deadline_ms;   /* monotonic: the connect must end by then */
    /* The epoch's members, M_id order (NULL: not known), for a backend that
     * derives its communicator from the previous one (NCCL's shrink). */
    int nmembers, nproc;
    const char *const *node_ids;
    /* The previous epoch's communicator of this backend, handed over
     * (reusable() said so; NULL: none): the backend owns it from create on,
     * whether create succeeds or not, and destroys it. */
    void *prev;
} ecw__build_t;

typedef struct ecw__backend {
    const char *name;
    /* Allocate, no I/O. */
    int (*create)(ecw_t *w, const ecw__build_t *b, void **comm, ec_error_t *err);
    /* Rendezvous and connect; returns EC_EABORTED promptly after abort(). */
    int (*connect)(void *comm, ec_error_t *err);
    /* From any thread at any time between create and destroy; never blocks on the
     * network.  Gloo: releases whatever is blocked at once.  NCCL: the thread that
     * polls (connect or collective) sees it within a poll interval and calls
     * ncclCommAbort itself, since that frees the communicator. */
    void (*abort)(void *comm);
    void (*destroy)(void *comm);
    /* Whether rebuild should hand comm, aborted by a newer epoch, to the
     * next build (ecw__build_t.prev) instead of destroying it.  NULL: never. */
    bool (*reusable)(void *comm);
    /* host: buf is host memory even for a device backend (the library's own small
     * agreements in ecw_sync_state). */
    int (*allreduce)(void *comm, void *buf, size_t count, ecw_dtype_t dt, ecw_op_t op, bool host,
                     ec_error_t *err);
    int (*broadcast)(void *comm, void *buf, size_t count, ecw_dtype_t dt, int root,
                     ec_error_t *err);
    int (*allgather)(void *comm, const void *sendbuf, void *recvbuf, size_t count,
                     ecw_dtype_t dt, ec_error_t *err);
    int (*barrier)(void *comm, ec_error_t *err);
    /* Staging for ecw_sync_state: a buffer of len bytes in the memory the
     * collectives take (device memory for NCCL), and the copy of it into the
     * caller's buffer once the broadcast completed.  NULL: host memory
     * (malloc, memcpy, free). */
    int (*stage_alloc)(void *comm, size_t len, void **buf, ec_error_t *err);
    int (*stage_commit)(void *comm, void *dst, const void *src, size_t len, ec_error_t *err);
    void (*stage_free)(void *comm, void *buf);
    /* destroy takes long (NCCL's abort, ~1 s): old communicators are
     * destroyed off the training thread, beside the next (retire.c) */
    bool slow_teardown;
    /* NULL, or true when comm holds nothing of the device any more (NCCL: a
     * communicator given up mid-collective, whose teardown already runs):
     * destroyed on the calling thread, outside retire.c's bound */
    bool (*holds_nothing)(void *comm);
} ecw__backend_t;

extern const ecw__backend_t ecw__none_backend;
#ifdef HAVE_GLOO
extern const ecw__backend_t ecw__gloo_backend;
#endif
#ifdef HAVE_NCCL
extern const ecw__backend_t ecw__nccl_backend;
/* Load libcudart and libnccl (cuda_dl.c; logged once, saying which files)
 * and count the visible CUDA devices: 0 when none or when a library cannot
 * be loaded (why in err, naming the library). */
int ecw__nccl_device_count(ecw_t *w, ec_error_t *err);
/* Make device's CUDA context now (cudaSetDevice + cudaFree(NULL) on the
 * calling thread), so that the first build does not: part of a boot,
 * before the process says it is ready.  0 or an error (logged; the build
 * meets it again). */
int ecw__nccl_warm(ecw_t *w, int device, ec_error_t *err);
#endif

/* ---- the handle ------------------------------------------------------------------------ */

/* An epoch waiting for the leader key's event of its revision (follow.c). */
typedef struct ecw__pending {
    ec_epoch_t *ep;
    int64_t rev, since_ms;
} ecw__pending_t;
#define ECW__PEND_MAX 8

/* Resolved options: strings owned. */
typedef struct ecw__opts {
    ecw_backend_t backend;
    char *etcd_endpoints, *etcd_prefix, *job_id, *node_id, *host;
    char *etcd_cacert, *etcd_cert, *etcd_key, *etcd_user, *etcd_password_file; /* "": none */
    char *etcd_proxy;           /* "": straight to etcd (never the environment's proxies) */
    char *cuda_libdir;          /* "": the default search (cuda_dl.c) */
    int nccl_rebuild;           /* ecw__rebuild_mode_t (nccl_plan.h) */
    int nccl_roots, nccl_scalable_min;
    int nccl_warm;              /* 1: a one-rank communicator at boot (backend_nccl.c) */
    int local_rank, device;
    uint64_t start_epoch;
    uint64_t incarnation;       /* ECOORD_INCARNATION: join only an epoch that admitted it (0: any) */
    int admit_timeout_ms;       /* waiting for an epoch that includes this node (0: no limit) */
    int64_t lease;
    int timeout_ms, rebuild_timeout_ms, epoch_wait_ms, suspect_after_ms;
    int lease_ttl_ms, lease_margin_ms; /* the fence (fence.c); ttl 0: off */
    bool restart_mode;          /* ECOORD_REBUILD=restart: one process per epoch */
    char *progress_file;        /* the agent's progress file (worker/progress.c); NULL: none */
    ecw_log_cb log_cb;
    void *log_arg;
    ecw_log_level_t log_level;
} ecw__opts_t;

/* One epoch's timing record (records.h), kept until written. */
typedef struct ecw__timing {
    uint64_t epoch;
    int rank;
    int64_t seen_us, aborted_us, ready_us, synced_us, first_us;
    char method[32];           /* how the backend built the communicator ("": not said) */
    int64_t shrink_us, init_us;
    bool dirty;
} ecw__timing_t;

struct ecw {
    ecw__opts_t o;
    /* The backend of the current epoch: the one every member agreed on
     * (ecw.c, agree_backend); changed only by the training thread, under
     * comm_mu, while there is no communicator. */
    const ecw__backend_t *be;
    const ecw__backend_t *own_be; /* what this process resolved alone */
    bool nccl_ok;                 /* NCCL usable here (AUTO may follow rank 0 to it) */
    char no_nccl_why[EC_ERRMSG_MAX]; /* why not, when not */
    void *user_stream;            /* ecw_set_stream: training thread only */
    struct ecw_request *req;      /* the ecw_iallreduce in flight: training thread only */
    /* ecw__restart: this process's GPU state is lost or unknown; every
     * call returns EC_ERESTART with restart_why (written before the flag). */
    _Atomic int restart;
    char restart_why[EC_ERRMSG_MAX];
    ec_etcd_t *etcd;
    ec_keys_t keys;
    char token[96]; /* this process, in claims: "<host>:<pid>:<random>" */

    /* Guarded by mu: the newest epoch seen, when it was seen, timings,
     * the service thread's work; cv signals a new epoch or work. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ec_epoch_t *latest;
    int64_t latest_seen_us;
    int64_t latest_abort_us;   /* when the watcher aborted the older communicator */
    int64_t latest_rev;        /* etcd revision the latest was read at */
    ecw__timing_t timing;      /* of the epoch being built or current */
    bool watch_restart;        /* the watch stopped (compaction): relist */
    bool stopping;
    int api_calls;             /* ecw_wait_epoch/ecw_epoch_get/put in progress: finalize
                                  waits for them to leave (cv) before it frees */

    _Atomic uint64_t latest_num; /* latest->number, readable without mu */
    _Atomic uint64_t cur_num;    /* epoch of the live communicator, 0 for none */
    _Atomic uint64_t target_num; /* epoch being built or live, 0 for none */
    _Atomic int broken;          /* the live communicator failed */
    _Atomic int64_t lease;       /* the node's lease now (store.c follows the agent's) */
    _Atomic int finalizing;

    /* comm_mu orders the watcher's abort against the training thread's
     * create/destroy of comm; collectives run without it. */
    pthread_mutex_t comm_mu;
    void *comm;
    /* The last epoch's communicator, kept for the next build (be->reusable)
     * and its backend: training thread only. */
    void *prev_comm;
    const ecw__backend_t *prev_be;
    /* Old communicators being destroyed off the training thread (retire.c):
     * how many, under retire_mu; retire_cv signals one finished. */
    pthread_mutex_t retire_mu;
    pthread_cond_t retire_cv;
    int retiring;
    uint64_t failed_num;       /* last epoch whose communicator failed */
    int64_t probe_at_ms;       /* training thread: while a build waits for a peer, when to
                                  next look for silent agents (monotonic; 0: no build) */

    /* The current epoch as the training thread built it; atomics so that the
     * accessors may be called from any thread. */
    _Atomic int rank, world, nnodes;
    /* The last epoch built successfully, this node's index in it, its
     * processes per node: kept while a later rebuild runs (drop_comm clears
     * cur_num), for ecw_epoch_put/get and the accessors. */
    _Atomic uint64_t built_num;
    _Atomic int m_id, nproc;
    uint64_t first_marked;     /* epoch whose first collective was recorded */
    int ndevices;              /* NCCL: visible devices */

    ec_watch_t *watch;         /* epochd and the leader key (who wrote each epoch), one stream */
    /* highest etcd revision the watches reported: a watch re-created on
     * an etcd whose revision is lower lost its data (relist) */
    _Atomic int64_t seen_rev;
    /* Guarded by mu: which epochs are applied (epoch_check.h) without a
     * read.  The leaderships the leader-key watch reported, complete up to
     * leader_through; and the epochs that came before the leader key's
     * event of their revision (oldest first): that event (the leader's
     * epoch transaction puts the key again) resolves them, else a read
     * after ECW__VERIFY_GRACE_MS. */
    ec_leader_log_t llog;
    int64_t leader_through;
    ecw__pending_t pend[ECW__PEND_MAX];
    int npend;
    pthread_t svc;
    bool svc_started;

    /* The fence (fence.c).  lease_until_ms: the earliest the node's lease
     * can expire (monotonic, from etcd's answers); fenced while now is
     * within the margin of it.  in_coll: a collective is running. */
    bool fence_on;
    ec_etcd_t *fence_etcd;     /* its own client: short deadlines, never queued behind ours */
    _Atomic int64_t lease_until_ms, confirmed_ms;
    _Atomic int fenced, in_coll;
    /* etcd said the lease asked about is gone (revoked by an eviction, or
     * expired): fenced now, whatever lease_until_ms says, until a lease of
     * the node's is confirmed again */
    _Atomic int lease_gone;
    pthread_mutex_t fence_mu;  /* fence_cv: fenced changed, or stop */
    pthread_cond_t fence_cv;
    bool fence_stop;
    pthread_t fence_poll, fence_dog;
    int fence_threads;
};

/* ---- options.c ---- */
int ecw__opts_resolve(const ecw_options_t *in, ecw__opts_t *out, ec_error_t *err);
void ecw__opts_free(ecw__opts_t *o);
/* One line naming every resolved knob, for the start-up log. */
void ecw__opts_describe(const ecw__opts_t *o, char *buf, size_t len);

/* ---- follow.c ---- */
/* How long an epoch whose leader-key event has not come waits for it
 * before the leader key is read at its revision (the agent's follower
 * waits as long: EC_VERIFY_GRACE_MS, coord/node/node_impl.h). */
#define ECW__VERIFY_GRACE_MS 200
/* Read the epoch key and watch it; start the service thread. */
int ecw__follow_start(ecw_t *w, ec_error_t *err);
void ecw__follow_stop(ecw_t *w);
/* Wait until latest_num > after or the monotonic deadline; true if it is. */
bool ecw__wait_newer(ecw_t *w, uint64_t after, int64_t deadline_ms);
/* Count a call of the any-thread API in (false, counting nothing, once
 * finalize started) and out; finalize waits for the count to reach 0. */
bool ecw__api_enter(ecw_t *w);
void ecw__api_leave(ecw_t *w);
/* Finalize: wake every such call and wait up to timeout_ms for them to
 * leave; false if some did not (the handle must then not be freed). */
bool ecw__api_drain(ecw_t *w, int timeout_ms);
/* Record a stage of the current epoch's timing and have it written. */
enum { ECW__T_READY, ECW__T_SYNCED, ECW__T_FIRST };
void ecw__timing_mark(ecw_t *w, uint64_t epoch, int stage);
/* The backend says how it built epoch's communicator (method: "shrink",
 * "init 4 roots", ...) and how long each phase took (microseconds, 0: not
 * done); written with the epoch's timing record. */
void ecw__timing_build(ecw_t *w, uint64_t epoch, const char *method, int64_t shrink_us,
                       int64_t init_us);

/* ---- fence.c ---- */
/* Set up the fence from the options (fence_mu and fence_cv initialized by
 * ecw_init); eo: w->etcd's options, for the fence's own client.  No fence
 * without a lease or a TTL.  The first confirmation is awaited (up to the
 * TTL), then the threads started.  ecw__fence_stop after a failure too. */
int ecw__fence_start(ecw_t *w, const ec_etcd_opts_t *eo, ec_error_t *err);
void ecw__fence_stop(ecw_t *w);
/* 0, or ECW_EUNCONFIRMED with err saying for how long, for `what`. */
int ecw__fence_check(ecw_t *w, const char *what, ec_error_t *err);
/* Whether the fence is up now (the flag or the bound), and from when it will
 * be by the bound alone (monotonic ms; INT64_MAX without a fence).  No I/O. */
bool ecw__fence_up(const ecw_t *w);
int64_t ecw__fence_due_ms(const ecw_t *w);
/* Wait until membership is confirmed or the deadline (monotonic ms): 0 or
 * ECW_EUNCONFIRMED. */
int ecw__fence_wait(ecw_t *w, const char *what, int64_t deadline_ms, ec_error_t *err);

/* ---- store.c ---- */
/* The lease the library's keys go on now. */
int64_t ecw__lease(ecw_t *w);
/* Re-read the node's record and take the lease it is attached to.  dead:
 * a lease etcd said is gone (0: none); if the record still names it, or
 * there is no record, EC_EUNAVAILABLE (the agent has not registered again
 * yet: retry).  0 when no lease is used at all. */
int ecw__lease_follow(ecw_t *w, int64_t dead, ec_error_t *err);
/* Put key on the node's lease, following the agent's new lease once if
 * etcd says the one used is gone. */
int ecw__put(ecw_t *w, const char *key, const void *val, size_t len, ec_error_t *err);
/* Put value under epochs/<epoch>/comm/<name>, on the node's lease. */
int ecw__comm_put(ecw_t *w, uint64_t epoch, const char *name, const void *val, size_t len,
                  ec_error_t *err);
/* Wait up to timeout_ms for epochs/<epoch>/comm/<name>; EC_ETIMEDOUT if absent.
 * *val is malloc'd.  abort_flag (may be NULL) makes it return EC_EABORTED. */
int ecw__comm_get(ecw_t *w, uint64_t epoch, const char *name, void **val, size_t *len,
                  int timeout_ms, const _Atomic int *abort_flag, ec_error_t *err);
/* Claim rank in epoch for this process.  1: claimed (now or earlier by this
 * process); 0: another process claimed it first (this one replaces a dead
 * predecessor and must wait for a newer epoch); < 0: error. */
int ecw__claim(ecw_t *w, uint64_t epoch, int rank, bool takeover, ec_error_t *err);

/* ---- ecw.c ---- */
/* Called by waits inside a build (the rendezvous): once the build has waited
 * o.suspect_after_ms, and every ECW__PROBE_EVERY_MS after, probe the
 * members' agents and report the silent ones, as a failed collective does. */
#define ECW__PROBE_EVERY_MS 2000
void ecw__build_tick(ecw_t *w, uint64_t epoch);
/* pthread_cond_timedwait on a CLOCK_MONOTONIC condition variable until the
 * monotonic deadline_ms. */
void ecw__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms);
/* Mark the handle "restart this process" (the first reason is kept) and
 * its communicator broken; logged at ERROR.  Any thread. */
void ecw__restart(ecw_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *ecw__restart_why(const ecw_t *w);
/* The stream ecw_set_stream set (NULL: the legacy default stream). */
void *ecw__user_stream(const ecw_t *w);
/* Copy an internal error out to the caller's struct; returns rc. */
int ecw__out(ecw_error_t *u, const ec_error_t *e, int rc);
void ecw__log(ecw_t *w, ecw_log_level_t lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* progress.c: the progress file (coord/core/progress_file.h) around collectives;
 * options.c: its path from the environment (NULL: no agent gave one) */
/* This process is ready (boots, coord/core/progress_file.h): ecw_init once
 * it follows the job's epochs; once, the first time only. */
void ecw__progress_ready(void);
void ecw__progress_coll_enter(void);
void ecw__progress_coll_exit(int ok);
const char *ecw__progress_path(void);

/* retire.c: a communicator the training thread is done with, aborted and
 * destroyed off it when the backend's teardown is slow (at most
 * ECW__RETIRE_MAX at once per handle; beyond, the training thread waits for
 * one up to ECW__RETIRE_WAIT_MS, then destroys it itself). */
#define ECW__RETIRE_MAX 2
#define ECW__RETIRE_WAIT_MS 30000
void ecw__retire_init(ecw_t *w);
void ecw__retire_fini(ecw_t *w);
void ecw__retire(ecw_t *w, const ecw__backend_t *be, void *comm);
/* Wait until every retirement finished, at most timeout_ms: false if not. */
bool ecw__retire_drain(ecw_t *w, int timeout_ms);

#endif
