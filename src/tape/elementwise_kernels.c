/* The tape's element-wise inner loops (tape/kernels.h), built once per
 * instruction-set level: each computes element by element in the same
 * expression at every level (no contraction, no reassociation; exp, log
 * and tanh are libm's scalar functions), and the sums over broadcast
 * elements (a binary op's gradient into a side that stays) and over rows
 * (the bias's gradient) keep their order, so every level gives the same
 * bits. */
#include <tgmath.h>

#include "tape/kernels.h"

/* ---- binary ops over a contiguous run -------------------------------------------- */

#define SEG_BRANCH(T, SA, SB, ...)                                         \
    for (int64_t j = 0; j < len; j++) {                                    \
        const int64_t io = po + j, ia = pa + j * (SA), ib = pb + j * (SB); \
        const T x = A[ia], y = B[ib];                                      \
        (void)x;                                                           \
        (void)y;                                                           \
        __VA_ARGS__                                                        \
    }
#define SEG_LOOP(T, ...)                 \
    if (sa && sb) {                      \
        SEG_BRANCH(T, 1, 1, __VA_ARGS__) \
    } else if (sa) {                     \
        SEG_BRANCH(T, 1, 0, __VA_ARGS__) \
    } else if (sb) {                     \
        SEG_BRANCH(T, 0, 1, __VA_ARGS__) \
    } else {                             \
        SEG_BRANCH(T, 0, 0, __VA_ARGS__) \
    }

/* One side's gradient, FNAME: D[IDX] += (EXPR) with the side's index IDX (ia
 * or ib). EXPR uses g, x, y, o; BAD: where the op has no gradient (only
 * checked when g != 0). */
#define DEF_GRAD_T(FNAME, T, IDX, EXPR, BAD)                                                      \
    static void FNAME(optim__bin_ctx *c, int64_t po, int64_t pa, int64_t pb, int64_t len, int sa, \
                      int sb)                                                                     \
    {                                                                                             \
        const T *A = c->a, *B = c->b, *O = c->out, *G = c->g;                                     \
        T *D = c->dst;                                                                            \
        SEG_LOOP(T, {                                                                             \
            const T g = G[io], o = O[io];                                                         \
            (void)o;                                                                              \
            if (BAD) {                                                                            \
                if (g == 0) continue;                                                             \
                if (c->bad < 0) c->bad = io;                                                      \
                return;                                                                           \
            }                                                                                     \
            D[IDX] += (EXPR);                                                                     \
        })                                                                                        \
    }

/* FWD uses x, y; GA / GB add into the inputs at ia / ib (DEF_GRAD_T). */
#define DEF_BINARY_T(NAME, T, SFX, FWD, GA, GB, BAD)                                    \
    static void NAME##_fwd_##SFX(optim__bin_ctx *c, int64_t po, int64_t pa, int64_t pb, \
                                 int64_t len, int sa, int sb)                           \
    {                                                                                   \
        const T *A = c->a, *B = c->b;                                                   \
        T *O = (T *)c->out;                                                             \
        SEG_LOOP(T, O[io] = (FWD);)                                                     \
    }                                                                                   \
    DEF_GRAD_T(NAME##_ga_##SFX, T, ia, GA, BAD)                                         \
    DEF_GRAD_T(NAME##_gb_##SFX, T, ib, GB, BAD)

#define DEF_BINARY(NAME, FWD, GA, GB, BAD)           \
    DEF_BINARY_T(NAME, float, f32, FWD, GA, GB, BAD) \
    DEF_BINARY_T(NAME, double, f64, FWD, GA, GB, BAD)

DEF_BINARY(add, x + y, g, g, 0)
DEF_BINARY(sub, x - y, g, -g, 0)
DEF_BINARY(mul, x *y, g *y, g *x, 0)
/* TF's RealDiv gradient: g / y and g * ((-x / y) / y). */
DEF_BINARY(div, x / y, g / y, g *((-x / y) / y), y == 0)
DEF_BINARY(squared_error, (x - y) * (x - y), g *(2 * (x - y)), g *(-2 * (x - y)), 0)

/* ---- unary ops ---------------------------------------------------------------------- */

#define UNARY_FWD(NAME, T, EXPR)                          \
    static void NAME(const void *x_, void *o_, int64_t n) \
    {                                                     \
        const T *X = x_;                                  \
        T *O = o_;                                        \
        for (int64_t i = 0; i < n; i++) {                 \
            const T x = X[i];                             \
            O[i] = (EXPR);                                \
        }                                                 \
    }
/* Declares Z, a +0 of type T that the compiler cannot fold: Z + e has the
 * bits of adding e into a zeroed buffer (+0 + -0 = +0), and a loop writing
 * it vectorises where a literal 0 + e does not (GCC folds 0 + 0 in the
 * branches of a conditional e, and the branches stay). */
#define OPAQUE_ZERO(T, Z) \
    volatile T Z##_ = 0;  \
    const T Z = Z##_

/* EXPR may use x, o (the op's value) and g (the upstream gradient). The
 * loop is written twice so that each vectorises. */
#define UNARY_BWD(NAME, T, EXPR)                                                             \
    static int64_t NAME(const void *x_, const void *o_, const void *g_, void *d_, int64_t n, \
                        int set)                                                             \
    {                                                                                        \
        const T *X = x_, *O = o_, *G = g_;                                                   \
        T *D = d_;                                                                           \
        if (set) {                                                                           \
            OPAQUE_ZERO(T, zero);                                                            \
            for (int64_t i = 0; i < n; i++) {                                                \
                const T x = X[i], o = O[i], g = G[i];                                        \
                (void)x;                                                                     \
                (void)o;                                                                     \
                D[i] = zero + (EXPR);                                                        \
            }                                                                                \
            return -1;                                                                       \
        }                                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                    \
            const T x = X[i], o = O[i], g = G[i];                                            \
            (void)x;                                                                         \
            (void)o;                                                                         \
            D[i] += (EXPR);                                                                  \
        }                                                                                    \
        return -1;                                                                           \
    }
/* Same, for ops with a domain: where BAD holds and g != 0 there is no
 * gradient; where g == 0 the contribution is exactly 0. */
#define UNARY_BWD_CHECKED(NAME, T, BAD, EXPR)                                                \
    static int64_t NAME(const void *x_, const void *o_, const void *g_, void *d_, int64_t n, \
                        int set)                                                             \
    {                                                                                        \
        const T *X = x_, *O = o_, *G = g_;                                                   \
        T *D = d_;                                                                           \
        for (int64_t i = 0; i < n; i++) {                                                    \
            const T x = X[i], o = O[i], g = G[i];                                            \
            (void)o;                                                                         \
            if (g == 0) {                                                                    \
                if (set) D[i] = 0;                                                           \
                continue;                                                                    \
            }                                                                                \
            if (BAD) return i;                                                               \
            D[i] = (set ? (T)0 : D[i]) + (EXPR);                                             \
        }                                                                                    \
        return -1;                                                                           \
    }

#define DEF_UNARY(NAME, FWD, BWD)          \
    UNARY_FWD(NAME##_fwd_f32, float, FWD)  \
    UNARY_FWD(NAME##_fwd_f64, double, FWD) \
    UNARY_BWD(NAME##_bwd_f32, float, BWD)  \
    UNARY_BWD(NAME##_bwd_f64, double, BWD)
#define DEF_UNARY_CHECKED(NAME, FWD, BAD, BWD)         \
    UNARY_FWD(NAME##_fwd_f32, float, FWD)              \
    UNARY_FWD(NAME##_fwd_f64, double, FWD)             \
    UNARY_BWD_CHECKED(NAME##_bwd_f32, float, BAD, BWD) \
    UNARY_BWD_CHECKED(NAME##_bwd_f64, double, BAD, BWD)

DEF_UNARY(neg, -x, -g)
DEF_UNARY(square, x *x, g *(2 * x))
/* TF's SqrtGrad: g * 0.5 / y; undefined at x <= 0 (infinite or NaN). A NaN
 * input propagates, as in TF. */
DEF_UNARY_CHECKED(sqrt, sqrt(x), x <= 0, g * 0.5f / o)
DEF_UNARY(exp, exp(x), g *o)
/* TF's log gradient: g * (1 / x); undefined at x <= 0 (NaN propagates). */
DEF_UNARY_CHECKED(log, log(x), x <= 0, g *(1 / x))
DEF_UNARY(tanh, tanh(x), g *(1 - o * o))
/* Stable both ways: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below. */
DEF_UNARY(sigmoid, x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)), g *(o *(1 - o)))
DEF_UNARY(relu, x > 0 ? x : 0, x > 0 ? g : 0)
/* Ops whose expressions need their type T: FWD(T) and BWD(T) are
 * function-like macros giving the expressions. */
#define DEF_UNARY_TYPED(NAME, FWD, BWD)            \
    UNARY_FWD(NAME##_fwd_f32, float, FWD(float))   \
    UNARY_FWD(NAME##_fwd_f64, double, FWD(double)) \
    UNARY_BWD(NAME##_bwd_f32, float, BWD(float))   \
    UNARY_BWD(NAME##_bwd_f64, double, BWD(double))

/* gelu, Keras 3's default (approximate=False): x P(X <= x) for X ~ N(0, 1),
 * 0.5 x (1 + erf(x / sqrt 2)), written 0.5 x erfc(-x / sqrt 2): the same
 * function without 1 + erf's cancellation for x < 0 (where erf is near -1).
 * Gradient P(X <= x) + x phi(x), with phi(x) = exp(-x^2 / 2) / sqrt(2 pi);
 * at large |x| the second term is x * 0 = 0 (x^2 overflows to inf, exp to
 * 0), so no NaN. */
#define GELU_RSQRT2 0.70710678118654752440
#define GELU_RSQRT2PI 0.39894228040143267794
#define GELU_CDF(T) ((T)0.5 * erfc(-x * (T)GELU_RSQRT2))
#define GELU_FWD(T) (x * GELU_CDF(T))
#define GELU_BWD(T) (g * (GELU_CDF(T) + x * (exp(-(T)0.5 * (x * x)) * (T)GELU_RSQRT2PI)))
DEF_UNARY_TYPED(gelu, GELU_FWD, GELU_BWD)

/* gelu with approximate=True (tf.nn.gelu's tanh form):
 * 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3), computed as
 * x sigmoid(2u), the same function without 1 + tanh's cancellation for
 * x < 0. Gradient s + x s (1 - s) 2 u' with s = sigmoid(2u) and u' =
 * sqrt(2 / pi) (1 + 3 * 0.044715 x^2); the second term is skipped at
 * |x| >= 1e10, where s (1 - s) is exactly 0 and x^2 might overflow (0 * inf
 * would be NaN). */
#define GELU_C2 1.59576912160573071176 /* 2 sqrt(2 / pi) */
#define GELU_A 0.044715
#define SIGMOID_FN(T, SFX)                                                             \
    static inline T sigmoid_##SFX(T z)                                                 \
    {                                                                                  \
        return z >= 0 ? 1 / (1 + exp(-z)) : exp(z) / (1 + exp(z));                     \
    }                                                                                  \
    static inline T gelu_tanh_##SFX(T x)                                               \
    {                                                                                  \
        return x * sigmoid_##SFX((T)GELU_C2 * (x + (T)GELU_A * (x * x * x)));          \
    }                                                                                  \
    static inline T gelu_tanh_d_##SFX(T x)                                             \
    {                                                                                  \
        const T s = sigmoid_##SFX((T)GELU_C2 * (x + (T)GELU_A * (x * x * x)));         \
        if (!(fabs(x) < (T)1e10)) return s;                                            \
        return s + x * (s * (1 - s)) * ((T)GELU_C2 * (1 + (T)(3 * GELU_A) * (x * x))); \
    }
SIGMOID_FN(float, f)
SIGMOID_FN(double, d)
#define GELU_TANH_FWD(T) _Generic(x, float : gelu_tanh_f, double : gelu_tanh_d)(x)
#define GELU_TANH_BWD(T) (g * _Generic(x, float : gelu_tanh_d_f, double : gelu_tanh_d_d)(x))
DEF_UNARY_TYPED(gelu_tanh, GELU_TANH_FWD, GELU_TANH_BWD)

/* silu (swish): x sigmoid(x), with sigmoid's stable form above; gradient
 * s (1 + x (1 - s)). */
#define SILU_S(T) (x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)))
#define SILU_FWD(T) (x * SILU_S(T))
#define SILU_BWD(T) (g * (SILU_S(T) * (1 + x * (1 - SILU_S(T)))))
DEF_UNARY_TYPED(silu, SILU_FWD, SILU_BWD)

/* ---- clip, the first pass ----------------------------------------------------------- */

#define CLIP(T, SFX)                                                                           \
    static void clip_fwd_##SFX(const void *x_, void *y_, int64_t n, double lo, double hi)      \
    {                                                                                          \
        const T *X = x_, l = (T)lo, h = (T)hi;                                                 \
        T *Y = y_;                                                                             \
        for (int64_t i = 0; i < n; i++) Y[i] = X[i] < l ? l : X[i] > h ? h : X[i];             \
    }                                                                                          \
    static void clip_bwd_##SFX(const void *x_, const void *g_, void *d_, int64_t n, double lo, \
                               double hi)                                                      \
    {                                                                                          \
        const T *X = x_, *G = g_, l = (T)lo, h = (T)hi;                                        \
        T *D = d_;                                                                             \
        for (int64_t i = 0; i < n; i++)                                                        \
            if (X[i] >= l && X[i] <= h) D[i] += G[i];                                          \
    }                                                                                          \
    static void pass_##SFX(const void *g_, void *d_, int64_t n)                                \
    {                                                                                          \
        const T *G = g_;                                                                       \
        T *D = d_;                                                                             \
        for (int64_t i = 0; i < n; i++) D[i] = (T)0 + G[i];                                    \
    }
CLIP(float, f32)
CLIP(double, f64)

/* ---- relu(x + bias) ----------------------------------------------------------------- */

#define BIAS_RELU_FWD(T, SFX)                                                               \
    static void bias_relu_fwd_##SFX(const void *x_, const void *b_, void *y_, int64_t rows, \
                                    int64_t cols)                                           \
    {                                                                                       \
        const T *X = x_, *B = b_;                                                           \
        T *Y = y_;                                                                          \
        for (int64_t r = 0; r < rows; r++)                                                  \
            for (int64_t c = 0; c < cols; c++) {                                            \
                const T s = X[r * cols + c] + B[c];                                         \
                Y[r * cols + c] = s > 0 ? s : 0;                                            \
            }                                                                               \
    }
BIAS_RELU_FWD(float, f32)
BIAS_RELU_FWD(double, f64)

/* A row at a time, each loop branch-free (y and g loaded before the
 * select, so that it vectorises). */
#define BIAS_RELU_BWD(T, SFX)                                                           \
    static void bias_relu_bwd_##SFX(const void *y_, const void *g_, void *dx, void *db, \
                                    int64_t rows, int64_t cols, int set)                \
    {                                                                                   \
        OPAQUE_ZERO(T, zero);                                                           \
        for (int64_t r = 0; r < rows; r++) {                                            \
            const T *restrict y = (const T *)y_ + r * cols,                             \
                              *restrict g = (const T *)g_ + r * cols;                   \
            T *restrict d = dx ? (T *)dx + r * cols : NULL, *restrict bias = db;        \
            if (d && set)                                                               \
                for (int64_t c = 0; c < cols; c++) {                                    \
                    const T yc = y[c], gc = g[c];                                       \
                    d[c] = zero + (yc > 0 ? gc : 0);                                    \
                }                                                                       \
            else if (d)                                                                 \
                for (int64_t c = 0; c < cols; c++) {                                    \
                    const T yc = y[c], gc = g[c];                                       \
                    d[c] += zero + (yc > 0 ? gc : 0);                                   \
                }                                                                       \
            if (bias)                                                                   \
                for (int64_t c = 0; c < cols; c++) {                                    \
                    const T yc = y[c], gc = g[c];                                       \
                    bias[c] += zero + (yc > 0 ? gc : 0);                                \
                }                                                                       \
        }                                                                               \
    }
BIAS_RELU_BWD(float, f32)
BIAS_RELU_BWD(double, f64)

/* ---- the cross-entropy losses' element loops ------------------------------------ */

/* The targets' gradient is written -(g x), not g * -x (the same bits but
 * for NaN): x86 returns the first operand's NaN, and a level may swap a
 * product's operands, so a product of NaN and -NaN has no fixed sign. */
#define BCE(T, SFX)                                                                               \
    static void bce_fwd_##SFX(const void *x_, const void *z_, void *o_, int64_t n)                \
    {                                                                                             \
        const T *X = x_, *Z = z_;                                                                 \
        T *O = o_;                                                                                \
        for (int64_t i = 0; i < n; i++) {                                                         \
            const T x = X[i];                                                                     \
            O[i] = (x > 0 ? x : 0) - x * Z[i] + log1p(exp(-fabs(x)));                             \
        }                                                                                         \
    }                                                                                             \
    static void bce_bwd_##SFX(const void *x_, const void *z_, const void *g_, void *dx, void *dz, \
                              int64_t n)                                                          \
    {                                                                                             \
        const T *X = x_, *Z = z_, *G = g_;                                                        \
        T *D = dx, *E = dz;                                                                       \
        if (D)                                                                                    \
            for (int64_t i = 0; i < n; i++) {                                                     \
                const T xi = X[i];                                                                \
                const T s = xi >= 0 ? 1 / (1 + exp(-xi)) : exp(xi) / (1 + exp(xi));               \
                D[i] += G[i] * (s - Z[i]);                                                        \
            }                                                                                     \
        if (E)                                                                                    \
            for (int64_t i = 0; i < n; i++) E[i] += -(G[i] * X[i]);                               \
    }
BCE(float, f32)
BCE(double, f64)

#define SCE_BWD(T, SFX)                                                                        \
    static void sce_bwd_##SFX(const void *p_, const void *g_, const int64_t *label, void *dx_, \
                              int64_t rows, int64_t cols)                                      \
    {                                                                                          \
        const T *P = p_, *G = g_;                                                              \
        T *D = dx_;                                                                            \
        for (int64_t r = 0; r < rows; r++) {                                                   \
            const T g = G[r];                                                                  \
            const T *p = P + r * cols;                                                         \
            T *dx = D + r * cols;                                                              \
            for (int64_t c = 0; c < cols; c++) dx[c] += g * p[c];                              \
            dx[label[r]] -= g;                                                                 \
        }                                                                                      \
    }
SCE_BWD(float, f32)
SCE_BWD(double, f64)

/* ---- the table ---------------------------------------------------------------------- */

#define PAIR(NAME)             \
    {                          \
        NAME##_f32, NAME##_f64 \
    }
#define UN(NAME) [OPTIM__UN_##NAME]

const optim__tape_table OPTIM_ISA_NAME(optim__tape_kernels) = {
    .fwd = {PAIR(add_fwd), PAIR(sub_fwd), PAIR(mul_fwd), PAIR(div_fwd), PAIR(squared_error_fwd)},
    .ga = {PAIR(add_ga), PAIR(sub_ga), PAIR(mul_ga), PAIR(div_ga), PAIR(squared_error_ga)},
    .gb = {PAIR(add_gb), PAIR(sub_gb), PAIR(mul_gb), PAIR(div_gb), PAIR(squared_error_gb)},
    .ufwd = {UN(NEG) = PAIR(neg_fwd), UN(SQUARE) = PAIR(square_fwd), UN(SQRT) = PAIR(sqrt_fwd),
             UN(EXP) = PAIR(exp_fwd), UN(LOG) = PAIR(log_fwd), UN(TANH) = PAIR(tanh_fwd),
             UN(SIGMOID) = PAIR(sigmoid_fwd), UN(RELU) = PAIR(relu_fwd), UN(GELU) = PAIR(gelu_fwd),
             UN(GELU_TANH) = PAIR(gelu_tanh_fwd), UN(SILU) = PAIR(silu_fwd)},
    .ubwd = {UN(NEG) = PAIR(neg_bwd), UN(SQUARE) = PAIR(square_bwd), UN(SQRT) = PAIR(sqrt_bwd),
             UN(EXP) = PAIR(exp_bwd), UN(LOG) = PAIR(log_bwd), UN(TANH) = PAIR(tanh_bwd),
             UN(SIGMOID) = PAIR(sigmoid_bwd), UN(RELU) = PAIR(relu_bwd), UN(GELU) = PAIR(gelu_bwd),
             UN(GELU_TANH) = PAIR(gelu_tanh_bwd), UN(SILU) = PAIR(silu_bwd)},
    .clip_fwd = PAIR(clip_fwd),
    .clip_bwd = PAIR(clip_bwd),
    .pass = PAIR(pass),
    .bias_relu_fwd = PAIR(bias_relu_fwd),
    .bias_relu_bwd = PAIR(bias_relu_bwd),
    .bce_fwd = PAIR(bce_fwd),
    .bce_bwd = PAIR(bce_bwd),
    .sce_bwd = PAIR(sce_bwd),
};
