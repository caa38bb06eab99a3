/* A plain-socket HTTP/1.0 client for the tests that scrape the agent's
 * metrics: no library, so a test sees exactly the bytes a Prometheus server
 * or the kubelet would.  Header-only; every call has a 5 s deadline. */
#ifndef EC_TEST_HTTP_H
#define EC_TEST_HTTP_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* Send "METHOD path" to 127.0.0.1:port.  Returns the status code (200...)
 * with the whole response (headers and body, NUL-terminated, truncated to
 * len) in resp, or -1 when nothing answered. */
static inline int ec_http_request(int port, const char *method, const char *path, char *resp,
                                  size_t len)
{
    resp[0] = '\0';
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    char req[512];
    int n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\n\r\n", method,
                     path, port);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    ssize_t r;
    while (got + 1 < len && (r = read(fd, resp + got, len - 1 - got)) > 0)
        got += (size_t)r;
    resp[got] = '\0';
    close(fd);
    int status = -1;
    if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    return status;
}

/* The body of a response from ec_http_request ("" when there is none). */
static inline const char *ec_http_body(const char *resp)
{
    const char *b = strstr(resp, "\r\n\r\n");
    return b ? b + 4 : "";
}

/* The value of the first sample named exactly `series` (with its labels,
 * e.g. "ecoord_epoch" or "ecoord_failures_total{kind=\"exited\"}") in a
 * Prometheus text body; NAN-free: returns def when absent. */
static inline double ec_prom_value(const char *body, const char *series, double def)
{
    size_t n = strlen(series);
    for (const char *l = body; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (!strncmp(l, series, n) && l[n] == ' ')
            return strtod(l + n + 1, NULL);
    }
    return def;
}

/* A TCP port that is free on this host right now (bound, read, closed). */
static inline int ec_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

#endif
