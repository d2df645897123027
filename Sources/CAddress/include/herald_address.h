// Which addresses a request may connect to. A push subscription's endpoint is chosen by a
// browser (or by whoever registers a device), so a request to it must not reach the host's own
// services, its private network or the cloud metadata service. The check is made on the address
// about to be connected to, after the name is resolved (by the HTTP/2 engine, or in libcurl's
// open-socket callback), so that a name that resolves to 127.0.0.1 (or is re-resolved to it
// later) is refused as surely as the literal address.
#ifndef HERALD_ADDRESS_H
#define HERALD_ADDRESS_H

#include <stdint.h>

#define HERALD_ADDRESS_PUBLIC 0
#define HERALD_ADDRESS_LOOPBACK 1
#define HERALD_ADDRESS_PRIVATE 2
#define HERALD_ADDRESS_LINK_LOCAL 3
#define HERALD_ADDRESS_UNSPECIFIED 4
#define HERALD_ADDRESS_SHARED 5
#define HERALD_ADDRESS_MULTICAST 6
#define HERALD_ADDRESS_RESERVED 7

// The kind of an IPv4 address, in host byte order.
int herald_classify_ipv4(uint32_t address);

// The kind of an IPv6 address; IPv4-mapped (::ffff:a.b.c.d) ones are judged as their IPv4 address.
int herald_classify_ipv6(const unsigned char address[16]);

#endif
