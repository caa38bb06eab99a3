/* Reading an epoch that may be split (records.h, "split epochs"): the one
 * place that turns the value of `epoch` (or epochs/<n>) into the whole
 * epoch, for every reader that needs every member (the coordinator, the
 * worker library, `ecoord status`, `ecoord check`). */
#ifndef EC_EPOCH_FETCH_H
#define EC_EPOCH_FETCH_H

#include <stddef.h>

#include "error.h"
#include "etcd.h"
#include "keys.h"
#include "records.h"

/* The whole epoch behind val (key names it in messages): a whole record
 * decodes as is, without I/O; a split epoch's chunks are read (one range
 * request of epochs/<n>/members/) and assembled.  *out gets the epoch;
 * whole/whole_len (both NULL or both set) get its whole encoding
 * (ec_epoch_encode_whole).  EC_ECORRUPT when a chunk is missing or not
 * the head's (a newer epoch replaced it, or another tool wrote it: a
 * reader that follows the epoch waits for the next value), EC_EINVAL for
 * a value that is not an epoch, etcd's errors. */
int ec_epoch_fetch(ec_etcd_t *c, const ec_keys_t *k, const void *val, size_t len,
                   const char *key, ec_epoch_t **out, void **whole, size_t *whole_len,
                   ec_error_t *err);

/* What a follower reads of an epoch for node self: a whole record as is;
 * of a split epoch a VIEW (records.h): the head, self's index bucket, its
 * own chunk and the chunks on either side (a margin: losses move its M_id,
 * and deltas rebuild its chunk from what it holds) and the chunks of its
 * `successors` next members in M_id order (wrapping: the peers it
 * watches), about 3 x chunk_members members instead of all.
 * A node that is not a member gets the head alone (member 0).  Errors as
 * ec_epoch_fetch. */
int ec_epoch_fetch_view(ec_etcd_t *c, const ec_keys_t *k, const void *val, size_t len,
                        const char *key, const char *self, int successors, ec_epoch_t **out,
                        ec_error_t *err);

/* Make a view whole: read the chunks it lacks (one range request of
 * epochs/<n>/members/), each checked against its digest.  0 (ep whole,
 * present == nmembers), or errors as ec_epoch_fetch (ep unchanged). */
int ec_epoch_complete(ec_etcd_t *c, const ec_keys_t *k, ec_epoch_t *ep, ec_error_t *err);

/* The same from a listing that holds the epoch's chunks (a read of the
 * whole job, as `ecoord status` makes): no I/O.  l's keys sorted (etcd's
 * order). */
int ec_epoch_from_listing(const ec_keys_t *k, const ec_kv_list_t *l, const void *val, size_t len,
                          const char *key, ec_epoch_t **out, ec_error_t *err);

#endif
