/* Reading torch's error file: a small JSON reader for the one shape
 * @record writes (see errorfile.h), tolerant of anything else around it. */
#define _GNU_SOURCE /* memmem */
#include "errorfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 64

typedef struct {
    const char *p, *end;
    const char *why; /* first syntax error */
    bool oom;
} cur_t;

static void ws(cur_t *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool fail(cur_t *c, const char *why)
{
    if (!c->why)
        c->why = why;
    return false;
}

static int hex4(const char *s)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char h = s[i];
        v <<= 4;
        if (h >= '0' && h <= '9')
            v |= h - '0';
        else if (h >= 'a' && h <= 'f')
            v |= h - 'a' + 10;
        else if (h >= 'A' && h <= 'F')
            v |= h - 'A' + 10;
        else
            return -1;
    }
    return v;
}

static size_t utf8(unsigned cp, char *o)
{
    if (cp < 0x80)
        return o[0] = (char)cp, 1;
    if (cp < 0x800)
        return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
               o[2] = (char)(0x80 | (cp & 0x3F)), 3;
    return o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
           o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[3] = (char)(0x80 | (cp & 0x3F)), 4;
}

/* A string at c->p (the opening quote); *out (when out) gets it decoded,
 * malloc'd. */
static bool string(cur_t *c, char **out)
{
    if (c->p >= c->end || *c->p != '"')
        return fail(c, "expected a string");
    c->p++;
    /* decoded is never longer than the source */
    char *buf = out ? malloc((size_t)(c->end - c->p) + 1) : NULL;
    size_t n = 0;
    if (out && !buf) {
        c->oom = true;
        return false;
    }
    while (c->p < c->end && *c->p != '"') {
        char ch = *c->p++;
        if ((unsigned char)ch < 0x20) {
            free(buf);
            return fail(c, "control character in a string");
        }
        if (ch != '\\') {
            if (buf)
                buf[n++] = ch;
            continue;
        }
        if (c->p >= c->end)
            break;
        char e = *c->p++;
        char tmp[4];
        size_t k = 1;
        switch (e) {
        case '"': case '\\': case '/': tmp[0] = e; break;
        case 'b': tmp[0] = '\b'; break;
        case 'f': tmp[0] = '\f'; break;
        case 'n': tmp[0] = '\n'; break;
        case 'r': tmp[0] = '\r'; break;
        case 't': tmp[0] = '\t'; break;
        case 'u': {
            int hi = c->end - c->p >= 4 ? hex4(c->p) : -1;
            if (hi < 0) {
                free(buf);
                return fail(c, "bad \\u escape");
            }
            c->p += 4;
            unsigned cp = (unsigned)hi;
            if (hi >= 0xD800 && hi < 0xDC00 && c->end - c->p >= 6 && c->p[0] == '\\' &&
                c->p[1] == 'u') {
                int lo = hex4(c->p + 2);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + (((unsigned)hi - 0xD800) << 10) + ((unsigned)lo - 0xDC00);
                    c->p += 6;
                }
            }
            if (cp >= 0xD800 && cp < 0xE000)
                cp = 0xFFFD; /* a lone surrogate */
            k = utf8(cp, tmp);
            break;
        }
        default:
            free(buf);
            return fail(c, "bad escape in a string");
        }
        if (buf) {
            memcpy(buf + n, tmp, k);
            n += k;
        }
    }
    if (c->p >= c->end) {
        free(buf);
        return fail(c, "unterminated string");
    }
    c->p++;
    if (out) {
        buf[n] = '\0';
        *out = buf;
    }
    return true;
}

static bool value(cur_t *c, int depth);

/* An object: for each member, on_key(key, c, arg) reads the value (or
 * returns false to have it skipped). */
typedef bool (*member_fn)(const char *key, cur_t *c, void *arg, bool *read);

static bool object(cur_t *c, int depth, member_fn fn, void *arg)
{
    if (depth > MAX_DEPTH)
        return fail(c, "nested too deeply");
    if (c->p >= c->end || *c->p != '{')
        return fail(c, "expected an object");
    c->p++;
    ws(c);
    if (c->p < c->end && *c->p == '}')
        return c->p++, true;
    for (;;) {
        ws(c);
        char *key = NULL;
        if (!string(c, &key))
            return false;
        ws(c);
        if (c->p >= c->end || *c->p != ':') {
            free(key);
            return fail(c, "expected ':'");
        }
        c->p++;
        ws(c);
        bool read = false, ok = fn ? fn(key, c, arg, &read) : true;
        free(key);
        if (!ok)
            return false;
        if (!read && !value(c, depth + 1))
            return false;
        ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}')
            return c->p++, true;
        return fail(c, "expected ',' or '}'");
    }
}

static bool value(cur_t *c, int depth)
{
    ws(c);
    if (c->p >= c->end)
        return fail(c, "expected a value");
    if (depth > MAX_DEPTH)
        return fail(c, "nested too deeply");
    switch (*c->p) {
    case '"':
        return string(c, NULL);
    case '{':
        return object(c, depth, NULL, NULL);
    case '[':
        c->p++;
        ws(c);
        if (c->p < c->end && *c->p == ']')
            return c->p++, true;
        for (;;) {
            if (!value(c, depth + 1))
                return false;
            ws(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                continue;
            }
            if (c->p < c->end && *c->p == ']')
                return c->p++, true;
            return fail(c, "expected ',' or ']'");
        }
    default: {
        /* number, true, false, null */
        const char *s = c->p;
        while (c->p < c->end && (strchr("+-.eE", *c->p) || (*c->p >= '0' && *c->p <= '9') ||
                                 (*c->p >= 'a' && *c->p <= 'z')))
            c->p++;
        return c->p > s ? true : fail(c, "unexpected character");
    }
    }
}

typedef struct {
    char *message, *callstack, *timestamp;
} fields_t;

/* A string member into *dst; anything else is skipped. */
static bool take_string(cur_t *c, char **dst, bool *read)
{
    if (c->p < c->end && *c->p == '"') {
        free(*dst);
        *dst = NULL;
        *read = true;
        return string(c, dst);
    }
    return true;
}

/* timestamp: torch writes a string; a number is taken too */
static bool take_scalar(cur_t *c, char **dst, bool *read)
{
    if (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        const char *s = c->p;
        if (!value(c, 0))
            return false;
        *read = true;
        free(*dst);
        if (!(*dst = strndup(s, (size_t)(c->p - s))))
            c->oom = true;
        return !c->oom;
    }
    return take_string(c, dst, read);
}

static bool extra_member(const char *key, cur_t *c, void *arg, bool *read)
{
    fields_t *f = arg;
    if (!strcmp(key, "py_callstack"))
        return take_string(c, &f->callstack, read);
    if (!strcmp(key, "timestamp"))
        return take_scalar(c, &f->timestamp, read);
    return true;
}

static bool message_member(const char *key, cur_t *c, void *arg, bool *read)
{
    fields_t *f = arg;
    if (!strcmp(key, "message"))
        return take_string(c, &f->message, read);
    if (!strcmp(key, "extraInfo") && c->p < c->end && *c->p == '{') {
        *read = true;
        return object(c, 2, extra_member, f);
    }
    return true;
}

static bool top_member(const char *key, cur_t *c, void *arg, bool *read)
{
    fields_t *f = arg;
    if (strcmp(key, "message") != 0)
        return true;
    if (c->p < c->end && *c->p == '{') {
        *read = true;
        return object(c, 1, message_member, f);
    }
    return take_string(c, &f->message, read);
}

/* A copy of s without leading and trailing blanks. */
static char *trimmed(const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    return strndup(s, n);
}

/* @record's own wrapper is the outermost frame of every traceback it
 * writes: the program's first frame is the one after it. */
static bool wrapper_frame(const char *l, size_t n)
{
    static const char pkg[] = "/torch/distributed/elastic/multiprocessing/errors/";
    return memmem(l, n, pkg, sizeof(pkg) - 1) != NULL;
}

/* First (of the program, past @record's wrapper) and last `  File "...",
 * line N, in f` lines of a Python traceback, and the source line under the
 * last. */
static int frames(const char *tb, ec_errfile_t *e)
{
    const char *first = NULL, *last = NULL;
    size_t nfirst = 0, nlast = 0;
    const char *code = NULL;
    size_t ncode = 0;
    for (const char *l = tb; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        if (n > 8 && !strncmp(l, "  File \"", 8)) {
            if (!first || (wrapper_frame(first, nfirst) && !wrapper_frame(l, n)))
                first = l, nfirst = n;
            last = l, nlast = n;
            code = NULL;
            ncode = 0;
            if (nl && !strncmp(nl + 1, "    ", 4)) {
                code = nl + 1;
                const char *cnl = strchr(code, '\n');
                ncode = cnl ? (size_t)(cnl - code) : strlen(code);
            }
        }
        l = nl ? nl + 1 : NULL;
    }
    e->entered = first ? trimmed(first, nfirst) : strdup("");
    e->raised = last ? trimmed(last, nlast) : strdup("");
    e->raised_code = code ? trimmed(code, ncode) : strdup("");
    return e->entered && e->raised && e->raised_code ? 0 : -1;
}

void ec_errfile_release(ec_errfile_t *e)
{
    if (!e)
        return;
    int saved = errno;
    free(e->message);
    free(e->entered);
    free(e->raised);
    free(e->raised_code);
    memset(e, 0, sizeof(*e));
    errno = saved;
}

int ec_errfile_parse(const char *json, size_t len, ec_errfile_t *out, ec_error_t *err)
{
    memset(out, 0, sizeof(*out));
    cur_t c = {json, json + len, NULL, false};
    fields_t f = {0};
    int rc = 0;
    ws(&c);
    bool ok = object(&c, 0, top_member, &f);
    if (ok) {
        ws(&c);
        if (c.p != c.end)
            ok = fail(&c, "text after the object");
    }
    if (c.oom) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory reading an error file");
        goto out;
    }
    if (!ok) {
        rc = ec_errorf(err, EC_ECORRUPT, "not the JSON torch's @record writes: %s at byte %zu",
                       c.why ? c.why : "syntax error", (size_t)(c.p - json));
        goto out;
    }
    if (!f.message) {
        rc = ec_errorf(err, EC_ECORRUPT, "the error file has no \"message\"");
        goto out;
    }
    size_t n = strcspn(f.message, "\n");
    if (!(out->message = trimmed(f.message, n)) || frames(f.callstack ? f.callstack : "", out) < 0) {
        rc = ec_errorf(err, EC_ENOMEM, "out of memory reading an error file");
        goto out;
    }
    if (f.timestamp) {
        char *end;
        long long t = strtoll(f.timestamp, &end, 10);
        out->timestamp = (*end == '\0' || *end == '.') && t > 0 ? t : 0;
    }
out:
    free(f.message);
    free(f.callstack);
    free(f.timestamp);
    if (rc)
        ec_errfile_release(out);
    return rc;
}

int ec_errfile_read(const char *path, ec_errfile_t *out, ec_error_t *err)
{
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT ? ec_errorf(err, EC_ENOTFOUND, "no error file %s", path)
                               : ec_errorf(err, EC_EIO, "cannot open the error file %s: %s", path,
                                           strerror(errno));
    char *buf = malloc(EC_ERRFILE_MAX);
    size_t n = 0;
    ssize_t r = 0;
    while (buf && n < EC_ERRFILE_MAX && (r = read(fd, buf + n, EC_ERRFILE_MAX - n)) > 0)
        n += (size_t)r;
    int saved = errno;
    close(fd);
    int rc;
    if (!buf)
        rc = ec_errorf(err, EC_ENOMEM, "out of memory reading %s", path);
    else if (r < 0)
        rc = ec_errorf(err, EC_EIO, "cannot read the error file %s: %s", path, strerror(saved));
    else if (n >= EC_ERRFILE_MAX)
        rc = ec_errorf(err, EC_ECORRUPT, "the error file %s is larger than %u bytes", path,
                       EC_ERRFILE_MAX);
    else if ((rc = ec_errfile_parse(buf, n, out, err)) != 0)
        ec_error_prefix(err, "%s", path);
    free(buf);
    return rc;
}
