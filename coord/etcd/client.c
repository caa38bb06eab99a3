/* The channel to etcd, unary calls, authentication and error mapping. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include <grpc/support/log.h>

#include "endpoints.h"
#include "clock.h"
#include "etcd_impl.h"
#include "log.h"

static bool has(const char *s, const char *needle)
{
    return s && strstr(s, needle);
}

ec__conn_desc_t ec__conn_desc(const ec_etcd_t *c)
{
    ec__conn_desc_t w = {c->endpoints, c->tls, c->http_proxy, c->proxy_env};
    return w;
}

/* err = head " (" what ": " details ")" advice, gRPC's details cut (and
 * marked "...") so that the advice, which says what to do, always fits:
 * the whole message used to be cut at the end, advice first. */
static int advise(ec_error_t *err, int code, const char *head, const char *what,
                  const char *details, const char *advice)
{
    size_t fixed = strlen(head) + strlen(what) + strlen(advice) + sizeof(" (: )");
    size_t room = fixed < EC_ERRMSG_MAX ? EC_ERRMSG_MAX - fixed : 0;
    size_t dl = strlen(details);
    const char *dots = "";
    if (dl > room) {
        dl = room > 3 ? room - 3 : 0;
        dots = "...";
    }
    return ec_errorf(err, code, "%s (%s: %.*s%s)%s", head, what, (int)dl, details, dots, advice);
}

/* The endpoints as https:// URLs ("a:1,http://b:2" -> "https://a:1,https://b:2"). */
static void https_form(const char *endpoints, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (const char *p = endpoints; *p && used + 1 < len;) {
        size_t n = strcspn(p, ",");
        const char *scheme = strstr(p, "://");
        const char *host = scheme && scheme < p + n ? scheme + 3 : p;
        used += (size_t)snprintf(out + used, len - used, "%shttps://%.*s", used ? "," : "",
                                 (int)(p + n - host), host);
        if (used >= len)
            break; /* cut */
        p += n + (p[n] == ',');
    }
}

/* The head of unavailable()'s message for a plain connection to a TLS etcd. */
#define CLOSED_HEAD "closed the connection"

bool ec_etcd_error_may_pass(const ec_error_t *err)
{
    if (!err)
        return false;
    if (err->code == EC_ETIMEDOUT)
        return true;
    return err->code == EC_EUNAVAILABLE && !has(err->msg, CLOSED_HEAD) &&
           !has(err->msg, "andshake") && /* gRPC writes both Handshake and handshake */
           !has(err->msg, "certificate verify") && !has(err->msg, "Too many open files");
}

/* What to do about an etcd that cannot be reached (UNAVAILABLE). */
static int unavailable(const ec__conn_desc_t *w, const char *m, const char *d, ec_error_t *err)
{
    char head[256], advice[EC_ERRMSG_MAX], proxy[300] = "";
    /* What a proxy has to do with it: the one given is used, the
     * environment's never is. */
    if (w->http_proxy)
        snprintf(proxy, sizeof(proxy),
                 "; etcd is reached through the proxy %.100s (--etcd_proxy): the proxy may be "
                 "why: check that it is up and lets CONNECT through to etcd, or drop "
                 "--etcd_proxy to connect directly",
                 w->http_proxy);
    else if (w->proxy_env)
        snprintf(proxy, sizeof(proxy),
                 "; %.32s is set, but etcd connections never use a proxy: if etcd is reachable "
                 "only through it, pass --etcd_proxy=http://HOST:PORT",
                 w->proxy_env);
    if (!w->tls && !w->http_proxy && has(d, "failed to connect to all addresses") &&
        has(d, "Socket closed")) {
        /* A plain connection to a TLS etcd: it hangs up on gRPC's HTTP/2
         * preface, and no connection is ever made ("failed to connect to all
         * addresses; ... Socket closed").  A connection that closes in the
         * middle of a call says "Socket closed" alone: not this. */
        char https[160];
        https_form(w->endpoints, https, sizeof(https));
        snprintf(head, sizeof(head), "etcd at %.120s " CLOSED_HEAD, w->endpoints);
        snprintf(advice, sizeof(advice),
                 ": if it serves TLS, write %s and give --etcd_cacert%s", https, proxy);
    } else {
        snprintf(head, sizeof(head), "etcd at %.120s is unavailable", w->endpoints);
        snprintf(advice, sizeof(advice),
                 ": is etcd running and reachable from here? check --elastic_server%s%s",
                 w->tls ? "; with TLS, a certificate that does not match the endpoint (SAN) or "
                          "a wrong --etcd_cacert also shows up as this"
                        : "",
                 proxy);
    }
    return advise(err, EC_EUNAVAILABLE, head, m, d, advice);
}

int ec__grpc_error(const ec__conn_desc_t *w, const char *method, int status, const char *details,
                   ec_error_t *err)
{
    const char *d = details && *details ? details : "no details";
    const char *m = method ? method : "call";
    const char *endpoints = w->endpoints;
    switch (status) {
    case GRPC_STATUS_OK:
        return 0;
    case GRPC_STATUS_UNAVAILABLE:
        return unavailable(w, m, d, err);
    case GRPC_STATUS_DEADLINE_EXCEEDED:
        return ec_errorf(err, EC_ETIMEDOUT,
                         "etcd at %s did not answer %s before its deadline (%s): etcd may be "
                         "overloaded or unreachable",
                         endpoints, m, d);
    case GRPC_STATUS_NOT_FOUND:
        return ec_errorf(err, EC_ENOTFOUND, "etcd at %s: %s: %s", endpoints, m, d);
    case GRPC_STATUS_OUT_OF_RANGE:
        if (has(d, "compacted"))
            return ec_errorf(err, EC_ECOMPACTED, "etcd at %s: %s: %s (read a newer revision)",
                             endpoints, m, d);
        return ec_errorf(err, EC_EINVAL, "etcd at %s: %s: %s", endpoints, m, d);
    case GRPC_STATUS_UNAUTHENTICATED:
        return ec_errorf(err, EC_EUNAUTH,
                         "etcd at %s refused %s: %s: check --etcd_user and the password "
                         "(ECOORD_ETCD_PASSWORD or --etcd_password_file)",
                         endpoints, m, d);
    case GRPC_STATUS_PERMISSION_DENIED:
        return ec_errorf(err, EC_EPERM,
                         "etcd at %s denied %s: %s: grant the user read/write on the job's prefix",
                         endpoints, m, d);
    case GRPC_STATUS_RESOURCE_EXHAUSTED:
        return ec_errorf(err, EC_ETOOLARGE, "etcd at %s: %s: %s", endpoints, m, d);
    case GRPC_STATUS_CANCELLED:
        return ec_errorf(err, EC_ECANCELED, "etcd at %s: %s canceled: %s", endpoints, m, d);
    case GRPC_STATUS_INVALID_ARGUMENT:
        if (has(d, "request is too large"))
            return ec_errorf(err, EC_ETOOLARGE,
                             "etcd at %s refused %s: %s (etcd takes at most 1.5 MiB per request)",
                             endpoints, m, d);
        if (has(d, "user name is empty") || has(d, "invalid auth token") ||
            has(d, "authentication failed"))
            return ec_errorf(err, EC_EUNAUTH,
                             "etcd at %s refused %s: %s: check --etcd_user and the password "
                             "(ECOORD_ETCD_PASSWORD or --etcd_password_file)",
                             endpoints, m, d);
        return ec_errorf(err, EC_EINVAL, "etcd at %s refused %s: %s", endpoints, m, d);
    default:
        return ec_errorf(err, EC_EINTERNAL, "etcd at %s: %s failed with gRPC status %d: %s",
                         endpoints, m, status, d);
    }
}

grpc_byte_buffer *ec__pack(const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    grpc_slice s = grpc_slice_malloc(len);
    protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

ProtobufCMessage *ec__unpack(const ProtobufCMessageDescriptor *d, grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return NULL;
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    ProtobufCMessage *m =
        protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
    grpc_slice_unref(s);
    return m;
}

int ec__kv_from_pb(ec_kv_t *out, const Mvccpb__KeyValue *kv)
{
    memset(out, 0, sizeof(*out));
    out->key = malloc(kv->key.len + 1);
    out->value = malloc(kv->value.len + 1);
    if (!out->key || !out->value) {
        ec_kv_free(out);
        return EC_ENOMEM;
    }
    memcpy(out->key, kv->key.data, kv->key.len);
    out->key[kv->key.len] = '\0';
    out->key_len = kv->key.len;
    if (kv->value.len)
        memcpy(out->value, kv->value.data, kv->value.len);
    out->value[kv->value.len] = '\0';
    out->value_len = kv->value.len;
    out->create_revision = kv->create_revision;
    out->mod_revision = kv->mod_revision;
    out->version = kv->version;
    out->lease = kv->lease;
    return 0;
}

void ec_kv_free(ec_kv_t *kv)
{
    if (!kv)
        return;
    free(kv->key);
    free(kv->value);
    memset(kv, 0, sizeof(*kv));
}

void ec_kv_list_free(ec_kv_list_t *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        ec_kv_free(&l->kvs[i]);
    free(l->kvs);
    memset(l, 0, sizeof(*l));
}

char *ec__token(ec_etcd_t *c, uint64_t *gen)
{
    pthread_mutex_lock(&c->lock);
    char *t = c->token ? strdup(c->token) : NULL;
    if (gen)
        *gen = c->token_gen;
    pthread_mutex_unlock(&c->lock);
    return t;
}

static gpr_timespec deadline_in(int ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

/* One unary call; status and details come back for the caller to map. */
static int unary_once(ec_etcd_t *c, const char *method, grpc_byte_buffer *send, const char *token,
                      grpc_byte_buffer **recv, grpc_status_code *status, char **details)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    gpr_timespec deadline = deadline_in(c->call_timeout_ms);
    grpc_slice mslice = grpc_slice_from_static_string(method);
    grpc_call *call = grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq, mslice,
                                               NULL, deadline, NULL);
    grpc_metadata md;
    grpc_metadata_array init_md, trailing;
    grpc_metadata_array_init(&init_md);
    grpc_metadata_array_init(&trailing);
    grpc_slice det = grpc_empty_slice();
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (token) {
        md.key = grpc_slice_from_static_string("token");
        md.value = grpc_slice_from_copied_string(token);
        ops[0].data.send_initial_metadata.count = 1;
        ops[0].data.send_initial_metadata.metadata = &md;
    }
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &init_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
    ops[5].data.recv_status_on_client.status = status;
    ops[5].data.recv_status_on_client.status_details = &det;
    *recv = NULL;
    grpc_call_error ce = grpc_call_start_batch(call, ops, 6, (void *)1, NULL);
    if (ce == GRPC_CALL_OK) {
        grpc_event ev = grpc_completion_queue_pluck(
            cq, (void *)1, gpr_time_add(deadline, gpr_time_from_millis(2000, GPR_TIMESPAN)), NULL);
        if (ev.type != GRPC_OP_COMPLETE) {
            /* The call's own deadline should have fired; make sure. */
            grpc_call_cancel(call, NULL);
            grpc_completion_queue_pluck(cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        }
        *details = grpc_slice_to_c_string(det);
    } else {
        *status = GRPC_STATUS_INTERNAL;
        *details = strdup("grpc_call_start_batch failed");
    }
    if (token)
        grpc_slice_unref(md.value);
    grpc_slice_unref(det);
    grpc_metadata_array_destroy(&init_md);
    grpc_metadata_array_destroy(&trailing);
    grpc_call_unref(call);
    grpc_completion_queue_shutdown(cq);
    grpc_completion_queue_destroy(cq);
    return 0;
}

static int authenticate(ec_etcd_t *c, ec_error_t *err)
{
    Etcdserverpb__AuthenticateRequest req = ETCDSERVERPB__AUTHENTICATE_REQUEST__INIT;
    req.name = c->user;
    req.password = c->password;
    grpc_byte_buffer *send = ec__pack(&req.base), *recv = NULL;
    grpc_status_code st;
    char *det = NULL;
    unary_once(c, "/etcdserverpb.Auth/Authenticate", send, NULL, &recv, &st, &det);
    grpc_byte_buffer_destroy(send);
    int rc = 0;
    if (st == GRPC_STATUS_FAILED_PRECONDITION && has(det, "authentication is not enabled")) {
        /* Authentication is off (yet): go on without a token, as etcd's
         * own client does; the first call refused once it is on logs in
         * (ec__reauth). */
        pthread_mutex_lock(&c->lock);
        bool told = c->auth_off_told;
        c->auth_off_told = true;
        free(c->token);
        c->token = NULL;
        c->token_gen++;
        pthread_mutex_unlock(&c->lock);
        if (!told)
            ec_log(EC_LOG_WARN, "etcd at %s has authentication turned off: going on without "
                                "logging in as '%s'; this client logs in once etcd turns it on "
                                "(etcdctl auth enable)", c->endpoints, c->user);
    } else if (st != GRPC_STATUS_OK) {
        ec__conn_desc_t w = ec__conn_desc(c);
        rc = ec__grpc_error(&w, "Authenticate", st, det, err);
        if (rc == EC_EINVAL || rc == EC_EUNAUTH)
            rc = ec_errorf(err, EC_EUNAUTH,
                           "etcd at %s refused user '%s': %s: check --etcd_user and the password "
                           "(ECOORD_ETCD_PASSWORD or --etcd_password_file)",
                           c->endpoints, c->user, det);
    } else {
        Etcdserverpb__AuthenticateResponse *r = (Etcdserverpb__AuthenticateResponse *)ec__unpack(
            &etcdserverpb__authenticate_response__descriptor, recv);
        if (!r || !r->token || !*r->token) {
            rc = ec_errorf(err, EC_EPROTO, "etcd at %s: Authenticate answered without a token",
                           c->endpoints);
        } else {
            pthread_mutex_lock(&c->lock);
            free(c->token);
            c->token = strdup(r->token);
            c->token_gen++;
            pthread_mutex_unlock(&c->lock);
        }
        if (r)
            protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    free(det);
    if (recv)
        grpc_byte_buffer_destroy(recv);
    return rc;
}

int ec__reauth(ec_etcd_t *c, uint64_t gen, ec_error_t *err)
{
    if (!c->user)
        return ec_errorf(err, EC_EUNAUTH,
                         "etcd at %s requires authentication: give --etcd_user and the password",
                         c->endpoints);
    pthread_mutex_lock(&c->lock);
    bool fresh = c->token_gen != gen;
    pthread_mutex_unlock(&c->lock);
    if (fresh)
        return 0; /* another thread re-authenticated meanwhile */
    ec_log(EC_LOG_INFO, "etcd token expired; re-authenticating as '%s'", c->user);
    return authenticate(c, err);
}

int ec__unary(ec_etcd_t *c, const char *method, const ProtobufCMessage *req,
              const ProtobufCMessageDescriptor *rdesc, ProtobufCMessage **resp, ec_error_t *err)
{
    *resp = NULL;
    int rc = 0;
    const char *shortm = strrchr(method, '/') ? strrchr(method, '/') + 1 : method;
    for (int attempt = 0; attempt < 2; attempt++) {
        uint64_t gen = 0;
        char *token = ec__token(c, &gen);
        grpc_byte_buffer *recv = NULL;
        grpc_status_code st;
        char *det = NULL;
        /* gRPC moves the slices out of a sent buffer: pack per attempt. */
        grpc_byte_buffer *send = ec__pack(req);
        unary_once(c, method, send, token, &recv, &st, &det);
        grpc_byte_buffer_destroy(send);
        free(token);
        if (st == GRPC_STATUS_OK) {
            *resp = ec__unpack(rdesc, recv);
            rc = *resp ? 0
                       : ec_errorf(err, EC_EPROTO, "etcd at %s: %s answer did not decode",
                                   c->endpoints, shortm);
        } else {
            ec__conn_desc_t w = ec__conn_desc(c);
            rc = ec__grpc_error(&w, shortm, st, det, err);
        }
        free(det);
        if (recv)
            grpc_byte_buffer_destroy(recv);
        if (rc == EC_EUNAUTH && c->user && attempt == 0) {
            int r2 = ec__reauth(c, gen, err);
            if (r2 == 0)
                continue;
            rc = r2;
        }
        break;
    }
    return rc;
}

static char *read_file(const char *path, ec_error_t *err, const char *what)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        ec_errorf(err, EC_EIO, "cannot read the %s '%s': %s", what, path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                ec_errorf(err, EC_ENOMEM, "out of memory reading %s", path);
                return NULL;
            }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, 4096, f);
        len += r;
        if (r < 4096)
            break;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static int grpc_refs;
static pthread_mutex_t grpc_refs_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether gRPC core says this line just before it calls abort(): a failed
 * GPR_ASSERT ("assertion failed: ...") or GPR_UNREACHABLE_CODE (gRPC 1.51's
 * grpc/impl/codegen/log.h). */
static bool grpc_is_dying(const char *m)
{
    return strncmp(m, "assertion failed", 16) == 0 || strncmp(m, "UNREACHABLE CODE", 16) == 0;
}

/* gRPC's last words, straight to stderr with write(2): the log sink may be
 * a queue that a thread writes (the agent's console) or a level that hides
 * them, and the process is gone the moment this returns.  Then the log. */
static void say_grpc_death(const char *file, int line, const char *m)
{
    char buf[1024];
    int n = snprintf(buf, sizeof(buf), "ecoord: gRPC core stops this process: %s:%d: %s (seen when "
                     "a process runs out of open files or memory: check ulimit -n and ulimit -v)\n",
                     file, line, m);
    if (n > (int)sizeof(buf) - 1)
        n = (int)sizeof(buf) - 1;
    for (int off = 0; n > off;) {
        ssize_t w = write(STDERR_FILENO, buf + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (int)w;
    }
    ec_log(EC_LOG_ERROR, "gRPC core stops this process: %s:%d: %s", file, line, m);
}

/* gRPC core's own log lines went raw to stderr, in gRPC's format, beside
 * our message that says the same with what to do:
 *   E1127 05:29:37.368853812 2025 ssl_transport_security.cc:1501] Handshake
 *   failed with fatal error SSL_ERROR_SSL: ... certificate verify failed.
 * They go to the process's log sink instead, at debug level (gRPC's own
 * GRPC_VERBOSITY still decides which it writes: errors by default), but
 * for the line gRPC says before it aborts the process, which must be seen
 * (say_grpc_death).  This client is what calls grpc_init in the process, so
 * it owns this setting. */
static void grpc_log_to_sink(gpr_log_func_args *a)
{
    const char *f = a->file ? strrchr(a->file, '/') : NULL;
    const char *m = a->message ? a->message : "";
    f = f ? f + 1 : a->file ? a->file : "?";
    if (a->severity == GPR_LOG_SEVERITY_ERROR && grpc_is_dying(m)) {
        say_grpc_death(f, a->line, m);
        return;
    }
    ec_log(EC_LOG_DEBUG, "grpc %s: %s:%d: %s", gpr_log_severity_string(a->severity), f, a->line,
           m);
}

/* Free what a client holds but its channel and gRPC's reference: its
 * strings (the password wiped first), its lock, itself. */
static void free_client(ec_etcd_t *c)
{
    if (c->password) {
        memset(c->password, 0, strlen(c->password));
        free(c->password);
    }
    free(c->user);
    free(c->token);
    free(c->endpoints);
    free(c->http_proxy);
    free(c->proxy_env);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* The options a client keeps (endpoints, deadline, TLS, credentials,
 * proxy), checked; the channel's target and authority from the endpoints. */
static int take_opts(ec_etcd_t *c, const ec_etcd_opts_t *o, const ec__endpoints_t *eps,
                     char *authority, size_t alen, ec_error_t *err)
{
    if (!(c->endpoints = strdup(o->endpoints)))
        return ec_errorf(err, EC_ENOMEM, "out of memory");
    c->call_timeout_ms = o->call_timeout_ms > 0 ? o->call_timeout_ms : 5000;
    c->tls = eps->tls || o->ca_file || o->cert_file || o->key_file;
    if (ec__endpoints_target(eps, c->target, sizeof(c->target), authority, alen, err) < 0)
        return err ? err->code : EC_EINVAL;
    if ((o->cert_file != NULL) != (o->key_file != NULL))
        return ec_errorf(err, EC_EINVAL,
                         "TLS client authentication needs both --etcd_cert and --etcd_key (got "
                         "only %s)", o->cert_file ? "--etcd_cert" : "--etcd_key");
    if (o->user) {
        c->user = strdup(o->user);
        c->password = strdup(o->password ? o->password : "");
    }
    if (o->size >= offsetof(ec_etcd_opts_t, proxy_env) + sizeof(o->proxy_env)) {
        if (o->http_proxy && *o->http_proxy)
            c->http_proxy = strdup(o->http_proxy);
        if (o->proxy_env && *o->proxy_env)
            c->proxy_env = strdup(o->proxy_env);
    }
    return 0;
}

/* One more client in the process: gRPC started with the first (its log to
 * our sink); ec_etcd_destroy gives the reference back. */
static void grpc_ref(void)
{
    pthread_mutex_lock(&grpc_refs_lock);
    if (grpc_refs == 0)
        gpr_set_log_function(grpc_log_to_sink);
    /* Reconnecting after a long outage needs gRPC's backup poller every
     * 200 ms (EC_ETCD_POLL_ENV in etcd.h says why).  gRPC reads it from the
     * environment in the first grpc_init(); the program sets it in main(),
     * before any thread: setenv() here could race with a getenv() of some
     * other thread of a training process. */
    grpc_init();
    grpc_refs++;
    pthread_mutex_unlock(&grpc_refs_lock);
}

/* The channel's arguments (args: room for EC_CHANNEL_ARGS_MAX); their
 * number.  Strings point into c and authority. */
#define EC_CHANNEL_ARGS_MAX 12
static int channel_args(ec_etcd_t *c, size_t neps, char *authority, grpc_arg *args)
{
    int na = 0;
#define INTARG(k, v) args[na].type = GRPC_ARG_INTEGER, args[na].key = (char *)(k), args[na++].value.integer = (v)
    INTARG(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 256 * 1024 * 1024);
    INTARG(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    /* Also gRPC's minimum connect timeout: too small and a connection to an
     * etcd that is just starting times out before its SETTINGS frame. */
    INTARG(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
    INTARG(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    /* etcd answers pings more often than every 5 s with GOAWAY too_many_pings. */
    INTARG(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    INTARG(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    INTARG(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    /* Proxies (etcd.h): the one given, or none, whatever the environment
     * says. */
    if (c->http_proxy) {
        args[na].type = GRPC_ARG_STRING;
        args[na].key = (char *)GRPC_ARG_HTTP_PROXY;
        args[na++].value.string = c->http_proxy;
    } else {
        INTARG(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
    }
#undef INTARG
    if (c->tls && neps > 1) {
        args[na].type = GRPC_ARG_STRING;
        args[na].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
        args[na++].value.string = authority;
    }
    return na;
}

/* The channel's credentials: TLS from the files given, else none.  NULL
 * (err set) when a file cannot be read. */
static grpc_channel_credentials *channel_creds(const ec_etcd_t *c, const ec_etcd_opts_t *o,
                                               ec_error_t *err)
{
    if (!c->tls)
        return grpc_insecure_credentials_create();
    char *ca = NULL, *cert = NULL, *key = NULL;
    if (o->ca_file && !(ca = read_file(o->ca_file, err, "CA certificate (--etcd_cacert)")))
        return NULL;
    if (o->cert_file && (!(cert = read_file(o->cert_file, err, "client certificate (--etcd_cert)")) ||
                         !(key = read_file(o->key_file, err, "client key (--etcd_key)")))) {
        free(ca);
        free(cert);
        return NULL;
    }
    grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
    grpc_channel_credentials *creds = grpc_ssl_credentials_create(ca, cert ? &pair : NULL, NULL, NULL);
    if (key)
        memset(key, 0, strlen(key));
    free(ca);
    free(cert);
    free(key);
    return creds;
}

/* First contact (authentication, then a status call) within the dial
 * deadline.  A connection closed in the middle of the first call (an etcd
 * leader change, a load balancer or proxy reset) is retried, twice at most
 * and within the dial deadline; an endpoint that refuses still fails fast
 * (found by the lifecycle soak's proxy_drop events: an agent starting
 * during a one-request blip exited 1). */
static int first_contact(ec_etcd_t *c, int dial_timeout_ms, ec_error_t *err)
{
    int saved = c->call_timeout_ms;
    c->call_timeout_ms = dial_timeout_ms > 0 ? dial_timeout_ms : 5000;
    int rc = 0;
    int64_t dial_end = ec_mono_ms() + c->call_timeout_ms;
    for (int attempt = 0; attempt < 3; attempt++) {
        rc = c->user ? authenticate(c, err) : 0;
        if (rc == 0)
            rc = ec_etcd_status(c, NULL, NULL, 0, err);
        int64_t left = dial_end - ec_mono_ms();
        if (rc != EC_EUNAVAILABLE || left <= 200)
            break;
        struct timespec ts = {0, 100 * 1000 * 1000}; /* a pause before the retry */
        nanosleep(&ts, NULL);
        c->call_timeout_ms = (int)(left - 100);
    }
    c->call_timeout_ms = saved;
    return rc;
}

ec_etcd_t *ec_etcd_create(const ec_etcd_opts_t *o, ec_error_t *err)
{
    ec__endpoints_t eps;
    char authority[EC_EP_HOST_MAX];
    if (!o || o->size < sizeof(size_t)) {
        ec_errorf(err, EC_EINVAL, "ec_etcd_create: options not initialised with EC_ETCD_OPTS_INIT");
        return NULL;
    }
    if (ec__endpoints_parse(o->endpoints, &eps, err) < 0)
        return NULL;
    ec_etcd_t *c = calloc(1, sizeof(*c));
    if (!c) {
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    if (take_opts(c, o, &eps, authority, sizeof(authority), err) < 0) {
        free_client(c);
        return NULL;
    }
    grpc_ref(); /* from here ec_etcd_destroy undoes everything */
    grpc_arg args[EC_CHANNEL_ARGS_MAX];
    grpc_channel_args cargs = {.num_args = (size_t)channel_args(c, eps.n, authority, args),
                               .args = args};
    grpc_channel_credentials *creds = channel_creds(c, o, err);
    if (!creds)
        goto fail;
    c->channel = grpc_channel_create(c->target, creds, &cargs);
    grpc_channel_credentials_release(creds);
    if (!c->channel) {
        ec_errorf(err, EC_EINTERNAL, "cannot create a gRPC channel to %s", c->target);
        goto fail;
    }
    if (first_contact(c, o->dial_timeout_ms, err) < 0)
        goto fail;
    return c;
fail:
    ec_etcd_destroy(c);
    return NULL;
}

/* A client of the in-memory store: no channel, no gRPC (mem.h). */
ec_etcd_t *ec_etcd_create_mem(ec_etcd_mem_t *m, ec_error_t *err)
{
    if (!m) {
        ec_errorf(err, EC_EINVAL, "ec_etcd_create_mem: no store (make one with ec_etcd_mem_new)");
        return NULL;
    }
    ec_etcd_t *c = calloc(1, sizeof(*c));
    if (!c || !(c->endpoints = strdup("mem"))) {
        free(c);
        ec_errorf(err, EC_ENOMEM, "out of memory");
        return NULL;
    }
    c->mem = m;
    c->call_timeout_ms = 5000;
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void ec_etcd_destroy(ec_etcd_t *c)
{
    if (!c)
        return;
    int saved = errno;
    bool grpc = !c->mem; /* a memory client started no gRPC: nothing to shut down */
    if (c->channel)
        grpc_channel_destroy(c->channel);
    free_client(c);
    if (grpc) {
        pthread_mutex_lock(&grpc_refs_lock);
        if (grpc_refs > 0) {
            grpc_refs--;
            grpc_shutdown();
        }
        pthread_mutex_unlock(&grpc_refs_lock);
    }
    errno = saved;
}

const char *ec_etcd_endpoints(const ec_etcd_t *c)
{
    return c->endpoints;
}

void ec_etcd_set_call_timeout(ec_etcd_t *c, int ms)
{
    c->call_timeout_ms = ms > 0 ? ms : 5000;
}

int ec_etcd_status(ec_etcd_t *c, int64_t *revision, char *version, size_t vlen, ec_error_t *err)
{
    if (c->mem)
        return ec__mem_status(c->mem, revision, version, vlen, err);
    Etcdserverpb__StatusRequest req = ETCDSERVERPB__STATUS_REQUEST__INIT;
    Etcdserverpb__StatusResponse *r = NULL;
    int rc = ec__unary(c, "/etcdserverpb.Maintenance/Status", &req.base,
                       &etcdserverpb__status_response__descriptor, (ProtobufCMessage **)&r, err);
    if (rc < 0)
        return rc;
    if (revision)
        *revision = r->header ? r->header->revision : 0;
    if (version && vlen)
        snprintf(version, vlen, "%s", r->version ? r->version : "");
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return 0;
}
