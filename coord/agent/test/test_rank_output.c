/* The rule under test: each local rank's stdout and stderr go where the
 * launcher the user came from puts them (coord/agent/procs.h,
 * ec_procs_plan).  Paddle's: both into workerlog.N, local rank 0's also on
 * the console.  torchrun's (its multiprocessing/api.py and run.py): each
 * stream on the console as is; -r/--redirects N sends stream N (1 stdout,
 * 2 stderr, 3 both) to a file instead; -t/--tee to a file and the console
 * with torchrun's "[<role><local_rank>]:" prefix; LOCAL_RANK:N pairs give
 * each rank its own, unlisted ranks 0; --local_ranks_filter keeps the
 * other ranks off the console only.
 */
#include "procs.h"

#include <ec_check.h>
#include <string.h>

static ec_rank_plan_t plan;
static ec_error_t err;

static void torch(const char *redirects, const char *tee, const char *filter, int r)
{
    ck_assert_msg(ec_procs_plan(EC_PROCS_TORCHRUN, redirects, tee, filter, r, &plan, &err) == 0,
                  "%s", err.msg);
}

#define STREAM(s, want_file, want_con)                                                   \
    do {                                                                                  \
        ck_assert_int_eq((s).file, (want_file));                                          \
        ck_assert_int_eq((s).con, (want_con));                                            \
    } while (0)

START_TEST(paddle_shows_local_rank_0_and_logs_every_rank)
{
    ck_assert_int_eq(ec_procs_plan(EC_PROCS_PADDLE, "3", "3", "1", 0, &plan, &err), 0);
    ck_assert_int_eq(plan.merged, 1);
    STREAM(plan.out, 1, EC_CON_PLAIN);
    for (int r = 1; r < 4; r++) {
        ck_assert_int_eq(ec_procs_plan(EC_PROCS_PADDLE, NULL, NULL, NULL, r, &plan, &err), 0);
        ck_assert_int_eq(plan.merged, 1);
        STREAM(plan.out, 1, EC_CON_NONE);
    }
}
END_TEST

START_TEST(torchrun_shows_every_rank_as_is_and_writes_no_file)
{
    for (int r = 0; r < 4; r++) {
        torch(NULL, "", NULL, r);
        ck_assert_int_eq(plan.merged, 0);
        STREAM(plan.out, 0, EC_CON_PLAIN);
        STREAM(plan.err, 0, EC_CON_PLAIN);
    }
    torch("0", "0", "", 3);
    STREAM(plan.out, 0, EC_CON_PLAIN);
}
END_TEST

START_TEST(redirects_send_streams_to_files_and_tee_to_both_with_the_prefix)
{
    torch("3", NULL, NULL, 1);
    STREAM(plan.out, 1, EC_CON_NONE);
    STREAM(plan.err, 1, EC_CON_NONE);
    torch("2", NULL, NULL, 0);
    STREAM(plan.out, 0, EC_CON_PLAIN);
    STREAM(plan.err, 1, EC_CON_NONE);
    torch(NULL, "1", NULL, 0);
    STREAM(plan.out, 1, EC_CON_PREFIXED);
    STREAM(plan.err, 0, EC_CON_PLAIN);
    /* a tee wins over a redirect of the same stream: both file and console */
    torch("3", "3", NULL, 2);
    STREAM(plan.out, 1, EC_CON_PREFIXED);
    STREAM(plan.err, 1, EC_CON_PREFIXED);
}
END_TEST

START_TEST(per_rank_pairs_and_unlisted_ranks)
{
    torch("0:1,1:2", "2:3", NULL, 0);
    STREAM(plan.out, 1, EC_CON_NONE);
    STREAM(plan.err, 0, EC_CON_PLAIN);
    torch("0:1,1:2", "2:3", NULL, 1);
    STREAM(plan.out, 0, EC_CON_PLAIN);
    STREAM(plan.err, 1, EC_CON_NONE);
    torch("0:1,1:2", "2:3", NULL, 2);
    STREAM(plan.out, 1, EC_CON_PREFIXED);
    STREAM(plan.err, 1, EC_CON_PREFIXED);
    torch("0:1,1:2", "2:3", NULL, 3); /* listed nowhere: 0 */
    STREAM(plan.out, 0, EC_CON_PLAIN);
    STREAM(plan.err, 0, EC_CON_PLAIN);
    torch("10:3", NULL, NULL, 10);
    STREAM(plan.out, 1, EC_CON_NONE);
    torch("10:3", NULL, NULL, 1);
    STREAM(plan.out, 0, EC_CON_PLAIN);
}
END_TEST

START_TEST(ranks_filter_keeps_other_ranks_off_the_console_only)
{
    torch(NULL, "3", "0,2", 1);
    STREAM(plan.out, 1, EC_CON_NONE); /* still in its file */
    STREAM(plan.err, 1, EC_CON_NONE);
    torch(NULL, NULL, "0,2", 1);
    STREAM(plan.out, 0, EC_CON_NONE);
    torch(NULL, "3", "0,2", 2);
    STREAM(plan.out, 1, EC_CON_PREFIXED);
    torch(NULL, NULL, "0,12", 2);
    STREAM(plan.out, 0, EC_CON_NONE);
    torch(NULL, NULL, "0,12", 12);
    STREAM(plan.out, 0, EC_CON_PLAIN);
}
END_TEST

START_TEST(malformed_forms_are_refused)
{
    const char *bad[] = {"4", "a", "0:4", "0:1,", ":1", "0:1,x:2", "01", "0-1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(ec_procs_plan(EC_PROCS_TORCHRUN, bad[i], NULL, NULL, 0, &plan, &err) ==
                          EC_EINVAL,
                      "--redirects=%s accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(err.msg, "--redirects"));
        ck_assert_int_eq(ec_procs_plan(EC_PROCS_TORCHRUN, NULL, bad[i], NULL, 0, &plan, &err),
                         EC_EINVAL);
    }
}
END_TEST

/* torchrun's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, filled as Python's
 * string.Template.safe_substitute fills it (each expected value below is
 * what Python 3 gives for role_name=trainer, rank=5, local_rank=1,
 * hostname=h1: the names torch's local_elastic_agent.py passes). */
START_TEST(a_prefix_template_is_filled_as_torchrun_fills_it)
{
    const char *cases[][2] = {
        {"[rank${rank}]: ", "[rank5]: "},
        {"$role_name-$local_rank|", "trainer-1|"},
        {"${rank}$$", "5$"},
        {"$unknown ${rank $ $1", "$unknown ${rank $ $1"},
        {"${ranks}$ranks $rank_x", "${ranks}$ranks $rank_x"},
        {"$RANK", "$RANK"},
        {"[$hostname:$rank] ", "[h1:5] "},
        {"", ""},
    };
    char out[256];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ec_procs_prefix_format(cases[i][0], "trainer", 5, 1, "h1", out, sizeof(out));
        ck_assert_msg(!strcmp(out, cases[i][1]), "'%s' gave '%s', not '%s'", cases[i][0], out,
                      cases[i][1]);
    }
    /* a rank not known yet (started before its epoch), no role: torchrun's */
    ec_procs_prefix_format("[${role_name}${rank}/${local_rank}]:", NULL, -1, 3, NULL, out,
                           sizeof(out));
    ck_assert_str_eq(out, "[default?/3]:");
    ec_procs_prefix_format("${rank}${rank}${rank}", "r", 123456, 0, NULL, out, 8);
    ck_assert_str_eq(out, "1234561");
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("rank_output", NULL, NULL,
                          EC_CHECK_TESTS(
                              paddle_shows_local_rank_0_and_logs_every_rank,
                              torchrun_shows_every_rank_as_is_and_writes_no_file,
                              redirects_send_streams_to_files_and_tee_to_both_with_the_prefix,
                              per_rank_pairs_and_unlisted_ranks,
                              ranks_filter_keeps_other_ranks_off_the_console_only,
                              malformed_forms_are_refused,
                              a_prefix_template_is_filled_as_torchrun_fills_it));
}

EC_CHECK_MAIN(suite)
