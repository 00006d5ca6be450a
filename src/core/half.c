/* Half-precision storage: bulk conversions between F16, BF16, F32 and F64
 * (optim_convert), rounding to nearest even exactly once. The scalar rules
 * are in half.h. */
#include "core/dtype.h"
#include "core/half.h"
#include "core/internal.h"

#include <math.h>

void optim__half_load(optim_dtype dt, const void *src, float *dst, int64_t n)
{
    OPTIM__ISA_TABLE(optim__half_kernels)->load(dt, src, dst, n);
}

void optim__half_store(optim_dtype dt, const float *src, void *dst, int64_t n)
{
    OPTIM__ISA_TABLE(optim__half_kernels)->store(dt, src, dst, n);
}

void optim__bf16_store_sr(const float *src, uint16_t *dst, int64_t n, uint64_t key, uint32_t first)
{
    OPTIM__ISA_TABLE(optim__half_kernels)->store_sr(src, dst, n, key, first);
}

optim_dtype optim_compute_dtype(optim_dtype dtype)
{
    return optim__is_half(dtype) ? OPTIM_F32 : dtype;
}

/* double -> float rounded to odd (truncated, last bit set when inexact):
 * rounding that to a half type afterwards is the same as rounding the
 * double directly, since float keeps more than two extra bits. */
static float round_to_odd(double d)
{
    float f = (float)d;
    if (isnan(d) || (double)f == d) return f;
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
    return optim__bits_f32(optim__f32_bits(f) | 1u);
}

static float load_one(optim_dtype dt, const void *src, int64_t i)
{
    switch (dt) {
    case OPTIM_F16: return optim__f16_to_f32(((const uint16_t *)src)[i]);
    case OPTIM_BF16: return optim__bf16_to_f32(((const uint16_t *)src)[i]);
    default: return ((const float *)src)[i];
    }
}

/* From F64 into a half type (rounded once, through a float rounded to odd). */
static void from_f64(void *dst, optim_dtype to, const double *src, int64_t n)
{
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) {
        const float f = round_to_odd(src[i]);
        h[i] = to == OPTIM_F16 ? optim__f32_to_f16(f) : optim__f32_to_bf16(f);
    }
}

int optim_convert(void *dst, optim_dtype to, const void *src, optim_dtype from, int64_t n)
{
    if (!optim__dtype_is_float(to) || !optim__dtype_is_float(from)) return OPTIM_EDTYPE;
    if (n < 0 || (n > 0 && (!dst || !src))) return OPTIM_EINVAL;
    if (to == from) {
        if (n) memcpy(dst, src, (size_t)n * optim_dtype_size(to));
    } else if (to == OPTIM_F32) {
        optim__dtype(from)->to_f32(dst, src, n);
    } else if (from == OPTIM_F32) {
        optim__dtype(to)->from_f32(dst, src, n);
    } else if (from == OPTIM_F64) {
        from_f64(dst, to, src, n);
    } else if (to == OPTIM_F64) {
        for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = load_one(from, src, i);
    } else { /* F16 <-> BF16: through f32, exact on the way in */
        for (int64_t i = 0; i < n; i++) {
            const float f = load_one(from, src, i);
            ((uint16_t *)dst)[i] = to == OPTIM_F16 ? optim__f32_to_f16(f) : optim__f32_to_bf16(f);
        }
    }
    return OPTIM_OK;
}
