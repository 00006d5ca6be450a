/* Stage 4's loops at every instruction-set level (clip_kernels.c): the
 * sums of squares behind clipnorm and global_clipnorm give the baseline's
 * bits at every level, for every dtype, length (tails of each vector
 * width) and option (unscale, clipvalue), and lie within a few ulps of a
 * long double sum; the clip loops give the baseline's bits too. A level
 * the CPU lacks, or a build with one level, is skipped with a printed
 * line. */
#include <math.h>
#include <stdio.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "optimizer/pipeline.h"
#include "testutil.h"

extern const optim__clip_table optim__clip_kernels_avx2 __attribute__((weak));
extern const optim__clip_table optim__clip_kernels_avx512 __attribute__((weak));

enum { N = 1000 };

static uint32_t rng = 7u;
static float rnd(void) { return (float)optim_test_uniform(&rng, -4.0, 4.0); }

/* The levels this build and CPU have beyond the baseline. */
static int others(const optim__clip_table **t)
{
    const optim__clip_table *cand[] = {&optim__clip_kernels_avx2, &optim__clip_kernels_avx512};
    const optim_isa_level lv[] = {OPTIM_ISA_AVX2, OPTIM_ISA_AVX512};
    int n = 0;
    for (int i = 0; i < 2; i++)
        if (cand[i] && optim_isa_supported(lv[i])) t[n++] = cand[i];
        else
            printf("skipped: level %s (%s)\n", optim_isa_name(lv[i]),
                   cand[i] ? "this CPU lacks it" : "not in this build");
    return n;
}

/* The gradient's element i as the kernel sees it, after unscale and clipvalue. */
static long double ref_elem(optim_dtype dt, const void *g, int64_t i, const clip_desc *c)
{
    double v = dt == OPTIM_F64 ? ((const double *)g)[i]
        : dt == OPTIM_F32      ? ((const float *)g)[i]
        : dt == OPTIM_F16      ? optim__f16_to_f32(((const uint16_t *)g)[i])
                               : optim__bf16_to_f32(((const uint16_t *)g)[i]);
    if (c->unscale != 0) v = dt == OPTIM_F64 ? v / c->unscale : (float)v / (float)c->unscale;
    const double cv = dt == OPTIM_F64 ? c->cv : (float)c->cv;
    if (c->has_cv) v = v < -cv ? -cv : (v > cv ? cv : v);
    return (long double)v * v;
}

OPTIM_TEST(sums_of_squares_same_bits_every_level)
{
    static double g64[N];
    static float g32[N];
    static uint16_t g16[N], gb16[N];
    for (int i = 0; i < N; i++) {
        g64[i] = rnd(), g32[i] = rnd();
        g16[i] = optim__f32_to_f16(rnd()), gb16[i] = optim__f32_to_bf16(rnd());
    }
    const void *data[] = {g32, g64, g16, gb16};
    const optim_dtype dts[] = {OPTIM_F32, OPTIM_F64, OPTIM_F16, OPTIM_BF16};
    const clip_desc opts[] = {{.unscale = 0}, {.unscale = 3.0, .has_cv = 1, .cv = 0.5}};
    const optim__clip_table *t[2];
    const int nt = others(t);
    for (int d = 0; d < 4; d++)
        for (int o = 0; o < 2; o++)
            for (int64_t n = 0; n <= N; n += n < 70 ? 1 : 97) {
                const double base = optim__clip_kernels.sumsq(dts[d], data[d], n, &opts[o]);
                long double ref = 0;
                for (int64_t i = 0; i < n; i++) ref += ref_elem(dts[d], data[d], i, &opts[o]);
                if (fabsl(base - ref) > 8 * DBL_EPSILON * ref)
                    fail_msg("%s, option set %d, n %lld: sum %.17g, long double reference %.17Lg",
                             optim_dtype_name(dts[d]), o, (long long)n, base, ref);
                for (int k = 0; k < nt; k++) {
                    const double s = t[k]->sumsq(dts[d], data[d], n, &opts[o]);
                    if (memcmp(&s, &base, sizeof s))
                        fail_msg("%s, option set %d, n %lld: level table %d sums to %.17g, the "
                                 "baseline %.17g",
                                 optim_dtype_name(dts[d]), o, (long long)n, k, s, base);
                }
            }
}

OPTIM_TEST(clips_same_bits_every_level)
{
    static float src[N], base[N], out[N];
    static double s64[N], b64[N], o64[N];
    for (int i = 0; i < N; i++) src[i] = rnd(), s64[i] = rnd();
    src[5] = NAN, s64[6] = -INFINITY;
    const clip_desc opts[] = {{.unscale = 2.0, .has_cv = 1, .cv = 1.5},
                              {.mode = 1, .c = 1.0, .norm = 7.25},
                              {.mode = 2, .scale = 0.3}};
    const optim__clip_table *t[2];
    const int nt = others(t);
    for (int o = 0; o < 3; o++)
        for (int k = 0; k < nt; k++) {
            const int n = N - 3 * o - k; /* ragged tails */
            optim__clip_kernels.clip_f32(src, base, n, &opts[o]);
            t[k]->clip_f32(src, out, n, &opts[o]);
            optim__clip_kernels.clip_f64(s64, b64, n, &opts[o]);
            t[k]->clip_f64(s64, o64, n, &opts[o]);
            if (memcmp(base, out, (size_t)n * sizeof *out) ||
                memcmp(b64, o64, (size_t)n * sizeof *o64))
                fail_msg("option set %d: level table %d clips to other bits than the baseline", o,
                         k);
        }
}

int main(void) { return optim_test_run(); }
