/* Muon: momentum orthogonalised by Newton-Schulz, with AdamW for the rest.
 *
 * Jordan et al., "Muon: An optimizer for hidden layers in neural networks"
 * (2024, github.com/KellerJordan/Muon), with the update scaling of Liu et
 * al., "Muon is Scalable for LLM Training" (arXiv:2502.16982). Keras 3 only
 * (keras-team/keras keras/src/optimizers/muon.py at commit 3422977a5e38, last
 * changed by 8e5f32534c65; tests in muon_test.py); tf.keras has no legacy
 * Muon. t = iterations + 1.
 *
 * Which rule a variable gets is fixed when its slots are created (Keras's
 * build, _should_use_adamw): AdamW unless the variable is 2-D; AdamW if
 * exclude_embeddings and its name contains "embedding" (any case); AdamW if
 * one of the exclude_layers patterns is found in its name (re.search, as
 * core/pyre.c matches Python's patterns); Muon otherwise. Keras up to 3.12 also sent 3-D variables to Muon;
 * since keras-team/keras#21885 (d130816c4a7f) only 2-D ones, as here.
 *
 * Muon step, w of shape [r, c], lr the learning rate:
 *
 *     m = m + (g + m * (momentum - 1))
 *     G = g + momentum * m   (nesterov)   or   G = m
 *     X = G, transposed to [c, r] when r > c (so X has p <= q, shape [p, q])
 *     X = X / (||X||_F + 1e-7)
 *     ns_steps times:  A = X X^T;  B = b A + c A A;  X = a X + B X
 *     U = X, transposed back
 *     w = w - ((lr * U) * sqrt(max(r, c))) * rms_rate   (rms_rate None: w - lr * U)
 *
 * with (a, b, c) = (muon_a, muon_b, muon_c). The products are CBLAS gemms
 * (sgemm / dgemm, the BLAS of the tape), B A and A A accumulated by gemm's
 * beta (c A A + b A, where Keras computes (c A) A + b A: rounding only). The
 * Frobenius norm sums squares in double in a fixed order and rounds once.
 *
 * AdamW step (Keras's _adamw_update_step, the Adam rule), lr_a = lr *
 * adam_lr_ratio:
 *
 *     alpha = lr_a * sqrt(1 - adam_beta_2^t) / (1 - adam_beta_1^t)
 *     m = m + (g - m) * (1 - adam_beta_1)
 *     v = v + (g^2 - v) * (1 - adam_beta_2)
 *     w = w - (m * alpha) / (sqrt(v) + epsilon)
 *
 * Weight decay (Muon._apply_weight_decay, through the class's weight_decay
 * hook), before the step, w = w - w * wd * lr with the unscaled lr: wd is
 * adam_weight_decay for AdamW variables and the base weight_decay for Muon
 * ones; None skips it; exclude_from_weight_decay applies to both.
 *
 * Sparse gradients: the dense equivalent (Keras densifies IndexedSlices in
 * these ops): zero gradient on rows without an index.
 *
 * Slots, per variable in Keras's build order: "momentum", then "velocity" for
 * AdamW variables only. A Muon variable also keeps a scratch block of
 * 2pq + 2p^2 elements for the iteration (allocated when its slots are, so
 * that a step cannot fail for want of memory); it is not a weight. */
#define _POSIX_C_SOURCE 200809L
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"
#include "optimizers/var_scratch.h"

#include <cblas.h>
#include <math.h>
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum {
    P_BETA_1,
    P_BETA_2,
    P_EPSILON,
    P_A,
    P_B,
    P_C,
    P_LR_RATIO,
    P_MOMENTUM,
    P_NS_STEPS,
    P_NESTEROV,
    P_EXCLUDE_EMB,
    P_ADAM_WD,
    P_RMS_RATE
};

/* Keras's get_config order (exclude_layers, not a number, goes after
 * epsilon). Keras validates none of them; the ranges are optim's guards. */
static const optim_param muon_params[] = {
    {"adam_beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.9, 0.0,
     1.0},
    {"adam_beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.999, 0.0,
     1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, 0, 1e-7, 0.0, INFINITY},
    {"muon_a", OPTIM_PARAM_FLOAT, 0, 3.4445, -INFINITY, INFINITY},
    {"muon_b", OPTIM_PARAM_FLOAT, 0, -4.7750, -INFINITY, INFINITY},
    {"muon_c", OPTIM_PARAM_FLOAT, 0, 2.0315, -INFINITY, INFINITY},
    /* Keras's default is the int 1 and is written as 1 (COUNT: whole values
     * without ".0"). */
    {"adam_lr_ratio", OPTIM_PARAM_FLOAT, OPTIM_PARAM_COUNT, 1.0, 0.0, INFINITY},
    {"momentum", OPTIM_PARAM_FLOAT, 0, 0.95, 0.0, 1.0},
    {"ns_steps", OPTIM_PARAM_INT, 0, 5.0, 0.0, 1000.0},
    {"nesterov", OPTIM_PARAM_BOOL, 0, 1.0, 0.0, 1.0},
    {"exclude_embeddings", OPTIM_PARAM_BOOL, 0, 1.0, 0.0, 1.0},
    {"adam_weight_decay", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE, 0.004, 0.0, INFINITY},
    {"rms_rate", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE, 0.2, 0.0, INFINITY},
};

/* exclude_layers: a list of patterns, read and written by the base; null
 * reads as [] (`exclude_layers or []`). */
static const optim_param muon_patterns[] = {
    {"exclude_layers", OPTIM_PARAM_PATTERNS, 0, 0.0, 0, 0},
};

/* Scratch of one Muon variable: X, Y [p, q], A, B [p, p] in its dtype. */
typedef struct state {
    optim__scratch_set scratch;
} state;

/* ---- exclude_layers -------------------------------------------------------------- */

/* Keras writes `self.exclude_layers or []` after epsilon, before muon_a. */
static int get_config(optim_optimizer *opt, optim_config *cfg)
{
    return optim_config_move_before(cfg, muon_patterns[0].name, "muon_a");
}

/* ---- which rule, scratch ------------------------------------------------------------ */

static int wants_adamw(const optim_optimizer *opt, const optim_var *var)
{
    if (optim_var_rank(var) != 2) return 1;
    const char *name = optim_var_name(var);
    if (optim_param_value(opt, P_EXCLUDE_EMB) != 0)
        for (const char *p = name; *p; p++)
            if (strncasecmp(p, "embedding", 9) == 0) return 1;
    return optim_name_patterns_match(optim_param_patterns(opt, 0), name);
}

static void *scratch_of(const optim_optimizer *opt, const optim_var *var)
{
    return optim__scratch_of(&((const state *)optim_state(opt))->scratch, var);
}

static int add_scratch(optim_optimizer *opt, const optim_var *var)
{
    const int64_t r = optim_var_shape(var)[0], c = optim_var_shape(var)[1];
    const int64_t p = r < c ? r : c, q = r < c ? c : r;
    const size_t bytes = (size_t)(2 * p * q + 2 * p * p) *
        optim_dtype_size(optim_compute_dtype(optim_var_dtype(var)));
    return optim__scratch_reserve(&((state *)optim_state(opt))->scratch, var, bytes);
}

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    optim_set_slot_order(opt, OPTIM_SLOTS_BY_VARIABLE);
    const int adamw = wants_adamw(opt, var);
    int rc = optim_add_slot(opt, var, "momentum", OPTIM_SLOT_ZEROS, 0);
    if (!rc && adamw) rc = optim_add_slot(opt, var, "velocity", OPTIM_SLOT_ZEROS, 0);
    const int64_t *sh = optim_var_shape(var);
    if (!rc && !adamw && (sh[0] > INT_MAX || sh[1] > INT_MAX))
        rc = optim_set_error(opt, OPTIM_ERANGE,
                             "Muon: '%s' has shape [%lld, %lld]; the BLAS takes "
                             "dimensions up to %d",
                             optim_var_name(var), (long long)sh[0], (long long)sh[1], INT_MAX);
    else if (!rc && !adamw && add_scratch(opt, var))
        rc = optim_set_error(opt, OPTIM_ENOMEM,
                             "Muon: out of memory for the Newton-Schulz scratch of '%s'",
                             optim_var_name(var));
    return rc;
}

static void destroy(optim_optimizer *opt)
{
    optim__scratch_free(&((state *)optim_state(opt))->scratch);
}

/* Muon._apply_weight_decay: the AdamW variables (those with a velocity)
 * decay by adam_weight_decay, the others by the base weight_decay. */
static double weight_decay(const optim_optimizer *opt, const optim_var *var, double wd)
{
    return optim_get_slot(opt, var, "velocity") ? optim_param_value(opt, P_ADAM_WD) : wd;
}

/* ---- per-step constants ------------------------------------------------------------ */

typedef struct coef {
    double lr, alpha, c1, c2, eps; /* AdamW */
    double mom, mom_1, a, b, c, rms; /* Muon; rms NAN for None */
    int ns_steps, nesterov;
} coef;

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *out)
{
    coef *k = out;
    const double b1 = optim_param_value(opt, P_BETA_1), b2 = optim_param_value(opt, P_BETA_2);
    const double lr = optim_learning_rate(opt, dtype), ratio = optim_param_value(opt, P_LR_RATIO);
    const double t = (double)(optim_iterations(opt) + 1);
    k->lr = lr;
    k->c1 = 1.0 - b1;
    k->c2 = 1.0 - b2;
    k->mom = optim_param_value(opt, P_MOMENTUM);
    k->mom_1 = k->mom - 1.0;
    k->eps = optim_param_value(opt, P_EPSILON);
    k->a = optim_param_value(opt, P_A);
    k->b = optim_param_value(opt, P_B);
    k->c = optim_param_value(opt, P_C);
    k->rms = optim_param_value(opt, P_RMS_RATE);
    k->ns_steps = (int)optim_param_value(opt, P_NS_STEPS);
    k->nesterov = optim_param_value(opt, P_NESTEROV) != 0;
    if (dtype == OPTIM_F32) {
        /* Keras casts lr * adam_lr_ratio and the betas to the dtype and
         * computes alpha there; the Python-number constants are cast. */
        const float la = (float)(lr * ratio), f1 = (float)b1, f2 = (float)b2, ft = (float)t;
        k->alpha = la * sqrtf(1.0f - powf(f2, ft)) / (1.0f - powf(f1, ft));
        double *d[] = {&k->c1, &k->c2, &k->mom, &k->mom_1, &k->eps, &k->a, &k->b, &k->c, &k->rms};
        for (size_t i = 0; i < sizeof d / sizeof *d; i++) *d[i] = (float)*d[i];
    } else {
        k->alpha = lr * ratio * sqrt(1.0 - pow(b2, t)) / (1.0 - pow(b1, t));
    }
}

/* ---- the two rules ------------------------------------------------------------------- */

/* Row-major gemm C = alpha op(X) op(Y) + beta C, op(X) [m, k], op(Y) [k, n].
 * On one thread: the OpenMP build of OpenBLAS would take OpenMP's thread
 * count, all of it when the step runs on one thread and one thread inside a
 * step on several, and its results depend on its thread count; so that the
 * step gives the same bits on any number of threads. (The setting is the
 * calling task's and is put back.) */
#define MUON_GEMM(T, FN)                                                                         \
    static void gemm_##T(int ty, int m, int n, int k, T alpha, const T *x, const T *y, T beta,   \
                         T *c)                                                                   \
    {                                                                                            \
        const int threads = omp_get_max_threads();                                               \
        omp_set_num_threads(1);                                                                  \
        FN(CblasRowMajor, CblasNoTrans, ty ? CblasTrans : CblasNoTrans, m, n, k, alpha, x, k, y, \
           ty ? k : n, beta, c, n);                                                              \
        omp_set_num_threads(threads);                                                            \
    }
MUON_GEMM(float, cblas_sgemm)
MUON_GEMM(double, cblas_dgemm)

/* g NULL: a zero gradient (rows of a sparse update without an index). */
#define T float
#define SQRT sqrtf
#include "muon_kernels.inc"
#define T double
#define SQRT sqrt
#include "muon_kernels.inc"

static void apply_dense(const optim_dense_update *u)
{
    const int64_t *sh = optim_var_shape(u->var);
    if (u->nslots == 2) {
        if (u->dtype == OPTIM_F32)
            adamw_float(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
        else adamw_double(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
    } else if (u->dtype == OPTIM_F32) {
        muon_float(u->param, u->grad, u->slots[0], sh[0], sh[1], u->coef,
                   scratch_of(u->opt, u->var));
    } else {
        muon_double(u->param, u->grad, u->slots[0], sh[0], sh[1], u->coef,
                    scratch_of(u->opt, u->var));
    }
}

/* Threads: an AdamW variable's dense step is one phase of element-wise
 * chunks (optim/optimizer_class.h), so it runs on every thread, its weight
 * decay fused per chunk; a Muon variable goes to apply_dense whole. */
#define ADAMW_CHUNK 8192 /* elements per chunk of the AdamW phase */

static void phase_plan(const optim_optimizer *opt, const optim_var *var, optim_phase_plan *plan)
{
    if (optim_get_slot(opt, var, "velocity")) *plan = (optim_phase_plan){1, ADAMW_CHUNK, 0, 0, 0};
}

static void apply_phase(const optim_phase_update *pu)
{
    const optim_dense_update *u = &pu->dense;
    const int64_t o = u->offset;
    if (u->dtype == OPTIM_F32)
        adamw_float((float *)u->param + o, (const float *)u->grad + o, (float *)u->slots[0] + o,
                    (float *)u->slots[1] + o, u->count, u->coef);
    else
        adamw_double((double *)u->param + o, (const double *)u->grad + o, (double *)u->slots[0] + o,
                     (double *)u->slots[1] + o, u->count, u->coef);
}

static void reduce_phase(const optim_phase_update *pu) { (void)pu; }

/* The dense equivalent: AdamW row by row (no gradient on rows without an
 * index); Muon with the gradient scattered into Y of the scratch, which the
 * step reads only before it first writes Y. */
#define MUON_SPARSE(T)                                                                        \
    static void sparse_##T(const optim_sparse_update *u)                                      \
    {                                                                                         \
        const int64_t rs = u->row_size;                                                       \
        const T *vals = u->values;                                                            \
        T *w = u->param, *m = u->slots[0];                                                    \
        if (u->nslots == 2) {                                                                 \
            for (int64_t r = 0, j = 0; r < u->rows; r++) {                                    \
                const T *g = j < u->n && u->indices[j] == r ? vals + rs * j++ : NULL;         \
                adamw_##T(w + r * rs, g, m + r * rs, (T *)u->slots[1] + r * rs, rs, u->coef); \
            }                                                                                 \
            return;                                                                           \
        }                                                                                     \
        T *sc = scratch_of(u->opt, u->var), *g = sc + u->rows * rs;                           \
        memset(g, 0, (size_t)(u->rows * rs) * sizeof *g);                                     \
        for (int64_t j = 0; j < u->n; j++)                                                    \
            memcpy(g + u->indices[j] * rs, vals + j * rs, (size_t)rs * sizeof *g);            \
        muon_##T(w, g, m, u->rows, rs, u->coef, sc);                                          \
    }
MUON_SPARSE(float)
MUON_SPARSE(double)

static void apply_sparse(const optim_sparse_update *u)
{
    if (u->dtype == OPTIM_F32) sparse_float(u);
    else sparse_double(u);
}

const optim_class OPTIM_ISA_NAME(optim_muon_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Muon",
    .min_slots = 1,
    .flags = OPTIM_CLASS_KERAS3_ONLY,
    .default_learning_rate = 0.001,
    .default_weight_decay = 0.004,
    .params = muon_params,
    .n_params = sizeof muon_params / sizeof *muon_params,
    .coef_size = sizeof(coef),
    .state_size = sizeof(state),
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .phase_plan = phase_plan,
    .apply_phase = apply_phase,
    .reduce_phase = reduce_phase,
    .get_config = get_config,
    .destroy = destroy,
    .weight_decay = weight_decay,
    .keras3_module = "keras.optimizers",
    .pattern_params = muon_patterns,
    .n_pattern_params = sizeof muon_patterns / sizeof *muon_patterns,
    .nonnegative_slots = (const char *const[]){"velocity", NULL},
};
