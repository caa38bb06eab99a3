/* Inside `ecoord status` (not for callers; they use status.h): the
 * snapshot, everything decoded from one listing of the job root, between
 * the files that fill it and print it.
 *
 *   gather.c   a listing -> a snapshot (pure: whatever garbage sits in etcd
 *              becomes a row marked "corrupt" with the decoder's message)
 *   render.c   a snapshot -> text or JSON (pure: no I/O but the FILE it
 *              writes to; the JSON fields are documented in status.c)
 *   status.c   the command: reading the job, printing it, --watch
 */
#ifndef EC_STATUS_IMPL_H
#define EC_STATUS_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "etcd.h"
#include "keys.h"
#include "records.h"

/* Failures shown: the newest few (and the root cause, when older). */
#define STATUS_MAX_FAILURES 5

typedef struct st_row {
    char *node;               /* node id, or the raw key rest for a bad key */
    ec_node_rec_t *rec;       /* NULL: no record (a gone member) or corrupt */
    char *error;              /* corrupt: the decoder's message */
    int m_id;                 /* -1: not a member */
    int64_t create_rev;       /* registration order */
    bool foreign;             /* a record without a lease: no agent wrote it */
    bool standby;
} st_row_t;

typedef struct st_fail {
    char *key;
    ec_failure_t *f;          /* NULL when corrupt */
    char *error;
} st_fail_t;

typedef struct st_snap {
    int64_t revision;
    size_t nkeys;
    ec_epoch_t *epoch;
    char *epoch_error;
    ec_job_status_t *status;
    char *status_error;
    char *leader;             /* NULL: no leader key */
    st_row_t *rows;           /* members in M_id order, then the rest in registration order */
    size_t nrows;
    st_fail_t *fails;         /* newest first */
    size_t nfails;
    uint64_t run;             /* the current run (gather.c's root cause); 0: none named */
    uint64_t run_first_epoch; /* its first epoch known from the epoch records; 0: unknown */
    long root;                /* index in fails of the run's root cause; -1: none */
} st_snap_t;

/* Decode a listing of k's root into s.  Records that do not decode are kept
 * with their message; only running out of memory fails (EC_ENOMEM, s then
 * empty). */
int ec__status_gather(st_snap_t *s, const ec_keys_t *k, const ec_kv_list_t *l, ec_error_t *err);
/* Free what s holds and zero it; preserves errno. */
void ec__status_snap_free(st_snap_t *s);

/* s as text or as one line of JSON into f, at now (unix ms) for the ages
 * shown; etcd and root say where it was read.  0, or EC_ENOMEM. */
int ec__status_render_text(FILE *f, const st_snap_t *s, const char *job_id, const char *etcd,
                           const char *root, int64_t now);
int ec__status_render_json(FILE *f, const st_snap_t *s, const char *job_id, const char *etcd,
                           const char *root, int64_t now);
/* "2025-01-02T03:04:05.678Z"; "-" for 0 (not recorded). */
void ec__status_fmt_time(int64_t ms, char *buf, size_t len);

#endif
