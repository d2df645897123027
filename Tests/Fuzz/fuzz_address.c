// libFuzzer target: the address classifier (herald_address.h) that keeps a push subscription's
// endpoint off loopback, private and metadata addresses. Any 16 bytes are an IPv6 address;
// every address that carries an IPv4 one (mapped, NAT64, SIIT, 6to4) is judged as that address.
// Built and run by scripts/fuzz.sh.
#include "../../Sources/CAddress/include/herald_address.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint32_t ipv4(const uint8_t *b) { return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    int v4 = herald_classify_ipv4(ipv4(data));
    if (v4 < HERALD_ADDRESS_PUBLIC || v4 > HERALD_ADDRESS_RESERVED) abort();
    unsigned char carried[4][16] = {
        {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF},                  // ::ffff:a.b.c.d
        {0x00, 0x64, 0xFF, 0x9B},                                    // 64:ff9b::a.b.c.d
        {0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0},                  // ::ffff:0:a.b.c.d
        {0x20, 0x02},                                                // 2002:a.b.c.d::
    };
    for (int i = 0; i < 4; i++) {
        memcpy(i == 3 ? carried[i] + 2 : carried[i] + 12, data, 4);
        if (herald_classify_ipv6(carried[i]) != v4) abort();
    }
    if (size >= 16) {
        int v6 = herald_classify_ipv6(data);
        if (v6 < HERALD_ADDRESS_PUBLIC || v6 > HERALD_ADDRESS_RESERVED) abort();
    }
    return 0;
}
