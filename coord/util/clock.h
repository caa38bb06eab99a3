/* Clocks: the monotonic clock for deadlines and durations, the wall clock
 * for what is compared across machines or shown to people.  One place, so
 * every layer measures the same way. */
#ifndef EC_CLOCK_H
#define EC_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t ec_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int64_t ec_mono_ms(void) { return ec_mono_us() / 1000; }

static inline int64_t ec_wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int64_t ec_wall_ms(void) { return ec_wall_us() / 1000; }

#endif
