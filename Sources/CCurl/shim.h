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
