/* Rule checked: `ecoord check`, run on every node against a real etcd, prints
 * the same report everywhere, passes a healthy set of nodes, and turns each
 * failure users hit into a FAIL line with its fix and exit code 1: a process
 * without a GPU (an empty CUDA_VISIBLE_DEVICES with two processes), a tiny
 * /dev/shm (a tmpfs in a private mount namespace), a blocked port (a
 * "prohibit" policy route in a private network namespace), an NCCL_* variable
 * set on one node only, one host name on two machines (as NCCL tells machines
 * apart: NCCL_HOSTID), an interface name that does not exist, a node that
 * never arrives (named when the job knows it), a node that dies midway and a
 * node whose facts cannot be read (another ecoord version).
 * It never hangs, and leaves no key behind.  GPU checks skip with the reason
 * where no GPU is visible. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ec_select.h"
#include "harness.h"

static ec_embed_t *etcd;
static ec_etcd_t *c;
static char tmp[256];

#define MAXN 4

static void setup(void)
{
    ec_test_up(&etcd, &c, tmp, sizeof(tmp), "t5000");
}

static void teardown(void)
{
    ec_test_down(&etcd, &c);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", tmp);
}

static const char *ecoord(void)
{
    return ec_test_bin("ECOORD", "./ecoord");
}

/* The whole content of a file (static buffer per slot). */
static const char *slurp(const char *path, int slot)
{
    static char buf[MAXN + 2][32768];
    buf[slot][0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return buf[slot];
    size_t n = fread(buf[slot], 1, sizeof(buf[slot]) - 1, f);
    buf[slot][n] = '\0';
    fclose(f);
    return buf[slot];
}

typedef struct {
    pid_t pid;
    char out[320], err[320];
} node_t;

/* Start `env ENV ecoord check <common> --node_id=ID FLAGS` with stdout to
 * <tmp>/<job>.<id>.out and stderr to .err.  wrap, when given, is a shell
 * prefix the command runs under (e.g. a private mount namespace). */
static node_t start_node(const char *job, const char *id, const char *np, const char *env,
                         const char *flags, const char *wrap)
{
    node_t n;
    snprintf(n.out, sizeof(n.out), "%s/%s.%s.out", tmp, job, id);
    snprintf(n.err, sizeof(n.err), "%s/%s.%s.err", tmp, job, id);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "exec %s env %s %s check --elastic_server=%s --job_id=%s --np=%s --node_id=%s "
             "--log_dir=%s/log %s 2>%s",
             wrap ? wrap : "", env ? env : "", ecoord(), ec_embed_endpoint(etcd), job, np, id,
             tmp, flags ? flags : "", n.err);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    n.pid = ec_test_spawn(argv, n.out);
    return n;
}

/* Exit status of a node; fails the test if it does not end in time. */
static int finish(node_t *n, long ms)
{
    int rc = ec_test_reap(n->pid, ms);
    if (rc < 0) {
        kill(n->pid, SIGKILL);
        ec_test_reap(n->pid, 5000);
        ck_abort_msg("ecoord check (%s) did not end within %ld ms: %s", n->out, ms,
                     slurp(n->err, MAXN));
    }
    return rc;
}

/* The report's line for check `name` ("FAIL  shm ..."), with its fix line
 * when there is one (static buffer). */
static const char *line_of(const char *report, const char *name)
{
    static char l[8192];
    l[0] = '\0';
    char pat[64];
    snprintf(pat, sizeof(pat), "  %-14s  ", name);
    const char *p = strstr(report, pat);
    if (!p)
        return l;
    while (p > report && p[-1] != '\n')
        p--;
    const char *e = strchr(p, '\n');
    while (e && (!strncmp(e + 1, "        ", 8) || !strncmp(e + 1, "      fix: ", 11)))
        e = strchr(e + 1, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len >= sizeof(l))
        len = sizeof(l) - 1;
    memcpy(l, p, len);
    l[len] = '\0';
    return l;
}

#define ASSERT_LINE(report, name, status, found, fix)                                      \
    do {                                                                                   \
        const char *l_ = line_of(report, name);                                            \
        ck_assert_msg(!strncmp(l_, status "  ", 6), "%s is not " status ":\n%s", name,     \
                      report);                                                             \
        ck_assert_msg(strstr(l_, found), "%s lacks '%s':\n%s", name, found, l_);           \
        const char *fx_ = (fix);                                                           \
        if (fx_)                                                                           \
            ck_assert_msg(strstr(l_, "\n      fix: ") && strstr(l_, fx_),                  \
                          "%s fix lacks '%s':\n%s", name, fx_, l_);                        \
    } while (0)

static bool check_keys_gone(void *arg)
{
    char prefix[300];
    snprintf(prefix, sizeof(prefix), "/%s/check/", (const char *)arg);
    ec_kv_list_t l;
    if (ec_etcd_get_prefix(c, prefix, 0, &l, NULL) < 0)
        return false;
    size_t n = l.n;
    ec_kv_list_free(&l);
    return n == 0;
}

START_TEST(healthy_three_nodes_on_loopback)
{
    node_t n[3];
    const char *ids[3] = {"n1", "n2", "n3"};
    for (int i = 0; i < 3; i++)
        n[i] = start_node("ok", ids[i], "3", "-u CUDA_VISIBLE_DEVICES", "--nproc_per_node=2",
                          NULL);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(finish(&n[i], 30000), 0);
    const char *r = slurp(n[0].out, 0);
    for (int i = 1; i < 3; i++)
        ck_assert_msg(!strcmp(r, slurp(n[i].out, i)), "reports differ:\n%s\n---\n%s", r,
                      slurp(n[i].out, i));
    ck_assert_msg(strstr(r, "ecoord check: job ok, 3 nodes (n1, n2, n3) of --np=3"), "%s", r);
    ASSERT_LINE(r, "nodes", "PASS", "3 of --np=3 nodes arrived", NULL);
    ASSERT_LINE(r, "etcd", "PASS", "reachable from 3 nodes; round trip n1 ", NULL);
    ASSERT_LINE(r, "ports", "PASS", "27 TCP connections made", NULL);
    ASSERT_LINE(r, "clock", "PASS", "every node shares one machine's clock", NULL);
    ASSERT_LINE(r, "address", "PASS", "every node on one machine", NULL);
    ASSERT_LINE(r, "host-names", "PASS", "3 nodes on 1 machine", NULL);
    ASSERT_LINE(r, "environment", "PASS", "equal on every node", NULL);
    ck_assert_msg(!strstr(r, "FAIL  ") && !strstr(r, "WARN  "), "%s", r);
    /* GPU checks: skipped with the reason where no GPU is visible */
    const char *g = line_of(r, "gpu-count");
    if (!strncmp(g, "SKIP", 4))
        ck_assert_msg(strstr(g, "no GPU visible on any node ("), "%s", g);
    ck_assert_msg(strstr(r, "\n0 failed") || strstr(r, " 0 failed, "), "%s", r);
    /* without the worker library's program: skipped, saying why */
    const char *ar = line_of(r, "allreduce");
    ck_assert_msg(!strncmp(ar, "SKIP  allreduce       not run: ", 31) || !strncmp(ar, "PASS", 4),
                  "%s", ar);
    ck_assert(ec_test_wait(check_keys_gone, "ok", 5000));
}
END_TEST

START_TEST(json_report_without_a_server)
{
    /* No --elastic_server: this node alone, with an embedded etcd. */
    char out[320], cmd[1024];
    snprintf(out, sizeof(out), "%s/solo.json", tmp);
    snprintf(cmd, sizeof(cmd), "exec %s check --job_id=solo --node_id=solo --json --log_dir=%s/log "
                               "2>/dev/null", ecoord(), tmp);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    node_t n = {.pid = ec_test_spawn(argv, out)};
    snprintf(n.out, sizeof(n.out), "%s", out);
    snprintf(n.err, sizeof(n.err), "/dev/null");
    ck_assert_int_eq(finish(&n, 30000), 0);
    const char *j = slurp(out, 0);
    ck_assert_msg(j[0] == '{' && strstr(j, "\"ok\":true}\n"), "%s", j);
    ck_assert_msg(strstr(j, "{\"name\":\"nodes\",\"status\":\"PASS\",\"found\":\"1 of --np=1 "
                            "nodes arrived"), "%s", j);
    ck_assert_msg(strstr(j, "{\"name\":\"etcd\",\"status\":\"PASS\",\"found\":\"embedded etcd"),
                  "%s", j);
    ck_assert_msg(strstr(j, "\"nodes\":[\"solo\"]"), "%s", j);
    ck_assert_msg(strstr(j, "\"summary\":{\"passed\":"), "%s", j);
}
END_TEST

START_TEST(process_without_a_gpu)
{
    node_t n = start_node("gpu", "a", "1", "CUDA_VISIBLE_DEVICES=", "--nproc_per_node=2", NULL);
    ck_assert_int_eq(finish(&n, 30000), 1);
    const char *r = slurp(n.out, 0);
    ASSERT_LINE(r, "gpu-count", "FAIL", "a: CUDA_VISIBLE_DEVICES='' shows 0 GPUs for 2 processes",
                "give every process a GPU: list at least 2 devices in CUDA_VISIBLE_DEVICES");
    ck_assert(ec_test_wait(check_keys_gone, "gpu", 5000));
}
END_TEST

START_TEST(tiny_shm)
{
    char out[512];
    char *probe[] = {"unshare", "-m", "sh", "-c",
                     "mount -t tmpfs -o size=1m tmpfs /mnt && echo ok", NULL};
    if (ec_test_run(probe, out, sizeof(out)) != 0) {
        printf("# SKIP tiny_shm: a private mount namespace is not permitted here (%s)\n", out);
        return;
    }
    node_t n = start_node("shm", "a", "1", NULL, NULL,
                          "unshare -m sh -c 'mount -t tmpfs -o size=16m tmpfs /dev/shm && exec \"$0\" "
                          "\"$@\"'");
    ck_assert_int_eq(finish(&n, 30000), 1);
    const char *r = slurp(n.out, 0);
    ASSERT_LINE(r, "shm", "FAIL", "/dev/shm: 16 MiB", "docker run --shm-size=8g");
    ck_assert_msg(strstr(line_of(r, "shm"), "a: /dev/shm is 16 MiB, below 256 MiB"), "%s", r);
}
END_TEST

START_TEST(blocked_port)
{
    char out[4096];
    char *probe[] = {"unshare", "-n", "sh", "-c",
                     "ip link set lo up && ip rule add pref 10 ipproto tcp dport 1 prohibit && "
                     "echo ok", NULL};
    if (ec_test_run(probe, out, sizeof(out)) != 0) {
        printf("# SKIP blocked_port: a private network namespace with policy routing is not "
               "available here (%s)\n", out);
        return;
    }
    /* In a network namespace of its own: loopback up, and a "prohibit" route
     * for TCP port 36500 ahead of the local table (a firewall's REJECT); etcd
     * and both nodes run inside it. */
    char script[4096];
    snprintf(script, sizeof(script),
             "D=%s; ip link set lo up && ip rule del pref 0 && ip rule add pref 100 lookup local "
             "&& ip rule add pref 10 ipproto tcp dport 36500 prohibit || exit 90\n"
             "%s --name bp --data-dir $D/etcd --listen-client-urls http://127.0.0.1:2379 "
             "--advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls "
             "http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 "
             "--initial-cluster bp=http://127.0.0.1:2380 --heartbeat-interval=50 --election-timeout=250 "
             "--logger=zap --log-outputs=stderr >$D/etcd.log 2>&1 & E=$!\n"
             "i=0; until grep -q 'serving client traffic' $D/etcd.log; do i=$((i+1)); "
             "[ $i -gt 400 ] && { kill $E; exit 91; }; sleep 0.05; done\n"
             "S='--elastic_server=127.0.0.1:2379 --job_id=bp --np=2'\n"
             "%s check $S --node_id=a --start_port=36400 >$D/bp.a.out 2>$D/bp.a.err & A=$!\n"
             "%s check $S --node_id=b --port_range=36500-36501 >$D/bp.b.out 2>$D/bp.b.err\n"
             "B=$?; wait $A; RA=$?; kill $E; wait $E; echo rc $RA $B\n",
             tmp, ec_embed_find_etcd(getenv("ETCD"), getenv("PATH")), ecoord(), ecoord());
    char *argv[] = {"unshare", "-n", "sh", "-c", script, NULL};
    int rc = ec_test_run(argv, out, sizeof(out));
    ck_assert_msg(rc == 0 && strstr(out, "rc 1 1"), "rc %d: %s", rc, out);
    char pa[320], pb[320];
    snprintf(pa, sizeof(pa), "%s/bp.a.out", tmp);
    snprintf(pb, sizeof(pb), "%s/bp.b.out", tmp);
    const char *r = slurp(pa, 0);
    ck_assert_msg(!strcmp(r, slurp(pb, 1)), "reports differ:\n%s\n---\n%s", r, slurp(pb, 1));
    ASSERT_LINE(r, "ports", "FAIL", "2 of 8 TCP connections to published ports failed",
                "open TCP ports 36400-36501 between the nodes");
    const char *l = line_of(r, "ports");
    ck_assert_msg(strstr(l, "a -> b 127.0.0.1:36500  Permission denied") &&
                      strstr(l, "b -> b 127.0.0.1:36500  Permission denied") &&
                      !strstr(l, ":36501"), "%s", l);
}
END_TEST

START_TEST(nccl_variable_differs)
{
    node_t a = start_node("env", "a", "2", "NCCL_IB_DISABLE=1", NULL, NULL);
    node_t b = start_node("env", "b", "2", "-u NCCL_IB_DISABLE", NULL, NULL);
    ck_assert_int_eq(finish(&a, 30000), 1);
    ck_assert_int_eq(finish(&b, 30000), 1);
    const char *r = slurp(a.out, 0);
    ck_assert_str_eq(r, slurp(b.out, 1));
    ASSERT_LINE(r, "environment", "FAIL", "1 variable differs between nodes: NCCL_IB_DISABLE",
                "set NCCL_* variables the same way on every node");
    ck_assert_msg(strstr(line_of(r, "environment"),
                         "\n        NCCL_IB_DISABLE          '1' on a; (unset) on b"), "%s", r);
}
END_TEST

START_TEST(duplicate_host_names)
{
    /* Same host name, but NCCL is told (NCCL_HOSTID) these are two machines. */
    node_t a = start_node("host", "a", "2", "NCCL_HOSTID=rack1-a", NULL, NULL);
    node_t b = start_node("host", "b", "2", "NCCL_HOSTID=rack1-b", NULL, NULL);
    ck_assert_int_eq(finish(&a, 30000), 1);
    ck_assert_int_eq(finish(&b, 30000), 1);
    const char *r = slurp(a.out, 0);
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    char want[400];
    snprintf(want, sizeof(want), "host name %s is used by 2 different machines: a (NCCL_HOSTID "
                                 "rack1-a), b (NCCL_HOSTID rack1-b)", host);
    ASSERT_LINE(r, "host-names", "FAIL", want, "give every machine its own host name");
    /* NCCL_HOSTID differs on purpose: not an environment finding */
    ASSERT_LINE(r, "environment", "PASS", "equal on every node", NULL);
}
END_TEST

START_TEST(interface_that_does_not_exist)
{
    node_t n = start_node("ifn", "a", "1", "NCCL_SOCKET_IFNAME=nosuchif0 GLOO_SOCKET_IFNAME=lo",
                          NULL, NULL);
    ck_assert_int_eq(finish(&n, 30000), 1);
    const char *r = slurp(n.out, 0);
    ASSERT_LINE(r, "socket-ifname", "FAIL", "NCCL_SOCKET_IFNAME=nosuchif0 on a matches no interface",
                "set NCCL_SOCKET_IFNAME to an interface that exists and is up on every node");
    ck_assert_msg(strstr(line_of(r, "socket-ifname"), "(a has: lo"), "%s", r);
}
END_TEST

START_TEST(node_that_never_arrives)
{
    /* The training job knows n3 (a registration): the report names it. */
    ck_assert_int_eq(ec_etcd_put(c, "/late/nodes/n3", "x", 1, 0, NULL, NULL), 0);
    int64_t t0 = ec_test_now_ms();
    node_t a = start_node("late", "n1", "3", NULL, "--elastic_timeout=2", NULL);
    node_t b = start_node("late", "n2", "3", NULL, "--elastic_timeout=2", NULL);
    ck_assert_int_eq(finish(&a, 30000), 1);
    ck_assert_int_eq(finish(&b, 30000), 1);
    ck_assert_msg(ec_test_now_ms() - t0 < ec_test_ms(15000), "took %lld ms",
                  (long long)(ec_test_now_ms() - t0));
    const char *r = slurp(a.out, 0);
    ck_assert_str_eq(r, slurp(b.out, 1));
    ASSERT_LINE(r, "nodes", "FAIL", "2 of --np=3 nodes arrived within 2.", NULL);
    ASSERT_LINE(r, "nodes", "FAIL", "(n1, n2); 1 never arrived: n3 (known to the job",
                "start `ecoord check` with the same --elastic_server and --job_id on every node");
    ck_assert(ec_test_wait(check_keys_gone, "late", 5000));
}
END_TEST

static bool key_exists(void *arg)
{
    ec_kv_t kv;
    bool found = false;
    if (ec_etcd_get(c, (const char *)arg, &kv, &found, NULL, NULL) < 0)
        return false;
    if (found)
        ec_kv_free(&kv);
    return found;
}

START_TEST(node_that_dies_midway)
{
    /* n3 arrives first and is killed while it waits for the others: its
     * facts stay until its lease expires, so n1 and n2 count it, cannot reach
     * its ports and never see it finish.  Its lease (5 s) expires 3.3-5 s
     * after the kill: n1 and n2 must both have started and read n3's key
     * by then (with 2 s, as little as 1.3 s on a loaded machine), and it
     * must go well within the 10 s they wait for a phase (PHASE_MS in
     * coord/check/command_impl.h), so that they see it vanish. */
    node_t d = start_node("die", "n3", "3", NULL, "--lease_ttl=5", NULL);
    ck_assert(ec_test_wait(key_exists, "/die/check/nodes/n3", 15000));
    kill(d.pid, SIGKILL);
    ec_test_reap(d.pid, 5000);
    node_t a = start_node("die", "n1", "3", NULL, NULL, NULL);
    node_t b = start_node("die", "n2", "3", NULL, NULL, NULL);
    ck_assert_int_eq(finish(&a, 40000), 1);
    ck_assert_int_eq(finish(&b, 40000), 1);
    const char *r = slurp(a.out, 0);
    ck_assert_str_eq(r, slurp(b.out, 1));
    ASSERT_LINE(r, "nodes", "FAIL", "n3 arrived but never finished: its key vanished",
                "read the output of `ecoord check` on n3");
    ASSERT_LINE(r, "ports", "FAIL", "n1 -> n3 127.0.0.1:", "open TCP ports");
    ck_assert(ec_test_wait(check_keys_gone, "die", 5000));
}
END_TEST

START_TEST(duplicate_node_ids)
{
    node_t a = start_node("dup", "same", "2", NULL, NULL, NULL);
    node_t b = start_node("dup", "same", "2", NULL, NULL, NULL);
    ck_assert_int_eq(finish(&a, 30000), 1);
    ck_assert_int_eq(finish(&b, 30000), 1);
    const char *r = slurp(a.out, 0);
    ck_assert_str_eq(r, slurp(b.out, 1));
    ASSERT_LINE(r, "node-ids", "FAIL", "node id same is used by 2 processes",
                "give every node its own --node_id");
}
END_TEST

START_TEST(node_running_another_ecoord_version)
{
    /* old1 runs an ecoord that wrote its facts in the text encoding of
     * version 1: the report names it and says to run one version everywhere
     * (it is not silently counted as missing). */
    const char *old = "ecoord-check-facts 1\nphase 1\nnode_id old1\nnproc 1\nend\n";
    int64_t lease = 0;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 60, &lease, NULL, NULL), 0);
    ck_assert_int_eq(ec_etcd_put(c, "/oldv/check/nodes/old1", old, strlen(old), lease, NULL,
                                 NULL), 0);
    node_t a = start_node("oldv", "n1", "2", NULL, "--elastic_timeout=2", NULL);
    ck_assert_int_eq(finish(&a, 30000), 1);
    const char *r = slurp(a.out, 0);
    ASSERT_LINE(r, "nodes", "FAIL", "the facts of old1 cannot be read", NULL);
    ASSERT_LINE(r, "nodes", "FAIL", "run the same ecoord version on every node",
                "run the same ecoord version on every node");
    ck_assert_int_eq(ec_etcd_lease_revoke(c, lease, NULL), 0);
    ck_assert(ec_test_wait(check_keys_gone, "oldv", 5000));
}
END_TEST

static bool no_keys_under(void *arg)
{
    ec_kv_list_t l;
    if (ec_etcd_get_prefix(c, (const char *)arg, 0, &l, NULL) < 0)
        return false;
    size_t n = l.n;
    ec_kv_list_free(&l);
    return n == 0;
}

/* A stand-in for the worker library's allreduce program, speaking its
 * result-line contract (coord/check/command.h). */
static void write_prog(const char *path, const char *line)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "#!/bin/sh\n[ \"${LOCAL_RANK:-0}\" = 0 ] && echo \"ecoord-allreduce: %s\"\nexit 0\n",
            line);
    fclose(f);
    ck_assert_int_eq(chmod(path, 0755), 0);
}

START_TEST(allreduce_through_launch)
{
    char ok[300], bad[300], ea[400], eb[400];
    snprintf(ok, sizeof(ok), "%s/allreduce-ok", tmp);
    snprintf(bad, sizeof(bad), "%s/allreduce-bad", tmp);
    write_prog(ok, "ok backend=gloo ranks=${WORLD_SIZE} bytes=16777216 seconds=0.020 "
                   "busbw_gbps=1.25");
    write_prog(bad, "FAIL element 3 is 5.0, expected 6.0");
    snprintf(ea, sizeof(ea), "ECOORD_CHECK_ALLREDUCE=%s", ok);
    snprintf(eb, sizeof(eb), "ECOORD_CHECK_ALLREDUCE=%s", ok);
    node_t a = start_node("coll", "a", "2", ea, "--nproc_per_node=2", NULL);
    node_t b = start_node("coll", "b", "2", eb, "--nproc_per_node=2", NULL);
    ck_assert_int_eq(finish(&a, 60000), 0);
    ck_assert_int_eq(finish(&b, 60000), 0);
    const char *r = slurp(a.out, 0);
    ASSERT_LINE(r, "allreduce", "PASS", "allreduce of 16 MiB over 4 ranks (gloo) verified", NULL);
    ck_assert(ec_test_wait(check_keys_gone, "coll", 5000));

    snprintf(eb, sizeof(eb), "ECOORD_CHECK_ALLREDUCE=%s", bad);
    a = start_node("coll2", "a", "2", ea, NULL, NULL);
    b = start_node("coll2", "b", "2", eb, NULL, NULL);
    ck_assert_int_eq(finish(&a, 60000), 1);
    ck_assert_int_eq(finish(&b, 60000), 1);
    r = slurp(b.out, 0);
    ASSERT_LINE(r, "allreduce", "FAIL", "the allreduce failed on 1 node", "NCCL_DEBUG=INFO");
    ck_assert_msg(strstr(line_of(r, "allreduce"), "b: FAIL element 3 is 5.0, expected 6.0 (log: "),
                  "%s", r);
    /* nothing left of either run, the allreduce jobs' keys included */
    ck_assert(ec_test_wait(no_keys_under, "/coll", 5000));
}
END_TEST

START_TEST(etcd_unreachable)
{
    char out[320], cmd[1024];
    snprintf(out, sizeof(out), "%s/down.out", tmp);
    snprintf(cmd, sizeof(cmd), "exec %s check --elastic_server=127.0.0.1:1 --job_id=down "
                               "--node_id=a --np=2 --log_dir=%s/log 2>/dev/null", ecoord(), tmp);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    node_t n = {.pid = ec_test_spawn(argv, out)};
    snprintf(n.out, sizeof(n.out), "%s", out);
    snprintf(n.err, sizeof(n.err), "/dev/null");
    ck_assert_int_eq(finish(&n, 30000), 1);
    const char *r = slurp(out, 0);
    ASSERT_LINE(r, "etcd", "FAIL", "127.0.0.1:1", "check that etcd runs and that this node reaches it");
    ASSERT_LINE(r, "nodes", "FAIL", "only this node (a) was checked", NULL);
    ASSERT_LINE(r, "ports", "SKIP", "etcd is unreachable", NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("check");
    TCase *tc = tcase_create("check");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    ec_tcase_add(tc, healthy_three_nodes_on_loopback);
    ec_tcase_add(tc, json_report_without_a_server);
    ec_tcase_add(tc, process_without_a_gpu);
    ec_tcase_add(tc, tiny_shm);
    ec_tcase_add(tc, blocked_port);
    ec_tcase_add(tc, nccl_variable_differs);
    ec_tcase_add(tc, duplicate_host_names);
    ec_tcase_add(tc, interface_that_does_not_exist);
    ec_tcase_add(tc, node_that_never_arrives);
    ec_tcase_add(tc, node_that_dies_midway);
    ec_tcase_add(tc, duplicate_node_ids);
    ec_tcase_add(tc, node_running_another_ecoord_version);
    ec_tcase_add(tc, allreduce_through_launch);
    ec_tcase_add(tc, etcd_unreachable);
    suite_add_tcase(s, tc);
    return s;
}

EC_INTEGRATION_MAIN(suite)
