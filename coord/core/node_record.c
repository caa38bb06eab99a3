/* The node record, nodes/<node_id>: what an agent says of itself under its
 * lease (records.h; the shared machinery: records_impl.h). */
#include "records_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int node_state_known(int s)
{
    switch (s) { EC_NODE_STATE_MAP(EC__KNOWN_CASE) return s != 0; }
    return 0;
}

static int boot_phase_known(int p)
{
    switch (p) { EC_BOOT_PHASE_MAP(EC__KNOWN_CASE) return p != 0; }
    return 0;
}

static int printable_token(const char *s, size_t max)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (n >= max || (unsigned char)s[n] <= 0x20 || (unsigned char)s[n] >= 0x7f ||
            s[n] == ',')
            return 0;
    return n > 0;
}

ec_node_rec_t *ec_node_rec_new(int nproc, int ndevices)
{
    if (nproc < 1 || nproc > EC_NPROC_MAX || ndevices < 0 || ndevices > EC_NPROC_MAX)
        return NULL;
    ec_node_rec_t *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->nproc = nproc;
    r->ndevices = ndevices;
    r->ports = calloc((size_t)nproc, sizeof(*r->ports));
    r->device_ids = calloc((size_t)ndevices + 1, sizeof(*r->device_ids));
    if (!r->ports || !r->device_ids) {
        ec_node_rec_free(r);
        return NULL;
    }
    return r;
}

void ec_node_rec_free(ec_node_rec_t *r)
{
    if (!r)
        return;
    int saved = errno;
    free(r->node_id);
    free(r->host);
    free(r->ports);
    if (r->device_ids)
        for (int i = 0; i < r->ndevices; i++)
            free(r->device_ids[i]);
    free(r->device_ids);
    free(r->agent_version);
    free(r->reason);
    free(r);
    errno = saved;
}

static int node_validate(const ec_node_rec_t *r, const vctx_t *v)
{
    if (!node_id_ok(r->node_id))
        return bad(v, "node id '%.64s' is not 1..%d characters from [A-Za-z0-9._-]",
                   SHOW(r->node_id), EC_NODE_ID_MAX);
    if (!ec_host_valid(r->host))
        return bad(v, "node %s: host '%.64s' is not a host name or address", r->node_id,
                   SHOW(r->host));
    if (r->nproc < 1 || r->nproc > EC_NPROC_MAX)
        return bad(v, "node %s: nproc is %d, outside 1..%d", r->node_id, r->nproc,
                   EC_NPROC_MAX);
    if (!r->ports)
        return bad(v, "node %s: no ports for nproc=%d", r->node_id, r->nproc);
    char whose[EC_NODE_ID_MAX + 16];
    snprintf(whose, sizeof(whose), "node %s", r->node_id);
    int rc = ec__rec_ports_distinct(v, whose, r->ports, r->nproc, r->master_port);
    if (rc < 0)
        return rc;
    if (r->ndevices != 0 && r->ndevices != r->nproc)
        return bad(v, "node %s has %d device ids, expected 0 or nproc=%d", r->node_id,
                   r->ndevices, r->nproc);
    for (int i = 0; i < r->ndevices; i++)
        if (!r->device_ids || !r->device_ids[i] || !printable_token(r->device_ids[i], 128))
            return bad(v, "node %s: device id %d '%.64s' is empty or has spaces or commas",
                       r->node_id, i, r->device_ids ? SHOW(r->device_ids[i]) : "(null)");
    if (!node_state_known(r->state))
        return bad(v, "node %s: state %d is not a known node state", r->node_id, (int)r->state);
    if (r->boot.phase != EC_BOOT_UNKNOWN) {
        if (!boot_phase_known(r->boot.phase))
            return bad(v, "node %s: boot phase %d is not a known phase", r->node_id,
                       (int)r->boot.phase);
        if (r->boot.nready < 0 || r->boot.nready > r->nproc || r->boot.started_at_ms < 0 ||
            r->boot.ready_at_ms < 0)
            return bad(v, "node %s: boot says %d of nproc=%d ready (started at %lld, ready at "
                       "%lld): outside the record's bounds", r->node_id, r->boot.nready,
                       r->nproc, (long long)r->boot.started_at_ms,
                       (long long)r->boot.ready_at_ms);
    }
    return 0;
}

int ec_node_rec_encode(const ec_node_rec_t *r, void **buf, size_t *len, ec_error_t *err)
{
    vctx_t v = {err, EC_EINVAL, "node record", NULL};
    if (!buf || !len)
        return ec_errorf(err, EC_EINVAL, "ec_node_rec_encode: no output buffer given");
    *buf = NULL;
    *len = 0;
    if (!r)
        return ec_errorf(err, EC_EINVAL, "ec_node_rec_encode: no record given");
    int rc = node_validate(r, &v);
    if (rc < 0)
        return rc;
    Ecoord__NodeRecord m = ECOORD__NODE_RECORD__INIT;
    uint32_t *ports = malloc((size_t)r->nproc * sizeof(*ports));
    if (!ports)
        return enomem(&v);
    for (int i = 0; i < r->nproc; i++)
        ports[i] = r->ports[i];
    m.node_id = r->node_id;
    m.host = r->host;
    m.nproc = (uint32_t)r->nproc;
    m.n_ports = (size_t)r->nproc;
    m.ports = ports;
    m.master_port = r->master_port;
    m.n_device_ids = (size_t)r->ndevices;
    m.device_ids = r->device_ids;
    m.incarnation = r->incarnation;
    m.agent_version = pb_str(r->agent_version);
    m.state = (Ecoord__NodeState)r->state;
    m.reason = pb_str(r->reason);
    m.registered_at_ms = r->registered_at_ms;
    m.probe_port = r->probe_port;
    m.place = r->place;
    m.fence_stops = r->fence_stops;
    m.run = r->run;
    m.epoch_seen = r->epoch_seen;
    Ecoord__NodeProgress pg = ECOORD__NODE_PROGRESS__INIT;
    if (r->progress.seq) {
        const ec_node_progress_t *p = &r->progress;
        pg.seq = p->seq;
        pg.reporting = p->reporting != 0;
        pg.step = p->step;
        pg.silent_ms = p->silent_ms;
        pg.silent_rank = p->silent_rank;
        pg.waiting = p->waiting != 0;
        pg.stopped = p->stopped != 0;
        pg.paused = p->paused != 0;
        pg.step_p50_us = p->step_p50_us;
        pg.slowest_us = p->slowest_us;
        pg.slowest_rank = p->slowest_rank;
        m.progress = &pg;
    }
    Ecoord__NodeBoot bt = ECOORD__NODE_BOOT__INIT;
    if (r->boot.phase != EC_BOOT_UNKNOWN) {
        bt.phase = (Ecoord__BootPhase)r->boot.phase;
        bt.started_at_ms = r->boot.started_at_ms;
        bt.ready_at_ms = r->boot.ready_at_ms;
        bt.nready = (uint32_t)r->boot.nready;
        bt.why = (char *)r->boot.why;
        m.boot = &bt;
    }
    rc = ec__rec_pack(&m.base, &v, true, buf, len);
    free(ports);
    return rc;
}

int ec_node_rec_decode(const void *buf, size_t len, const char *key, ec_node_rec_t **out,
                       ec_error_t *err)
{
    vctx_t v = {err, EC_ECORRUPT, "node record", key};
    if (!out)
        return ec_errorf(err, EC_EINVAL, "ec_node_rec_decode: no output given");
    *out = NULL;
    int rc = 0;
    ec_node_rec_t *r = NULL;
    Ecoord__NodeRecord *m = ec__rec_unpack(&ecoord__node_record__descriptor, buf, len, &v, &rc);
    if (!m)
        return rc;
    if (m->nproc < 1 || m->nproc > EC_NPROC_MAX) {
        rc = bad(&v, "node '%.64s': nproc is %u, outside 1..%d", m->node_id, m->nproc,
                 EC_NPROC_MAX);
        goto error;
    }
    if (m->n_ports != m->nproc) {
        rc = bad(&v, "node '%.64s' has %zu endpoints, expected nproc=%u", m->node_id,
                 m->n_ports, m->nproc);
        goto error;
    }
    if (m->master_port > 65535) {
        rc = bad(&v, "node '%.64s': master port %u is outside 1..65535", m->node_id,
                 m->master_port);
        goto error;
    }
    if (m->n_device_ids != 0 && m->n_device_ids != m->nproc) {
        rc = bad(&v, "node '%.64s' has %zu device ids, expected 0 or nproc=%u", m->node_id,
                 m->n_device_ids, m->nproc);
        goto error;
    }
    r = ec_node_rec_new((int)m->nproc, (int)m->n_device_ids);
    if (!r) {
        rc = enomem(&v);
        goto error;
    }
    free(r->ports);
    r->ports = NULL;
    if ((rc = ec__rec_ports_from_pb(&v, "node", m->ports, m->n_ports, &r->ports)) < 0)
        goto error;
    r->master_port = (uint16_t)m->master_port;
    r->node_id = dup_str(m->node_id);
    r->host = dup_str(m->host);
    r->agent_version = dup_str(m->agent_version);
    r->reason = dup_str(m->reason);
    if (!r->node_id || !r->host || !r->agent_version || !r->reason) {
        rc = enomem(&v);
        goto error;
    }
    for (int i = 0; i < r->ndevices; i++)
        if (!(r->device_ids[i] = dup_str(m->device_ids[i]))) {
            rc = enomem(&v);
            goto error;
        }
    r->incarnation = m->incarnation;
    r->state = (ec_node_state_t)m->state;
    r->registered_at_ms = m->registered_at_ms;
    if (m->probe_port > 65535) {
        rc = bad(&v, "node '%.64s': probe port %u is outside 0..65535", m->node_id, m->probe_port);
        goto error;
    }
    r->probe_port = (uint16_t)m->probe_port;
    r->place = m->place;
    r->fence_stops = m->fence_stops;
    r->run = m->run ? m->run : 1;
    r->epoch_seen = m->epoch_seen;
    r->progress.silent_rank = r->progress.slowest_rank = -1;
    if (m->progress && m->progress->seq) {
        const Ecoord__NodeProgress *p = m->progress;
        if (p->silent_ms < 0 || p->step_p50_us < 0 || p->slowest_us < 0) {
            rc = bad(&v, "node '%.64s': progress has a negative duration", m->node_id);
            goto error;
        }
        r->progress = (ec_node_progress_t){
            .seq = p->seq, .reporting = p->reporting, .step = p->step, .silent_ms = p->silent_ms,
            .silent_rank = p->silent_rank, .waiting = p->waiting, .stopped = p->stopped,
            .paused = p->paused, .step_p50_us = p->step_p50_us, .slowest_us = p->slowest_us,
            .slowest_rank = p->slowest_rank};
    }
    if (m->boot) {
        const Ecoord__NodeBoot *b = m->boot;
        if (!boot_phase_known((int)b->phase)) {
            rc = bad(&v, "node '%.64s': boot phase %d is not a known phase", m->node_id,
                     (int)b->phase);
            goto error;
        }
        if (b->nready > m->nproc) {
            rc = bad(&v, "node '%.64s': boot says %u ready of nproc=%u", m->node_id, b->nready,
                     m->nproc);
            goto error;
        }
        r->boot.phase = (ec_boot_phase_t)b->phase;
        r->boot.started_at_ms = b->started_at_ms;
        r->boot.ready_at_ms = b->ready_at_ms;
        r->boot.nready = (int)b->nready;
        snprintf(r->boot.why, sizeof(r->boot.why), "%s", b->why ? b->why : "");
    }
    if ((rc = node_validate(r, &v)) < 0)
        goto error;
    protobuf_c_message_free_unpacked(&m->base, NULL);
    *out = r;
    return 0;
error:
    ec_node_rec_free(r);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return rc;
}
