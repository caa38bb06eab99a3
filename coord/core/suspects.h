/* Which members of an epoch do not answer their agent's liveness probe:
 * the probe-and-report logic the agent (a local process failed:
 * ec_node_probe_members, coord/node/node.c) and the worker library (a
 * collective failed: ecw_report_failure, worker/ecw.c) share.  The caller
 * writes the report (its own key under epochs/<n>/suspect/<node>). */
#ifndef EC_SUSPECTS_H
#define EC_SUSPECTS_H

#include <stdbool.h>
#include <stdint.h>

#include "etcd.h"
#include "keys.h"
#include "probe.h"
#include "records.h"

/* The probe port of node id in a listing of nodes/ (sorted by key, as etcd
 * returns it); 0 when absent, unleased or unreadable (port 0 never answers:
 * a member whose record is gone counts as silent). */
uint16_t ec_probe_port_in(const ec_keys_t *k, const ec_kv_list_t *nodes, const char *id);

/* Where a member's agent answers probes: its probe port, 0 for none (asked
 * only for a member whose epoch entry does not say: an older leader's). */
typedef uint16_t (*ec_port_of_fn)(const char *node_id, void *arg);

/* Probe the agent of every member of ep but self, at the member's host and
 * probe port in ep (or the port port_of gives, where ep does not say), all
 * at once, for at most timeout_ms; of a split epoch, only those in the
 * chunks a view for self with `successors` holds (ec_epoch_view_chunks:
 * its chunk, the ones on either side, its successors'), whole epoch or
 * view alike: about 3 x chunk_members, not the whole job, which would be
 * N x N connections when a failure takes every node's processes at once.
 * With verify (probe.h), an answer counts only if it passes it.  Returns
 * the number that did not answer, their ids in *silent (a malloc'd array of
 * malloc'd strings, NULL when none; free with ec_ids_free), or EC_ENOMEM. */
int ec_probe_members(const ec_epoch_t *ep, const char *self, int successors, ec_port_of_fn port_of,
                     void *arg, const ec_probe_verifier_t *verify, int timeout_ms, char ***silent);
void ec_ids_free(char **ids, int n);
/* Whether every member ec_probe_members would probe has its probe port in
 * ep (then it needs no port_of: no read of the node records). */
bool ec_probe_ports_known(const ec_epoch_t *ep, const char *self, int successors);

#endif
