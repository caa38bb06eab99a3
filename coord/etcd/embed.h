/* An etcd server of our own on loopback: the zero-setup default of
 * `ecoord launch` without --elastic_server, the demo, and the test harness.
 * Started from the `etcd` binary with a private temp dir, stopped by PID. */
#ifndef EC_EMBED_H
#define EC_EMBED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"

typedef struct ec_embed ec_embed_t;

typedef struct ec_embed_opts {
    size_t size;              /* sizeof(ec_embed_opts_t) */
    const char *etcd_path;    /* the etcd binary; NULL or "": "etcd" in search_path */
    int client_port;          /* 0: a free loopback port */
    const char *cert_file;    /* TLS: serve https with this certificate... */
    const char *key_file;
    const char *ca_file;      /* ...and require client certificates from this CA */
    int start_timeout_ms;     /* default 15000 */
    const char *const *extra_args; /* more etcd flags, NULL-terminated */
    /* What the environment says, given by the caller (the library reads no
     * environment: the agent's knob table does, coord/cli/knobs.c). */
    const char *search_path;  /* $PATH: where to look for etcd; /usr/bin and
                                 /usr/local/bin are searched after it */
    const char *tmpdir;       /* $TMPDIR: where the data dir goes; NULL: /tmp */
    int keep_dir;             /* leave the data dir when stopped (debugging) */
} ec_embed_opts_t;

#define EC_EMBED_OPTS_INIT {.size = sizeof(ec_embed_opts_t)}

/* Start etcd and wait until it serves clients.  Its process dies with ours
 * (PR_SET_PDEATHSIG).  EC_ENOTFOUND when no etcd binary is installed. */
ec_embed_t *ec_embed_start(const ec_embed_opts_t *opts, ec_error_t *err);
/* "127.0.0.1:PORT" (or https://127.0.0.1:PORT with TLS). */
const char *ec_embed_endpoint(const ec_embed_t *e);
int ec_embed_port(const ec_embed_t *e);
pid_t ec_embed_pid(const ec_embed_t *e);
const char *ec_embed_dir(const ec_embed_t *e);
/* Send sig and reap; the data dir stays, for ec_embed_restart. */
void ec_embed_kill(ec_embed_t *e, int sig);
/* Start again on the same port and data dir, and wait until it serves. */
int ec_embed_restart(ec_embed_t *e, ec_error_t *err);
/* Stop (SIGTERM, SIGKILL after 5 s), reap, delete the temp dir.  Accepts NULL. */
void ec_embed_stop(ec_embed_t *e);
/* Where the etcd binary is: hint when it is executable, else "etcd" in
 * search_path (a $PATH value; may be NULL), /usr/bin or /usr/local/bin; NULL
 * if none is installed. */
const char *ec_embed_find_etcd(const char *hint, const char *search_path);

#endif
