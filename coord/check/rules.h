/* `ecoord check`'s verdicts: the pure half of the check.
 *
 * Every node gathers its facts (facts.h; gather.c does the I/O) and publishes
 * them.  The leader decodes everyone's facts and calls ec_check_compare(), a
 * pure function of the facts and what the leader knows besides, which
 * returns one verdict per check (PASS, WARN, FAIL or SKIP), each with what
 * was found, the fix and the nodes it concerns (report.h).  Nothing here
 * reads a clock, a file, the environment or the network: the unit tests
 * build facts by hand and cover every verdict.
 *
 * Where things are:
 *   facts.h, facts.c       the facts record (clear, add, look up)
 *   report.h, report.c     the report record, its text and JSON forms
 *   codec.c                both records <-> protobuf (proto/ecoord.proto)
 *   rules.c                ec_check_compare and the table of rules
 *   rules_impl.h           what the rules share: building a finding
 *   rules_nodes.c          nodes, node-ids, host-names
 *   rules_etcd.c           etcd, clock
 *   rules_network.c        address, socket-ifname, ports
 *   rules_devices.c        gpu-count, gpu-devices, gpu-busy, gpu-p2p, cuda, nccl
 *   rules_memory.c         shm, memlock
 *   rules_env.c            environment
 *   rules_collective.c     allreduce
 *   gather.c               the I/O that fills this node's facts
 *   ports.c                the listener and the probes of every node's ports
 *   command.c              the run, step by step (command.h)
 *   command_*.c            its parts: the view of check/, publishing, the
 *                          allreduce, the report (command_impl.h)
 */
#ifndef EC_CHECK_RULES_H
#define EC_CHECK_RULES_H

#include <stdint.h>

#include "error.h"
#include "facts.h"
#include "report.h"

/* Thresholds; EC_CHECK_LIMITS_INIT gives the documented defaults. */
typedef struct ec_check_limits {
    long long shm_fail_bytes;   /* below: FAIL (Docker's 64 MB default is) */
    long long shm_warn_bytes;   /* below: WARN */
    long long memlock_fail_bytes; /* with RDMA devices, below: FAIL */
    int nccl_min_version;       /* normalized, 20800 = 2.8.0 */
    int64_t etcd_warn_us;       /* median round trip above: WARN */
    int64_t clock_warn_us;      /* skew above: WARN */
    int64_t clock_fail_us;      /* skew above: FAIL */
} ec_check_limits_t;

#define EC_CHECK_LIMITS_INIT                                                         \
    {.shm_fail_bytes = 256LL << 20, .shm_warn_bytes = 1LL << 30,                     \
     .memlock_fail_bytes = 64LL << 20, .nccl_min_version = 20800,                    \
     .etcd_warn_us = 100000, .clock_warn_us = 500000, .clock_fail_us = 30000000}

/* Facts published under check/nodes/ that do not decode (another ecoord
 * version, or not written by ecoord). */
typedef struct ec_check_unreadable {
    const char *name;            /* the key's last part: the node id, normally */
    const char *why;             /* the decoder's message */
} ec_check_unreadable_t;

/* What the leader knows besides the facts. */
typedef struct ec_check_input {
    const char *job_id;
    int np_min, np_max;          /* --np */
    int64_t waited_ms;           /* how long arrivals were awaited */
    const ec_check_facts_t *facts; /* every node seen, in any order */
    int nfacts;
    int final_phase;             /* the phase a node must reach to be complete */
    const char *leader;          /* node id that wrote the report */
    const char *leader_nonce;    /* and its nonce */
    /* Node ids the training job knows (its current epoch's members and its
     * registered nodes), so a node that never arrives is named; may be empty. */
    const char *const *known;
    int nknown;
    /* Facts that could not be read: the nodes check names them. */
    const ec_check_unreadable_t *unreadable;
    int nunreadable;
    /* No etcd shared with peers: an embedded one, or none reachable.
     * etcd_error: why etcd was unreachable ("" / NULL: it was reachable). */
    int embedded;
    const char *etcd_error;
    ec_check_limits_t limits;
} ec_check_input_t;

/* The check names, in report order, NULL-terminated. */
extern const char *const ec_check_names[];

/* Compare the facts: one result per name in ec_check_names.  Pure.
 * *rep is filled (clear it after use).  0 or EC_ENOMEM. */
int ec_check_compare(const ec_check_input_t *in, ec_check_report_t *rep, ec_error_t *err);

/* ---- small pure helpers, exported for gather.c and the tests ---------- */

/* How many devices CUDA sees in a CUDA_VISIBLE_DEVICES value: entries are
 * read up to the first invalid one ("" and "-1" hide every device); ids gets
 * the numeric entries (-1 for UUIDs), at most max. */
int ec_check_cvd_parse(const char *cvd, int *ids, int max);
/* Whether NCCL_SOCKET_IFNAME's value selects interface name (NCCL's rules:
 * comma list of prefixes, '^' excludes, '=' asks for exact names). */
int ec_check_nccl_ifname_match(const char *spec, const char *ifname);
/* NCCL's version code (ncclGetVersion) normalized to major*10000 + minor*100
 * + patch: codes below 2.9 used major*1000 + minor*100 + patch. */
int ec_check_nccl_version_norm(int code);

#endif
