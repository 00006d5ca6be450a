/* RectifiedAdam (RAdam): Adam whose adaptive learning rate is rectified
 * while its variance is intractable.
 *
 * Liu et al., "On the Variance of the Adaptive Learning Rate and Beyond"
 * (ICLR 2020, arXiv:1908.03265); TF Addons' tfa.optimizers.RectifiedAdam
 * (tensorflow_addons/optimizers/rectified_adam.py), a legacy OptimizerV2
 * only. Per-step constants (_prepare_local), all in the variable's dtype,
 * t = iterations + 1, lr with the legacy `decay` (and schedule) applied:
 *
 *     sma_inf = 2 / (1 - beta_2) - 1
 *     sma_t   = sma_inf - 2 * t * beta_2^t / (1 - beta_2^t)
 *     r_t     = sqrt((sma_t - 4) / (sma_inf - 4) * (sma_t - 2) / (sma_inf - 2)
 *                    * sma_inf / sma_t)                   (left to right)
 *   when total_steps > 0, warmup then linear decay to min_lr:
 *     ws = total_steps * warmup_proportion;  ds = max(total_steps - ws, 1)
 *     lr = t <= ws ? lr * (t / ws)
 *                  : lr + (min_lr - lr) / ds * min(t - ws, ds)
 *
 * Dense (_resource_apply_dense):
 *
 *     m = beta_1 * m + (1 - beta_1) * g
 *     v = beta_2 * v + (1 - beta_2) * g^2
 *     vhat = max(vhat, v), used for v below                  (amsgrad)
 *     m_c = m * (1 / (1 - beta_1^t));  v_c = sqrt(v * (1 / (1 - beta_2^t)))
 *     u = sma_t >= sma_threshold ? r_t * m_c / (v_c + epsilon) : m_c
 *     u = u + weight_decay * w              (unless weight_decay is the number 0)
 *     w = w - lr * u
 *
 * weight_decay may be a schedule, read at `iterations` like the learning
 * rate. epsilon is `epsilon or 1e-7` (0 means 1e-7, and is written so).
 *
 * Sparse (_resource_apply_sparse, duplicate indices summed first): m and v
 * are scaled on every row (m.assign(m * beta_1)), the scaled gradient is
 * scatter-added to the indexed rows, vhat takes the max on every row, u is
 * formed on every row, and only the indexed rows of w move (a scatter-add of
 * -lr * u). So an indexed row follows the dense rule bit for bit; a row
 * without an index gets m = m * beta_1, v = v * beta_2, vhat = max(vhat, v)
 * and keeps w. Run as OPTIM_SPARSE_ALL_ROWS.
 *
 * Slots: "m", "v", and "vhat" with amsgrad, kind by kind (TFA's
 * _create_slots). */
#include "optimizers/adam_coef.h"

#include <math.h>

enum {
    P_BETA_1,
    P_BETA_2,
    P_WEIGHT_DECAY,
    P_SMA_THRESHOLD,
    P_EPSILON,
    P_AMSGRAD,
    P_TOTAL_STEPS,
    P_WARMUP_PROPORTION,
    P_MIN_LR
};

/* TFA's get_config order (decay, a base key, goes between beta_2 and
 * weight_decay: get_config). TFA checks no value; the ranges are optim's
 * guards: beta < 1 (sma_inf and the bias corrections divide by 1 - beta),
 * rates >= 0. total_steps <= 0 is TFA's "no warmup". */
static const optim_param radam_params[] = {
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.999, 0.0, 1.0},
    {"weight_decay", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_LEGACY_ONLY, 0.0, 0.0,
     INFINITY},
    {"sma_threshold", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 5.0, -INFINITY, INFINITY},
    /* `epsilon or backend.epsilon()`: 0 means 1e-7. */
    {"epsilon", OPTIM_PARAM_FLOAT, 0, 1e-7, 0.0, INFINITY},
    {"amsgrad", OPTIM_PARAM_BOOL, 0, 0.0, 0.0, 1.0},
    {"total_steps", OPTIM_PARAM_INT, 0, 0.0, -INFINITY, INFINITY},
    /* Hypers in TFA too, but inert unless total_steps > 0: numbers here. */
    {"warmup_proportion", OPTIM_PARAM_FLOAT, 0, 0.1, 0.0, INFINITY},
    {"min_lr", OPTIM_PARAM_FLOAT, 0, 0.0, 0.0, INFINITY},
};

#define LEGACY_EPSILON 1e-7

typedef struct coef {
    double lr, wd, b1, b2, c1, c2; /* c = 1 - beta */
    double rc1, rc2; /* 1 / (1 - beta^t) */
    double r, eps;
    int rectify; /* sma_t >= sma_threshold */
    int decay; /* TFA's _has_weight_decay */
} coef;

typedef struct state {
    int built_amsgrad; /* 0 no slots yet, 1 false, 2 true */
} state;

/* ---- configuration ------------------------------------------------------------ */

static int validate(optim_optimizer *opt, optim_error *err)
{
    const state *s = optim_state(opt);
    return optim__adam_check_amsgrad(opt, s->built_amsgrad, "RectifiedAdam", err);
}

/* TFA's get_config: ..., beta_2, decay, weight_decay, ...; self.epsilon. */
static int get_config(optim_optimizer *opt, optim_config *cfg)
{
    int rc = optim_config_move_before(cfg, "decay", "weight_decay");
    double e = 0;
    if (!rc && optim_get_hyper(opt, "epsilon", &e) == 0 && e == 0)
        rc = optim_config_put_number(cfg, "epsilon", LEGACY_EPSILON);
    return rc;
}

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    state *s = optim_state(opt);
    return optim__adam_create_slots(opt, var, &s->built_amsgrad);
}

/* ---- per-step constants ---------------------------------------------------------- */

/* TFA's _prepare_local in T: lr is the decayed learning rate
 * (optim_learning_rate), eps epsilon after `or 1e-7`. */
#define RADAM_PREPARE(T, POW, SQRT)                                                               \
    static void prepare_##T(coef *k, T lr, const optim_optimizer *opt, double eps)                \
    {                                                                                             \
        const T b1 = (T)optim_param_value(opt, P_BETA_1),                                         \
                b2 = (T)optim_param_value(opt, P_BETA_2);                                         \
        const T t = (T)(optim_iterations(opt) + 1), b1p = POW(b1, t), b2p = POW(b2, t);           \
        const T c2 = 1 - b2, rc2 = 1 / (1 - b2p), sma_inf = 2 / c2 - 1;                           \
        const T sma_t = sma_inf - 2 * t * b2p * rc2;                                              \
        k->r = SQRT((sma_t - 4) / (sma_inf - 4) * (sma_t - 2) / (sma_inf - 2) * sma_inf / sma_t); \
        k->rectify = sma_t >= (T)optim_param_value(opt, P_SMA_THRESHOLD);                         \
        const double total = optim_param_value(opt, P_TOTAL_STEPS);                               \
        if (total > 0) {                                                                          \
            const T tot = (T)total, ws = tot * (T)optim_param_value(opt, P_WARMUP_PROPORTION);    \
            const T d = tot - ws, ds = d < 1 ? 1 : d, x = t - ws;                                 \
            const T rate = ((T)optim_param_value(opt, P_MIN_LR) - lr) / ds;                       \
            lr = t <= ws ? lr * (t / ws) : lr + rate * (ds < x ? ds : x);                         \
        }                                                                                         \
        k->lr = lr;                                                                               \
        k->wd = (T)optim_param_value(opt, P_WEIGHT_DECAY);                                        \
        k->b1 = b1;                                                                               \
        k->b2 = b2;                                                                               \
        k->c1 = 1 - b1;                                                                           \
        k->c2 = c2;                                                                               \
        k->rc1 = 1 / (1 - b1p);                                                                   \
        k->rc2 = rc2;                                                                             \
        k->eps = (T)eps;                                                                          \
    }
RADAM_PREPARE(float, powf, sqrtf)
RADAM_PREPARE(double, pow, sqrt)

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    double eps = optim_param_value(opt, P_EPSILON);
    if (eps == 0) eps = LEGACY_EPSILON;
    const double lr = optim_learning_rate(opt, dtype);
    if (dtype == OPTIM_F32) prepare_float(k, (float)lr, opt, eps);
    else prepare_double(k, lr, opt, eps);
    /* `weight_decay != 0.0` at construction: a schedule (or variable) always
     * counts, a number when non-zero. */
    k->decay = !optim_hyper_is_constant(opt, "weight_decay") ||
        optim_param_value(opt, P_WEIGHT_DECAY) != 0;
}

/* ---- the update ------------------------------------------------------------------ */

/* One element i, gradient g[i]. AMS, RECT and DECAY are constants 0 or 1,
 * so that each combination compiles to its own vectorised loop. */
#define RADAM_ELEMENT(T, SQRT, AMS, RECT, DECAY)     \
    {                                                \
        const T gi = g[i], mi = b1 * m[i] + c1 * gi; \
        T vi = b2 * v[i] + c2 * (gi * gi);           \
        m[i] = mi;                                   \
        v[i] = vi;                                   \
        if (AMS) {                                   \
            vi = vh[i] < vi ? vi : vh[i];            \
            vh[i] = vi;                              \
        }                                            \
        const T mc = mi * rc1, vc = SQRT(vi * rc2);  \
        T u = RECT ? r * mc / (vc + eps) : mc;       \
        if (DECAY) u = u + wd * w[i];                \
        w[i] = w[i] - lr * u;                        \
    }

#define RADAM_CASE(T, SQRT, AMS, RECT, DECAY) \
    case AMS * 4 + RECT * 2 + DECAY:          \
        for (int64_t i = 0; i < n; i++) RADAM_ELEMENT(T, SQRT, AMS, RECT, DECAY) break;

/* The dense rule over n elements (vh NULL without amsgrad). */
#define RADAM_DENSE(T, SQRT)                                                                \
    static void dense_##T(T *restrict w, const T *restrict g, T *restrict m, T *restrict v, \
                          T *restrict vh, int64_t n, const coef *k)                         \
    {                                                                                       \
        const T lr = (T)k->lr, wd = (T)k->wd, b1 = (T)k->b1, b2 = (T)k->b2;                 \
        const T c1 = (T)k->c1, c2 = (T)k->c2, rc1 = (T)k->rc1, rc2 = (T)k->rc2;             \
        const T r = (T)k->r, eps = (T)k->eps;                                               \
        switch ((vh ? 4 : 0) | (k->rectify ? 2 : 0) | (k->decay ? 1 : 0)) {                 \
            RADAM_CASE(T, SQRT, 0, 0, 0)                                                    \
            RADAM_CASE(T, SQRT, 0, 0, 1)                                                    \
            RADAM_CASE(T, SQRT, 0, 1, 0)                                                    \
            RADAM_CASE(T, SQRT, 0, 1, 1)                                                    \
            RADAM_CASE(T, SQRT, 1, 0, 0)                                                    \
            RADAM_CASE(T, SQRT, 1, 0, 1)                                                    \
            RADAM_CASE(T, SQRT, 1, 1, 0)                                                    \
            RADAM_CASE(T, SQRT, 1, 1, 1)                                                    \
        }                                                                                   \
    }
RADAM_DENSE(float, sqrtf)
RADAM_DENSE(double, sqrt)

/* A row without an index: the moments scale, w keeps its bits. */
#define RADAM_IDLE(T)                                                                            \
    static void idle_##T(T *restrict m, T *restrict v, T *restrict vh, int64_t n, const coef *k) \
    {                                                                                            \
        const T b1 = (T)k->b1, b2 = (T)k->b2;                                                    \
        for (int64_t i = 0; i < n; i++) {                                                        \
            m[i] = m[i] * b1;                                                                    \
            v[i] = v[i] * b2;                                                                    \
        }                                                                                        \
        for (int64_t i = 0; vh && i < n; i++) vh[i] = vh[i] < v[i] ? v[i] : vh[i];               \
    }
RADAM_IDLE(float)
RADAM_IDLE(double)

static void apply_dense(const optim_dense_update *u)
{
    void *vh = u->nslots > 2 ? u->slots[2] : 0;
    if (u->dtype == OPTIM_F32)
        dense_float(u->param, u->grad, u->slots[0], u->slots[1], vh, u->count, u->coef);
    else dense_double(u->param, u->grad, u->slots[0], u->slots[1], vh, u->count, u->coef);
}

/* Every row of the range in order: indexed rows by the dense rule with
 * their gradient row, the others idle. */
#define RADAM_SPARSE(T)                                                       \
    static void sparse_##T(const optim_sparse_update *u)                      \
    {                                                                         \
        const int64_t rs = u->row_size;                                       \
        T *w = u->param, *m = u->slots[0], *v = u->slots[1];                  \
        T *vh = u->nslots > 2 ? u->slots[2] : 0;                              \
        const T *g = u->values;                                               \
        int64_t j = 0;                                                        \
        for (int64_t r = 0; r < u->rows; r++) {                               \
            const int64_t o = r * rs;                                         \
            T *h = vh ? vh + o : 0;                                           \
            if (j < u->n && u->indices[j] == r)                               \
                dense_##T(w + o, g + rs * j++, m + o, v + o, h, rs, u->coef); \
            else idle_##T(m + o, v + o, h, rs, u->coef);                      \
        }                                                                     \
    }
RADAM_SPARSE(float)
RADAM_SPARSE(double)

static void apply_sparse(const optim_sparse_update *u)
{
    if (u->dtype == OPTIM_F32) sparse_float(u);
    else sparse_double(u);
}

/* Every row moves its moments: the walk above, on row ranges on all threads. */
static int sparse_mode(const optim_sparse_update *u)
{
    (void)u;
    return OPTIM_SPARSE_ALL_ROWS;
}

const optim_class OPTIM_ISA_NAME(optim_rectified_adam_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "RectifiedAdam",
    .min_slots = 2,
    .flags = OPTIM_CLASS_ELEMENTWISE | OPTIM_CLASS_LEGACY_ONLY,
    .default_learning_rate = 0.001,
    .params = radam_params,
    .n_params = sizeof radam_params / sizeof *radam_params,
    .coef_size = sizeof(coef),
    .state_size = sizeof(state),
    .validate = validate,
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .get_config = get_config,
    .sparse_mode = sparse_mode,
    .tfa_name = "RectifiedAdam",
    .nonnegative_slots = (const char *const[]){"v", "vhat", NULL},
};
