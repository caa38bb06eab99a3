/* The environment (see rules.h): the allowlisted NCCL_*, CUDA_*, ...
 * variables every node publishes, compared across nodes (environment). */
#define _GNU_SOURCE
#include "rules_impl.h"

/* ---- environment --------------------------------------------------------------- */

/* NCCL variables that name per-machine things and may differ on purpose. */
static int env_per_machine(const char *name)
{
    static const char *const per[] = {
        "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_TOPO_FILE", "NCCL_TOPO_DUMP_FILE", NULL,
    };
    for (int i = 0; per[i]; i++)
        if (!strcmp(name, per[i]))
            return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void rule_environment(cx_t *cx, rb_t *b)
{
    /* every name any node set, sorted, once */
    int total = 0;
    for (int i = 0; i < cx->n; i++)
        total += cx->f[i]->nenv;
    const char **names = calloc((size_t)total + 1, sizeof(char *));
    char **v = ck_vals_new(cx);
    if (!names || !v) {
        cx->oom = 1;
        goto out;
    }
    int nn = 0;
    for (int i = 0; i < cx->n; i++)
        for (int k = 0; k < cx->f[i]->nenv; k++)
            names[nn++] = cx->f[i]->env[k].name;
    qsort(names, (size_t)nn, sizeof(char *), cmp_str);
    int distinct = 0, differ = 0;
    ec_strbuf_t list = {0};
    for (int k = 0; k < nn; k++) {
        if (k && !strcmp(names[k], names[k - 1]))
            continue;
        distinct++;
        const char *name = names[k];
        int diff = 0;
        for (int i = 0; i < cx->n; i++) {
            const char *x = ec_check_facts_env(cx->f[i], name);
            free(v[i]);
            v[i] = x ? ec_asprintf("'%s'", x) : strdup("(unset)");
            if (!v[i]) {
                cx->oom = 1;
                goto out;
            }
            if (i && strcmp(v[i], v[0]))
                diff = 1;
        }
        if (!diff)
            continue;
        differ++;
        int nccl = !strncmp(name, "NCCL_", 5) && !env_per_machine(name);
        ck_status(b, nccl ? EC_CHECK_FAIL : EC_CHECK_WARN);
        ec_strbuf_t row = {0};
        ck_groups(&row, cx, v);
        ck_detail(b, "%-24s %s", name, row.s ? row.s : "");
        ec_strbuf_free(&row);
        ec_strbuf_sep(&list, ", ");
        ec_strbuf_puts(&list, name);
        for (int i = 0; i < cx->n; i++)
            ck_node(b, cx->f[i]->node_id);
        if (nccl)
            ck_fix(b, "set NCCL_* variables the same way on every node (in the job spec, not in "
                      "one machine's shell profile): nodes that disagree on NCCL settings hang or "
                      "fail in ncclCommInitRank");
        else
            ck_fix(b, "check that the variables listed are meant to differ; library paths and "
                      "CUDA settings set on one node only are the usual cause of 'works on one "
                      "node' failures");
    }
    if (differ) {
        ec_strbuf_printf(&b->found, "%d variable%s differ%s between nodes: %s", differ,
                         differ == 1 ? "" : "s", differ == 1 ? "s" : "", list.s ? list.s : "");
    } else if (cx->n < 2) {
        ck_status(b, EC_CHECK_PASS);
        ec_strbuf_printf(&b->found, "single node: nothing to compare (%d variable%s seen)",
                         distinct, distinct == 1 ? "" : "s");
    } else {
        ck_status(b, EC_CHECK_PASS);
        ec_strbuf_printf(&b->found,
                         "%d variable%s (NCCL_*, CUDA_*, library paths) compared: equal on "
                         "every node",
                         distinct, distinct == 1 ? "" : "s");
    }
    ec_strbuf_free(&list);
out:
    free(names);
    ck_vals_free(cx, v);
}
