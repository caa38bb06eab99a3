/* JSON string literals, the one escaper of the tree.
 *
 * Writes s as a quoted JSON string: '"' and '\\' escaped, \n \r \t by name,
 * other control bytes and DEL as \u00XX, valid UTF-8 passed through, and
 * every byte that is not part of valid UTF-8 (stray continuation bytes,
 * overlong forms, surrogates, beyond U+10FFFF) as \ufffd, so the output
 * always parses whatever a record held.  A NULL s is written as null.
 */
#ifndef EC_JSON_H
#define EC_JSON_H

#include <stdio.h>

#include "strbuf.h"

void ec_json_str(FILE *out, const char *s);
void ec_json_str_sb(ec_strbuf_t *b, const char *s);
/* A JSON array of n strings: ["a","b"]. */
void ec_json_strs(FILE *out, const char *const *v, int n);

#endif
