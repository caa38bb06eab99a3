/* A simulated ring member and its two watchers, for the failure detector's
 * unit tests (coord/core/test/test_detector.c) and benchmark
 * (tests/bench/bench_detector.c).  It plays the ring (node_ring.c), the
 * leader's confirmation probe and the readmission probe (node_evict.c)
 * over a model of TCP probes on a bad link: every packet (SYN, SYN-ACK,
 * request, answer) lost with probability `loss`, a lost handshake packet
 * sent again after 1 s then 2 s, a lost data packet after 200 ms plus the
 * round trip, doubling; a one-way delay; an agent that pauses (its kernel
 * still completes handshakes; it answers when it resumes), dies (refusing
 * connections, or frozen for good) or is slow to answer; a prober that
 * wakes late (CPU starvation).  Either the detector (coord/core/detector.h)
 * or the rule it replaced (`legacy`: one probe of 250 ms, two misses in a
 * row; one confirmation probe of 250 ms). */
#ifndef EC_DETECTOR_SIM_H
#define EC_DETECTOR_SIM_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ec_sim {
    bool legacy;
    int64_t duration_ms;
    int64_t interval_ms;      /* --peer_probe_interval */
    int64_t tolerance_ms;     /* --peer_pause_tolerance */
    double loss;              /* per packet, each way */
    int64_t delay_ms;         /* one way */
    int64_t pause_every_ms;   /* a pause starts this long after the last ended (0: none) */
    int64_t pause_min_ms, pause_max_ms;
    int64_t dead_at_ms;       /* < 0: never */
    bool dead_refuses;        /* dead: refuses connections (else accepts, never answers) */
    bool dead_gone;           /* dead: its host is gone (no handshake, no refusal) */
    int64_t starve_max_ms;    /* the prober wakes and reads up to this late (0: never) */
    double starve_p;          /* in that many rounds */
    int64_t answer_late_min_ms, answer_late_max_ms; /* the peer's agent answers this late */
    int64_t rejoin_ms;        /* from an eviction to its record again (0: 300) */
    bool start_held;          /* evicted as silent before: held out at 0 until it answers */
    uint64_t seed;
} ec_sim_t;

typedef struct ec_sim_result {
    int reports;              /* the watchers' reports */
    int evictions;
    int64_t found_ms;         /* death to eviction (-1: not found) */
    int64_t out_ms;           /* time spent evicted, rejoining, held out */
    int64_t readmit_ms;       /* longest from a re-registration to readmission (-1: never) */
} ec_sim_result_t;

/* Run one simulation; deterministic for a seed. */
ec_sim_result_t ec_sim_run(const ec_sim_t *s);

#endif
