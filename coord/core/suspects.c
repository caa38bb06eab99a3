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
 * of a split epoch, those in self's chunk and the chunks on either side
 * (wrapping), what a follower's view holds (epoch_fetch.h). */
typedef struct {
    int cm, nch, me;
} window_t;

static window_t window_of(const ec_epoch_t *ep, const char *self)
{
    window_t w = {.cm = ep->chunk_members};
    w.nch = w.cm > 0 ? (ep->nmembers + w.cm - 1) / w.cm : 1;
    w.me = self && w.cm > 0 && w.nch > 3 ? ec_epoch_find_member(ep, self) : -1;
    return w;
}

static bool probed(const ec_epoch_t *ep, const window_t *w, int m, const char *self)
{
    const ec_member_t *mb = &ep->members[m];
    if (!mb->node_id || (self && !strcmp(mb->node_id, self)))
        return false; /* a view holds some members only: those are probed */
    int away = w->me >= 0 ? (m / w->cm - w->me / w->cm + w->nch) % w->nch : 0;
    return away <= 1 || away >= w->nch - 1;
}

bool ec_probe_ports_known(const ec_epoch_t *ep, const char *self)
{
    window_t w = window_of(ep, self);
    for (int m = 0; ep && m < ep->nmembers; m++)
        if (probed(ep, &w, m, self) && !ep->members[m].probe_port)
            return false;
    return true;
}

int ec_probe_members(const ec_epoch_t *ep, const char *self, ec_port_of_fn port_of, void *arg,
                     const ec_probe_verifier_t *verify, int timeout_ms, char ***silent)
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
    window_t w = window_of(ep, self);
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
