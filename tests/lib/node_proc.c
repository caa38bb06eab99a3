/* ec-test-node: one coordinator in a process of its own, for integration
 * tests of the coordination core (no training processes).
 *
 *   ec-test-node ENDPOINTS JOB NODE NP_MIN NP_MAX NPROC ELASTIC_MS TTL_S [REPLACE_MS]
 *
 * Prints one line per event ("EPOCH <n> <world> <reason> <node,...>",
 * coordinator events as they come).  SIGTERM: leave gracefully (revoke) and
 * exit 0.  SIGUSR1: bump the incarnation (processes "restarted").  Exits 3
 * when registration fails (duplicate node id), printing the error.
 * On the leader, "PROGRESS <node> seq=<n> step=<s>" for each member's new
 * progress summary (what the hang policy reads).
 * SIGUSR2: print "STATS <k> events=<n> leader=<0|1> plans=<p> watches=<w>", k counting
 * from 1: the watch events its model applied so far (ec_node_watch_events)
 * and the times its planner ran (ec_node_plans).
 *
 * EC_TEST_WEDGE_FILE=PATH: while PATH exists, every epoch callback blocks
 * (polling the file, at most 120 s): the coordinator's loop is wedged while
 * its process and keepalive thread stay alive, for tests of what a wedged
 * leader must give up.
 *
 * EC_TEST_WATCH_PEERS_MS=N: watch the ring successors every N ms (the
 * agent's --peer_probe_interval; off by default here).
 * EC_TEST_PROBE_PORT=P: answer probes on port P instead of the one derived
 * from the node id (a restarted node whose old port someone else holds);
 * without it, a derived probe port another process holds (another test
 * program's node, run beside this one) is passed over for the next slot's. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "etcd.h"
#include "log.h"
#include "node.h"

/* Whether 127.0.0.1:port can be bound now (as the probe server binds it). */
static int port_free(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0)
        return 1; /* let the probe server say what is wrong */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

static volatile sig_atomic_t got_term, got_usr1, got_usr2;
static void on_sig(int s)
{
    if (s == SIGUSR1)
        got_usr1 = 1;
    else if (s == SIGUSR2)
        got_usr2 = 1;
    else
        got_term = 1;
}

static void wedge_while_file_exists(void)
{
    const char *path = getenv("EC_TEST_WEDGE_FILE");
    if (!path || access(path, F_OK) != 0)
        return;
    printf("WEDGED\n");
    fflush(stdout);
    for (int i = 0; i < 120 * 100 && access(path, F_OK) == 0; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    printf("UNWEDGED\n");
    fflush(stdout);
}

static void on_epoch(const ec_epoch_t *ep, void *arg)
{
    (void)arg;
    wedge_while_file_exists();
    printf("EPOCH %llu %d %s ", (unsigned long long)ep->number, ep->world_size,
           ec_epoch_reason_name(ep->reason));
    for (int i = 0; i < ep->nmembers; i++)
        printf("%s%s", i ? "," : "", ep->members[i].node_id);
    printf("\n");
    fflush(stdout);
}

static void on_event(const char *ev, void *arg)
{
    (void)arg;
    printf("EVENT %s\n", ev);
    fflush(stdout);
}

/* the job's status, as an agent acts on it (an ended run: it exits) */
static void on_job(const ec_job_status_t *st, void *arg)
{
    (void)arg;
    printf("JOB %s run %llu\n", ec_job_state_name(st->state), (unsigned long long)st->run);
    fflush(stdout);
}

/* (leader) a member's new progress summary, as the hang policy gets it */
static void on_progress(const char *node_id, const ec_node_progress_t *p, void *arg)
{
    (void)arg;
    printf("PROGRESS %s seq=%llu step=%llu\n", node_id, (unsigned long long)p->seq,
           (unsigned long long)p->step);
    fflush(stdout);
}

static void on_log(ec_log_level_t lvl, const char *msg, void *arg)
{
    (void)arg;
    printf("LOG %s %s\n", ec_log_level_name(lvl), msg);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    setenv(EC_ETCD_POLL_ENV, EC_ETCD_POLL_MS, 0); /* before any thread: etcd.h */
    if (argc < 9) {
        fprintf(stderr, "usage: %s ENDPOINTS JOB NODE NP_MIN NP_MAX NPROC ELASTIC_MS TTL_S [REPLACE_MS]\n",
                argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    ec_log_set_sink(on_log, NULL, EC_LOG_INFO);
    signal(SIGTERM, on_sig);
    signal(SIGINT, on_sig);
    signal(SIGUSR1, on_sig);
    signal(SIGUSR2, on_sig);
    /* Blocked here, before any thread starts (they inherit the mask), and
     * taken only inside sigsuspend below: a signal can neither go to one of
     * the node's threads nor arrive between the flag checks and the wait,
     * either of which left the main loop asleep with the flag set (t2400
     * once waited 10 s for a BUMP that had been signalled). */
    sigset_t ours;
    sigemptyset(&ours);
    sigaddset(&ours, SIGTERM);
    sigaddset(&ours, SIGINT);
    sigaddset(&ours, SIGUSR1);
    sigaddset(&ours, SIGUSR2);
    sigprocmask(SIG_BLOCK, &ours, NULL);
    ec_error_t err = {0};
    ec_etcd_opts_t eo = EC_ETCD_OPTS_INIT;
    eo.endpoints = argv[1];
    ec_etcd_t *c = ec_etcd_create(&eo, &err);
    if (!c) {
        printf("ERROR %s\n", err.msg);
        return 3;
    }
    int nproc = atoi(argv[6]);
    if (nproc < 1 || nproc > 30) {
        printf("ERROR nproc %d: ec-test-node runs 1..30 processes per node\n", nproc);
        return 2;
    }
    uint16_t ports[32];
    /* Distinct fake ports per node so endpoints never collide in an epoch:
     * 32 per node id hash, 19000-31799, below Linux's ephemeral range
     * (32768-60999), where an outgoing connection of any process could
     * hold the probe port, the one really bound.  The etcd endpoint (a free
     * port per test run) is hashed first: two runs on one machine (the TSan
     * step beside another checkout's suite) gave every n1 one probe port,
     * and the second failed "Address already in use".  Ids of one length
     * still get consecutive slots within a run. */
    unsigned h = 0;
    for (const char *p = argv[1]; *p; p++)
        h = h * 31 + (unsigned char)*p;
    for (const char *p = argv[3]; *p; p++)
        h = h * 31 + (unsigned char)*p;
    for (int i = 0; i < nproc; i++)
        ports[i] = (uint16_t)(19000 + (h % 400) * 32 + i);
    ec_node_opts_t o = EC_NODE_OPTS_INIT;
    o.etcd = c;
    o.job_id = argv[2];
    o.node_id = argv[3];
    o.host = "127.0.0.1";
    o.nproc = nproc;
    o.ports = ports;
    o.master_port = (uint16_t)(ports[0] + 31);
    o.probe_port = (uint16_t)(ports[0] + 30);
    for (unsigned k = 1; k < 400 && !port_free(o.probe_port); k++)
        o.probe_port = (uint16_t)(19000 + ((h + k) % 400) * 32 + 30);
    if (getenv("EC_TEST_PROBE_PORT"))
        o.probe_port = (uint16_t)atoi(getenv("EC_TEST_PROBE_PORT"));
    if (getenv("EC_TEST_WATCH_PEERS_MS"))
        o.watch_peers_ms = atoi(getenv("EC_TEST_WATCH_PEERS_MS"));
    o.np_min = atoi(argv[4]);
    o.np_max = atoi(argv[5]);
    o.elastic_timeout_ms = atoll(argv[7]);
    o.lease_ttl_s = atoi(argv[8]);
    o.replace_wait_ms = argc > 9 ? atoll(argv[9]) : 0;
    o.on_epoch = on_epoch;
    o.on_event = on_event;
    o.on_job = on_job;
    o.on_progress = on_progress;
    o.agent_version = "test";
    ec_node_t *n = ec_node_start(&o, &err);
    if (!n) {
        printf("ERROR %s\n", err.msg);
        ec_etcd_destroy(c);
        return 3;
    }
    printf("STARTED %s lease=%llx\n", argv[3], (unsigned long long)ec_node_lease(n));
    sigset_t none;
    sigemptyset(&none);
    int nstats = 0;
    while (!got_term) {
        if (got_usr2) {
            got_usr2 = 0;
            printf("STATS %d events=%llu leader=%d plans=%llu watches=%d\n", ++nstats,
                   (unsigned long long)ec_node_watch_events(n), ec_node_is_leader(n) ? 1 : 0,
                   (unsigned long long)ec_node_plans(n), ec_node_watches_created(n));
            fflush(stdout);
        }
        if (got_usr1) {
            got_usr1 = 0;
            int brc = ec_node_bump_incarnation(n, &err);
            printf("BUMP rc=%d%s%s\n", brc, brc < 0 ? " " : "", brc < 0 ? err.msg : "");
            fflush(stdout);
        }
        sigsuspend(&none); /* wait for the next signal; the node runs on its threads */
    }
    ec_node_leave(n, &err);
    ec_node_stop(n);
    ec_etcd_destroy(c);
    printf("LEFT\n");
    return 0;
}
