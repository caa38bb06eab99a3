/* Which members of an epoch do not answer (suspects.h). */
#include "suspects.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "probe.h"

uint16_t ec_probe_port_in(const ec_keys_t *k, const ec_kv_list_t *l, const char *id)
{
    char key[EC_KEY_MAX];
    if (!l || ec_key_node(k, id, key, sizeof(key)) < 0)
        return 0;
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(l->kvs[mid].key, key);
        if (c == 0) {
            ec_node_rec_t *rec = NULL;
            uint16_t p = 0;
            if (l->kvs[mid].lease &&
                ec_node_rec_decode(l->kvs[mid].value, l->kvs[mid].value_len, NULL, &rec, NULL) == 0)
                p = rec->probe_port;
            ec_node_rec_free(rec);
            return p;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

void ec_ids_free(char **ids, int n)
{
    for (int i = 0; ids && i < n; i++)
        free(ids[i]);
    free(ids);
}

/* Which members ec_probe_members probes: every member ep holds but self;
 * of a split epoch, only those in the chunks a view for self holds
 * (ec_epoch_view_chunks), the leader's whole epoch too. */
typedef struct {
    int chunks[EC_EPOCH_VIEW_CHUNKS_MAX];
    int n; /* 0: every member */
} window_t;

static window_t window_of(const ec_epoch_t *ep, const char *self, int successors)
{
    window_t w = {.n = 0};
    int me = self ? ec_epoch_find_member(ep, self) : -1;
    if (me >= 0)
        w.n = ec_epoch_view_chunks(ep, me, successors, w.chunks);
    return w;
}

static bool probed(const ec_epoch_t *ep, const window_t *w, int m, const char *self)
{
    const ec_member_t *mb = &ep->members[m];
    if (!mb->node_id || (self && !strcmp(mb->node_id, self)))
        return false; /* a view holds some members only: those are probed */
    for (int i = 0; i < w->n; i++)
        if (w->chunks[i] == m / ep->chunk_members)
            return true;
    return w->n == 0;
}

bool ec_probe_ports_known(const ec_epoch_t *ep, const char *self, int successors)
{
    window_t w = window_of(ep, self, successors);
    for (int m = 0; ep && m < ep->nmembers; m++)
        if (probed(ep, &w, m, self) && !ep->members[m].probe_port)
            return false;
    return true;
}

int ec_probe_members(const ec_epoch_t *ep, const char *self, int successors, ec_port_of_fn port_of,
                     void *arg, const ec_probe_verifier_t *verify, int timeout_ms, char ***silent)
{
    *silent = NULL;
    int nm = ep ? ep->nmembers : 0;
    if (nm <= 0)
        return 0;
    ec_probe_target_t *t = calloc((size_t)nm, sizeof(*t));
    char **ids = calloc((size_t)nm, sizeof(char *));
    if (!t || !ids) {
        free(t);
        free(ids);
        return EC_ENOMEM;
    }
    window_t w = window_of(ep, self, successors);
    int nt = 0;
    for (int m = 0; m < nm; m++) {
        const ec_member_t *mb = &ep->members[m];
        if (!probed(ep, &w, m, self))
            continue;
        if (!(ids[nt] = strdup(mb->node_id))) {
            ec_ids_free(ids, nt);
            free(t);
            return EC_ENOMEM;
        }
        uint16_t port = mb->probe_port ? mb->probe_port
                        : port_of ? port_of(mb->node_id, arg) : 0;
        t[nt] = (ec_probe_target_t){.host = mb->host, .expect_id = ids[nt], .verify = verify,
                                    .port = port};
        nt++;
    }
    ec_probe_many(t, (size_t)nt, timeout_ms);
    int nd = 0;
    for (int i = 0; i < nt; i++) {
        if (!t[i].ok)
            ids[nd++] = ids[i];
        else
            free(ids[i]);
    }
    free(t);
    if (!nd) {
        free(ids);
        return 0;
    }
    *silent = ids;
    return nd;
}
