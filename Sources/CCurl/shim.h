#include <curl/curl.h>

// Swift cannot call C variadic functions, so each curl_*_setopt/getinfo use gets a typed wrapper.
static inline CURLcode herald_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode herald_easy_setopt_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode herald_easy_setopt_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode herald_easy_setopt_offset(CURL *easy, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode herald_easy_setopt_write_callback(CURL *easy, CURLoption option,
                                                         size_t (*callback)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(easy, option, callback);
}
static inline CURLcode herald_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}
static inline CURLcode herald_easy_getinfo_pointer(CURL *easy, CURLINFO info, void **value) {
    return curl_easy_getinfo(easy, info, value);
}
static inline CURLMcode herald_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

#include <openssl/ssl.h>

// Lets OpenSSL read many TLS records per recv(). HTTP/2 responses arrive as many small
// records, and without read-ahead each costs two system calls (header, then body).
static inline CURLcode herald_ssl_context_read_ahead(CURL *easy, void *ssl_context, void *user) {
    (void)easy;
    (void)user;
    SSL_CTX_set_read_ahead((SSL_CTX *)ssl_context, 1);
    return CURLE_OK;
}
static inline CURLcode herald_easy_enable_ssl_read_ahead(CURL *easy) {
    return curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, herald_ssl_context_read_ahead);
}

// The libcurl actually loaded (not the one compiled against): its version number and text.
static inline unsigned int herald_curl_version_number(void) { return curl_version_info(CURLVERSION_NOW)->version_num; }
static inline const char *herald_curl_version_text(void) { return curl_version_info(CURLVERSION_NOW)->version; }

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

// The sockets of one multi handle, so that its loop can cork them around a curl_multi_perform.
// libcurl writes each HTTP/2 stream's frames with a send() of their own; corked, the kernel
// coalesces a whole pass into full segments, which the server then reads in one go.
#define HERALD_CORK_CAPACITY 256
typedef struct {
    int count;
    curl_socket_t sockets[HERALD_CORK_CAPACITY];
} herald_socket_set;

static inline int herald_socket_set_opened(void *set_pointer, curl_socket_t socket, curlsocktype purpose) {
    herald_socket_set *set = (herald_socket_set *)set_pointer;
    // Beyond capacity a socket is simply never corked.
    if (purpose == CURLSOCKTYPE_IPCXN && set->count < HERALD_CORK_CAPACITY) set->sockets[set->count++] = socket;
    return CURL_SOCKOPT_OK;
}
static inline int herald_socket_set_closing(void *set_pointer, curl_socket_t socket) {
    herald_socket_set *set = (herald_socket_set *)set_pointer;
    for (int i = 0; i < set->count; i++) {
        if (set->sockets[i] == socket) {
            set->sockets[i] = set->sockets[--set->count];
            break;
        }
    }
    return close(socket);
}
static inline void herald_socket_set_cork(herald_socket_set *set, int cork) {
    for (int i = 0; i < set->count; i++) setsockopt(set->sockets[i], IPPROTO_TCP, TCP_CORK, &cork, sizeof cork);
}
static inline void herald_easy_track_sockets(CURL *easy, herald_socket_set *set) {
    curl_easy_setopt(easy, CURLOPT_SOCKOPTFUNCTION, herald_socket_set_opened);
    curl_easy_setopt(easy, CURLOPT_SOCKOPTDATA, set);
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, herald_socket_set_closing);
    curl_easy_setopt(easy, CURLOPT_CLOSESOCKETDATA, set);
}
