/* Process-wide log sink (flux_log_set_redirect style). */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

static ec_log_cb sink_cb;
static void *sink_arg;
static ec_log_level_t sink_min = EC_LOG_INFO;

void ec_log_set_sink(ec_log_cb cb, void *arg, ec_log_level_t min_level)
{
    sink_cb = cb;
    sink_arg = arg;
    sink_min = min_level;
}

void ec_log(ec_log_level_t level, const char *fmt, ...)
{
    if (!sink_cb || level < sink_min)
        return;
    int saved = errno;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    sink_cb(level, buf, sink_arg);
    errno = saved;
}

bool ec_log_enabled(ec_log_level_t level)
{
    return sink_cb && level >= sink_min;
}

const char *ec_log_level_name(ec_log_level_t level)
{
    switch (level) {
    case EC_LOG_DEBUG: return "DEBUG";
    case EC_LOG_INFO: return "INFO";
    case EC_LOG_WARN: return "WARN";
    case EC_LOG_ERROR: return "ERROR";
    }
    return "INFO";
}
