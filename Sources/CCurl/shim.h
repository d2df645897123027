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

#include <arpa/inet.h>
#include <string.h>

// Which addresses a transfer may connect to. A push subscription's endpoint is chosen by a
// browser (or by whoever registers a device), so a request to it must not reach the host's own
// services, its private network or the cloud metadata service. The check is made here, on the
// address libcurl is about to connect to after resolving the name, so that a name that resolves
// to 127.0.0.1 (or is re-resolved to it later) is refused as surely as the literal address.
#define HERALD_ADDRESS_PUBLIC 0
#define HERALD_ADDRESS_LOOPBACK 1
#define HERALD_ADDRESS_PRIVATE 2
#define HERALD_ADDRESS_LINK_LOCAL 3
#define HERALD_ADDRESS_UNSPECIFIED 4
#define HERALD_ADDRESS_SHARED 5
#define HERALD_ADDRESS_MULTICAST 6
#define HERALD_ADDRESS_RESERVED 7

// The kind of an IPv4 address, in host byte order.
static inline int herald_classify_ipv4(uint32_t a) {
    if ((a >> 24) == 127) return HERALD_ADDRESS_LOOPBACK;                    // 127/8
    if ((a >> 24) == 10) return HERALD_ADDRESS_PRIVATE;                      // 10/8
    if ((a >> 20) == 0xAC1) return HERALD_ADDRESS_PRIVATE;                   // 172.16/12
    if ((a >> 16) == 0xC0A8) return HERALD_ADDRESS_PRIVATE;                  // 192.168/16
    if ((a >> 16) == 0xA9FE) return HERALD_ADDRESS_LINK_LOCAL;               // 169.254/16, incl. 169.254.169.254
    if ((a >> 24) == 0) return HERALD_ADDRESS_UNSPECIFIED;                   // 0/8
    if ((a >> 22) == (100u << 2 | 1)) return HERALD_ADDRESS_SHARED;          // 100.64/10, carrier-grade NAT
    if ((a >> 28) == 0xE) return HERALD_ADDRESS_MULTICAST;                   // 224/4
    if ((a >> 28) == 0xF) return HERALD_ADDRESS_RESERVED;                    // 240/4 and 255.255.255.255
    if ((a >> 8) == 0xC00000) return HERALD_ADDRESS_RESERVED;                // 192.0.0/24, protocol assignments
    if ((a >> 17) == (0xC612u >> 1)) return HERALD_ADDRESS_RESERVED;          // 198.18/15, benchmarking
    return HERALD_ADDRESS_PUBLIC;
}

// The kind of an IPv6 address; IPv4-mapped (::ffff:a.b.c.d) ones are judged as their IPv4 address.
static inline int herald_classify_ipv6(const unsigned char b[16]) {
    static const unsigned char zeros[16] = {0};
    if (memcmp(b, zeros, 10) == 0 && b[10] == 0xFF && b[11] == 0xFF) {
        return herald_classify_ipv4((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15]);
    }
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address that a gateway reaches:
    // judged as that address, so 64:ff9b::a9fe:a9fe is the metadata service it is.
    static const unsigned char nat64[12] = {0x00, 0x64, 0xFF, 0x9B};
    if (memcmp(b, nat64, 12) == 0) {
        return herald_classify_ipv4((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15]);
    }
    if (b[0] == 0x20 && b[1] == 0x02) {
        return herald_classify_ipv4((uint32_t)b[2] << 24 | (uint32_t)b[3] << 16 | (uint32_t)b[4] << 8 | b[5]);
    }
    static const unsigned char discard[8] = {0x01, 0x00};
    if (memcmp(b, discard, 8) == 0) return HERALD_ADDRESS_RESERVED;  // 100::/64, discard-only
    if (memcmp(b, zeros, 15) == 0 && b[15] == 1) return HERALD_ADDRESS_LOOPBACK;  // ::1
    if (memcmp(b, zeros, 12) == 0) return HERALD_ADDRESS_UNSPECIFIED;  // ::, and the deprecated ::a.b.c.d
    if ((b[0] & 0xFE) == 0xFC) return HERALD_ADDRESS_PRIVATE;            // fc00::/7, unique local
    if (b[0] == 0xFE && (b[1] & 0xC0) == 0x80) return HERALD_ADDRESS_LINK_LOCAL;  // fe80::/10
    if (b[0] == 0xFE && (b[1] & 0xC0) == 0xC0) return HERALD_ADDRESS_PRIVATE;     // fec0::/10, deprecated site-local
    if (b[0] == 0xFF) return HERALD_ADDRESS_MULTICAST;                            // ff00::/8
    return HERALD_ADDRESS_PUBLIC;
}

// What one transfer may reach, and what it was refused (read after it fails).
typedef struct {
    CURL *easy;
    // The kind of the last address refused (HERALD_ADDRESS_PUBLIC: none), and the address.
    int refused_kind;
    char refused_address[INET6_ADDRSTRLEN];
} herald_address_guard;

// CURLOPT_OPENSOCKETFUNCTION: opens the socket libcurl asks for unless its address is not public.
// Returning CURL_SOCKET_BAD makes libcurl try the name's next address, or fail the transfer with
// CURLE_COULDNT_CONNECT.
static inline curl_socket_t herald_guarded_open_socket(void *guard_pointer, curlsocktype purpose,
                                                       struct curl_sockaddr *address) {
    herald_address_guard *guard = (herald_address_guard *)guard_pointer;
    // A proxy is the operator's own choice, usually on the private network, and the address
    // connected to is then the proxy's, not the destination's (which the proxy resolves): it is
    // exempt, and the proxy is where the egress policy for the destination belongs. libcurl
    // before 8.7 cannot say whether a proxy is used; the check then applies to the proxy too.
    long proxied = 0;
#if LIBCURL_VERSION_NUM >= 0x080700
    if (curl_easy_getinfo(guard->easy, CURLINFO_USED_PROXY, &proxied) != CURLE_OK) proxied = 0;
#endif
    int kind = HERALD_ADDRESS_PUBLIC;
    const void *raw = NULL;
    if (address->family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)&address->addr;
        raw = &v4->sin_addr;
        kind = herald_classify_ipv4(ntohl(v4->sin_addr.s_addr));
    } else if (address->family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&address->addr;
        raw = &v6->sin6_addr;
        kind = herald_classify_ipv6(v6->sin6_addr.s6_addr);
    } else {
        kind = HERALD_ADDRESS_RESERVED;  // Unix sockets and the like are nothing a URL may name.
    }
    if (!proxied && (purpose != CURLSOCKTYPE_IPCXN || kind != HERALD_ADDRESS_PUBLIC)) {
        guard->refused_kind = kind == HERALD_ADDRESS_PUBLIC ? HERALD_ADDRESS_RESERVED : kind;
        guard->refused_address[0] = 0;
        if (raw) inet_ntop(address->family, raw, guard->refused_address, sizeof guard->refused_address);
        return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

static inline void herald_easy_guard_addresses(CURL *easy, herald_address_guard *guard) {
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, herald_guarded_open_socket);
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, guard);
}

// Only http and https, for the request and (were redirects followed) for any redirect.
static inline void herald_easy_restrict_protocols(CURL *easy) {
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
}
