/* Rules checked (worker/gpu_policy.c, no GPU needed): every ncclResult_t
 * has one explicit verdict; a bad argument is ECW_EINVAL, a CUDA one keeps
 * the communicator; peers' failures take the peer-failure path; the sticky
 * CUDA errors that lose the context are ECW_ERESTART, also when NCCL reports
 * them as ncclUnhandledCudaError; an unknown value drops the communicator
 * and keeps the process.  A buffer goes to NCCL only if it is device memory
 * of the communicator's device (or managed): host, pinned host, unregistered
 * and another device's memory are refused with ECW_EINVAL naming the
 * buffer, a failing attribute query with its verdict. */
#include <string.h>

#include "ec_check.h"
#include "ecw.h"
#include "gpu_policy.h"

START_TEST(every_nccl_result_has_an_explicit_verdict)
{
    /* 0..8: ncclSuccess .. ncclTimeout (2.29); none falls to "unknown" */
    for (int r = 0; r <= 8; r++)
        ck_assert_msg(strcmp(ecw__nccl_verdict(r).name, "unknown"), "ncclResult_t %d", r);
    ck_assert_int_eq(ecw__nccl_verdict(0).cls, ECW__GPU_OK);
    ck_assert_int_eq(ecw__nccl_verdict(7).cls, ECW__GPU_PENDING);
    ecw__gpu_verdict_t v = ecw__nccl_verdict(4); /* ncclInvalidArgument */
    ck_assert_int_eq(v.cls, ECW__GPU_BAD_ARG);
    ck_assert_int_eq(v.code, ECW_EINVAL);
    /* NCCL keeps it as a non-blocking communicator's async error */
    ck_assert(!v.keeps_comm);
    ck_assert_int_eq(ecw__nccl_verdict(5).code, ECW_EINVAL);
    for (int r = 2; r <= 8; r += 4) { /* system, remote */
        ck_assert_int_eq(ecw__nccl_verdict(r).cls, ECW__GPU_PEER);
        ck_assert_int_eq(ecw__nccl_verdict(r).code, ECW_EIO);
    }
    ck_assert_int_eq(ecw__nccl_verdict(8).cls, ECW__GPU_PEER);
    ck_assert_int_eq(ecw__nccl_verdict(8).code, ECW_ETIMEDOUT);
    ck_assert_int_eq(ecw__nccl_verdict(3).cls, ECW__GPU_BROKEN);
    ck_assert_int_eq(ecw__nccl_verdict(1).cls, ECW__GPU_ASK_CUDA);
    v = ecw__nccl_verdict(42);
    ck_assert_int_eq(v.cls, ECW__GPU_BROKEN);
    ck_assert_int_eq(v.code, ECW_EINTERNAL);
    ck_assert(!v.keeps_comm);
}
END_TEST

START_TEST(fatal_cuda_errors_mean_restart_the_process)
{
    /* illegal address, launch failure, ECC, misaligned, hardware stack,
     * illegal instruction, assert, context destroyed, unknown */
    int fatal[] = {700, 719, 214, 716, 714, 715, 710, 709, 220, 46, 999};
    for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++) {
        ecw__gpu_verdict_t v = ecw__cuda_verdict(fatal[i]);
        ck_assert_msg(v.cls == ECW__GPU_FATAL && v.code == ECW_ERESTART && !v.keeps_comm,
                      "cudaError_t %d (%s)", fatal[i], v.name);
        /* and the same when NCCL hides it behind ncclUnhandledCudaError */
        ck_assert_int_eq(ecw__nccl_cuda_verdict(fatal[i]).code, ECW_ERESTART);
    }
    ck_assert_str_eq(ecw__cuda_verdict(700).name, "cudaErrorIllegalAddress");
    ck_assert_str_eq(ecw_err_name(ECW_ERESTART), "ECW_ERESTART");
    ck_assert_str_eq(ecw_strerror(ECW_ERESTART), "restart this process");
    /* a CUDA failure inside NCCL on a healthy context: the comm goes, not the process */
    ecw__gpu_verdict_t v = ecw__nccl_cuda_verdict(0);
    ck_assert_int_eq(v.cls, ECW__GPU_BROKEN);
    ck_assert_int_eq(v.code, ECW_EINTERNAL);
    ck_assert_int_eq(ecw__nccl_cuda_verdict(2).code, ECW_EINTERNAL);
}
END_TEST

START_TEST(cuda_argument_and_device_errors_keep_the_process)
{
    ecw__gpu_verdict_t v = ecw__cuda_verdict(1); /* cudaErrorInvalidValue */
    ck_assert_int_eq(v.code, ECW_EINVAL);
    ck_assert(v.keeps_comm);
    ck_assert_int_eq(ecw__cuda_verdict(400).code, ECW_EINVAL); /* a bad stream handle */
    ck_assert_int_eq(ecw__cuda_verdict(2).code, ECW_ENOMEM);
    ck_assert(ecw__cuda_verdict(2).keeps_comm);
    ck_assert_int_eq(ecw__cuda_verdict(600).cls, ECW__GPU_PENDING);
    /* no driver (what this machine answers), no device: no GPU here */
    int none[] = {35, 100, 3, 34, 101};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
        ck_assert_int_eq(ecw__cuda_verdict(none[i]).cls, ECW__GPU_NO_DEVICE);
    ck_assert_int_eq(ecw__cuda_verdict(12345).cls, ECW__GPU_BROKEN);
}
END_TEST

/* A stub of cudaPointerGetAttributes: what CUDA would say of each pointer. */
typedef struct {
    int rc, type, device, calls;
} stub_t;

static int stub_attr(const void *p, int *type, int *device, void *arg)
{
    stub_t *s = arg;
    (void)p;
    s->calls++;
    *type = s->type;
    *device = s->device;
    return s->rc;
}

START_TEST(only_device_memory_of_the_comms_device_goes_to_nccl)
{
    ec_error_t err = {0};
    char buf[16] = {0};
    stub_t s = {0, 2, 1, 0};
    ck_assert_int_eq(ecw__gpu_check_buffer("allreduce", "buf", buf, 16, 1, stub_attr, &s, &err),
                     0);
    s.type = 3; /* managed */
    ck_assert_int_eq(ecw__gpu_check_buffer("allreduce", "buf", buf, 16, 1, stub_attr, &s, &err),
                     0);
    s.type = 2;
    s.device = 0; /* another GPU's memory */
    ck_assert_int_eq(ecw__gpu_check_buffer("allreduce", "buf", buf, 16, 1, stub_attr, &s, &err),
                     ECW_EINVAL);
    ck_assert_msg(strstr(err.msg, "device 0") && strstr(err.msg, "device 1"), "%s", err.msg);
    for (int t = 0; t <= 1; t++) { /* unregistered (malloc), pinned host */
        s.type = t;
        ck_assert_int_eq(
            ecw__gpu_check_buffer("broadcast", "sendbuf", buf, 16, 1, stub_attr, &s, &err),
            ECW_EINVAL);
        ck_assert_msg(strstr(err.msg, "host") && strstr(err.msg, "sendbuf") &&
                          strstr(err.msg, "gloo"),
                      "%s", err.msg);
    }
    /* CUDA before 11 refused a plain host pointer with cudaErrorInvalidValue */
    s = (stub_t){1, 2, 1, 0};
    ck_assert_int_eq(ecw__gpu_check_buffer("allreduce", "buf", buf, 16, 1, stub_attr, &s, &err),
                     ECW_EINVAL);
    ck_assert_msg(strstr(err.msg, "host"), "%s", err.msg);
    /* the query failing on a lost context: restart */
    s = (stub_t){700, 2, 1, 0};
    ck_assert_int_eq(ecw__gpu_check_buffer("allreduce", "buf", buf, 16, 1, stub_attr, &s, &err),
                     ECW_ERESTART);
    ck_assert_msg(strstr(err.msg, "cudaErrorIllegalAddress"), "%s", err.msg);
    /* NULL with bytes: refused without asking CUDA; zero bytes: nothing to check */
    s = (stub_t){0, 0, 0, 0};
    ck_assert_int_eq(ecw__gpu_check_buffer("allreduce", "buf", NULL, 4, 1, stub_attr, &s, &err),
                     ECW_EINVAL);
    ck_assert_int_eq(ecw__gpu_check_buffer("allreduce", "buf", NULL, 0, 1, stub_attr, &s, &err),
                     0);
    ck_assert_int_eq(s.calls, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("test_gpu_policy");
    TCase *t = tcase_create("policy");
    tcase_add_test(t, every_nccl_result_has_an_explicit_verdict);
    tcase_add_test(t, fatal_cuda_errors_mean_restart_the_process);
    tcase_add_test(t, cuda_argument_and_device_errors_keep_the_process);
    tcase_add_test(t, only_device_memory_of_the_comms_device_goes_to_nccl);
    suite_add_tcase(s, t);
    return s;
}

EC_CHECK_MAIN(suite)
