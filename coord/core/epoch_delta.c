/* Epoch deltas (see epoch_delta.h). */
#define _GNU_SOURCE
#include "epoch_delta.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEAD "ecoord-epoch-delta 1 "

uint64_t ec_epoch_digest(const void *buf, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static bool same_member(const ec_member_t *a, const ec_member_t *b, int nproc)
{
    return !strcmp(a->node_id, b->node_id) && !strcmp(a->host, b->host) &&
           a->master_port == b->master_port && a->incarnation == b->incarnation &&
           !memcmp(a->ports, b->ports, (size_t)nproc * sizeof(uint16_t));
}

/* Copy the header (everything but the members) of src into dst. */
static bool copy_header(ec_epoch_t *dst, const ec_epoch_t *src)
{
    dst->number = src->number;
    dst->reason = src->reason;
    dst->leader_rev = src->leader_rev;
    dst->observed_at_ms = src->observed_at_ms;
    dst->decided_at_ms = src->decided_at_ms;
    dst->planner_us = src->planner_us;
    dst->published_at_ms = src->published_at_ms;
    dst->run = src->run;
    dst->np_min = src->np_min;
    dst->np_max = src->np_max;
    return (!src->reason_detail || (dst->reason_detail = strdup(src->reason_detail))) &&
           (!src->job_id || (dst->job_id = strdup(src->job_id))) &&
           (!src->leader_id || (dst->leader_id = strdup(src->leader_id)));
}

static bool copy_member(ec_member_t *b, const ec_member_t *a, int nproc)
{
    b->master_port = a->master_port;
    b->incarnation = a->incarnation;
    memcpy(b->ports, a->ports, (size_t)nproc * sizeof(uint16_t));
    return (b->node_id = strdup(a->node_id)) && (b->host = strdup(a->host));
}

typedef struct seg {
    char kind; /* 'b': base members, 'c': carrier members */
    int from, count;
} seg_t;

static int full_marker(const ec_epoch_t *ep, const void *raw, size_t raw_len, void **buf,
                       size_t *len, ec_error_t *err)
{
    char *s = NULL;
    int n = asprintf(&s, HEAD "%" PRIu64 " 0 %016" PRIx64 " 0\n", ep->number,
                     ec_epoch_digest(raw, raw_len));
    if (n < 0)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    *buf = s;
    *len = (size_t)n;
    return 0;
}

int ec_epoch_delta_encode(const ec_epoch_t *base, const ec_epoch_t *ep, const void *raw,
                          size_t raw_len, void **buf, size_t *len, ec_error_t *err)
{
    *buf = NULL;
    *len = 0;
    if (!base || base->nproc != ep->nproc || base->nmembers < 1)
        return full_marker(ep, raw, raw_len, buf, len, err);
    int M = ep->nmembers, B = base->nmembers;
    /* base node id -> index (open addressing, index + 1; 0 empty) */
    size_t cap = 16;
    while (cap < 2 * (size_t)B)
        cap *= 2;
    int *tab = calloc(cap, sizeof(int));
    seg_t *segs = calloc((size_t)M + 1, sizeof(seg_t));
    int *lits = calloc((size_t)M + 1, sizeof(int));
    char *head = NULL;
    void *cbuf = NULL;
    size_t clen = 0;
    ec_epoch_t *car = NULL;
    int rc = 0;
    if (!tab || !segs || !lits) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
        goto out;
    }
    for (int j = 0; j < B; j++) {
        const char *id = base->members[j].node_id;
        size_t h = (size_t)ec_epoch_digest(id, strlen(id)) & (cap - 1);
        while (tab[h])
            h = (h + 1) & (cap - 1);
        tab[h] = j + 1;
    }
    int nseg = 0, nlit = 0, prev = -2;
    for (int i = 0; i < M; i++) {
        const ec_member_t *m = &ep->members[i];
        int j = -1;
        if (prev >= 0 && prev + 1 < B && same_member(&base->members[prev + 1], m, ep->nproc)) {
            j = prev + 1;
        } else {
            size_t h = (size_t)ec_epoch_digest(m->node_id, strlen(m->node_id)) & (cap - 1);
            for (; tab[h]; h = (h + 1) & (cap - 1))
                if (!strcmp(base->members[tab[h] - 1].node_id, m->node_id)) {
                    if (same_member(&base->members[tab[h] - 1], m, ep->nproc))
                        j = tab[h] - 1;
                    break;
                }
        }
        seg_t *last = nseg ? &segs[nseg - 1] : NULL;
        if (j >= 0) {
            if (last && last->kind == 'b' && last->from + last->count == j)
                last->count++;
            else
                segs[nseg++] = (seg_t){'b', j, 1};
            prev = j;
        } else {
            lits[nlit] = i;
            if (last && last->kind == 'c' && last->from + last->count == nlit)
                last->count++;
            else
                segs[nseg++] = (seg_t){'c', nlit, 1};
            nlit++;
            prev = -2;
        }
    }
    /* The carrier: the new header and the literal members (at least one:
     * an epoch record has members; an unreferenced one when none is new). */
    int nc = nlit ? nlit : 1;
    car = ec_epoch_new(nc, ep->nproc);
    if (!car || !copy_header(car, ep)) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
        goto out;
    }
    for (int k = 0; k < nc; k++)
        if (!copy_member(&car->members[k], &ep->members[nlit ? lits[k] : 0], ep->nproc)) {
            rc = ec_errorf(err, EC_ENOMEM, "out of memory");
            goto out;
        }
    if ((rc = ec_epoch_encode(car, &cbuf, &clen, err)) < 0) {
        if (rc == EC_ETOOLARGE) /* most of a huge epoch changed: read it whole */
            rc = full_marker(ep, raw, raw_len, buf, len, err);
        goto out;
    }
    size_t hcap = 80 + (size_t)nseg * 28, hl;
    head = malloc(hcap);
    if (!head) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
        goto out;
    }
    hl = (size_t)snprintf(head, hcap, HEAD "%" PRIu64 " %" PRIu64 " %016" PRIx64 " %d\n",
                          ep->number, base->number, ec_epoch_digest(raw, raw_len), nseg);
    for (int s = 0; s < nseg; s++)
        hl += (size_t)snprintf(head + hl, hcap - hl, "%c %d %d\n", segs[s].kind, segs[s].from,
                               segs[s].count);
    /* Even a small epoch goes as a delta (its followers, and the tests of
     * a 3-node job, take the same path as a large one's); only one that
     * would be well above the record is not worth it. */
    if (hl + clen > raw_len + 512 || hl + clen > EC_RECORD_MAX_BYTES) {
        rc = full_marker(ep, raw, raw_len, buf, len, err);
        goto out;
    }
    char *v = malloc(hl + clen);
    if (!v) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
        goto out;
    }
    memcpy(v, head, hl);
    memcpy(v + hl, cbuf, clen);
    *buf = v;
    *len = hl + clen;
out:
    free(tab);
    free(segs);
    free(lits);
    free(head);
    free(cbuf);
    ec_epoch_free(car);
    return rc;
}

/* The next line of [*p, end) into line (NUL-terminated); false at the end
 * or for a line too long. */
static bool next_line(const char **p, const char *end, char *line, size_t cap)
{
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    if (!nl || (size_t)(nl - *p) >= cap)
        return false;
    memcpy(line, *p, (size_t)(nl - *p));
    line[nl - *p] = '\0';
    *p = nl + 1;
    return true;
}

int ec_epoch_delta_apply(const ec_epoch_t *base, const void *delta, size_t len, uint64_t *number,
                         void **out, size_t *out_len, ec_error_t *err)
{
    *out = NULL;
    *out_len = 0;
    const char *p = delta, *end = p + len;
    char line[160];
    uint64_t num = 0, base_no = 0, digest = 0;
    int nseg = -1;
    if (len < strlen(HEAD) || memcmp(p, HEAD, strlen(HEAD)) || !next_line(&p, end, line, sizeof(line)) ||
        sscanf(line + strlen(HEAD), "%" SCNu64 " %" SCNu64 " %" SCNx64 " %d", &num, &base_no,
               &digest, &nseg) != 4 ||
        nseg < 0 || nseg > EC_MEMBERS_MAX)
        return ec_errorf(err, EC_ECORRUPT, "epoch delta: bad head (another tool wrote it?)");
    if (number)
        *number = num;
    if (!base_no || !base || base->number != base_no)
        return 0; /* read the epoch key */
    seg_t *segs = calloc((size_t)nseg + 1, sizeof(seg_t));
    if (!segs)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    int rc = 0;
    long M = 0;
    ec_epoch_t *car = NULL, *ep = NULL;
    for (int s = 0; s < nseg; s++) {
        char kind = 0;
        if (!next_line(&p, end, line, sizeof(line)) ||
            sscanf(line, "%c %d %d", &kind, &segs[s].from, &segs[s].count) != 3 ||
            (kind != 'b' && kind != 'c') || segs[s].from < 0 || segs[s].count < 1) {
            rc = ec_errorf(err, EC_ECORRUPT, "epoch delta %" PRIu64 ": bad segment %d", num, s);
            goto out;
        }
        segs[s].kind = kind;
        M += segs[s].count;
    }
    if (M < 1 || M > EC_MEMBERS_MAX) {
        rc = ec_errorf(err, EC_ECORRUPT, "epoch delta %" PRIu64 ": %ld members", num, M);
        goto out;
    }
    if ((rc = ec_epoch_decode(p, (size_t)(end - p), NULL, &car, err)) < 0)
        goto out;
    if (car->nproc != base->nproc || car->number != num)
        goto out; /* rc 0: read the epoch key */
    for (int s = 0; s < nseg; s++) {
        int lim = segs[s].kind == 'b' ? base->nmembers : car->nmembers;
        if (segs[s].from > lim - segs[s].count) {
            rc = ec_errorf(err, EC_ECORRUPT, "epoch delta %" PRIu64 ": segment %d out of range",
                           num, s);
            goto out;
        }
    }
    ep = ec_epoch_new((int)M, car->nproc);
    if (!ep || !copy_header(ep, car)) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory");
        goto out;
    }
    int i = 0;
    for (int s = 0; s < nseg; s++)
        for (int k = 0; k < segs[s].count; k++, i++)
            if (!copy_member(&ep->members[i],
                             segs[s].kind == 'b' ? &base->members[segs[s].from + k]
                                                 : &car->members[segs[s].from + k],
                             ep->nproc)) {
                rc = ec_errorf(err, EC_ENOMEM, "out of memory");
                goto out;
            }
    void *buf = NULL;
    size_t blen = 0;
    if (ec_epoch_encode_whole(ep, &buf, &blen, NULL) < 0)
        goto out; /* not a valid epoch: the epoch key says what it is */
    if (ec_epoch_digest(buf, blen) != digest) {
        free(buf);
        goto out;
    }
    *out = buf;
    *out_len = blen;
    rc = 1;
out:
    free(segs);
    ec_epoch_free(car);
    ec_epoch_free(ep);
    return rc;
}
