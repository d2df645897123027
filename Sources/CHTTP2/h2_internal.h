// The HTTP/2 engine's own types and functions, shared by its files (the API is herald_h2.h).
#ifndef HERALD_H2_INTERNAL_H
#define HERALD_H2_INTERNAL_H
#define _GNU_SOURCE
#include "herald_h2.h"
#include <herald_address.h>

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
/// Bytes read from one connection per event before the others get their turn.
#define READ_BUDGET (1024 * 1024)
/// After a connection could not be opened while the origin has others, the next attempt waits
/// this long (the others carry its requests meanwhile).
#define REOPEN_PAUSE_MS 1000

typedef struct buffer {
    uint8_t *bytes;
    size_t length, capacity;
} buffer;

static inline int buffer_append(buffer *b, const void *bytes, size_t length) {
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

static inline void list_append(list *l, request *r) {
    r->next = NULL;
    r->previous = l->last;
    if (l->last) l->last->next = r; else l->first = r;
    l->last = r;
    l->count++;
}

static inline void list_prepend(list *l, request *r) {
    r->previous = NULL;
    r->next = l->first;
    if (l->first) l->first->previous = r; else l->last = r;
    l->first = r;
    l->count++;
}

static inline void list_remove(list *l, request *r) {
    if (r->previous) r->previous->next = r->next; else l->first = r->next;
    if (r->next) r->next->previous = r->previous; else l->last = r->previous;
    r->next = r->previous = NULL;
    l->count--;
}

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
    // The certificate to read, if this job reads it (a copy of the origin's file, password and
    // format, and the CA file), and the file's modification time when the origin's context was
    // made, if it has one.
    char *certificate, *password, *ca_file;
    int certificate_is_p12, has_context;
    struct timespec known_modified;
    // The origin whose certificate it reads (see origin.reading).
    struct origin *reading_for;
    // What reading it gave: a new context and the file's modification time, or why not.
    SSL_CTX *tls;
    struct timespec modified;
    char tls_error[512];
} resolution;

/// A connection's life, as one value. Events (what happened) move it on, and each returns what the
/// connection must do next: h2_connection_step (connection_state.c) holds every transition and
/// touches no socket, so that a fuzz target can drive it through any order of events; the
/// connection's code (connection.c) does the I/O and carries out the actions.
typedef enum connection_phase {
    PHASE_RESOLVING,    // its addresses (and client certificate) are prepared on a thread
    PHASE_CONNECTING,   // a TCP connection to one of its host's addresses is on its way
    PHASE_HANDSHAKING,  // TLS
    PHASE_OPEN,         // streams may start
    PHASE_DRAINING,     // a GOAWAY came, or stream ids ran out: its streams finish, none starts
    PHASE_CLOSED,
} connection_phase;

typedef struct connection_state {
    connection_phase phase;
    /// Opening: when it gives up; and, connecting, when the address tried gives way to the next
    /// (a name with an IPv6 address whose path drops packets still reaches its IPv4 one).
    int64_t open_deadline, attempt_deadline;
    long attempt_ms;
    /// Open: since when it has waited without hearing from the server (the last bytes received,
    /// or the first stream after it was idle), and when its unanswered PING went (0: none).
    int64_t quiet_since, pinged;
    /// A stream has started on it (the first is reported as having opened it).
    int carried_a_stream;
} connection_state;

typedef enum connection_event_kind {
    EVENT_CONNECTING,        // a socket is connecting to one of the addresses
    EVENT_CONNECTED,         // it connected
    EVENT_CONNECT_FAILED,    // it did not (refused, unreachable)
    EVENT_OPENED,            // TLS and HTTP/2 are up
    EVENT_STREAM_STARTED,    // a request went out on a stream
    EVENT_RECEIVED,          // bytes came from the server
    EVENT_NO_MORE_STREAMS,   // a GOAWAY came, or stream ids ran out
    EVENT_SENT,              // everything to send was sent
    EVENT_TICK,              // the sweep: time passes
    EVENT_FAILED,            // something broke (I/O, TLS, memory, the kernel's watch)
    EVENT_CLOSED,            // it was closed
} connection_event_kind;

typedef struct connection_event {
    connection_event_kind kind;
    int64_t now;
    /// Streams the connection carries after the event.
    size_t streams;
    /// EVENT_CONNECT_FAILED, EVENT_TICK: whether the name has addresses left to try.
    int more_addresses;
    /// EVENT_SENT: whether its HTTP/2 session has ended (nothing more to send or receive).
    int session_ended;
    /// EVENT_TICK: the stall limit (0: none).
    long stall_ms;
} connection_event;

typedef enum connection_action {
    ACTION_NONE,
    ACTION_HANDSHAKE,         // start TLS
    ACTION_NEXT_ADDRESS,      // give up this address, connect to the next
    ACTION_REPORT_OPENED,     // the stream just started is the one that opened the connection
    ACTION_PING,
    ACTION_FAIL_OPENING,      // close it; with no other connection, its origin's waiting requests fail
    ACTION_OPEN_TIMED_OUT,    // the same, for its opening's deadline
    ACTION_CLOSE,             // close it; its streams fail
    ACTION_CLOSE_ENDED,       // close it: the server ended it, and its last stream is done
    ACTION_CLOSE_SESSION_ENDED,  // close it: its HTTP/2 session ended (nghttp2's GOAWAY)
    ACTION_CLOSE_STALLED,     // close it: nothing heard for the stall limit, not even a PING's answer
} connection_action;

static inline int h2_phase_is_opening(connection_phase phase) { return phase < PHASE_OPEN; }
static inline int h2_phase_is_open(connection_phase phase) { return phase == PHASE_OPEN || phase == PHASE_DRAINING; }

typedef struct connection {
    struct connection *next;  // in its origin's connections, then in the engine's dead ones
    struct herald_h2_engine *engine;
    struct origin *origin;  // NULL once closed
    connection_state state;
    int fd;
    SSL *ssl;
    nghttp2_session *session;
    resolution *resolution;
    struct addrinfo *addresses, *next_address;
    list streams;
    uint32_t events;  // what epoll watches for
    /// In the engine's list of connections with frames to send (next_dirty links it).
    int dirty;
    struct connection *next_dirty;
    buffer output;
    size_t output_sent;
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
    /// A read of its certificate is out on a thread. One at a time: a file that blocks its
    /// reader (a FIFO, a hung network mount) then holds one thread, not one per connection
    /// attempt; and the origin is kept until the read comes back.
    int reading;
    list waiting;
    connection *connections;
    int connection_count;
    int64_t reopen_after;
    int scheduled;
    struct origin *next_scheduled;
} origin;

/// How the lower files report to the ones above them, the only way they reach up, so that the
/// files form layers: herald_h2.c (the engine) over connection.c (a connection's I/O and state)
/// over session.c (its nghttp2 session) and prepare.c (name resolution and TLS contexts, off the
/// loop). To the engine: a request ended; an origin's waiting requests all failed (with the
/// address refused, if that was why); an origin has requests to place on its connections; a
/// connection has frames to send. To a connection: an event of its session; a preparation done.
/// The engine's table is h2_engine_upward.
typedef struct {
    void (*complete)(struct herald_h2_engine *engine, request *r, herald_h2_outcome outcome, const char *message);
    void (*fail_waiting)(struct herald_h2_engine *engine, origin *o, herald_h2_outcome outcome, const char *message,
                         const connection *refusal);
    void (*schedule)(struct herald_h2_engine *engine, origin *o);
    void (*mark_dirty)(connection *c);
    connection_action (*connection_on)(connection *c, connection_event_kind kind, const char *message);
    void (*prepared)(resolution *job);
} h2_upward;

struct herald_h2_engine {
    h2_upward up;
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

static inline int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

// url.c
int h2_split_url(const char *url, const char **host, size_t *host_length, int *port, const char **authority,
                 size_t *authority_length, const char **path, size_t *path_length);
int h2_fields_fit(const char *fields, size_t length, size_t count);
int h2_is_connection_specific(const char *name, size_t length);
// tls.c
void h2_tls_failure(char *into, size_t size, const char *what, SSL *ssl);
SSL_CTX *h2_tls_context(const char *ca_file, char *error, size_t error_size);
SSL_CTX *h2_client_tls_context(const char *ca_file, const char *file, int is_p12, const char *password,
                               char *error, size_t error_size);
// prepare.c
void h2_resolution_free(resolution *job);
void h2_mailbox_release_locked(mailbox *box);
void *h2_prepare(void *argument);
void h2_drain_mailbox(herald_h2_engine *engine);
// session.c
int h2_start_stream(connection *c, request *r);
size_t h2_stream_limit(connection *c);
int h2_session_configure(herald_h2_engine *engine);
int h2_session_open(connection *c);
// connection_state.c
connection_state h2_connection_state_new(int64_t now, long connect_timeout_ms);
connection_action h2_connection_step(connection_state *state, const connection_event *event);
// connection.c
connection_action h2_connection_on(connection *c, connection_event_kind kind, const char *message);
void h2_connection_close(connection *c, herald_h2_outcome outcome, const char *message);
void h2_connection_prepared(resolution *job);
int h2_connection_open(herald_h2_engine *engine, origin *o);
void h2_connection_flush(connection *c);
void h2_connection_event(connection *c, uint32_t events);
// herald_h2.c
extern const h2_upward h2_engine_upward;

#endif
