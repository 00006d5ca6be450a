/* The dtype traits table (core/dtype.h) and its lookups. */
#include "core/dtype.h"

#include "core/half.h"
#include "core/internal.h"

#include <stdio.h>
#include <string.h>

static void f32_to_f32(float *dst, const void *src, int64_t n)
{
    if (n > 0) memcpy(dst, src, (size_t)n * sizeof *dst);
}
static void f32_from_f32(void *dst, const float *src, int64_t n)
{
    if (n > 0) memcpy(dst, src, (size_t)n * sizeof *src);
}
static void f64_to_f32(float *dst, const void *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = (float)((const double *)src)[i];
}
static void f64_from_f32(void *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = src[i];
}
static void f16_to_f32(float *dst, const void *src, int64_t n)
{
    optim__half_load(OPTIM_F16, src, dst, n);
}
static void f16_from_f32(void *dst, const float *src, int64_t n)
{
    optim__half_store(OPTIM_F16, src, dst, n);
}
static void bf16_to_f32(float *dst, const void *src, int64_t n)
{
    optim__half_load(OPTIM_BF16, src, dst, n);
}
static void bf16_from_f32(void *dst, const float *src, int64_t n)
{
    optim__half_store(OPTIM_BF16, src, dst, n);
}

static const optim__dtype_traits table[] = {
    [OPTIM_F32] = {"float32", "F32", "f32", 4, f32_to_f32, f32_from_f32},
    [OPTIM_F64] = {"float64", "F64", "f64", 8, f64_to_f32, f64_from_f32},
    [OPTIM_I32] = {"int32", "I32", "i32", 4, NULL, NULL},
    [OPTIM_I64] = {"int64", "I64", "i64", 8, NULL, NULL},
    [OPTIM_F16] = {"float16", "F16", "f16", 2, f16_to_f32, f16_from_f32},
    [OPTIM_BF16] = {"bfloat16", "BF16", "bf16", 2, bf16_to_f32, bf16_from_f32},
};
_Static_assert(OPTIM_DTYPE_INVALID == 0, "row 0 of the table is the invalid dtype");
#define END ((int)(sizeof table / sizeof *table))

int optim__dtype_end(void) { return END; }

const optim__dtype_traits *optim__dtype(optim_dtype dtype)
{
    /* A row left out of the table (no name) is no dtype either. */
    return dtype > OPTIM_DTYPE_INVALID && dtype < END && table[dtype].keras ? &table[dtype] : NULL;
}

static const char *name_in(const optim__dtype_traits *t, optim__dtype_naming naming)
{
    return naming == OPTIM__DTYPE_KERAS      ? t->keras
        : naming == OPTIM__DTYPE_SAFETENSORS ? t->safetensors
                                             : t->cli;
}

optim_dtype optim__dtype_by_name(const char *s, optim__dtype_naming naming)
{
    for (int d = OPTIM_DTYPE_INVALID + 1; s && d < END; d++)
        if (optim__dtype((optim_dtype)d) && strcmp(s, name_in(&table[d], naming)) == 0)
            return (optim_dtype)d;
    return OPTIM_DTYPE_INVALID;
}

const char *optim__dtype_name_in(optim_dtype dtype, optim__dtype_naming naming)
{
    const optim__dtype_traits *t = optim__dtype(dtype);
    return t ? name_in(t, naming) : "invalid";
}

int optim__dtype_is_float(optim_dtype dtype)
{
    const optim__dtype_traits *t = optim__dtype(dtype);
    return t && t->to_f32;
}

unsigned optim__dtype_all(void)
{
    unsigned m = 0;
    for (int d = OPTIM_DTYPE_INVALID + 1; d < END; d++)
        if (optim__dtype((optim_dtype)d)) m |= OPTIM__MASK(d);
    return m;
}

char *optim__dtype_list(unsigned mask, optim__dtype_naming naming, char *buf, size_t n)
{
    size_t used = 0, left = 0;
    if (!buf || n == 0) return buf;
    buf[0] = '\0';
    mask &= optim__dtype_all();
    for (int d = OPTIM_DTYPE_INVALID + 1; d < END; d++) left += !!(mask & OPTIM__MASK(d));
    for (int d = OPTIM_DTYPE_INVALID + 1; d < END && used < n; d++) {
        if (!(mask & OPTIM__MASK(d))) continue;
        const char *sep = !used ? "" : left == 1 ? " or " : ", ";
        used += (size_t)snprintf(buf + used, n - used, "%s%s", sep, name_in(&table[d], naming));
        left--;
    }
    return buf;
}

/* ---- the public face ------------------------------------------------------ */

size_t optim_dtype_size(optim_dtype dtype)
{
    const optim__dtype_traits *t = optim__dtype(dtype);
    return t ? t->size : 0;
}

const char *optim_dtype_name(optim_dtype dtype)
{
    return optim__dtype_name_in(dtype, OPTIM__DTYPE_KERAS);
}

optim_dtype optim_dtype_from_short_name(const char *name)
{
    return optim__dtype_by_name(name, OPTIM__DTYPE_CLI);
}
