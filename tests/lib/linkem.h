/* A packet-level link emulator for tests and benchmarks (this kernel has no
 * netem): two network namespaces, A and B, each holding one TAP device
 * (10.77.0.1/24 in A, 10.77.0.2/24 in B), and a relay thread in this
 * process that carries every Ethernet frame between the two TAP file
 * descriptors, after a one-way delay and with a loss probability set per
 * direction, or drops everything while the link is frozen.  Unlike a relay
 * above TCP (tests/bench/bench_detector_relay.c) it delays and loses the
 * handshake, ARP and the resends like every other packet, so TCP's own
 * timers (a SYN resent after 1 s, then 2 s) play as on a real link.
 *
 * Needs root (namespaces, /dev/net/tun) and iproute2's `ip`;
 * ec_linkem_create says which is missing so that callers can skip.  The
 * addresses live only inside the two namespaces, so several links (in one
 * process or several) never clash.
 *
 * Code runs on one side in either of two ways: a thread enters a namespace
 * (ec_linkem_enter: setns(CLONE_NEWNET) changes the calling thread only,
 * and the sockets it creates afterwards belong to that namespace for good),
 * or a child process is forked into it (ec_linkem_spawn: a process can be
 * stopped with SIGSTOP, as a paused agent is).  ec_linkem_destroy kills the
 * children it spawned, joins the relay and deletes the namespaces it made
 * (their TAP devices go with them), by name. */
#ifndef EC_LINKEM_H
#define EC_LINKEM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

typedef struct ec_linkem ec_linkem_t;

enum { EC_LINKEM_A = 0, EC_LINKEM_B = 1 };

/* Frames waiting in the delay line at most; more are dropped (counted). */
#define EC_LINKEM_QUEUE_MAX 8192

typedef struct ec_linkem_stats {
    uint64_t forwarded[2]; /* frames from side i delivered to the other */
    uint64_t dropped[2];   /* lost, frozen or over the queue cap */
} ec_linkem_stats_t;

/* Make the two namespaces and TAPs and start the relay with a perfect link.
 * NULL with err filled (and nothing left behind) when that cannot be done:
 * not root, no /dev/net/tun, no `ip`. */
ec_linkem_t *ec_linkem_create(ec_error_t *err);
/* Side's address ("10.77.0.1" for A) and namespace name. */
const char *ec_linkem_addr(const ec_linkem_t *l, int side);
const char *ec_linkem_netns(const ec_linkem_t *l, int side);
/* Frames leaving side `from`: delivered delay_ms later, each lost with
 * probability loss.  Takes effect for frames read from now on. */
void ec_linkem_set(ec_linkem_t *l, int from, int64_t delay_ms, double loss);
/* Both directions at once. */
void ec_linkem_set_both(ec_linkem_t *l, int64_t delay_ms, double loss);
/* Frozen: every frame either way is dropped (a host that is gone, a cable
 * pulled); frames already in the delay line still arrive. */
void ec_linkem_freeze(ec_linkem_t *l, bool frozen);
void ec_linkem_stats(ec_linkem_t *l, ec_linkem_stats_t *out);
/* Move the calling thread into side's namespace; returns an fd of the one
 * it was in, for ec_linkem_leave, or -1 with err filled. */
int ec_linkem_enter(ec_linkem_t *l, int side, ec_error_t *err);
/* Back into the namespace saved by ec_linkem_enter; closes saved. */
int ec_linkem_leave(int saved, ec_error_t *err);
/* Fork a child that enters side's namespace and exits with fn(arg); it is
 * killed when this process dies, and by ec_linkem_destroy.  The child of a
 * threaded process: fn may allocate and start threads (glibc makes that
 * safe after fork) but must not touch l.  The pid, or -1 with err filled. */
pid_t ec_linkem_spawn(ec_linkem_t *l, int side, int (*fn)(void *), void *arg, ec_error_t *err);
/* Kill (SIGKILL) and reap a child that ec_linkem_spawn started; it is
 * forgotten, so that ec_linkem_destroy never signals its pid again. */
void ec_linkem_kill(ec_linkem_t *l, pid_t pid);
/* Stop the relay, kill and reap the children, delete the namespaces.
 * Accepts NULL; preserves errno. */
void ec_linkem_destroy(ec_linkem_t *l);

#endif
