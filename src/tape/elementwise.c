/* Element-wise ops: add, sub, mul, div, squared_error with NumPy
 * broadcasting, neg, square, sqrt, exp, log, and the internal clip.
 *
 * Broadcasting is planned once per op: dims of size 1 in the result are
 * dropped, and neighbouring dims where each input is either kept or
 * broadcast alike are merged. What remains is a short odometer over outer
 * dims around a contiguous inner run in which each input advances by 1 or
 * stays (stride 0). Equal shapes and scalars become a single run, a row
 * ([n] against [m, n]) m runs of n, a column ([m, 1] against [m, n]) m runs
 * with the column's element fixed. The backward pass walks the same plan
 * and adds into the input's gradient, which sums over broadcast axes. The
 * loops over a run, and the unary and clip loops, are built once per
 * instruction-set level (elementwise_kernels.c). */
#include "tape/impl.h"
#include "tape/kernels.h"

/* ---- broadcasting plan ------------------------------------------------------------ */

typedef struct bcast {
    int nd;
    int64_t dim[OPTIM_MAX_RANK];
    int64_t sa[OPTIM_MAX_RANK], sb[OPTIM_MAX_RANK];
    int64_t n;
} bcast;

static int64_t aligned_dim(const optim_tensor *v, int32_t r, int32_t d)
{
    int32_t k = d - (r - v->rank);
    return k < 0 ? 1 : v->shape[k];
}

/* The broadcast result shape; -1 if the shapes do not broadcast. */
static int bcast_shape(const optim_tensor *a, const optim_tensor *b, int32_t *rank, int64_t *shape)
{
    int32_t r = a->rank > b->rank ? a->rank : b->rank;
    for (int32_t d = 0; d < r; d++) {
        int64_t da = aligned_dim(a, r, d), db = aligned_dim(b, r, d);
        if (da == db || db == 1) shape[d] = da;
        else if (da == 1) shape[d] = db;
        else return -1;
    }
    *rank = r;
    return 0;
}

static void bcast_plan(const optim_tensor *a, const optim_tensor *b, int32_t r, const int64_t *out,
                       bcast *p)
{
    int ka[OPTIM_MAX_RANK], kb[OPTIM_MAX_RANK];
    p->nd = 0;
    p->n = 1;
    for (int32_t d = 0; d < r; d++) {
        int64_t od = out[d];
        p->n *= od;
        if (od == 1) continue;
        int xa = aligned_dim(a, r, d) == od, xb = aligned_dim(b, r, d) == od;
        if (p->nd > 0 && ka[p->nd - 1] == xa && kb[p->nd - 1] == xb) {
            p->dim[p->nd - 1] *= od;
        } else {
            ka[p->nd] = xa;
            kb[p->nd] = xb;
            p->dim[p->nd++] = od;
        }
    }
    if (p->nd == 0) {
        p->nd = 1;
        p->dim[0] = 1;
        ka[0] = kb[0] = 0;
    }
    int64_t stride_a = 1, stride_b = 1;
    for (int d = p->nd - 1; d >= 0; d--) {
        p->sa[d] = ka[d] ? stride_a : 0;
        p->sb[d] = kb[d] ? stride_b : 0;
        if (ka[d]) stride_a *= p->dim[d];
        if (kb[d]) stride_b *= p->dim[d];
    }
}

/* A contiguous run of a binary op (tape/kernels.h). */
typedef optim__bin_ctx bin_ctx;
typedef optim__seg_fn seg_fn;

static void bcast_run(const bcast *p, seg_fn f, bin_ctx *c)
{
    if (p->n == 0) return;
    int nd = p->nd;
    int64_t inner = p->dim[nd - 1];
    int isa = p->sa[nd - 1] != 0, isb = p->sb[nd - 1] != 0;
    int64_t idx[OPTIM_MAX_RANK] = {0}, pa = 0, pb = 0;
    for (int64_t po = 0; po < p->n; po += inner) {
        f(c, po, pa, pb, inner, isa, isb);
        for (int d = nd - 2; d >= 0; d--) {
            pa += p->sa[d];
            pb += p->sb[d];
            if (++idx[d] < p->dim[d]) break;
            pa -= p->sa[d] * p->dim[d];
            pb -= p->sb[d] * p->dim[d];
            idx[d] = 0;
        }
    }
}

/* ---- the ops ---------------------------------------------------------------------- */

/* Runs of the op are the table's fwd / ga / gb [op] (elementwise_kernels.c). */
typedef struct binary {
    const char *name;
    const char *why;
    int pass_a; /* GA is g itself (first_pass_a) */
    int op;
} binary;

static const binary add_k = {"add", NULL, 1, OPTIM__BIN_ADD};
static const binary sub_k = {"sub", NULL, 1, OPTIM__BIN_SUB};
static const binary mul_k = {"mul", NULL, 0, OPTIM__BIN_MUL};
static const binary div_k = {"div", "division by zero", 0, OPTIM__BIN_DIV};
static const binary squared_error_k = {"squared_error", NULL, 0, OPTIM__BIN_SQERR};

/* ---- binary nodes ------------------------------------------------------------------- */

/* Side a's gradient when it is g itself, a is not broadcast (its shape is
 * n's, up to leading ones) and nothing has reached a yet: written as 0 + g
 * (the bits of adding into zeros) without zeroing first. 1 if done, 0 if
 * not applicable, -1 if out of memory. */
static int first_pass_a(optim_tape *t, const binary *k, optim_node *n)
{
    optim_node *a = n->in[0];
    int64_t numel = optim__node_numel(n);
    if (!k->pass_a || !a->need || a->grad || optim__node_numel(a) != numel) return 0;
    int fresh;
    void *d = optim__tape_grad_first(t, a, &fresh);
    if (!d) return -1;
    OPTIM__TAPE_K()->pass[n->value.dtype == OPTIM_F64](n->grad, d, numel);
    return 1;
}

static int binary_backward(optim_tape *t, optim_node *n)
{
    const binary *k = n->aux;
    int di = n->value.dtype == OPTIM_F64;
    bcast p;
    bcast_plan(&n->in[0]->value, &n->in[1]->value, n->value.rank, n->value.shape, &p);
    int first = first_pass_a(t, k, n);
    if (first < 0) return OPTIM_ENOMEM;
    const optim__tape_table *K = OPTIM__TAPE_K();
    for (int side = first; side < 2; side++) {
        optim_node *x = n->in[side];
        if (!x->need) continue;
        bin_ctx c = {n->in[0]->value.data, n->in[1]->value.data, n->value.data, n->grad, NULL, -1};
        if (!(c.dst = optim__tape_grad(t, x))) return OPTIM_ENOMEM;
        bcast_run(&p, side ? K->gb[k->op][di] : K->ga[k->op][di], &c);
        if (c.bad >= 0) {
            char sa[OPTIM__SHAPE_STR], sb[OPTIM__SHAPE_STR];
            return optim__tape_err(
                t, OPTIM_ERANGE,
                "optim_tape_gradient: %s (node %u, shapes %s and %s) has no "
                "gradient at element %lld of its result: %s",
                k->name, (unsigned)n->id, optim__tape_shape(&n->in[0]->value, sa),
                optim__tape_shape(&n->in[1]->value, sb), (long long)c.bad, k->why);
        }
    }
    return OPTIM_OK;
}

static optim_node *binary_op(optim_tape *t, const binary *k, optim_node *a, optim_node *b)
{
    optim_node *in[2] = {a, b};
    if (optim__tape_check_inputs(t, k->name, in, 2)) return NULL;
    int32_t r;
    int64_t shape[OPTIM_MAX_RANK];
    if (bcast_shape(&a->value, &b->value, &r, shape)) {
        char sa[OPTIM__SHAPE_STR], sb[OPTIM__SHAPE_STR];
        optim__tape_err(t, OPTIM_ESHAPE, "%s: shapes %s and %s do not broadcast", k->name,
                        optim__tape_shape(&a->value, sa), optim__tape_shape(&b->value, sb));
        return NULL;
    }
    optim_node *n = optim__tape_node(t, k->name, a->value.dtype, r, shape, a, b);
    if (!n) return NULL;
    bcast p;
    bcast_plan(&a->value, &b->value, r, shape, &p);
    bin_ctx c = {a->value.data, b->value.data, n->value.data, NULL, NULL, -1};
    bcast_run(&p, OPTIM__TAPE_K()->fwd[k->op][a->value.dtype == OPTIM_F64], &c);
    n->aux = (void *)k;
    n->backward = binary_backward;
    return n;
}

optim_node *optim_add(optim_tape *t, optim_node *a, optim_node *b)
{
    return binary_op(t, &add_k, a, b);
}
optim_node *optim_sub(optim_tape *t, optim_node *a, optim_node *b)
{
    return binary_op(t, &sub_k, a, b);
}
optim_node *optim_mul(optim_tape *t, optim_node *a, optim_node *b)
{
    return binary_op(t, &mul_k, a, b);
}
optim_node *optim_div(optim_tape *t, optim_node *a, optim_node *b)
{
    return binary_op(t, &div_k, a, b);
}
optim_node *optim_squared_error(optim_tape *t, optim_node *a, optim_node *b)
{
    return binary_op(t, &squared_error_k, a, b);
}

/* ---- unary nodes -------------------------------------------------------------------- */

static int unary_backward(optim_tape *t, optim_node *n)
{
    const optim__unary *k = n->aux;
    optim_node *x = n->in[0];
    int di = n->value.dtype == OPTIM_F64;
    int fresh;
    void *d = optim__tape_grad_first(t, x, &fresh);
    if (!d) return OPTIM_ENOMEM;
    int64_t bad = OPTIM__TAPE_K()->ubwd[k->op][di](x->value.data, n->value.data, n->grad, d,
                                                   optim__node_numel(n), fresh);
    if (bad >= 0) {
        char s[OPTIM__SHAPE_STR];
        double v = di ? ((const double *)x->value.data)[bad] : ((const float *)x->value.data)[bad];
        return optim__tape_err(t, OPTIM_ERANGE,
                               "optim_tape_gradient: %s (node %u, shape %s) has no gradient at "
                               "element %lld, where its input is %g: %s",
                               k->name, (unsigned)n->id, optim__tape_shape(&n->value, s),
                               (long long)bad, v, k->why);
    }
    return OPTIM_OK;
}

optim_node *optim__tape_unary(optim_tape *t, const optim__unary *k, optim_node *a)
{
    if (optim__tape_check_inputs(t, k->name, &a, 1)) return NULL;
    optim_node *n =
        optim__tape_node(t, k->name, a->value.dtype, a->value.rank, a->value.shape, a, NULL);
    if (!n) return NULL;
    OPTIM__TAPE_K()->ufwd[k->op][a->value.dtype == OPTIM_F64](a->value.data, n->value.data,
                                                              optim__node_numel(n));
    n->aux = (void *)k;
    n->backward = unary_backward;
    return n;
}

static const optim__unary neg_k = {"neg", NULL, OPTIM__UN_NEG};
static const optim__unary square_k = {"square", NULL, OPTIM__UN_SQUARE};
/* TF's SqrtGrad: g * 0.5 / y, undefined at x <= 0 (elementwise_kernels.c). */
static const optim__unary sqrt_k = {"sqrt", "sqrt's gradient 0.5/sqrt(x) is not finite for x <= 0",
                                    OPTIM__UN_SQRT};
static const optim__unary exp_k = {"exp", NULL, OPTIM__UN_EXP};
/* TF's log gradient: g * (1 / x); undefined at x <= 0. */
static const optim__unary log_k = {"log", "log's gradient 1/x is not defined for x <= 0",
                                   OPTIM__UN_LOG};

optim_node *optim_neg(optim_tape *t, optim_node *a) { return optim__tape_unary(t, &neg_k, a); }
optim_node *optim_square(optim_tape *t, optim_node *a)
{
    return optim__tape_unary(t, &square_k, a);
}
optim_node *optim_sqrt(optim_tape *t, optim_node *a) { return optim__tape_unary(t, &sqrt_k, a); }
optim_node *optim_exp(optim_tape *t, optim_node *a) { return optim__tape_unary(t, &exp_k, a); }
optim_node *optim_log(optim_tape *t, optim_node *a) { return optim__tape_unary(t, &log_k, a); }

/* ---- clip (internal) ---------------------------------------------------------------- */

static int clip_backward(optim_tape *t, optim_node *n)
{
    const double *b = n->aux;
    optim_node *x = n->in[0];
    void *d = optim__tape_grad(t, x);
    if (!d) return OPTIM_ENOMEM;
    OPTIM__TAPE_K()->clip_bwd[n->value.dtype == OPTIM_F64](x->value.data, n->grad, d,
                                                           optim__node_numel(n), b[0], b[1]);
    return OPTIM_OK;
}

optim_node *optim__tape_clip(optim_tape *t, optim_node *a, double lo, double hi)
{
    if (optim__tape_check_inputs(t, "clip", &a, 1)) return NULL;
    double *b = optim__arena_alloc(&t->arena, 2 * sizeof *b);
    if (!b) {
        optim__tape_err(t, OPTIM_ENOMEM, "clip: out of memory");
        return NULL;
    }
    b[0] = lo;
    b[1] = hi;
    optim_node *n =
        optim__tape_node(t, "clip", a->value.dtype, a->value.rank, a->value.shape, a, NULL);
    if (!n) return NULL;
    n->aux = b;
    n->backward = clip_backward;
    OPTIM__TAPE_K()->clip_fwd[a->value.dtype == OPTIM_F64](a->value.data, n->value.data,
                                                           optim__node_numel(n), lo, hi);
    return n;
}
