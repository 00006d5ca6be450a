/* AdamW: Adam with decoupled weight decay.
 *
 * Loshchilov & Hutter, "Decoupled Weight Decay Regularization" (ICLR 2019),
 * on top of Kingma & Ba's Adam (ICLR 2015) and Reddi et al.'s AMSGrad
 * (ICLR 2018). t = iterations + 1; per-step constants in the variable's dtype.
 *
 * Keras 3 (keras/src/optimizers/adamw.py): Adam with the base option
 * weight_decay defaulting to 0.004 and refused when None. The base class
 * decays first (base_optimizer._apply_weight_decay), then Adam.update_step:
 *
 *     w     = w - w * weight_decay * lr                       (base class)
 *     alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
 *     m     = m + (g - m) * (1 - beta_1)
 *     v     = v + (g^2 - v) * (1 - beta_2)
 *     vhat  = max(vhat, v), and vhat replaces v below         (amsgrad)
 *     w     = w - (m * alpha) / (sqrt(v) + epsilon)
 *
 * Legacy: TF Addons' tfa.optimizers.AdamW
 * (tensorflow_addons/optimizers/weight_decay_optimizers.py,
 * DecoupledWeightDecayExtension over tf.keras.optimizers.legacy.Adam).
 * `weight_decay` is a required hyperparameter, NOT multiplied by the
 * learning rate, applied before the Adam update:
 *
 *     dense:  w = w - weight_decay * w;  then TF's ApplyAdam /
 *             ApplyAdamWithAmsgrad kernel (the rule above, with 1 - beta
 *             in the variable's dtype and epsilon = epsilon or 1e-7)
 *     sparse: w[i] = w[i] - weight_decay * w[i] on the indexed rows only
 *             (duplicates summed), then legacy Adam._resource_apply_sparse,
 *             which moves every row:
 *               lr_t = lr * (sqrt(1 - beta_2^t) / (1 - beta_1^t))
 *               m = m * beta_1;  m[i] = m[i] + g * (1 - beta_1)
 *               v = v * beta_2;  v[i] = v[i] + (g * g) * (1 - beta_2)
 *               vhat = max(vhat, v)                            (amsgrad)
 *               w = w - lr_t * m / (sqrt(v or vhat) + epsilon)
 *
 *   Variables whose name matches one of the `exclude_from_weight_decay`
 *   patterns (Python regular expressions searched in the name, as
 *   re.search) are not decayed.
 *
 * Keras 3 sparse gradients give the dense result (zero gradient on rows
 * without an index; the base class decays every row).
 *
 * Slots: "m", "v", and "vhat" when amsgrad (fixed once slots exist). */
#include "optimizers/adam_coef.h"
#include "optimizers/decoupled_decay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { P_BETA_1, P_BETA_2, P_EPSILON, P_EPSILON_LEGACY, P_AMSGRAD, P_WEIGHT_DECAY };

static const optim_param adamw_params[] = {
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.999, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 1e-7, 0.0, INFINITY},
    /* Legacy: `epsilon or backend_config.epsilon()`, so None (and 0) mean 1e-7. */
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE | OPTIM_PARAM_LEGACY_ONLY, 1e-7, 0.0,
     INFINITY},
    {"amsgrad", OPTIM_PARAM_BOOL, 0, 0.0, 0.0, 1.0},
    /* TF Addons' required first argument; Keras 3's is the base option. */
    OPTIM__TFA_WEIGHT_DECAY_PARAM,
};

/* TF Addons' exclude_from_weight_decay (legacy only). */
static const optim_param adamw_patterns[] = {OPTIM__TFA_EXCLUDE_PARAM};

typedef struct coef {
    optim__adam_coef adam;
    double weight_decay; /* legacy only */
} coef;

typedef struct state {
    int built_amsgrad; /* 0 no slots yet, 1 false, 2 true */
} state;

/* ---- configuration ------------------------------------------------------------ */

static int amsgrad_on(optim_optimizer *opt)
{
    double a = 0;
    return optim_get_hyper(opt, "amsgrad", &a) == 0 && a != 0;
}

static int fail(optim_error *err, int code, const char *fmt, const char *arg)
{
    err->code = code;
    snprintf(err->msg, sizeof err->msg, fmt, arg);
    return code;
}

static int validate(optim_optimizer *opt, optim_error *err)
{
    const state *s = optim_state(opt);
    double wd = 0;
    int rc = optim__tfa_decay_validate(opt, "AdamW", err);
    if (rc) return rc;
    if (optim_get_hyper(opt, "weight_decay", &wd) == 0 && isnan(wd))
        return fail(err, OPTIM_EINVAL, "AdamW: weight_decay is None; %s",
                    "Keras 3's AdamW requires a float (default 0.004)");
    if (s->built_amsgrad && optim_get_slot_names(opt, NULL, 0) > 0 &&
        amsgrad_on(opt) != (s->built_amsgrad == 2))
        return fail(err, OPTIM_ESTATE,
                    "AdamW: amsgrad cannot change once slots exist (they were created with "
                    "amsgrad=%s)",
                    s->built_amsgrad == 2 ? "true" : "false");
    return 0;
}

/* ---- the update ------------------------------------------------------------------ */

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    state *s = optim_state(opt);
    int ams = amsgrad_on(opt);
    s->built_amsgrad = ams ? 2 : 1;
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
    if (!rc) rc = optim_add_slot(opt, var, "v", OPTIM_SLOT_ZEROS, 0);
    if (!rc && ams) rc = optim_add_slot(opt, var, "vhat", OPTIM_SLOT_ZEROS, 0);
    return rc;
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    optim__adam_prepare(opt, dtype, &k->adam);
    k->weight_decay = optim__tfa_weight_decay(opt, P_WEIGHT_DECAY, dtype);
}

/* One element i of the dense rule, gradient G, after w = w - wd * w when
 * DECAY (legacy). AMS and DECAY are constants 0 or 1, so that each
 * combination compiles to its own vectorised loop. */
#define ADAMW_ELEMENT(T, SQRT, G, AMS, DECAY)         \
    {                                                 \
        const T gi = (G);                             \
        const T wi = DECAY ? w[i] - wd * w[i] : w[i]; \
        const T mi = m[i] + (gi - m[i]) * c1;         \
        T vi = v[i] + (gi * gi - v[i]) * c2;          \
        m[i] = mi;                                    \
        v[i] = vi;                                    \
        if (AMS) {                                    \
            vi = vh[i] < vi ? vi : vh[i];             \
            vh[i] = vi;                               \
        }                                             \
        w[i] = wi - (mi * alpha) / (SQRT(vi) + eps);  \
    }

/* The dense rule over n elements (vh NULL without amsgrad). */
#define ADAMW_DENSE(T, SQRT)                                                                \
    static void dense_##T(T *restrict w, const T *restrict g, T *restrict m, T *restrict v, \
                          T *restrict vh, int64_t n, const coef *k, int decay)              \
    {                                                                                       \
        const T alpha = (T)k->adam.alpha, c1 = (T)k->adam.one_minus_beta_1;                 \
        const T c2 = (T)k->adam.one_minus_beta_2, eps = (T)k->adam.epsilon,                 \
                wd = (T)k->weight_decay;                                                    \
        switch ((vh ? 2 : 0) | (decay ? 1 : 0)) {                                           \
        case 3:                                                                             \
            for (int64_t i = 0; i < n; i++) ADAMW_ELEMENT(T, SQRT, g[i], 1, 1) break;       \
        case 2:                                                                             \
            for (int64_t i = 0; i < n; i++) ADAMW_ELEMENT(T, SQRT, g[i], 1, 0) break;       \
        case 1:                                                                             \
            for (int64_t i = 0; i < n; i++) ADAMW_ELEMENT(T, SQRT, g[i], 0, 1) break;       \
        default:                                                                            \
            for (int64_t i = 0; i < n; i++) ADAMW_ELEMENT(T, SQRT, g[i], 0, 0) break;       \
        }                                                                                   \
    }
ADAMW_DENSE(float, sqrtf)
ADAMW_DENSE(double, sqrt)

/* Legacy sparse, element i of a row: the decay (indexed rows, when DECAY),
 * m and v decay, the gradient (if HAS_G) is added, then w moves by
 * lr_t * m / (sqrt(v) + epsilon). */
#define ADAMW_LEGACY_ELEMENT(T, SQRT, HAS_G, AMS, DECAY) \
    {                                                    \
        const T wi = DECAY ? w[i] - wd * w[i] : w[i];    \
        T mi = m[i] * b1, vi = v[i] * b2;                \
        if (HAS_G) {                                     \
            mi = mi + g[i] * c1;                         \
            vi = vi + (g[i] * g[i]) * c2;                \
        }                                                \
        m[i] = mi;                                       \
        v[i] = vi;                                       \
        if (AMS) {                                       \
            vi = vh[i] < vi ? vi : vh[i];                \
            vh[i] = vi;                                  \
        }                                                \
        w[i] = wi - lr * mi / (SQRT(vi) + eps);          \
    }

#define ADAMW_LEGACY_ROW(T, SQRT)                                                                \
    static void legacy_row_##T(T *restrict w, const T *restrict g, T *restrict m, T *restrict v, \
                               T *restrict vh, int64_t n, const coef *k, int decay)              \
    {                                                                                            \
        const T lr = (T)k->adam.lr_sparse, b1 = (T)k->adam.beta_1, b2 = (T)k->adam.beta_2;       \
        const T c1 = (T)k->adam.one_minus_beta_1, c2 = (T)k->adam.one_minus_beta_2,              \
                eps = (T)k->adam.epsilon;                                                        \
        const T wd = (T)k->weight_decay;                                                         \
        switch ((vh ? 4 : 0) | (g ? 2 : 0) | (g && decay ? 1 : 0)) {                             \
        case 7:                                                                                  \
            for (int64_t i = 0; i < n; i++) ADAMW_LEGACY_ELEMENT(T, SQRT, 1, 1, 1) break;        \
        case 6:                                                                                  \
            for (int64_t i = 0; i < n; i++) ADAMW_LEGACY_ELEMENT(T, SQRT, 1, 1, 0) break;        \
        case 4:                                                                                  \
            for (int64_t i = 0; i < n; i++) ADAMW_LEGACY_ELEMENT(T, SQRT, 0, 1, 0) break;        \
        case 3:                                                                                  \
            for (int64_t i = 0; i < n; i++) ADAMW_LEGACY_ELEMENT(T, SQRT, 1, 0, 1) break;        \
        case 2:                                                                                  \
            for (int64_t i = 0; i < n; i++) ADAMW_LEGACY_ELEMENT(T, SQRT, 1, 0, 0) break;        \
        default:                                                                                 \
            for (int64_t i = 0; i < n; i++) ADAMW_LEGACY_ELEMENT(T, SQRT, 0, 0, 0) break;        \
        }                                                                                        \
    }
ADAMW_LEGACY_ROW(float, sqrtf)
ADAMW_LEGACY_ROW(double, sqrt)

static void apply_dense(const optim_dense_update *u)
{
    void *vh = u->nslots > 2 ? u->slots[2] : 0;
    const int decay =
        optim_generation_of(u->opt) == OPTIM_LEGACY && optim__tfa_decays(u->opt, u->var);
    if (u->dtype == OPTIM_F32)
        dense_float(u->param, u->grad, u->slots[0], u->slots[1], vh, u->count, u->coef, decay);
    else dense_double(u->param, u->grad, u->slots[0], u->slots[1], vh, u->count, u->coef, decay);
}

/* Legacy, every row in order: indexed rows with their gradient row (and the
 * weight decay), the others with none. */
#define ADAMW_SPARSE(T)                                               \
    static void sparse_##T(const optim_sparse_update *u, int decay)   \
    {                                                                 \
        const coef *k = u->coef;                                      \
        const int64_t rs = u->row_size;                               \
        T *w = u->param, *m = u->slots[0], *v = u->slots[1];          \
        T *vh = u->nslots > 2 ? u->slots[2] : 0;                      \
        const T *g = u->values;                                       \
        int64_t j = 0;                                                \
        for (int64_t r = 0; r < u->rows; r++) {                       \
            const T *gr = 0;                                          \
            if (j < u->n && u->indices[j] == r) gr = g + rs * j++;    \
            const int64_t o = r * rs;                                 \
            T *h = vh ? vh + o : 0;                                   \
            legacy_row_##T(w + o, gr, m + o, v + o, h, rs, k, decay); \
        }                                                             \
    }
ADAMW_SPARSE(float)
ADAMW_SPARSE(double)

static void apply_sparse(const optim_sparse_update *u)
{
    const int decay = optim__tfa_decays(u->opt, u->var);
    if (u->dtype == OPTIM_F32) sparse_float(u, decay);
    else sparse_double(u, decay);
}

/* Keras 3: the dense equivalent (m and v decay on every row; the base
 * applies the weight decay); legacy: the walk above, on row ranges on all
 * threads. */
static int sparse_mode(const optim_sparse_update *u)
{
    return optim_generation_of(u->opt) == OPTIM_LEGACY ? OPTIM_SPARSE_ALL_ROWS : OPTIM_SPARSE_DENSE;
}

const optim_class OPTIM_ISA_NAME(optim_adamw_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "AdamW",
    .min_slots = 2,
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.001,
    .default_weight_decay = 0.004,
    .params = adamw_params,
    .n_params = sizeof adamw_params / sizeof *adamw_params,
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
    .pattern_params = adamw_patterns,
    .n_pattern_params = sizeof adamw_patterns / sizeof *adamw_patterns,
    .tfa_name = "AdamW",
    .keras_flags = OPTIM_KERAS_TF_KERAS,
    .nonnegative_slots = (const char *const[]){"v", "vhat", NULL},
};
