// The address classifier (herald_address.h): the HTTP/2 engine's and libcurl's open-socket
// guard's, one copy.
#include "herald_address.h"

#include <string.h>

// The kind of an IPv4 address, in host byte order.
int herald_classify_ipv4(uint32_t a) {
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
    if ((a >> 8) == 0xC00002 || (a >> 8) == 0xC63364 || (a >> 8) == 0xCB0071)
        return HERALD_ADDRESS_RESERVED;  // 192.0.2/24, 198.51.100/24, 203.0.113/24: documentation
    return HERALD_ADDRESS_PUBLIC;
}

// The kind of an IPv6 address; IPv4-mapped (::ffff:a.b.c.d) ones are judged as their IPv4 address.
int herald_classify_ipv6(const unsigned char b[16]) {
    static const unsigned char zeros[16] = {0};
    if (memcmp(b, zeros, 10) == 0 && b[10] == 0xFF && b[11] == 0xFF) {
        return herald_classify_ipv4((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15]);
    }
    // NAT64 (64:ff9b::/96, and the local-use 64:ff9b:1::/48 of RFC 8215), SIIT's IPv4-translated
    // ::ffff:0:a.b.c.d and 6to4 (2002::/16) carry an IPv4 address that a gateway reaches: judged
    // as that address, so 64:ff9b::a9fe:a9fe is the metadata service it is.
    static const unsigned char nat64[12] = {0x00, 0x64, 0xFF, 0x9B};
    static const unsigned char local_nat64[6] = {0x00, 0x64, 0xFF, 0x9B, 0x00, 0x01};
    static const unsigned char translated[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0};
    if (memcmp(b, nat64, 12) == 0 || memcmp(b, translated, 12) == 0 ||
        (memcmp(b, local_nat64, 6) == 0 && memcmp(b + 6, zeros, 6) == 0)) {
        return herald_classify_ipv4((uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15]);
    }
    // The local-use prefix with a shorter length (RFC 6052's /48 to /64) puts the IPv4 address
    // elsewhere: nothing a push service uses, and not read wrongly as public.
    if (memcmp(b, local_nat64, 6) == 0) return HERALD_ADDRESS_RESERVED;
    // Teredo (2001::/32) tunnels to an address no push service uses; 2001:db8::/32 is documentation.
    if (b[0] == 0x20 && b[1] == 0x01 && ((b[2] == 0 && b[3] == 0) || (b[2] == 0x0D && b[3] == 0xB8)))
        return HERALD_ADDRESS_RESERVED;
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
