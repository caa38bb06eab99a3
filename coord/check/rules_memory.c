/* Memory (see rules.h): /dev/shm for NCCL's intra-node transport (shm) and
 * the locked-memory limit RDMA needs (memlock). */
#define _GNU_SOURCE
#include "rules_impl.h"

/* ---- memory ------------------------------------------------------------------- */

static char *v_shm(const ec_check_facts_t *f)
{
    char s[32], fr[32];
    if (f->shm_bytes < 0)
        return ec_asprintf("%s unreadable", f->shm_path);
    ck_fmt_bytes(f->shm_bytes, s, sizeof(s));
    ck_fmt_bytes(f->shm_free, fr, sizeof(fr));
    return ec_asprintf("%s (%s free)", s, fr);
}

void rule_shm(cx_t *cx, rb_t *b)
{
    const ec_check_limits_t *L = &cx->in->limits;
    char fail[32], warn[32];
    ck_fmt_bytes(L->shm_fail_bytes, fail, sizeof(fail));
    ck_fmt_bytes(L->shm_warn_bytes, warn, sizeof(warn));
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        char s[32];
        ck_fmt_bytes(f->shm_bytes, s, sizeof(s));
        if (f->shm_bytes < 0) {
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ck_detail(b, "%s: %s: %s", f->node_id, f->shm_path, f->shm_err);
        } else if (f->shm_bytes < L->shm_fail_bytes) {
            ck_status(b, EC_CHECK_FAIL);
            ck_node(b, f->node_id);
            ck_detail(b, "%s: %s is %s, below %s", f->node_id, f->shm_path, s, fail);
        } else if (f->shm_bytes < L->shm_warn_bytes) {
            ck_status(b, EC_CHECK_WARN);
            ck_node(b, f->node_id);
            ck_detail(b, "%s: %s is %s, below %s", f->node_id, f->shm_path, s, warn);
        } else {
            continue;
        }
        ck_fix(b, "give /dev/shm at least %s: docker run --shm-size=8g (Docker's default is "
                  "64 MB) or --ipc=host; in Kubernetes mount an emptyDir with medium: Memory on "
                  "/dev/shm; too little shared memory makes NCCL fail with 'unhandled system "
                  "error' (error 2) and DataLoader workers die with a bus error", warn);
    }
    char **v = ck_vals_new(cx);
    if (v && ck_vals_fill(cx, v, v_shm) == 0) {
        ec_strbuf_printf(&b->found, "%s: ", cx->n ? cx->f[0]->shm_path : "/dev/shm");
        ck_groups(&b->found, cx, v);
    }
    ck_vals_free(cx, v);
    ck_status(b, EC_CHECK_PASS);
}

static char *v_memlock(const ec_check_facts_t *f)
{
    char s[32];
    ck_fmt_bytes(f->memlock_cur, s, sizeof(s));
    return f->memlock_cur < 0 ? strdup("unlimited")
                              : f->memlock_cur < (1LL << 20) ? ec_asprintf("%lld KiB",
                                                                           f->memlock_cur >> 10)
                                                             : strdup(s);
}

void rule_memlock(cx_t *cx, rb_t *b)
{
    const ec_check_limits_t *L = &cx->in->limits;
    int rdma = 0;
    for (int i = 0; i < cx->n; i++) {
        const ec_check_facts_t *f = cx->f[i];
        if (f->nib <= 0)
            continue;
        rdma++;
        if (f->memlock_cur < 0)
            continue;
        ck_status(b, f->memlock_cur < L->memlock_fail_bytes ? EC_CHECK_FAIL : EC_CHECK_WARN);
        ck_node(b, f->node_id);
        ck_fix(b, "raise the locked-memory limit to unlimited: ulimit -l unlimited, docker run "
                  "--ulimit memlock=-1, or '* - memlock unlimited' in "
                  "/etc/security/limits.conf; RDMA (InfiniBand, RoCE) registers NCCL's buffers as "
                  "locked memory and fails with a small limit");
    }
    char **v = ck_vals_new(cx);
    if (v && ck_vals_fill(cx, v, v_memlock) == 0) {
        ec_strbuf_puts(&b->found, "ulimit -l ");
        ck_groups(&b->found, cx, v);
    }
    ck_vals_free(cx, v);
    if (!rdma)
        ec_strbuf_puts(&b->found, "; no RDMA devices, so it does not matter");
    ck_status(b, EC_CHECK_PASS);
}
