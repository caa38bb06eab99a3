/* The ports check's I/O: every node listens on the ports it reserved for
 * training and connects to every published port of every node (its own
 * included: that proves the published address is really its own).
 *
 * Wire: the prober sends "ECCHK1 <job_id> <node_id> <nonce>\n"; the listener
 * answers "ECCHK1 <node_id> <nonce> <wall clock, us>\n" and lets the prober
 * close first (the TIME_WAIT stays on the prober's side, so training can
 * bind the port right after the check).  The nonce tells the right process
 * from another program or another node behind the same address; the round
 * trip and the wall clock give the clock offset (Cristian's method).
 */
#ifndef EC_CHECK_PORTS_H
#define EC_CHECK_PORTS_H

#include <signal.h>

#include "error.h"
#include "facts.h"

#define EC_CHECK_PROBE_MS 3000 /* all the probes of one node, together */

typedef struct ec_check_listener ec_check_listener_t;

/* Answer hellos on the listening sockets fds[0..nfds) (borrowed: the caller
 * closes them after ec_check_listener_stop) as node_id/nonce, on a thread.
 * 0 and *out, or EC_ESYS. */
int ec_check_listener_start(const int *fds, int nfds, const char *node_id, const char *nonce,
                            ec_check_listener_t **out, ec_error_t *err);
/* Stop (set the flag, join) and free; accepts NULL. */
void ec_check_listener_stop(ec_check_listener_t *l);

/* A node to probe: its published host and ports, and the nonce that must
 * answer. */
typedef struct ec_check_target {
    char node_id[EC_NODE_ID_MAX + 1];
    char nonce[EC_CHECK_NONCE_LEN + 1];
    char host[64];
    int nports;
    int *ports;
} ec_check_target_t;

/* Connect to every port of every target (at most a few hundred at once),
 * all within EC_CHECK_PROBE_MS, and append one ec_check_probe_t per port to
 * self's probes.  self's node id and nonce, and job_id, make the hello.
 * Returns early when *abort becomes nonzero. */
void ec_check_probe_all(const char *job_id, ec_check_facts_t *self, const ec_check_target_t *t,
                        int nt, const volatile sig_atomic_t *abort);

#endif
