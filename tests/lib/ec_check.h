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
