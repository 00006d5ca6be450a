/* Half-precision storage: bulk conversions between F16, BF16, F32 and F64
 * (optim_convert), rounding to nearest even exactly once. The scalar rules
 * are in half.h. */
#include "core/half.h"
#include "core/internal.h"

#include <math.h>

optim_dtype optim_compute_dtype(optim_dtype dtype) { return optim__is_half(dtype) ? OPTIM_F32 : dtype; }

/* The two hot loops of a half-precision step, compiled twice: for AVX2
 * (which packs 32-bit lanes to 16 bits in one instruction) and for the
 * baseline; the loader picks one for this machine once. Same bits either way. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && defined(__linux__)
#define HALF_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define HALF_CLONES
#endif

/* float16 on x86-64 machines with F16C (every AVX2 machine has it): the
 * hardware conversions, eight at a time, give the same bits as the rules of
 * half.h (round to nearest even, subnormals kept, NaNs quieted with their
 * top payload bits); the elements they leave over go through half.h.
 * Returns how many elements were converted. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
__attribute__((target("avx,f16c"))) static int64_t f16_load_hw(const uint16_t *h, float *f, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    return i;
}

__attribute__((target("avx,f16c"))) static int64_t f16_store_hw(const float *f, uint16_t *h, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(f + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return i;
}

/* AVX (with the OS's support, which avx2 implies) and the F16C bit itself
 * (a CPU emulator such as valgrind may offer AVX2 without it). */
static int have_f16c(void)
{
    unsigned a, b, c, d;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}
#else
static int64_t f16_load_hw(const uint16_t *h, float *f, int64_t n) { return (void)h, (void)f, (void)n, 0; }
static int64_t f16_store_hw(const float *f, uint16_t *h, int64_t n) { return (void)h, (void)f, (void)n, 0; }
static int have_f16c(void) { return 0; }
#endif

HALF_CLONES void optim__half_load(optim_dtype dt, const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    if (dt == OPTIM_BF16) {
        for (int64_t i = 0; i < n; i++) dst[i] = optim__bf16_to_f32(h[i]);
        return;
    }
    for (int64_t i = have_f16c() ? f16_load_hw(h, dst, n) : 0; i < n; i++) dst[i] = optim__f16_to_f32(h[i]);
}

HALF_CLONES void optim__half_store(optim_dtype dt, const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    if (dt == OPTIM_BF16) {
        for (int64_t i = 0; i < n; i++) h[i] = optim__f32_to_bf16(src[i]);
        return;
    }
    for (int64_t i = have_f16c() ? f16_store_hw(src, h, n) : 0; i < n; i++) h[i] = optim__f32_to_f16(src[i]);
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

static int is_float(optim_dtype dt)
{
    return dt == OPTIM_F32 || dt == OPTIM_F64 || optim__is_half(dt);
}

int optim_convert(void *dst, optim_dtype to, const void *src, optim_dtype from, int64_t n)
{
    if (!is_float(to) || !is_float(from)) return OPTIM_EDTYPE;
    if (n < 0 || (n > 0 && (!dst || !src))) return OPTIM_EINVAL;
    if (to == from) {
        if (n) memcpy(dst, src, (size_t)n * optim_dtype_size(to));
    } else if (from == OPTIM_F64 && to == OPTIM_F32) {
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)((const double *)src)[i];
    } else if (from == OPTIM_F64) {
        from_f64(dst, to, src, n);
    } else if (to == OPTIM_F64) {
        for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = load_one(from, src, i);
    } else if (to == OPTIM_F32) {
        optim__half_load(from, src, dst, n);
    } else if (from == OPTIM_F32) {
        optim__half_store(to, src, dst, n);
    } else { /* F16 <-> BF16: through f32, exact on the way in */
        for (int64_t i = 0; i < n; i++) {
            const float f = load_one(from, src, i);
            ((uint16_t *)dst)[i] = to == OPTIM_F16 ? optim__f32_to_f16(f) : optim__f32_to_bf16(f);
        }
    }
    return OPTIM_OK;
}
