/* A rendezvous store for tests: one file per key in a directory, so that
 * forked processes can rendezvous without etcd.  set writes a temporary file
 * and renames it into place (readers never see half a value); get waits for
 * the key with inotify, against a deadline. */
#ifndef ECW_TEST_GLOO_FILE_STORE_H
#define ECW_TEST_GLOO_FILE_STORE_H

#include <limits.h>

#include "gloo_shim.h"

typedef struct gloo_file_store {
    char dir[PATH_MAX];
    /* Test hook: after publishing a key, stop this process with SIGSTOP
     * (a member that published its address and then went silent). */
    int stop_after_set;
} gloo_file_store_t;

/* Fill fs for dir (which must exist) and the vtable that uses it.
 * Returns 0, or EC_EINVAL if dir is too long. */
int gloo_file_store_init(gloo_file_store_t *fs, const char *dir, ecw_gloo_store_t *vt);

#endif
