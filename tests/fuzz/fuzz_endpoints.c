/* libFuzzer target: etcd endpoint lists (coord/etcd/endpoints.c), what users
 * type into --elastic_server / ECOORD_ELASTIC_SERVER.
 *
 * Properties: no crash or undefined behaviour; parse returns 0 or EC_EINVAL
 * with a message; a parsed list has 1..EC_EP_MAX endpoints, each with a
 * non-empty host that appears verbatim in the input (never silently cut
 * short, which would dial another host) and a port in 1..65535; the gRPC
 * target built from IP literals or a single endpoint (no name resolution
 * here) starts with its scheme and names every host. */
#include <string.h>

#include "endpoints.h"
#include "fuzz.h"

/* host occurs in spec as a whole token: after the start, "//", ',', a blank
 * or '[', and before the end, ':', '/', ',', ']' or a blank. */
static bool whole_in(const char *spec, const char *host)
{
    size_t hl = strlen(host);
    for (const char *p = strstr(spec, host); p; p = strstr(p + 1, host)) {
        char before = p == spec ? ',' : p[-1], after = p[hl];
        if (strchr("/,[ \t", before) && (after == '\0' || strchr(":/,] \t", after)))
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    char *spec = malloc(size + 1);
    memcpy(spec, data, size);
    spec[size] = '\0';
    ec__endpoints_t eps;
    ec_error_t err = {0};
    int rc = ec__endpoints_parse(spec, &eps, &err);
    if (rc < 0) {
        FUZZ_CHECK(rc == EC_EINVAL && err.code == rc && err.msg[0], "rc %d '%s'", rc, err.msg);
        free(spec);
        return 0;
    }
    FUZZ_CHECK(eps.n >= 1 && eps.n <= EC_EP_MAX, "n = %d", eps.n);
    bool literal = true, all6 = true;
    for (int i = 0; i < eps.n; i++) {
        const ec__endpoint_t *e = &eps.ep[i];
        size_t hl = strnlen(e->host, sizeof(e->host));
        FUZZ_CHECK(hl > 0 && hl < sizeof(e->host), "host %d unterminated or empty", i);
        FUZZ_CHECK(whole_in(spec, e->host), "host %d '%s' is not a whole token of the input", i,
                   e->host);
        FUZZ_CHECK(e->port >= 1 && e->port <= 65535, "port %d", e->port);
        FUZZ_CHECK(!(e->ipv4 && e->ipv6), "both families");
        literal &= e->ipv4 || e->ipv6;
        all6 &= e->ipv6;
    }
    /* Only lists that need no name resolution (no DNS from a fuzzer). */
    if (literal || eps.n == 1) {
        char target[8192], auth[EC_EP_HOST_MAX];
        rc = ec__endpoints_target(&eps, target, sizeof(target), auth, sizeof(auth), &err);
        FUZZ_CHECK(rc == 0, "target: %s", err.msg);
        FUZZ_CHECK(!strncmp(target, "ipv4:", 5) || !strncmp(target, "ipv6:", 5) ||
                       !strncmp(target, "dns:///", 7),
                   "target '%s'", target);
        FUZZ_CHECK(!strcmp(auth, eps.ep[0].host), "authority '%s'", auth);
        /* A list mixing IPv6 with IPv4 becomes an ipv4: list: gRPC dials one
         * family per list, and the IPv6 entries are skipped with a warning. */
        for (int i = 0; i < eps.n; i++)
            if (eps.ep[i].ipv4 || all6 || eps.n == 1)
                FUZZ_CHECK(strstr(target, eps.ep[i].host) != NULL, "target '%s' lacks '%s'",
                           target, eps.ep[i].host);
    }
    free(spec);
    return 0;
}
