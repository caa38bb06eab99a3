/* `ecoord status`: the job at a glance, read-only.
 *
 * One consistent read (a single prefix listing of the job root, served at one
 * revision) is decoded into a snapshot, and the snapshot is rendered as text
 * or JSON.  Decoding and rendering are pure: no I/O but the FILE they write
 * to, so whatever garbage sits in etcd becomes a row marked "corrupt" with the
 * decoder's message, never a crash.  status never writes to etcd.
 *
 * --watch prints once, then follows the job root with one watch started at
 * the listing's revision + 1 (so no change between the listing and the watch
 * is missed).  Changes are coalesced for DEBOUNCE_MS, then the job is read
 * again and printed again: text output gets a separator line with the time
 * and revision, JSON output is one object per line.  Writes to the per-epoch
 * worker keys (epochs/...) are not shown and do not trigger a reprint.  The
 * watch ends with exit 0 on SIGINT or SIGTERM, and on its own when the job
 * status says completed or failed (a finished job does not change again, so
 * a script can `ecoord status --watch` to wait for the end).
 *
 * Exit codes: 0 shown; 1 the job could not be read (etcd unreachable, no
 * keys under the job root); 2 usage (no --elastic_server).
 *
 * JSON (--json): one object on one line.  Field names are stable; fields are
 * added, never renamed.  Times are unix milliseconds (0 = not recorded).
 *
 *   job_id          string
 *   etcd            string: the endpoints as given
 *   root            string: the job's key root, "<prefix>/<job_id>/"
 *   revision        number: the etcd revision the snapshot was read at
 *   now_ms          number: when it was rendered (this host's clock)
 *   state           "running" | "completed" | "failed" | "interrupted" (from
 *                   the status key: interrupted when a later launch found no
 *                   agent of the run alive),
 *                   "running" without a status key but with an epoch,
 *                   "forming" with neither, "unknown" if the status is corrupt
 *   alive           bool: an agent of the run is alive (the leader key, or a
 *                   node record of the run); running and not alive: the run
 *                   is over, the next launch marks it interrupted
 *   status          null | {state, reason, epoch, run, updated_at_ms, updated_by}
 *   status_error    null | string: why the status record was not readable
 *   leader          null | string: the leader key's value (the leader's node id)
 *   epoch           null | {number, world_size, nproc, nmembers, reason,
 *                   reason_detail, leader_id, leader_rev, observed_at_ms,
 *                   decided_at_ms, published_at_ms, planner_us}
 *   epoch_error     null | string: why the epoch record was not readable
 *   nodes           array, members in M_id order, then the other nodes in
 *                   registration order, of
 *                   {node_id, m_id (null: not a member), host, nproc,
 *                    rank_first, rank_last (null: not a member),
 *                    endpoints [string, rank order], state, in_epoch (bool),
 *                    standby (bool), incarnation, registered_at_ms,
 *                    reason (string, "" when none), fence_stops (times its
 *                    agent stopped its processes for the fence: not failures),
 *                    progress (null | {seq,
 *                    reporting, step, silent_ms, silent_rank, waiting, stopped,
 *                    paused, step_p50_us, slowest_us, slowest_rank}: the
 *                    node's progress summary, coord/agent/progress.h), boot
 *                    (null | {phase "booting"|"ready", started_at_ms,
 *                    ready_at_ms, nready, why}: in place, its processes'
 *                    start before admission), error (null | string)}
 *                   state is the record's ("joining", "ready", "leaving",
 *                   "done", "failed"), "booting" for a non-member whose
 *                   processes boot, "pending" for one whose processes are
 *                   ready and that waits for its admission, "gone" for a
 *                   member whose record vanished, "corrupt" for a record that
 *                   did not decode (error then holds the decoder's message)
 *   failures_total  number: failure records under failures/
 *   failures        array, newest first, at most STATUS_MAX_FAILURES (plus
 *                   the root cause when it is older than those), of
 *                   {key, node_id, kind, local_rank, global_rank, exit_code,
 *                    signal, epoch, time_ms, log_path, last_lines [string],
 *                    message, raised_at (the exception the process reported
 *                    in its TORCHELASTIC_ERROR_FILE and where; "" when none),
 *                    run (0: not recorded), root_cause (bool: the earliest
 *                    failure of the current run, see find_root_cause),
 *                    error (null | string)}; ranks are -1 for node-lost
 *   run             number: the current run (the highest any record names)
 *   root_cause      null | string: the key of the root-cause failure
 */
#define _GNU_SOURCE /* open_memstream, vasprintf */
#include "status.h"
#include "clock.h"
#include "json.h"
#include "strbuf.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "connect.h"
#include "etcd.h"
#include "epoch_fetch.h"
#include "hang_policy.h"
#include "keys.h"
#include "planner.h"
#include "progress_file.h"
#include "records.h"

#define STATUS_MAX_FAILURES 5
#define DEBOUNCE_MS 100
#define CONNECT_TIMEOUT_MS 3000
#define CALL_TIMEOUT_MS 5000

/* ------------------------------------------------------------------------ */
/* small helpers                                                            */

/* A copy of s[0..len) safe to print on a terminal: control characters
 * (a log line may carry escape sequences) become \xNN. */
static char *term_safe(const char *s, size_t len)
{
    char *out = malloc(len * 4 + 1), *p = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f)
            p += sprintf(p, "\\x%02x", ch);
        else
            *p++ = (char)ch;
    }
    *p = '\0';
    return out;
}

/* "2025-01-02T03:04:05.678Z"; "-" for 0 (not recorded). */
static void fmt_time(int64_t ms, char *buf, size_t len)
{
    if (ms <= 0) {
        snprintf(buf, len, "-");
        return;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char d[32];
    strftime(d, sizeof(d), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03dZ", d, (int)(ms % 1000));
}

/* "12.3s ago", "5m02s ago", "3h07m ago", "2d05h ago"; "" when ms is 0. */
static void fmt_ago(int64_t ms, int64_t now, char *buf, size_t len)
{
    if (ms <= 0) {
        snprintf(buf, len, "%s", "");
        return;
    }
    int64_t d = now - ms;
    if (d < -1000) { /* a writer's clock ahead of ours */
        snprintf(buf, len, "%.1fs in the future: clocks differ", (double)-d / 1000);
        return;
    }
    if (d < 0)
        d = 0;
    int64_t s = d / 1000;
    if (s < 60)
        snprintf(buf, len, "%.1fs ago", (double)d / 1000);
    else if (s < 3600)
        snprintf(buf, len, "%" PRId64 "m%02" PRId64 "s ago", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, len, "%" PRId64 "h%02" PRId64 "m ago", s / 3600, (s % 3600) / 60);
    else
        snprintf(buf, len, "%" PRId64 "d%02" PRId64 "h ago", s / 86400, (s % 86400) / 3600);
}

/* ---- JSON output ---------------------------------------------------------- */

/* (strings: ec_json_str, coord/util/json.h) */

/* ------------------------------------------------------------------------ */
/* the snapshot: everything decoded from one listing                        */

typedef struct st_row {
    char *node;               /* node id, or the raw key rest for a bad key */
    ec_node_rec_t *rec;       /* NULL: no record (a gone member) or corrupt */
    char *error;              /* corrupt: the decoder's message */
    int m_id;                 /* -1: not a member */
    int64_t create_rev;       /* registration order */
    bool foreign;             /* a record without a lease: no agent wrote it */
    bool standby;
} st_row_t;

typedef struct st_fail {
    char *key;
    ec_failure_t *f;          /* NULL when corrupt */
    char *error;
} st_fail_t;

typedef struct st_snap {
    int64_t revision;
    size_t nkeys;
    ec_epoch_t *epoch;
    char *epoch_error;
    ec_job_status_t *status;
    char *status_error;
    char *leader;             /* NULL: no leader key */
    st_row_t *rows;
    size_t nrows;
    st_fail_t *fails;         /* newest first */
    size_t nfails;
    uint64_t run;             /* the current run (see find_root_cause); 0: none named */
    uint64_t run_first_epoch; /* its first epoch known from the epoch records; 0: unknown */
    long root;                /* index in fails of the run's root cause; -1: none */
} st_snap_t;

static void snap_free(st_snap_t *s)
{
    if (!s)
        return;
    int saved = errno;
    ec_epoch_free(s->epoch);
    free(s->epoch_error);
    ec_job_status_free(s->status);
    free(s->status_error);
    free(s->leader);
    for (size_t i = 0; i < s->nrows; i++) {
        free(s->rows[i].node);
        ec_node_rec_free(s->rows[i].rec);
        free(s->rows[i].error);
    }
    free(s->rows);
    for (size_t i = 0; i < s->nfails; i++) {
        free(s->fails[i].key);
        ec_failure_free(s->fails[i].f);
        free(s->fails[i].error);
    }
    free(s->fails);
    memset(s, 0, sizeof(*s));
    errno = saved;
}

static bool key_is(const ec_kv_t *kv, const char *key)
{
    return kv->key_len == strlen(key) && !memcmp(kv->key, key, kv->key_len);
}

static bool key_under(const ec_kv_t *kv, const char *prefix)
{
    size_t n = strlen(prefix);
    return kv->key_len > n && !memcmp(kv->key, prefix, n);
}

/* Members first in M_id order, then the rest in registration order. */
static int row_cmp(const void *a, const void *b)
{
    const st_row_t *x = a, *y = b;
    if ((x->m_id >= 0) != (y->m_id >= 0))
        return x->m_id >= 0 ? -1 : 1;
    if (x->m_id >= 0)
        return x->m_id < y->m_id ? -1 : x->m_id > y->m_id;
    if (x->create_rev != y->create_rev)
        return x->create_rev < y->create_rev ? -1 : 1;
    return strcmp(x->node, y->node);
}

/* Failure keys are failures/<seq>/... with seq zero-padded: descending key
 * order is newest first. */
static int fail_cmp(const void *a, const void *b)
{
    return -strcmp(((const st_fail_t *)a)->key, ((const st_fail_t *)b)->key);
}

/* The root cause, as torchrun marks it among failed ranks: the earliest
 * failure (by time, ties by key) of the current run, across all nodes.
 *
 * The current run is the highest run any record names (the job status, the
 * current epoch, the failure records): runs only grow, and a job launched
 * again writes its new run into epochs and failures before its status.  A
 * failure record belongs to it when it names that run; one written before
 * records carried a run (run 0) belongs to it when its epoch is at or
 * after the run's first epoch (epoch numbers continue across runs), or
 * always when no epoch record of the run is left to say where it began. */
typedef struct st_epref {
    uint64_t number, run;
} st_epref_t;

static void find_root_cause(st_snap_t *s, const st_epref_t *eps, size_t neps)
{
    uint64_t run = 0;
    if (s->status && s->status->run > run)
        run = s->status->run;
    if (s->epoch && s->epoch->run > run)
        run = s->epoch->run;
    for (size_t i = 0; i < s->nfails; i++)
        if (s->fails[i].f && s->fails[i].f->run > run)
            run = s->fails[i].f->run;
    uint64_t first = 0;
    if (s->epoch && s->epoch->run == run)
        first = s->epoch->number;
    for (size_t i = 0; i < neps; i++)
        if (eps[i].run == run && (!first || eps[i].number < first))
            first = eps[i].number;
    s->run = run;
    s->run_first_epoch = first;
    s->root = -1;
    for (size_t i = 0; i < s->nfails; i++) {
        const ec_failure_t *f = s->fails[i].f;
        if (!f)
            continue;
        bool ours = f->run ? f->run == run : (!first || f->epoch >= first);
        if (!ours)
            continue;
        if (s->root < 0) {
            s->root = (long)i;
            continue;
        }
        const st_fail_t *r = &s->fails[s->root];
        if (f->time_ms < r->f->time_ms ||
            (f->time_ms == r->f->time_ms && strcmp(s->fails[i].key, r->key) < 0))
            s->root = (long)i;
    }
}

static st_row_t *add_row(st_snap_t *s, size_t *cap)
{
    if (s->nrows == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        st_row_t *r = realloc(s->rows, nc * sizeof(*r));
        if (!r)
            return NULL;
        s->rows = r;
        *cap = nc;
    }
    st_row_t *r = &s->rows[s->nrows++];
    memset(r, 0, sizeof(*r));
    r->m_id = -1;
    return r;
}

/* Decode a listing of k's root into s.  Records that do not decode are kept
 * with their message; only running out of memory fails (EC_ENOMEM). */
static int snap_build(st_snap_t *s, const ec_keys_t *k, const ec_kv_list_t *l, ec_error_t *err)
{
    char k_nodes[EC_KEY_MAX], k_leader[EC_KEY_MAX], k_epoch[EC_KEY_MAX], k_status[EC_KEY_MAX],
        k_fail[EC_KEY_MAX], id[EC_NODE_ID_MAX + 1];
    ec_key_nodes_prefix(k, k_nodes, sizeof(k_nodes));
    ec_key_leader(k, k_leader, sizeof(k_leader));
    ec_key_epoch(k, k_epoch, sizeof(k_epoch));
    ec_key_status(k, k_status, sizeof(k_status));
    ec_key_failures_prefix(k, k_fail, sizeof(k_fail));
    memset(s, 0, sizeof(*s));
    s->revision = l->revision;
    s->nkeys = l->n;
    s->root = -1;
    /* (number, run) of every epoch record, for the current run's first
     * epoch: failure records written before they carried a run are placed
     * by their epoch number. */
    st_epref_t *eps = NULL;
    size_t neps = 0, epcap = 0;
    size_t rcap = 0, fcap = 0;
    ec_error_t e;

    for (size_t i = 0; i < l->n; i++) {
        const ec_kv_t *kv = &l->kvs[i];
        ec_error_clear(&e);
        bool parsed = ec_key_parse_node(k, kv->key, kv->key_len, id, sizeof(id)) >= 0;
        if (parsed || key_under(kv, k_nodes)) {
            st_row_t *r = add_row(s, &rcap);
            if (!r)
                goto nomem;
            r->create_rev = kv->create_revision;
            r->foreign = kv->lease == 0;
            r->node = parsed ? strdup(id) : strdup(kv->key + strlen(k_nodes));
            if (!r->node)
                goto nomem;
            if (!parsed) {
                r->error = ec_asprintf("key %s is not nodes/<node id> (another tool may have "
                                     "written it)", kv->key);
            } else if (ec_node_rec_decode(kv->value, kv->value_len, kv->key, &r->rec, &e) < 0) {
                if (e.code == EC_ENOMEM)
                    goto nomem;
                r->error = strdup(e.msg[0] ? e.msg : "record does not decode");
            } else if (strcmp(r->rec->node_id, id)) {
                r->error = ec_asprintf("key %s holds the record of node '%s'", kv->key,
                                     r->rec->node_id);
                ec_node_rec_free(r->rec);
                r->rec = NULL;
            }
            if (!r->rec && !r->error)
                goto nomem;
        } else if (key_is(kv, k_leader)) {
            free(s->leader);
            if (!(s->leader = strndup((const char *)kv->value, kv->value_len)))
                goto nomem;
        } else if (key_is(kv, k_epoch)) {
            if (ec_epoch_from_listing(k, l, kv->value, kv->value_len, kv->key, &s->epoch, &e) < 0) {
                if (e.code == EC_ENOMEM)
                    goto nomem;
                if (!(s->epoch_error = strdup(e.msg[0] ? e.msg : "epoch does not decode")))
                    goto nomem;
            }
        } else if (key_is(kv, k_status)) {
            if (ec_job_status_decode(kv->value, kv->value_len, kv->key, &s->status, &e) < 0) {
                if (e.code == EC_ENOMEM)
                    goto nomem;
                if (!(s->status_error = strdup(e.msg[0] ? e.msg : "status does not decode")))
                    goto nomem;
            }
        } else if (key_under(kv, k_fail)) {
            if (s->nfails == fcap) {
                size_t nc = fcap ? fcap * 2 : 16;
                st_fail_t *f = realloc(s->fails, nc * sizeof(*f));
                if (!f)
                    goto nomem;
                s->fails = f;
                fcap = nc;
            }
            st_fail_t *f = &s->fails[s->nfails++];
            memset(f, 0, sizeof(*f));
            if (!(f->key = strdup(kv->key)))
                goto nomem;
            if (ec_failure_decode(kv->value, kv->value_len, kv->key, &f->f, &e) < 0) {
                if (e.code == EC_ENOMEM)
                    goto nomem;
                if (!(f->error = strdup(e.msg[0] ? e.msg : "failure record does not decode")))
                    goto nomem;
            }
        }
        else if (ec_key_parse_epoch(k, kv->key, kv->key_len, NULL) == EC_KEY_EPOCH_HISTORY) {
            /* only its number and run are used: a split epoch's head says them
             * (its chunks are kept for the last few epochs only) */
            ec_epoch_t *h = NULL;
            if (ec_epoch_decode_view(kv->value, kv->value_len, kv->key, &h, &e) < 0) {
                if (e.code == EC_ENOMEM)
                    goto nomem;
                continue; /* history is not shown: a corrupt copy is skipped */
            }
            if (neps == epcap) {
                size_t nc = epcap ? epcap * 2 : 16;
                void *p = realloc(eps, nc * sizeof(*eps));
                if (!p) {
                    ec_epoch_free(h);
                    goto nomem;
                }
                eps = p;
                epcap = nc;
            }
            eps[neps].number = h->number;
            eps[neps++].run = h->run;
            ec_epoch_free(h);
        }
        /* epochs/...: history and worker keys are not shown. */
    }

    /* Attach the epoch's members to their rows; a member without a record
     * is "gone" (its lease expired or it left since the epoch). */
    if (s->epoch) {
        for (int m = 0; m < s->epoch->nmembers; m++) {
            const char *mid = s->epoch->members[m].node_id;
            st_row_t *r = NULL;
            for (size_t i = 0; i < s->nrows && !r; i++)
                if (!strcmp(s->rows[i].node, mid))
                    r = &s->rows[i];
            if (!r) {
                if (!(r = add_row(s, &rcap)))
                    goto nomem;
                if (!(r->node = strdup(mid)))
                    goto nomem;
                r->create_rev = INT64_MAX;
            }
            r->m_id = m;
        }
    }
    /* Standby: registered, eligible (the planner's own definition), not a
     * member.  Without an epoch every eligible node is waiting for the
     * first one, which is not standing by. */
    for (size_t i = 0; i < s->nrows; i++) {
        st_row_t *r = &s->rows[i];
        if (!r->rec || r->m_id >= 0 || !s->epoch || r->foreign)
            continue;
        ec_plan_config_t pc = {.np_min = 1, .np_max = 1, .nproc = s->epoch->nproc};
        ec_plan_node_t pn = {.node_id = r->rec->node_id, .nproc = (uint32_t)r->rec->nproc,
                             .incarnation = r->rec->incarnation,
                             .create_revision = r->create_rev, .state = r->rec->state};
        r->standby = ec_plan_node_eligible(&pc, &pn) != 0;
    }
    if (s->nrows)
        qsort(s->rows, s->nrows, sizeof(*s->rows), row_cmp);
    if (s->nfails)
        qsort(s->fails, s->nfails, sizeof(*s->fails), fail_cmp);
    find_root_cause(s, eps, neps);
    free(eps);
    return 0;
nomem:
    free(eps);
    snap_free(s);
    return ec_errorf(err, EC_ENOMEM, "out of memory decoding the job's keys");
}

/* ---- derived values shared by both renderings ------------------------------ */

/* Whether an agent of the status's run is alive: the leader key, or a
 * node record of that run on a lease. */
static bool snap_alive(const st_snap_t *s)
{
    if (s->leader)
        return true;
    for (size_t i = 0; i < s->nrows; i++)
        if (s->rows[i].rec && !s->rows[i].foreign &&
            (!s->status || s->rows[i].rec->run == s->status->run))
            return true;
    return false;
}

static const char *snap_state(const st_snap_t *s)
{
    if (s->status)
        return ec_job_state_name(s->status->state);
    if (s->status_error)
        return "unknown";
    return s->epoch ? "running" : "forming";
}

/* A node's state as a user follows it: its record's, except before its
 * admission in place: booting (its processes start), then pending (all
 * ready, waiting for the epoch that admits it). */
static const char *row_state(const st_row_t *r)
{
    if (r->error)
        return "corrupt";
    if (!r->rec)
        return "gone";
    if (r->m_id < 0 && (r->rec->state == EC_NODE_JOINING || r->rec->state == EC_NODE_READY)) {
        if (r->rec->boot.phase == EC_BOOT_BOOTING)
            return "booting";
        if (r->rec->boot.phase == EC_BOOT_READY && !r->standby)
            return "pending";
    }
    return ec_node_state_name(r->rec->state);
}

/* "booting 2.1s (joining), 1 of 2 ready", "ready after 1.9s, waiting for
 * admission 0.3s", "booted in 1.9s (joining)": the boot, in place; "" when
 * none is recorded. */
static void fmt_boot(const st_row_t *r, int64_t now, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!r->rec || r->rec->boot.phase == EC_BOOT_UNKNOWN)
        return;
    const ec_node_boot_t *b = &r->rec->boot;
    double took = b->ready_at_ms > b->started_at_ms
                      ? (double)(b->ready_at_ms - b->started_at_ms) / 1000.0 : 0.0;
    if (b->phase == EC_BOOT_BOOTING)
        snprintf(buf, len, "booting %.1fs (%s), %d of %d ready",
                 b->started_at_ms ? (double)(now - b->started_at_ms) / 1000.0 : 0.0, b->why,
                 b->nready, r->rec->nproc);
    else if (r->m_id < 0 && !r->standby)
        snprintf(buf, len, "ready after %.1fs, waiting for admission %.1fs", took,
                 b->ready_at_ms ? (double)(now - b->ready_at_ms) / 1000.0 : 0.0);
    else
        snprintf(buf, len, "booted in %.1fs (%s)", took, b->why);
}

/* The host and ports a row's endpoints come from: the epoch's for a member
 * (what the workers were told), the record's otherwise. */
static bool row_addr(const st_snap_t *s, const st_row_t *r, const char **host,
                     const uint16_t **ports, int *n)
{
    if (r->m_id >= 0) {
        const ec_member_t *m = &s->epoch->members[r->m_id];
        *host = m->host;
        *ports = m->ports;
        *n = s->epoch->nproc;
        return true;
    }
    if (r->rec) {
        *host = r->rec->host;
        *ports = r->rec->ports;
        *n = r->rec->nproc;
        return true;
    }
    return false;
}

static bool row_ranks(const st_snap_t *s, const st_row_t *r, int64_t *first, int64_t *last)
{
    if (r->m_id < 0)
        return false;
    *first = ec_rank(r->m_id, s->epoch->nproc, 0);
    *last = ec_rank(r->m_id, s->epoch->nproc, s->epoch->nproc - 1);
    return *first >= 0 && *last >= 0;
}

/* "host:20000-20003" or "host:20000,20005": one host per node, so the host
 * is written once (through ec_endpoint_format, which brackets IPv6) and the
 * ports as runs. */
static char *endpoints_compact(const char *host, const uint16_t *ports, int n)
{
    char first[EC_ENDPOINT_MAX];
    if (n < 1 || ec_endpoint_format(host, ports[0], first, sizeof(first)) < 0)
        return strdup("?");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    fputs(first, f);
    for (int i = 1; i < n;) {
        int j = i;
        while (j + 1 < n && ports[j + 1] == ports[j] + 1)
            j++;
        if (ports[i] == ports[i - 1] + 1) { /* continues the previous run */
            fprintf(f, "-%u", (unsigned)ports[j]);
        } else {
            fprintf(f, ",%u", (unsigned)ports[i]);
            if (j > i)
                fprintf(f, "-%u", (unsigned)ports[j]);
        }
        i = j + 1;
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* ------------------------------------------------------------------------ */
/* text rendering                                                           */

enum { C_MID, C_NODE, C_HOST, C_RANKS, C_EPS, C_STATE, C_IN, C_STANDBY, C_NOTE, NCOLS };
static const char *const col_names[NCOLS] = {"M_ID", "NODE", "HOST", "RANKS", "ENDPOINTS",
                                             "STATE", "IN_EPOCH", "STANDBY", "NOTE"};

static char *safe_dup(const char *s)
{
    return term_safe(s, strlen(s));
}

/* The cells of one row, malloc'd and terminal-safe.  false: out of memory. */
static bool row_cells(const st_snap_t *s, const st_row_t *r, int64_t now, char *cell[NCOLS])
{
    char boot[EC_BOOT_WHY_MAX + 96];
    fmt_boot(r, now, boot, sizeof(boot));
    const char *host = NULL;
    const uint16_t *ports = NULL;
    int n = 0;
    int64_t a, b;
    bool addr = row_addr(s, r, &host, &ports, &n);
    cell[C_MID] = r->m_id >= 0 ? ec_asprintf("%d", r->m_id) : strdup("-");
    cell[C_NODE] = safe_dup(r->node);
    cell[C_HOST] = addr ? safe_dup(host) : strdup("-");
    if (row_ranks(s, r, &a, &b))
        cell[C_RANKS] = a == b ? ec_asprintf("%" PRId64, a) : ec_asprintf("%" PRId64 "-%" PRId64, a, b);
    else
        cell[C_RANKS] = strdup("-");
    if (addr) {
        char *e = endpoints_compact(host, ports, n);
        cell[C_EPS] = e ? safe_dup(e) : NULL;
        free(e);
    } else {
        cell[C_EPS] = strdup("-");
    }
    cell[C_STATE] = strdup(row_state(r));
    cell[C_IN] = strdup(r->m_id >= 0 ? "yes" : "no");
    cell[C_STANDBY] = strdup(r->standby ? "yes" : "no");
    if (r->error)
        cell[C_NOTE] = safe_dup(r->error);
    else if (r->foreign)
        cell[C_NOTE] = strdup("foreign: a record without a lease (no agent writes one; another "
                              "tool?); never admitted: delete the key");
    else if (!r->rec)
        cell[C_NOTE] = strdup("record gone: lease expired or the node left after this epoch");
    else if (r->rec->reason[0])
        cell[C_NOTE] = safe_dup(r->rec->reason);
    else if (r->m_id < 0 && !r->standby && s->epoch && r->rec->nproc != s->epoch->nproc)
        cell[C_NOTE] = ec_asprintf("nproc=%d but the job runs nproc=%d", r->rec->nproc,
                                 s->epoch->nproc);
    else if (r->rec->fence_stops)
        /* what stopped its processes, said as what it is (not a failure) */
        cell[C_NOTE] = ec_asprintf("%s%sprocesses stopped %u time%s for the fence (lease "
                                   "unconfirmed): not failures, not counted against "
                                   "--max_restart", boot, *boot ? "; " : "",
                                   r->rec->fence_stops, r->rec->fence_stops == 1 ? "" : "s");
    else
        cell[C_NOTE] = safe_dup(boot);
    for (int c = 0; c < NCOLS; c++)
        if (!cell[c])
            return false;
    return true;
}

static void print_header(FILE *f, const st_snap_t *s, const char *job_id, const char *etcd,
                         const char *root, int64_t now)
{
    char t[64], ago[64];
    char *safe;
    fprintf(f, "job       %s  (etcd %s, keys under %s, revision %" PRId64 ")\n", job_id, etcd,
            root, s->revision);

    fprintf(f, "state     %s", snap_state(s));
    if (s->status) {
        fmt_time(s->status->updated_at_ms, t, sizeof(t));
        fmt_ago(s->status->updated_at_ms, now, ago, sizeof(ago));
        if (s->status->reason[0]) {
            safe = safe_dup(s->status->reason);
            fprintf(f, ": %s", safe ? safe : "?");
            free(safe);
        }
        safe = safe_dup(s->status->updated_by[0] ? s->status->updated_by : "-");
        fprintf(f, "  (run %llu; set by %s at %s%s%s)", (unsigned long long)s->status->run,
                safe ? safe : "?", t, ago[0] ? ", " : "", ago);
        free(safe);
    } else if (s->status_error) {
        safe = safe_dup(s->status_error);
        fprintf(f, " (status record corrupt: %s)", safe ? safe : "?");
        free(safe);
    } else if (!s->epoch && !s->epoch_error) {
        fprintf(f, " (no epoch yet: waiting for enough nodes)");
    }
    if (s->status && s->status->state == EC_JOB_RUNNING && !snap_alive(s))
        fprintf(f, "\n          but no agent of run %llu is alive: it is over (stopped or lost); "
                "the next launch of this job marks it interrupted and starts run %llu",
                (unsigned long long)s->status->run, (unsigned long long)s->status->run + 1);
    fputc('\n', f);

    if (s->epoch) {
        const ec_epoch_t *ep = s->epoch;
        fprintf(f, "epoch     %" PRIu64 "  world size %d = %d node%s x N=%d\n", ep->number,
                ep->world_size, ep->nmembers, ep->nmembers == 1 ? "" : "s", ep->nproc);
        safe = safe_dup(ep->reason_detail);
        fprintf(f, "reason    %s%s%s\n", ec_epoch_reason_name(ep->reason),
                ep->reason_detail[0] ? ": " : "", safe ? safe : "?");
        free(safe);
    } else if (s->epoch_error) {
        safe = safe_dup(s->epoch_error);
        fprintf(f, "epoch     corrupt: %s\n", safe ? safe : "?");
        free(safe);
    } else {
        fprintf(f, "epoch     none yet\n");
    }

    if (s->leader) {
        safe = safe_dup(s->leader);
        fprintf(f, "leader    %s", safe ? safe : "?");
        free(safe);
        if (s->epoch && strcmp(s->epoch->leader_id, s->leader))
            fprintf(f, "  (epoch %" PRIu64 " was written by %s)", s->epoch->number,
                    s->epoch->leader_id);
        fputc('\n', f);
    } else if (s->status && ec_job_state_ended(s->status->state)) {
        fprintf(f, "leader    none (the run %s)\n",
                s->status->state == EC_JOB_COMPLETED ? "completed"
                : s->status->state == EC_JOB_FAILED  ? "failed" : "was interrupted");
    } else {
        fprintf(f, "leader    none (an election is under way, or no node is running)\n");
    }

    if (s->epoch) {
        fmt_time(s->epoch->decided_at_ms, t, sizeof(t));
        fmt_ago(s->epoch->decided_at_ms, now, ago, sizeof(ago));
        fprintf(f, "decided   %s%s%s%s\n", t, ago[0] ? " (" : "", ago, ago[0] ? ")" : "");
    }
}

static int print_table(FILE *f, const st_snap_t *s, int64_t now)
{
    if (!s->nrows) {
        fprintf(f, "\nno nodes registered\n");
        return 0;
    }
    char *(*cells)[NCOLS] = calloc(s->nrows, sizeof(*cells));
    if (!cells)
        return EC_ENOMEM;
    int rc = 0;
    size_t w[NCOLS];
    for (int c = 0; c < NCOLS; c++)
        w[c] = strlen(col_names[c]);
    for (size_t i = 0; i < s->nrows; i++) {
        if (!row_cells(s, &s->rows[i], now, cells[i])) {
            rc = EC_ENOMEM;
            goto out;
        }
        for (int c = 0; c < NCOLS; c++)
            if (strlen(cells[i][c]) > w[c])
                w[c] = strlen(cells[i][c]);
    }
    fputc('\n', f);
    for (int c = 0; c < NCOLS - 1; c++)
        fprintf(f, "%-*s  ", (int)w[c], col_names[c]);
    fprintf(f, "%s\n", col_names[NCOLS - 1]);
    for (size_t i = 0; i < s->nrows; i++) {
        /* No padding after the last non-empty cell. */
        int last = NCOLS - 1;
        while (last > 0 && !cells[i][last][0])
            last--;
        for (int c = 0; c < last; c++)
            fprintf(f, "%-*s  ", (int)w[c], cells[i][c]);
        fprintf(f, "%s\n", cells[i][last]);
    }
out:
    for (size_t i = 0; i < s->nrows; i++)
        for (int c = 0; c < NCOLS; c++)
            free(cells[i][c]);
    free(cells);
    return rc;
}

static void print_failures(FILE *f, const st_snap_t *s, int64_t now)
{
    if (!s->nfails) {
        fprintf(f, "\nfailures: none\n");
        return;
    }
    size_t shown = s->nfails < STATUS_MAX_FAILURES ? s->nfails : STATUS_MAX_FAILURES;
    fprintf(f, "\nfailures: %zu", s->nfails);
    if (shown < s->nfails)
        fprintf(f, ", newest %zu shown", shown);
    fprintf(f, " (newest first)\n");
    /* The root cause is shown even when it is older than the newest few. */
    for (size_t j = 0; j < shown + 1; j++) {
        size_t i = j;
        if (j == shown) {
            if (s->root < 0 || (size_t)s->root < shown)
                break;
            i = (size_t)s->root;
            fprintf(f, "  ...\n");
        }
        const st_fail_t *x = &s->fails[i];
        char *safe;
        if (!x->f) {
            safe = safe_dup(x->error);
            fprintf(f, "  corrupt: %s\n", safe ? safe : "?");
            free(safe);
            continue;
        }
        const ec_failure_t *fl = x->f;
        char t[64], ago[64], what[128], rank[64];
        fmt_time(fl->time_ms, t, sizeof(t));
        fmt_ago(fl->time_ms, now, ago, sizeof(ago));
        ec_failure_what(fl, what, sizeof(what));
        if (fl->global_rank >= 0)
            snprintf(rank, sizeof(rank), "rank %d (local %d)", fl->global_rank, fl->local_rank);
        else
            snprintf(rank, sizeof(rank), "whole node");
        safe = safe_dup(fl->node_id);
        fprintf(f, "  %s%s%s%s  node %s  %s  %s  epoch %" PRIu64 "%s\n", t, ago[0] ? " (" : "",
                ago, ago[0] ? ")" : "", safe ? safe : "?", rank, what, fl->epoch,
                (long)i == s->root ? "  root cause" : "");
        free(safe);
        if (fl->log_path[0]) {
            safe = safe_dup(fl->log_path);
            fprintf(f, "      log: %s\n", safe ? safe : "?");
            free(safe);
        }
        if (fl->message && fl->message[0]) {
            safe = safe_dup(fl->message);
            fprintf(f, "      exception: %s\n", safe ? safe : "?");
            free(safe);
            if (fl->raised_at && fl->raised_at[0]) {
                safe = safe_dup(fl->raised_at);
                fprintf(f, "      raised at: %s\n", safe ? safe : "?");
                free(safe);
            }
        }
        if (fl->nlines > 0) {
            safe = safe_dup(fl->last_lines[fl->nlines - 1]);
            fprintf(f, "      last line: %s\n", safe ? safe : "?");
            free(safe);
        }
    }
}

/* Hangs and stragglers: each node's progress summary as its agent last
 * published it (coord/agent/progress.h), slowest step time first, each relative
 * to the median of the nodes (coord/core/hang_policy.c's).  Nothing when no node
 * published one. */
static int cmp_p50_desc(const void *a, const void *b)
{
    const st_row_t *x = *(const st_row_t *const *)a, *y = *(const st_row_t *const *)b;
    int64_t u = x->rec->progress.step_p50_us, v = y->rec->progress.step_p50_us;
    return u < v ? 1 : u > v ? -1 : strcmp(x->node, y->node);
}

static void print_progress(FILE *f, const st_snap_t *s)
{
    const st_row_t **rows = calloc(s->nrows ? s->nrows : 1, sizeof(*rows));
    int64_t *p50 = calloc(s->nrows ? s->nrows : 1, sizeof(*p50));
    size_t n = 0;
    for (size_t i = 0; rows && p50 && i < s->nrows; i++)
        if (s->rows[i].rec && s->rows[i].rec->progress.seq) {
            rows[n] = &s->rows[i];
            p50[n] = s->rows[i].rec->progress.step_p50_us;
            n++;
        }
    if (n) {
        int64_t med = ec_hang_median_us(p50, n);
        qsort(rows, n, sizeof(*rows), cmp_p50_desc);
        fprintf(f, "\nProgress (as each agent last published it; step time: the median of its "
                   "ranks' over the last %d steps):\n", EC_PROGRESS_WINDOW);
        fprintf(f, "  %-16s %10s %11s %9s  %-22s %s\n", "NODE", "STEP", "STEP TIME", "VS MEDIAN",
                "SLOWEST RANK", "STATE");
        for (size_t i = 0; i < n; i++) {
            const ec_node_progress_t *p = &rows[i]->rec->progress;
            char st[32] = "-", rel[16] = "-", slow[40] = "-", state[160];
            if (p->step_p50_us > 0)
                snprintf(st, sizeof(st), "%.1f ms", (double)p->step_p50_us / 1000.0);
            if (p->step_p50_us > 0 && med > 0)
                snprintf(rel, sizeof(rel), "%.2fx", (double)p->step_p50_us / (double)med);
            if (p->slowest_rank >= 0 && p->slowest_us > 0)
                snprintf(slow, sizeof(slow), "local %d (%.1f ms)", p->slowest_rank,
                         (double)p->slowest_us / 1000.0);
            if (p->paused)
                snprintf(state, sizeof(state), "paused (checkpoint)");
            else if (p->silent_ms > 0)
                snprintf(state, sizeof(state), "silent: local rank %d, %.1f s when published%s",
                         p->silent_rank, (double)p->silent_ms / 1000.0,
                         p->stopped ? ", process stopped" :
                         p->waiting ? ", inside a collective" : "");
            else
                snprintf(state, sizeof(state), "progressing%s",
                         p->reporting ? "" : " (log output; no step reports)");
            fprintf(f, "  %-16s %10llu %11s %9s  %-22s %s\n", rows[i]->node,
                    (unsigned long long)p->step, st, rel, slow, state);
        }
        if (med > 0 && rows[0]->rec->progress.step_p50_us > med)
            fprintf(f, "  slowest node: %s, %.2fx the median step time (%.1f ms)\n",
                    rows[0]->node, (double)rows[0]->rec->progress.step_p50_us / (double)med,
                    (double)med / 1000.0);
    }
    free(rows);
    free(p50);
}

static int render_text(FILE *f, const st_snap_t *s, const char *job_id, const char *etcd,
                       const char *root, int64_t now)
{
    print_header(f, s, job_id, etcd, root, now);
    int rc = print_table(f, s, now);
    if (rc < 0)
        return rc;
    print_progress(f, s);
    print_failures(f, s, now);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* JSON rendering                                                           */

static void json_key(FILE *f, bool *first, const char *k)
{
    if (!*first)
        fputc(',', f);
    *first = false;
    ec_json_str(f, k);
    fputc(':', f);
}

static void json_kstr(FILE *f, bool *first, const char *k, const char *v)
{
    json_key(f, first, k);
    ec_json_str(f, v);
}

static void json_kint(FILE *f, bool *first, const char *k, int64_t v)
{
    json_key(f, first, k);
    fprintf(f, "%" PRId64, v);
}

static void json_kuint(FILE *f, bool *first, const char *k, uint64_t v)
{
    json_key(f, first, k);
    fprintf(f, "%" PRIu64, v);
}

static void json_kbool(FILE *f, bool *first, const char *k, bool v)
{
    json_key(f, first, k);
    fputs(v ? "true" : "false", f);
}

static void json_row(FILE *f, const st_snap_t *s, const st_row_t *r)
{
    bool first = true;
    const char *host = NULL;
    const uint16_t *ports = NULL;
    int n = 0;
    int64_t a, b;
    bool addr = row_addr(s, r, &host, &ports, &n);
    fputc('{', f);
    json_kstr(f, &first, "node_id", r->node);
    json_key(f, &first, "m_id");
    if (r->m_id >= 0)
        fprintf(f, "%d", r->m_id);
    else
        fputs("null", f);
    json_kstr(f, &first, "host", addr ? host : NULL);
    json_key(f, &first, "nproc");
    if (addr)
        fprintf(f, "%d", n);
    else
        fputs("null", f);
    bool ranks = row_ranks(s, r, &a, &b);
    json_key(f, &first, "rank_first");
    if (ranks)
        fprintf(f, "%" PRId64, a);
    else
        fputs("null", f);
    json_key(f, &first, "rank_last");
    if (ranks)
        fprintf(f, "%" PRId64, b);
    else
        fputs("null", f);
    json_key(f, &first, "endpoints");
    fputc('[', f);
    for (int i = 0; addr && i < n; i++) {
        char ep[EC_ENDPOINT_MAX];
        int rc = r->m_id >= 0 ? ec_epoch_endpoint(s->epoch, r->m_id, i, ep, sizeof(ep))
                              : ec_endpoint_format(host, ports[i], ep, sizeof(ep));
        if (i)
            fputc(',', f);
        ec_json_str(f, rc < 0 ? "?" : ep);
    }
    fputc(']', f);
    json_kstr(f, &first, "state", row_state(r));
    json_kbool(f, &first, "in_epoch", r->m_id >= 0);
    json_kbool(f, &first, "standby", r->standby);
    json_kbool(f, &first, "foreign", r->foreign);
    json_key(f, &first, "incarnation");
    if (r->rec)
        fprintf(f, "%" PRIu64, r->rec->incarnation);
    else if (r->m_id >= 0)
        fprintf(f, "%" PRIu64, s->epoch->members[r->m_id].incarnation);
    else
        fputs("null", f);
    json_kint(f, &first, "registered_at_ms", r->rec ? r->rec->registered_at_ms : 0);
    json_kstr(f, &first, "reason", r->rec ? r->rec->reason : "");
    json_kint(f, &first, "fence_stops", r->rec ? (int64_t)r->rec->fence_stops : 0);
    json_key(f, &first, "boot");
    if (r->rec && r->rec->boot.phase != EC_BOOT_UNKNOWN) {
        const ec_node_boot_t *bt = &r->rec->boot;
        bool f2 = true;
        fputc('{', f);
        json_kstr(f, &f2, "phase", ec_boot_phase_name(bt->phase));
        json_kint(f, &f2, "started_at_ms", bt->started_at_ms);
        json_kint(f, &f2, "ready_at_ms", bt->ready_at_ms);
        json_kint(f, &f2, "nready", bt->nready);
        json_kstr(f, &f2, "why", bt->why);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    json_key(f, &first, "progress");
    if (r->rec && r->rec->progress.seq) {
        const ec_node_progress_t *p = &r->rec->progress;
        bool f2 = true;
        fputc('{', f);
        json_kuint(f, &f2, "seq", p->seq);
        json_kbool(f, &f2, "reporting", p->reporting);
        json_kuint(f, &f2, "step", p->step);
        json_kint(f, &f2, "silent_ms", p->silent_ms);
        json_kint(f, &f2, "silent_rank", p->silent_rank);
        json_kbool(f, &f2, "waiting", p->waiting);
        json_kbool(f, &f2, "stopped", p->stopped);
        json_kbool(f, &f2, "paused", p->paused);
        json_kint(f, &f2, "step_p50_us", p->step_p50_us);
        json_kint(f, &f2, "slowest_us", p->slowest_us);
        json_kint(f, &f2, "slowest_rank", p->slowest_rank);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    json_kstr(f, &first, "error", r->error);
    fputc('}', f);
}

static void json_failure(FILE *f, const st_fail_t *x, bool root)
{
    bool first = true;
    const ec_failure_t *fl = x->f;
    fputc('{', f);
    json_kstr(f, &first, "key", x->key);
    json_kstr(f, &first, "node_id", fl ? fl->node_id : NULL);
    json_kstr(f, &first, "kind", fl ? ec_failure_kind_name(fl->kind) : NULL);
    json_kint(f, &first, "local_rank", fl ? fl->local_rank : -1);
    json_kint(f, &first, "global_rank", fl ? fl->global_rank : -1);
    json_kint(f, &first, "exit_code", fl ? fl->exit_code : 0);
    json_kint(f, &first, "signal", fl ? fl->signal : 0);
    json_kuint(f, &first, "epoch", fl ? fl->epoch : 0);
    json_kint(f, &first, "time_ms", fl ? fl->time_ms : 0);
    json_kstr(f, &first, "log_path", fl ? fl->log_path : NULL);
    json_key(f, &first, "last_lines");
    fputc('[', f);
    for (int i = 0; fl && i < fl->nlines; i++) {
        if (i)
            fputc(',', f);
        ec_json_str(f, fl->last_lines[i]);
    }
    fputc(']', f);
    json_kstr(f, &first, "message", fl && fl->message ? fl->message : "");
    json_kstr(f, &first, "raised_at", fl && fl->raised_at ? fl->raised_at : "");
    json_kuint(f, &first, "run", fl ? fl->run : 0);
    json_kbool(f, &first, "root_cause", root);
    json_kstr(f, &first, "error", x->error);
    fputc('}', f);
}

static int render_json(FILE *f, const st_snap_t *s, const char *job_id, const char *etcd,
                       const char *root, int64_t now)
{
    bool first = true;
    fputc('{', f);
    json_kstr(f, &first, "job_id", job_id);
    json_kstr(f, &first, "etcd", etcd);
    json_kstr(f, &first, "root", root);
    json_kint(f, &first, "revision", s->revision);
    json_kint(f, &first, "now_ms", now);
    json_kstr(f, &first, "state", snap_state(s));
    json_kbool(f, &first, "alive", snap_alive(s));

    json_key(f, &first, "status");
    if (s->status) {
        bool f2 = true;
        fputc('{', f);
        json_kstr(f, &f2, "state", ec_job_state_name(s->status->state));
        json_kstr(f, &f2, "reason", s->status->reason);
        json_kuint(f, &f2, "epoch", s->status->epoch);
        json_kuint(f, &f2, "run", s->status->run);
        json_kint(f, &f2, "updated_at_ms", s->status->updated_at_ms);
        json_kstr(f, &f2, "updated_by", s->status->updated_by);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    json_kstr(f, &first, "status_error", s->status_error);
    json_kstr(f, &first, "leader", s->leader);

    json_key(f, &first, "epoch");
    if (s->epoch) {
        const ec_epoch_t *ep = s->epoch;
        bool f2 = true;
        fputc('{', f);
        json_kuint(f, &f2, "number", ep->number);
        json_kint(f, &f2, "world_size", ep->world_size);
        json_kint(f, &f2, "nproc", ep->nproc);
        json_kint(f, &f2, "nmembers", ep->nmembers);
        json_kstr(f, &f2, "reason", ec_epoch_reason_name(ep->reason));
        json_kstr(f, &f2, "reason_detail", ep->reason_detail);
        json_kstr(f, &f2, "leader_id", ep->leader_id);
        json_kint(f, &f2, "leader_rev", ep->leader_rev);
        json_kint(f, &f2, "observed_at_ms", ep->observed_at_ms);
        json_kint(f, &f2, "decided_at_ms", ep->decided_at_ms);
        json_kint(f, &f2, "published_at_ms", ep->published_at_ms);
        json_kint(f, &f2, "planner_us", ep->planner_us);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    json_kstr(f, &first, "epoch_error", s->epoch_error);

    json_key(f, &first, "nodes");
    fputc('[', f);
    for (size_t i = 0; i < s->nrows; i++) {
        if (i)
            fputc(',', f);
        json_row(f, s, &s->rows[i]);
    }
    fputc(']', f);

    json_kint(f, &first, "failures_total", (int64_t)s->nfails);
    json_key(f, &first, "failures");
    fputc('[', f);
    for (size_t i = 0; i < s->nfails && i < STATUS_MAX_FAILURES; i++) {
        if (i)
            fputc(',', f);
        json_failure(f, &s->fails[i], (long)i == s->root);
    }
    if (s->root >= STATUS_MAX_FAILURES) {
        fputc(',', f);
        json_failure(f, &s->fails[s->root], true);
    }
    fputc(']', f);
    json_kuint(f, &first, "run", s->run);
    json_kstr(f, &first, "root_cause", s->root >= 0 ? s->fails[s->root].key : NULL);
    fputs("}\n", f);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* I/O: read, print, watch                                                  */

typedef struct st_ctx {
    const ec_config_t *cfg;
    FILE *out, *errout;
    ec_etcd_t *c;
    ec_keys_t keys;
    char *etcd;               /* endpoints as given, for messages */
    const char *prefix_shown;
} st_ctx_t;

/* Read the job once and print it.  Returns 0 (printed; *rev the listing's
 * revision, *finished whether the job status says completed or failed), or
 * a negative code with err filled (EC_ENOTFOUND: no keys at all). */
static int show_once(st_ctx_t *x, bool separator, int64_t *rev, bool *finished, ec_error_t *err)
{
    ec_kv_list_t l = {0};
    st_snap_t s;
    int rc = ec_etcd_get_prefix(x->c, ec_keys_root(&x->keys), 0, &l, err);
    if (rc < 0)
        return rc;
    if (l.n == 0) {
        *rev = l.revision;
        ec_kv_list_free(&l);
        return ec_errorf(err, EC_ENOTFOUND,
                         "no job '%s' under prefix %s at %s (no keys under %s): check --job_id "
                         "and --etcd_prefix",
                         x->cfg->job_id, x->prefix_shown, x->etcd, ec_keys_root(&x->keys));
    }
    rc = snap_build(&s, &x->keys, &l, err);
    ec_kv_list_free(&l);
    if (rc < 0)
        return rc;
    *rev = s.revision;
    *finished = s.status && ec_job_state_ended(s.status->state);

    /* Render into memory first: one write per snapshot, so a reader of a
     * --watch stream never sees half a block. */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) {
        snap_free(&s);
        return ec_errorf(err, EC_ENOMEM, "out of memory rendering the status");
    }
    int64_t now = ec_wall_ms();
    if (separator && !x->cfg->json) {
        char t[64];
        fmt_time(now, t, sizeof(t));
        fprintf(m, "\n---- %s  revision %" PRId64 " ----\n", t, s.revision);
    }
    rc = x->cfg->json ? render_json(m, &s, x->cfg->job_id, x->etcd, ec_keys_root(&x->keys), now)
                      : render_text(m, &s, x->cfg->job_id, x->etcd, ec_keys_root(&x->keys), now);
    snap_free(&s);
    if (fclose(m) != 0 || rc < 0) {
        free(buf);
        return ec_errorf(err, EC_ENOMEM, "out of memory rendering the status");
    }
    fwrite(buf, 1, len, x->out);
    fflush(x->out);
    free(buf);
    return 0;
}

/* --watch: the watch thread marks changes; the command's thread debounces
 * and reprints. */
typedef struct st_watch {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    const ec_keys_t *keys;
    bool changed;
    int64_t first_change_ms;  /* monotonic */
    bool compacted;
    char broken[EC_ERRMSG_MAX];
} st_watch_t;

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    stop_signal = sig;
}

static void watch_cb(const ec_watch_event_t *ev, void *arg)
{
    st_watch_t *w = arg;
    pthread_mutex_lock(&w->lock);
    switch (ev->type) {
    case EC_WATCH_PUT:
    case EC_WATCH_DELETE:
        /* Epoch history and worker keys: not shown, so no reprint. */
        if (ec_key_parse_epoch(w->keys, ev->kv->key, ev->kv->key_len, NULL) > 0)
            break;
        if (!w->changed)
            w->first_change_ms = ec_mono_ms();
        w->changed = true;
        pthread_cond_signal(&w->cond);
        break;
    case EC_WATCH_COMPACTED:
        w->compacted = true;
        if (!w->changed)
            w->first_change_ms = ec_mono_ms();
        w->changed = true;
        pthread_cond_signal(&w->cond);
        break;
    case EC_WATCH_BROKEN:
        snprintf(w->broken, sizeof(w->broken), "%s", ev->message ? ev->message : "stream broke");
        pthread_cond_signal(&w->cond);
        break;
    default:
        break;
    }
    pthread_mutex_unlock(&w->lock);
}

static int watch_loop(st_ctx_t *x, int64_t rev)
{
    st_watch_t w = {.keys = &x->keys};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, &ca);
    pthread_condattr_destroy(&ca);

    ec_error_t err = {0};
    int rc = 0;
    ec_watch_t *wt = ec_watch_start(x->c, ec_keys_root(&x->keys), true, rev + 1, watch_cb, &w,
                                    &err);
    if (!wt) {
        fprintf(x->errout, "ecoord status: cannot watch job '%s': %s\n", x->cfg->job_id, err.msg);
        rc = 1;
        goto out;
    }
    while (!stop_signal) {
        /* Wake at least every 50 ms to notice a signal: the handler cannot
         * signal a condition variable. */
        pthread_mutex_lock(&w.lock);
        struct timespec ts = ec_deadline_ts(50);
        if (!w.changed && !w.broken[0])
            pthread_cond_timedwait(&w.cond, &w.lock, &ts);
        char broken[EC_ERRMSG_MAX] = "";
        if (w.broken[0]) {
            snprintf(broken, sizeof(broken), "%s", w.broken);
            w.broken[0] = '\0';
        }
        bool due = w.changed && ec_mono_ms() - w.first_change_ms >= DEBOUNCE_MS;
        bool compacted = due && w.compacted;
        if (due)
            w.changed = w.compacted = false;
        pthread_mutex_unlock(&w.lock);

        if (broken[0])
            fprintf(x->errout, "ecoord status: the watch on etcd broke (%s); reconnecting\n",
                    broken);
        if (!due)
            continue;
        bool finished = false;
        ec_error_clear(&err);
        int r = show_once(x, true, &rev, &finished, &err);
        if (r < 0)
            fprintf(x->errout, "ecoord status: %s\n", err.msg);
        if (r == 0 && finished)
            break;
        if (compacted) {
            /* The watch stopped at a compacted revision: follow on from the
             * revision just read (or from now, if the read failed). */
            ec_watch_stop(wt);
            ec_error_clear(&err);
            wt = ec_watch_start(x->c, ec_keys_root(&x->keys), true, r == 0 ? rev + 1 : 0,
                                watch_cb, &w, &err);
            if (!wt) {
                fprintf(x->errout, "ecoord status: cannot watch job '%s' again: %s\n",
                        x->cfg->job_id, err.msg);
                rc = 1;
                break;
            }
        }
    }
out:
    ec_watch_stop(wt);
    pthread_cond_destroy(&w.cond);
    pthread_mutex_destroy(&w.lock);
    return rc;
}

int ec_cmd_status(const ec_config_t *cfg, FILE *out, FILE *errout)
{
    st_ctx_t x = {.cfg = cfg, .out = out, .errout = errout};
    ec_error_t err = {0};
    int rc = 1;
    if (cfg->elastic_server.n == 0) {
        fprintf(errout, "ecoord status: no etcd to read: pass the job's --elastic_server=HOST:PORT "
                        "(or set ECOORD_ELASTIC_SERVER)\n");
        return 2;
    }
    if (ec_keys_init(&x.keys, cfg->etcd_prefix, cfg->job_id, &err) < 0) {
        fprintf(errout, "ecoord status: %s\n", err.msg);
        return 2;
    }
    x.prefix_shown = cfg->etcd_prefix[0] ? cfg->etcd_prefix : "'' (none)";
    /* --watch ends with exit 0 on SIGINT/SIGTERM.  The handlers go in before
     * anything is printed, so a signal sent after the first block is always
     * a clean stop; one that comes earlier stops the watch at its start. */
    struct sigaction sa = {.sa_handler = on_stop_signal}, old_int = {0}, old_term = {0};
    sigemptyset(&sa.sa_mask);
    if (cfg->watch) {
        stop_signal = 0;
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
    }
    x.c = ec_connect(cfg, NULL, CONNECT_TIMEOUT_MS, &err);
    if (!x.c) {
        fprintf(errout, "ecoord status: %s\n", err.msg);
        goto out;
    }
    ec_etcd_set_call_timeout(x.c, CALL_TIMEOUT_MS);
    if (!(x.etcd = strdup(ec_etcd_endpoints(x.c)))) {
        fprintf(errout, "ecoord status: out of memory\n");
        goto out;
    }
    int64_t rev = 0;
    bool finished = false;
    if (show_once(&x, false, &rev, &finished, &err) < 0) {
        fprintf(errout, "ecoord status: %s\n", err.msg);
        goto out;
    }
    rc = cfg->watch && !finished ? watch_loop(&x, rev) : 0;
out:
    free(x.etcd);
    ec_etcd_destroy(x.c);
    if (cfg->watch) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
    }
    return rc;
}
