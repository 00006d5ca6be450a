/* optim_tape_gradient: the backward pass and the variables' gradients.
 *
 * Gradients are cleared, the loss gets 1, and the nodes are visited from
 * the loss back in reverse creation order; each node with a gradient runs
 * its rule, which adds into its inputs' gradients (allocated on first
 * contribution, only for inputs that lead to a watched variable; a rule
 * may write the first contribution instead of zeroing and adding,
 * optim__tape_grad_first, with the same bits).
 *
 * Then each requested variable collects what reached it, as
 * tf.GradientTape aggregates (tensorflow/python/eager/backprop_util.py,
 * AggregateIndexedSlicesGradients): the gradients of its variable nodes
 * (dense) and of the gathers taken directly from them (IndexedSlices).
 * Nothing reached it: none. Only gathers: sparse, their indices and values
 * concatenated in creation order. Any dense use: dense, the sum of all,
 * the gathered rows added in. */
#include "tape/impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "optim/variable.h"

/* The gradient's own failure replaces any earlier op message. */
static int fail(optim_tape *t, int code, const char *fmt, ...) OPTIM__PRINTF(3, 4);
static int fail(optim_tape *t, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->errmsg, sizeof t->errmsg, fmt, ap);
    va_end(ap);
    t->failed = 1;
    return code;
}

typedef struct contrib {
    struct contrib *next;
    optim_node *node;
} contrib;

typedef struct slot {
    contrib *dense, *sparse;
    size_t ndense, nsparse;
    int64_t nrows; /* sparse rows in all */
} slot;

/* Open addressing from variable to its first position in vars[]. */
typedef struct varmap {
    const optim_var **keys;
    size_t *vals;
    size_t mask;
} varmap;

static size_t hash_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return (size_t)x;
}

static int map_find(const varmap *m, const optim_var *v, size_t *val)
{
    for (size_t h = hash_ptr(v) & m->mask;; h = (h + 1) & m->mask) {
        if (!m->keys[h]) return 0;
        if (m->keys[h] == v) {
            *val = m->vals[h];
            return 1;
        }
    }
}

static void map_put(varmap *m, const optim_var *v, size_t val)
{
    size_t h = hash_ptr(v) & m->mask;
    while (m->keys[h]) h = (h + 1) & m->mask;
    m->keys[h] = v;
    m->vals[h] = val;
}

static int oom(optim_tape *t)
{
    return fail(t, OPTIM_ENOMEM, "optim_tape_gradient: out of memory");
}

/* The gradient of one variable from what reached it. */
static int assemble(optim_tape *t, optim_var *v, const slot *s, optim_grad *g)
{
    optim_dtype dt = optim_var_dtype(v);
    size_t es = optim_dtype_size(dt);
    int64_t numel = optim_var_numel(v);
    int32_t rank = optim_var_rank(v);
    const int64_t *shape = optim_var_shape(v);
    int64_t row = (rank > 0 && shape[0] > 0) ? numel / shape[0] : 0;
    if (s->ndense == 0 && s->nsparse == 0) {
        *g = optim_grad_none();
        return OPTIM_OK;
    }
    if (s->ndense == 0) {
        if (s->nsparse == 1) {
            optim_node *n = s->sparse->node;
            *g = optim_grad_sparse(n->idx, n->nidx,
                                   optim_tensor_make(dt, n->grad, n->value.rank, n->value.shape));
            return OPTIM_OK;
        }
        int64_t *idx = optim__arena_alloc(&t->arena, (size_t)s->nrows * sizeof *idx);
        unsigned char *vals = optim__arena_alloc(&t->arena, (size_t)(s->nrows * row) * es);
        if (!idx || !vals) return oom(t);
        int64_t at = 0;
        for (const contrib *c = s->sparse; c; c = c->next) {
            optim_node *n = c->node;
            if (n->nidx) {
                memcpy(idx + at, n->idx, (size_t)n->nidx * sizeof *idx);
                memcpy(vals + (size_t)(at * row) * es, n->grad, (size_t)(n->nidx * row) * es);
            }
            at += n->nidx;
        }
        int64_t vshape[OPTIM_MAX_RANK];
        memcpy(vshape, shape, (size_t)rank * sizeof *vshape);
        vshape[0] = s->nrows;
        *g = optim_grad_sparse(idx, s->nrows, optim_tensor_make(dt, vals, rank, vshape));
        return OPTIM_OK;
    }
    void *dense;
    if (s->ndense == 1 && s->nsparse == 0) {
        dense = s->dense->node->grad;
    } else {
        dense = optim__arena_alloc(&t->arena, (size_t)numel * es);
        if (!dense) return oom(t);
        memcpy(dense, s->dense->node->grad, (size_t)numel * es);
        OPTIM__TAPE_TYPED(dt, T, {
            T *D = dense;
            for (const contrib *c = s->dense->next; c; c = c->next) {
                const T *G = c->node->grad;
                for (int64_t i = 0; i < numel; i++) D[i] += G[i];
            }
            for (const contrib *c = s->sparse; c; c = c->next) {
                const optim_node *n = c->node;
                const T *G = n->grad;
                for (int64_t k = 0; k < n->nidx; k++) {
                    T *dst = D + n->idx[k] * row;
                    for (int64_t j = 0; j < row; j++) dst[j] += G[k * row + j];
                }
            }
        });
    }
    *g = optim_grad_dense(optim_tensor_make(dt, dense, rank, shape));
    return OPTIM_OK;
}

/* The arguments of optim_tape_gradient, before anything runs. */
static int check_args(optim_tape *t, optim_node *loss, optim_var *const *vars, size_t n,
                      optim_grad_var *out)
{
    char s[OPTIM__SHAPE_STR];
    if (n > 0 && (!vars || !out))
        return fail(t, OPTIM_EINVAL, "optim_tape_gradient: %s is NULL with n = %zu",
                    vars ? "out" : "vars", n);
    if (!loss) {
        if (t->errmsg[0]) {
            char prev[OPTIM_ERRMSG_MAX];
            memcpy(prev, t->errmsg, sizeof prev);
            return fail(t, OPTIM_EINVAL,
                        "optim_tape_gradient: loss is NULL, because an op failed: %s", prev);
        }
        return fail(t, OPTIM_EINVAL, "optim_tape_gradient: loss is NULL");
    }
    if (loss->tape != t)
        return fail(t, OPTIM_EINVAL, "optim_tape_gradient: the loss was recorded on another tape");
    if (optim__node_numel(loss) != 1)
        return fail(
            t, OPTIM_ESHAPE,
            "optim_tape_gradient: the loss (%s) has shape %s, expected a scalar (one element); "
            "reduce it first with optim_sum or optim_mean",
            loss->op, optim__tape_shape(&loss->value, s));
    for (size_t i = 0; i < n; i++)
        if (!vars[i]) return fail(t, OPTIM_EINVAL, "optim_tape_gradient: vars[%zu] is NULL", i);
    return OPTIM_OK;
}

/* d loss / d loss = 1, then every node's backward rule, newest first. */
static int backward_pass(optim_tape *t, optim_node *loss)
{
    for (optim_node *x = t->last; x; x = x->prev) x->grad = NULL;
    if (!loss->need) return OPTIM_OK;
    void *g = optim__tape_grad(t, loss);
    if (!g) return oom(t);
    if (loss->value.dtype == OPTIM_F32) *(float *)g = 1.0f;
    else *(double *)g = 1.0;
    for (optim_node *x = loss; x; x = x->prev) {
        if (!x->grad || !x->backward) continue;
        int rc = x->backward(t, x);
        if (rc) return rc;
    }
    return OPTIM_OK;
}

/* Files each node's gradient under the variable it reached (the slot of
 * its first requested position in m). Walking back and pushing in front
 * leaves each list in creation order. */
static int collect(optim_tape *t, optim_node *loss, const varmap *m, slot *slots)
{
    for (optim_node *x = loss; x; x = x->prev) {
        if (!x->grad) continue;
        const optim_var *v = x->var;
        int sparse = 0;
        if (!v && (x->flags & OPTIM__FLAG_SPARSE)) {
            v = x->in[0]->var;
            sparse = 1;
        }
        size_t i;
        if (!v || !map_find(m, v, &i)) continue;
        contrib *c = optim__arena_alloc(&t->arena, sizeof *c);
        if (!c) return oom(t);
        c->node = x;
        if (sparse) {
            c->next = slots[i].sparse;
            slots[i].sparse = c;
            slots[i].nsparse++;
            slots[i].nrows += x->nidx;
        } else {
            c->next = slots[i].dense;
            slots[i].dense = c;
            slots[i].ndense++;
        }
    }
    return OPTIM_OK;
}

static int gradient(optim_tape *t, optim_node *loss, optim_var *const *vars, size_t n,
                    optim_grad_var *out)
{
    int rc = check_args(t, loss, vars, n, out);
    if (rc || (rc = backward_pass(t, loss))) return rc;
    /* Which variable each requested position stands for. */
    size_t cap = 4;
    while (cap < 2 * n) cap *= 2;
    varmap m = {optim__arena_calloc(&t->arena, cap * sizeof *m.keys),
                optim__arena_alloc(&t->arena, cap * sizeof *m.vals), cap - 1};
    slot *slots = optim__arena_calloc(&t->arena, (n ? n : 1) * sizeof *slots);
    optim_grad_var *res = optim__arena_alloc(&t->arena, (n ? n : 1) * sizeof *res);
    if (!m.keys || !m.vals || !slots || !res) return oom(t);
    for (size_t i = 0; i < n; i++) {
        size_t j;
        if (!map_find(&m, vars[i], &j)) map_put(&m, vars[i], i);
    }
    if ((rc = collect(t, loss, &m, slots))) return rc;
    for (size_t i = 0; i < n; i++) {
        size_t first = i;
        map_find(&m, vars[i], &first);
        res[i].var = vars[i];
        if (first < i) {
            res[i].grad = res[first].grad;
            continue;
        }
        if ((rc = assemble(t, vars[i], &slots[i], &res[i].grad))) return rc;
    }
    if (n) memcpy(out, res, n * sizeof *out);
    return OPTIM_OK;
}

int optim_tape_gradient(optim_tape *t, optim_node *loss, optim_var *const *vars, size_t n,
                        optim_grad_var *out)
{
    if (!t) return OPTIM_EINVAL;
    /* Let the backward rules report even after an op failed earlier; keep
     * the earlier message if this call succeeds. */
    int was = t->failed;
    t->failed = 0;
    int rc = gradient(t, loss, vars, n, out);
    if (rc == OPTIM_OK) t->failed = was;
    return rc;
}
