/* The first contribution to a node's gradient is written, not added into a
 * zeroed buffer (optim__tape_grad_first, src/tape/impl.h): the unary rules
 * and the pass-through side of add and sub (matmul adds into a zeroed
 * buffer: test_dense_chain checks its inputs too). For each op, in f32 and
 * f64,
 * the gradient of x is compared bit for bit
 *   - with the same graph where an earlier rule has already added 0 * x
 *     into x's gradient (so the op's rule adds into +0), and
 *   - when a later rule adds into what the op wrote, with the sum of the two
 *     contributions computed separately.
 * The upstream gradients include +0 and -0, where writing e instead of
 * 0 + e would leave a -0 that adding into zeros does not. Also Dense's
 * fused relu(x + bias) against the two ops it replaces. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"
#include "tape/impl.h" /* optim__tape_bias_relu */

#define R 4
#define C 6
#define N (R * C)

typedef enum {
    NEG,
    SQUARE,
    SQRT,
    EXP,
    LOG,
    TANH,
    SIGMOID,
    RELU,
    GELU,
    GELU_TANH,
    SILU,
    ADD,
    ADD_ROW,
    SUB,
    NOPS
} op_kind;
static const char *const op_names[NOPS] = {
    "neg",  "square",           "sqrt", "exp", "log",       "tanh", "sigmoid", "relu",
    "gelu", "gelu approximate", "silu", "add", "add (row)", "sub"};

static optim_node *constant(optim_tape *t, optim_dtype dt, int32_t rank, const int64_t *shape,
                            const double *v)
{
    optim_tensor h = optim_tensor_make(dt, NULL, rank, shape);
    int64_t n = optim_tensor_numel(&h);
    double buf[N];
    float fbuf[N];
    for (int64_t i = 0; i < n; i++) buf[i] = v[i], fbuf[i] = (float)v[i];
    h.data = dt == OPTIM_F32 ? (void *)fbuf : (void *)buf;
    optim_node *c = optim_tape_const(t, &h);
    assert_non_null(c);
    return c;
}

static optim_node *apply(optim_tape *t, op_kind op, optim_dtype dt, optim_node *x)
{
    static const double y[N] = {0.5,  -1.25, 2,   0,  -0.0, 3,    1, 1, -2, 0.75,  4, -3,
                                0.25, 0,     1.5, -1, 2.5,  -0.5, 1, 2, -4, 0.125, 3, 0};
    switch (op) {
    case NEG: return optim_neg(t, x);
    case SQUARE: return optim_square(t, x);
    case SQRT: return optim_sqrt(t, x);
    case EXP: return optim_exp(t, x);
    case LOG: return optim_log(t, x);
    case TANH: return optim_tanh(t, x);
    case SIGMOID: return optim_sigmoid(t, x);
    case RELU: return optim_relu(t, x);
    case GELU: return optim_gelu(t, x, 0);
    case GELU_TANH: return optim_gelu(t, x, 1);
    case SILU: return optim_silu(t, x);
    case ADD: return optim_add(t, x, constant(t, dt, 2, (int64_t[]){R, C}, y));
    case ADD_ROW: return optim_add(t, x, constant(t, dt, 1, (int64_t[]){C}, y));
    default: return optim_sub(t, x, constant(t, dt, 2, (int64_t[]){R, C}, y));
    }
}

/* sum(W * node), W with +0 and -0 among its values. */
static optim_node *weighted(optim_tape *t, optim_dtype dt, optim_node *n)
{
    static const double w[N] = {1.5, 0,    -0.0, -2, 0.25,  3,   -0.0, 0, -1, 2,    0.5,   -0.75,
                                0,   -0.0, 1,    -3, 0.125, 2.5, -0.0, 0, 4,  -1.5, 0.375, 1};
    return optim_sum(t, optim_mul(t, n, constant(t, dt, 2, (int64_t[]){R, C}, w)), OPTIM_ALL_AXES);
}

enum { ALONE, AFTER_ZERO, THEN_MORE, MORE_ALONE };

/* The gradient of x (R x C) in one of the four graphs, into out (bytes). */
static void grad_of(op_kind op, optim_dtype dt, int graph, unsigned char *out)
{
    /* positive for sqrt and log; zeros and negatives for relu elsewhere */
    double x0[N];
    for (int i = 0; i < N; i++) {
        double v = 0.3 + 0.17 * i;
        x0[i] = (op == SQRT || op == LOG) ? v : (i % 3 == 0 ? -v : i % 7 == 1 ? 0 : v);
    }
    static const double more[N] = {2, -1, 0.5,  0, -0.0, 1,  3,    -2, 0.25, 1, -1, 0,
                                   1, 1,  -0.5, 2, 0,    -3, 0.75, 1,  -0.0, 2, 1,  -1};
    optim_var *x = optim_test_var("x", dt, 2, (int64_t[]){R, C}, x0);
    optim_tape *t;
    optim_error err;
    assert_ok(optim_tape_create(&t, &err), &err);
    optim_node *xv = optim_tape_var(t, x), *loss;
    if (graph == MORE_ALONE) {
        loss = optim_sum(t, optim_mul(t, xv, constant(t, dt, 2, (int64_t[]){R, C}, more)),
                         OPTIM_ALL_AXES);
    } else if (graph == THEN_MORE) { /* created first, so its rule runs after the op's */
        optim_node *m = optim_sum(t, optim_mul(t, xv, constant(t, dt, 2, (int64_t[]){R, C}, more)),
                                  OPTIM_ALL_AXES);
        loss = optim_add(t, weighted(t, dt, apply(t, op, dt, xv)), m);
    } else {
        loss = weighted(t, dt, apply(t, op, dt, xv));
        if (graph ==
            AFTER_ZERO) { /* created last, so its rule (0 * g into x's gradient) runs first */
            static const double zeros[N];
            loss = optim_add(
                t, loss,
                optim_sum(t, optim_mul(t, xv, constant(t, dt, 2, (int64_t[]){R, C}, zeros)),
                          OPTIM_ALL_AXES));
        }
    }
    if (!loss) fail_msg("%s: %s", op_names[op], optim_tape_errmsg(t));
    optim_grad_var g;
    if (optim_tape_gradient(t, loss, &x, 1, &g))
        fail_msg("%s: %s", op_names[op], optim_tape_errmsg(t));
    assert_int_equal(g.grad.kind, OPTIM_GRAD_DENSE);
    memcpy(out, g.grad.dense.data, (size_t)N * optim_dtype_size(dt));
    optim_tape_destroy(t);
    optim_var_destroy(x);
}

static double elem(const unsigned char *p, optim_dtype dt, int i)
{
    return dt == OPTIM_F32 ? (double)((const float *)(const void *)p)[i]
                           : ((const double *)(const void *)p)[i];
}

static void assert_same_bits(const unsigned char *a, const unsigned char *b, optim_dtype dt,
                             const char *what, op_kind op)
{
    size_t es = optim_dtype_size(dt);
    for (int i = 0; i < N; i++)
        if (memcmp(a + i * es, b + i * es, es) != 0)
            fail_msg("%s %s: element %d is %a, expected %a (%s)", op_names[op],
                     optim_dtype_name(dt), i, elem(a, dt, i), elem(b, dt, i), what);
}

OPTIM_TEST(test_first_contribution)
{
    const optim_dtype dts[2] = {OPTIM_F32, OPTIM_F64};
    for (int d = 0; d < 2; d++)
        for (op_kind op = 0; op < NOPS; op++) {
            optim_dtype dt = dts[d];
            unsigned char alone[N * 8], after[N * 8], then[N * 8], more[N * 8], sum[N * 8];
            grad_of(op, dt, ALONE, alone);
            grad_of(op, dt, AFTER_ZERO, after);
            assert_same_bits(alone, after, dt, "written against added into +0", op);
            int zeros = 0;
            for (int i = 0; i < N; i++)
                zeros += elem(alone, dt, i) == 0 && !signbit(elem(alone, dt, i));
            assert_gt(zeros, 0); /* the signed zeros of W reached x */
            grad_of(op, dt, THEN_MORE, then);
            grad_of(op, dt, MORE_ALONE, more);
            for (int i = 0; i < N; i++) {
                if (dt == OPTIM_F32)
                    ((float *)(void *)sum)[i] =
                        ((float *)(void *)alone)[i] + ((float *)(void *)more)[i];
                else
                    ((double *)(void *)sum)[i] =
                        ((double *)(void *)alone)[i] + ((double *)(void *)more)[i];
            }
            assert_same_bits(then, sum, dt, "a later contribution added to the written one", op);
        }
}

/* The same for a matmul's inputs and a bias add, as Dense records them:
 * relu(x W + b), the gradients of x, W and b against a copy of the graph
 * with 0 * x, 0 * W and 0 * b added first. */
OPTIM_TEST(test_dense_chain)
{
    static const int64_t shapes[3][2] = {{C, C}, {C, 0}, {R, C}};
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        unsigned char res[2][3][C * C * 8];
        size_t bytes[3];
        for (int graph = 0; graph < 2; graph++) {
            double w0[C * C], b0[C], x0[N];
            for (int i = 0; i < C * C; i++) w0[i] = sin(1.0 + i) * 0.7;
            for (int i = 0; i < C; i++) b0[i] = 0.1 * i - 0.2;
            for (int i = 0; i < N; i++) x0[i] = cos(0.5 * i);
            const double *init[3] = {w0, b0, x0};
            optim_var *v[3];
            optim_node *n[3];
            optim_tape *t;
            optim_error err;
            assert_ok(optim_tape_create(&t, &err), &err);
            for (int k = 0; k < 3; k++) {
                v[k] = optim_test_var((const char *[]){"w", "b", "x"}[k], dt, k == 1 ? 1 : 2,
                                      shapes[k], init[k]);
                n[k] = optim_tape_var(t, v[k]);
            }
            optim_node *h = optim_relu(t, optim_add(t, optim_matmul(t, n[2], n[0], 0, 0), n[1]));
            optim_node *loss = weighted(t, dt, h);
            for (int k = 0; graph && k < 3; k++)
                loss = optim_add(
                    t, loss,
                    optim_sum(t, optim_mul(t, n[k], optim_tape_scalar(t, dt, 0)), OPTIM_ALL_AXES));
            optim_grad_var g[3];
            if (optim_tape_gradient(t, loss, v, 3, g))
                fail_msg("dense chain: %s", optim_tape_errmsg(t));
            for (int k = 0; k < 3; k++) {
                bytes[k] = (size_t)optim_var_numel(v[k]) * optim_dtype_size(dt);
                memcpy(res[graph][k], g[k].grad.dense.data, bytes[k]);
            }
            optim_tape_destroy(t);
            for (int k = 0; k < 3; k++) optim_var_destroy(v[k]);
        }
        for (int k = 0; k < 3; k++) assert_memory_equal(res[0][k], res[1][k], bytes[k]);
    }
}

/* optim__tape_bias_relu against optim_relu(optim_add(x, b)): values and the
 * gradients of x and b bit for bit, in f32 and f64, with x's gradient
 * written (x used once) and added to (x also used before). */
static void bias_relu_grads(optim_dtype dt, int fused, int twice, unsigned char *val,
                            unsigned char *gx, unsigned char *gb)
{
    double x0[N], b0[C];
    for (int i = 0; i < N; i++) x0[i] = i % 5 == 0 ? -0.25 * i : 0.3 * sin(1.7 * i);
    for (int i = 0; i < C; i++) b0[i] = i % 2 ? 0.125 * i : -0.2;
    optim_var *v[2] = {optim_test_var("x", dt, 2, (int64_t[]){R, C}, x0),
                       optim_test_var("b", dt, 1, (int64_t[]){C}, b0)};
    optim_tape *t;
    optim_error err;
    assert_ok(optim_tape_create(&t, &err), &err);
    optim_node *x = optim_tape_var(t, v[0]), *b = optim_tape_var(t, v[1]);
    optim_node *other = twice ? optim_sum(t, optim_square(t, x), OPTIM_ALL_AXES) : NULL;
    optim_node *y = fused ? optim__tape_bias_relu(t, x, b) : optim_relu(t, optim_add(t, x, b));
    optim_node *loss = weighted(t, dt, y);
    if (twice) loss = optim_add(t, loss, other);
    optim_grad_var g[2];
    if (!loss || optim_tape_gradient(t, loss, v, 2, g))
        fail_msg("bias_relu: %s", optim_tape_errmsg(t));
    size_t es = optim_dtype_size(dt);
    memcpy(val, optim_node_value(y)->data, (size_t)N * es);
    memcpy(gx, g[0].grad.dense.data, (size_t)N * es);
    memcpy(gb, g[1].grad.dense.data, (size_t)C * es);
    optim_tape_destroy(t);
    optim_var_destroy(v[0]);
    optim_var_destroy(v[1]);
}

OPTIM_TEST(test_bias_relu)
{
    for (int d = 0; d < 2; d++)
        for (int twice = 0; twice < 2; twice++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            size_t es = optim_dtype_size(dt);
            unsigned char v[2][N * 8], gx[2][N * 8], gb[2][C * 8];
            for (int fused = 0; fused < 2; fused++)
                bias_relu_grads(dt, fused, twice, v[fused], gx[fused], gb[fused]);
            assert_memory_equal(v[0], v[1], (size_t)N * es);
            assert_memory_equal(gx[0], gx[1], (size_t)N * es);
            assert_memory_equal(gb[0], gb[1], (size_t)C * es);
        }
    /* bad input: the bias must be [n] for x [..., n], and another node */
    optim_tape *t;
    optim_error err;
    assert_ok(optim_tape_create(&t, &err), &err);
    double z[N] = {0};
    optim_node *x = constant(t, OPTIM_F64, 2, (int64_t[]){R, C}, z),
               *b = constant(t, OPTIM_F64, 1, (int64_t[]){R}, z);
    assert_null(optim__tape_bias_relu(t, x, b));
    assert_non_null(strstr(optim_tape_errmsg(t),
                           "bias_relu: x [4, 6] and bias [4], expected a bias of shape [n]"));
    optim_tape_reset(t);
    optim_node *r = constant(t, OPTIM_F64, 1, (int64_t[]){C}, z);
    assert_null(optim__tape_bias_relu(t, r, r));
    assert_non_null(strstr(optim_tape_errmsg(t), "bias_relu: x [6] and bias [6]"));
    optim_tape_reset(t);
    assert_null(optim__tape_bias_relu(t, constant(t, OPTIM_F32, 2, (int64_t[]){R, C}, z),
                                      constant(t, OPTIM_F64, 1, (int64_t[]){C}, z)));
    assert_non_null(strstr(optim_tape_errmsg(t), "expected one dtype"));
    optim_tape_destroy(t);
}

int main(void) { return optim_test_run(); }
