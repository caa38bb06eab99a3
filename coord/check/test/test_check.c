/* Rule checked: `ecoord check`'s comparison is a pure function of every
 * node's facts, and each check turns the failure users hit into a FAIL (or
 * WARN) line that names the node and says how to fix it, while healthy facts
 * pass; facts and reports survive their encoding, and corrupt encodings are
 * refused with a message instead of crashing. */
#define _GNU_SOURCE /* open_memstream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_check.h"
#include "ecoord.pb-c.h"
#include "rules.h"

/* A healthy GPU-less node on machine `boot`, probed by nobody yet. */
static void mk(ec_check_facts_t *f, const char *id, const char *boot, int port0)
{
    memset(f, 0, sizeof(*f));
    f->version = EC_CHECK_FACTS_VERSION;
    f->phase = EC_CHECK_PHASE_DONE;
    snprintf(f->node_id, sizeof(f->node_id), "%s", id);
    snprintf(f->nonce, sizeof(f->nonce), "%016x", (unsigned)port0);
    snprintf(f->hostname, sizeof(f->hostname), "host-%s", boot);
    snprintf(f->boot_id, sizeof(f->boot_id), "%s", boot);
    f->pid = port0;
    snprintf(f->etcd, sizeof(f->etcd), "10.0.0.9:2379");
    snprintf(f->etcd_version, sizeof(f->etcd_version), "3.4.23");
    f->etcd_rtt_us = 400;
    f->etcd_rtt_max_us = 900;
    snprintf(f->host, sizeof(f->host), "10.0.0.%d", port0 % 200);
    snprintf(f->ifname, sizeof(f->ifname), "eth0");
    ec_check_facts_add_iface(f, "lo", "127.0.0.1", 1);
    ec_check_facts_add_iface(f, "eth0", f->host, 1);
    f->nproc = 1;
    f->nports = 2;
    f->ports = calloc(2, sizeof(int));
    f->ports[0] = port0;
    f->ports[1] = port0 + 1;
    snprintf(f->driver_why, sizeof(f->driver_why), "no NVIDIA driver: libcuda.so.1 cannot be loaded");
    f->visible = -1;
    snprintf(f->shm_path, sizeof(f->shm_path), "/dev/shm");
    f->shm_bytes = 8LL << 30;
    f->shm_free = 8LL << 30;
    f->memlock_cur = -1;
    ec_check_facts_add_env(f, "LD_LIBRARY_PATH", "/usr/local/lib");
    f->coll = EC_CHECK_COLL_SKIP;
    snprintf(f->coll_why, sizeof(f->coll_why), "not built");
}

/* Every node reaches every port of every node, clocks within 1 ms. */
static void probe_all(ec_check_facts_t *f, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int p = 0; p < f[j].nports; p++) {
                ec_check_probe_t pr = {.port = f[j].ports[p], .ok = 1, .rtt_us = 200,
                                       .offset_us = 300};
                snprintf(pr.peer, sizeof(pr.peer), "%s", f[j].node_id);
                snprintf(pr.nonce, sizeof(pr.nonce), "%s", f[j].nonce);
                snprintf(pr.addr, sizeof(pr.addr), "%s", f[j].host);
                ec_check_facts_add_probe(&f[i], &pr);
            }
}

/* n healthy nodes n1, n2 ... on machines b1, b2 ..., every one probed. */
static void healthy(ec_check_facts_t *f, int n)
{
    for (int i = 0; i < n; i++) {
        char id[16], boot[16];
        snprintf(id, sizeof(id), "n%d", i + 1);
        snprintf(boot, sizeof(boot), "b%d", i + 1);
        mk(&f[i], id, boot, 36000 + 10 * i);
    }
    probe_all(f, n);
}

static void clear_all(ec_check_facts_t *f, int n)
{
    for (int i = 0; i < n; i++)
        ec_check_facts_clear(&f[i]);
}

static ec_check_report_t compare(ec_check_facts_t *f, int n, int np_min, int np_max)
{
    ec_check_input_t in = {.job_id = "job1", .np_min = np_min, .np_max = np_max,
                           .waited_ms = 1500, .facts = f, .nfacts = n,
                           .final_phase = EC_CHECK_PHASE_DONE, .leader = "n1",
                           .leader_nonce = "0000000000008ca0", .limits = EC_CHECK_LIMITS_INIT};
    ec_check_report_t rep;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_check_compare(&in, &rep, &err), 0);
    return rep;
}

/* Assert the named check's status; that found and fix hold the substrings
 * (NULL: not checked); that the fix line exists exactly for WARN and FAIL. */
static void expect(const ec_check_report_t *rep, const char *name, ec_check_status_t st,
                   const char *found_has, const char *fix_has)
{
    const ec_check_result_t *r = ec_check_report_find(rep, name);
    ck_assert_msg(r != NULL, "no result %s", name);
    ck_assert_msg(r->status == st, "%s is %s, expected %s: %s", name,
                  ec_check_status_name(r->status), ec_check_status_name(st), r->found);
    if (found_has)
        ck_assert_msg(strstr(r->found, found_has), "%s found '%s' lacks '%s'", name, r->found,
                      found_has);
    if (fix_has)
        ck_assert_msg(strstr(r->fix, fix_has), "%s fix '%s' lacks '%s'", name, r->fix, fix_has);
    if (st == EC_CHECK_WARN || st == EC_CHECK_FAIL)
        ck_assert_msg(r->fix[0], "%s is %s without a fix", name, ec_check_status_name(st));
    else
        ck_assert_msg(!r->fix[0], "%s is %s with a fix", name, ec_check_status_name(st));
}

/* Compares f[0..n) and expects of the named check what expect() does. */
static void expect_compared(ec_check_facts_t *f, int n, int np_min, int np_max, const char *name,
                            ec_check_status_t st, const char *found_has, const char *fix_has)
{
    ec_check_report_t rep = compare(f, n, np_min, np_max);
    expect(&rep, name, st, found_has, fix_has);
    ec_check_report_clear(&rep);
}

static int concerns(const ec_check_report_t *rep, const char *name, const char *node)
{
    const ec_check_result_t *r = ec_check_report_find(rep, name);
    for (int i = 0; r && i < r->nnodes; i++)
        if (!strcmp(r->nodes[i], node))
            return 1;
    return 0;
}

START_TEST(healthy_nodes_pass)
{
    ec_check_facts_t f[3];
    healthy(f, 3);
    ec_check_report_t rep = compare(f, 3, 3, 3);
    int c[4];
    ec_check_report_counts(&rep, c);
    for (int i = 0; i < rep.nresults; i++)
        ck_assert_msg(rep.results[i].status == EC_CHECK_PASS ||
                          rep.results[i].status == EC_CHECK_SKIP,
                      "%s: %s %s", rep.results[i].name, ec_check_status_name(rep.results[i].status),
                      rep.results[i].found);
    ck_assert_int_eq(c[EC_CHECK_FAIL], 0);
    ck_assert_int_eq(rep.nresults, 18);
    for (int i = 0; ec_check_names[i]; i++)
        ck_assert_str_eq(rep.results[i].name, ec_check_names[i]);
    expect(&rep, "nodes", EC_CHECK_PASS, "3 of --np=3 nodes arrived in 1.5 s: n1, n2, n3", NULL);
    expect(&rep, "ports", EC_CHECK_PASS, "18 TCP connections made", NULL);
    expect(&rep, "gpu-count", EC_CHECK_SKIP, "no GPU visible on any node", NULL);
    expect(&rep, "allreduce", EC_CHECK_SKIP, "not run: not built", NULL);
    expect(&rep, "clock", EC_CHECK_PASS, "largest skew 0.2 ms", NULL);
    ck_assert_int_eq(rep.nnodes, 3);
    ec_check_report_clear(&rep);
    clear_all(f, 3);
}
END_TEST

START_TEST(nodes_missing_and_unfinished)
{
    ec_check_facts_t f[3];
    healthy(f, 3);
    ec_check_report_t rep = compare(f, 2, 3, 3);
    expect(&rep, "nodes", EC_CHECK_FAIL, "2 of --np=3 nodes arrived within 1.5 s (n1, n2); 1 never "
                                         "arrived", "same --elastic_server and --job_id");
    ec_check_report_clear(&rep);
    /* named when the training job knows it */
    const char *known[] = {"n1", "n3", "n2"};
    ec_check_input_t in = {.job_id = "job1", .np_min = 3, .np_max = 3, .waited_ms = 1500,
                           .facts = f, .nfacts = 2, .final_phase = EC_CHECK_PHASE_DONE,
                           .leader = "n1", .known = known, .nknown = 3,
                           .limits = EC_CHECK_LIMITS_INIT};
    ck_assert_int_eq(ec_check_compare(&in, &rep, NULL), 0);
    expect(&rep, "nodes", EC_CHECK_FAIL, "1 never arrived: n3 (known to the job", NULL);
    ck_assert(concerns(&rep, "nodes", "n3"));
    ec_check_report_clear(&rep);
    expect_compared(f, 2, 2, 3, "nodes", EC_CHECK_WARN, "training can start with 2", NULL);
    f[2].phase = EC_CHECK_PHASE_LOCAL;
    f[2].gone = 1;
    rep = compare(f, 3, 3, 3);
    expect(&rep, "nodes", EC_CHECK_FAIL, "n3 arrived but never finished: its key vanished",
           "read the output of `ecoord check` on n3");
    ck_assert(concerns(&rep, "nodes", "n3"));
    ck_assert(!concerns(&rep, "nodes", "n1"));
    ec_check_report_clear(&rep);
    clear_all(f, 3);
}
END_TEST

START_TEST(unreadable_facts_named)
{
    ec_check_facts_t f[1];
    mk(&f[0], "n1", "b1", 36000);
    probe_all(f, 1);
    ec_check_unreadable_t bad[] = {
        {"old1", "check facts at /j/check/nodes/old1: written by an older ecoord (text "
                 "encoding, version 1), this ecoord reads version 2: run the same ecoord "
                 "version on every node"},
        {"not an id", "check facts at /j/check/nodes/not an id: 5 bytes do not decode"},
    };
    ec_check_input_t in = {.job_id = "job1", .np_min = 3, .np_max = 3, .waited_ms = 1500,
                           .facts = f, .nfacts = 1, .final_phase = EC_CHECK_PHASE_DONE,
                           .leader = "n1", .leader_nonce = "0000000000008ca0",
                           .unreadable = bad, .nunreadable = 2,
                           .limits = EC_CHECK_LIMITS_INIT};
    ec_check_report_t rep;
    ck_assert_int_eq(ec_check_compare(&in, &rep, NULL), 0);
    expect(&rep, "nodes", EC_CHECK_FAIL, "the facts of old1 cannot be read: check facts at "
                                         "/j/check/nodes/old1: written by an older ecoord",
           "run the same ecoord version on every node");
    expect(&rep, "nodes", EC_CHECK_FAIL, "the facts of not an id cannot be read", NULL);
    ck_assert(concerns(&rep, "nodes", "old1"));
    ck_assert(!concerns(&rep, "nodes", "not an id")); /* not a node id: not listed */
    /* the report still encodes (every node it names is a node id) */
    void *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(ec_check_report_encode(&rep, &buf, &len, NULL), 0);
    ec_check_report_t back;
    ec_error_t err = {0};
    ck_assert_msg(ec_check_report_decode(buf, len, NULL, &back, &err) == 0, "%s", err.msg);
    ec_check_report_clear(&back);
    free(buf);
    ec_check_report_clear(&rep);
    clear_all(f, 1);
}
END_TEST

START_TEST(duplicate_node_ids)
{
    ec_check_facts_t f[3];
    healthy(f, 3);
    snprintf(f[1].node_id, sizeof(f[1].node_id), "n1");
    ec_check_report_t rep = compare(f, 3, 3, 3);
    expect(&rep, "node-ids", EC_CHECK_FAIL, "node id n1 is used by 2 processes",
           "give every node its own --node_id");
    ec_check_report_clear(&rep);
    clear_all(f, 3);
}
END_TEST

START_TEST(etcd_unreachable_and_slow)
{
    ec_check_facts_t f[3];
    healthy(f, 3);
    ec_check_input_t in = {.job_id = "job1", .np_min = 3, .np_max = 3, .facts = f, .nfacts = 1,
                           .final_phase = EC_CHECK_PHASE_LOCAL, .leader = "n1",
                           .etcd_error = "--elastic_server=10.0.0.9:2379: connection refused",
                           .limits = EC_CHECK_LIMITS_INIT};
    ec_check_report_t rep;
    ck_assert_int_eq(ec_check_compare(&in, &rep, NULL), 0);
    expect(&rep, "etcd", EC_CHECK_FAIL, "connection refused", "--elastic_server");
    expect(&rep, "nodes", EC_CHECK_FAIL, "only this node (n1) was checked", NULL);
    expect(&rep, "ports", EC_CHECK_SKIP, "etcd is unreachable", NULL);
    expect(&rep, "shm", EC_CHECK_PASS, NULL, NULL); /* local checks still run */
    ec_check_report_clear(&rep);
    f[2].etcd_rtt_us = 250000;
    rep = compare(f, 3, 3, 3);
    expect(&rep, "etcd", EC_CHECK_WARN, "n3 250.0 ms", "etcd answers slowly");
    ck_assert(concerns(&rep, "etcd", "n3") && !concerns(&rep, "etcd", "n1"));
    ec_check_report_clear(&rep);
    clear_all(f, 3);
}
END_TEST

START_TEST(clock_skew)
{
    ec_check_facts_t f[2];
    healthy(f, 2);
    for (int i = 0; i < f[0].nprobes; i++)
        if (!strcmp(f[0].probes[i].peer, "n2"))
            f[0].probes[i].offset_us = 2000000;
    ec_check_report_t rep = compare(f, 2, 2, 2);
    expect(&rep, "clock", EC_CHECK_WARN, "largest skew 2.00 s between n1 and n2", "chrony");
    ec_check_report_clear(&rep);
    for (int i = 0; i < f[0].nprobes; i++)
        if (!strcmp(f[0].probes[i].peer, "n2"))
            f[0].probes[i].offset_us = -90000000;
    expect_compared(f, 2, 2, 2, "clock", EC_CHECK_FAIL, "90.00 s", "synchronize the clocks");
    clear_all(f, 2);
}
END_TEST

START_TEST(duplicate_host_names)
{
    ec_check_facts_t f[3];
    healthy(f, 3);
    snprintf(f[1].hostname, sizeof(f[1].hostname), "host-b1");
    ec_check_report_t rep = compare(f, 3, 3, 3);
    expect(&rep, "host-names", EC_CHECK_FAIL, "host name host-b1 is used by 2 different machines",
           "give every machine its own host name");
    ck_assert(concerns(&rep, "host-names", "n2") && !concerns(&rep, "host-names", "n3"));
    ec_check_report_clear(&rep);
    /* one machine, several agents: fine */
    snprintf(f[1].boot_id, sizeof(f[1].boot_id), "b1");
    expect_compared(f, 3, 3, 3, "host-names", EC_CHECK_PASS, "3 nodes on 2 machines", NULL);
    /* NCCL_HOSTID tells NCCL they are different hosts */
    snprintf(f[0].host_id, sizeof(f[0].host_id), "a");
    snprintf(f[1].host_id, sizeof(f[1].host_id), "b");
    expect_compared(f, 3, 3, 3, "host-names", EC_CHECK_FAIL, "NCCL_HOSTID b", NULL);
    clear_all(f, 3);
}
END_TEST

START_TEST(published_address)
{
    ec_check_facts_t f[3];
    healthy(f, 3);
    snprintf(f[0].host, sizeof(f[0].host), "127.0.0.1");
    snprintf(f[0].ifname, sizeof(f[0].ifname), "lo");
    ec_check_report_t rep = compare(f, 3, 3, 3);
    expect(&rep, "address", EC_CHECK_FAIL, "n1 publishes 127.0.0.1 (lo)", "pass --host=ADDR");
    ck_assert_ptr_nonnull(strstr(ec_check_report_find(&rep, "address")->fix, "eth0 10.0.0."));
    ec_check_report_clear(&rep);
    snprintf(f[0].host, sizeof(f[0].host), "172.17.0.2");
    snprintf(f[0].ifname, sizeof(f[0].ifname), "docker0");
    expect_compared(f, 3, 3, 3, "address", EC_CHECK_FAIL, "host-only container bridge",
                    "--network=host");
    snprintf(f[0].ports_err, sizeof(f[0].ports_err), "only 0 of the 2 ports this node needs");
    expect_compared(f, 3, 3, 3, "address", EC_CHECK_FAIL, "n1 cannot use 172.17.0.2",
                    "pass --host");
    /* loopback is right when every node shares the machine */
    f[0].ports_err[0] = '\0';
    for (int i = 0; i < 3; i++) {
        snprintf(f[i].boot_id, sizeof(f[i].boot_id), "b1");
        snprintf(f[i].host, sizeof(f[i].host), "127.0.0.1");
        snprintf(f[i].ifname, sizeof(f[i].ifname), "lo");
    }
    expect_compared(f, 3, 3, 3, "address", EC_CHECK_PASS, "every node on one machine", NULL);
    clear_all(f, 3);
}
END_TEST

START_TEST(socket_ifname)
{
    ec_check_facts_t f[2];
    healthy(f, 2);
    ec_check_facts_add_env(&f[0], "NCCL_SOCKET_IFNAME", "nosuchif0");
    ec_check_report_t rep = compare(f, 2, 2, 2);
    expect(&rep, "socket-ifname", EC_CHECK_FAIL,
           "NCCL_SOCKET_IFNAME=nosuchif0 on n1 matches no interface (n1 has: lo, eth0)",
           "set NCCL_SOCKET_IFNAME to an interface that exists");
    ec_check_report_clear(&rep);
    ec_check_facts_clear(&f[0]);
    mk(&f[0], "n1", "b1", 36000);
    ec_check_facts_add_env(&f[0], "GLOO_SOCKET_IFNAME", "eth0,ib9");
    expect_compared(f, 2, 2, 2, "socket-ifname", EC_CHECK_FAIL, "interface ib9 does not exist",
                    "set GLOO_SOCKET_IFNAME");
    ec_check_facts_clear(&f[0]);
    mk(&f[0], "n1", "b1", 36000);
    ec_check_facts_add_env(&f[0], "NCCL_SOCKET_IFNAME", "^lo,docker");
    expect_compared(f, 2, 2, 2, "socket-ifname", EC_CHECK_PASS, "NCCL=^lo,docker", NULL);
    ec_check_facts_clear(&f[0]);
    mk(&f[0], "n1", "b1", 36000);
    ec_check_facts_add_env(&f[0], "NCCL_SOCKET_IFNAME", "lo");
    expect_compared(f, 2, 2, 2, "socket-ifname", EC_CHECK_FAIL, "selects only lo", NULL);
    /* Gloo without a setting binds the host name's address */
    ec_check_facts_clear(&f[0]);
    mk(&f[0], "n1", "b1", 36000);
    snprintf(f[0].hostname_addr, sizeof(f[0].hostname_addr), "127.0.1.1");
    expect_compared(f, 2, 2, 2, "socket-ifname", EC_CHECK_FAIL, "resolves to 127.0.1.1",
                    "/etc/hosts");
    clear_all(f, 2);
}
END_TEST

START_TEST(blocked_port)
{
    ec_check_facts_t f[3];
    healthy(f, 3);
    for (int i = 0; i < f[0].nprobes; i++)
        if (f[0].probes[i].port == 36011) {
            f[0].probes[i].ok = 0;
            snprintf(f[0].probes[i].why, sizeof(f[0].probes[i].why), "Permission denied");
        }
    ec_check_report_t rep = compare(f, 3, 3, 3);
    expect(&rep, "ports", EC_CHECK_FAIL, "1 of 18 TCP connections to published ports failed",
           "open TCP ports 36000-36021 between the nodes");
    const ec_check_result_t *r = ec_check_report_find(&rep, "ports");
    ck_assert_int_eq(r->ndetails, 1);
    ck_assert_str_eq(r->details[0], "n1 -> n2 10.0.0.10:36011  Permission denied");
    ck_assert(concerns(&rep, "ports", "n1") && concerns(&rep, "ports", "n2") &&
              !concerns(&rep, "ports", "n3"));
    ec_check_report_clear(&rep);
    clear_all(f, 3);
}
END_TEST

/* n nodes with one driver-visible GPU per process. */
static void with_gpus(ec_check_facts_t *f, int n, int nproc)
{
    for (int i = 0; i < n; i++) {
        f[i].driver = 1;
        f[i].driver_why[0] = '\0';
        snprintf(f[i].driver_version, sizeof(f[i].driver_version), "550.54.15");
        f[i].cuda_driver_version = 12040;
        f[i].cudart_version = 12040;
        f[i].nccl_version = 22105;
        f[i].visible = 8;
        f[i].nproc = nproc;
        for (int r = 0; r < nproc; r++) {
            ec_check_gpu_t g = {.rank = r, .ordinal = r, .physical = r};
            snprintf(g.bus_id, sizeof(g.bus_id), "0000:%02x:00.0", 0x10 + r);
            ec_check_facts_add_gpu(&f[i], &g);
        }
        for (int a = 0; a < nproc; a++)
            for (int b = a + 1; b < nproc; b++) {
                ec_check_p2p_t p = {.a = a, .b = b, .ok = 1};
                ec_check_facts_add_p2p(&f[i], &p);
            }
    }
}

START_TEST(gpus_healthy)
{
    ec_check_facts_t f[3];
    healthy(f, 3);
    with_gpus(f, 3, 2);
    ec_check_report_t rep = compare(f, 3, 3, 3);
    expect(&rep, "gpu-count", EC_CHECK_PASS, "n1: 8 visible for 2 processes", NULL);
    expect(&rep, "gpu-devices", EC_CHECK_PASS, "6 processes on 3 nodes", NULL);
    expect(&rep, "gpu-busy", EC_CHECK_PASS, NULL, NULL);
    expect(&rep, "gpu-p2p", EC_CHECK_PASS, "3 local GPU pairs", NULL);
    expect(&rep, "cuda", EC_CHECK_PASS, "driver 550.54.15 (CUDA 12.4) on every node", NULL);
    expect(&rep, "nccl", EC_CHECK_PASS, "NCCL 2.21.5 on every node", NULL);
    ec_check_report_clear(&rep);
    clear_all(f, 3);
}
END_TEST

START_TEST(missing_gpu_for_a_process)
{
    ec_check_facts_t f[2];
    healthy(f, 2);
    f[0].nproc = 2;
    f[0].cvd_set = 1; /* CUDA_VISIBLE_DEVICES="" with two processes */
    ec_check_report_t rep = compare(f, 2, 2, 2);
    expect(&rep, "gpu-count", EC_CHECK_FAIL, "n1: CUDA_VISIBLE_DEVICES='' shows 0 GPUs for 2 "
                                             "processes", "list at least 2 devices");
    ec_check_report_clear(&rep);
    /* --gpus names GPUs on a node without a driver */
    f[0].cvd_set = 0;
    f[0].gpus_flag = calloc(2, sizeof(int));
    f[0].gpus_flag[1] = 1;
    f[0].ngpus_flag = 2;
    expect_compared(f, 2, 2, 2, "gpu-count", EC_CHECK_FAIL,
                    "n1: --gpus names 2 GPUs, but no NVIDIA driver",
                    "for a CPU-only run drop --gpus");
    free(f[0].gpus_flag);
    f[0].gpus_flag = NULL;
    f[0].ngpus_flag = 0;
    /* with a driver: fewer visible than processes */
    f[0].cvd_set = 0;
    with_gpus(f, 2, 2);
    f[1].visible = 1;
    expect_compared(f, 2, 2, 2, "gpu-count", EC_CHECK_FAIL, "n2: CUDA sees 1 GPU for 2 processes",
                    "lower --nproc_per_node");
    /* a node without the driver among GPU nodes */
    f[1].visible = 8;
    f[1].driver = 0;
    snprintf(f[1].driver_why, sizeof(f[1].driver_why), "cuInit failed");
    expect_compared(f, 2, 2, 2, "gpu-count", EC_CHECK_FAIL, "n2 has no usable NVIDIA driver",
                    "--gpus all");
    clear_all(f, 2);
}
END_TEST

START_TEST(two_processes_one_gpu)
{
    ec_check_facts_t f[2];
    mk(&f[0], "n1", "b1", 36000);
    mk(&f[1], "n2", "b1", 36010); /* same machine */
    probe_all(f, 2);
    with_gpus(f, 2, 2);
    ec_check_report_t rep = compare(f, 2, 2, 2);
    expect(&rep, "gpu-devices", EC_CHECK_FAIL, "n1 and n2 run on one machine and both use GPU 0",
           "--gpus=0,1 for one and --gpus=2,3");
    ec_check_report_clear(&rep);
    snprintf(f[1].boot_id, sizeof(f[1].boot_id), "b2");
    snprintf(f[0].gpus[1].bus_id, sizeof(f[0].gpus[1].bus_id), "%s", f[0].gpus[0].bus_id);
    expect_compared(f, 2, 2, 2, "gpu-devices", EC_CHECK_FAIL,
                    "n1: local ranks 0 and 1 both use GPU 0", "NCCL error 5");
    /* --gpus against CUDA_VISIBLE_DEVICES */
    snprintf(f[0].gpus[1].bus_id, sizeof(f[0].gpus[1].bus_id), "0000:99:00.0");
    f[0].cvd_set = 1;
    snprintf(f[0].cvd, sizeof(f[0].cvd), "0,1");
    f[0].cvd_count = 2;
    f[0].gpus_flag = calloc(2, sizeof(int));
    f[0].gpus_flag[0] = 1;
    f[0].gpus_flag[1] = 3;
    f[0].ngpus_flag = 2;
    expect_compared(f, 2, 2, 2, "gpu-devices", EC_CHECK_FAIL,
                    "--gpus names GPU 3, which CUDA_VISIBLE_DEVICES='0,1' hides", NULL);
    clear_all(f, 2);
}
END_TEST

START_TEST(busy_gpu_and_p2p)
{
    ec_check_facts_t f[2];
    healthy(f, 2);
    with_gpus(f, 2, 2);
    f[1].gpus[1].nprocs = 1;
    snprintf(f[1].gpus[1].procs, sizeof(f[1].gpus[1].procs), "pid 4242 (30000 MiB)");
    f[0].p2p[0].ok = 0;
    snprintf(f[0].p2p[0].status, sizeof(f[0].p2p[0].status), "PCIe topology not supported");
    ec_check_report_t rep = compare(f, 2, 2, 2);
    expect(&rep, "gpu-busy", EC_CHECK_FAIL, "n2: GPU 1 (0000:11:00.0) (local rank 1) is in use by "
                                            "pid 4242", "nvidia-smi");
    expect(&rep, "gpu-p2p", EC_CHECK_WARN, "1 of 2 GPU pairs", "NCCL_P2P_DISABLE=1");
    ec_check_report_clear(&rep);
    clear_all(f, 2);
}
END_TEST

START_TEST(cuda_and_nccl_versions)
{
    ec_check_facts_t f[2];
    healthy(f, 2);
    with_gpus(f, 2, 1);
    f[1].cudart_version = 12060;
    ec_check_report_t rep = compare(f, 2, 2, 2);
    expect(&rep, "cuda", EC_CHECK_FAIL, "runtime 12.4 on n1; runtime 12.6 on n2",
           "upgrade the NVIDIA driver on n2");
    ec_check_report_clear(&rep);
    f[1].cudart_version = 12040;
    f[1].cuda_driver_version = 12060;
    expect_compared(f, 2, 2, 2, "cuda", EC_CHECK_WARN, "(CUDA 12.6) on n2",
                    "same driver and CUDA runtime");
    f[1].nccl_version = 21805;
    expect_compared(f, 2, 2, 2, "nccl", EC_CHECK_FAIL, "NCCL 2.21.5 on n1; NCCL 2.18.5 on n2",
                    "one NCCL version on every node");
    f[0].nccl_version = f[1].nccl_version = ec_check_nccl_version_norm(2708);
    expect_compared(f, 2, 2, 2, "nccl", EC_CHECK_FAIL, "NCCL 2.7.8 on every node",
                    "NCCL 2.8.0 or newer");
    f[0].nccl_version = f[1].nccl_version = 0;
    expect_compared(f, 2, 2, 2, "nccl", EC_CHECK_WARN, "NCCL not found", "LD_LIBRARY_PATH");
    clear_all(f, 2);
}
END_TEST

START_TEST(small_shm_and_memlock)
{
    ec_check_facts_t f[2];
    healthy(f, 2);
    f[0].shm_bytes = 16LL << 20;
    f[0].shm_free = 16LL << 20;
    ec_check_report_t rep = compare(f, 2, 2, 2);
    expect(&rep, "shm", EC_CHECK_FAIL, "16 MiB (16 MiB free) on n1", "--shm-size");
    const ec_check_result_t *r = ec_check_report_find(&rep, "shm");
    ck_assert_str_eq(r->details[0], "n1: /dev/shm is 16 MiB, below 256 MiB");
    ec_check_report_clear(&rep);
    f[0].shm_bytes = 512LL << 20;
    expect_compared(f, 2, 2, 2, "shm", EC_CHECK_WARN, "512 MiB", "at least 1.0 GiB");
    f[1].nib = 2;
    f[1].memlock_cur = 64 << 10;
    expect_compared(f, 2, 2, 2, "memlock", EC_CHECK_FAIL, "64 KiB on n2", "--ulimit memlock=-1");
    f[1].nib = 0;
    expect_compared(f, 2, 2, 2, "memlock", EC_CHECK_PASS, "no RDMA devices", NULL);
    clear_all(f, 2);
}
END_TEST

START_TEST(variables_differ)
{
    ec_check_facts_t f[2];
    healthy(f, 2);
    ec_check_facts_add_env(&f[1], "NCCL_IB_DISABLE", "1");
    ec_check_report_t rep = compare(f, 2, 2, 2);
    expect(&rep, "environment", EC_CHECK_FAIL, "1 variable differs between nodes: NCCL_IB_DISABLE",
           "set NCCL_* variables the same way on every node");
    const ec_check_result_t *r = ec_check_report_find(&rep, "environment");
    ck_assert_int_eq(r->ndetails, 1);
    ck_assert_str_eq(r->details[0], "NCCL_IB_DISABLE          (unset) on n1; '1' on n2");
    ec_check_report_clear(&rep);
    ec_check_facts_clear(&f[1]);
    mk(&f[1], "n2", "b2", 36010);
    ec_check_facts_add_env(&f[1], "NCCL_SOCKET_IFNAME", "eth0"); /* per machine: a warning */
    free(f[1].env[0].value);
    f[1].env[0].value = strdup("/opt/lib"); /* LD_LIBRARY_PATH */
    expect_compared(f, 2, 2, 2, "environment", EC_CHECK_WARN, "LD_LIBRARY_PATH, NCCL_SOCKET_IFNAME",
                    NULL);
    clear_all(f, 2);
}
END_TEST

START_TEST(allreduce_results)
{
    ec_check_facts_t f[2];
    healthy(f, 2);
    for (int i = 0; i < 2; i++) {
        f[i].coll = EC_CHECK_COLL_OK;
        snprintf(f[i].coll_backend, sizeof(f[i].coll_backend), "gloo");
        f[i].coll_ranks = 2;
        f[i].coll_bytes = 16 << 20;
        f[i].coll_seconds = 0.5 + i;
        f[i].coll_busbw_gbps = 2.0 - i;
    }
    ec_check_report_t rep = compare(f, 2, 2, 2);
    expect(&rep, "allreduce", EC_CHECK_PASS, "allreduce of 16 MiB over 2 ranks (gloo) verified; "
                                             "slowest node n2: 1.500 s, bus bandwidth 1.00 GB/s",
           NULL);
    ec_check_report_clear(&rep);
    f[1].coll = EC_CHECK_COLL_FAIL;
    snprintf(f[1].coll_why, sizeof(f[1].coll_why), "result mismatch at element 7");
    expect_compared(f, 2, 2, 2, "allreduce", EC_CHECK_FAIL, "failed on 1 node", "NCCL_DEBUG=INFO");
    clear_all(f, 2);
}
END_TEST

START_TEST(embedded_etcd_with_several_nodes)
{
    ec_check_facts_t f[1];
    mk(&f[0], "n1", "b1", 36000);
    probe_all(f, 1);
    ec_check_input_t in = {.job_id = "job1", .np_min = 2, .np_max = 2, .facts = f, .nfacts = 1,
                           .final_phase = EC_CHECK_PHASE_DONE, .leader = "n1", .embedded = 1,
                           .limits = EC_CHECK_LIMITS_INIT};
    ec_check_report_t rep;
    ck_assert_int_eq(ec_check_compare(&in, &rep, NULL), 0);
    expect(&rep, "nodes", EC_CHECK_FAIL, "no --elastic_server", "pass --elastic_server=HOST:PORT");
    expect(&rep, "ports", EC_CHECK_PASS, "2 TCP connections made", NULL);
    ec_check_report_clear(&rep);
    clear_all(f, 1);
}
END_TEST

START_TEST(facts_round_trip)
{
    ec_check_facts_t f[2];
    healthy(f, 2);
    with_gpus(f, 1, 2);
    ec_check_facts_add_env(&f[0], "NCCL_WEIRD", "a b%c\nd\te ");
    ec_check_facts_add_env(&f[0], "NCCL_EMPTY", "");
    snprintf(f[0].coll_why, sizeof(f[0].coll_why), "100%% done\n");
    f[0].coll_busbw_gbps = 12.345;
    f[0].gpus[0].nprocs = 2;
    snprintf(f[0].gpus[0].procs, sizeof(f[0].gpus[0].procs), "pid 1 (2 MiB), pid 3 (4 MiB)");
    void *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(ec_check_facts_encode(&f[0], &buf, &len, NULL), 0);
    ec_check_facts_t g;
    ec_error_t err = {0};
    ck_assert_msg(ec_check_facts_decode(buf, len, "k", &g, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(g.version, EC_CHECK_FACTS_VERSION);
    ck_assert_int_eq(g.phase, EC_CHECK_PHASE_DONE);
    ck_assert_str_eq(g.node_id, "n1");
    ck_assert_str_eq(g.nonce, f[0].nonce);
    ck_assert_str_eq(g.boot_id, "b1");
    ck_assert_int_eq(g.nports, 2);
    ck_assert_int_eq(g.ports[1], 36001);
    ck_assert_int_eq(g.nifaces, 2);
    ck_assert_str_eq(g.ifaces[1].addr, f[0].host);
    ck_assert_int_eq(g.ifaces[1].up, 1);
    ck_assert_int_eq(g.ngpus, 2);
    ck_assert_str_eq(g.gpus[0].procs, "pid 1 (2 MiB), pid 3 (4 MiB)");
    ck_assert_str_eq(g.gpus[1].bus_id, "0000:11:00.0");
    ck_assert_int_eq(g.gpus[1].rank, f[0].gpus[1].rank);
    ck_assert_int_eq(g.gpus[1].physical, f[0].gpus[1].physical);
    ck_assert_int_eq(g.np2p, 1);
    ck_assert_int_eq(g.driver, 1);
    ck_assert_str_eq(ec_check_facts_env(&g, "NCCL_WEIRD"), "a b%c\nd\te ");
    ck_assert_str_eq(ec_check_facts_env(&g, "NCCL_EMPTY"), "");
    ck_assert_int_eq(g.nprobes, 4);
    ck_assert_int_eq(g.probes[3].port, 36011);
    ck_assert_int_eq(g.probes[3].offset_us, 300);
    ck_assert_int_eq(g.coll, EC_CHECK_COLL_SKIP);
    ck_assert_str_eq(g.coll_why, "100% done\n");
    ck_assert(g.coll_busbw_gbps > 12.344 && g.coll_busbw_gbps < 12.346);
    ck_assert_int_eq(g.shm_bytes, 8LL << 30);
    ck_assert_int_eq(g.memlock_cur, -1);
    ck_assert_int_eq(g.visible, f[0].visible);
    ck_assert_int_eq(g.cuda_driver_version, 12040);
    ec_check_facts_clear(&g);
    /* fields a newer ecoord adds are skipped: field 1000 (varint 5) and
     * field 1001 (a 3-byte string) appended */
    static const unsigned char future[] = {0xc0, 0x3e, 0x05, 0xca, 0x3e, 0x03, 'a', 'b', 'c'};
    unsigned char *more = malloc(len + sizeof(future));
    memcpy(more, buf, len);
    memcpy(more + len, future, sizeof(future));
    ck_assert_msg(ec_check_facts_decode(more, len + sizeof(future), "k", &g, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(g.nprobes, 4);
    ec_check_facts_clear(&g);
    free(more);
    free(buf);
    clear_all(f, 2);
}
END_TEST

/* Pack a hand-made wire message (what another writer could have put in etcd). */
static void *pack(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    void *b = malloc(*len + 1);
    protobuf_c_message_pack(m, b);
    return b;
}

/* A minimal valid CheckFacts on the wire, to be spoilt one field at a time. */
static void wire_facts(Ecoord__CheckFacts *m)
{
    ecoord__check_facts__init(m);
    m->version = EC_CHECK_FACTS_VERSION;
    m->phase = EC_CHECK_PHASE_LOCAL;
    m->node_id = "n1";
    m->nproc = 1;
}

/* Decode facts, expect EC_ECORRUPT and a message holding want. */
static void refused(const void *buf, size_t len, const char *want)
{
    ec_check_facts_t g;
    ec_error_t err = {0};
    ck_assert_msg(ec_check_facts_decode(buf, len, "job/check/nodes/n1", &g, &err) == EC_ECORRUPT,
                  "accepted facts that should say '%s'", want);
    ck_assert_msg(strstr(err.msg, want), "message '%s' lacks '%s'", err.msg, want);
    ck_assert_msg(strstr(err.msg, "job/check/nodes/n1"), "message '%s' lacks the key", err.msg);
    ck_assert_int_eq(g.nports + g.nifaces + g.ngpus + g.nenv + g.nprobes, 0);
    ec_check_facts_clear(&g);
}

/* One scalar field at a time out of its range, and what the refusal says. */
static const struct {
    const char *want;
} spoilt[] = {
    {"field phase is 9"}, {"field node_id 'a/b'"}, {"field nproc is 0"}, {"field pid is -5"},
    {"field visible is -2"}, {"field coll is 7"}, {"field memlock_cur"}, {NULL},
};

static void spoil(Ecoord__CheckFacts *m, int i)
{
    switch (i) {
    case 0: m->phase = 9; break;
    case 1: m->node_id = "a/b"; break;
    case 2: m->nproc = 0; break;
    case 3: m->pid = -5; break;
    case 4: m->visible = -2; break;
    case 5: m->coll = (Ecoord__CheckColl)7; break;
    case 6: m->memlock_cur = -9; break;
    }
}

START_TEST(corrupt_facts_refused)
{
    ec_check_facts_t f;
    mk(&f, "n1", "b1", 36000);
    probe_all(&f, 1);
    void *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(ec_check_facts_encode(&f, &buf, &len, NULL), 0);
    ec_check_facts_t g;
    ec_error_t err = {0};

    /* truncated: cut inside the last field */
    refused(buf, len - 1, "do not decode as protobuf");
    /* every prefix is refused or, cut at a field boundary, is a shorter
     * record that still passes every field check: never a crash */
    int cut_refused = 0;
    for (size_t n = 0; n < len; n++) {
        memset(&err, 0, sizeof(err));
        int rc = ec_check_facts_decode(buf, n, NULL, &g, &err);
        ck_assert_msg(rc == 0 || rc == EC_ECORRUPT, "prefix %zu: rc %d", n, rc);
        if (rc) {
            ck_assert_msg(err.msg[0], "prefix %zu refused without a message", n);
            cut_refused++;
        } else {
            ck_assert_str_eq(g.node_id, "n1");
        }
        ec_check_facts_clear(&g);
    }
    ck_assert_int_gt(cut_refused, (int)len / 2);

    /* garbage: text, random bytes (a fixed seed), the empty value */
    refused("hello\n", 6, "check facts");
    refused("", 0, "no version field");
    unsigned seed = 12345;
    unsigned char junk[256];
    for (int round = 0; round < 2000; round++) {
        size_t n = 1 + (size_t)(round % (int)sizeof(junk));
        for (size_t k = 0; k < n; k++) {
            seed = seed * 1103515245u + 12345u;
            junk[k] = (unsigned char)(seed >> 16);
        }
        memset(&err, 0, sizeof(err));
        ck_assert_int_eq(ec_check_facts_decode(junk, n, NULL, &g, &err), EC_ECORRUPT);
        ck_assert(err.msg[0]);
        ec_check_facts_clear(&g);
    }
    /* random bytes flipped inside a valid value: refused or still valid */
    unsigned char *flip = malloc(len);
    for (int round = 0; round < 2000; round++) {
        memcpy(flip, buf, len);
        seed = seed * 1103515245u + 12345u;
        flip[(seed >> 8) % len] ^= (unsigned char)(1u << ((seed >> 4) % 8));
        int rc = ec_check_facts_decode(flip, len, NULL, &g, &err);
        ck_assert(rc == 0 || rc == EC_ECORRUPT);
        ec_check_facts_clear(&g);
    }
    free(flip);

    /* the text encoding of ecoord versions before protobuf, and another
     * version: both tell the user to run one ecoord version everywhere */
    const char *old = "ecoord-check-facts 1\nphase 1\nnode_id n1\nnproc 1\nend\n";
    refused(old, strlen(old), "run the same ecoord version on every node");
    refused(old, strlen(old), "older ecoord");
    Ecoord__CheckFacts m;
    size_t wl;
    void *w;
    wire_facts(&m);
    m.version = EC_CHECK_FACTS_VERSION + 1;
    w = pack(&m.base, &wl);
    refused(w, wl, "run the same ecoord version on every node");
    free(w);

    /* the minimal record is accepted, so each refusal below is its field's */
    wire_facts(&m);
    w = pack(&m.base, &wl);
    ck_assert_msg(ec_check_facts_decode(w, wl, NULL, &g, &err) == 0, "%s", err.msg);
    ec_check_facts_clear(&g);
    free(w);

    for (int i = 0; spoilt[i].want; i++) {
        wire_facts(&m);
        spoil(&m, i);
        w = pack(&m.base, &wl);
        refused(w, wl, spoilt[i].want);
        free(w);
    }
    /* a string longer than its field, a port out of range, a list too long,
     * a list entry that is wrong */
    char longname[400];
    memset(longname, 'h', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    wire_facts(&m);
    m.hostname = longname;
    w = pack(&m.base, &wl);
    refused(w, wl, "field hostname is 399 bytes");
    free(w);
    uint32_t ports[2] = {36000, 70000};
    wire_facts(&m);
    m.n_ports = 2;
    m.ports = ports;
    w = pack(&m.base, &wl);
    refused(w, wl, "ports[1] is 70000");
    free(w);
    uint32_t *many = calloc(EC_CHECK_MAX_GPUS + 1, sizeof(uint32_t));
    wire_facts(&m);
    m.n_gpus_flag = EC_CHECK_MAX_GPUS + 1;
    m.gpus_flag = many;
    w = pack(&m.base, &wl);
    refused(w, wl, "gpus_flag entries");
    free(w);
    free(many);
    Ecoord__CheckEnv env = ECOORD__CHECK_ENV__INIT, *envp = &env;
    env.name = "";
    env.value = "x";
    wire_facts(&m);
    m.n_env = 1;
    m.env = &envp;
    w = pack(&m.base, &wl);
    refused(w, wl, "env[0] has no name");
    free(w);
    Ecoord__CheckProbe pr = ECOORD__CHECK_PROBE__INIT, *prp = &pr;
    pr.peer = "n2";
    pr.port = 0;
    wire_facts(&m);
    m.n_probes = 1;
    m.probes = &prp;
    w = pack(&m.base, &wl);
    refused(w, wl, "field probes.port is 0");
    free(w);
    free(buf);
    ec_check_facts_clear(&f);
}
END_TEST

/* Decode a report, expect EC_ECORRUPT, a message holding want, and nothing
 * left in the struct. */
static void report_refused(const void *buf, size_t len, const char *want)
{
    ec_check_report_t rep;
    ec_error_t err = {0};
    ck_assert_msg(ec_check_report_decode(buf, len, "job/check/report", &rep, &err) == EC_ECORRUPT,
                  "accepted a report that should say '%s'", want);
    ck_assert_msg(strstr(err.msg, want), "message '%s' lacks '%s'", err.msg, want);
    ck_assert_msg(strstr(err.msg, "job/check/report"), "message '%s' lacks the key", err.msg);
    ck_assert_int_eq(rep.nresults + rep.nnodes, 0);
    ck_assert_ptr_null(rep.results);
}

START_TEST(report_round_trip_and_forms)
{
    ec_check_facts_t f[3];
    healthy(f, 3);
    f[0].shm_bytes = 16LL << 20;
    ec_check_facts_add_env(&f[1], "NCCL_IB_DISABLE", "1");
    ec_check_report_t rep = compare(f, 3, 3, 3);
    void *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(ec_check_report_encode(&rep, &buf, &len, NULL), 0);
    ec_check_report_t back;
    ec_error_t err = {0};
    ck_assert_msg(ec_check_report_decode(buf, len, NULL, &back, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(back.nresults, rep.nresults);
    ck_assert_int_eq(back.pending, 0);
    ck_assert_str_eq(back.job_id, "job1");
    ck_assert_str_eq(back.leader, "n1");
    ck_assert_str_eq(back.leader_nonce, "0000000000008ca0");
    ck_assert_int_eq(back.np_min, 3);
    ck_assert_int_eq(back.np_max, 3);
    ck_assert_int_eq(back.nnodes, 3);
    for (int i = 0; i < rep.nresults; i++) {
        ck_assert_str_eq(back.results[i].name, rep.results[i].name);
        ck_assert_int_eq(back.results[i].status, rep.results[i].status);
        ck_assert_str_eq(back.results[i].found, rep.results[i].found);
        ck_assert_str_eq(back.results[i].fix, rep.results[i].fix);
        ck_assert_int_eq(back.results[i].ndetails, rep.results[i].ndetails);
        for (int k = 0; k < rep.results[i].ndetails; k++)
            ck_assert_str_eq(back.results[i].details[k], rep.results[i].details[k]);
        ck_assert_int_eq(back.results[i].nnodes, rep.results[i].nnodes);
        for (int k = 0; k < rep.results[i].nnodes; k++)
            ck_assert_str_eq(back.results[i].nodes[k], rep.results[i].nodes[k]);
    }
    report_refused(buf, len - 1, "do not decode as protobuf");
    for (size_t n = 0; n < len; n++) { /* every prefix: refused or valid, never a crash */
        ec_check_report_t cut;
        int rc = ec_check_report_decode(buf, n, NULL, &cut, &err);
        ck_assert(rc == 0 || rc == EC_ECORRUPT);
        ec_check_report_clear(&cut);
    }
    /* the text of ecoords before protobuf: reports and claims */
    const char *old = "ecoord-check-report 1\njob job1\nend\n";
    report_refused(old, strlen(old), "run the same ecoord version on every node");
    old = "ecoord-check-pending n1 0000000000008ca0\n";
    report_refused(old, strlen(old), "run the same ecoord version on every node");
    report_refused("", 0, "no version field");

    /* the leader's claim round-trips; a claim with results does not */
    ec_check_report_t claim = {.version = EC_CHECK_REPORT_VERSION, .pending = 1};
    snprintf(claim.leader, sizeof(claim.leader), "n2");
    snprintf(claim.leader_nonce, sizeof(claim.leader_nonce), "00000000000000ff");
    void *cb = NULL;
    size_t cl = 0;
    ck_assert_int_eq(ec_check_report_encode(&claim, &cb, &cl, NULL), 0);
    ec_check_report_t c2;
    ck_assert_msg(ec_check_report_decode(cb, cl, NULL, &c2, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(c2.pending, 1);
    ck_assert_str_eq(c2.leader, "n2");
    ck_assert_str_eq(c2.leader_nonce, "00000000000000ff");
    ck_assert_int_eq(c2.nresults, 0);
    ec_check_report_clear(&c2);
    free(cb);

    /* hand-made wire reports, spoilt one field at a time */
    Ecoord__CheckResult r = ECOORD__CHECK_RESULT__INIT, *rp = &r;
    r.name = "nodes";
    r.status = ECOORD__CHECK_STATUS__CHECK_STATUS_PASS;
    char *ids[] = {"n1", "a b"};
    Ecoord__CheckReport m = ECOORD__CHECK_REPORT__INIT;
    m.version = EC_CHECK_REPORT_VERSION;
    m.leader = "n1";
    m.n_results = 1;
    m.results = &rp;
    size_t wl;
    void *w = pack(&m.base, &wl);
    ck_assert_msg(ec_check_report_decode(w, wl, NULL, &c2, &err) == 0, "%s", err.msg);
    ec_check_report_clear(&c2);
    free(w);
    r.status = ECOORD__CHECK_STATUS__CHECK_STATUS_UNKNOWN;
    w = pack(&m.base, &wl);
    report_refused(w, wl, "results[0] (nodes) has an unknown status 0");
    free(w);
    r.status = ECOORD__CHECK_STATUS__CHECK_STATUS_FAIL;
    r.n_nodes = 2;
    r.nodes = ids;
    w = pack(&m.base, &wl);
    report_refused(w, wl, "results.nodes[1] 'a b' is not a valid node id");
    free(w);
    r.n_nodes = 0;
    m.pending = 1;
    w = pack(&m.base, &wl);
    report_refused(w, wl, "a pending claim carries 1 results");
    free(w);
    m.pending = 0;
    m.version = EC_CHECK_REPORT_VERSION + 1;
    w = pack(&m.base, &wl);
    report_refused(w, wl, "run the same ecoord version on every node");
    free(w);

    char *text = NULL, *json = NULL;
    size_t tl = 0, jl = 0;
    FILE *t = open_memstream(&text, &tl);
    ec_check_report_print(&rep, t);
    fclose(t);
    ck_assert_ptr_nonnull(strstr(text, "ecoord check: job job1, 3 nodes (n1, n2, n3) of --np=3, "
                                       "report by n1\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nFAIL  shm             /dev/shm: 16 MiB"));
    ck_assert_ptr_nonnull(strstr(text, "\n        n1: /dev/shm is 16 MiB, below 256 MiB\n"
                                       "      fix: give /dev/shm at least 1.0 GiB"));
    ck_assert_ptr_nonnull(strstr(text, "\nPASS  nodes           3 of --np=3 nodes arrived"));
    ck_assert_ptr_nonnull(strstr(text, "\nFAIL  environment     1 variable differs"));
    ck_assert_msg(strstr(text, "\n9 passed, 0 warnings, 2 failed, 7 skipped\n"), "%s", text);
    FILE *j = open_memstream(&json, &jl);
    ec_check_report_print_json(&rep, j);
    fclose(j);
    ck_assert_ptr_nonnull(strstr(json, "{\"name\":\"shm\",\"status\":\"FAIL\",\"found\":"));
    ck_assert_ptr_nonnull(strstr(json, "\"nodes\":[\"n1\"]}"));
    ck_assert_ptr_nonnull(strstr(json, "\"summary\":{\"passed\":9,\"warnings\":0,\"failed\":2,"
                                       "\"skipped\":7},\"ok\":false}\n"));
    free(text);
    free(json);
    ec_check_report_clear(&back);
    ec_check_report_clear(&rep);
    free(buf);
    clear_all(f, 3);
}
END_TEST

START_TEST(pure_helpers)
{
    int ids[8];
    ck_assert_int_eq(ec_check_cvd_parse("", ids, 8), 0);
    ck_assert_int_eq(ec_check_cvd_parse("-1", ids, 8), 0);
    ck_assert_int_eq(ec_check_cvd_parse("0,1,-1,2", ids, 8), 2);
    ck_assert_int_eq(ec_check_cvd_parse(" 2 , 3", ids, 8), 2);
    ck_assert_int_eq(ids[0], 2);
    ck_assert_int_eq(ids[1], 3);
    ck_assert_int_eq(ec_check_cvd_parse("GPU-8a3f,1", ids, 8), 2);
    ck_assert_int_eq(ids[0], -1);
    ck_assert_int_eq(ec_check_cvd_parse("0,,1", ids, 8), 1);
    ck_assert(ec_check_nccl_ifname_match("eth", "eth0"));
    ck_assert(!ec_check_nccl_ifname_match("eth", "ib0"));
    ck_assert(ec_check_nccl_ifname_match("ib,eth", "eth1"));
    ck_assert(!ec_check_nccl_ifname_match("^lo,docker", "docker0"));
    ck_assert(ec_check_nccl_ifname_match("^lo,docker", "eth0"));
    ck_assert(ec_check_nccl_ifname_match("=eth0", "eth0"));
    ck_assert(!ec_check_nccl_ifname_match("=eth0", "eth0.5"));
    ck_assert(!ec_check_nccl_ifname_match("^=eth0", "eth0"));
    ck_assert_int_eq(ec_check_nccl_version_norm(2708), 20708);
    ck_assert_int_eq(ec_check_nccl_version_norm(2804), 20804);
    ck_assert_int_eq(ec_check_nccl_version_norm(21805), 21805);
    ck_assert_int_eq(ec_check_nccl_version_norm(22809), 22809);
    ck_assert_int_eq(ec_check_nccl_version_norm(0), 0);
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("check", NULL, NULL,
                          EC_CHECK_TESTS(
                              healthy_nodes_pass,
                              nodes_missing_and_unfinished,
                              unreadable_facts_named,
                              duplicate_node_ids,
                              etcd_unreachable_and_slow,
                              clock_skew,
                              duplicate_host_names,
                              published_address,
                              socket_ifname,
                              blocked_port,
                              gpus_healthy,
                              missing_gpu_for_a_process,
                              two_processes_one_gpu,
                              busy_gpu_and_p2p,
                              cuda_and_nccl_versions,
                              small_shm_and_memlock,
                              variables_differ,
                              allreduce_results,
                              embedded_etcd_with_several_nodes,
                              facts_round_trip,
                              corrupt_facts_refused,
                              report_round_trip_and_forms,
                              pure_helpers));
}

EC_CHECK_MAIN(suite)
