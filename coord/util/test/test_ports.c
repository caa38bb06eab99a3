/* The ports an agent reserves (coord/util/netaddr.c): a lock file per port
 * under the ports directory keeps two agents on one host off each other's
 * ports.  A lock file lives only while its agent holds it: the ports an
 * agent tried and did not take leave nothing behind, its own are removed
 * when it releases them, and files left by agents that died (the kernel
 * dropped their locks) are reclaimed at the next reservation.  A --host
 * that is not an address of this machine is refused at its first port
 * with the fix, instead of trying (and leaving a file for) every port of
 * the range.
 */
#include "netaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <dirent.h>
#include <ec_check.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

/* A listening TCP socket on addr:port: the port in use; -1 if it cannot. */
static int bind_port(const char *addr, int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1) < 0)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/ec-test-ports.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ec__ports_dir(dir);
}

static void teardown(void)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            char p[600];
            snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
            if (e->d_name[0] != '.')
                unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
    ec__ports_dir(NULL);
}

/* How many lock files the directory holds. */
static int files(void)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int k = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        k += e->d_name[0] != '.';
    closedir(d);
    return k;
}

static int lock_file(const char *name, bool hold)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    ck_assert_int_ge(fd, 0);
    if (hold)
        ck_assert_int_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
    else
        close(fd);
    return hold ? fd : -1;
}

/* A free range high enough not to collide with the test harness's etcd. */
static void free_range(int n, int *lo)
{
    uint16_t p[8];
    int fds[8];
    ec_error_t err;
    ck_assert_int_eq(ec_ports_reserve("127.0.0.1", 47000, 47999, n, p, fds, NULL, &err), 0);
    *lo = p[0];
    ec_ports_unlock("127.0.0.1", p, fds, n);
}

START_TEST(released_ports_leave_no_lock_file)
{
    int lo;
    free_range(3, &lo);
    uint16_t p[3];
    int fds[3];
    ec_error_t err;
    ck_assert_int_eq(ec_ports_reserve("127.0.0.1", lo, lo + 50, 3, p, fds, NULL, &err), 0);
    ck_assert_int_eq(files(), 3);
    ec_ports_unlock("127.0.0.1", p, fds, 3);
    ck_assert_int_eq(files(), 0);
    ck_assert_int_eq(fds[0], -1);
}
END_TEST

START_TEST(ports_tried_and_not_taken_leave_no_lock_file)
{
    int lo;
    free_range(1, &lo);
    /* a port in use: a socket bound to it */
    uint16_t p[1];
    int fds[1];
    ec_error_t err;
    ck_assert_int_eq(ec_ports_reserve("127.0.0.1", lo, lo + 100, 1, p, fds, NULL, &err), 0);
    int busy = p[0];
    ec_ports_unlock("127.0.0.1", p, fds, 1);
    int s = bind_port("127.0.0.1", busy);
    ck_assert_int_ge(s, 0);
    ck_assert_int_eq(ec_ports_reserve("127.0.0.1", busy, busy + 100, 1, p, fds, NULL, &err), 0);
    ck_assert_int_ne(p[0], busy);
    ck_assert_int_eq(files(), 1); /* the one taken, not the busy one */
    ec_ports_unlock("127.0.0.1", p, fds, 1);
    close(s);
    /* a range where nothing is free leaves nothing either */
    s = bind_port("127.0.0.1", busy);
    ck_assert_int_lt(ec_ports_reserve("127.0.0.1", busy, busy, 1, p, fds, NULL, &err), 0);
    ck_assert_int_eq(files(), 0);
    close(s);
}
END_TEST

START_TEST(stale_lock_files_are_reclaimed_and_held_ones_kept)
{
    int lo;
    free_range(2, &lo);
    char name[64];
    /* left by agents that died: nobody holds them */
    for (int i = 0; i < 20; i++) {
        snprintf(name, sizeof(name), "127.0.0.1:%d", 30000 + i);
        lock_file(name, false);
    }
    lock_file("10.9.9.9:31000", false);
    /* held by a live agent */
    snprintf(name, sizeof(name), "127.0.0.1:%d", lo);
    int held = lock_file(name, true);
    uint16_t p[1];
    int fds[1];
    ec_error_t err;
    ck_assert_int_eq(ec_ports_reserve("127.0.0.1", lo, lo + 50, 1, p, fds, NULL, &err), 0);
    ck_assert_int_ne(p[0], lo); /* the held port is skipped */
    ck_assert_int_eq(files(), 2); /* the held file and the new one: the 21 stale ones are gone */
    ec_ports_unlock("127.0.0.1", p, fds, 1);
    ck_assert_int_eq(files(), 1);
    close(held);
}
END_TEST

START_TEST(a_host_not_of_this_machine_is_refused_at_once)
{
    int lo;
    free_range(2, &lo);
    uint16_t p[2];
    int fds[2];
    ec_error_t err;
    /* TEST-NET-1: an address no interface here has */
    ck_assert_int_lt(ec_ports_reserve("192.0.2.7", lo, lo + 50, 2, p, fds, NULL, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "--host 192.0.2.7 is not an address of this machine"));
    ck_assert_int_eq(files(), 0);
}
END_TEST

/* Out of file descriptors (a low ulimit -n): said so, with the fix, not
 * taken for ports in use (it read "only 0 of the 3 ports ... are free"). */
START_TEST(running_out_of_file_descriptors_is_said_so)
{
    int lo;
    free_range(3, &lo);
    /* every descriptor up to the limit taken */
    struct rlimit rl = {64, 64};
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    while (open("/dev/null", O_RDONLY) >= 0)
        ;
    uint16_t p[3];
    int fds[3];
    ec_error_t err;
    ck_assert_int_lt(ec_ports_reserve("127.0.0.1", lo, lo + 50, 3, p, fds, NULL, &err), 0);
    ck_assert_msg(strstr(err.msg, "Too many open files") && strstr(err.msg, "ulimit -n"), "%s",
                  err.msg);
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("ports", setup, teardown,
                          EC_CHECK_TESTS(
                              released_ports_leave_no_lock_file,
                              ports_tried_and_not_taken_leave_no_lock_file,
                              stale_lock_files_are_reclaimed_and_held_ones_kept,
                              a_host_not_of_this_machine_is_refused_at_once,
                              running_out_of_file_descriptors_is_said_so));
}

EC_CHECK_MAIN(suite)
