/* A simulated ring member and its watchers: see detector_sim.h. */
#include "detector_sim.h"
#include "detector.h"

#include <stdlib.h>

#define HOLD_PROBE_EVERY_MS 1000
#define HOLD_MAX_MS 120000
#define REPORT_TO_LEADER_MS 10 /* etcd put + watch */
#define MAXPAUSE 4096

typedef struct sim {
    const ec_sim_t *s;
    uint64_t rng;
    int64_t pause_s[MAXPAUSE], pause_e[MAXPAUSE];
    int npause;
} sim_t;

typedef struct watcher {
    int64_t t; /* when its next round starts */
    ec_detect_peer_t p;
    int health;
    int legacy_misses;
    bool reported;
} watcher_t;

static double uniform(sim_t *m)
{
    m->rng ^= m->rng >> 12;
    m->rng ^= m->rng << 25;
    m->rng ^= m->rng >> 27;
    return (double)((m->rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static int64_t between(sim_t *m, int64_t lo, int64_t hi)
{
    return hi <= lo ? lo : lo + (int64_t)(uniform(m) * (double)(hi - lo + 1));
}

static void plan_pauses(sim_t *m)
{
    const ec_sim_t *s = m->s;
    int64_t t = 0;
    while (s->pause_every_ms > 0 && m->npause < MAXPAUSE) {
        t += between(m, s->pause_every_ms / 2, s->pause_every_ms * 3 / 2);
        if (t >= s->duration_ms)
            break;
        m->pause_s[m->npause] = t;
        t += between(m, s->pause_min_ms, s->pause_max_ms);
        m->pause_e[m->npause++] = t;
    }
}

static int64_t resumes_at(const sim_t *m, int64_t t)
{
    for (int i = 0; i < m->npause; i++)
        if (m->pause_s[i] <= t && t < m->pause_e[i])
            return m->pause_e[i];
    return t;
}

/* Extra delay of one packet sent until it gets through, first resent after
 * rto_ms, doubling. */
static int64_t resends(sim_t *m, double p_lost, int64_t rto_ms)
{
    int64_t extra = 0;
    for (int i = 0; i < 6 && uniform(m) < p_lost; i++, rto_ms *= 2)
        extra += rto_ms;
    return extra;
}

typedef struct attempt {
    bool answered, connected, refused;
    int64_t answer_at, connect_at;
} attempt_t;

static attempt_t attempt(sim_t *m, int64_t t)
{
    const ec_sim_t *s = m->s;
    double l = s->loss, both = 1.0 - (1.0 - l) * (1.0 - l);
    attempt_t a = {0};
    bool dead = s->dead_at_ms >= 0 && t >= s->dead_at_ms;
    if (dead && s->dead_gone)
        return a; /* nothing answers its SYNs */
    if (dead && s->dead_refuses) {
        a.refused = uniform(m) >= both; /* the SYN and its RST got through */
        a.connect_at = t + 2 * s->delay_ms;
        return a;
    }
    a.connect_at = t + 2 * s->delay_ms + resends(m, both, 1000);
    a.connected = true;
    if (dead)
        return a; /* frozen for good: its kernel accepts, nobody answers */
    int64_t rto = 200 + 2 * s->delay_ms;
    int64_t arrives = a.connect_at + s->delay_ms + resends(m, l, rto);
    int64_t sent = resumes_at(m, arrives) + between(m, s->answer_late_min_ms, s->answer_late_max_ms);
    a.answer_at = sent + s->delay_ms + resends(m, l, rto);
    a.answered = true;
    return a;
}

/* A set of n attempts started at t, read until t + deadline + late: its
 * outcome, when it ended and the round trip it measured. */
static ec_probe_outcome_t probe_set(sim_t *m, int64_t t, int n, int64_t deadline, int64_t late,
                                    int64_t *end, int64_t *rtt_us)
{
    int answered = 0, connected = 0, refused = 0;
    int64_t read_by = t + deadline + late, last = t, best = -1, hs = -1;
    for (int i = 0; i < n; i++) {
        attempt_t a = attempt(m, t);
        bool ans = a.answered && a.answer_at <= read_by;
        answered += ans;
        connected += a.connected && a.connect_at <= read_by;
        refused += a.refused;
        if (ans && (best < 0 || a.answer_at - t < best))
            best = a.answer_at - t;
        if (ans && a.answer_at > last)
            last = a.answer_at;
        if (a.connected && a.connect_at <= read_by && (hs < 0 || a.connect_at - t < hs))
            hs = a.connect_at - t;
    }
    *end = answered + refused == n ? last : read_by;
    ec_probe_outcome_t r = ec_detect_outcome(answered, connected, refused, n);
    *rtt_us = (r == EC_PROBE_ANSWERED ? best : hs) * 1000;
    if (*rtt_us <= 0)
        *rtt_us = 100; /* loopback: a tenth of a millisecond */
    return r;
}

/* A confirmation (the leader's probe of a reported peer; a readmission
 * probe after `failed` ones, -1 for the leader's) at t, of a peer whose
 * reporter measured a round trip of known_rtt_us (0: none): whether it
 * answered; *end, when it ended. */
static bool confirm(sim_t *m, int64_t t, int failed, int64_t known_rtt_us, int64_t *end)
{
    int64_t rtt, d = m->s->legacy ? 250
                     : failed > 0 ? ec_detect_readmit_deadline_ms(failed, m->s->tolerance_ms, 0)
                                  : ec_detect_confirm_deadline_ms(0, 0);
    int n = m->s->legacy ? 1 : EC_DETECT_FANOUT;
    ec_probe_outcome_t r = probe_set(
        m, t, m->s->legacy ? 1 : ec_detect_confirm_set_attempts(n, 1, known_rtt_us, d), d, 0, end,
        &rtt);
    for (int sets = 1; !m->s->legacy; sets++) {
        d = ec_detect_confirm_again_ms(r, rtt, d, sets, known_rtt_us);
        if (!d)
            break;
        r = probe_set(m, *end, ec_detect_confirm_set_attempts(n, sets + 1, known_rtt_us, d), d, 0,
                      end, &rtt);
    }
    return r == EC_PROBE_ANSWERED;
}

/* One round of watcher w; whether it reports the peer now. */
static bool round_of(sim_t *m, watcher_t *w, const ec_detect_opts_t *o)
{
    const ec_sim_t *s = m->s;
    int64_t late = uniform(m) < s->starve_p ? between(m, 0, s->starve_max_ms) : 0, end, rtt;
    if (s->legacy) {
        w->t += s->interval_ms + late;
        ec_probe_outcome_t r = probe_set(m, w->t, 1, 250, 0, &end, &rtt);
        w->t = end;
        w->legacy_misses = r == EC_PROBE_ANSWERED ? 0 : w->legacy_misses + 1;
        bool report = w->legacy_misses >= 2 && !w->reported;
        w->reported = w->legacy_misses >= 2;
        return report;
    }
    w->t += ec_detect_next_ms(&w->p, o) + late;
    w->health = ec_detect_health(w->health, late, s->interval_ms);
    int n = ec_detect_attempts(&w->p);
    int64_t d = ec_detect_deadline_ms(&w->p, o, w->health, w->t);
    int64_t late_read = uniform(m) < s->starve_p ? between(m, 0, s->starve_max_ms) : 0;
    ec_probe_outcome_t r = probe_set(m, w->t, n, d, late_read, &end, &rtt);
    w->t = end;
    ec_detect_observe(&w->p, r, rtt, d, w->t);
    ec_detect_verdict_t v = ec_detect_verdict(&w->p, w->t, o, w->health);
    bool report = v == EC_DETECT_REPORT && !w->reported;
    w->reported = v != EC_DETECT_ALIVE && (w->reported || v == EC_DETECT_REPORT);
    return report;
}

/* The evicted peer registers again at t and is held out until it answers
 * a readmission probe (every second, at most HOLD_MAX_MS): when it is in. */
static int64_t readmit(sim_t *m, int64_t t, ec_sim_result_t *res)
{
    int failed = 0;
    for (int64_t at = t, end = t; at < t + HOLD_MAX_MS; at = end + HOLD_PROBE_EVERY_MS, failed++) {
        if (confirm(m, at, failed, 0, &end)) {
            if (end - t > res->readmit_ms)
                res->readmit_ms = end - t;
            return end;
        }
    }
    res->readmit_ms = HOLD_MAX_MS;
    return t + HOLD_MAX_MS;
}

static void watch_from(watcher_t *w, int64_t t, int64_t interval)
{
    for (int i = 0; i < 2; i++) {
        w[i] = (watcher_t){.t = t + interval * i / 2};
        ec_detect_start(&w[i].p, t);
    }
}

ec_sim_result_t ec_sim_run(const ec_sim_t *s)
{
    sim_t *m = calloc(1, sizeof(*m));
    ec_sim_result_t res = {.found_ms = -1, .readmit_ms = -1};
    if (!m)
        return res;
    m->s = s;
    m->rng = s->seed * 0x9E3779B97F4A7C15ULL + 1;
    plan_pauses(m);
    ec_detect_opts_t o = {.interval_ms = s->interval_ms, .tolerance_ms = s->tolerance_ms};
    watcher_t w[2];
    watch_from(w, s->start_held ? readmit(m, 0, &res) : 0, s->interval_ms);
    for (;;) {
        watcher_t *x = w[0].t <= w[1].t ? &w[0] : &w[1];
        if (x->t >= s->duration_ms)
            break;
        if (!round_of(m, x, &o))
            continue;
        res.reports++;
        int64_t end;
        if (confirm(m, x->t + REPORT_TO_LEADER_MS, -1, x->p.rtt_us, &end))
            continue; /* the suspicion is rejected */
        res.evictions++;
        if (s->dead_at_ms >= 0 && end >= s->dead_at_ms) {
            res.found_ms = end - s->dead_at_ms;
            break; /* the dead never come back */
        }
        int64_t in = readmit(m, end + (s->rejoin_ms > 0 ? s->rejoin_ms : 300), &res);
        res.out_ms += in - end;
        watch_from(w, in, s->interval_ms);
    }
    free(m);
    return res;
}
