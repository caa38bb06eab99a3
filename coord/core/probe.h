/* Direct liveness probes between agents, faster than a lease TTL.
 *
 * Every agent answers on its probe port with one line, "ecoord <node_id>\n".
 * A probe succeeds only when that line arrives within the deadline: a host
 * that is gone, a process that is gone (connection refused) and a process
 * that is frozen (SIGSTOP: the kernel still accepts, nobody answers) all
 * fail it.  Knows nothing of jobs.  This is the asking side (the agent and
 * the worker library); the answering side is the agent's
 * (coord/agent/probe_server.h). */
#ifndef EC_PROBE_H
#define EC_PROBE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "error.h"
#include "clock.h"

typedef struct ec_probe_target {
    const char *host;
    uint16_t port;
    const char *expect_id; /* the node id that must answer (NULL: any) */
    int ok;                /* out: 1 answered, 0 not */
    int64_t rtt_us;        /* out: time to the answer */
} ec_probe_target_t;

/* Probe every target at once; returns when all answered or timeout_ms
 * passed.  Returns the number that answered.  = ec_probe_begin +
 * ec_probe_collect(now + timeout_ms). */
int ec_probe_many(ec_probe_target_t *t, size_t n, int timeout_ms);

/* The same in two steps.  ec_probe_begin sets every t[i].ok = 0 and starts
 * connecting to each target (t stays borrowed until ec_probe_collect); NULL
 * when out of memory.  ec_probe_collect waits for answers until deadline_us
 * (ec_mono_us() clock) and then reads every socket once more without
 * waiting, so that answers that arrived while the caller was stopped or
 * starved past the deadline still count; a target is silent only if nothing
 * is there even then.  It fills t[i].ok and rtt_us, frees the batch (NULL:
 * returns 0) and returns the number that answered. */
typedef struct ec_probe_batch ec_probe_batch_t;
ec_probe_batch_t *ec_probe_begin(ec_probe_target_t *t, size_t n);
int ec_probe_collect(ec_probe_batch_t *b, int64_t deadline_us);
/* Wait for answers until until_us (ec_mono_us clock) or until every target
 * answered or failed, without ending the batch (ec_probe_collect still ends
 * it); returns how many are still waited for.  For a caller that has other
 * work to do between looks (the node coordinator delivering epochs). */
int ec_probe_wait(ec_probe_batch_t *b, int64_t until_us);
/* host:port (a numeric address or a name) as a socket address; 0 or -1. */
int ec_probe_sockaddr(const char *host, uint16_t port, struct sockaddr_storage *ss, socklen_t *sl);

#endif
