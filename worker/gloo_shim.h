/* Gloo backend of the worker library: a thin C++ shim behind a C interface.
 *
 * One ecw_gloo_t is one communicator for one epoch: rank `rank` of `nranks`
 * processes that rendezvous through a caller-provided key-value store under a
 * caller-chosen key prefix (the epoch's keys), then talk over TCP.  When the
 * epoch changes, the worker calls ecw_gloo_abort() (from any thread, even
 * while a collective is blocked on a silent peer), joins the thread that was
 * blocked, ecw_gloo_destroy()s the communicator and creates a new one under
 * the new epoch's prefix.  A communicator is never repaired or reused after a
 * failure or an abort.
 *
 * Errors: functions return 0 or a negative EC_ code from error.h and fill the
 * caller's ec_error_t (may be NULL) with a message saying what happened and
 * what to do.  No C++ exception ever crosses this interface.
 *
 * Threads: one thread at a time may call connect or a collective on a
 * communicator; ecw_gloo_abort() may be called from any thread at any time
 * between ecw_gloo_new() and ecw_gloo_destroy() (not from a signal handler);
 * ecw_gloo_destroy() only when no other call on it is in flight.
 *
 * Processes: a communicator must not cross fork(); create it in the process
 * that uses it.  While a collective runs, SIGPIPE is blocked in the calling
 * thread (and in Gloo's event-loop thread) and any SIGPIPE it raised is
 * discarded, so a peer that vanishes cannot kill the process.
 */
#ifndef ECW_GLOO_SHIM_H
#define ECW_GLOO_SHIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* error.h has no C++ guards of its own. */
#include "error.h"

/* The rendezvous store, implemented by the caller (the etcd client under the
 * epoch's keys; a directory of files in tests).  Keys are NUL-terminated
 * strings "<prefix>/<rank>"; values are opaque bytes of a few hundred bytes.
 * Both functions return 0 or a negative EC_ code and may fill err. */
typedef struct ecw_gloo_store {
    void *arg;
    /* Publish val under key (creating or replacing it). */
    int (*set)(void *arg, const char *key, const void *val, size_t len, ec_error_t *err);
    /* Wait at most timeout_ms for key to exist, then return a malloc()ed copy
     * of its value in *val (the shim free()s it) and its length in *len.
     * Return EC_ETIMEDOUT if the key is still missing at the deadline.  The
     * shim calls it with slices of at most ECW_GLOO_STORE_SLICE_MS so that an
     * abort stays prompt during the rendezvous. */
    int (*get)(void *arg, const char *key, void **val, size_t *len, int timeout_ms,
               ec_error_t *err);
} ecw_gloo_store_t;

#define ECW_GLOO_STORE_SLICE_MS 100

typedef enum {
    ECW_GLOO_F32 = 1,
    ECW_GLOO_F64,
    ECW_GLOO_I32,
    ECW_GLOO_I64,
    ECW_GLOO_U8, /* raw bytes, for broadcast/allgather of opaque state */
} ecw_gloo_dtype_t;

typedef enum {
    ECW_GLOO_SUM = 1,
    ECW_GLOO_MIN,
    ECW_GLOO_MAX,
    ECW_GLOO_AVG, /* sum, then divide by nranks (integers: truncating division) */
} ecw_gloo_op_t;

typedef struct ecw_gloo_options {
    size_t size;           /* sizeof(ecw_gloo_options_t), set by the initializer */
    int rank;              /* 0 .. nranks-1 */
    int nranks;            /* >= 1 */
    const char *hostname;  /* address or name to bind and advertise ("10.0.0.5") */
    const char *iface;     /* or an interface name ("eth0"); both NULL: the host name */
    const ecw_gloo_store_t *store; /* copied; store->arg must outlive the connect */
    const char *prefix;    /* key prefix unique to this epoch, e.g. "/job1/epochs/7/gloo" */
    int timeout_ms;        /* bound on the connect and on every collective */
} ecw_gloo_options_t;

#define ECW_GLOO_OPTIONS_INIT \
    { sizeof(ecw_gloo_options_t), -1, 0, NULL, NULL, NULL, NULL, 30000 }

typedef struct ecw_gloo ecw_gloo_t;

/* Validate opts and allocate a communicator; no I/O.  Strings and the store
 * table are copied.  On error, NULL is returned and err says why. */
ecw_gloo_t *ecw_gloo_new(const ecw_gloo_options_t *opts, ec_error_t *err);

/* Rendezvous and connect to every peer: publish this rank's addresses under
 * "<prefix>/<rank>", read every peer's, open the TCP connections.  Blocks for
 * at most about timeout_ms (up to twice that if a peer dies after publishing
 * and before connecting).  Returns 0; EC_ETIMEDOUT if a peer did not show up;
 * EC_EABORTED if ecw_gloo_abort() was called; EC_EIO if a peer refused or
 * dropped the connection; the store's code if it failed; EC_EINVAL if
 * already connected.  After a failure, only ecw_gloo_destroy() is useful. */
int ecw_gloo_connect(ecw_gloo_t *g, ec_error_t *err);

/* ecw_gloo_new() + ecw_gloo_connect(); on error, NULL (err->code says which).
 * Use the two-step form when another thread may need to abort the connect. */
ecw_gloo_t *ecw_gloo_create(const ecw_gloo_options_t *opts, ec_error_t *err);

/* In-place allreduce of count elements of buf.  Returns 0; EC_EABORTED
 * (aborted), EC_EIO (a peer closed the connection: a member likely died),
 * EC_ETIMEDOUT (no progress within timeout_ms), EC_EINVAL (bad arguments or
 * not connected).  Any failure leaves the communicator unusable and shuts its
 * connections down, so that peers waiting on this rank fail at once instead of
 * at their timeout (a death thus cascades through a ring); a peer waiting only
 * on some other, silent member is not woken: every member aborts its own
 * communicator at an epoch change. */
int ecw_gloo_allreduce(ecw_gloo_t *g, void *buf, size_t count, ecw_gloo_dtype_t dtype,
                       ecw_gloo_op_t op, ec_error_t *err);

/* Broadcast count elements of buf from rank root to every rank, in place. */
int ecw_gloo_broadcast(ecw_gloo_t *g, void *buf, size_t count, ecw_gloo_dtype_t dtype,
                       int root, ec_error_t *err);

/* Gather count elements from every rank into recvbuf (nranks * count
 * elements, rank order).  sendbuf NULL means this rank's part is already in
 * place at recvbuf + rank * count; otherwise sendbuf must not overlap
 * recvbuf. */
int ecw_gloo_allgather(ecw_gloo_t *g, const void *sendbuf, void *recvbuf, size_t count,
                       ecw_gloo_dtype_t dtype, ec_error_t *err);

/* Return once every rank has entered the barrier. */
int ecw_gloo_barrier(ecw_gloo_t *g, ec_error_t *err);

/* Make the collective in flight (unless it completes first) and every later
 * call return EC_EABORTED promptly (well under a millisecond on loopback),
 * even if a peer is alive but silent; a connect in flight returns it within
 * about ECW_GLOO_STORE_SLICE_MS if it waits for the store, about 10 ms if it
 * waits for a peer to connect.  Thread-safe, idempotent, accepts NULL, never
 * blocks on the network.  It shuts down only this communicator's own TCP
 * sockets, identified when it connected; no other descriptor of the process
 * is touched.  A peer of an aborted rank sees the connection close (its
 * collective fails, EC_EIO, if it was waiting on this rank) as soon as the
 * aborted rank's own collective has failed, or at ecw_gloo_destroy() if none
 * was in flight: the abort itself shuts down only the read side, so that it
 * never makes a write of this rank fail (see gloo_shim.cc, point 4). */
void ecw_gloo_abort(ecw_gloo_t *g);

/* Close the connections and free the communicator.  Accepts NULL, preserves
 * errno, never blocks on a peer (also after an abort or a peer's death). */
void ecw_gloo_destroy(ecw_gloo_t *g);

int ecw_gloo_rank(const ecw_gloo_t *g);
int ecw_gloo_nranks(const ecw_gloo_t *g);
/* Bytes per element, 0 for an unknown dtype. */
size_t ecw_gloo_dtype_size(ecw_gloo_dtype_t dtype);

#ifdef __cplusplus
}
#endif

#endif
