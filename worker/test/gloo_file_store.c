/* File-backed rendezvous store for the Gloo shim's tests. */
#include "gloo_file_store.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Keys contain '/': escape everything but [A-Za-z0-9._-] as %XX. */
static int key_path(const gloo_file_store_t *fs, const char *key, char *out, size_t n)
{
    size_t len = (size_t)snprintf(out, n, "%s/k_", fs->dir);
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        if (len + 4 >= n)
            return -1;
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '.' || *p == '_' || *p == '-')
            out[len++] = (char)*p;
        else
            len += (size_t)snprintf(out + len, n - len, "%%%02X", *p);
    }
    out[len] = '\0';
    return 0;
}

static int fs_set(void *arg, const char *key, const void *val, size_t len, ec_error_t *err)
{
    gloo_file_store_t *fs = arg;
    char path[PATH_MAX], tmp[PATH_MAX + 64];
    static unsigned seq;
    if (key_path(fs, key, path, sizeof(path)) != 0)
        return ec_errorf(err, EC_EINVAL, "file store: key '%s' too long", key);
    snprintf(tmp, sizeof(tmp), "%s/.tmp.%d.%u", fs->dir, (int)getpid(), seq++);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return ec_errorf(err, EC_ESYS, "file store: create %s: %s", tmp, strerror(errno));
    const char *p = val;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, p + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return ec_errorf(err, EC_ESYS, "file store: write %s: %s", tmp, strerror(e));
        }
        off += (size_t)w;
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ec_errorf(err, EC_ESYS, "file store: rename to %s: %s", path, strerror(e));
    }
    if (fs->stop_after_set)
        raise(SIGSTOP);
    return 0;
}

/* 1 and the value if the file exists, 0 if not, negative on error. */
static int try_read(const char *path, void **val, size_t *len, ec_error_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        return ec_errorf(err, EC_ESYS, "file store: open %s: %s", path, strerror(errno));
    }
    size_t cap = 256, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            close(fd);
            return ec_errorf(err, EC_ENOMEM, "file store: out of memory");
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return ec_errorf(err, EC_ESYS, "file store: read %s: %s", path, strerror(e));
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    close(fd);
    *val = buf;
    *len = n;
    return 1;
}

static int fs_get(void *arg, const char *key, void **val, size_t *len, int timeout_ms,
                  ec_error_t *err)
{
    gloo_file_store_t *fs = arg;
    char path[PATH_MAX];
    if (key_path(fs, key, path, sizeof(path)) != 0)
        return ec_errorf(err, EC_EINVAL, "file store: key '%s' too long", key);
    /* Watch before the first look, so a rename in between is not missed. */
    int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (ifd < 0)
        return ec_errorf(err, EC_ESYS, "file store: inotify_init1: %s", strerror(errno));
    if (inotify_add_watch(ifd, fs->dir, IN_MOVED_TO | IN_CREATE) < 0) {
        int e = errno;
        close(ifd);
        return ec_errorf(err, EC_ESYS, "file store: watch %s: %s", fs->dir, strerror(e));
    }
    long deadline = now_ms() + timeout_ms;
    int rc;
    for (;;) {
        rc = try_read(path, val, len, err);
        if (rc != 0)
            break;
        long left = deadline - now_ms();
        if (left <= 0) {
            rc = ec_errorf(err, EC_ETIMEDOUT, "file store: key '%s' missing after %d ms", key,
                           timeout_ms);
            break;
        }
        struct pollfd pfd = {.fd = ifd, .events = POLLIN};
        if (poll(&pfd, 1, (int)left) > 0) {
            char ev[4096];
            while (read(ifd, ev, sizeof(ev)) > 0) {
            }
        }
    }
    close(ifd);
    return rc < 0 ? rc : 0;
}

int gloo_file_store_init(gloo_file_store_t *fs, const char *dir, ecw_gloo_store_t *vt)
{
    memset(fs, 0, sizeof(*fs));
    if (strlen(dir) >= sizeof(fs->dir) - 64)
        return EC_EINVAL;
    strcpy(fs->dir, dir);
    vt->arg = fs;
    vt->set = fs_set;
    vt->get = fs_get;
    return 0;
}
