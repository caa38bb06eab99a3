/* A bounded output queue in front of a file descriptor (the agent's
 * console), drained by a thread of its own, so that whoever writes to it
 * never blocks when the reader stalls (a stopped pager, Ctrl-S, a stuck log
 * shipper).  What does not fit is dropped and counted; once output flows
 * again a line says how many lines were dropped at that point. */
#ifndef EC_OUTQ_H
#define EC_OUTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ec_outq ec_outq_t;

/* A queue of at most capacity bytes in front of fd (borrowed, left open and
 * in blocking mode: it may be shared with other processes).  note (copied,
 * may be NULL) ends the "lines dropped" line, e.g. where the full output is.
 * NULL with errno set when the thread cannot start. */
ec_outq_t *ec_outq_create(int fd, size_t capacity, const char *note);
/* Queue len bytes, or drop them (counted) when the queue is full or was full
 * and has not drained since.  Never blocks on the reader; thread-safe. */
void ec_outq_write(ec_outq_t *q, const void *buf, size_t len);
/* ec_outq_write of a whole line of the host's own (a log line): started on
 * a line of its own when what was queued before did not end one (a
 * program's output without its newline). */
void ec_outq_write_line(ec_outq_t *q, const void *buf, size_t len);
/* Wait up to timeout_ms for everything queued to be written: true if it was. */
bool ec_outq_flush(ec_outq_t *q, int64_t timeout_ms);
/* Lines dropped so far. */
uint64_t ec_outq_dropped(ec_outq_t *q);
/* Stop the thread (even inside a blocked write) and free; what is still
 * queued is lost, so ec_outq_flush first.  Accepts NULL. */
void ec_outq_destroy(ec_outq_t *q);

#endif
