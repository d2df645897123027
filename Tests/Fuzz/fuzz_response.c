// libFuzzer target: the HTTP/2 engine's response path. A client session made as the engine makes
// its own (its callbacks, limits and SETTINGS) has three requests in flight, and
// the fuzzer's bytes are what the server sends back, frames and all. Each request ends at most
// once; an answer counted as received has a status of 200 to 599 and stays within the engine's
// limits. Before fuzzing, fixed exchanges check what the engine makes of a malformed :status and
// of trailers. Built and run by scripts/fuzz.sh.
#include "../../Sources/CHTTP2/h2_internal.h"

#define REQUESTS 3

static herald_h2_engine engine;
static int completed[REQUESTS];
/// What became of each request: its outcome, status and message, and its header fields.
static struct {
    herald_h2_outcome outcome;
    int status;
    char message[160];
    char headers[256];
} results[REQUESTS];

static void on_complete(void *context, const herald_h2_result *result) {
    int index = (int)(intptr_t)context;
    if (++completed[index] > 1) abort();  // a request completes once
    if (result->outcome == HERALD_H2_OK && (result->status < 200 || result->status > 599)) abort();
    if (result->headers_length > HERALD_MAX_RESPONSE_HEADERS || result->body_length > HERALD_MAX_RESPONSE_BODY) abort();
    // Everything handed over is readable.
    volatile uint8_t sink = 0;
    if (result->headers_length) sink ^= result->headers[result->headers_length - 1];
    if (result->body_length) sink ^= result->body[result->body_length - 1];
    (void)sink;
    results[index].outcome = result->outcome;
    results[index].status = result->status;
    snprintf(results[index].message, sizeof results[index].message, "%s", result->message);
    size_t length = result->headers_length < 255 ? result->headers_length : 255;
    if (length) memcpy(results[index].headers, result->headers, length);
    results[index].headers[length] = '\0';
}

static request *new_request(int index) {
    static const char *const names[] = {":method", ":scheme", ":authority", ":path"};
    static const char *const values[] = {"POST", "https", "push.example", "/send"};
    request *r = calloc(1, sizeof(request) + 4 * sizeof(nghttp2_nv));
    if (!r) abort();
    nghttp2_nv *nv = (nghttp2_nv *)(r + 1);
    for (int i = 0; i < 4; i++) {
        nv[i] = (nghttp2_nv){(uint8_t *)names[i], (uint8_t *)values[i], strlen(names[i]), strlen(values[i]),
                             NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE};
    }
    r->fields = nv;
    r->field_count = 4;
    r->body = (const uint8_t *)"{}";
    r->body_length = 2;
    r->context = (void *)(intptr_t)index;
    return r;
}

/// Sends three requests on a fresh session, feeds it `data` as the server's bytes, and ends every
/// request still open as a closed connection would.
static void exchange(const uint8_t *data, size_t size) {
    if (!engine.callbacks) {
        engine.config.max_streams = 100;
        engine.up = h2_engine_upward;
        engine.completion = on_complete;
        if (h2_session_configure(&engine) != 0) abort();
    }
    engine.scheduled = NULL;
    engine.dirty = NULL;
    origin o = {0};
    connection c = {0};
    c.engine = &engine;
    c.origin = &o;
    c.fd = -1;
    c.state = (connection_state){.phase = PHASE_OPEN};
    memset(completed, 0, sizeof completed);
    memset(results, 0, sizeof results);
    if (h2_session_open(&c) != 0) abort();
    for (int i = 0; i < REQUESTS; i++) {
        engine.outstanding++;
        if (h2_start_stream(&c, new_request(i)) != 0) abort();
    }
    const uint8_t *out;
    while (nghttp2_session_mem_send(c.session, &out) > 0) {
    }
    nghttp2_session_mem_recv(c.session, data, size);
    while (nghttp2_session_mem_send(c.session, &out) > 0) {
    }
    nghttp2_session_del(c.session);
    while (c.streams.first) {
        request *r = c.streams.first;
        list_remove(&c.streams, r);
        engine.up.complete(&engine, r, HERALD_H2_CONNECTION, "the connection closed");
    }
    while (o.waiting.first) {  // refused, to be sent again
        request *r = o.waiting.first;
        list_remove(&o.waiting, r);
        engine.up.complete(&engine, r, HERALD_H2_CONNECTION, "the connection closed");
    }
    for (int i = 0; i < REQUESTS; i++)
        if (completed[i] != 1) abort();
    if (engine.outstanding != 0) abort();
}

// Frames a server sends: the header of each (length, type, flags, stream), then its payload.
static size_t frame(uint8_t *into, uint8_t type, uint8_t flags, uint32_t stream, const uint8_t *payload,
                    size_t length) {
    uint8_t header[9] = {(uint8_t)(length >> 16), (uint8_t)(length >> 8), (uint8_t)length, type, flags,
                         (uint8_t)(stream >> 24), (uint8_t)(stream >> 16), (uint8_t)(stream >> 8), (uint8_t)stream};
    memcpy(into, header, 9);
    if (length) memcpy(into + 9, payload, length);
    return 9 + length;
}

/// A literal header field without indexing, new name (RFC 7541 6.2.2), short strings.
static size_t literal(uint8_t *into, const char *name, const char *value) {
    size_t n = 0, name_length = strlen(name), value_length = strlen(value);
    into[n++] = 0x00;
    into[n++] = (uint8_t)name_length;
    memcpy(into + n, name, name_length);
    n += name_length;
    into[n++] = (uint8_t)value_length;
    memcpy(into + n, value, value_length);
    return n + value_length;
}

/// The server's SETTINGS, then HEADERS with :status `status` (and END_STREAM) on stream 1, and,
/// when `trailer` is set, HEADERS of 200 without END_STREAM followed by a trailer block.
static size_t answer(uint8_t *into, const char *status, int trailer) {
    size_t n = frame(into, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
    uint8_t block[128];
    size_t length = literal(block, ":status", status);
    length += literal(block + length, "x-answer", "kept");
    n += frame(into + n, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | (trailer ? 0 : NGHTTP2_FLAG_END_STREAM), 1,
               block, length);
    if (trailer) {
        length = literal(block, "x-trailer", "dropped");
        n += frame(into + n, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 1, block, length);
    }
    return n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    uint8_t bytes[512];
    // A status of four digits is no answer (nghttp2 resets the stream; on_header would refuse it
    // too), never read as its first three digits.
    exchange(bytes, answer(bytes, "2000", 0));
    if (results[0].outcome == HERALD_H2_OK) {
        fprintf(stderr, "a :status of 2000 ended as outcome %d, status %d: %s\n", results[0].outcome, results[0].status, results[0].message);
        abort();
    }
    // Trailers are not mixed into the response's header fields.
    exchange(bytes, answer(bytes, "200", 1));
    if (results[0].outcome != HERALD_H2_OK || results[0].status != 200 || !strstr(results[0].headers, "x-answer") ||
        strstr(results[0].headers, "x-trailer")) {
        fprintf(stderr, "an answer with trailers ended as outcome %d, status %d, headers %s\n", results[0].outcome,
                results[0].status, results[0].headers);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    exchange(data, size);
    return 0;
}
