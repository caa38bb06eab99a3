/* A lease's keepalive (lease.c), shared by its two drivers: the gRPC
 * client's, over one LeaseKeepAlive stream (lease.c), and the in-memory
 * store's (mem_stream.c).  The state, its lock and what both drivers do
 * with it (declare the lease lost once, ask the gate, wait, count a
 * confirmed refresh) live here once; a driver only refreshes.  Not
 * installed. */
#ifndef EC_ETCD_KEEPALIVE_H
#define EC_ETCD_KEEPALIVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "etcd.h"

struct ec__stream;

struct ec_keepalive {
    ec_etcd_t *c;
    ec_etcd_mem_t *mem;  /* a memory client's store: mem_stream.c drives it */
    int64_t id, ttl_ms;
    ec_lease_lost_cb cb;
    void *arg;
    pthread_t thread;
    pthread_mutex_t lock; /* guards what follows */
    pthread_cond_t cond;
    ec_keepalive_gate_cb gate;
    void *gate_arg;
    bool stop, alive;
    uint64_t count;
    int64_t confirmed_ms;       /* monotonic send time of the newest refresh answered */
    struct ec__stream *stream;  /* the gRPC driver's open stream: stop cancels it */
};

/* The lease is lost (once: the driver ends after it): logged, told. */
void ec__ka_lost(ec_keepalive_t *ka, const char *why);
/* Whether a refresh may go out now (no gate, or the gate says so). */
bool ec__ka_gate_open(ec_keepalive_t *ka);
/* Sleep ms (<= 0: look only) or until stop is asked; true if stopping. */
bool ec__ka_wait(ec_keepalive_t *ka, int64_t ms);
/* A refresh sent at sent_ms (monotonic; < 0: not known) was answered. */
void ec__ka_confirmed(ec_keepalive_t *ka, int64_t sent_ms);

/* The in-memory store's driver (mem_stream.c): the keepalive's thread. */
void *ec__mem_ka_main(void *ka);

#endif
