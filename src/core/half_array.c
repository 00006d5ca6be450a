/* Half-precision arrays: n elements of F16 or BF16 to float32 and back,
 * the conversions a half-precision step does seven times per element of
 * Adam (half_step.c), and the opt-in stochastic rounding to BF16. Built
 * once per instruction-set level (core/isa.h): the baseline's loops run in
 * SSE2 intrinsics, eight elements at a time, each lane computing exactly
 * the scalar rule of half.h, which does the tails and other machines; the
 * AVX2 and AVX-512 builds leave the whole loop to that scalar rule, which
 * GCC vectorises 8 or 16 lanes wide (integer operations and one exact
 * float addition: the same bits; tests/test_half_levels.c checks every
 * level against the scalar rule, tests/test_half.c and
 * tests/test_half_sround.c the baseline). */
#include "core/half.h"

#if defined(__SSE2__) && !defined(__AVX2__)
#include <emmintrin.h>

#define SET1 _mm_set1_epi32
#define SELECT(m, a, b) _mm_or_si128(_mm_and_si128(m, a), _mm_andnot_si128(m, b)) /* m ? a : b */

/* 4 float32 -> bfloat16 (optim__f32_to_bf16) in the low 16 bits of each
 * lane, sign-extended, so that _mm_packs_epi32's signed saturation leaves
 * them unchanged: x + 0x7fff + lsb, shifted. With `nan` (the NaN lanes,
 * any other lane 0) those get no bias and the quiet bit (0x40 << 16). */
static inline __m128i bf16_round4_bias(__m128i x, __m128i nan, __m128i bias)
{
    const __m128i r = _mm_add_epi32(x, _mm_andnot_si128(nan, bias));
    return _mm_srai_epi32(_mm_or_si128(r, _mm_and_si128(nan, SET1(0x400000))), 16);
}

static inline __m128i bf16_round4(__m128i x, __m128i nan)
{
    return bf16_round4_bias(
        x, nan, _mm_add_epi32(_mm_and_si128(_mm_srli_epi32(x, 16), SET1(1)), SET1(0x7fff)));
}

/* Stochastic rounding (optim__f32_to_bf16_sr): 32-bit products lane by
 * lane (SSE2 has only the 32x32->64 _mm_mul_epu32), optim__hash32, and
 * 8 elements from an even index: 4 hashes, 16 bits each. */
static inline __m128i mullo32(__m128i a, __m128i c)
{
    const __m128i even = _mm_mul_epu32(a, c), odd = _mm_mul_epu32(_mm_srli_epi64(a, 32), c);
    return _mm_unpacklo_epi32(_mm_shuffle_epi32(even, _MM_SHUFFLE(0, 0, 2, 0)),
                              _mm_shuffle_epi32(odd, _MM_SHUFFLE(0, 0, 2, 0)));
}

static inline __m128i hash4(__m128i x)
{
    x = _mm_xor_si128(x, _mm_srli_epi32(x, 16));
    x = mullo32(x, SET1(0x7feb352d));
    x = _mm_xor_si128(x, _mm_srli_epi32(x, 15));
    x = mullo32(x, SET1((int)0x846ca68bu));
    return _mm_xor_si128(x, _mm_srli_epi32(x, 16));
}

static inline __m128i sr_round4(__m128 a, __m128i bits)
{
    return bf16_round4_bias(_mm_castps_si128(a), _mm_castps_si128(_mm_cmpunord_ps(a, a)), bits);
}

/* From an even `first` (the caller's rule: an odd one starts with a scalar
 * element); pair j's 32 bits split into the 16 of elements 2j and 2j + 1. */
static int64_t store8_sr(const float *src, uint16_t *h, int64_t n, uint64_t key, uint32_t first)
{
    const __m128i k0 = SET1((int)(uint32_t)key), k1 = SET1((int)(uint32_t)(key >> 32)),
                  zero = _mm_setzero_si128();
    __m128i pair = _mm_add_epi32(SET1((int)(first >> 1)), _mm_setr_epi32(0, 1, 2, 3));
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i r = _mm_xor_si128(hash4(_mm_add_epi32(pair, k0)), k1);
        const __m128i lo = sr_round4(_mm_loadu_ps(src + i), _mm_unpacklo_epi16(r, zero));
        const __m128i hi = sr_round4(_mm_loadu_ps(src + i + 4), _mm_unpackhi_epi16(r, zero));
        _mm_storeu_si128((__m128i *)(h + i), _mm_packs_epi32(lo, hi));
        pair = _mm_add_epi32(pair, SET1(4));
    }
    return i;
}

/* 8 float32 -> bfloat16. NaNs are rare: one unordered compare per 4 finds
 * them (raising no flag but for a signalling NaN, as any float compare),
 * and only an 8 with a NaN pays for their handling. */
static inline __m128i bf16_round8(__m128 a, __m128 b)
{
    const __m128 na = _mm_cmpunord_ps(a, a), nb = _mm_cmpunord_ps(b, b);
    const __m128i ia = _mm_castps_si128(a), ib = _mm_castps_si128(b);
    if (_mm_movemask_ps(_mm_or_ps(na, nb)))
        return _mm_packs_epi32(bf16_round4(ia, _mm_castps_si128(na)),
                               bf16_round4(ib, _mm_castps_si128(nb)));
    const __m128i none = _mm_setzero_si128();
    return _mm_packs_epi32(bf16_round4(ia, none), bf16_round4(ib, none));
}

/* 4 binary16 in the high halves of h32 (h << 16) -> float32
 * (optim__f16_to_f32, lane by lane). */
static inline __m128 f16_widen4(__m128i h32)
{
    const __m128i ax = _mm_srli_epi32(_mm_and_si128(h32, SET1(0x7fff0000)), 3),
                  e = _mm_and_si128(ax, SET1(0x0f800000));
    const __m128i special = _mm_and_si128(_mm_cmpeq_epi32(e, SET1(0x0f800000)), SET1(0x38000000));
    const __m128i normal = _mm_add_epi32(_mm_add_epi32(ax, SET1(0x38000000)), special);
    const __m128 sub = _mm_sub_ps(_mm_castsi128_ps(_mm_add_epi32(ax, SET1(0x38800000))),
                                  _mm_set1_ps(6.103515625e-05f));
    const __m128i r =
        SELECT(_mm_cmpeq_epi32(e, _mm_setzero_si128()), _mm_castps_si128(sub), normal);
    return _mm_castsi128_ps(_mm_or_si128(r, _mm_and_si128(h32, SET1((int)0x80000000u))));
}

/* 4 float32 -> binary16 (optim__f32_to_f16), sign-extended as above. */
static inline __m128i f16_round4(__m128i x)
{
    const __m128i ax = _mm_and_si128(x, SET1(0x7fffffff)), m13 = _mm_srli_epi32(ax, 13);
    const __m128i normal = _mm_srli_epi32(
        _mm_add_epi32(_mm_add_epi32(ax, SET1((int)0xc8000fffu)), _mm_and_si128(m13, SET1(1))), 13);
    const __m128 subf = _mm_add_ps(_mm_castsi128_ps(ax), _mm_set1_ps(0.5f));
    const __m128i sub = _mm_sub_epi32(_mm_castps_si128(subf), SET1(0x3f000000));
    __m128i r = SELECT(_mm_cmpgt_epi32(SET1(0x38800000), ax), sub, normal);
    r = SELECT(_mm_cmpgt_epi32(ax, SET1(0x477fffff)), SET1(0x7c00), r);
    r = SELECT(_mm_cmpgt_epi32(ax, SET1(0x7f800000)),
               _mm_or_si128(_mm_and_si128(m13, SET1(0x3ff)), SET1(0x7e00)), r);
    return _mm_or_si128(r, _mm_and_si128(_mm_srai_epi32(x, 16), SET1((int)0xffff8000u)));
}

/* Elements done 8 at a time; returns how many (the rest is the caller's). */
static int64_t load8(optim_dtype dt, const uint16_t *h, float *dst, int64_t n)
{
    const __m128i zero = _mm_setzero_si128();
    int64_t i = 0;
    if (dt == OPTIM_BF16)
        for (; i + 8 <= n; i += 8) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(h + i)); /* lanes h << 16 */
            _mm_storeu_si128((__m128i *)(dst + i), _mm_unpacklo_epi16(zero, v));
            _mm_storeu_si128((__m128i *)(dst + i + 4), _mm_unpackhi_epi16(zero, v));
        }
    else
        for (; i + 8 <= n; i += 8) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(h + i));
            _mm_storeu_ps(dst + i, f16_widen4(_mm_unpacklo_epi16(zero, v)));
            _mm_storeu_ps(dst + i + 4, f16_widen4(_mm_unpackhi_epi16(zero, v)));
        }
    return i;
}

static int64_t store8(optim_dtype dt, const float *src, uint16_t *h, int64_t n)
{
    int64_t i = 0;
    if (dt == OPTIM_BF16)
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(h + i),
                             bf16_round8(_mm_loadu_ps(src + i), _mm_loadu_ps(src + i + 4)));
    else
        for (; i + 8 <= n; i += 8) {
            const __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
            const __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 4));
            _mm_storeu_si128((__m128i *)(h + i), _mm_packs_epi32(f16_round4(a), f16_round4(b)));
        }
    return i;
}
#else
static int64_t load8(optim_dtype dt, const uint16_t *h, float *dst, int64_t n) { return 0; }
static int64_t store8(optim_dtype dt, const float *src, uint16_t *h, int64_t n) { return 0; }
static int64_t store8_sr(const float *src, uint16_t *h, int64_t n, uint64_t key, uint32_t first)
{
    return 0;
}
#endif

static void half_load(optim_dtype dt, const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    int64_t i = load8(dt, h, dst, n);
    if (dt == OPTIM_BF16)
        for (; i < n; i++) dst[i] = optim__bf16_to_f32(h[i]);
    else
        for (; i < n; i++) dst[i] = optim__f16_to_f32(h[i]);
}

static void half_store(optim_dtype dt, const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    int64_t i = store8(dt, src, h, n);
    if (dt == OPTIM_BF16)
        for (; i < n; i++) h[i] = optim__f32_to_bf16(src[i]);
    else
        for (; i < n; i++) h[i] = optim__f32_to_f16(src[i]);
}

static void bf16_store_sr(const float *src, uint16_t *dst, int64_t n, uint64_t key, uint32_t first)
{
    const int64_t odd = n > 0 && (first & 1u);
    if (odd) dst[0] = optim__f32_to_bf16_sr(src[0], optim__sr_bits(key, first));
    for (int64_t i = odd + store8_sr(src + odd, dst + odd, n - odd, key, first + (uint32_t)odd);
         i < n; i++)
        dst[i] = optim__f32_to_bf16_sr(src[i], optim__sr_bits(key, first + (uint32_t)i));
}

const optim__half_table OPTIM_ISA_NAME(optim__half_kernels) = {half_load, half_store,
                                                               bf16_store_sr};
