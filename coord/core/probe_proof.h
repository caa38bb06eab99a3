/* The proof in a probe's answer: that the answering process is
 * an agent of this run of the job, and is the node it names.
 *
 * Every agent of a run holds the run's secret (32 random bytes that the
 * first agent of the run writes under the job's key root, where the others
 * read it: ec__node_fetch_secret, coord/node/node_register.c).  To a
 * probe with nonce N an agent answers
 *
 *     "ecoord <node_id> <lease> <mac>\n"
 *
 * lease its node record's etcd lease in 16 hex digits, mac
 * HMAC-SHA256(secret, "ecoord-probe-1" NUL N lease(8 bytes, big endian)
 * node_id) in 64 hex digits.  Pure: no I/O, OpenSSL's libcrypto for the
 * HMAC.  The agent's alone: the worker library never links it (its probes
 * check the id only; tests/t0050-layering.sh). */
#ifndef EC_PROBE_PROOF_H
#define EC_PROBE_PROOF_H

#include <stddef.h>
#include <stdint.h>

#include "probe.h"

#define EC_PROBE_SECRET_LEN 32

/* The answer of node_id (under lease) to nonce, NUL-terminated, into buf.
 * Returns its length ('\n' included), or -1 when buf is too small or
 * node_id too long (EC_PROBE_ANSWER_MAX + 1 always fits a valid id). */
int ec_probe_answer_make(const uint8_t *secret, const uint8_t *nonce, const char *node_id,
                         int64_t lease, char *buf, size_t len);

/* 1 when line[0..len) is exactly expect_id's answer to nonce made with
 * secret, under expect_lease unless that is 0; 0 for anything else (another
 * secret, nonce, id or lease; a truncated or altered line).  The MAC is
 * compared in constant time. */
int ec_probe_answer_check(const uint8_t *secret, const uint8_t *nonce, const char *expect_id,
                          int64_t expect_lease, const char *line, size_t len);

/* A verifier (probe.h) that checks answers with a run's secret.  Plain
 * value; initialise with ec_probe_key_init, then pass &k->v to probes. */
typedef struct ec_probe_key {
    ec_probe_verifier_t v;
    uint8_t secret[EC_PROBE_SECRET_LEN];
} ec_probe_key_t;
void ec_probe_key_init(ec_probe_key_t *k, const uint8_t *secret);

#endif
