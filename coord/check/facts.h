/* `ecoord check`'s facts: what one node found about itself.
 *
 * Every node gathers an ec_check_facts_t (gather.c does the I/O), publishes it
 * encoded under <job>/check/nodes/<node_id>, and rewrites it at each phase.
 * The leader decodes everyone's facts and compares them (rules.h).
 *
 * Encoding (codec.c): protobuf, message ecoord.CheckFacts of
 * proto/ecoord.proto, like every other record ecoord stores.  Fields a newer
 * ecoord adds are skipped by an older one; the version field says when the
 * meaning of the facts changed, and a different version is refused with a
 * message telling the user to run one ecoord version on every node.  The
 * decoder validates every field and every count: garbage in etcd becomes
 * EC_ECORRUPT with a message naming the key and the field, never a crash.
 */
#ifndef EC_CHECK_FACTS_H
#define EC_CHECK_FACTS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "keys.h"

/* 1: the text encoding of earlier ecoords; 2: protobuf (CheckFacts). */
#define EC_CHECK_FACTS_VERSION 2

/* Caps the decoder applies, so a corrupt value cannot ask for absurd
 * allocations (values this large would not fit etcd's request limit). */
#define EC_CHECK_MAX_GPUS 1024    /* local ranks, --gpus entries, GPU records */
#define EC_CHECK_MAX_PORTS 1025   /* nproc + 1 */
#define EC_CHECK_MAX_IFACES 256
#define EC_CHECK_MAX_P2P 8192
#define EC_CHECK_MAX_ENV 1024
#define EC_CHECK_MAX_PROBES 262144

/* Phases a node's facts go through; the record is rewritten at each. */
enum {
    EC_CHECK_PHASE_LOCAL = 1,  /* local facts only                        */
    EC_CHECK_PHASE_PROBED = 2, /* + TCP probes of every peer's ports       */
    EC_CHECK_PHASE_DONE = 3,   /* + the collective's result (or its skip)  */
};

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

/* An environment variable from the published allowlist (see gather.c). */
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

/* Encode into a malloc'd buffer of *len bytes (codec.c).  0 or EC_ENOMEM. */
int ec_check_facts_encode(const ec_check_facts_t *f, void **buf, size_t *len, ec_error_t *err);
/* Decode buf[0..len) into *f (clear it after use; on error it is left
 * cleared).  key (may be NULL) names the value in messages.  0, or
 * EC_ECORRUPT with err saying what is wrong and where. */
int ec_check_facts_decode(const void *buf, size_t len, const char *key, ec_check_facts_t *f,
                          ec_error_t *err);

#endif

