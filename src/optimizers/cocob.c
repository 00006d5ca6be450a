/* COCOB-Backprop: training without a learning rate, by coin betting.
 *
 * Orabona & Tommasi, "Training Deep Networks without Learning Rates Through
 * Coin Betting" (NeurIPS 2017, arXiv:1705.07795), Algorithm 2, as TF Addons
 * writes it (tensorflow_addons/optimizers/cocob.py, COCOB, an OptimizerV2;
 * legacy generation only). Element-wise, every operation in the variable's
 * dtype, in _resource_apply_dense's order (alpha, a Python number, becomes a
 * constant of that dtype):
 *
 *     L'  = max(L, |g|)
 *     G'  = G + g
 *     A'  = A + |g|
 *     R'  = max(R - g * x, 0)
 *     m   = max(A' + L', alpha * L')
 *     x'  = ((-G') / (L' * m)) * (R' + L')
 *     w   = (w - x) + x'
 *
 * with the slots L = "lr" (starts at 1e-8), A = "grad_norm_sum", G =
 * "gradients_sum", x = "tilde_w" (the bet now in w) and R = "reward", all
 * others starting at 0, created in that order for each variable. max is
 * tf.maximum: NaN if either side is NaN, else the larger (the first when
 * equal).
 *
 * Config: TFA's get_config writes OptimizerV2's keys (name; clipnorm,
 * clipvalue, global_clipnorm when set) and alpha (default 100, >= 1). The
 * constructor also takes use_locking (a bool, never stored: accepted here,
 * no effect, not written back) and OptimizerV2's decay (accepted, unused,
 * not written back). There is no learning rate: COCOB's constructor refuses
 * learning_rate (and lr, which from_config renames to it), so the base's
 * learning_rate stays at 0, unused; setting it is refused with a message.
 *
 * Sparse gradients: TFA's _resource_apply_sparse raises
 * NotImplementedError; here the step is refused before it changes anything
 * (OPTIM_CLASS_NO_SPARSE). */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"
#include "optim/step.h"

#include <math.h>
#include <string.h>

enum { P_ALPHA };

static const optim_param cocob_params[] = {
    {"alpha", OPTIM_PARAM_FLOAT, 0, 100.0, 1.0, INFINITY},
};

typedef struct coef {
    double alpha; /* in the variable's dtype */
} coef;

/* learning_rate (or lr) is no key of TFA's COCOB; the other base options of
 * the legacy generation are OptimizerV2's and optim's own. */
static int validate(optim_optimizer *opt, optim_error *err)
{
    static const char *const taken[] = {"decay", "clipnorm", "clipvalue", "global_clipnorm",
                                        "bf16_stochastic_rounding_seed"};
    char have[64];
    const char *name = optim_base_option_changed(opt, taken, sizeof taken / sizeof *taken, have,
                                                 sizeof have, NULL, 0);
    if (!name) return OPTIM_OK;
    return optim_error_set(err, OPTIM_EINVAL,
                           "COCOB: %s is %s; COCOB has no learning rate (coin betting sets the "
                           "step size; TF Addons' COCOB refuses learning_rate and lr)",
                           name, have);
}

/* use_locking: TFA's constructor takes a bool and drops it. */
static int set_config(optim_optimizer *opt, const char *key, const char *json_value,
                      optim_error *err)
{
    (void)opt;
    if (strcmp(key, "use_locking") != 0) return OPTIM_EKEY;
    if (strcmp(json_value, "true") == 0 || strcmp(json_value, "false") == 0) return OPTIM_OK;
    return optim_error_set(err, OPTIM_ETYPE, "COCOB: use_locking is %.100s, expected true or false",
                           json_value);
}

/* COCOB.get_config: {**OptimizerV2.get_config(), "alpha": alpha}. */
static int get_config(optim_optimizer *opt, optim_config *cfg)
{
    (void)opt;
    static const char *const keys[] = {"name", "clipnorm", "clipvalue", "global_clipnorm", "alpha"};
    return optim_config_keep(cfg, keys, sizeof keys / sizeof *keys, keys + 1, 3);
}

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    static const char *const zeros[] = {"grad_norm_sum", "gradients_sum", "tilde_w", "reward"};
    optim_set_slot_order(opt, OPTIM_SLOTS_BY_VARIABLE);
    int rc = optim_add_slot(opt, var, "lr", OPTIM_SLOT_CONSTANT, 1e-8);
    for (int i = 0; i < 4 && !rc; i++) rc = optim_add_slot(opt, var, zeros[i], OPTIM_SLOT_ZEROS, 0);
    return rc;
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    const double alpha = optim_param_value(opt, P_ALPHA);
    ((coef *)c)->alpha = dtype == OPTIM_F32 ? (double)(float)alpha : alpha;
}

/* tf.maximum (Eigen's max with NaN propagation). */
#define COCOB_MAX(T) \
    static inline T max_##T(T a, T b) { return isnan(a) ? a : isnan(b) ? b : a < b ? b : a; }
COCOB_MAX(float)
COCOB_MAX(double)

#define COCOB_DENSE(T, FABS)                                                                \
    static void dense_##T(T *restrict w, const T *restrict g, T *restrict L, T *restrict A, \
                          T *restrict G, T *restrict x, T *restrict R, int64_t n, T alpha)  \
    {                                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                   \
            const T gi = g[i], ag = FABS(gi);                                               \
            const T l = max_##T(L[i], ag), gs = G[i] + gi, as = A[i] + ag;                  \
            const T r = max_##T(R[i] - gi * x[i], (T)0);                                    \
            const T m = max_##T(as + l, alpha * l);                                         \
            const T nx = -gs / (l * m) * (r + l);                                           \
            w[i] = w[i] - x[i] + nx;                                                        \
            L[i] = l;                                                                       \
            A[i] = as;                                                                      \
            G[i] = gs;                                                                      \
            x[i] = nx;                                                                      \
            R[i] = r;                                                                       \
        }                                                                                   \
    }
COCOB_DENSE(float, fabsf)
COCOB_DENSE(double, fabs)

static void apply_dense(const optim_dense_update *u)
{
    void *const *s = u->slots;
    const double alpha = ((const coef *)u->coef)->alpha;
    if (u->dtype == OPTIM_F32)
        dense_float(u->param, u->grad, s[0], s[1], s[2], s[3], s[4], u->count, (float)alpha);
    else dense_double(u->param, u->grad, s[0], s[1], s[2], s[3], s[4], u->count, alpha);
}

const optim_class OPTIM_ISA_NAME(optim_cocob_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "COCOB",
    .flags = OPTIM_CLASS_ELEMENTWISE | OPTIM_CLASS_LEGACY_ONLY | OPTIM_CLASS_NO_SPARSE,
    .default_learning_rate = 0.0,
    .params = cocob_params,
    .n_params = sizeof cocob_params / sizeof *cocob_params,
    .coef_size = sizeof(coef),
    .validate = validate,
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .get_config = get_config,
    .set_config = set_config,
    .tfa_name = "COCOB",
    .nonnegative_slots = (const char *const[]){"lr", "grad_norm_sum", "reward", NULL},
    .min_slots = 5,
};
