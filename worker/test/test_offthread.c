/* Rules checked (worker/offthread.c): a call run with a deadline that
 * returns in time gives 0 and hands its argument back; one that blocks
 * (here: on a pipe, as ncclCommAbort on a wedged GPU would) gives
 * EC_ETIMEDOUT at its deadline, not later, and is counted as stuck; once it
 * returns after all, its argument is freed on its own thread and it is no
 * longer counted.  The caller never waits past the deadline. */
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "ec_check.h"
#include "offthread.h"

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

typedef struct {
    int fd;          /* read end: the call blocks until a byte arrives */
    int value;
    _Atomic int *freed;
} arg_t;

static void quick(void *p)
{
    ((arg_t *)p)->value = 42;
}

static void blocks(void *p)
{
    arg_t *a = p;
    char c;
    while (read(a->fd, &c, 1) < 0)
        ;
    a->value = 7;
}

static void free_arg(void *p)
{
    arg_t *a = p;
    atomic_store(a->freed, 1);
    close(a->fd);
    free(a);
}

START_TEST(a_call_that_returns_in_time_gives_0)
{
    arg_t a = {.fd = -1};
    ck_assert_int_eq(ecw__run_with_deadline(quick, &a, NULL, ec_test_ms(5000)), 0);
    ck_assert_int_eq(a.value, 42);
    ck_assert_int_eq(ecw__stuck_calls(), 0);
}
END_TEST

START_TEST(a_call_that_blocks_is_left_behind_at_its_deadline)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    static _Atomic int freed;
    arg_t *a = calloc(1, sizeof(*a));
    a->fd = p[0];
    a->freed = &freed;
    long t0 = now_ms();
    ck_assert_int_eq(ecw__run_with_deadline(blocks, a, free_arg, 200), EC_ETIMEDOUT);
    long took = now_ms() - t0;
    ck_assert_msg(took >= 190 && took < ec_test_ms(2000), "returned after %ld ms", took);
    ck_assert_int_eq(ecw__stuck_calls(), 1);
    ck_assert_int_eq(atomic_load(&freed), 0);
    /* a is the thread's now; unblock it: it frees a and is no longer stuck */
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    long deadline = now_ms() + ec_test_ms(5000);
    while ((ecw__stuck_calls() != 0 || !atomic_load(&freed)) && now_ms() < deadline)
        usleep(1000);
    ck_assert_int_eq(ecw__stuck_calls(), 0);
    ck_assert_int_eq(atomic_load(&freed), 1);
    close(p[1]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("test_offthread");
    TCase *t = tcase_create("deadline");
    tcase_add_test(t, a_call_that_returns_in_time_gives_0);
    tcase_add_test(t, a_call_that_blocks_is_left_behind_at_its_deadline);
    suite_add_tcase(s, t);
    return s;
}

EC_CHECK_MAIN(suite)
