/* The report record (see report.h): freeing and looking it up, and its two
 * renderings, text for people and JSON for programs.  Its encoding is in
 * codec.c; ec_check_compare (rules.c) fills it. */
#include "report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

const char *ec_check_status_name(ec_check_status_t s)
{
    switch (s) {
    case EC_CHECK_PASS:
        return "PASS";
    case EC_CHECK_WARN:
        return "WARN";
    case EC_CHECK_FAIL:
        return "FAIL";
    case EC_CHECK_SKIP:
        return "SKIP";
    }
    return "?";
}

/* ------------------------------------------------------------------------ */
/* the report                                                                */

static void result_clear(ec_check_result_t *r)
{
    free(r->found);
    free(r->fix);
    for (int i = 0; i < r->ndetails; i++)
        free(r->details[i]);
    free(r->details);
    for (int i = 0; i < r->nnodes; i++)
        free(r->nodes[i]);
    free(r->nodes);
    memset(r, 0, sizeof(*r));
}

void ec_check_report_clear(ec_check_report_t *rep)
{
    if (!rep)
        return;
    int saved = errno;
    for (int i = 0; i < rep->nresults; i++)
        result_clear(&rep->results[i]);
    free(rep->results);
    for (int i = 0; i < rep->nnodes; i++)
        free(rep->nodes[i]);
    free(rep->nodes);
    memset(rep, 0, sizeof(*rep));
    errno = saved;
}

const ec_check_result_t *ec_check_report_find(const ec_check_report_t *rep, const char *name)
{
    for (int i = 0; i < rep->nresults; i++)
        if (!strcmp(rep->results[i].name, name))
            return &rep->results[i];
    return NULL;
}

void ec_check_report_counts(const ec_check_report_t *rep, int counts[4])
{
    counts[0] = counts[1] = counts[2] = counts[3] = 0;
    for (int i = 0; i < rep->nresults; i++)
        if ((int)rep->results[i].status >= 0 && rep->results[i].status <= EC_CHECK_SKIP)
            counts[rep->results[i].status]++;
}

#define NAME_WIDTH 14

void ec_check_report_print(const ec_check_report_t *rep, FILE *out)
{
    fprintf(out, "ecoord check: job %s, %d node%s (", rep->job_id, rep->nnodes,
            rep->nnodes == 1 ? "" : "s");
    for (int i = 0; i < rep->nnodes && i < EC_CHECK_SHOW_NODES; i++)
        fprintf(out, "%s%s", i ? ", " : "", rep->nodes[i]);
    if (rep->nnodes > EC_CHECK_SHOW_NODES)
        fprintf(out, ", +%d more", rep->nnodes - EC_CHECK_SHOW_NODES);
    if (rep->np_min == rep->np_max)
        fprintf(out, ") of --np=%d, report by %s\n", rep->np_max, rep->leader);
    else
        fprintf(out, ") of --np=%d:%d, report by %s\n", rep->np_min, rep->np_max, rep->leader);
    for (int i = 0; i < rep->nresults; i++) {
        const ec_check_result_t *r = &rep->results[i];
        fprintf(out, "%s  %-*s  %s\n", ec_check_status_name(r->status), NAME_WIDTH, r->name,
                r->found ? r->found : "");
        for (int k = 0; k < r->ndetails; k++)
            fprintf(out, "        %s\n", r->details[k]);
        if ((r->status == EC_CHECK_WARN || r->status == EC_CHECK_FAIL) && r->fix && *r->fix)
            fprintf(out, "      fix: %s\n", r->fix);
    }
    int c[4];
    ec_check_report_counts(rep, c);
    fprintf(out, "%d passed, %d warning%s, %d failed, %d skipped\n", c[EC_CHECK_PASS],
            c[EC_CHECK_WARN], c[EC_CHECK_WARN] == 1 ? "" : "s", c[EC_CHECK_FAIL],
            c[EC_CHECK_SKIP]);
}

void ec_check_report_print_json(const ec_check_report_t *rep, FILE *out)
{
    int c[4];
    ec_check_report_counts(rep, c);
    fputs("{\"job_id\":", out);
    ec_json_str(out, rep->job_id);
    fputs(",\"leader\":", out);
    ec_json_str(out, rep->leader);
    fprintf(out, ",\"np\":{\"min\":%d,\"max\":%d},\"nodes\":", rep->np_min, rep->np_max);
    ec_json_strs(out, (const char *const *)rep->nodes, rep->nnodes);
    fputs(",\"checks\":[", out);
    for (int i = 0; i < rep->nresults; i++) {
        const ec_check_result_t *r = &rep->results[i];
        fputs(i ? ",{\"name\":" : "{\"name\":", out);
        ec_json_str(out, r->name);
        fputs(",\"status\":", out);
        ec_json_str(out, ec_check_status_name(r->status));
        fputs(",\"found\":", out);
        ec_json_str(out, r->found ? r->found : "");
        fputs(",\"fix\":", out);
        ec_json_str(out, r->fix ? r->fix : "");
        fputs(",\"details\":", out);
        ec_json_strs(out, (const char *const *)r->details, r->ndetails);
        fputs(",\"nodes\":", out);
        ec_json_strs(out, (const char *const *)r->nodes, r->nnodes);
        fputc('}', out);
    }
    fprintf(out, "],\"summary\":{\"passed\":%d,\"warnings\":%d,\"failed\":%d,\"skipped\":%d},"
                 "\"ok\":%s}\n",
            c[EC_CHECK_PASS], c[EC_CHECK_WARN], c[EC_CHECK_FAIL], c[EC_CHECK_SKIP],
            c[EC_CHECK_FAIL] ? "false" : "true");
}
