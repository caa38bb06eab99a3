/* Inside the comparison: what the rules_*.c files share (not for callers;
 * they use rules.h).
 *
 * ec_check_compare (rules.c) sorts the facts into a cx_t and calls every rule
 * of its table with a finding under construction (rb_t).  A rule reads the
 * facts, raises the finding's status with ck_status (the worst wins), writes
 * what it found into b->found, adds fix sentences (ck_fix, each once), names
 * the nodes concerned (ck_node) and detail lines (ck_detail).  The helpers
 * below format values the same way in every rule.  Out of memory is noticed
 * once, when the finding is finished.
 */
#ifndef EC_CHECK_RULES_IMPL_H
#define EC_CHECK_RULES_IMPL_H

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules.h"
#include "strbuf.h"

/* The comparison's input, sorted. */
typedef struct cx {
    const ec_check_input_t *in;
    const ec_check_facts_t **f; /* sorted by node id, then nonce */
    int n;
    int any_driver;             /* some node has an NVIDIA driver */
    int oom;
} cx_t;

/* A finding under construction: the worst status wins. */
typedef struct rb {
    ec_check_result_t *r;
    ec_check_status_t st;
    ec_strbuf_t found, fix;
    int oom;
} rb_t;

/* ---- building a finding (rules.c) -------------------------------------- */

/* Raise the finding's status to s if s is worse (SKIP < PASS < WARN < FAIL). */
void ck_status(rb_t *b, ec_check_status_t s);
/* Add a fix sentence, once ("; " between sentences). */
void ck_fix(rb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Name a node the finding concerns (once). */
void ck_node(rb_t *b, const char *id);
/* Add a line shown under the finding. */
void ck_detail(rb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "a, b, c" (at most EC_CHECK_SHOW_NODES names, then "+N more"). */
void ck_names(ec_strbuf_t *b, const char *const *ids, int n);
/* ck_names of every node compared. */
void ck_all_names(ec_strbuf_t *b, cx_t *cx);
/* "V1 on a, b; V2 on c": nodes grouped by vals[i] (cx order).  Returns the
 * number of distinct values. */
int ck_groups(ec_strbuf_t *b, cx_t *cx, char **vals);
/* One value per node: ck_vals_new, ck_vals_fill(fn), ck_groups, ck_vals_free
 * (accepts NULL).  new and fill set cx->oom when out of memory. */
char **ck_vals_new(cx_t *cx);
int ck_vals_fill(cx_t *cx, char **v, char *(*fn)(const ec_check_facts_t *));
void ck_vals_free(cx_t *cx, char **v);
/* A malloc'd formatted string, NULL when out of memory. */

/* Value formats: "1.5 GiB"/"512 MiB"/"unknown", "12.4"/"none",
 * "2.21.5"/"not found", "3.2 ms"/"1.50 s", "--np=2" / "--np=1:4". */
void ck_fmt_bytes(long long b, char *buf, size_t len);
void ck_fmt_cuda(int v, char *buf, size_t len);
void ck_fmt_nccl(int v, char *buf, size_t len);
void ck_fmt_us(int64_t us, char *buf, size_t len);
void ck_fmt_np(const ec_check_input_t *in, char *buf, size_t len);

/* Whether some other node runs on another machine than f. */
int ck_has_remote_peer(cx_t *cx, const ec_check_facts_t *f);
/* f's interface names, each once: "lo, eth0" ("none"). */
void ck_iface_names(const ec_check_facts_t *f, ec_strbuf_t *b);

static inline int same_machine(const ec_check_facts_t *a, const ec_check_facts_t *b)
{
    return a->boot_id[0] && !strcmp(a->boot_id, b->boot_id);
}

static inline int is_loopback_addr(const char *a)
{
    return !strncmp(a, "127.", 4) || !strcmp(a, "::1") || !strcmp(a, "localhost");
}

static inline int is_bridge_if(const char *ifname)
{
    return !strncmp(ifname, "docker", 6) || !strncmp(ifname, "br-", 3) ||
           !strncmp(ifname, "virbr", 5);
}

/* The node reached the final phase and its key is still there. */
static inline int is_complete(cx_t *cx, const ec_check_facts_t *f)
{
    return !f->gone && f->phase >= cx->in->final_phase;
}

/* This node could not reach etcd: it compares its own facts only. */
static inline int etcd_down(cx_t *cx)
{
    return cx->in->etcd_error && *cx->in->etcd_error;
}

/* ---- the rules, one per entry of ec_check_names, by topic -------------- */

/* rules_nodes.c */
void rule_nodes(cx_t *cx, rb_t *b);
void rule_node_ids(cx_t *cx, rb_t *b);
void rule_host_names(cx_t *cx, rb_t *b);
/* rules_etcd.c */
void rule_etcd(cx_t *cx, rb_t *b);
void rule_clock(cx_t *cx, rb_t *b);
/* rules_network.c */
void rule_address(cx_t *cx, rb_t *b);
void rule_socket_ifname(cx_t *cx, rb_t *b);
void rule_ports(cx_t *cx, rb_t *b);
/* rules_devices.c */
void rule_gpu_count(cx_t *cx, rb_t *b);
void rule_gpu_devices(cx_t *cx, rb_t *b);
void rule_gpu_busy(cx_t *cx, rb_t *b);
void rule_gpu_p2p(cx_t *cx, rb_t *b);
void rule_cuda(cx_t *cx, rb_t *b);
void rule_nccl(cx_t *cx, rb_t *b);
/* rules_memory.c */
void rule_shm(cx_t *cx, rb_t *b);
void rule_memlock(cx_t *cx, rb_t *b);
/* rules_env.c */
void rule_environment(cx_t *cx, rb_t *b);
/* rules_collective.c */
void rule_allreduce(cx_t *cx, rb_t *b);

#endif
