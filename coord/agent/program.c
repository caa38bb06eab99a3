/* The training program's command line and the check that it can run. */
#include "program.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcmp(s + n - m, suffix) == 0;
}

/* Whether path is a regular file this user may execute; errno says why not. */
static int executable(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return 0;
    if (S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return 0;
    }
    return access(path, X_OK) == 0;
}

/* name as execvp finds it: itself when it holds a '/', else the first
 * executable PATH entry.  Returns a malloc'd path, or NULL with errno
 * (ENOENT: nowhere in PATH). */
static char *find_exec(const char *name, const char *path)
{
    if (strchr(name, '/'))
        return executable(name) ? strdup(name) : NULL;
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin"; /* execvp's default, roughly */
    int first = 0;
    for (const char *p = path;; p++) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char cand[PATH_MAX];
        int len = n ? snprintf(cand, sizeof(cand), "%.*s/%s", (int)n, p, name)
                    : snprintf(cand, sizeof(cand), "./%s", name); /* empty entry: "." */
        if (len < (int)sizeof(cand) && executable(cand))
            return strdup(cand);
        if (!first && errno == EACCES)
            first = EACCES; /* found but not executable: say so rather than "not found" */
        if (!e)
            break;
        p = e;
    }
    errno = first ? first : ENOENT;
    return NULL;
}

void ec_program_release(ec_program_t *p)
{
    if (!p)
        return;
    int saved = errno;
    free(p->argv);
    free(p->resolved);
    memset(p, 0, sizeof(*p));
    errno = saved;
}

int ec_program_resolve(const ec_config_t *cfg, ec_getenv_fn env, void *env_arg,
                       ec_program_t *out, ec_error_t *err)
{
    memset(out, 0, sizeof(*out));
    if (cfg->prog_argc < 1)
        return ec_errorf(err, EC_EINVAL, "no training program given: ecoord launch [FLAGS] "
                                         "[--] PROGRAM [ARGS...]");
    const char *prog = cfg->prog_argv[0];
    const char *path = env ? env("PATH", env_arg) : NULL;
    int python = !cfg->no_python &&
                 (cfg->module || cfg->prog_always_python || ends_with(prog, ".py"));
    int extra = python ? (cfg->module ? 3 : 2) : 0;
    out->argv = calloc((size_t)cfg->prog_argc + (size_t)extra + 1, sizeof(char *));
    if (!out->argv)
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    int n = 0;
    if (python) {
        out->argv[n++] = cfg->python;
        out->argv[n++] = "-u"; /* unbuffered, so the log shows the last line before a crash */
        if (cfg->module)
            out->argv[n++] = "-m";
    }
    for (int i = 0; i < cfg->prog_argc; i++)
        out->argv[n++] = cfg->prog_argv[i];
    out->argc = n;
    out->python = python;

    const char *how = cfg->src[EC_K_PYTHON].kind == EC_SRC_FLAG  ? "--python"
                      : cfg->src[EC_K_PYTHON].kind == EC_SRC_ENV ? "ECOORD_PYTHON"
                                                                 : "the default";
    if (python) {
        if (!(out->resolved = find_exec(cfg->python, path))) {
            int e = errno;
            ec_errorf(err, EC_EINVAL,
                      "%s is run as '%s -u %s%s ...', but the interpreter '%s' (%s) %s; set "
                      "ECOORD_PYTHON or --python to a Python that has your training's packages, "
                      "e.g. --python=/usr/bin/python3%s",
                      prog, cfg->python, cfg->module ? "-m " : "", prog, cfg->python, how,
                      e == ENOENT && !strchr(cfg->python, '/') ? "is not in PATH"
                      : e == ENOENT                            ? "does not exist"
                                                               : strerror(e),
                      cfg->module ? "" : ", or pass --no_python to run the program as given");
            goto fail;
        }
        if (!cfg->module && access(prog, R_OK) != 0) {
            int e = errno;
            char cwd[PATH_MAX] = "";
            if (prog[0] != '/' && !getcwd(cwd, sizeof(cwd)))
                cwd[0] = '\0';
            ec_errorf(err, EC_EINVAL,
                      "cannot read the training program %s: %s%s%s%s; check the path after '--' "
                      "(every node needs its own copy)",
                      prog, strerror(e), cwd[0] ? " (relative to " : "", cwd,
                      cwd[0] ? ")" : "");
            goto fail;
        }
        return 0;
    }
    if (!(out->resolved = find_exec(prog, path))) {
        int e = errno;
        ec_errorf(err, EC_EINVAL,
                  "cannot run the training program '%s': %s; check the program after '--': that "
                  "it exists on this node, is in PATH or given with its path, and is executable%s",
                  prog,
                  e == ENOENT && !strchr(prog, '/') ? "not found in PATH" : strerror(e),
                  ends_with(prog, ".py") ? " (drop --no_python to run it with python3)" : "");
        goto fail;
    }
    return 0;
fail:
    ec_program_release(out);
    return err ? err->code : EC_EINVAL;
}
