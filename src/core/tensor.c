/* Tensor views: shapes and their checks (dtype facts: dtype.c). */
#include "core/dtype.h"
#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

optim_tensor optim_tensor_make(optim_dtype dtype, void *data, int32_t rank, const int64_t *shape)
{
    optim_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.data = data;
    if (rank < 0) rank = 0;
    if (rank > OPTIM_MAX_RANK) rank = OPTIM_MAX_RANK;
    t.rank = rank;
    for (int32_t i = 0; i < rank; i++) t.shape[i] = shape[i];
    return t;
}

int optim__mul_overflow_i64(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

int64_t optim_tensor_numel(const optim_tensor *t)
{
    if (!t || t->rank < 0 || t->rank > OPTIM_MAX_RANK) return -1;
    int64_t n = 1;
    for (int32_t i = 0; i < t->rank; i++) {
        if (t->shape[i] < 0 || optim__mul_overflow_i64(n, t->shape[i], &n)) return -1;
    }
    return n;
}

char *optim_shape_str(int32_t rank, const int64_t *shape, char *buf, size_t n)
{
    size_t used = 0;
    if (!buf || n == 0) return buf;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, n, "[");
    for (int32_t i = 0; i < rank && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

int optim__tensor_check(const optim_tensor *t, unsigned allowed, const char *what, optim_error *err)
{
    /* the caller's own mask and name, never the user's */
    OPTIM_ASSERT(allowed && !(allowed >> (OPTIM_BF16 + 1)) && what);
    if (!t) return optim__err(err, OPTIM_EINVAL, "%s: tensor is NULL", what);
    if (optim_dtype_size(t->dtype) == 0 || !(allowed & OPTIM__MASK(t->dtype))) {
        char allowed_names[96];
        optim__dtype_list(allowed, OPTIM__DTYPE_KERAS, allowed_names, sizeof allowed_names);
        return optim__err(err, OPTIM_EDTYPE, "%s: dtype %s (%d), expected %s", what,
                          optim_dtype_name(t->dtype), (int)t->dtype, allowed_names);
    }
    if (t->rank < 0 || t->rank > OPTIM_MAX_RANK)
        return optim__err(err, OPTIM_ESHAPE, "%s: rank %d, expected 0..%d", what, (int)t->rank,
                          OPTIM_MAX_RANK);
    int64_t n = optim_tensor_numel(t);
    if (n < 0) {
        char s[160];
        return optim__err(err, OPTIM_ESHAPE, "%s: shape %s has a negative dim or overflows", what,
                          optim_shape_str(t->rank, t->shape, s, sizeof s));
    }
    if (n > 0 && !t->data) return optim__err(err, OPTIM_EINVAL, "%s: data is NULL", what);
    return OPTIM_OK;
}

void *optim__malloc(size_t n) { return malloc(n ? n : 1); }
void *optim__calloc(size_t count, size_t size)
{
    return calloc(count ? count : 1, size ? size : 1);
}

char *optim__strdup(const char *s)
{
    OPTIM_ASSERT(s);
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}
