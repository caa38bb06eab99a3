/* Logging through a sink the host program owns.  Library code never writes
 * to stderr itself: with no sink installed, messages are dropped. */
#ifndef EC_LOG_H
#define EC_LOG_H

#include <stdbool.h>

typedef enum { EC_LOG_DEBUG = 0, EC_LOG_INFO, EC_LOG_WARN, EC_LOG_ERROR } ec_log_level_t;

typedef void (*ec_log_cb)(ec_log_level_t level, const char *msg, void *arg);

/* Install (or with cb NULL remove) the process-wide sink.  Not thread-safe
 * against concurrent ec_log() calls: set it once at start. */
void ec_log_set_sink(ec_log_cb cb, void *arg, ec_log_level_t min_level);
void ec_log(ec_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *ec_log_level_name(ec_log_level_t level);
/* Whether a message of this level reaches the sink (to skip building one). */
bool ec_log_enabled(ec_log_level_t level);

#endif
