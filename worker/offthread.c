/* Calls that may never return, run off the calling thread with a deadline
 * (offthread.h).
 *
 * ncclCommAbort on a wedged GPU, or a cudaFree that waits for a kernel that
 * never ends, can block the training thread forever, and nothing in CUDA or
 * NCCL bounds them.  The call runs on a thread of its own; the caller waits
 * on a condition variable until it returns or the deadline passes.  Past
 * the deadline the caller goes on without it: the thread is left to finish
 * (or not) and owns the argument from then on, which it frees if it ever
 * returns.  What is left behind cannot be trusted, which is why the NCCL
 * backend then asks for the process to be restarted (ECW_ERESTART) instead
 * of building another communicator on the same GPU. */
#include "offthread.h"
#include "clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

typedef struct job {
    ecw__job_fn fn;
    void *arg;
    void (*free_fn)(void *);
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done, abandoned;
    int refs; /* the caller and the thread */
} job_t;

static _Atomic int stuck;

static void job_unref(job_t *j)
{
    /* Caller holds j->mu. */
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (last) {
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        free(j);
    }
}

static void *job_main(void *p)
{
    job_t *j = p;
    j->fn(j->arg);
    pthread_mutex_lock(&j->mu);
    j->done = true;
    pthread_cond_signal(&j->cv);
    if (j->abandoned) {
        /* The caller gave up on us and left the argument to us. */
        if (j->free_fn)
            j->free_fn(j->arg);
        atomic_fetch_sub(&stuck, 1);
    }
    job_unref(j);
    return NULL;
}

int ecw__run_with_deadline(ecw__job_fn fn, void *arg, void (*free_fn)(void *), int timeout_ms)
{
    job_t *j = calloc(1, sizeof(*j));
    if (!j)
        return EC_ENOMEM;
    j->fn = fn;
    j->arg = arg;
    j->free_fn = free_fn;
    j->refs = 2;
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int e = pthread_create(&t, &at, job_main, j);
    pthread_attr_destroy(&at);
    if (e != 0) {
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        free(j);
        errno = e;
        return EC_ESYS;
    }
    /* An absolute CLOCK_MONOTONIC deadline: spurious wake-ups wait again. */
    int64_t ms = timeout_ms > 0 ? timeout_ms : 0;
    struct timespec until = ec_deadline_ts(ms);
    int64_t deadline = ec_mono_ms() + ms;
    pthread_mutex_lock(&j->mu);
    while (!j->done && ec_mono_ms() < deadline)
        pthread_cond_timedwait(&j->cv, &j->mu, &until);
    int rc = 0;
    if (!j->done) {
        j->abandoned = true;
        atomic_fetch_add(&stuck, 1);
        rc = EC_ETIMEDOUT;
    }
    job_unref(j);
    return rc;
}

int ecw__stuck_calls(void)
{
    return atomic_load(&stuck);
}
