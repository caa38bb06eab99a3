/* The training program's command line and the check that it can run. */
#define _GNU_SOURCE
#include "program.h"
#include "child.h"
#include "clock.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
/* A script whose #! interpreter is missing: exec says "No such file or
 * directory" of a file that exists, after the job formed.  Said here, before
 * anything starts.  0, or an error naming the #! line. */
static int shebang_missing(const char *file, const char *prog, ec_error_t *err)
{
    char line[256];
    FILE *f = fopen(file, "r");
    if (!f)
        return 0;
    bool got = fgets(line, sizeof(line), f) != NULL;
    fclose(f);
    if (!got || strncmp(line, "#!", 2))
        return 0;
    char *interp = line + 2;
    interp += strspn(interp, " \t");
    interp[strcspn(interp, " \t\r\n")] = '\0';
    if (!*interp || access(interp, X_OK) == 0)
        return 0;
    return ec_errorf(err, EC_EINVAL,
                     "cannot run the training program '%s': its #! line names '%s', which %s on "
                     "this node; fix that line, or run the script with its interpreter (e.g. "
                     "-- python3 %s)",
                     prog, interp, access(interp, F_OK) == 0 ? "is not executable" : "does not exist",
                     prog);
}

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

/* Every executable `name` in PATH, in PATH order, each file once (realpath:
 * /bin/python3 and /usr/bin/python3 are one where /bin links to /usr/bin).
 * Returns the count (at most max), paths malloc'd into out. */
static int find_all_exec(const char *name, const char *path, char **out, int max)
{
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    int n = 0;
    char real[EC_PROGRAM_CANDIDATES_MAX][PATH_MAX];
    for (const char *p = path; n < max;) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char cand[PATH_MAX];
        int w = len ? snprintf(cand, sizeof(cand), "%.*s/%s", (int)len, p, name)
                    : snprintf(cand, sizeof(cand), "./%s", name);
        if (w < (int)sizeof(cand) && executable(cand)) {
            char r[PATH_MAX];
            if (!realpath(cand, r))
                snprintf(r, sizeof(r), "%s", cand);
            int dup = 0;
            for (int i = 0; i < n && !dup; i++)
                dup = strcmp(real[i], r) == 0;
            if (!dup && (out[n] = strdup(cand))) {
                snprintf(real[n], sizeof(real[n]), "%s", r);
                n++;
            }
        }
        if (!e)
            break;
        p = e + 1;
    }
    return n;
}

/* Whether a line of Python imports the top-level package pkg: "import
 * pkg", "import os, pkg.x as y", "from pkg import x", "from pkg.a import
 * b", at any indentation. */
static int line_imports(const char *line, const char *pkg)
{
    size_t pl = strlen(pkg);
    while (*line == ' ' || *line == '\t')
        line++;
    int from = strncmp(line, "from", 4) == 0 && isspace((unsigned char)line[4]);
    if (!from && !(strncmp(line, "import", 6) == 0 && isspace((unsigned char)line[6])))
        return 0;
    const char *p = line + (from ? 4 : 6);
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '(')
            p++;
        if (strncmp(p, pkg, pl) == 0 && (p[pl] == '.' || p[pl] == ',' || p[pl] == '\0' ||
                                         p[pl] == '\n' || p[pl] == '\r' || isspace((unsigned char)p[pl])))
            return 1;
        if (from)
            return 0; /* one module after "from" */
        p = strchr(p, ',');
        if (!p)
            return 0;
        p++;
    }
}

const char *ec_program_needs(const ec_config_t *cfg)
{
    if (cfg->torchrun.on)
        return "torch";
    if (cfg->no_python || cfg->prog_argc < 1)
        return NULL;
    const char *prog = cfg->prog_argv[0];
    if (cfg->module)
        return strncmp(prog, "paddle", 6) == 0 && (prog[6] == '\0' || prog[6] == '.') ? "paddle"
                                                                                       : NULL;
    if (!ends_with(prog, ".py"))
        return NULL;
    FILE *f = fopen(prog, "re");
    if (!f)
        return NULL;
    char line[4096];
    const char *needs = NULL;
    /* the imports are at the top; a megabyte is far past them */
    for (int n = 0; !needs && n < 20000 && fgets(line, sizeof(line), f); n++)
        if (line_imports(line, "paddle"))
            needs = "paddle";
    fclose(f);
    return needs;
}

int ec_program_probe(const char *python, const char *module, char *why, size_t len, void *arg)
{
    int timeout_ms = arg ? *(const int *)arg : EC_PROGRAM_PROBE_MS;
    char code[256];
    /* and its version, on stderr's last line once imported */
    snprintf(code, sizeof(code),
             "import %s, sys; sys.stderr.write('\\n' + str(getattr(%s, '__version__', '')))",
             module, module);
    int errp[2];
    if (pipe2(errp, O_CLOEXEC) < 0) {
        snprintf(why, len, "cannot ask it: pipe: %s", strerror(errno));
        return -1;
    }
    sigset_t saved;
    ec_child_fork_begin(&saved);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0); /* its children too go with a kill of the group */
        if (ec_child_reset(SIGKILL, parent) < 0)
            _exit(127);
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
        }
        dup2(errp[1], 2);
        execl(python, python, "-c", code, (char *)NULL);
        _exit(127);
    }
    int fork_errno = errno;
    ec_child_fork_end(&saved);
    close(errp[1]);
    if (pid < 0) {
        close(errp[0]);
        snprintf(why, len, "cannot ask it: fork: %s", strerror(fork_errno));
        return -1;
    }
    setpgid(pid, pid);
    /* its stderr, whose last line says why an import failed */
    char buf[4096];
    size_t used = 0;
    int64_t deadline = ec_mono_ms() + timeout_ms;
    int timed_out = 0;
    for (;;) {
        int64_t left = deadline - ec_mono_ms();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pf = {errp[0], POLLIN, 0};
        int r = poll(&pf, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue; /* the deadline check above ends it */
        if (used == sizeof(buf) - 1) { /* keep the end */
            memmove(buf, buf + sizeof(buf) / 2, used - sizeof(buf) / 2);
            used -= sizeof(buf) / 2;
        }
        ssize_t got = read(errp[0], buf + used, sizeof(buf) - 1 - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break; /* EOF: it exited (or closed stderr) */
        used += (size_t)got;
    }
    close(errp[0]);
    int st = 0;
    if (timed_out) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        snprintf(why, len, "no answer to `%s -c \"%s\"` within %d s", python, code,
                 (timeout_ms + 999) / 1000);
        return -1;
    }
    /* stderr closed: it exits now; one that closed stderr and lives on is
     * given the rest of the deadline */
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            snprintf(why, len, "cannot ask it: waitpid: %s", strerror(errno));
            return -1;
        }
        if (ec_mono_ms() >= deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            snprintf(why, len, "no answer to `%s -c \"%s\"` within %d s", python, code,
                     (timeout_ms + 999) / 1000);
            return -1;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    /* the last non-empty line of its stderr: the version, or why not */
    buf[used] = '\0';
    while (used > 0 && isspace((unsigned char)buf[used - 1]))
        buf[--used] = '\0';
    char *last = strrchr(buf, '\n');
    last = last ? last + 1 : buf;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        snprintf(why, len, "%.63s", last);
        return 1;
    }
    if (*last)
        snprintf(why, len, "%.300s", last);
    else if (WIFSIGNALED(st))
        snprintf(why, len, "`import %s` was killed by signal %d", module, WTERMSIG(st));
    else
        snprintf(why, len, "`import %s` exited %d", module, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127 && !*last)
        snprintf(why, len, "it cannot be run");
    return 0;
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

/* What the user would run to find the interpreter that has `needs`. */
static const char *fix_hint(const char *needs)
{
    return !strcmp(needs, "torch")
               ? "the one torchrun runs under: head -1 $(which torchrun)"
               : "the interpreter you ran `python -m paddle.distributed.launch` with";
}

/* The interpreter for cfg: into out->resolved, with out->why; 0 or an error. */
static int choose_python(const ec_config_t *cfg, const char *path, ec_program_probe_fn probe,
                         void *probe_arg, ec_program_t *out, ec_error_t *err)
{
    const char *prog = cfg->prog_argv[0];
    const char *needs = probe ? out->needs : NULL;
    const ec_source_t *src = &cfg->src[EC_K_PYTHON];
    const char *how = src->kind == EC_SRC_FLAG  ? "--python"
                      : src->kind == EC_SRC_ENV ? (src->name ? src->name : "ECOORD_PYTHON")
                                                : "the default";
    const char *under = cfg->torchrun.on ? "under ecoord torchrun, as torchrun runs it with its own "
                                           "interpreter"
                                         : "as Paddle's launcher runs it with its own interpreter";
    char why[400] = "";
    if (cfg->src[EC_K_PYTHON].kind != EC_SRC_DEFAULT || !needs) {
        if (!(out->resolved = find_exec(cfg->python, path))) {
            int e = errno;
            return ec_errorf(err, EC_EINVAL,
                             "%s is run as '%s -u %s%s ...', but the interpreter '%s' (%s) %s; set "
                             "ECOORD_PYTHON or --python to a Python that has your training's "
                             "packages, e.g. --python=/usr/bin/python3%s",
                             prog, cfg->python, cfg->module ? "-m " : "", prog, cfg->python, how,
                             e == ENOENT && !strchr(cfg->python, '/') ? "is not in PATH"
                             : e == ENOENT                            ? "does not exist"
                                                                      : strerror(e),
                             cfg->module ? "" : ", or pass --no_python to run the program as given");
        }
        if (cfg->src[EC_K_PYTHON].kind == EC_SRC_DEFAULT) {
            snprintf(out->why, sizeof(out->why),
                     "interpreter %s: the first python3 on PATH (%s needs no particular package; "
                     "--python or ECOORD_PYTHON picks another)",
                     out->resolved, prog);
            return 0;
        }
        int r = needs ? probe(out->resolved, needs, why, sizeof(why), probe_arg) : 1;
        if (r == 1 && needs)
            snprintf(out->version, sizeof(out->version), "%s", why);
        if (r == 0)
            return ec_errorf(err, EC_EINVAL,
                             "the interpreter %s (%s) cannot import %s (%s), which %s needs %s; "
                             "pass --python=PATH or set ECOORD_PYTHON to a Python that has %s "
                             "(%s), e.g. --python=/usr/bin/python3",
                             out->resolved, how, needs, why, prog, under, needs, fix_hint(needs));
        if (r < 0)
            snprintf(out->note, sizeof(out->note),
                     "cannot tell whether %s (%s) imports %s: %s; using it anyway", out->resolved,
                     how, needs, why);
        snprintf(out->why, sizeof(out->why), "interpreter %s: %s%s%s%s", out->resolved,
                 how[0] == '-' ? "given by " : "", how, needs ? ", imports " : "",
                 needs ? needs : "");
        return 0;
    }
    /* the first python3 on PATH that imports what the program needs */
    char *cand[EC_PROGRAM_CANDIDATES_MAX] = {0};
    int n = find_all_exec(cfg->python, path, cand, EC_PROGRAM_CANDIDATES_MAX);
    char tried[2048] = "";
    size_t tl = 0;
    int chosen = -1, unsure = -1;
    for (int i = 0; i < n && chosen < 0; i++) {
        char w[400] = "";
        int r = probe(cand[i], needs, w, sizeof(w), probe_arg);
        if (r == 1) {
            snprintf(out->version, sizeof(out->version), "%s", w);
            chosen = i;
            break;
        }
        if (r < 0 && unsure < 0)
            unsure = i;
        tl += (size_t)snprintf(tried + tl, tl < sizeof(tried) ? sizeof(tried) - tl : 0, "%s%s (%s)",
                               tl ? ", " : "", cand[i], w);
    }
    if (chosen < 0 && unsure >= 0) {
        chosen = unsure; /* none said no to the end: the first that did not say no */
        snprintf(out->note, sizeof(out->note),
                 "no python3 on PATH was seen to import %s; using %s, which did not answer in "
                 "time (%.300s)",
                 needs, cand[unsure], tried);
    }
    int rc = 0;
    if (chosen < 0) {
        rc = ec_errorf(err, EC_EINVAL,
                       "%s needs a Python that imports %s (%s), and no python3 on PATH does: %s; "
                       "pass --python=PATH or set ECOORD_PYTHON to the interpreter that has %s "
                       "(%s), e.g. --python=/usr/bin/python3",
                       prog, needs, under, n ? tried : "there is none", needs, fix_hint(needs));
    } else {
        out->resolved = cand[chosen];
        cand[chosen] = NULL;
        snprintf(out->why, sizeof(out->why),
                 "interpreter %s: the first python3 on PATH that imports %s (%s)%s%.600s",
                 out->resolved, needs, under, tried[0] ? "; skipped " : "", tried);
    }
    for (int i = 0; i < n; i++)
        free(cand[i]);
    return rc;
}

int ec_program_resolve(const ec_config_t *cfg, ec_getenv_fn env, void *env_arg,
                       ec_program_probe_fn probe, void *probe_arg, ec_program_t *out,
                       ec_error_t *err)
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
        out->argv[n++] = cfg->python; /* the interpreter chosen, below */
        out->argv[n++] = "-u"; /* unbuffered, so the log shows the last line before a crash */
        if (cfg->module)
            out->argv[n++] = "-m";
    }
    for (int i = 0; i < cfg->prog_argc; i++)
        out->argv[n++] = cfg->prog_argv[i];
    out->argc = n;
    out->python = python;

    if (python) {
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
        out->needs = ec_program_needs(cfg);
        if (choose_python(cfg, path, probe, probe_arg, out, err) < 0)
            goto fail;
        out->argv[0] = out->resolved;
        return 0;
    }
    if (!(out->resolved = find_exec(prog, path))) {
        int e = errno;
        /* as a shell, a bare name is looked up in PATH only */
        bool here = e == ENOENT && !strchr(prog, '/') && access(prog, F_OK) == 0;
        ec_errorf(err, EC_EINVAL,
                  "cannot run the training program '%s': %s; check the program after '--': that "
                  "it exists on this node, is in PATH or given with its path, and is executable%s%s%s",
                  prog,
                  e == ENOENT && !strchr(prog, '/') ? "not found in PATH" : strerror(e),
                  ends_with(prog, ".py") ? " (drop --no_python to run it with python3)" : "",
                  here ? "; the one in the current directory is ./" : "", here ? prog : "");
        goto fail;
    }
    if (shebang_missing(out->resolved, prog, err) < 0)
        goto fail;
    return 0;
fail:
    ec_program_release(out);
    return err ? err->code : EC_EINVAL;
}
