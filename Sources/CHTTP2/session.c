// A connection's nghttp2 session: the callbacks that turn frames into responses (user_data is
// the connection), the limits a server is held to, and the streams requests go out on.
#include "h2_internal.h"

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

int h2_start_stream(connection *c, request *r) {
    nghttp2_data_provider provider = {.source.ptr = r, .read_callback = send_body};
    r->body_sent = 0;
    int32_t id = nghttp2_submit_request(c->session, NULL, r->fields, r->field_count,
                                        r->body_length ? &provider : NULL, r);
    if (id < 0) return id;
    r->stream_id = id;
    r->connection = c;
    list_append(&c->streams, r);
    if (c->engine->up.connection_on(c, EVENT_STREAM_STARTED, NULL) == ACTION_REPORT_OPENED) r->opened_connection = 1;
    c->engine->up.mark_dirty(c);
    return 0;
}

size_t h2_stream_limit(connection *c) {
    uint32_t server = nghttp2_session_get_remote_settings(c->session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    uint32_t ours = (uint32_t)c->engine->config.max_streams;
    return server < ours ? server : ours;
}

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
    if (r->headers.length + name_length + value_length + 4 > HERALD_MAX_RESPONSE_HEADERS) {
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
    if (r->response.length + length > HERALD_MAX_RESPONSE_BODY) {
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
    int written = snprintf(c->protocol_error, sizeof c->protocol_error, "%s%s",
                           nghttp2_http2_strerror(goaway->error_code), goaway->opaque_data_len ? ": " : "");
    size_t length = written < 0 ? 0 : (size_t)written;
    if (length > sizeof c->protocol_error - 1) length = sizeof c->protocol_error - 1;
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
    if (frame->hd.type == NGHTTP2_GOAWAY) c->engine->up.connection_on(c, EVENT_NO_MORE_STREAMS, NULL);
    // A GOAWAY's refused streams, or SETTINGS with another stream limit: the queue may move.
    if (frame->hd.type == NGHTTP2_GOAWAY || frame->hd.type == NGHTTP2_SETTINGS)
        c->engine->up.schedule(c->engine, c->origin);
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
    engine->up.schedule(engine, o);
    if (r->reset_reason) {
        char message[256];
        snprintf(message, sizeof message, r->reset_detail ? "%s (%s)" : "%s", r->reset_reason, r->reset_detail);
        engine->up.complete(engine, r, HERALD_H2_SERVER_MISBEHAVED, message);
    } else if (error_code == NGHTTP2_NO_ERROR && r->status >= 200 && r->ended) {
        engine->up.complete(engine, r, HERALD_H2_OK, NULL);
    } else if (error_code == NGHTTP2_REFUSED_STREAM && r->status == 0) {
        // Never processed: send it again, first in line, on another stream.
        if (++r->refusals >= MAX_REFUSALS) {
            char message[160];
            snprintf(message, sizeof message,
                     "the server refused the request %d times (it ended its connections before taking it); it was "
                     "never processed",
                     r->refusals);
            engine->up.complete(engine, r, HERALD_H2_CONNECTION, message);
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
        engine->up.complete(engine, r, HERALD_H2_CONNECTION, message);
    }
    return 0;
}

/// The callbacks and options every session of the engine's is made with.
int h2_session_configure(herald_h2_engine *engine) {
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
    //   (HERALD_MAX_RESPONSE_HEADERS) fit in five frames of the default 16 KiB; eight leave room for a
    //   server that writes smaller ones, and stop one that never ends its header block.
    nghttp2_option_set_max_continuations(engine->options, 8);
    // - The table our requests' header fields are compressed against: the server may ask for
    //   less. 4 KiB holds the repeated ones (a 1,024-character bearer token among them).
    nghttp2_option_set_max_deflate_dynamic_table_size(engine->options, 4096);
    return 0;
}

/// A connection's session, with the SETTINGS it opens with.
int h2_session_open(connection *c) {
    if (nghttp2_session_client_new2(&c->session, c->engine->callbacks, c, c->engine->options) != 0) return -1;
    // No server push. The table the server's header fields are compressed against stays at
    // HTTP/2's default of 4 KiB: a response needs little, and a larger one would let a server
    // make every one-byte reference to it cost more (an HPACK bomb; HERALD_MAX_RESPONSE_HEADERS stops
    // the response, whatever the table). And the limit on a response's header fields, which
    // on_header enforces.
    nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                         {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 4096},
                                         {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, HERALD_MAX_RESPONSE_HEADERS}};
    return nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, 3);
}
