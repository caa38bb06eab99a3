/* Inside the records: what the record codecs share (not for callers; they
 * use records.h).  These files are the only ones that touch the generated
 * protobuf-c types:
 *
 *   records.c       the shared machinery below: enum names, the validation
 *                   messages, pack/unpack, hosts and ports
 *   node_record.c   nodes/<node_id>
 *   job_records.c   status, failures/<seq>/..., worker timings, hang verdicts
 *   epoch_record.c  the epoch as one whole record (and the decoder of every
 *                   Epoch message, whole or a view), its endpoint tables
 *   epoch_split.c   an epoch stored in parts: head, chunks, index buckets
 *   epoch_view.c    views of a split epoch (a head plus the chunks read)
 *
 * Each record has one validator that works on the plain C struct and is run
 * both before encoding (a failure is the writer's bug: EC_EINVAL) and after
 * decoding (a failure means the stored value is not ours or is damaged:
 * EC_ECORRUPT).  Conversion from the wire type does the checks that must
 * happen before narrowing (counts, uint32 -> int, port -> uint16), with the
 * same message style.
 */
#ifndef EC_RECORDS_IMPL_H
#define EC_RECORDS_IMPL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>

#include "ecoord.pb-c.h"
#include "keys.h"
#include "records.h"

/* A value is "known" iff it has a name in its map and is not 0:
 * switch (s) { EC_X_MAP(EC__KNOWN_CASE) return s != 0; } return 0; */
#define EC__KNOWN_CASE(n, v, t) case (v):

/* ---- validation context and messages ------------------------------------- */

typedef struct vctx {
    ec_error_t *err;
    int code;          /* EC_EINVAL when encoding, EC_ECORRUPT when decoding */
    const char *what;  /* "epoch record" */
    const char *key;   /* may be NULL */
} vctx_t;

/* A refusal of the record v is about: when decoding, ec_record_vcorrupt's
 * message; when encoding, "<what> not encoded: <detail> (a bug in the
 * writer)".  Returns v->code. */
int ec__rec_vbad(const vctx_t *v, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

__attribute__((format(printf, 2, 3))) static inline int bad(const vctx_t *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = ec__rec_vbad(v, fmt, ap);
    va_end(ap);
    return rc;
}

static inline int enomem(const vctx_t *v)
{
    return ec_errorf(v->err, EC_ENOMEM, "%s: out of memory", v->what);
}

/* Show an untrusted string in a message: bounded, never NULL. */
#define SHOW(s) ((s) ? (s) : "(null)")

static inline char *dup_str(const char *s)
{
    return strdup(s ? s : "");
}

/* The wire side of an optional C string. */
static inline char *pb_str(const char *s)
{
    return (char *)(s ? s : "");
}

static inline int node_id_ok(const char *id)
{
    return id && ec_node_id_valid(id, strnlen(id, EC_NODE_ID_MAX + 1));
}

/* ---- the wire ------------------------------------------------------------ */

/* m packed into a malloc'd *buf of *len bytes; capped: EC_ETOOLARGE above
 * EC_RECORD_MAX_BYTES (what one etcd value may hold).  EC_ENOMEM. */
int ec__rec_pack(const ProtobufCMessage *m, const vctx_t *v, bool capped, void **buf,
                 size_t *len);
/* The message of type d in buf (NULL with *rc set: it does not unpack, or
 * no buffer).  Free with protobuf_c_message_free_unpacked. */
void *ec__rec_unpack(const ProtobufCMessageDescriptor *d, const void *buf, size_t len,
                     const vctx_t *v, int *rc);
/* Copy n wire ports into a malloc'd uint16_t array after range checks. */
int ec__rec_ports_from_pb(const vctx_t *v, const char *whose, const uint32_t *src, size_t n,
                          uint16_t **out);
/* Ports on one host must be distinct: two ranks cannot listen on one port. */
int ec__rec_ports_distinct(const vctx_t *v, const char *whose, const uint16_t *ports, int n,
                           uint16_t master);
/* FNV-1a 64 of buf: the digests a split epoch's head lists. */
uint64_t ec__rec_fnv(const void *buf, size_t len);

/* ---- the epoch codec (epoch_record.c), shared by splits and views -------- */

/* ep against records.h's rules for an epoch (a view: the members it holds). */
int ec__epoch_validate(const ec_epoch_t *ep, const vctx_t *v);

/* What a split epoch's head adds (NULL: a whole record). */
typedef struct head_extra {
    uint32_t chunk_members, index_buckets;
    size_t nchunks;
    uint64_t *chunk_digest, *index_digest;
} head_extra_t;

/* pb member d from src; its ports go into ports (np of them). */
void ec__member_to_pb(const ec_member_t *src, size_t np, uint32_t *ports, Ecoord__Member *d);
/* The Epoch message of ep, packed: every member (hx NULL, !view), member 0
 * only and the split's fields (hx: a head), or the members a view holds and
 * its split fields (view).  capped as ec__rec_pack. */
int ec__epoch_pack(const ec_epoch_t *ep, const head_extra_t *hx, bool view, bool capped,
                   void **buf, size_t *len, const vctx_t *v);
/* One member of a record (whole, split or a chunk), checked: its endpoints,
 * its master port.  Into d, whose ports it replaces. */
int ec__member_from_pb(const Ecoord__Member *pm, uint32_t nproc, const vctx_t *v,
                       ec_member_t *d);
/* The epoch in m, validated, into a new *out.  Whole (!view): every member
 * in m->members, in M_id order.  A view (m a split record: a head, or a view
 * written by ec_epoch_encode_view): the members m holds, M_ids increasing
 * from 0, and the split's digests. */
int ec__epoch_from_pb(const Ecoord__Epoch *m, bool view, const vctx_t *v, ec_epoch_t **out);

/* ---- split epochs (epoch_split.c), shared by views ----------------------- */

/* The head in m: its split fields are consistent (a view: members held,
 * index digests optional). */
int ec__epoch_split_check(const Ecoord__Epoch *m, bool view, const vctx_t *v);
/* Chunk k of epoch number (n members, chunk_members per chunk) from buf,
 * checked against digest (the head's), then its number, index and member
 * count.  Refusals name v, except one that does not unpack: cv.  Free *out
 * with protobuf_c_message_free_unpacked. */
int ec__epoch_chunk_unpack(const void *buf, size_t len, uint64_t digest, uint64_t number, int k,
                           size_t chunk_members, size_t n, const vctx_t *v, const vctx_t *cv,
                           Ecoord__EpochChunk **out);

#endif
