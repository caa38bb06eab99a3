/* Network and ports (see rules.h): the address each node publishes
 * (address), what NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME select (socket-ifname),
 * whether every node reaches every other node's ports (ports). */
#define _GNU_SOURCE
#include "rules_impl.h"

/* ---- network --------------------------------------------------------------- */

static const char *iface_of(const ec_check_facts_t *f) { return f->ifname[0] ? f->ifname : "?"; }

/* "eth0 10.0.0.1, ib0 10.1.0.1": the addresses a node could publish instead. */
static void other_addrs(const ec_check_facts_t *f, ec_strbuf_t *s)
{
    int k = 0;
    for (int i = 0; i < f->nifaces; i++) {
        const ec_check_iface_t *x = &f->ifaces[i];
        if (!x->up || !strcmp(x->name, "lo") || is_loopback_addr(x->addr) ||
            is_bridge_if(x->name) || !strncmp(x->addr, "fe80:", 5))
            continue;
        ec_strbuf_printf(s, "%s%s %s", k++ ? ", " : "", x->name, x->addr);
    }
    if (!k)
        ec_strbuf_puts(s, "none besides loopback and bridges");
}

void rule_address(cx_t *cx, rb_t *b)
{
    ck_status(b, EC_CHECK_PASS);
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        int remote = ck_has_remote_peer(cx, f);
        ec_strbuf_t alt = {0};
        other_addrs(f, &alt);
        if (f->ports_err[0]) {
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ec_strbuf_sep(&b->found, "; ");
            ec_strbuf_printf(&b->found, "%s cannot use %s: %s", f->node_id, f->host, f->ports_err);
            ck_fix(b, "pass --host with an address of one of %s's own interfaces (%s)",
                   f->node_id, alt.s ? alt.s : "");
        } else if (!f->ifname[0]) {
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ec_strbuf_sep(&b->found, "; ");
            ec_strbuf_printf(&b->found, "%s publishes %s, which no interface of %s holds",
                             f->node_id, f->host, f->node_id);
            ck_fix(b, "pass --host with an address of one of %s's own interfaces (%s)",
                   f->node_id, alt.s ? alt.s : "");
        } else if (remote && (!strcmp(f->ifname, "lo") || is_loopback_addr(f->host))) {
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ec_strbuf_sep(&b->found, "; ");
            ec_strbuf_printf(&b->found,
                             "%s publishes %s (lo), but other nodes run on other machines "
                             "and cannot reach it",
                             f->node_id, f->host);
            ck_fix(b, "pass --host=ADDR with the address of the interface that faces the other "
                      "nodes (%s has: %s), or reach etcd through that interface instead of "
                      "loopback", f->node_id, alt.s ? alt.s : "");
        } else if (remote && is_bridge_if(f->ifname)) {
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ec_strbuf_sep(&b->found, "; ");
            ec_strbuf_printf(&b->found,
                             "%s publishes %s on %s, a host-only container bridge the "
                             "other machines cannot reach",
                             f->node_id, f->host, f->ifname);
            ck_fix(b, "run the container with --network=host, or pass --host with the machine's "
                      "own address (%s) and publish the port range (-p LO-HI:LO-HI)",
                   alt.s ? alt.s : "");
        }
        ec_strbuf_free(&alt);
    }
    if (b->st == EC_CHECK_PASS) {
        int all_local = 1;
        for (int i = 0; i < cx->n && all_local; i++)
            all_local = !ck_has_remote_peer(cx, cx->f[i]);
        for (int i = 0; i < cx->n && i < EC_CHECK_SHOW_NODES; i++)
            ec_strbuf_printf(&b->found, "%s%s %s (%s)", i ? ", " : "", cx->f[i]->node_id,
                             cx->f[i]->host, iface_of(cx->f[i]));
        if (cx->n > EC_CHECK_SHOW_NODES)
            ec_strbuf_printf(&b->found, ", +%d more", cx->n - EC_CHECK_SHOW_NODES);
        if (all_local && cx->n > 1)
            ec_strbuf_puts(&b->found, "; every node on one machine");
    }
}

/* Split a comma list into a static-size array of names. */
static int split_names(const char *s, char names[][32], int max)
{
    int n = 0;
    const char *p = s;
    while (*p && n < max) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && len < 32) {
            memcpy(names[n], p, len);
            names[n][len] = '\0';
            n++;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return n;
}

/* NCCL_SOCKET_IFNAME set on f: it must select an interface that is up,
 * and one other than lo when other nodes run elsewhere. */
static void ifname_nccl(rb_t *b, const ec_check_facts_t *f, const char *nccl, int remote,
                        const char *have)
{
    int sel = 0, sel_up = 0, sel_lo_only = 1;
    for (int k = 0; k < f->nifaces; k++) {
        const ec_check_iface_t *x = &f->ifaces[k];
        if (!ec_check_nccl_ifname_match(nccl, x->name))
            continue;
        sel++;
        if (x->up) {
            sel_up++;
            if (strcmp(x->name, "lo"))
                sel_lo_only = 0;
        }
    }
    if (!sel || !sel_up) {
        ck_status(b, EC_CHECK_FAIL);
        ck_node(b, f->node_id);
        ec_strbuf_sep(&b->found, "; ");
        ec_strbuf_printf(&b->found, "NCCL_SOCKET_IFNAME=%s on %s %s (%s has: %s)", nccl,
                         f->node_id, sel ? "selects only interfaces that are down"
                                         : "matches no interface",
                         f->node_id, have);
        ck_fix(b, "set NCCL_SOCKET_IFNAME to an interface that exists and is up on every "
                  "node (%s has: %s), or unset it; NCCL fails to bootstrap with 'no socket "
                  "interface found'", f->node_id, have);
    } else if (remote && sel_lo_only) {
        ck_status(b, EC_CHECK_FAIL);
        ck_node(b, f->node_id);
        ec_strbuf_sep(&b->found, "; ");
        ec_strbuf_printf(&b->found,
                         "NCCL_SOCKET_IFNAME=%s on %s selects only lo, but other "
                         "nodes run on other machines",
                         nccl, f->node_id);
        ck_fix(b, "set NCCL_SOCKET_IFNAME to the interface that faces the other nodes "
                  "(%s has: %s)", f->node_id, have);
    }
}

/* GLOO_SOCKET_IFNAME set on f: every name in it must exist and be up. */
static void ifname_gloo(rb_t *b, const ec_check_facts_t *f, const char *gloo, const char *have)
{
    char names[16][32];
    int nn = split_names(gloo, names, 16);
    for (int k = 0; k < nn; k++) {
        int exists = 0, up = 0;
        for (int m = 0; m < f->nifaces; m++)
            if (!strcmp(f->ifaces[m].name, names[k])) {
                exists = 1;
                up |= f->ifaces[m].up;
            }
        if (exists && up)
            continue;
        ck_status(b, EC_CHECK_FAIL);
        ck_node(b, f->node_id);
        ec_strbuf_sep(&b->found, "; ");
        ec_strbuf_printf(&b->found,
                         "GLOO_SOCKET_IFNAME=%s on %s: interface %s %s (%s has: %s)", gloo,
                         f->node_id, names[k], exists ? "is down" : "does not exist",
                         f->node_id, have);
        ck_fix(b, "set GLOO_SOCKET_IFNAME to interface names that exist and are up on "
                  "every node (%s has: %s), or unset it", f->node_id, have);
    }
}

/* GLOO_SOCKET_IFNAME unset on f while other nodes run elsewhere: Gloo
 * binds the address the host name resolves to, which must not be
 * loopback. */
static void ifname_gloo_unset(const cx_t *cx, rb_t *b, const ec_check_facts_t *f)
{
    if (!f->hostname_addr[0] || !is_loopback_addr(f->hostname_addr))
        return;
    ck_status(b, cx->any_driver ? EC_CHECK_WARN : EC_CHECK_FAIL);
    ck_node(b, f->node_id);
    ec_strbuf_sep(&b->found, "; ");
    ec_strbuf_printf(&b->found, "GLOO_SOCKET_IFNAME is unset on %s and its host name %s "
                                "resolves to %s (loopback): Gloo would listen there",
                     f->node_id, f->hostname, f->hostname_addr);
    ck_fix(b, "set GLOO_SOCKET_IFNAME to the interface that faces the other nodes on "
              "every node, or make the host name resolve to the machine's address "
              "(/etc/hosts)");
}

/* NCCL_SOCKET_IFNAME unset on a GPU node with remote peers: several
 * candidate interfaces leave the choice to NCCL's own order. */
static void ifname_nccl_unset(rb_t *b, const ec_check_facts_t *f, const char *have)
{
    int k = 0;
    char first[32] = "";
    for (int m = 0; m < f->nifaces; m++) {
        const ec_check_iface_t *x = &f->ifaces[m];
        if (!x->up || !strcmp(x->name, "lo") || is_bridge_if(x->name) ||
            !strncmp(x->addr, "fe80:", 5) || !strcmp(x->name, first))
            continue;
        if (!k)
            snprintf(first, sizeof(first), "%s", x->name);
        k++;
    }
    if (k <= 1)
        return;
    ck_status(b, EC_CHECK_WARN);
    ck_node(b, f->node_id);
    ec_strbuf_sep(&b->found, "; ");
    ec_strbuf_printf(&b->found, "NCCL_SOCKET_IFNAME is unset on %s, which has several "
                                "interfaces (%s): NCCL picks one in its own order",
                     f->node_id, have);
    ck_fix(b, "set NCCL_SOCKET_IFNAME=%s (the interface of the published address) on "
              "%s", iface_of(f), f->node_id);
}

/* What a pass found: unset, or each node's settings. */
static void ifname_passed(const cx_t *cx, rb_t *b, int any_set)
{
    if (!any_set) {
        ec_strbuf_puts(&b->found,
                       "NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME are unset: NCCL and "
                       "Gloo choose the interface themselves");
        return;
    }
    ec_strbuf_puts(&b->found, "the interfaces named exist and are up: ");
    for (int i = 0; i < cx->n && i < EC_CHECK_SHOW_NODES; i++) {
        const char *nv = ec_check_facts_env(cx->f[i], "NCCL_SOCKET_IFNAME");
        const char *gv = ec_check_facts_env(cx->f[i], "GLOO_SOCKET_IFNAME");
        ec_strbuf_printf(&b->found, "%s%s NCCL=%s GLOO=%s", i ? ", " : "",
                         cx->f[i]->node_id, nv && *nv ? nv : "-", gv && *gv ? gv : "-");
    }
}

void rule_socket_ifname(cx_t *cx, rb_t *b)
{
    ck_status(b, EC_CHECK_PASS);
    int any_set = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        int remote = ck_has_remote_peer(cx, f);
        const char *nccl = ec_check_facts_env(f, "NCCL_SOCKET_IFNAME");
        const char *gloo = ec_check_facts_env(f, "GLOO_SOCKET_IFNAME");
        ec_strbuf_t have = {0};
        ck_iface_names(f, &have);
        const char *hv = have.s ? have.s : "";
        if (nccl && *nccl) {
            any_set = 1;
            ifname_nccl(b, f, nccl, remote, hv);
        }
        if (gloo && *gloo) {
            any_set = 1;
            ifname_gloo(b, f, gloo, hv);
        } else if (remote) {
            ifname_gloo_unset(cx, b, f);
        }
        if ((!nccl || !*nccl) && remote && cx->any_driver && f->driver)
            ifname_nccl_unset(b, f, hv);
        ec_strbuf_free(&have);
    }
    if (b->st == EC_CHECK_PASS)
        ifname_passed(cx, b, any_set);
}

void rule_ports(cx_t *cx, rb_t *b)
{
    if (etcd_down(cx)) {
        ec_strbuf_puts(&b->found, "not probed: etcd is unreachable, so the peers are unknown");
        return;
    }
    int tried = 0, failed = 0, missing = 0, lo = 65536, hi = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *a = cx->f[i];
        if (a->phase < EC_CHECK_PHASE_PROBED)
            continue; /* reported by the nodes check */
        for (int j = 0; j < cx->n; j++) {
            const ec_check_facts_t *t = cx->f[j];
            if (t->ports_err[0] || t->nports == 0)
                continue; /* reported by the address check */
            for (int p = 0; p < t->nports; p++) {
                int port = t->ports[p];
                if (port < lo)
                    lo = port;
                if (port > hi)
                    hi = port;
                const ec_check_probe_t *pr = NULL;
                for (int k = 0; k < a->nprobes && !pr; k++)
                    if (a->probes[k].port == port && !strcmp(a->probes[k].nonce, t->nonce))
                        pr = &a->probes[k];
                if (!pr) {
                    missing++;
                    ck_status(b, EC_CHECK_FAIL);
                    ck_node(b, a->node_id);
                    if (missing <= 16)
                        ck_detail(b, "%s -> %s %s:%d  not probed (%s arrived after %s probed)",
                                  a->node_id, t->node_id, t->host, port, t->node_id, a->node_id);
                    ck_fix(b, "start every node's check within a few seconds of the others");
                    continue;
                }
                tried++;
                if (pr->ok)
                    continue;
                failed++;
                ck_status(b, EC_CHECK_FAIL);
                ck_node(b, a->node_id);
                ck_node(b, t->node_id);
                if (failed <= 16)
                    ck_detail(b, "%s -> %s %s:%d  %s", a->node_id, t->node_id, pr->addr, port,
                              pr->why);
            }
        }
    }
    int shown = (failed > 16 ? 16 : failed) + (missing > 16 ? 16 : missing);
    if (failed + missing > shown)
        ck_detail(b, "... and %d more", failed + missing - shown);
    if (!tried && !missing) {
        ec_strbuf_puts(&b->found, "not probed: no node reserved ports and reported probes");
        return;
    }
    if (failed) {
        ec_strbuf_printf(&b->found, "%d of %d TCP connections to published ports failed", failed,
                         tried);
        ck_fix(b, "open TCP ports %d-%d between the nodes (firewall, security group, Kubernetes "
                  "NetworkPolicy), or give every node a range that is open with "
                  "--port_range=LO-HI", lo, hi);
    } else {
        ck_status(b, EC_CHECK_PASS);
        ec_strbuf_printf(&b->found, "%d TCP connection%s made, every node to every node's ports "
                                    "(%d-%d), each answered by the right node",
                         tried, tried == 1 ? "" : "s", lo, hi);
    }
    if (missing)
        ec_strbuf_printf(&b->found, "%s%d not probed", b->found.len ? "; " : "", missing);
}

/* ---- NCCL_SOCKET_IFNAME's selection rules (rules.h) ---------------------- */

int ec_check_nccl_ifname_match(const char *spec, const char *ifname)
{
    if (!spec || !*spec)
        return 1;
    int exclude = 0, exact = 0;
    if (*spec == '^') {
        exclude = 1;
        spec++;
    }
    if (*spec == '=') {
        exact = 1;
        spec++;
    }
    int hit = 0;
    const char *p = spec;
    while (*p && !hit) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0)
            hit = exact ? (strlen(ifname) == len && !strncmp(ifname, p, len))
                        : !strncmp(ifname, p, len);
        if (!e)
            break;
        p = e + 1;
    }
    return exclude ? !hit : hit;
}
