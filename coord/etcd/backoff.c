#include "backoff.h"

void ec__backoff_init(ec__backoff_t *b, int initial_ms, int max_ms, uint32_t seed)
{
    b->initial_ms = initial_ms > 0 ? initial_ms : 1;
    b->max_ms = max_ms >= b->initial_ms ? max_ms : b->initial_ms;
    b->cur_ms = b->initial_ms;
    b->seed = seed ? seed : 0x9e3779b9u;
}

static uint32_t xorshift(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

int ec__backoff_next(ec__backoff_t *b)
{
    int base = b->cur_ms;
    int span = base / 5; /* ±20% so reconnecting clients do not stampede */
    int d = base;
    if (span > 0)
        d = base - span + (int)(xorshift(&b->seed) % (uint32_t)(2 * span + 1));
    long next = (long)b->cur_ms * 2;
    b->cur_ms = next > b->max_ms ? b->max_ms : (int)next;
    return d < 1 ? 1 : d;
}

void ec__backoff_reset(ec__backoff_t *b)
{
    b->cur_ms = b->initial_ms;
}
