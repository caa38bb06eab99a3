/* What progress reports cost the training step (issue 18): the step time of
 * a fixed compute step with and without ecw_progress_step() (interleaved
 * blocks, median of each), the cost of one call, and what the agent pays
 * to sample one rank (the open + pread of 64 bytes + close its loop does
 * per rank and pass, and the /proc/<pid>/stat read it adds for a silent
 * rank).  Prints figures; never pass/fail.
 *
 *   tests/bench/bench_progress [STEP_US [BLOCKS]]   (default 100 us, 40 blocks) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ecw.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static volatile double sink;

/* A compute step of about `us` microseconds (calibrated once). */
static long iters_per_us;
static void compute(long us)
{
    double x = 1.0;
    for (long i = 0; i < us * iters_per_us; i++)
        x = x * 1.0000001 + 0.0000001;
    sink = x;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    long step_us = argc > 1 ? atol(argv[1]) : 100;
    int blocks = argc > 2 ? atoi(argv[2]) : 40;
    const int per_block = 200;
    char path[] = "/tmp/ec-bench-progress-XXXXXX";
    int fd = mkstemp(path);
    char zero[64] = {0};
    if (fd < 0 || write(fd, zero, sizeof(zero)) != (ssize_t)sizeof(zero)) {
        perror("progress file");
        return 1;
    }
    close(fd);
    setenv("ECOORD_PROGRESS_FILE", path, 1);

    /* calibrate the compute loop */
    iters_per_us = 100;
    int64_t t = now_ns();
    compute(10000);
    double ns = (double)(now_ns() - t);
    iters_per_us = (long)(100.0 * 10000.0 * 1000.0 / ns);
    if (iters_per_us < 1)
        iters_per_us = 1;

    /* one call */
    ecw_progress_step(); /* maps the file */
    const long calls = 10000000;
    t = now_ns();
    for (long i = 0; i < calls; i++)
        ecw_progress_step();
    double per_call = (double)(now_ns() - t) / (double)calls;

    /* steps with and without, interleaved blocks */
    double *with = calloc((size_t)blocks, sizeof(double)),
           *without = calloc((size_t)blocks, sizeof(double));
    for (int b = 0; b < blocks; b++) {
        for (int mode = 0; mode < 2; mode++) {
            t = now_ns();
            for (int i = 0; i < per_block; i++) {
                compute(step_us);
                if (mode)
                    ecw_progress_step();
            }
            double us = (double)(now_ns() - t) / 1000.0 / per_block;
            (mode ? with : without)[b] = us;
        }
    }
    qsort(with, (size_t)blocks, sizeof(double), cmp);
    qsort(without, (size_t)blocks, sizeof(double), cmp);
    double mw = with[blocks / 2], mo = without[blocks / 2];

    /* the agent's side, per rank and pass */
    const int samples = 100000;
    t = now_ns();
    for (int i = 0; i < samples; i++) {
        int f = open(path, O_RDONLY | O_CLOEXEC);
        char buf[64];
        if (f < 0 || pread(f, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
            return 1;
        close(f);
    }
    double sample_us = (double)(now_ns() - t) / 1000.0 / samples;
    t = now_ns();
    for (int i = 0; i < samples / 10; i++) {
        int f = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
        char buf[512];
        if (f < 0 || read(f, buf, sizeof(buf)) <= 0)
            return 1;
        close(f);
    }
    double stat_us = (double)(now_ns() - t) / 1000.0 / (samples / 10);
    unlink(path);

    printf("progress reports (ecw_progress_step), %d blocks of %d steps, interleaved:\n", blocks,
           per_block);
    printf("  one ecw_progress_step() call:            %.1f ns\n", per_call);
    printf("  step of ~%ld us compute, without:        %.2f us (median of blocks; spread "
           "%.2f-%.2f)\n", step_us, mo, without[0], without[blocks - 1]);
    printf("  the same step, with a report per step:   %.2f us (spread %.2f-%.2f)\n", mw, with[0],
           with[blocks - 1]);
    printf("  difference:                              %+.2f us (%+.3f %%; one call is %.4f %% "
           "of the step)\n", mw - mo, (mw - mo) / mo * 100.0, per_call / 10.0 / (double)step_us);
    printf("agent, per rank and loop pass (every 200 ms at most):\n");
    printf("  sample the progress file (open+pread+close): %.2f us\n", sample_us);
    printf("  /proc/<pid>/stat read (silent ranks only):   %.2f us\n", stat_us);
    free(with);
    free(without);
    return 0;
}
