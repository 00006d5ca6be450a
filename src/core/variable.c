/* Variables: named, shaped f32/f64 storage, owned or borrowed. */
#include "core/dtype.h"
#include "core/half.h"
#include "core/huge_pages.h"
#include "core/internal.h"
#include "optim/variable.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a step reads of every variable (data, size, name, dtype, whether
 * trainable, the constraint's kind) comes first, within 64 bytes, so a
 * step over thousands of small variables touches few cache lines of each. */
struct optim_var {
    void *data;
    int64_t numel;
    char *name;
    optim_dtype dtype;
    int32_t rank;
    int trainable;
    optim_constraint constraint;
    char *errmsg; /* OPTIM_ERRMSG_MAX bytes from the first error on, else NULL */
    void *own_data; /* owned data of OPTIM__HUGE_PAGE bytes or more, allocated apart; else NULL */
    int64_t shape[OPTIM_MAX_RANK];
};

/* When the message buffer itself cannot be allocated. */
static char var_oom_msg[] = "out of memory for this variable's error message";

static int var_err(optim_var *v, int code, const char *fmt, ...) OPTIM__PRINTF(3, 4);
static int var_err(optim_var *v, int code, const char *fmt, ...)
{
    optim_error e;
    va_list ap;
    va_start(ap, fmt);
    optim__verr(&e, code, fmt, ap);
    va_end(ap);
    if (!v->errmsg || v->errmsg == var_oom_msg) v->errmsg = malloc(OPTIM_ERRMSG_MAX);
    if (!v->errmsg) v->errmsg = var_oom_msg;
    else snprintf(v->errmsg, OPTIM_ERRMSG_MAX, "%s", e.msg);
    return code;
}

/* A call succeeded: the message is empty (the buffer stays, so a pointer
 * from optim_var_errmsg stays valid). */
static void var_ok(optim_var *v)
{
    if (v->errmsg == var_oom_msg) v->errmsg = NULL;
    else if (v->errmsg) v->errmsg[0] = '\0';
}

/* One heap block per variable: the struct, then (owned) the data on the
 * next 64-byte boundary, padded to whole cache lines (vector kernels stay
 * on full lines), then the name. A model's 100k variables and their slots
 * were three allocations each, one of them aligned_alloc's slower kind
 * (docs/performance.md, optim replay). Owned data of OPTIM__HUGE_PAGE bytes
 * or more is a block of its own on huge pages (huge_pages.h: a lazy sparse
 * step on a large table is bound by TLB misses on small pages). */
static optim_var *var_block(const char *name, size_t data_bytes, int owned)
{
    size_t len = strlen(name) + 1;
    size_t data = owned ? (data_bytes ? (data_bytes + 63) / 64 * 64 : 64) : 0;
    if (data_bytes > SIZE_MAX / 2 || len > SIZE_MAX / 4) return NULL;
    const int apart = data >= OPTIM__HUGE_PAGE;
    optim_var *v = malloc(sizeof *v + (owned && !apart ? 63 + data : 0) + len);
    if (!v) return NULL;
    memset(v, 0, sizeof *v);
    char *p = (char *)(v + 1);
    if (apart && !(v->data = v->own_data = optim__huge_alloc(data))) {
        free(v);
        return NULL;
    }
    if (owned && !apart) v->data = p = (char *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
    v->name = memcpy(p + (apart ? 0 : data), name, len);
    return v;
}

static int var_new(optim_var **out, const char *name, optim_dtype dtype, int32_t rank,
                   const int64_t *shape, void *data, int owned_copy, optim_error *err)
{
    if (!out)
        return optim__err(err, OPTIM_EINVAL, "%s: out is NULL",
                          owned_copy ? "optim_var_create" : "optim_var_wrap");
    *out = NULL;
    if (!name || !name[0])
        return optim__err(err, OPTIM_EINVAL, "variable name is %s, expected a non-empty string",
                          name ? "empty" : "NULL");
    char names[96];
    if (!optim__dtype(dtype) || !(OPTIM__VAR_MASK & OPTIM__MASK(dtype)))
        return optim__err(
            err, OPTIM_EDTYPE, "variable '%s': dtype %s, expected %s", name,
            optim_dtype_name(dtype),
            optim__dtype_list(OPTIM__VAR_MASK, OPTIM__DTYPE_KERAS, names, sizeof names));
    if (rank < 0 || rank > OPTIM_MAX_RANK)
        return optim__err(err, OPTIM_ESHAPE, "variable '%s': rank %d, expected 0..%d", name,
                          (int)rank, OPTIM_MAX_RANK);
    if (rank > 0 && !shape)
        return optim__err(err, OPTIM_EINVAL, "variable '%s': shape is NULL for rank %d", name,
                          (int)rank);
    optim_tensor t = optim_tensor_make(dtype, data, rank, shape);
    int64_t numel = optim_tensor_numel(&t);
    if (numel < 0) {
        char s[160];
        return optim__err(err, OPTIM_ESHAPE,
                          "variable '%s': shape %s has a negative dim or overflows", name,
                          optim_shape_str(rank, shape, s, sizeof s));
    }
    size_t esz = optim_dtype_size(dtype);
    if ((uint64_t)numel > SIZE_MAX / esz)
        return optim__err(err, OPTIM_ENOMEM, "variable '%s': %lld elements do not fit in memory",
                          name, (long long)numel);
    if (!owned_copy && numel > 0 && !data)
        return optim__err(err, OPTIM_EINVAL, "variable '%s': borrowed data is NULL", name);
    size_t bytes = (size_t)numel * esz;
    optim_var *v = var_block(name, bytes, owned_copy);
    if (!v) return optim__err(err, OPTIM_ENOMEM, "variable '%s': out of memory", name);
    v->dtype = dtype;
    v->rank = rank;
    for (int32_t i = 0; i < rank; i++) v->shape[i] = shape[i];
    v->numel = numel;
    v->trainable = 1;
    if (!owned_copy) v->data = data;
    else if (data) memcpy(v->data, data, bytes);
    else memset(v->data, 0, bytes);
    optim__err_clear(err);
    *out = v;
    return OPTIM_OK;
}

int optim_var_create(optim_var **out, const char *name, optim_dtype dtype, int32_t rank,
                     const int64_t *shape, const void *init, optim_error *err)
{
    return var_new(out, name, dtype, rank, shape, (void *)init, 1, err);
}

int optim_var_wrap(optim_var **out, const char *name, optim_dtype dtype, int32_t rank,
                   const int64_t *shape, void *data, optim_error *err)
{
    return var_new(out, name, dtype, rank, shape, data, 0, err);
}

void optim_var_destroy(optim_var *var)
{
    if (!var) return;
    if (var->errmsg != var_oom_msg) free(var->errmsg);
    free(var->own_data);
    free(var);
}

const char *optim_var_name(const optim_var *v) { return v->name; }
optim_dtype optim_var_dtype(const optim_var *v) { return v->dtype; }
int32_t optim_var_rank(const optim_var *v) { return v->rank; }
const int64_t *optim_var_shape(const optim_var *v) { return v->shape; }
int64_t optim_var_numel(const optim_var *v) { return v->numel; }
void *optim_var_data(optim_var *v) { return v->data; }
const void *optim_var_cdata(const optim_var *v) { return v->data; }
int optim_var_trainable(const optim_var *v) { return v->trainable; }
void optim_var_set_trainable(optim_var *v, int trainable) { v->trainable = trainable != 0; }
const char *optim_var_errmsg(const optim_var *v)
{
    return !v ? "variable is NULL" : v->errmsg ? v->errmsg : "";
}

optim_tensor optim_var_tensor(optim_var *v)
{
    return optim_tensor_make(v->dtype, v->data, v->rank, v->shape);
}

double optim_var_get(const optim_var *v, int64_t i)
{
    if (i < 0 || i >= v->numel) return NAN;
    switch (v->dtype) {
    case OPTIM_F32: return ((const float *)v->data)[i];
    case OPTIM_F16: return optim__f16_to_f32(((const uint16_t *)v->data)[i]);
    case OPTIM_BF16: return optim__bf16_to_f32(((const uint16_t *)v->data)[i]);
    default: return ((const double *)v->data)[i];
    }
}

int optim_var_assign(optim_var *v, const void *src, optim_dtype dtype, int64_t numel)
{
    if (dtype != v->dtype)
        return var_err(v, OPTIM_EDTYPE, "variable '%s': assign of %s data, expected %s", v->name,
                       optim_dtype_name(dtype), optim_dtype_name(v->dtype));
    if (numel != v->numel)
        return var_err(v, OPTIM_ESHAPE, "variable '%s': assign of %lld elements, expected %lld",
                       v->name, (long long)numel, (long long)v->numel);
    if (numel > 0 && !src)
        return var_err(v, OPTIM_EINVAL, "variable '%s': assign source is NULL", v->name);
    if (numel > 0) memmove(v->data, src, (size_t)numel * optim_dtype_size(v->dtype));
    var_ok(v);
    return OPTIM_OK;
}

/* ---- constraints ------------------------------------------------------ */

optim_constraint optim_constraint_non_neg(void)
{
    optim_constraint c = {0};
    c.kind = OPTIM_CONSTRAINT_NON_NEG;
    return c;
}

optim_constraint optim_constraint_max_norm(double max_value, int32_t axis)
{
    optim_constraint c = {0};
    c.kind = OPTIM_CONSTRAINT_MAX_NORM;
    c.max_value = max_value;
    c.axis = axis;
    return c;
}

optim_constraint optim_constraint_unit_norm(int32_t axis)
{
    optim_constraint c = {0};
    c.kind = OPTIM_CONSTRAINT_UNIT_NORM;
    c.axis = axis;
    return c;
}

optim_constraint optim_constraint_min_max_norm(double min_value, double max_value, double rate,
                                               int32_t axis)
{
    optim_constraint c = {0};
    c.kind = OPTIM_CONSTRAINT_MIN_MAX_NORM;
    c.min_value = min_value;
    c.max_value = max_value;
    c.rate = rate;
    c.axis = axis;
    return c;
}

int optim_var_set_constraint(optim_var *v, const optim_constraint *c)
{
    if (!c || c->kind == OPTIM_CONSTRAINT_NONE) {
        memset(&v->constraint, 0, sizeof v->constraint);
        return OPTIM_OK;
    }
    if (optim__is_half(v->dtype) && c->kind != OPTIM_CONSTRAINT_CUSTOM)
        return var_err(v, OPTIM_ENOTSUP,
                       "variable '%s': built-in constraint kind %d on a %s variable, "
                       "expected a float32 or float64 variable (or a custom constraint)",
                       v->name, (int)c->kind, optim_dtype_name(v->dtype));
    switch (c->kind) {
    case OPTIM_CONSTRAINT_NON_NEG: break;
    case OPTIM_CONSTRAINT_MAX_NORM:
    case OPTIM_CONSTRAINT_UNIT_NORM:
    case OPTIM_CONSTRAINT_MIN_MAX_NORM: {
        int32_t axis = c->axis < 0 ? c->axis + v->rank : c->axis;
        if (v->rank == 0 || axis < 0 || axis >= v->rank)
            return var_err(v, OPTIM_ERANGE,
                           "variable '%s': constraint axis %d, expected -%d..%d for rank %d",
                           v->name, (int)c->axis, (int)v->rank, (int)v->rank - 1, (int)v->rank);
        if (c->kind == OPTIM_CONSTRAINT_MAX_NORM && !(c->max_value >= 0))
            return var_err(v, OPTIM_ERANGE, "variable '%s': MaxNorm max_value %g, expected >= 0",
                           v->name, c->max_value);
        if (c->kind == OPTIM_CONSTRAINT_MIN_MAX_NORM) {
            if (!(c->min_value >= 0 && c->min_value <= c->max_value))
                return var_err(v, OPTIM_ERANGE,
                               "variable '%s': MinMaxNorm min_value %g max_value %g, expected "
                               "0 <= min_value <= max_value",
                               v->name, c->min_value, c->max_value);
            if (!(c->rate >= 0 && c->rate <= 1))
                return var_err(v, OPTIM_ERANGE,
                               "variable '%s': MinMaxNorm rate %g, expected in [0, 1]", v->name,
                               c->rate);
        }
        break;
    }
    case OPTIM_CONSTRAINT_CUSTOM:
        if (!c->fn)
            return var_err(v, OPTIM_EINVAL, "variable '%s': custom constraint has no fn", v->name);
        break;
    default:
        return var_err(v, OPTIM_EINVAL, "variable '%s': constraint kind %d is unknown", v->name,
                       (int)c->kind);
    }
    v->constraint = *c;
    var_ok(v);
    return OPTIM_OK;
}

const optim_constraint *optim_var_constraint(const optim_var *v)
{
    return v->constraint.kind == OPTIM_CONSTRAINT_NONE ? NULL : &v->constraint;
}

/* Scales each fibre along `axis` by factor(norm) exactly as Keras:
 * w * (desired / (epsilon + norm)), computed in the variable's precision. */
#define T float
#define SQRT sqrtf
#include "variable_kernels.inc"
#define T double
#define SQRT sqrt
#include "variable_kernels.inc"

void optim_var_apply_constraint(optim_var *v)
{
    const optim_constraint *c = &v->constraint;
    switch (c->kind) {
    case OPTIM_CONSTRAINT_NONE: return;
    case OPTIM_CONSTRAINT_CUSTOM: c->fn(v, c->user); return;
    case OPTIM_CONSTRAINT_NON_NEG:
        /* w * cast(w >= 0): negative entries become -0.0, as in Keras. */
        if (v->dtype == OPTIM_F32) {
            float *w = v->data;
            for (int64_t i = 0; i < v->numel; i++) w[i] = w[i] * (float)(w[i] >= 0.0f);
        } else {
            double *w = v->data;
            for (int64_t i = 0; i < v->numel; i++) w[i] = w[i] * (double)(w[i] >= 0.0);
        }
        return;
    default: {
        int32_t axis = c->axis < 0 ? c->axis + v->rank : c->axis;
        if (v->dtype == OPTIM_F32) norm_constraint_float(v->data, v, axis, c);
        else norm_constraint_double(v->data, v, axis, c);
    }
    }
}
