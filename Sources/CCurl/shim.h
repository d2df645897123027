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

#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>

// The kernel's struct tcp_info (linux/tcp.h, which cannot be included beside netinet/tcp.h) as
// far as the byte counters, which glibc's copy stops short of. The kernel only ever appends to it.
typedef struct {
    uint8_t tcpi_state, tcpi_ca_state, tcpi_retransmits, tcpi_probes, tcpi_backoff, tcpi_options;
    uint8_t tcpi_wscales, tcpi_flags;
    uint32_t tcpi_rto, tcpi_ato, tcpi_snd_mss, tcpi_rcv_mss;
    uint32_t tcpi_unacked, tcpi_sacked, tcpi_lost, tcpi_retrans, tcpi_fackets;
    uint32_t tcpi_last_data_sent, tcpi_last_ack_sent, tcpi_last_data_recv, tcpi_last_ack_recv;
    uint32_t tcpi_pmtu, tcpi_rcv_ssthresh, tcpi_rtt, tcpi_rttvar, tcpi_snd_ssthresh, tcpi_snd_cwnd;
    uint32_t tcpi_advmss, tcpi_reordering, tcpi_rcv_rtt, tcpi_rcv_space, tcpi_total_retrans;
    uint64_t tcpi_pacing_rate, tcpi_max_pacing_rate, tcpi_bytes_acked, tcpi_bytes_received;
    uint32_t tcpi_segs_out, tcpi_segs_in, tcpi_notsent_bytes, tcpi_min_rtt;
    uint32_t tcpi_data_segs_in, tcpi_data_segs_out;
    uint64_t tcpi_delivery_rate, tcpi_busy_time, tcpi_rwnd_limited, tcpi_sndbuf_limited;
    uint32_t tcpi_delivered, tcpi_delivered_ce;
    uint64_t tcpi_bytes_sent, tcpi_bytes_retrans;  // Linux 4.19 and later
} herald_tcp_info;

// What the stall check knows of one connection (see herald_socket_set_sample).
typedef struct {
    uint64_t received;          // bytes received, at the last look
    uint64_t written;           // bytes libcurl wrote (sent once, or still queued), at the last look
    int64_t awaiting_since;     // since when (ms) it has had something to answer and got nothing, or 0
    uint64_t written_at_ping;   // `written` when libcurl was asked to PING it, while ping_asked
    int64_t pinged_at;          // when that PING was seen to go out, unanswered since, or 0
    unsigned char ping_asked;   // libcurl was asked to PING it, and nothing has arrived since
    unsigned char http2;        // it carries HTTP/2 (known once a transfer on it ended)
    unsigned char shut;         // shut down as stalled, so that libcurl closes it
    unsigned char named;        // its addresses below are known (read once, when connected)
    long local_port, peer_port;
    char peer_ip[INET6_ADDRSTRLEN];
} herald_socket_health;

// The sockets of one multi handle, so that its loop can cork them around a curl_multi_perform,
// and watch them for stalls. libcurl writes each HTTP/2 stream's frames with a send() of their
// own; corked, the kernel coalesces a whole pass into full segments, which the server then reads
// in one go.
#define HERALD_CORK_CAPACITY 256
typedef struct {
    int count;
    curl_socket_t sockets[HERALD_CORK_CAPACITY];
    herald_socket_health health[HERALD_CORK_CAPACITY];
} herald_socket_set;

static inline int herald_socket_set_opened(void *set_pointer, curl_socket_t socket, curlsocktype purpose) {
    herald_socket_set *set = (herald_socket_set *)set_pointer;
    // Beyond capacity a socket is simply never corked, nor watched.
    if (purpose == CURLSOCKTYPE_IPCXN && set->count < HERALD_CORK_CAPACITY) {
        set->health[set->count] = (herald_socket_health){0};
        set->sockets[set->count++] = socket;
    }
    return CURL_SOCKOPT_OK;
}
static inline int herald_socket_set_closing(void *set_pointer, curl_socket_t socket) {
    herald_socket_set *set = (herald_socket_set *)set_pointer;
    for (int i = 0; i < set->count; i++) {
        if (set->sockets[i] == socket) {
            set->count--;
            set->sockets[i] = set->sockets[set->count];
            set->health[i] = set->health[set->count];
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

// A connection's byte counters: received, and written by libcurl (sent once, or queued). 0 when
// the kernel cannot tell (not an established TCP connection, or a kernel before 4.19).
static inline int herald_tcp_counters(curl_socket_t socket, herald_tcp_info *info, uint64_t *received,
                                      uint64_t *written) {
    socklen_t length = sizeof *info;
    memset(info, 0, sizeof *info);
    if (getsockopt(socket, IPPROTO_TCP, TCP_INFO, info, &length) != 0) return 0;
    if (length < offsetof(herald_tcp_info, tcpi_bytes_retrans) + sizeof info->tcpi_bytes_retrans) return 0;
    if (info->tcpi_state != 1 /* TCP_ESTABLISHED */) return 0;
    *received = info->tcpi_bytes_received;
    *written = info->tcpi_bytes_sent - info->tcpi_bytes_retrans + info->tcpi_notsent_bytes;
    return 1;
}

// The stall check, run by the loop every so often (`now` in milliseconds, monotonic).
//
// A connection is awaiting while it has written something (a request, a PING) since it last
// received anything. An HTTP/2 connection awaiting for `ping_after` gets a PING: the loop calls
// curl_easy_upkeep, then herald_socket_set_ask_pings. libcurl only queues that PING; it goes out
// with the connection's next write, which the connection's transfers make at the loop's next
// pass (an idle connection's PING waits for its next request). Once the PING is seen to go out,
// a connection that then receives nothing at all for `ping_after` more is stalled
// (herald_socket_set_shut_stalled). A server that is merely slow to answer a request answers the
// PING at once, and any byte received clears the connection. Only the kernel's counters are
// read, once per connection per look: nothing is added to a request's path.
//
// Returns how many HTTP/2 connections have awaited `ping_after` and were not asked to PING.
static inline int herald_socket_set_sample(herald_socket_set *set, int64_t now, int64_t ping_after) {
    int unasked = 0;
    for (int i = 0; i < set->count; i++) {
        herald_socket_health *health = &set->health[i];
        herald_tcp_info info;
        uint64_t received = 0, written = 0;
        if (health->shut || !herald_tcp_counters(set->sockets[i], &info, &received, &written)) continue;
        if (received != health->received) {
            // Something arrived: whatever PING was out is answered. Still awaiting if it wrote
            // after it last received (a tie, within the kernel's few milliseconds, counts as
            // awaiting: at worst it costs a PING).
            health->ping_asked = 0;
            health->pinged_at = 0;
            health->awaiting_since = info.tcpi_last_data_sent <= info.tcpi_last_data_recv ? now : 0;
        } else if (written != health->written && !health->awaiting_since) {
            health->awaiting_since = now;
        }
        // The asked PING went out (with whatever else was written since: all of it awaits an answer).
        if (health->ping_asked && !health->pinged_at && written != health->written_at_ping) health->pinged_at = now;
        health->received = received;
        health->written = written;
        if (health->http2 && health->awaiting_since && !health->ping_asked && now - health->awaiting_since >= ping_after)
            unasked++;
    }
    return unasked;
}

// After curl_easy_upkeep with no interval: every HTTP/2 connection that has awaited `ping_after`
// now has a PING queued; the next sample that sees it write takes the PING as sent.
static inline void herald_socket_set_ask_pings(herald_socket_set *set, int64_t now, int64_t ping_after) {
    for (int i = 0; i < set->count; i++) {
        herald_socket_health *health = &set->health[i];
        if (health->shut || !health->http2 || !health->awaiting_since || health->ping_asked) continue;
        if (now - health->awaiting_since < ping_after) continue;
        health->ping_asked = 1;
        health->written_at_ping = health->written;
    }
}

// Notes that the connection from local port `local_port` to port `peer_port` carries HTTP/2
// (called when a transfer that opened a connection ends; reads each unmarked socket's ports).
static inline long herald_sockaddr_port(const struct sockaddr_storage *address) {
    return address->ss_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)address)->sin6_port)
                                          : ntohs(((const struct sockaddr_in *)address)->sin_port);
}

// Reads a connection's local port and peer once it is connected; 0 until then.
static inline int herald_socket_health_name(curl_socket_t socket, herald_socket_health *health) {
    if (health->named) return 1;
    struct sockaddr_storage address;
    socklen_t length = sizeof address;
    if (getsockname(socket, (struct sockaddr *)&address, &length) != 0) return 0;
    long local_port = herald_sockaddr_port(&address);
    length = sizeof address;
    if (local_port == 0 || getpeername(socket, (struct sockaddr *)&address, &length) != 0) return 0;
    const void *ip = address.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&address)->sin6_addr
                                                   : (const void *)&((struct sockaddr_in *)&address)->sin_addr;
    if (!inet_ntop(address.ss_family, ip, health->peer_ip, sizeof health->peer_ip)) return 0;
    health->local_port = local_port;
    health->peer_port = herald_sockaddr_port(&address);
    health->named = 1;
    return 1;
}

// A transfer over HTTP/2 ended: its connection (found by its local port and its peer's address
// and port, as one local port may serve connections to different peers) carries HTTP/2, so the
// stall check may PING it. Each socket's addresses are read once, so this costs no system call
// once its connections are known.
static inline void herald_easy_mark_http2(CURL *easy, herald_socket_set *set) {
    long local_port = 0, peer_port = 0;
    char *peer_ip = NULL;
    curl_easy_getinfo(easy, CURLINFO_LOCAL_PORT, &local_port);
    curl_easy_getinfo(easy, CURLINFO_PRIMARY_PORT, &peer_port);
    curl_easy_getinfo(easy, CURLINFO_PRIMARY_IP, &peer_ip);
    if (!peer_ip) return;
    for (int i = 0; i < set->count; i++) {
        herald_socket_health *health = &set->health[i];
        if (!herald_socket_health_name(set->sockets[i], health)) continue;
        if (health->local_port != local_port || health->peer_port != peer_port || strcmp(health->peer_ip, peer_ip))
            continue;
        health->http2 = 1;
        return;
    }
}

// Shuts down each connection whose PING has gone unanswered for `answer_within`: libcurl then
// reads the end of the connection, fails the streams on it and never reuses it. (libcurl has no
// call to close one connection, and a stream timing out leaves its HTTP/2 connection open and
// chosen for new streams.) Returns how many; `peer` gets the last one's address, and `ports`
// (room for `capacity`) their local ports, by which their failed transfers are told apart.
static inline int herald_socket_set_shut_stalled(herald_socket_set *set, int64_t now, int64_t answer_within,
                                                 char *peer, size_t peer_size, long *ports, int capacity) {
    int shut = 0;
    for (int i = 0; i < set->count; i++) {
        herald_socket_health *health = &set->health[i];
        if (health->shut || !health->pinged_at || now - health->pinged_at < answer_within) continue;
        health->shut = 1;
        shutdown(set->sockets[i], SHUT_RDWR);
        // Only an HTTP/2 connection is PINGed, and one is known to be HTTP/2 by its addresses
        // (herald_easy_mark_http2), so they are known here.
        if (shut < capacity) ports[shut] = health->local_port;
        shut++;
        snprintf(peer, peer_size, "%s port %ld", health->peer_ip, health->peer_port);
    }
    return shut;
}

// curl_easy_upkeep queues an HTTP/2 PING on each connection of the handle's multi handle not
// PINGed within the interval. The handle must belong to the multi handle, yet carry no transfer
// of its own: added with no URL, it fails at once and stays added, finished.
static inline CURLcode herald_easy_upkeep_every(CURL *easy, long interval_ms) {
    curl_easy_setopt(easy, CURLOPT_UPKEEP_INTERVAL_MS, interval_ms);
    return curl_easy_upkeep(easy);
}

// TCP keepalive on every connection: an idle connection whose path died (a NAT or firewall that
// dropped it, which keepalive also prevents) is found by the kernel and not reused. A stuck
// server is the stall check's to find; the kernel still answers keepalive probes for it.
static inline void herald_easy_tcp_keepalive(CURL *easy, long idle_seconds, long interval_seconds, long probes) {
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, idle_seconds);
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, interval_seconds);
#if LIBCURL_VERSION_NUM >= 0x080900
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPCNT, probes);
#else
    (void)probes;
#endif
}

// The address classifier is the HTTP/2 engine's too: one copy, in the CAddress target (which
// every target importing this module depends on).
#include <herald_address.h>

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
