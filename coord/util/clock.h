/* Clocks and deadlines: the one place they are read and computed.
 *
 * Monotonic time measures intervals and deadlines (it never jumps); wall
 * time only stamps records and logs that other machines read.  Condition
 * variables that wait with a deadline are made with CLOCK_MONOTONIC
 * (pthread_condattr_setclock) and given ec_deadline_ts(ms). */
#ifndef EC_CLOCK_H
#define EC_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t ec__clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t ec_mono_ns(void) { return ec__clock_ns(CLOCK_MONOTONIC); }
static inline int64_t ec_mono_ms(void) { return ec__clock_ns(CLOCK_MONOTONIC) / 1000000; }
static inline int64_t ec_mono_us(void) { return ec__clock_ns(CLOCK_MONOTONIC) / 1000; }
static inline int64_t ec_wall_ms(void) { return ec__clock_ns(CLOCK_REALTIME) / 1000000; }
static inline int64_t ec_wall_us(void) { return ec__clock_ns(CLOCK_REALTIME) / 1000; }

/* The absolute time ms milliseconds from now on clock c (negative ms: now),
 * for pthread_cond_timedwait and friends. */
static inline struct timespec ec_timespec_after(clockid_t c, int64_t ms)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    if (ms < 0)
        ms = 0;
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* The same on the monotonic clock: what every deadline wait uses. */
static inline struct timespec ec_deadline_ts(int64_t ms)
{
    return ec_timespec_after(CLOCK_MONOTONIC, ms);
}

/* Milliseconds left until the monotonic deadline_ms (ec_mono_ms() clock), 0
 * when past, as an int for poll() (capped). */
static inline int ec_ms_left(int64_t deadline_ms)
{
    int64_t left = deadline_ms - ec_mono_ms();
    if (left <= 0)
        return 0;
    return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

#endif
