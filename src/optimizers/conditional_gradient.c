/* ConditionalGradient: a Frank-Wolfe step towards the boundary of a norm
 * ball.
 *
 * Jaggi, "Revisiting Frank-Wolfe: Projection-Free Sparse Convex
 * Optimization" (ICML 2013); Ravi et al., "Constrained deep learning using
 * conditional gradient and applications in computer vision"
 * (arXiv:1803.06453). TF Addons' tfa.optimizers.ConditionalGradient
 * (tensorflow_addons/optimizers/conditional_gradient.py at d208d75), an
 * OptimizerV2: legacy generation only. Per variable and step, in the
 * variable's dtype, lr the learning rate as TF Addons reads it,
 * _get_hyper("learning_rate"): OptimizerV2's `decay` is read and written
 * back but not applied (TF Addons' _prepare_local never calls _decayed_lr):
 *
 *     ord "fro":      s = g / (||g||_F + epsilon),   ||g||_F = sum(g * g) ** 0.5
 *     ord "nuclear":  s = u v^T, u and v the top singular vectors of g
 *     w = w * lr - ((1 - lr) * lambda_) * s
 *
 * (learning_rate weighs the old w: 1 keeps it, 0 moves w to -lambda_ s, the
 * vertex of the lambda_-ball; so a zero learning rate is no no-op.)
 * epsilon is `epsilon or 1e-7`. TF Addons requires learning_rate; here it
 * defaults to 0.01.
 *
 * ||g||_F: squares summed in double over fixed chunks (sum_squares.inc),
 * rounded once to the dtype, then ** 0.5 (pow); TF sums in the dtype with
 * Eigen's tree reduction: the two differ by rounding only. Dense "fro" runs
 * in two phases (the chunks' sums on all threads; the update on all
 * threads), the bits independent of the thread count.
 *
 * "nuclear": the gradient viewed as a matrix, a scalar as [1, 1] and a
 * vector as [1, n], as TF Addons' _top_singular_vector reshapes it; u v^T
 * by power iteration on its Gram matrix in double (top_singular.inc:
 * accurate to about 1e-15 where the top two singular values are apart; a
 * zero gradient gives e1 e1^T, as Eigen's SVD; a vector's is g / ||g||),
 * then u and v rounded to the dtype and multiplied there, as TF's matmul.
 * TF Addons passes a rank >= 3 gradient to the batched tf.linalg.svd and its
 * reshape fails (or, for [1, 1, n], broadcasts one number): such variables
 * are refused. Each variable goes whole to one thread, with scratch of
 * 2 p^2 + 2 p + q doubles (p, q its smaller and larger side) allocated with
 * its slot, so ord is fixed once slots exist.
 *
 * Sparse gradients (TF Addons' _resource_apply_sparse; duplicate indices
 * summed first, as OptimizerV2 does): s from the summed rows alone (their
 * norm, or the singular vectors of the [rows, row size] matrix they make,
 * [1, n] for a vector), and only the indexed rows of w change (a scatter
 * update of w * lr - (1 - lr) * lambda_ * s).
 *
 * Slot: "conditional_gradient" (zeros, the variable's shape), created as
 * TF Addons creates it, and never used. */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"
#include "optimizers/tfa_keys.h"
#include "optimizers/var_scratch.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "top_singular.inc"

enum { P_LAMBDA, P_EPSILON, P_ORD };
enum { ORD_FRO, ORD_NUCLEAR };

/* TF Addons validates only ord; lambda_'s range is optim's guard (the
 * radius of the ball). lambda_ is a hyperparameter; epsilon and ord are
 * attributes. */
static const optim_param cg_params[] = {
    {"lambda_", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.01, 0.0, INFINITY},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE, OPTIM__TFA_EPSILON, 0.0, INFINITY},
    {"ord", OPTIM_PARAM_STRING, 0, ORD_FRO, 0, 1},
};
static const char *const ord_choices[] = {"fro", "nuclear", NULL};
static const char *const *const cg_choices[] = {NULL, NULL, ord_choices};

typedef struct coef {
    double lr, c, epsilon; /* in the dtype; c = (1 - lr) * lambda_ */
    int nuclear;
} coef;

typedef struct state {
    int built_ord; /* 0 no slots yet, else ord + 1 */
    optim__scratch_set scratch; /* "nuclear": each variable's, in doubles */
} state;

static int ord_of(const optim_optimizer *opt)
{
    return optim_param_value(opt, P_ORD) == ORD_NUCLEAR ? ORD_NUCLEAR : ORD_FRO;
}

static int validate(optim_optimizer *opt, optim_error *err)
{
    const state *s = optim_state(opt);
    double ord = 0;
    if (s->built_ord && optim_get_slot_names(opt, NULL, 0) > 0 &&
        optim_get_hyper(opt, "ord", &ord) == 0 && (int)ord + 1 != s->built_ord) {
        err->code = OPTIM_ESTATE;
        snprintf(err->msg, sizeof err->msg,
                 "ConditionalGradient: ord cannot change once slots exist (they were created "
                 "with ord '%s')",
                 ord_choices[s->built_ord - 1]);
        return OPTIM_ESTATE;
    }
    return 0;
}

static int get_config(optim_optimizer *opt, optim_config *cfg)
{
    static const char *const own[] = {"lambda_", "epsilon", "ord"};
    return optim__tfa_keys(opt, cfg, own, sizeof own / sizeof *own, NULL);
}

/* ---- slots and the nuclear scratch ---------------------------------------------- */

/* The matrix view of a variable: [1, 1], [1, n] or [rows, cols]. */
static void view(const optim_var *var, int64_t *rows, int64_t *cols)
{
    const int32_t rank = optim_var_rank(var);
    const int64_t *sh = optim_var_shape(var);
    *rows = rank == 2 ? sh[0] : 1;
    *cols = rank == 0 ? 1 : rank == 1 ? sh[0] : sh[1];
}

static double *scratch_of(const optim_optimizer *opt, const optim_var *var)
{
    return optim__scratch_of(&((const state *)optim_state(opt))->scratch, var);
}

static int add_scratch(optim_optimizer *opt, const optim_var *var)
{
    int64_t rows, cols;
    view(var, &rows, &cols);
    const size_t doubles = top_singular_doubles(rows, cols);
    if (doubles > SIZE_MAX / sizeof(double)) return OPTIM_ENOMEM;
    return optim__scratch_reserve(&((state *)optim_state(opt))->scratch, var,
                                  doubles * sizeof(double));
}

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    state *s = optim_state(opt);
    const int ord = ord_of(opt);
    s->built_ord = ord + 1;
    int rc = optim_add_slot(opt, var, "conditional_gradient", OPTIM_SLOT_ZEROS, 0);
    if (rc || ord != ORD_NUCLEAR) return rc;
    if (optim_var_rank(var) > 2)
        return optim_set_error(opt, OPTIM_ENOTSUP,
                               "ConditionalGradient: '%s' has rank %d; ord 'nuclear' takes "
                               "variables of rank 0, 1 or 2 (TF Addons' _top_singular_vector "
                               "fails on a rank >= 3 gradient)",
                               optim_var_name(var), (int)optim_var_rank(var));
    if (add_scratch(opt, var))
        return optim_set_error(opt, OPTIM_ENOMEM,
                               "ConditionalGradient: out of memory for the singular-vector "
                               "scratch of '%s'",
                               optim_var_name(var));
    return 0;
}

static void destroy(optim_optimizer *opt)
{
    optim__scratch_free(&((state *)optim_state(opt))->scratch);
}

/* ---- the update ------------------------------------------------------------------ */

/* The learning rate without OptimizerV2's decay (TF Addons reads
 * _get_hyper("learning_rate")), in the arithmetic of dtype. */
static double undecayed_learning_rate(optim_optimizer *opt, optim_dtype dtype)
{
    double decay = 0, lr = 0;
    if (optim_get_hyper(opt, "decay", &decay) || !(decay > 0) ||
        optim_get_hyper(opt, "learning_rate", &lr))
        return optim_learning_rate(opt, dtype); /* no decay: the same value */
    return dtype == OPTIM_F64 ? lr : (double)(float)lr;
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    const double lr = undecayed_learning_rate(opt, dtype);
    const double lam = optim_param_value(opt, P_LAMBDA);
    double eps = optim_param_value(opt, P_EPSILON);
    eps = isnan(eps) || eps == 0 ? OPTIM__TFA_EPSILON : eps;
    k->lr = lr;
    k->nuclear = ord_of(opt) == ORD_NUCLEAR;
    if (dtype == OPTIM_F32) {
        const float l = (float)lr;
        k->c = (1.0f - l) * (float)lam;
        k->epsilon = (float)eps;
    } else {
        k->c = (1.0 - lr) * lam;
        k->epsilon = eps;
    }
}

#define T float
#define DT OPTIM_F32
#define POW powf
#include "conditional_gradient_kernels.inc"
#define T double
#define DT OPTIM_F64
#define POW pow
#include "conditional_gradient_kernels.inc"

/* A variable whole, on one thread ("nuclear", or "fro" outside the phases:
 * a half variable's float32 scratch, of any rank, viewed as [1, count]). */
static void apply_dense(const optim_dense_update *u)
{
    int64_t rows = 1, cols = u->count;
    if (((const coef *)u->coef)->nuclear) view(u->var, &rows, &cols);
    double *sc = scratch_of(u->opt, u->var);
    if (u->dtype == OPTIM_F32) dense_float(u->param, u->grad, rows, cols, u->coef, sc);
    else dense_double(u->param, u->grad, rows, cols, u->coef, sc);
}

/* "fro": phase 0 the chunks' squares, phase 1 the update; "nuclear": whole. */
static void phase_plan(const optim_optimizer *opt, const optim_var *var, optim_phase_plan *plan)
{
    (void)var;
    if (ord_of(opt) == ORD_FRO) *plan = (optim_phase_plan){2, SQ_CHUNK, 1, 1, 0};
}

static void apply_phase(const optim_phase_update *pu)
{
    const optim_dense_update *u = &pu->dense;
    const int64_t o = u->offset;
    if (u->dtype == OPTIM_F32) {
        const float *g = (const float *)u->grad + o;
        if (pu->phase == 0) pu->partial[0] = squares_float(g, u->count);
        else fro_float((float *)u->param + o, g, u->count, u->coef, (float)pu->shared[0]);
    } else {
        const double *g = (const double *)u->grad + o;
        if (pu->phase == 0) pu->partial[0] = squares_double(g, u->count);
        else fro_double((double *)u->param + o, g, u->count, u->coef, pu->shared[0]);
    }
}

/* After phase 0: the chunks' sums in chunk order, then ||g|| + epsilon. */
static void reduce_phase(const optim_phase_update *pu)
{
    if (pu->phase != 0) return;
    double t = 0;
    for (int64_t c = 0; c < pu->chunk; c++) t += pu->partial[c];
    const optim_dense_update *u = &pu->dense;
    pu->shared[0] = u->dtype == OPTIM_F32 ? (double)denominator_float(t, u->coef)
                                          : denominator_double(t, u->coef);
}

static void apply_sparse(const optim_sparse_update *u)
{
    double *sc = scratch_of(u->opt, u->var);
    if (u->dtype == OPTIM_F32) sparse_float(u, u->coef, sc);
    else sparse_double(u, u->coef, sc);
}

/* The norm or the Gram matrix reads g; the update reads g (or, "nuclear",
 * g again for the other singular vector) and reads and writes w. The slot
 * is never touched; the Gram matrix and its products run on scratch. */
static double bytes_per_param(const optim_optimizer *opt, const optim_var *var)
{
    (void)opt;
    return (double)optim_dtype_size(optim_var_dtype(var)) * 4.0;
}

const optim_class OPTIM_ISA_NAME(optim_conditionalgradient_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "ConditionalGradient",
    .flags = OPTIM_CLASS_LEGACY_ONLY, /* not element-wise: a whole-gradient norm (phased) */
    .default_learning_rate = 0.01,
    .params = cg_params,
    .n_params = sizeof cg_params / sizeof *cg_params,
    .param_choices = cg_choices,
    .coef_size = sizeof(coef),
    .state_size = sizeof(state),
    .validate = validate,
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .get_config = get_config,
    .destroy = destroy,
    .phase_plan = phase_plan,
    .apply_phase = apply_phase,
    .reduce_phase = reduce_phase,
    .tfa_name = "ConditionalGradient",
    .bytes_per_param = bytes_per_param,
    .min_slots = 1,
};
