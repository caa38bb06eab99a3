/* Direct liveness probes between agents, faster than a lease TTL.
 *
 * The prober connects and sends one line, "ecoord? <nonce>\n" (16 random
 * bytes in hex); every agent answers it with one line,
 * "ecoord <node_id> <lease> <proof>\n", the proof an HMAC of the nonce, the
 * id and the lease keyed with its run's secret (coord/core/probe_proof.h).
 * A probe succeeds only when that line arrives within the deadline and,
 * for a prober given a verifier (the agent's), proves membership of the
 * run: a host that is gone, a process that is gone (connection refused), a
 * process that is frozen (SIGSTOP: the kernel still accepts, nobody
 * answers) and a process that is no agent of the run (a stranger on a dead
 * node's port, an agent of an earlier run) all fail it.  Knows nothing of
 * jobs, nor of cryptography: the verifier is a callback, so that the worker
 * library, which probes without one (it checks the id only), links no
 * crypto library.  This is the asking side (the agent and the worker
 * library); the answering side is the agent's (coord/node/probe_server.h).
 * All agents of a run are one version: there is no answer in the older
 * format (a bare "ecoord <node_id>\n") that a prober with a verifier takes. */
#ifndef EC_PROBE_H
#define EC_PROBE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "error.h"
#include "clock.h"
#include "detector.h"

#define EC_PROBE_NONCE_LEN 16
/* "ecoord? " + the nonce in hex + "\n" */
#define EC_PROBE_REQUEST_LEN (8 + 2 * EC_PROBE_NONCE_LEN + 1)
/* The longest answer line a prober reads, '\n' included. */
#define EC_PROBE_ANSWER_MAX 400

/* Checks the proof in an answer: check() returns 1 when line[0..len) (its
 * '\n' included) is expect_id's answer to nonce, proven with the secret the
 * verifier holds, and, when expect_lease is not 0, made under that lease;
 * 0 otherwise.  Must be callable from several threads at once. */
typedef struct ec_probe_verifier ec_probe_verifier_t;
struct ec_probe_verifier {
    int (*check)(const ec_probe_verifier_t *v, const uint8_t *nonce, const char *expect_id,
                 int64_t expect_lease, const char *line, size_t len);
};

typedef struct ec_probe_target {
    const char *host;
    uint16_t port;
    const char *expect_id; /* the node id that must answer (NULL: any) */
    /* NULL: any answer naming expect_id counts (no proof checked: the worker
     * library); else the answer must pass it (needs expect_id). */
    const ec_probe_verifier_t *verify;
    int64_t expect_lease;  /* with verify: the lease the answer must name (0: any) */
    int ok;                /* out: 1 answered, 0 not */
    int64_t rtt_us;        /* out: time to the answer */
    /* out, when not ok: the connection was set up (the host's kernel
     * answered the handshake) connect_us after the start; refused, the
     * port refused it, or what answered there failed the proof (no agent
     * of the run, or one under another lease) */
    int connected, refused;
    int64_t connect_us;
} ec_probe_target_t;

/* The request line for nonce, NUL-terminated, into out (EC_PROBE_REQUEST_LEN
 * + 1 bytes). */
void ec_probe_request_format(const uint8_t *nonce, char *out);
/* Parse a request from buf[0..len): 1 and the nonce when it holds a whole
 * request line, 0 while it is a prefix of one, -1 when it is none. */
int ec_probe_request_parse(const char *buf, size_t len, uint8_t *nonce);
/* n random bytes (getrandom, else /dev/urandom): 0, or -1 (errno set). */
int ec_probe_random(uint8_t *out, size_t n);

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
/* What n attempts at one target found, for the failure detector
 * (detector.h): answered, turned away, connected or nothing; *rtt_us, the
 * fastest answer's round trip, else the fastest handshake's (-1: none). */
ec_probe_outcome_t ec_probe_set_outcome(const ec_probe_target_t *t, size_t n, int64_t *rtt_us);
/* host:port (a numeric address or a name) as a socket address; 0 or -1. */
int ec_probe_sockaddr(const char *host, uint16_t port, struct sockaddr_storage *ss, socklen_t *sl);

#endif
