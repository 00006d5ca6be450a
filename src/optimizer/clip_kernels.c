/* The element loops of stage 4 (clip.c), built once per instruction-set
 * level (core/isa.h): the loss_scale_factor division, clipvalue and the
 * norm scales, and the sums of squares behind clipnorm and
 * global_clipnorm. A sum keeps OPTIM__SUM_LANES partial sums, element i in
 * lane i % OPTIM__SUM_LANES whatever the vector width, added at the end in
 * one fixed tree: every level gives the same bits, and a level's vectors
 * run the lanes side by side (a single running sum is one double addition
 * per element in sequence, bound by its latency). */
#include "optimizer/pipeline.h"

#include <math.h>

#include "core/half.h"

/* The loss_scale_factor division, clip_by_value, then clip_by_norm or the
 * global-norm scale, applied in the gradient's own precision (as TF and
 * Keras apply them). */
#define CLIP_CHUNK(T, NAME)                                               \
    static void NAME(const T *src, T *dst, int64_t n, const clip_desc *c) \
    {                                                                     \
        const T cv = (T)c->cv, cn = (T)c->c, nrm = (T)c->norm;            \
        const T denom = nrm > cn ? nrm : cn;                              \
        const T scale = (T)c->scale, us = (T)c->unscale;                  \
        const int unscale = c->unscale != 0;                              \
        for (int64_t i = 0; i < n; i++) {                                 \
            T x = src[i];                                                 \
            if (unscale) x = x / us;                                      \
            if (c->has_cv) x = x < -cv ? -cv : (x > cv ? cv : x);         \
            if (c->mode == 1) x = x * cn / denom;                         \
            else if (c->mode == 2) x = x * scale;                         \
            dst[i] = x;                                                   \
        }                                                                 \
    }
CLIP_CHUNK(float, clip_f32)
CLIP_CHUNK(double, clip_f64)

enum { OPTIM__SUM_LANES = 16 };

/* The lanes added pairwise in a fixed order: lane j + w into lane j. */
static double add_lanes(double *acc)
{
    for (int w = OPTIM__SUM_LANES / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    return acc[0];
}

/* Element i of a float32, F16 or BF16 gradient after unscaling (us = 1
 * without: the same bits) and clipvalue (cv = inf without). */
static inline float clipped(optim_dtype dt, const void *g, int64_t i, float us, float cv)
{
    float v = dt == OPTIM_F32 ? ((const float *)g)[i]
        : dt == OPTIM_F16     ? optim__f16_to_f32(((const uint16_t *)g)[i])
                              : optim__bf16_to_f32(((const uint16_t *)g)[i]);
    v = v / us;
    return v < -cv ? -cv : (v > cv ? cv : v);
}

/* One loop per dtype, so that each vectorises with its load inlined. */
#define SUMSQ_FLOAT(NAME, DT)                                        \
    static double NAME(const void *g, int64_t n, float us, float cv) \
    {                                                                \
        double acc[OPTIM__SUM_LANES] = {0};                          \
        int64_t i = 0;                                               \
        for (; i + OPTIM__SUM_LANES <= n; i += OPTIM__SUM_LANES)     \
            for (int j = 0; j < OPTIM__SUM_LANES; j++) {             \
                const double v = clipped(DT, g, i + j, us, cv);      \
                acc[j] += v * v;                                     \
            }                                                        \
        for (int j = 0; i < n; i++, j++) {                           \
            const double v = clipped(DT, g, i, us, cv);              \
            acc[j] += v * v;                                         \
        }                                                            \
        return add_lanes(acc);                                       \
    }
SUMSQ_FLOAT(sumsq_f32, OPTIM_F32)
SUMSQ_FLOAT(sumsq_f16, OPTIM_F16)
SUMSQ_FLOAT(sumsq_bf16, OPTIM_BF16)

static double sumsq_f64(const double *x, int64_t n, double us, double cv)
{
    double acc[OPTIM__SUM_LANES] = {0};
    int64_t i = 0;
    for (; i + OPTIM__SUM_LANES <= n; i += OPTIM__SUM_LANES)
        for (int j = 0; j < OPTIM__SUM_LANES; j++) {
            double v = x[i + j] / us;
            v = v < -cv ? -cv : (v > cv ? cv : v);
            acc[j] += v * v;
        }
    for (int j = 0; i < n; i++, j++) {
        double v = x[i] / us;
        v = v < -cv ? -cv : (v > cv ? cv : v);
        acc[j] += v * v;
    }
    return add_lanes(acc);
}

/* Sum of squares after unscaling and clipvalue, accumulated in double (TF
 * accumulates in the gradient's dtype, which overflows to inf for float32
 * norms above about 1.8e19; here each square is exact and only the sum
 * rounds). */
static double sumsq(optim_dtype dt, const void *g, int64_t n, const clip_desc *c)
{
    const double us = c->unscale != 0 ? c->unscale : 1, cv = c->has_cv ? c->cv : INFINITY;
    switch (dt) {
    case OPTIM_F64: return sumsq_f64(g, n, us, cv);
    case OPTIM_F16: return sumsq_f16(g, n, (float)us, (float)cv);
    case OPTIM_BF16: return sumsq_bf16(g, n, (float)us, (float)cv);
    default: return sumsq_f32(g, n, (float)us, (float)cv);
    }
}

const optim__clip_table OPTIM_ISA_NAME(optim__clip_kernels) = {clip_f32, clip_f64, sumsq};
