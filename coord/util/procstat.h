/* A process's state, process group and start time, from /proc/<pid>/stat
 * (fields 3, 5 and 22): what the janitor (is it still the process it was
 * told of?) and the agent's progress sampling (is a rank stopped?) read.
 * Async-signal-safe: no stdio, no allocation. */
#ifndef EC_PROCSTAT_H
#define EC_PROCSTAT_H

#include <stdbool.h>
#include <sys/types.h>

/* false if pid is gone (or its stat cannot be parsed).  Any of the outputs
 * may be NULL. */
bool ec_proc_stat(pid_t pid, char *state, pid_t *pgrp, unsigned long long *start);

#endif
