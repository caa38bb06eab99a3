/* Error codes: one table (EC_ERRNO_MAP) feeds names, texts and the enum. */
#include "error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

const char *ec_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
#define EC__TEXT(name, val, text) \
    case (val):                   \
        return text;
        EC_ERRNO_MAP(EC__TEXT)
#undef EC__TEXT
    }
    return "unknown error";
}

const char *ec_err_name(int code)
{
    switch (code) {
    case 0:
        return "EC_OK";
#define EC__NAME(name, val, text) \
    case (val):                   \
        return "EC_" #name;
        EC_ERRNO_MAP(EC__NAME)
#undef EC__NAME
    }
    return "EC_UNKNOWN";
}

int ec_verrorf(ec_error_t *err, int code, const char *fmt, va_list ap)
{
    int saved = errno;
    if (err) {
        err->code = code;
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    }
    errno = saved;
    return code;
}

int ec_errorf(ec_error_t *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ec_verrorf(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int ec_error_prefix(ec_error_t *err, const char *fmt, ...)
{
    if (!err)
        return 0;
    int saved = errno;
    char old[EC_ERRMSG_MAX], pre[EC_ERRMSG_MAX];
    va_list ap;
    memcpy(old, err->msg, sizeof(old));
    va_start(ap, fmt);
    vsnprintf(pre, sizeof(pre), fmt, ap);
    va_end(ap);
    /* The old message whole (its end says what to do; cutting it there hid
     * the advice), the context cut to what room is left, or dropped. */
    size_t ol = strlen(old);
    if (ol + sizeof(": ") < sizeof(err->msg))
        snprintf(err->msg, sizeof(err->msg), "%.*s: %s", (int)(sizeof(err->msg) - ol - sizeof(": ")),
                 pre, old);
    errno = saved;
    return err->code;
}

void ec_error_clear(ec_error_t *err)
{
    if (err) {
        err->code = 0;
        err->msg[0] = '\0';
    }
}
