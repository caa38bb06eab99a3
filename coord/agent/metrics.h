/* The agent's metrics and health endpoints (a face, architecture layer 6).
 *
 * The agent reports what happens to it (an epoch applied, a process failed,
 * a restart, a node event) through the ec_metrics_* calls below; the module
 * keeps the values and, when given a port, serves them over HTTP
 * (libmicrohttpd) in Prometheus' text format:
 *
 *   GET /metrics   the values, text/plain; version=0.0.4
 *   GET /healthz   liveness: 200 "ok" while the agent runs (the HTTP thread
 *                  answering is the check; an etcd outage must not get a pod
 *                  restarted, the lease already handles that)
 *   GET /readyz    readiness: 200 once this node holds a live lease in etcd
 *                  and the last etcd probe succeeded, 503 with the reason
 *                  otherwise
 *
 * When given an etcd client it also probes etcd (Maintenance.Status) every
 * probe_interval_ms from a thread of its own: the probe's latency histogram,
 * its errors by code and an etcd_up gauge are what an operator alerts on.
 *
 * Every ec_metrics_* call is thread-safe and accepts m == NULL (a no-op), so
 * the agent calls them unconditionally whether or not metrics are on.
 * Library code: nothing is printed; HTTP errors go to ec_log.
 */
#ifndef EC_METRICS_H
#define EC_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "etcd.h"
#include "records.h"

typedef struct ec_metrics ec_metrics_t;

/* What this node is doing in the job, as the gauge
 * ecoord_membership_state{state="..."} shows it (exactly one is 1). */
#define EC_MSTATE_MAP(X)              \
    X(JOINING, 0, "joining")          \
    X(MEMBER, 1, "member")            \
    X(STANDBY, 2, "standby")          \
    X(LEAVING, 3, "leaving")          \
    X(DONE, 4, "done")                \
    X(FAILED, 5, "failed")
typedef enum {
#define EC__E(n, v, t) EC_MSTATE_##n = (v),
    EC_MSTATE_MAP(EC__E)
#undef EC__E
    EC_MSTATE__COUNT
} ec_mstate_t;

/* The phases of a membership change whose durations are histograms
 * (ecoord_recovery_phase_seconds{phase="..."}).  decide, plan and publish
 * come from the epoch record the leader wrote; deliver is publication to
 * this agent seeing it (wall clocks of two hosts: clamped at 0); apply is
 * stopping the old processes and starting the new ones; recover is a local
 * process failure to its replacement running in a new epoch; total is the
 * leader observing the change to this node running the new epoch. */
#define EC_PHASE_MAP(X)        \
    X(DECIDE, 0, "decide")     \
    X(PLAN, 1, "plan")         \
    X(PUBLISH, 2, "publish")   \
    X(DELIVER, 3, "deliver")   \
    X(APPLY, 4, "apply")       \
    X(RECOVER, 5, "recover")   \
    X(TOTAL, 6, "total")
typedef enum {
#define EC__E(n, v, t) EC_PHASE_##n = (v),
    EC_PHASE_MAP(EC__E)
#undef EC__E
    EC_PHASE__COUNT
} ec_phase_t;

typedef struct ec_metrics_opts {
    size_t size;             /* sizeof(ec_metrics_opts_t) */
    int port;                /* 1..65535: serve HTTP there; 0: no server (values and
                              * ec_metrics_text() only, as the unit tests use it) */
    const char *bind_addr;   /* NULL: every interface (the kubelet probes the pod IP) */
    const char *job_id;      /* labels of ecoord_info; borrowed, copied */
    const char *node_id;
    const char *version;
    ec_etcd_t *etcd;         /* borrowed, may be NULL: no etcd probe; must outlive m */
    int probe_interval_ms;   /* default 5000 */
} ec_metrics_opts_t;

#define EC_METRICS_OPTS_INIT {.size = sizeof(ec_metrics_opts_t)}

/* Whether this build can serve HTTP (configure found libmicrohttpd). */
bool ec_metrics_http_available(void);

/* Create the values and, when opts->port > 0, start serving them.  Returns
 * NULL with err filled: EC_EINVAL (bad options, or a port given to a build
 * without libmicrohttpd: the message says how to get it), EC_ESYS (the port
 * cannot be bound: in use, or below 1024 without privileges), EC_ENOMEM. */
ec_metrics_t *ec_metrics_create(const ec_metrics_opts_t *opts, ec_error_t *err);
/* Stop the server and the prober, then free.  Accepts NULL; preserves errno. */
void ec_metrics_destroy(ec_metrics_t *m);

/* The agent's reports. */
void ec_metrics_state(ec_metrics_t *m, ec_mstate_t st);
/* An epoch was applied: ep is the epoch now current (borrowed), m_id this
 * node's index in it or -1 (standby), apply_ms how long applying it took.
 * Sets epoch, world size, nodes and state (member or standby), counts it by
 * reason and records the phase durations it carries. */
void ec_metrics_epoch(ec_metrics_t *m, const ec_epoch_t *ep, int m_id, int64_t apply_ms);
/* A training process ended badly (kind: EC_FAILURE_EXITED or _SIGNALED);
 * starts the recover clock if it is not running. */
void ec_metrics_failure(ec_metrics_t *m, ec_failure_kind_t kind);
/* This node restarted its processes after a failure. */
void ec_metrics_restart(ec_metrics_t *m);
/* A node coordinator event line ("+leader n1 rev=5", "-lease 1f lost; ...",
 * "+node n1 registered ... lease=1f", "-node n1 leaving: ..."): leadership
 * and lease gauges follow them.  Other events are ignored. */
void ec_metrics_event(ec_metrics_t *m, const char *event);
/* A node's progress summary (coord/agent/progress.h): the agent's own, and on
 * the leader every member's as it is published; the gauges
 * ecoord_node_step_seconds{node=...} and friends.  At most
 * EC_METRICS_NODES_MAX nodes are kept (the first seen). */
#define EC_METRICS_NODES_MAX 1024
void ec_metrics_progress(ec_metrics_t *m, const char *node_id, const ec_node_progress_t *p);
/* Record one observation of a phase directly (seconds >= 0). */
void ec_metrics_observe(ec_metrics_t *m, ec_phase_t phase, double seconds);

/* The exposition text, exactly what GET /metrics returns: a malloc'd string
 * the caller frees, or NULL (out of memory, or m NULL). */
char *ec_metrics_text(ec_metrics_t *m);
/* Readiness as /readyz answers it: true, or false with why filled. */
bool ec_metrics_ready(ec_metrics_t *m, char *why, size_t len);

const char *ec_mstate_name(ec_mstate_t st);
const char *ec_phase_name(ec_phase_t ph);

#endif
