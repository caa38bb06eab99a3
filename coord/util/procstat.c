/* A process's state from /proc (procstat.h). */
#include "procstat.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

bool ec_proc_stat(pid_t pid, char *state, pid_t *pgrp, unsigned long long *start)
{
    char path[40], buf[1024];
    char digits[24], *p0 = path;
    int nd = 0;
    unsigned long long v0 = (unsigned long long)pid;
    do
        digits[nd++] = (char)('0' + v0 % 10);
    while ((v0 /= 10));
    for (const char *s0 = "/proc/"; *s0;)
        *p0++ = *s0++;
    while (nd)
        *p0++ = digits[--nd];
    for (const char *s0 = "/stat"; *s0;)
        *p0++ = *s0++;
    *p0 = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
    if (!p || p[1] != ' ')
        return false;
    if (state)
        *state = p[2];
    p += 2;
    for (int field = 3; field < 22 && *p; field++) { /* to the start of field 22 */
        while (*p && *p != ' ')
            p++;
        while (*p == ' ')
            p++;
        if (field == 4) {
            long long v = 0;
            while (*p >= '0' && *p <= '9')
                v = v * 10 + (*p++ - '0');
            if (pgrp)
                *pgrp = (pid_t)v;
        }
    }
    unsigned long long v = 0;
    while (*p >= '0' && *p <= '9')
        v = v * 10 + (unsigned long long)(*p++ - '0');
    if (start)
        *start = v;
    return true;
}
