/* The rule under test: a process ecoord starts gets default signal
 * dispositions and an empty signal mask, whatever its parent had.  An
 * ignored signal survives exec (POSIX): a parent under `nohup` (SIGHUP
 * ignored) or one that ignores SIGTERM while it shuts down would otherwise
 * hand a child that cannot be stopped the usual way.
 *   - ec_child_reset() in a forked child undoes an ignored SIGTERM and
 *     SIGHUP, a handler for SIGUSR1 and a blocked SIGUSR2;
 *   - the embedded etcd (coord/etcd/embed.c) started by a parent ignoring
 *     SIGTERM and SIGHUP ignores neither (Go keeps an inherited ignored
 *     SIGHUP ignored: before the fix it did, SigIgn 80000001).
 */
#define _GNU_SOURCE
#include "embed.h"
#include "child.h"

#include <ec_check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void on_usr1(int s) { (void)s; }

/* The parent a user's shell might give: SIGTERM and SIGHUP ignored, a
 * handler, a blocked signal.  Returns the previous mask. */
static void hostile_parent(sigset_t *old)
{
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGUSR1, on_usr1);
    sigset_t b;
    sigemptyset(&b);
    sigaddset(&b, SIGUSR2);
    sigprocmask(SIG_BLOCK, &b, old);
}

static void restore_parent(const sigset_t *old)
{
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    sigprocmask(SIG_SETMASK, old, NULL);
}

/* A hex mask line of /proc/<pid>/status ("SigIgn:", "SigBlk:"); -1 when unread. */
static long long status_mask(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long long v = -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, field, fl)) {
            v = strtoll(line + fl, NULL, 16);
            break;
        }
    fclose(f);
    return v;
}

#define BIT(s) (1LL << ((s) - 1))

START_TEST(child_reset_undoes_parent_dispositions_and_mask)
{
    sigset_t old;
    hostile_parent(&old);
    sigset_t saved;
    ec_child_fork_begin(&saved);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        int bad = 0;
        if (ec_child_reset(SIGKILL, parent) < 0)
            _exit(10);
        struct sigaction sa;
        int sigs[] = {SIGTERM, SIGHUP, SIGUSR1, SIGINT};
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
            if (sigaction(sigs[i], NULL, &sa) < 0 || sa.sa_handler != SIG_DFL)
                bad |= 1 << i;
        sigset_t now;
        sigprocmask(SIG_SETMASK, NULL, &now);
        if (!sigisemptyset(&now))
            bad |= 1 << 5;
        _exit(bad);
    }
    ec_child_fork_end(&saved);
    ck_assert_int_gt(pid, 0);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    restore_parent(&old);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "child saw non-default dispositions or a mask (bits %d: 1 TERM, 2 HUP, 4 USR1, "
                  "8 INT, 32 mask)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}
END_TEST

START_TEST(embedded_etcd_gets_default_dispositions)
{
    const char *etcd = getenv("ETCD");
    if (!etcd || access(etcd, X_OK) != 0) {
        fprintf(stdout, "# SKIP no etcd binary (ETCD)\n");
        return;
    }
    sigset_t old;
    hostile_parent(&old);
    ec_error_t err = {0};
    ec_embed_opts_t o = EC_EMBED_OPTS_INIT;
    o.etcd_path = etcd;
    ec_embed_t *e = ec_embed_start(&o, &err);
    restore_parent(&old);
    ck_assert_msg(e != NULL, "cannot start etcd: %s", err.msg);
    pid_t pid = ec_embed_pid(e);
    /* (Not its SigBlk: Go's runtime blocks signals in its threads itself.) */
    long long ign = status_mask(pid, "SigIgn:");
    ck_assert_msg(ign >= 0 && !(ign & (BIT(SIGTERM) | BIT(SIGHUP))),
                  "etcd ignores SIGTERM or SIGHUP (SigIgn %llx): its parent's dispositions leaked",
                  ign);
    ec_embed_stop(e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("child");
    TCase *tc = tcase_create("child");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, child_reset_undoes_parent_dispositions_and_mask);
    tcase_add_test(tc, embedded_etcd_gets_default_dispositions);
    suite_add_tcase(s, tc);
    return s;
}

EC_CHECK_MAIN(suite)
