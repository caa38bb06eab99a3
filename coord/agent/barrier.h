/* Restart mode's stop barrier, the agent's side (the rule:
 * coord/core/stop_barrier.h).  Main thread only.
 *
 * When an epoch makes this node M_id m, the agent stops its own processes,
 * confirms that on the claim it wrote for its previous M_id
 * (ec_barrier_stopped), then calls ec_barrier_begin and ec_barrier_tick
 * from its loop until the tick says start: the previous holder of m's ranks
 * confirmed its stop or can no longer have processes, and this node's claim
 * on holders/<m> is written.  Every etcd call is the client's, with its
 * deadline; a failed read or write is retried at the next tick, and no
 * holder is waited for longer than the lease TTL (the rule's bound). */
#ifndef EC_AGENT_BARRIER_H
#define EC_AGENT_BARRIER_H

#include <stdbool.h>
#include <stdint.h>

#include "etcd.h"
#include "keys.h"

typedef struct ec_barrier ec_barrier_t;

/* ttl_ms: this job's lease TTL.  NULL on ENOMEM. */
ec_barrier_t *ec_barrier_new(ec_etcd_t *c, const ec_keys_t *keys, const char *self,
                             int64_t ttl_ms);
void ec_barrier_free(ec_barrier_t *b);

/* Wait to start epoch's processes as M_id m_id, ranks first..last (for the
 * console).  Replaces a barrier still pending. */
void ec_barrier_begin(ec_barrier_t *b, uint64_t epoch, int m_id, long long first,
                      long long last);
/* Whether a barrier is pending (begun, not yet through). */
bool ec_barrier_pending(const ec_barrier_t *b);
/* Drop a pending barrier (the node is no longer a member, it fenced...). */
void ec_barrier_cancel(ec_barrier_t *b);
/* Look again: true when the processes may start now (the claim, under
 * lease, is written); false with *next_ms (monotonic) when to look again. */
bool ec_barrier_tick(ec_barrier_t *b, int64_t lease, int64_t *next_ms);
/* This node's processes are all stopped: mark its claim stopped (one
 * transaction, only if the claim is still ours).  Best effort: a failure
 * costs the next holder a wait, bounded by the rule. */
void ec_barrier_stopped(ec_barrier_t *b);

#endif
