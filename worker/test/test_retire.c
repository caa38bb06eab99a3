/* Rules checked (worker/retire.c): a communicator whose backend's teardown
 * is slow is destroyed off the calling thread, so ecw__retire returns at
 * once; at most ECW__RETIRE_MAX are torn down at once per handle, a further
 * one waiting until one of them ends (here: every destroy blocks on a pipe,
 * as ncclCommAbort takes about a second); a backend whose teardown is quick
 * is destroyed on the calling thread; ecw__retire_drain waits for all. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ec_check.h"
#include "harness.h"
#include "ecw_impl.h"

/* retire.c logs through the handle: nothing to log here */
void ecw__log(ecw_t *w, ecw_log_level_t lvl, const char *fmt, ...)
{
    (void)w, (void)lvl, (void)fmt;
}

typedef struct {
    int fd[2];        /* destroy returns once a byte arrives on fd[0] */
    pthread_t by;     /* the thread that destroyed it */
    _Atomic int done;
    bool husk;        /* holds nothing of the device any more */
} fake_t;

static _Atomic int inflight, most;

static void f_abort(void *comm)
{
    (void)comm;
}

static void f_destroy(void *comm)
{
    fake_t *f = comm;
    int now = atomic_fetch_add(&inflight, 1) + 1;
    for (int m = atomic_load(&most); now > m && !atomic_compare_exchange_weak(&most, &m, now);)
        ;
    f->by = pthread_self();
    char b;
    while (read(f->fd[0], &b, 1) < 0)
        ;
    atomic_fetch_sub(&inflight, 1);
    atomic_store(&f->done, 1);
}

static const ecw__backend_t slow = {.name = "slow", .abort = f_abort, .destroy = f_destroy,
                                    .slow_teardown = true};
static const ecw__backend_t quick = {.name = "quick", .abort = f_abort, .destroy = f_destroy};

/* a slow backend some of whose communicators hold nothing any more */
static bool f_holds_nothing(void *comm)
{
    return ((fake_t *)comm)->husk;
}
static const ecw__backend_t slow_husks = {.name = "slow", .abort = f_abort, .destroy = f_destroy,
                                          .slow_teardown = true,
                                          .holds_nothing = f_holds_nothing};

static void fake_init(fake_t *f)
{
    memset(f, 0, sizeof(*f));
    ck_assert_int_eq(pipe(f->fd), 0);
}

static void release(fake_t *f)
{
    ck_assert_int_eq(write(f->fd[1], "x", 1), 1);
}

typedef struct {
    ecw_t *w;
    fake_t *f;
    _Atomic int returned;
} call_t;

static void *retire_thread(void *p)
{
    call_t *c = p;
    ecw__retire(c->w, &slow, c->f);
    atomic_store(&c->returned, 1);
    return NULL;
}

static bool at_least_two(void *arg)
{
    (void)arg;
    return atomic_load(&inflight) >= 2;
}

static bool at_most_two(void *arg)
{
    (void)arg;
    return atomic_load(&inflight) <= 2;
}

static bool returned(void *arg)
{
    return atomic_load(&((call_t *)arg)->returned) != 0;
}

static bool is_done(void *arg)
{
    return atomic_load(&((fake_t *)arg)->done) != 0;
}

START_TEST(slow_teardown_runs_beside_at_most_two_at_once)
{
    ecw_t *w = calloc(1, sizeof(*w));
    ck_assert_ptr_nonnull(w);
    ecw__retire_init(w);
    fake_t f[3];
    for (int i = 0; i < 3; i++)
        fake_init(&f[i]);
    /* two retire at once: each returns while its teardown still runs */
    ecw__retire(w, &slow, &f[0]);
    ecw__retire(w, &slow, &f[1]);
    ck_assert(ec_test_wait(at_least_two, NULL, 5000));
    ck_assert(!atomic_load(&f[0].done) && !atomic_load(&f[1].done));
    ck_assert(!pthread_equal(f[0].by, pthread_self()));
    /* a third waits for room: never three torn down at once */
    call_t c = {w, &f[2], 0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, retire_thread, &c), 0);
    ck_assert(ec_test_holds(at_most_two, NULL, 300));
    ck_assert(!atomic_load(&c.returned));
    release(&f[0]);
    ck_assert(ec_test_wait(returned, &c, 5000));
    ck_assert(ec_test_wait(at_least_two, NULL, 5000)); /* f[1] and f[2] now */
    ck_assert_int_eq(atomic_load(&most), 2);
    pthread_join(t, NULL);
    /* drain waits for both */
    ck_assert(!ecw__retire_drain(w, 100));
    release(&f[1]);
    release(&f[2]);
    ck_assert(ecw__retire_drain(w, 5000));
    ck_assert(atomic_load(&f[1].done) && atomic_load(&f[2].done));
    ck_assert_int_eq(atomic_load(&inflight), 0);
    ecw__retire_fini(w);
    free(w);
}
END_TEST

START_TEST(quick_teardown_runs_on_the_calling_thread)
{
    ecw_t *w = calloc(1, sizeof(*w));
    ck_assert_ptr_nonnull(w);
    ecw__retire_init(w);
    fake_t f;
    fake_init(&f);
    release(&f); /* returns at once */
    ecw__retire(w, &quick, &f);
    ck_assert(atomic_load(&f.done));
    ck_assert(pthread_equal(f.by, pthread_self()));
    ck_assert(ec_test_wait(is_done, &f, 1000));
    ck_assert(ecw__retire_drain(w, 100));
    ecw__retire_fini(w);
    free(w);
}
END_TEST

/* A communicator given up mid-collective hands its device resources to a
 * teardown of their own; what is left is freed at once on the calling
 * thread, even while two slow teardowns fill the bound (on an H200 the next
 * epoch's build waited ~300 ms for one of them). */
START_TEST(a_communicator_holding_nothing_is_freed_at_once)
{
    ecw_t *w = calloc(1, sizeof(*w));
    ck_assert_ptr_nonnull(w);
    ecw__retire_init(w);
    fake_t f[2], husk;
    for (int i = 0; i < 2; i++)
        fake_init(&f[i]);
    ecw__retire(w, &slow_husks, &f[0]);
    ecw__retire(w, &slow_husks, &f[1]);
    ck_assert(ec_test_wait(at_least_two, NULL, 5000));
    fake_init(&husk);
    husk.husk = true;
    release(&husk); /* its destroy returns at once */
    ecw__retire(w, &slow_husks, &husk);
    ck_assert(atomic_load(&husk.done));
    ck_assert(pthread_equal(husk.by, pthread_self()));
    ck_assert(!atomic_load(&f[0].done) && !atomic_load(&f[1].done));
    release(&f[0]);
    release(&f[1]);
    ck_assert(ecw__retire_drain(w, 5000));
    ecw__retire_fini(w);
    free(w);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("retire");
    TCase *t = tcase_create("retire");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, slow_teardown_runs_beside_at_most_two_at_once);
    tcase_add_test(t, quick_teardown_runs_on_the_calling_thread);
    tcase_add_test(t, a_communicator_holding_nothing_is_freed_at_once);
    suite_add_tcase(s, t);
    return s;
}

EC_CHECK_MAIN(suite)
