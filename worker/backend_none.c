/* The backend that builds nothing (ECW_BACKEND_NONE): for a program whose
 * collectives are its own, such as torch's process groups.  ecw_rebuild
 * still waits for the newest epoch that includes the node and claims the
 * process's rank in it (ecw.c), so the agent and the other members see the
 * process in the epoch; the "communicator" is only a marker of the epoch
 * built, which the watcher's abort leaves as it is.  ecw.c refuses the
 * collectives on such a handle before they get here; these refuse too, so
 * that no path reaches a communicator that does not exist. */
#include "ecw_impl.h"

#include <inttypes.h>
#include <stdlib.h>

typedef struct none {
    uint64_t epoch;
} none_t;

static int x_create(ecw_t *w, const ecw__build_t *b, void **out, ec_error_t *err)
{
    (void)w;
    none_t *c = calloc(1, sizeof(*c));
    if (!c)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    c->epoch = b->epoch;
    *out = c;
    return 0;
}

static int x_connect(void *comm, ec_error_t *err)
{
    (void)comm, (void)err;
    return 0; /* nothing to rendezvous: the claim was the registration */
}

static void x_abort(void *comm)
{
    (void)comm; /* nothing in flight to release */
}

static void x_destroy(void *comm)
{
    free(comm);
}

static int refuse(void *comm, const char *what, ec_error_t *err)
{
    none_t *c = comm;
    return ec_errorf(err, EC_EINVAL, "%s in epoch %" PRIu64 ": backend none builds no "
                     "communicator; use the program's own group", what, c ? c->epoch : 0);
}

static int x_allreduce(void *comm, void *buf, size_t count, ecw_dtype_t dt, ecw_op_t op,
                       bool host, ec_error_t *err)
{
    (void)buf, (void)count, (void)dt, (void)op, (void)host;
    return refuse(comm, "allreduce", err);
}

static int x_broadcast(void *comm, void *buf, size_t count, ecw_dtype_t dt, int root,
                       ec_error_t *err)
{
    (void)buf, (void)count, (void)dt, (void)root;
    return refuse(comm, "broadcast", err);
}

static int x_allgather(void *comm, const void *sendbuf, void *recvbuf, size_t count,
                       ecw_dtype_t dt, ec_error_t *err)
{
    (void)sendbuf, (void)recvbuf, (void)count, (void)dt;
    return refuse(comm, "allgather", err);
}

static int x_barrier(void *comm, ec_error_t *err)
{
    return refuse(comm, "barrier", err);
}

const ecw__backend_t ecw__none_backend = {
    .name = "none",
    .create = x_create,
    .connect = x_connect,
    .abort = x_abort,
    .destroy = x_destroy,
    .allreduce = x_allreduce,
    .broadcast = x_broadcast,
    .allgather = x_allgather,
    .barrier = x_barrier,
};
