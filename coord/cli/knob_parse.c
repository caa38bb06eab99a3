/* One knob's value from text: the parsers of every type of the table
 * (knobs.h, ec_knob_type_t), the checks of single values its rows name, and
 * a knob's storage.  Every message names where the value came from and how
 * to write it again (knobs_impl.h, ec__knob_set_value). */
#include "knobs_impl.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ENUM knobs are stored through an int *. */
_Static_assert(sizeof(ec_rebuild_t) == sizeof(int), "ec_rebuild_t is not int-sized");
_Static_assert(sizeof(ec_log_level_t) == sizeof(int), "ec_log_level_t is not int-sized");

static void free_strlist(ec_strlist_t *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->n = 0;
    l->v = NULL;
}

void ec__knob_free_secret(char **p)
{
    if (*p) {
        explicit_bzero(*p, strlen(*p));
        free(*p);
        *p = NULL;
    }
}

/* Release one knob's storage (strings and lists). */
void ec__knob_free_field(ec_config_t *cfg, const ec_knob_t *k)
{
    switch (k->type) {
    case EC_KT_STRING:
        free(*FIELD(cfg, k, char *));
        *FIELD(cfg, k, char *) = NULL;
        break;
    case EC_KT_SECRET:
        ec__knob_free_secret(FIELD(cfg, k, char *));
        break;
    case EC_KT_STRLIST:
        free_strlist(FIELD(cfg, k, ec_strlist_t));
        break;
    case EC_KT_INTLIST:
        free(FIELD(cfg, k, ec_intlist_t)->v);
        FIELD(cfg, k, ec_intlist_t)->v = NULL;
        FIELD(cfg, k, ec_intlist_t)->n = 0;
        break;
    default:
        break;
    }
}

/* Strict decimal integer: optional '-', digits, nothing else. */
int ec__knob_parse_ll(const char *s, long long *out)
{
    const char *p = s;
    if (*p == '-')
        p++;
    if (!isdigit((unsigned char)*p))
        return -1;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q))
            return -1;
    errno = 0;
    char *end;
    long long x = strtoll(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = x;
    return 0;
}

/* Seconds as typed ("30", "0.5", at most 3 decimals) to milliseconds. */
static int parse_seconds(const char *s, long long *ms)
{
    long long whole = 0, frac = 0;
    int nint = 0, nfrac = 0;
    const char *p = s;
    for (; isdigit((unsigned char)*p); p++, nint++) {
        if (nint >= 12)
            return -1;
        whole = whole * 10 + (*p - '0');
    }
    if (nint == 0)
        return -1;
    if (*p == '.') {
        for (p++; isdigit((unsigned char)*p); p++, nfrac++) {
            if (nfrac >= 3)
                return -1;
            frac = frac * 10 + (*p - '0');
        }
        if (nfrac == 0)
            return -1;
    }
    if (*p)
        return -1;
    for (; nfrac < 3; nfrac++)
        frac *= 10;
    *ms = whole * 1000 + frac;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(s, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

/* Next comma-separated item of *p, spaces around it trimmed, into buf.
 * Returns 0 with *p advanced, -1 at the end, -2 when the item is too long. */
int ec__knob_next_item(const char **p, char *buf, size_t len)
{
    if (!*p)
        return -1;
    const char *s = *p, *comma = strchr(s, ',');
    const char *e = comma ? comma : s + strlen(s);
    *p = comma ? comma + 1 : NULL;
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if ((size_t)(e - s) >= len)
        return -2;
    memcpy(buf, s, (size_t)(e - s));
    buf[e - s] = '\0';
    return 0;
}

/* What a seconds value looks like to a person: 30, 0.5, 1.25. */
void ec__knob_fmt_seconds(long long ms, char *buf, size_t len)
{
    if (ms % 1000 == 0)
        snprintf(buf, len, "%lld", ms / 1000);
    else {
        char tmp[32];
        snprintf(tmp, sizeof(tmp), "%lld.%03lld", ms / 1000, ms % 1000);
        size_t n = strlen(tmp);
        while (tmp[n - 1] == '0')
            tmp[--n] = '\0';
        snprintf(buf, len, "%s", tmp);
    }
}

int ec__knob_fmt_intlist(const ec_intlist_t *l, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < l->n; i++)
        used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%d", i ? "," : "",
                                 l->v[i]);
    return 0;
}

const char *ec__knob_example(const ec_knob_t *k)
{
    return k->example ? k->example : k->def;
}

/* ------------------------------------------------------------------------ */
/* value checks of single knobs                                             */

static int name_chars(const char *v, const char *what, size_t max, const char *where,
                      const char *fix, const char *example, ec_error_t *err)
{
    size_t n = strlen(v);
    const char *rule = "letters, digits, '.', '_' and '-'";
    if (n == 0)
        return ec_errorf(err, EC_EINVAL, "%s: a %s cannot be empty; use %s, e.g. %s%s", where,
                         what, rule, fix, example);
    if (n > max)
        return ec_errorf(err, EC_EINVAL,
                         "%s: a %s has at most %zu characters (this one has %zu); shorten it, "
                         "e.g. %s%s",
                         where, what, max, n, fix, example);
    if (strcmp(v, ".") == 0 || strcmp(v, "..") == 0)
        return ec_errorf(err, EC_EINVAL, "%s: '%s' is not a usable %s; pick a name, e.g. %s%s",
                         where, v, what, fix, example);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (isalnum(*p) && *p < 0x80)
            continue;
        if (*p == '.' || *p == '_' || *p == '-')
            continue;
        if (*p >= 0x80)
            return ec_errorf(err, EC_EINVAL,
                             "%s: a %s must be plain ASCII (%s); found a non-ASCII "
                             "character at byte %td; e.g. %s%s",
                             where, what, rule, (const char *)p - v, fix, example);
        if (isgraph(*p))
            return ec_errorf(err, EC_EINVAL,
                             "%s: '%c' is not allowed in a %s, which may use only %s "
                             "(it becomes part of etcd keys); e.g. %s%s",
                             where, *p, what, rule, fix, example);
        return ec_errorf(err, EC_EINVAL,
                         "%s: a %s may use only %s; found a space or control character at "
                         "byte %td; e.g. %s%s",
                         where, what, rule, (const char *)p - v, fix, example);
    }
    return 0;
}

int ec__knob_check_job_id(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    return name_chars(v, "job id", JOB_ID_MAX, where, fix, "job1", err);
}

int ec__knob_check_node_id(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    if (!*v) /* empty: resolved later from POD_NAME or the host name */
        return 0;
    return name_chars(v, "node id", NODE_ID_MAX, where, fix, "node-3", err);
}

static int no_space(const char *v, const char *where, const char *what, ec_error_t *err)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (!isgraph(*p))
            return ec_errorf(err, EC_EINVAL,
                             "%s: %s contains a space or a non-printable character; remove it",
                             where, what);
    return 0;
}

int ec__knob_check_endpoint(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    (void)fix;
    return no_space(v, where, "an endpoint", err);
}

int ec__knob_check_host(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    if (no_space(v, where, "the address", err))
        return err ? err->code : EC_EINVAL;
    if (strpbrk(v, ",/"))
        return ec_errorf(err, EC_EINVAL,
                         "%s: give one address or host name, without ',' or '/', e.g. "
                         "%s10.0.0.7",
                         where, fix);
    return 0;
}

/* What gRPC takes as a channel's proxy: http://HOST:PORT (it speaks plain
 * HTTP CONNECT to the proxy; another scheme is ignored with a log line). */
int ec__knob_check_proxy(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    if (!*v)
        return 0;
    if (no_space(v, where, "the proxy", err))
        return err ? err->code : EC_EINVAL;
    const char *hp = !strncmp(v, "http://", 7) ? v + 7 : NULL;
    const char *colon = hp ? strrchr(hp, ':') : NULL;
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!hp || !colon || colon == hp || strpbrk(hp, "/@") || !end || *end || port < 1 ||
        port > 65535)
        return ec_errorf(err, EC_EINVAL,
                         "%s: write the proxy as http://HOST:PORT (gRPC reaches etcd through "
                         "an HTTP CONNECT proxy, and only one named so), e.g. "
                         "%shttp://proxy.example:3128",
                         where, fix);
    return 0;
}

int ec__knob_check_role(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    (void)fix;
    return no_space(v, where, "the role", err);
}

/* --hang_timeout: "auto", "off", or seconds (at most 3 decimals, 0.1 to
 * 86400); *ms gets -1, 0 or the milliseconds. */
int ec__knob_hang_timeout_ms(const char *v, long long *ms)
{
    if (!strcasecmp(v, "auto")) {
        *ms = -1;
        return 0;
    }
    if (!strcasecmp(v, "off") || !strcmp(v, "0")) {
        *ms = 0;
        return 0;
    }
    return parse_seconds(v, ms) || *ms < 100 || *ms > 86400000 ? -1 : 0;
}

int ec__knob_check_hang_timeout(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    long long ms;
    if (ec__knob_hang_timeout_ms(v, &ms) == 0)
        return 0;
    return ec_errorf(err, EC_EINVAL, "%s: not auto, off or a number of seconds from 0.1 to "
                     "86400; e.g. %s600 (10 minutes: above your longest step and collective)",
                     where, fix);
}

int ec__knob_straggler_factor(const char *v, double *x)
{
    if (!strcasecmp(v, "off") || !strcmp(v, "0")) {
        *x = 0;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d > 1.0) || d > 1000.0)
        return -1;
    *x = d;
    return 0;
}

int ec__knob_check_straggler(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    double x;
    if (ec__knob_straggler_factor(v, &x) == 0)
        return 0;
    return ec_errorf(err, EC_EINVAL, "%s: not off or a number above 1 (how many times slower "
                     "than the median a node may be); e.g. %s2", where, fix);
}

int ec__knob_check_run_mode(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    if (strcasecmp(v, "collective") == 0)
        return 0;
    return ec_errorf(err, EC_EINVAL,
                     "%s: ecoord runs collective jobs only (every process a trainer, no "
                     "parameter servers); run a parameter-server job with Paddle's own launcher, "
                     "or write %scollective",
                     where, fix);
}

int ec__knob_check_prefix(const char *v, const char *where, const char *fix, ec_error_t *err)
{
    if (!*v)
        return 0;
    if (no_space(v, where, "the prefix", err))
        return err ? err->code : EC_EINVAL;
    size_t n = strlen(v);
    if (v[0] != '/' || (n > 1 && v[n - 1] == '/') || n == 1 || strstr(v, "//"))
        return ec_errorf(err, EC_EINVAL,
                         "%s: a key prefix starts with '/', does not end with '/' and has no "
                         "empty parts, e.g. %s/ecoord",
                         where, fix);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* setting one knob from text                                               */

static int set_range(ec_config_t *cfg, const ec_knob_t *k, const char *v, const char *where,
                     const char *fix, ec_error_t *err)
{
    ec_range_t *r = FIELD(cfg, k, ec_range_t);
    const char *a = k->part[0], *b = k->part[1];
    int single_ok = k->sep == ':';
    char form[96];
    if (single_ok)
        snprintf(form, sizeof(form), "%sN for a fixed size or %s%s%c%s", fix, fix, a, k->sep, b);
    else
        snprintf(form, sizeof(form), "%s%s%c%s", fix, a, k->sep, b);
    if (!*v && (k->flags & EC_KF_EMPTY_OK)) {
        r->min = r->max = 0;
        return 0;
    }
    char lo_s[32], hi_s[32];
    const char *sep = strchr(v, k->sep);
    size_t nlo = sep ? (size_t)(sep - v) : strlen(v);
    if (nlo >= sizeof(lo_s) || (sep && strlen(sep + 1) >= sizeof(hi_s)))
        goto syntax;
    memcpy(lo_s, v, nlo);
    lo_s[nlo] = '\0';
    if (sep)
        strcpy(hi_s, sep + 1);
    else if (single_ok)
        strcpy(hi_s, lo_s);
    else
        goto syntax;
    long long lo, hi;
    if (ec__knob_parse_ll(lo_s, &lo) || ec__knob_parse_ll(hi_s, &hi))
        goto syntax;
    if (lo < k->min || hi < k->min || lo > k->max || hi > k->max)
        return ec_errorf(err, EC_EINVAL,
                         "%s: %s and %s must be between %lld and %lld; write %s with %lld <= %s "
                         "<= %s, e.g. %s%s",
                         where, a, b, k->min, k->max, form, k->min, a, b, fix, ec__knob_example(k));
    if (lo > hi)
        return ec_errorf(err, EC_EINVAL,
                         "%s: %s (%lld) is greater than %s (%lld); write %s%s%c%s with %s <= %s, "
                         "e.g. %s%s",
                         where, a, lo, b, hi, fix, a, k->sep, b, a, b, fix, ec__knob_example(k));
    r->min = (int)lo;
    r->max = (int)hi;
    return 0;
syntax:
    return ec_errorf(err, EC_EINVAL, "%s: not a %s; write %s, e.g. %s%s", where,
                     single_ok ? "node count" : "port range", form, fix, ec__knob_example(k));
}

static int set_strlist(ec_config_t *cfg, const ec_knob_t *k, const char *v, const char *where,
                       const char *fix, ec_error_t *err)
{
    ec_strlist_t nl = {0, NULL};
    char item[1024];
    const char *p = v;
    int rc;
    if (!*v)
        goto done;
    while ((rc = ec__knob_next_item(&p, item, sizeof(item))) != -1) {
        if (rc == -2) {
            rc = ec_errorf(err, EC_EINVAL, "%s: an entry is longer than %zu characters", where,
                           sizeof(item) - 1);
            goto error;
        }
        if (!*item) {
            rc = ec_errorf(err, EC_EINVAL,
                           "%s: entry %d is empty; separate entries with single commas, e.g. "
                           "%s%s",
                           where, nl.n + 1, fix, ec__knob_example(k));
            goto error;
        }
        if (k->check && (rc = k->check(item, where, fix, err)))
            goto error;
        char **nv = realloc(nl.v, sizeof(char *) * (size_t)(nl.n + 1));
        if (!nv)
            goto nomem;
        nl.v = nv;
        if (!(nl.v[nl.n] = strdup(item)))
            goto nomem;
        nl.n++;
    }
done:
    free_strlist(FIELD(cfg, k, ec_strlist_t));
    *FIELD(cfg, k, ec_strlist_t) = nl;
    return 0;
nomem:
    rc = ec_errorf(err, EC_ENOMEM, "out of memory parsing %s", where);
error:
    free_strlist(&nl);
    return rc;
}

static int set_intlist(ec_config_t *cfg, const ec_knob_t *k, const char *v, const char *where,
                       const char *fix, ec_error_t *err)
{
    ec_intlist_t nl = {0, NULL};
    char item[32];
    const char *p = v;
    int rc;
    if (!*v)
        goto done;
    while ((rc = ec__knob_next_item(&p, item, sizeof(item))) != -1) {
        long long x;
        if (rc == -2 || !*item || ec__knob_parse_ll(item, &x)) {
            rc = ec_errorf(err, EC_EINVAL,
                           "%s: entry %d ('%s') is not a device id; write ids separated by "
                           "commas, e.g. %s%s",
                           where, nl.n + 1, rc == -2 ? "..." : item, fix, ec__knob_example(k));
            goto error;
        }
        if (x < k->min || x > k->max) {
            rc = ec_errorf(err, EC_EINVAL, "%s: id %lld is out of range %lld..%lld; e.g. %s%s",
                           where, x, k->min, k->max, fix, ec__knob_example(k));
            goto error;
        }
        int *nv = realloc(nl.v, sizeof(int) * (size_t)(nl.n + 1));
        if (!nv) {
            rc = ec_errorf(err, EC_ENOMEM, "out of memory parsing %s", where);
            goto error;
        }
        nl.v = nv;
        nl.v[nl.n++] = (int)x;
    }
done:
    free(FIELD(cfg, k, ec_intlist_t)->v);
    *FIELD(cfg, k, ec_intlist_t) = nl;
    return 0;
error:
    free(nl.v);
    return rc;
}

/* Parse v for knob k into cfg.  where names the value for messages
 * ("--np=4:2", "ECOORD_NP=4:2 (environment)"); fix is how to write it again
 * ("--np=", "ECOORD_NP=").  On error cfg is unchanged. */
int ec__knob_set_value(ec_config_t *cfg, const ec_knob_t *k, const char *v, const char *where,
                       const char *fix, ec_error_t *err)
{
    long long x;
    int b, rc;
    const char *unit = k->type == EC_KT_SECONDS ? " seconds" : "";

    switch (k->type) {
    case EC_KT_STRING:
    case EC_KT_SECRET:
        if (k->check && (rc = k->check(v, where, fix, err)))
            return rc;
        if (!*v && !(k->flags & EC_KF_EMPTY_OK))
            return ec_errorf(err, EC_EINVAL, "%s: needs a value, e.g. %s%s", where, fix,
                             ec__knob_example(k));
        if (k->max && strlen(v) > (size_t)k->max)
            return ec_errorf(err, EC_EINVAL, "%s: longer than %lld characters", where, k->max);
        char *s = strdup(v);
        if (!s)
            return ec_errorf(err, EC_ENOMEM, "out of memory parsing %s", where);
        ec__knob_free_field(cfg, k);
        *FIELD(cfg, k, char *) = s;
        return 0;
    case EC_KT_STRLIST:
        return set_strlist(cfg, k, v, where, fix, err);
    case EC_KT_INTLIST:
        return set_intlist(cfg, k, v, where, fix, err);
    case EC_KT_RANGE:
        return set_range(cfg, k, v, where, fix, err);
    case EC_KT_INT:
        if (ec__knob_parse_ll(v, &x))
            return ec_errorf(err, EC_EINVAL, "%s: not a whole number; e.g. %s%s", where, fix,
                             ec__knob_example(k));
        if (x < k->min || x > k->max)
            return ec_errorf(err, EC_EINVAL, "%s: out of range: allowed %lld to %lld; e.g. %s%s",
                             where, k->min, k->max, fix, ec__knob_example(k));
        *FIELD(cfg, k, int) = (int)x;
        return 0;
    case EC_KT_SECONDS:
        if (parse_seconds(v, &x))
            return ec_errorf(err, EC_EINVAL,
                             "%s: not a number of seconds (digits, at most 3 decimals, no "
                             "unit); e.g. %s%s",
                             where, fix, ec__knob_example(k));
        if (x < k->min || x > k->max) {
            char lo[32], hi[32];
            ec__knob_fmt_seconds(k->min, lo, sizeof(lo));
            ec__knob_fmt_seconds(k->max, hi, sizeof(hi));
            return ec_errorf(err, EC_EINVAL, "%s: out of range: allowed %s to %s%s; e.g. %s%s",
                             where, lo, hi, unit, fix, ec__knob_example(k));
        }
        if ((k->flags & EC_KF_WHOLE) && x % 1000)
            return ec_errorf(err, EC_EINVAL,
                             "%s: must be whole seconds (etcd leases count in seconds); e.g. "
                             "%s%s",
                             where, fix, ec__knob_example(k));
        *FIELD(cfg, k, int64_t) = x;
        return 0;
    case EC_KT_BOOL:
        if (parse_bool(v, &b))
            return ec_errorf(err, EC_EINVAL,
                             "%s: not a boolean; write true or false (1/0, yes/no, on/off)",
                             where);
        *FIELD(cfg, k, int) = b;
        return 0;
    case EC_KT_ENUM:
        for (int i = 0; k->choices[i]; i++)
            if (strcasecmp(v, k->choices[i]) == 0) {
                *FIELD(cfg, k, int) = i;
                return 0;
            }
        return ec_errorf(err, EC_EINVAL, "%s: must be one of %s; e.g. %s%s", where, k->metavar,
                         fix, ec__knob_example(k));
    }
    return ec_errorf(err, EC_EINTERNAL, "%s: knob %s has an unknown type", where, k->name);
}

/* "--np=4:2", with a long value shortened so the message keeps its advice. */
void ec__knob_describe(char *buf, size_t len, const char *pre, const char *name, const char *v,
                       const char *post)
{
    if (strlen(v) > 80)
        snprintf(buf, len, "%s%s=%.60s...%s", pre, name, v, post);
    else
        snprintf(buf, len, "%s%s=%s%s", pre, name, v, post);
}
