/* The rule under test: the command each local rank runs is decided once,
 * the way the imitated launchers decide it (a .py program under the
 * interpreter with -u, a --module with -m, --no_python or anything else as
 * given), and a command that cannot run on this node is reported with what
 * is missing before the node joins a job.
 */
#include "program.h"

#include <ec_check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ec_config_t cfg;
static ec_program_t prog;
static ec_error_t err;
static char dir[64], py[128], exe[128], path_env[256];

static const char *env(const char *name, void *arg)
{
    const char *const *e = arg;
    size_t n = strlen(name);
    for (; e && *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static char *argv_store[16];

static int resolve(const char **envv, char **argv)
{
    int argc = 0;
    while (argv[argc] && argc < 15) {
        argv_store[argc] = argv[argc];
        argc++;
    }
    argv_store[argc] = NULL;
    ec_program_release(&prog);
    ck_assert_int_eq(ec_config_parse(&cfg, "launch", argc, argv_store, env, envv, &err), 0);
    return ec_program_resolve(&cfg, env, envv, &prog, &err);
}

#define ARGS(...) ((char *[]){__VA_ARGS__, NULL})
#define ENVV(...) ((const char *[]){__VA_ARGS__, NULL})

static void write_file(const char *p, const char *text, mode_t mode)
{
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    chmod(p, mode);
}

static void setup(void)
{
    ec_config_t fresh = EC_CONFIG_INITIALIZER;
    cfg = fresh;
    cfg.hostname = "host-a";
    memset(&prog, 0, sizeof(prog));
    strcpy(dir, "/tmp/ec_prog_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(py, sizeof(py), "%s/train.py", dir);
    write_file(py, "print(1)\n", 0644);
    snprintf(exe, sizeof(exe), "%s/python3", dir); /* a stand-in interpreter */
    write_file(exe, "#!/bin/sh\n", 0755);
    snprintf(path_env, sizeof(path_env), "PATH=/nonexistent::%s", dir);
}

static void teardown(void)
{
    ec_program_release(&prog);
    ec_config_release(&cfg);
    unlink(py);
    unlink(exe);
    rmdir(dir);
}

START_TEST(py_program_runs_under_the_interpreter)
{
    ck_assert_int_eq(resolve(ENVV(path_env), ARGS("--", py, "--lr", "0.1")), 0);
    ck_assert_int_eq(prog.python, 1);
    ck_assert_int_eq(prog.argc, 5);
    ck_assert_str_eq(prog.argv[0], "python3");
    ck_assert_str_eq(prog.argv[1], "-u");
    ck_assert_str_eq(prog.argv[2], py);
    ck_assert_str_eq(prog.argv[4], "0.1");
    ck_assert_ptr_null(prog.argv[5]);
    ck_assert_str_eq(prog.resolved, exe); /* found in PATH, past a missing entry */
    /* a module */
    ck_assert_int_eq(resolve(ENVV(path_env), ARGS("--module", "pkg.train", "x")), 0);
    ck_assert_str_eq(prog.argv[2], "-m");
    ck_assert_str_eq(prog.argv[3], "pkg.train");
    /* the interpreter by path, through the environment */
    char e[200];
    snprintf(e, sizeof(e), "ECOORD_PYTHON=%s", exe);
    ck_assert_int_eq(resolve(ENVV(e, "PATH=/nonexistent"), ARGS(py)), 0);
    ck_assert_str_eq(prog.argv[0], exe);
}
END_TEST

START_TEST(anything_else_runs_as_given)
{
    ck_assert_int_eq(resolve(ENVV(path_env), ARGS("python3", py)), 0);
    ck_assert_int_eq(prog.python, 0);
    ck_assert_str_eq(prog.argv[0], "python3");
    ck_assert_str_eq(prog.argv[1], py);
    ck_assert_int_eq(resolve(ENVV(path_env), ARGS("/bin/sh", "-c", "true")), 0);
    ck_assert_str_eq(prog.resolved, "/bin/sh");
    /* ecoord torchrun: any script under the interpreter, unless --no_python */
    cfg.prog_always_python = 1;
    ec_program_release(&prog);
    ck_assert_int_eq(ec_program_resolve(&cfg, env, ENVV(path_env), &prog, &err), 0);
    ck_assert_int_eq(prog.python, 1);
    ck_assert_str_eq(prog.argv[2], "/bin/sh");
    ec_program_release(&prog);
    ck_assert_int_eq(resolve(ENVV(path_env), ARGS("--no_python", "/bin/sh")), 0);
    cfg.prog_always_python = 1;
    ec_program_release(&prog);
    ck_assert_int_eq(ec_program_resolve(&cfg, env, ENVV(path_env), &prog, &err), 0);
    ck_assert_int_eq(prog.python, 0);
}
END_TEST

START_TEST(unrunnable_says_what_is_missing)
{
    char missing[200];
    snprintf(missing, sizeof(missing), "%s/nope.py", dir);
    ck_assert_int_eq(resolve(ENVV(path_env), ARGS(missing)), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "cannot read the training program"));
    ck_assert_ptr_null(prog.argv);
    ck_assert_int_eq(resolve(ENVV("PATH=/nonexistent"), ARGS(py)), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "'python3' (the default) is not in PATH"));
    ck_assert_ptr_nonnull(strstr(err.msg, "--no_python"));
    ck_assert_int_eq(resolve(ENVV("PATH=/nonexistent", "ECOORD_PYTHON=/no/py"), ARGS(py)),
                     EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "(ECOORD_PYTHON) does not exist"));
    /* --no_python: the .py itself must be executable */
    ck_assert_int_eq(resolve(ENVV(path_env), ARGS("--no_python", py)), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "Permission denied"));
    ck_assert_int_eq(resolve(ENVV(path_env), ARGS("no-such-tool-ec15")), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "not found in PATH"));
    ck_assert_int_eq(resolve(ENVV(path_env), ARGS("/tmp")), EC_EINVAL); /* a directory */
    /* contradictory flags are the knob table's */
    argv_store[0] = "--module";
    argv_store[1] = "--no_python";
    argv_store[2] = "x";
    argv_store[3] = NULL;
    ck_assert_int_eq(ec_config_parse(&cfg, "launch", 3, argv_store, env, NULL, &err), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "contradict"));
    ec_program_release(&prog);
    ec_program_release(NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("program");
    TCase *tc = tcase_create("program");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, py_program_runs_under_the_interpreter);
    tcase_add_test(tc, anything_else_runs_as_given);
    tcase_add_test(tc, unrunnable_says_what_is_missing);
    suite_add_tcase(s, tc);
    return s;
}

EC_CHECK_MAIN(suite)
