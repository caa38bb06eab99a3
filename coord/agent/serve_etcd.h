/* The job's etcd at the agent's start: the one a node serves, where
 * torchrun's rendezvous has one
 * node host the store the others meet at: the static rendezvous (node_rank
 * 0 at --master_addr:--master_port) and c10d (the node --rdzv_endpoint
 * names).  ecoord's store is etcd: that node runs an etcd of its own
 * (coord/etcd/embed.h) listening on that address and port, and every node,
 * itself included, coordinates through it (cfg->torchrun, knobs.h).
 *
 * The etcd is plain HTTP without authentication, listening on every
 * interface at that port, as torchrun's TCPStore does; it lives as long as
 * the serving agent, which lingers at exit until the other nodes have read
 * the job's end. */
#ifndef EC_SERVE_ETCD_H
#define EC_SERVE_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "embed.h"
#include "error.h"
#include "etcd.h"
#include "knobs.h"

/* Whether host (a name or an address) is this machine's: "localhost", a
 * loopback address, or an address a socket can bind to here.  ip gets the
 * address it resolved to (numeric, no brackets). */
bool ec_serve_is_local(const char *host, char *ip, size_t iplen);

/* The etcd this node serves under cfg->torchrun.serve: 0, none (*out NULL);
 * 1, this node serves it: an etcd listening at serve_port on every
 * interface, or an error (the port is taken, etcd missing);
 * 2, it does if serve_host is this machine's and the port is free, else
 * *out NULL and the node is a client of the one that does (why says which,
 * for the console).  base: the embedded etcd's options (binary, PATH,
 * TMPDIR), copied.  Returns 0 or an error code with err. */
int ec_serve_etcd_start(const ec_config_t *cfg, const ec_embed_opts_t *base, ec_embed_t **out,
                        char *why, size_t len, ec_error_t *err);

/* Connect to cfg's etcd, which another node serves and may not have
 * started yet: retried while the failure may pass by itself (not reachable
 * yet) until deadline_ms (CLOCK_MONOTONIC ms; 0: as long as it takes).
 * The last error in err when it gives up. */
ec_etcd_t *ec_serve_connect(const ec_config_t *cfg, int64_t deadline_ms, ec_error_t *err);

/* Connect to cfg's etcd (--elastic_server) at the agent's start, waiting
 * up to cfg->etcd_wait_ms for one that does not answer yet (etcd's pods
 * started with the job's, etcd restarting): the first failure is logged at
 * once with what to check, a line every 10 s while it waits, and one when
 * etcd answers.  Only a failure that may pass by itself is waited for
 * (ec_etcd_error_may_pass: not reachable yet); anything else (a TLS etcd
 * reached plain, a failed handshake, a refused login) and the last failure
 * at the deadline end it, in err (a line before it names --etcd_wait). */
ec_etcd_t *ec_serve_wait_connect(const ec_config_t *cfg, ec_error_t *err);

/* The serving node at exit: wait until no node of the job other than
 * cfg->node_id is registered (they read the job's end, or leave, through
 * this etcd), at most timeout_ms.  Returns how many were still there. */
int ec_serve_linger(ec_etcd_t *c, const ec_config_t *cfg, int64_t timeout_ms);

#endif
