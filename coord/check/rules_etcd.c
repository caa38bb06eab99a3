/* etcd and the clocks (see rules.h): does every node reach etcd and how fast
 * (etcd), do the nodes' wall clocks agree (clock, measured by the port
 * probes' hellos). */
#define _GNU_SOURCE
#include "rules_impl.h"

void rule_etcd(cx_t *cx, rb_t *b)
{
    const ec_check_input_t *in = cx->in;
    if (etcd_down(cx)) {
        ck_status(b, EC_CHECK_FAIL);
        ec_strbuf_printf(&b->found, "%s", in->etcd_error);
        ck_fix(b, "check that etcd runs and that this node reaches it: the address and port in "
                  "--elastic_server, firewalls on the way, and the TLS/auth flags (--etcd_cacert, "
                  "--etcd_cert, --etcd_user)");
        if (cx->n)
            ck_node(b, cx->f[0]->node_id);
        return;
    }
    ck_status(b, EC_CHECK_PASS);
    const ec_check_facts_t *f0 = cx->n ? cx->f[0] : NULL;
    if (in->embedded)
        ec_strbuf_printf(&b->found, "embedded etcd %s at %s (single-node check)",
                         f0 ? f0->etcd_version : "", f0 ? f0->etcd : "");
    else
        ec_strbuf_printf(&b->found, "etcd %s reachable from %d node%s", f0 ? f0->etcd_version : "",
                         cx->n, cx->n == 1 ? "" : "s");
    int64_t lo = INT64_MAX, hi = -1;
    int ihi = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (f->etcd_rtt_us < lo)
            lo = f->etcd_rtt_us;
        if (f->etcd_rtt_us > hi) {
            hi = f->etcd_rtt_us;
            ihi = i;
        }
        if (f->etcd_rtt_us > in->limits.etcd_warn_us) {
            char t[32];
            ck_fmt_us(f->etcd_rtt_us, t, sizeof(t));
            ck_status(b, EC_CHECK_WARN);
            ck_node(b, f->node_id);
            ck_detail(b, "%s: median round trip %s", f->node_id, t);
            ck_fix(b, "etcd answers slowly: leases, elections and epoch changes lag by as much; "
                      "put etcd near the nodes and on fast disks (etcd fsyncs every write)");
        }
    }
    if (cx->n <= EC_CHECK_SHOW_NODES) {
        ec_strbuf_puts(&b->found, "; round trip ");
        for (int i = 0; i < cx->n; i++) {
            char t[32];
            ck_fmt_us(cx->f[i]->etcd_rtt_us, t, sizeof(t));
            ec_strbuf_printf(&b->found, "%s%s %s", i ? ", " : "", cx->f[i]->node_id, t);
        }
    } else if (cx->n) {
        char a[32], z[32];
        ck_fmt_us(lo, a, sizeof(a));
        ck_fmt_us(hi, z, sizeof(z));
        ec_strbuf_printf(&b->found, "; round trip %s to %s (slowest: %s)", a, z,
                         cx->f[ihi]->node_id);
    }
}

/* ---- clock --------------------------------------------------------------- */

void rule_clock(cx_t *cx, rb_t *b)
{
    const ec_check_limits_t *L = &cx->in->limits;
    if (etcd_down(cx)) {
        ec_strbuf_puts(&b->found, "not measured: etcd is unreachable, so the peers are unknown");
        return;
    }
    if (cx->n < 2) {
        ec_strbuf_puts(&b->found, "single node: no clock to compare with");
        return;
    }
    /* Best estimate per pair: the measurement with the shortest round trip. */
    int64_t best_skew = -1, best_rtt = 0;
    int bi = -1, bj = -1, pairs = 0, machines_differ = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        for (int j = 0; j < cx->n; j++) {
            if (j == i)
                continue;
            int64_t off = 0, rtt = INT64_MAX;
            int got = 0;
            for (int p = 0; p < f->nprobes; p++) {
                const ec_check_probe_t *pr = &f->probes[p];
                if (!pr->ok || strcmp(pr->nonce, cx->f[j]->nonce))
                    continue;
                if (pr->rtt_us < rtt) {
                    rtt = pr->rtt_us;
                    off = pr->offset_us;
                    got = 1;
                }
            }
            if (!got)
                continue;
            pairs++;
            if (!same_machine(f, cx->f[j]))
                machines_differ = 1;
            /* The skew is at least |offset| - rtt/2. */
            int64_t skew = (off < 0 ? -off : off) - rtt / 2;
            if (skew < 0)
                skew = 0;
            if (skew > best_skew) {
                best_skew = skew;
                best_rtt = rtt;
                bi = i;
                bj = j;
            }
        }
    }
    if (!pairs) {
        ec_strbuf_puts(&b->found, "not measured: no node reached another's ports (see ports)");
        return;
    }
    char t[32], u[32];
    ck_fmt_us(best_skew, t, sizeof(t));
    ck_fmt_us(best_rtt / 2, u, sizeof(u));
    ec_strbuf_printf(&b->found, "largest skew %s between %s and %s (+-%s)%s", t, cx->f[bi]->node_id,
                     cx->f[bj]->node_id, u,
                     machines_differ ? "" : "; every node shares one machine's clock");
    if (best_skew > L->clock_fail_us || best_skew > L->clock_warn_us) {
        ck_status(b, best_skew > L->clock_fail_us ? EC_CHECK_FAIL : EC_CHECK_WARN);
        ck_node(b, cx->f[bi]->node_id);
        ck_node(b, cx->f[bj]->node_id);
        ck_fix(b, "synchronize the clocks (chrony or systemd-timesyncd against one NTP source on "
                  "every node): skewed clocks misorder logs and timings, and TLS rejects "
                  "certificates as not yet valid");
    } else {
        ck_status(b, EC_CHECK_PASS);
    }
}
