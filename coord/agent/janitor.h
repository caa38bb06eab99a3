/* The janitor: a small process the agent forks once, before any rank, that
 * stops what the ranks started when the agent dies without doing it itself
 * (SIGKILL, the OOM killer, a crash).
 *
 * The kernel kills each rank's main process with the agent
 * (PR_SET_PDEATHSIG), but not what that process started: a `sleep &` of a
 * wrapper script, a DataLoader worker, orphaned to init.  The janitor holds
 * one end of a socket pair whose other end only the agent holds
 * (close-on-exec: no rank inherits it).  The agent tells it each rank's
 * process group as the rank starts, the groups that are gone, and the
 * orphans it adopted; when the socket reads end-of-file — the agent died or
 * exited without saying goodbye — the janitor SIGKILLs every group and
 * orphan it still knows, after checking that each is still the agent's and
 * not a later process that reused the number, then exits.  A normal exit
 * (ec_janitor_stop) makes it exit without killing anything.
 *
 * It is also the watchdog of a frozen agent (ec_janitor_deadline): the
 * ranks are SIGKILLed when the agent stops renewing its fence deadline.
 *
 * No root, no cgroups.  Its kill step is bounded (EC_JANITOR_KILL_MS). */
#ifndef EC_JANITOR_H
#define EC_JANITOR_H

#include <stdint.h>
#include <sys/types.h>

#include "error.h"

typedef struct ec_janitor ec_janitor_t;

/* How long the janitor keeps killing after the agent died (processes that
 * fork while being killed, a member stuck in state D) before it exits. */
#define EC_JANITOR_KILL_MS 3000

/* Fork the janitor (a child of the caller, in a process group of its own).
 * Call from the process that will start the ranks, before starting any.
 * NULL with err filled when it cannot be started. */
ec_janitor_t *ec_janitor_start(ec_error_t *err);
pid_t ec_janitor_pid(const ec_janitor_t *j); /* 0 once it is gone */

/* A rank's process group: pgid is the rank's pid, announced right after
 * fork while it is not reaped (its start time is read here). */
void ec_janitor_group(ec_janitor_t *j, pid_t pgid);
/* The group has no member left: never to be killed by its number again. */
void ec_janitor_group_gone(ec_janitor_t *j, pid_t pgid);
/* A descendant of a rank that became the caller's child (its parent died),
 * possibly outside any rank's group; announced while it is not reaped. */
void ec_janitor_orphan(ec_janitor_t *j, pid_t pid);

/* The watchdog: kill_at_ms is a CLOCK_MONOTONIC time (ms; the clock is
 * system-wide) at which the janitor SIGKILLs every rank's group and every
 * orphan it knows, unless a newer deadline came first; 0 disarms it.  A
 * live agent renews it while its lease is confirmed and disarms it when it
 * fences itself, so it fires only when the agent is frozen (SIGSTOP, stuck
 * in the kernel): see coord/agent/launch.c.  It fires once, logs one line to
 * stderr, and stays disarmed until the next deadline.  Sent only when it
 * changes; never blocks. */
void ec_janitor_deadline(ec_janitor_t *j, int64_t kill_at_ms);

/* The janitor exited by itself (the caller reaped it): forget it. */
void ec_janitor_lost(ec_janitor_t *j);

/* Normal exit, after the caller stopped its processes: tell the janitor to
 * exit without killing anything, and reap it (at most EC_JANITOR_KILL_MS).
 * Accepts NULL. */
void ec_janitor_stop(ec_janitor_t *j);

#endif
