/* CRC-32C (Castagnoli), the checksum of TFRecord files (tfevents.h): a
 * byte-at-a-time table of the reflected polynomial 0x82F63B78. */
#include "tfevents.h"

static uint32_t table_entry(uint32_t byte)
{
    uint32_t c = byte;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    return c;
}

uint32_t optim_tool_crc32c(const void *data, size_t n)
{
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t b = 0; b < 256; b++) table[b] = table_entry(b);
        ready = 1;
    }
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t optim_tool_crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
