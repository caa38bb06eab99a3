/* The collective (see rules.h): the allreduce job's outcome on every node
 * (allreduce). */
#define _GNU_SOURCE
#include "rules_impl.h"

/* ---- the collective ------------------------------------------------------------ */

void rule_allreduce(cx_t *cx, rb_t *b)
{
    if (etcd_down(cx)) {
        ec_strbuf_puts(&b->found, "not run: etcd is unreachable");
        return;
    }
    int ok = 0, fail = 0, skip = 0, ranks = 0;
    double worst_bw = -1, worst_s = 0;
    long long bytes = 0;
    const char *backend = "", *slowest = "";
    const char *skip_why = NULL;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        switch (f->coll) {
        case EC_CHECK_COLL_OK:
            ok++;
            ranks = f->coll_ranks;
            bytes = f->coll_bytes;
            backend = f->coll_backend;
            if (worst_bw < 0 || f->coll_busbw_gbps < worst_bw) {
                worst_bw = f->coll_busbw_gbps;
                worst_s = f->coll_seconds;
                slowest = f->node_id;
            }
            break;
        case EC_CHECK_COLL_FAIL:
            fail++;
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ck_detail(b, "%s: %s", f->node_id, f->coll_why);
            ck_fix(b, "read the worker logs the failing nodes name, then run the check again "
                      "with NCCL_DEBUG=INFO (or NCCL_DEBUG=WARN) on every node");
            break;
        case EC_CHECK_COLL_SKIP:
            skip++;
            if (!skip_why)
                skip_why = f->coll_why;
            break;
        default:
            break; /* never finished: the nodes check says so */
        }
    }
    if (fail) {
        ec_strbuf_printf(&b->found, "the allreduce failed on %d node%s", fail,
                         fail == 1 ? "" : "s");
        return;
    }
    if (ok && !skip) {
        ck_status(b, EC_CHECK_PASS);
        ec_strbuf_printf(&b->found,
                         "allreduce of %lld MiB over %d ranks (%s) verified; slowest node %s: "
                         "%.3f s, bus bandwidth %.2f GB/s",
                         bytes >> 20, ranks, backend, slowest, worst_s, worst_bw);
        return;
    }
    if (ok && skip) {
        ck_status(b, EC_CHECK_FAIL);
        ec_strbuf_printf(&b->found, "the allreduce ran on %d node%s but not on %d: %s", ok,
                         ok == 1 ? "" : "s", skip, skip_why ? skip_why : "");
        ck_fix(b, "run the same ecoord build, with the worker library, on every node");
        return;
    }
    ec_strbuf_printf(&b->found, "not run: %s", skip_why ? skip_why : "no node reported it");
}
