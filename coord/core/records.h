/* ecoord's records: encode, decode and validate the values stored in etcd.
 *
 * The wire format is proto/ecoord.proto; its generated types stay inside
 * the record codecs (records_impl.h lists them).  Callers see plain C
 * structs whose strings and arrays are owned by the struct and released by
 * its _free function (which accepts NULL and preserves errno).
 *
 * Encoding:  int ec_X_encode(const ec_X_t *rec, void **buf, size_t *len, err)
 *   validates rec first and returns EC_EINVAL (a bug in the writer) with a
 *   message naming the field; otherwise *buf is a malloc'd buffer of *len
 *   bytes that the caller frees.  EC_ETOOLARGE if the encoding exceeds
 *   EC_RECORD_MAX_BYTES, EC_ENOMEM.  On error *buf is NULL.
 * Decoding:  int ec_X_decode(const void *buf, size_t len, const char *key,
 *                            ec_X_t **out, err)
 *   unpacks and validates; *out is a malloc'd record for ec_X_free.  Any
 *   record that does not unpack or breaks a rule below returns EC_ECORRUPT
 *   with a message naming the key (key may be NULL), the field and the rule,
 *   and noting that another tool may have written it.  EC_ENOMEM.  On error
 *   *out is NULL.  Zero and unknown enum values are always refused.  Strings
 *   in a decoded record are never NULL (empty when unset); when encoding,
 *   fields documented "may be NULL" are written as empty.
 *
 * Times: *_ms are unix wall-clock milliseconds, *_us unix wall-clock
 * microseconds, planner_us a duration; 0 means "not recorded".
 */
#ifndef EC_RECORDS_H
#define EC_RECORDS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* etcd refuses requests above --max-request-bytes (1.5 MiB by default); a
 * record stays 48 KiB under it so a record plus the rest of its transaction
 * (keys, comparisons, the leader key and status) always fits.  The epoch's
 * transaction carries a large record once (node_publish.c). */
#define EC_RECORD_MAX_BYTES ((1536 - 48) * 1024)
#define EC_NPROC_MAX 1024          /* processes per node */
#define EC_MEMBERS_MAX 65536       /* nodes in an epoch */
#define EC_HOST_MAX 253
#define EC_ENDPOINT_MAX (EC_HOST_MAX + 2 + 1 + 5 + 1) /* "[host]:65535" + NUL */

/* ---- enums: X(NAME, value, "text"); value 0 is always "unknown" ---------- */

#define EC_NODE_STATE_MAP(X)    \
    X(UNKNOWN, 0, "unknown")    \
    X(JOINING, 1, "joining")    \
    X(READY, 2, "ready")        \
    X(LEAVING, 3, "leaving")    \
    X(DONE, 4, "done")          \
    X(FAILED, 5, "failed")
typedef enum {
#define EC__E(n, v, t) EC_NODE_##n = (v),
    EC_NODE_STATE_MAP(EC__E)
#undef EC__E
} ec_node_state_t;

#define EC_EPOCH_REASON_MAP(X)                \
    X(UNKNOWN, 0, "unknown")                  \
    X(START, 1, "start")                      \
    X(JOIN, 2, "join")                        \
    X(LEAVE, 3, "leave")                      \
    X(LOST, 4, "lost")                        \
    X(RESTART, 5, "restart")                  \
    X(SPARE_PROMOTED, 6, "spare-promoted")
typedef enum {
#define EC__E(n, v, t) EC_REASON_##n = (v),
    EC_EPOCH_REASON_MAP(EC__E)
#undef EC__E
} ec_epoch_reason_t;

#define EC_JOB_STATE_MAP(X)       \
    X(UNKNOWN, 0, "unknown")      \
    X(RUNNING, 1, "running")      \
    X(COMPLETED, 2, "completed")  \
    X(FAILED, 3, "failed")        \
    X(INTERRUPTED, 4, "interrupted")
typedef enum {
#define EC__E(n, v, t) EC_JOB_##n = (v),
    EC_JOB_STATE_MAP(EC__E)
#undef EC__E
} ec_job_state_t;

#define EC_FAILURE_KIND_MAP(X)    \
    X(UNKNOWN, 0, "unknown")      \
    X(EXITED, 1, "exited")        \
    X(SIGNALED, 2, "signaled")    \
    X(NODE_LOST, 3, "node-lost")  \
    X(HUNG, 4, "hung")            \
    X(NOT_READY, 5, "not-ready")
typedef enum {
#define EC__E(n, v, t) EC_FAILURE_##n = (v),
    EC_FAILURE_KIND_MAP(EC__E)
#undef EC__E
} ec_failure_kind_t;

/* Lower-case names ("ready", "spare-promoted"); "unknown" for anything else. */
const char *ec_node_state_name(ec_node_state_t s);
const char *ec_epoch_reason_name(ec_epoch_reason_t r);
const char *ec_job_state_name(ec_job_state_t s);
/* Whether a run in state s is over (completed, failed or interrupted): a
 * launch of the job then starts the next run. */
bool ec_job_state_ended(ec_job_state_t s);
const char *ec_failure_kind_name(ec_failure_kind_t k);
const char *ec_boot_phase_name(int phase); /* "booting", "ready"; "unknown" */

/* ---- node record: nodes/<node_id>, leased --------------------------------- */

/* The agent's summary of its ranks' progress (= ecoord.proto NodeProgress;
 * coord/agent/progress.h computes it).  seq 0: none published. */
typedef struct ec_node_progress {
    uint64_t seq;
    int reporting;          /* bool: ranks report steps; else log growth */
    uint64_t step;          /* lowest step among its ranks */
    int64_t silent_ms;      /* longest silence of a rank when written; 0: none */
    int silent_rank;        /* -1: none */
    int waiting, stopped, paused; /* bools */
    int64_t step_p50_us, slowest_us;
    int slowest_rank;       /* -1: unknown */
} ec_node_progress_t;

/* A node's boot (= ecoord.proto NodeBoot).  phase 0: no boot recorded (not
 * gated: restart mode, or an agent from before boots were gated), which
 * every reader takes as ready. */
#define EC_BOOT_PHASE_MAP(X)     \
    X(UNKNOWN, 0, "unknown")     \
    X(BOOTING, 1, "booting")     \
    X(READY, 2, "ready")
typedef enum {
#define EC__E(n, v, t) EC_BOOT_##n = (v),
    EC_BOOT_PHASE_MAP(EC__E)
#undef EC__E
} ec_boot_phase_t;

#define EC_BOOT_WHY_MAX 200
typedef struct ec_node_boot {
    ec_boot_phase_t phase;
    int64_t started_at_ms;  /* unix ms its processes were started */
    int64_t ready_at_ms;    /* unix ms the last one said ready (0: not yet) */
    int nready;             /* 0..nproc */
    char why[EC_BOOT_WHY_MAX + 1]; /* "joining", "local rank 1 exited with code 3" */
} ec_node_boot_t;

typedef struct ec_node_rec {
    char *node_id;          /* valid node id (keys.h) */
    char *host;             /* address peers reach; no port, IPv6 unbracketed */
    int nproc;              /* N, 1..EC_NPROC_MAX */
    uint16_t *ports;        /* nproc ports: local rank i at host:ports[i] */
    uint16_t master_port;   /* spare port for a torch master store */
    int ndevices;           /* 0 or nproc */
    char **device_ids;      /* device of local rank i ("0", "GPU-<uuid>") */
    uint64_t incarnation;
    char *agent_version;    /* may be NULL */
    ec_node_state_t state;
    char *reason;           /* why refused/failed; may be NULL */
    int64_t registered_at_ms;
    uint16_t probe_port;    /* the agent answers a TCP probe here; 0 = none */
    uint64_t run;           /* the run this agent takes part in (>= 1 once decoded) */
    uint64_t epoch_seen;    /* highest epoch number this agent has seen (0: none) */
    ec_node_progress_t progress; /* seq 0: none */
    ec_node_boot_t boot;    /* phase 0: none (not gated) */
    uint32_t place;         /* static rendezvous: node_rank + 1 (its M_id in the first
                             * epoch, planner.h); 0: none */
    uint32_t fence_stops;   /* times its agent stopped its processes for the fence (not
                             * failures of the program, not counted against --max_restart) */
} ec_node_rec_t;

/* A zeroed record with room for nproc ports and ndevices device ids (NULL
 * strings); NULL on bad sizes or no memory.  Fill it, then encode. */
ec_node_rec_t *ec_node_rec_new(int nproc, int ndevices);
void ec_node_rec_free(ec_node_rec_t *rec);
/* Rules: valid node id; host valid (below); 1 <= nproc <= EC_NPROC_MAX;
 * nproc ports and the master port in 1..65535, all distinct; ndevices 0 or
 * nproc, each non-empty printable; state known. */
int ec_node_rec_encode(const ec_node_rec_t *rec, void **buf, size_t *len, ec_error_t *err);
int ec_node_rec_decode(const void *buf, size_t len, const char *key, ec_node_rec_t **out,
                       ec_error_t *err);

/* ---- epoch: epoch and epochs/<n> ------------------------------------------ */

typedef struct ec_member {
    char *node_id;
    int m_id;               /* == index in ec_epoch_t.members */
    char *host;
    uint16_t *ports;        /* nproc ports, local rank order */
    uint16_t master_port;   /* member 0's is the torch MASTER_PORT */
    uint64_t incarnation;
    uint16_t probe_port;    /* its agent answers probes here (its record's); 0: not said */
} ec_member_t;

typedef struct ec_epoch {
    uint64_t number;        /* >= 1 */
    int world_size;         /* == nmembers * nproc */
    int nproc;
    int nmembers;
    ec_member_t *members;   /* M_id order */
    ec_epoch_reason_t reason;
    char *reason_detail;    /* may be NULL */
    char *leader_id;        /* node id of the leader that wrote it */
    int64_t leader_rev;     /* leader key create revision (fencing token), >= 1 */
    int64_t observed_at_ms;
    int64_t decided_at_ms;
    int64_t planner_us;
    int64_t published_at_ms;
    uint64_t run;           /* run of the job that published it (>= 1 once decoded) */
    char *job_id;           /* the job it was published for; NULL or "" when not recorded */
    int np_min, np_max;     /* the job's --np (its leader's); 0, 0 when not recorded */
    /* A split epoch ("split epochs" below): its members per chunk and the
     * digests its head lists (0 and NULL: not split, or not known).  A
     * VIEW of a split epoch holds some of its members only (a follower's:
     * member 0 and a window around its own): members[i].node_id, host and
     * ports are NULL for a member not held; `present` counts the held ones
     * (== nmembers: every member, the usual case). */
    int present;
    int chunk_members, nchunks, nbuckets;
    uint64_t *chunk_digest, *index_digest;
} ec_epoch_t;

/* A zeroed epoch with nmembers members (m_id set to the index), each with
 * room for nproc ports; world_size set.  NULL on bad sizes or no memory. */
ec_epoch_t *ec_epoch_new(int nmembers, int nproc);
/* A deep copy of an epoch (no re-validation: src is a decoded epoch); NULL
 * on no memory. */
ec_epoch_t *ec_epoch_dup(const ec_epoch_t *src);
void ec_epoch_free(ec_epoch_t *ep);
/* Rules: number >= 1; 1 <= nproc <= EC_NPROC_MAX; 1 <= nmembers <=
 * EC_MEMBERS_MAX; world_size == nmembers * nproc; member i has m_id == i, a
 * valid node id not seen before, a valid host, nproc ports and a master port
 * in 1..65535, and no (host, port) pair appears twice in the epoch; reason
 * known; leader_id a valid node id; leader_rev >= 1.  The stored rank 0
 * endpoint and master address/port must agree with member 0. */
int ec_epoch_encode(const ec_epoch_t *ep, void **buf, size_t *len, ec_error_t *err);
int ec_epoch_decode(const void *buf, size_t len, const char *key, ec_epoch_t **out,
                    ec_error_t *err);

/* The whole epoch however large (no EC_RECORD_MAX_BYTES cap): what a
 * reader holds after assembling a split epoch, and what an epoch delta's
 * digest covers.  Never put in one etcd value. */
int ec_epoch_encode_whole(const ec_epoch_t *ep, void **buf, size_t *len, ec_error_t *err);

/* ---- split epochs (issue 16) -----------------------------------------------
 * An epoch of more than chunk_members members is stored in parts (see the
 * Epoch message in proto/ecoord.proto): its head at `epoch` (and
 * epochs/<n>) holds member 0 and a digest of each part; the member table is
 * in chunks epochs/<n>/members/<k> (M_ids [k*C, (k+1)*C)) and an index
 * epochs/<n>/index/<b> (node id -> M_id, b = ec_epoch_index_bucket).  No
 * request then carries more than one part, and a reader that needs its own
 * member only reads its index bucket and its chunk.  ec_epoch_decode
 * refuses a head (EC_ECORRUPT, saying so: it is not a whole record): read a
 * split epoch with ec_epoch_fetch (epoch_fetch.h) or ec_epoch_assemble. */
#define EC_EPOCH_CHUNK_DEFAULT 256 /* members per chunk: --epoch_chunk_members */
typedef struct ec_epoch_parts {
    void *head;             /* the value of `epoch` */
    size_t head_len;
    int nchunks;            /* 0: not split (head is the whole record) */
    void **chunk;
    size_t *chunk_len;
    int nbuckets;
    void **bucket;
    size_t *bucket_len;
} ec_epoch_parts_t;

/* ep in parts of chunk_members members (1..EC_MEMBERS_MAX); an epoch of at
 * most chunk_members members is one whole record (nchunks 0).  Each part is
 * within EC_RECORD_MAX_BYTES or EC_ETOOLARGE. */
int ec_epoch_split(const ec_epoch_t *ep, int chunk_members, ec_epoch_parts_t *out,
                   ec_error_t *err);
void ec_epoch_parts_free(ec_epoch_parts_t *p);

typedef struct ec_epoch_split {
    uint64_t number;
    int nmembers, chunk_members, nchunks, nbuckets;
    uint64_t *chunk_digest, *index_digest; /* nchunks, nbuckets */
} ec_epoch_split_t;

/* What the value of `epoch` is: 1 a split epoch's head (*info filled; free
 * with ec_epoch_split_free), 0 a whole record (info->number set), or a
 * negative EC_* code (EC_ECORRUPT: neither). */
int ec_epoch_head_info(const void *buf, size_t len, const char *key, ec_epoch_split_t *info,
                       ec_error_t *err);
void ec_epoch_split_free(ec_epoch_split_t *info);
/* The whole epoch from its head and its nchunks chunks (each checked
 * against the head's digest, number and M_id range), validated as
 * ec_epoch_decode does.  A whole record as head (nchunks 0) decodes as is. */
int ec_epoch_assemble(const void *head, size_t head_len, const void *const *chunk,
                      const size_t *chunk_len, int nchunks, const char *key, ec_epoch_t **out,
                      ec_error_t *err);
/* ---- views of split epochs ----
 * A reader that needs its own member only keeps a view: the head (member
 * 0) plus the chunks it read.  Views are encoded as a split record whose
 * members are the held ones (in M_id order), so they travel where whole
 * records do (the coordinator's model keeps the bytes). */
/* A whole record, a head or a view: the epoch, a view when split. */
int ec_epoch_decode_view(const void *buf, size_t len, const char *key, ec_epoch_t **out,
                         ec_error_t *err);
/* ep (whole or a view of a split epoch) in the form ec_epoch_decode_view
 * reads: a split epoch as a view of its held members, else whole. */
int ec_epoch_encode_view(const ec_epoch_t *ep, void **buf, size_t *len, ec_error_t *err);
/* Add chunk k (checked against ep's digest, number and M_id range) to a
 * view.  0, EC_ECORRUPT (the chunk is not this epoch's), EC_EINVAL. */
int ec_epoch_view_add_chunk(ec_epoch_t *ep, int k, const void *buf, size_t len, ec_error_t *err);
/* Whether a view holds every member of chunk k. */
int ec_epoch_view_has_chunk(const ec_epoch_t *ep, int k);
/* The chunks a view for the member at M_id m holds (ec_epoch_fetch_view):
 * its own, the ones on either side, and those of its `successors` next
 * members (wrapping; at most EC_EPOCH_VIEW_SUCCESSORS_MAX), each once, into
 * chunks[EC_EPOCH_VIEW_CHUNKS_MAX]; their count (0: ep is not split). */
#define EC_EPOCH_VIEW_SUCCESSORS_MAX 8
#define EC_EPOCH_VIEW_CHUNKS_MAX (EC_EPOCH_VIEW_SUCCESSORS_MAX + 3)
int ec_epoch_view_chunks(const ec_epoch_t *ep, int m, int successors, int *chunks);
/* FNV-1a 64 of a member's canonical text (epoch deltas check member 0). */
uint64_t ec_member_digest(const ec_member_t *m, int nproc);
/* The encoding of chunk k of a whole or view epoch holding all of it
 * (the bytes the leader wrote, so its digest can be checked).  0, EC_EINVAL. */
int ec_epoch_chunk_encode(const ec_epoch_t *ep, int k, void **buf, size_t *len, ec_error_t *err);

/* Index bucket of node_id among nbuckets. */
size_t ec_epoch_index_bucket(const char *node_id, int nbuckets);
/* node_id's M_id in an index bucket (checked against digest, number and
 * bucket): 1 found (*m_id), 0 not a member, or a negative EC_* code. */
int ec_epoch_index_find(const void *buf, size_t len, uint64_t digest, uint64_t number,
                        int bucket, const char *node_id, int *m_id, ec_error_t *err);

/* ---- rank and endpoint tables ----------------------------------------------
 * Ranks follow Paddle's rule rank = M_id * N + N_id (ec_rank()
 * in coord/core/rank.h): walking members in M_id order and each member's local
 * ranks in order visits ranks 0, 1, ..., W-1.  These helpers walk; they never
 * compute a rank themselves.  ep must be a validated epoch. */

/* "host:port" ("[v6]:port" when host contains ':') into buf.  Returns the
 * length, EC_EINVAL for a bad host/port, EC_ETOOLARGE if buf is too small
 * (EC_ENDPOINT_MAX always fits). */
int ec_endpoint_format(const char *host, unsigned port, char *buf, size_t len);
/* Endpoint of local rank n_id on member m_id. */
int ec_epoch_endpoint(const ec_epoch_t *ep, int m_id, int n_id, char *buf, size_t len);
/* All endpoints in rank order joined by sep ("," for PADDLE_TRAINER_ENDPOINTS,
 * "\n" for endpoints.log), as a malloc'd string in *out. 0, EC_EINVAL or
 * EC_ENOMEM. */
int ec_epoch_endpoints(const ec_epoch_t *ep, const char *sep, char **out, ec_error_t *err);
/* Rank 0's endpoint (PADDLE_MASTER). */
int ec_epoch_rank0_endpoint(const ec_epoch_t *ep, char *buf, size_t len);
/* torch MASTER_ADDR and MASTER_PORT: member 0's host and spare port.  *addr
 * points into ep.  0 or EC_EINVAL. */
int ec_epoch_master(const ec_epoch_t *ep, const char **addr, int *port);
/* Index (= M_id) of node_id in ep (among the members a view holds), or
 * EC_ENOTFOUND. */
int ec_epoch_find_member(const ec_epoch_t *ep, const char *node_id);

/* ---- job status: status ----------------------------------------------------- */

typedef struct ec_job_status {
    ec_job_state_t state;
    char *reason;           /* required (non-empty) when state is failed or interrupted */
    uint64_t epoch;         /* epoch current when written; 0 before the first */
    int64_t updated_at_ms;
    char *updated_by;       /* writer's node id, or NULL */
    uint64_t run;           /* the run it is about (>= 1 once decoded; 0 encodes as 1) */
    char *leader_id;        /* the leadership it was written under (NULL/0: none held) */
    int64_t leader_rev;
} ec_job_status_t;

void ec_job_status_free(ec_job_status_t *st);
int ec_job_status_encode(const ec_job_status_t *st, void **buf, size_t *len, ec_error_t *err);
int ec_job_status_decode(const void *buf, size_t len, const char *key, ec_job_status_t **out,
                         ec_error_t *err);

/* ---- failure record: failures/<seq>/... --------------------------------------- */

typedef struct ec_failure {
    char *node_id;
    ec_failure_kind_t kind;
    int local_rank;         /* >= 0; -1 for node-lost (decode sets it) */
    int global_rank;        /* >= 0; -1 for node-lost */
    int exit_code;          /* 0..255, meaningful for EC_FAILURE_EXITED */
    int signal;             /* 1..127, meaningful for EC_FAILURE_SIGNALED */
    uint64_t epoch;
    int64_t time_ms;
    char *log_path;         /* may be NULL */
    int nlines;
    char **last_lines;      /* tail of the log, oldest first */
    char *message;          /* the exception the process reported (error file); NULL or "": none */
    char *raised_at;        /* the frame that raised it; NULL or "": unknown */
    uint64_t run;           /* the job's run the writer took part in; 0: not recorded */
} ec_failure_t;

void ec_failure_free(ec_failure_t *f);
/* "exited with code 3", "killed by signal 9 (Killed)", "node lost", ... */
void ec_failure_what(const ec_failure_t *f, char *buf, size_t len);
int ec_failure_encode(const ec_failure_t *f, void **buf, size_t *len, ec_error_t *err);
int ec_failure_decode(const void *buf, size_t len, const char *key, ec_failure_t **out,
                      ec_error_t *err);

/* ---- worker timing: epochs/<n>/timings/<rank> --------------------------------
 * All times unix wall-clock MICROseconds (CLOCK_REALTIME), so ranks on
 * different nodes can be compared; 0 = stage not reached. */

typedef struct ec_worker_timing {
    uint64_t epoch;         /* >= 1 */
    int rank;               /* >= 0 */
    char *node_id;
    int local_rank;         /* 0..EC_NPROC_MAX-1 */
    int64_t epoch_seen_at_us;
    int64_t comm_aborted_at_us;
    int64_t comm_ready_at_us;
    int64_t state_synced_at_us;
    int64_t first_collective_at_us;
    char *comm_method;      /* NCCL: "init", "init 4 roots", "shrink", ...; NULL or "": none */
    int64_t shrink_us;      /* durations, microseconds; 0: not done */
    int64_t init_us;
} ec_worker_timing_t;

void ec_worker_timing_free(ec_worker_timing_t *t);
int ec_worker_timing_encode(const ec_worker_timing_t *t, void **buf, size_t *len,
                            ec_error_t *err);
int ec_worker_timing_decode(const void *buf, size_t len, const char *key,
                            ec_worker_timing_t **out, ec_error_t *err);

/* hang/<node_id>: the leader's verdict that this node's ranks hung
 * (coord/node/node_hang.c).  Rules: epoch >= 1; local_rank in
 * 0..EC_NPROC_MAX-1; why at most EC_HANG_WHY_MAX bytes (NULL: ""). */
#define EC_HANG_WHY_MAX 1024
typedef struct ec_hang_verdict {
    uint64_t epoch;
    int local_rank;
    char *why;
} ec_hang_verdict_t;

void ec_hang_verdict_free(ec_hang_verdict_t *h);
int ec_hang_verdict_encode(const ec_hang_verdict_t *h, void **buf, size_t *len, ec_error_t *err);
int ec_hang_verdict_decode(const void *buf, size_t len, const char *key, ec_hang_verdict_t **out,
                           ec_error_t *err);

/* The message every decoder of our records gives a value it refuses
 * (EC_ECORRUPT): "<what> at <key>: <detail>; the key may have been written
 * by another tool or an incompatible ecoord version" (key may be NULL). */
int ec_record_vcorrupt(ec_error_t *err, const char *what, const char *key, const char *fmt,
                       va_list ap) __attribute__((format(printf, 4, 0)));

/* A host is 1..EC_HOST_MAX characters from [A-Za-z0-9._-:%] (names, IPv4,
 * unbracketed IPv6 with an optional zone).  Boolean. */
int ec_host_valid(const char *host);

#endif
