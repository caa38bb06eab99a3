/* Calls that may never return (ncclCommAbort on a wedged GPU, a cudaFree
 * behind a hung kernel), run off the calling thread with a deadline
 * (offthread.c).  No I/O, no CUDA: tested on its own
 * (worker/test/test_offthread.c). */
#ifndef ECW_OFFTHREAD_H
#define ECW_OFFTHREAD_H

#include "error.h"

typedef void (*ecw__job_fn)(void *arg);

/* Run fn(arg) on a thread of its own and wait up to timeout_ms for it to
 * return.  0: it returned; arg is the caller's again.  EC_ETIMEDOUT: it is
 * still running and owns arg from now on: the caller must not touch arg
 * again; if fn ever returns, free_fn(arg) (may be NULL) runs on that thread.
 * EC_ESYS / EC_ENOMEM: no thread could be started and fn was not called. */
int ecw__run_with_deadline(ecw__job_fn fn, void *arg, void (*free_fn)(void *), int timeout_ms);

/* Calls given up on at their deadline that have not returned yet. */
int ecw__stuck_calls(void);

#endif
