/* Pointer -> index map with linear probing and backward-shift deletion. */
#include "core/ptrmap.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/internal.h"
#include "optim/status.h"

static size_t slot_of(const void *key, size_t cap)
{
    OPTIM_ASSERT(cap && (cap & (cap - 1)) == 0);
    uint64_t h = (uint64_t)(uintptr_t)key;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h & (cap - 1);
}

int optim__ptrmap_get(const optim__ptrmap *m, const void *key, size_t *val)
{
    if (!m->cap) return 0;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return 0;
        if (m->keys[i] == key) {
            if (val) *val = m->vals[i];
            return 1;
        }
    }
}

static int grow(optim__ptrmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    const void **keys = calloc(cap, sizeof *keys);
    size_t *vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return OPTIM_ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = slot_of(m->keys[i], cap);
        while (keys[j]) j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return OPTIM_OK;
}

int optim__ptrmap_put(optim__ptrmap *m, const void *key, size_t val)
{
    OPTIM_ASSERT(key); /* NULL marks an empty slot */
    if ((m->count + 1) * 2 > m->cap && grow(m)) return OPTIM_ENOMEM;
    size_t i = slot_of(key, m->cap);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
    if (!m->keys[i]) m->count++;
    m->keys[i] = key;
    m->vals[i] = val;
    OPTIM_ASSERT(m->count * 2 <= m->cap);
    return OPTIM_OK;
}

void optim__ptrmap_del(optim__ptrmap *m, const void *key)
{
    if (!m->cap) return;
    size_t mask = m->cap - 1, i = slot_of(key, m->cap);
    while (m->keys[i] != key) {
        if (!m->keys[i]) return;
        i = (i + 1) & mask;
    }
    OPTIM_ASSERT(m->count > 0);
    m->keys[i] = NULL;
    m->count--;
    /* Shift back the entries of the cluster that follows. */
    for (size_t j = (i + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
        size_t home = slot_of(m->keys[j], m->cap);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            m->keys[j] = NULL;
            i = j;
        }
    }
}

void optim__ptrmap_free(optim__ptrmap *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->count = 0;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

const void *optim__ptrs_repeated(const void **ptrs, size_t n)
{
    if (n < 2) return NULL;
    qsort(ptrs, n, sizeof *ptrs, cmp_ptr);
    for (size_t i = 1; i < n; i++)
        if (ptrs[i] == ptrs[i - 1]) return ptrs[i];
    return NULL;
}
