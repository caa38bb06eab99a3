/* Exponential backoff with jitter for reconnects (pure). */
#ifndef EC_ETCD_BACKOFF_H
#define EC_ETCD_BACKOFF_H

#include <stdint.h>

typedef struct ec__backoff {
    int initial_ms, max_ms;
    int cur_ms;
    uint32_t seed;
} ec__backoff_t;

void ec__backoff_init(ec__backoff_t *b, int initial_ms, int max_ms, uint32_t seed);
/* Next delay: cur ±20% jitter, then cur doubles up to max. */
int ec__backoff_next(ec__backoff_t *b);
void ec__backoff_reset(ec__backoff_t *b);

#endif
