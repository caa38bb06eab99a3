/* ec-test-prog: a trivial training program for launcher tests.
 *
 *   ec-test-prog DUMP_DIR RUN_MS [EXIT_CODE]
 *
 * Writes its environment to DUMP_DIR/env.<ECOORD_NODE_ID>.<LOCAL_RANK>.<ECOORD_EPOCH>
 * (atomically: write then rename), prints a line with its rank, then runs
 * for RUN_MS (0 = until SIGTERM) and exits EXIT_CODE (default 0).
 *
 * With EC_TEST_PROG_PEER_GONE=PATH it also exits 1 as soon as
 * PATH.<ECOORD_EPOCH> exists: a program whose collectives fail when a peer
 * of its epoch disappears (the test creates the file after killing one).
 *
 * Steps (hang and straggler tests): with EC_TEST_PROG_STEP_MS=N it "trains"
 * in steps of N ms and reports each through ecw_progress_step() (the worker
 * library's progress file; EC_TEST_PROG_REPORT=0: reports nothing, prints a
 * line per step instead, a program that does not know ecoord), and
 *   EC_TEST_PROG_SLOW=NODE:MS          steps on node NODE take MS ms more;
 *   EC_TEST_PROG_HANG=NODE:LR:STEP:F   local rank LR on node NODE sleeps
 *                                      forever at step STEP (alive, no
 *                                      progress) unless file F exists, which
 *                                      it creates first: it hangs once;
 *   EC_TEST_PROG_CHECKPOINT=STEP:MS    every rank pauses (declared with
 *                                      ecw_progress_pause/resume) for MS ms
 *                                      at step STEP, as a checkpoint would;
 *   EC_TEST_PROG_EVAL=STEP:MS          every rank spends MS ms at step STEP
 *                                      without declaring it (an evaluation
 *                                      pass outside the training step);
 *   EC_TEST_PROG_STEPS_TO=DIR          writes its step count to
 *                                      DIR/step.NODE.LR.EPOCH every step. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ecw.h"

extern char **environ;
static volatile sig_atomic_t term;
static void on_term(int s)
{
    (void)s;
    term = 1;
}

static const char *env(const char *n)
{
    const char *v = getenv(n);
    return v ? v : "";
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (!term && nanosleep(&ts, &ts) < 0)
        ;
}

/* The stepping loop (EC_TEST_PROG_STEP_MS): returns when told to stop. */
static void steps(long step_ms, long run)
{
    const char *node = env("ECOORD_NODE_ID");
    int lr = atoi(env("LOCAL_RANK"));
    long extra = 0, hang_step = -1, ck_step = -1, ck_ms = 0, ev_step = -1, ev_ms = 0;
    char hnode[256] = "", hfile[1024] = "", snode[256] = "";
    int hlr = -1;
    if (*env("EC_TEST_PROG_SLOW") && sscanf(env("EC_TEST_PROG_SLOW"), "%255[^:]:%ld", snode,
                                            &extra) == 2 && strcmp(snode, node) != 0)
        extra = 0;
    if (*env("EC_TEST_PROG_HANG"))
        sscanf(env("EC_TEST_PROG_HANG"), "%255[^:]:%d:%ld:%1023s", hnode, &hlr, &hang_step, hfile);
    if (*env("EC_TEST_PROG_CHECKPOINT"))
        sscanf(env("EC_TEST_PROG_CHECKPOINT"), "%ld:%ld", &ck_step, &ck_ms);
    if (*env("EC_TEST_PROG_EVAL"))
        sscanf(env("EC_TEST_PROG_EVAL"), "%ld:%ld", &ev_step, &ev_ms);
    bool report = strcmp(env("EC_TEST_PROG_REPORT"), "0") != 0;
    const char *to = env("EC_TEST_PROG_STEPS_TO");
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long step = 0; !term; step++) {
        if (step == hang_step && !strcmp(hnode, node) && hlr == lr && access(hfile, F_OK) != 0) {
            FILE *h = fopen(hfile, "w");
            if (h)
                fclose(h);
            printf("test-prog rank=%s: hanging at step %ld\n", env("RANK"), step);
            fflush(stdout);
            while (!term)
                pause(); /* alive, making no progress */
            return;
        }
        if (step == ck_step) {
            printf("test-prog rank=%s: checkpointing for %ld ms\n", env("RANK"), ck_ms);
            fflush(stdout);
            ecw_progress_pause();
            sleep_ms(ck_ms);
            ecw_progress_resume();
        }
        if (step == ev_step) {
            printf("test-prog rank=%s: evaluating for %ld ms\n", env("RANK"), ev_ms);
            fflush(stdout);
            sleep_ms(ev_ms); /* no pause declared */
        }
        sleep_ms(step_ms + extra);
        if (report) {
            ecw_progress_step();
        } else {
            printf("test-prog rank=%s step %ld\n", env("RANK"), step + 1);
            fflush(stdout);
        }
        if (*to) {
            char path[1200], tmp[1300];
            snprintf(path, sizeof(path), "%s/step.%s.%d.%s", to, node, lr, env("ECOORD_EPOCH"));
            snprintf(tmp, sizeof(tmp), "%s.tmp", path);
            FILE *f = fopen(tmp, "w");
            if (f) {
                fprintf(f, "%ld\n", step + 1);
                fclose(f);
                rename(tmp, path);
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        long el = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (run > 0 && el >= run)
            return;
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ec-test-prog DUMP_DIR RUN_MS [EXIT_CODE]\n");
        return 2;
    }
    signal(SIGTERM, on_term);
    char path[1024], tmp[1100];
    snprintf(path, sizeof(path), "%s/env.%s.%s.%s", argv[1], env("ECOORD_NODE_ID"),
             env("LOCAL_RANK"), env("ECOORD_EPOCH"));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f) {
        fprintf(f, "PID=%d\n", (int)getpid());
        for (char **e = environ; *e; e++)
            fprintf(f, "%s\n", *e);
        fclose(f);
        rename(tmp, path);
    }
    printf("test-prog rank=%s world=%s epoch=%s\n", env("RANK"), env("WORLD_SIZE"), env("ECOORD_EPOCH"));
    fflush(stdout);
    long run = atol(argv[2]);
    if (atol(env("EC_TEST_PROG_STEP_MS")) > 0) {
        steps(atol(env("EC_TEST_PROG_STEP_MS")), run);
        return term ? 0 : (argc > 3 ? atoi(argv[3]) : 0);
    }
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    char gone[1100] = "";
    if (*env("EC_TEST_PROG_PEER_GONE"))
        snprintf(gone, sizeof(gone), "%s.%s", env("EC_TEST_PROG_PEER_GONE"), env("ECOORD_EPOCH"));
    while (!term) {
        if (gone[0] && access(gone, F_OK) == 0) {
            printf("test-prog rank=%s: a peer of epoch %s is gone; failing\n", env("RANK"),
                   env("ECOORD_EPOCH"));
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        long el = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (run > 0 && el >= run)
            break;
        struct timespec ts = {0, 5 * 1000 * 1000}; /* "training" */
        nanosleep(&ts, NULL);
    }
    return term ? 0 : (argc > 3 ? atoi(argv[3]) : 0);
}
