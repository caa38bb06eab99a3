/* The rule under test: what torch's @record writes to TORCHELASTIC_ERROR_FILE
 * (the exact JSON of torch 1.13's error_handler.py) comes back as the
 * exception's first line, the frame the program entered at, the frame that
 * raised with its source line, and the time; other shapes torch accepts (a
 * plain-string message) work, and anything else is refused without a crash.
 */
#include "errorfile.h"

#include <ec_check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* json.dump of record_exception's dict, as torch 1.13 writes it. */
static const char torch_json[] =
    "{\"message\": {\"message\": \"ValueError: loss is nan at step 7\", \"extraInfo\": "
    "{\"py_callstack\": \"Traceback (most recent call last):\\n  File \\\"/usr/lib/python3/"
    "dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py\\\", line 346, "
    "in wrapper\\n    return f(*args, **kwargs)\\n  File \\\"/w/train.py\\\", line 14, in main\\n"
    "    step(7)\\n  File \\\"/w/train.py\\\", line 9, in step\\n    raise ValueError(\\\"loss is "
    "nan at step %d\\\" % i)\\nValueError: loss is nan at step 7\\n\", \"timestamp\": "
    "\"1764120000\"}}}";

START_TEST(torch_record_format_gives_message_frames_and_time)
{
    ec_errfile_t e;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_errfile_parse(torch_json, strlen(torch_json), &e, &err), 0);
    ck_assert_str_eq(e.message, "ValueError: loss is nan at step 7");
    /* past @record's own wrapper */
    ck_assert_str_eq(e.entered, "File \"/w/train.py\", line 14, in main");
    ck_assert_str_eq(e.raised, "File \"/w/train.py\", line 9, in step");
    ck_assert_str_eq(e.raised_code, "raise ValueError(\"loss is nan at step %d\" % i)");
    ck_assert_int_eq(e.timestamp, 1764120000);
    ec_errfile_release(&e);
    ec_errfile_release(&e);
}
END_TEST

START_TEST(plain_message_and_escapes)
{
    ec_errfile_t e;
    const char *j = "{\"message\":\"RuntimeError: caf\\u00e9 \\ud83d\\ude00\\nsecond line\","
                    "\"other\":[1,2.5e3,{\"a\":null},true]}";
    ck_assert_int_eq(ec_errfile_parse(j, strlen(j), &e, NULL), 0);
    ck_assert_str_eq(e.message, "RuntimeError: caf\xc3\xa9 \xf0\x9f\x98\x80");
    ck_assert_str_eq(e.raised, "");
    ck_assert_str_eq(e.entered, "");
    ck_assert_int_eq(e.timestamp, 0);
    ec_errfile_release(&e);
    /* a numeric timestamp, keys in another order */
    j = "{\"x\":{\"message\":1},\"message\":{\"extraInfo\":{\"timestamp\":17},\"message\":\"E: m\"}}";
    ck_assert_int_eq(ec_errfile_parse(j, strlen(j), &e, NULL), 0);
    ck_assert_str_eq(e.message, "E: m");
    ck_assert_int_eq(e.timestamp, 17);
    ec_errfile_release(&e);
}
END_TEST

START_TEST(anything_else_is_refused)
{
    const char *bad[] = {"", "null", "[]", "{", "{\"message\":}", "{\"message\":\"x\"", "{}",
                         "{\"message\":{\"extraInfo\":{}}}", "{\"message\":\"a\"} x",
                         "{\"message\":\"\\q\"}", "{\"message\":\"\\u12\"}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ec_errfile_t e;
        ec_error_t err = {0};
        ck_assert_msg(ec_errfile_parse(bad[i], strlen(bad[i]), &e, &err) == EC_ECORRUPT,
                      "accepted: %s", bad[i]);
        ck_assert_ptr_null(e.message);
        ck_assert(err.msg[0]);
    }
    /* deep nesting is bounded */
    char deep[400];
    size_t n = 0;
    n += (size_t)snprintf(deep, sizeof(deep), "{\"x\":");
    for (int i = 0; i < 150; i++)
        deep[n++] = '[';
    deep[n] = '\0';
    ec_errfile_t e;
    ck_assert_int_eq(ec_errfile_parse(deep, n, &e, NULL), EC_ECORRUPT);
}
END_TEST

START_TEST(read_from_file)
{
    char path[] = "/tmp/ec_errfile_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, torch_json, strlen(torch_json)), (ssize_t)strlen(torch_json));
    close(fd);
    ec_errfile_t e;
    ec_error_t err = {0};
    ck_assert_int_eq(ec_errfile_read(path, &e, &err), 0);
    ck_assert_str_eq(e.message, "ValueError: loss is nan at step 7");
    ec_errfile_release(&e);
    unlink(path);
    ck_assert_int_eq(ec_errfile_read(path, &e, &err), EC_ENOTFOUND);
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("errorfile", NULL, NULL,
                          EC_CHECK_TESTS(
                              torch_record_format_gives_message_frames_and_time,
                              plain_message_and_escapes,
                              anything_else_is_refused,
                              read_from_file));
}

EC_CHECK_MAIN(suite)
