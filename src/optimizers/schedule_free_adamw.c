/* ScheduleFreeAdamW: AdamW without a learning-rate schedule.
 *
 * Defazio et al., "The Road Less Scheduled" (NeurIPS 2024, arXiv:2405.15682),
 * github.com/facebookresearch/schedule_free. Keras 3 only (keras-team/keras
 * keras/src/optimizers/schedule_free_adamw.py at commit 3422977a5e38, added by
 * fa6947cddc18 for Keras 3.14; tests in schedule_free_adamw_test.py); tf.keras
 * has no legacy form.
 *
 * The variable holds y, the point where gradients are taken; the slot
 * "momentum" holds z (the sequence the gradient steps move, a copy of the
 * variable at first); x, the average used for evaluation, is recovered from
 * both. t = iterations + 1, all in the variable's dtype:
 *
 *     lr_t = lr * min(t / warmup_steps, 1)         (warmup_steps > 0; else lr)
 *     v    = v + (g^2 - v) * (1 - beta_2)
 *     z'   = z - (lr_t * g) / (sqrt(v / (1 - beta_2^t)) + epsilon)
 *     x    = (y - (1 - beta_1) * z) / beta_1      (with the old z)
 *     x'   = (1 - 1/t) * x + (1/t) * z'
 *     y'   = (1 - beta_1) * z' + beta_1 * x'
 *
 * Keras keeps `momentum_old = momentum.value` before updating z; with the
 * JAX and NumPy backends that is the old z (as the paper's x recovery needs),
 * with the torch backend's in-place assign it would alias the new one. This
 * follows the paper and the JAX backend. Keras 3's decoupled weight_decay
 * (base class, default None) decays y before the step.
 *
 * beta_1 must be above 0 here (x divides by it); Keras does not check.
 *
 * Sparse gradients: the dense equivalent (Keras densifies them in these
 * ops): rows without an index take the step with g = 0, so their v decays
 * and their y moves towards z's average.
 *
 * Slots, each variable's together (add_optimizer_variables interleaves):
 * "momentum" (a copy of the variable), "velocity" (zeros). Element-wise. */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

#include <math.h>
#include <stddef.h>

enum { P_BETA_1, P_BETA_2, P_EPSILON, P_WARMUP };

static const optim_param sfadamw_params[] = {
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MIN_EXCLUSIVE, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.999, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, 0, 1e-8, 0.0, INFINITY},
    {"warmup_steps", OPTIM_PARAM_INT, 0, 0.0, 0.0, INFINITY},
};

typedef struct coef {
    double lr, c2, bc2, eps, one_minus_b1, b1, weight;
} coef;

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    optim_set_slot_order(opt, OPTIM_SLOTS_BY_VARIABLE);
    int rc = optim_add_slot(opt, var, "momentum", OPTIM_SLOT_COPY, 0);
    return rc ? rc : optim_add_slot(opt, var, "velocity", OPTIM_SLOT_ZEROS, 0);
}

/* Keras casts lr, t, beta_1, beta_2 and epsilon to the dtype and computes
 * there; `1 - beta_2` and `1 - beta_1` are tensor ops in that dtype, and
 * `weight = 1.0 / local_step` too. */
static void prepare(optim_optimizer *opt, optim_dtype dtype, void *out)
{
    coef *k = out;
    const double lr = optim_learning_rate(opt, dtype), warm = optim_param_value(opt, P_WARMUP);
    const double b1 = optim_param_value(opt, P_BETA_1), b2 = optim_param_value(opt, P_BETA_2);
    const double eps = optim_param_value(opt, P_EPSILON), t = (double)(optim_iterations(opt) + 1);
    if (dtype == OPTIM_F32) {
        const float ft = (float)t, f1 = (float)b1, f2 = (float)b2;
        float l = (float)lr;
        if (warm > 0) l = l * fminf(ft / (float)warm, 1.0f);
        k->lr = l;
        k->c2 = 1.0f - f2;
        k->bc2 = 1.0f - powf(f2, ft);
        k->eps = (float)eps;
        k->b1 = f1;
        k->one_minus_b1 = 1.0f - f1;
        k->weight = 1.0f / ft;
    } else {
        k->lr = warm > 0 ? lr * fmin(t / warm, 1.0) : lr;
        k->c2 = 1.0 - b2;
        k->bc2 = 1.0 - pow(b2, t);
        k->eps = eps;
        k->b1 = b1;
        k->one_minus_b1 = 1.0 - b1;
        k->weight = 1.0 / t;
    }
}

/* One element, gradient G, in Keras's order of operations. */
#define SF_ELEMENT(T, SQRT, G)                                   \
    {                                                            \
        const T gi = (G), z_old = z[i];                          \
        const T vi = v[i] + (gi * gi - v[i]) * c2;               \
        v[i] = vi;                                               \
        const T zi = z_old - (lr * gi) / (SQRT(vi / bc2) + eps); \
        z[i] = zi;                                               \
        const T x_old = (w[i] - omb1 * z_old) / b1;              \
        const T x_new = (one - wt) * x_old + wt * zi;            \
        w[i] = omb1 * zi + b1 * x_new;                           \
    }

#define SF_KERNEL(T, SQRT)                                                                 \
    static void step_##T(T *restrict w, const T *restrict g, T *restrict z, T *restrict v, \
                         int64_t n, const coef *k)                                         \
    {                                                                                      \
        const T lr = (T)k->lr, c2 = (T)k->c2, bc2 = (T)k->bc2, eps = (T)k->eps;            \
        const T b1 = (T)k->b1, omb1 = (T)k->one_minus_b1, wt = (T)k->weight, one = 1;      \
        for (int64_t i = 0; i < n; i++) SF_ELEMENT(T, SQRT, g[i])                          \
    }
SF_KERNEL(float, sqrtf)
SF_KERNEL(double, sqrt)

static void apply_dense(const optim_dense_update *u)
{
    if (u->dtype == OPTIM_F32)
        step_float(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
    else step_double(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
}

const optim_class OPTIM_ISA_NAME(optim_schedule_free_adamw_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "ScheduleFreeAdamW",
    .min_slots = 2,
    .flags = OPTIM_CLASS_ELEMENTWISE | OPTIM_CLASS_KERAS3_ONLY,
    .default_learning_rate = 0.0025,
    .params = sfadamw_params,
    .n_params = sizeof sfadamw_params / sizeof *sfadamw_params,
    .coef_size = sizeof(coef),
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    /* No apply_sparse: a sparse gradient gets the dense equivalent (every
     * row, zero gradient where no index points). */
    .keras3_module = "keras.optimizers",
    .nonnegative_slots = (const char *const[]){"velocity", NULL},
};
