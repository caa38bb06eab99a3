/* `ecoord status`: a snapshot (status_impl.h) as text or as one line of
 * JSON (its fields: status.c).  Pure: no I/O but the FILE it writes to.
 * Text is terminal-safe: control characters from etcd's values (a log line
 * may carry escape sequences) are shown as \xNN.
 */
#define _GNU_SOURCE /* open_memstream */
#include "status_impl.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hang_policy.h"
#include "json.h"
#include "progress_file.h"
#include "rank.h"
#include "strbuf.h"

/* ---- formatting ----------------------------------------------------------- */

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

void ec__status_fmt_time(int64_t ms, char *buf, size_t len)
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

/* ---- derived values shared by both renderings ---------------------------- */

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

/* ---- text ---------------------------------------------------------------- */

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

/* "state     running  (run 2; set by a at ...)" and why, when the run is
 * over without saying so. */
static void print_state(FILE *f, const st_snap_t *s, int64_t now)
{
    char t[64], ago[64];
    char *safe;
    fprintf(f, "state     %s", snap_state(s));
    if (s->status) {
        ec__status_fmt_time(s->status->updated_at_ms, t, sizeof(t));
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
}

/* "epoch" and "reason", or why there is no epoch. */
static void print_epoch(FILE *f, const st_snap_t *s)
{
    char *safe;
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
}

/* "leader", or why there is none. */
static void print_leader(FILE *f, const st_snap_t *s)
{
    if (s->leader) {
        char *safe = safe_dup(s->leader);
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
}

static void print_header(FILE *f, const st_snap_t *s, const char *job_id, const char *etcd,
                         const char *root, int64_t now)
{
    fprintf(f, "job       %s  (etcd %s, keys under %s, revision %" PRId64 ")\n", job_id, etcd,
            root, s->revision);
    print_state(f, s, now);
    print_epoch(f, s);
    print_leader(f, s);
    if (s->epoch) {
        char t[64], ago[64];
        ec__status_fmt_time(s->epoch->decided_at_ms, t, sizeof(t));
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

/* One failure record: when, where, what, and the lines that say why. */
static void print_failure(FILE *f, const st_snap_t *s, size_t i, int64_t now)
{
    const st_fail_t *x = &s->fails[i];
    char *safe;
    if (!x->f) {
        safe = safe_dup(x->error);
        fprintf(f, "  corrupt: %s\n", safe ? safe : "?");
        free(safe);
        return;
    }
    const ec_failure_t *fl = x->f;
    char t[64], ago[64], what[128], rank[64];
    ec__status_fmt_time(fl->time_ms, t, sizeof(t));
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
    for (size_t i = 0; i < shown; i++)
        print_failure(f, s, i, now);
    /* The root cause is shown even when it is older than the newest few. */
    if (s->root >= 0 && (size_t)s->root >= shown) {
        fprintf(f, "  ...\n");
        print_failure(f, s, (size_t)s->root, now);
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

int ec__status_render_text(FILE *f, const st_snap_t *s, const char *job_id, const char *etcd,
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

/* ---- JSON ---------------------------------------------------------------- */

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

/* k: v, or k: null when !have. */
static void json_kint_or_null(FILE *f, bool *first, const char *k, bool have, int64_t v)
{
    json_key(f, first, k);
    if (have)
        fprintf(f, "%" PRId64, v);
    else
        fputs("null", f);
}

/* "{" to open obj's fields (true), or "null" for no obj (false). */
static bool json_object(FILE *f, const void *obj)
{
    fputs(obj ? "{" : "null", f);
    return obj != NULL;
}

/* A node's boot (null: none recorded). */
static void json_boot(FILE *f, const ec_node_boot_t *bt)
{
    if (!json_object(f, bt))
        return;
    bool first = true;
    json_kstr(f, &first, "phase", ec_boot_phase_name(bt->phase));
    json_kint(f, &first, "started_at_ms", bt->started_at_ms);
    json_kint(f, &first, "ready_at_ms", bt->ready_at_ms);
    json_kint(f, &first, "nready", bt->nready);
    json_kstr(f, &first, "why", bt->why);
    fputc('}', f);
}

/* A node's progress summary (null: none published). */
static void json_progress(FILE *f, const ec_node_progress_t *p)
{
    if (!json_object(f, p))
        return;
    bool first = true;
    json_kuint(f, &first, "seq", p->seq);
    json_kbool(f, &first, "reporting", p->reporting);
    json_kuint(f, &first, "step", p->step);
    json_kint(f, &first, "silent_ms", p->silent_ms);
    json_kint(f, &first, "silent_rank", p->silent_rank);
    json_kbool(f, &first, "waiting", p->waiting);
    json_kbool(f, &first, "stopped", p->stopped);
    json_kbool(f, &first, "paused", p->paused);
    json_kint(f, &first, "step_p50_us", p->step_p50_us);
    json_kint(f, &first, "slowest_us", p->slowest_us);
    json_kint(f, &first, "slowest_rank", p->slowest_rank);
    fputc('}', f);
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
    json_kint_or_null(f, &first, "m_id", r->m_id >= 0, r->m_id);
    json_kstr(f, &first, "host", addr ? host : NULL);
    json_kint_or_null(f, &first, "nproc", addr, n);
    bool ranks = row_ranks(s, r, &a, &b);
    json_kint_or_null(f, &first, "rank_first", ranks, a);
    json_kint_or_null(f, &first, "rank_last", ranks, b);
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
    json_boot(f, r->rec && r->rec->boot.phase != EC_BOOT_UNKNOWN ? &r->rec->boot : NULL);
    json_key(f, &first, "progress");
    json_progress(f, r->rec && r->rec->progress.seq ? &r->rec->progress : NULL);
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

/* The job status record (null: none, or corrupt). */
static void json_status(FILE *f, const ec_job_status_t *st)
{
    if (!json_object(f, st))
        return;
    bool first = true;
    json_kstr(f, &first, "state", ec_job_state_name(st->state));
    json_kstr(f, &first, "reason", st->reason);
    json_kuint(f, &first, "epoch", st->epoch);
    json_kuint(f, &first, "run", st->run);
    json_kint(f, &first, "updated_at_ms", st->updated_at_ms);
    json_kstr(f, &first, "updated_by", st->updated_by);
    fputc('}', f);
}

/* The epoch's header (null: none, or corrupt). */
static void json_epoch(FILE *f, const ec_epoch_t *ep)
{
    if (!json_object(f, ep))
        return;
    bool first = true;
    json_kuint(f, &first, "number", ep->number);
    json_kint(f, &first, "world_size", ep->world_size);
    json_kint(f, &first, "nproc", ep->nproc);
    json_kint(f, &first, "nmembers", ep->nmembers);
    json_kstr(f, &first, "reason", ec_epoch_reason_name(ep->reason));
    json_kstr(f, &first, "reason_detail", ep->reason_detail);
    json_kstr(f, &first, "leader_id", ep->leader_id);
    json_kint(f, &first, "leader_rev", ep->leader_rev);
    json_kint(f, &first, "observed_at_ms", ep->observed_at_ms);
    json_kint(f, &first, "decided_at_ms", ep->decided_at_ms);
    json_kint(f, &first, "published_at_ms", ep->published_at_ms);
    json_kint(f, &first, "planner_us", ep->planner_us);
    fputc('}', f);
}

int ec__status_render_json(FILE *f, const st_snap_t *s, const char *job_id, const char *etcd,
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
    json_status(f, s->status);
    json_kstr(f, &first, "status_error", s->status_error);
    json_kstr(f, &first, "leader", s->leader);

    json_key(f, &first, "epoch");
    json_epoch(f, s->epoch);
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
