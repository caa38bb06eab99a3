/* The answering side of the agents' liveness probe (coord/core/probe.h):
 * every connection on the probe port gets "ecoord <node_id>\n" at once. */
#ifndef EC_PROBE_SERVER_H
#define EC_PROBE_SERVER_H

#include <stdint.h>

#include "error.h"

typedef struct ec_probe_server ec_probe_server_t;

/* Listen on host:port (port 0: none, returns NULL without error). */
ec_probe_server_t *ec_probe_serve(const char *host, uint16_t port, const char *node_id,
                                  ec_error_t *err);
void ec_probe_server_stop(ec_probe_server_t *s); /* accepts NULL */

#endif
