/* When a watched peer's agent is reported silent: a failure detector in the
 * spirit of SWIM with Lifeguard (HashiCorp memberlist), as pure decisions
 * over one peer's probe history (no I/O, no clock reads; the caller passes
 * the time), unit-tested over simulated histories in
 * coord/core/test/test_detector.c and measured by tests/bench/bench_detector.
 *
 * One probe of a fixed 250 ms deadline and two misses in a row evicted a
 * member behind a link losing 30 % of its packets 7 times a minute (a lost
 * SYN costs TCP a second) and kept one behind a 400 ms round trip out.  So:
 *  - a probe is a *set* of attempts (fresh connections): one while the peer
 *    answers, EC_DETECT_FANOUT at once as soon as it missed, so that one
 *    lost packet never counts as silence (each attempt is an independent
 *    handshake);
 *  - a set's deadline follows the peer's round trips (EC_DETECT_RTT_FACTOR
 *    times an estimate that rises at once and decays slowly), at least the
 *    floor (250 ms), doubled after a set in which not even the TCP
 *    handshake completed (the link, not the agent, may be slow), at most
 *    the ceiling; after a miss, as long as the tolerance has left;
 *  - a peer is reported only after two failed sets in a row *and* a silence
 *    (time since its last answer) of at least the pause tolerance
 *    (--peer_pause_tolerance); one refusing the connection twice in a row
 *    (its agent is gone) at once;
 *  - the prober's own lateness (its loop woke or read late: it was starved
 *    or stopped itself) raises a local health score that stretches both the
 *    deadline and the tolerance (Lifeguard's local health multiplier), and
 *    decays one step per punctual round. */
#ifndef EC_DETECTOR_H
#define EC_DETECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EC_DETECT_FANOUT 8       /* attempts at once after a miss */
#define EC_DETECT_RTT_FACTOR 3   /* deadline = factor x the round-trip estimate */
#define EC_DETECT_FLOOR_MS 250   /* the least deadline */
#define EC_DETECT_CEIL_MS 2000   /* the most, health included */
#define EC_DETECT_HEALTH_MAX 3   /* tolerance and deadline stretch to x(1 + health) */

typedef struct ec_detect_opts {
    int64_t interval_ms;  /* between probes of a peer that answers */
    int64_t floor_ms;     /* least deadline of a set (0: EC_DETECT_FLOOR_MS) */
    int64_t tolerance_ms; /* silence a peer may show before it is reported */
} ec_detect_opts_t;

/* What one set of attempts found, best first: an answer proving the peer
 * (rtt: the fastest); a refusal, a reset or a wrong answer, and no answer
 * (nobody of ours listens on its port: only its host sends that, lost
 * packets do not); no answer but a completed handshake (its host's kernel
 * is there: rtt is the handshake's; one that took more than half the
 * deadline is no evidence of silence, the link is slow); nothing at all. */
typedef enum {
    EC_PROBE_ANSWERED = 1,
    EC_PROBE_CONNECTED,
    EC_PROBE_NOTHING,
    EC_PROBE_REFUSED,
} ec_probe_outcome_t;

typedef struct ec_detect_peer {
    int64_t last_answer_ms; /* its last answer (or when watching began) */
    int64_t rtt_us;         /* round-trip estimate (0: none yet) */
    int64_t backoff_ms;     /* a deadline grown after sets without a handshake */
    int misses;             /* failed sets in a row */
    int refused;            /* sets refused in a row */
} ec_detect_peer_t;

typedef enum {
    EC_DETECT_ALIVE = 1, /* it answered: probe again after the interval */
    EC_DETECT_RETRY,     /* missed, not enough to report: probe again (ec_detect_next_ms) */
    EC_DETECT_REPORT,    /* report it as a suspect */
} ec_detect_verdict_t;

/* Begin watching a peer at now_ms (nothing known of it). */
void ec_detect_start(ec_detect_peer_t *p, int64_t now_ms);
/* How many attempts the next set makes: 1 while it answers, else FANOUT. */
int ec_detect_attempts(const ec_detect_peer_t *p);
/* The deadline, in ms, of a set starting at now_ms, for a prober of local
 * health `health`: factor x the round-trip estimate, the floor or the
 * backoff, whichever is longest, times (1 + health), at most the ceiling
 * (or the tolerance, when longer); after a miss, at least what is left of
 * the tolerance, so that an agent answering within it is never reported. */
int64_t ec_detect_deadline_ms(const ec_detect_peer_t *p, const ec_detect_opts_t *o, int health,
                              int64_t now_ms);
/* How long after a set with verdict v the next one starts: at once after a
 * first miss (a retry within the round), else the interval. */
int64_t ec_detect_next_ms(const ec_detect_peer_t *p, const ec_detect_opts_t *o);
/* Account a set that ended at now_ms: its outcome, the round trip it
 * measured (answered or connected; else ignored) and the deadline it had. */
void ec_detect_observe(ec_detect_peer_t *p, ec_probe_outcome_t r, int64_t rtt_us,
                       int64_t deadline_ms, int64_t now_ms);
/* The verdict after the sets observed so far, at now_ms. */
ec_detect_verdict_t ec_detect_verdict(const ec_detect_peer_t *p, int64_t now_ms,
                                      const ec_detect_opts_t *o, int health);
/* The prober's local health after a round that started or ended `late_ms`
 * after it should have: +1 when later than half the interval (and 50 ms),
 * else -1; within [0, EC_DETECT_HEALTH_MAX]. */
int ec_detect_health(int health, int64_t late_ms, int64_t interval_ms);
/* The outcome of a set from its attempts' (answered, connected, refused). */
ec_probe_outcome_t ec_detect_outcome(int answered, int connected, int refused, int attempts);
/* A confirmation probe of a reported peer (the leader's, a follower's of the
 * leader, a readmission's): after its `sets`-th set ended with r (rtt_us:
 * the handshake's, when connected) under deadline_ms, the deadline of one
 * more set, or 0 when r is final.  The first set in which not even the
 * handshake completed earns one more with twice the deadline (unless its
 * reporter measured the link fast: ec_detect_known_fast), and a set
 * whose handshake took more than half its deadline one with factor x two
 * handshakes (at most the ceiling): the link is slower than the deadline,
 * which a frozen agent's kernel (it completes handshakes at once) or a
 * refusal rule out. */
int64_t ec_detect_confirm_again_ms(ec_probe_outcome_t r, int64_t rtt_us, int64_t deadline_ms,
                                   int sets, int64_t known_rtt_us);
/* Whether a round trip its reporter measured (known_rtt_us; 0: none) is
 * fast for a set of deadline_ms: twice factor x the round trip fits in it
 * (at the 250 ms floor, up to 41 ms).  No handshake to a whole set of such
 * a link is final: its host is gone or cut off (a link whose round trip
 * jumps from there to past the deadline at once is taken for that too). */
bool ec_detect_known_fast(int64_t known_rtt_us, int64_t deadline_ms);
/* How many attempts the `sets`-th set of a confirmation makes, f being its
 * attempts per set (ec_detect_confirm_attempts) under deadline_ms: twice
 * EC_DETECT_FANOUT for the first set on a link its reporter measured fast,
 * since no handshake is final there (so that a lossy link gets, within the
 * one set, the chances the second would have given), else f.  A reduced f
 * (a large job's burst) is never raised. */
int ec_detect_confirm_set_attempts(int f, int sets, int64_t known_rtt_us, int64_t deadline_ms);
#define EC_DETECT_FANOUT_MAX (2 * EC_DETECT_FANOUT)
/* A report names each suspect as "<id>", or as "<id>@<rtt_us>" when its
 * reporter measured the link to it (the ring's watchers: their round-trip
 * estimate), which the confirming prober passes to
 * ec_detect_confirm_again_ms as known_rtt_us.  Node ids have no '@'. */
#define EC_DETECT_ENTRY_MAX 280 /* a node id (253) and "@" and a round trip */
/* Write entry `id` (with rtt_us when > 0) into buf; its length, or -1 when
 * it does not fit. */
int ec_detect_entry_format(char *buf, size_t len, const char *id, int64_t rtt_us);
/* The length of the id that starts entry e (up to '@', ',' or its end). */
size_t ec_detect_entry_id_len(const char *e);
/* The round trip entry e carries (0: none or unreadable). */
int64_t ec_detect_entry_rtt_us(const char *e);

/* The first set's deadline of a readmission probe of a node held out after
 * an eviction, `failed` readmission probes of it having failed: the
 * confirmation's (the floor) for the first, then the tolerance (at least the
 * floor, at most the ceiling): a node whose agent answers within the
 * tolerance, even behind a fast handshake, is alive by the ring's own rule. */
int64_t ec_detect_readmit_deadline_ms(int failed, int64_t tolerance_ms, int64_t floor_ms);
/* How many attempts a confirmation makes when `probers` nodes confirm at
 * once (every follower of a reported leader): EC_DETECT_FANOUT up to 512,
 * then fewer, one from 4,096 on, so that their burst stays within the
 * 4,096 connections the leader's accept queue holds (tests/bench/bench_ring). */
#define EC_DETECT_BURST_MAX 4096
int ec_detect_confirm_attempts(size_t probers);
/* The deadline of a confirmation's first set given a round-trip estimate
 * (0: none): max(floor, factor x rtt), at most the ceiling. */
int64_t ec_detect_confirm_deadline_ms(int64_t rtt_us, int64_t floor_ms);

#endif
