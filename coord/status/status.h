/* `ecoord status`: the job at a glance, read-only. */
#ifndef EC_STATUS_H
#define EC_STATUS_H

#include <stdio.h>

#include "knobs.h"

/* Run `ecoord status` for a parsed config (cfg->cmd == EC_CMD_STATUS).
 * Prints to out (errors to errout).  Returns the process exit code:
 * 0 shown, 1 the job could not be read (message says why), 2 usage.
 *
 * Reads the job root with one prefix listing and never writes to etcd.
 * cfg->json prints one JSON object per snapshot, on one line (the fields are
 * documented at the top of status.c).  cfg->watch keeps printing after each
 * change until SIGINT or SIGTERM (handlers are installed for the duration of
 * the call and the previous ones restored) or until the job status says
 * completed or failed; all three end with 0. */
int ec_cmd_status(const ec_config_t *cfg, FILE *out, FILE *errout);

#endif
