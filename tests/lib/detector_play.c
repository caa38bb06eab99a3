/* The detector played with real probes: see detector_play.h. */
#define _GNU_SOURCE
#include "detector_play.h"

#include <time.h>

#include "clock.h"
#include "detector.h"

void ec_play_nap_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static int64_t interval_of(const ec_play_t *p)
{
    return p->interval_ms > 0 ? p->interval_ms : 250;
}

/* One set of f attempts under deadline d: its outcome and round trip. */
static ec_probe_outcome_t probe_set(const ec_play_t *p, int f, int64_t d, int64_t *rtt)
{
    ec_probe_target_t t[EC_DETECT_FANOUT_MAX];
    for (int i = 0; i < f; i++)
        t[i] = p->target;
    ec_probe_many(t, (size_t)f, (int)d);
    return ec_probe_set_outcome(t, (size_t)f, rtt);
}

bool ec_play_confirm(const ec_play_t *p, int failed, int64_t known_rtt_us)
{
    int64_t rtt, d = p->legacy ? 250
                     : failed > 0 ? ec_detect_readmit_deadline_ms(failed, p->tolerance_ms, 0)
                                  : ec_detect_confirm_deadline_ms(0, 0);
    int f = p->legacy ? 1 : EC_DETECT_FANOUT;
    ec_probe_outcome_t r =
        probe_set(p, p->legacy ? 1 : ec_detect_confirm_set_attempts(f, 1, known_rtt_us, d), d, &rtt);
    for (int sets = 1; !p->legacy && r != EC_PROBE_ANSWERED; sets++) {
        d = ec_detect_confirm_again_ms(r, rtt, d, sets, known_rtt_us);
        if (!d)
            break;
        r = probe_set(p, ec_detect_confirm_set_attempts(f, sets + 1, known_rtt_us, d), d, &rtt);
    }
    return r == EC_PROBE_ANSWERED;
}

int64_t ec_play_readmit(const ec_play_t *p, int64_t max_ms)
{
    int64_t t0 = ec_mono_ms();
    for (int failed = 0; ec_mono_ms() - t0 < max_ms; failed++) {
        if (ec_play_confirm(p, failed, 0))
            return ec_mono_ms() - t0;
        ec_play_nap_ms(1000);
    }
    return -1;
}

ec_play_result_t ec_play_watch(const ec_play_t *p, int64_t ms, int64_t dead_at_ms)
{
    ec_play_result_t res = {.found_ms = -1, .readmit_ms = -1};
    int64_t every = interval_of(p);
    ec_detect_opts_t o = {.interval_ms = every, .tolerance_ms = p->tolerance_ms};
    ec_detect_peer_t peer;
    int64_t start = ec_mono_ms(), wait = every;
    ec_detect_start(&peer, start);
    int misses = 0, health = 0;
    bool reported = false;
    while (ec_mono_ms() - start < ms) {
        int64_t slept = ec_mono_ms();
        ec_play_nap_ms(wait); /* the ring's wait between rounds */
        health = ec_detect_health(health, ec_mono_ms() - slept - wait, every);
        int64_t rtt, d = p->legacy ? 250 : ec_detect_deadline_ms(&peer, &o, health, ec_mono_ms());
        ec_probe_outcome_t r = probe_set(p, p->legacy ? 1 : ec_detect_attempts(&peer), d, &rtt);
        bool report;
        if (p->legacy) {
            misses = r == EC_PROBE_ANSWERED ? 0 : misses + 1;
            report = misses >= 2;
        } else {
            ec_detect_observe(&peer, r, rtt, d, ec_mono_ms());
            report = ec_detect_verdict(&peer, ec_mono_ms(), &o, health) == EC_DETECT_REPORT;
            wait = ec_detect_next_ms(&peer, &o);
        }
        if (!report) {
            reported = false;
            continue;
        }
        if (reported)
            continue;
        reported = true;
        res.reports++;
        if (ec_play_confirm(p, -1, peer.rtt_us))
            continue;
        int k = res.evictions++;
        int64_t at = ec_mono_ms();
        if (dead_at_ms >= 0) {
            res.found_ms = at - dead_at_ms;
            return res;
        }
        int64_t in = ec_play_readmit(p, 20000);
        if (k < EC_PLAY_EVICTIONS_MAX) {
            res.evicted_at[k] = at;
            res.readmitted_at[k] = in < 0 ? -1 : ec_mono_ms();
        }
        if (in > res.readmit_ms)
            res.readmit_ms = in;
        ec_detect_start(&peer, ec_mono_ms());
        misses = 0;
        reported = false;
    }
    return res;
}
