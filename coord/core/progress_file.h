/* The progress file: how a training process tells its agent that it makes
 * progress, without a system call or an etcd write per step.
 *
 * The agent creates one small file per local rank in its log directory
 * (log_dir/progress.<local_rank>, a fresh file before each start) and
 * passes its path as EC_ENV_PROGRESS_FILE (env_contract.h; coord/agent/env.c).
 * The process maps it shared and stores into it (worker/progress.c for C,
 * ecoord/progress.py for Python); the agent reads it every pass of its loop
 * (coord/agent/progress.c).
 * Both are on one host, so CLOCK_MONOTONIC times compare directly.
 *
 * Layout: fixed, little-endian host order, 64 bytes; every field is an
 * aligned 64-bit (or 32-bit) word written with a plain atomic store, so a
 * reader never sees a torn value.  The writer sets `magic` last, once, after
 * its first store: a file whose magic is 0 belongs to a program that does
 * not report (the agent then watches its log grow instead).  Python mirrors
 * these offsets (worker/python/ecoord/progress.py). */
#ifndef EC_PROGRESS_FILE_H
#define EC_PROGRESS_FILE_H

#include <stdint.h>

#define EC_PROGRESS_MAGIC 0x45435047u /* "GPCE" little-endian: "ECPG" */
#define EC_PROGRESS_VERSION 1u
#define EC_PROGRESS_FILE_SIZE 64
/* Samples of a rank's step time the agent keeps (a sliding window). */
#define EC_PROGRESS_WINDOW 16

typedef struct ec_progress_slot {
    uint32_t magic;         /*  0: EC_PROGRESS_MAGIC once the program reported */
    uint32_t version;       /*  4: EC_PROGRESS_VERSION */
    uint64_t step;          /*  8: steps completed (ecw_progress_step) */
    int64_t step_ns;        /* 16: CLOCK_MONOTONIC ns of the last step */
    int64_t coll_done_ns;   /* 24: ... of the last completed collective */
    int64_t coll_enter_ns;  /* 32: inside a collective since (0: not in one) */
    int64_t paused_ns;      /* 40: declared a pause (checkpoint) at (0: not paused) */
    int64_t resumed_ns;     /* 48: ... and resumed at */
    /* 56: CLOCK_MONOTONIC ns the process said it was ready (0: not yet):
     * under --rebuild=inprocess its node is admitted only once every local
     * rank is (ecw_init writes it once it follows the job's epochs).
     * Written on its own, whatever magic says: a program that reports no
     * steps is ready all the same.  (Was `reserved`, always 0: version 1
     * stands.) */
    int64_t ready_ns;
} ec_progress_slot_t;

_Static_assert(sizeof(ec_progress_slot_t) == EC_PROGRESS_FILE_SIZE, "progress file layout");

#endif
