/* Helpers shared by the safetensors reader, header parser and writer
 * (io/safetensors_impl.h): byte swaps, UTF-8, quoting names for messages,
 * system errors and the sort that skips sorted input. */
#define _POSIX_C_SOURCE 200809L

#include "io/safetensors_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reverses each `size`-byte element of p[0 .. nbytes). */
void optim__st_swap(unsigned char *p, size_t nbytes, size_t size)
{
    for (size_t i = 0; i + size <= nbytes; i += size)
        for (size_t a = i, b = i + size - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* Length of the valid UTF-8 sequence starting at s[0] (n > 0 bytes left), or
 * 0 if it is not one (overlong forms, surrogates and > U+10FFFF refused). */
size_t optim__st_utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t len;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (n < len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}

int optim__st_utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = optim__st_utf8_seq(p + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

const char *optim__st_q(st_quote *q, const char *name)
{
    const unsigned char *p = (const unsigned char *)name;
    size_t n = strlen(name), o = 0, i = 0;
    q->s[o++] = '"';
    while (i < n && i < ST_QUOTE_MAX) {
        unsigned char c = p[i];
        size_t k = c >= 0x80 ? optim__st_utf8_seq(p + i, n - i) : 1;
        if (c == '"' || c == '\\') {
            q->s[o++] = '\\';
            q->s[o++] = (char)c;
        } else if (c < 0x20 || c == 0x7F || k == 0) {
            snprintf(q->s + o, 5, "\\x%02x", c);
            o += 4;
            k = 1;
        } else {
            memcpy(q->s + o, p + i, k);
            o += k;
        }
        i += k ? k : 1;
    }
    if (i < n) {
        memcpy(q->s + o, "...", 3);
        o += 3;
    }
    q->s[o++] = '"';
    q->s[o] = '\0';
    return q->s;
}

const char *optim__st_sys(int e, char *buf, size_t n)
{
    if (strerror_r(e, buf, n) != 0) snprintf(buf, n, "system error %d", e);
    return buf;
}

/* qsort, after a linear check: files optim writes are in name order with
 * offsets in the same order, and 100k names sorted again cost ~10% of a
 * replay. */
void optim__st_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    const char *p = base;
    size_t i = 1;
    while (i < n && cmp(p + (i - 1) * size, p + i * size) <= 0) i++;
    if (i < n) qsort(base, n, size, cmp);
}
