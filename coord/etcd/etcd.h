/* ec_etcd: a small etcd v3 client over gRPC core (or, for unit tests, over
 * an in-memory store in this process: the end of this file).
 *
 * It knows etcd and nothing of jobs, epochs or ranks.  Every call has a
 * deadline (ec_etcd_opts_t.call_timeout_ms); every failure returns a negative
 * EC_* code (coord/util/error.h) and, with a non-NULL err, a message that names the
 * endpoint and what to do, with etcd's own text kept.
 *
 * Thread-safety: an ec_etcd_t may be used from any number of threads at once
 * (each unary call has its own completion queue).  A keepalive or watch runs
 * on a thread of its own and calls its callback from that thread; its _stop()
 * must not be called from inside its own callback.
 */
#ifndef EC_ETCD_H
#define EC_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct ec_etcd ec_etcd_t;

/* Options: zero-init through EC_ETCD_OPTS_INIT so fields can be added. */
typedef struct ec_etcd_opts {
    size_t size;              /* sizeof(ec_etcd_opts_t) */
    const char *endpoints;    /* "127.0.0.1:2379", "http://h:2379,h2:2379", "etcd://h:2379" */
    const char *ca_file;      /* TLS: any of these turns TLS on (https:// too) */
    const char *cert_file;
    const char *key_file;
    const char *user;         /* auth: user name; password given separately */
    const char *password;     /* never logged; copied and wiped on destroy */
    int call_timeout_ms;      /* deadline of each unary call (default 5000) */
    int dial_timeout_ms;      /* deadline of ec_etcd_create's first contact (default 5000) */
    /* Proxies.  gRPC sends a channel's traffic through the proxy the
     * environment names (grpc_proxy, https_proxy, http_proxy), loopback
     * included, and many clusters set one: an agent with
     * https_proxy=http://proxy:3128 could not reach the etcd beside it.  This
     * client never uses those variables.  http_proxy: an HTTP CONNECT proxy
     * ("http://HOST:PORT") to reach etcd through, on purpose (--etcd_proxy);
     * NULL or "": connect directly.  proxy_env: for messages only, the name
     * of a proxy variable the caller saw set ("https_proxy"), or NULL: an
     * unavailable etcd's message says it is not used and how to use one. */
    const char *http_proxy;
    const char *proxy_env;
} ec_etcd_opts_t;

#define EC_ETCD_OPTS_INIT {.size = sizeof(ec_etcd_opts_t)}

/* Reconnecting after etcd was away.  Found by tests/t7000-faults (etcd
 * killed for longer than a lease TTL): gRPC drives a reconnecting channel's
 * sockets only while some call waits on it, or from its backup poller, every
 * 5 s by default.  Our calls fail fast while etcd is away, so each reconnect
 * attempt's handshake outlived the 2 s connect timeout unpolled, and the
 * client never reconnected after etcd came back.  Polling every 200 ms fixes
 * it, and gRPC has no channel argument for it: only this variable, read in
 * the process's first grpc_init().  The library never sets it (setenv is not
 * thread-safe against other threads' getenv); a program using this client
 * sets it at the top of main(), before it starts any thread, keeping a value
 * the user set:
 *     setenv(EC_ETCD_POLL_ENV, EC_ETCD_POLL_MS, 0);
 * `ecoord` does, and its training processes inherit it from the agent. */
#define EC_ETCD_POLL_ENV "GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS"
#define EC_ETCD_POLL_MS "200"

/* Connect: parses the endpoints, opens the channel, authenticates when a
 * user is given, and checks that etcd answers (Maintenance.Status) within
 * dial_timeout_ms.  Returns NULL with err filled on failure. */
ec_etcd_t *ec_etcd_create(const ec_etcd_opts_t *opts, ec_error_t *err);
/* Whether ec_etcd_create's failure err may pass by itself: etcd not
 * reachable yet (refused, a name that does not resolve yet, no answer in
 * time), as when it starts after its clients.  Not: an etcd that hangs up
 * on a plain connection (it serves TLS), a TLS handshake that fails, this
 * process out of file descriptors, a refused login, a bad option. */
bool ec_etcd_error_may_pass(const ec_error_t *err);
/* Cancels nothing that is still running: stop watches and keepalives first.
 * Accepts NULL; preserves errno. */
void ec_etcd_destroy(ec_etcd_t *c);
/* The endpoints as given (for messages). */
const char *ec_etcd_endpoints(const ec_etcd_t *c);
/* Per-client deadline for unary calls from now on. */
void ec_etcd_set_call_timeout(ec_etcd_t *c, int ms);

/* ---- key-values --------------------------------------------------- */

typedef struct ec_kv {
    char *key;          /* NUL-terminated copy */
    size_t key_len;
    uint8_t *value;     /* NUL-terminated copy (the NUL is not counted) */
    size_t value_len;
    int64_t create_revision;
    int64_t mod_revision;
    int64_t version;
    int64_t lease;
} ec_kv_t;

typedef struct ec_kv_list {
    ec_kv_t *kvs;
    size_t n;
    int64_t revision;   /* store revision the read was served at */
} ec_kv_list_t;

void ec_kv_free(ec_kv_t *kv);             /* frees the members, not kv */
void ec_kv_list_free(ec_kv_list_t *list); /* frees the members, not list */

/* Read one key.  found is set to false and out zeroed when the key is absent
 * (that is not an error).  revision (may be NULL) gets the store revision. */
int ec_etcd_get(ec_etcd_t *c, const char *key, ec_kv_t *out, bool *found,
                int64_t *revision, ec_error_t *err);
/* ec_etcd_get as the store was at revision at (0: now).  EC_ECOMPACTED when
 * that revision was compacted away; an error when it is in the future. */
int ec_etcd_get_at(ec_etcd_t *c, const char *key, int64_t at, ec_kv_t *out, bool *found,
                   int64_t *revision, ec_error_t *err);
/* Read every key under prefix, sorted by key, all of it even when it spans
 * several responses (pages of page_size keys, 0 = 1000), all pages read at
 * the first page's revision so the listing is a consistent snapshot. */
int ec_etcd_get_prefix(ec_etcd_t *c, const char *prefix, size_t page_size,
                       ec_kv_list_t *out, ec_error_t *err);
/* The first key at or after `from` (which starts with prefix) that starts
 * with prefix, in etcd's byte order, without its value: one Range of
 * limit 1, keys only.  *found false when there is none; key[len] gets it
 * (cut to len - 1 bytes).  Skipping past a key's first part this way lists
 * the distinct parts under a prefix a read each. */
int ec_etcd_next_key(ec_etcd_t *c, const char *prefix, const char *from, char *key, size_t len,
                     bool *found, ec_error_t *err);
/* Put a value, attached to lease when lease != 0.  revision may be NULL. */
int ec_etcd_put(ec_etcd_t *c, const char *key, const void *value, size_t len,
                int64_t lease, int64_t *revision, ec_error_t *err);
/* Delete key, or every key under it when prefix is true.  deleted may be NULL. */
int ec_etcd_delete(ec_etcd_t *c, const char *key, bool prefix, int64_t *deleted,
                   ec_error_t *err);
/* Compact the history up to revision (physical: wait until it is applied). */
int ec_etcd_compact(ec_etcd_t *c, int64_t revision, bool physical, ec_error_t *err);
/* Store revision and the answering member's version, e.g. for readiness. */
int ec_etcd_status(ec_etcd_t *c, int64_t *revision, char *version, size_t version_len,
                   ec_error_t *err);

/* ---- transactions ------------------------------------------------- */

typedef enum { EC_CMP_VERSION, EC_CMP_CREATE, EC_CMP_MOD, EC_CMP_VALUE } ec_cmp_target_t;
typedef enum { EC_CMP_EQUAL, EC_CMP_GREATER, EC_CMP_LESS, EC_CMP_NOT_EQUAL } ec_cmp_result_t;

typedef struct ec_cmp {
    const char *key;
    ec_cmp_target_t target;
    ec_cmp_result_t result;
    int64_t number;           /* VERSION, CREATE, MOD */
    const void *value;        /* VALUE */
    size_t value_len;
} ec_cmp_t;

typedef enum { EC_OP_GET, EC_OP_PUT, EC_OP_DELETE } ec_op_type_t;

typedef struct ec_op {
    ec_op_type_t type;
    const char *key;
    bool prefix;              /* GET and DELETE: the whole prefix */
    const char *range_end;    /* GET and DELETE: [key, range_end) when set */
    const void *value;        /* PUT */
    size_t value_len;
    int64_t lease;            /* PUT */
} ec_op_t;

typedef struct ec_op_result {
    ec_op_type_t type;
    ec_kv_list_t kvs;         /* GET */
    int64_t deleted;          /* DELETE */
    int64_t revision;         /* PUT: header revision */
} ec_op_result_t;

typedef struct ec_txn_result {
    bool succeeded;           /* which branch ran */
    int64_t revision;
    ec_op_result_t *results;  /* one per op of the branch that ran */
    size_t n;
} ec_txn_result_t;

void ec_txn_result_free(ec_txn_result_t *r);

/* If every comparison holds, run the then-ops, else the else-ops; all
 * atomically.  out may be NULL when the results are not needed. */
int ec_etcd_txn(ec_etcd_t *c, const ec_cmp_t *cmps, size_t ncmp,
                const ec_op_t *then_ops, size_t nthen,
                const ec_op_t *else_ops, size_t nelse,
                ec_txn_result_t *out, ec_error_t *err);

/* ---- leases ------------------------------------------------------- */

/* Grant a lease of ttl_s seconds (etcd raises 1 to its minimum, 2); id gets
 * the lease, granted_ttl (may be NULL) what etcd granted. */
int ec_etcd_lease_grant(ec_etcd_t *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl,
                        ec_error_t *err);
/* Revoke: every key attached goes at once.  EC_ENOTFOUND if unknown. */
int ec_etcd_lease_revoke(ec_etcd_t *c, int64_t id, ec_error_t *err);
/* Remaining ttl in seconds; -1 when the lease does not exist (expired). */
int ec_etcd_lease_ttl(ec_etcd_t *c, int64_t id, int64_t *ttl, int64_t *granted_ttl,
                      ec_error_t *err);

typedef struct ec_keepalive ec_keepalive_t;
/* Called once, from the keepalive thread, when the lease is lost: etcd
 * answered TTL=0 (expired or revoked) or no refresh succeeded within TTL. */
typedef void (*ec_lease_lost_cb)(int64_t lease, const char *why, void *arg);

/* Keep lease `id` (granted with ttl_s) alive: refresh every ttl_s/3 over one
 * stream, reopened with backoff when it breaks.  lost_cb may be NULL. */
ec_keepalive_t *ec_keepalive_start(ec_etcd_t *c, int64_t id, int64_t ttl_s,
                                   ec_lease_lost_cb lost_cb, void *arg, ec_error_t *err);
/* Refresh only while gate(arg) returns true (checked before each refresh;
 * NULL: always).  A program whose own loop is wedged then loses its lease
 * like a dead one, instead of keeping it from a healthy keepalive thread. */
typedef bool (*ec_keepalive_gate_cb)(void *arg);
void ec_keepalive_set_gate(ec_keepalive_t *ka, ec_keepalive_gate_cb gate, void *arg);
/* Stop refreshing (the lease stays until it expires or is revoked).
 * Joins the thread.  Accepts NULL. */
void ec_keepalive_stop(ec_keepalive_t *ka);
/* Whether the lease is still believed alive. */
bool ec_keepalive_alive(ec_keepalive_t *ka);
/* Refreshes acknowledged so far (for tests and metrics). */
uint64_t ec_keepalive_count(ec_keepalive_t *ka);
/* When (CLOCK_MONOTONIC ms) the newest refresh that etcd answered was sent
 * (at first: when the keepalive started).  etcd cannot expire the lease
 * before this plus its TTL, by etcd's clock. */
int64_t ec_keepalive_confirmed_ms(ec_keepalive_t *ka);

/* ---- watches ------------------------------------------------------ */

typedef enum {
    EC_WATCH_CREATED,    /* stream (re)established; revision = store revision */
    EC_WATCH_PUT,
    EC_WATCH_DELETE,
    EC_WATCH_COMPACTED,  /* start revision compacted: re-list, then watch from
                            compact_revision; the watch has stopped */
    EC_WATCH_BROKEN,     /* stream broke; reconnecting (informational) */
} ec_watch_event_type_t;

typedef struct ec_watch_event {
    ec_watch_event_type_t type;
    int64_t revision;          /* PUT/DELETE: the event's mod revision */
    int64_t compact_revision;  /* COMPACTED */
    const ec_kv_t *kv;         /* PUT/DELETE; DELETE has key and mod_revision */
    const ec_kv_t *prev_kv;    /* previous value when etcd still had it, else NULL */
    const char *message;       /* BROKEN/COMPACTED: why */
    bool more;                 /* PUT/DELETE: more events of the same response
                                  (one revision's, or a catch-up batch) follow */
} ec_watch_event_t;

/* Events come in revision order, each exactly once across reconnects.
 * Pointers in ev are valid only during the call. */
typedef void (*ec_watch_cb)(const ec_watch_event_t *ev, void *arg);

typedef struct ec_watch ec_watch_t;

/* Watch key (or every key under it when prefix) from start_revision
 * (0 = from now).  The first event is EC_WATCH_CREATED.  After a break the
 * stream is reopened with backoff and resumes from last seen revision + 1. */
ec_watch_t *ec_watch_start(ec_etcd_t *c, const char *key, bool prefix, int64_t start_revision,
                           ec_watch_cb cb, void *arg, ec_error_t *err);
/* Flags for ec_watch_start_ex. */
#define EC_WATCH_NO_PREV_KV 0x1 /* events carry no previous value: etcd reads the
                                   old value for every event and watcher otherwise,
                                   which dominates its cost when many nodes watch */

/* ec_watch_start with flags (EC_WATCH_*). */
ec_watch_t *ec_watch_start_ex(ec_etcd_t *c, const char *key, bool prefix, int64_t start_revision,
                              unsigned flags, ec_watch_cb cb, void *arg, ec_error_t *err);
/* Several single keys on one stream and one thread (etcd holds one watch
 * stream, not n): each key's events in revision order, exactly once across
 * reconnects, but the keys' events interleaved as etcd sends them (an
 * event of one key may come before an earlier one of another).  One
 * EC_WATCH_CREATED per key (per reconnect); an EC_WATCH_COMPACTED of any
 * key ends the whole watch.  n: 1..EC_WATCH_KEYS_MAX. */
#define EC_WATCH_KEYS_MAX 4
ec_watch_t *ec_watch_start_keys(ec_etcd_t *c, const char *const *keys, size_t n,
                                int64_t start_revision, unsigned flags, ec_watch_cb cb,
                                void *arg, ec_error_t *err);
/* Cancel and join.  Accepts NULL.  No callback runs after it returns. */
void ec_watch_stop(ec_watch_t *w);
/* Next revision the watch will deliver from (last seen + 1; several keys:
 * the lowest of theirs). */
int64_t ec_watch_next_revision(ec_watch_t *w);

/* ---- an in-memory store, for unit tests ---------------------------- */

/* An etcd of our own in this process, behind this same interface: code
 * written against ec_etcd_t (the node coordinator, the stop barrier) runs
 * on it unchanged in unit tests, with no etcd process and no socket.  It
 * keeps what the coordinator relies on: one revision per write, each key's
 * create/mod revision, version and lease, history and compaction,
 * transactions, leases that expire by the monotonic clock, keepalives and
 * watches on threads of their own.  It has no raft, no auth, no TLS, no
 * network between a client and it (docs/testing.md).  Several clients may
 * share one store: the agents of one job in one test process. */
typedef struct ec_etcd_mem ec_etcd_mem_t;

/* A new, empty store at revision 1, with its lease reaper thread.  NULL with
 * err filled when memory or the thread cannot be had. */
ec_etcd_mem_t *ec_etcd_mem_new(ec_error_t *err);
/* Stops the reaper and frees everything.  Destroy the store's clients, and
 * stop their watches and keepalives, first.  Accepts NULL; preserves errno. */
void ec_etcd_mem_free(ec_etcd_mem_t *m);
/* A client of store m (borrowed: it outlives the client).  Every ec_etcd_*,
 * ec_keepalive_* and ec_watch_* call on it is served by the store; its
 * endpoints read "mem".  ec_etcd_destroy frees it. */
ec_etcd_t *ec_etcd_create_mem(ec_etcd_mem_t *m, ec_error_t *err);
/* Test hook: expire lease id now, as etcd does when its TTL runs out: its
 * keys go in one revision and its keepalives learn it at their next
 * refresh.  EC_ENOTFOUND when there is no such lease. */
int ec_etcd_mem_expire_lease(ec_etcd_mem_t *m, int64_t id, ec_error_t *err);
/* Test hook: etcd stopped (true) or back (false).  While down, every call
 * fails with EC_EUNAVAILABLE, keepalive refreshes fail, watches report
 * EC_WATCH_BROKEN once, and no lease expires; back up, the watches are
 * re-created and resume where they were, and every lease gets its full TTL
 * again, as etcd gives them when it restarts. */
void ec_etcd_mem_set_down(ec_etcd_mem_t *m, bool down);
/* Test hook: etcd frozen (true: a SIGSTOPped server) or thawed.  While
 * frozen, every unary call waits until the store thaws, or fails with
 * EC_ETIMEDOUT after EC_ETCD_MEM_FROZEN_CALL_MS (the gRPC client's default
 * call deadline); keepalive refreshes fail and no lease expires.  Watches
 * are left as they are: they deliver nothing, as no write completes. */
#define EC_ETCD_MEM_FROZEN_CALL_MS 5000
void ec_etcd_mem_set_frozen(ec_etcd_mem_t *m, bool frozen);
/* Test hook: how many calls wait now for the frozen store to thaw. */
int ec_etcd_mem_frozen_calls(ec_etcd_mem_t *m);

#endif
