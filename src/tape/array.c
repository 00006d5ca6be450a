/* Array ops: gather, concat, reshape and dropout.
 *
 * gather copies rows; on a variable's node its backward does nothing: the
 * gather's own gradient [n, row...] with its indices is the variable's
 * sparse gradient (tf.gather's IndexedSlices), assembled by gradient.c.
 * On any other node the rows are scattered back, duplicates summed.
 * reshape views its input's values (no copy). dropout keeps its mask. */
#include "tape/impl.h"

#include <string.h>

/* ---- gather --------------------------------------------------------------------------- */

static int gather_backward(optim_tape *t, optim_node *n)
{
    if (n->flags & OPTIM__FLAG_SPARSE) return OPTIM_OK;
    optim_node *p = n->in[0];
    void *d = optim__tape_grad(t, p);
    if (!d) return OPTIM_ENOMEM;
    int64_t row = n->nidx ? optim__node_numel(n) / n->nidx : 0;
    OPTIM__TAPE_TYPED(n->value.dtype, T, {
        const T *G = n->grad;
        T *D = d;
        for (int64_t i = 0; i < n->nidx; i++) {
            T *dst = D + n->idx[i] * row;
            const T *g = G + i * row;
            for (int64_t j = 0; j < row; j++) dst[j] += g[j];
        }
    });
    return OPTIM_OK;
}

optim_node *optim_gather(optim_tape *t, optim_node *params, const int64_t *indices, int64_t n)
{
    static const char op[] = "gather";
    if (optim__tape_check_inputs(t, op, &params, 1)) return NULL;
    const optim_tensor *v = &params->value;
    char s[OPTIM__SHAPE_STR];
    if (v->rank < 1) {
        optim__tape_err(t, OPTIM_ESHAPE, "gather: params have shape [], expected rank >= 1 (rows)");
        return NULL;
    }
    if (n < 0) {
        optim__tape_err(t, OPTIM_EINVAL, "gather: %lld indices, expected >= 0", (long long)n);
        return NULL;
    }
    if (n > 0 && !indices) {
        optim__tape_err(t, OPTIM_EINVAL, "gather: indices is NULL");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        if (indices[i] < 0 || indices[i] >= v->shape[0]) {
            optim__tape_err(
                t, OPTIM_ERANGE,
                "gather: index %lld at position %lld is out of range for params of shape "
                "%s, expected 0..%lld",
                (long long)indices[i], (long long)i, optim__tape_shape(v, s),
                (long long)v->shape[0] - 1);
            return NULL;
        }
    int64_t shape[OPTIM_MAX_RANK];
    shape[0] = n;
    for (int32_t d = 1; d < v->rank; d++) shape[d] = v->shape[d];
    optim_node *out = optim__tape_node(t, op, v->dtype, v->rank, shape, params, NULL);
    if (!out) return NULL;
    int64_t *idx = optim__arena_alloc(&t->arena, (size_t)n * sizeof *idx);
    if (!idx) {
        optim__tape_err(t, OPTIM_ENOMEM, "gather: out of memory");
        return NULL;
    }
    if (n) memcpy(idx, indices, (size_t)n * sizeof *idx);
    out->idx = idx;
    out->nidx = n;
    if (params->var) out->flags |= OPTIM__FLAG_SPARSE;
    out->backward = gather_backward;
    size_t row_bytes = (size_t)(v->shape[0] ? optim__node_numel(params) / v->shape[0] : 0) *
        optim_dtype_size(v->dtype);
    for (int64_t i = 0; i < n; i++)
        memcpy((unsigned char *)out->value.data + (size_t)i * row_bytes,
               (const unsigned char *)v->data + (size_t)idx[i] * row_bytes, row_bytes);
    return out;
}

/* ---- concat --------------------------------------------------------------------------- */

/* Each input is [outer, len_i * inner] against the result's
 * [outer, total * inner]. */
static void concat_view(const optim_node *n, int64_t *outer, int64_t *inner)
{
    *outer = *inner = 1;
    for (int32_t d = 0; d < n->value.rank; d++) {
        if (d < n->axis) *outer *= n->value.shape[d];
        else if (d > n->axis) *inner *= n->value.shape[d];
    }
}

static int concat_backward(optim_tape *t, optim_node *n)
{
    int64_t outer, inner;
    concat_view(n, &outer, &inner);
    int64_t total = n->value.shape[n->axis] * inner, off = 0;
    for (size_t i = 0; i < n->nin; i++) {
        optim_node *x = n->ins[i];
        int64_t w = x->value.shape[n->axis] * inner;
        if (x->need) {
            void *d = optim__tape_grad(t, x);
            if (!d) return OPTIM_ENOMEM;
            OPTIM__TAPE_TYPED(n->value.dtype, T, {
                const T *G = (const T *)n->grad + off;
                T *D = d;
                for (int64_t o = 0; o < outer; o++)
                    for (int64_t j = 0; j < w; j++) D[o * w + j] += G[o * total + j];
            });
        }
        off += w;
    }
    return OPTIM_OK;
}

optim_node *optim_concat(optim_tape *t, optim_node *const *nodes, size_t n, int32_t axis)
{
    static const char op[] = "concat";
    if (!t) return NULL;
    if (n == 0 || !nodes) {
        optim__tape_err(t, OPTIM_EINVAL, "concat: %s, expected at least one node",
                        nodes ? "0 nodes" : "nodes is NULL");
        return NULL;
    }
    if (optim__tape_check_inputs(t, op, nodes, n)) return NULL;
    const optim_tensor *v0 = &nodes[0]->value;
    char s0[OPTIM__SHAPE_STR], si[OPTIM__SHAPE_STR];
    if (v0->rank < 1) {
        optim__tape_err(t, OPTIM_ESHAPE, "concat: input 0 has shape [], expected rank >= 1");
        return NULL;
    }
    int32_t ax = optim__tape_axis(axis, v0->rank);
    if (ax < 0) {
        optim__tape_err(t, OPTIM_ERANGE, "concat: axis %d is out of range for shape %s (rank %d)",
                        (int)axis, optim__tape_shape(v0, s0), (int)v0->rank);
        return NULL;
    }
    int64_t shape[OPTIM_MAX_RANK];
    memcpy(shape, v0->shape, sizeof shape);
    shape[ax] = 0;
    int need = 0;
    for (size_t i = 0; i < n; i++) {
        const optim_tensor *v = &nodes[i]->value;
        int ok = v->rank == v0->rank;
        for (int32_t d = 0; ok && d < v->rank; d++) ok = d == ax || v->shape[d] == v0->shape[d];
        if (!ok) {
            optim__tape_err(t, OPTIM_ESHAPE,
                            "concat: shapes %s (input 0) and %s (input %zu) differ outside axis %d",
                            optim__tape_shape(v0, s0), optim__tape_shape(v, si), i, (int)ax);
            return NULL;
        }
        if (__builtin_add_overflow(shape[ax], v->shape[ax], &shape[ax])) {
            optim__tape_err(t, OPTIM_ESHAPE,
                            "concat: the result's axis %d overflows at input %zu (shape %s)",
                            (int)ax, i, optim__tape_shape(v, si));
            return NULL;
        }
        need |= nodes[i]->need;
    }
    optim_node **ins = optim__arena_alloc(&t->arena, n * sizeof *ins);
    if (!ins) {
        optim__tape_err(t, OPTIM_ENOMEM, "concat: out of memory");
        return NULL;
    }
    memcpy(ins, nodes, n * sizeof *ins);
    optim_node *out = optim__tape_node(t, op, v0->dtype, v0->rank, shape, NULL, NULL);
    if (!out) return NULL;
    out->ins = ins;
    out->nin = n;
    out->need = need;
    out->axis = ax;
    out->backward = concat_backward;
    int64_t outer, inner;
    concat_view(out, &outer, &inner);
    size_t es = optim_dtype_size(v0->dtype);
    size_t total = (size_t)(shape[ax] * inner) * es, off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t w = (size_t)(ins[i]->value.shape[ax] * inner) * es;
        for (int64_t o = 0; o < outer; o++)
            memcpy((unsigned char *)out->value.data + (size_t)o * total + off,
                   (const unsigned char *)ins[i]->value.data + (size_t)o * w, w);
        off += w;
    }
    return out;
}

/* ---- reshape -------------------------------------------------------------------------- */

static int reshape_backward(optim_tape *t, optim_node *n)
{
    optim_node *x = n->in[0];
    void *d = optim__tape_grad(t, x);
    if (!d) return OPTIM_ENOMEM;
    int64_t k = optim__node_numel(n);
    OPTIM__TAPE_TYPED(n->value.dtype, T, {
        const T *G = n->grad;
        T *D = d;
        for (int64_t i = 0; i < k; i++) D[i] += G[i];
    });
    return OPTIM_OK;
}

optim_node *optim_reshape(optim_tape *t, optim_node *a, int32_t rank, const int64_t *shape)
{
    static const char op[] = "reshape";
    if (optim__tape_check_inputs(t, op, &a, 1)) return NULL;
    char s[OPTIM__SHAPE_STR], s2[OPTIM__SHAPE_STR];
    if (rank < 0 || rank > OPTIM_MAX_RANK || (rank > 0 && !shape)) {
        optim__tape_err(t, OPTIM_ESHAPE, "reshape: rank %d%s, expected 0..%d with a shape",
                        (int)rank, rank > 0 && !shape ? " with shape NULL" : "", OPTIM_MAX_RANK);
        return NULL;
    }
    int64_t dims[OPTIM_MAX_RANK], known = 1, numel = optim__node_numel(a);
    int infer = -1;
    for (int32_t d = 0; d < rank; d++) {
        dims[d] = shape[d];
        if (shape[d] == -1 && infer < 0) {
            infer = (int)d;
        } else if (shape[d] < 0 || optim__mul_overflow_i64(known, shape[d], &known)) {
            optim__tape_err(t, OPTIM_ESHAPE,
                            "reshape: target shape %s is not valid (dims >= 0, one -1 at most)",
                            optim_shape_str(rank, shape, s, sizeof s));
            return NULL;
        }
    }
    if (infer >= 0) dims[infer] = known ? numel / known : 0;
    int64_t got = 1;
    for (int32_t d = 0; d < rank; d++) got *= dims[d];
    if (got != numel || (infer >= 0 && known == 0)) {
        optim__tape_err(t, OPTIM_ESHAPE, "reshape: cannot reshape %s (%lld elements) into %s",
                        optim__tape_shape(&a->value, s2), (long long)numel,
                        optim_shape_str(rank, shape, s, sizeof s));
        return NULL;
    }
    optim_node *n =
        optim__tape_node_view(t, op, a->value.dtype, rank, dims, a->value.data, a, NULL);
    if (!n) return NULL;
    n->backward = reshape_backward;
    return n;
}

/* ---- dropout -------------------------------------------------------------------------- */

/* A uniform draw in [0, 1) from (seed, i) alone (splitmix64's finaliser). */
static double draw(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

static int dropout_backward(optim_tape *t, optim_node *n)
{
    optim_node *x = n->in[0];
    void *d = optim__tape_grad(t, x);
    if (!d) return OPTIM_ENOMEM;
    int64_t k = optim__node_numel(n);
    OPTIM__TAPE_TYPED(n->value.dtype, T, {
        const T *G = n->grad, *M = n->aux;
        T *D = d;
        for (int64_t i = 0; i < k; i++) D[i] += G[i] * M[i];
    });
    return OPTIM_OK;
}

optim_node *optim_dropout(optim_tape *t, optim_node *a, double rate, uint64_t seed, int training)
{
    static const char op[] = "dropout";
    if (optim__tape_check_inputs(t, op, &a, 1)) return NULL;
    if (!(rate >= 0 && rate < 1)) {
        optim__tape_err(t, OPTIM_ERANGE, "dropout: rate %g, expected 0 <= rate < 1", rate);
        return NULL;
    }
    if (!training || rate == 0) return a;
    optim_node *n = optim__tape_node(t, op, a->value.dtype, a->value.rank, a->value.shape, a, NULL);
    if (!n) return NULL;
    int64_t k = optim__node_numel(n);
    void *mask = optim__arena_alloc(&t->arena, (size_t)k * optim_dtype_size(a->value.dtype));
    if (!mask) {
        optim__tape_err(t, OPTIM_ENOMEM, "dropout: out of memory");
        return NULL;
    }
    n->aux = mask;
    n->backward = dropout_backward;
    OPTIM__TAPE_TYPED(a->value.dtype, T, {
        const T *X = a->value.data;
        T *O = n->value.data, *M = mask;
        const T scale = (T)(1.0 / (1.0 - rate));
        for (int64_t i = 0; i < k; i++) {
            M[i] = draw(seed, (uint64_t)i) >= rate ? scale : 0;
            O[i] = X[i] * M[i];
        }
    });
    return n;
}
