/* Agents watching each other: every member's agent probes its
 * EC_RING_WATCHERS successors in the epoch's sorted member order every
 * watch_peers_ms, and reports a peer its failure detector finds silent
 * (coord/core/detector.h: a miss retried at once with more attempts,
 * deadlines that follow the peer's round trips, a silence of at least
 * --peer_pause_tolerance, the prober's own lateness) as a suspect, the way
 * a failed collective is reported
 * (epochs/<n>/suspect/<node>, the union of this agent's reports in the
 * epoch).  From there the leader's path is the usual one (node_evict.c):
 * probe before evicting, evidence from more than one side, a majority of
 * the others to depose a leader (the other followers, seeing a report of
 * the leader, probe it once themselves and add theirs).  A peer that
 * answers again and falls silent later is reported again.  A node whose agent and
 * processes vanish is so found in about a second, whatever its peers'
 * processes are doing, instead of after its lease TTL.
 *
 * Its own thread, so that a probe's deadline never delays the loop; it
 * reads the epoch the model publishes (ec__node_epoch_copy) and its
 * successors' records (host, probe port, a get each) when the epoch
 * changes, and never waits for the loop. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keys.h"
#include "clock.h"
#include "detector.h"
#include "log.h"
#include "node_impl.h"

typedef struct watched {
    char *id, *host;
    uint16_t port;
    int64_t lease;      /* its record's: the lease its answers must name */
    ec_detect_peer_t d; /* its probe history (detector.h) */
    bool measured;      /* its first answer was logged */
} watched_t;

static void clear(watched_t *w, size_t *nw)
{
    for (size_t i = 0; i < *nw; i++) {
        free(w[i].id);
        free(w[i].host);
    }
    *nw = 0;
}

/* Wait until `ms` passed or the node stops or leaves; returns whether it
 * does (ec__ring_wake: set, then broadcast under ring.lock). */
static bool pause_ms(ec_node_t *n, int64_t ms)
{
    struct timespec ts = ec_deadline_ts(ms);
    pthread_mutex_lock(&n->ring.lock);
    while (!ec__node_stopping(n) &&
           pthread_cond_timedwait(&n->ring.cond, &n->ring.lock, &ts) == 0)
        ;
    pthread_mutex_unlock(&n->ring.lock);
    return ec__node_stopping(n);
}

/* Read peer id's record (its host and probe port; no lock held): whether
 * it exists, was written by an agent (leased) and names a probe port. */
static bool read_peer(ec_node_t *n, const char *id, watched_t *v)
{
    char key[EC_KEY_MAX];
    if (ec_key_node(&n->keys, id, key, sizeof(key)) < 0)
        return false;
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(n->c, key, &kv, &found, NULL, NULL) < 0 || !found)
        return false;
    ec_node_rec_t *rec = NULL;
    bool ok = kv.lease && ec_node_rec_decode(kv.value, kv.value_len, NULL, &rec, NULL) == 0 &&
              !strcmp(rec->node_id, id) && rec->probe_port;
    if (ok)
        *v = (watched_t){.id = strdup(id), .host = strdup(rec->host), .port = rec->probe_port,
                         .lease = kv.lease};
    ec_node_rec_free(rec);
    ec_kv_free(&kv);
    return ok;
}

/* The peers this node watches in the current epoch, keeping the miss
 * counts of those it watched already.  Their records (host, probe port)
 * are read when the epoch changes: a follower's model holds no other
 * node's record.  Returns the epoch number (0: not a member of an epoch,
 * nothing to watch). */
static uint64_t refresh(ec_node_t *n, watched_t *w, size_t *nw, uint64_t *read_for)
{
    if (*read_for && ec_node_epoch_number(n) == *read_for)
        return *read_for; /* the same epoch: the same successors */
    char *succ[EC_RING_WATCHERS];
    size_t k = 0;
    uint64_t number = 0;
    bool oom;
    ec_epoch_t *ep = ec__node_epoch_copy(n, &oom);
    if (ep && ep->nmembers >= 2 && ec_epoch_find_member(ep, n->node_id) >= 0) {
        const char **ids = calloc((size_t)ep->nmembers, sizeof(char *));
        if (ids) {
            for (int i = 0; i < ep->nmembers; i++)
                ids[i] = ep->members[i].node_id;
            size_t idx[EC_RING_WATCHERS];
            k = ec_ring_watched(ids, (size_t)ep->nmembers, n->node_id, EC_RING_WATCHERS, idx);
            for (size_t j = 0; j < k; j++)
                succ[j] = strdup(ids[idx[j]]);
            number = ep->number;
            free(ids);
        }
    }
    ec_epoch_free(ep);
    if (!number) {
        clear(w, nw);
        *read_for = 0;
        return 0;
    }
    if (number == *read_for) {
        for (size_t j = 0; j < k; j++)
            free(succ[j]);
        return number;
    }
    watched_t nwv[EC_RING_WATCHERS];
    size_t nn = 0;
    for (size_t j = 0; j < k; j++) {
        watched_t v;
        /* no record (gone already: the planner sees that) or no probe port
         * (an agent that does not answer probes): nothing to watch */
        if (succ[j] && read_peer(n, succ[j], &v)) {
            ec_detect_start(&v.d, ec_mono_ms());
            for (size_t i = 0; i < *nw; i++)
                if (!strcmp(w[i].id, v.id) && w[i].port == v.port) {
                    v.d = w[i].d;
                    v.measured = w[i].measured;
                }
            nwv[nn++] = v;
        }
        free(succ[j]);
    }
    clear(w, nw);
    for (size_t j = 0; j < nn; j++)
        w[(*nw)++] = nwv[j];
    /* a peer not read (gone, or etcd failed) is read again next round */
    *read_for = nn == k ? number : 0;
    return number;
}

/* Probe every watched peer once: a set of ec_detect_attempts() attempts
 * each (one while it answers, more at once after a miss), all under the
 * longest of their deadlines, and account what each set found.  Returns
 * how late the round ended past that deadline (the prober's own lateness:
 * it was starved or stopped). */
static int64_t probe_round(ec_node_t *n, watched_t *w, size_t nw, const ec_detect_opts_t *o,
                           int health, int64_t *deadline)
{
    ec_probe_target_t t[EC_RING_WATCHERS * EC_DETECT_FANOUT];
    size_t nt = 0, first[EC_RING_WATCHERS], count[EC_RING_WATCHERS];
    int64_t d = 0;
    for (size_t i = 0; i < nw; i++) {
        first[i] = nt;
        count[i] = (size_t)ec_detect_attempts(&w[i].d);
        for (size_t k = 0; k < count[i]; k++)
            t[nt++] = (ec_probe_target_t){.host = w[i].host, .port = w[i].port,
                                          .expect_id = w[i].id, .verify = ec__reg_verify(n),
                                          .expect_lease = w[i].lease};
        int64_t di = ec_detect_deadline_ms(&w[i].d, o, health, ec_mono_ms());
        d = di > d ? di : d;
    }
    int64_t t0 = ec_mono_ms();
    ec_probe_many(t, nt, (int)d);
    int64_t now = ec_mono_ms();
    for (size_t i = 0; i < nw; i++) {
        int64_t rtt;
        ec_probe_outcome_t r = ec_probe_set_outcome(t + first[i], count[i], &rtt);
        ec_detect_observe(&w[i].d, r, rtt, d, now);
        if (r == EC_PROBE_ANSWERED && !w[i].measured) {
            /* once per peer watched: what its reports will carry */
            w[i].measured = true;
            ec_log(EC_LOG_INFO, "ring: watching %s at %s:%u, first answer in %.2f ms", w[i].id,
                   w[i].host, w[i].port, (double)rtt / 1000.0);
        }
    }
    *deadline = d;
    int64_t late = now - t0 - d;
    return late > 0 ? late : 0;
}

static void *ring(void *arg)
{
    ec_node_t *n = arg;
    watched_t w[EC_RING_WATCHERS];
    size_t nw = 0;
    uint64_t reported_epoch = 0;
    char reported[512] = "";
    int64_t every = n->o.watch_peers_ms;
    ec_detect_opts_t o = {.interval_ms = every, .floor_ms = n->o.probe_timeout_ms,
                          .tolerance_ms = n->o.peer_pause_tolerance_ms > 0
                                              ? n->o.peer_pause_tolerance_ms : 700};
    int health = 0;
    uint64_t read_for = 0;
    int64_t wait = every;
    for (;;) {
        int64_t slept = ec_mono_ms();
        if (pause_ms(n, wait))
            break;
        health = ec_detect_health(health, ec_mono_ms() - slept - wait, every);
        uint64_t epoch = refresh(n, w, &nw, &read_for);
        wait = every;
        if (!epoch || !nw)
            continue;
        if (epoch != reported_epoch) {
            reported_epoch = epoch;
            reported[0] = '\0';
        }
        int64_t d;
        int64_t late = probe_round(n, w, nw, &o, health, &d);
        if (late)
            health = ec_detect_health(health, late, every);
        /* An answer that fails its proof (no agent of this run, or one
         * under another lease than the record we read) counts as a
         * refusal; the records are read again next round, so that a peer
         * that registered again (a new lease, the same epoch) is not taken
         * for gone on a stale lease. */
        const char *silent[EC_RING_WATCHERS];
        char entry[EC_RING_WATCHERS][EC_DETECT_ENTRY_MAX]; /* fits any id and round trip */
        const watched_t *v = NULL; /* the first silent one, for the line below */
        size_t ns = 0;
        char list[512] = "";
        int64_t now = ec_mono_ms();
        for (size_t i = 0; i < nw; i++) {
            if (w[i].d.misses)
                read_for = 0;
            int64_t next = ec_detect_next_ms(&w[i].d, &o);
            wait = next < wait ? next : wait;
            if (ec_detect_verdict(&w[i].d, now, &o, health) != EC_DETECT_REPORT)
                continue;
            /* with our round trip to it: the leader's probe then takes no
             * handshake on a link we measured fast for its host gone */
            ec_detect_entry_format(entry[ns], sizeof(entry[ns]), w[i].id, w[i].d.rtt_us);
            silent[ns] = entry[ns];
            v = v ? v : &w[i];
            ns++;
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", ns > 1 ? "," : "",
                     w[i].id);
        }
        /* once per epoch and set of silent peers: the report stays in etcd;
         * once they all answer again, a later silence is reported again (a
         * newer sighting: the leader probes a peer it found alive again) */
        if (!ns)
            reported[0] = '\0';
        if (!ns || !strcmp(list, reported))
            continue;
        ec__node_emit(n, "+peer %s silent: %s for %lld ms (%d failed rounds of probes, deadline "
                         "%lld ms, round trip %.2f ms, health %d); reporting", list,
                      v->d.refused >= 2 ? "turned away" : "no answer",
                      (long long)(now - v->d.last_answer_ms), v->d.misses, (long long)d,
                      (double)v->d.rtt_us / 1000.0, health);
        ec_error_t err = {0};
        if (ec_node_report_suspects(n, epoch, silent, ns, &err) < 0)
            ec_log(EC_LOG_WARN, "cannot report silent peers %s: %s; retrying", list, err.msg);
        else
            snprintf(reported, sizeof(reported), "%s", list);
    }
    clear(w, &nw);
    return NULL;
}

int ec__node_ring_start(ec_node_t *n, ec_error_t *err)
{
    if (n->o.watch_peers_ms <= 0 || !n->o.probe_port)
        return 0; /* disabled; or this agent answers no probes, nor watches */
    n->ring.started = true; /* before the thread runs, as the loop's */
    if (pthread_create(&n->ring.thread, NULL, ring, n) != 0) {
        n->ring.started = false;
        return ec_errorf(err, EC_ESYS, "cannot start the thread that watches peer agents");
    }
    return 0;
}

void ec__node_ring_join(ec_node_t *n)
{
    if (n->ring.started)
        pthread_join(n->ring.thread, NULL);
    n->ring.started = false;
}

void ec__ring_init(ec_node_t *n, const pthread_condattr_t *ca)
{
    pthread_mutex_init(&n->ring.lock, NULL);
    pthread_cond_init(&n->ring.cond, ca);
}

void ec__ring_wake(ec_node_t *n)
{
    pthread_mutex_lock(&n->ring.lock);
    pthread_cond_broadcast(&n->ring.cond);
    pthread_mutex_unlock(&n->ring.lock);
}

void ec__ring_fini(ec_node_t *n)
{
    pthread_cond_destroy(&n->ring.cond);
    pthread_mutex_destroy(&n->ring.lock);
}
