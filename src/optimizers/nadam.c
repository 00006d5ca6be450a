/* Nadam: Adam with Nesterov momentum.
 *
 * Dozat, "Incorporating Nesterov Momentum into Adam" (ICLR 2016 workshop;
 * Stanford CS229 report, 2015). Both generations use a momentum schedule
 * mu_t and its running product; they differ in the schedule's exponent, in
 * how the product is kept, and in the sparse rule. t = iterations + 1
 * (Keras's local_step); everything below is in the variable's dtype T.
 *
 * Keras 3 (keras/src/optimizers/nadam.py):
 *
 *     mu_t  = beta_1 * (1 - 0.5 * 0.96^t)
 *     once per step, before the updates (_backend_update_step), in the
 *     dtype of the first variable (build's var_list[0]):
 *         u_product = (u_product * beta_1) * (1 - 0.5 * 0.96^t)     (starts at 1)
 *     per variable, with P = (T)u_product = mu_1 ... mu_t:
 *         m = m + (g - m) * (1 - beta_1)
 *         v = v + (g^2 - v) * (1 - beta_2)
 *         m_hat = (mu_{t+1} * m) / (1 - P * mu_{t+1}) + ((1 - mu_t) * g) / (1 - P)
 *         v_hat = v / (1 - beta_2^t)
 *         w = w - (m_hat * lr) / (sqrt(v_hat) + epsilon)
 *
 * Legacy (tf.keras OptimizerV2 Nadam, keras/optimizers/legacy/nadam.py):
 *
 *     mu_t  = beta_1 * (1 - 0.5 * 0.96^(decay * t))       decay = 0.004 (schedule_decay)
 *     S_t   = (T)momentum_cache * mu_t                      (momentum_cache read at step start)
 *     momentum_cache = S_t, assigned by the prepare of the cache's own dtype
 *                      (that of the first variable), so only in steps that
 *                      have a variable of that dtype
 *     g' = g / (1 - S_t)
 *     m  = beta_1 * m + (1 - beta_1) * g;       m' = m / (1 - S_t * mu_{t+1})
 *     v  = beta_2 * v + (1 - beta_2) * g^2;     v' = v / (1 - beta_2^t)
 *     m_bar = (1 - mu_t) * g' + mu_{t+1} * m'
 *     w  = w - (lr * m_bar) / (sqrt(v') + epsilon)
 *
 * with lr the learning rate *without* the legacy decay (Nadam's
 * _prepare_local does not call _decayed_lr: its `decay` is the schedule
 * decay) and epsilon = epsilon or 1e-7. OptimizerV2 Nadam sets
 * decay = schedule_decay (default 0.004) and discards a `decay` argument:
 * so does this class (the key is accepted, ignored, and written back as the
 * schedule decay, with "schedule_decay" too when it is not 0.004). The Keras 3 exponent is t itself: its schedule decays
 * 250 times faster than the legacy one.
 *
 * Sparse gradients: Keras 3 gives the dense equivalent. Legacy
 * (_resource_apply_sparse, duplicates summed first): m = beta_1 * m and
 * v = beta_2 * v on every row, then the indexed rows add (1 - beta_1) * g
 * and (1 - beta_2) * g^2 and only they move w, by the dense formula.
 *
 * Slots: "m" and "v" (zeros). Optimizer-level weight, in get_weights /
 * set_weights after iterations: "u_product" (Keras 3) or "momentum_cache"
 * (legacy), a scalar initialised to 1 in the first variable's dtype. */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { P_BETA_1, P_BETA_2, P_EPSILON, P_EPSILON_LEGACY };

static const optim_param nadam_params[] = {
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.999, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 1e-7, 0.0, INFINITY},
    /* OptimizerV2 takes None too (then backend.epsilon(), 1e-7). */
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_LEGACY_ONLY | OPTIM_PARAM_NULLABLE, 1e-7, 0.0,
     INFINITY},
};

#define LEGACY_EPSILON 1e-7 /* backend.epsilon() */
#define LEGACY_SCHEDULE_DECAY 0.004 /* OptimizerV2 Nadam's schedule_decay default */

typedef struct nadam_state {
    optim_var *cache; /* u_product / momentum_cache (an optimizer weight) */
    int advanced; /* the cache was advanced at least once */
    int64_t advanced_at; /* ... last at this value of iterations */
    double before, written; /* its value before and after that */
    int has_schedule_decay; /* legacy: schedule_decay given in the config */
    double schedule_decay;
} nadam_state;

/* Per-step constants in the variable's dtype (float values for F32). */
typedef struct coef {
    int legacy;
    double lr, epsilon, beta_1, beta_2, one_minus_b1, one_minus_b2;
    double mu_next; /* mu_{t+1} */
    double one_minus_mu; /* 1 - mu_t */
    double c_now; /* 1 - P  (legacy: 1 - S_t) */
    double c_next; /* 1 - P * mu_{t+1} */
    double c_v; /* 1 - beta_2^t */
} coef;

static double legacy_epsilon(double e) { return isnan(e) || e == 0 ? LEGACY_EPSILON : e; }

static double schedule_decay(const nadam_state *st)
{
    return st->has_schedule_decay ? st->schedule_decay : LEGACY_SCHEDULE_DECAY;
}

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    nadam_state *st = optim_state(opt);
    if (!st->cache) {
        /* Keras creates it with the dtype of the first variable it builds for. */
        const char *name =
            optim_generation_of(opt) == OPTIM_LEGACY ? "momentum_cache" : "u_product";
        int rc = optim_add_weight(opt, name, optim_compute_dtype(optim_var_dtype(var)), 0, NULL,
                                  OPTIM_SLOT_CONSTANT, 1.0, &st->cache);
        if (rc) return rc;
    }
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
    return rc ? rc : optim_add_slot(opt, var, "v", OPTIM_SLOT_ZEROS, 0);
}

/* mu at step s: b1 * (1 - 0.5 * 0.96^(scale * s)), in dtype. Keras 3 has
 * no scale (pow(0.96, s)); legacy multiplies s by the schedule decay. */
static double mu_at(optim_dtype dtype, double b1, int legacy, double decay, int64_t s)
{
    if (dtype == OPTIM_F32) {
        float e = (float)s;
        if (legacy) e = (float)decay * e;
        return (float)b1 * (1.0f - 0.5f * powf(0.96f, e));
    }
    double e = (double)s;
    if (legacy) e = decay * e;
    return b1 * (1.0 - 0.5 * pow(0.96, e));
}

static void cache_write(nadam_state *st, double x, int64_t it, double before)
{
    if (optim_var_dtype(st->cache) == OPTIM_F32) *(float *)optim_var_data(st->cache) = (float)x;
    else *(double *)optim_var_data(st->cache) = x;
    st->advanced = 1;
    st->advanced_at = it;
    st->before = before;
    st->written = optim_var_get(st->cache, 0);
}

/* The learning rate without the legacy lr decay (legacy Nadam reads the
 * hyper directly: its `decay` is the momentum schedule's). */
static double raw_learning_rate(optim_optimizer *opt, optim_dtype dtype)
{
    double d = 0, lr;
    if (optim_hyper_is_constant(opt, "decay") && !optim_get_hyper(opt, "decay", &d) && d == 0)
        return optim_learning_rate(opt, dtype);
    /* A variable, callable or schedule learning rate is read again here, as
     * OptimizerV2._get_hyper does once per dtype. */
    if (optim_get_hyper(opt, "learning_rate", &lr)) return optim_learning_rate(opt, dtype);
    return dtype == OPTIM_F32 ? (double)(float)lr : lr;
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    nadam_state *st = optim_state(opt);
    const int legacy = optim_generation_of(opt) == OPTIM_LEGACY;
    const int f32 = dtype == OPTIM_F32;
    const double b1 = optim_param_value(opt, P_BETA_1), b2 = optim_param_value(opt, P_BETA_2);
    const int64_t it = optim_iterations(opt), t = it + 1;
    const optim_dtype cdt = optim_var_dtype(st->cache);
    const double decay = schedule_decay(st);

    /* Has the cache been advanced in this step already (by the other
     * dtype's prepare)? A set_weights since would have changed its value
     * or the iterations. */
    const double cur = optim_var_get(st->cache, 0);
    const int this_step = st->advanced && st->advanced_at == it && cur == st->written;
    const double start = this_step ? st->before : cur;

    const double mu = mu_at(dtype, b1, legacy, decay, t);
    const double mu_next = mu_at(dtype, b1, legacy, decay, t + 1);
    double now; /* P (Keras 3) or S_t (legacy), in dtype */
    if (legacy) {
        /* m_schedule_new = cast(m_cache_read, T) * m_t; assigned in the
         * cache's dtype. */
        now = f32 ? (double)((float)start * (float)mu) : start * mu;
        if (dtype == cdt && !this_step) cache_write(st, now, it, start);
    } else {
        if (!this_step) {
            /* u_product * beta_1 * (1 - 0.5 * 0.96^t), in the cache's dtype. */
            double x;
            if (cdt == OPTIM_F32)
                x = ((float)start * (float)b1) * (1.0f - 0.5f * powf(0.96f, (float)t));
            else x = (start * b1) * (1.0 - 0.5 * pow(0.96, (double)t));
            cache_write(st, x, it, start);
        }
        now = f32 ? (double)(float)st->written : st->written;
    }

    k->legacy = legacy;
    if (f32) {
        const float b1f = (float)b1, b2f = (float)b2, nowf = (float)now;
        const float nextf = nowf * (float)mu_next;
        k->lr = legacy ? raw_learning_rate(opt, dtype) : optim_learning_rate(opt, dtype);
        k->epsilon = (float)(legacy ? legacy_epsilon(optim_param_value(opt, P_EPSILON_LEGACY))
                                    : optim_param_value(opt, P_EPSILON));
        k->beta_1 = b1f;
        k->beta_2 = b2f;
        k->one_minus_b1 = 1.0f - b1f;
        k->one_minus_b2 = 1.0f - b2f;
        k->mu_next = (float)mu_next;
        k->one_minus_mu = 1.0f - (float)mu;
        k->c_now = 1.0f - nowf;
        k->c_next = 1.0f - nextf;
        k->c_v = 1.0f - powf(b2f, (float)t);
    } else {
        k->lr = legacy ? raw_learning_rate(opt, dtype) : optim_learning_rate(opt, dtype);
        k->epsilon = legacy ? legacy_epsilon(optim_param_value(opt, P_EPSILON_LEGACY))
                            : optim_param_value(opt, P_EPSILON);
        k->beta_1 = b1;
        k->beta_2 = b2;
        k->one_minus_b1 = 1.0 - b1;
        k->one_minus_b2 = 1.0 - b2;
        k->mu_next = mu_next;
        k->one_minus_mu = 1.0 - mu;
        k->c_now = 1.0 - now;
        k->c_next = 1.0 - now * mu_next;
        k->c_v = 1.0 - pow(b2, (double)t);
    }
}

/* dense_keras3_T, dense_legacy_T and decay_legacy_T (nadam_kernels.inc). */
#define T float
#define SQRT sqrtf
#include "nadam_kernels.inc"
#define T double
#define SQRT sqrt
#include "nadam_kernels.inc"

static void apply_dense(const optim_dense_update *u)
{
    const coef *k = u->coef;
    if (u->dtype == OPTIM_F32)
        (k->legacy ? dense_legacy_float : dense_keras3_float)(u->param, u->grad, u->slots[0],
                                                              u->slots[1], u->count, k);
    else
        (k->legacy ? dense_legacy_double : dense_keras3_double)(u->param, u->grad, u->slots[0],
                                                                u->slots[1], u->count, k);
}

/* Sparse, legacy, indices unique and ascending; every row is visited. An
 * indexed row takes the legacy dense rule (m * beta_1 then a scatter-add of
 * g * (1 - beta_1) gives the same numbers, and w + (-lr * m_bar) / d equals
 * w - (lr * m_bar) / d); another row only the moments' decay. */
#define NADAM_SPARSE(T)                                                   \
    static void sparse_##T(const optim_sparse_update *u)                  \
    {                                                                     \
        const coef *k = u->coef;                                          \
        T *w = u->param, *m = u->slots[0], *v = u->slots[1];              \
        const T *g = u->values;                                           \
        const int64_t rs = u->row_size;                                   \
        int64_t j = 0;                                                    \
        for (int64_t r = 0; r < u->rows; r++) {                           \
            const int64_t o = r * rs;                                     \
            if (j < u->n && u->indices[j] == r) {                         \
                dense_legacy_##T(w + o, g + j * rs, m + o, v + o, rs, k); \
                j++;                                                      \
            } else {                                                      \
                decay_legacy_##T(m + o, v + o, rs, k);                    \
            }                                                             \
        }                                                                 \
    }
NADAM_SPARSE(float)
NADAM_SPARSE(double)

static void apply_sparse(const optim_sparse_update *u)
{
    if (u->dtype == OPTIM_F32) sparse_float(u);
    else sparse_double(u);
}

/* Keras 3: the dense equivalent (the dense rule with g = 0 on rows without
 * an index); legacy: the walk above, on row ranges on all threads. */
static int sparse_mode(const optim_sparse_update *u)
{
    return ((const coef *)u->coef)->legacy ? OPTIM_SPARSE_ALL_ROWS : OPTIM_SPARSE_DENSE;
}

/* ---- config ------------------------------------------------------------------ */

/* Legacy: OptimizerV2 Nadam's backwards-compatible schedule_decay
 * (kwargs["decay"] = kwargs.pop("schedule_decay", 0.004)). */
static int set_config(optim_optimizer *opt, const char *key, const char *json_value,
                      optim_error *err)
{
    if (optim_generation_of(opt) != OPTIM_LEGACY || strcmp(key, "schedule_decay") != 0)
        return OPTIM_EKEY;
    char *end = NULL;
    double x = strtod(json_value, &end);
    if (end == json_value || *end || !isfinite(x) || !(x >= 0)) {
        err->code = OPTIM_ERANGE;
        snprintf(err->msg, sizeof err->msg,
                 "Nadam: config key 'schedule_decay' is %s, expected a number in [0, inf)",
                 json_value);
        return OPTIM_ERANGE;
    }
    nadam_state *st = optim_state(opt);
    st->has_schedule_decay = 1;
    st->schedule_decay = x;
    return 0;
}


/* Legacy get_config writes decay = the schedule decay (self._initial_decay)
 * and epsilon = epsilon or 1e-7, each in its place. */
static int get_config(optim_optimizer *opt, optim_config *cfg)
{
    if (optim_generation_of(opt) != OPTIM_LEGACY) return 0;
    const nadam_state *st = optim_state(opt);
    double e;
    int rc = 0;
    if (!optim_get_hyper(opt, "epsilon", &e) && (isnan(e) || e == 0))
        rc = optim_config_put_number(cfg, "epsilon", LEGACY_EPSILON);
    if (!rc) rc = optim_config_put_number(cfg, "decay", schedule_decay(st));
    /* tf.keras reads `decay` back as 0.004: a schedule decay of another
     * value is written under its own key too, which both read, so the
     * config round-trips (a checkpoint's resume relies on it). */
    if (!rc && schedule_decay(st) != LEGACY_SCHEDULE_DECAY)
        rc = optim_config_put_number(cfg, "schedule_decay", schedule_decay(st));
    return rc;
}

const optim_class OPTIM_ISA_NAME(optim_nadam_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Nadam",
    .min_slots = 2,
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.001,
    .params = nadam_params,
    .n_params = sizeof nadam_params / sizeof *nadam_params,
    .coef_size = sizeof(coef),
    .state_size = sizeof(nadam_state),
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .get_config = get_config,
    .set_config = set_config,
    .sparse_mode = sparse_mode,
    .keras3_module = "keras.optimizers",
    .legacy_module = "keras.optimizers.legacy",
    .keras_flags = OPTIM_KERAS_TF_KERAS,
    .nonnegative_slots = (const char *const[]){"v", NULL},
};
