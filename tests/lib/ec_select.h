/* Running some tests of a file: EC_TEST_ONLY=name[,name...] keeps only the
 * named tests of a suite that adds them with ec_tcase_add (all when unset).
 * For developers re-running the test they are working on; CI runs all. */
#ifndef EC_TEST_SELECT_H
#define EC_TEST_SELECT_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline bool ec_test_selected(const char *name)
{
    const char *only = getenv("EC_TEST_ONLY");
    if (!only || !*only)
        return true;
    size_t n = strlen(name);
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n))
            return true;
        p += len + (e ? 1 : 0);
    }
    return false;
}

#define ec_tcase_add(tc, fn)            \
    do {                                \
        if (ec_test_selected(#fn))      \
            tcase_add_test((tc), (fn)); \
    } while (0)

#endif
