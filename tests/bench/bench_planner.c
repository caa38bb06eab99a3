/* Planner benchmark: how long one ec_plan() + ec_plan_decision_free() takes
 * on 64/256/1024/4096 nodes of 8 ranks, for a start, a loss with a standby,
 * a loss without one, and a join.  The budget is 5 ms at 4096 nodes.
 *
 * A benchmark, not a test: it prints p50/p99/max in microseconds and exits 0
 * (1 only if the planner decided something other than the scenario expects,
 * which would make the figures meaningless).
 *
 *   bench_planner [iterations]     (default 200)
 */
#include "planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NPROC 8

typedef struct {
    const char *name;
    ec_plan_action_t action;
    ec_epoch_reason_t reason;
} scenario_t;

static const scenario_t scenarios[] = {
    {"start", EC_PLAN_PUBLISH, EC_REASON_START},
    {"loss+standby", EC_PLAN_PUBLISH, EC_REASON_SPARE_PROMOTED},
    {"loss-nostandby", EC_PLAN_PUBLISH, EC_REASON_LOST},
    {"join", EC_PLAN_PUBLISH, EC_REASON_JOIN},
};

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Build scenario s over n nodes into in (nodes and members point into the
 * given arrays).  Node ids look like real host names; the node array is
 * shuffled so that registration order is not array order. */
static void build(int s, size_t n, char (*ids)[64], ec_plan_node_t *nodes,
                  ec_plan_member_t *mem, ec_plan_input_t *in)
{
    size_t spares = n / 16;
    *in = (ec_plan_input_t)EC_PLAN_INPUT_INIT;
    in->config = (ec_plan_config_t){.np_min = (int)(n / 2), .np_max = (int)(n - spares),
                                    .nproc = NPROC, .elastic_timeout_ms = 30000,
                                    .replace_wait_ms = 0};
    for (size_t i = 0; i < n; i++) {
        snprintf(ids[i], 64, "trainer-%05zu.rack%02zu.example.internal", i, i % 64);
        nodes[i] = (ec_plan_node_t){ids[i], NPROC, 1, (int64_t)(1000 + i), EC_NODE_READY, false, 0, 0};
    }
    size_t n_mem = 0;
    switch (s) {
    case 0: /* start: n - n/16 published at once, n/16 standbys */
        break;
    case 1: /* epoch at np_max, member n/3 lost, standbys available */
        n_mem = n - spares;
        break;
    case 2: /* epoch of all n at np_max = n, member n/3 lost, no standby */
        in->config.np_max = (int)n;
        n_mem = n;
        break;
    case 3: /* epoch of n - n/16 below np_max = n; n/16 joiners reach np_max */
        in->config.np_max = (int)n;
        n_mem = n - spares;
        break;
    }
    for (size_t m = 0; m < n_mem; m++)
        mem[m] = (ec_plan_member_t){ids[m], 1};
    in->epoch = (ec_plan_epoch_t){n_mem ? 41 : 0, mem, n_mem};
    size_t nn = n;
    if (s == 1 || s == 2) { /* the lost member's record is gone */
        memmove(&nodes[n / 3], &nodes[n / 3 + 1], (n - n / 3 - 1) * sizeof(*nodes));
        nn--;
        in->since_member_missing_ms = 0;
    }
    for (size_t i = nn; i > 1; i--) {
        size_t j = (size_t)(rnd() % i);
        ec_plan_node_t t = nodes[i - 1];
        nodes[i - 1] = nodes[j];
        nodes[j] = t;
    }
    in->nodes = nodes;
    in->n_nodes = nn;
    in->since_eligible_change_ms = 0;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {64, 256, 1024, 4096};
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    if (iters < 1)
        iters = 200;
    static char ids[4096][64];
    static ec_plan_node_t nodes[4096];
    static ec_plan_member_t mem[4096];
    double *us = malloc((size_t)iters * sizeof(*us));
    int status = 0;
    if (!us)
        return 1;

    printf("# ec_plan() + ec_plan_decision_free(), nproc=%d, %d iterations each\n", NPROC, iters);
    printf("%-16s %6s %10s %10s %10s\n", "scenario", "nodes", "p50_us", "p99_us", "max_us");
    for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
        for (int s = 0; s < (int)(sizeof(scenarios) / sizeof(scenarios[0])); s++) {
            ec_plan_input_t in;
            build(s, sizes[z], ids, nodes, mem, &in);
            for (int i = -10; i < iters; i++) { /* 10 warm-up rounds */
                ec_plan_decision_t *d = NULL;
                ec_error_t err = {0};
                double t0 = now_us();
                int rc = ec_plan(&in, &d, &err);
                double t1 = now_us();
                if (rc < 0) {
                    fprintf(stderr, "%s/%zu: ec_plan failed: %s\n", scenarios[s].name, sizes[z],
                            err.msg);
                    return 1;
                }
                if (d->action != scenarios[s].action || d->reason != scenarios[s].reason) {
                    fprintf(stderr, "%s/%zu: unexpected decision: %s\n", scenarios[s].name,
                            sizes[z], d->log);
                    status = 1;
                }
                double t2 = now_us();
                ec_plan_decision_free(d);
                double t3 = now_us();
                if (i >= 0)
                    us[i] = (t1 - t0) + (t3 - t2);
            }
            qsort(us, (size_t)iters, sizeof(*us), cmp_double);
            printf("%-16s %6zu %10.1f %10.1f %10.1f\n", scenarios[s].name, sizes[z],
                   us[iters / 2], us[(size_t)iters * 99 / 100], us[iters - 1]);
        }
    }
    free(us);
    return status;
}
