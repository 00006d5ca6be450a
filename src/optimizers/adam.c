/* Adam, with the AMSGrad variant.
 *
 * Kingma & Ba, "Adam: A Method for Stochastic Optimization" (ICLR 2015), in
 * the form given just before its Section 2.1 (bias corrections folded into
 * the step size, "epsilon hat"); Reddi et al., "On the Convergence of Adam
 * and Beyond" (ICLR 2018) for amsgrad.
 *
 * t = iterations + 1 (Keras's local_step), every per-step constant computed
 * in the variable's dtype:
 *
 * Keras 3 (keras/src/optimizers/adam.py, Adam.update_step):
 *
 *     alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
 *     m     = m + (g - m) * (1 - beta_1)
 *     v     = v + (g^2 - v) * (1 - beta_2)
 *     vhat  = max(vhat, v), and vhat replaces v below        (amsgrad)
 *     w     = w - (m * alpha) / (sqrt(v) + epsilon)
 *
 *   `1 - beta_1` is Python arithmetic on the float hyperparameter, so it is
 *   computed in double and then cast to the variable's dtype.
 *
 * Legacy (tf.keras.optimizers.legacy.Adam): dense gradients go to TF's
 * ApplyAdam / ApplyAdamWithAmsgrad kernels (tensorflow/core/kernels/
 * training_ops.cc), which apply the same rule as above with lr the decayed
 * learning rate, beta_1^t = pow(beta_1, t) and `1 - beta_1` computed in the
 * variable's dtype. `epsilon or backend.epsilon()`: an epsilon of 0 or None
 * means 1e-7. Sparse gradients (Adam._resource_apply_sparse), duplicates summed:
 *
 *     lr_t  = lr * (sqrt(1 - beta_2^t) / (1 - beta_1^t))
 *     m     = m * beta_1                  (every row)
 *     m[i]  = m[i] + g * (1 - beta_1)     (indexed rows: scatter_add)
 *     v     = v * beta_2;  v[i] = v[i] + (g * g) * (1 - beta_2)
 *     vhat  = max(vhat, v)                (amsgrad, every row)
 *     w     = w - lr_t * m / (sqrt(v or vhat) + epsilon)   (every row)
 *
 * Keras 3 sparse gradients give the dense result with a zero gradient on the
 * rows without an index (m and v decay on every row).
 *
 * Slots: "m", "v", and "vhat" when amsgrad (fixed once slots exist). */
#include "optimizers/adam_coef.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


enum { P_BETA_1, P_BETA_2, P_EPSILON, P_EPSILON_LEGACY, P_AMSGRAD };

static const optim_param adam_params[] = {
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.999, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 1e-7, 0.0, INFINITY},
    /* Legacy: `epsilon or backend_config.epsilon()`, so None (and 0) mean 1e-7. */
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE | OPTIM_PARAM_LEGACY_ONLY, 1e-7, 0.0,
     INFINITY},
    {"amsgrad", OPTIM_PARAM_BOOL, 0, 0.0, 0.0, 1.0},
};

typedef optim__adam_coef coef;

/* amsgrad as the slots were built: 0 none yet, 1 false, 2 true. */
typedef struct state {
    int built_amsgrad;
} state;

static int amsgrad_on(optim_optimizer *opt)
{
    double a = 0;
    return optim_get_hyper(opt, "amsgrad", &a) == 0 && a != 0;
}

int optim__adam_check_amsgrad(optim_optimizer *opt, int built, const char *cls, optim_error *err)
{
    if (!built || optim_get_slot_names(opt, NULL, 0) == 0 || amsgrad_on(opt) == (built == 2))
        return 0;
    err->code = OPTIM_ESTATE;
    snprintf(err->msg, sizeof err->msg,
             "%s: amsgrad cannot change once slots exist (they were created with amsgrad=%s)", cls,
             built == 2 ? "true" : "false");
    return OPTIM_ESTATE;
}

int optim__adam_create_slots(optim_optimizer *opt, optim_var *var, int *built)
{
    int ams = amsgrad_on(opt);
    *built = ams ? 2 : 1;
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
    if (!rc) rc = optim_add_slot(opt, var, "v", OPTIM_SLOT_ZEROS, 0);
    if (!rc && ams) rc = optim_add_slot(opt, var, "vhat", OPTIM_SLOT_ZEROS, 0);
    return rc;
}

static int validate(optim_optimizer *opt, optim_error *err)
{
    const state *s = optim_state(opt);
    return optim__adam_check_amsgrad(opt, s->built_amsgrad, "Adam", err);
}


int optim__adam_get_config(optim_optimizer *opt, optim_config *cfg)
{
    double e;
    if (optim_generation_of(opt) != OPTIM_LEGACY || optim_get_hyper(opt, "epsilon", &e) ||
        !(isnan(e) || e == 0))
        return 0;
    return optim_config_put_number(cfg, "epsilon", OPTIM__ADAM_LEGACY_EPSILON);
}

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    state *s = optim_state(opt);
    return optim__adam_create_slots(opt, var, &s->built_amsgrad);
}

void optim__adam_prepare(optim_optimizer *opt, optim_dtype dtype, optim__adam_coef *k)
{
    const int legacy = optim_generation_of(opt) == OPTIM_LEGACY;
    const double lr = optim_learning_rate(opt, dtype);
    /* The family's params 0..3 (adam_coef.h), as Adam's own enum. */
    const double b1 = optim_param_value(opt, P_BETA_1), b2 = optim_param_value(opt, P_BETA_2);
    double eps = optim_param_value(opt, legacy ? P_EPSILON_LEGACY : P_EPSILON);
    if (legacy && (isnan(eps) || eps == 0)) eps = OPTIM__ADAM_LEGACY_EPSILON;
    const int64_t t = optim_iterations(opt) + 1;
    if (dtype == OPTIM_F32) {
        const float l = (float)lr, fb1 = (float)b1, fb2 = (float)b2, ft = (float)t;
        const float p1 = powf(fb1, ft), p2 = powf(fb2, ft);
        const float s = sqrtf(1.0f - p2), d = 1.0f - p1;
        k->alpha = l * s / d;
        k->lr_sparse = l * (s / d);
        k->beta_1 = fb1;
        k->beta_2 = fb2;
        k->one_minus_beta_1 = legacy ? 1.0f - fb1 : (float)(1.0 - b1);
        k->one_minus_beta_2 = legacy ? 1.0f - fb2 : (float)(1.0 - b2);
        k->epsilon = (float)eps;
    } else {
        const double p1 = pow(b1, (double)t), p2 = pow(b2, (double)t);
        const double s = sqrt(1.0 - p2), d = 1.0 - p1;
        k->alpha = lr * s / d;
        k->lr_sparse = lr * (s / d);
        k->beta_1 = b1;
        k->beta_2 = b2;
        k->one_minus_beta_1 = 1.0 - b1;
        k->one_minus_beta_2 = 1.0 - b2;
        k->epsilon = eps;
    }
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    optim__adam_prepare(opt, dtype, c);
}

/* One element i of the dense rule, gradient G; AMS is a constant 0 or 1, so
 * that each combination compiles to its own vectorised loop. */
#define ADAM_ELEMENT(T, SQRT, G, AMS)                  \
    {                                                  \
        const T gi = (G);                              \
        const T mi = m[i] + (gi - m[i]) * c1;          \
        T vi = v[i] + (gi * gi - v[i]) * c2;           \
        m[i] = mi;                                     \
        v[i] = vi;                                     \
        if (AMS) {                                     \
            vi = vh[i] < vi ? vi : vh[i];              \
            vh[i] = vi;                                \
        }                                              \
        w[i] = w[i] - (mi * alpha) / (SQRT(vi) + eps); \
    }

/* The dense rule over n elements (vh NULL without amsgrad). */
#define ADAM_DENSE(T, SQRT)                                                                 \
    static void dense_##T(T *restrict w, const T *restrict g, T *restrict m, T *restrict v, \
                          T *restrict vh, int64_t n, const coef *k)                         \
    {                                                                                       \
        const T alpha = (T)k->alpha, c1 = (T)k->one_minus_beta_1;                           \
        const T c2 = (T)k->one_minus_beta_2, eps = (T)k->epsilon;                           \
        if (vh) {                                                                           \
            for (int64_t i = 0; i < n; i++) ADAM_ELEMENT(T, SQRT, g[i], 1)                  \
        } else {                                                                            \
            for (int64_t i = 0; i < n; i++) ADAM_ELEMENT(T, SQRT, g[i], 0)                  \
        }                                                                                   \
    }
ADAM_DENSE(float, sqrtf)
ADAM_DENSE(double, sqrt)

/* Legacy sparse, element i of a row: m and v decay, the gradient (if HAS_G)
 * is added, then w moves by lr_t * m / (sqrt(v) + epsilon). */
#define ADAM_LEGACY_ELEMENT(T, SQRT, HAS_G, AMS)  \
    {                                             \
        T mi = m[i] * b1, vi = v[i] * b2;         \
        if (HAS_G) {                              \
            mi = mi + g[i] * c1;                  \
            vi = vi + (g[i] * g[i]) * c2;         \
        }                                         \
        m[i] = mi;                                \
        v[i] = vi;                                \
        if (AMS) {                                \
            vi = vh[i] < vi ? vi : vh[i];         \
            vh[i] = vi;                           \
        }                                         \
        w[i] = w[i] - lr * mi / (SQRT(vi) + eps); \
    }

#define ADAM_LEGACY_ROW(T, SQRT)                                                                 \
    static void legacy_row_##T(T *restrict w, const T *restrict g, T *restrict m, T *restrict v, \
                               T *restrict vh, int64_t n, const coef *k)                         \
    {                                                                                            \
        const T lr = (T)k->lr_sparse, b1 = (T)k->beta_1, b2 = (T)k->beta_2;                      \
        const T c1 = (T)k->one_minus_beta_1, c2 = (T)k->one_minus_beta_2, eps = (T)k->epsilon;   \
        if (vh && g) {                                                                           \
            for (int64_t i = 0; i < n; i++) ADAM_LEGACY_ELEMENT(T, SQRT, 1, 1)                   \
        } else if (vh) {                                                                         \
            for (int64_t i = 0; i < n; i++) ADAM_LEGACY_ELEMENT(T, SQRT, 0, 1)                   \
        } else if (g) {                                                                          \
            for (int64_t i = 0; i < n; i++) ADAM_LEGACY_ELEMENT(T, SQRT, 1, 0)                   \
        } else {                                                                                 \
            for (int64_t i = 0; i < n; i++) ADAM_LEGACY_ELEMENT(T, SQRT, 0, 0)                   \
        }                                                                                        \
    }
ADAM_LEGACY_ROW(float, sqrtf)
ADAM_LEGACY_ROW(double, sqrt)

static void apply_dense(const optim_dense_update *u)
{
    void *vh = u->nslots > 2 ? u->slots[2] : 0;
    if (u->dtype == OPTIM_F32)
        dense_float(u->param, u->grad, u->slots[0], u->slots[1], vh, u->count, u->coef);
    else dense_double(u->param, u->grad, u->slots[0], u->slots[1], vh, u->count, u->coef);
}

/* Legacy, every row in order: indexed rows with their gradient row, the
 * others with none. */
#define ADAM_SPARSE(T)                                                       \
    static void sparse_##T(const optim_sparse_update *u)                     \
    {                                                                        \
        const coef *k = u->coef;                                             \
        const int64_t rs = u->row_size;                                      \
        T *w = u->param, *m = u->slots[0], *v = u->slots[1];                 \
        T *vh = u->nslots > 2 ? u->slots[2] : 0;                             \
        const T *g = u->values;                                              \
        int64_t j = 0;                                                       \
        for (int64_t r = 0; r < u->rows; r++) {                              \
            const T *gr = 0;                                                 \
            if (j < u->n && u->indices[j] == r) gr = g + rs * j++;           \
            const int64_t o = r * rs;                                        \
            legacy_row_##T(w + o, gr, m + o, v + o, vh ? vh + o : 0, rs, k); \
        }                                                                    \
    }
ADAM_SPARSE(float)
ADAM_SPARSE(double)

static void apply_sparse(const optim_sparse_update *u)
{
    if (u->dtype == OPTIM_F32) sparse_float(u);
    else sparse_double(u);
}

/* Keras 3: the dense equivalent (m and v decay on every row); legacy: the
 * walk above, on consecutive row ranges on all threads. */
static int sparse_mode(const optim_sparse_update *u)
{
    return optim_generation_of(u->opt) == OPTIM_LEGACY ? OPTIM_SPARSE_ALL_ROWS : OPTIM_SPARSE_DENSE;
}

const optim_class OPTIM_ISA_NAME(optim_adam_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Adam",
    .min_slots = 2,
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.001,
    .params = adam_params,
    .n_params = sizeof adam_params / sizeof *adam_params,
    .coef_size = sizeof(coef),
    .state_size = sizeof(state),
    .validate = validate,
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .get_config = optim__adam_get_config,
    .sparse_mode = sparse_mode,
    .keras3_module = "keras.optimizers",
    .legacy_module = "keras.optimizers.legacy",
    .keras_flags = OPTIM_KERAS_TF_KERAS,
    .nonnegative_slots = (const char *const[]){"v", "vhat", NULL},
};
