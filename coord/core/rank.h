/* The one rank formula (Paddle's): rank = M_id * N + N_id, where N = nproc
 * (processes per node), M_id a member's index in the epoch and N_id the
 * local rank.  Shared by the planner, the agent's environment, `ecoord
 * status` and the worker library; the walks over an epoch's ranks and
 * endpoints (records.h) follow it. */
#ifndef EC_RANK_H
#define EC_RANK_H

#include <stdint.h>

/* rank = m_id * nproc + n_id.  Returns the rank, or EC_EINVAL when m_id < 0,
 * nproc < 1, n_id is outside [0, nproc) or the rank would overflow. */
int64_t ec_rank(int64_t m_id, int nproc, int n_id);

#endif
