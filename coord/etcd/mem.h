/* The in-memory store's internals (coord/etcd/mem.c, mem_stream.c); not
 * installed.  The client's public calls (kv.c, lease.c, watch.c, client.c)
 * hand a memory client's work to the ec__mem_* functions here: each has
 * the signature of the public call it serves, with the store in place of
 * the client, and the same error codes as the gRPC client for the same
 * situations.  Nothing here calls gRPC. */
#ifndef EC_ETCD_MEM_H
#define EC_ETCD_MEM_H

#include <pthread.h>

#include "etcd.h"

/* One version of a key: an entry of the store's history.  A deletion is an
 * entry too (tomb), so that watches replay it. */
typedef struct ec__mem_rec {
    char *key;
    size_t key_len;
    uint8_t *value;
    size_t value_len;
    int64_t create_rev, mod_rev, version, lease;
    bool tomb;
    bool dropped;               /* compaction's mark */
    struct ec__mem_rec *prev;   /* the live version this one replaced, or NULL */
} ec__mem_rec_t;

typedef struct ec__mem_lease {
    int64_t id, ttl_s;
    int64_t expires_ms;         /* CLOCK_MONOTONIC */
} ec__mem_lease_t;

struct ec_etcd_mem {
    pthread_mutex_t lock;       /* guards everything below */
    pthread_cond_t cond;        /* broadcast on every change (CLOCK_MONOTONIC) */
    int64_t rev;                /* the store's revision; 1 when empty, as etcd's */
    int64_t compact_rev;        /* reads and watches below it: compacted (0: none) */
    ec__mem_rec_t **log;        /* every version kept, by mod_rev, then write order */
    size_t nlog, caplog;
    ec__mem_rec_t **cur;        /* the live version of each key, sorted by key */
    size_t ncur, capcur;
    ec__mem_lease_t *leases;
    size_t nleases, capleases;
    int64_t next_lease;
    bool down;                  /* ec_etcd_mem_set_down */
    bool frozen;                /* ec_etcd_mem_set_frozen */
    int nfrozen_calls;          /* calls waiting for it to thaw */
    bool stop;                  /* the reaper's */
    pthread_t reaper;
};

/* Fill err as the gRPC client does when etcd is away; returns EC_EUNAVAILABLE. */
int ec__mem_down_error(const char *method, ec_error_t *err);

/* kv */
int ec__mem_get_at(ec_etcd_mem_t *m, const char *key, int64_t at, ec_kv_t *out, bool *found,
                   int64_t *revision, ec_error_t *err);
int ec__mem_get_prefix(ec_etcd_mem_t *m, const char *prefix, ec_kv_list_t *out,
                       ec_error_t *err);
int ec__mem_next_key(ec_etcd_mem_t *m, const char *prefix, const char *from, char *key,
                     size_t len, bool *found, ec_error_t *err);
int ec__mem_put(ec_etcd_mem_t *m, const char *key, const void *value, size_t len, int64_t lease,
                int64_t *revision, ec_error_t *err);
int ec__mem_delete(ec_etcd_mem_t *m, const char *key, bool prefix, int64_t *deleted,
                   ec_error_t *err);
int ec__mem_compact(ec_etcd_mem_t *m, int64_t revision, ec_error_t *err);
int ec__mem_status(ec_etcd_mem_t *m, int64_t *revision, char *version, size_t version_len,
                   ec_error_t *err);
int ec__mem_txn(ec_etcd_mem_t *m, const ec_cmp_t *cmps, size_t ncmp, const ec_op_t *then_ops,
                size_t nthen, const ec_op_t *else_ops, size_t nelse, ec_txn_result_t *out,
                ec_error_t *err);

/* leases */
int ec__mem_lease_grant(ec_etcd_mem_t *m, int64_t ttl_s, int64_t *id, int64_t *granted,
                        ec_error_t *err);
int ec__mem_lease_revoke(ec_etcd_mem_t *m, int64_t id, ec_error_t *err);
int ec__mem_lease_ttl(ec_etcd_mem_t *m, int64_t id, int64_t *ttl, int64_t *granted,
                      ec_error_t *err);
/* One refresh (lock held): 1 refreshed, 0 no such lease, EC_EUNAVAILABLE down. */
int ec__mem_lease_refresh_locked(ec_etcd_mem_t *m, int64_t id);

/* A kv copied out of a history entry (out zeroed first). */
int ec__mem_kv_copy(ec_kv_t *out, const ec__mem_rec_t *r);

/* keepalives: lease.c's keepalive, driven by mem_stream.c (keepalive.h) */

/* watches (mem_stream.c) */
typedef struct ec__mem_watch ec__mem_watch_t;
ec__mem_watch_t *ec__mem_watch_start(ec_etcd_mem_t *m, const char *const *keys, size_t n,
                                     bool prefix, int64_t start_revision, unsigned flags,
                                     ec_watch_cb cb, void *arg, ec_error_t *err);
void ec__mem_watch_stop(ec__mem_watch_t *w);
int64_t ec__mem_watch_next_revision(ec__mem_watch_t *w);

#endif
