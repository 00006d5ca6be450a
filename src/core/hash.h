/* FNV-1a, 64 bits (internal): the one string hash of the library, for
 * name indexes (weights.c, the safetensors writer) and the name part of
 * stochastic rounding's key (half_step.c), whose bits files depend on. */
#ifndef OPTIM_CORE_HASH_H
#define OPTIM_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The hash of the n bytes at p. */
static inline uint64_t optim__fnv1a(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325u; /* offset basis */
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3u; /* FNV prime */
    return h;
}

/* The hash of string s up to its NUL; NULL hashes as "". */
static inline uint64_t optim__fnv1a_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return h;
}

#endif
