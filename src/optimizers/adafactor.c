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
 * LANES interleaved partial sums combined in a fixed order, per fixed chunk
 * of the variable, the chunks' sums then added in chunk order, and round the
 * sum to the dtype before dividing by the count, as tf.reduce_mean divides
 * a sum. TF's own summation order (Eigen's blocked reductions) is not
 * reproduced; the double sums are at least as accurate. The order depends
 * only on the shape, never on threads or on dense vs sparse.
 *
 * Memory: three passes over the variable for rank >= 2 (w and g; g; g, w
 * and v), two for rank < 2 (w, g and v; g, v and w). Dense gradients run
 * as phases (optim/optimizer_class.h): each pass on all threads over fixed
 * chunks, the chunks' sums (and column sums) reduced in chunk order between
 * passes. The sparse rule runs the same chunks on one thread, keeping the
 * column sums in double in v's memory, which pass 3 overwrites; no
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
 * hence the phases. Sparse gradients give the dense
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
    double rho; /* min(lr, 1 / sqrt(t)) */
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
    int64_t j; /* cursor into idx; reset to 0 before each pass */
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

/* Geometry. Rank < 2: chunks of CHUNK elements. Rank >= 2: the variable as
 * B matrices [R, C] (rows of the [B * R, C] view), in chunks of cu whole
 * rows that never cross a matrix: with B = 1 at least 4 rows, 8192 elements
 * and R / 64 rows (so the chunks' column sums stay under 64 x C doubles);
 * with B > 1 one matrix per chunk. Chunk boundaries depend only on the
 * shape. */
#define CHUNK 8192 /* whole BLKs */

typedef struct geom {
    int factored;
    int64_t n, B, R, C;
    int64_t cu, cpm; /* rows per chunk, chunks per matrix (factored) */
    int64_t ncol; /* column sums in a chunk's partial: C with several chunks per matrix */
} geom;

static geom geom_of(const optim_var *var)
{
    const int32_t rank = optim_var_rank(var);
    const int64_t *shape = optim_var_shape(var);
    geom g = {0, optim_var_numel(var), 0, 0, 0, 0, 0, 0};
    if (rank < 2 || g.n <= 0) return g;
    g.factored = 1;
    g.C = shape[rank - 1];
    g.R = shape[rank - 2];
    g.B = g.n / (g.R * g.C);
    g.cu = g.R;
    if (g.B == 1) {
        int64_t cu = (CHUNK + g.C - 1) / g.C, by_r = (g.R + 63) / 64;
        cu = cu < 4 ? 4 : cu;
        cu = cu < by_r ? by_r : cu;
        g.cu = cu < g.R ? cu : g.R;
    }
    g.cpm = (g.R + g.cu - 1) / g.cu;
    g.ncol = g.B == 1 && g.R > 1 ? g.C : 0;
    return g;
}

/* Rows [*q0, *q1) of the [B * R, C] view in chunk kk of matrix b. */
static void chunk_rows(const geom *g, int64_t b, int64_t kk, int64_t *q0, int64_t *q1)
{
    const int64_t end = (kk + 1) * g->cu;
    *q0 = b * g->R + kk * g->cu;
    *q1 = b * g->R + (end < g->R ? end : g->R);
}

/* Column sums may live in a variable's memory at any 4-byte offset (a
 * matrix's rows of v): memcpy makes no alignment or aliasing assumption. */
static inline double colsum_get(const unsigned char *s, int64_t j)
{
    double x;
    memcpy(&x, s + (size_t)j * sizeof x, sizeof x);
    return x;
}
static inline void colsum_add(unsigned char *s, int64_t j, double y)
{
    double x = colsum_get(s, j) + y;
    memcpy(s + (size_t)j * sizeof x, &x, sizeof x);
}

#define ADAFACTOR_KERNELS(T, SQRT)                                                                 \
    /* A zero gradient (rows without a sparse index), read like a dense one. */                    \
    static const T zeros_##T[BLK];                                                                 \
                                                                                                   \
    /* acc[lane] += x[j] for the m elements of x (m < BLK only at a row's end). */                 \
    static void lanes_add_##T(double *restrict acc, const T *restrict x, int64_t m)                \
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
    /* mean(x[0..n)) as tf.reduce_mean: the sum rounded to T, then / n. */                         \
    static T mean_##T(const T *x, int64_t n)                                                       \
    {                                                                                              \
        double acc[LANES] = {0};                                                                   \
        for (int64_t j = 0; j < n; j += BLK) lanes_add_##T(acc, x + j, n - j < BLK ? n - j : BLK); \
        return (T)lanes_total(acc) / (T)n;                                                         \
    }                                                                                              \
                                                                                                   \
    /* alpha_t from the sum of w^2, and max(1, RMS(u) / clip) from the sum of u^2. */              \
    static T alpha_##T(double sw, int64_t n, const coef *k)                                        \
    {                                                                                              \
        const T rms_w = SQRT((T)sw / (T)n), eps2 = (T)k->eps2;                                     \
        return (eps2 > rms_w ? eps2 : rms_w) * (T)k->rho;                                          \
    }                                                                                              \
    static T denom_##T(double su, int64_t n, const coef *k)                                        \
    {                                                                                              \
        const T q = SQRT((T)su / (T)n) / (T)k->clip, one = 1;                                      \
        return one > q ? one : q;                                                                  \
    }                                                                                              \
                                                                                                   \
    /* Factored pass 1 over rows [q0, q1) of one matrix: r of those rows, their                \
     * column sums of G = g^2 + eps1 into colsum (c itself when R == 1); returns                \
     * their sum of w^2. */   \
    static double f0_##T(const T *restrict w, gsrc *gs, T *restrict r, T *restrict c,              \
                         const geom *G, int64_t q0, int64_t q1, const coef *k,                     \
                         unsigned char *restrict colsum)                                           \
    {                                                                                              \
        const T beta = (T)k->beta, omb = (T)k->one_minus_beta, eps1 = (T)k->eps1, one = 1;         \
        const int64_t R = G->R, C = G->C;                                                          \
        const T *g = gs->g;                                                                        \
        T *cb = c + (q0 / R) * C, x[BLK], y[BLK];                                                  \
        double sw[LANES] = {0};                                                                    \
        if (R > 1) memset(colsum, 0, (size_t)C * sizeof(double));                                  \
        for (int64_t q = q0; q < q1; q++) {                                                        \
            const int64_t go = gsrc_offset(gs, q * C);                                             \
            const T *wr = w + q * C;                                                               \
            double rs[LANES] = {0};                                                                \
            for (int64_t j0 = 0; j0 < C; j0 += BLK) {                                              \
                const int64_t m = C - j0 < BLK ? C - j0 : BLK;                                     \
                const T *gb = go >= 0 ? g + go + j0 : zeros_##T;                                   \
                for (int64_t j = 0; j < m; j++) {                                                  \
                    x[j] = gb[j] * gb[j] + eps1;                                                   \
                    y[j] = wr[j0 + j] * wr[j0 + j];                                                \
                }                                                                                  \
                lanes_add_##T(rs, x, m);                                                           \
                lanes_add_##T(sw, y, m);                                                           \
                if (R > 1)                                                                         \
                    for (int64_t j = 0; j < m; j++) colsum_add(colsum, j0 + j, (double)x[j]);      \
                else /* mean over an axis of 1: x / 1 */                                           \
                    for (int64_t j = 0; j < m; j++)                                                \
                        cb[j0 + j] = beta * cb[j0 + j] + omb * (x[j] / one);                       \
            }                                                                                      \
            r[q] = beta * r[q] + omb * ((T)lanes_total(rs) / (T)C);                                \
        }                                                                                          \
        return lanes_total(sw);                                                                    \
    }                                                                                              \
                                                                                                   \
    /* c of matrix cb from its column sums (R > 1). */                                             \
    static void c_update_##T(T *cb, const unsigned char *colsum, const geom *G, const coef *k)     \
    {                                                                                              \
        const T beta = (T)k->beta, omb = (T)k->one_minus_beta;                                     \
        if (G->R > 1)                                                                              \
            for (int64_t j = 0; j < G->C; j++)                                                     \
                cb[j] = beta * cb[j] + omb * ((T)colsum_get(colsum, j) / (T)G->R);                 \
    }                                                                                              \
                                                                                                   \
    /* Factored pass 2: the sum of u^2 over rows [q0, q1), v = (r / mean(r)) c on the fly. */      \
    static double f1_##T(gsrc *gs, const T *r, const T *c, const geom *G, int64_t q0, int64_t q1,  \
                         T mr)                                                                     \
    {                                                                                              \
        const int64_t C = G->C;                                                                    \
        const T *g = gs->g, *cb = c + (q0 / G->R) * C;                                             \
        T x[BLK];                                                                                  \
        double su[LANES] = {0};                                                                    \
        for (int64_t q = q0; q < q1; q++) {                                                        \
            const int64_t go = gsrc_offset(gs, q * C);                                             \
            const T a = r[q] / mr;                                                                 \
            for (int64_t j0 = 0; j0 < C; j0 += BLK) {                                              \
                const int64_t m = C - j0 < BLK ? C - j0 : BLK;                                     \
                const T *gb = go >= 0 ? g + go + j0 : zeros_##T;                                   \
                for (int64_t j = 0; j < m; j++) {                                                  \
                    const T u = gb[j] / SQRT(a * cb[j0 + j]);                                      \
                    x[j] = u * u;                                                                  \
                }                                                                                  \
                lanes_add_##T(su, x, m);                                                           \
            }                                                                                      \
        }                                                                                          \
        return lanes_total(su);                                                                    \
    }                                                                                              \
                                                                                                   \
    /* Factored pass 3 over rows [q0, q1): v and w. */                                             \
    static void f2_##T(T *restrict w, gsrc *gs, const T *r, const T *c, T *restrict v,             \
                       const geom *G, int64_t q0, int64_t q1, T mr, T alpha, T d)                  \
    {                                                                                              \
        const int64_t C = G->C;                                                                    \
        const T *g = gs->g, *cb = c + (q0 / G->R) * C;                                             \
        const int d1 = d == 1; /* u / 1 is u: no division (unswitched) */                          \
        for (int64_t q = q0; q < q1; q++) {                                                        \
            const int64_t go = gsrc_offset(gs, q * C);                                             \
            const T a = r[q] / mr;                                                                 \
            T *wr = w + q * C, *vr = v + q * C;                                                    \
            for (int64_t j0 = 0; j0 < C; j0 += BLK) {                                              \
                const int64_t m = C - j0 < BLK ? C - j0 : BLK;                                     \
                const T *gb = go >= 0 ? g + go + j0 : zeros_##T;                                   \
                for (int64_t j = 0; j < m; j++) {                                                  \
                    const T vv = a * cb[j0 + j];                                                   \
                    const T u = gb[j] / SQRT(vv);                                                  \
                    vr[j0 + j] = vv;                                                               \
                    wr[j0 + j] = wr[j0 + j] - alpha * (d1 ? u : u / d);                            \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    /* Rank < 2, pass 1 over elements [e0, e1): v; the sums of w^2 and u^2 into                 \
     * s[0], s[1]. Lanes follow the flat index (a sparse rank-1 gradient has                    \
     * one element per row). */  \
    static void u0_##T(const T *restrict w, gsrc *gs, T *restrict v, int64_t e0, int64_t e1,       \
                       const coef *k, double *s)                                                   \
    {                                                                                              \
        const T beta = (T)k->beta, omb = (T)k->one_minus_beta, eps1 = (T)k->eps1;                  \
        const T *g = gs->g;                                                                        \
        const int64_t run = gs->idx ? 1 : e1 - e0;                                                 \
        T x[BLK], y[BLK];                                                                          \
        double sw[LANES] = {0}, su[LANES] = {0};                                                   \
        for (int64_t st = e0; st < e1; st += run) {                                                \
            const int64_t go = gsrc_offset(gs, st);                                                \
            for (int64_t b0 = 0; b0 < run; b0 += BLK) {                                            \
                const int64_t m = run - b0 < BLK ? run - b0 : BLK;                                 \
                const T *gb = go >= 0 ? g + go + b0 : zeros_##T;                                   \
                T *vb = v + st + b0;                                                               \
                const T *wb = w + st + b0;                                                         \
                for (int64_t e = 0; e < m; e++) {                                                  \
                    const T vv = beta * vb[e] + omb * (gb[e] * gb[e] + eps1);                      \
                    const T u = gb[e] / SQRT(vv);                                                  \
                    vb[e] = vv;                                                                    \
                    x[e] = wb[e] * wb[e];                                                          \
                    y[e] = u * u;                                                                  \
                }                                                                                  \
                if (gs->idx) {                                                                     \
                    sw[st % LANES] += (double)x[0];                                                \
                    su[st % LANES] += (double)y[0];                                                \
                } else {                                                                           \
                    lanes_add_##T(sw, x, m);                                                       \
                    lanes_add_##T(su, y, m);                                                       \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        s[0] = lanes_total(sw);                                                                    \
        s[1] = lanes_total(su);                                                                    \
    }                                                                                              \
                                                                                                   \
    /* Rank < 2, pass 2 over elements [e0, e1): w. */                                              \
    static void u1_##T(T *restrict w, gsrc *gs, const T *restrict v, int64_t e0, int64_t e1,       \
                       T alpha, T d)                                                               \
    {                                                                                              \
        const T *g = gs->g;                                                                        \
        const int d1 = d == 1;                                                                     \
        const int64_t run = gs->idx ? 1 : e1 - e0;                                                 \
        for (int64_t st = e0; st < e1; st += run) {                                                \
            const int64_t go = gsrc_offset(gs, st);                                                \
            for (int64_t b0 = 0; b0 < run; b0 += BLK) {                                            \
                const int64_t m = run - b0 < BLK ? run - b0 : BLK;                                 \
                const T *gb = go >= 0 ? g + go + b0 : zeros_##T;                                   \
                T *wb = w + st + b0;                                                               \
                const T *vb = v + st + b0;                                                         \
                for (int64_t e = 0; e < m; e++) {                                                  \
                    const T u = gb[e] / SQRT(vb[e]);                                               \
                    wb[e] = wb[e] - alpha * (d1 ? u : u / d);                                      \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
ADAFACTOR_KERNELS(float, sqrtf)
ADAFACTOR_KERNELS(double, sqrt)

/* The whole update on one thread, chunk after chunk as the phases cut it
 * (so with the same bits): rank < 2. */
#define ADAFACTOR_SERIAL(T)                                                                          \
    static void serial_unfactored_##T(T *w, gsrc *gs, T *v, const geom *G, const coef *k)            \
    {                                                                                                \
        double tsw = 0, tsu = 0, s[2];                                                               \
        gs->j = 0;                                                                                   \
        for (int64_t e = 0; e < G->n; e += CHUNK) {                                                  \
            u0_##T(w, gs, v, e, G->n - e < CHUNK ? G->n : e + CHUNK, k, s);                          \
            tsw += s[0];                                                                             \
            tsu += s[1];                                                                             \
        }                                                                                            \
        const T alpha = alpha_##T(tsw, G->n, k), d = denom_##T(tsu, G->n, k);                        \
        gs->j = 0;                                                                                   \
        for (int64_t e = 0; e < G->n; e += CHUNK)                                                    \
            u1_##T(w, gs, v, e, G->n - e < CHUNK ? G->n : e + CHUNK, alpha, d);                      \
    }                                                                                                \
    /* Rank >= 2. The column sums live in v's memory, which pass 3 rewrites: C                     \
     * doubles (R >= 2), 2 C with several chunks per matrix (then R > 4); v may                    \
     * start at any 4-byte offset (a half variable's float32 copy, half_step.c). */ \
    static void serial_factored_##T(T *w, gsrc *gs, T *r, T *c, T *v, const geom *G,                 \
                                    const coef *k)                                                   \
    {                                                                                                \
        unsigned char *total = (unsigned char *)v;                                                   \
        unsigned char *part = G->cpm > 1 ? total + (size_t)G->C * sizeof(double) : total;            \
        double tsw = 0, tsu = 0;                                                                     \
        int64_t q0, q1;                                                                              \
        gs->j = 0;                                                                                   \
        for (int64_t b = 0; b < G->B; b++) {                                                         \
            for (int64_t kk = 0; kk < G->cpm; kk++) {                                                \
                chunk_rows(G, b, kk, &q0, &q1);                                                      \
                tsw += f0_##T(w, gs, r, c, G, q0, q1, k, kk ? part : total);                         \
                for (int64_t j = 0; kk && G->R > 1 && j < G->C; j++)                                 \
                    colsum_add(total, j, colsum_get(part, j));                                       \
            }                                                                                        \
            c_update_##T(c + b * G->C, total, G, k);                                                 \
        }                                                                                            \
        const T alpha = alpha_##T(tsw, G->n, k);                                                     \
        gs->j = 0;                                                                                   \
        for (int64_t b = 0; b < G->B; b++) {                                                         \
            const T mr = mean_##T(r + b * G->R, G->R);                                               \
            for (int64_t kk = 0; kk < G->cpm; kk++) {                                                \
                chunk_rows(G, b, kk, &q0, &q1);                                                      \
                tsu += f1_##T(gs, r, c, G, q0, q1, mr);                                              \
            }                                                                                        \
        }                                                                                            \
        const T d = denom_##T(tsu, G->n, k);                                                         \
        gs->j = 0;                                                                                   \
        for (int64_t b = 0; b < G->B; b++) {                                                         \
            const T mr = mean_##T(r + b * G->R, G->R);                                               \
            for (int64_t kk = 0; kk < G->cpm; kk++) {                                                \
                chunk_rows(G, b, kk, &q0, &q1);                                                      \
                f2_##T(w, gs, r, c, v, G, q0, q1, mr, alpha, d);                                     \
            }                                                                                        \
        }                                                                                            \
    }
ADAFACTOR_SERIAL(float)
ADAFACTOR_SERIAL(double)

/* The whole variable, its slots (r, c, v) and a gradient source, on the
 * calling thread. */
static void update(optim_var *var, optim_dtype dt, void *w, void *const *slots, gsrc *gs,
                   const coef *k)
{
    const geom G = geom_of(var);
    if (G.n <= 0) return;
    if (!G.factored && dt == OPTIM_F32) serial_unfactored_float(w, gs, slots[S_V], &G, k);
    else if (!G.factored) serial_unfactored_double(w, gs, slots[S_V], &G, k);
    else if (dt == OPTIM_F32)
        serial_factored_float(w, gs, slots[S_R], slots[S_C], slots[S_V], &G, k);
    else serial_factored_double(w, gs, slots[S_R], slots[S_C], slots[S_V], &G, k);
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

/* ---- phases -------------------------------------------------------------------------------
 * Rank < 2: 0 v and the chunk's sums of w^2 and u^2 (partial[0], [1]); 1 w.
 * Rank >= 2: 0 r, the chunk's column sums (partial[0 .. C), only with B = 1
 * and R > 1) and sum of w^2 (partial[ncol]); 1 the sum of u^2
 * (partial[ncol + 1]); 2 v and w. With B > 1 a chunk is a whole matrix: it
 * keeps its column sums in its own rows of v (which pass 3 rewrites) and
 * updates c itself, so the partials stay two doubles per matrix. shared:
 * alpha, the clipping denominator, then mean(r) of each matrix. */

static void phase_plan(const optim_optimizer *opt, const optim_var *var, optim_phase_plan *plan)
{
    (void)opt;
    const geom G = geom_of(var);
    const int64_t lim = (int64_t)1 << 20;
    if (G.n <= 0 || (G.factored && (G.ncol + 2 > lim || G.B + 2 > lim)))
        return; /* whole, apply_dense */
    if (!G.factored) *plan = (optim_phase_plan){2, CHUNK, 2, 2, 0};
    else *plan = (optim_phase_plan){3, G.cu * G.C, (size_t)G.ncol + 2, (size_t)G.B + 2, 0};
}

#define ADAFACTOR_PHASES(T)                                                                       \
    static void phase_##T(const optim_phase_update *pu, const geom *G, gsrc *gs)                  \
    {                                                                                             \
        const optim_dense_update *u = &pu->dense;                                                 \
        T *w = u->param, *r = u->slots[S_R], *c = u->slots[S_C], *v = u->slots[S_V];              \
        double *p = pu->partial;                                                                  \
        const double *sh = pu->shared;                                                            \
        if (!G->factored) {                                                                       \
            const int64_t e0 = u->offset, e1 = e0 + u->count;                                     \
            if (pu->phase == 0) u0_##T(w, gs, v, e0, e1, u->coef, p);                             \
            else u1_##T(w, gs, v, e0, e1, (T)sh[0], (T)sh[1]);                                    \
            return;                                                                               \
        }                                                                                         \
        const int64_t q0 = u->offset / G->C, q1 = q0 + u->count / G->C, b = q0 / G->R;            \
        const T mr = (T)sh[2 + b];                                                                \
        unsigned char *own = (unsigned char *)(v + q0 * G->C); /* a matrix's rows of v (B > 1) */ \
        if (pu->phase == 0 && G->ncol) {                                                          \
            p[G->ncol] = f0_##T(w, gs, r, c, G, q0, q1, u->coef, (unsigned char *)p);             \
        } else if (pu->phase == 0) {                                                              \
            p[0] = f0_##T(w, gs, r, c, G, q0, q1, u->coef, own);                                  \
            c_update_##T(c + b * G->C, own, G, u->coef);                                          \
        } else if (pu->phase == 1) {                                                              \
            p[G->ncol + 1] = f1_##T(gs, r, c, G, q0, q1, mr);                                     \
        } else {                                                                                  \
            f2_##T(w, gs, r, c, v, G, q0, q1, mr, (T)sh[0], (T)sh[1]);                            \
        }                                                                                         \
    }                                                                                             \
    /* The chunks' partials in chunk order, as the serial update adds them. */                    \
    static void reduce_##T(const optim_phase_update *pu, const geom *G)                           \
    {                                                                                             \
        const optim_dense_update *u = &pu->dense;                                                 \
        const coef *k = u->coef;                                                                  \
        T *r = u->slots[S_R], *c = u->slots[S_C];                                                 \
        double *p = pu->partial, *sh = pu->shared, t0 = 0, t1 = 0;                                \
        if (!G->factored) {                                                                       \
            for (int64_t kk = 0; kk < pu->chunk && pu->phase == 0; kk++) {                        \
                t0 += p[2 * kk];                                                                  \
                t1 += p[2 * kk + 1];                                                              \
            }                                                                                     \
            if (pu->phase == 0) sh[0] = alpha_##T(t0, G->n, k), sh[1] = denom_##T(t1, G->n, k);   \
            return;                                                                               \
        }                                                                                         \
        const size_t np = (size_t)G->ncol + 2;                                                    \
        for (int64_t kk = 0; kk < pu->chunk && pu->phase < 2; kk++)                               \
            t0 += p[kk * np + G->ncol + pu->phase];                                               \
        if (pu->phase == 1) sh[1] = denom_##T(t0, G->n, k);                                       \
        if (pu->phase != 0) return;                                                               \
        sh[0] = alpha_##T(t0, G->n, k);                                                           \
        for (int64_t b = 0; b < G->B; b++) {                                                      \
            double *total = p + (size_t)(b * G->cpm) * np;                                        \
            for (int64_t kk = 1; kk < G->cpm && G->ncol; kk++)                                    \
                for (int64_t j = 0; j < G->C; j++) total[j] += total[kk * np + j];                \
            if (G->ncol) c_update_##T(c + b * G->C, (const unsigned char *)total, G, k);          \
            sh[2 + b] = mean_##T(r + b * G->R, G->R);                                             \
        }                                                                                         \
    }
ADAFACTOR_PHASES(float)
ADAFACTOR_PHASES(double)

static void apply_phase(const optim_phase_update *pu)
{
    const geom G = geom_of(pu->dense.var);
    gsrc gs = {pu->dense.grad, NULL, 0, 0, 0};
    if (pu->dense.dtype == OPTIM_F32) phase_float(pu, &G, &gs);
    else phase_double(pu, &G, &gs);
}

static void reduce_phase(const optim_phase_update *pu)
{
    const geom G = geom_of(pu->dense.var);
    if (pu->dense.dtype == OPTIM_F32) reduce_float(pu, &G);
    else reduce_double(pu, &G);
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
    .phase_plan = phase_plan,
    .apply_phase = apply_phase,
    .reduce_phase = reduce_phase,
    .keras3_module = "keras.optimizers",
    .keras_flags = OPTIM_KERAS_TF_KERAS,
};
