/* Adadelta.
 *
 * Zeiler, "ADADELTA: An Adaptive Learning Rate Method" (arXiv:1212.5701,
 * 2012), Algorithm 1, with a learning rate multiplying the step (1.0 gives
 * the paper's rule; Keras's default is 0.001).
 *
 * Keras 3 (keras/src/optimizers/adadelta.py, Adadelta.update_step), rho and
 * epsilon Python floats cast to the variable's dtype, 1 - rho computed in
 * double before the cast, rms(x) = sqrt(x + epsilon):
 *
 *     Eg  = rho * Eg + (1 - rho) * g^2
 *     d   = -((rms(Edx) * g) / rms(Eg))
 *     Edx = rho * Edx + (1 - rho) * d^2
 *     w   = w + lr * d
 *
 * Legacy (tf_keras/optimizers/legacy/adadelta.py, TF's ApplyAdadelta and
 * SparseApplyAdadelta kernels), 1 - rho computed in the variable's dtype and
 * rsqrt computed as 1 / sqrt:
 *
 *     Eg  = Eg * rho + g^2 * (1 - rho)
 *     u   = (sqrt(Edx + epsilon) * rsqrt(Eg + epsilon)) * g
 *     w   = w - u * lr
 *     Edx = Edx * rho + u^2 * (1 - rho)
 *
 * Legacy epsilon: `epsilon or backend_config.epsilon()`, so None and 0 mean
 * 1e-7 (and get_config writes 1e-07); legacy rho is a hyper (may change).
 *
 * Sparse gradients (duplicates summed first). Legacy: SparseApplyAdadelta on
 * the indexed rows only. Keras 3: the dense equivalent: on a row without an
 * index Eg and Edx decay (times rho) and w stays.
 *
 * Slots: "accum_grad" (Eg) and "accum_var" (Edx), the legacy names, in both
 * generations (Keras 3 names them accumulated_grad and accumulated_delta_var;
 * `optim replay` writes the legacy names). */
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

#include <math.h>

#define BACKEND_EPSILON 1e-7

enum { P_RHO, P_EPSILON, P_PER_GEN };
enum { K3 = 0, LG = P_PER_GEN };

/* Neither generation checks rho or epsilon. */
static const optim_param adadelta_params[] = {
    {"rho", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 0.95, -INFINITY, INFINITY},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 1e-7, -INFINITY, INFINITY},
    {"rho", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_LEGACY_ONLY, 0.95, -INFINITY,
     INFINITY},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_NULLABLE | OPTIM_PARAM_LEGACY_ONLY, 1e-7, -INFINITY,
     INFINITY},
};

typedef struct coef {
    double lr, rho, one_minus_rho, epsilon;
    int legacy;
} coef;

static int is_legacy(const optim_optimizer *opt)
{
    return optim_generation_of(opt) == OPTIM_LEGACY;
}

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    int rc = optim_add_slot(opt, var, "accum_grad", OPTIM_SLOT_ZEROS, 0);
    return rc ? rc : optim_add_slot(opt, var, "accum_var", OPTIM_SLOT_ZEROS, 0);
}

/* Legacy get_config writes self.epsilon, which is 1e-7 when given as None
 * or 0 (epsilon is the last key, so replacing it keeps the order). */
static int get_config(optim_optimizer *opt, optim_config *cfg)
{
    double eps = 0;
    if (!is_legacy(opt) || optim_get_hyper(opt, "epsilon", &eps)) return OPTIM_OK;
    if (!isnan(eps) && eps != 0) return OPTIM_OK;
    return optim_config_put(cfg, "epsilon", "1e-07");
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    int legacy = is_legacy(opt);
    size_t b = legacy ? LG : K3;
    double rho = optim_param_value(opt, b + P_RHO), eps = optim_param_value(opt, b + P_EPSILON);
    if (legacy && (isnan(eps) || eps == 0)) eps = BACKEND_EPSILON;
    k->lr = optim_learning_rate(opt, dtype);
    k->legacy = legacy;
    if (dtype == OPTIM_F32) {
        float r = (float)rho;
        k->rho = r;
        /* Legacy: static_cast<T>(1) - rho in the kernel; Keras 3: 1 - rho in Python. */
        k->one_minus_rho = legacy ? (float)(1.0f - r) : (float)(1.0 - rho);
        k->epsilon = (float)eps;
    } else {
        k->rho = rho;
        k->one_minus_rho = 1.0 - rho;
        k->epsilon = eps;
    }
}

#define ADADELTA_KERNELS(T, SQRT)                                                               \
    static void keras3_##T(T *restrict w, const T *restrict g, T *restrict eg, T *restrict edx, \
                           int64_t n, const coef *k)                                            \
    {                                                                                           \
        const T lr = (T)k->lr, rho = (T)k->rho, omr = (T)k->one_minus_rho;                      \
        const T eps = (T)k->epsilon;                                                            \
        for (int64_t i = 0; i < n; i++) {                                                       \
            const T gi = g[i];                                                                  \
            const T egi = rho * eg[i] + omr * (gi * gi);                                        \
            eg[i] = egi;                                                                        \
            const T d = -((SQRT(edx[i] + eps) * gi) / SQRT(egi + eps));                         \
            edx[i] = rho * edx[i] + omr * (d * d);                                              \
            w[i] = w[i] + lr * d;                                                               \
        }                                                                                       \
    }                                                                                           \
    /* ApplyAdadelta / SparseApplyAdadelta (one row). */                                        \
    static void legacy_##T(T *restrict w, const T *restrict g, T *restrict eg, T *restrict edx, \
                           int64_t n, const coef *k)                                            \
    {                                                                                           \
        const T lr = (T)k->lr, rho = (T)k->rho, omr = (T)k->one_minus_rho;                      \
        const T eps = (T)k->epsilon;                                                            \
        for (int64_t i = 0; i < n; i++) {                                                       \
            const T gi = g[i];                                                                  \
            const T egi = eg[i] * rho + (gi * gi) * omr;                                        \
            eg[i] = egi;                                                                        \
            const T up = (SQRT(edx[i] + eps) * ((T)1 / SQRT(egi + eps))) * gi;                  \
            w[i] = w[i] - up * lr;                                                              \
            edx[i] = edx[i] * rho + (up * up) * omr;                                            \
        }                                                                                       \
    }
ADADELTA_KERNELS(float, sqrtf)
ADADELTA_KERNELS(double, sqrt)

static void apply_dense(const optim_dense_update *u)
{
    const coef *k = u->coef;
    if (u->dtype == OPTIM_F32)
        (k->legacy ? legacy_float : keras3_float)(u->param, u->grad, u->slots[0], u->slots[1],
                                                  u->count, k);
    else
        (k->legacy ? legacy_double : keras3_double)(u->param, u->grad, u->slots[0], u->slots[1],
                                                    u->count, k);
}

/* Sparse, legacy (SparseApplyAdadelta), indices unique and ascending: the
 * indexed rows. */
#define ADADELTA_SPARSE(T)                                                        \
    static void sparse_##T(const optim_sparse_update *u)                          \
    {                                                                             \
        const coef *k = u->coef;                                                  \
        T *w = u->param, *eg = u->slots[0], *edx = u->slots[1];                   \
        const T *g = u->values;                                                   \
        const int64_t rs = u->row_size;                                           \
        for (int64_t j = 0; j < u->n; j++) {                                      \
            const int64_t r = u->indices[j];                                      \
            legacy_##T(w + r * rs, g + j * rs, eg + r * rs, edx + r * rs, rs, k); \
        }                                                                         \
    }
ADADELTA_SPARSE(float)
ADADELTA_SPARSE(double)

static void apply_sparse(const optim_sparse_update *u)
{
    if (u->dtype == OPTIM_F32) sparse_float(u);
    else sparse_double(u);
}

/* Keras 3: the dense equivalent (every row, zero gradient where no index
 * points); legacy: the indexed rows only. */
static int sparse_mode(const optim_sparse_update *u)
{
    return ((const coef *)u->coef)->legacy ? OPTIM_SPARSE_ROWS : OPTIM_SPARSE_DENSE;
}

const optim_class OPTIM_ISA_NAME(optim_adadelta_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Adadelta",
    .min_slots = 2,
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.001,
    .params = adadelta_params,
    .n_params = sizeof adadelta_params / sizeof *adadelta_params,
    .coef_size = sizeof(coef),
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .get_config = get_config,
    .sparse_mode = sparse_mode,
    .keras3_module = "keras.optimizers",
    .legacy_module = "keras.optimizers.legacy",
    .keras_flags = OPTIM_KERAS_TF_KERAS,
};
