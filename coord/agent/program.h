/* The command that runs the training program, decided once per agent:
 * a PROGRAM ending in .py runs under the Python interpreter the way
 * Paddle's launcher and torchrun run it (INTERPRETER -u PROGRAM ARGS...),
 * --module runs INTERPRETER -u -m PROGRAM ARGS..., --no_python or any other
 * PROGRAM runs as given (under `ecoord torchrun`, cfg->prog_always_python:
 * any PROGRAM runs under the interpreter unless --no_python).  And whether that command can run at all on this
 * node, checked before the node joins a job: a missing script or
 * interpreter is this node's configuration error, not a failure of a rank
 * to restart.
 *
 * The interpreter is the one the launcher the user came from would use.
 * torchrun and Paddle's launcher run the script with their own interpreter
 * (sys.executable), which by definition imports torch or paddle; ecoord is
 * not Python, so it picks one: --python (ECOORD_PYTHON) when given, else
 * the first python3 on PATH that imports what the program needs (torch
 * under `ecoord torchrun`, paddle for a Paddle program under `ecoord
 * launch`), else the first python3 on PATH.  Each candidate is asked with
 * `INTERPRETER -c "import MODULE"` through a probe with a deadline. */
#ifndef EC_PROGRAM_H
#define EC_PROGRAM_H

#include <stddef.h>

#include "error.h"
#include "knobs.h"

/* How long a probe waits for `import MODULE` (torch's import takes seconds
 * on a cold cache or a network filesystem). */
#define EC_PROGRAM_PROBE_MS 30000
/* At most this many python3 on PATH are asked. */
#define EC_PROGRAM_CANDIDATES_MAX 16

typedef struct ec_program {
    int argc;
    char **argv;      /* NULL-terminated, for execvp; strings borrowed from cfg, but
                       * argv[0] of a python program, which is `resolved` */
    int python;       /* 1: the interpreter runs it (argv[0] is the interpreter) */
    char *resolved;   /* argv[0] as found (a path), for messages; malloc'd */
    const char *needs; /* the module the interpreter had to import ("torch",
                        * "paddle"), or NULL; static */
    char why[1024];   /* the interpreter and why it was chosen, one line, for the
                       * console; "" when the program runs as given */
    char note[512];   /* a warning to log (a probe that could not tell), or "" */
    char version[64]; /* `needs`' __version__ as the chosen interpreter imports it
                       * ("2.11.0+cu128"), or "" when not probed or unknown */
} ec_program_t;

/* Whether interpreter `python` (a path) imports `module`: 1 yes, 0 no,
 * -1 could not tell (it did not answer in time, or could not run).  why
 * gets a short reason for 0 and -1 ("ModuleNotFoundError: No module named
 * 'torch'", "no answer within 30 s"), and for 1 the module's __version__
 * ("" when it has none). */
typedef int (*ec_program_probe_fn)(const char *python, const char *module, char *why,
                                   size_t len, void *arg);

/* The probe that runs `python -c "import MODULE"` with stdin and stdout on
 * /dev/null, default signal dispositions and its own process group, and
 * kills it (the group) past *(int *)arg ms (NULL: EC_PROGRAM_PROBE_MS).
 * Forks: call it before anything that must be the process's only child
 * (coord/agent/procs.h). */
int ec_program_probe(const char *python, const char *module, char *why, size_t len, void *arg);

/* The module a program needs its interpreter to import: "torch" under
 * `ecoord torchrun` (cfg->torchrun.on); "paddle" for a Paddle program (a
 * script with an `import paddle` or `from paddle` line, or a --module
 * named paddle...); else NULL.  Reads the script. */
const char *ec_program_needs(const ec_config_t *cfg);

/* Build the command for cfg (cfg->cmd == EC_CMD_LAUNCH) and check that it can
 * run: the interpreter or program is an executable file (a name without '/'
 * is looked up in the PATH that env gives), a script is a readable file,
 * and the interpreter imports what the program needs (probe; NULL: not
 * checked, the first python3 on PATH is taken).  Returns 0, or EC_EINVAL
 * with err saying what is missing and how to fix it (for an interpreter
 * without the module: which ones were tried, --python and ECOORD_PYTHON),
 * or EC_ENOMEM.  On error *out holds nothing to release. */
int ec_program_resolve(const ec_config_t *cfg, ec_getenv_fn env, void *env_arg,
                       ec_program_probe_fn probe, void *probe_arg, ec_program_t *out,
                       ec_error_t *err);
/* Accepts a zeroed or released program; preserves errno. */
void ec_program_release(ec_program_t *p);

#endif
