/* The tape object: creation, reset, messages, node recording, and the
 * leaves (variables, constants, scalars). */
#include "tape/impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/variable.h"

int optim_tape_create(optim_tape **out, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_tape_create: out is NULL");
    *out = NULL;
    optim_tape *t = calloc(1, sizeof *t);
    if (!t) return optim__err(err, OPTIM_ENOMEM, "optim_tape_create: out of memory");
    *out = t;
    optim__err_clear(err);
    return OPTIM_OK;
}

void optim_tape_destroy(optim_tape *t)
{
    if (!t) return;
    optim__arena_free(&t->arena);
    free(t);
}

void optim_tape_reset(optim_tape *t)
{
    if (!t) return;
    optim__arena_reset(&t->arena);
    t->last = NULL;
    t->count = 0;
    t->watched = NULL;
    t->failed = 0;
    t->errmsg[0] = '\0';
}

const char *optim_tape_errmsg(const optim_tape *t) { return t ? t->errmsg : "tape is NULL"; }

size_t optim_tape_memory(const optim_tape *t) { return t ? t->arena.reserved : 0; }

int optim__tape_err(optim_tape *t, int code, const char *fmt, ...)
{
    if (t && !t->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->errmsg, sizeof t->errmsg, fmt, ap);
        va_end(ap);
        t->failed = 1;
    }
    return code;
}

const char *optim__tape_shape(const optim_tensor *v, char *buf)
{
    return optim_shape_str(v->rank, v->shape, buf, OPTIM__SHAPE_STR);
}

int optim__tape_check_inputs(optim_tape *t, const char *op, optim_node *const *in, size_t n)
{
    if (!t) return -1;
    for (size_t i = 0; i < n; i++)
        if (!in[i]) return -1; /* an earlier op failed and said why */
    for (size_t i = 0; i < n; i++)
        if (in[i]->tape != t) {
            optim__tape_err(t, OPTIM_EINVAL, "%s: input %zu was recorded on another tape", op, i);
            return -1;
        }
    for (size_t i = 1; i < n; i++)
        if (in[i]->value.dtype != in[0]->value.dtype) {
            char a[OPTIM__SHAPE_STR], b[OPTIM__SHAPE_STR];
            optim__tape_err(
                t, OPTIM_EDTYPE, "%s: inputs have dtypes %s %s and %s %s, expected one dtype", op,
                optim_dtype_name(in[0]->value.dtype), optim__tape_shape(&in[0]->value, a),
                optim_dtype_name(in[i]->value.dtype), optim__tape_shape(&in[i]->value, b));
            return -1;
        }
    return 0;
}

static optim_node *node_link(optim_tape *t, const char *op, optim_dtype dtype, int32_t rank,
                             const int64_t *shape, void *data, optim_node *a, optim_node *b)
{
    optim_node *n = optim__arena_alloc(&t->arena, sizeof *n);
    if (!n) {
        optim__tape_err(t, OPTIM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->tape = t;
    n->op = op;
    n->value.dtype = dtype;
    n->value.rank = rank;
    for (int32_t i = 0; i < rank; i++) n->value.shape[i] = shape[i];
    n->value.data = data;
    n->in[0] = a;
    n->in[1] = b;
    n->nin = (size_t)(a != NULL) + (b != NULL);
    n->need = (a && a->need) || (b && b->need);
    n->prev = t->last;
    n->id = t->count++;
    t->last = n;
    return n;
}

optim_node *optim__tape_node(optim_tape *t, const char *op, optim_dtype dtype, int32_t rank,
                             const int64_t *shape, optim_node *a, optim_node *b)
{
    int64_t numel = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (shape[i] < 0 || optim__mul_overflow_i64(numel, shape[i], &numel) ||
            numel > (int64_t)(SIZE_MAX / 16)) {
            char s[OPTIM__SHAPE_STR];
            optim__tape_err(t, OPTIM_ESHAPE, "%s: result shape %s is too large", op,
                            optim_shape_str(rank, shape, s, sizeof s));
            return NULL;
        }
    }
    void *data = optim__arena_alloc(&t->arena, (size_t)numel * optim_dtype_size(dtype));
    if (!data) {
        optim__tape_err(t, OPTIM_ENOMEM, "%s: out of memory", op);
        return NULL;
    }
    return node_link(t, op, dtype, rank, shape, data, a, b);
}

optim_node *optim__tape_node_view(optim_tape *t, const char *op, optim_dtype dtype, int32_t rank,
                                  const int64_t *shape, void *data, optim_node *a, optim_node *b)
{
    return node_link(t, op, dtype, rank, shape, data, a, b);
}

void *optim__tape_grad_first(optim_tape *t, optim_node *n, int *fresh)
{
    *fresh = !n->grad;
    if (!n->grad) {
        n->grad = optim__arena_alloc(
            &t->arena, (size_t)optim__node_numel(n) * optim_dtype_size(n->value.dtype));
        if (!n->grad) optim__tape_err(t, OPTIM_ENOMEM, "gradient of %s: out of memory", n->op);
    }
    return n->grad;
}

void *optim__tape_grad(optim_tape *t, optim_node *n)
{
    int fresh;
    void *d = optim__tape_grad_first(t, n, &fresh);
    if (d && fresh) memset(d, 0, (size_t)optim__node_numel(n) * optim_dtype_size(n->value.dtype));
    return d;
}

/* ---- leaves ---------------------------------------------------------------- */

static int is_watched(const optim_tape *t, const optim_var *v)
{
    if (optim_var_trainable(v)) return 1;
    for (const optim__watch *w = t->watched; w; w = w->next)
        if (w->var == v) return 1;
    return 0;
}

int optim_tape_watch(optim_tape *t, optim_var *v)
{
    if (!t) return OPTIM_EINVAL;
    if (!v) return optim__tape_err(t, OPTIM_EINVAL, "watch: variable is NULL");
    for (const optim__watch *w = t->watched; w; w = w->next)
        if (w->var == v) return OPTIM_OK;
    optim__watch *w = optim__arena_alloc(&t->arena, sizeof *w);
    if (!w) return optim__tape_err(t, OPTIM_ENOMEM, "watch: out of memory");
    w->var = v;
    w->next = t->watched;
    t->watched = w;
    return OPTIM_OK;
}

optim_node *optim_tape_var(optim_tape *t, optim_var *v)
{
    if (!t) return NULL;
    if (!v) {
        optim__tape_err(t, OPTIM_EINVAL, "var: variable is NULL");
        return NULL;
    }
    if (!(OPTIM__FLOAT_MASK & OPTIM__MASK(optim_var_dtype(v)))) {
        optim__tape_err(t, OPTIM_EDTYPE,
                        "var: variable '%s' is %s, expected float32 or float64 (the tape "
                        "does not compute in half precision)",
                        optim_var_name(v), optim_dtype_name(optim_var_dtype(v)));
        return NULL;
    }
    optim_node *n = optim__tape_node_view(t, "var", optim_var_dtype(v), optim_var_rank(v),
                                          optim_var_shape(v), optim_var_data(v), NULL, NULL);
    if (!n) return NULL;
    n->var = v;
    n->need = is_watched(t, v);
    return n;
}

optim_node *optim_tape_const(optim_tape *t, const optim_tensor *x)
{
    if (!t) return NULL;
    optim_error e;
    if (optim__tensor_check(x, OPTIM__FLOAT_MASK, "const", &e)) {
        optim__tape_err(t, e.code, "%s", e.msg);
        return NULL;
    }
    optim_node *n = optim__tape_node(t, "const", x->dtype, x->rank, x->shape, NULL, NULL);
    if (!n) return NULL;
    size_t bytes = (size_t)optim__node_numel(n) * optim_dtype_size(x->dtype);
    if (bytes) memcpy(n->value.data, x->data, bytes);
    return n;
}

optim_node *optim_tape_scalar(optim_tape *t, optim_dtype dtype, double value)
{
    if (!t) return NULL;
    if (dtype != OPTIM_F32 && dtype != OPTIM_F64) {
        optim__tape_err(t, OPTIM_EDTYPE, "scalar: dtype %s (%d), expected float32 or float64",
                        optim_dtype_name(dtype), (int)dtype);
        return NULL;
    }
    optim_node *n = optim__tape_node(t, "scalar", dtype, 0, NULL, NULL, NULL);
    if (!n) return NULL;
    if (dtype == OPTIM_F32) *(float *)n->value.data = (float)value;
    else *(double *)n->value.data = value;
    return n;
}

const optim_tensor *optim_node_value(const optim_node *n) { return n ? &n->value : NULL; }

double optim_node_scalar(const optim_node *n)
{
    if (!n || optim__node_numel(n) != 1) return NAN;
    return n->value.dtype == OPTIM_F32 ? (double)*(const float *)n->value.data
                                       : *(const double *)n->value.data;
}
