/*
 * optim/variable.h - trainable variables and Keras constraints.
 *
 * An optim_var is a named, shaped f32 or f64 buffer, like a Keras Variable.
 * Its storage is either owned by the library (optim_var_create copies the
 * initial value) or borrowed from the caller (optim_var_wrap: the caller
 * keeps the memory alive and frees it; the library never does).
 *
 * A variable may carry a constraint, applied after each update as Keras
 * applies `variable.constraint`: NonNeg, MaxNorm, UnitNorm, MinMaxNorm, or a
 * function of your own. Keras 3 applies it after sparse updates too; the
 * legacy generation (like tf.keras's OptimizerV2) refuses a sparse gradient
 * for a constrained variable.
 *
 *     int64_t shape[2] = {784, 10};
 *     optim_var *kernel;
 *     optim_error err;
 *     if (optim_var_create(&kernel, "dense/kernel", OPTIM_F32, 2, shape,
 *                          NULL, &err))
 *         return err.code;
 *     optim_constraint c = optim_constraint_max_norm(2.0, 0);
 *     optim_var_set_constraint(kernel, &c);
 *     ...
 *     optim_var_destroy(kernel);
 *
 * Variables are thread-compatible: distinct variables may be used from
 * distinct threads; one variable must not be used from two at once.
 */
#ifndef OPTIM_VARIABLE_H
#define OPTIM_VARIABLE_H

#include "optim/status.h"
#include "optim/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct optim_var optim_var;

typedef enum optim_constraint_kind {
    OPTIM_CONSTRAINT_NONE = 0,
    OPTIM_CONSTRAINT_NON_NEG, /* w * (w >= 0) */
    OPTIM_CONSTRAINT_MAX_NORM, /* w * clip(n, 0, max) / (eps + n) */
    OPTIM_CONSTRAINT_UNIT_NORM, /* w / (eps + n) */
    OPTIM_CONSTRAINT_MIN_MAX_NORM, /* w * (rate*clip(n,min,max) + (1-rate)*n) / (eps + n) */
    OPTIM_CONSTRAINT_CUSTOM /* fn(var, user) */
} optim_constraint_kind;

/* Keras's backend.epsilon(), used by the norm constraints. */
#define OPTIM_KERAS_EPSILON 1e-7

/* A constraint, copied into the variable by optim_var_set_constraint.
 * For the norm constraints, n is the L2 norm along `axis` (negative counts
 * from the end), as in keras.constraints with a single integer axis. */
typedef struct optim_constraint {
    optim_constraint_kind kind;
    double min_value;
    double max_value;
    double rate;
    int32_t axis;
    /* OPTIM_CONSTRAINT_CUSTOM: called with the variable after each update;
     * must not fail. `user` is borrowed. The optimizer constrains several
     * variables at once on its threads: a fn shared between variables must
     * be safe to run concurrently. */
    void (*fn)(optim_var *var, void *user);
    void *user;
} optim_constraint;

OPTIM_API optim_constraint optim_constraint_non_neg(void);
OPTIM_API optim_constraint optim_constraint_max_norm(double max_value, int32_t axis);
OPTIM_API optim_constraint optim_constraint_unit_norm(int32_t axis);
OPTIM_API optim_constraint optim_constraint_min_max_norm(double min_value, double max_value,
                                                         double rate, int32_t axis);

/* Creates a variable owning a copy of `init` (zeros when init is NULL).
 * dtype must be OPTIM_F32, OPTIM_F64, OPTIM_F16 or OPTIM_BF16 (half-precision
 * storage: optimizers compute in float32 and round once per write,
 * docs/half-precision.md), rank 0..OPTIM_MAX_RANK, dims >= 0,
 * name non-empty. On error *out is NULL and err (if not NULL) says why. */
OPTIM_API int optim_var_create(optim_var **out, const char *name, optim_dtype dtype, int32_t rank,
                               const int64_t *shape, const void *init, optim_error *err);

/* Creates a variable over caller-owned memory `data` (borrowed: it must
 * outlive the variable and is never freed by the library). */
OPTIM_API int optim_var_wrap(optim_var **out, const char *name, optim_dtype dtype, int32_t rank,
                             const int64_t *shape, void *data, optim_error *err);

/* Frees the variable (and its storage if owned). NULL is a no-op. */
OPTIM_API void optim_var_destroy(optim_var *var);

OPTIM_API const char *optim_var_name(const optim_var *var);
OPTIM_API optim_dtype optim_var_dtype(const optim_var *var);
OPTIM_API int32_t optim_var_rank(const optim_var *var);
OPTIM_API const int64_t *optim_var_shape(const optim_var *var);
OPTIM_API int64_t optim_var_numel(const optim_var *var);
OPTIM_API void *optim_var_data(optim_var *var);
OPTIM_API const void *optim_var_cdata(const optim_var *var);
/* A view of the whole variable. */
OPTIM_API optim_tensor optim_var_tensor(optim_var *var);

/* Reads element i as double (no bounds check beyond an assert-free clamp:
 * out-of-range i returns NaN). Convenience for tests and tools. */
OPTIM_API double optim_var_get(const optim_var *var, int64_t i);

/* Trainable flag (default 1). apply_gradients refuses non-trainable ones. */
OPTIM_API int optim_var_trainable(const optim_var *var);
OPTIM_API void optim_var_set_trainable(optim_var *var, int trainable);

/* Copies `src` (same dtype and numel as the variable) into the variable. */
OPTIM_API int optim_var_assign(optim_var *var, const void *src, optim_dtype dtype, int64_t numel);

/* Sets (a copy of) the constraint; NULL or kind NONE removes it. Checks the
 * parameters (axis in range, min <= max, rate in [0, 1], fn for CUSTOM).
 * An F16 or BF16 variable takes only a CUSTOM constraint (OPTIM_ENOTSUP). */
OPTIM_API int optim_var_set_constraint(optim_var *var, const optim_constraint *c);
OPTIM_API const optim_constraint *optim_var_constraint(const optim_var *var);

/* Applies the variable's constraint now (no-op without one). */
OPTIM_API void optim_var_apply_constraint(optim_var *var);

/* Message of the last failed call on this variable ("" if none). */
OPTIM_API const char *optim_var_errmsg(const optim_var *var);

#ifdef __cplusplus
}
#endif
#endif
