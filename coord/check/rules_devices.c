/* Devices (see rules.h): GPU counts and identities, processes already on
 * the GPUs, peer-to-peer access, the CUDA and NCCL versions every node
 * would load. */
#define _GNU_SOURCE
#include "rules_impl.h"

/* ---- devices ----------------------------------------------------------------- */

void rule_gpu_count(cx_t *cx, rb_t *b)
{
    int skip = 1;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (f->cvd_set && f->cvd_count < f->nproc) {
            skip = 0;
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ec_strbuf_sep(&b->found, "; ");
            ec_strbuf_printf(&b->found,
                             "%s: CUDA_VISIBLE_DEVICES='%s' shows %d GPU%s for %d process%s",
                             f->node_id, f->cvd, f->cvd_count, f->cvd_count == 1 ? "" : "s",
                             f->nproc, f->nproc == 1 ? "" : "es");
            ck_fix(b, "give every process a GPU: list at least %d devices in CUDA_VISIBLE_DEVICES "
                      "(or unset it) or lower --nproc_per_node to the GPUs there are; with fewer "
                      "GPUs than processes one fails to select a device and the others hang in "
                      "ncclCommInitRank (for a CPU-only Gloo run, leave CUDA_VISIBLE_DEVICES "
                      "unset on machines without GPUs)", f->nproc);
        } else if (f->driver && f->visible >= 0 && f->visible < f->nproc) {
            skip = 0;
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ec_strbuf_sep(&b->found, "; ");
            ec_strbuf_printf(&b->found, "%s: CUDA sees %d GPU%s for %d process%s", f->node_id,
                             f->visible, f->visible == 1 ? "" : "s", f->nproc,
                             f->nproc == 1 ? "" : "es");
            ck_fix(b, "lower --nproc_per_node to the GPUs the node has, or free or add GPUs "
                      "(nvidia-smi lists them; a container needs --gpus all)");
        } else if (!f->driver && f->ngpus_flag > 0) {
            skip = 0;
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ec_strbuf_sep(&b->found, "; ");
            ec_strbuf_printf(&b->found, "%s: --gpus names %d GPU%s, but %s", f->node_id,
                             f->ngpus_flag, f->ngpus_flag == 1 ? "" : "s", f->driver_why);
            ck_fix(b, "install the NVIDIA driver on %s or run its container with GPUs (docker run "
                      "--gpus all, the NVIDIA container toolkit); for a CPU-only run drop --gpus",
                   f->node_id);
        } else if (!f->driver && cx->any_driver) {
            skip = 0;
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ec_strbuf_sep(&b->found, "; ");
            ec_strbuf_printf(&b->found,
                             "%s has no usable NVIDIA driver (%s) while other nodes have "
                             "GPUs",
                             f->node_id, f->driver_why);
            ck_fix(b, "install the NVIDIA driver on %s, or run its container with GPUs (docker "
                      "run --gpus all, the NVIDIA container toolkit)", f->node_id);
        } else if (f->driver) {
            skip = 0;
        }
    }
    if (b->st != EC_CHECK_SKIP)
        return;
    if (skip) {
        ec_strbuf_printf(&b->found,
                         "no GPU visible on any node (%s): GPU checks skipped, collectives "
                         "use Gloo",
                         cx->n ? cx->f[0]->driver_why : "no facts");
        return;
    }
    ck_status(b, EC_CHECK_PASS);
    for (int i = 0; i < cx->n && i < EC_CHECK_SHOW_NODES; i++)
        ec_strbuf_printf(&b->found, "%s%s: %d visible for %d process%s", i ? ", " : "",
                         cx->f[i]->node_id, cx->f[i]->visible, cx->f[i]->nproc,
                         cx->f[i]->nproc == 1 ? "" : "es");
    if (cx->n > EC_CHECK_SHOW_NODES)
        ec_strbuf_printf(&b->found, ", +%d more", cx->n - EC_CHECK_SHOW_NODES);
}

static void gpu_label(const ec_check_gpu_t *g, char *buf, size_t len)
{
    if (g->physical >= 0)
        snprintf(buf, len, "GPU %d%s%s%s", g->physical, g->bus_id[0] ? " (" : "", g->bus_id,
                 g->bus_id[0] ? ")" : "");
    else
        snprintf(buf, len, "GPU %s", g->bus_id[0] ? g->bus_id : "(by UUID)");
}

static int same_gpu(const ec_check_gpu_t *a, const ec_check_gpu_t *b)
{
    if (a->bus_id[0] && b->bus_id[0])
        return !strcmp(a->bus_id, b->bus_id);
    return a->physical >= 0 && a->physical == b->physical;
}

void rule_gpu_devices(cx_t *cx, rb_t *b)
{
    int relevant = 0, total = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (!f->ngpus)
            continue;
        relevant++;
        total += f->ngpus;
        /* CUDA_VISIBLE_DEVICES against --gpus (physical ids) */
        if (f->cvd_set && f->ngpus_flag) {
            int ids[EC_CHECK_MAX_GPUS];
            int n = ec_check_cvd_parse(f->cvd, ids, EC_CHECK_MAX_GPUS), uuid = 0;
            for (int k = 0; k < n && k < EC_CHECK_MAX_GPUS; k++)
                uuid |= ids[k] < 0;
            for (int g = 0; g < f->ngpus_flag && !uuid; g++) {
                int in = 0;
                for (int k = 0; k < n && k < EC_CHECK_MAX_GPUS && !in; k++)
                    in = ids[k] == f->gpus_flag[g];
                if (in)
                    continue;
                ck_status(b, EC_CHECK_FAIL);
                ck_node(b, f->node_id);
                ec_strbuf_sep(&b->found, "; ");
                ec_strbuf_printf(&b->found,
                                 "%s: --gpus names GPU %d, which CUDA_VISIBLE_DEVICES='%s' "
                                 "hides",
                                 f->node_id, f->gpus_flag[g], f->cvd);
                ck_fix(b, "list every --gpus device in CUDA_VISIBLE_DEVICES, or give only one of "
                          "the two");
            }
        }
        /* two local ranks on one GPU */
        for (int x = 0; x < f->ngpus; x++)
            for (int y = x + 1; y < f->ngpus; y++) {
                if (!same_gpu(&f->gpus[x], &f->gpus[y]))
                    continue;
                char l[96];
                gpu_label(&f->gpus[x], l, sizeof(l));
                ck_status(b, EC_CHECK_FAIL);
                ck_node(b, f->node_id);
                ec_strbuf_sep(&b->found, "; ");
                ec_strbuf_printf(&b->found, "%s: local ranks %d and %d both use %s", f->node_id,
                                 f->gpus[x].rank, f->gpus[y].rank, l);
                ck_fix(b, "give each process its own GPU: list distinct devices in --gpus and "
                          "CUDA_VISIBLE_DEVICES (two processes on one GPU fail with NCCL error "
                          "5, invalid usage)");
            }
    }
    /* two agents on one machine sharing a GPU */
    for (int i = 0; i < cx->n; i++)
        for (int j = i + 1; j < cx->n; j++) {
            const ec_check_facts_t *f = cx->f[i], *g = cx->f[j];
            if (!same_machine(f, g))
                continue;
            for (int x = 0; x < f->ngpus; x++)
                for (int y = 0; y < g->ngpus; y++) {
                    if (!same_gpu(&f->gpus[x], &g->gpus[y]))
                        continue;
                    char l[96];
                    gpu_label(&f->gpus[x], l, sizeof(l));
                    ck_status(b, EC_CHECK_FAIL);
                    ck_node(b, f->node_id);
                    ck_node(b, g->node_id);
                    ec_strbuf_sep(&b->found, "; ");
                    ec_strbuf_printf(&b->found,
                                     "%s and %s run on one machine and both use %s (local "
                                     "rank %d and %d)",
                                     f->node_id, g->node_id, l, f->gpus[x].rank, g->gpus[y].rank);
                    ck_fix(b, "split the machine's GPUs between its agents, e.g. --gpus=0,1 for "
                              "one and --gpus=2,3 for the other");
                }
        }
    if (!relevant) {
        ec_strbuf_puts(&b->found,
                       "no GPUs assigned (no driver, no --gpus, no CUDA_VISIBLE_DEVICES)");
        return;
    }
    if (b->st == EC_CHECK_SKIP) {
        ck_status(b, EC_CHECK_PASS);
        ec_strbuf_printf(&b->found,
                         "every process has a GPU of its own (%d process%s on %d node%s)", total,
                         total == 1 ? "" : "es", relevant, relevant == 1 ? "" : "s");
    }
}

void rule_gpu_busy(cx_t *cx, rb_t *b)
{
    if (!cx->any_driver) {
        ec_strbuf_puts(&b->found, "no NVIDIA driver on any node");
        return;
    }
    int gpus = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (!f->driver)
            continue;
        for (int k = 0; k < f->ngpus; k++) {
            const ec_check_gpu_t *g = &f->gpus[k];
            gpus++;
            if (g->nprocs <= 0)
                continue;
            char l[96];
            gpu_label(g, l, sizeof(l));
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ec_strbuf_sep(&b->found, "; ");
            ec_strbuf_printf(&b->found, "%s: %s (local rank %d) is in use by %s", f->node_id, l,
                             g->rank, g->procs[0] ? g->procs : "another process");
            ck_fix(b, "stop those processes (nvidia-smi lists them) or give this job other GPUs "
                      "with --gpus; a busy GPU runs out of memory or is refused in "
                      "exclusive-process mode");
        }
    }
    if (b->st == EC_CHECK_SKIP) {
        ck_status(b, EC_CHECK_PASS);
        ec_strbuf_printf(&b->found, "no other process runs on the %d GPU%s this job uses", gpus,
                         gpus == 1 ? "" : "s");
    }
}

void rule_gpu_p2p(cx_t *cx, rb_t *b)
{
    if (!cx->any_driver) {
        ec_strbuf_puts(&b->found, "no NVIDIA driver on any node");
        return;
    }
    int pairs = 0, unknown = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (!f->driver || f->ngpus < 2)
            continue;
        if (!f->np2p)
            unknown++;
        for (int k = 0; k < f->np2p; k++) {
            const ec_check_p2p_t *p = &f->p2p[k];
            pairs++;
            if (p->ok)
                continue;
            ck_status(b, EC_CHECK_WARN);
            ck_node(b, f->node_id);
            ck_detail(b, "%s: local ranks %d and %d: %s", f->node_id, p->a, p->b, p->status);
            ck_fix(b, "NCCL falls back to shared memory between those GPUs (slower); on VMs "
                      "enable peer-to-peer (ACS off, IOMMU passthrough); if P2P is reported but "
                      "hangs, set NCCL_P2P_DISABLE=1 on every node");
        }
    }
    if (b->st == EC_CHECK_WARN) {
        ec_strbuf_printf(&b->found, "%d of %d GPU pairs cannot access each other directly",
                         b->r->ndetails, pairs);
        return;
    }
    if (pairs) {
        ck_status(b, EC_CHECK_PASS);
        ec_strbuf_printf(&b->found, "peer-to-peer access between all %d local GPU pair%s", pairs,
                         pairs == 1 ? "" : "s");
    } else if (unknown) {
        ec_strbuf_puts(&b->found, "the driver did not report peer-to-peer capability");
    } else {
        ck_status(b, EC_CHECK_PASS);
        ec_strbuf_puts(&b->found, "one GPU per node: no peer-to-peer traffic inside a node");
    }
}

static char *v_cuda_driver(const ec_check_facts_t *f)
{
    char c[16];
    ck_fmt_cuda(f->cuda_driver_version, c, sizeof(c));
    return f->driver ? ec_asprintf("driver %s (CUDA %s)", f->driver_version[0] ? f->driver_version
                                                                                : "?", c)
                     : strdup("no driver");
}

static char *v_cudart(const ec_check_facts_t *f)
{
    char c[16];
    ck_fmt_cuda(f->cudart_version, c, sizeof(c));
    return f->cudart_version ? ec_asprintf("runtime %s", c) : strdup("no runtime found");
}

void rule_cuda(cx_t *cx, rb_t *b)
{
    char **dv = ck_vals_new(cx), **rv = ck_vals_new(cx);
    if (!dv || !rv || ck_vals_fill(cx, dv, v_cuda_driver) < 0 || ck_vals_fill(cx, rv, v_cudart) < 0)
        goto out;
    if (!cx->any_driver) {
        ec_strbuf_puts(&b->found, "no NVIDIA driver on any node; ");
        ck_groups(&b->found, cx, rv);
        goto out;
    }
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (f->driver && f->cudart_version && f->cuda_driver_version &&
            f->cudart_version > f->cuda_driver_version) {
            char r[16], d[16];
            ck_fmt_cuda(f->cudart_version, r, sizeof(r));
            ck_fmt_cuda(f->cuda_driver_version, d, sizeof(d));
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ck_detail(b, "%s: the CUDA runtime %s (%s) needs a newer driver than %s's, which "
                         "supports CUDA %s", f->node_id, r, f->cudart_path, f->node_id, d);
            ck_fix(b, "upgrade the NVIDIA driver on %s or use a CUDA %s build of the framework "
                      "(otherwise: 'CUDA driver version is insufficient for CUDA runtime "
                      "version')", f->node_id, d);
        }
    }
    ec_strbuf_t tmp = {0};
    int nd = ck_groups(&tmp, cx, dv);
    ec_strbuf_free(&tmp);
    int nr = ck_groups(&tmp, cx, rv);
    ec_strbuf_free(&tmp);
    if (nd > 1 || nr > 1) {
        ck_status(b, EC_CHECK_WARN);
        for (int i = 0; i < cx->n; i++)
            ck_node(b, cx->f[i]->node_id);
        ck_fix(b, "install the same driver and CUDA runtime on every node (one container image "
                  "everywhere): mixed versions behave differently and may not interoperate");
    }
    ck_groups(&b->found, cx, dv);
    ec_strbuf_puts(&b->found, "; ");
    ck_groups(&b->found, cx, rv);
    ck_status(b, EC_CHECK_PASS);
out:
    ck_vals_free(cx, dv);
    ck_vals_free(cx, rv);
}

static char *v_nccl(const ec_check_facts_t *f)
{
    char c[16];
    ck_fmt_nccl(f->nccl_version, c, sizeof(c));
    return f->nccl_version ? ec_asprintf("NCCL %s", c) : strdup("NCCL not found");
}

void rule_nccl(cx_t *cx, rb_t *b)
{
    const ec_check_limits_t *L = &cx->in->limits;
    char **v = ck_vals_new(cx);
    if (!v || ck_vals_fill(cx, v, v_nccl) < 0)
        goto out;
    if (!cx->any_driver) {
        ec_strbuf_puts(&b->found, "no NVIDIA driver on any node (Gloo is used); ");
        ck_groups(&b->found, cx, v);
        goto out;
    }
    char min[16];
    ck_fmt_nccl(L->nccl_min_version, min, sizeof(min));
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (!f->driver)
            continue;
        if (!f->nccl_version) {
            ck_status(b, EC_CHECK_WARN);
            ck_node(b, f->node_id);
            ck_fix(b, "make libnccl.so.2 findable on %s (LD_LIBRARY_PATH, ldconfig) so the check "
                      "sees the NCCL training will use; frameworks that bundle NCCL (PyTorch "
                      "wheels) load their own copy", f->node_id);
        } else if (f->nccl_version < L->nccl_min_version) {
            char c[16];
            ck_fmt_nccl(f->nccl_version, c, sizeof(c));
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ck_detail(b, "%s: NCCL %s (%s) is older than %s", f->node_id, c, f->nccl_path, min);
            ck_fix(b, "install NCCL %s or newer on every node (older releases lack the "
                      "communicator abort and error reporting elastic training relies on)", min);
        }
    }
    ec_strbuf_t tmp = {0};
    int ng = ck_groups(&tmp, cx, v);
    ec_strbuf_free(&tmp);
    if (ng > 1) {
        ck_status(b, EC_CHECK_FAIL);
        for (int i = 0; i < cx->n; i++)
            ck_node(b, cx->f[i]->node_id);
        ck_fix(b, "install one NCCL version on every node (one container image everywhere): "
                  "ranks with different NCCL versions hang or fail in ncclCommInitRank");
    }
    ck_groups(&b->found, cx, v);
    if (b->st == EC_CHECK_SKIP)
        ec_strbuf_printf(&b->found, " (at least %s needed)", min);
    ck_status(b, EC_CHECK_PASS);
out:
    ck_vals_free(cx, v);
}

/* ---- CUDA_VISIBLE_DEVICES and NCCL's version codes (rules.h; gather.c
 * uses them too) ---------------------------------------------------------- */

static int parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    if (!*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int ec_check_cvd_parse(const char *cvd, int *ids, int max)
{
    int n = 0;
    const char *p = cvd;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char item[128];
        while (len && isspace((unsigned char)*p)) {
            p++;
            len--;
        }
        while (len && isspace((unsigned char)p[len - 1]))
            len--;
        if (len == 0 || len >= sizeof(item))
            break;
        memcpy(item, p, len);
        item[len] = '\0';
        long long v;
        int id;
        if (parse_ll(item, 0, INT_MAX, &v) == 0)
            id = (int)v;
        else if (!strncmp(item, "GPU-", 4) || !strncmp(item, "MIG-", 4))
            id = -1;
        else
            break; /* CUDA stops at the first invalid entry: "-1" hides all */
        if (ids && n < max)
            ids[n] = id;
        n++;
        if (!e)
            break;
        p = e + 1;
    }
    return n;
}

int ec_check_nccl_version_norm(int code)
{
    if (code <= 0)
        return 0;
    if (code >= 20900) /* 2.9 onwards: major*10000 + minor*100 + patch */
        return code;
    return (code / 1000) * 10000 + ((code % 1000) / 100) * 100 + code % 100;
}
