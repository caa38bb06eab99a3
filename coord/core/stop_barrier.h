/* Restart mode's stop barrier: no process starts for a rank until the
 * previous holder of that rank has stopped its own, or can no longer have one.
 *
 * Ranks move between nodes: after a loss the survivors are renumbered, and
 * the node that becomes M_id m takes ranks m*N..m*N+N-1 from whichever node
 * held them.  That node's agent stops its processes when it applies the new
 * epoch, but an agent that is frozen (SIGSTOP, swapped out) or cut from the
 * others cannot: its processes live until its janitor's watchdog or its own
 * fence kills them, which is before etcd can expire its lease, but possibly
 * seconds after the ring evicted it and the job re-formed.
 *
 * Two keys (keys.h) carry what the next holder needs:
 *   holders/<m>     the last node that started processes for M_id m, in
 *                   which epoch, under which lease, and whether its agent
 *                   has confirmed they stopped;
 *   gone/<node>     written in the eviction's transaction of a silent or
 *                   hung node (an agent that refused probes is gone with
 *                   its processes: nothing to wait for, nothing written):
 *                   how long its processes may live on at most (its
 *                   lease's time left then), on a lease of its own that
 *                   outlasts that wait.
 *
 * ec_barrier_decide is the rule, pure: coord/agent/barrier.c reads the keys
 * and acts on its answer. */
#ifndef EC_STOP_BARRIER_H
#define EC_STOP_BARRIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct ec_rank_holder {
    char node_id[254];
    uint64_t epoch; /* the epoch its processes were started for */
    int64_t lease;  /* its lease then */
    bool stopped;   /* its agent confirmed they are gone */
} ec_rank_holder_t;

typedef enum {
    EC_DEPART_REFUSED = 1, /* its agent's port refused probes: the agent is gone,
                              and its processes with it (PR_SET_PDEATHSIG, janitor) */
    EC_DEPART_SILENT = 2,  /* no answer: frozen, cut off, or its host is gone */
    EC_DEPART_HUNG = 3,    /* its processes stopped progressing (its agent lives) */
} ec_depart_cause_t;

typedef struct ec_departure {
    int64_t lease;
    ec_depart_cause_t cause;
    int64_t wait_ms; /* at most how long its processes may live on */
} ec_departure_t;

const char *ec_depart_cause_name(ec_depart_cause_t c);

/* Codecs (protobuf RankHolder and Departure, proto/ecoord.proto).  Encode:
 * *buf malloc'd.  Decode: key names the value in messages (may be NULL);
 * EC_ECORRUPT with what is wrong and how to fix it. */
int ec_rank_holder_encode(const ec_rank_holder_t *h, void **buf, size_t *len, ec_error_t *err);
int ec_rank_holder_decode(const void *buf, size_t len, const char *key, ec_rank_holder_t *out,
                          ec_error_t *err);
int ec_departure_encode(const ec_departure_t *d, void **buf, size_t *len, ec_error_t *err);
int ec_departure_decode(const void *buf, size_t len, const char *key, ec_departure_t *out,
                        ec_error_t *err);

/* What the next holder of M_id m's ranks knows, read together. */
typedef struct ec_barrier_in {
    const char *self;        /* this node's id */
    uint64_t epoch;          /* the epoch about to start */
    const ec_rank_holder_t *holder;   /* holders/<m>; NULL: none */
    int64_t record_lease;    /* the holder's nodes/ record's lease; 0: no record */
    const ec_departure_t *gone;       /* gone/<holder>; NULL: none */
    int64_t now_ms;          /* monotonic */
    int64_t since_ms;        /* when this barrier began waiting on this holder */
    int64_t gone_seen_ms;    /* when gone was first seen (0: not seen) */
    int64_t ttl_ms;          /* the lease TTL: no holder is waited for longer */
} ec_barrier_in_t;

typedef enum {
    EC_BARRIER_CLEAR, /* start now */
    EC_BARRIER_WAIT,  /* look again by until_ms */
} ec_barrier_verdict_t;

typedef struct ec_barrier_out {
    ec_barrier_verdict_t verdict;
    int64_t until_ms;  /* WAIT: when waiting ends at the latest (monotonic) */
    bool timed_out;    /* CLEAR because the bound passed, not on evidence */
    const char *why;   /* static text, for the console */
} ec_barrier_out_t;

/* The rule:
 *  - no holder, our own, or a holder that confirmed its stop: clear;
 *  - a holder of an epoch not older than ours: ours is superseded (the
 *    agent applies the newer one when it comes): wait;
 *  - a holder whose record still stands under the same lease: it is alive
 *    (or frozen with its lease): wait for its confirmation, at most ttl_ms
 *    from since_ms;
 *  - evicted (gone/ under the same lease): refused, clear (the agent is
 *    gone with its processes); silent or hung, wait until gone_seen_ms +
 *    min(wait_ms, ttl_ms);
 *  - else its lease ended without an eviction (expired: it fenced before;
 *    left: it stopped first; replaced by a restarted agent of the same id,
 *    which revokes a dead one's lease only): clear. */
ec_barrier_out_t ec_barrier_decide(const ec_barrier_in_t *in);

#endif
