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
 * of its epoch disappears (the test creates the file after killing one). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
