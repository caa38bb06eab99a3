/* The one rank formula (rank.h). */
#include "rank.h"

#include "error.h"

int64_t ec_rank(int64_t m_id, int nproc, int n_id)
{
    if (m_id < 0 || nproc < 1 || n_id < 0 || n_id >= nproc || m_id > INT64_MAX / nproc - 1)
        return EC_EINVAL;
    return m_id * nproc + n_id;
}
