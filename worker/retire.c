/* Retiring communicators: their teardown off the critical path.
 *
 * Destroying an NCCL communicator costs about a second (ncclCommAbort on an
 * H200 with NCCL 2.28: ~990 ms of a 1,005-1,045 ms rebuild), and nothing of
 * the new epoch needs it gone first.  A backend that says so
 * (ecw__backend_t.slow_teardown) has its old communicators destroyed here,
 * each on a thread of its own, while the training thread builds and uses
 * the next one.  The bound: ECW__RETIRE_MAX old communicators of a handle
 * at once (their GPU memory and one thread each, beside the live one); a
 * retirement beyond it waits for the oldest to finish, as long as a
 * teardown may take (its own deadline, backend_nccl.c), and past that
 * destroys on the training thread.  ecw_finalize waits for every one of
 * them (ecw__retire_drain) before it frees the handle they log through.
 * One that holds nothing of the device any more (ecw__backend_t.holds_nothing:
 * its communicator was handed to its own teardown when a call was cut off)
 * is freed at once on the calling thread, outside the bound.
 * A teardown that never returns is the backend's: it marks the handle for a
 * restart (ecw__restart) as when it ran on the training thread. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "ecw_impl.h"
#include "clock.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct retiree {
    ecw_t *w;
    const ecw__backend_t *be;
    void *comm;
} retiree_t;

void ecw__retire_init(ecw_t *w)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->retire_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->retire_mu, NULL);
    w->retiring = 0;
}

void ecw__retire_fini(ecw_t *w)
{
    pthread_mutex_destroy(&w->retire_mu);
    pthread_cond_destroy(&w->retire_cv);
}

static void *retire_main(void *p)
{
    retiree_t *r = p;
    ecw_t *w = r->w;
    int64_t t0 = ec_mono_ms();
    r->be->destroy(r->comm);
    ecw__log(w, ECW_LOG_DEBUG, "a retired %s communicator destroyed in %" PRId64 " ms, off the "
             "training thread", r->be->name, ec_mono_ms() - t0);
    free(r);
    pthread_mutex_lock(&w->retire_mu);
    w->retiring--;
    pthread_cond_broadcast(&w->retire_cv);
    pthread_mutex_unlock(&w->retire_mu);
    return NULL;
}

/* Wait (retire_mu held) until fewer than max retire, at most ms. */
static bool wait_below(ecw_t *w, int max, int ms)
{
    struct timespec until = ec_deadline_ts(ms);
    while (w->retiring >= max)
        if (pthread_cond_timedwait(&w->retire_cv, &w->retire_mu, &until) != 0)
            return w->retiring < max;
    return true;
}

void ecw__retire(ecw_t *w, const ecw__backend_t *be, void *comm)
{
    if (!comm)
        return;
    be->abort(comm);
    int64_t t0 = ec_mono_ms();
    if (!be->slow_teardown || (be->holds_nothing && be->holds_nothing(comm))) {
        be->destroy(comm);
        ecw__log(w, ECW_LOG_DEBUG, "communicator destroyed in %" PRId64 " ms",
                 ec_mono_ms() - t0);
        return;
    }
    retiree_t *r = malloc(sizeof(*r));
    pthread_mutex_lock(&w->retire_mu);
    bool room = r && wait_below(w, ECW__RETIRE_MAX, ECW__RETIRE_WAIT_MS);
    if (room)
        w->retiring++;
    pthread_mutex_unlock(&w->retire_mu);
    if (room) {
        *r = (retiree_t){w, be, comm};
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_t t;
        int e = pthread_create(&t, &at, retire_main, r);
        pthread_attr_destroy(&at);
        if (e == 0) {
            ecw__log(w, ECW_LOG_DEBUG, "%s communicator retired: destroyed off the training "
                     "thread (%d retiring)", be->name, w->retiring);
            return;
        }
        pthread_mutex_lock(&w->retire_mu);
        w->retiring--;
        pthread_cond_broadcast(&w->retire_cv);
        pthread_mutex_unlock(&w->retire_mu);
    }
    free(r);
    /* no thread, or the earlier ones are stuck: here, as before */
    be->destroy(comm);
    ecw__log(w, ECW_LOG_INFO, "%s communicator destroyed on the training thread in %" PRId64
             " ms (%s)", be->name, ec_mono_ms() - t0,
             room ? "no thread to retire it on" : "the earlier retirements are still running");
}

bool ecw__retire_drain(ecw_t *w, int timeout_ms)
{
    pthread_mutex_lock(&w->retire_mu);
    bool done = wait_below(w, 1, timeout_ms);
    pthread_mutex_unlock(&w->retire_mu);
    return done;
}
