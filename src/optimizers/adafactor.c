/* Adafactor: adaptive learning rates with factored second moments.
 *
 * Shazeer & Stern, "Adafactor: Adaptive Learning Rates with Sublinear Memory
 * Cost" (ICML 2018), algorithms 4 and 5 with update clipping (section 5) and
 * relative step sizes (section 8). Keras 3 only (keras/src/optimizers/
 * adafactor.py, Adafactor.update_step); tf.keras has no legacy Adafactor.
 * With t = iterations + 1 in the variable's dtype, g the gradient, w the
 * variable, RMS(x) = sqrt(mean(x^2)) over the whole tensor:
 *
 *     rho_t    = min(lr, 1 / sqrt(t))
 *     alpha_t  = max(epsilon_2, RMS(w)) * rho_t
 *     G        = g^2 + epsilon_1
 *     beta_2_t = 1 - t^beta_2_decay
 *   rank >= 2 (factored over the last two dims, w viewed as [..., R, C]):
 *     r = beta_2_t * r + (1 - beta_2_t) * mean(G, axis=-1)       shape [..., R]
 *     c = beta_2_t * c + (1 - beta_2_t) * mean(G, axis=-2)       shape [..., C]
 *     v = (r / mean(r, axis=-1, keepdims))[..., None] * c[..., None, :]
 *   rank < 2:
 *     v = beta_2_t * v + (1 - beta_2_t) * G
 *   then:
 *     u        = g / sqrt(v)
 *     u_hat    = u / max(1, RMS(u) / clip_threshold)
 *     w        = w - alpha_t * u_hat
 *
 * Keras first sets lr = min(lr, 1/sqrt(t)) when relative_step is true and
 * the learning rate is not a callable, then takes rho_t = min(lr, 1/sqrt(t))
 * in every case; the two mins give the same number, so relative_step changes
 * nothing in Keras 3 and nothing here (it is kept as a config key). RMS(w) is
 * taken after the base class's decoupled weight decay, as Keras applies
 * weight decay before update_step.
 *
 * Precision: element-wise operations run in the variable's dtype in Keras's
 * order (g^2 and w^2 rounded before they are summed, as tf.square then
 * tf.reduce_mean); the reductions (the means and RMSs) add in double, in
 * LANES interleaved partial sums combined in a fixed order, and round the
 * sum to the dtype before dividing by the count, as tf.reduce_mean divides
 * a sum. TF's own summation order (Eigen's blocked reductions) is not
 * reproduced; the double sums are at least as accurate. The order depends
 * only on the shape, never on threads or on dense vs sparse.
 *
 * Memory: three passes over the variable for rank >= 2 (w and g; g; g, w
 * and v), two for rank < 2 (w, g and v; g, v and w). The column sums of
 * pass 1 are kept in double in v's memory, which pass 3 overwrites; no
 * allocation.
 *
 * Slots, in Keras's creation order (its _r, _c and _v lists): "r" and "c",
 * the factored row and column moments (shapes var.shape[:-1] and
 * var.shape[:-2] + [C]; for a variable of rank < 2 Keras keeps zero scalars
 * as placeholders, and so do we), and "v" (Keras's "velocity"), with the
 * variable's shape: the unfactored moment for rank < 2, the factored
 * estimate r c^T / mean(r) for rank >= 2 (Keras 3 stores it too).
 *
 * Not element-wise: every update needs RMS(w), RMS(u) and row/column means,
 * so apply_dense gets each variable whole. Sparse gradients give the dense
 * equivalent, as Keras 3 densifies IndexedSlices in this update_step: rows
 * without an index have g = 0, their G = epsilon_1 still enters r, c and v,
 * and their u = 0 leaves their w unchanged. */
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

#include <math.h>
#include <string.h>

enum { P_BETA_2_DECAY, P_EPSILON_1, P_EPSILON_2, P_CLIP_THRESHOLD, P_RELATIVE_STEP };

/* Keras 3 validates none of these; any finite number is accepted. */
static const optim_param adafactor_params[] = {
    {"beta_2_decay", OPTIM_PARAM_FLOAT, 0, -0.8, -INFINITY, INFINITY},
    {"epsilon_1", OPTIM_PARAM_FLOAT, 0, 1e-30, -INFINITY, INFINITY},
    {"epsilon_2", OPTIM_PARAM_FLOAT, 0, 1e-3, -INFINITY, INFINITY},
    {"clip_threshold", OPTIM_PARAM_FLOAT, 0, 1.0, -INFINITY, INFINITY},
    {"relative_step", OPTIM_PARAM_BOOL, 0, 1.0, 0.0, 1.0},
};

enum { S_R, S_C, S_V };

typedef struct coef {
    double rho;            /* min(lr, 1 / sqrt(t)) */
    double beta, one_minus_beta; /* beta_2_t, 1 - beta_2_t */
    double eps1, eps2, clip;
} coef;

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    /* Keras 3's build adds r, c and v variable by variable. */
    optim_set_slot_order(opt, OPTIM_SLOTS_BY_VARIABLE);
    int32_t rank = optim_var_rank(var);
    const int64_t *shape = optim_var_shape(var);
    int rc;
    if (rank < 2) {
        rc = optim_add_slot_shaped(opt, var, "r", 0, NULL, OPTIM_SLOT_ZEROS, 0);
        if (!rc) rc = optim_add_slot_shaped(opt, var, "c", 0, NULL, OPTIM_SLOT_ZEROS, 0);
    } else {
        int64_t cs[OPTIM_MAX_RANK];
        memcpy(cs, shape, (size_t)(rank - 2) * sizeof *cs);
        cs[rank - 2] = shape[rank - 1];
        rc = optim_add_slot_shaped(opt, var, "r", rank - 1, shape, OPTIM_SLOT_ZEROS, 0);
        if (!rc) rc = optim_add_slot_shaped(opt, var, "c", rank - 1, cs, OPTIM_SLOT_ZEROS, 0);
    }
    if (!rc) rc = optim_add_slot(opt, var, "v", OPTIM_SLOT_ZEROS, 0);
    return rc;
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    double lr = optim_learning_rate(opt, dtype);
    double t = (double)(optim_iterations(opt) + 1);
    double decay = optim_param_value(opt, P_BETA_2_DECAY);
    k->eps1 = optim_param_value(opt, P_EPSILON_1);
    k->eps2 = optim_param_value(opt, P_EPSILON_2);
    k->clip = optim_param_value(opt, P_CLIP_THRESHOLD);
    if (dtype == OPTIM_F32) {
        const float tf = (float)t, inv = 1.0f / sqrtf(tf), lrf = (float)lr;
        const float beta = 1.0f - powf(tf, (float)decay);
        k->rho = lrf < inv ? lrf : inv;
        k->beta = beta;
        k->one_minus_beta = 1.0f - beta;
        k->eps1 = (float)k->eps1;
        k->eps2 = (float)k->eps2;
        k->clip = (float)k->clip;
    } else {
        const double inv = 1.0 / sqrt(t), beta = 1.0 - pow(t, decay);
        k->rho = lr < inv ? lr : inv;
        k->beta = beta;
        k->one_minus_beta = 1.0 - beta;
    }
}

/* Where the gradient of a run of the variable lives: the dense gradient, or
 * the rows of a sparse one (unique ascending indices into the first dim,
 * row_size elements each; a row without an index has a zero gradient). */
typedef struct gsrc {
    const void *g;
    const int64_t *idx; /* NULL: dense */
    int64_t n, row_size;
    int64_t j;          /* cursor into idx; reset to 0 before each pass */
} gsrc;

/* Element offset into g of the gradient of the run starting at flat element
 * `start` (the run never crosses a first-dim row), or -1 if it is zero.
 * Within a pass, `start` must grow. */
static int64_t gsrc_offset(gsrc *s, int64_t start)
{
    if (!s->idx) return start;
    int64_t q = start / s->row_size;
    while (s->j < s->n && s->idx[s->j] < q) s->j++;
    if (s->j < s->n && s->idx[s->j] == q) return s->j * s->row_size + (start - q * s->row_size);
    return -1;
}

/* Kernels work on blocks of BLK elements: the element-wise part of a pass
 * fills small stack buffers (vectorisable), and the sums add those in
 * double, in LANES interleaved partial sums combined in a fixed order. The
 * lane of an element depends only on its index within its row (blocks are
 * whole multiples of LANES), so results depend neither on threads nor on
 * dense vs sparse. */
#define BLK 512
#define LANES 8

static double lanes_total(const double *a)
{
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

/* The column sums are doubles kept in v's memory, which the step rewrites
 * completely at its end; memcpy makes no alignment or aliasing assumption. */
static inline double scratch_get(const unsigned char *s, int64_t j)
{
    double x;
    memcpy(&x, s + (size_t)j * sizeof x, sizeof x);
    return x;
}
static inline void scratch_set(unsigned char *s, int64_t j, double x)
{
    memcpy(s + (size_t)j * sizeof x, &x, sizeof x);
}

#define ADAFACTOR_KERNELS(T, SQRT)                                                                 \
    /* A zero gradient (rows without a sparse index), read like a dense one. */                \
    static const T zeros_##T[BLK];                                                                 \
                                                                                                   \
    /* acc[lane] += x[j] for the m elements of x (m < BLK only at a row's end). */             \
    static void lanes_add_##T(double *restrict acc, const T *restrict x, int64_t m)               \
    {                                                                                              \
        double a[LANES];                                                                           \
        memcpy(a, acc, sizeof a);                                                                  \
        int64_t j = 0;                                                                             \
        for (; j + LANES <= m; j += LANES)                                                         \
            for (int l = 0; l < LANES; l++) a[l] += (double)x[j + l];                              \
        for (int l = 0; j < m; j++, l++) a[l] += (double)x[j];                                     \
        memcpy(acc, a, sizeof a);                                                                  \
    }                                                                                              \
                                                                                                   \
    /* mean(x[0..n)) as tf.reduce_mean: the sum rounded to T, then / n. */                     \
    static T mean_##T(const T *x, int64_t n)                                                       \
    {                                                                                              \
        double acc[LANES] = {0};                                                                   \
        for (int64_t j = 0; j < n; j += BLK) lanes_add_##T(acc, x + j, n - j < BLK ? n - j : BLK); \
        return (T)lanes_total(acc) / (T)n;                                                         \
    }                                                                                              \
                                                                                                   \
    /* w viewed as [B, R, C]; r is [B, R], c is [B, C], v is [B, R, C]. */                       \
    static void factored_##T(T *restrict w, gsrc *gs, T *restrict r, T *restrict c,                 \
                             T *restrict v, int64_t B, int64_t R, int64_t C, const coef *k)         \
    {                                                                                              \
        const T beta = (T)k->beta, omb = (T)k->one_minus_beta, eps1 = (T)k->eps1;                  \
        const T eps2 = (T)k->eps2, clip = (T)k->clip, rho = (T)k->rho, one = 1;                     \
        const T *g = gs->g;                                                                        \
        const int64_t n = B * R * C;                                                               \
        T x[BLK], y[BLK];                                                                          \
        /* C doubles fit in v: B*R*C elements of T, R >= 2 where used. */                         \
        unsigned char *colsum = (unsigned char *)v;                                                \
        /* Pass 1: sum of w^2; r and c from G = g^2 + eps1. */                                    \
        double sw[LANES] = {0};                                                                    \
        gs->j = 0;                                                                                 \
        for (int64_t b = 0; b < B; b++) {                                                          \
            T *cb = c + b * C;                                                                     \
            if (R > 1) memset(colsum, 0, (size_t)C * sizeof(double));                              \
            for (int64_t i = 0; i < R; i++) {                                                      \
                const int64_t row = (b * R + i) * C;                                               \
                const int64_t go = gsrc_offset(gs, row);                                           \
                const T *wr = w + row;                                                             \
                double rs[LANES] = {0};                                                            \
                for (int64_t j0 = 0; j0 < C; j0 += BLK) {                                          \
                    const int64_t m = C - j0 < BLK ? C - j0 : BLK;                                 \
                    const T *gb = go >= 0 ? g + go + j0 : zeros_##T;                               \
                    for (int64_t j = 0; j < m; j++) {                                              \
                        x[j] = gb[j] * gb[j] + eps1;                                               \
                        y[j] = wr[j0 + j] * wr[j0 + j];                                            \
                    }                                                                              \
                    lanes_add_##T(rs, x, m);                                                       \
                    lanes_add_##T(sw, y, m);                                                       \
                    if (R > 1)                                                                     \
                        for (int64_t j = 0; j < m; j++)                                            \
                            scratch_set(colsum, j0 + j, scratch_get(colsum, j0 + j) + (double)x[j]); \
                    else /* mean over an axis of 1: x / 1 */                                       \
                        for (int64_t j = 0; j < m; j++)                                            \
                            cb[j0 + j] = beta * cb[j0 + j] + omb * (x[j] / one);                   \
                }                                                                                  \
                r[b * R + i] = beta * r[b * R + i] + omb * ((T)lanes_total(rs) / (T)C);           \
            }                                                                                      \
            if (R > 1)                                                                             \
                for (int64_t j = 0; j < C; j++)                                                    \
                    cb[j] = beta * cb[j] + omb * ((T)scratch_get(colsum, j) / (T)R);               \
        }                                                                                          \
        const T rms_w = SQRT((T)lanes_total(sw) / (T)n);                                           \
        const T alpha = (eps2 > rms_w ? eps2 : rms_w) * rho;                                       \
        /* Pass 2: sum of u^2, v = (r / mean(r)) c computed on the fly. */                        \
        double su[LANES] = {0};                                                                    \
        gs->j = 0;                                                                                 \
        for (int64_t b = 0; b < B; b++) {                                                          \
            const T *rb = r + b * R, *cb = c + b * C;                                              \
            const T mr = mean_##T(rb, R);                                                          \
            for (int64_t i = 0; i < R; i++) {                                                      \
                const int64_t go = gsrc_offset(gs, (b * R + i) * C);                               \
                const T a = rb[i] / mr;                                                            \
                for (int64_t j0 = 0; j0 < C; j0 += BLK) {                                          \
                    const int64_t m = C - j0 < BLK ? C - j0 : BLK;                                 \
                    const T *gb = go >= 0 ? g + go + j0 : zeros_##T;                               \
                    for (int64_t j = 0; j < m; j++) {                                              \
                        const T u = gb[j] / SQRT(a * cb[j0 + j]);                                  \
                        x[j] = u * u;                                                              \
                    }                                                                              \
                    lanes_add_##T(su, x, m);                                                       \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        const T q = SQRT((T)lanes_total(su) / (T)n) / clip;                                        \
        const T d = one > q ? one : q;                                                             \
        /* Pass 3: v and w. */                                                                     \
        gs->j = 0;                                                                                 \
        for (int64_t b = 0; b < B; b++) {                                                          \
            const T *rb = r + b * R, *cb = c + b * C;                                              \
            const T mr = mean_##T(rb, R);                                                          \
            for (int64_t i = 0; i < R; i++) {                                                      \
                const int64_t row = (b * R + i) * C;                                               \
                const int64_t go = gsrc_offset(gs, row);                                           \
                const T a = rb[i] / mr;                                                            \
                T *wr = w + row, *vr = v + row;                                                    \
                for (int64_t j0 = 0; j0 < C; j0 += BLK) {                                          \
                    const int64_t m = C - j0 < BLK ? C - j0 : BLK;                                 \
                    const T *gb = go >= 0 ? g + go + j0 : zeros_##T;                               \
                    for (int64_t j = 0; j < m; j++) {                                              \
                        const T vv = a * cb[j0 + j];                                               \
                        const T u = gb[j] / SQRT(vv);                                              \
                        vr[j0 + j] = vv;                                                           \
                        wr[j0 + j] = wr[j0 + j] - alpha * (u / d);                                 \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* Rank < 2: n elements in runs of `run` (the whole variable when dense,                   \
     * one first-dim row when sparse). */                                                          \
    static void unfactored_##T(T *restrict w, gsrc *gs, T *restrict v, int64_t n, int64_t run,     \
                               const coef *k)                                                      \
    {                                                                                              \
        const T beta = (T)k->beta, omb = (T)k->one_minus_beta, eps1 = (T)k->eps1;                  \
        const T eps2 = (T)k->eps2, clip = (T)k->clip, rho = (T)k->rho, one = 1;                     \
        const T *g = gs->g;                                                                        \
        T x[BLK], y[BLK];                                                                          \
        /* Pass 1: sums of w^2 and u^2, v. Lanes follow the flat index. */                        \
        double sw[LANES] = {0}, su[LANES] = {0};                                                   \
        gs->j = 0;                                                                                 \
        for (int64_t s = 0; s < n; s += run) {                                                     \
            const int64_t go = gsrc_offset(gs, s);                                                 \
            for (int64_t e0 = 0; e0 < run; e0 += BLK) {                                            \
                const int64_t m = run - e0 < BLK ? run - e0 : BLK;                                 \
                const T *gb = go >= 0 ? g + go + e0 : zeros_##T;                                   \
                T *vb = v + s + e0;                                                                \
                const T *wb = w + s + e0;                                                          \
                for (int64_t e = 0; e < m; e++) {                                                  \
                    const T vv = beta * vb[e] + omb * (gb[e] * gb[e] + eps1);                      \
                    const T u = gb[e] / SQRT(vv);                                                  \
                    vb[e] = vv;                                                                    \
                    x[e] = wb[e] * wb[e];                                                          \
                    y[e] = u * u;                                                                  \
                }                                                                                  \
                if (run == 1) { /* sparse rank 1: one element per run */                          \
                    sw[s % LANES] += (double)x[0];                                                 \
                    su[s % LANES] += (double)y[0];                                                 \
                } else {                                                                           \
                    lanes_add_##T(sw, x, m);                                                       \
                    lanes_add_##T(su, y, m);                                                       \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        const T rms_w = SQRT((T)lanes_total(sw) / (T)n);                                           \
        const T alpha = (eps2 > rms_w ? eps2 : rms_w) * rho;                                       \
        const T q = SQRT((T)lanes_total(su) / (T)n) / clip;                                        \
        const T d = one > q ? one : q;                                                             \
        /* Pass 2: w. */                                                                           \
        gs->j = 0;                                                                                 \
        for (int64_t s = 0; s < n; s += run) {                                                     \
            const int64_t go = gsrc_offset(gs, s);                                                 \
            for (int64_t e0 = 0; e0 < run; e0 += BLK) {                                            \
                const int64_t m = run - e0 < BLK ? run - e0 : BLK;                                 \
                const T *gb = go >= 0 ? g + go + e0 : zeros_##T;                                   \
                T *wb = w + s + e0;                                                                \
                const T *vb = v + s + e0;                                                          \
                for (int64_t e = 0; e < m; e++) {                                                  \
                    const T u = gb[e] / SQRT(vb[e]);                                               \
                    wb[e] = wb[e] - alpha * (u / d);                                               \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
ADAFACTOR_KERNELS(float, sqrtf)
ADAFACTOR_KERNELS(double, sqrt)

/* The whole variable, its slots (r, c, v) and a gradient source. */
static void update(optim_var *var, optim_dtype dt, void *w, void *const *slots, gsrc *gs,
                   const coef *k)
{
    const int32_t rank = optim_var_rank(var);
    const int64_t *shape = optim_var_shape(var);
    const int64_t n = optim_var_numel(var);
    if (n <= 0) return;
    if (rank < 2) {
        const int64_t run = gs->idx ? gs->row_size : n;
        if (dt == OPTIM_F32) unfactored_float(w, gs, slots[S_V], n, run, k);
        else unfactored_double(w, gs, slots[S_V], n, run, k);
        return;
    }
    const int64_t C = shape[rank - 1], R = shape[rank - 2], B = n / (R * C);
    if (dt == OPTIM_F32) factored_float(w, gs, slots[S_R], slots[S_C], slots[S_V], B, R, C, k);
    else factored_double(w, gs, slots[S_R], slots[S_C], slots[S_V], B, R, C, k);
}

static void apply_dense(const optim_dense_update *u)
{
    gsrc gs = {u->grad, NULL, 0, 0, 0};
    update(u->var, u->dtype, u->param, u->slots, &gs, u->coef);
}

/* The dense equivalent: zero gradient on rows without an index. */
static void apply_sparse(const optim_sparse_update *u)
{
    gsrc gs = {u->values, u->indices, u->n, u->row_size, 0};
    update(u->var, u->dtype, u->param, u->slots, &gs, u->coef);
}

const optim_class optim_adafactor_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Adafactor",
    .flags = OPTIM_CLASS_KERAS3_ONLY,
    .default_learning_rate = 0.001,
    .params = adafactor_params,
    .n_params = sizeof adafactor_params / sizeof *adafactor_params,
    .coef_size = sizeof(coef),
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
};
