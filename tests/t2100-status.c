/* `ecoord status` against a real etcd and real coordinators: it shows the
 * current epoch, the leader and one row per node with the ranks and
 * endpoints the epoch gave it, marks the standby, and never lists another
 * job's nodes (job "jst" is not a prefix of "jst2"); --json says the same as
 * one parseable object; failure records appear newest first, five at most,
 * and the current run's first failure is marked "root cause" (shown even
 * when older than those five);
 * a record of garbage is a "corrupt" row, not a crash; a member whose record
 * is gone stays a row ("gone"), a refused node shows why; an unknown job and an
 * unreachable etcd exit 1 with a message that names what to check; --watch
 * prints again after a change, and exits 0 when the job completes or on
 * SIGINT.  status only reads: the job's revision is the same after it ran.
 *
 * The real `ecoord` binary runs as a child (path in $ECOORD), and asserts
 * are on its output. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ec_select.h"
#include "harness.h"
#include "keys.h"
#include "planner.h"
#include "records.h"

#define OUT_MAX (256 * 1024)

EC_TEST_ETCD_FIXTURE("t2100", 32)
static char *out;

static void setup(void)
{
    etcd_up();
    out = calloc(1, OUT_MAX);
}

static void teardown(void)
{
    free(out);
    etcd_down();
}

#define bin ec_test_bin

#define wait_log ec_test_wait_file

/* A coordinator (tests/ec-test-node), registered when this returns. */
static pid_t start_node(const char *job, const char *id, int min, int max, int nproc, int ttl)
{
    char smin[16], smax[16], sn[16], st[16], log[320];
    snprintf(smin, sizeof(smin), "%d", min);
    snprintf(smax, sizeof(smax), "%d", max);
    snprintf(sn, sizeof(sn), "%d", nproc);
    snprintf(st, sizeof(st), "%d", ttl);
    snprintf(log, sizeof(log), "%s/%s-%s.log", tmp, job, id);
    char *argv[] = {(char *)bin("EC_TEST_NODE", "tests/ec-test-node"),
                    (char *)ec_embed_endpoint(etcd), (char *)job, (char *)id, smin, smax, sn,
                    "600000", st, "0", NULL};
    pid_t pid = ec_test_spawn(argv, log);
    pids[npids++] = pid;
    ck_assert_msg(wait_log(log, "STARTED", 10000), "node %s did not start (log %s)", id, log);
    return pid;
}

static ec_epoch_t *wait_epoch(const char *root, uint64_t number, int world)
{
    return ec_test_need_epoch(c, root, number, world, 10000);
}

static void keys_of(ec_keys_t *k, const char *job)
{
    ck_assert_int_eq(ec_keys_init(k, NULL, job, NULL), 0);
}

/* The leader key's value. */
static char *leader_of(const ec_keys_t *k)
{
    char key[EC_KEY_MAX];
    ec_key_leader(k, key, sizeof(key));
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert(found);
    char *id = strdup((char *)kv.value);
    ec_kv_free(&kv);
    return id;
}

/* The state a node's record says, as status should print it. */
static const char *record_state(const ec_keys_t *k, const char *id)
{
    char key[EC_KEY_MAX];
    ec_key_node(k, id, key, sizeof(key));
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert_msg(found, "node %s has no record", id);
    ec_node_rec_t *r = NULL;
    ck_assert_int_eq(ec_node_rec_decode(kv.value, kv.value_len, key, &r, NULL), 0);
    const char *s = ec_node_state_name(r->state);
    ec_node_rec_free(r);
    ec_kv_free(&kv);
    return s;
}

static int64_t store_revision(void)
{
    int64_t rev = 0;
    ck_assert_int_eq(ec_etcd_status(c, &rev, NULL, 0, NULL), 0);
    return rev;
}

/* Run `ecoord status --elastic_server=<etcd> --job_id=job [flag] [flag2]`;
 * its stdout and stderr land in out. */
static int status_ep(const char *endpoint, const char *job, const char *flag, const char *flag2)
{
    char srv[300], jid[300];
    snprintf(srv, sizeof(srv), "--elastic_server=%s", endpoint);
    snprintf(jid, sizeof(jid), "--job_id=%s", job);
    char *argv[] = {(char *)bin("ECOORD", "./ecoord"), "status", srv, jid, (char *)flag,
                    (char *)flag2, NULL};
    return ec_test_run(argv, out, OUT_MAX);
}

static int status(const char *job, const char *flag)
{
    return status_ep(ec_embed_endpoint(etcd), job, flag, NULL);
}

/* The same, where nothing else writes to etcd: the store revision must not
 * move while it runs (status never writes). */
static int status_readonly(const char *job, const char *flag)
{
    int64_t before = store_revision();
    int rc = status(job, flag);
    ck_assert_int_eq(store_revision(), before);
    return rc;
}

/* ---- reading the text table ------------------------------------------------ */

enum { C_MID, C_NODE, C_HOST, C_RANKS, C_EPS, C_STATE, C_IN, C_STANDBY, NTOK };

static bool yes_no(const char *s)
{
    return !strcmp(s, "yes") || !strcmp(s, "no");
}

/* Find the table row of node id in out: its first NTOK cells into tok
 * (pointing into buf), the rest of the line (the note) into *note. */
static bool find_row(const char *text, const char *id, char *buf, size_t len, char *tok[NTOK],
                     char **note)
{
    const char *p = text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        snprintf(buf, len, "%.*s", (int)n, p);
        p += n + (eol ? 1 : 0);
        char *save = NULL, *s = buf;
        int k = 0;
        for (; k < NTOK; k++, s = NULL)
            if (!(tok[k] = strtok_r(s, " ", &save)))
                break;
        if (k < NTOK || strcmp(tok[C_NODE], id) || !yes_no(tok[C_IN]) || !yes_no(tok[C_STANDBY]))
            continue;
        *note = save ? save + strspn(save, " ") : "";
        return true;
    }
    return false;
}

/* "a-b" or "a" from the planner's rank rule, for member m_id. */
static void ranks_of(int m_id, int nproc, char *buf, size_t len)
{
    int64_t a = ec_rank(m_id, nproc, 0), b = ec_rank(m_id, nproc, nproc - 1);
    if (a == b)
        snprintf(buf, len, "%lld", (long long)a);
    else
        snprintf(buf, len, "%lld-%lld", (long long)a, (long long)b);
}

/* ---- reading JSON --------------------------------------------------------- */

/* Whether s is one JSON value whose braces and brackets balance outside
 * strings, with every string closed. */
static bool json_balanced(const char *s)
{
    int depth = 0;
    bool in_str = false, any = false;
    for (; *s; s++) {
        if (in_str) {
            if (*s == '\\' && s[1])
                s++;
            else if (*s == '"')
                in_str = false;
            else if ((unsigned char)*s < 0x20)
                return false; /* raw control character inside a string */
            continue;
        }
        if (*s == '"') {
            in_str = true;
        } else if (*s == '{' || *s == '[') {
            depth++;
            any = true;
        } else if (*s == '}' || *s == ']') {
            if (--depth < 0)
                return false;
        }
    }
    return any && depth == 0 && !in_str;
}

/* The object of node id in the nodes array (up to its closing brace; node
 * objects hold no nested objects). */
static bool json_node(const char *json, const char *id, char *buf, size_t len)
{
    char needle[300];
    snprintf(needle, sizeof(needle), "{\"node_id\":\"%s\"", id);
    const char *p = strstr(json, needle);
    if (!p)
        return false;
    const char *e = strchr(p, '}');
    snprintf(buf, len, "%.*s", e ? (int)(e - p + 1) : 0, p);
    return e != NULL;
}

/* ---- writing records the way a node would ----------------------------------- */

static void put_failure_of_run(const ec_keys_t *k, uint64_t seq, const char *node, int local,
                               int rank, int code, const char *log, const char *line,
                               uint64_t run, uint64_t epoch)
{
    char *lines[2] = {"earlier line", (char *)line};
    ec_failure_t f = {.node_id = (char *)node, .kind = EC_FAILURE_EXITED, .local_rank = local,
                      .global_rank = rank, .exit_code = code, .epoch = epoch,
                      .time_ms = (int64_t)seq, .log_path = (char *)log, .nlines = 2,
                      .last_lines = lines, .run = run};
    void *buf;
    size_t len;
    ec_error_t err = {0};
    ck_assert_msg(ec_failure_encode(&f, &buf, &len, &err) == 0, "%s", err.msg);
    char key[EC_KEY_MAX];
    ck_assert_int_gt(ec_key_failure(k, seq, node, local, key, sizeof(key)), 0);
    ck_assert_int_eq(ec_etcd_put(c, key, buf, len, 0, NULL, &err), 0);
    free(buf);
}

static void put_failure(const ec_keys_t *k, uint64_t seq, const char *node, int local, int rank,
                        int code, const char *log, const char *line)
{
    put_failure_of_run(k, seq, node, local, rank, code, log, line, 0, 1);
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* The job's status as its leader writes it: under the leadership holding
 * the leader key (agents ignore and repair one that is not). */
static void put_job_state(const ec_keys_t *k, ec_job_state_t state, uint64_t epoch)
{
    ec_job_status_t st = {.state = state, .reason = "", .epoch = epoch,
                          .updated_at_ms = 1700000000000, .updated_by = "test"};
    char lkey[EC_KEY_MAX], *lid = NULL;
    ec_key_leader(k, lkey, sizeof(lkey));
    ec_kv_t lk;
    bool found = false;
    if (ec_etcd_get(c, lkey, &lk, &found, NULL, NULL) == 0 && found) {
        lid = strndup((const char *)lk.value, lk.value_len);
        st.leader_id = lid;
        st.leader_rev = lk.create_revision;
        ec_kv_free(&lk);
    }
    void *buf;
    size_t len;
    ec_error_t err = {0};
    ck_assert_msg(ec_job_status_encode(&st, &buf, &len, &err) == 0, "%s", err.msg);
    char key[EC_KEY_MAX];
    ec_key_status(k, key, sizeof(key));
    ck_assert_int_eq(ec_etcd_put(c, key, buf, len, 0, NULL, &err), 0);
    free(buf);
    free(lid);
}

/* A node record as an agent writes it; ports port0, port0 + 1, ... */
static void put_node(const ec_keys_t *k, const char *id, int nproc, ec_node_state_t state,
                     const char *reason, uint16_t port0)
{
    ec_node_rec_t *r = ec_node_rec_new(nproc, 0);
    ck_assert_ptr_nonnull(r);
    r->node_id = strdup(id);
    r->host = strdup("10.0.0.9");
    for (int i = 0; i < nproc; i++)
        r->ports[i] = (uint16_t)(port0 + i);
    r->master_port = (uint16_t)(port0 + 100);
    r->incarnation = 1;
    r->state = state;
    r->reason = strdup(reason);
    r->registered_at_ms = 1700000000000;
    void *buf;
    size_t len;
    ec_error_t err = {0};
    ck_assert_msg(ec_node_rec_encode(r, &buf, &len, &err) == 0, "%s", err.msg);
    char key[EC_KEY_MAX];
    ec_key_node(k, id, key, sizeof(key));
    /* under a lease, as agents write them (an unleased record is foreign) */
    int64_t lease;
    ck_assert_int_eq(ec_etcd_lease_grant(c, 120, &lease, NULL, &err), 0);
    ck_assert_int_eq(ec_etcd_put(c, key, buf, len, lease, NULL, &err), 0);
    free(buf);
    ec_node_rec_free(r);
}

/* The same record written without a lease, as another tool would. */
static void put_foreign_node(const ec_keys_t *k, const char *id, uint16_t port0)
{
    put_node(k, id, 2, EC_NODE_READY, "", port0);
    char key[EC_KEY_MAX];
    ec_key_node(k, id, key, sizeof(key));
    ec_kv_t kv;
    bool found = false;
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert(found);
    ck_assert_int_eq(ec_etcd_put(c, key, kv.value, kv.value_len, 0, NULL, NULL), 0);
    ec_kv_free(&kv);
}

/* ---- tests ----------------------------------------------------------------- */

START_TEST(table_shows_epoch_members_and_standby)
{
    ec_keys_t k;
    keys_of(&k, "jst");
    const char *ids[] = {"n1", "n2", "n3"};
    for (int i = 0; i < 3; i++)
        start_node("jst", ids[i], 1, 3, 2, 10);
    ec_epoch_t *ep = wait_epoch(ec_keys_root(&k), 1, 6);
    start_node("jst", "n4", 1, 3, 2, 10);  /* np_max reached: stands by */
    start_node("jst2", "other", 1, 2, 2, 10); /* another job, a longer id */

    ck_assert_int_eq(status("jst", NULL), 0);
    printf("# status output:\n%s", out);
    char *leader = leader_of(&k);
    char line[300];
    ck_assert_msg(strstr(out, "job       jst  ("), "%s", out);
    ck_assert_msg(strstr(out, ec_embed_endpoint(etcd)), "no endpoint in:\n%s", out);
    ck_assert_msg(strstr(out, "state     running"), "%s", out);
    ck_assert_msg(strstr(out, "epoch     1  world size 6 = 3 nodes x N=2"), "%s", out);
    ck_assert_msg(strstr(out, "reason    start"), "%s", out);
    snprintf(line, sizeof(line), "leader    %s\n", leader);
    ck_assert_msg(strstr(out, line), "no '%s' in:\n%s", line, out);
    ck_assert_msg(strstr(out, "decided   20"), "%s", out);
    ck_assert_msg(strstr(out, "failures: none"), "%s", out);

    char buf[4096], *tok[NTOK], *note;
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(find_row(out, ids[i], buf, sizeof(buf), tok, &note), "no row for %s",
                      ids[i]);
        int m = ec_epoch_find_member(ep, ids[i]);
        char want[64];
        snprintf(want, sizeof(want), "%d", m);
        ck_assert_str_eq(tok[C_MID], want);
        ranks_of(m, 2, want, sizeof(want));
        ck_assert_str_eq(tok[C_RANKS], want);
        ck_assert_str_eq(tok[C_HOST], "127.0.0.1");
        char e0[EC_ENDPOINT_MAX];
        ck_assert_int_gt(ec_epoch_endpoint(ep, m, 0, e0, sizeof(e0)), 0);
        snprintf(want, sizeof(want), "%s-%u", e0, (unsigned)ep->members[m].ports[1]);
        ck_assert_str_eq(tok[C_EPS], want);
        ck_assert_str_eq(tok[C_STATE], record_state(&k, ids[i]));
        ck_assert_str_eq(tok[C_IN], "yes");
        ck_assert_str_eq(tok[C_STANDBY], "no");
    }
    ck_assert_msg(find_row(out, "n4", buf, sizeof(buf), tok, &note), "no row for the standby");
    ck_assert_str_eq(tok[C_MID], "-");
    ck_assert_str_eq(tok[C_RANKS], "-");
    ck_assert_str_eq(tok[C_IN], "no");
    ck_assert_str_eq(tok[C_STANDBY], "yes");
    ck_assert_msg(!find_row(out, "other", buf, sizeof(buf), tok, &note),
                  "another job's node is listed:\n%s", out);
    /* Members come first, in M_id order, then the others. */
    const char *order[] = {"\n0  ", "\n1  ", "\n2  ", "\n-  "};
    for (int i = 1; i < 4; i++) {
        char *a = strstr(out, order[i - 1]), *b = strstr(out, order[i]);
        ck_assert_msg(a && b && a < b, "rows out of order:\n%s", out);
    }
    free(leader);
    ec_epoch_free(ep);
}
END_TEST

START_TEST(json_lists_every_node)
{
    ec_keys_t k;
    keys_of(&k, "jjs");
    const char *ids[] = {"a1", "a2", "a3"};
    for (int i = 0; i < 3; i++)
        start_node("jjs", ids[i], 1, 3, 2, 10);
    ec_epoch_t *ep = wait_epoch(ec_keys_root(&k), 1, 6);
    start_node("jjs", "a4", 1, 3, 2, 10);

    ck_assert_int_eq(status("jjs", "--json"), 0);
    printf("# status --json output:\n%s", out);
    ck_assert_msg(json_balanced(out), "unbalanced JSON:\n%s", out);
    ck_assert_msg(out[0] == '{' && strchr(out, '\n') == out + strlen(out) - 1,
                  "not one object on one line:\n%s", out);
    ck_assert(strstr(out, "\"job_id\":\"jjs\""));
    ck_assert(strstr(out, "\"state\":\"running\""));
    ck_assert(strstr(out, "\"epoch\":{\"number\":1,\"world_size\":6,\"nproc\":2,\"nmembers\":3"));
    char *leader = leader_of(&k), want[600], obj[4096];
    snprintf(want, sizeof(want), "\"leader\":\"%s\"", leader);
    ck_assert_msg(strstr(out, want), "no %s", want);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(json_node(out, ids[i], obj, sizeof(obj)), "node %s missing", ids[i]);
        int m = ec_epoch_find_member(ep, ids[i]);
        snprintf(want, sizeof(want), "\"m_id\":%d,", m);
        ck_assert_msg(strstr(obj, want), "%s lacks %s", obj, want);
        snprintf(want, sizeof(want), "\"rank_first\":%lld,\"rank_last\":%lld",
                 (long long)ec_rank(m, 2, 0), (long long)ec_rank(m, 2, 1));
        ck_assert_msg(strstr(obj, want), "%s lacks %s", obj, want);
        char e1[EC_ENDPOINT_MAX];
        ec_epoch_endpoint(ep, m, 1, e1, sizeof(e1));
        snprintf(want, sizeof(want), "\"%s\"]", e1);
        ck_assert_msg(strstr(obj, want), "%s lacks endpoint %s", obj, want);
        ck_assert(strstr(obj, "\"in_epoch\":true,\"standby\":false"));
    }
    ck_assert_msg(json_node(out, "a4", obj, sizeof(obj)), "standby missing");
    ck_assert(strstr(obj, "\"m_id\":null"));
    ck_assert(strstr(obj, "\"in_epoch\":false,\"standby\":true"));
    ck_assert(strstr(out, "\"failures_total\":0,\"failures\":[]"));
    free(leader);
    ec_epoch_free(ep);
}
END_TEST

START_TEST(failures_newest_first)
{
    ec_keys_t k;
    keys_of(&k, "jfail");
    start_node("jfail", "f1", 1, 1, 2, 10);
    ec_epoch_free(wait_epoch(ec_keys_root(&k), 1, 2));
    /* Seven failures, seq = time: only the newest five are shown.  The
     * newest carries a terminal escape in its last log line. */
    for (int i = 0; i < 6; i++)
        put_failure(&k, 1700000000000 + i, "f1", 0, 0, 100 + i, "/var/log/old.log", "old");
    put_failure(&k, 1700000009000, "f1", 1, 1, 7, "/var/log/f1/rank1.log",
                "boom \x1b[31mred\x1b[0m");

    ck_assert_int_eq(status("jfail", NULL), 0);
    printf("# status output:\n%s", out);
    ck_assert_msg(strstr(out, "failures: 7, newest 5 shown (newest first)"), "%s", out);
    char *newest = strstr(out, "exited with code 7");
    ck_assert_msg(newest, "%s", out);
    ck_assert(strstr(out, "node f1  rank 1 (local 1)  exited with code 7  epoch 1"));
    ck_assert(strstr(out, "log: /var/log/f1/rank1.log"));
    ck_assert_msg(strstr(out, "last line: boom \\x1b[31mred\\x1b[0m"), "escape not shown safely");
    ck_assert_msg(!strchr(out, '\x1b'), "a raw escape reached the terminal");
    char *next = strstr(out, "exited with code 105");
    ck_assert_msg(next && newest < next, "not newest first:\n%s", out);
    ck_assert_msg(!strstr(out, "exited with code 101"), "more than five failures shown:\n%s", out);
    /* ...but the run's first failure, the root cause, is shown after them. */
    char *root = strstr(out, "  ...\n");
    ck_assert_msg(root && next < root &&
                      strstr(root, "exited with code 100  epoch 1  root cause\n"),
                  "the root cause is not shown after the newest five:\n%s", out);

    ck_assert_int_eq(status("jfail", "--json"), 0);
    ck_assert_msg(json_balanced(out), "unbalanced JSON:\n%s", out);
    ck_assert(strstr(out, "\"failures_total\":7,"));
    ck_assert_msg(strstr(out, "\"node_id\":\"f1\",\"kind\":\"exited\",\"local_rank\":1,"
                              "\"global_rank\":1,\"exit_code\":7"), "%s", out);
    ck_assert(strstr(out, "\"last_lines\":[\"earlier line\",\"boom \\u001b[31mred\\u001b[0m\"]"));
    ck_assert(!strstr(out, "\"exit_code\":101"));
    ck_assert(strstr(out, "\"exit_code\":100"));
}
END_TEST

/* torchrun's root cause, across nodes: the earliest failure of the current
 * run (the highest run a record names) is marked, once; an earlier run's
 * older failure is not, nor is the later failure of the other node. */
START_TEST(root_cause_is_the_runs_first_failure)
{
    ec_keys_t k;
    keys_of(&k, "jroot");
    put_failure_of_run(&k, 1700000000000, "old", 0, 0, 1, "/var/log/old.log", "run 1", 1, 3);
    put_failure_of_run(&k, 1700000005000, "nb", 0, 2, 9, "/var/log/nb.log", "first", 2, 5);
    put_failure_of_run(&k, 1700000007000, "na", 0, 0, 3, "/var/log/na.log", "second", 2, 5);

    ck_assert_int_eq(status("jroot", NULL), 0);
    printf("# status output:\n%s", out);
    ck_assert_msg(count_of(out, "root cause") == 1, "not one root cause:\n%s", out);
    ck_assert_msg(strstr(out, "node nb  rank 2 (local 0)  exited with code 9  epoch 5  root cause\n"),
                  "nb's failure is not the root cause:\n%s", out);

    ck_assert_int_eq(status("jroot", "--json"), 0);
    ck_assert_msg(json_balanced(out), "unbalanced JSON:\n%s", out);
    ck_assert_msg(count_of(out, "\"root_cause\":true") == 1, "%s", out);
    const char *nb = strstr(out, "\"node_id\":\"nb\"");
    ck_assert_msg(nb, "%s", out);
    const char *end = strchr(nb, '}');
    const char *mark = strstr(nb, "\"root_cause\":true");
    ck_assert_msg(mark && mark < end, "nb's object is not marked:\n%s", out);
    ck_assert_msg(strstr(out, "\"run\":2,\"root_cause\":\""), "%s", out);
}
END_TEST

/* An epoch record of one member, run `run`: the current epoch, or the
 * history copy epochs/<number>. */
static void put_epoch_of_run(const ec_keys_t *k, uint64_t number, uint64_t run, bool current)
{
    ec_epoch_t *ep = ec_epoch_new(1, 1);
    ck_assert_ptr_nonnull(ep);
    ep->members[0].node_id = strdup("r1");
    ep->members[0].host = strdup("10.0.0.7");
    ep->members[0].ports[0] = 31000;
    ep->members[0].master_port = 31001;
    ep->members[0].incarnation = 1;
    ep->number = number;
    ep->run = run;
    ep->reason = EC_REASON_START;
    ep->leader_id = strdup("r1");
    ep->leader_rev = 1;
    void *buf;
    size_t len;
    ec_error_t err = {0};
    ck_assert_msg(ec_epoch_encode(ep, &buf, &len, &err) == 0, "%s", err.msg);
    char key[EC_KEY_MAX];
    if (current)
        ec_key_epoch(k, key, sizeof(key));
    else
        ec_key_epoch_history(k, number, key, sizeof(key));
    ck_assert_int_eq(ec_etcd_put(c, key, buf, len, 0, NULL, NULL), 0);
    free(buf);
    ec_epoch_free(ep);
}

/* Failure records of older agents carry no run: they are placed by their
 * epoch against the run's first epoch (from the kept epoch copies), so an
 * earlier run's failure in epoch 3 is not the root cause of run 2, whose
 * first epoch is 5. */
START_TEST(root_cause_without_run_uses_the_runs_first_epoch)
{
    ec_keys_t k;
    keys_of(&k, "jroot0");
    put_epoch_of_run(&k, 3, 1, false);
    put_epoch_of_run(&k, 5, 2, false);
    put_epoch_of_run(&k, 6, 2, true);
    put_failure_of_run(&k, 1700000001000, "r1", 0, 0, 11, "/var/log/r1.log", "run 1", 0, 3);
    put_failure_of_run(&k, 1700000002000, "r1", 0, 0, 12, "/var/log/r1.log", "first", 0, 5);
    put_failure_of_run(&k, 1700000003000, "r1", 0, 0, 13, "/var/log/r1.log", "later", 0, 6);

    ck_assert_int_eq(status("jroot0", NULL), 0);
    printf("# status output:\n%s", out);
    ck_assert_msg(count_of(out, "root cause") == 1, "not one root cause:\n%s", out);
    ck_assert_msg(strstr(out, "exited with code 12  epoch 5  root cause\n"), "%s", out);
    ck_assert_int_eq(status("jroot0", "--json"), 0);
    ck_assert_msg(strstr(out, "\"run\":2,\"root_cause\":\""), "%s", out);
}
END_TEST

START_TEST(corrupt_record_is_a_row)
{
    ec_keys_t k;
    keys_of(&k, "jbad");
    start_node("jbad", "good", 1, 1, 1, 10);
    ec_epoch_free(wait_epoch(ec_keys_root(&k), 1, 1));
    /* Random bytes behind a tag protobuf cannot parse (wire type 7), so the
     * record is garbage whatever the random tail is. */
    unsigned char junk[64] = {0xff, 0xff, 0xff, 0xff, 0x0f};
    srand((unsigned)getpid());
    for (size_t i = 5; i < sizeof(junk); i++)
        junk[i] = (unsigned char)rand();
    char key[EC_KEY_MAX];
    ec_key_node(&k, "bad", key, sizeof(key));
    ck_assert_int_eq(ec_etcd_put(c, key, junk, sizeof(junk), 0, NULL, NULL), 0);
    ck_assert_int_gt(ec_key_failure(&k, 42, "bad", -1, key, sizeof(key)), 0);
    ck_assert_int_eq(ec_etcd_put(c, key, "\xff\xff\xff\xff\x0fgarbage", 12, 0, NULL, NULL), 0);

    ck_assert_int_eq(status("jbad", NULL), 0);
    printf("# status output:\n%s", out);
    char buf[4096], *tok[NTOK], *note;
    ck_assert_msg(find_row(out, "bad", buf, sizeof(buf), tok, &note), "no row for bad:\n%s", out);
    ck_assert_str_eq(tok[C_STATE], "corrupt");
    ck_assert_str_eq(tok[C_IN], "no");
    ck_assert_msg(strstr(note, "nodes/bad"), "the note does not carry the decoder's message: %s",
                  note);
    ck_assert_msg(find_row(out, "good", buf, sizeof(buf), tok, &note), "the good row is lost");
    ck_assert_str_eq(tok[C_IN], "yes");
    ck_assert_msg(strstr(out, "  corrupt: "), "the corrupt failure is not shown:\n%s", out);

    ck_assert_int_eq(status("jbad", "--json"), 0);
    ck_assert_msg(json_balanced(out), "unbalanced JSON:\n%s", out);
    char obj[4096];
    ck_assert(json_node(out, "bad", obj, sizeof(obj)));
    ck_assert(strstr(obj, "\"state\":\"corrupt\""));
    ck_assert(strstr(obj, "\"error\":\""));
    ck_assert(json_node(out, "good", obj, sizeof(obj)));
    ck_assert(strstr(obj, "\"error\":null"));
    /* Left as it was: status reads, it does not repair. */
    ec_kv_t kv;
    bool found = false;
    ec_key_node(&k, "bad", key, sizeof(key));
    ck_assert_int_eq(ec_etcd_get(c, key, &kv, &found, NULL, NULL), 0);
    ck_assert(found && kv.value_len == sizeof(junk) && !memcmp(kv.value, junk, sizeof(junk)));
    ec_kv_free(&kv);
}
END_TEST

START_TEST(gone_member_and_refused_node)
{
    /* A job written by hand, no coordinator running: epoch 3 has members s1
     * and s2, but only s1 still has a record; s3 was refused (wrong N), s4
     * is leaving; the leader key names a node other than the epoch's
     * writer. */
    ec_keys_t k;
    keys_of(&k, "jsyn");
    ec_epoch_t *ep = ec_epoch_new(2, 2);
    ck_assert_ptr_nonnull(ep);
    const char *mids[] = {"s1", "s2"};
    for (int m = 0; m < 2; m++) {
        ep->members[m].node_id = strdup(mids[m]);
        ep->members[m].host = strdup("10.0.0.9");
        ep->members[m].ports[0] = (uint16_t)(30000 + 10 * m);
        ep->members[m].ports[1] = (uint16_t)(30000 + 10 * m + 1);
        ep->members[m].master_port = (uint16_t)(30005 + 10 * m);
        ep->members[m].incarnation = 1;
    }
    ep->number = 3;
    ep->reason = EC_REASON_LOST;
    ep->reason_detail = strdup("s0 missing");
    ep->leader_id = strdup("s9");
    ep->leader_rev = 1;
    ep->decided_at_ms = 1700000000000;
    void *buf;
    size_t len;
    ec_error_t err = {0};
    ck_assert_msg(ec_epoch_encode(ep, &buf, &len, &err) == 0, "%s", err.msg);
    char key[EC_KEY_MAX];
    ec_key_epoch(&k, key, sizeof(key));
    ck_assert_int_eq(ec_etcd_put(c, key, buf, len, 0, NULL, NULL), 0);
    free(buf);
    ec_epoch_free(ep);
    ec_key_leader(&k, key, sizeof(key));
    ck_assert_int_eq(ec_etcd_put(c, key, "s1", 2, 0, NULL, NULL), 0);
    put_node(&k, "s1", 2, EC_NODE_READY, "", 30000);
    put_node(&k, "s3", 3, EC_NODE_FAILED, "node s3 has nproc=3 but the job runs nproc=2", 30100);
    put_node(&k, "s4", 2, EC_NODE_LEAVING, "", 30200);
    put_foreign_node(&k, "s5", 30300);

    ck_assert_int_eq(status_readonly("jsyn", NULL), 0);
    printf("# status output:\n%s", out);
    ck_assert_msg(strstr(out, "state     running\n"), "%s", out);
    ck_assert(strstr(out, "epoch     3  world size 4 = 2 nodes x N=2"));
    ck_assert(strstr(out, "reason    lost: s0 missing"));
    ck_assert(strstr(out, "leader    s1  (epoch 3 was written by s9)"));
    char buf2[4096], *tok[NTOK], *note;
    ck_assert(find_row(out, "s2", buf2, sizeof(buf2), tok, &note));
    ck_assert_str_eq(tok[C_MID], "1");
    ck_assert_str_eq(tok[C_RANKS], "2-3");
    ck_assert_str_eq(tok[C_EPS], "10.0.0.9:30010-30011"); /* from the epoch */
    ck_assert_str_eq(tok[C_STATE], "gone");
    ck_assert_str_eq(tok[C_IN], "yes");
    ck_assert(find_row(out, "s3", buf2, sizeof(buf2), tok, &note));
    ck_assert_str_eq(tok[C_STATE], "failed");
    ck_assert_str_eq(tok[C_STANDBY], "no");
    ck_assert_str_eq(tok[C_EPS], "10.0.0.9:30100-30102"); /* from the record */
    ck_assert_str_eq(note, "node s3 has nproc=3 but the job runs nproc=2");
    ck_assert(find_row(out, "s4", buf2, sizeof(buf2), tok, &note));
    ck_assert_str_eq(tok[C_STATE], "leaving");
    ck_assert_str_eq(tok[C_STANDBY], "no"); /* not eligible */
    ck_assert(find_row(out, "s5", buf2, sizeof(buf2), tok, &note)); /* unleased: foreign */
    ck_assert_str_eq(tok[C_STANDBY], "no");
    ck_assert_msg(!strncmp(note, "foreign:", 8), "%s", note);

    ck_assert_int_eq(status_readonly("jsyn", "--json"), 0);
    ck_assert_msg(json_balanced(out), "unbalanced JSON:\n%s", out);
    char obj[4096];
    ck_assert(json_node(out, "s2", obj, sizeof(obj)));
    ck_assert_msg(strstr(obj, "\"m_id\":1,\"host\":\"10.0.0.9\",\"nproc\":2,\"rank_first\":2,"
                              "\"rank_last\":3,\"endpoints\":[\"10.0.0.9:30010\",\"10.0.0.9:30011\"],"
                              "\"state\":\"gone\",\"in_epoch\":true"), "%s", obj);
    ck_assert(json_node(out, "s3", obj, sizeof(obj)));
    ck_assert(strstr(obj, "\"reason\":\"node s3 has nproc=3 but the job runs nproc=2\""));
    ck_assert(strstr(obj, "\"foreign\":false"));
    ck_assert(json_node(out, "s5", obj, sizeof(obj)));
    ck_assert_msg(strstr(obj, "\"foreign\":true"), "%s", obj);
}
END_TEST

START_TEST(unknown_job_exits_1_with_hint)
{
    ec_keys_t k;
    keys_of(&k, "jreal");
    char key[EC_KEY_MAX];
    ec_key_leader(&k, key, sizeof(key));
    ck_assert_int_eq(ec_etcd_put(c, key, "x", 1, 0, NULL, NULL), 0);

    ck_assert_int_eq(status_readonly("nosuch", NULL), 1);
    ck_assert_msg(strstr(out, "no job 'nosuch' under prefix"), "%s", out);
    ck_assert_msg(strstr(out, ec_embed_endpoint(etcd)), "%s", out);
    ck_assert_msg(strstr(out, "check --job_id and --etcd_prefix"), "%s", out);
    /* An existing job under another prefix is not found either. */
    ck_assert_int_eq(status_readonly("jreal", "--etcd_prefix=/elsewhere"), 1);
    ck_assert_msg(strstr(out, "no job 'jreal' under prefix /elsewhere"), "%s", out);
    /* A job id that is a prefix of an existing one is a different job. */
    ck_assert_int_eq(status_readonly("jre", NULL), 1);
    /* And the one that exists is shown. */
    ck_assert_int_eq(status_readonly("jreal", NULL), 0);
    ck_assert_int_eq(status_readonly("jreal", "--json"), 0);
    ck_assert(strstr(out, "\"state\":\"forming\""));
    ck_assert_int_eq(status_readonly("jreal", NULL), 0);
    ck_assert_msg(strstr(out, "state     forming"), "%s", out);
}
END_TEST

START_TEST(unreachable_etcd_exits_1_quickly)
{
    /* A loopback port nobody listens on: bind, learn it, close. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    close(fd);
    char ep[64];
    snprintf(ep, sizeof(ep), "127.0.0.1:%d", ntohs(a.sin_port));
    int64_t t0 = ec_test_now_ms();
    ck_assert_int_eq(status_ep(ep, "j", NULL, NULL), 1);
    int64_t took = ec_test_now_ms() - t0;
    printf("# unreachable: %lld ms: %s", (long long)took, out);
    ck_assert_msg(took < ec_test_ms(6000), "took %lld ms", (long long)took);
    ck_assert_msg(strstr(out, ep), "the message does not name %s: %s", ep, out);
    ck_assert_msg(strstr(out, "ecoord status: "), "%s", out);
}
END_TEST

typedef struct {
    const char *log;
    const char *needle;
    int count; /* at least this many lines containing needle */
} lines_t;

static bool log_lines(void *arg)
{
    lines_t *l = arg;
    FILE *f = fopen(l->log, "r");
    if (!f)
        return false;
    char line[65536];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, l->needle) != NULL;
    fclose(f);
    return n >= l->count;
}

static pid_t spawn_watch(const char *job, const char *flag, const char *log)
{
    char srv[300], jid[300];
    snprintf(srv, sizeof(srv), "--elastic_server=%s", ec_embed_endpoint(etcd));
    snprintf(jid, sizeof(jid), "--job_id=%s", job);
    char *argv[] = {(char *)bin("ECOORD", "./ecoord"), "status", "--watch", srv, jid,
                    (char *)flag, NULL};
    pid_t pid = ec_test_spawn(argv, log);
    pids[npids++] = pid;
    return pid;
}

START_TEST(watch_reprints_and_ends_with_the_job)
{
    ec_keys_t k;
    keys_of(&k, "jw");
    const char *ids[] = {"w1", "w2", "w3"};
    pid_t node[3];
    for (int i = 0; i < 3; i++)
        node[i] = start_node("jw", ids[i], 1, 3, 1, 60);
    ec_epoch_free(wait_epoch(ec_keys_root(&k), 1, 3));

    char tlog[320], jlog[320], ilog[320];
    snprintf(tlog, sizeof(tlog), "%s/watch-text.log", tmp);
    snprintf(jlog, sizeof(jlog), "%s/watch-json.log", tmp);
    snprintf(ilog, sizeof(ilog), "%s/watch-int.log", tmp);
    pid_t tw = spawn_watch("jw", NULL, tlog);
    pid_t jw = spawn_watch("jw", "--json", jlog);
    pid_t iw = spawn_watch("jw", NULL, ilog);
    ck_assert_msg(wait_log(tlog, "epoch     1  world size 3", 10000), "no first block");
    ck_assert_msg(wait_log(jlog, "\"number\":1,", 10000), "no first JSON object");
    ck_assert_msg(wait_log(ilog, "epoch     1  world size 3", 10000), "no first block");

    /* SIGINT ends a watch with 0. */
    kill(iw, SIGINT);
    ck_assert_int_eq(ec_test_reap(iw, 5000), 0);

    /* A member leaves: a new block follows, under a separator line. */
    char *leader = leader_of(&k);
    int v = strcmp(leader, "w2") ? 1 : 2;
    kill(node[v], SIGTERM);
    ec_epoch_free(wait_epoch(ec_keys_root(&k), 2, 2));
    ck_assert_msg(wait_log(tlog, "epoch     2  world size 2", 10000), "no block after the leave");
    ck_assert(ec_test_file_contains(tlog, "---- 20"));
    ck_assert_msg(wait_log(jlog, "\"number\":2,", 10000), "no JSON object after the leave");
    ck_assert_int_eq(ec_test_reap(tw, 1), -1); /* still watching */
    ck_assert_int_eq(ec_test_reap(jw, 1), -1);

    /* The job completes: both watches print it and exit 0. */
    put_job_state(&k, EC_JOB_COMPLETED, 2);
    ck_assert_int_eq(ec_test_reap(tw, 5000), 0);
    ck_assert_int_eq(ec_test_reap(jw, 5000), 0);
    ck_assert(ec_test_file_contains(tlog, "state     completed"));
    ck_assert(ec_test_file_contains(jlog, "\"state\":\"completed\""));

    /* Every JSON line is one balanced object. */
    FILE *f = fopen(jlog, "r");
    ck_assert_ptr_nonnull(f);
    int objs = 0;
    while (fgets(out, OUT_MAX, f)) {
        ck_assert_msg(out[0] == '{' && json_balanced(out), "not an object per line: %s", out);
        objs++;
    }
    fclose(f);
    ck_assert_int_ge(objs, 3);
    lines_t l = {tlog, "---- 20", 2};
    ck_assert(log_lines(&l)); /* the first block plus at least two reprints */
    free(leader);
}
END_TEST

START_TEST(watch_of_finished_job_prints_once)
{
    ec_keys_t k;
    keys_of(&k, "jdone");
    char key[EC_KEY_MAX];
    ec_key_status(&k, key, sizeof(key));
    /* A status record of garbage: shown as corrupt, the watch goes on; then
     * a proper failed status ends it. */
    ck_assert_int_eq(ec_etcd_put(c, key, "\xff\xff\xff\xff\x0fgarbage", 12, 0, NULL, NULL), 0);
    char log[320];
    snprintf(log, sizeof(log), "%s/watch-done.log", tmp);
    pid_t w = spawn_watch("jdone", NULL, log);
    ck_assert_msg(wait_log(log, "status record corrupt", 10000), "no first block");
    ck_assert_int_eq(ec_test_reap(w, 1), -1);
    ec_job_status_t st = {.state = EC_JOB_FAILED, .reason = "node n3 failed", .epoch = 0,
                          .updated_at_ms = 1700000000000, .updated_by = "n1"};
    void *buf;
    size_t len;
    ck_assert_int_eq(ec_job_status_encode(&st, &buf, &len, NULL), 0);
    ck_assert_int_eq(ec_etcd_put(c, key, buf, len, 0, NULL, NULL), 0);
    free(buf);
    ck_assert_int_eq(ec_test_reap(w, 5000), 0);
    ck_assert(ec_test_file_contains(log, "state     failed: node n3 failed"));
    /* Already finished: prints once and exits at once. */
    ck_assert_int_eq(status_readonly("jdone", "--watch"), 0);
    ck_assert(strstr(out, "state     failed"));
}
END_TEST

/* A job id that is not there (a typo, or no --job_id: 'default') is
 * answered with the job ids that are under that prefix, read a key per job
 * (etcd's keys are sorted: after /A/'s first key the next read starts past
 * /A/), so the user sees which one was meant. */
START_TEST(an_unknown_job_names_the_jobs_that_are_there)
{
    const char *jobs[] = {"jlist-a", "jlist-b"};
    for (int i = 0; i < 2; i++) {
        ec_keys_t k;
        keys_of(&k, jobs[i]);
        char key[EC_KEY_MAX];
        ec_key_leader(&k, key, sizeof(key));
        ck_assert_int_eq(ec_etcd_put(c, key, "x", 1, 0, NULL, NULL), 0);
        ec_key_node(&k, "n1", key, sizeof(key));
        ck_assert_int_eq(ec_etcd_put(c, key, "x", 1, 0, NULL, NULL), 0);
    }
    ck_assert_int_eq(status_readonly("jlist", NULL), 1);
    ck_assert_msg(strstr(out, "no job 'jlist' under prefix"), "%s", out);
    ck_assert_msg(strstr(out, "jobs there: ") && strstr(out, "jlist-a") && strstr(out, "jlist-b"),
                  "the jobs that are there are not named: %s", out);
    /* under a prefix that holds nothing, that is said */
    ck_assert_int_eq(status_readonly("jlist-a", "--etcd_prefix=/elsewhere"), 1);
    ck_assert_msg(strstr(out, "nothing under /elsewhere/"), "%s", out);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("t2100-status");
    TCase *t = tcase_create("status");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 60);
    ec_tcase_add(t, table_shows_epoch_members_and_standby);
    ec_tcase_add(t, json_lists_every_node);
    ec_tcase_add(t, failures_newest_first);
    ec_tcase_add(t, root_cause_is_the_runs_first_failure);
    ec_tcase_add(t, root_cause_without_run_uses_the_runs_first_epoch);
    ec_tcase_add(t, corrupt_record_is_a_row);
    ec_tcase_add(t, gone_member_and_refused_node);
    ec_tcase_add(t, unknown_job_exits_1_with_hint);
    ec_tcase_add(t, an_unknown_job_names_the_jobs_that_are_there);
    ec_tcase_add(t, unreachable_etcd_exits_1_quickly);
    ec_tcase_add(t, watch_reprints_and_ends_with_the_job);
    ec_tcase_add(t, watch_of_finished_job_prints_once);
    suite_add_tcase(s, t);
    return s;
}

EC_INTEGRATION_MAIN(suite)
