/* Open-addressing map from pointers to indices (internal). */
#ifndef OPTIM_CORE_PTRMAP_H
#define OPTIM_CORE_PTRMAP_H

#include <stddef.h>

typedef struct optim__ptrmap {
    const void **keys;
    size_t *vals;
    size_t cap; /* power of two or 0 */
    size_t count;
} optim__ptrmap;

/* Returns 1 and sets *val if found, 0 otherwise. */
int optim__ptrmap_get(const optim__ptrmap *m, const void *key, size_t *val);
/* Inserts or overwrites; returns 0 or OPTIM_ENOMEM. */
int optim__ptrmap_put(optim__ptrmap *m, const void *key, size_t val);
/* Removes key if present. */
void optim__ptrmap_del(optim__ptrmap *m, const void *key);
void optim__ptrmap_free(optim__ptrmap *m);

/* Sorts ptrs[0..n) by address and returns a pointer that appears more than
 * once, or NULL if each appears once (n log n, no memory). */
const void *optim__ptrs_repeated(const void **ptrs, size_t n);

#endif
