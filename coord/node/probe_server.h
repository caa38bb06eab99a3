/* The answering side of the agents' liveness probe (coord/core/probe.h):
 * every connection on the probe port that sends a request
 * ("ecoord? <nonce>\n") gets "ecoord <node_id> <lease> <proof>\n" at once,
 * the proof made with the run's secret (coord/core/probe_proof.h). */
#ifndef EC_PROBE_SERVER_H
#define EC_PROBE_SERVER_H

#include <stdint.h>

#include "error.h"

typedef struct ec_probe_server ec_probe_server_t;

/* Listen on host:port (port 0: none, returns NULL without error), proving
 * answers with secret (EC_PROBE_SECRET_LEN bytes, copied) under lease (the
 * node record's lease; ec_probe_server_set_lease when it changes). */
ec_probe_server_t *ec_probe_serve(const char *host, uint16_t port, const char *node_id,
                                  const uint8_t *secret, int64_t lease, ec_error_t *err);
/* The lease answers name from now on (a new registration).  Accepts NULL. */
void ec_probe_server_set_lease(ec_probe_server_t *s, int64_t lease);
void ec_probe_server_stop(ec_probe_server_t *s); /* accepts NULL */

#endif
