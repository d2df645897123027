// libFuzzer target: the HTTP/2 engine's URL splitting (h2_split_url), on any bytes. What it returns
// must lie within the URL, name a host and a port in range, and carry no user information.
// Built and run by scripts/fuzz.sh.
#include "../../Sources/CHTTP2/h2_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *url = malloc(size + 1);
    if (!url) return 0;
    memcpy(url, data, size);
    url[size] = '\0';
    size_t end = strlen(url);
    const char *host, *authority, *path;
    size_t host_length, authority_length, path_length;
    int port;
    if (h2_split_url(url, &host, &host_length, &port, &authority, &authority_length, &path, &path_length) == 0) {
        if (host < url || host + host_length > url + end) abort();
        if (authority < url || authority + authority_length > url + end) abort();
        if (path < url || path + path_length > url + end) abort();
        if (host_length == 0 || port < 1 || port > 65535) abort();
        if (memchr(authority, '@', authority_length) || memchr(host, '%', host_length)) abort();
        if (memchr(path, '#', path_length)) abort();
    }
    free(url);
    return 0;
}
