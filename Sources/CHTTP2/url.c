// Splitting a request's URL and checking its header fields, before the engine takes it.
#include "h2_internal.h"

/// Splits an https URL into its host, port, authority and path (with the query; without the
/// fragment). Returns 0, or -1 for a URL this engine does not take.
int h2_split_url(const char *url, const char **host, size_t *host_length, int *port, const char **authority,
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
int h2_fields_fit(const char *fields, size_t length, size_t count) {
    size_t at = 0;
    for (size_t i = 0; i < 2 * count; i++) {
        const char *end = at < length ? memchr(fields + at, '\0', length - at) : NULL;
        if (!end) return 0;
        at = (size_t)(end - fields) + 1;
    }
    return 1;
}

int h2_is_connection_specific(const char *name, size_t length) {
    static const char *const names[] = {"host", "connection", "keep-alive", "proxy-connection", "transfer-encoding",
                                        "upgrade", "te", "expect"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == length && strncasecmp(names[i], name, length) == 0) return 1;
    return 0;
}
