/* Finite-difference gradient checks for every tape op, in f64.
 *
 * Each case builds a node from variables; the checked loss is
 * sum(W * node) with a fixed random W of the node's shape, so every
 * element of the node gets its own upstream gradient. The tape's gradient
 * of every variable element (sparse ones made dense) is compared with the
 * central difference (L(x+h) - L(x-h)) / 2h: the relative error
 * |a - n| / max(|a|, |n|, 1e-3) must stay below 1e-6. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"
#include "tape/impl.h" /* optim__tape_bias_relu */

#define MAXV 3
#define H 1e-5
#define TOL 1e-6

typedef struct vspec {
    int32_t rank;
    int64_t shape[4];
    double lo, hi; /* uniform init range */
    int away; /* |x| >= 0.1 (no kink at 0: relu) */
} vspec;

struct gcase;
typedef optim_node *(*build_fn)(optim_tape *t, optim_node **v, const struct gcase *c);

typedef struct gcase {
    const char *name;
    int nv;
    vspec v[MAXV];
    build_fn build;
    int op; /* which op, for shared builders */
    int32_t axis;
    int ta, tb;
    int64_t idx[8];
    int64_t nidx;
    int32_t rank; /* reshape target */
    int64_t shape[4];
} gcase;

static uint64_t rng_state;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

static int64_t spec_numel(const vspec *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->shape[i];
    return n;
}

/* sum(W * out) with W fixed by out's size. */
static optim_node *weighted(optim_tape *t, optim_node *out)
{
    if (!out) return NULL;
    const optim_tensor *v = optim_node_value(out);
    int64_t n = optim_tensor_numel(v);
    double *w = malloc((size_t)(n ? n : 1) * sizeof *w);
    uint64_t saved = rng_state;
    rng_state = 12345;
    for (int64_t i = 0; i < n; i++) w[i] = urand() * 2 - 1;
    rng_state = saved;
    optim_tensor wt = optim_tensor_make(OPTIM_F64, w, v->rank, v->shape);
    optim_node *wn = optim_tape_const(t, &wt);
    free(w);
    return optim_sum(t, optim_mul(t, out, wn), OPTIM_ALL_AXES);
}

static double eval(optim_tape *t, optim_var **vars, const gcase *c)
{
    optim_tape_reset(t);
    optim_node *v[MAXV];
    for (int i = 0; i < c->nv; i++) v[i] = optim_tape_var(t, vars[i]);
    optim_node *loss = weighted(t, c->build(t, v, c));
    if (!loss) fail_msg("%s: %s", c->name, optim_tape_errmsg(t));
    return optim_node_scalar(loss);
}

/* A gradient as a dense double array of the variable's size. */
static void densify(const optim_grad *g, optim_var *var, double *out)
{
    int64_t n = optim_var_numel(var);
    for (int64_t i = 0; i < n; i++) out[i] = 0;
    if (g->kind == OPTIM_GRAD_DENSE) {
        for (int64_t i = 0; i < n; i++) out[i] = ((const double *)g->dense.data)[i];
    } else if (g->kind == OPTIM_GRAD_SPARSE) {
        int64_t rows = optim_var_shape(var)[0], row = rows ? n / rows : 0;
        for (int64_t k = 0; k < g->sparse.n; k++)
            for (int64_t j = 0; j < row; j++)
                out[g->sparse.indices[k] * row + j] +=
                    ((const double *)g->sparse.values.data)[k * row + j];
    }
}

static void gradcheck(const gcase *c, int expect_sparse)
{
    optim_var *vars[MAXV];
    optim_error err;
    rng_state = 0x9E3779B97F4A7C15ULL ^ (uint64_t)strlen(c->name) * 7919u;
    for (int i = 0; i < c->nv; i++) {
        const vspec *s = &c->v[i];
        int64_t n = spec_numel(s);
        double *init = malloc((size_t)(n ? n : 1) * sizeof *init);
        for (int64_t k = 0; k < n; k++) {
            double x = s->lo + (s->hi - s->lo) * urand();
            if (s->away && fabs(x) < 0.1) x = x < 0 ? -0.1 - urand() * 0.5 : 0.1 + urand() * 0.5;
            init[k] = x;
        }
        char name[16];
        snprintf(name, sizeof name, "v%d", i);
        assert_ok(optim_var_create(&vars[i], name, OPTIM_F64, s->rank, s->shape, init, &err), &err);
        free(init);
    }
    optim_tape *t;
    assert_ok(optim_tape_create(&t, &err), &err);
    optim_node *v[MAXV];
    for (int i = 0; i < c->nv; i++) v[i] = optim_tape_var(t, vars[i]);
    optim_node *loss = weighted(t, c->build(t, v, c));
    if (!loss) fail_msg("%s: %s", c->name, optim_tape_errmsg(t));
    optim_grad_var g[MAXV];
    int rc = optim_tape_gradient(t, loss, vars, (size_t)c->nv, g);
    if (rc) fail_msg("%s: %s", c->name, optim_tape_errmsg(t));
    double *analytic[MAXV];
    for (int i = 0; i < c->nv; i++) {
        if (expect_sparse && i == 0) assert_int_equal(g[i].grad.kind, OPTIM_GRAD_SPARSE);
        else assert_int_equal(g[i].grad.kind, OPTIM_GRAD_DENSE);
        int64_t n = optim_var_numel(vars[i]);
        analytic[i] = malloc((size_t)(n ? n : 1) * sizeof(double));
        densify(&g[i].grad, vars[i], analytic[i]);
    }
    double worst = 0;
    for (int i = 0; i < c->nv; i++) {
        double *x = optim_var_data(vars[i]);
        for (int64_t k = 0; k < optim_var_numel(vars[i]); k++) {
            double x0 = x[k];
            x[k] = x0 + H;
            double lp = eval(t, vars, c);
            x[k] = x0 - H;
            double lm = eval(t, vars, c);
            x[k] = x0;
            double num = (lp - lm) / (2 * H), a = analytic[i][k];
            double rel = fabs(a - num) / fmax(fmax(fabs(a), fabs(num)), 1e-3);
            if (rel > worst) worst = rel;
            if (!(rel < TOL))
                fail_msg(
                    "%s: variable %d element %lld: tape %.12g, finite difference %.12g (rel %.3g)",
                    c->name, i, (long long)k, a, num, rel);
        }
    }
    for (int i = 0; i < c->nv; i++) {
        free(analytic[i]);
        optim_var_destroy(vars[i]);
    }
    optim_tape_destroy(t);
}

/* ---- builders ------------------------------------------------------------------------- */

enum { ADD, SUB, MUL, DIV, SQERR };

static optim_node *b_binary(optim_tape *t, optim_node **v, const gcase *c)
{
    switch (c->op) {
    case ADD: return optim_add(t, v[0], v[1]);
    case SUB: return optim_sub(t, v[0], v[1]);
    case MUL: return optim_mul(t, v[0], v[1]);
    case DIV: return optim_div(t, v[0], v[1]);
    default: return optim_squared_error(t, v[0], v[1]);
    }
}

enum {
    NEG,
    SQUARE,
    SQRT,
    EXP,
    LOG,
    TANH,
    SIGMOID,
    RELU,
    SOFTMAX,
    LOG_SOFTMAX,
    GELU,
    GELU_TANH,
    SILU
};

static optim_node *b_unary(optim_tape *t, optim_node **v, const gcase *c)
{
    switch (c->op) {
    case NEG: return optim_neg(t, v[0]);
    case SQUARE: return optim_square(t, v[0]);
    case SQRT: return optim_sqrt(t, v[0]);
    case EXP: return optim_exp(t, v[0]);
    case LOG: return optim_log(t, v[0]);
    case TANH: return optim_tanh(t, v[0]);
    case SIGMOID: return optim_sigmoid(t, v[0]);
    case RELU: return optim_relu(t, v[0]);
    case SOFTMAX: return optim_softmax(t, v[0]);
    case GELU: return optim_gelu(t, v[0], 0);
    case GELU_TANH: return optim_gelu(t, v[0], 1);
    case SILU: return optim_silu(t, v[0]);
    default: return optim_log_softmax(t, v[0]);
    }
}

static optim_node *b_sum(optim_tape *t, optim_node **v, const gcase *c)
{
    return optim_sum(t, v[0], c->axis);
}
static optim_node *b_mean(optim_tape *t, optim_node **v, const gcase *c)
{
    return optim_mean(t, v[0], c->axis);
}
static optim_node *b_matmul(optim_tape *t, optim_node **v, const gcase *c)
{
    return optim_matmul(t, v[0], v[1], c->ta, c->tb);
}
static optim_node *b_sce(optim_tape *t, optim_node **v, const gcase *c)
{
    return optim_softmax_cross_entropy(t, v[0], c->idx, c->nidx);
}
static optim_node *b_bce(optim_tape *t, optim_node **v, const gcase *c)
{
    return optim_sigmoid_cross_entropy(t, v[0], v[1]);
}
static optim_node *b_gather(optim_tape *t, optim_node **v, const gcase *c)
{
    return optim_gather(t, v[0], c->idx, c->nidx);
}
/* Gather from a computed node: the rows scatter back densely. */
static optim_node *b_gather_node(optim_tape *t, optim_node **v, const gcase *c)
{
    return optim_gather(t, optim_tanh(t, v[0]), c->idx, c->nidx);
}
/* The same variable gathered and used densely: one dense gradient. */
static optim_node *b_gather_mixed(optim_tape *t, optim_node **v, const gcase *c)
{
    optim_node *rows = optim_gather(t, v[0], c->idx, c->nidx);
    return optim_add(t, optim_sum(t, rows, 0), optim_sum(t, optim_square(t, v[0]), 0));
}
static optim_node *b_concat(optim_tape *t, optim_node **v, const gcase *c)
{
    return optim_concat(t, v, (size_t)c->nv, c->axis);
}
static optim_node *b_reshape(optim_tape *t, optim_node **v, const gcase *c)
{
    return optim_mul(t, optim_reshape(t, v[0], c->rank, c->shape),
                     optim_reshape(t, v[0], c->rank, c->shape));
}
static optim_node *b_dropout(optim_tape *t, optim_node **v, const gcase *c)
{
    return optim_mul(t, optim_dropout(t, v[0], 0.4, 77, 1), v[0]);
}
/* Layer normalization over the last axis: op 0 with gamma and beta (v[1],
 * v[2]), 1 without gamma (beta v[1]), 2 without beta (gamma v[1]), 3
 * without either. */
static optim_node *b_layer_norm(optim_tape *t, optim_node **v, const gcase *c)
{
    optim_node *gamma = (c->op & 1) ? NULL : v[1];
    optim_node *beta = (c->op & 2) ? NULL : v[(c->op & 1) ? 1 : 2];
    return optim_layer_norm(t, v[0], gamma, beta, c->axis, 1e-3);
}
/* Batch normalization over all axes but the last: op 0 training (x,
 * gamma, beta), 1 inference with fixed statistics (x, gamma, beta), 2
 * inference differentiated in the statistics (x, mean, variance). */
static optim_node *b_batch_norm(optim_tape *t, optim_node **v, const gcase *c)
{
    if (c->op == 0) return optim_batch_norm(t, v[0], v[1], v[2], c->axis, 1e-3, NULL, NULL);
    int64_t n = optim_node_value(v[0])->shape[optim_node_value(v[0])->rank - 1];
    double m[8], var[8];
    for (int64_t i = 0; i < n; i++) m[i] = 0.1 * (double)i - 0.2, var[i] = 0.5 + 0.3 * (double)i;
    optim_tensor mt = optim_tensor_make(OPTIM_F64, m, 1, &n),
                 vt = optim_tensor_make(OPTIM_F64, var, 1, &n);
    if (c->op == 1)
        return optim_batch_norm_inference(t, v[0], optim_tape_const(t, &mt),
                                          optim_tape_const(t, &vt), v[1], v[2], c->axis, 1e-3);
    return optim_batch_norm_inference(t, v[0], v[1], v[2], NULL, NULL, c->axis, 1e-3);
}
/* Dense's fused relu(x + bias) (internal): the gradients of x and the bias. */
static optim_node *b_bias_relu(optim_tape *t, optim_node **v, const gcase *c)
{
    (void)c;
    return optim__tape_bias_relu(t, v[0], v[1]);
}
/* A small MLP: softmax cross-entropy of relu(x W1 + b1) W2 + b2. */
static optim_node *b_mlp(optim_tape *t, optim_node **v, const gcase *c)
{
    static const double xs[4 * 3] = {0.5, -1, 2, 1, 0.3, -0.7, -0.2, 0.8, 0.1, 1.5, -0.4, 0.9};
    optim_tensor xt = optim_tensor_make(OPTIM_F64, (void *)xs, 2, (int64_t[]){4, 3});
    optim_node *x = optim_tape_const(t, &xt);
    optim_node *h = optim_tanh(t, optim_matmul(t, x, v[0], 0, 0));
    optim_node *logits = optim_add(t, optim_matmul(t, h, v[1], 0, 0), v[2]);
    static const int64_t labels[4] = {0, 2, 1, 2};
    return optim_mean(t, optim_softmax_cross_entropy(t, logits, labels, 4), OPTIM_ALL_AXES);
}

/* ---- cases ---------------------------------------------------------------------------- */

#define V(r, lo_, hi_, ...)                                           \
    {                                                                 \
        .rank = (r), .shape = {__VA_ARGS__}, .lo = (lo_), .hi = (hi_) \
    }

/* Broadcast forms: (a, b) shapes, both sides. */
typedef struct form {
    const char *name;
    int32_t ra;
    int64_t sa[3];
    int32_t rb;
    int64_t sb[3];
} form;

static const form forms[] = {
    {"equal", 2, {3, 4}, 2, {3, 4}},
    {"scalar right", 2, {3, 4}, 0, {0}},
    {"scalar left", 0, {0}, 2, {3, 4}},
    {"one-element right", 2, {3, 4}, 2, {1, 1}},
    {"row [n] right", 2, {3, 4}, 1, {4}},
    {"row [n] left", 1, {4}, 2, {3, 4}},
    {"row [1,n] right", 2, {3, 4}, 2, {1, 4}},
    {"row [1,n] left", 2, {1, 4}, 2, {3, 4}},
    {"column right", 2, {3, 4}, 2, {3, 1}},
    {"column left", 2, {3, 1}, 2, {3, 4}},
    {"outer [3,1] x [1,4]", 2, {3, 1}, 2, {1, 4}},
    {"rank 3 [2,1,4] x [3,1]", 3, {2, 1, 4}, 2, {3, 1}},
    {"rank 3 middle [2,3,4] x [3,1]", 3, {2, 3, 4}, 2, {3, 1}},
};

static void check_binary(int op, const char *opname, double lo_b, double hi_b)
{
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        char name[128];
        snprintf(name, sizeof name, "%s %s", opname, forms[f].name);
        gcase c = {.name = name, .nv = 2, .build = b_binary, .op = op};
        c.v[0].rank = forms[f].ra;
        c.v[1].rank = forms[f].rb;
        memcpy(c.v[0].shape, forms[f].sa, sizeof forms[f].sa);
        memcpy(c.v[1].shape, forms[f].sb, sizeof forms[f].sb);
        c.v[0].lo = -2, c.v[0].hi = 2;
        c.v[1].lo = lo_b, c.v[1].hi = hi_b;
        if (op == DIV) c.v[1].away = 1;
        gradcheck(&c, 0);
    }
}

OPTIM_TEST(test_add) { check_binary(ADD, "add", -2, 2); }
OPTIM_TEST(test_sub) { check_binary(SUB, "sub", -2, 2); }
OPTIM_TEST(test_mul) { check_binary(MUL, "mul", -2, 2); }
OPTIM_TEST(test_div) { check_binary(DIV, "div", 0.5, 2); }
OPTIM_TEST(test_div_negative) { check_binary(DIV, "div (negative denominators)", -2, -0.5); }
OPTIM_TEST(test_squared_error) { check_binary(SQERR, "squared_error", -2, 2); }

static void check_unary(int op, const char *name, double lo, double hi, int away)
{
    static const vspec shapes[] = {V(2, 0, 0, 3, 4), V(1, 0, 0, 5), V(0, 0, 0, 0),
                                   V(3, 0, 0, 2, 2, 3)};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        char full[96];
        snprintf(full, sizeof full, "%s (rank %d)", name, (int)shapes[k].rank);
        gcase c = {.name = full, .nv = 1, .build = b_unary, .op = op};
        c.v[0] = shapes[k];
        c.v[0].lo = lo, c.v[0].hi = hi, c.v[0].away = away;
        if ((op == SOFTMAX || op == LOG_SOFTMAX) && c.v[0].rank == 0) continue;
        gradcheck(&c, 0);
    }
}

OPTIM_TEST(test_neg) { check_unary(NEG, "neg", -2, 2, 0); }
OPTIM_TEST(test_square) { check_unary(SQUARE, "square", -2, 2, 0); }
OPTIM_TEST(test_sqrt) { check_unary(SQRT, "sqrt", 0.3, 3, 0); }
OPTIM_TEST(test_exp) { check_unary(EXP, "exp", -2, 2, 0); }
OPTIM_TEST(test_log) { check_unary(LOG, "log", 0.3, 3, 0); }
OPTIM_TEST(test_tanh) { check_unary(TANH, "tanh", -2, 2, 0); }
OPTIM_TEST(test_sigmoid) { check_unary(SIGMOID, "sigmoid", -4, 4, 0); }
OPTIM_TEST(test_relu) { check_unary(RELU, "relu", -2, 2, 1); }
OPTIM_TEST(test_softmax) { check_unary(SOFTMAX, "softmax", -3, 3, 0); }
OPTIM_TEST(test_log_softmax) { check_unary(LOG_SOFTMAX, "log_softmax", -3, 3, 0); }
OPTIM_TEST(test_gelu) { check_unary(GELU, "gelu", -4, 4, 0); }
OPTIM_TEST(test_gelu_tanh) { check_unary(GELU_TANH, "gelu approximate", -4, 4, 0); }
OPTIM_TEST(test_silu) { check_unary(SILU, "silu", -5, 5, 0); }
/* Outside [-4, 4]: the tails, where a wrong term would show. */
OPTIM_TEST(test_gelu_silu_tails)
{
    check_unary(GELU, "gelu tails", -9, -4, 0);
    check_unary(GELU, "gelu tails", 4, 9, 0);
    check_unary(GELU_TANH, "gelu approximate tails", -9, -4, 0);
    check_unary(SILU, "silu tails", -12, -5, 0);
}

OPTIM_TEST(test_layer_norm)
{
    static const char *const names[4] = {"layer_norm", "layer_norm without gamma",
                                         "layer_norm without beta", "layer_norm alone"};
    for (int op = 0; op < 4; op++) {
        gcase c = {.name = names[op],
                   .nv = 3 - (op & 1) - (op >> 1),
                   .build = b_layer_norm,
                   .op = op,
                   .axis = -1,
                   .v = {V(2, -2, 2, 4, 5), V(1, 0.5, 1.5, 5), V(1, -1, 1, 5)}};
        gradcheck(&c, 0);
    }
    gcase r3 = {.name = "layer_norm rank 3 (axis 2)",
                .nv = 3,
                .build = b_layer_norm,
                .axis = 2,
                .v = {V(3, -3, 1, 2, 3, 4), V(1, -1, 1, 4), V(1, -1, 1, 4)}};
    gradcheck(&r3, 0);
    gcase r1 = {.name = "layer_norm rank 1",
                .nv = 3,
                .build = b_layer_norm,
                .axis = -1,
                .v = {V(1, -2, 2, 6), V(1, 0.5, 2, 6), V(1, -1, 1, 6)}};
    gradcheck(&r1, 0);
}

OPTIM_TEST(test_batch_norm)
{
    static const char *const names[3] = {"batch_norm", "batch_norm_inference",
                                         "batch_norm_inference (mean, variance)"};
    for (int op = 0; op < 3; op++) {
        gcase c = {.name = names[op],
                   .nv = 3,
                   .build = b_batch_norm,
                   .op = op,
                   .axis = -1,
                   .v = {V(2, -2, 2, 6, 5), V(1, 0.5, 1.5, 5), V(1, -1, 1, 5)}};
        if (op == 2) c.v[2].lo = 0.2, c.v[2].hi = 1.5; /* a variance */
        gradcheck(&c, 0);
    }
    gcase r3 = {.name = "batch_norm rank 3 (axis 2)",
                .nv = 3,
                .build = b_batch_norm,
                .axis = 2,
                .v = {V(3, -3, 1, 2, 3, 4), V(1, -1, 1, 4), V(1, -1, 1, 4)}};
    gradcheck(&r3, 0);
}

OPTIM_TEST(test_sum_mean)
{
    const int32_t axes[] = {0, 1, 2, -1, -3, OPTIM_ALL_AXES};
    for (int m = 0; m < 2; m++)
        for (size_t k = 0; k < sizeof axes / sizeof axes[0]; k++) {
            char name[64];
            snprintf(name, sizeof name, "%s axis %d", m ? "mean" : "sum", (int)axes[k]);
            gcase c = {.name = name,
                       .nv = 1,
                       .build = m ? b_mean : b_sum,
                       .axis = axes[k],
                       .v = {V(3, -2, 2, 2, 3, 4)}};
            gradcheck(&c, 0);
        }
    gcase c1 = {
        .name = "sum of a vector", .nv = 1, .build = b_sum, .axis = 0, .v = {V(1, -2, 2, 5)}};
    gradcheck(&c1, 0);
    gcase c2 = {.name = "mean of a scalar",
                .nv = 1,
                .build = b_mean,
                .axis = OPTIM_ALL_AXES,
                .v = {V(0, -2, 2, 0)}};
    gradcheck(&c2, 0);
}

OPTIM_TEST(test_matmul)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            char name[64];
            snprintf(name, sizeof name, "matmul ta=%d tb=%d", ta, tb);
            gcase c = {.name = name, .nv = 2, .build = b_matmul, .ta = ta, .tb = tb};
            /* op(A) [3, 4], op(B) [4, 5] */
            c.v[0] = (vspec)V(2, -1, 1, ta ? 4 : 3, ta ? 3 : 4);
            c.v[1] = (vspec)V(2, -1, 1, tb ? 5 : 4, tb ? 4 : 5);
            gradcheck(&c, 0);
        }
    gcase sq = {.name = "matmul square with itself",
                .nv = 2,
                .build = b_matmul,
                .v = {V(2, -1, 1, 3, 3), V(2, -1, 1, 3, 3)}};
    gradcheck(&sq, 0);
    gcase vec = {.name = "matmul [1,k] x [k,1]",
                 .nv = 2,
                 .build = b_matmul,
                 .v = {V(2, -1, 1, 1, 6), V(2, -1, 1, 6, 1)}};
    gradcheck(&vec, 0);
}

OPTIM_TEST(test_cross_entropies)
{
    gcase sce = {.name = "softmax_cross_entropy",
                 .nv = 1,
                 .build = b_sce,
                 .idx = {0, 4, 2, 2},
                 .nidx = 4,
                 .v = {V(2, -3, 3, 4, 5)}};
    gradcheck(&sce, 0);
    gcase sce1 = {.name = "softmax_cross_entropy one class",
                  .nv = 1,
                  .build = b_sce,
                  .idx = {0, 0},
                  .nidx = 2,
                  .v = {V(2, -3, 3, 2, 1)}};
    gradcheck(&sce1, 0);
    gcase bce = {.name = "sigmoid_cross_entropy",
                 .nv = 2,
                 .build = b_bce,
                 .v = {V(2, -4, 4, 3, 4), V(2, 0, 1, 3, 4)}};
    gradcheck(&bce, 0);
    gcase bce0 = {.name = "sigmoid_cross_entropy scalar",
                  .nv = 2,
                  .build = b_bce,
                  .v = {V(0, -4, 4, 0), V(0, 0, 1, 0)}};
    gradcheck(&bce0, 0);
}

OPTIM_TEST(test_gather)
{
    gcase g = {.name = "gather duplicates",
               .nv = 1,
               .build = b_gather,
               .idx = {3, 0, 3, 1, 3},
               .nidx = 5,
               .v = {V(2, -2, 2, 5, 3)}};
    gradcheck(&g, 1);
    gcase g1 = {.name = "gather rank 1",
                .nv = 1,
                .build = b_gather,
                .idx = {2, 2, 0},
                .nidx = 3,
                .v = {V(1, -2, 2, 4)}};
    gradcheck(&g1, 1);
    gcase g3 = {.name = "gather rank 3",
                .nv = 1,
                .build = b_gather,
                .idx = {1, 0, 1},
                .nidx = 3,
                .v = {V(3, -2, 2, 2, 2, 3)}};
    gradcheck(&g3, 1);
    gcase gn = {.name = "gather of a computed node",
                .nv = 1,
                .build = b_gather_node,
                .idx = {1, 1, 0},
                .nidx = 3,
                .v = {V(2, -2, 2, 3, 2)}};
    gradcheck(&gn, 0);
    gcase gm = {.name = "gather and dense use",
                .nv = 1,
                .build = b_gather_mixed,
                .idx = {2, 0, 2},
                .nidx = 3,
                .v = {V(2, -2, 2, 4, 3)}};
    gradcheck(&gm, 0);
}

static optim_node *b_two_gathers(optim_tape *t, optim_node **v, const gcase *c)
{
    optim_node *a = optim_gather(t, v[0], c->idx, 3);
    optim_node *b = optim_gather(t, v[0], c->idx + 3, 2);
    return optim_concat(t, (optim_node *[]){optim_mul(t, a, a), b}, 2, 0);
}

OPTIM_TEST(test_gather_twice)
{
    gcase g = {.name = "two gathers of one variable",
               .nv = 1,
               .build = b_two_gathers,
               .idx = {1, 3, 1, 3, 0},
               .v = {V(2, -2, 2, 4, 2)}};
    gradcheck(&g, 1);
}

OPTIM_TEST(test_concat)
{
    gcase c0 = {.name = "concat axis 0",
                .nv = 3,
                .build = b_concat,
                .axis = 0,
                .v = {V(2, -2, 2, 2, 3), V(2, -2, 2, 1, 3), V(2, -2, 2, 3, 3)}};
    gradcheck(&c0, 0);
    gcase c1 = {.name = "concat axis 1",
                .nv = 3,
                .build = b_concat,
                .axis = 1,
                .v = {V(2, -2, 2, 2, 3), V(2, -2, 2, 2, 1), V(2, -2, 2, 2, 2)}};
    gradcheck(&c1, 0);
    gcase cm = {.name = "concat axis -1 rank 3",
                .nv = 2,
                .build = b_concat,
                .axis = -1,
                .v = {V(3, -2, 2, 2, 2, 3), V(3, -2, 2, 2, 2, 1)}};
    gradcheck(&cm, 0);
    gcase cmid = {.name = "concat middle axis rank 3",
                  .nv = 2,
                  .build = b_concat,
                  .axis = 1,
                  .v = {V(3, -2, 2, 2, 1, 3), V(3, -2, 2, 2, 3, 3)}};
    gradcheck(&cmid, 0);
    gcase c1d = {.name = "concat rank 1",
                 .nv = 2,
                 .build = b_concat,
                 .axis = 0,
                 .v = {V(1, -2, 2, 3), V(1, -2, 2, 2)}};
    gradcheck(&c1d, 0);
}

OPTIM_TEST(test_reshape)
{
    gcase r = {.name = "reshape [2,3,4] -> [6,-1]",
               .nv = 1,
               .build = b_reshape,
               .rank = 2,
               .shape = {6, -1},
               .v = {V(3, -2, 2, 2, 3, 4)}};
    gradcheck(&r, 0);
    gcase r2 = {.name = "reshape [6] -> [3,1,2]",
                .nv = 1,
                .build = b_reshape,
                .rank = 3,
                .shape = {3, 1, 2},
                .v = {V(1, -2, 2, 6)}};
    gradcheck(&r2, 0);
    gcase r3 = {.name = "reshape [1,1] -> []",
                .nv = 1,
                .build = b_reshape,
                .rank = 0,
                .v = {V(2, -2, 2, 1, 1)}};
    gradcheck(&r3, 0);
}

OPTIM_TEST(test_dropout)
{
    gcase d = {
        .name = "dropout (fixed seed)", .nv = 1, .build = b_dropout, .v = {V(2, -2, 2, 6, 7)}};
    gradcheck(&d, 0);
}

OPTIM_TEST(test_bias_relu)
{
    /* |x| >= 0.1 and |b| <= 0.05: x + b stays clear of ReLU's kink */
    gcase c = {.name = "bias_relu",
               .nv = 2,
               .build = b_bias_relu,
               .v = {V(2, -2, 2, 5, 4), V(1, -0.05, 0.05, 4)}};
    c.v[0].away = 1;
    gradcheck(&c, 0);
    gcase r3 = {.name = "bias_relu rank 3",
                .nv = 2,
                .build = b_bias_relu,
                .v = {V(3, 0.3, 2, 2, 3, 4), V(1, 0.3, 1, 4)}};
    gradcheck(&r3, 0);
}

OPTIM_TEST(test_mlp)
{
    gcase c = {.name = "mlp",
               .nv = 3,
               .build = b_mlp,
               .v = {V(2, -1, 1, 3, 5), V(2, -1, 1, 5, 3), V(1, -1, 1, 3)}};
    gradcheck(&c, 0);
}

int main(void) { return optim_test_run(); }
