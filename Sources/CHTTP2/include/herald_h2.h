// An HTTP/2 client engine over nghttp2 and OpenSSL: one event loop (epoll), TLS connections
// pooled per origin, requests multiplexed as streams. HeraldHTTP sends its https requests
// through it (FCM, OAuth, APNs, Web Push); libcurl keeps the rest (plain http, egress proxies,
// servers without HTTP/2).
//
// Not thread-safe: one thread owns an engine and calls everything but herald_h2_wakeup.
#ifndef HERALD_H2_H
#define HERALD_H2_H

#include <stddef.h>
#include <stdint.h>

/// What one response may bring at most, through this engine or libcurl's path (HeraldHTTP's
/// TransferLoop): a push service answers in a few hundred bytes, and a server that sends more
/// (a Web Push or UnifiedPush endpoint is anyone's) has its request failed.
#define HERALD_MAX_RESPONSE_HEADERS 65536
#define HERALD_MAX_RESPONSE_BODY 1048576

typedef struct herald_h2_engine herald_h2_engine;

typedef struct {
    int max_connections_per_origin;
    int max_connections;
    /// Streams per connection at most (the server's SETTINGS_MAX_CONCURRENT_STREAMS too).
    int max_streams;
    long connect_timeout_ms;
    /// A connection with streams waiting that receives nothing for half of this gets a PING,
    /// and is closed if nothing arrives in the other half. 0: never.
    long stall_timeout_ms;
    /// PEM file of trusted CAs; NULL for the system's.
    const char *ca_file;
} herald_h2_config;

typedef enum {
    HERALD_H2_OK = 0,
    HERALD_H2_CONNECTION = 1,
    HERALD_H2_TIMEOUT = 2,
    HERALD_H2_OTHER = 3,
    /// The server did not offer HTTP/2: send the request another way (nothing was sent).
    HERALD_H2_NOT_HTTP2 = 4,
    HERALD_H2_SHUTDOWN = 5,
    /// Every address the host resolved to that could be tried is one the request may not reach
    /// (`refused_kind`, `refused_address`); nothing was sent.
    HERALD_H2_REFUSED_ADDRESS = 6,
    /// The server broke HTTP/2's rules (its stream was reset, or the connection ended with
    /// nghttp2's GOAWAY) or sent a response past what one may bring: it was reached, and
    /// misbehaved.
    HERALD_H2_SERVER_MISBEHAVED = 7,
} herald_h2_outcome;

typedef struct {
    herald_h2_outcome outcome;
    int status;
    /// "name: value\r\n" lines, as received.
    const uint8_t *headers;
    size_t headers_length;
    const uint8_t *body;
    size_t body_length;
    /// Whether this request opened the connection it was answered on.
    int opened_connection;
    /// Why it failed, when it did.
    const char *message;
    /// For HERALD_H2_REFUSED_ADDRESS: the kind (HERALD_ADDRESS_…) and text of the last address refused.
    int refused_kind;
    const char *refused_address;
} herald_h2_result;

/// Called on the engine's thread, once per request, from herald_h2_submit, herald_h2_run or
/// herald_h2_free.
typedef void (*herald_h2_completion)(void *context, const herald_h2_result *result);

/// NULL on failure, with the reason in `error`.
herald_h2_engine *herald_h2_new(const herald_h2_config *config, herald_h2_completion completion, char *error,
                                size_t error_size);

/// Queues a request to an https URL; its completion comes later. `fields` holds `field_count`
/// header fields as a name, a NUL, the value and a NUL each (names in any case; the caller has
/// checked them). `certificate` (a PEM or PKCS#12 file, `certificate_is_p12`) authenticates the
/// client, over connections of its own. With `guard_addresses`, only public addresses are
/// connected to (herald_address.h), over connections of their own. Everything is copied.
void herald_h2_submit(herald_h2_engine *engine, const char *url, const char *method, const char *fields,
                      size_t fields_length, size_t field_count, const uint8_t *body, size_t body_length,
                      long timeout_ms, const char *certificate, int certificate_is_p12,
                      const char *certificate_password, int guard_addresses, void *context);

/// Waits up to `timeout_ms` for something to do, does it, and returns.
void herald_h2_run(herald_h2_engine *engine, int timeout_ms);

/// Makes a herald_h2_run that waits (or the next one) return. Any thread.
void herald_h2_wakeup(herald_h2_engine *engine);

/// Fails every request with HERALD_H2_SHUTDOWN and frees the engine.
void herald_h2_free(herald_h2_engine *engine);

#endif
