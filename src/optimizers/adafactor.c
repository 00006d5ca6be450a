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
#include "optim/isa.h"
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

/* The passes of one chunk, per type (adafactor_kernels.inc): f0, f1, f2
 * factored, u0, u1 not, with their sums and coefficients. */
#define T float
#define SQRT sqrtf
#include "adafactor_kernels.inc"
#define T double
#define SQRT sqrt
#include "adafactor_kernels.inc"

/* The whole update on one thread, chunk after chunk as the phases cut it
 * (so with the same bits): serial_unfactored_T and serial_factored_T. */
#define T float
#include "adafactor_serial.inc"
#define T double
#include "adafactor_serial.inc"

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

/* phase_T and reduce_T, the phases above per type (adafactor_phases.inc). */
#define T float
#include "adafactor_phases.inc"
#define T double
#include "adafactor_phases.inc"

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

/* Rank < 2: pass 1 reads w and g, reads and writes v; pass 2 reads g and v,
 * reads and writes w: 8 accesses (32 bytes in float32). Factored: pass 1
 * reads g and w, pass 2 g, pass 3 g and w and writes w and v: 7; and each
 * element of r is read and written in pass 1 and read by its reduction and
 * passes 2 and 3 (5), each of c read and written once and read in passes 2
 * and 3 (4). */
static double bytes_per_param(const optim_optimizer *opt, const optim_var *var)
{
    (void)opt;
    const geom G = geom_of(var);
    const double s = (double)optim_dtype_size(optim_var_dtype(var));
    if (G.n <= 0) return 0;
    if (!G.factored) return 8 * s;
    return s * (7.0 + (5.0 * (double)(G.B * G.R) + 4.0 * (double)(G.B * G.C)) / (double)G.n);
}

const optim_class OPTIM_ISA_NAME(optim_adafactor_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Adafactor",
    .min_slots = 3,
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
    .bytes_per_param = bytes_per_param,
};
