/* A growable NUL-terminated string: append, printf, separators, take.
 *
 * Appenders never fail loudly: running out of memory sets oom, later appends
 * do nothing, and ec_strbuf_take() then returns NULL, so a caller builds a
 * whole text and checks once at the end.  Zero-initialise (EC_STRBUF_INIT)
 * before use; s is NULL until the first append, and always NUL-terminated
 * after one.
 */
#ifndef EC_STRBUF_H
#define EC_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct ec_strbuf {
    char *s;
    size_t len, cap;
    int oom; /* an append ran out of memory: the text is incomplete */
} ec_strbuf_t;

#define EC_STRBUF_INIT {NULL, 0, 0, 0}

/* Append n bytes of s (s need not be NUL-terminated). */
void ec_strbuf_putn(ec_strbuf_t *b, const char *s, size_t n);
/* Append a C string. */
void ec_strbuf_puts(ec_strbuf_t *b, const char *s);
void ec_strbuf_putc(ec_strbuf_t *b, char c);
/* Append printf-formatted text. */
void ec_strbuf_printf(ec_strbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ec_strbuf_vprintf(ec_strbuf_t *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Append sep unless the buffer is still empty: "a; b; c" from parts. */
void ec_strbuf_sep(ec_strbuf_t *b, const char *sep);
/* The text so far ("" before the first append); owned by b. */
const char *ec_strbuf_str(const ec_strbuf_t *b);
/* Take the text (caller frees) and reset b to empty.  "" when nothing was
 * appended; NULL when an append ran out of memory (b is freed then). */
char *ec_strbuf_take(ec_strbuf_t *b);
/* A malloc'd printf (vasprintf); NULL only when out of memory. */
char *ec_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Free the text and reset b; accepts NULL; preserves errno. */
void ec_strbuf_free(ec_strbuf_t *b);

#endif
