/* `ecoord launch`: the per-node agent. */
#ifndef EC_LAUNCH_H
#define EC_LAUNCH_H

#include "knobs.h"

/* Run the agent for a parsed config (cfg->cmd == EC_CMD_LAUNCH); returns the
 * process exit code (0 done, 1 failure, 101 this node failed in a fixed-size
 * job, 128+signal when stopped by one). */
int ec_cmd_launch(const ec_config_t *cfg);

#endif
