/* Integration-test harness helpers. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void ec_test_require_etcd(void)
{
    if (!ec_embed_find_etcd(NULL)) {
        printf("1..0 # SKIP no etcd binary (apt-get install etcd-server)\n");
        exit(0);
    }
}

ec_embed_t *ec_test_etcd_start(const ec_embed_opts_t *opts)
{
    ec_error_t err = {0};
    ec_embed_opts_t o = EC_EMBED_OPTS_INIT;
    ec_embed_t *e = ec_embed_start(opts ? opts : &o, &err);
    ck_assert_msg(e != NULL, "cannot start etcd: %s", err.msg);
    return e;
}

ec_etcd_t *ec_test_client(const char *endpoint)
{
    ec_error_t err = {0};
    ec_etcd_opts_t o = EC_ETCD_OPTS_INIT;
    o.endpoints = endpoint;
    ec_etcd_t *c = ec_etcd_create(&o, &err);
    ck_assert_msg(c != NULL, "cannot connect to %s: %s", endpoint, err.msg);
    return c;
}

int64_t ec_test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL); /* the polling interval of ec_test_wait, not a synchronisation */
}

bool ec_test_wait(bool (*cond)(void *), void *arg, long timeout_ms)
{
    int64_t deadline = ec_test_now_ms() + ec_test_ms(timeout_ms);
    for (;;) {
        if (cond(arg))
            return true;
        if (ec_test_now_ms() > deadline)
            return false;
        pause_ms(2);
    }
}

bool ec_test_holds(bool (*cond)(void *), void *arg, long span_ms)
{
    int64_t end = ec_test_now_ms() + span_ms;
    while (ec_test_now_ms() < end) {
        if (!cond(arg))
            return false;
        pause_ms(20);
    }
    return cond(arg);
}

int ec_test_run(char *const argv[], char *out, size_t outlen)
{
    int pipefd[2];
    if (pipe(pipefd) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 1);
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        close(pipefd[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(pipefd[1]);
    size_t used = 0;
    char buf[1024];
    ssize_t r;
    while ((r = read(pipefd[0], buf, sizeof(buf))) > 0) {
        if (out && used + 1 < outlen) {
            size_t n = (size_t)r < outlen - used - 1 ? (size_t)r : outlen - used - 1;
            memcpy(out + used, buf, n);
            used += n;
        }
    }
    if (out && outlen)
        out[used] = '\0';
    close(pipefd[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
