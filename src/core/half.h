/* Half-precision storage (F16, BF16): scalar conversions to and from f32,
 * rounding to nearest even (internal; optim_convert in optim/tensor.h is the
 * public bulk form). Written with selects rather than branches so that loops
 * over them vectorise. */
#ifndef OPTIM_CORE_HALF_H
#define OPTIM_CORE_HALF_H

#include <stdint.h>
#include <string.h>

#include "core/isa.h"
#include "optim/tensor.h"

static inline uint32_t optim__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float optim__bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline int optim__is_half(optim_dtype dt) { return dt == OPTIM_F16 || dt == OPTIM_BF16; }

/* binary16 -> float32, exact. */
static inline float optim__f16_to_f32(uint16_t h)
{
    const uint32_t ax = (uint32_t)(h & 0x7fffu) << 13, e = ax & 0x0f800000u;
    const uint32_t normal = ax + 0x38000000u; /* rebias 15 -> 127 */
    const uint32_t special = ax + 0x70000000u; /* inf and NaN: exponent 255 */
    /* Subnormal: 1.m * 2^-14 minus the implicit 2^-14, exact in float. */
    const uint32_t sub = optim__f32_bits(optim__bits_f32(ax + 0x38800000u) - 6.103515625e-05f);
    const uint32_t r = e == 0x0f800000u ? special : (e == 0 ? sub : normal);
    return optim__bits_f32(r | (uint32_t)(h & 0x8000u) << 16);
}

/* float32 -> binary16, round to nearest even; >= 65520 gives inf; NaN stays
 * NaN (quiet, top payload bits kept). */
static inline uint16_t optim__f32_to_f16(float f)
{
    const uint32_t x = optim__f32_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    /* Normal: rebias 127 -> 15 and round at bit 13 (carry may reach inf). */
    const uint32_t normal = (ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13;
    /* Below 2^-14: adding 0.5 puts the half subnormal unit 2^-24 at the
     * float's last bit, so the FPU rounds to nearest even for us. */
    const uint32_t sub = optim__f32_bits(optim__bits_f32(ax) + 0.5f) - 0x3f000000u;
    uint32_t r = ax < 0x38800000u ? sub : normal;
    r = ax >= 0x47800000u ? 0x7c00u : r;
    r = ax > 0x7f800000u ? 0x7e00u | ((ax >> 13) & 0x3ffu) : r;
    return (uint16_t)(sign | r);
}

static inline float optim__bf16_to_f32(uint16_t h) { return optim__bits_f32((uint32_t)h << 16); }

/* float32 -> bfloat16, round to nearest even; NaN stays NaN (quiet). */
static inline uint16_t optim__f32_to_bf16(float f)
{
    const uint32_t x = optim__f32_bits(f);
    const uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x40u : r);
}

/* float32 -> bfloat16, rounded stochastically: down or up to the two
 * neighbouring bfloat16 values, up (away from zero) with probability
 * (low 16 bits of f) / 65536, the distance fraction, given r uniform in
 * [0, 65535]. The carry is round-to-nearest's: past the largest finite
 * bfloat16 the next value up is infinity; inf stays inf; NaN stays NaN
 * (quiet), as optim__f32_to_bf16. */
static inline uint16_t optim__f32_to_bf16_sr(float f, uint32_t r)
{
    const uint32_t x = optim__f32_bits(f);
    return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x40u : (x + r) >> 16);
}

/* Counter-based random bits for stochastic rounding: a 64-bit key per run
 * of elements (half_step.c derives it from the seed, step, variable, slot
 * and the high half of the element index), mixed with the low half i of
 * the element's index. optim__hash32 is Chris Wellons's "lowbias32"
 * integer hash (a bijection of 32-bit values with full avalanche); one
 * keyed hash of the pair index i / 2 gives 32 bits, the low 16 for the
 * even element of the pair, the high 16 for the odd one. The SSE2 loop of
 * half_array.c computes the same. */
static inline uint32_t optim__hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    return x ^ (x >> 16);
}

static inline uint32_t optim__sr_bits(uint64_t key, uint32_t i)
{
    const uint32_t x = optim__hash32((i >> 1) + (uint32_t)key) ^ (uint32_t)(key >> 32);
    return (x >> ((i & 1u) * 16)) & 0xffffu;
}

/* n elements of a half dtype to f32 and back (dst, src not overlapping),
 * at the level in use (the table below). */
void optim__half_load(optim_dtype dt, const void *src, float *dst, int64_t n);
void optim__half_store(optim_dtype dt, const float *src, void *dst, int64_t n);
/* n float32 to bfloat16 rounded stochastically (optim__f32_to_bf16_sr);
 * element j takes the bits optim__sr_bits(key, (uint32_t)(first + j)).
 * The caller splits runs at multiples of 2^32 and folds the high half of
 * the index into key. */
void optim__bf16_store_sr(const float *src, uint16_t *dst, int64_t n, uint64_t key, uint32_t first);

/* The three loops once per instruction-set level (half_array.c), each
 * level the same bits as the scalar rules above. */
typedef struct optim__half_table {
    void (*load)(optim_dtype dt, const void *src, float *dst, int64_t n);
    void (*store)(optim_dtype dt, const float *src, void *dst, int64_t n);
    void (*store_sr)(const float *src, uint16_t *dst, int64_t n, uint64_t key, uint32_t first);
} optim__half_table;
OPTIM__ISA_DECLARE(optim__half_table, optim__half_kernels);

#endif
