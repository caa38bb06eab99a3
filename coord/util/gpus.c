/* Which GPUs a node's training processes get (see gpus.h). */
#include "gpus.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The next comma-separated entry of *p into buf (cut to len - 1); false at
 * the end. */
static bool next_entry(const char **p, char *buf, size_t len)
{
    if (!**p)
        return false;
    size_t n = strcspn(*p, ",");
    snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), *p);
    *p += n + ((*p)[n] == ',');
    return true;
}

static bool is_number(const char *s)
{
    return *s && strspn(s, "0123456789") == strlen(s) && strlen(s) < 10;
}

static bool is_uuid(const char *s)
{
    return !strncmp(s, "GPU-", 4) || !strncmp(s, "MIG-", 4);
}

int ec_gpus_count_visible(const char *cvd, int *numeric)
{
    int n = 0, num = 1;
    char e[128];
    for (const char *p = cvd; next_entry(&p, e, sizeof(e)); n++) {
        if (is_uuid(e))
            num = 0;
        else if (!is_number(e))
            break;
    }
    if (numeric)
        *numeric = num;
    return n;
}

int ec_gpus_count_dev(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "nvidia", 6) && is_number(e->d_name + 6))
            n++;
    closedir(d);
    return n;
}

/* Append entry to out->visible, comma-separated. */
static void add_visible(ec_gpus_t *out, const char *entry)
{
    size_t used = strlen(out->visible);
    snprintf(out->visible + used, sizeof(out->visible) - used, "%s%s", used ? "," : "", entry);
}

int ec_gpus_plan(const char *cvd, int ndev, const int *gpus, int ngpus, int nproc,
                 const char *gpus_said, const char *nproc_said, ec_gpus_t *out,
                 ec_error_t *err)
{
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < ngpus; i++)
        for (int j = 0; j < i; j++)
            if (gpus[i] == gpus[j])
                return ec_errorf(err, EC_EINVAL,
                                 "%s lists device %d twice: two processes on one GPU fail "
                                 "(NCCL error 5, invalid usage); list each device once",
                                 gpus_said, gpus[i]);
    if (ngpus > 0 && nproc > ngpus)
        return ec_errorf(err, EC_EINVAL,
                         "%s starts %d processes but %s lists only %d devices: processes would "
                         "share a GPU (NCCL error 5, invalid usage); list %d devices in --gpus or "
                         "pass --nproc_per_node=%d",
                         nproc_said, nproc, gpus_said, ngpus, nproc, ngpus);
    int numeric = 1;
    int nvis = cvd ? ec_gpus_count_visible(cvd, &numeric) : 0;
    char e[128];

    if (ngpus > 0) {
        if (cvd && nvis == 0)
            return ec_errorf(err, EC_EINVAL,
                             "%s names devices but CUDA_VISIBLE_DEVICES='%s' hides every GPU; "
                             "unset CUDA_VISIBLE_DEVICES or list the devices in it",
                             gpus_said, cvd);
        if (cvd && !numeric)
            return ec_errorf(err, EC_EINVAL,
                             "%s names GPUs by number but CUDA_VISIBLE_DEVICES=%s names them by "
                             "UUID; drop --gpus and list only this node's GPUs in "
                             "CUDA_VISIBLE_DEVICES",
                             gpus_said, cvd);
        for (int i = 0; i < ngpus && i < nproc; i++) {
            char id[16];
            snprintf(id, sizeof(id), "%d", gpus[i]);
            bool seen = !cvd;
            const char *p = cvd;
            for (int k = 0; cvd && k < nvis && next_entry(&p, e, sizeof(e)); k++)
                seen |= !strcmp(e, id) || (is_number(e) && atoi(e) == gpus[i]);
            if (!seen)
                return ec_errorf(err, EC_EINVAL,
                                 "%s names device %d but CUDA_VISIBLE_DEVICES=%s hides it; "
                                 "--gpus takes GPUs as CUDA_VISIBLE_DEVICES lists them (as "
                                 "Paddle's --devices does): pick them from it or widen it",
                                 gpus_said, gpus[i], cvd);
            add_visible(out, id);
        }
        out->n = ngpus < nproc ? ngpus : nproc;
        return 0;
    }
    if (cvd) {
        if (nvis == 0)
            return 0; /* no GPUs on purpose: a CPU (gloo) run */
        if (nproc > nvis)
            return ec_errorf(err, EC_EINVAL,
                             "%s starts %d processes but CUDA_VISIBLE_DEVICES=%s shows only %d "
                             "GPU%s: the extra processes fail to select a device and the others "
                             "hang in ncclCommInitRank; pass --nproc_per_node=%d or list more GPUs "
                             "in CUDA_VISIBLE_DEVICES",
                             nproc_said, nproc, cvd, nvis, nvis == 1 ? "" : "s", nvis);
        const char *p = cvd;
        for (int k = 0; k < nproc && next_entry(&p, e, sizeof(e)); k++)
            add_visible(out, e);
        out->n = nproc;
        return 0;
    }
    if (ndev <= 0)
        return 0;
    if (nproc > ndev) {
        snprintf(out->note, sizeof(out->note),
                 "this machine has %d GPU%s (/dev/nvidiaN) and %s starts %d processes: they get "
                 "no GPU and PADDLE_DISTRI_BACKEND=gloo; pass --nproc_per_node=%d to give each "
                 "one, or --gpus/CUDA_VISIBLE_DEVICES to choose",
                 ndev, ndev == 1 ? "" : "s", nproc_said, nproc, ndev);
        return 0;
    }
    for (int k = 0; k < nproc; k++) {
        char id[16];
        snprintf(id, sizeof(id), "%d", k);
        add_visible(out, id);
    }
    out->n = nproc;
    return 0;
}
