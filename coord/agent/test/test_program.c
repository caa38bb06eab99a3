/* The rule under test: the command each local rank runs is decided once,
 * the way the imitated launchers decide it (a .py program under the
 * interpreter with -u, a --module with -m, --no_python or anything else as
 * given), with the interpreter the imitated launcher would use (its own,
 * which imports torch or paddle: --python when given, else the first
 * python3 on PATH that imports what the program needs), and a command that
 * cannot run on this node is reported with what is missing before the node
 * joins a job.
 */
#include "program.h"
#include "clock.h"

#include <ec_check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ec_config_t cfg;
static ec_program_t prog;
static ec_error_t err;
static char dir[64], py[128], exe[128], path_env[256], dir2[64], exe2[128], path2_env[300];

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

/* A stand-in for ec_program_probe: which interpreters import what.  A path
 * listed in `yes` imports everything; in `slow` it never answers. */
static const char *yes[4], *slow[4];
static int nprobed;

static int fake_probe(const char *python, const char *module, char *why, size_t len, void *arg)
{
    (void)arg;
    nprobed++;
    for (int i = 0; i < 4; i++) {
        if (yes[i] && !strcmp(yes[i], python))
            return 1;
        if (slow[i] && !strcmp(slow[i], python)) {
            snprintf(why, len, "no answer within 30 s");
            return -1;
        }
    }
    snprintf(why, len, "ModuleNotFoundError: No module named '%s'", module);
    return 0;
}

static int resolve_probed(const char **envv, char **argv, int torchrun)
{
    int argc = 0;
    while (argv[argc] && argc < 15) {
        argv_store[argc] = argv[argc];
        argc++;
    }
    argv_store[argc] = NULL;
    ec_program_release(&prog);
    ck_assert_int_eq(ec_config_parse(&cfg, "launch", argc, argv_store, env, envv, &err), 0);
    if (torchrun) {
        cfg.prog_always_python = 1;
        cfg.torchrun.on = 1;
    }
    nprobed = 0;
    return ec_program_resolve(&cfg, env, envv, fake_probe, NULL, &prog, &err);
}

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
    return ec_program_resolve(&cfg, env, envv, NULL, NULL, &prog, &err);
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
    /* a second python3, later on PATH */
    strcpy(dir2, "/tmp/ec_prog2_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir2));
    snprintf(exe2, sizeof(exe2), "%s/python3", dir2);
    write_file(exe2, "#!/bin/sh\n", 0755);
    snprintf(path2_env, sizeof(path2_env), "PATH=%s:/nonexistent:%s:%s", dir, dir, dir2);
    memset(yes, 0, sizeof(yes));
    memset(slow, 0, sizeof(slow));
}

static void teardown(void)
{
    ec_program_release(&prog);
    ec_config_release(&cfg);
    unlink(py);
    unlink(exe);
    rmdir(dir);
    unlink(exe2);
    rmdir(dir2);
}

START_TEST(py_program_runs_under_the_interpreter)
{
    ck_assert_int_eq(resolve(ENVV(path_env), ARGS("--", py, "--lr", "0.1")), 0);
    ck_assert_int_eq(prog.python, 1);
    ck_assert_int_eq(prog.argc, 5);
    ck_assert_str_eq(prog.argv[0], exe); /* the interpreter found, not its name */
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

/* ecoord torchrun: the interpreter is one that imports torch, as torchrun's
 * own does: the first python3 on PATH that does (each asked once, the same
 * file once), said in one line with the ones passed over. */
START_TEST(torchrun_takes_the_first_python3_on_path_that_imports_torch)
{
    yes[0] = exe2;
    ck_assert_msg(resolve_probed(ENVV(path2_env), ARGS(py), 1) == 0, "%s", err.msg);
    ck_assert_str_eq(prog.argv[0], exe2);
    ck_assert_str_eq(prog.needs, "torch");
    ck_assert_int_eq(nprobed, 2); /* dir's python3 is on PATH twice: asked once */
    ck_assert_ptr_nonnull(strstr(prog.why, exe2));
    ck_assert_ptr_nonnull(strstr(prog.why, "the first python3 on PATH that imports torch"));
    ck_assert_ptr_nonnull(strstr(prog.why, exe)); /* the one passed over, and why */
    ck_assert_ptr_nonnull(strstr(prog.why, "No module named 'torch'"));
    /* the first one has torch: nothing else is asked */
    yes[0] = exe;
    ck_assert_int_eq(resolve_probed(ENVV(path2_env), ARGS(py), 1), 0);
    ck_assert_str_eq(prog.argv[0], exe);
    ck_assert_int_eq(nprobed, 1);
    /* one that never answers is passed over, and taken only if nothing else is
     * seen to import torch, with a warning */
    yes[0] = NULL;
    slow[0] = exe;
    ck_assert_int_eq(resolve_probed(ENVV(path2_env), ARGS(py), 1), 0);
    ck_assert_str_eq(prog.argv[0], exe);
    ck_assert_ptr_nonnull(strstr(prog.note, "did not answer in time"));
    yes[0] = exe2;
    ck_assert_int_eq(resolve_probed(ENVV(path2_env), ARGS(py), 1), 0);
    ck_assert_str_eq(prog.argv[0], exe2);
    ck_assert_str_eq(prog.note, "");
}
END_TEST

START_TEST(no_interpreter_with_torch_names_those_tried_and_the_fix)
{
    ck_assert_int_eq(resolve_probed(ENVV(path2_env), ARGS(py), 1), EC_EINVAL);
    ck_assert_ptr_null(prog.argv);
    ck_assert_msg(strstr(err.msg, exe) && strstr(err.msg, exe2), "%s", err.msg);
    ck_assert_ptr_nonnull(strstr(err.msg, "No module named 'torch'"));
    ck_assert_ptr_nonnull(strstr(err.msg, "--python="));
    ck_assert_ptr_nonnull(strstr(err.msg, "ECOORD_PYTHON"));
    /* no python3 on PATH at all */
    ck_assert_int_eq(resolve_probed(ENVV("PATH=/nonexistent"), ARGS(py), 1), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "there is none"));
}
END_TEST

/* An interpreter the user named is the one used, but it must import what
 * the program needs: named by --python or ECOORD_PYTHON, the fix says so. */
START_TEST(a_named_interpreter_must_import_what_the_program_needs)
{
    char flag[200], e[200];
    snprintf(flag, sizeof(flag), "--python=%s", exe);
    ck_assert_int_eq(resolve_probed(ENVV(path2_env), ARGS(flag, py), 1), EC_EINVAL);
    ck_assert_msg(strstr(err.msg, exe) && strstr(err.msg, "(--python) cannot import torch"),
                  "%s", err.msg);
    ck_assert_ptr_nonnull(strstr(err.msg, "No module named 'torch'"));
    snprintf(e, sizeof(e), "ECOORD_PYTHON=%s", exe);
    ck_assert_int_eq(resolve_probed(ENVV(e, path2_env), ARGS(py), 1), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "(ECOORD_PYTHON) cannot import torch"));
    /* named and able: used, even when an earlier python3 would do too */
    yes[0] = exe2;
    yes[1] = exe;
    snprintf(flag, sizeof(flag), "--python=%s", exe2);
    ck_assert_int_eq(resolve_probed(ENVV(path2_env), ARGS(flag, py), 1), 0);
    ck_assert_str_eq(prog.argv[0], exe2);
    ck_assert_ptr_nonnull(strstr(prog.why, "--python"));
    /* one that cannot tell: used, with a warning */
    memset(yes, 0, sizeof(yes));
    slow[0] = exe2;
    ck_assert_int_eq(resolve_probed(ENVV(path2_env), ARGS(flag, py), 1), 0);
    ck_assert_ptr_nonnull(strstr(prog.note, "cannot tell"));
}
END_TEST

/* ecoord launch checks the interpreter of a Paddle program (one that
 * imports paddle, or -m paddle...) for paddle, the way it checks torch under
 * ecoord torchrun; any other program needs no particular package, and its
 * interpreter is the first python3 on PATH, unasked. */
START_TEST(a_paddle_program_needs_an_interpreter_with_paddle)
{
    static const char *const imports[] = {
        "import paddle\n", "import os, paddle.distributed as dist\n",
        "from paddle.io import DataLoader\n", "def f():\n    import paddle\n",
        "import numpy\nfrom paddle import nn\n"};
    for (size_t i = 0; i < sizeof(imports) / sizeof(imports[0]); i++) {
        write_file(py, imports[i], 0644);
        ck_assert_int_eq(resolve_probed(ENVV(path2_env), ARGS(py), 0), EC_EINVAL);
        ck_assert_msg(strstr(err.msg, "imports paddle"), "%s: %s", imports[i], err.msg);
        ck_assert_ptr_nonnull(strstr(err.msg, "--python="));
    }
    yes[0] = exe2;
    ck_assert_int_eq(resolve_probed(ENVV(path2_env), ARGS(py), 0), 0);
    ck_assert_str_eq(prog.argv[0], exe2);
    ck_assert_str_eq(prog.needs, "paddle");
    memset(yes, 0, sizeof(yes));
    ck_assert_int_eq(resolve_probed(ENVV(path2_env), ARGS("--module", "paddle.distributed.x"), 0),
                     EC_EINVAL);
    static const char *const not_paddle[] = {"import paddlenlp_like\n", "# import paddle\n",
                                             "print('import paddle')\n", "import torch\n"};
    for (size_t i = 0; i < sizeof(not_paddle) / sizeof(not_paddle[0]); i++) {
        write_file(py, not_paddle[i], 0644);
        ck_assert_int_eq(resolve_probed(ENVV(path2_env), ARGS(py), 0), 0);
        ck_assert_msg(prog.needs == NULL, "%s: needs %s", not_paddle[i], prog.needs);
        ck_assert_int_eq(nprobed, 0);
        ck_assert_str_eq(prog.argv[0], exe);
    }
    /* --no_python: nothing is asked of any interpreter */
    write_file(py, "import paddle\n", 0755);
    ck_assert_int_eq(resolve_probed(ENVV(path2_env), ARGS("--no_python", py), 0), 0);
    ck_assert_int_eq(nprobed, 0);
}
END_TEST

/* The real probe: `INTERPRETER -c "import MODULE, sys; ..."`, its answer (and
 * the module's version), why not, and a deadline it never outlives. */
START_TEST(the_probe_asks_with_a_deadline)
{
    char sh[200], why[400];
    snprintf(sh, sizeof(sh), "%s/fakepy", dir);
    write_file(sh, "#!/bin/sh\ncase \"$2\" in 'import good, sys;'*) printf '\\n2.11.0+cu128' >&2; "
                   "exit 0;; esac\n"
                   "echo \"Traceback...\" >&2\necho \"ModuleNotFoundError: No module named "
                   "'bad'\" >&2\nexit 1\n", 0755);
    ck_assert_int_eq(ec_program_probe(sh, "good", why, sizeof(why), NULL), 1);
    ck_assert_str_eq(why, "2.11.0+cu128"); /* the module's version, for the environment */
    /* a real interpreter and module: its __version__ */
    if (access("/usr/bin/python3", X_OK) == 0) {
        ck_assert_int_eq(ec_program_probe("/usr/bin/python3", "json", why, sizeof(why), NULL), 1);
        ck_assert_msg(why[0] >= '0' && why[0] <= '9', "json's version: '%s'", why);
    }
    ck_assert_int_eq(ec_program_probe(sh, "bad", why, sizeof(why), NULL), 0);
    ck_assert_str_eq(why, "ModuleNotFoundError: No module named 'bad'");
    write_file(sh, "#!/bin/sh\nsleep 30 &\nexec sleep 30\n", 0755);
    int ms = 300;
    int64_t t0 = ec_mono_ms();
    ck_assert_int_eq(ec_program_probe(sh, "torch", why, sizeof(why), &ms), -1);
    ck_assert_int_lt(ec_mono_ms() - t0, 5000);
    ck_assert_ptr_nonnull(strstr(why, "no answer"));
    unlink(sh);
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
    ck_assert_int_eq(ec_program_resolve(&cfg, env, ENVV(path_env), NULL, NULL, &prog, &err), 0);
    ck_assert_int_eq(prog.python, 1);
    ck_assert_str_eq(prog.argv[2], "/bin/sh");
    ec_program_release(&prog);
    ck_assert_int_eq(resolve(ENVV(path_env), ARGS("--no_python", "/bin/sh")), 0);
    cfg.prog_always_python = 1;
    ec_program_release(&prog);
    ck_assert_int_eq(ec_program_resolve(&cfg, env, ENVV(path_env), NULL, NULL, &prog, &err), 0);
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
    ck_assert_ptr_null(strstr(err.msg, "current directory"));
    /* a bare name found only in the current directory: the way to name it */
    char cwd[4096], here[] = "/tmp/ec-test-program-XXXXXX";
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
    ck_assert_ptr_nonnull(mkdtemp(here));
    ck_assert_int_eq(chdir(here), 0);
    FILE *f = fopen("ec15-local-prog", "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    chmod("ec15-local-prog", 0755);
    int rc = resolve(ENVV("PATH=/nonexistent"), ARGS("ec15-local-prog")); /* no empty entry */
    unlink("ec15-local-prog");
    ck_assert_int_eq(chdir(cwd), 0);
    rmdir(here);
    ck_assert_int_eq(rc, EC_EINVAL);
    ck_assert_msg(strstr(err.msg, "the one in the current directory is ./ec15-local-prog"), "%s",
                  err.msg);
    /* a script whose #! interpreter is missing: said before anything starts */
    char bad[] = "/tmp/ec-test-shebang-XXXXXX";
    int fd = mkstemp(bad);
    ck_assert_int_ge(fd, 0);
    const char *text = "#!/nonexistent/ec15-interp -u\necho hi\n";
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    chmod(bad, 0755);
    rc = resolve(ENVV(path_env), ARGS(bad));
    unlink(bad);
    ck_assert_int_eq(rc, EC_EINVAL);
    ck_assert_msg(strstr(err.msg, "its #! line names '/nonexistent/ec15-interp', which does not "
                                  "exist"), "%s", err.msg);
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
    return ec_check_suite("program", setup, teardown,
                          EC_CHECK_TESTS(
                              py_program_runs_under_the_interpreter,
                              anything_else_runs_as_given,
                              torchrun_takes_the_first_python3_on_path_that_imports_torch,
                              no_interpreter_with_torch_names_those_tried_and_the_fix,
                              a_named_interpreter_must_import_what_the_program_needs,
                              a_paddle_program_needs_an_interpreter_with_paddle,
                              the_probe_asks_with_a_deadline,
                              unrunnable_says_what_is_missing));
}

EC_CHECK_MAIN(suite)
