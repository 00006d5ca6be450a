/* The half-precision loops at every instruction-set level (half_array.c's
 * table, core/half.h) give the scalar rules' bits, lane for lane:
 *
 * - float32 -> BF16 and -> F16 on every 257th bit pattern (with the
 *   environment variable OPTIM_TEST_HALF_ALL=1, on all 2^32: the
 *   one-off check of docs/half-precision.md), in runs of 4093 elements so
 *   that every vector width ends in a tail;
 * - BF16 and F16 -> float32 on all 2^16 patterns;
 * - stochastic rounding to BF16 on random floats, keys and first indices,
 *   odd and even.
 *
 * A level the CPU lacks, or a build with one level, is skipped with a
 * printed line. */
#include <stdio.h>
#include <stdlib.h>

#include "core/half.h"
#include "testutil.h"

/* The other levels' tables, where this build has them (weak: absent in an
 * OPTIM_NATIVE build or off x86-64). */
extern const optim__half_table optim__half_kernels_avx2 __attribute__((weak));
extern const optim__half_table optim__half_kernels_avx512 __attribute__((weak));

enum { RUN = 4093 };

static const optim__half_table *level_table(optim_isa_level l)
{
    const optim__half_table *t = l == OPTIM_ISA_SSE2 ? &optim__half_kernels
        : l == OPTIM_ISA_AVX2                        ? &optim__half_kernels_avx2
                                                     : &optim__half_kernels_avx512;
    if (!t || !optim_isa_supported(l)) {
        printf("skipped: level %s (%s)\n", optim_isa_name(l),
               t ? "this CPU lacks it" : "not in this build");
        return NULL;
    }
    return t;
}

static uint16_t scalar_store(optim_dtype dt, float f)
{
    return dt == OPTIM_BF16 ? optim__f32_to_bf16(f) : optim__f32_to_f16(f);
}

/* The bit patterns first, first + stride, ... (RUN of them) through t. */
static void store_run(const optim__half_table *t, optim_dtype dt, uint64_t first, uint64_t stride,
                      const char *level)
{
    float src[RUN];
    uint16_t out[RUN];
    for (int i = 0; i < RUN; i++)
        src[i] = optim__bits_f32((uint32_t)(first + (uint64_t)i * stride));
    t->store(dt, src, out, RUN);
    for (int i = 0; i < RUN; i++)
        if (out[i] != scalar_store(dt, src[i]))
            fail_msg("%s: %s of float bits %#x gave %#x, the scalar rule %#x", level,
                     optim_dtype_name(dt), optim__f32_bits(src[i]), out[i],
                     scalar_store(dt, src[i]));
}

OPTIM_TEST(stores_match_scalar_rule)
{
    const uint64_t stride = getenv("OPTIM_TEST_HALF_ALL") ? 1 : 257;
    for (int l = OPTIM_ISA_SSE2; l <= OPTIM_ISA_AVX512; l++) {
        const optim__half_table *t = level_table((optim_isa_level)l);
        if (!t) continue;
        const char *name = optim_isa_name((optim_isa_level)l);
        for (uint64_t x = 0; x < (1ull << 32); x += RUN * stride) {
            store_run(t, OPTIM_BF16, x, stride, name);
            store_run(t, OPTIM_F16, x, stride, name);
        }
        printf("%s: stores of %llu float32 patterns match\n", name,
               (unsigned long long)((1ull << 32) / stride));
    }
}

OPTIM_TEST(loads_match_scalar_rule)
{
    static uint16_t h[65536];
    static float f[65536];
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (int l = OPTIM_ISA_SSE2; l <= OPTIM_ISA_AVX512; l++) {
        const optim__half_table *t = level_table((optim_isa_level)l);
        for (int d = 0; t && d < 2; d++) {
            const optim_dtype dt = d ? OPTIM_F16 : OPTIM_BF16;
            t->load(dt, h + 1, f + 1, 65535); /* an odd start and length: tails */
            t->load(dt, h, f, 1);
            for (int i = 0; i < 65536; i++) {
                const float s =
                    dt == OPTIM_BF16 ? optim__bf16_to_f32(h[i]) : optim__f16_to_f32(h[i]);
                if (optim__f32_bits(f[i]) != optim__f32_bits(s))
                    fail_msg("%s: %s %#x loaded as bits %#x, the scalar rule %#x",
                             optim_isa_name((optim_isa_level)l), optim_dtype_name(dt), i,
                             optim__f32_bits(f[i]), optim__f32_bits(s));
            }
        }
    }
}

OPTIM_TEST(stochastic_rounding_matches_scalar_rule)
{
    uint32_t r = 2463534242u;
    float src[RUN];
    uint16_t out[RUN];
    for (int l = OPTIM_ISA_SSE2; l <= OPTIM_ISA_AVX512; l++) {
        const optim__half_table *t = level_table((optim_isa_level)l);
        for (int rep = 0; t && rep < 64; rep++) {
            for (int i = 0; i < RUN; i++) {
                r ^= r << 13, r ^= r >> 17, r ^= r << 5;
                src[i] = optim__bits_f32(r);
            }
            const uint64_t key = (uint64_t)r * 0x9e3779b97f4a7c15u;
            /* odd and even, below 2^32 - RUN (the caller splits there) */
            const uint32_t first = (rep % 2 ? r | 1u : r & ~1u) % (0xffffffffu - RUN);
            const int n = RUN - rep;
            t->store_sr(src, out, n, key, first);
            for (int i = 0; i < n; i++) {
                const uint32_t idx = first + (uint32_t)i;
                const uint16_t want = optim__f32_to_bf16_sr(src[i], optim__sr_bits(key, idx));
                if (out[i] != want)
                    fail_msg("%s: float bits %#x at index %u rounded to %#x, the scalar rule %#x",
                             optim_isa_name((optim_isa_level)l), optim__f32_bits(src[i]), idx,
                             out[i], want);
            }
        }
    }
}

int main(void) { return optim_test_run(); }
