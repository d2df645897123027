// The HTTP/2 engine: see include/herald_h2.h.
//
// Origins (host, port, client certificate) each own a queue of waiting requests and up to
// max_connections_per_origin connections. A connection is resolved, and its origin's client
// certificate read, on a thread of its own (neither is needed for an IP literal without a
// certificate), connected (non-blocking), handshaken (TLS, ALPN h2) and then carries up to
// max_streams streams. Requests wait in their own origin's queue, never behind another
// origin's, and go out as streams when a connection has room. The frames a pass produces for a
// connection leave in one TLS write (what corking does for libcurl).
//
// This file holds the API, the origins and their queues, completions, and the loop's passes
// (dispatching, requests' deadlines, the sweep that lets connections look at the clock). The
// rest, by concern: url.c (a request's URL and header fields), tls.c (TLS contexts, client
// certificates), prepare.c (name resolution and certificate reading on threads of their own),
// connection_state.c (a connection's phases and their transitions: opening deadlines, stalls),
// connection.c (a connection's I/O: connect, handshake, read, write, close, carrying out what
// its state answers) and session.c (the nghttp2 session: callbacks, limits, streams). Their
// shared types are in h2_internal.h.
#include "h2_internal.h"

/// Hands the request's result to the caller and frees it. `refusal`: the connection whose
/// addresses were refused, for HERALD_H2_REFUSED_ADDRESS.
static void complete_refused(herald_h2_engine *engine, request *r, herald_h2_outcome outcome, const char *message,
                             const connection *refusal) {
    herald_h2_result result = {
        .outcome = outcome,
        .status = r->status,
        .headers = r->headers.bytes,
        .headers_length = r->headers.length,
        .body = r->response.bytes,
        .body_length = r->response.length,
        .opened_connection = r->opened_connection,
        .message = message ? message : "",
        .refused_kind = refusal ? refusal->refused_kind : HERALD_ADDRESS_PUBLIC,
        .refused_address = refusal ? refusal->refused_address : "",
    };
    engine->outstanding--;
    engine->completion(r->context, &result);
    free(r->headers.bytes);
    free(r->response.bytes);
    free(r);  // the fields and body live in the same block
}

static void complete(herald_h2_engine *engine, request *r, herald_h2_outcome outcome, const char *message) {
    complete_refused(engine, r, outcome, message, NULL);
}

static void fail_waiting(herald_h2_engine *engine, origin *o, herald_h2_outcome outcome, const char *message,
                         const connection *refusal) {
    while (o->waiting.first) {
        request *r = o->waiting.first;
        list_remove(&o->waiting, r);
        complete_refused(engine, r, outcome, message, refusal);
    }
}

static void schedule(herald_h2_engine *engine, origin *o) {
    if (o->scheduled) return;
    o->scheduled = 1;
    o->next_scheduled = engine->scheduled;
    engine->scheduled = o;
}

static void mark_dirty(connection *c) {
    if (c->dirty) return;
    c->dirty = 1;
    c->next_dirty = c->engine->dirty;
    c->engine->dirty = c;
}

const h2_upward h2_engine_upward = {
    .complete = complete,
    .fail_waiting = fail_waiting,
    .schedule = schedule,
    .mark_dirty = mark_dirty,
    .connection_on = h2_connection_on,
    .prepared = h2_connection_prepared,
};

/// Makes room under the engine's connection limit, as libcurl's connection cache does: closes a
/// connection of the class that carries no stream and has none waiting for it. Returns whether
/// it found one.
static int close_idle_connection(herald_h2_engine *engine, int guarded) {
    for (origin *o = engine->origins; o; o = o->next)
        for (connection *c = o->connections; c; c = c->next)
            if (o->guarded == guarded && h2_phase_is_open(c->state.phase) && c->streams.count == 0 &&
                !o->waiting.first) {
                h2_connection_close(c, HERALD_H2_CONNECTION, "");
                return 1;
            }
    return 0;
}

/// Puts the origin's waiting requests on connections with room, opening connections as needed.
static void origin_dispatch(herald_h2_engine *engine, origin *o) {
    while (o->waiting.first) {
        connection *room = NULL;
        size_t coming = 0;
        for (connection *c = o->connections; c; c = c->next) {
            if (h2_phase_is_opening(c->state.phase)) {
                coming += (size_t)engine->config.max_streams;
            } else if (c->state.phase == PHASE_OPEN && c->streams.count < h2_stream_limit(c)) {
                room = c;
                break;
            }
        }
        if (room) {
            request *r = o->waiting.first;
            list_remove(&o->waiting, r);
            int failure = h2_start_stream(room, r);
            if (failure == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) {
                h2_connection_on(room, EVENT_NO_MORE_STREAMS, NULL);
                list_prepend(&o->waiting, r);
            } else if (failure != 0) {
                complete(engine, r, HERALD_H2_OTHER, nghttp2_strerror(failure));
            }
            continue;
        }
        // Connections on their way will take these, as libcurl's PIPEWAIT waits for them.
        if (o->waiting.count <= coming) return;
        if (o->connection_count >= engine->config.max_connections_per_origin) return;
        if (o->connections && now_ms() < o->reopen_after) return;  // the sweep comes back
        if (engine->connection_count[o->guarded] >= engine->config.max_connections &&
            !close_idle_connection(engine, o->guarded))
            return;  // the sweep comes back when a connection is idle
        if (!h2_connection_open(engine, o)) return;
    }
}

static void origin_free(herald_h2_engine *engine, origin *o) {
    if (o->tls && o->tls != engine->tls) SSL_CTX_free(o->tls);
    free(o->host);
    free(o->authority);
    free(o->certificate);
    if (o->password) OPENSSL_cleanse(o->password, strlen(o->password));
    free(o->password);
    free(o);
}

/// Resets the connection's streams whose requests' time is up.
static void time_out_streams(herald_h2_engine *engine, connection *c, int64_t now) {
    for (request *r = c->streams.first, *after; r; r = after) {
        after = r->next;
        if (now < r->deadline) continue;
        list_remove(&c->streams, r);
        r->connection = NULL;
        nghttp2_session_set_stream_user_data(c->session, r->stream_id, NULL);
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, r->stream_id, NGHTTP2_CANCEL);
        mark_dirty(c);
        char message[192];
        // A body the server never gave room to is the server's doing, not the network's.
        int shut = r->body_sent < r->body_length &&
                   (nghttp2_session_get_stream_remote_window_size(c->session, r->stream_id) == 0 ||
                    nghttp2_session_get_remote_window_size(c->session) == 0);
        snprintf(message, sizeof message, "no answer within %ld ms%s", r->timeout_ms,
                 shut ? " (the server's flow-control window left no room for the request's body)" : "");
        complete(engine, r, HERALD_H2_TIMEOUT, message);
    }
}

static void sweep(herald_h2_engine *engine, int64_t now) {
    // An origin with nothing open and nothing waiting is forgotten: the list stays as short as
    // the hosts in use, and a client certificate is read again (renewed, or readable again).
    for (origin **link = &engine->origins; *link;) {
        origin *o = *link;
        if (!o->connections && !o->waiting.first && !o->scheduled && !o->reading) {
            *link = o->next;
            origin_free(engine, o);
        } else {
            link = &o->next;
        }
    }
    for (origin *o = engine->origins; o; o = o->next) {
        // What waits may go now: a connection that went idle under the engine's limit, or the
        // pause after a failed opening, ended.
        if (o->waiting.first) schedule(engine, o);
        for (request *r = o->waiting.first, *next; r; r = next) {
            next = r->next;
            if (now < r->deadline) continue;
            list_remove(&o->waiting, r);
            char message[128];
            snprintf(message, sizeof message, "no answer within %ld ms (the request waited for a connection)",
                     r->timeout_ms);
            complete(engine, r, HERALD_H2_TIMEOUT, message);
        }
        for (connection *c = o->connections, *next; c; c = next) {
            next = c->next;
            if (h2_phase_is_open(c->state.phase)) time_out_streams(engine, c, now);
            h2_connection_on(c, EVENT_TICK, NULL);
        }
    }
}

static void settle(herald_h2_engine *engine) {
    // Dispatching makes frames; sending can close connections, which reschedules their origins.
    while (engine->scheduled || engine->dirty) {
        while (engine->scheduled) {
            origin *o = engine->scheduled;
            engine->scheduled = o->next_scheduled;
            o->scheduled = 0;
            origin_dispatch(engine, o);
        }
        while (engine->dirty) {
            connection *c = engine->dirty;
            engine->dirty = c->next_dirty;
            c->dirty = 0;
            if (h2_phase_is_open(c->state.phase)) h2_connection_flush(c);
        }
    }
    while (engine->dead) {
        connection *c = engine->dead;
        engine->dead = c->next;
        free(c->output.bytes);
        free(c);
    }
}

herald_h2_engine *herald_h2_new(const herald_h2_config *config, herald_h2_completion completion, char *error,
                                size_t error_size) {
    herald_h2_engine *engine = calloc(1, sizeof *engine);
    if (!engine) return NULL;
    engine->config = *config;
    if (engine->config.max_streams < 1) engine->config.max_streams = 1;
    if (engine->config.max_connections_per_origin < 1) engine->config.max_connections_per_origin = 1;
    if (engine->config.max_connections < 1) engine->config.max_connections = 1;
    engine->ca_file = config->ca_file ? strdup(config->ca_file) : NULL;
    engine->config.ca_file = NULL;  // the copy above is the one kept
    engine->up = h2_engine_upward;
    engine->completion = completion;
    engine->tls = h2_tls_context(engine->ca_file, error, error_size);
    engine->epoll = epoll_create1(EPOLL_CLOEXEC);
    engine->mailbox = calloc(1, sizeof *engine->mailbox);
    if (!engine->tls || engine->epoll < 0 || !engine->mailbox) {
        if (engine->tls) snprintf(error, error_size, "could not set up the event loop: %s", strerror(errno));
        if (engine->tls) SSL_CTX_free(engine->tls);
        if (engine->epoll >= 0) close(engine->epoll);
        free(engine->mailbox);
        free(engine->ca_file);
        free(engine);
        return NULL;
    }
    engine->mailbox->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event wake = {.events = EPOLLIN, .data.ptr = NULL};
    if (engine->mailbox->wake < 0 || epoll_ctl(engine->epoll, EPOLL_CTL_ADD, engine->mailbox->wake, &wake) != 0 ||
        h2_session_configure(engine) != 0) {
        snprintf(error, error_size, "could not set up the event loop: %s", strerror(errno));
        if (engine->mailbox->wake >= 0) close(engine->mailbox->wake);
        if (engine->callbacks) nghttp2_session_callbacks_del(engine->callbacks);
        if (engine->options) nghttp2_option_del(engine->options);
        SSL_CTX_free(engine->tls);
        close(engine->epoll);
        free(engine->mailbox);
        free(engine->ca_file);
        free(engine);
        return NULL;
    }
    pthread_mutex_init(&engine->mailbox->lock, NULL);
    engine->mailbox->references = 1;
    engine->mailbox->open = 1;
    return engine;
}

static int same_text(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

/// The origin of these requests: the same host, port and client certificate (its file and
/// password) share connections.
static origin *find_origin(herald_h2_engine *engine, const char *host, size_t host_length, int port,
                           const char *authority, size_t authority_length, const char *certificate, int is_p12,
                           const char *password, int guarded) {
    for (origin *o = engine->origins; o; o = o->next) {
        if (o->port == port && strlen(o->host) == host_length && memcmp(o->host, host, host_length) == 0 &&
            o->guarded == guarded && same_text(o->certificate, certificate) && same_text(o->password, password))
            return o;
    }
    origin *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->host = strndup(host, host_length);
    o->authority = strndup(authority, authority_length);
    o->certificate = certificate ? strdup(certificate) : NULL;
    o->password = password ? strdup(password) : NULL;
    if (!o->host || !o->authority || (certificate && !o->certificate) || (password && !o->password)) {
        origin_free(engine, o);
        return NULL;
    }
    o->port = port;
    o->guarded = guarded;
    o->certificate_is_p12 = is_p12;
    // A client certificate's context is made off the loop, before the first connection.
    if (!certificate) o->tls = engine->tls;
    o->next = engine->origins;
    engine->origins = o;
    return o;
}

void herald_h2_submit(herald_h2_engine *engine, const char *url, const char *method, const char *fields,
                      size_t fields_length, size_t field_count, const uint8_t *body, size_t body_length,
                      long timeout_ms, const char *certificate, int certificate_is_p12,
                      const char *certificate_password, int guard_addresses, void *context) {
    const char *host, *authority, *path;
    size_t host_length, authority_length, path_length;
    int port;
    if (h2_split_url(url, &host, &host_length, &port, &authority, &authority_length, &path, &path_length) != 0) {
        // User information, an IPv6 zone and the like: libcurl knows what to make of them.
        herald_h2_result result = {.outcome = HERALD_H2_NOT_HTTP2, .message = "a URL for libcurl"};
        engine->completion(context, &result);
        return;
    }
    if (!h2_fields_fit(fields, fields_length, field_count)) {
        herald_h2_result result = {.outcome = HERALD_H2_OTHER, .message = "the request's header fields are malformed"};
        engine->completion(context, &result);
        return;
    }
    origin *o = find_origin(engine, host, host_length, port, authority, authority_length, certificate,
                            certificate_is_p12, certificate_password, guard_addresses);
    if (!o) {
        herald_h2_result result = {.outcome = HERALD_H2_OTHER, .message = "out of memory"};
        engine->completion(context, &result);
        return;
    }
    // One block: the request, its fields, their names (lower case) and values, the body.
    size_t method_length = strlen(method);
    int needs_length = body_length > 0 || strcmp(method, "GET") != 0;
    char length_text[24];
    int length_text_length = snprintf(length_text, sizeof length_text, "%zu", body_length);
    size_t count = 4 + field_count + (size_t)needs_length;
    size_t size = sizeof(request) + count * sizeof(nghttp2_nv) + fields_length + body_length + method_length +
                  path_length + 2 + (size_t)length_text_length;
    request *r = calloc(1, size);
    if (!r) {
        herald_h2_result result = {.outcome = HERALD_H2_OTHER, .message = "out of memory"};
        engine->completion(context, &result);
        return;
    }
    nghttp2_nv *nv = (nghttp2_nv *)(r + 1);
    uint8_t *bytes = (uint8_t *)(nv + count);
    memcpy(bytes, body, body_length);
    r->body = bytes;
    r->body_length = body_length;
    bytes += body_length;
    uint8_t *copied_method = bytes;
    memcpy(bytes, method, method_length);
    bytes += method_length;
    uint8_t *copied_path = bytes;
    if (path_length == 0 || path[0] == '?') *bytes++ = '/';
    memcpy(bytes, path, path_length);
    size_t full_path_length = (size_t)(bytes + path_length - copied_path);
    bytes += path_length;
    uint8_t flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
    size_t n = 0;
    nv[n++] = (nghttp2_nv){(uint8_t *)":method", copied_method, 7, method_length, flags};
    nv[n++] = (nghttp2_nv){(uint8_t *)":scheme", (uint8_t *)"https", 7, 5, flags};
    nv[n++] = (nghttp2_nv){(uint8_t *)":authority", (uint8_t *)o->authority, 10, strlen(o->authority), flags};
    nv[n++] = (nghttp2_nv){(uint8_t *)":path", copied_path, 5, full_path_length, flags};
    int has_length = 0;
    const char *field = fields;
    for (size_t i = 0; i < field_count; i++) {
        size_t name_length = strlen(field);
        const char *value = field + name_length + 1;
        size_t value_length = strlen(value);
        if (!h2_is_connection_specific(field, name_length)) {
            uint8_t *name = bytes;
            for (size_t k = 0; k < name_length; k++) {
                char ch = field[k];
                name[k] = (uint8_t)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
            }
            bytes += name_length;
            memcpy(bytes, value, value_length);
            if (name_length == 14 && memcmp(name, "content-length", 14) == 0) has_length = 1;
            nv[n++] = (nghttp2_nv){name, bytes, name_length, value_length, flags};
            bytes += value_length;
        }
        field = value + value_length + 1;
    }
    if (needs_length && !has_length) {
        memcpy(bytes, length_text, (size_t)length_text_length);
        nv[n++] = (nghttp2_nv){(uint8_t *)"content-length", bytes, 14, (size_t)length_text_length, flags};
    }
    r->fields = nv;
    r->field_count = n;
    r->context = context;
    r->timeout_ms = timeout_ms;
    r->deadline = now_ms() + timeout_ms;
    engine->outstanding++;
    list_append(&o->waiting, r);
    schedule(engine, o);
}

void herald_h2_run(herald_h2_engine *engine, int timeout_ms) {
    settle(engine);
    int64_t now = now_ms();
    int wait = timeout_ms;
    if (engine->outstanding > 0) {
        int64_t until_sweep = engine->next_sweep - now;
        if (until_sweep < 0) until_sweep = 0;
        if (until_sweep < wait) wait = (int)until_sweep;
    }
    struct epoll_event events[64];
    int count = epoll_wait(engine->epoll, events, 64, wait);
    for (int i = 0; i < count; i++) {
        if (events[i].data.ptr == NULL) {
            h2_drain_mailbox(engine);
        } else {
            h2_connection_event(events[i].data.ptr, events[i].events);
        }
    }
    now = now_ms();
    if (now >= engine->next_sweep) {
        engine->next_sweep = now + SWEEP_MS;
        sweep(engine, now);
    }
    settle(engine);
}

void herald_h2_wakeup(herald_h2_engine *engine) {
    uint64_t one = 1;
    (void)!write(engine->mailbox->wake, &one, sizeof one);
}

void herald_h2_free(herald_h2_engine *engine) {
    const char *message = "the HTTP client was shut down";
    for (origin *o = engine->origins; o; o = o->next) {
        while (o->connections) h2_connection_close(o->connections, HERALD_H2_SHUTDOWN, message);
        fail_waiting(engine, o, HERALD_H2_SHUTDOWN, message, NULL);
    }
    engine->scheduled = NULL;
    engine->dirty = NULL;
    settle(engine);
    for (origin *o = engine->origins, *next; o; o = next) {
        next = o->next;
        origin_free(engine, o);
    }
    mailbox *box = engine->mailbox;
    pthread_mutex_lock(&box->lock);
    box->open = 0;
    for (resolution *job = box->done, *next; job; job = next) {
        next = job->next;
        h2_resolution_free(job);
    }
    box->done = NULL;
    h2_mailbox_release_locked(box);
    SSL_CTX_free(engine->tls);
    close(engine->epoll);
    nghttp2_session_callbacks_del(engine->callbacks);
    nghttp2_option_del(engine->options);
    free(engine->ca_file);
    free(engine);
}
