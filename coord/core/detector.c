/* A peer's failure detector: see detector.h for the rules and why. */
#include "detector.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t floor_of(const ec_detect_opts_t *o)
{
    return o->floor_ms > 0 ? o->floor_ms : EC_DETECT_FLOOR_MS;
}

/* factor x rtt in whole ms, rounded up */
static int64_t rtt_bound_ms(int64_t rtt_us)
{
    return (rtt_us * EC_DETECT_RTT_FACTOR + 999) / 1000;
}

void ec_detect_start(ec_detect_peer_t *p, int64_t now_ms)
{
    *p = (ec_detect_peer_t){.last_answer_ms = now_ms};
}

int ec_detect_attempts(const ec_detect_peer_t *p)
{
    return p->misses ? EC_DETECT_FANOUT : 1;
}

/* The tolerance for a prober of local health `health`. */
static int64_t window_of(const ec_detect_opts_t *o, int health)
{
    return o->tolerance_ms * (1 + health);
}

int64_t ec_detect_deadline_ms(const ec_detect_peer_t *p, const ec_detect_opts_t *o, int health,
                              int64_t now_ms)
{
    int64_t base = max64(max64(floor_of(o), rtt_bound_ms(p->rtt_us)), p->backoff_ms);
    int64_t d = min64(max64(EC_DETECT_CEIL_MS, o->tolerance_ms), base * (1 + health));
    /* after a miss, wait for an answer as long as the tolerance has left:
     * an agent that answers within it is never reported */
    if (p->misses)
        d = max64(d, window_of(o, health) - (now_ms - p->last_answer_ms));
    return d;
}

int64_t ec_detect_next_ms(const ec_detect_peer_t *p, const ec_detect_opts_t *o)
{
    return p->misses == 1 ? 0 : o->interval_ms;
}

/* Rises at once to a longer sample (a slower link is believed from its
 * first answer), decays by an eighth towards shorter ones. */
static void rtt_sample(ec_detect_peer_t *p, int64_t rtt_us)
{
    if (rtt_us <= 0)
        return;
    if (!p->rtt_us || rtt_us > p->rtt_us)
        p->rtt_us = rtt_us;
    else
        p->rtt_us -= (p->rtt_us - rtt_us) / 8;
}

void ec_detect_observe(ec_detect_peer_t *p, ec_probe_outcome_t r, int64_t rtt_us,
                       int64_t deadline_ms, int64_t now_ms)
{
    /* a handshake is half a probe: a request and its answer take as long */
    if (r == EC_PROBE_ANSWERED || r == EC_PROBE_CONNECTED)
        rtt_sample(p, r == EC_PROBE_CONNECTED ? 2 * rtt_us : rtt_us);
    if (r == EC_PROBE_CONNECTED && 2 * rtt_us > deadline_ms * 1000) {
        /* the link is slower than the deadline: no evidence of silence */
        p->misses = p->misses ? p->misses : 1;
        p->refused = 0;
        p->backoff_ms = 0;
        return;
    }
    if (r == EC_PROBE_ANSWERED) {
        p->last_answer_ms = now_ms;
        p->misses = p->refused = 0;
        p->backoff_ms = 0;
        return;
    }
    /* No handshake to a whole set (many attempts follow a miss), or to a
     * peer whose round trip was never measured: the link may be slower
     * than the deadline, the next set waits twice as long.  No handshake to
     * the single attempt of a round on a link measured before is one lost
     * packet's worth of evidence: the set of many that follows keeps the
     * deadline (a host that is gone is reported a round sooner). */
    bool many = p->misses > 0;
    p->misses++;
    p->refused = r == EC_PROBE_REFUSED ? p->refused + 1 : 0;
    if (r == EC_PROBE_CONNECTED)
        p->backoff_ms = 0; /* the link answered: the round trip is known */
    else if (r == EC_PROBE_NOTHING && (many || !ec_detect_known_fast(p->rtt_us, deadline_ms)))
        p->backoff_ms = min64(EC_DETECT_CEIL_MS, 2 * deadline_ms);
}

ec_detect_verdict_t ec_detect_verdict(const ec_detect_peer_t *p, int64_t now_ms,
                                      const ec_detect_opts_t *o, int health)
{
    if (!p->misses)
        return EC_DETECT_ALIVE;
    if (p->refused >= 2)
        return EC_DETECT_REPORT; /* nobody listens, twice: its agent is gone */
    if (p->misses >= 2 && now_ms - p->last_answer_ms >= window_of(o, health))
        return EC_DETECT_REPORT;
    return EC_DETECT_RETRY;
}

int ec_detect_health(int health, int64_t late_ms, int64_t interval_ms)
{
    int h = late_ms > max64(50, interval_ms / 2) ? health + 1 : health - 1;
    return h < 0 ? 0 : h > EC_DETECT_HEALTH_MAX ? EC_DETECT_HEALTH_MAX : h;
}

ec_probe_outcome_t ec_detect_outcome(int answered, int connected, int refused, int attempts)
{
    (void)attempts;
    if (answered)
        return EC_PROBE_ANSWERED;
    /* a refusal (or a wrong answer) comes from the peer's host itself,
     * whatever became of the other attempts */
    if (refused)
        return EC_PROBE_REFUSED;
    return connected ? EC_PROBE_CONNECTED : EC_PROBE_NOTHING;
}

bool ec_detect_known_fast(int64_t known_rtt_us, int64_t deadline_ms)
{
    /* the deadline holds twice what the round trip asks, factor included:
     * a handshake takes at most a sixth of it */
    return known_rtt_us > 0 && 2 * rtt_bound_ms(known_rtt_us) <= deadline_ms;
}

int ec_detect_confirm_set_attempts(int f, int sets, int64_t known_rtt_us, int64_t deadline_ms)
{
    if (sets == 1 && f >= EC_DETECT_FANOUT && ec_detect_known_fast(known_rtt_us, deadline_ms))
        return EC_DETECT_FANOUT_MAX;
    return f;
}

int64_t ec_detect_confirm_again_ms(ec_probe_outcome_t r, int64_t rtt_us, int64_t deadline_ms,
                                   int sets, int64_t known_rtt_us)
{
    if (deadline_ms >= EC_DETECT_CEIL_MS)
        return 0;
    /* no handshake to a whole set on a link its reporter measured fast is
     * its host gone or cut off, not a slow link */
    if (r == EC_PROBE_NOTHING && sets == 1 && !ec_detect_known_fast(known_rtt_us, deadline_ms))
        return min64(EC_DETECT_CEIL_MS, 2 * deadline_ms);
    if (r == EC_PROBE_CONNECTED && 2 * rtt_us > deadline_ms * 1000)
        return min64(EC_DETECT_CEIL_MS, max64(2 * deadline_ms, rtt_bound_ms(2 * rtt_us)));
    return 0;
}

int64_t ec_detect_confirm_deadline_ms(int64_t rtt_us, int64_t floor_ms)
{
    int64_t f = floor_ms > 0 ? floor_ms : EC_DETECT_FLOOR_MS;
    return min64(EC_DETECT_CEIL_MS, max64(f, rtt_bound_ms(rtt_us)));
}

int ec_detect_confirm_attempts(size_t probers)
{
    size_t f = probers ? EC_DETECT_BURST_MAX / probers : EC_DETECT_FANOUT;
    return f < 1 ? 1 : f > EC_DETECT_FANOUT ? EC_DETECT_FANOUT : (int)f;
}

int64_t ec_detect_readmit_deadline_ms(int failed, int64_t tolerance_ms, int64_t floor_ms)
{
    int64_t f = ec_detect_confirm_deadline_ms(0, floor_ms);
    return failed ? min64(EC_DETECT_CEIL_MS, max64(f, tolerance_ms)) : f;
}

int ec_detect_entry_format(char *buf, size_t len, const char *id, int64_t rtt_us)
{
    int k = rtt_us > 0 ? snprintf(buf, len, "%s@%" PRId64, id, rtt_us) : snprintf(buf, len, "%s", id);
    return k < 0 || (size_t)k >= len ? -1 : k;
}

size_t ec_detect_entry_id_len(const char *e)
{
    return strcspn(e, "@,");
}

int64_t ec_detect_entry_rtt_us(const char *e)
{
    size_t k = ec_detect_entry_id_len(e);
    if (e[k] != '@')
        return 0;
    char *end;
    long long v = strtoll(e + k + 1, &end, 10);
    return (*end == '\0' || *end == ',') && end != e + k + 1 && v > 0 ? (int64_t)v : 0;
}
