/* ecoord: one binary, subcommands dispatched here; the knob table parses
 * every flag (coord/cli/knobs.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "command.h"
#include "etcd.h"
#include "gpus.h"
#include "knobs.h"
#include "launch.h"
#include "status.h"
#include "torchrun_args.h"

#define EC_VERSION "0.1.0"

static int usage(FILE *f)
{
    char *h = ec_config_help(NULL);
    fprintf(f, "%s", h ? h : "usage: ecoord {launch|status|check} [flags]\n");
    fprintf(f, "\nand, for torchrun users:\n  torchrun\n      ecoord launch under torchrun's "
               "command line: change torchrun to ecoord torchrun\n      (ecoord torchrun "
               "--help; installed also as ecoord-torchrun).\n");
    free(h);
    return f == stderr ? 2 : 0;
}

/* What --nproc_per_node=gpu|cpu|auto count on this machine: the GPUs
 * CUDA_VISIBLE_DEVICES shows (up to its first invalid entry, as CUDA reads
 * it), else the NVIDIA device nodes (coord/util/gpus.h; ECOORD_DEV_DIR, a test
 * hook, instead of /dev); the online CPUs. */
static ec_torchrun_host_t host_facts(void)
{
    ec_torchrun_host_t h = {0, 0};
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    h.ncpus = n > 0 ? (int)n : 1;
    const char *cvd = ec_config_environ("CUDA_VISIBLE_DEVICES", NULL);
    const char *dir = ec_config_environ("ECOORD_DEV_DIR", NULL);
    h.ngpus = cvd ? ec_gpus_count_visible(cvd, NULL) : ec_gpus_count_dev(dir && *dir ? dir : "/dev");
    if (h.ngpus < 0)
        h.ngpus = 0;
    return h;
}

/* `ecoord torchrun ARGS`: translated (coord/cli/torchrun_args.h), then parsed
 * by the knob table like `ecoord launch`. */
static int cmd_torchrun(int argc, char **argv, const char *host)
{
    ec_torchrun_host_t facts = host_facts();
    ec_torchrun_t t;
    ec_error_t err = {0};
    if (ec_torchrun_translate(argc, argv, &facts, ec_config_environ, NULL, &t, &err) < 0) {
        fprintf(stderr, "ecoord torchrun: %s\n", err.msg);
        return 2;
    }
    if (t.help) {
        char *h = ec_torchrun_help();
        printf("%s", h ? h : "");
        free(h);
        ec_torchrun_release(&t);
        return 0;
    }
    ec_config_t cfg = EC_CONFIG_INITIALIZER;
    cfg.hostname = host;
    int rc = 2;
    if (ec_config_parse(&cfg, "launch", t.argc, t.argv, ec_config_environ, NULL, &err) < 0 ||
        ec_torchrun_apply(&t, &cfg, ec_config_environ, NULL, &err) < 0)
        fprintf(stderr, "ecoord torchrun: %s\n", err.msg);
    else if (cfg.help)
        rc = usage(stdout);
    else
        rc = ec_cmd_launch(&cfg);
    ec_config_release(&cfg);
    ec_torchrun_release(&t);
    return rc;
}

int main(int argc, char **argv)
{
    /* Before any thread (etcd.h: EC_ETCD_POLL_ENV); the training processes
     * inherit it, for the worker library's own etcd client. */
    setenv(EC_ETCD_POLL_ENV, EC_ETCD_POLL_MS, 0);
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    /* Installed as a link named ecoord-torchrun (Makefile.am's
     * install-exec-hook), ecoord is `ecoord torchrun`: torchrun users
     * change one word, as `python -m torch.distributed.run` has `torchrun`. */
    const char *self = argc > 0 && argv[0] ? argv[0] : "";
    if (strrchr(self, '/'))
        self = strrchr(self, '/') + 1;
    if (!strcmp(self, "ecoord-torchrun"))
        return cmd_torchrun(argc - 1, argv + 1, host);
    if (argc < 2)
        return usage(stderr);
    const char *sub = argv[1];
    if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help"))
        return usage(stdout);
    if (!strcmp(sub, "version") || !strcmp(sub, "--version")) {
        printf("ecoord %s\n", EC_VERSION);
        return 0;
    }
    if (!strcmp(sub, "torchrun"))
        return cmd_torchrun(argc - 2, argv + 2, host);
    if (!ec_config_cmd(sub)) {
        fprintf(stderr, "ecoord: unknown command '%s'; the commands are launch, status, check "
                        "and torchrun (ecoord --help)\n", sub);
        return 2;
    }
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
