/* JSON string escaping (see json.h). */
#include "json.h"

#include <stdint.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    /* overlong forms, UTF-16 surrogates, beyond U+10FFFF */
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* Escape s into b; one implementation for both outputs. */
static void escape(ec_strbuf_t *b, const char *s)
{
    if (!s) {
        ec_strbuf_puts(b, "null");
        return;
    }
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    ec_strbuf_putc(b, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t run = i;
        /* copy plain ASCII in runs */
        while (run < n && p[run] >= 0x20 && p[run] < 0x7f && p[run] != '"' && p[run] != '\\')
            run++;
        if (run > i) {
            ec_strbuf_putn(b, s + i, run - i);
            i = run;
            continue;
        }
        if (c == '"' || c == '\\') {
            ec_strbuf_putc(b, '\\');
            ec_strbuf_putc(b, (char)c);
            i++;
        } else if (c == '\n') {
            ec_strbuf_puts(b, "\\n");
            i++;
        } else if (c == '\r') {
            ec_strbuf_puts(b, "\\r");
            i++;
        } else if (c == '\t') {
            ec_strbuf_puts(b, "\\t");
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            ec_strbuf_printf(b, "\\u%04x", c);
            i++;
        } else {
            size_t l = utf8_len(p + i, n - i);
            if (l) {
                ec_strbuf_putn(b, s + i, l);
                i += l;
            } else {
                ec_strbuf_puts(b, "\\ufffd");
                i++;
            }
        }
    }
    ec_strbuf_putc(b, '"');
}

void ec_json_str_sb(ec_strbuf_t *b, const char *s) { escape(b, s); }

void ec_json_str(FILE *out, const char *s)
{
    ec_strbuf_t b = EC_STRBUF_INIT;
    escape(&b, s);
    if (b.oom) /* cannot build it: still write valid JSON */
        fputs("null", out);
    else
        fwrite(b.s, 1, b.len, out);
    ec_strbuf_free(&b);
}

void ec_json_strs(FILE *out, const char *const *v, int n)
{
    fputc('[', out);
    for (int i = 0; i < n; i++) {
        if (i)
            fputc(',', out);
        ec_json_str(out, v[i]);
    }
    fputc(']', out);
}
