/* ec_proxy: a fault-injecting loopback TCP proxy for etcd (gRPC over
 * HTTP/2) traffic, for tests.
 *
 * It listens on a free 127.0.0.1 port and forwards every accepted connection
 * to the target endpoint, from one thread of its own (a poll loop).  Faults
 * are set for every connection (and new ones) with ec_proxy_set(), or for one
 * connection with ec_proxy_set_conn():
 *
 *   EC_PROXY_PASS          forward both ways (the default); clears a delay
 *   EC_PROXY_DELAY         forward both ways, each chunk held arg ms first
 *   EC_PROXY_PAUSE         hold every byte both ways (a silent etcd: calls and
 *                          keepalives stall; nothing is lost, PASS resumes)
 *   EC_PROXY_DROP_REPLIES  forward client->server; from the next request
 *                          forwarded (HEADERS frame) on, discard
 *                          server->client, and close the connection as soon
 *                          as the server answers (a HEADERS frame on a
 *                          stream), or arg ms (0: 5000) after that request.
 *                          What the server sends before the request (its
 *                          SETTINGS on a new connection) passes.
 *                          A write answered is applied on etcd while its
 *                          client gets an error: an ambiguous commit.
 *   EC_PROXY_DROP_NEXT     one-shot: pass until the client's next request (a
 *                          HEADERS frame), forward it, then discard replies
 *                          and close when the server answers that request
 *                          (or after arg ms, 0: 5000).  Set for all, the
 *                          first connection that fires it puts every
 *                          connection back to PASS.
 *   EC_PROXY_CUT           close the connection(s) now; for all connections
 *                          with arg != 0, refuse new ones too (accept and
 *                          close at once) until another mode is set.
 *
 * The proxy parses HTTP/2 frame headers only (type, stream id) to tell
 * requests and answers apart; it does not decode anything else and works on
 * plaintext (h2c) only.
 *
 * Every wait has a deadline.  Thread-safety: all functions may be called from
 * any thread while the proxy runs; ec_proxy_stop() must be the last call. */
#ifndef EC_ETCD_PROXY_H
#define EC_ETCD_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ec_proxy ec_proxy_t;

typedef enum {
    EC_PROXY_PASS,
    EC_PROXY_DELAY,
    EC_PROXY_PAUSE,
    EC_PROXY_DROP_REPLIES,
    EC_PROXY_DROP_NEXT,
    EC_PROXY_CUT,
} ec_proxy_mode_t;

typedef struct ec_proxy_stats {
    uint64_t accepted;     /* connections accepted and forwarded */
    uint64_t refused;      /* accepted and closed at once (CUT with refuse, or target down) */
    uint64_t open;         /* connections open now */
    uint64_t bytes_up;     /* client -> server, written to the server */
    uint64_t bytes_down;   /* server -> client, written to the client */
    uint64_t dropped_down; /* server -> client bytes discarded */
    uint64_t requests;     /* HEADERS frames client -> server (stream opens) */
    uint64_t answers;      /* HEADERS frames server -> client seen (delivered or not) */
    uint64_t cuts;         /* connections the proxy closed as a fault */
} ec_proxy_stats_t;

/* Start a proxy to target "host:port" (an "http://" prefix is accepted) on a
 * free 127.0.0.1 port.  NULL with errno set when it cannot listen or the
 * target is not a host:port. */
ec_proxy_t *ec_proxy_start(const char *target_host_port);
/* "127.0.0.1:PORT": give this to clients instead of the target. */
const char *ec_proxy_endpoint(const ec_proxy_t *p);
/* Set the mode of every open connection and of those accepted from now on. */
void ec_proxy_set(ec_proxy_t *p, ec_proxy_mode_t mode, long arg);
/* Set the mode of one connection (an id from ec_proxy_conns).  -1 with errno
 * ENOENT when it is no longer open. */
int ec_proxy_set_conn(ec_proxy_t *p, uint64_t conn_id, ec_proxy_mode_t mode, long arg);
/* Ids of the open connections, oldest first, at most max; returns how many. */
size_t ec_proxy_conns(ec_proxy_t *p, uint64_t *ids, size_t max);
/* A snapshot of the counters. */
void ec_proxy_stats(ec_proxy_t *p, ec_proxy_stats_t *out);
/* Wait until at least n requests (HEADERS frames from clients) in total have
 * gone through, or timeout_ms passes: whether they did. */
bool ec_proxy_wait_requests(ec_proxy_t *p, uint64_t n, long timeout_ms);
/* Wait until at least n connections in total were accepted, or timeout_ms. */
bool ec_proxy_wait_accepted(ec_proxy_t *p, uint64_t n, long timeout_ms);
/* Close every connection, stop and join the thread, free.  Accepts NULL. */
void ec_proxy_stop(ec_proxy_t *p);

#endif
