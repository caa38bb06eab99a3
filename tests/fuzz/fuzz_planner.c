/* libFuzzer target: the planner (coord/core/planner.c) fed arbitrary node sets,
 * epochs, configurations and clocks, built from the input bytes.  Ids come
 * from a small pool so nodes, members and left ids collide the way they do
 * in a real job (and sometimes twice, which the planner must refuse).
 *
 * Properties (planner.h's contract):
 *  - rc is 0, or EC_EINVAL exactly when the input is malformed (duplicate
 *    node or member id, epoch 0 with members, epoch > 0 without, an epoch
 *    number with no successor);
 *  - an invalid configuration is a FAIL decision, never a publish;
 *  - a publish is numbered current + 1 (and so above every earlier number),
 *    has np_min <= M <= np_max distinct eligible nodes, W = M * N, a known
 *    reason (start exactly when there was no epoch), takes every eligible
 *    node when M < np_max, keeps surviving members in their relative order
 *    and, when nobody departed, at their M_id;
 *  - WAIT_UNTIL waits > 0 ms; refusals name nodes that want in with the
 *    wrong N; texts are set;
 *  - the decision does not depend on the order of the nodes array. */
#include <inttypes.h>
#include <string.h>

#include "fuzz.h"
#include "planner.h"

#define POOL 24
#define MAXN 40

static char ids[POOL][8];

static void init_ids(void)
{
    if (ids[0][0])
        return;
    for (int i = 0; i < POOL; i++)
        snprintf(ids[i], sizeof(ids[i]), "n%d", i);
}

static bool config_valid(const ec_plan_config_t *c)
{
    return c->np_min >= 1 && c->np_min <= c->np_max && c->nproc >= 1 &&
           (int64_t)c->np_max * c->nproc <= INT32_MAX && c->elastic_timeout_ms >= 0 &&
           c->replace_wait_ms >= 0;
}

static int find_node(const ec_plan_input_t *in, const char *id)
{
    for (size_t i = 0; i < in->n_nodes; i++)
        if (!strcmp(in->nodes[i].node_id, id))
            return (int)i;
    return -1;
}

static void check_publish(const ec_plan_input_t *in, const ec_plan_decision_t *d)
{
    const ec_plan_config_t *c = &in->config;
    const ec_plan_epoch_t *e = &in->epoch;
    FUZZ_CHECK(d->epoch == e->number + 1 && d->epoch > e->number,
               "publish numbered %" PRIu64 " after %" PRIu64, d->epoch, e->number);
    FUZZ_CHECK(d->n_members >= (size_t)c->np_min && d->n_members <= (size_t)c->np_max,
               "%zu members outside np %d:%d", d->n_members, c->np_min, c->np_max);
    FUZZ_CHECK(d->world_size == (int64_t)d->n_members * c->nproc, "world %" PRId64,
               d->world_size);
    FUZZ_CHECK(d->reason >= EC_REASON_START && d->reason <= EC_REASON_SPARE_PROMOTED,
               "reason %d", d->reason);
    FUZZ_CHECK((d->reason == EC_REASON_START) == (e->number == 0), "start reason");
    bool in_pub[MAXN] = {0};
    for (size_t k = 0; k < d->n_members; k++) {
        size_t i = d->members[k];
        FUZZ_CHECK(i < in->n_nodes, "member index %zu", i);
        FUZZ_CHECK(!in_pub[i], "node %s published twice", in->nodes[i].node_id);
        in_pub[i] = true;
        /* Eligible, or a member whose processes finished: it stays a member
         * until the whole job is done (planner.h, rule 5). */
        bool done_member = false;
        for (size_t m = 0; m < e->n_members; m++)
            done_member |= !strcmp(e->members[m].node_id, in->nodes[i].node_id) &&
                           in->nodes[i].state == EC_NODE_DONE &&
                           in->nodes[i].nproc == (uint32_t)c->nproc;
        FUZZ_CHECK(ec_plan_node_eligible(c, &in->nodes[i]) || done_member,
                   "ineligible %s published", in->nodes[i].node_id);
    }
    if (d->n_members < (size_t)c->np_max)
        for (size_t i = 0; i < in->n_nodes; i++)
            FUZZ_CHECK(in_pub[i] || !ec_plan_node_eligible(c, &in->nodes[i]),
                       "eligible %s left out of a publish below np_max", in->nodes[i].node_id);
    /* Survivors keep their relative order; with nobody departed, their M_id. */
    size_t last = 0;
    bool any = false;
    for (size_t m = 0; m < e->n_members; m++) {
        int i = find_node(in, e->members[m].node_id);
        if (i < 0 || !in_pub[i])
            continue;
        size_t pos = 0;
        while (d->members[pos] != (size_t)i)
            pos++;
        FUZZ_CHECK(!any || pos > last, "member %s moved before an earlier member",
                   e->members[m].node_id);
        if (d->n_departed == 0)
            FUZZ_CHECK(pos == m, "member %s moved from M_id %zu to %zu with nobody departed",
                       e->members[m].node_id, m, pos);
        last = pos;
        any = true;
    }
}

static int plan_checked(const ec_plan_input_t *in, bool malformed, ec_plan_decision_t **out)
{
    ec_error_t err = {0};
    int rc = ec_plan(in, out, &err);
    if (malformed) {
        FUZZ_CHECK(rc == EC_EINVAL && *out == NULL && err.msg[0], "malformed input gave %d", rc);
        return rc;
    }
    FUZZ_CHECK(rc == 0 && *out, "well-formed input refused: %d %s", rc, err.msg);
    const ec_plan_decision_t *d = *out;
    FUZZ_CHECK(d->why && d->log, "no text");
    FUZZ_CHECK(d->n_departed <= in->epoch.n_members, "departed %zu", d->n_departed);
    if (!config_valid(&in->config)) {
        FUZZ_CHECK(d->action == EC_PLAN_FAIL, "invalid config gave %d", d->action);
        return 0;
    }
    switch (d->action) {
    case EC_PLAN_PUBLISH:
        check_publish(in, d);
        break;
    case EC_PLAN_WAIT_UNTIL:
        FUZZ_CHECK(d->wait_ms > 0, "wait-until %" PRId64 " ms", d->wait_ms);
        /* fallthrough */
    case EC_PLAN_WAIT:
    case EC_PLAN_COMPLETE:
    case EC_PLAN_FAIL:
        FUZZ_CHECK(d->reason == EC_REASON_UNKNOWN && d->n_members == 0, "stray publish data");
        break;
    default:
        FUZZ_CHECK(0, "action %d", d->action);
    }
    for (size_t r = 0; r < d->n_refused; r++) {
        size_t i = d->refused[r].node;
        FUZZ_CHECK(i < in->n_nodes && d->refused[r].why, "refusal %zu", r);
        const ec_plan_node_t *nd = &in->nodes[i];
        FUZZ_CHECK((nd->state == EC_NODE_JOINING || nd->state == EC_NODE_READY) &&
                       nd->nproc != (uint32_t)in->config.nproc,
                   "refused %s without cause", nd->node_id);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_ids();
    fuzz_in_t f = {data, size};
    ec_plan_input_t in = EC_PLAN_INPUT_INIT;
    ec_plan_config_t *c = &in.config;
    uint8_t shape = fuzz_u8(&f);
    if (shape & 0x80) { /* anything at all, mostly invalid */
        c->np_min = (int)fuzz_u32(&f);
        c->np_max = (int)fuzz_u32(&f);
        c->nproc = (int)fuzz_u32(&f);
        c->elastic_timeout_ms = (int64_t)fuzz_u64(&f);
        c->replace_wait_ms = (int64_t)fuzz_u64(&f);
        c->join_ready_timeout_ms = (int64_t)fuzz_u64(&f);
    } else {
        c->np_min = 1 + fuzz_u8(&f) % 8;
        c->np_max = c->np_min + fuzz_u8(&f) % 8;
        c->nproc = 1 + fuzz_u8(&f) % 4;
        c->elastic_timeout_ms = fuzz_u8(&f) % 4 * 500;
        c->replace_wait_ms = fuzz_u8(&f) % 3 * 500;
        c->join_ready_timeout_ms = fuzz_u8(&f) % 3 * 1000;
    }
    bool malformed = false; /* duplicate ids: checked after the configuration */
    ec_plan_node_t nodes[MAXN], rev[MAXN];
    bool seen[POOL] = {0};
    in.n_nodes = fuzz_u8(&f) % MAXN;
    for (size_t i = 0; i < in.n_nodes; i++) {
        uint8_t b = fuzz_u8(&f), s = fuzz_u8(&f);
        nodes[i].node_id = ids[b % POOL];
        malformed |= seen[b % POOL];
        seen[b % POOL] = true;
        nodes[i].nproc = (s & 0x80) ? (uint32_t)(s & 7) : (uint32_t)(c->nproc > 0 ? c->nproc : 1);
        nodes[i].state = (ec_node_state_t)(s % 7); /* 0 and 6: not a known state */
        nodes[i].incarnation = fuzz_u8(&f) % 3;
        nodes[i].create_revision = (shape & 0x40) ? (int64_t)fuzz_u64(&f) : fuzz_u8(&f);
        uint8_t bt = fuzz_u8(&f); /* booting: processes not ready, for some time */
        nodes[i].booting = bt & 1;
        nodes[i].booting_ms = (int64_t)(bt >> 1) * 50 - 100;
    }
    in.nodes = nodes;
    ec_plan_member_t mem[MAXN];
    bool mseen[POOL] = {0};
    uint8_t eb = fuzz_u8(&f);
    in.epoch.number = (eb & 0x80) ? fuzz_u64(&f) : eb % 4;
    in.epoch.n_members = fuzz_u8(&f) % 12;
    for (size_t m = 0; m < in.epoch.n_members; m++) {
        uint8_t b = fuzz_u8(&f);
        mem[m].node_id = ids[b % POOL];
        malformed |= mseen[b % POOL];
        mseen[b % POOL] = true;
        mem[m].incarnation = fuzz_u8(&f) % 3;
    }
    in.epoch.members = mem;
    /* A malformed epoch is refused before anything else; duplicate ids only
     * once the configuration is valid (an invalid one is a FAIL decision). */
    if ((in.epoch.number == 0) != (in.epoch.n_members == 0) || in.epoch.number == UINT64_MAX)
        malformed = true;
    else if (!config_valid(c))
        malformed = false;
    in.since_eligible_change_ms = (int64_t)(int32_t)fuzz_u32(&f);
    in.since_member_missing_ms = (int64_t)(int32_t)fuzz_u32(&f);
    const char *left[8];
    in.n_left = fuzz_u8(&f) % 8;
    for (size_t j = 0; j < in.n_left; j++)
        left[j] = ids[fuzz_u8(&f) % POOL];
    in.left_ids = left;

    if (getenv("FUZZ_PLANNER_DEBUG")) { /* replaying one input: show it */
        fprintf(stderr, "config np=%d:%d nproc=%d elastic=%lld replace=%lld\n", c->np_min,
                c->np_max, c->nproc, (long long)c->elastic_timeout_ms,
                (long long)c->replace_wait_ms);
        for (size_t i = 0; i < in.n_nodes; i++)
            fprintf(stderr, "node %zu %s nproc=%u state=%d inc=%llu rev=%lld booting=%d/%lld\n", i,
                    nodes[i].node_id, nodes[i].nproc, nodes[i].state,
                    (unsigned long long)nodes[i].incarnation, (long long)nodes[i].create_revision,
                    nodes[i].booting, (long long)nodes[i].booting_ms);
        fprintf(stderr, "epoch %llu:", (unsigned long long)in.epoch.number);
        for (size_t m = 0; m < in.epoch.n_members; m++)
            fprintf(stderr, " %s/%llu", mem[m].node_id, (unsigned long long)mem[m].incarnation);
        fprintf(stderr, "\nsince change %lld missing %lld; %zu left\n",
                (long long)in.since_eligible_change_ms, (long long)in.since_member_missing_ms,
                in.n_left);
        ec_plan_decision_t *dd = NULL;
        if (ec_plan(&in, &dd, NULL) == 0)
            fprintf(stderr, "%s\n", dd->log);
        ec_plan_decision_free(dd);
    }
    ec_plan_decision_t *d = NULL, *d2 = NULL;
    if (plan_checked(&in, malformed, &d) < 0)
        return 0;
    /* The same nodes in reverse order: same decision, same fingerprint. */
    for (size_t i = 0; i < in.n_nodes; i++)
        rev[i] = nodes[in.n_nodes - 1 - i];
    ec_plan_input_t in2 = in;
    in2.nodes = rev;
    plan_checked(&in2, false, &d2);
    FUZZ_CHECK(ec_plan_fingerprint(c, nodes, in.n_nodes) == ec_plan_fingerprint(c, rev, in.n_nodes),
               "fingerprint depends on order");
    FUZZ_CHECK(d->action == d2->action && d->reason == d2->reason && d->epoch == d2->epoch &&
                   d->n_members == d2->n_members && d->wait_ms == d2->wait_ms &&
                   d->n_departed == d2->n_departed && d->n_refused == d2->n_refused,
               "decision depends on node order: %s | %s", d->log, d2->log);
    for (size_t k = 0; k < d->n_members; k++)
        FUZZ_CHECK(!strcmp(nodes[d->members[k]].node_id, rev[d2->members[k]].node_id),
                   "M_id %zu differs with node order", k);
    ec_plan_decision_free(d);
    ec_plan_decision_free(d2);
    return 0;
}
