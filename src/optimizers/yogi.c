/* Yogi: Adam with an additive second moment.
 *
 * Zaheer et al., "Adaptive Methods for Nonconvex Optimization" (NeurIPS
 * 2018, Algorithm 2); TF Addons' tfa.optimizers.Yogi
 * (tensorflow_addons/optimizers/yogi.py), a legacy OptimizerV2 only. All
 * constants in the variable's dtype, t = iterations + 1, lr with the legacy
 * `decay` (and schedule) applied:
 *
 *     lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)          (left to right)
 *     m    = m * beta1 + g * (1 - beta1)                     (no m when beta1 == 0:
 *                                                              m below is g)
 *     s    = sign(g^2 - v), or tanh(10 * (g^2 - v)) with activation "tanh"
 *     v    = v + (1 - beta2) * s * g^2
 *     p    = lr_t / (sqrt(v) + epsilon)
 *     w'   = w - p * m
 *   then the proximal step:
 *     l1 > 0:  b = -w', c = l1 * p,
 *              w = (|b| > c) * ((c * sign(b) - b) / (1 + l2 * p))   (_solve)
 *     l2 > 0 (l1 == 0):  w = w' / (1 + l2 * p)
 *     else:    w = w'
 *
 * Sparse (_resource_apply_sparse, duplicate indices summed first): with m,
 * m is scaled on every row (m.assign(m * beta1)) and the indexed rows then
 * add g * (1 - beta1); v and w change on the indexed rows only, by the rule
 * above (so an indexed row matches the dense rule bit for bit). Without m
 * (beta1 == 0) only the indexed rows change: OPTIM_SPARSE_ROWS; with m,
 * OPTIM_SPARSE_ALL_ROWS.
 *
 * Slots, variable by variable as TFA's _create_slots: "v" (every element
 * initial_accumulator_value), then "m" (zeros) when beta1 > 0. Which rule
 * runs follows whether m exists, fixed when the slots are made, as TFA
 * fixes it at construction (self._beta1); beta1's current value enters the
 * arithmetic. TFA raises NotImplementedError at the first step for an
 * activation other than "sign" or "tanh"; here the config is refused. */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

#include <math.h>

enum { P_BETA1, P_BETA2, P_EPSILON, P_L1, P_L2, P_ACTIVATION, P_INITIAL_ACCUMULATOR };

/* TFA's get_config order. TFA checks no value; the ranges are optim's
 * guards (the docstring's "greater than or equal to zero" for l1 and l2;
 * beta < 1, as lr_t divides by 1 - beta1^t). */
static const optim_param yogi_params[] = {
    {"beta1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.9, 0.0, 1.0},
    {"beta2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.999, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 1e-3, 0.0, INFINITY},
    {"l1_regularization_strength", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.0, 0.0, INFINITY},
    {"l2_regularization_strength", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.0, 0.0, INFINITY},
    {"activation", OPTIM_PARAM_STRING, 0, 0, 0, 0},
    {"initial_accumulator_value", OPTIM_PARAM_FLOAT, 0, 1e-6, 0.0, INFINITY},
};

static const char *const activation_choices[] = {"sign", "tanh", NULL};
static const char *const *const yogi_param_choices[] = {
    NULL, NULL, NULL, NULL, NULL, activation_choices, NULL};

enum { PROX_NONE, PROX_L1, PROX_L2 };

typedef struct coef {
    double lr, b1, b2, c1, c2, eps, l1, l2;
    int tanh, prox;
} coef;

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    optim_set_slot_order(opt, OPTIM_SLOTS_BY_VARIABLE);
    int rc = optim_add_slot(opt, var, "v", OPTIM_SLOT_CONSTANT,
                            optim_param_value(opt, P_INITIAL_ACCUMULATOR));
    if (!rc && optim_param_value(opt, P_BETA1) > 0)
        rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
    return rc;
}

#define YOGI_PREPARE(T, POW, SQRT)                                     \
    static void prepare_##T(coef *k, T lr, const optim_optimizer *opt) \
    {                                                                  \
        const T b1 = (T)optim_param_value(opt, P_BETA1);               \
        const T b2 = (T)optim_param_value(opt, P_BETA2);               \
        const T t = (T)(optim_iterations(opt) + 1);                    \
        k->lr = lr * SQRT(1 - POW(b2, t)) / (1 - POW(b1, t));          \
        k->b1 = b1;                                                    \
        k->b2 = b2;                                                    \
        k->c1 = 1 - b1;                                                \
        k->c2 = 1 - b2;                                                \
        k->eps = (T)optim_param_value(opt, P_EPSILON);                 \
        k->l1 = (T)optim_param_value(opt, P_L1);                       \
        k->l2 = (T)optim_param_value(opt, P_L2);                       \
    }
YOGI_PREPARE(float, powf, sqrtf)
YOGI_PREPARE(double, pow, sqrt)

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    const double lr = optim_learning_rate(opt, dtype);
    if (dtype == OPTIM_F32) prepare_float(k, (float)lr, opt);
    else prepare_double(k, lr, opt);
    k->tanh = optim_param_value(opt, P_ACTIVATION) == 1;
    k->prox = k->l1 > 0 ? PROX_L1 : k->l2 > 0 ? PROX_L2 : PROX_NONE;
}

/* tf.sign */
#define YOGI_SIGN(T, x) ((T)(((x) > 0) - ((x) < 0)))

/* One element i, gradient g[i]. HAS_M, TANH and PROX are constants, so that
 * each combination compiles to its own loop. */
#define YOGI_ELEMENT(T, SQRT, TANHF, FABS, HAS_M, TANH, PROX)                            \
    {                                                                                    \
        const T gi = g[i], g2 = gi * gi, d = g2 - v[i];                                  \
        T mi = gi;                                                                       \
        if (HAS_M) m[i] = mi = m[i] * b1 + gi * c1;                                      \
        const T s = TANH ? TANHF(ten * d) : YOGI_SIGN(T, d);                             \
        const T vi = v[i] + c2 * s * g2, p = lr / (SQRT(vi) + eps);                      \
        v[i] = vi;                                                                       \
        T nw = w[i] - p * mi;                                                            \
        if (PROX == PROX_L1) {                                                           \
            const T b = -nw, c = l1 * p, x = (c * YOGI_SIGN(T, b) - b) / (one + l2 * p); \
            nw = (FABS(b) > c ? one : (T)0) * x;                                         \
        } else if (PROX == PROX_L2) {                                                    \
            nw = nw / (one + l2 * p);                                                    \
        }                                                                                \
        w[i] = nw;                                                                       \
    }

#define YOGI_CASE(T, SQRT, TANHF, FABS, HAS_M, TANH, PROX)                                    \
    case HAS_M * 6 + TANH * 3 + PROX:                                                         \
        for (int64_t i = 0; i < n; i++) YOGI_ELEMENT(T, SQRT, TANHF, FABS, HAS_M, TANH, PROX) \
        break;

/* The dense rule over n elements (m NULL without the m slot). */
#define YOGI_DENSE(T, SQRT, TANHF, FABS)                                                    \
    static void dense_##T(T *restrict w, const T *restrict g, T *restrict v, T *restrict m, \
                          int64_t n, const coef *k)                                         \
    {                                                                                       \
        const T lr = (T)k->lr, b1 = (T)k->b1, c1 = (T)k->c1, c2 = (T)k->c2;                 \
        const T eps = (T)k->eps, l1 = (T)k->l1, l2 = (T)k->l2, one = 1, ten = 10;           \
        switch ((m ? 6 : 0) + (k->tanh ? 3 : 0) + k->prox) {                                \
            YOGI_CASE(T, SQRT, TANHF, FABS, 0, 0, PROX_NONE)                                \
            YOGI_CASE(T, SQRT, TANHF, FABS, 0, 0, PROX_L1)                                  \
            YOGI_CASE(T, SQRT, TANHF, FABS, 0, 0, PROX_L2)                                  \
            YOGI_CASE(T, SQRT, TANHF, FABS, 0, 1, PROX_NONE)                                \
            YOGI_CASE(T, SQRT, TANHF, FABS, 0, 1, PROX_L1)                                  \
            YOGI_CASE(T, SQRT, TANHF, FABS, 0, 1, PROX_L2)                                  \
            YOGI_CASE(T, SQRT, TANHF, FABS, 1, 0, PROX_NONE)                                \
            YOGI_CASE(T, SQRT, TANHF, FABS, 1, 0, PROX_L1)                                  \
            YOGI_CASE(T, SQRT, TANHF, FABS, 1, 0, PROX_L2)                                  \
            YOGI_CASE(T, SQRT, TANHF, FABS, 1, 1, PROX_NONE)                                \
            YOGI_CASE(T, SQRT, TANHF, FABS, 1, 1, PROX_L1)                                  \
            YOGI_CASE(T, SQRT, TANHF, FABS, 1, 1, PROX_L2)                                  \
        }                                                                                   \
    }
YOGI_DENSE(float, sqrtf, tanhf, fabsf)
YOGI_DENSE(double, sqrt, tanh, fabs)

static void apply_dense(const optim_dense_update *u)
{
    void *m = u->nslots > 1 ? u->slots[1] : 0;
    if (u->dtype == OPTIM_F32) dense_float(u->param, u->grad, u->slots[0], m, u->count, u->coef);
    else dense_double(u->param, u->grad, u->slots[0], m, u->count, u->coef);
}

/* Without m: the indexed rows only. With m: every row of the range, the
 * indexed ones by the dense rule, the others m = m * beta1 only. */
#define YOGI_SPARSE(T)                                                            \
    static void sparse_##T(const optim_sparse_update *u)                          \
    {                                                                             \
        const int64_t rs = u->row_size;                                           \
        T *w = u->param, *v = u->slots[0], *m = u->nslots > 1 ? u->slots[1] : 0;  \
        const T *g = u->values, b1 = (T)((const coef *)u->coef)->b1;              \
        for (int64_t j = 0; !m && j < u->n; j++) {                                \
            const int64_t o = u->indices[j] * rs;                                 \
            dense_##T(w + o, g + rs * j, v + o, 0, rs, u->coef);                  \
        }                                                                         \
        for (int64_t r = 0, j = 0; m && r < u->rows; r++) {                       \
            T *mr = m + r * rs;                                                   \
            if (j < u->n && u->indices[j] == r)                                   \
                dense_##T(w + r * rs, g + rs * j++, v + r * rs, mr, rs, u->coef); \
            else                                                                  \
                for (int64_t i = 0; i < rs; i++) mr[i] = mr[i] * b1;              \
        }                                                                         \
    }
YOGI_SPARSE(float)
YOGI_SPARSE(double)

static void apply_sparse(const optim_sparse_update *u)
{
    if (u->dtype == OPTIM_F32) sparse_float(u);
    else sparse_double(u);
}

/* With m every row moves (on row ranges on all threads); without, lazy. */
static int sparse_mode(const optim_sparse_update *u)
{
    return u->nslots > 1 ? OPTIM_SPARSE_ALL_ROWS : OPTIM_SPARSE_ROWS;
}

const optim_class OPTIM_ISA_NAME(optim_yogi_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Yogi",
    .min_slots = 1,
    .flags = OPTIM_CLASS_ELEMENTWISE | OPTIM_CLASS_LEGACY_ONLY,
    .default_learning_rate = 0.01,
    .params = yogi_params,
    .n_params = sizeof yogi_params / sizeof *yogi_params,
    .param_choices = yogi_param_choices,
    .coef_size = sizeof(coef),
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .sparse_mode = sparse_mode,
    .tfa_name = "Yogi",
    .nonnegative_slots = (const char *const[]){"v", NULL},
};
