/* Restart mode's stop barrier: its two records and its rule (stop_barrier.h). */
#include "stop_barrier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecoord.pb-c.h"
#include "keys.h"
#include "records_impl.h"

const char *ec_depart_cause_name(ec_depart_cause_t c)
{
    switch (c) {
    case EC_DEPART_REFUSED: return "refused";
    case EC_DEPART_SILENT: return "silent";
    case EC_DEPART_HUNG: return "hung";
    }
    return "?";
}

/* Encoding goes through the records' one packer (records_impl.h). */
static int pack(const ProtobufCMessage *m, void **buf, size_t *len, const char *what,
                ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, what, NULL};
    return ec__rec_pack(m, &v, false, buf, len);
}

/* Every decode failure names the key and says what to do about it: the
 * barrier treats an unreadable record as none, so a writer's garbage costs
 * at most the protection, never the job. */
static int corrupt(ec_error_t *err, const char *what, const char *key, const char *detail)
{
    return ec_errorf(err, EC_ECORRUPT, "%s at %s is not valid (%s): it was written by "
                     "something other than ecoord; delete the key (etcdctl del %s), ecoord "
                     "writes it again", what, key ? key : "(unnamed key)", detail,
                     key ? key : "<key>");
}

int ec_rank_holder_encode(const ec_rank_holder_t *h, void **buf, size_t *len, ec_error_t *err)
{
    if (!h || !buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_rank_holder_encode: no record or output given");
    if (ec_node_id_check(h->node_id, err) < 0)
        return EC_EINVAL;
    Ecoord__RankHolder m = ECOORD__RANK_HOLDER__INIT;
    m.node_id = (char *)h->node_id;
    m.epoch = h->epoch;
    m.lease = h->lease;
    m.stopped = h->stopped;
    return pack(&m.base, buf, len, "rank holder", err);
}

int ec_rank_holder_decode(const void *buf, size_t len, const char *key, ec_rank_holder_t *out,
                          ec_error_t *err)
{
    static const uint8_t empty[1];
    Ecoord__RankHolder *m = ecoord__rank_holder__unpack(NULL, len, buf ? buf : empty);
    if (!m)
        return corrupt(err, "rank holder", key, "not a protobuf RankHolder");
    int rc = 0;
    if (!m->node_id || !ec_node_id_valid(m->node_id, strlen(m->node_id)))
        rc = corrupt(err, "rank holder", key, "no valid node id");
    else if (m->epoch < 1)
        rc = corrupt(err, "rank holder", key, "epoch 0");
    else {
        memset(out, 0, sizeof(*out));
        snprintf(out->node_id, sizeof(out->node_id), "%s", m->node_id);
        out->epoch = m->epoch;
        out->lease = m->lease;
        out->stopped = m->stopped;
    }
    ecoord__rank_holder__free_unpacked(m, NULL);
    return rc;
}

int ec_departure_encode(const ec_departure_t *d, void **buf, size_t *len, ec_error_t *err)
{
    if (!d || !buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_departure_encode: no record or output given");
    Ecoord__Departure m = ECOORD__DEPARTURE__INIT;
    m.lease = d->lease;
    m.cause = (uint32_t)d->cause;
    m.wait_ms = d->wait_ms;
    return pack(&m.base, buf, len, "departure", err);
}

int ec_departure_decode(const void *buf, size_t len, const char *key, ec_departure_t *out,
                        ec_error_t *err)
{
    static const uint8_t empty[1];
    Ecoord__Departure *m = ecoord__departure__unpack(NULL, len, buf ? buf : empty);
    if (!m)
        return corrupt(err, "departure", key, "not a protobuf Departure");
    int rc = 0;
    if (m->cause < EC_DEPART_REFUSED || m->cause > EC_DEPART_HUNG)
        rc = corrupt(err, "departure", key, "unknown cause");
    else if (m->wait_ms < 0)
        rc = corrupt(err, "departure", key, "negative wait");
    else
        *out = (ec_departure_t){.lease = m->lease, .cause = (ec_depart_cause_t)m->cause,
                                .wait_ms = m->wait_ms};
    ecoord__departure__free_unpacked(m, NULL);
    return rc;
}

static ec_barrier_out_t clear(const char *why, bool timed_out)
{
    return (ec_barrier_out_t){.verdict = EC_BARRIER_CLEAR, .why = why, .timed_out = timed_out};
}

static ec_barrier_out_t wait_until(const ec_barrier_in_t *in, int64_t until, const char *why)
{
    if (in->now_ms >= until)
        return clear("the holder's processes cannot have outlived its lease by now", true);
    return (ec_barrier_out_t){.verdict = EC_BARRIER_WAIT, .until_ms = until, .why = why};
}

ec_barrier_out_t ec_barrier_decide(const ec_barrier_in_t *in)
{
    const ec_rank_holder_t *h = in->holder;
    if (!h)
        return clear("no earlier holder", false);
    if (in->self && !strcmp(h->node_id, in->self))
        return clear("this node held them: its processes are stopped", false);
    if (h->epoch >= in->epoch)
        /* not a start to make: the newer epoch comes (bounded all the same) */
        return wait_until(in, in->since_ms + in->ttl_ms,
                          "a newer epoch's holder has them: this epoch is superseded");
    if (h->stopped)
        return clear("the holder confirmed its processes stopped", false);
    if (in->record_lease != 0 && in->record_lease == h->lease)
        return wait_until(in, in->since_ms + in->ttl_ms,
                          "the holder is registered and has not confirmed its stop");
    if (in->gone && in->gone->lease == h->lease) {
        if (in->gone->cause == EC_DEPART_REFUSED)
            return clear("the holder's agent was evicted as gone (it refused probes): its "
                         "processes went with it", false);
        int64_t w = in->gone->wait_ms < in->ttl_ms ? in->gone->wait_ms : in->ttl_ms;
        int64_t seen = in->gone_seen_ms > 0 ? in->gone_seen_ms : in->now_ms;
        return wait_until(in, seen + w,
                          in->gone->cause == EC_DEPART_HUNG
                              ? "the holder was evicted as hung and has not confirmed its stop"
                              : "the holder was evicted as silent: its processes may live until "
                                "its janitor or fence stops them");
    }
    return clear("the holder's lease ended without an eviction (it expired after its fence, "
                 "or the holder left)", false);
}
