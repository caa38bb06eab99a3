/* `ecoord check`'s facts and verdicts: the pure half of the check.
 *
 * Every node gathers an ec_check_facts_t about itself (coord/check/command.c does the
 * I/O) and publishes it, encoded, under <job>/check/nodes/<node_id>.  The
 * leader decodes everyone's facts and calls ec_check_compare(), a pure
 * function of the facts and the expected node count, which returns one
 * verdict per check (PASS, WARN, FAIL or SKIP), each with what was found, the
 * fix and the nodes it concerns.  The report is encoded, published under
 * <job>/check/report, and every node decodes and renders the same report as
 * text or JSON.  Nothing here reads a clock, a file, the environment or the
 * network: the unit tests build facts by hand and cover every verdict.
 *
 * Encoding (facts and report): versioned text, one record per line, tokens
 * separated by single spaces, every token percent-escaped (bytes <= 0x20,
 * '%' and bytes >= 0x7f become %XX; the empty string is "%-").  The first
 * line names the kind and version ("ecoord-check-facts 1"), the last is
 * "end", so a truncated value is refused.  Unknown record names are skipped
 * (a newer ecoord may add facts); a different version is refused with a
 * message telling the user to run one ecoord version on every node.
 * Decoders validate every field and never trust lengths: garbage in etcd
 * becomes EC_ECORRUPT with a message, never a crash.
 */
#ifndef EC_CHECK_RULES_H
#define EC_CHECK_RULES_H

#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "keys.h"

#define EC_CHECK_FACTS_VERSION 1
#define EC_CHECK_REPORT_VERSION 1

/* Phases a node's facts go through; the record is rewritten at each. */
enum {
    EC_CHECK_PHASE_LOCAL = 1,  /* local facts only                        */
    EC_CHECK_PHASE_PROBED = 2, /* + TCP probes of every peer's ports       */
    EC_CHECK_PHASE_DONE = 3,   /* + the collective's result (or its skip)  */
};

typedef enum {
    EC_CHECK_PASS = 0,
    EC_CHECK_WARN,
    EC_CHECK_FAIL,
    EC_CHECK_SKIP,
} ec_check_status_t;

/* The collective test's outcome on one node. */
typedef enum {
    EC_CHECK_COLL_NONE = 0, /* not run yet */
    EC_CHECK_COLL_SKIP,     /* not run, coll_why says why */
    EC_CHECK_COLL_OK,
    EC_CHECK_COLL_FAIL,     /* coll_why says what went wrong */
} ec_check_coll_t;

#define EC_CHECK_NONCE_LEN 16

/* One address of one interface (an interface with two addresses has two). */
typedef struct ec_check_iface {
    char name[32];
    char addr[64];
    int up;
} ec_check_iface_t;

/* The GPU local rank `rank` will use.  ordinal: the CUDA device ordinal the
 * process selects (after CUDA_VISIBLE_DEVICES); physical: the id the user
 * gave (--gpus, else the CUDA_VISIBLE_DEVICES entry, else the ordinal), -1
 * when it is a UUID.  With a driver: bus_id (the machine-wide identity, ""
 * when unknown), the GPU's name, the compute processes of others running
 * on it now and the memory they hold. */
typedef struct ec_check_gpu {
    int rank;
    int ordinal;
    int physical;
    char bus_id[32];
    char name[96];
    int nprocs;
    char procs[160];        /* "pid 123 (4096 MiB), pid 456 (...)" */
    long long mem_used_mib, mem_total_mib;
} ec_check_gpu_t;

/* Peer-to-peer access between the GPUs of local ranks a and b (driver). */
typedef struct ec_check_p2p {
    int a, b;
    int ok;
    char status[48];        /* NVML's reason when not ok */
} ec_check_p2p_t;

/* An environment variable from the published allowlist (see check/command.c). */
typedef struct ec_check_env {
    char *name;
    char *value;
} ec_check_env_t;

/* One TCP connection attempt from this node to a peer's published port. */
typedef struct ec_check_probe {
    char peer[EC_NODE_ID_MAX + 1];
    char nonce[EC_CHECK_NONCE_LEN + 1]; /* the peer's, from its facts */
    char addr[64];
    int port;
    int ok;                 /* connected, and the right process answered */
    char why[160];          /* when not ok: "connection refused", "timed out after 2000 ms" */
    int64_t rtt_us;         /* hello round trip, when ok */
    int64_t offset_us;      /* peer's wall clock minus ours, +- rtt_us/2, when ok */
} ec_check_probe_t;

typedef struct ec_check_facts {
    int version;            /* EC_CHECK_FACTS_VERSION */
    int phase;              /* EC_CHECK_PHASE_* */

    /* identity */
    char node_id[EC_NODE_ID_MAX + 1];
    char nonce[EC_CHECK_NONCE_LEN + 1]; /* random per run: tells processes apart */
    char hostname[256];
    char boot_id[64];       /* the machine: /proc/sys/kernel/random/boot_id */
    char host_id[128];      /* NCCL_HOSTID when set: NCCL's own machine identity */
    int pid;
    char pidns[40];         /* "pid:[4026531836]": where pid means something */
    int64_t wall_ms;        /* this node's clock when the facts were gathered */

    /* etcd, as this node sees it */
    char etcd[256];         /* endpoints */
    char etcd_version[32];
    int64_t etcd_rtt_us;    /* median of a few reads */
    int64_t etcd_rtt_max_us;

    /* network */
    char host[64];          /* the address this node publishes */
    int host_given;         /* from --host (else routed toward etcd) */
    char ifname[32];        /* its interface, "" if no interface holds it */
    int nports;
    int *ports;             /* nproc + 1 reserved ports (the last: the store's) */
    char ports_err[256];    /* why they could not be reserved, "" when reserved */
    char hostname_addr[64]; /* what the host name resolves to: Gloo binds it when
                             * GLOO_SOCKET_IFNAME is unset ("" unresolvable) */
    int nifaces;
    ec_check_iface_t *ifaces;

    /* devices */
    int nproc;              /* --nproc_per_node */
    int ngpus_flag;
    int *gpus_flag;         /* --gpus */
    int cvd_set;            /* CUDA_VISIBLE_DEVICES is set (possibly empty) */
    char cvd[256];
    int cvd_count;          /* devices it shows, counted as CUDA does */
    int driver;             /* 1: an NVIDIA driver answered */
    char driver_why[192];   /* when 0: why not */
    char driver_version[32];
    int cuda_driver_version;/* 12040 for CUDA 12.4; 0 unknown */
    int visible;            /* devices CUDA sees (cuDeviceGetCount), -1 unknown */
    int ngpus;
    ec_check_gpu_t *gpus;   /* one per local rank (empty without devices) */
    int np2p;
    ec_check_p2p_t *p2p;
    int cudart_version;     /* 12040; 0 not found */
    char cudart_path[256];
    int nccl_version;       /* 22105 for 2.21.5 (normalized); 0 not found */
    char nccl_path[256];

    /* memory */
    char shm_path[64];
    long long shm_bytes, shm_free; /* -1: could not be read */
    char shm_err[160];
    long long memlock_cur;  /* bytes, -1 unlimited */
    int nib;                /* RDMA devices (/sys/class/infiniband) */

    /* environment: the allowlisted variables, sorted by name */
    int nenv;
    ec_check_env_t *env;

    /* phase 2: probes of every node's ports (this node's own included) */
    int nprobes;
    ec_check_probe_t *probes;

    /* collective */
    int coll_prog;          /* phase 1: the allreduce program exists here */
    int coll;               /* ec_check_coll_t */
    char coll_why[256];
    char coll_backend[16];
    int coll_ranks;
    long long coll_bytes;
    double coll_seconds;
    double coll_busbw_gbps;

    /* Not encoded: set by the leader for a node whose key vanished (lease
     * expired or revoked) before it finished. */
    int gone;
} ec_check_facts_t;

/* Free what the struct points to (not the struct); accepts NULL. */
void ec_check_facts_clear(ec_check_facts_t *f);
/* Appenders for the lists (copying the strings).  0 or EC_ENOMEM. */
int ec_check_facts_add_env(ec_check_facts_t *f, const char *name, const char *value);
int ec_check_facts_add_iface(ec_check_facts_t *f, const char *name, const char *addr, int up);
int ec_check_facts_add_probe(ec_check_facts_t *f, const ec_check_probe_t *p);
int ec_check_facts_add_gpu(ec_check_facts_t *f, const ec_check_gpu_t *g);
int ec_check_facts_add_p2p(ec_check_facts_t *f, const ec_check_p2p_t *p);
/* The value of an environment variable in f's list, or NULL. */
const char *ec_check_facts_env(const ec_check_facts_t *f, const char *name);

/* Encode into a malloc'd NUL-terminated buffer (*len excludes the NUL).
 * 0, or EC_ENOMEM. */
int ec_check_facts_encode(const ec_check_facts_t *f, char **buf, size_t *len, ec_error_t *err);
/* Decode buf[0..len) into *f (cleared first; clear it after use even on
 * error).  0, or EC_ECORRUPT with err saying what is wrong. */
int ec_check_facts_decode(const void *buf, size_t len, ec_check_facts_t *f, ec_error_t *err);

/* ---- comparison ------------------------------------------------------- */

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
    /* No etcd shared with peers: an embedded one, or none reachable.
     * etcd_error: why etcd was unreachable ("" / NULL: it was reachable). */
    int embedded;
    const char *etcd_error;
    ec_check_limits_t limits;
} ec_check_input_t;

typedef struct ec_check_result {
    char name[24];
    ec_check_status_t status;
    char *found;                 /* one line */
    char *fix;                   /* "" for PASS and SKIP */
    int ndetails;
    char **details;              /* lines shown under it (side-by-side listings) */
    int nnodes;
    char **nodes;                /* the nodes it concerns */
} ec_check_result_t;

typedef struct ec_check_report {
    int version;                 /* EC_CHECK_REPORT_VERSION */
    char job_id[EC_JOB_ID_MAX + 1];
    char leader[EC_NODE_ID_MAX + 1];
    char leader_nonce[EC_CHECK_NONCE_LEN + 1]; /* tells this run's report from a stale one */
    int np_min, np_max;
    int nnodes;
    char **nodes;                /* the node ids that took part, sorted */
    int nresults;
    ec_check_result_t *results;
} ec_check_report_t;

/* The check names, in report order, NULL-terminated. */
extern const char *const ec_check_names[];

/* Compare the facts: one result per name in ec_check_names.  Pure.
 * *rep is filled (clear it after use).  0 or EC_ENOMEM. */
int ec_check_compare(const ec_check_input_t *in, ec_check_report_t *rep, ec_error_t *err);
void ec_check_report_clear(ec_check_report_t *rep);
/* The result named name, or NULL. */
const ec_check_result_t *ec_check_report_find(const ec_check_report_t *rep, const char *name);
/* Count results by status: counts[EC_CHECK_PASS..EC_CHECK_SKIP]. */
void ec_check_report_counts(const ec_check_report_t *rep, int counts[4]);
const char *ec_check_status_name(ec_check_status_t s); /* "PASS" ... */

int ec_check_report_encode(const ec_check_report_t *rep, char **buf, size_t *len, ec_error_t *err);
int ec_check_report_decode(const void *buf, size_t len, ec_check_report_t *rep, ec_error_t *err);

/* Human form: a header, one line per check
 *   "PASS  name              found"
 * then "      fix: ..." for WARN and FAIL, detail lines indented under it, and
 * "N passed, N warnings, N failed, N skipped".  JSON form: one object,
 *   {"job_id", "leader", "np": {"min","max"}, "nodes": [...],
 *    "checks": [{"name","status","found","fix","details":[...],"nodes":[...]}],
 *    "summary": {"passed","warnings","failed","skipped"}, "ok": bool}
 * Field names are stable; fields are added, never renamed. */
void ec_check_report_print(const ec_check_report_t *rep, FILE *out);
void ec_check_report_print_json(const ec_check_report_t *rep, FILE *out);

/* ---- small pure helpers, exported for check/command.c and the tests ----------- */

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
