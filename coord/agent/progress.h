/* The agent's view of its ranks' progress (hangs and stragglers).
 *
 * Each local rank gets a progress file (coord/core/progress_file.h) that the
 * program stores its step count into; a program that reports nothing is
 * watched through its log instead (a rank whose log has not grown is
 * silent).  The agent samples both every pass of its loop (a read of 64
 * bytes and an fstat per rank; /proc/<pid>/stat only for a silent rank) and
 * reduces them to one summary per node (ec_node_progress_t, records.h),
 * which it writes into its node record at a low, bounded rate decided by
 * ec_progress_publish_due (pure): when a rank goes silent or resumes, when
 * a pause starts or ends (at most once a second), or when step times move
 * by more than a fifth (at most every EC_PROGRESS_PUBLISH_MS).  Never once
 * per step.
 *
 * Used from the agent's main thread only. */
#ifndef EC_PROGRESS_H
#define EC_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "progress_file.h"
#include "records.h"

/* Step-time changes are published at most this often. */
#define EC_PROGRESS_PUBLISH_MS 5000
/* Silence, pause and stop changes at most this often. */
#define EC_PROGRESS_FLIP_MS 1000

typedef struct ec_progress ec_progress_t;

/* nproc ranks whose files go to log_dir/progress.<local_rank>.  A rank is
 * counted silent once it made no progress for silence_ms.  NULL and err on
 * failure. */
ec_progress_t *ec_progress_create(int nproc, const char *log_dir, int64_t silence_ms,
                                  ec_error_t *err);
void ec_progress_destroy(ec_progress_t *p); /* accepts NULL */
/* A declared pause excuses a rank's silence for ms at most (--max_pause):
 * past it, the rank is silent since the pause began (logged once as
 * "+pause-overdue").  0 (the default): for ever. */
void ec_progress_set_max_pause(ec_progress_t *p, int64_t ms);

/* The file for local rank r (its ECOORD_PROGRESS_FILE). */
const char *ec_progress_path(const ec_progress_t *p, int r);

/* Local rank r is about to start: zero its file (a new process reports
 * afresh) and note its log's size.  -1 and err when the file cannot be
 * written (the rank then runs without progress reports). */
int ec_progress_reset(ec_progress_t *p, int r, const char *log_path, ec_error_t *err);

/* How much output local rank r has written so far (the agent counts what
 * it copies: coord/agent/procs.h): for a rank with no log file (log_path
 * NULL), its output growing is its progress, as a log growing is.
 * Accepts NULL. */
void ec_progress_output(ec_progress_t *p, int r, uint64_t bytes);

/* Sample every rank; pid[r] is its process (0: not running, not counted).
 * now_ms is CLOCK_MONOTONIC. */
void ec_progress_sample(ec_progress_t *p, const pid_t *pid, int64_t now_ms);
/* When local rank r's process said it was ready (CLOCK_MONOTONIC ns, from
 * its file: coord/core/progress_file.h), 0 while it has not; one read of
 * the file. */
int64_t ec_progress_ready_ns(const ec_progress_t *p, int r);

/* The node's summary as of the last sample (seq left 0: the caller numbers
 * what it publishes). */
void ec_progress_summary(const ec_progress_t *p, ec_node_progress_t *out);

/* Pure: whether `cur` is to be written now, given what was last written
 * (`last`, seq 0: nothing yet) at last_ms (monotonic).  *next_ms (may be
 * NULL) gets when to ask again if a change is held back by the rate
 * limits, else -1. */
bool ec_progress_publish_due(const ec_node_progress_t *last, int64_t last_ms,
                             const ec_node_progress_t *cur, int64_t silence_ms, int64_t now_ms,
                             int64_t *next_ms);

/* Pure: one rank's step time (us) from its window of (time ns, step)
 * samples, oldest first: the time between the first and the last sample
 * over the steps between them; 0 when fewer than 2 steps apart. */
int64_t ec_progress_step_us(const int64_t *t_ns, const uint64_t *step, int n);

#endif
