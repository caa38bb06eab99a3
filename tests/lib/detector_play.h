/* The failure detector (coord/core/detector.h) played with real probes
 * against one node, the way the agents play it: one watcher's probe rounds
 * (node_ring.c), the leader's confirmation before an eviction and, once
 * evicted, a readmission probe every second (node_evict.c); either by the
 * detector's rules or by the rule it replaced (`legacy`: one probe of
 * 250 ms, two misses in a row, one confirmation of 250 ms).  Only the
 * decisions are the agents' own; the etcd writes around them are left out.
 * For the benchmarks that put a bad link or a paused agent under the probes
 * (tests/bench/bench_detector_relay.c, bench_detector_link.c). */
#ifndef EC_DETECTOR_PLAY_H
#define EC_DETECTOR_PLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "probe.h"

typedef struct ec_play {
    ec_probe_target_t target; /* host, port, expect_id, verify, expect_lease */
    bool legacy;
    int64_t interval_ms;  /* --peer_probe_interval (0: 250) */
    int64_t tolerance_ms; /* --peer_pause_tolerance */
} ec_play_t;

#define EC_PLAY_EVICTIONS_MAX 64

typedef struct ec_play_result {
    int reports, evictions;
    int64_t found_ms;   /* death (dead_at_ms) to eviction, or -1 */
    int64_t readmit_ms; /* the longest readmission, from its first probe (-1: none) */
    /* each eviction's and readmission's time (ec_mono_ms; readmitted -1:
     * not in 20 s), for the first EC_PLAY_EVICTIONS_MAX */
    int64_t evicted_at[EC_PLAY_EVICTIONS_MAX], readmitted_at[EC_PLAY_EVICTIONS_MAX];
} ec_play_result_t;

/* The leader's confirmation (failed < 0) or a readmission probe after
 * `failed` ones failed, of a node whose reporter measured a round trip of
 * known_rtt_us (0: none): whether the node answered. */
bool ec_play_confirm(const ec_play_t *p, int failed, int64_t known_rtt_us);
/* A held node's readmission: a probe every second until one is answered,
 * for at most max_ms; how long that took, or -1. */
int64_t ec_play_readmit(const ec_play_t *p, int64_t max_ms);
/* Watch the node for ms, evicting and readmitting it as the agents do; when
 * dead_at_ms >= 0 (ec_mono_ms), until its first eviction (found_ms). */
ec_play_result_t ec_play_watch(const ec_play_t *p, int64_t ms, int64_t dead_at_ms);

/* Sleep ms (<= 0: not at all): a schedule's wait, never a synchronisation. */
void ec_play_nap_ms(int64_t ms);

#endif
