/* The job's small records: its status, failure records, worker timings and
 * hang verdicts (records.h; the shared machinery: records_impl.h). */
#include "records_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int job_state_known(int s)
{
    switch (s) { EC_JOB_STATE_MAP(EC__KNOWN_CASE) return s != 0; }
    return 0;
}

static int failure_kind_known(int k)
{
    switch (k) { EC_FAILURE_KIND_MAP(EC__KNOWN_CASE) return k != 0; }
    return 0;
}

/* ---- job status ---------------------------------------------------------- */

void ec_job_status_free(ec_job_status_t *st)
{
    if (!st)
        return;
    int saved = errno;
    free(st->reason);
    free(st->updated_by);
    free(st->leader_id);
    free(st);
    errno = saved;
}

static int status_validate(const ec_job_status_t *st, const vctx_t *v)
{
    if (!job_state_known(st->state))
        return bad(v, "state %d is not a known job state", (int)st->state);
    if ((st->state == EC_JOB_FAILED || st->state == EC_JOB_INTERRUPTED) &&
        (!st->reason || !st->reason[0]))
        return bad(v, "state is %s but no reason is given", ec_job_state_name(st->state));
    if (st->updated_by && st->updated_by[0] && !node_id_ok(st->updated_by))
        return bad(v, "updated_by '%.64s' is not a valid node id", st->updated_by);
    if (st->updated_at_ms < 0)
        return bad(v, "updated_at_ms %lld is negative", (long long)st->updated_at_ms);
    return 0;
}

int ec_job_status_encode(const ec_job_status_t *st, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "job status record", NULL};
    if (!buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_job_status_encode: no output buffer given");
    *buf = NULL;
    *len = 0;
    if (!st)
        return ec_errorf(err, EC_EINVAL, "ec_job_status_encode: no record given");
    int rc = status_validate(st, &v);
    if (rc < 0)
        return rc;
    Ecoord__JobStatus m = ECOORD__JOB_STATUS__INIT;
    m.state = (Ecoord__JobState)st->state;
    m.reason = pb_str(st->reason);
    m.epoch = st->epoch;
    m.updated_at_ms = st->updated_at_ms;
    m.updated_by = pb_str(st->updated_by);
    m.run = st->run;
    m.leader_id = pb_str(st->leader_id);
    m.leader_rev = st->leader_rev;
    return ec__rec_pack(&m.base, &v, true, buf, len);
}

int ec_job_status_decode(const void *buf, size_t len, const char *key, ec_job_status_t **out,
                         ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "job status record", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_job_status_decode: no output given");
    *out = NULL;
    int rc = 0;
    Ecoord__JobStatus *m = ec__rec_unpack(&ecoord__job_status__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    ec_job_status_t *st = calloc(1, sizeof(*st));
    if (!st || !(st->reason = dup_str(m->reason)) || !(st->updated_by = dup_str(m->updated_by)) ||
        !(st->leader_id = dup_str(m->leader_id))) {
        rc = enomem(&v);
        goto error;
    }
    st->state = (ec_job_state_t)m->state;
    st->epoch = m->epoch;
    st->updated_at_ms = m->updated_at_ms;
    st->run = m->run ? m->run : 1;
    st->leader_rev = m->leader_rev;
    if ((rc = status_validate(st, &v)) < 0)
        goto error;
    protobuf_c_message_free_unpacked(&m->base, NULL);
    *out = st;
    return 0;
error:
    ec_job_status_free(st);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}

/* ---- failure record ------------------------------------------------------ */

void ec_failure_what(const ec_failure_t *f, char *buf, size_t len)
{
    switch (f->kind) {
    case EC_FAILURE_EXITED:
        snprintf(buf, len, "exited with code %d", f->exit_code);
        break;
    case EC_FAILURE_SIGNALED:
        snprintf(buf, len, "killed by signal %d (%s)", f->signal, strsignal(f->signal));
        break;
    case EC_FAILURE_NODE_LOST:
        snprintf(buf, len, "node lost");
        break;
    case EC_FAILURE_NOT_READY:
        snprintf(buf, len, "never ready (it did not join the job's epochs)");
        break;
    default:
        snprintf(buf, len, "%s", ec_failure_kind_name(f->kind));
    }
}

void ec_failure_free(ec_failure_t *f)
{
    if (!f)
        return;
    int saved = errno;
    free(f->node_id);
    free(f->log_path);
    if (f->last_lines)
        for (int i = 0; i < f->nlines; i++)
            free(f->last_lines[i]);
    free(f->last_lines);
    free(f->message);
    free(f->raised_at);
    free(f);
    errno = saved;
}

static int failure_validate(const ec_failure_t *f, const vctx_t *v)
{
    if (!node_id_ok(f->node_id))
        return bad(v, "node id '%.64s' is not 1..%d characters from [A-Za-z0-9._-]",
                   SHOW(f->node_id), EC_NODE_ID_MAX);
    if (!failure_kind_known(f->kind))
        return bad(v, "node %s: kind %d is not a known failure kind", f->node_id, (int)f->kind);
    if (f->kind != EC_FAILURE_NODE_LOST) {
        if (f->local_rank < 0 || f->local_rank >= EC_NPROC_MAX)
            return bad(v, "node %s: local rank %d is outside 0..%d", f->node_id, f->local_rank,
                       EC_NPROC_MAX - 1);
        if (f->global_rank < 0 || f->global_rank >= EC_NPROC_MAX * EC_MEMBERS_MAX)
            return bad(v, "node %s: global rank %d is out of range", f->node_id,
                       f->global_rank);
    }
    if (f->kind == EC_FAILURE_EXITED && (f->exit_code < 0 || f->exit_code > 255))
        return bad(v, "node %s: exit code %d is outside 0..255", f->node_id, f->exit_code);
    if (f->kind == EC_FAILURE_SIGNALED && (f->signal < 1 || f->signal > 127))
        return bad(v, "node %s: signal %d is outside 1..127", f->node_id, f->signal);
    if (f->time_ms < 0)
        return bad(v, "node %s: time_ms %lld is negative", f->node_id, (long long)f->time_ms);
    if (f->nlines < 0 || (f->nlines > 0 && !f->last_lines))
        return bad(v, "node %s: %d log lines but no lines given", f->node_id, f->nlines);
    for (int i = 0; i < f->nlines; i++)
        if (!f->last_lines[i])
            return bad(v, "node %s: log line %d is missing", f->node_id, i);
    return 0;
}

int ec_failure_encode(const ec_failure_t *f, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "failure record", NULL};
    if (!buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_failure_encode: no output buffer given");
    *buf = NULL;
    *len = 0;
    if (!f)
        return ec_errorf(err, EC_EINVAL, "ec_failure_encode: no record given");
    int rc = failure_validate(f, &v);
    if (rc < 0)
        return rc;
    int ranks = f->kind != EC_FAILURE_NODE_LOST;
    Ecoord__Failure m = ECOORD__FAILURE__INIT;
    m.node_id = f->node_id;
    m.kind = (Ecoord__FailureKind)f->kind;
    m.local_rank = ranks ? (uint32_t)f->local_rank : 0;
    m.global_rank = ranks ? (uint32_t)f->global_rank : 0;
    m.exit_code = f->kind == EC_FAILURE_EXITED ? f->exit_code : 0;
    m.signal = f->kind == EC_FAILURE_SIGNALED ? f->signal : 0;
    m.epoch = f->epoch;
    m.time_ms = f->time_ms;
    m.log_path = pb_str(f->log_path);
    m.n_last_lines = (size_t)f->nlines;
    m.last_lines = f->last_lines;
    m.message = pb_str(f->message);
    m.raised_at = pb_str(f->raised_at);
    m.run = f->run;
    return ec__rec_pack(&m.base, &v, true, buf, len);
}

int ec_failure_decode(const void *buf, size_t len, const char *key, ec_failure_t **out,
                      ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "failure record", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_failure_decode: no output given");
    *out = NULL;
    int rc = 0;
    Ecoord__Failure *m = ec__rec_unpack(&ecoord__failure__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    ec_failure_t *f = calloc(1, sizeof(*f));
    if (!f) {
        rc = enomem(&v);
        goto error;
    }
    if (m->local_rank > INT_MAX || m->global_rank > INT_MAX || m->n_last_lines > INT_MAX) {
        rc = bad(&v, "node '%.64s': local rank %u, global rank %u or %zu log lines out of range",
                 m->node_id, m->local_rank, m->global_rank, m->n_last_lines);
        goto error;
    }
    f->kind = (ec_failure_kind_t)m->kind;
    int ranks = f->kind != EC_FAILURE_NODE_LOST;
    f->local_rank = ranks ? (int)m->local_rank : -1;
    f->global_rank = ranks ? (int)m->global_rank : -1;
    f->exit_code = m->exit_code;
    f->signal = m->signal;
    f->epoch = m->epoch;
    f->time_ms = m->time_ms;
    f->run = m->run;
    if (!(f->node_id = dup_str(m->node_id)) || !(f->log_path = dup_str(m->log_path)) ||
        !(f->message = dup_str(m->message)) || !(f->raised_at = dup_str(m->raised_at)) ||
        !(f->last_lines = calloc(m->n_last_lines + 1, sizeof(char *)))) {
        rc = enomem(&v);
        goto error;
    }
    for (size_t i = 0; i < m->n_last_lines; i++, f->nlines++)
        if (!(f->last_lines[i] = dup_str(m->last_lines[i]))) {
            rc = enomem(&v);
            goto error;
        }
    if ((rc = failure_validate(f, &v)) < 0)
        goto error;
    protobuf_c_message_free_unpacked(&m->base, NULL);
    *out = f;
    return 0;
error:
    ec_failure_free(f);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}

/* ---- worker timing ------------------------------------------------------- */

void ec_worker_timing_free(ec_worker_timing_t *t)
{
    if (!t)
        return;
    int saved = errno;
    free(t->node_id);
    free(t->comm_method);
    free(t);
    errno = saved;
}

static int timing_validate(const ec_worker_timing_t *t, const vctx_t *v)
{
    if (t->epoch < 1)
        return bad(v, "epoch number is 0; numbers start at 1");
    if (t->rank < 0 || t->rank >= EC_NPROC_MAX * EC_MEMBERS_MAX)
        return bad(v, "epoch %llu: rank %d is out of range", (unsigned long long)t->epoch,
                   t->rank);
    if (!node_id_ok(t->node_id))
        return bad(v, "epoch %llu rank %d: node id '%.64s' is not a valid node id",
                   (unsigned long long)t->epoch, t->rank, SHOW(t->node_id));
    if (t->local_rank < 0 || t->local_rank >= EC_NPROC_MAX)
        return bad(v, "epoch %llu rank %d: local rank %d is outside 0..%d",
                   (unsigned long long)t->epoch, t->rank, t->local_rank, EC_NPROC_MAX - 1);
    const int64_t ts[] = {t->epoch_seen_at_us, t->comm_aborted_at_us, t->comm_ready_at_us,
                          t->state_synced_at_us, t->first_collective_at_us, t->shrink_us,
                          t->init_us};
    for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++)
        if (ts[i] < 0)
            return bad(v, "epoch %llu rank %d: time %zu is negative (%lld)",
                       (unsigned long long)t->epoch, t->rank, i, (long long)ts[i]);
    return 0;
}

int ec_worker_timing_encode(const ec_worker_timing_t *t, void **buf, size_t *len,
                            ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "worker timing record", NULL};
    if (!buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_worker_timing_encode: no output buffer given");
    *buf = NULL;
    *len = 0;
    if (!t)
        return ec_errorf(err, EC_EINVAL, "ec_worker_timing_encode: no record given");
    int rc = timing_validate(t, &v);
    if (rc < 0)
        return rc;
    Ecoord__WorkerTiming m = ECOORD__WORKER_TIMING__INIT;
    m.epoch = t->epoch;
    m.rank = (uint32_t)t->rank;
    m.node_id = t->node_id;
    m.local_rank = (uint32_t)t->local_rank;
    m.epoch_seen_at_us = t->epoch_seen_at_us;
    m.comm_aborted_at_us = t->comm_aborted_at_us;
    m.comm_ready_at_us = t->comm_ready_at_us;
    m.state_synced_at_us = t->state_synced_at_us;
    m.first_collective_at_us = t->first_collective_at_us;
    m.comm_method = t->comm_method ? t->comm_method : (char *)"";
    m.shrink_us = t->shrink_us;
    m.init_us = t->init_us;
    return ec__rec_pack(&m.base, &v, true, buf, len);
}

int ec_worker_timing_decode(const void *buf, size_t len, const char *key,
                            ec_worker_timing_t **out, ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "worker timing record", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_worker_timing_decode: no output given");
    *out = NULL;
    int rc = 0;
    Ecoord__WorkerTiming *m = ec__rec_unpack(&ecoord__worker_timing__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    ec_worker_timing_t *t = calloc(1, sizeof(*t));
    if (!t || !(t->node_id = dup_str(m->node_id))) {
        rc = enomem(&v);
        goto error;
    }
    if (m->rank > INT_MAX || m->local_rank > INT_MAX) {
        rc = bad(&v, "epoch %llu: rank %u or local rank %u out of range",
                 (unsigned long long)m->epoch, m->rank, m->local_rank);
        goto error;
    }
    t->epoch = m->epoch;
    t->rank = (int)m->rank;
    t->local_rank = (int)m->local_rank;
    t->epoch_seen_at_us = m->epoch_seen_at_us;
    t->comm_aborted_at_us = m->comm_aborted_at_us;
    t->comm_ready_at_us = m->comm_ready_at_us;
    t->state_synced_at_us = m->state_synced_at_us;
    t->first_collective_at_us = m->first_collective_at_us;
    t->shrink_us = m->shrink_us;
    t->init_us = m->init_us;
    if (m->comm_method && *m->comm_method && !(t->comm_method = dup_str(m->comm_method))) {
        rc = enomem(&v);
        goto error;
    }
    if ((rc = timing_validate(t, &v)) < 0)
        goto error;
    protobuf_c_message_free_unpacked(&m->base, NULL);
    *out = t;
    return 0;
error:
    ec_worker_timing_free(t);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}

/* ---- hang verdict -------------------------------------------------------- */

void ec_hang_verdict_free(ec_hang_verdict_t *h)
{
    if (!h)
        return;
    free(h->why);
    free(h);
}

static int hang_validate(const ec_hang_verdict_t *h, const vctx_t *v)
{
    if (h->epoch < 1)
        return bad(v, "epoch number is 0; numbers start at 1");
    if (h->local_rank < 0 || h->local_rank >= EC_NPROC_MAX)
        return bad(v, "epoch %llu: local rank %d is outside 0..%d", (unsigned long long)h->epoch,
                   h->local_rank, EC_NPROC_MAX - 1);
    if (h->why && strlen(h->why) > EC_HANG_WHY_MAX)
        return bad(v, "epoch %llu: the evidence is longer than %d bytes",
                   (unsigned long long)h->epoch, EC_HANG_WHY_MAX);
    return 0;
}

int ec_hang_verdict_encode(const ec_hang_verdict_t *h, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "hang verdict", NULL};
    if (!buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_hang_verdict_encode: no output buffer given");
    *buf = NULL;
    *len = 0;
    if (!h)
        return ec_errorf(err, EC_EINVAL, "ec_hang_verdict_encode: no record given");
    int rc = hang_validate(h, &v);
    if (rc < 0)
        return rc;
    Ecoord__HangVerdict m = ECOORD__HANG_VERDICT__INIT;
    m.epoch = h->epoch;
    m.local_rank = (uint32_t)h->local_rank;
    m.why = h->why ? h->why : (char *)"";
    return ec__rec_pack(&m.base, &v, true, buf, len);
}

int ec_hang_verdict_decode(const void *buf, size_t len, const char *key, ec_hang_verdict_t **out,
                           ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "hang verdict", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_hang_verdict_decode: no output given");
    *out = NULL;
    int rc = 0;
    Ecoord__HangVerdict *m = ec__rec_unpack(&ecoord__hang_verdict__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    ec_hang_verdict_t *h = calloc(1, sizeof(*h));
    if (!h || !(h->why = dup_str(m->why))) {
        rc = enomem(&v);
        goto error;
    }
    if (m->local_rank > INT_MAX) {
        rc = bad(&v, "epoch %llu: local rank %u out of range", (unsigned long long)m->epoch,
                 m->local_rank);
        goto error;
    }
    h->epoch = m->epoch;
    h->local_rank = (int)m->local_rank;
    if ((rc = hang_validate(h, &v)) < 0)
        goto error;
    protobuf_c_message_free_unpacked(&m->base, NULL);
    *out = h;
    return 0;
error:
    ec_hang_verdict_free(h);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}
