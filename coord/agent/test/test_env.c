/* The environment a training process gets (coord/agent/env.c) from a whole
 * epoch or a follower's view of a split one: every variable that can be
 * computed is set, and a list that one environment string cannot hold
 * (execve's MAX_ARG_STRLEN, 128 KiB: E2BIG) is left out instead of making
 * every process fail to start.  A process started before its node is
 * admitted (no epoch) gets its node's variables and ecoord's, and none of
 * an epoch's.  The proxy variables many clusters set (http_proxy,
 * https_proxy, ...) are removed, as Paddle's launcher does: the processes'
 * collectives, torch's store and the worker library's etcd connection go
 * straight to their peers, never through a site proxy.
 */
#include "env.h"
#include "knobs.h"
#include "records.h"

#include <ec_check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ec_epoch_t *epoch(int M, int N)
{
    ec_epoch_t *ep = ec_epoch_new(M, N);
    ep->number = 3;
    ep->job_id = strdup("j");
    ep->leader_id = strdup("n0");
    ep->leader_rev = 5;
    ep->reason = EC_REASON_START;
    for (int i = 0; i < M; i++) {
        char b[64];
        snprintf(b, sizeof b, "node-%05d", i);
        ep->members[i].node_id = strdup(b);
        snprintf(b, sizeof b, "10.%d.%d.%d", i >> 16, (i >> 8) & 255, i & 255);
        ep->members[i].host = strdup(b);
        for (int j = 0; j < N; j++)
            ep->members[i].ports[j] = (uint16_t)(36000 + j);
        ep->members[i].master_port = 29500;
    }
    return ep;
}

static char **build(const ec_epoch_t *ep, int m, int n)
{
    ec_env_ctx_t ctx = {.job_id = "j", .node_id = ep->members[m].node_id, .log_dir = "/tmp",
                        .ngpus = 8};
    char *base[] = {NULL};
    char **env = NULL;
    ec_error_t err = {0};
    ck_assert_msg(ec_env_build(ep, m, n, &ctx, base, &env, &err) == 0, "%s", err.msg);
    return env;
}

START_TEST(lists_are_set_while_they_fit_one_environment_string)
{
    /* 512 x 8 = 4096 ranks: about 70 KB of endpoints, set */
    ec_epoch_t *ep = epoch(512, 8);
    char **env = build(ep, 7, 3);
    const char *eps = ec_env_get(env, "PADDLE_TRAINER_ENDPOINTS");
    ck_assert_ptr_nonnull(eps);
    ck_assert_uint_lt(strlen(eps), 128 * 1024);
    ck_assert_ptr_nonnull(ec_env_get(env, "PADDLE_WORLD_DEVICE_IDS"));
    ck_assert_str_eq(ec_env_get(env, "RANK"), "59");
    ec_env_free(env);
    ec_epoch_free(ep);
}
END_TEST

START_TEST(lists_too_long_for_execve_are_left_out)
{
    /* 2048 x 8 = 16,384 ranks: ~280 KB of endpoints and 32 KB of device
     * ids; the endpoints would make execve fail with E2BIG */
    ec_epoch_t *ep = epoch(2048, 8);
    char **env = build(ep, 2047, 7);
    ck_assert_ptr_null(ec_env_get(env, "PADDLE_TRAINER_ENDPOINTS"));
    for (char **e = env; *e; e++)
        ck_assert_uint_lt(strlen(*e) + 1, 128 * 1024);
    ck_assert_str_eq(ec_env_get(env, "RANK"), "16383");
    ck_assert_str_eq(ec_env_get(env, "WORLD_SIZE"), "16384");
    ck_assert_str_eq(ec_env_get(env, "PADDLE_MASTER"), "10.0.0.0:36000");
    ck_assert_str_eq(ec_env_get(env, "PADDLE_CURRENT_ENDPOINT"), "10.0.7.255:36007");
    ec_env_free(env);
    ec_epoch_free(ep);
}
END_TEST

START_TEST(a_view_of_a_split_epoch_gives_every_computable_variable)
{
    ec_epoch_t *ep = epoch(40, 2);
    ec_epoch_parts_t p;
    ck_assert_int_eq(ec_epoch_split(ep, 8, &p, NULL), 0);
    ec_epoch_t *v = NULL;
    ck_assert_int_eq(ec_epoch_decode_view(p.head, p.head_len, NULL, &v, NULL), 0);
    ck_assert_int_eq(ec_epoch_view_add_chunk(v, 2, p.chunk[2], p.chunk_len[2], NULL), 0);
    ck_assert_int_lt(v->present, v->nmembers);
    char **env = build(v, 17, 1);
    ck_assert_ptr_null(ec_env_get(env, "PADDLE_TRAINER_ENDPOINTS"));
    ck_assert_str_eq(ec_env_get(env, "RANK"), "35");
    ck_assert_str_eq(ec_env_get(env, "WORLD_SIZE"), "80");
    ck_assert_str_eq(ec_env_get(env, "GROUP_WORLD_SIZE"), "40");
    ck_assert_str_eq(ec_env_get(env, "MASTER_ADDR"), "10.0.0.0");
    ck_assert_str_eq(ec_env_get(env, "PADDLE_CURRENT_ENDPOINT"), "10.0.0.17:36001");
    ec_env_free(env);
    ec_epoch_free(v);
    ec_epoch_parts_free(&p);
    ec_epoch_free(ep);
}
END_TEST

START_TEST(a_process_started_before_admission_gets_no_epochs_variables)
{
    ec_env_ctx_t ctx = {.job_id = "j", .node_id = "n7", .log_dir = "/tmp", .ngpus = 2,
                        .visible_devices = "4,5", .rebuild = "inprocess", .nproc = 2,
                        .host = "10.0.0.7", .port = 36001, .start_epoch = 12, .incarnation = 3,
                        .lease = 0x1f};
    char *base[] = {"RANK=99", "WORLD_SIZE=99", "PATH=/bin", NULL};
    char **env = NULL;
    ec_error_t err = {0};
    ck_assert_msg(ec_env_build(NULL, -1, 1, &ctx, base, &env, &err) == 0, "%s", err.msg);
    /* the node's: place, GPU, own endpoint; ecoord's: what the library follows */
    ck_assert_str_eq(ec_env_get(env, "LOCAL_RANK"), "1");
    ck_assert_str_eq(ec_env_get(env, "LOCAL_WORLD_SIZE"), "2");
    ck_assert_str_eq(ec_env_get(env, "PADDLE_RANK_IN_NODE"), "1");
    ck_assert_str_eq(ec_env_get(env, "CUDA_VISIBLE_DEVICES"), "4,5");
    ck_assert_str_eq(ec_env_get(env, "FLAGS_selected_gpus"), "1");
    ck_assert_str_eq(ec_env_get(env, "PADDLE_CURRENT_ENDPOINT"), "10.0.0.7:36001");
    ck_assert_str_eq(ec_env_get(env, "ECOORD_EPOCH"), "12");
    ck_assert_str_eq(ec_env_get(env, "ECOORD_INCARNATION"), "3");
    ck_assert_str_eq(ec_env_get(env, "ECOORD_REBUILD"), "inprocess");
    ck_assert_str_eq(ec_env_get(env, "ECOORD_NODE_ID"), "n7");
    ck_assert_str_eq(ec_env_get(env, "PATH"), "/bin");
    /* nothing an epoch says, inherited ones removed (they would be lies) */
    static const char *const none[] = {"RANK", "WORLD_SIZE", "PADDLE_TRAINER_ID",
                                       "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS",
                                       "PADDLE_MASTER", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
                                       "PADDLE_WORLD_DEVICE_IDS", NULL};
    for (int i = 0; none[i]; i++)
        ck_assert_msg(!ec_env_get(env, none[i]), "%s set before admission", none[i]);
    ec_env_free(env);
    /* a local rank the node does not have */
    ck_assert_int_eq(ec_env_build(NULL, -1, 2, &ctx, base, &env, &err), EC_EINVAL);
}
END_TEST

START_TEST(proxy_variables_are_removed_and_named)
{
    char *base[] = {"http_proxy=http://p:3128", "https_proxy=http://p:3128",
                    "HTTP_PROXY=http://p:3128", "HTTPS_PROXY=http://p:3128",
                    "all_proxy=socks5://p:1080", "ALL_PROXY=socks5://p:1080",
                    "grpc_proxy=http://p:3128", "no_proxy=localhost", "PATH=/bin",
                    "my_https_proxy_note=kept", NULL};
    const char *gone[] = {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy",
                          "ALL_PROXY", "grpc_proxy", NULL};
    ec_epoch_t *ep = epoch(2, 2);
    ec_env_ctx_t ctx = {.job_id = "j", .node_id = ep->members[1].node_id, .log_dir = "/tmp"};
    char **env = NULL;
    ec_error_t err = {0};
    ck_assert_msg(ec_env_build(ep, 1, 0, &ctx, base, &env, &err) == 0, "%s", err.msg);
    for (int i = 0; gone[i]; i++)
        ck_assert_msg(!ec_env_get(env, gone[i]), "%s reached the process", gone[i]);
    ck_assert_str_eq(ec_env_get(env, "no_proxy"), "localhost");
    ck_assert_str_eq(ec_env_get(env, "PATH"), "/bin");
    ck_assert_str_eq(ec_env_get(env, "my_https_proxy_note"), "kept");
    ec_env_free(env);
    /* a process started before admission too */
    ctx.nproc = 2;
    ck_assert_int_eq(ec_env_build(NULL, -1, 1, &ctx, base, &env, &err), 0);
    for (int i = 0; gone[i]; i++)
        ck_assert_msg(!ec_env_get(env, gone[i]), "%s reached the process", gone[i]);
    ec_env_free(env);
    /* what the agent's one line names */
    char names[256];
    ck_assert_int_eq(ec_env_proxies(base, names, sizeof(names)), 7);
    ck_assert_str_eq(names, "http_proxy, https_proxy, HTTP_PROXY, HTTPS_PROXY, all_proxy, "
                            "ALL_PROXY, grpc_proxy");
    char *none[] = {"PATH=/bin", NULL};
    ck_assert_int_eq(ec_env_proxies(none, names, sizeof(names)), 0);
    ck_assert_str_eq(names, "");

    /* a proxy given for etcd (--etcd_proxy) goes to the worker library */
    ec_config_t cfg = EC_CONFIG_INITIALIZER;
    cfg.hostname = "h";
    char *argv[] = {"--etcd_proxy=http://p:3128", "--job_id=j", "prog", NULL};
    ck_assert_msg(ec_config_parse(&cfg, "launch", 3, argv, NULL, NULL, &err) == 0, "%s", err.msg);
    ctx.etcd = &cfg;
    ck_assert_int_eq(ec_env_build(ep, 1, 0, &ctx, base, &env, &err), 0);
    ck_assert_str_eq(ec_env_get(env, "ECOORD_ETCD_PROXY"), "http://p:3128");
    ck_assert_ptr_null(ec_env_get(env, "https_proxy"));
    ec_env_free(env);
    ec_config_release(&cfg);
    ec_epoch_free(ep);
}
END_TEST

/* torch 2.2 and later read TORCH_NCCL_ASYNC_ERROR_HANDLING and warn that
 * NCCL_ASYNC_ERROR_HANDLING is deprecated; older ones read only the latter:
 * the current name always, the old one too for a torch known to be older,
 * nothing over a user's own setting of either. */
START_TEST(async_error_handling_uses_the_name_the_programs_torch_reads)
{
    char *base[] = {"PATH=/bin", NULL};
    ec_epoch_t *ep = epoch(1, 1);
    ec_env_ctx_t ctx = {.job_id = "j", .node_id = ep->members[0].node_id, .log_dir = "/tmp"};
    const char *versions[] = {NULL, "", "2.11.0+cu128", "2.2.0", "1.13.1", "2.1.2+cu121"};
    bool old_name[] = {false, false, false, false, true, true};
    for (int i = 0; i < 6; i++) {
        ctx.torch_version = versions[i];
        char **env = NULL;
        ec_error_t err = {0};
        ck_assert_msg(ec_env_build(ep, 0, 0, &ctx, base, &env, &err) == 0, "%s", err.msg);
        ck_assert_str_eq(ec_env_get(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");
        ck_assert_msg((ec_env_get(env, "NCCL_ASYNC_ERROR_HANDLING") != NULL) == old_name[i],
                      "torch %s: NCCL_ASYNC_ERROR_HANDLING %s", versions[i] ? versions[i] : "?",
                      old_name[i] ? "missing" : "set (deprecated there)");
        ec_env_free(env);
    }
    char *mine[] = {"PATH=/bin", "NCCL_ASYNC_ERROR_HANDLING=0", NULL};
    char **env = NULL;
    ctx.torch_version = "2.11.0";
    ck_assert_int_eq(ec_env_build(ep, 0, 0, &ctx, mine, &env, NULL), 0);
    ck_assert_str_eq(ec_env_get(env, "NCCL_ASYNC_ERROR_HANDLING"), "0");
    ck_assert_ptr_null(ec_env_get(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"));
    ec_env_free(env);
    ec_epoch_free(ep);
}
END_TEST

static Suite *suite(void)
{
    return ec_check_suite("env", NULL, NULL,
                          EC_CHECK_TESTS(
                              lists_are_set_while_they_fit_one_environment_string,
                              lists_too_long_for_execve_are_left_out,
                              a_view_of_a_split_epoch_gives_every_computable_variable,
                              a_process_started_before_admission_gets_no_epochs_variables,
                              proxy_variables_are_removed_and_named,
                              async_error_handling_uses_the_name_the_programs_torch_reads));
}

EC_CHECK_MAIN(suite)
