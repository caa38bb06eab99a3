/* ecoord error codes and the caller-owned error struct.
 *
 * Every public ec_ function that can fail returns a negative code from
 * EC_ERRNO_MAP (or NULL for constructors) and, when the caller passed an
 * ec_error_t, fills it with a message that says what happened, to what, and
 * what to do about it.  Library code never prints or exits.
 */
#ifndef EC_ERROR_H
#define EC_ERROR_H

#include <stdarg.h>

#define EC_ERRNO_MAP(X)                                                      \
    X(EINVAL, -1, "invalid argument")                                        \
    X(ENOMEM, -2, "out of memory")                                           \
    X(EUNAVAILABLE, -3, "etcd unavailable")                                  \
    X(ETIMEDOUT, -4, "deadline exceeded")                                    \
    X(ENOTFOUND, -5, "not found")                                            \
    X(ECOMPACTED, -6, "revision compacted")                                  \
    X(EUNAUTH, -7, "authentication failed")                                  \
    X(ETOOLARGE, -8, "request too large")                                    \
    X(ECANCELED, -9, "canceled")                                             \
    X(EPROTO, -10, "malformed message")                                      \
    X(EINTERNAL, -11, "internal error")                                      \
    X(EPERM, -12, "permission denied")                                       \
    X(ENOTLEADER, -13, "not leader")                                         \
    X(EFENCED, -14, "fenced: leadership or epoch changed")                   \
    X(EEPOCHCHANGED, -15, "epoch changed")                                   \
    X(EABORTED, -16, "communicator aborted")                                 \
    X(ECORRUPT, -17, "corrupted record")                                     \
    X(EEXIST, -18, "already exists")                                         \
    X(EIO, -19, "I/O error")                                                 \
    X(ESYS, -20, "system call failed")                                       \
    X(EUNCONFIRMED, -21, "membership cannot be confirmed: etcd unreachable") \
    X(ERESTART, -22, "restart this process")

typedef enum {
    EC_OK = 0,
#define EC__ENUM(name, val, text) EC_##name = (val),
    EC_ERRNO_MAP(EC__ENUM)
#undef EC__ENUM
} ec_errcode_t;

#define EC_ERRMSG_MAX 512

/* Caller-owned.  code is 0 until a failure fills it. */
typedef struct ec_error {
    int code;
    char msg[EC_ERRMSG_MAX];
} ec_error_t;

/* Short text for a code ("etcd unavailable"); never NULL. */
const char *ec_strerror(int code);
/* Symbolic name for a code ("EC_EUNAVAILABLE"); never NULL. */
const char *ec_err_name(int code);

/* Fill err (may be NULL) and return code, so callers can write
 *   return ec_errorf(err, EC_EINVAL, "bad endpoint '%s'", s);
 * Preserves errno. */
int ec_errorf(ec_error_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int ec_verrorf(ec_error_t *err, int code, const char *fmt, va_list ap);
/* Prepend context to an error already filled: "while X: <old message>".
 * The old message stays whole; the context is cut to the room left. */
int ec_error_prefix(ec_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ec_error_clear(ec_error_t *err);

#endif
