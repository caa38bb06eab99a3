/* ecw: the ecoord worker library.
 *
 * A training process started by `ecoord launch --rebuild=inprocess` links this
 * library and never restarts on a membership change.  It follows the job's
 * epochs in etcd; when a new epoch is published, a background watcher aborts
 * the current communicator at once, so that a collective blocked on a dead or
 * silent peer returns ECW_EEPOCHCHANGED instead of hanging.  The training loop
 * then has one path:
 *
 *     rc = ecw_allreduce(w, grad, n, ECW_F32, ECW_AVG, &err);
 *     if (rc == ECW_EEPOCHCHANGED) {
 *         ecw_rebuild(w, &err);                           // newest epoch
 *         ecw_sync_state(w, params, bytes, &step, NULL, &err); // live state from a peer
 *         continue;                                       // redo the step
 *     }
 *
 * and may ask cheaply before each step whether a rebuild is due
 * (ecw_epoch_pending(): an atomic read, no I/O).
 *
 * The fence: while this node's membership cannot be confirmed (etcd has not
 * confirmed the node's lease for its TTL minus the agent's --lease_margin,
 * ECOORD_LEASE_TTL_MS and ECOORD_LEASE_MARGIN_MS), every collective returns
 * ECW_EUNCONFIRMED at once, and one in progress is aborted, before etcd can
 * expire the lease and the others re-form without this node: two groups
 * never train at once.  The process keeps its state; wait a little and
 * retry.  Once the lease is confirmed again the collectives work again, or
 * return ECW_EEPOCHCHANGED if the job re-formed meanwhile (ecw_rebuild
 * waits, within its deadline, for the confirmation).
 *
 * Backends: NCCL (device memory; built when configure found the CUDA and
 * NCCL headers) and Gloo (host memory, TCP).  The library links no CUDA or
 * NCCL library: it loads libcudart and libnccl when it needs them (an NCCL
 * already in the process, torch's say, first; see cuda_libdir), so it loads
 * and runs Gloo where CUDA is absent.  ECW_BACKEND_AUTO resolves, on each
 * process, to NCCL when the libraries load and a GPU is visible, else Gloo;
 * then every member of an epoch runs rank 0's choice (rank 0 publishes it in
 * the epoch's keys): an AUTO process follows it when it can, and a process
 * told otherwise, or unable to follow, fails ecw_init/ecw_rebuild at once
 * with what to set.  ecw_backend() is the current epoch's backend, which
 * with AUTO may change with rank 0's node: check it after each rebuild, or
 * set the backend for the whole job.
 *
 * Errors: every function that can fail returns 0 or a negative ECW_* code
 * (ECW_ERRNO_MAP; the same values as ecoord's EC_* codes) and, when err is
 * not NULL, fills it with a message that says what happened and what to do.
 * The library never prints, exits or aborts the process: it logs through
 * the callback in the options (nothing is logged without one).
 *
 * ECW_ERESTART means "restart this process": its GPU state is lost or
 * unknown (a fatal CUDA error such as an illegal address or an uncorrectable
 * ECC error, or an NCCL abort that did not return by its deadline).  Nothing
 * in this process can recover it: exit (non-zero); the agent starts a new
 * process in its place, which rejoins through the restart epoch and takes
 * the state from its peers (ecw_sync_state).  Every later call on the handle
 * returns it too; ecw_finalize is still safe.
 *
 * Threads: one thread at a time calls the collectives, ecw_rebuild and
 * ecw_sync_state on a handle (the training thread).  ecw_epoch(),
 * ecw_latest_epoch(), ecw_epoch_pending() and the other accessors may be
 * called from any thread.  The library runs threads of its own: the etcd
 * watch of the job's epoch key, a service thread that writes the per-epoch
 * timing records, and, with a lease, the fence's two (one asks etcd for the
 * lease's time left on a client of its own, one fences on time); with NCCL,
 * short-lived ones that abort a communicator and free its memory within a
 * deadline; one per ecw_iallreduce in flight.
 *
 * Keys: everything the library writes to etcd lives under the epoch's worker
 * keys (<prefix>/<job>/epochs/<n>/...) and is attached to the node's lease,
 * so nothing outlives a dead node.  That is the lease the node's record is
 * on now: ECOORD_LEASE at start, then whichever lease the agent registered
 * again with after losing its own (an etcd outage longer than the TTL).
 *
 * etcd: the agent's TLS files and user come in the environment; the password
 * only in a file (ECOORD_ETCD_PASSWORD_FILE), never in the environment.
 * Reconnecting after a long etcd outage needs
 * GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS=200 in the environment of the
 * process before its first gRPC call: `ecoord launch` sets it; a program
 * that uses the library on its own sets it first thing in main(), before
 * any thread (the library never calls setenv()).
 */
#ifndef ECW_H
#define ECW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ---------------------------------------------------------------- */

#define ECW_ERRNO_MAP(X)                                                     \
    X(EINVAL, -1, "invalid argument")                                        \
    X(ENOMEM, -2, "out of memory")                                           \
    X(EUNAVAILABLE, -3, "etcd unavailable")                                  \
    X(ETIMEDOUT, -4, "deadline exceeded")                                    \
    X(ENOTFOUND, -5, "not found")                                            \
    X(ECOMPACTED, -6, "revision compacted")                                  \
    X(EUNAUTH, -7, "authentication failed")                                  \
    X(ETOOLARGE, -8, "request too large")                                    \
    X(ECANCELED, -9, "canceled")                                             \
    X(EPROTO, -10, "malformed message")                                      \
    X(EINTERNAL, -11, "internal error")                                      \
    X(EPERM, -12, "permission denied")                                       \
    X(ENOTLEADER, -13, "not leader")                                         \
    X(EFENCED, -14, "fenced: leadership or epoch changed")                   \
    X(EEPOCHCHANGED, -15, "epoch changed")                                   \
    X(EABORTED, -16, "communicator aborted")                                 \
    X(ECORRUPT, -17, "corrupted record")                                     \
    X(EEXIST, -18, "already exists")                                         \
    X(EIO, -19, "I/O error")                                                 \
    X(ESYS, -20, "system call failed")                                       \
    X(EUNCONFIRMED, -21, "membership cannot be confirmed: etcd unreachable") \
    X(ERESTART, -22, "restart this process")

typedef enum {
    ECW_OK = 0,
#define ECW__ENUM(name, val, text) ECW_##name = (val),
    ECW_ERRNO_MAP(ECW__ENUM)
#undef ECW__ENUM
} ecw_errcode_t;

#define ECW_ERRMSG_MAX 512

/* Caller-owned; code is 0 until a failure fills it. */
typedef struct ecw_error {
    int code;
    char msg[ECW_ERRMSG_MAX];
} ecw_error_t;

/* "epoch changed"; never NULL. */
const char *ecw_strerror(int code);
/* "ECW_EEPOCHCHANGED"; never NULL. */
const char *ecw_err_name(int code);

/* ---- types ------------------------------------------------------------------- */

typedef enum {
    ECW_BACKEND_AUTO = 0, /* NCCL when a GPU is visible and NCCL was built, else Gloo */
    ECW_BACKEND_GLOO = 1,
    ECW_BACKEND_NCCL = 2,
    /* Follow epochs and claim ranks, build no communicator: for a program
     * whose collectives are its own (torch's process groups, say).  See
     * "Programs with their own collectives" below. */
    ECW_BACKEND_NONE = 3,
} ecw_backend_t;

typedef enum {
    ECW_F32 = 1,
    ECW_F64,
    ECW_I32,
    ECW_I64,
    ECW_F16,  /* NCCL only */
    ECW_BF16, /* NCCL only */
    ECW_U8,   /* raw bytes (opaque state) */
} ecw_dtype_t;

typedef enum {
    ECW_SUM = 1,
    ECW_AVG, /* sum / world size (integers: truncating division) */
    ECW_MIN,
    ECW_MAX,
} ecw_op_t;

typedef enum { ECW_LOG_DEBUG = 0, ECW_LOG_INFO, ECW_LOG_WARN, ECW_LOG_ERROR } ecw_log_level_t;

/* Called from any of the library's threads; must not call back into ecw. */
typedef void (*ecw_log_cb)(ecw_log_level_t level, const char *msg, void *arg);

/* Options.  Initialise with ECW_OPTIONS_INIT so that fields can be added:
 * size tells the library which version of the struct the caller was built
 * with.  With from_env set (the default), every field left at its initial
 * value is taken from the environment the agent provides (the variable named
 * beside each field); explicit values always win.  Zero timeouts mean the
 * default.  Strings are copied by ecw_init.  A Gloo connect may outlast
 * rebuild_timeout_ms by up to timeout_ms. */
typedef struct ecw_options {
    size_t size;                /* sizeof(ecw_options_t) */
    int from_env;               /* 1: fill unset fields from the environment */
    ecw_backend_t backend;      /* ECOORD_WORKER_BACKEND=auto|gloo|nccl|none */
    const char *etcd_endpoints; /* ECOORD_ELASTIC_SERVER */
    const char *etcd_prefix;    /* ECOORD_ETCD_PREFIX ("" or NULL: none) */
    const char *job_id;         /* ECOORD_JOB_ID */
    const char *node_id;        /* ECOORD_NODE_ID */
    int local_rank;             /* LOCAL_RANK; -1 = unset */
    uint64_t start_epoch;       /* ECOORD_EPOCH: never join an older epoch; 0 = any */
    int64_t lease;              /* ECOORD_LEASE (hex): lease of this node's keys; 0 = none */
    const char *host;           /* Gloo: address to bind; PADDLE_CURRENT_ENDPOINT's host,
                                   else this node's host in the epoch */
    int device;                 /* NCCL: CUDA device; -1: FLAGS_selected_gpus, else
                                   local rank modulo the visible devices */
    int timeout_ms;             /* ECOORD_WORKER_TIMEOUT_MS: each connect and collective (30 s) */
    int rebuild_timeout_ms;     /* ECOORD_WORKER_REBUILD_TIMEOUT_MS: one ecw_rebuild, waiting
                                   for a membership included (120 s) */
    int epoch_wait_ms;          /* ECOORD_WORKER_EPOCH_WAIT_MS: after a peer failure, how long
                                   to wait for the epoch that replaces it (60 s) */
    ecw_log_cb log_cb;          /* NULL: no logging */
    void *log_arg;
    ecw_log_level_t log_level;  /* least severe level passed to log_cb */
    /* etcd's TLS and authentication, as `ecoord launch` passes its own on
     * ("" or NULL: none).  The password is read from a file, never from the
     * environment: the agent writes it to a file only its user can read. */
    const char *etcd_cacert;        /* ECOORD_ETCD_CACERT: CA of etcd's certificate */
    const char *etcd_cert;          /* ECOORD_ETCD_CERT: client certificate */
    const char *etcd_key;           /* ECOORD_ETCD_KEY: its key */
    const char *etcd_user;          /* ECOORD_ETCD_USER */
    const char *etcd_password_file; /* ECOORD_ETCD_PASSWORD_FILE: the user's password */
    int suspect_after_ms;       /* ECOORD_WORKER_SUSPECT_AFTER_MS: a build that has waited this
                                   long for a peer probes the members' agents and reports the
                                   silent ones, then every 2 s (1000; 0 = unset) */
    int lease_ttl_ms;           /* ECOORD_LEASE_TTL_MS: the node's lease TTL; with a lease,
                                   turns the fence on (0 = unset: no fence) */
    int lease_margin_ms;        /* ECOORD_LEASE_MARGIN_MS: collectives are refused once the
                                   lease may expire within this (0 = unset: TTL/5) */
    /* NCCL: where to load libcudart and libnccl from at run time (the
     * library links neither).  "" or NULL: an NCCL the process already
     * loaded (torch's, say) first, then the loader's search path, then the
     * CUDA directory configure found.  A directory: only from there (an
     * already loaded NCCL still wins: two in one process would clash). */
    const char *cuda_libdir;    /* ECOORD_WORKER_CUDA_LIBDIR */
    /* NCCL: how each epoch's communicator is built (docs/worker-api.md, "Rebuild cost at scale").
     * "auto" (NULL): ncclCommShrink of the previous one when the epoch only
     * removes ranks and it is healthy, else a full init; "shrink": also
     * shrink one that failed (NCCL_SHRINK_ABORT); "init": always a full
     * init.  A shrink that fails or outlasts its deadline falls back to a
     * full init of the same epoch. */
    const char *nccl_rebuild;   /* ECOORD_WORKER_NCCL_REBUILD=auto|shrink|init */
    int nccl_roots;             /* ECOORD_WORKER_NCCL_ROOTS: unique ids of a scalable init
                                   (0 = unset: one per 128 ranks, at most one per node) */
    int nccl_scalable_min;      /* ECOORD_WORKER_NCCL_SCALABLE_MIN: world size from which
                                   init uses several roots (0 = unset: 128) */
    int nccl_warm;              /* ECOORD_WORKER_NCCL_WARM: 1, build a one-rank communicator
                                   while the process boots, before it says it is ready
                                   (NCCL's one-time set-up, ~0.4 s on an H200, then not
                                   paid by the first epoch's build); 0: not (-1 = unset: 1) */
} ecw_options_t;

#define ECW_OPTIONS_INIT                                                               \
    {                                                                                  \
        sizeof(ecw_options_t), 1, ECW_BACKEND_AUTO, NULL, NULL, NULL, NULL, -1, 0, 0, \
            NULL, -1, 0, 0, 0, NULL, NULL, ECW_LOG_INFO, NULL, NULL, NULL, NULL, NULL, \
            0, 0, 0, NULL, NULL, 0, 0, -1                                              \
    }

typedef struct ecw ecw_t;

/* ---- lifecycle ---------------------------------------------------------------- */

/* Connect to etcd, start following the job's epochs, load the backend (with
 * NCCL: libnccl, the CUDA runtime and this process's CUDA context), say this
 * process is ready, and build the communicator of the newest epoch that
 * includes this node.
 *
 * Ready: under `ecoord launch --rebuild=inprocess` (--join_ready_timeout >
 * 0, the default) the agent starts a joining node's processes, and the one
 * that replaces a dead process, before the node is admitted, and admits the
 * node only once every process on it is ready: the job's running members
 * never wait for a boot.  Everything a program does before ecw_init is its
 * boot (loading data, building the model, a warm-up); what it does after
 * ecw_init returns and before its first collective is time the members wait
 * for it.  A process that never calls ecw_init never says it is ready: its
 * agent reports it and stops it after --join_ready_timeout.
 *
 * A process the agent started ahead of admission (ECOORD_INCARNATION set)
 * waits to be admitted (this node in no epoch yet, a standby, or out of the
 * job while one of its processes boots) with no deadline but
 * ECOORD_WORKER_ADMIT_TIMEOUT_MS (none by default: the agent stops a
 * process it no longer needs; ecw_finalize from another thread ends it); the
 * build then has rebuild_timeout_ms.  Any other process waits within
 * rebuild_timeout_ms (ECW_ETIMEDOUT: no epoch it could join).  A process never joins an epoch planned
 * before it was started (one that admitted an older incarnation of its
 * node), and one that replaces a dead one of the same rank never joins the
 * epoch its predecessor was in.  opts NULL means ECW_OPTIONS_INIT
 * (everything from the environment).  Returns 0 and *out; on error *out is
 * NULL and nothing is left running.  Call ecw_sync_state() next. */
int ecw_init(const ecw_options_t *opts, ecw_t **out, ecw_error_t *err);

/* Abort the communicator, stop the threads, close the etcd client, free.
 * Accepts NULL; preserves errno. */
void ecw_finalize(ecw_t *w);

/* ---- where this process stands --------------------------------------------------- */

uint64_t ecw_epoch(const ecw_t *w);      /* epoch of the current communicator */
int ecw_rank(const ecw_t *w);            /* rank in that epoch */
int ecw_world_size(const ecw_t *w);
int ecw_local_rank(const ecw_t *w);
int ecw_nnodes(const ecw_t *w);          /* members of the current epoch */
/* This node's index among the current epoch's members (M_id; -1 before the
 * first build) and the epoch's processes per node (N; 0 before): rank =
 * ecw_member_index() * ecw_nproc() + ecw_local_rank().  "Current" here and
 * below: the epoch of the last successful ecw_init/ecw_rebuild, kept while a
 * later ecw_rebuild runs or fails. */
int ecw_member_index(const ecw_t *w);
int ecw_nproc(const ecw_t *w);
const char *ecw_node_id(const ecw_t *w);
ecw_backend_t ecw_backend(const ecw_t *w);
const char *ecw_backend_name(ecw_backend_t b); /* "auto", "gloo", "nccl", "none" */
size_t ecw_dtype_size(ecw_dtype_t dtype);      /* 0 for an unknown dtype */

/* Newest epoch published in etcd (whether or not it includes this node). */
uint64_t ecw_latest_epoch(const ecw_t *w);
/* 1 when the current communicator is no longer usable (a newer epoch was
 * published, or it failed): call ecw_rebuild().  An atomic read, no I/O:
 * meant for every training step. */
int ecw_epoch_pending(const ecw_t *w);
/* 1 while this node's membership is confirmed (see "The fence" above) or no
 * fence is configured (no lease or TTL in the options); 0 while the fence is
 * up.  An atomic read and a clock read, no I/O; any thread. */
int ecw_confirmed(const ecw_t *w);
/* For a program whose collectives are its own (ECW_BACKEND_NONE; torch's
 * process groups): one of them failed in the current epoch, by itself (a
 * peer's connection broke), not because a newer epoch or the fence ended
 * it.  The handle's epoch is then done (ecw_epoch_pending() is 1 and
 * ecw_rebuild waits for the next epoch), and, while no newer epoch is out,
 * the members' agents are probed and the silent ones reported, exactly as
 * after a failed ecw_allreduce: the leader evicts a node killed with its
 * agent at once instead of at its lease's expiry.  Blocks for the probes
 * (at most ~200 ms) and one etcd write; training thread.  Returns 0;
 * ECW_EINVAL (no epoch built yet); ECW_EABORTED after ecw_finalize started. */
int ecw_report_failure(ecw_t *w, ecw_error_t *err);

/* ---- membership changes ----------------------------------------------------------- */

/* Build the communicator of the newest epoch that includes this node:
 * destroy the current one (aborting it first), wait for a membership if this
 * node is not in the newest epoch (a standby, or stepped out while another
 * of its processes boots: for a process started ahead of admission, as in
 * ecw_init, that wait has no deadline but ECOORD_WORKER_ADMIT_TIMEOUT_MS),
 * rendezvous with the epoch's members under
 * its keys.  If yet another epoch is published during the build, the build
 * is aborted and the newest one is built instead.  After a communicator
 * failed, the same epoch is never rebuilt: it waits for the next one.  The
 * build within rebuild_timeout_ms.  Returns 0; ECW_ETIMEDOUT (no usable epoch or a member
 * never arrived by the deadline); ECW_EUNCONFIRMED (the node's membership
 * could not be confirmed by the deadline: etcd away; retry); ECW_EUNAVAILABLE
 * (etcd); the backend's error.  On error the handle has no communicator; calling ecw_rebuild()
 * again is allowed. */
int ecw_rebuild(ecw_t *w, ecw_error_t *err);

/* Agree on the most advanced training state among the members and copy it
 * into every member's buffer.  *step is this process's step (< 0: it holds
 * no state, e.g. a joiner or a restarted process); on return it is the
 * greatest step of any member and state holds the len bytes of the lowest
 * rank that had that step (*src_rank, may be NULL; -1 when no member held
 * state, in which case state is left untouched).  When every member already
 * holds that step nothing is copied and *src_rank is 0.  Every member must pass the
 * same len (ECW_EINVAL otherwise).  state is host memory for Gloo and device
 * memory for NCCL.  Collective: every member calls it after each rebuild.
 * Errors as for the collectives; ECW_EINVAL with ECW_BACKEND_NONE.
 *
 * All or nothing on each rank: a rank that receives the state takes it into
 * a staging buffer of len bytes (host memory for Gloo, device memory for
 * NCCL: it needs twice the state's size meanwhile, ECW_ENOMEM otherwise) and
 * copies it over state, and sets *step, only once the broadcast completed on
 * this rank.  On any error (a newer epoch published mid-way, a peer lost)
 * state and *step are exactly what the caller passed: never new bytes under
 * the old step, nor the new step over partial bytes.  Ranks may differ in
 * which of the two they hold: call ecw_rebuild and ecw_sync_state again. */
int ecw_sync_state(ecw_t *w, void *state, size_t len, int64_t *step, int *src_rank,
                   ecw_error_t *err);

/* ---- programs with their own collectives -----------------------------------------
 * With ECW_BACKEND_NONE (ECOORD_WORKER_BACKEND=none) ecw_init and ecw_rebuild
 * do everything but build a communicator: wait, within rebuild_timeout_ms,
 * for the newest epoch that includes this node, claim this process's rank
 * (member index * nproc + local rank) in it as the other backends do, and
 * record the epoch's timings; the program then builds its own group (a torch
 * process group, say) for ecw_epoch() with ecw_rank() and ecw_world_size(),
 * finding its peers through ecw_epoch_put/ecw_epoch_get.  ecw_epoch_pending()
 * turns 1 when a newer epoch is published.  The collectives and
 * ecw_sync_state return ECW_EINVAL on such a handle (there is no
 * communicator: use the program's own).
 *
 * The functions below work on every backend, and may be called from any
 * thread, also while the training thread is in another call on the handle:
 * a watcher thread typically loops on ecw_wait_epoch.  ecw_finalize makes the
 * calls in progress return ECW_EABORTED and waits for them to leave before
 * it frees the handle; no call may start after ecw_finalize started. */

/* Block until the newest published epoch is greater than after: returns 0
 * and *latest (may be NULL) is that epoch.  Otherwise ECW_ETIMEDOUT once
 * timeout_ms passed (timeout_ms <= 0: do not wait) with *latest the newest
 * epoch seen; ECW_EUNCONFIRMED at once when the fence is up or trips during
 * the wait (the node's membership cannot be confirmed: etcd unreachable;
 * every call returns it at once while the fence stays up, so a loop should
 * wait before calling again, e.g. until ecw_confirmed(); a newer epoch is
 * still reported first, with 0); ECW_EABORTED when
 * ecw_finalize started; ECW_EINVAL for a NULL handle.  It sleeps on a
 * condition variable that the epoch watch, the fence and ecw_finalize
 * signal: no polling. */
int ecw_wait_epoch(ecw_t *w, uint64_t after, int timeout_ms, uint64_t *latest,
                   ecw_error_t *err);

/* A small key/value store per epoch, for what a program's own collectives
 * need to rendezvous (the address of the store member rank 0 hosts, say). */
#define ECW_EPOCH_KEY_MAX 64           /* name: 1..64 of [A-Za-z0-9._-], not "." or ".." */
#define ECW_EPOCH_VALUE_MAX (64 * 1024) /* bytes */

/* Write value (len bytes, copied; may be 0) under name in the current epoch
 * (<prefix>/<job>/epochs/<n>/kv/<name>), attached to the node's lease, so
 * that it vanishes with the node and with the epoch's keys.  A second put
 * replaces the value.  Returns 0; ECW_EINVAL (bad name, NULL value with
 * len > 0, no current epoch: the handle never built one); ECW_ETOOLARGE
 * (len > ECW_EPOCH_VALUE_MAX); ECW_EUNAVAILABLE / ECW_ETIMEDOUT (etcd). */
int ecw_epoch_put(ecw_t *w, const char *name, const void *value, size_t len, ecw_error_t *err);

/* Wait up to timeout_ms (<= 0: one look) until name exists in the current
 * epoch, then copy its value into buf (cap bytes; buf may be NULL when cap
 * is 0) and set *len to its full length.  Returns 0; ECW_ETOOLARGE when the
 * value is longer than cap (*len says how long; nothing useful in buf);
 * ECW_EEPOCHCHANGED, promptly, when a newer epoch is published while the key
 * is absent (rebuild, then get in the new epoch); ECW_EUNCONFIRMED when the
 * fence is up or trips; ECW_ETIMEDOUT at the deadline (the writer has not
 * written it: it is late or dead); ECW_EABORTED when ecw_finalize started;
 * ECW_EINVAL (bad name, NULL len, no current epoch); ECW_EUNAVAILABLE (etcd
 * gone for the whole wait).  While it waits it watches the key (and reads
 * it again each second), sleeping on the condition variable that the watch,
 * a new epoch, the fence and ecw_finalize signal. */
int ecw_epoch_get(ecw_t *w, const char *name, void *buf, size_t cap, size_t *len, int timeout_ms,
                  ecw_error_t *err);

/* ---- collectives on the current communicator -----------------------------------------
 * Buffers are host memory for Gloo, device memory of this process's GPU for
 * NCCL.  Each call returns when the operation is complete on this rank.
 * Returns 0; ECW_EEPOCHCHANGED when a newer epoch was published before or
 * during the call, or when a peer failed and the epoch that replaces it
 * arrived within epoch_wait_ms (call ecw_rebuild() then ecw_sync_state(),
 * and redo the step); ECW_EUNCONFIRMED while etcd cannot confirm this node's
 * membership (nothing was sent, or the collective was aborted: wait and
 * retry; see "The fence" above); ECW_EIO / ECW_ETIMEDOUT when a peer failed or stalled
 * and no new epoch arrived in time; ECW_EINVAL for bad arguments (the
 * communicator stays usable), including a dtype the backend does not
 * support, and, for NCCL, a buffer that is not device memory of this
 * process's GPU (checked with cudaPointerGetAttributes before NCCL sees it;
 * managed memory is accepted); ECW_ERESTART when this process's GPU state is
 * lost (see above: exit and be restarted); ECW_EABORTED after ecw_finalize
 * started.  Stream order: see ecw_set_stream below. */
int ecw_allreduce(ecw_t *w, void *buf, size_t count, ecw_dtype_t dtype, ecw_op_t op,
                  ecw_error_t *err);
/* In place from rank root to every rank. */
int ecw_broadcast(ecw_t *w, void *buf, size_t count, ecw_dtype_t dtype, int root,
                  ecw_error_t *err);
/* count elements from every rank into recvbuf (world * count, rank order).
 * sendbuf NULL: this rank's part is already at recvbuf + rank * count. */
int ecw_allgather(ecw_t *w, const void *sendbuf, void *recvbuf, size_t count, ecw_dtype_t dtype,
                  ecw_error_t *err);
int ecw_barrier(ecw_t *w, ecw_error_t *err);

/* ---- asynchronous allreduce -------------------------------------------------------------
 * ecw_iallreduce starts an allreduce and returns at once with *req; ecw_wait
 * waits for it within a deadline.  It runs on a thread of the library's own
 * and obeys everything above: an epoch change, a peer failure and the fence
 * end it as they end ecw_allreduce, and ecw_wait then returns what
 * ecw_allreduce would have (ECW_EEPOCHCHANGED: rebuild, sync, redo the
 * step).  One request per handle at a time: while one is in flight the
 * other collectives, ecw_iallreduce, ecw_sync_state and ecw_rebuild return
 * ECW_EINVAL (wait for it first); the buffer belongs to the library until
 * ecw_wait returned something other than ECW_WAIT_PENDING.  NCCL: the same
 * stream order as ecw_allreduce (it waits for what the caller's stream held
 * when the request started; complete when ecw_wait returns 0).
 * ecw_finalize aborts a request in flight and frees it: never wait on it
 * afterwards.  The training thread calls both. */
typedef struct ecw_request ecw_request_t;
#define ECW_WAIT_PENDING 1 /* ecw_wait: the deadline passed, the request still runs */

/* Returns 0 and *req; or, with *req NULL and nothing started, the errors
 * ecw_allreduce returns before sending anything (ECW_EINVAL also when a
 * request is in flight, ECW_EEPOCHCHANGED, ECW_EUNCONFIRMED, ...). */
int ecw_iallreduce(ecw_t *w, void *buf, size_t count, ecw_dtype_t dtype, ecw_op_t op,
                   ecw_request_t **req, ecw_error_t *err);
/* Wait up to timeout_ms (<= 0: just look) for req to end.  ECW_WAIT_PENDING
 * (positive) when it has not: req is still the caller's, wait again.
 * Otherwise req is freed and the result is ecw_allreduce's: 0, or its
 * errors; after a peer failure that includes waiting up to epoch_wait_ms
 * for the epoch that replaces it, as ecw_allreduce does.  ECW_EINVAL for a
 * NULL req. */
int ecw_wait(ecw_request_t *req, int timeout_ms, ecw_error_t *err);

/* ---- stream order (NCCL) ---------------------------------------------------------------
 * A collective on device memory reads what the caller's GPU work wrote only
 * if it runs after that work.  The contract: each NCCL collective (and the
 * copy of received state in ecw_sync_state) waits on the GPU for everything
 * the caller enqueued on its stream before the call (an event recorded on
 * that stream, waited for by the library's own stream), and returns only
 * once it completed, so that anything the caller enqueues afterwards, on any
 * stream, reads its result.  The caller's stream is the one set here; NULL
 * (the default) means CUDA's legacy default stream (stream 0 of a program
 * built without --default-stream per-thread).  A program that computes its
 * gradients on another stream (torch's current stream, say) sets it before
 * its collectives, from the training thread, between calls; it stays set
 * across rebuilds.  Nothing is enqueued on the caller's stream but the
 * event: an aborted collective leaves nothing behind on it.  Gloo ignores
 * the stream (host memory, complete on return).  Returns 0; ECW_EINVAL for
 * a NULL handle.  A stream that is not valid shows as ECW_EINVAL from the
 * next collective (the communicator stays usable). */
int ecw_set_stream(ecw_t *w, void *cuda_stream, ecw_error_t *err);

/* ---- progress reports (hang and straggler detection) --------------------
 * Tell the agent this process makes progress: call ecw_progress_step() once
 * per training step.  It stores into a small file the agent mapped for this
 * process (ECOORD_PROGRESS_FILE): one clock read and two stores, no system
 * call, no etcd write.  The agent samples it, publishes a summary per node
 * at a low rate, and the leader acts when the job stops progressing for
 * --hang_timeout (on by default, 300 s, for programs that report), naming
 * the node whose ranks stopped while the others wait in a collective.  The
 * library's collectives also mark "in a collective since" and "last
 * collective completed" on their own.
 * Around work that legitimately makes no step for long (writing a
 * checkpoint, evaluation), call ecw_progress_pause() before and
 * ecw_progress_resume() after: while any rank of the job is paused no hang
 * is declared.  None of these needs ecw_init (a program with collectives of
 * its own reports steps the same way); without an agent they do nothing.
 * All return 0. */
int ecw_progress_step(void);
int ecw_progress_pause(void);
int ecw_progress_resume(void);

#ifdef __cplusplus
}
#endif

#endif
