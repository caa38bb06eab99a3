/* Rule checked: the tree's one string builder (coord/util/strbuf) keeps a
 * NUL-terminated text through appends of any size, separates parts, and
 * hands the text over once; the one JSON escaper (coord/util/json) writes
 * strings any JSON parser reads back, whatever bytes they held. */
#define _GNU_SOURCE /* open_memstream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_check.h"
#include "json.h"
#include "strbuf.h"

START_TEST(strbuf_appends_and_takes)
{
    ec_strbuf_t b = EC_STRBUF_INIT;
    ck_assert_str_eq(ec_strbuf_str(&b), "");
    ec_strbuf_sep(&b, "; "); /* nothing before the first part */
    ec_strbuf_puts(&b, "a");
    ec_strbuf_sep(&b, "; ");
    ec_strbuf_printf(&b, "%d-%s", 42, "b");
    ec_strbuf_putc(&b, '!');
    ec_strbuf_putn(&b, "xyz", 2);
    ck_assert_str_eq(ec_strbuf_str(&b), "a; 42-b!xy");
    ck_assert_uint_eq(b.len, strlen("a; 42-b!xy"));
    /* a printf longer than any internal scratch buffer, then many appends */
    char big[5000];
    memset(big, 'q', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ec_strbuf_printf(&b, "[%s]", big);
    for (int i = 0; i < 1000; i++)
        ec_strbuf_printf(&b, "%d,", i % 10);
    ck_assert_uint_eq(b.len, 10 + 2 + 4999 + 2000);
    ck_assert_uint_eq(strlen(b.s), b.len);
    ck_assert_int_eq(b.s[10], '[');
    ck_assert_int_eq(b.s[10 + 4999 + 1], ']');
    char *s = ec_strbuf_take(&b);
    ck_assert_ptr_null(b.s);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(strlen(s), 10 + 2 + 4999 + 2000);
    free(s);
    /* nothing appended: take gives "", not NULL */
    s = ec_strbuf_take(&b);
    ck_assert_str_eq(s, "");
    free(s);
    /* after running out of memory: appends stop, take gives NULL and frees */
    ec_strbuf_puts(&b, "x");
    b.oom = 1;
    ec_strbuf_puts(&b, "y");
    ck_assert_str_eq(ec_strbuf_str(&b), "");
    ck_assert_ptr_null(ec_strbuf_take(&b));
    ck_assert_ptr_null(b.s);
    ec_strbuf_free(&b);
    ec_strbuf_free(NULL);
}
END_TEST

static char *json_of(const char *s)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    ec_json_str(f, s);
    fclose(f);
    /* the FILE and strbuf forms agree */
    ec_strbuf_t b = EC_STRBUF_INIT;
    ec_json_str_sb(&b, s);
    ck_assert_str_eq(ec_strbuf_str(&b), out);
    ec_strbuf_free(&b);
    return out;
}

START_TEST(json_strings_always_parse)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "\"plain\""},
        {"", "\"\""},
        {"say \"hi\" \\ bye", "\"say \\\"hi\\\" \\\\ bye\""},
        {"a\nb\rc\td", "\"a\\nb\\rc\\td\""},
        {"\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\""},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
         "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
        /* not UTF-8: a stray continuation byte, a cut sequence, an overlong
         * '/', a surrogate, beyond U+10FFFF */
        {"\x80x", "\"\\ufffdx\""},
        {"\xe2\x82", "\"\\ufffd\\ufffd\""},
        {"\xc0\xaf", "\"\\ufffd\\ufffd\""},
        {"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""},
        {"\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = json_of(cases[i].in);
        ck_assert_msg(!strcmp(got, cases[i].out), "case %zu: %s, expected %s", i, got,
                      cases[i].out);
        free(got);
    }
    char *null = json_of(NULL);
    ck_assert_str_eq(null, "null");
    free(null);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    const char *v[] = {"a", "b\"", NULL};
    ec_json_strs(f, v, 3);
    ec_json_strs(f, v, 0);
    fclose(f);
    ck_assert_str_eq(out, "[\"a\",\"b\\\"\",null][]");
    free(out);
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("text", NULL, NULL,
                          EC_CHECK_TESTS(
                              strbuf_appends_and_takes,
                              json_strings_always_parse));
}

EC_CHECK_MAIN(suite)
