/* The per-epoch key/value of ecw.h: epochs/<n>/kv/<name> on the node's
 * lease, for programs whose collectives are their own (the address of the
 * store member rank 0 hosts, say).  A separate namespace from the library's
 * own comm/ keys, so a program's name never meets a claim or a Gloo address. */
#include "ecw_impl.h"

#include <stdio.h>

int ecw_epoch_put(ecw_t *w, const char *name, const void *value, size_t len, ecw_error_t *err)
{
    (void)w, (void)name, (void)value, (void)len;
    if (err) {
        err->code = ECW_EINTERNAL;
        snprintf(err->msg, sizeof(err->msg), "ecw_epoch_put: not implemented yet");
    }
    return ECW_EINTERNAL;
}

int ecw_epoch_get(ecw_t *w, const char *name, void *buf, size_t cap, size_t *len, int timeout_ms,
                  ecw_error_t *err)
{
    (void)w, (void)name, (void)buf, (void)cap, (void)len, (void)timeout_ms;
    if (err) {
        err->code = ECW_EINTERNAL;
        snprintf(err->msg, sizeof(err->msg), "ecw_epoch_get: not implemented yet");
    }
    return ECW_EINTERNAL;
}

int ecw_wait_epoch(ecw_t *w, uint64_t after, int timeout_ms, uint64_t *latest, ecw_error_t *err)
{
    (void)w, (void)after, (void)timeout_ms;
    if (latest)
        *latest = 0;
    if (err) {
        err->code = ECW_EINTERNAL;
        snprintf(err->msg, sizeof(err->msg), "ecw_wait_epoch: not implemented yet");
    }
    return ECW_EINTERNAL;
}

int ecw_confirmed(const ecw_t *w)
{
    (void)w;
    return 1;
}

int ecw_member_index(const ecw_t *w)
{
    (void)w;
    return -1;
}

int ecw_nproc(const ecw_t *w)
{
    (void)w;
    return 0;
}
