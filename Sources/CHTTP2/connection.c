// Connections: resolved, connected, handshaken, then reading and writing frames; closed with
// their streams' outcome. What happens to a connection goes to its state (connection_state.c)
// through h2_connection_on, which carries out the action the state answers. Callers go on using
// the connection after the events that never close it (connection_state.c names them).
#include "h2_internal.h"

static void connection_connect(connection *c);
static void connection_start_tls(connection *c);

/// Sets the events the loop waits for on a connection; 0 once they are watched. A connection
/// the kernel will not watch (out of memory, or the user's fs.epoll.max_user_watches reached)
/// would wait for nothing until its requests' timeouts, so it fails at once instead.
static int watch(connection *c, uint32_t events) {
    if (c->fd < 0 || c->events == events) return 0;
    struct epoll_event event = {.events = events, .data.ptr = c};
    if (epoll_ctl(c->engine->epoll, c->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &event) != 0) {
        char message[160];
        snprintf(message, sizeof message, "could not watch the connection to %s: %s", c->address, strerror(errno));
        h2_connection_on(c, EVENT_FAILED, message);
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
void h2_connection_close(connection *c, herald_h2_outcome outcome, const char *message) {
    herald_h2_engine *engine = c->engine;
    origin *o = c->origin;
    if (c->state.phase == PHASE_CLOSED) return;
    h2_connection_step(&c->state, &(connection_event){.kind = EVENT_CLOSED});
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
        engine->up.complete(engine, r, outcome, message);
    }
    if (outcome == HERALD_H2_NOT_HTTP2) engine->up.fail_waiting(engine, o, outcome, message, NULL);
    engine->up.schedule(engine, o);
}

/// A connection that could not be made: the origin's waiting requests fail with its reason if
/// no other connection is open or on its way (they would wait for nothing). If an address was
/// refused, that is the reason (a name may resolve to a public address and a private one: then
/// the public one was tried).
static void fail_opening(connection *c, const char *message) {
    origin *o = c->origin;
    herald_h2_engine *engine = c->engine;
    h2_connection_close(c, HERALD_H2_CONNECTION, message);  // freed at the end of the pass, not now
    if (o->connections) {
        o->reopen_after = now_ms() + REOPEN_PAUSE_MS;
        return;
    }
    if (c->refused_kind != HERALD_ADDRESS_PUBLIC) {
        engine->up.fail_waiting(engine, o, HERALD_H2_REFUSED_ADDRESS, message, c);
    } else {
        engine->up.fail_waiting(engine, o, HERALD_H2_CONNECTION, message, NULL);
    }
}

static void connection_ready(connection *c) {
    const unsigned char *protocol = NULL;
    unsigned int length = 0;
    SSL_get0_alpn_selected(c->ssl, &protocol, &length);
    if (length != 2 || memcmp(protocol, "h2", 2) != 0) {
        h2_connection_close(c, HERALD_H2_NOT_HTTP2, "the server does not offer HTTP/2");
        return;
    }
    if (h2_session_open(c) != 0) {
        h2_connection_on(c, EVENT_FAILED, "out of memory");
        return;
    }
    h2_connection_on(c, EVENT_OPENED, NULL);
    if (watch(c, EPOLLIN) != 0) return;
    c->engine->up.mark_dirty(c);
    c->engine->up.schedule(c->engine, c->origin);
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
        h2_tls_failure(message, sizeof message, what, c->ssl);
        h2_connection_on(c, EVENT_FAILED, message);
    }
    }
}

static int is_ip_literal(const char *host) {
    unsigned char address[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, address) == 1 || inet_pton(AF_INET6, host, address) == 1;
}

/// Gives up the address being connected to and connects to the name's next one (or fails).
static void connection_next_address(connection *c) {
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
        // Another of the name's addresses may answer.
        char message[256];
        snprintf(message, sizeof message, "could not connect to %s: %s", c->address, strerror(error));
        h2_connection_on(c, EVENT_CONNECT_FAILED, message);
        return;
    }
    h2_connection_on(c, EVENT_CONNECTED, NULL);
}

static void connection_start_tls(connection *c) {
    origin *o = c->origin;
    c->ssl = o->tls ? SSL_new(o->tls) : NULL;
    if (!c->ssl) {
        h2_connection_on(c, EVENT_FAILED, "out of memory");
        return;
    }
    SSL_set_fd(c->ssl, c->fd);
    SSL_set_connect_state(c->ssl);
    // The certificate must name the URL's host (or IP); without that check, there is no TLS.
    int named = is_ip_literal(o->host)
                    ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), o->host)
                    : SSL_set_tlsext_host_name(c->ssl, o->host) == 1 && SSL_set1_host(c->ssl, o->host) == 1;
    if (!named) {
        h2_connection_on(c, EVENT_FAILED, "could not set the host name to verify");
        return;
    }
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
            h2_connection_on(c, EVENT_CONNECTING, NULL);
            watch(c, EPOLLOUT);
            return;
        }
        snprintf(message, sizeof message, "could not connect to %s: %s", c->address, strerror(errno));
        close(fd);
    }
    h2_connection_on(c, EVENT_FAILED, message);
}

/// What the connection's thread prepared came back: the origin takes a new certificate context,
/// and the connection connects, or fails with what went wrong.
void h2_connection_prepared(resolution *job) {
    connection *c = job->connection;
    origin *o = c->origin;
    c->resolution = NULL;
    if (job->reading_for) o->reading = 0;
    if (job->tls) {
        if (o->tls) SSL_CTX_free(o->tls);  // its connections keep their own reference
        o->tls = job->tls;
        job->tls = NULL;
        o->certificate_modified = job->modified;
    }
    if (job->tls_error[0]) {
        h2_connection_on(c, EVENT_FAILED, job->tls_error);
    } else if (job->error) {
        char message[256];
        snprintf(message, sizeof message, "could not resolve %s: %s", o->host, gai_strerror(job->error));
        h2_connection_on(c, EVENT_FAILED, message);
    } else {
        c->addresses = c->next_address = job->addresses;
        job->addresses = NULL;
        connection_connect(c);
    }
    h2_resolution_free(job);
}

/// Opens a connection to the origin. Returns 0 if it failed at once (and was closed).
int h2_connection_open(herald_h2_engine *engine, origin *o) {
    connection *c = calloc(1, sizeof *c);
    if (!c) {
        engine->up.fail_waiting(engine, o, HERALD_H2_OTHER, "out of memory", NULL);
        return 0;
    }
    c->engine = engine;
    c->origin = o;
    c->fd = -1;
    c->state = h2_connection_state_new(now_ms(), engine->config.connect_timeout_ms);
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
    int read_certificate = o->certificate && !o->reading;
    if (o->certificate && !read_certificate && !o->tls) {
        if (addresses) freeaddrinfo(addresses);
        char message[300];
        snprintf(message, sizeof message,
                 "the client certificate %s is still being read (an earlier read has not come back)", o->certificate);
        h2_connection_on(c, EVENT_FAILED, message);
        return 0;
    }
    if (numeric && !read_certificate) {
        c->addresses = c->next_address = addresses;
        connection_connect(c);
        return c->state.phase != PHASE_CLOSED;
    }
    if (addresses) freeaddrinfo(addresses);
    resolution *job = calloc(1, sizeof *job);
    if (!job || !(job->host = strdup(o->host)) ||
        (read_certificate && (!(job->certificate = strdup(o->certificate)) ||
                            (o->password && !(job->password = strdup(o->password))) ||
                            (engine->ca_file && !(job->ca_file = strdup(engine->ca_file)))))) {
        if (job) h2_resolution_free(job);
        h2_connection_on(c, EVENT_FAILED, "out of memory");
        return 0;
    }
    memcpy(job->service, service, sizeof service);
    job->numeric = numeric;
    job->certificate_is_p12 = o->certificate_is_p12;
    job->has_context = o->tls != NULL;
    job->known_modified = o->certificate_modified;
    if (read_certificate) {
        job->reading_for = o;
        o->reading = 1;
    }
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
    if (pthread_create(&thread, &attributes, h2_prepare, job) != 0) {
        pthread_mutex_lock(&engine->mailbox->lock);
        engine->mailbox->references--;
        pthread_mutex_unlock(&engine->mailbox->lock);
        c->resolution = NULL;
        if (job->reading_for) o->reading = 0;
        h2_resolution_free(job);
        h2_connection_on(c, EVENT_FAILED, "could not start a thread to resolve the host name and read the certificate");
    }
    pthread_attr_destroy(&attributes);
    return c->state.phase != PHASE_CLOSED;
}

/// Sends what the connection's session has to send, in as few TLS writes as it allows.
void h2_connection_flush(connection *c) {
    for (;;) {
        while (c->output.length < 256 * 1024) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(c->session, &data);
            if (n < 0) {
                char message[128];
                snprintf(message, sizeof message, "HTTP/2 error: %s", nghttp2_strerror((int)n));
                h2_connection_on(c, EVENT_FAILED, message);
                return;
            }
            if (n == 0) break;
            if (buffer_append(&c->output, data, (size_t)n)) {
                h2_connection_on(c, EVENT_FAILED, "out of memory");
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
            h2_tls_failure(message, sizeof message, what, NULL);
            h2_connection_on(c, EVENT_FAILED, message);
            return;
        }
        c->output.length = c->output_sent = 0;
    }
    if (watch(c, EPOLLIN) != 0) return;
    h2_connection_on(c, EVENT_SENT, NULL);
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
            h2_connection_on(c, EVENT_RECEIVED, NULL);
            ssize_t used = nghttp2_session_mem_recv(c->session, input, (size_t)n);
            if (used < 0) {  // the server's bytes broke HTTP/2 past what nghttp2 answers with a GOAWAY
                char message[128];
                snprintf(message, sizeof message, "HTTP/2 error from %s: %s", c->address, nghttp2_strerror((int)used));
                h2_connection_close(c, HERALD_H2_SERVER_MISBEHAVED, message);
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
            h2_tls_failure(message, sizeof message, what, NULL);
        }
        h2_connection_on(c, EVENT_FAILED, message);
        return;
    }
    c->engine->up.mark_dirty(c);  // acknowledgements, window updates
}

void h2_connection_event(connection *c, uint32_t events) {
    switch (c->state.phase) {
    case PHASE_RESOLVING:
    case PHASE_CLOSED:
        return;
    case PHASE_CONNECTING:
        connection_connected(c);
        return;
    case PHASE_HANDSHAKING:
        connection_handshake(c);
        return;
    case PHASE_OPEN:
    case PHASE_DRAINING:
        if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) connection_read(c);
        if (c->state.phase != PHASE_CLOSED && (events & EPOLLOUT)) c->engine->up.mark_dirty(c);
        return;
    }
}

connection_action h2_connection_on(connection *c, connection_event_kind kind, const char *message) {
    herald_h2_engine *engine = c->engine;
    connection_event event = {
        .kind = kind,
        .now = now_ms(),
        .streams = c->streams.count,
        .more_addresses = c->next_address != NULL,
        .stall_ms = engine->config.stall_timeout_ms,
        .session_ended = kind == EVENT_SENT && c->session && !nghttp2_session_want_read(c->session) &&
                         !nghttp2_session_want_write(c->session),
    };
    connection_action action = h2_connection_step(&c->state, &event);
    char text[256];
    switch (action) {
    case ACTION_NONE:
    case ACTION_REPORT_OPENED:  // the caller's: it knows the stream
        break;
    case ACTION_HANDSHAKE:
        connection_start_tls(c);
        break;
    case ACTION_NEXT_ADDRESS:
        connection_next_address(c);
        break;
    case ACTION_PING:
        nghttp2_submit_ping(c->session, NGHTTP2_FLAG_NONE, NULL);
        c->engine->up.mark_dirty(c);
        break;
    case ACTION_FAIL_OPENING:
        fail_opening(c, message);
        break;
    case ACTION_OPEN_TIMED_OUT:
        snprintf(text, sizeof text, "connecting to %s timed out after %ld ms", c->address,
                 engine->config.connect_timeout_ms);
        fail_opening(c, text);
        break;
    case ACTION_CLOSE:
        h2_connection_close(c, HERALD_H2_CONNECTION, message);
        break;
    case ACTION_CLOSE_ENDED:
        h2_connection_close(c, HERALD_H2_CONNECTION, "the server ended the connection");
        break;
    case ACTION_CLOSE_SESSION_ENDED:
        // nghttp2's own GOAWAY ended it: the server broke HTTP/2's rules.
        snprintf(text, sizeof text, "HTTP/2 error from %s: %s", c->address,
                 c->protocol_error[0] ? c->protocol_error : "the session ended");
        h2_connection_close(c, c->protocol_error[0] ? HERALD_H2_SERVER_MISBEHAVED : HERALD_H2_CONNECTION, text);
        break;
    case ACTION_CLOSE_STALLED:
        snprintf(text, sizeof text,
                 "the connection stopped answering (nothing received for %ld ms, not even an answer to a PING) and "
                 "was closed; the request may be sent again",
                 engine->config.stall_timeout_ms);
        h2_connection_close(c, HERALD_H2_CONNECTION, text);
        break;
    }
    return action;
}
