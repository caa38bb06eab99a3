/* The nodes and who they are (see rules.h): did every node arrive and finish
 * (nodes), is every node id used once (node-ids), do host names tell the
 * machines apart the way NCCL and Gloo need (host-names). */
#define _GNU_SOURCE
#include "rules_impl.h"

/* ---- nodes ------------------------------------------------------------- */

void rule_nodes(cx_t *cx, rb_t *b)
{
    const ec_check_input_t *in = cx->in;
    char np[32];
    ck_fmt_np(in, np, sizeof(np));
    double waited = (double)in->waited_ms / 1000.0;
    ck_status(b, EC_CHECK_PASS);
    if (etcd_down(cx)) {
        ck_status(b, EC_CHECK_FAIL);
        ec_strbuf_printf(&b->found, "only this node (%s) was checked: it cannot reach etcd, so it "
                                    "cannot meet the others", cx->n ? cx->f[0]->node_id : "?");
        ck_fix(b, "make etcd reachable from this node (see the etcd check), then run the check "
                  "on every node");
        if (cx->n)
            ck_node(b, cx->f[0]->node_id);
        return;
    }
    if (in->embedded && in->np_max > 1) {
        ck_status(b, EC_CHECK_FAIL);
        ec_strbuf_printf(&b->found,
                         "no --elastic_server: this node ran an etcd of its own, which the "
                         "other nodes of %s cannot find; only this node was checked",
                         np);
        ck_fix(b, "start etcd where every node can reach it and pass --elastic_server=HOST:PORT "
                  "to `ecoord check` on every node");
        for (int i = 0; i < cx->n; i++)
            ck_node(b, cx->f[i]->node_id);
    } else if (cx->n < in->np_max) {
        int fail = cx->n < in->np_min || in->np_min == in->np_max;
        ck_status(b, fail ? EC_CHECK_FAIL : EC_CHECK_WARN);
        ec_strbuf_sep(&b->found, "; ");
        ec_strbuf_printf(&b->found, "%d of %s nodes arrived within %.1f s (", cx->n, np, waited);
        ck_all_names(&b->found, cx);
        ec_strbuf_printf(&b->found, "); %d never arrived", in->np_max - cx->n);
        int named = 0;
        for (int k = 0; k < in->nknown; k++) {
            int here = 0;
            for (int i = 0; i < cx->n && !here; i++)
                here = !strcmp(cx->f[i]->node_id, in->known[k]);
            for (int j = 0; j < k && !here; j++)
                here = !strcmp(in->known[j], in->known[k]); /* listed twice */
            if (here)
                continue;
            ec_strbuf_printf(&b->found, "%s%s", named++ ? ", " : ": ", in->known[k]);
            ck_node(b, in->known[k]);
        }
        if (named)
            ec_strbuf_puts(&b->found, " (known to the job's epoch or registrations, absent here)");
        if (!fail)
            ec_strbuf_printf(&b->found, " (training can start with %d nodes, but not at full size)",
                             cx->n);
        ck_fix(b, "start `ecoord check` with the same --elastic_server and --job_id on every "
                  "node within --elastic_timeout (%.0f s here), or lower --np; a node that "
                  "cannot reach etcd never arrives: run the check on it to see why",
               waited);
    } else if (cx->n > in->np_max) {
        ck_status(b, EC_CHECK_WARN);
        ec_strbuf_sep(&b->found, "; ");
        ec_strbuf_printf(&b->found, "%d processes arrived for %s (", cx->n, np);
        ck_all_names(&b->found, cx);
        ec_strbuf_puts(&b->found, ")");
        ck_fix(b, "run exactly one `ecoord check` per node, with --np set to the node count");
    }
    for (int k = 0; k < in->nunreadable; k++) {
        const ec_check_unreadable_t *u = &in->unreadable[k];
        ck_status(b, EC_CHECK_FAIL);
        if (ec_node_id_valid(u->name, strlen(u->name)))
            ck_node(b, u->name);
        ec_strbuf_sep(&b->found, "; ");
        ec_strbuf_printf(&b->found, "the facts of %s cannot be read: %s", u->name, u->why);
        ck_fix(b, "run the same ecoord version on every node (`ecoord --version` says which), "
                  "and let nothing but `ecoord check` write under the job's check/ keys");
    }
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (is_complete(cx, f))
            continue;
        ck_status(b, EC_CHECK_FAIL);
        ck_node(b, f->node_id);
        ec_strbuf_sep(&b->found, "; ");
        ec_strbuf_printf(&b->found, "%s arrived but never finished: %s", f->node_id,
                         f->gone ? "its key vanished (it exited, was killed, or lost etcd)"
                         : f->phase < EC_CHECK_PHASE_PROBED ? "it never reported its port probes"
                                                           : "it never reported the allreduce");
        ck_fix(b, "read the output of `ecoord check` on %s: it says why it stopped; every node "
                  "must keep running until the report is printed",
               f->node_id);
    }
    if (b->st == EC_CHECK_PASS) {
        ec_strbuf_printf(&b->found, "%d of %s nodes arrived in %.1f s: ", cx->n, np, waited);
        ck_all_names(&b->found, cx);
    }
}

void rule_node_ids(cx_t *cx, rb_t *b)
{
    ck_status(b, EC_CHECK_PASS);
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (i > 0 && !strcmp(cx->f[i - 1]->node_id, f->node_id))
            continue; /* sorted: a group starts here */
        int k = 1;
        while (i + k < cx->n && !strcmp(cx->f[i + k]->node_id, f->node_id))
            k++;
        if (k == 1)
            continue;
        ck_status(b, EC_CHECK_FAIL);
        ck_node(b, f->node_id);
        ec_strbuf_sep(&b->found, "; ");
        ec_strbuf_printf(&b->found, "node id %s is used by %d processes:", f->node_id, k);
        for (int j = 0; j < k; j++)
            ec_strbuf_printf(&b->found, "%s pid %d on %s (%s)", j ? "," : "", cx->f[i + j]->pid,
                             cx->f[i + j]->hostname, cx->f[i + j]->host);
        ck_fix(b, "give every node its own --node_id (or ECOORD_NODE_ID, or a distinct "
                  "POD_NAME): two agents with one id overwrite each other's record and the "
                  "job never forms");
    }
    if (b->st == EC_CHECK_PASS)
        ec_strbuf_printf(&b->found, "%d distinct node id%s", cx->n, cx->n == 1 ? "" : "s");
}

static char *v_hostname(const ec_check_facts_t *f) { return strdup(f->hostname); }

void rule_host_names(cx_t *cx, rb_t *b)
{
    ck_status(b, EC_CHECK_PASS);
    int machines = 0;
    for (int i = 0; i < cx->n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = same_machine(cx->f[i], cx->f[j]);
        machines += !seen;
    }
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = strcmp(cx->f[j]->hostname, f->hostname) != 0;
        if (!first)
            continue;
        /* Machines as frameworks see them: NCCL_HOSTID when set (NCCL's own
         * override), else the boot id. */
        int nm = 0;
        ec_strbuf_t who = {0};
        for (int j = i; j < cx->n; j++) {
            const ec_check_facts_t *g = cx->f[j];
            if (strcmp(g->hostname, f->hostname))
                continue;
            int dup = 0;
            for (int k = i; k < j && !dup; k++) {
                const ec_check_facts_t *h = cx->f[k];
                if (strcmp(h->hostname, f->hostname))
                    continue;
                dup = (g->host_id[0] || h->host_id[0]) ? !strcmp(g->host_id, h->host_id)
                                                       : same_machine(g, h);
            }
            if (dup)
                continue;
            nm++;
            ec_strbuf_printf(&who, "%s%s (%s %s)", nm > 1 ? ", " : "", g->node_id,
                             g->host_id[0] ? "NCCL_HOSTID" : "boot id",
                             g->host_id[0] ? g->host_id : g->boot_id);
        }
        if (nm > 1) {
            ck_status(b, EC_CHECK_FAIL);
            for (int j = i; j < cx->n; j++)
                if (!strcmp(cx->f[j]->hostname, f->hostname))
                    ck_node(b, cx->f[j]->node_id);
            ec_strbuf_sep(&b->found, "; ");
            ec_strbuf_printf(&b->found, "host name %s is used by %d different machines: %s",
                             f->hostname, nm, who.s ? who.s : "");
            ck_fix(b, "give every machine its own host name (hostnamectl set-hostname, docker "
                      "run --hostname, a pod's hostname): launchers and NCCL that group processes "
                      "by host name treat those machines as one and compute wrong local ranks");
        }
        ec_strbuf_free(&who);
    }
    if (b->st == EC_CHECK_PASS) {
        char **v = ck_vals_new(cx);
        if (v && ck_vals_fill(cx, v, v_hostname) == 0) {
            ec_strbuf_printf(&b->found, "%d node%s on %d machine%s: ", cx->n, cx->n == 1 ? "" : "s",
                             machines, machines == 1 ? "" : "s");
            ck_groups(&b->found, cx, v);
        }
        ck_vals_free(cx, v);
    }
}
