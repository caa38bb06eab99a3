/* Gathering: what one node finds about itself for `ecoord check` (the facts
 * of facts.h), and the name resolution the probes share.
 *
 * Reads /proc (boot id, pid namespace), the interfaces, the CUDA driver and
 * NVML through dlopen (ecoord neither links nor needs CUDA: a machine without
 * it gets the reason), the libraries CUDA and NCCL would load, /dev/shm, the
 * locked-memory limit, /sys/class/infiniband and the environment: through
 * env for single variables (CUDA_VISIBLE_DEVICES, NCCL_HOSTID,
 * ECOORD_CHECK_ALLREDUCE), and `environ` for the allowlist published for the
 * environment check (command.h lists it).  Never fails: what cannot be read
 * is recorded as unknown, with the reason where the rules show one.
 */
#ifndef EC_CHECK_GATHER_H
#define EC_CHECK_GATHER_H

#include <stddef.h>
#include <sys/socket.h>

#include "facts.h"
#include "knobs.h"

typedef struct ec_check_gather_in {
    const ec_config_t *cfg;   /* node id, --nproc_per_node, --gpus, --host */
    const char *endpoints;    /* etcd's, "" / NULL when none (routes --host) */
    ec_getenv_fn env;         /* the knob table's environment */
    void *env_arg;
} ec_check_gather_in_t;

/* Fill f with the local facts (phase EC_CHECK_PHASE_LOCAL, a fresh nonce).
 * f must be zeroed; clear it after use. */
void ec_check_gather(const ec_check_gather_in_t *in, ec_check_facts_t *f);

/* The allreduce program: $ECOORD_CHECK_ALLREDUCE, else `ecoord-allreduce`
 * beside the ecoord binary.  path is "" when there is none, why says why. */
void ec_check_find_coll_prog(ec_getenv_fn env, void *env_arg, char *path, size_t len, char *why,
                             size_t wlen);

/* Resolve host (numeric or a name) with a deadline (getaddrinfo itself has
 * none).  0 and the first address, or -1 with why filled. */
int ec_check_resolve(const char *host, int port, int socktype, struct sockaddr_storage *ss,
                     socklen_t *sl, char *why, size_t whylen);
/* The numeric form of an address ("" for other families). */
void ec_check_addr_string(const struct sockaddr_storage *ss, char *buf, size_t len);

#endif
