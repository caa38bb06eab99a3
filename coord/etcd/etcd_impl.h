/* Internals shared by the etcd client's files; not installed. */
#ifndef EC_ETCD_IMPL_H
#define EC_ETCD_IMPL_H

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <protobuf-c/protobuf-c.h>
#include <pthread.h>

#include "etcd.h"
#include "clock.h"
#include "kv.pb-c.h"
#include "mem.h"
#include "rpc.pb-c.h"

struct ec_etcd {
    /* A memory client (ec_etcd_create_mem): every call goes to this store
     * (mem.h) and nothing below is used but endpoints ("mem"). */
    ec_etcd_mem_t *mem;
    grpc_channel *channel;
    char *endpoints;       /* as given, for messages */
    char target[1024];
    bool tls;
    char *http_proxy;      /* NULL: direct (ec_etcd_opts_t.http_proxy) */
    char *proxy_env;       /* NULL or a proxy variable seen set, for messages */
    int call_timeout_ms;
    char *user;
    char *password;
    pthread_mutex_t lock;  /* guards token */
    char *token;
    uint64_t token_gen;    /* bumped at each re-authentication */
    bool auth_off_told;    /* logged that etcd's authentication is off */
};

/* What an error message says of a connection. */
typedef struct ec__conn_desc {
    const char *endpoints;  /* as given */
    bool tls;
    const char *http_proxy; /* the proxy etcd is reached through, or NULL */
    const char *proxy_env;  /* a proxy variable set in the environment (unused), or NULL */
} ec__conn_desc_t;

ec__conn_desc_t ec__conn_desc(const ec_etcd_t *c);

/* gRPC status → EC code with a message naming the endpoints and what to do;
 * pure.  The advice always reaches the caller whole: gRPC's details are cut
 * to make room for it within EC_ERRMSG_MAX. */
int ec__grpc_error(const ec__conn_desc_t *w, const char *method, int status, const char *details,
                   ec_error_t *err);

/* Unary call: pack req, call method with the client deadline, unpack into
 * *resp (free with protobuf_c_message_free_unpacked).  Re-authenticates once
 * on an expired token. */
int ec__unary(ec_etcd_t *c, const char *method, const ProtobufCMessage *req,
              const ProtobufCMessageDescriptor *rdesc, ProtobufCMessage **resp,
              ec_error_t *err);

/* Copy of the current token (NULL without auth); caller frees. */
char *ec__token(ec_etcd_t *c, uint64_t *gen);
/* Authenticate again unless another thread already did since gen. */
int ec__reauth(ec_etcd_t *c, uint64_t gen, ec_error_t *err);

/* protobuf-c → grpc buffers. */
grpc_byte_buffer *ec__pack(const ProtobufCMessage *m);
ProtobufCMessage *ec__unpack(const ProtobufCMessageDescriptor *d, grpc_byte_buffer *bb);

int ec__kv_from_pb(ec_kv_t *out, const Mvccpb__KeyValue *kv);

/* A bidirectional stream owned by one thread, with its own queue. */
typedef enum { EC__EV_NONE, EC__EV_SENT, EC__EV_RECV, EC__EV_CLOSED, EC__EV_TIMEOUT } ec__ev_t;

typedef struct ec__stream {
    ec_etcd_t *c;
    grpc_completion_queue *cq;
    grpc_call *call;
    pthread_mutex_t *call_lock; /* owner's lock guarding call for cancel */
    grpc_metadata_array init_md, trailing;
    grpc_status_code status;
    grpc_slice details;
    grpc_byte_buffer *recv;      /* the message handed to the caller */
    grpc_byte_buffer *recv_slot; /* where gRPC writes the next one */
    char *token;
    grpc_metadata md;
    int pending;
    bool sent_md, send_busy, closed;
} ec__stream_t;

int ec__stream_open(ec__stream_t *s, ec_etcd_t *c, const char *method, pthread_mutex_t *call_lock,
                    ec_error_t *err);
int ec__stream_send(ec__stream_t *s, const ProtobufCMessage *m);
/* Wait for the next event until deadline_ms (monotonic ms, -1 = none).  On
 * EC__EV_RECV the message is in s->recv (caller destroys it); the receive is
 * re-armed by the next ec__stream_next call. */
ec__ev_t ec__stream_next(ec__stream_t *s, int64_t deadline_ms);
/* Status text after EC__EV_CLOSED. */
void ec__stream_status(ec__stream_t *s, ec_error_t *err);
void ec__stream_close(ec__stream_t *s);

#endif
