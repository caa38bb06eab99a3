/* `ecoord check`'s report: one verdict per check, what was found, the fix
 * and the nodes concerned.
 *
 * The leader computes it (rules.h), encodes it (codec.c: protobuf message
 * ecoord.CheckReport of proto/ecoord.proto, versioned like the facts) and
 * publishes it under <job>/check/report; every node decodes it and renders
 * the same text or JSON (report.c).
 */
#ifndef EC_CHECK_REPORT_H
#define EC_CHECK_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "error.h"
#include "facts.h"
#include "keys.h"

/* 1: the text encoding of earlier ecoords; 2: protobuf (CheckReport). */
#define EC_CHECK_REPORT_VERSION 2

/* Caps the decoder applies. */
#define EC_CHECK_MAX_RESULTS 64
#define EC_CHECK_MAX_LIST 65536   /* nodes of a report, details or nodes of a result */

/* Node names listed in one line (the header, a finding) before "+N more". */
#define EC_CHECK_SHOW_NODES 8

typedef enum {
    EC_CHECK_PASS = 0,
    EC_CHECK_WARN,
    EC_CHECK_FAIL,
    EC_CHECK_SKIP,
} ec_check_status_t;

typedef struct ec_check_result {
    char name[24];
    ec_check_status_t status;
    char *found;                 /* one line */
    char *fix;                   /* "" for PASS and SKIP */
    int ndetails;
    char **details;              /* lines shown under it (side-by-side listings) */
    int nnodes;
    char **nodes;                /* the nodes it concerns */
} ec_check_result_t;

typedef struct ec_check_report {
    int version;                 /* EC_CHECK_REPORT_VERSION */
    char job_id[EC_JOB_ID_MAX + 1];
    char leader[EC_NODE_ID_MAX + 1];
    char leader_nonce[EC_CHECK_NONCE_LEN + 1]; /* tells this run's report from a stale one */
    int np_min, np_max;
    int nnodes;
    char **nodes;                /* the node ids that took part, sorted */
    int nresults;
    ec_check_result_t *results;
    /* 1: a claim, not a report: the leader creates <job>/check/report with
     * only job_id, leader and leader_nonce set when it is elected, and
     * replaces it with the report (pending 0) at the end. */
    int pending;
} ec_check_report_t;

void ec_check_report_clear(ec_check_report_t *rep);
/* The result named name, or NULL. */
const ec_check_result_t *ec_check_report_find(const ec_check_report_t *rep, const char *name);
/* Count results by status: counts[EC_CHECK_PASS..EC_CHECK_SKIP]. */
void ec_check_report_counts(const ec_check_report_t *rep, int counts[4]);
const char *ec_check_status_name(ec_check_status_t s); /* "PASS" ... */

/* Encode (codec.c) into a malloc'd buffer of *len bytes: 0 or EC_ENOMEM.
 * Decode into *rep (cleared on error): 0, or EC_ECORRUPT with err saying
 * what is wrong and where (key may be NULL). */
int ec_check_report_encode(const ec_check_report_t *rep, void **buf, size_t *len, ec_error_t *err);
int ec_check_report_decode(const void *buf, size_t len, const char *key, ec_check_report_t *rep,
                           ec_error_t *err);

/* Human form: a header, one line per check
 *   "PASS  name              found"
 * then "      fix: ..." for WARN and FAIL, detail lines indented under it, and
 * "N passed, N warnings, N failed, N skipped".  JSON form: one object,
 *   {"job_id", "leader", "np": {"min","max"}, "nodes": [...],
 *    "checks": [{"name","status","found","fix","details":[...],"nodes":[...]}],
 *    "summary": {"passed","warnings","failed","skipped"}, "ok": bool}
 * Field names are stable; fields are added, never renamed. */
void ec_check_report_print(const ec_check_report_t *rep, FILE *out);
void ec_check_report_print_json(const ec_check_report_t *rep, FILE *out);

#endif
