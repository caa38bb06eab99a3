/* `ecoord status`: the job at a glance, read-only. */
#ifndef EC_STATUS_H
#define EC_STATUS_H

#include <stdio.h>

#include "knobs.h"

/* Run `ecoord status` for a parsed config (cfg->cmd == EC_CMD_STATUS).
 * Prints to out (errors to errout).  Returns the process exit code:
 * 0 shown, 1 the job could not be read (message says why), 2 usage. */
int ec_cmd_status(const ec_config_t *cfg, FILE *out, FILE *errout);

#endif
