/* The error file of a training process (TORCHELASTIC_ERROR_FILE), as
 * torch's @record decorator writes it when the decorated function raises
 * (torch/distributed/elastic/multiprocessing/errors/error_handler.py):
 *
 *   {"message": {"message": "ValueError: boom",
 *                "extraInfo": {"py_callstack": "Traceback ...",
 *                              "timestamp": "1700000000"}}}
 *
 * A "message" that is a plain string (a format torch also reads) is taken
 * as the message alone.  Parsing is pure; only ec_errfile_read touches a
 * file. */
#ifndef EC_ERRORFILE_H
#define EC_ERRORFILE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* The largest error file read: a deep traceback is a few KB. */
#define EC_ERRFILE_MAX (1u << 20)

typedef struct ec_errfile {
    char *message;      /* "ValueError: boom" (first line only); never NULL after parse */
    char *entered;      /* the traceback's first frame: File "x.py", line 9, in <module> */
    char *raised;       /* its last frame, where the exception was raised */
    char *raised_code;  /* the source line under the last frame, trimmed ("" when none) */
    int64_t timestamp;  /* unix seconds, 0 when absent */
} ec_errfile_t;

/* Parse len bytes of JSON.  Returns 0, EC_ECORRUPT (not JSON, or no
 * "message") with err saying what is wrong, or EC_ENOMEM.  Frames are ""
 * when there is no traceback. */
int ec_errfile_parse(const char *json, size_t len, ec_errfile_t *out, ec_error_t *err);
/* Read and parse path.  Returns 0, EC_ENOTFOUND when there is no file (the
 * process wrote none), EC_EIO, or what parse returns. */
int ec_errfile_read(const char *path, ec_errfile_t *out, ec_error_t *err);
/* Accepts a zeroed or released struct; preserves errno. */
void ec_errfile_release(ec_errfile_t *e);

#endif
