/* The command that runs the training program, decided once per agent:
 * a PROGRAM ending in .py runs under the Python interpreter the way
 * Paddle's launcher and torchrun run it (INTERPRETER -u PROGRAM ARGS...),
 * --module runs INTERPRETER -u -m PROGRAM ARGS..., --no_python or any other
 * PROGRAM runs as given (under `ecoord torchrun`, cfg->prog_always_python:
 * any PROGRAM runs under the interpreter unless --no_python).  And whether that command can run at all on this
 * node, checked before the node joins a job: a missing script or
 * interpreter is this node's configuration error, not a failure of a rank
 * to restart. */
#ifndef EC_PROGRAM_H
#define EC_PROGRAM_H

#include "error.h"
#include "knobs.h"

typedef struct ec_program {
    int argc;
    char **argv;      /* NULL-terminated, for execvp; strings borrowed from cfg */
    int python;       /* 1: the interpreter runs it (argv[0] is cfg->python) */
    char *resolved;   /* argv[0] as found (a path), for messages; malloc'd */
} ec_program_t;

/* Build the command for cfg (cfg->cmd == EC_CMD_LAUNCH) and check that it can
 * run: the interpreter or program is an executable file (a name without '/'
 * is looked up in the PATH that env gives), a script is a readable file.
 * Returns 0, or EC_EINVAL with err saying what is missing and how to fix it,
 * or EC_ENOMEM.  On error *out holds nothing to release. */
int ec_program_resolve(const ec_config_t *cfg, ec_getenv_fn env, void *env_arg,
                       ec_program_t *out, ec_error_t *err);
/* Accepts a zeroed or released program; preserves errno. */
void ec_program_release(ec_program_t *p);

#endif
