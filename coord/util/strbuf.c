#define _GNU_SOURCE
/* A growable string (see strbuf.h). */
#include "strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and the NUL; 0, or -1 with oom set. */
static int reserve(ec_strbuf_t *b, size_t n)
{
    if (b->oom)
        return -1;
    if (n > (size_t)-1 / 2 - b->len) {
        b->oom = 1;
        return -1;
    }
    if (b->len + n + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 128;
    while (cap < b->len + n + 1)
        cap *= 2;
    char *p = realloc(b->s, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->s = p;
    b->cap = cap;
    return 0;
}

void ec_strbuf_putn(ec_strbuf_t *b, const char *s, size_t n)
{
    if (reserve(b, n) < 0)
        return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void ec_strbuf_puts(ec_strbuf_t *b, const char *s) { ec_strbuf_putn(b, s, strlen(s)); }

void ec_strbuf_putc(ec_strbuf_t *b, char c) { ec_strbuf_putn(b, &c, 1); }

void ec_strbuf_vprintf(ec_strbuf_t *b, const char *fmt, va_list ap)
{
    if (b->oom)
        return;
    va_list ap2;
    va_copy(ap2, ap);
    char small[256];
    int n = vsnprintf(small, sizeof(small), fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof(small)) {
        ec_strbuf_putn(b, small, (size_t)n);
        return;
    }
    if (reserve(b, (size_t)n) < 0)
        return;
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void ec_strbuf_printf(ec_strbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ec_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

void ec_strbuf_sep(ec_strbuf_t *b, const char *sep)
{
    if (b->len)
        ec_strbuf_puts(b, sep);
}

const char *ec_strbuf_str(const ec_strbuf_t *b) { return b->s && !b->oom ? b->s : ""; }

char *ec_strbuf_take(ec_strbuf_t *b)
{
    if (b->oom) {
        ec_strbuf_free(b);
        return NULL;
    }
    char *s = b->s ? b->s : strdup("");
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}

void ec_strbuf_free(ec_strbuf_t *b)
{
    if (!b)
        return;
    int saved = errno;
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
    errno = saved;
}

char *ec_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}
