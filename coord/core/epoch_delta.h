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
 * Wire format (text head, then the carrier's bytes):
 *   "ecoord-epoch-delta 1 <number> <base> <digest> <nseg>\n"
 *   (a split epoch's: "ecoord-epoch-delta 2 <number> <base> <digest> <nseg>
 *   <chunk members> <nchunks> <member 0's digest>\n", the segments, then
 *   "d" and each chunk's digest, 16 hex digits after a space, and "\n")
 *   nseg lines "b <from> <count>\n" (base members) or "c <from> <count>\n"
 *   (carrier members), then the carrier (an encoded epoch record).
 * base 0 with nseg 0 and no carrier: "read the epoch key" (first epoch, or
 * a delta that would be larger than the record).  digest: 16 hex digits of FNV-1a 64
 * over the whole encoded record (ec_epoch_encode_whole: also for a split
 * epoch, whose `epoch` key holds only its head).
 *
 * Pure functions, no I/O; coord/test/test_epoch_delta.c. */
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

/* Rebuild the record a delta describes from base (NULL: none).  Returns 1
 * with *out (malloc'd encoded record, *out_len bytes, digest checked); 0
 * when the epoch key must be read instead (a full marker, no or another
 * base, a digest that does not match); a negative EC_* code for a value
 * that is not a delta (err says why).  *number gets the delta's epoch
 * number when the head parses. */
int ec_epoch_delta_apply(const ec_epoch_t *base, const void *delta, size_t len, uint64_t *number,
                         void **out, size_t *out_len, ec_error_t *err);

/* The same for a VIEW of a split epoch (records.h: a follower that holds
 * its own window of members).  Needs a delta of a split epoch (format 2:
 * the chunk size and every chunk's digest follow the head).  Returns 1
 * with *out, a view holding the members base held (moved to their new
 * M_ids) and the carrier's, when member 0 and every chunk it holds whole
 * match the leader's digests and it holds self's own chunk whole (self
 * NULL or not a member: member 0 only is checked); 0 when the epoch must
 * be read (another base, a chunk of its own it does not hold, a digest
 * that does not match); a negative EC_* code for a value that is not a
 * delta.  A whole base: ec_epoch_delta_apply. */
int ec_epoch_delta_apply_view(const ec_epoch_t *base, const void *delta, size_t len,
                              const char *self, uint64_t *number, ec_epoch_t **out,
                              ec_error_t *err);

#endif
