// The HTTP/2 engine: see include/herald_h2.h.
//
// Origins (host, port, client certificate) each own a queue of waiting requests and up to
// max_connections_per_origin connections. A connection is resolved, and its origin's client
// certificate read, on a thread of its own (neither is needed for an IP literal without a
// certificate), connected (non-blocking), handshaken (TLS, ALPN h2) and then carries up to
// max_streams streams. Requests wait in their own origin's queue, never
// behind another origin's, and go out as streams when a connection has room. The frames a pass
// produces for a connection leave in one TLS write (what corking does for libcurl).
#define _GNU_SOURCE
#include "herald_h2.h"
#include "herald_address.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/// A request whose stream the server refused unprocessed (past a GOAWAY's last stream, or
/// REFUSED_STREAM) is sent again, on whichever connection has room, until it has been refused
/// this many times; then it fails as a connection error.
#define MAX_REFUSALS 5
/// How often requests' deadlines and connections' stalls are looked at.
#define SWEEP_MS 20
/// What one response may bring, at most: a push service answers in a few hundred bytes, and a
/// server that sends more (a Web Push endpoint is anyone's) gets its stream reset.
#define MAX_RESPONSE_HEADERS (64 * 1024)
#define MAX_RESPONSE_BODY (1024 * 1024)
/// Bytes read from one connection per event before the others get their turn.
#define READ_BUDGET (1024 * 1024)
/// After a connection could not be opened while the origin has others, the next attempt waits
/// this long (the others carry its requests meanwhile).
#define REOPEN_PAUSE_MS 1000

// ---------------------------------------------------------------------------------------------
// Buffers and request lists

typedef struct buffer {
    uint8_t *bytes;
    size_t length, capacity;
} buffer;

static int buffer_append(buffer *b, const void *bytes, size_t length) {
    if (b->length + length > b->capacity) {
        size_t capacity = b->capacity ? b->capacity : 256;
        while (capacity < b->length + length) capacity *= 2;
        uint8_t *grown = realloc(b->bytes, capacity);
        if (!grown) return -1;
        b->bytes = grown;
        b->capacity = capacity;
    }
    memcpy(b->bytes + b->length, bytes, length);
    b->length += length;
    return 0;
}

struct connection;
struct origin;

typedef struct request {
    struct request *next, *previous;  // in its origin's queue, or its connection's streams
    struct connection *connection;  // while it is a stream
    int32_t stream_id;
    void *context;
    nghttp2_nv *fields;
    size_t field_count;
    const uint8_t *body;
    size_t body_length, body_sent;
    long timeout_ms;
    int64_t deadline;
    int refusals;
    int status;
    int opened_connection;
    /// The server ended the stream (END_STREAM), so the body is whole.
    int ended;
    /// The final response's header block is complete: header fields after it are trailers.
    int answered;
    /// Why the stream was reset by us, if it was (the response was too large, or broke HTTP/2's
    /// rules), and nghttp2's word for it, if any.
    const char *reset_reason, *reset_detail;
    buffer headers, response;
} request;

typedef struct list {
    request *first, *last;
    size_t count;
} list;

static void list_append(list *l, request *r) {
    r->next = NULL;
    r->previous = l->last;
    if (l->last) l->last->next = r; else l->first = r;
    l->last = r;
    l->count++;
}

static void list_prepend(list *l, request *r) {
    r->previous = NULL;
    r->next = l->first;
    if (l->first) l->first->previous = r; else l->last = r;
    l->first = r;
    l->count++;
}

static void list_remove(list *l, request *r) {
    if (r->previous) r->previous->next = r->next; else l->first = r->next;
    if (r->next) r->next->previous = r->previous; else l->last = r->previous;
    r->next = r->previous = NULL;
    l->count--;
}

// ---------------------------------------------------------------------------------------------
// Types

/// Where name resolutions done on their own threads come back. Shared with those threads, and
/// freed by whichever lets go last (the engine may be freed while a lookup still runs).
typedef struct mailbox {
    pthread_mutex_t lock;
    struct resolution *done;
    int wake;  // the engine's eventfd, closed with the mailbox
    int references;
    int open;
} mailbox;

/// What a connection needs before it can connect, made on a thread of its own so that the loop
/// never waits on a disk or a name server: its host's addresses and, for an origin with a
/// client certificate, a TLS context made from the certificate's file when the file is new or
/// has changed (a certificate renewed in place is read again for the next connection, as
/// libcurl reads it for each).
typedef struct resolution {
    struct resolution *next;
    mailbox *mailbox;
    struct connection *connection;  // NULL once its connection went away
    char *host;
    char service[8];
    int numeric;  // the host is an IP literal: nothing to look up
    struct addrinfo *addresses;
    int error;
    // The certificate's file, password and format, the CA file, and the file's modification
    // time when the origin's context was made (zero: not yet).
    char *certificate, *password, *ca_file;
    int certificate_is_p12;
    struct timespec known_modified;
    // What reading it gave: a new context and the file's modification time, or why not.
    SSL_CTX *tls;
    struct timespec modified;
    char tls_error[512];
} resolution;

enum state { RESOLVING, CONNECTING, HANDSHAKING, READY };

typedef struct connection {
    struct connection *next;  // in its origin's connections, then in the engine's dead ones
    struct herald_h2_engine *engine;
    struct origin *origin;  // NULL once closed
    enum state state;
    int fd;
    SSL *ssl;
    nghttp2_session *session;
    resolution *resolution;
    struct addrinfo *addresses, *next_address;
    int64_t connect_deadline;
    /// When the address being connected to is given up for the next one, if there is one (a
    /// name with an IPv6 address whose path drops packets still reaches its IPv4 one).
    int64_t attempt_deadline;
    list streams;
    /// No new streams: a GOAWAY came, or stream ids ran out.
    int draining;
    int opened_reported;
    uint32_t events;  // what epoll watches for
    int dirty;        // has frames to send
    struct connection *next_dirty;
    buffer output;
    size_t output_sent;
    int64_t last_received, waiting_since, ping_sent;
    char address[64];
    /// Why nghttp2 ended the session, if it did (the GOAWAY it sent).
    char protocol_error[160];
    /// On a guarded origin: the kind of the last address refused (HERALD_ADDRESS_PUBLIC: none).
    int refused_kind;
    char refused_address[INET6_ADDRSTRLEN];
} connection;

typedef struct origin {
    struct origin *next;
    char *host, *authority, *certificate, *password;
    int certificate_is_p12;
    /// The certificate file's modification time when its context was made (see resolution).
    struct timespec certificate_modified;
    int port;
    /// Whether only public addresses may be connected to.
    int guarded;
    SSL_CTX *tls;  // the engine's, or one of its own for a client certificate (NULL until made)
    list waiting;
    connection *connections;
    int connection_count;
    int64_t reopen_after;
    int scheduled;
    struct origin *next_scheduled;
} origin;

struct herald_h2_engine {
    herald_h2_config config;
    char *ca_file;
    herald_h2_completion completion;
    nghttp2_session_callbacks *callbacks;
    nghttp2_option *options;
    int epoll;
    mailbox *mailbox;
    SSL_CTX *tls;
    origin *origins;
    origin *scheduled;
    connection *dirty;
    connection *dead;
    /// Connections open or opening, for trusted and for guarded origins: each class has the
    /// whole limit, so that connections to browsers' push services never take FCM's or APNs'.
    int connection_count[2];
    /// Requests submitted and not completed: while there are any, deadlines are swept.
    size_t outstanding;
    int64_t next_sweep;
};

static void connection_connect(struct connection *c);
static SSL_CTX *client_tls_context(const char *ca_file, const char *file, int is_p12, const char *password,
                                   char *error, size_t error_size);

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

// ---------------------------------------------------------------------------------------------
// Completions

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

// ---------------------------------------------------------------------------------------------
// Connections

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

static void connection_close(connection *c, herald_h2_outcome outcome, const char *message);
static void connection_fail_opening(connection *c, const char *message);

/// Sets the events the loop waits for on a connection; 0 once they are watched. A connection
/// the kernel will not watch (out of memory, or the user's fs.epoll.max_user_watches reached)
/// would wait for nothing until its requests' timeouts, so it is closed at once instead: its
/// requests fail as connection errors, or, while it opens, as its origin's failure to connect.
static int watch(connection *c, uint32_t events) {
    if (c->fd < 0 || c->events == events) return 0;
    struct epoll_event event = {.events = events, .data.ptr = c};
    if (epoll_ctl(c->engine->epoll, c->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &event) != 0) {
        char message[160];
        snprintf(message, sizeof message, "could not watch the connection to %s: %s", c->address, strerror(errno));
        if (c->state == READY) {
            connection_close(c, HERALD_H2_CONNECTION, message);
        } else {
            connection_fail_opening(c, message);
        }
        return -1;
    }
    c->events = events;
    return 0;
}

/// Stops watching a connection's socket, before it is closed. Closing alone would not do: a
/// process forked at that moment holds the socket until its exec closes it, and epoll would go
/// on reporting it, naming a connection already freed. DEL can fail only for a descriptor not in
/// the set, and one whose events are set is in it.
static void unwatch(connection *c) {
    if (c->fd >= 0 && c->events) (void)epoll_ctl(c->engine->epoll, EPOLL_CTL_DEL, c->fd, NULL);
    c->events = 0;
}

/// Closes a connection. Its streams fail with `outcome` and `message`; for HERALD_H2_NOT_HTTP2
/// (nothing was sent), so do all the origin's waiting requests, to be sent another way.
static void connection_close(connection *c, herald_h2_outcome outcome, const char *message) {
    herald_h2_engine *engine = c->engine;
    origin *o = c->origin;
    if (!o) return;
    for (connection **link = &o->connections; *link; link = &(*link)->next) {
        if (*link == c) {
            *link = c->next;
            break;
        }
    }
    o->connection_count--;
    engine->connection_count[o->guarded]--;
    list streams = c->streams;
    c->streams = (list){0};
    for (request *r = streams.first; r; r = r->next) r->connection = NULL;
    if (c->session) nghttp2_session_del(c->session);
    c->session = NULL;
    if (c->ssl) SSL_free(c->ssl);
    c->ssl = NULL;
    unwatch(c);
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    if (c->resolution) {
        pthread_mutex_lock(&c->resolution->mailbox->lock);
        c->resolution->connection = NULL;
        pthread_mutex_unlock(&c->resolution->mailbox->lock);
        c->resolution = NULL;
    }
    if (c->addresses) freeaddrinfo(c->addresses);
    c->addresses = c->next_address = NULL;
    c->origin = NULL;
    // Freed at the end of the pass: an epoll event or the dirty list may still name it.
    c->next = engine->dead;
    engine->dead = c;
    for (request *r = streams.first, *next; r; r = next) {
        next = r->next;
        complete(engine, r, outcome, message);
    }
    if (outcome == HERALD_H2_NOT_HTTP2) fail_waiting(engine, o, outcome, message, NULL);
    schedule(engine, o);
}

/// A connection that could not be made: the origin's waiting requests fail with its reason if
/// no other connection is open or on its way (they would wait for nothing). If an address was
/// refused, that is the reason (a name may resolve to a public address and a private one: then
/// the public one was tried).
static void connection_fail_opening(connection *c, const char *message) {
    origin *o = c->origin;
    herald_h2_engine *engine = c->engine;
    connection_close(c, HERALD_H2_CONNECTION, message);  // freed at the end of the pass, not now
    if (o->connections) {
        o->reopen_after = now_ms() + REOPEN_PAUSE_MS;
        return;
    }
    if (c->refused_kind != HERALD_ADDRESS_PUBLIC) {
        fail_waiting(engine, o, HERALD_H2_REFUSED_ADDRESS, message, c);
    } else {
        fail_waiting(engine, o, HERALD_H2_CONNECTION, message, NULL);
    }
}

static ssize_t send_body(nghttp2_session *session, int32_t stream_id, uint8_t *into, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *user_data) {
    (void)session, (void)stream_id, (void)user_data;
    request *r = source->ptr;
    size_t left = r->body_length - r->body_sent;
    size_t n = left < length ? left : length;
    memcpy(into, r->body + r->body_sent, n);
    r->body_sent += n;
    if (r->body_sent == r->body_length) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int start_stream(connection *c, request *r) {
    nghttp2_data_provider provider = {.source.ptr = r, .read_callback = send_body};
    r->body_sent = 0;
    int32_t id = nghttp2_submit_request(c->session, NULL, r->fields, r->field_count,
                                        r->body_length ? &provider : NULL, r);
    if (id < 0) return id;
    r->stream_id = id;
    r->connection = c;
    if (c->streams.count == 0) c->waiting_since = now_ms();
    list_append(&c->streams, r);
    if (!c->opened_reported) {
        c->opened_reported = 1;
        r->opened_connection = 1;
    }
    mark_dirty(c);
    return 0;
}

static size_t stream_limit(connection *c) {
    uint32_t server = nghttp2_session_get_remote_settings(c->session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    uint32_t ours = (uint32_t)c->engine->config.max_streams;
    return server < ours ? server : ours;
}

// nghttp2's callbacks; user_data is the connection.

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t name_length,
                     const uint8_t *value, size_t value_length, uint8_t flags, void *user_data) {
    (void)flags, (void)user_data;
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    request *r = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    // Trailers carry nothing a push service's answer needs, and are not mixed into its headers.
    if (!r || r->answered) return 0;
    if (name_length == 7 && memcmp(name, ":status", 7) == 0) {
        // RFC 9110: three digits, 1xx to 5xx. nghttp2 refuses what is not three digits ("2000"),
        // but takes any three ("099", "600").
        if (value_length != 3 || value[0] < '1' || value[0] > '5' || value[1] < '0' || value[1] > '9' ||
            value[2] < '0' || value[2] > '9') {
            r->reset_reason = "the response's :status is not a three-digit status code";
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets this stream only
        }
        r->status = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
        // An interim answer (1xx) is followed by the real one, whose headers are the ones kept.
        r->headers.length = 0;
        return 0;
    }
    if (r->headers.length + name_length + value_length + 4 > MAX_RESPONSE_HEADERS) {
        r->reset_reason = "the response's header fields exceed 64 KiB";
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets this stream only
    }
    if (buffer_append(&r->headers, name, name_length) || buffer_append(&r->headers, ": ", 2) ||
        buffer_append(&r->headers, value, value_length) || buffer_append(&r->headers, "\r\n", 2))
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int on_data(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data, size_t length,
                   void *user_data) {
    (void)flags, (void)user_data;
    request *r = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!r || r->reset_reason) return 0;
    if (r->response.length + length > MAX_RESPONSE_BODY) {
        r->reset_reason = "the response's body exceeds 1 MiB";
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
        return 0;
    }
    if (buffer_append(&r->response, data, length)) return NGHTTP2_ERR_CALLBACK_FAILURE;
    return 0;
}

/// A frame that breaks HTTP/2's rules for its stream alone (a response's header block with a
/// malformed :status, say): nghttp2 resets that stream, and its request fails saying why.
static int on_invalid_frame(nghttp2_session *session, const nghttp2_frame *frame, int lib_error_code,
                            void *user_data) {
    (void)user_data;
    request *r = frame->hd.stream_id ? nghttp2_session_get_stream_user_data(session, frame->hd.stream_id) : NULL;
    if (r && !r->reset_reason) {
        r->reset_reason = "the server's response broke HTTP/2's rules";
        r->reset_detail = nghttp2_strerror(lib_error_code);
    }
    return 0;
}

/// A GOAWAY of ours: nghttp2 ended the session, answering a frame that broke the protocol. Its
/// error code and debug data (nghttp2's reason, which may quote the server's bytes: only
/// printable ASCII is kept) are what the connection's requests fail with.
static int on_frame_sent(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
    (void)session;
    if (frame->hd.type != NGHTTP2_GOAWAY) return 0;
    connection *c = user_data;
    const nghttp2_goaway *goaway = &frame->goaway;
    size_t length = (size_t)snprintf(c->protocol_error, sizeof c->protocol_error, "%s%s",
                                     nghttp2_http2_strerror(goaway->error_code), goaway->opaque_data_len ? ": " : "");
    for (size_t i = 0; i < goaway->opaque_data_len && length + 1 < sizeof c->protocol_error; i++) {
        uint8_t byte = goaway->opaque_data[i];
        c->protocol_error[length++] = byte >= 0x20 && byte < 0x7f ? (char)byte : '?';
    }
    c->protocol_error[length] = 0;
    return 0;
}

static int on_frame(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
    connection *c = user_data;
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        request *r = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (r) r->ended = 1;
    }
    if (frame->hd.type == NGHTTP2_HEADERS) {
        request *r = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (r && r->status >= 200) r->answered = 1;
    }
    if (frame->hd.type == NGHTTP2_GOAWAY) c->draining = 1;
    // A GOAWAY's refused streams, or SETTINGS with another stream limit: the queue may move.
    if (frame->hd.type == NGHTTP2_GOAWAY || frame->hd.type == NGHTTP2_SETTINGS) schedule(c->engine, c->origin);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *user_data) {
    connection *c = user_data;
    request *r = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!r || r->connection != c) return 0;
    herald_h2_engine *engine = c->engine;
    origin *o = c->origin;
    list_remove(&c->streams, r);
    r->connection = NULL;
    nghttp2_session_set_stream_user_data(session, stream_id, NULL);
    schedule(engine, o);
    if (r->reset_reason) {
        char message[256];
        snprintf(message, sizeof message, r->reset_detail ? "%s (%s)" : "%s", r->reset_reason, r->reset_detail);
        complete(engine, r, HERALD_H2_OTHER, message);
    } else if (error_code == NGHTTP2_NO_ERROR && r->status >= 200 && r->ended) {
        complete(engine, r, HERALD_H2_OK, NULL);
    } else if (error_code == NGHTTP2_REFUSED_STREAM && r->status == 0) {
        // Never processed: send it again, first in line, on another stream.
        if (++r->refusals >= MAX_REFUSALS) {
            char message[160];
            snprintf(message, sizeof message,
                     "the server refused the request %d times (it ended its connections before taking it); it was "
                     "never processed",
                     r->refusals);
            complete(engine, r, HERALD_H2_CONNECTION, message);
        } else {
            r->headers.length = r->response.length = 0;
            r->answered = 0;
            r->opened_connection = 0;
            list_prepend(&o->waiting, r);
        }
    } else {
        char message[160];
        snprintf(message, sizeof message, "the server reset the HTTP/2 stream (%s)",
                 nghttp2_http2_strerror(error_code));
        complete(engine, r, HERALD_H2_CONNECTION, message);
    }
    return 0;
}

/// The callbacks and options every session of the engine's is made with.
static int session_configure(herald_h2_engine *engine) {
    if (nghttp2_session_callbacks_new(&engine->callbacks) != 0 || nghttp2_option_new(&engine->options) != 0) return -1;
    nghttp2_session_callbacks_set_on_header_callback(engine->callbacks, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(engine->callbacks, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(engine->callbacks, on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(engine->callbacks, on_stream_close);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(engine->callbacks, on_invalid_frame);
    nghttp2_session_callbacks_set_on_frame_send_callback(engine->callbacks, on_frame_sent);
    // Until the server's SETTINGS say otherwise, as many streams as we would open at most.
    nghttp2_option_set_peer_max_concurrent_streams(engine->options, (uint32_t)engine->config.max_streams);
    // What a server may make a session hold or do before nghttp2 ends it as an attack. A push
    // service answers a request in a few hundred bytes and says little else; these are far past
    // any honest server and still small.
    // - Acknowledgements (of PINGs and SETTINGS) waiting to be sent: a server that floods PINGs
    //   faster than it reads the answers. An honest one sends a PING every few seconds at most.
    nghttp2_option_set_max_outbound_ack(engine->options, 1000);
    // - Entries in one SETTINGS frame: RFC 9113 defines six, extensions a few more.
    nghttp2_option_set_max_settings(engine->options, 32);
    // - CONTINUATION frames after a HEADERS frame: the 64 KiB a response's header fields may take
    //   (MAX_RESPONSE_HEADERS) fit in five frames of the default 16 KiB; eight leave room for a
    //   server that writes smaller ones, and stop one that never ends its header block.
    nghttp2_option_set_max_continuations(engine->options, 8);
    // - The table our requests' header fields are compressed against: the server may ask for
    //   less. 4 KiB holds the repeated ones (a 1,024-character bearer token among them).
    nghttp2_option_set_max_deflate_dynamic_table_size(engine->options, 4096);
    return 0;
}

/// A connection's session, with the SETTINGS it opens with.
static int session_open(connection *c) {
    if (nghttp2_session_client_new2(&c->session, c->engine->callbacks, c, c->engine->options) != 0) return -1;
    // No server push. The table the server's header fields are compressed against stays at
    // HTTP/2's default of 4 KiB: a response needs little, and a larger one would let a server
    // make every one-byte reference to it cost more (an HPACK bomb; MAX_RESPONSE_HEADERS stops
    // the response, whatever the table). And the limit on a response's header fields, which
    // on_header enforces.
    nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                         {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 4096},
                                         {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_RESPONSE_HEADERS}};
    return nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, 3);
}

// TLS and sockets

static void tls_failure(char *into, size_t size, const char *what, SSL *ssl) {
    long verified = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
    unsigned long code = ERR_peek_error();
    if (verified != X509_V_OK) {
        snprintf(into, size, "%s: the server's certificate is not trusted: %s", what,
                 X509_verify_cert_error_string(verified));
    } else if (code) {
        char reason[200];
        ERR_error_string_n(code, reason, sizeof reason);
        snprintf(into, size, "%s: %s", what, reason);
    } else {
        snprintf(into, size, "%s: %s", what, errno ? strerror(errno) : "the connection ended");
    }
    ERR_clear_error();
}

static void connection_ready(connection *c) {
    const unsigned char *protocol = NULL;
    unsigned int length = 0;
    SSL_get0_alpn_selected(c->ssl, &protocol, &length);
    if (length != 2 || memcmp(protocol, "h2", 2) != 0) {
        connection_close(c, HERALD_H2_NOT_HTTP2, "the server does not offer HTTP/2");
        return;
    }
    if (session_open(c) != 0) {
        connection_fail_opening(c, "out of memory");
        return;
    }
    c->state = READY;
    c->last_received = now_ms();
    if (watch(c, EPOLLIN) != 0) return;
    mark_dirty(c);
    schedule(c->engine, c->origin);
}

static void connection_handshake(connection *c) {
    ERR_clear_error();
    errno = 0;
    int result = SSL_connect(c->ssl);
    if (result == 1) {
        connection_ready(c);
        return;
    }
    switch (SSL_get_error(c->ssl, result)) {
    case SSL_ERROR_WANT_READ:
        watch(c, EPOLLIN);
        return;
    case SSL_ERROR_WANT_WRITE:
        watch(c, EPOLLIN | EPOLLOUT);
        return;
    default: {
        char what[128], message[384];
        snprintf(what, sizeof what, "TLS handshake with %s failed", c->address);
        tls_failure(message, sizeof message, what, c->ssl);
        connection_fail_opening(c, message);
    }
    }
}

static int is_ip_literal(const char *host) {
    unsigned char address[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, address) == 1 || inet_pton(AF_INET6, host, address) == 1;
}

/// Gives up the address being connected to and connects to the name's next one (or fails).
static void connection_try_next_address(connection *c) {
    unwatch(c);
    close(c->fd);
    c->fd = -1;
    connection_connect(c);
}

static void connection_connected(connection *c) {
    int error = 0;
    socklen_t length = sizeof error;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error) {
        char message[256];
        snprintf(message, sizeof message, "could not connect to %s: %s", c->address, strerror(error));
        if (c->next_address) {
            connection_try_next_address(c);  // another of the name's addresses may answer
            return;
        }
        connection_fail_opening(c, message);
        return;
    }
    origin *o = c->origin;
    c->ssl = SSL_new(o->tls);
    if (!c->ssl) {
        connection_fail_opening(c, "out of memory");
        return;
    }
    SSL_set_fd(c->ssl, c->fd);
    SSL_set_connect_state(c->ssl);
    // The certificate must name the URL's host (or IP); without that check, there is no TLS.
    int named = is_ip_literal(o->host)
                    ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), o->host)
                    : SSL_set_tlsext_host_name(c->ssl, o->host) == 1 && SSL_set1_host(c->ssl, o->host) == 1;
    if (!named) {
        connection_fail_opening(c, "could not set the host name to verify");
        return;
    }
    c->state = HANDSHAKING;
    connection_handshake(c);
}

/// Connects to the next of the name's addresses.
static void connection_connect(connection *c) {
    char message[256] = "no address to connect to";
    while (c->next_address) {
        struct addrinfo *address = c->next_address;
        c->next_address = address->ai_next;
        char host[INET6_ADDRSTRLEN] = "";
        void *raw = address->ai_family == AF_INET6 ? (void *)&((struct sockaddr_in6 *)address->ai_addr)->sin6_addr
                                                   : (void *)&((struct sockaddr_in *)address->ai_addr)->sin_addr;
        inet_ntop(address->ai_family, raw, host, sizeof host);
        snprintf(c->address, sizeof c->address, address->ai_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host,
                 c->origin->port);
        if (c->origin->guarded) {
            int kind = address->ai_family == AF_INET6
                           ? herald_classify_ipv6(((struct sockaddr_in6 *)address->ai_addr)->sin6_addr.s6_addr)
                       : address->ai_family == AF_INET
                           ? herald_classify_ipv4(ntohl(((struct sockaddr_in *)address->ai_addr)->sin_addr.s_addr))
                           : HERALD_ADDRESS_RESERVED;
            if (kind != HERALD_ADDRESS_PUBLIC) {
                c->refused_kind = kind;
                snprintf(c->refused_address, sizeof c->refused_address, "%s", host);
                snprintf(message, sizeof message, "refused to connect to %s, which this request may not reach",
                         host);
                continue;
            }
        }
        int fd = socket(address->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(message, sizeof message, "could not open a socket: %s", strerror(errno));
            continue;
        }
        int on = 1, idle = 30, interval = 10, count = 3;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
        if (connect(fd, address->ai_addr, address->ai_addrlen) == 0 || errno == EINPROGRESS) {
            c->fd = fd;
            c->state = CONNECTING;
            long attempt = c->engine->config.connect_timeout_ms / 2;
            c->attempt_deadline = now_ms() + (attempt < 2000 ? attempt : 2000);
            watch(c, EPOLLOUT);
            return;
        }
        snprintf(message, sizeof message, "could not connect to %s: %s", c->address, strerror(errno));
        close(fd);
    }
    connection_fail_opening(c, message);
}

static void resolution_free(resolution *job) {
    if (job->addresses) freeaddrinfo(job->addresses);
    if (job->tls) SSL_CTX_free(job->tls);
    if (job->password) OPENSSL_cleanse(job->password, strlen(job->password));
    free(job->password);
    free(job->certificate);
    free(job->ca_file);
    free(job->host);
    free(job);
}

/// Lets go of the mailbox; the last to let go frees it. Called with its lock held.
static void mailbox_release_locked(mailbox *box) {
    int last = --box->references == 0;
    pthread_mutex_unlock(&box->lock);
    if (last) {
        close(box->wake);
        pthread_mutex_destroy(&box->lock);
        free(box);
    }
}

static void *prepare(void *argument) {
    resolution *job = argument;
    struct stat file = {0};
    if (job->certificate &&
        (stat(job->certificate, &file) != 0 ? job->known_modified.tv_sec == 0 && job->known_modified.tv_nsec == 0
                                            : file.st_mtim.tv_sec != job->known_modified.tv_sec ||
                                                  file.st_mtim.tv_nsec != job->known_modified.tv_nsec)) {
        job->tls = client_tls_context(job->ca_file, job->certificate, job->certificate_is_p12, job->password,
                                      job->tls_error, sizeof job->tls_error);
        job->modified = file.st_mtim;
    }
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = job->numeric ? AI_NUMERICHOST : AI_ADDRCONFIG};
    job->error = getaddrinfo(job->host, job->service, &hints, &job->addresses);
    mailbox *box = job->mailbox;
    pthread_mutex_lock(&box->lock);
    if (box->open && job->connection) {
        job->next = box->done;
        box->done = job;
        uint64_t one = 1;
        (void)!write(box->wake, &one, sizeof one);
    } else {
        resolution_free(job);
    }
    mailbox_release_locked(box);
    return NULL;
}

static void resolved(resolution *job) {
    connection *c = job->connection;
    origin *o = c->origin;
    c->resolution = NULL;
    if (job->tls) {
        if (o->tls) SSL_CTX_free(o->tls);  // its connections keep their own reference
        o->tls = job->tls;
        job->tls = NULL;
        o->certificate_modified = job->modified;
    }
    if (job->tls_error[0]) {
        connection_fail_opening(c, job->tls_error);
    } else if (job->error) {
        char message[256];
        snprintf(message, sizeof message, "could not resolve %s: %s", c->origin->host, gai_strerror(job->error));
        connection_fail_opening(c, message);
    } else {
        c->addresses = c->next_address = job->addresses;
        job->addresses = NULL;
        connection_connect(c);
    }
    resolution_free(job);
}

/// Opens a connection to the origin. Returns 0 if it failed at once (and was closed).
static int connection_open(herald_h2_engine *engine, origin *o) {
    connection *c = calloc(1, sizeof *c);
    if (!c) {
        fail_waiting(engine, o, HERALD_H2_OTHER, "out of memory", NULL);
        return 0;
    }
    c->engine = engine;
    c->origin = o;
    c->fd = -1;
    c->state = RESOLVING;
    c->connect_deadline = now_ms() + engine->config.connect_timeout_ms;
    c->next = o->connections;
    o->connections = c;
    o->connection_count++;
    engine->connection_count[o->guarded]++;
    snprintf(c->address, sizeof c->address, "%s", o->authority);
    char service[8];
    snprintf(service, sizeof service, "%d", o->port);
    // An IP literal needs no lookup: without a certificate to read, it connects now.
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST};
    struct addrinfo *addresses = NULL;
    int numeric = getaddrinfo(o->host, service, &hints, &addresses) == 0;
    if (numeric && !o->certificate) {
        c->addresses = c->next_address = addresses;
        connection_connect(c);
        return c->origin != NULL;
    }
    if (addresses) freeaddrinfo(addresses);
    resolution *job = calloc(1, sizeof *job);
    if (!job || !(job->host = strdup(o->host)) ||
        (o->certificate && (!(job->certificate = strdup(o->certificate)) ||
                            (o->password && !(job->password = strdup(o->password))) ||
                            (engine->ca_file && !(job->ca_file = strdup(engine->ca_file)))))) {
        if (job) resolution_free(job);
        connection_fail_opening(c, "out of memory");
        return 0;
    }
    memcpy(job->service, service, sizeof service);
    job->numeric = numeric;
    job->certificate_is_p12 = o->certificate_is_p12;
    if (o->tls) job->known_modified = o->certificate_modified;
    job->mailbox = engine->mailbox;
    job->connection = c;
    c->resolution = job;
    pthread_mutex_lock(&engine->mailbox->lock);
    engine->mailbox->references++;
    pthread_mutex_unlock(&engine->mailbox->lock);
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attributes, 512 * 1024);  // OpenSSL's PKCS#12 parsing among the rest
    if (pthread_create(&thread, &attributes, prepare, job) != 0) {
        pthread_mutex_lock(&engine->mailbox->lock);
        engine->mailbox->references--;
        pthread_mutex_unlock(&engine->mailbox->lock);
        c->resolution = NULL;
        resolution_free(job);
        connection_fail_opening(c, "could not start a thread to resolve the host name and read the certificate");
    }
    pthread_attr_destroy(&attributes);
    return c->origin != NULL;
}

/// Sends what the connection's session has to send, in as few TLS writes as it allows.
static void connection_flush(connection *c) {
    for (;;) {
        while (c->output.length < 256 * 1024) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(c->session, &data);
            if (n < 0) {
                char message[128];
                snprintf(message, sizeof message, "HTTP/2 error: %s", nghttp2_strerror((int)n));
                connection_close(c, HERALD_H2_CONNECTION, message);
                return;
            }
            if (n == 0) break;
            if (buffer_append(&c->output, data, (size_t)n)) {
                connection_close(c, HERALD_H2_CONNECTION, "out of memory");
                return;
            }
        }
        if (c->output_sent == c->output.length) break;
        while (c->output_sent < c->output.length) {
            ERR_clear_error();
            errno = 0;
            int n = SSL_write(c->ssl, c->output.bytes + c->output_sent, (int)(c->output.length - c->output_sent));
            if (n > 0) {
                c->output_sent += (size_t)n;
                continue;
            }
            int error = SSL_get_error(c->ssl, n);
            if (error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_WANT_READ) {
                // Reading brings the connection back here (connection_read marks it dirty).
                watch(c, error == SSL_ERROR_WANT_WRITE ? EPOLLIN | EPOLLOUT : EPOLLIN);
                return;
            }
            char what[128], message[384];
            snprintf(what, sizeof what, "sending to %s failed", c->address);
            tls_failure(message, sizeof message, what, NULL);
            connection_close(c, HERALD_H2_CONNECTION, message);
            return;
        }
        c->output.length = c->output_sent = 0;
    }
    if (watch(c, EPOLLIN) != 0) return;
    // Nothing more to say or hear: the server's GOAWAY came and its streams are done, or nghttp2
    // ended the session itself, answering a frame that broke the protocol with its own GOAWAY.
    if (c->draining && c->streams.count == 0) {
        connection_close(c, HERALD_H2_CONNECTION, "the server ended the connection");
    } else if (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session)) {
        char message[256];
        snprintf(message, sizeof message, "HTTP/2 error from %s: %s", c->address,
                 c->protocol_error[0] ? c->protocol_error : "the session ended");
        connection_close(c, HERALD_H2_CONNECTION, message);
    }
}

static void connection_read(connection *c) {
    uint8_t input[32 * 1024];
    size_t taken = 0;
    // Level-triggered epoll comes back for what is left in the socket; what OpenSSL holds
    // already (SSL_pending) is read now, since epoll cannot see it.
    while (taken < READ_BUDGET || SSL_pending(c->ssl) > 0) {
        ERR_clear_error();
        errno = 0;
        int n = SSL_read(c->ssl, input, sizeof input);
        if (n > 0) {
            taken += (size_t)n;
            c->last_received = now_ms();
            ssize_t used = nghttp2_session_mem_recv(c->session, input, (size_t)n);
            if (used < 0) {
                char message[128];
                snprintf(message, sizeof message, "HTTP/2 error from %s: %s", c->address, nghttp2_strerror((int)used));
                connection_close(c, HERALD_H2_CONNECTION, message);
                return;
            }
            continue;
        }
        int error = SSL_get_error(c->ssl, n);
        if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) break;
        char what[128], message[384];
        if (error == SSL_ERROR_ZERO_RETURN || (error == SSL_ERROR_SYSCALL && errno == 0)) {
            snprintf(message, sizeof message, "the server at %s closed the connection", c->address);
        } else {
            snprintf(what, sizeof what, "receiving from %s failed", c->address);
            tls_failure(message, sizeof message, what, NULL);
        }
        connection_close(c, HERALD_H2_CONNECTION, message);
        return;
    }
    mark_dirty(c);  // acknowledgements, window updates
}

static void connection_event(connection *c, uint32_t events) {
    if (!c->origin) return;
    switch (c->state) {
    case RESOLVING:
        return;
    case CONNECTING:
        connection_connected(c);
        return;
    case HANDSHAKING:
        connection_handshake(c);
        return;
    case READY:
        if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) connection_read(c);
        if (c->origin && (events & EPOLLOUT)) mark_dirty(c);
        return;
    }
}

// ---------------------------------------------------------------------------------------------
// Scheduling and time

/// Makes room under the engine's connection limit, as libcurl's connection cache does: closes a
/// connection of the class that carries no stream and has none waiting for it. Returns whether
/// it found one.
static int close_idle_connection(herald_h2_engine *engine, int guarded) {
    for (origin *o = engine->origins; o; o = o->next)
        for (connection *c = o->connections; c; c = c->next)
            if (o->guarded == guarded && c->state == READY && c->streams.count == 0 && !o->waiting.first) {
                connection_close(c, HERALD_H2_CONNECTION, "");
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
            if (c->state != READY) {
                coming += (size_t)engine->config.max_streams;
            } else if (!c->draining && c->streams.count < stream_limit(c)) {
                room = c;
                break;
            }
        }
        if (room) {
            request *r = o->waiting.first;
            list_remove(&o->waiting, r);
            int failure = start_stream(room, r);
            if (failure == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) {
                room->draining = 1;
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
        if (!connection_open(engine, o)) return;
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

static void sweep(herald_h2_engine *engine, int64_t now) {
    long stall = engine->config.stall_timeout_ms;
    // An origin with nothing open and nothing waiting is forgotten: the list stays as short as
    // the hosts in use, and a client certificate is read again (renewed, or readable again).
    for (origin **link = &engine->origins; *link;) {
        origin *o = *link;
        if (!o->connections && !o->waiting.first && !o->scheduled) {
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
            if (c->state == CONNECTING && c->next_address && now >= c->attempt_deadline) {
                connection_try_next_address(c);
                continue;
            }
            if (c->state != READY) {
                if (now >= c->connect_deadline) {
                    char message[160];
                    snprintf(message, sizeof message, "connecting to %s timed out after %ld ms", c->address,
                             engine->config.connect_timeout_ms);
                    connection_fail_opening(c, message);
                }
                continue;
            }
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
                           nghttp2_session_get_stream_remote_window_size(c->session, r->stream_id) <= 0;
                snprintf(message, sizeof message, "no answer within %ld ms%s", r->timeout_ms,
                         shut ? " (the server's flow-control window left no room for the request's body)" : "");
                complete(engine, r, HERALD_H2_TIMEOUT, message);
            }
            if (stall <= 0 || c->streams.count == 0) {
                c->ping_sent = 0;
                continue;
            }
            // Something to answer for half the stall limit and nothing received: PING. Nothing
            // received in the other half either: the connection is given up.
            int64_t half = stall / 2;
            int64_t since = c->last_received > c->waiting_since ? c->last_received : c->waiting_since;
            if (c->ping_sent && c->last_received >= c->ping_sent) c->ping_sent = 0;
            if (!c->ping_sent && now - since >= half) {
                nghttp2_submit_ping(c->session, NGHTTP2_FLAG_NONE, NULL);
                c->ping_sent = now;
                mark_dirty(c);
            } else if (c->ping_sent && now - c->ping_sent >= half) {
                char message[256];
                snprintf(message, sizeof message,
                         "the connection stopped answering (nothing received for %ld ms, not even an answer to a "
                         "PING) and was closed; the request may be sent again",
                         stall);
                connection_close(c, HERALD_H2_CONNECTION, message);
            }
        }
    }
}

static void drain_mailbox(herald_h2_engine *engine) {
    uint64_t count;
    (void)!read(engine->mailbox->wake, &count, sizeof count);
    pthread_mutex_lock(&engine->mailbox->lock);
    resolution *done = engine->mailbox->done;
    engine->mailbox->done = NULL;
    pthread_mutex_unlock(&engine->mailbox->lock);
    while (done) {
        resolution *next = done->next;
        if (done->connection) {
            resolved(done);
        } else {
            resolution_free(done);
        }
        done = next;
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
            if (c->origin && c->state == READY) connection_flush(c);
        }
    }
    while (engine->dead) {
        connection *c = engine->dead;
        engine->dead = c->next;
        free(c->output.bytes);
        free(c);
    }
}

// ---------------------------------------------------------------------------------------------
// The API

static SSL_CTX *tls_context(const char *ca_file, char *error, size_t error_size) {
    SSL_CTX *tls = SSL_CTX_new(TLS_client_method());
    if (!tls) {
        tls_failure(error, error_size, "could not create a TLS context", NULL);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(tls, TLS1_2_VERSION);
    SSL_CTX_set_verify(tls, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(tls, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(tls, SSL_OP_NO_RENEGOTIATION);  // HTTP/2 forbids it (RFC 9113 §9.2.1)
    // HTTP/1.1 is offered too, or a server without HTTP/2 ends the handshake with an alert,
    // where its choice of HTTP/1.1 lets the request be handed to libcurl.
    SSL_CTX_set_alpn_protos(tls, (const unsigned char *)"\x02h2\x08http/1.1", 12);
    int loaded = ca_file ? SSL_CTX_load_verify_locations(tls, ca_file, NULL) : SSL_CTX_set_default_verify_paths(tls);
    if (loaded != 1) {
        char what[300];
        snprintf(what, sizeof what, "could not read the CA certificates in %s", ca_file ? ca_file : "the system's store");
        tls_failure(error, error_size, what, NULL);
        SSL_CTX_free(tls);
        return NULL;
    }
    return tls;
}

static SSL_CTX *client_tls_context(const char *ca_file, const char *file, int is_p12, const char *password,
                                   char *error, size_t error_size) {
    SSL_CTX *tls = tls_context(ca_file, error, error_size);
    if (!tls) return NULL;
    int ok = 0;
    if (is_p12) {
        FILE *stream = fopen(file, "rb");
        PKCS12 *bundle = stream ? d2i_PKCS12_fp(stream, NULL) : NULL;
        if (stream) fclose(stream);
        EVP_PKEY *key = NULL;
        X509 *certificate = NULL;
        STACK_OF(X509) *chain = NULL;
        ok = bundle && PKCS12_parse(bundle, password ? password : "", &key, &certificate, &chain) == 1 &&
             SSL_CTX_use_cert_and_key(tls, certificate, key, chain, 1) == 1;
        EVP_PKEY_free(key);
        X509_free(certificate);
        sk_X509_pop_free(chain, X509_free);
        PKCS12_free(bundle);
    } else {
        // OpenSSL's default password callback answers with this.
        SSL_CTX_set_default_passwd_cb_userdata(tls, (void *)(password ? password : ""));
        ok = SSL_CTX_use_certificate_chain_file(tls, file) == 1 &&
             SSL_CTX_use_PrivateKey_file(tls, file, SSL_FILETYPE_PEM) == 1 && SSL_CTX_check_private_key(tls) == 1;
        SSL_CTX_set_default_passwd_cb_userdata(tls, NULL);
    }
    if (!ok) {
        char what[300];
        snprintf(what, sizeof what, "could not use the client certificate %s", file);
        tls_failure(error, error_size, what, NULL);
        SSL_CTX_free(tls);
        return NULL;
    }
    return tls;
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
    engine->completion = completion;
    engine->tls = tls_context(engine->ca_file, error, error_size);
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
        session_configure(engine) != 0) {
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

/// Splits an https URL into its host, port, authority and path (with the query; without the
/// fragment). Returns 0, or -1 for a URL this engine does not take.
static int split_url(const char *url, const char **host, size_t *host_length, int *port, const char **authority,
                     size_t *authority_length, const char **path, size_t *path_length) {
    if (strncasecmp(url, "https://", 8) != 0) return -1;
    const char *start = url + 8;
    size_t length = strcspn(start, "/?#");
    *authority = start;
    *authority_length = length;
    if (length == 0 || memchr(start, '@', length)) return -1;
    const char *port_text = NULL;
    if (start[0] == '[') {
        const char *close = memchr(start, ']', length);
        if (!close) return -1;
        *host = start + 1;
        *host_length = (size_t)(close - start - 1);
        if (close + 1 < start + length) {
            if (close[1] != ':') return -1;
            port_text = close + 2;
        }
    } else {
        const char *colon = memchr(start, ':', length);
        *host = start;
        *host_length = colon ? (size_t)(colon - start) : length;
        if (colon) port_text = colon + 1;
    }
    if (*host_length == 0 || memchr(*host, '%', *host_length)) return -1;  // an IPv6 zone: libcurl's
    *port = 443;
    if (port_text && port_text < start + length) {
        int value = 0;
        for (const char *p = port_text; p < start + length; p++) {
            if (*p < '0' || *p > '9' || value > 65535) return -1;
            value = value * 10 + (*p - '0');
        }
        if (value < 1 || value > 65535) return -1;
        *port = value;
    }
    *path = start + length;
    *path_length = strcspn(*path, "#");
    return 0;
}

/// Whether `fields` holds `count` fields, each a name and a value ended by a NUL, within `length`
/// bytes.
static int fields_fit(const char *fields, size_t length, size_t count) {
    size_t at = 0;
    for (size_t i = 0; i < 2 * count; i++) {
        const char *end = at < length ? memchr(fields + at, '\0', length - at) : NULL;
        if (!end) return 0;
        at = (size_t)(end - fields) + 1;
    }
    return 1;
}

static int is_connection_specific(const char *name, size_t length) {
    static const char *const names[] = {"host", "connection", "keep-alive", "proxy-connection", "transfer-encoding",
                                        "upgrade", "te", "expect"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == length && strncasecmp(names[i], name, length) == 0) return 1;
    return 0;
}

void herald_h2_submit(herald_h2_engine *engine, const char *url, const char *method, const char *fields,
                      size_t fields_length, size_t field_count, const uint8_t *body, size_t body_length,
                      long timeout_ms, const char *certificate, int certificate_is_p12,
                      const char *certificate_password, int guard_addresses, void *context) {
    const char *host, *authority, *path;
    size_t host_length, authority_length, path_length;
    int port;
    if (split_url(url, &host, &host_length, &port, &authority, &authority_length, &path, &path_length) != 0) {
        // User information, an IPv6 zone and the like: libcurl knows what to make of them.
        herald_h2_result result = {.outcome = HERALD_H2_NOT_HTTP2, .message = "a URL for libcurl"};
        engine->completion(context, &result);
        return;
    }
    if (!fields_fit(fields, fields_length, field_count)) {
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
        if (!is_connection_specific(field, name_length)) {
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
            drain_mailbox(engine);
        } else {
            connection_event(events[i].data.ptr, events[i].events);
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
        while (o->connections) connection_close(o->connections, HERALD_H2_SHUTDOWN, message);
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
        resolution_free(job);
    }
    box->done = NULL;
    mailbox_release_locked(box);
    SSL_CTX_free(engine->tls);
    close(engine->epoll);
    nghttp2_session_callbacks_del(engine->callbacks);
    nghttp2_option_del(engine->options);
    free(engine->ca_file);
    free(engine);
}
