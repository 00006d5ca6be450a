/*
 * TemplateName.c - the optimizer class TemplateName, a plugin for the `optim`
 * command, written by `optim new-plugin`. Every member of the class table
 * (optim/optimizer_class.h, version OPTIM_CLASS_VERSION) is set below, with
 * what it is for; docs/custom-optimizer.md in optim's sources is the guide.
 *
 * The rule is a placeholder to replace with yours: Adam's, in tf.keras's
 * form (TensorFlow's ApplyAdam kernel), with t = iterations + 1,
 *
 *     m = m + (g - m) * (1 - beta_1)
 *     v = v + (g^2 - v) * (1 - beta_2)
 *     w = w - lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon)
 *
 * Slots "m" and "v", zeros. Element-wise (the library runs it in chunks on
 * all threads); sparse gradients are lazy: only the indexed rows of w, m and
 * v change. reference.py holds the same rule in numpy: change both.
 *
 * This file is compiled three times, once per x86-64 level (baseline, AVX2,
 * AVX-512: optim_add_plugin's ISA_SOURCES in CMakeLists.txt, optim/isa.h),
 * and the library runs the class table of the level it picked at start-up;
 * what must exist once (the entry point, schedules) is under
 * OPTIM_ISA_BASELINE at the end. Plain C loops give the same bits on every
 * level (the flags forbid contracting into FMA).
 *
 *     optim --plugin ./libTemplateName.so conformance TemplateName
 *     optim --plugin ./libTemplateName.so bench '"TemplateName"'
 */
#include <optim/isa.h>
#include <optim/plugin.h>

#include <math.h>

/* ---- config keys (Keras's __init__ arguments) ------------------------------
 * The base class reads, checks, writes and serialises them; learning_rate,
 * clipnorm and the other base keys come for free. Names lower-case, ranges
 * [min, max] checked on every set and step; DYNAMIC: may be a variable,
 * callable or schedule, as a Keras _set_hyper. Read them in hooks with
 * optim_param_value(opt, P_...), in this order. */
enum { P_BETA_1, P_BETA_2, P_EPSILON };

static const optim_param TemplateName_params[] = {
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.999, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, 0, 1e-7, 0.0, INFINITY},
};

/* What prepare computes once per step and dtype, for every element. */
typedef struct TemplateName_coef {
    double step; /* lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) */
    double c1, c2, eps; /* 1 - beta_1, 1 - beta_2, epsilon */
} TemplateName_coef;

/* validate: after creation and each config change, the cross-key rules the
 * per-key ranges cannot say (constant values only: optim_get_hyper). Fill
 * err and return its code to refuse. This rule has none. */
static int TemplateName_validate(optim_optimizer *opt, optim_error *err)
{
    (void)opt;
    (void)err;
    return 0;
}

/* create_slots: once per variable, at its first gradient. The kernels read
 * slots[k] in this order; min_slots (below) says how many always exist. */
static int TemplateName_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err; /* optim_add_slot sets the step's message itself */
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0.0);
    return rc ? rc : optim_add_slot(opt, var, "v", OPTIM_SLOT_ZEROS, 0.0);
}

/* prepare: once per step and dtype, before any update, on the calling
 * thread. optim_iterations is the count before this step (Keras's
 * local_step is iterations + 1). Round F32 coefficients through float, as
 * TensorFlow computes them in the variable's dtype. */
static void TemplateName_prepare(optim_optimizer *opt, optim_dtype dtype, void *coef)
{
    TemplateName_coef *k = coef;
    const double t = (double)optim_iterations(opt) + 1;
    const double b1 = optim_param_value(opt, P_BETA_1), b2 = optim_param_value(opt, P_BETA_2);
    k->eps = optim_param_value(opt, P_EPSILON);
    k->step = optim_learning_rate(opt, dtype) * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
    k->c1 = 1 - b1;
    k->c2 = 1 - b2;
    if (dtype == OPTIM_F32) {
        k->step = (float)k->step;
        k->c1 = 1.0f - (float)b1;
        k->c2 = 1.0f - (float)b2;
        k->eps = (float)k->eps;
    }
}

/* The rule over n contiguous elements in T's arithmetic: one fused pass,
 * coefficients in locals, no state outside its arguments (hooks run on
 * several threads at once). restrict (the arrays never overlap) and each
 * element read once into a local let the compiler vectorise the loop
 * without run-time overlap checks; the form of the m and v updates is
 * TensorFlow's (b * m + (1 - b) * g rounds differently, and ran 3x slower
 * on an Intel Xeon in `optim bench`). */
#define RULE_KERNEL(T, SQRT)                                                                       \
    static void TemplateName_##T(T *restrict w, const T *restrict g, T *restrict m, T *restrict v, \
                                 int64_t n, const TemplateName_coef *k)                            \
    {                                                                                              \
        const T c1 = (T)k->c1, c2 = (T)k->c2, eps = (T)k->eps, step = (T)k->step;                  \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const T gi = g[i];                                                                     \
            const T mi = m[i] + (gi - m[i]) * c1;                                                  \
            const T vi = v[i] + (gi * gi - v[i]) * c2;                                             \
            m[i] = mi;                                                                             \
            v[i] = vi;                                                                             \
            w[i] = w[i] - step * mi / (SQRT(vi) + eps);                                            \
        }                                                                                          \
    }
RULE_KERNEL(float, sqrtf)
RULE_KERNEL(double, sqrt)

/* apply_dense: u->count elements from u->offset (a chunk, the class being
 * element-wise), of dtype F32 or F64 (float16 and bfloat16 variables arrive
 * as F32). Write only param and slots, only this range. */
static void TemplateName_apply_dense(const optim_dense_update *u)
{
    if (u->dtype == OPTIM_F32)
        TemplateName_float(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
    else TemplateName_double(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
}

/* apply_sparse: rows u->indices[0 .. n-1] (unique, duplicates summed by the
 * library), gradient row j at values + j * row_size. Lazy: the dense rule
 * on each indexed row only. In OPTIM_SPARSE_ROWS mode (sparse_mode below)
 * each call gets a range of the indices, several calls at once. */
static void TemplateName_apply_sparse(const optim_sparse_update *u)
{
    for (int64_t j = 0; j < u->n; j++) {
        int64_t at = u->indices[j] * u->row_size, from = j * u->row_size;
        if (u->dtype == OPTIM_F32)
            TemplateName_float((float *)u->param + at, (const float *)u->values + from,
                               (float *)u->slots[0] + at, (float *)u->slots[1] + at, u->row_size,
                               u->coef);
        else
            TemplateName_double((double *)u->param + at, (const double *)u->values + from,
                                (double *)u->slots[0] + at, (double *)u->slots[1] + at, u->row_size,
                                u->coef);
    }
}

/* sparse_mode: how a sparse update runs. OPTIM_SPARSE_ROWS: lazy, rows on
 * all threads; OPTIM_SPARSE_DENSE: Keras 3's dense equivalent (apply_dense
 * on the summed rows, zero elsewhere); OPTIM_SPARSE_WHOLE: one call. */
static int TemplateName_sparse_mode(const optim_sparse_update *u)
{
    (void)u;
    return OPTIM_SPARSE_ROWS;
}

/* bytes_per_param: what one step moves per element in the variable's
 * storage dtype, for `optim bench`: the gradient read, w, m and v each read
 * and written. Count every pass if your rule makes more than one. */
static double TemplateName_bytes_per_param(const optim_optimizer *opt, const optim_var *var)
{
    (void)opt;
    return (double)optim_dtype_size(optim_var_dtype(var)) * (1 + 2 * 3);
}

/* The class table of this level: TemplateName_class, TemplateName_class_avx2
 * or TemplateName_class_avx512. */
const optim_class OPTIM_ISA_NAME(TemplateName_class) = {
    .size = sizeof(optim_class), /* always: a later library reads this table */
    .version = OPTIM_CLASS_VERSION,
    .name = "TemplateName", /* JSON "class_name", case-insensitive */
    /* ELEMENTWISE: an element's update needs only that element and coef.
     * OPTIM_CLASS_KERAS3_ONLY / _LEGACY_ONLY: a class of one generation. */
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.001,
    .default_weight_decay = 0, /* Keras 3's weight_decay: 0 keeps None */
    .params = TemplateName_params,
    .n_params = sizeof TemplateName_params / sizeof *TemplateName_params,
    .coef_size = sizeof(TemplateName_coef), /* bytes prepare writes */
    .state_size = 0, /* zeroed per-optimizer state, optim_state(opt); none */
    .validate = TemplateName_validate,
    .create_slots = TemplateName_create_slots,
    .prepare = TemplateName_prepare,
    .apply_dense = TemplateName_apply_dense,
    .apply_sparse = TemplateName_apply_sparse,
    /* Indices as given, repeats included; return OPTIM_SPARSE_DEFAULT for
     * the default (summed, then apply_sparse). Only if your reference
     * really applies duplicates one by one. */
    .apply_sparse_duplicate_indices = NULL,
    .apply_gradients = NULL, /* wrappers of version 1 only: use step */
    /* Config keys beyond params (a nested object, a string list): write them
     * with optim_config_put, read them back in set_config (return OPTIM_EKEY,
     * err empty, for a key that is not yours). Always as a pair. */
    .get_config = NULL,
    .set_config = NULL,
    .destroy = NULL, /* frees what the class allocated in optim_state */
    .inner = NULL, /* wrappers: the wrapped optimizer */
    /* Keras 3's _apply_weight_decay: the decay rate of var (NULL: the base
     * option weight_decay, applied as w -= w * rate * lr before the update). */
    .weight_decay = NULL,
    .inner_at = NULL, /* wrappers of several optimizers (MultiOptimizer) */
    /* OPTIM_PARAM_STRING params: each one's allowed strings, parallel to
     * params, NULL-terminated. */
    .param_choices = NULL,
    .step = NULL, /* wrappers: replaces the pipeline (docs/wrappers.md) */
    .sparse_mode = TemplateName_sparse_mode,
    /* A rule with whole-variable reductions (LAMB's norms), not element-wise:
     * passes over fixed chunks with a reduction between them, all three. */
    .phase_plan = NULL,
    .apply_phase = NULL,
    .reduce_phase = NULL,
    /* Where Keras has the class. NULL: a custom object, written with
     * registered_name "TemplateName". */
    .keras3_module = NULL,
    .legacy_module = NULL,
    .tfa_name = NULL,
    .keras_flags = 0,
    /* Variable-name pattern keys (exclude_from_weight_decay and the like),
     * read with optim_param_patterns. */
    .pattern_params = NULL,
    .n_pattern_params = 0,
    /* Slots >= 0 under every accepted config: restoring a checkpoint refuses
     * a negative or NaN value in them. Never list one that can go negative. */
    .nonnegative_slots = (const char *const[]){"v", NULL},
    .bytes_per_param = TemplateName_bytes_per_param,
    /* The fewest slots create_slots adds to every variable: the kernels read
     * slots[0] and slots[1] unchecked, and a variable given fewer fails its
     * step with a message instead of a crash. */
    .min_slots = 2,
};

#if OPTIM_ISA_BASELINE /* once, in the baseline build */
OPTIM_ISA_DECLARE_CLASS(TemplateName_class);

/* The entry point `optim --plugin` calls: register what the plugin brings
 * (schedules too, with optim_register_schedule_class); 0 or an error.
 * OPTIM_ISA_CLASS is the table of the level the library runs at. */
OPTIM_PLUGIN_INIT(optim_error *err)
{
    return optim_register_class(OPTIM_ISA_CLASS(TemplateName_class), err);
}
#endif
