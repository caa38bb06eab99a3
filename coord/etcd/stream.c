/* A bidirectional gRPC stream driven by the one thread that owns it.
 *
 * etcd sends a stream's headers only with its first response, so
 * RECV_INITIAL_METADATA is posted in a batch of its own and never waited for
 * before the first send.  RECV_STATUS_ON_CLIENT is posted at the start: it
 * completes when the stream dies.  One RECV_MESSAGE and one SEND_MESSAGE may
 * be outstanding at a time. */
#include <stdlib.h>
#include <string.h>

#include "etcd_impl.h"
#include "clock.h"

#define TAG_MD ((void *)1)
#define TAG_STATUS ((void *)2)
#define TAG_RECV ((void *)3)
#define TAG_SEND ((void *)4)

static int post(ec__stream_t *s, grpc_op *ops, size_t n, void *tag)
{
    if (grpc_call_start_batch(s->call, ops, n, tag, NULL) != GRPC_CALL_OK)
        return -1;
    s->pending++;
    return 0;
}

static int arm_recv(ec__stream_t *s)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->recv_slot;
    s->recv_slot = NULL;
    return post(s, &op, 1, TAG_RECV);
}

int ec__stream_open(ec__stream_t *s, ec_etcd_t *c, const char *method, pthread_mutex_t *call_lock,
                    ec_error_t *err)
{
    memset(s, 0, sizeof(*s));
    s->c = c;
    s->call_lock = call_lock;
    s->cq = grpc_completion_queue_create_for_next(NULL);
    grpc_metadata_array_init(&s->init_md);
    grpc_metadata_array_init(&s->trailing);
    s->details = grpc_empty_slice();
    s->token = ec__token(c, NULL);
    grpc_call *call = grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq,
                                               grpc_slice_from_static_string(method), NULL,
                                               gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    pthread_mutex_lock(call_lock);
    s->call = call;
    pthread_mutex_unlock(call_lock);
    grpc_op ops[1];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[0].data.recv_initial_metadata.recv_initial_metadata = &s->init_md;
    if (post(s, ops, 1, TAG_MD) < 0)
        goto fail;
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &s->trailing;
    ops[0].data.recv_status_on_client.status = &s->status;
    ops[0].data.recv_status_on_client.status_details = &s->details;
    if (post(s, ops, 1, TAG_STATUS) < 0)
        goto fail;
    if (arm_recv(s) < 0)
        goto fail;
    return 0;
fail:
    ec__stream_close(s);
    return ec_errorf(err, EC_EINTERNAL, "cannot start the %s stream", method);
}

int ec__stream_send(ec__stream_t *s, const ProtobufCMessage *m)
{
    if (s->send_busy || s->closed)
        return -1;
    grpc_byte_buffer *bb = ec__pack(m);
    grpc_op ops[2];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    if (!s->sent_md) {
        ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
        if (s->token) {
            s->md.key = grpc_slice_from_static_string("token");
            s->md.value = grpc_slice_from_copied_string(s->token);
            ops[n].data.send_initial_metadata.count = 1;
            ops[n].data.send_initial_metadata.metadata = &s->md;
        }
        n++;
    }
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n].data.send_message.send_message = bb;
    n++;
    int rc = post(s, ops, n, TAG_SEND);
    grpc_byte_buffer_destroy(bb); /* gRPC took its own reference */
    if (rc == 0) {
        s->sent_md = true;
        s->send_busy = true;
    }
    return rc;
}

ec__ev_t ec__stream_next(ec__stream_t *s, int64_t deadline_ms)
{
    for (;;) {
        if (s->closed)
            return EC__EV_CLOSED;
        gpr_timespec dl = deadline_ms < 0
                              ? gpr_inf_future(GPR_CLOCK_MONOTONIC)
                              : gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                             gpr_time_from_millis(deadline_ms - ec_mono_ms() > 0
                                                                      ? deadline_ms - ec_mono_ms()
                                                                      : 0,
                                                                  GPR_TIMESPAN));
        grpc_event ev = grpc_completion_queue_next(s->cq, dl, NULL);
        if (ev.type == GRPC_QUEUE_TIMEOUT)
            return EC__EV_TIMEOUT;
        if (ev.type != GRPC_OP_COMPLETE)
            return EC__EV_CLOSED;
        s->pending--;
        if (ev.tag == TAG_SEND) {
            s->send_busy = false;
            if (ev.success)
                return EC__EV_SENT;
            continue; /* the status will follow */
        }
        if (ev.tag == TAG_RECV) {
            if (ev.success && s->recv_slot) {
                /* Re-arm at once; the buffer just received is the caller's. */
                s->recv = s->recv_slot;
                s->recv_slot = NULL;
                if (arm_recv(s) < 0)
                    grpc_call_cancel(s->call, NULL);
                return EC__EV_RECV;
            }
            continue; /* end of stream: wait for the status */
        }
        if (ev.tag == TAG_STATUS) {
            s->closed = true;
            return EC__EV_CLOSED;
        }
        /* TAG_MD: nothing to do */
    }
}

void ec__stream_status(ec__stream_t *s, ec_error_t *err)
{
    char *d = grpc_slice_to_c_string(s->details);
    ec__conn_desc_t w = ec__conn_desc(s->c);
    ec__grpc_error(&w, "stream", s->status, d, err);
    free(d);
}

void ec__stream_close(ec__stream_t *s)
{
    if (s->call) {
        grpc_call_cancel(s->call, NULL);
        while (s->pending > 0) {
            grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
            if (ev.type != GRPC_OP_COMPLETE)
                break;
            s->pending--;
            if (ev.tag == TAG_RECV && s->recv_slot) {
                grpc_byte_buffer_destroy(s->recv_slot);
                s->recv_slot = NULL;
            }
        }
        pthread_mutex_lock(s->call_lock);
        grpc_call *call = s->call;
        s->call = NULL;
        pthread_mutex_unlock(s->call_lock);
        grpc_call_unref(call);
    }
    if (s->cq) {
        grpc_completion_queue_shutdown(s->cq);
        while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(s->cq);
        s->cq = NULL;
    }
    if (s->recv)
        grpc_byte_buffer_destroy(s->recv);
    s->recv = NULL;
    if (s->sent_md && s->token)
        grpc_slice_unref(s->md.value);
    free(s->token);
    s->token = NULL;
    grpc_slice_unref(s->details);
    s->details = grpc_empty_slice();
    grpc_metadata_array_destroy(&s->init_md);
    grpc_metadata_array_destroy(&s->trailing);
    s->closed = true;
}
