/* Epoch deltas: what a follower's coordinator reads instead of the whole
 * epoch record (issue 16).
 *
 * The leader writes the epoch record at `epoch` and, in the same fenced
 * transaction, a delta at `epochd`: the new epoch's header and the members
 * that are new or changed (a "carrier": itself a valid epoch record), and
 * how to build the member table from the previous epoch's (the base) and
 * the carrier: runs of consecutive base members (a loss compacts the M_ids
 * after it: one more run, not a rewrite) and runs of carrier members.  A
 * follower that holds the base rebuilds the record, encodes it and checks
 * its digest against the one the delta carries; one that does not (a
 * joiner, a missed epoch, a digest that does not match) reads the epoch key
 * at the delta's revision instead.  So a change costs etcd about
 * N x (header + changed members) bytes for N followers, not N x record.
 *
 * Wire format: the EpochDelta message (proto/ecoord.proto): the number,
 * the base, runs of base members and of carrier members in M_id order,
 * the carrier (an encoded Epoch record), the digest (FNV-1a 64 of the
 * whole epoch's encoding, ec_epoch_encode_whole, also for a split epoch
 * whose `epoch` key holds only its head) and, for a split epoch, the chunk
 * size, every chunk's digest and member 0's.  base 0 and no runs: "read
 * the epoch key" (the first epoch, or a delta that would be larger than
 * the record).
 *
 * Pure functions, no I/O; coord/core/test/test_epoch_delta.c. */
#ifndef EC_EPOCH_DELTA_H
#define EC_EPOCH_DELTA_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "records.h"

/* FNV-1a 64 of len bytes. */
uint64_t ec_epoch_digest(const void *buf, size_t len);

/* The delta from base (may be NULL: no base) to ep, whose whole encoding
 * (ec_epoch_encode_whole) is raw/raw_len.  *buf (malloc'd, *len bytes) is a full marker when there is
 * no base or the delta would be more than 512 bytes above the record (a
 * small epoch still goes as a delta: the same path as a large one's).  Returns
 * 0, or a negative EC_* code. */
int ec_epoch_delta_encode(const ec_epoch_t *base, const ec_epoch_t *ep, const void *raw,
                          size_t raw_len, void **buf, size_t *len, ec_error_t *err);

/* The number and base of a delta (base 0: a marker that says "read the
 * epoch key"); 0 or EC_ECORRUPT. */
int ec_epoch_delta_peek(const void *delta, size_t len, uint64_t *number, uint64_t *base);

/* Rebuild the record a delta describes from base (NULL: none).  Returns 1
 * with *out (malloc'd encoded record, *out_len bytes, digest checked); 0
 * when the epoch key must be read instead (a full marker, no or another
 * base, a digest that does not match); a negative EC_* code for a value
 * that is not a delta (err says why).  *number gets the delta's epoch
 * number when the head parses. */
int ec_epoch_delta_apply(const ec_epoch_t *base, const void *delta, size_t len, uint64_t *number,
                         void **out, size_t *out_len, ec_error_t *err);

/* The same for a VIEW of a split epoch (records.h: a follower that holds
 * its own window of members).  Needs a delta of a split epoch (with
 * the chunk size and every chunk's digest).  Returns 1
 * with *out, a view holding the members base held (moved to their new
 * M_ids) and the carrier's, when member 0 and every chunk it holds whole
 * match the leader's digests and it holds self's own chunk whole (self
 * NULL or not a member: member 0 only is checked); 0 when the epoch must
 * be read (another base, a chunk of its own it does not hold, a digest
 * that does not match, a delta of an epoch that is not split); a negative
 * EC_* code for a value that is not a delta.  A whole base:
 * ec_epoch_delta_apply. */
int ec_epoch_delta_apply_view(const ec_epoch_t *base, const void *delta, size_t len,
                              const char *self, uint64_t *number, ec_epoch_t **out,
                              ec_error_t *err);

#endif
