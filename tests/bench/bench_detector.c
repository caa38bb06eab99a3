/* The ring's failure detector (coord/core/detector.c) against the rule it
 * replaced (one probe of 250 ms, two misses), over simulated minutes of one
 * member under each bad condition (tests/lib/detector_sim.h: a model of TCP
 * probes over a lossy, slow link; pauses; a starved prober; a dead node):
 * evictions per minute, time out of the job, the longest readmission after
 * it registered again, and the time to find a dead node.
 *
 *   tests/bench/bench_detector [minutes per condition, default 20]
 */
#include <stdio.h>
#include <stdlib.h>

#include "detector_sim.h"

typedef struct cond {
    const char *name;
    ec_sim_t s;
} cond_t;

static void row(const char *rule, const cond_t *c, int minutes)
{
    int ev = 0, rep = 0;
    int64_t out = 0, readmit = -1;
    for (int i = 1; i <= minutes; i++) {
        ec_sim_t s = c->s;
        s.legacy = rule[0] == 'o';
        s.seed = (uint64_t)i;
        ec_sim_result_t r = ec_sim_run(&s);
        ev += r.evictions;
        rep += r.reports;
        out += r.out_ms;
        if (r.readmit_ms > readmit)
            readmit = r.readmit_ms;
    }
    printf("%-34s %-8s %8.2f %8.2f %9.1f %12lld\n", c->name, rule, (double)rep / minutes,
           (double)ev / minutes, (double)out / 1000.0 / minutes, (long long)readmit);
}

static void dead_row(const char *rule, const char *name, ec_sim_t s, int runs)
{
    int64_t worst = -1, sum = 0;
    int found = 0;
    for (int i = 1; i <= runs; i++) {
        s.legacy = rule[0] == 'o';
        s.seed = (uint64_t)i;
        s.dead_at_ms = 10000 + i * 37 % 250;
        ec_sim_result_t r = ec_sim_run(&s);
        if (r.found_ms < 0)
            continue;
        found++;
        sum += r.found_ms;
        if (r.found_ms > worst)
            worst = r.found_ms;
    }
    printf("%-34s %-8s found %d/%d, mean %lld ms, worst %lld ms\n", name, rule, found, runs,
           found ? (long long)(sum / found) : -1LL, (long long)worst);
}

int main(int argc, char **argv)
{
    int minutes = argc > 1 ? atoi(argv[1]) : 20;
    if (minutes < 1)
        minutes = 1;
    ec_sim_t d = {.duration_ms = 60000, .interval_ms = 250, .tolerance_ms = 700,
                  .dead_at_ms = -1};
    cond_t c[10];
    for (int i = 0; i < 10; i++)
        c[i].s = d;
    c[0].name = "30% loss";
    c[0].s.loss = 0.3;
    c[1].name = "200 ms one way";
    c[1].s.delay_ms = 200;
    c[2].name = "200 ms one way, held at start";
    c[2].s.delay_ms = 200;
    c[2].s.start_held = true;
    c[3].name = "1-3 s pauses/10 s";
    c[3].s.pause_every_ms = 10000;
    c[3].s.pause_min_ms = 1000;
    c[3].s.pause_max_ms = 3000;
    c[4].name = "1-3 s pauses/10 s, tolerance 3.5 s";
    c[4].s = c[3].s;
    c[4].s.tolerance_ms = 3500;
    c[5].name = "0.1-0.4 s pauses/2 s";
    c[5].s.pause_every_ms = 2000;
    c[5].s.pause_min_ms = 100;
    c[5].s.pause_max_ms = 400;
    c[6].name = "prober starved (20%: <= 1 s late)";
    c[6].s.starve_p = 0.2;
    c[6].s.starve_max_ms = 1000;
    c[6].s.answer_late_max_ms = 150;
    c[7].name = "answers 1.2-1.5 s late, tol. 3 s";
    c[7].s.answer_late_min_ms = 1200;
    c[7].s.answer_late_max_ms = 1500;
    c[7].s.tolerance_ms = 3000;
    c[8].name = "40% loss";
    c[8].s.loss = 0.4;
    c[9].name = "50% loss";
    c[9].s.loss = 0.5;
    printf("# %d simulated minutes per condition; interval 250 ms, tolerance 700 ms unless said\n",
           minutes);
    printf("%-34s %-8s %8s %8s %9s %12s\n", "condition", "rule", "reports", "evicts",
           "out s", "readmit ms");
    printf("%-34s %-8s %8s %8s %9s %12s\n", "", "", "/min", "/min", "/min", "(worst)");
    for (int i = 0; i < 10; i++) {
        row("old", &c[i], minutes);
        row("detector", &c[i], minutes);
    }
    const char *names[] = {"dead: port refuses", "dead: frozen (no answer)",
                           "dead: host gone (no handshake)", "dead: refuses, 30% loss",
                           "dead: frozen, 30% loss", "dead: host gone, 30% loss"};
    for (int i = 0; i < 6; i++) {
        ec_sim_t s = d;
        s.dead_refuses = i % 3 == 0;
        s.dead_gone = i % 3 == 2;
        s.loss = i >= 3 ? 0.3 : 0;
        dead_row("old", names[i], s, 100);
        dead_row("detector", names[i], s, 100);
    }
    return 0;
}
