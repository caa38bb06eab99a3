/* Shared main() for Check test programs: TAP on stdout for automake's
 * tap-driver, CK_FORK honoured from the environment, and a timeout
 * multiplier (EC_TEST_TIMEOUT_MULTIPLIER, like libuv's) for slow machines.
 *
 *   static Suite *suite(void) { ... }
 *   EC_CHECK_MAIN(suite)
 */
#ifndef EC_CHECK_H
#define EC_CHECK_H

#include <check.h>
#include <stdlib.h>

/* Scale a deadline (milliseconds) by EC_TEST_TIMEOUT_MULTIPLIER. */
static inline long ec_test_ms(long ms)
{
    const char *m = getenv("EC_TEST_TIMEOUT_MULTIPLIER");
    double f = m ? atof(m) : 1.0;
    if (f < 1.0)
        f = 1.0;
    return (long)(ms * f);
}

/* The usual suite: one test case named like the suite, setup and teardown
 * (either may be NULL) run around each test in the test's own process, the
 * tests in the order given:
 *   return ec_check_suite("ports", setup, teardown, EC_CHECK_TESTS(a, b, c)); */
static inline Suite *ec_check_suite(const char *name, SFun setup, SFun teardown,
                                    const TTest *const *tests, size_t n)
{
    Suite *s = suite_create(name);
    TCase *tc = tcase_create(name);
    if (setup || teardown)
        tcase_add_checked_fixture(tc, setup, teardown);
    for (size_t i = 0; i < n; i++)
        tcase_add_test(tc, tests[i]);
    suite_add_tcase(s, tc);
    return s;
}

#define EC_CHECK_TESTS(...)                                                                  \
    (const TTest *const[]){__VA_ARGS__},                                                     \
        sizeof((const TTest *const[]){__VA_ARGS__}) / sizeof(const TTest *)

#define EC_CHECK_MAIN(suite_fn)                       \
    int main(void)                                    \
    {                                                 \
        SRunner *sr = srunner_create(suite_fn());     \
        srunner_set_tap(sr, "-");                     \
        srunner_run_all(sr, CK_SILENT);               \
        int failed = srunner_ntests_failed(sr);       \
        srunner_free(sr);                             \
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;  \
    }

#endif
