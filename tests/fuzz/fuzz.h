/* Shared by the libFuzzer targets in tests/fuzz/: a failed property aborts
 * with a message (libFuzzer then saves the input as crash-<sha1>), and a
 * small byte reader for targets that build structured input from raw bytes. */
#ifndef EC_FUZZ_H
#define EC_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...)                                                   \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "fuzz property failed at %s:%d: %s: ", __FILE__,   \
                    __LINE__, #cond);                                           \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
            abort();                                                            \
        }                                                                       \
    } while (0)

typedef struct {
    const uint8_t *p;
    size_t n;
} fuzz_in_t;

static inline uint8_t fuzz_u8(fuzz_in_t *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static inline uint32_t fuzz_u32(fuzz_in_t *in)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | fuzz_u8(in);
    return v;
}

static inline uint64_t fuzz_u64(fuzz_in_t *in)
{
    return (uint64_t)fuzz_u32(in) << 32 | fuzz_u32(in);
}

#endif
