/* ecoord: one binary, subcommands dispatched here; the knob table parses
 * every flag (coord/knobs.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkrun.h"
#include "etcd.h"
#include "knobs.h"
#include "launch.h"
#include "status.h"

#define EC_VERSION "0.1.0"

static int usage(FILE *f)
{
    char *h = ec_config_help(NULL);
    fprintf(f, "%s", h ? h : "usage: ecoord {launch|status|check} [flags]\n");
    free(h);
    return f == stderr ? 2 : 0;
}

int main(int argc, char **argv)
{
    /* Before any thread (etcd.h: EC_ETCD_POLL_ENV); the training processes
     * inherit it, for the worker library's own etcd client. */
    setenv(EC_ETCD_POLL_ENV, EC_ETCD_POLL_MS, 0);
    if (argc < 2)
        return usage(stderr);
    const char *sub = argv[1];
    if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help"))
        return usage(stdout);
    if (!strcmp(sub, "version") || !strcmp(sub, "--version")) {
        printf("ecoord %s\n", EC_VERSION);
        return 0;
    }
    if (!ec_config_cmd(sub)) {
        fprintf(stderr, "ecoord: unknown command '%s'; the commands are launch, status and check "
                        "(ecoord --help)\n", sub);
        return 2;
    }
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    ec_config_t cfg = EC_CONFIG_INITIALIZER;
    cfg.hostname = host;
    ec_error_t err = {0};
    if (ec_config_parse(&cfg, sub, argc - 2, argv + 2, ec_config_environ, NULL, &err) < 0) {
        fprintf(stderr, "ecoord %s: %s\n", sub, err.msg);
        ec_config_release(&cfg);
        return 2;
    }
    if (cfg.help) {
        char *h = ec_config_help(sub);
        printf("%s", h ? h : "");
        free(h);
        ec_config_release(&cfg);
        return 0;
    }
    int rc;
    switch (cfg.cmd) {
    case EC_CMD_LAUNCH:
        rc = ec_cmd_launch(&cfg);
        break;
    case EC_CMD_STATUS:
        for (int i = 0; i < cfg.nwarnings; i++)
            fprintf(stderr, "ecoord status: warning: %s\n", cfg.warnings[i]);
        rc = ec_cmd_status(&cfg, stdout, stderr);
        break;
    case EC_CMD_CHECK:
        rc = ec_cmd_check(&cfg, stdout, stderr);
        break;
    default:
        fprintf(stderr, "ecoord %s: not available in this build yet\n", sub);
        rc = 2;
    }
    ec_config_release(&cfg);
    return rc;
}
