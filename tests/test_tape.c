/* The tape: forward values against closed forms (f32 and f64), gradients
 * in f32, none and watched gradients, the structure of sparse gradients,
 * reset and arena reuse, every refusal with its message, and minimize /
 * loss_and_gradients against hand-computed Keras steps; the internal clip
 * op and the logits that softmax / sigmoid nodes keep. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"
#include "tape/impl.h" /* optim__tape_clip, optim__tape_logits */

/* ---- helpers ---------------------------------------------------------------------------- */

static optim_tape *tape(void)
{
    optim_tape *t = NULL;
    optim_error err;
    assert_ok(optim_tape_create(&t, &err), &err);
    assert_non_null(t);
    return t;
}


__attribute__((noinline)) static optim_node *cnode(optim_tape *t, optim_dtype dt, int32_t rank,
                                                   const int64_t *shape, const double *vals)
{
    optim_tensor h = optim_tensor_make(dt, NULL, rank, shape);
    int64_t n = optim_tensor_numel(&h);
    void *buf = malloc((size_t)(n ? n : 1) * 8);
    for (int64_t i = 0; i < n; i++) {
        if (dt == OPTIM_F32) ((float *)buf)[i] = (float)vals[i];
        else ((double *)buf)[i] = vals[i];
    }
    h.data = buf;
    optim_node *c = optim_tape_const(t, &h);
    free(buf);
    assert_non_null(c);
    return c;
}

static double at(const optim_node *n, int64_t i)
{
    const optim_tensor *v = optim_node_value(n);
    return v->dtype == OPTIM_F32 ? (double)((const float *)v->data)[i]
                                 : ((const double *)v->data)[i];
}

static double tget(const optim_tensor *v, int64_t i)
{
    return v->dtype == OPTIM_F32 ? (double)((const float *)v->data)[i]
                                 : ((const double *)v->data)[i];
}

static void assert_shape(const optim_node *n, int32_t rank, const int64_t *shape)
{
    const optim_tensor *v = optim_node_value(n);
    assert_non_null(v);
    assert_int_equal(v->rank, rank);
    for (int32_t i = 0; i < rank; i++) assert_int_equal(v->shape[i], shape[i]);
}

static void assert_has(const char *msg, const char *part)
{
    if (!strstr(msg, part)) fail_msg("message \"%s\" lacks \"%s\"", msg, part);
}

static double rtol_of(optim_dtype dt) { return dt == OPTIM_F32 ? 2e-6 : 1e-13; }

static const optim_dtype dtypes[2] = {OPTIM_F32, OPTIM_F64};

/* ---- forward values --------------------------------------------------------------------- */

OPTIM_TEST(test_elementwise_values)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = dtypes[d];
        double tol = rtol_of(dt);
        optim_tape *t = tape();
        const double A[6] = {1, -2, 3, 0.5, 4, -6}, R[3] = {10, 20, 30}, C[2] = {2, -4};
        optim_node *a = cnode(t, dt, 2, (int64_t[]){2, 3}, A);
        optim_node *row = cnode(t, dt, 1, (int64_t[]){3}, R);
        optim_node *col = cnode(t, dt, 2, (int64_t[]){2, 1}, C);
        optim_node *sc = optim_tape_scalar(t, dt, 0.5);
        optim_node *add = optim_add(t, a, row), *sub = optim_sub(t, col, a),
                   *mul = optim_mul(t, sc, a);
        optim_node *dv = optim_div(t, a, col), *se = optim_squared_error(t, a, row);
        optim_node *outer = optim_mul(t, col, optim_reshape(t, row, 2, (int64_t[]){1, 3}));
        assert_shape(add, 2, (int64_t[]){2, 3});
        assert_shape(outer, 2, (int64_t[]){2, 3});
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                int k = i * 3 + j;
                assert_close(at(add, k), A[k] + R[j], tol, 0);
                assert_close(at(sub, k), C[i] - A[k], tol, 0);
                assert_close(at(mul, k), 0.5 * A[k], tol, 0);
                assert_close(at(dv, k), A[k] / C[i], tol, 0);
                assert_close(at(se, k), (A[k] - R[j]) * (A[k] - R[j]), tol, 0);
                assert_close(at(outer, k), C[i] * R[j], tol, 0);
            }
        const double X[5] = {-3, -0.5, 0, 0.25, 2};
        optim_node *x = cnode(t, dt, 1, (int64_t[]){5}, X);
        optim_node *ng = optim_neg(t, x), *sq = optim_square(t, x), *ex = optim_exp(t, x);
        optim_node *th = optim_tanh(t, x), *sg = optim_sigmoid(t, x), *rl = optim_relu(t, x);
        const double P[3] = {0.25, 4, 9};
        optim_node *p = cnode(t, dt, 1, (int64_t[]){3}, P);
        optim_node *sr = optim_sqrt(t, p), *lg = optim_log(t, p);
        for (int i = 0; i < 5; i++) {
            assert_close(at(ng, i), -X[i], tol, 0);
            assert_close(at(sq, i), X[i] * X[i], tol, 0);
            assert_close(at(ex, i), exp(X[i]), tol, 0);
            assert_close(at(th, i), tanh(X[i]), tol, 1e-300);
            assert_close(at(sg, i), 1 / (1 + exp(-X[i])), tol, 0);
            assert_close(at(rl, i), X[i] > 0 ? X[i] : 0, tol, 0);
        }
        for (int i = 0; i < 3; i++) {
            assert_close(at(sr, i), sqrt(P[i]), tol, 0);
            assert_close(at(lg, i), log(P[i]), tol, 1e-300);
        }
        /* sigmoid far out: no overflow, no NaN */
        optim_node *far = optim_sigmoid(t, cnode(t, dt, 1, (int64_t[]){2}, (double[]){-80, 80}));
        assert_close(at(far, 0), 1 / (1 + exp(80.0)), dt == OPTIM_F32 ? 1e-5 : 1e-12, 0);
        assert_close(at(far, 1), 1.0, tol, 0);
        /* IEEE forward values where no gradient exists */
        optim_node *z = cnode(t, dt, 1, (int64_t[]){1}, (double[]){0});
        assert_eq(at(optim_log(t, z), 0), -INFINITY);
        assert_nan(at(optim_sqrt(t, optim_neg(t, p)), 0));
        optim_tape_destroy(t);
    }
}

OPTIM_TEST(test_matmul_values)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = dtypes[d];
        optim_tape *t = tape();
        /* op(A) [2, 3], op(B) [3, 4] */
        double A[6], B[12];
        for (int i = 0; i < 6; i++) A[i] = 0.5 * i - 1;
        for (int i = 0; i < 12; i++) B[i] = 0.25 * ((i * 7) % 5) - 0.3;
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                optim_node *a = cnode(t, dt, 2, ta ? (int64_t[]){3, 2} : (int64_t[]){2, 3}, A);
                optim_node *b = cnode(t, dt, 2, tb ? (int64_t[]){4, 3} : (int64_t[]){3, 4}, B);
                optim_node *c = optim_matmul(t, a, b, ta, tb);
                assert_non_null(c);
                assert_shape(c, 2, (int64_t[]){2, 4});
                for (int i = 0; i < 2; i++)
                    for (int j = 0; j < 4; j++) {
                        double ref = 0;
                        for (int k = 0; k < 3; k++)
                            ref += (ta ? A[k * 2 + i] : A[i * 3 + k]) *
                                (tb ? B[j * 3 + k] : B[k * 4 + j]);
                        assert_close(at(c, i * 4 + j), ref, dt == OPTIM_F32 ? 1e-5 : 1e-13, 1e-6);
                    }
            }
        /* empty inner dimension: zeros */
        optim_node *e = optim_matmul(t, cnode(t, dt, 2, (int64_t[]){2, 0}, NULL),
                                     cnode(t, dt, 2, (int64_t[]){0, 3}, NULL), 0, 0);
        assert_shape(e, 2, (int64_t[]){2, 3});
        for (int i = 0; i < 6; i++) assert_eq(at(e, i), 0);
        optim_tape_destroy(t);
    }
}

OPTIM_TEST(test_reduction_values)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = dtypes[d];
        double tol = rtol_of(dt);
        optim_tape *t = tape();
        double X[24];
        for (int i = 0; i < 24; i++) X[i] = (i % 7) - 2.5;
        optim_node *x = cnode(t, dt, 3, (int64_t[]){2, 3, 4}, X);
        optim_node *s0 = optim_sum(t, x, 0), *s1 = optim_mean(t, x, 1), *s2 = optim_sum(t, x, -1);
        optim_node *all = optim_sum(t, x, OPTIM_ALL_AXES), *mall = optim_mean(t, x, OPTIM_ALL_AXES);
        assert_shape(s0, 2, (int64_t[]){3, 4});
        assert_shape(s1, 2, (int64_t[]){2, 4});
        assert_shape(s2, 2, (int64_t[]){2, 3});
        assert_shape(all, 0, NULL);
        double total = 0;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 4; k++) total += X[(i * 3 + j) * 4 + k];
        assert_close(optim_node_scalar(all), total, tol, 1e-12);
        assert_close(optim_node_scalar(mall), total / 24, tol, 1e-12);
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                assert_close(at(s0, j * 4 + k), X[j * 4 + k] + X[12 + j * 4 + k], tol, 1e-12);
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++) {
                double m = 0;
                for (int j = 0; j < 3; j++) m += X[(i * 3 + j) * 4 + k];
                assert_close(at(s1, i * 4 + k), m / 3, tol, 1e-12);
            }
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                double m = 0;
                for (int k = 0; k < 4; k++) m += X[(i * 3 + j) * 4 + k];
                assert_close(at(s2, i * 3 + j), m, tol, 1e-12);
            }
        /* empty: sum 0, mean NaN */
        optim_node *e = cnode(t, dt, 1, (int64_t[]){0}, NULL);
        assert_eq(optim_node_scalar(optim_sum(t, e, 0)), 0);
        assert_nan(optim_node_scalar(optim_mean(t, e, OPTIM_ALL_AXES)));
        optim_tape_destroy(t);
    }
}

OPTIM_TEST(test_softmax_and_losses_values)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = dtypes[d];
        double tol = dt == OPTIM_F32 ? 1e-5 : 1e-12;
        optim_tape *t = tape();
        /* the second row is huge: stable forms keep it finite */
        const double L[6] = {1, 2, 3, 1000, 1001, 999};
        optim_node *x = cnode(t, dt, 2, (int64_t[]){2, 3}, L);
        optim_node *sm = optim_softmax(t, x), *lsm = optim_log_softmax(t, x);
        const int64_t labels[2] = {2, 0};
        optim_node *ce = optim_softmax_cross_entropy(t, x, labels, 2);
        assert_shape(ce, 1, (int64_t[]){2});
        for (int r = 0; r < 2; r++) {
            const double *row = L + 3 * r;
            double mx = fmax(fmax(row[0], row[1]), row[2]), z = 0;
            for (int c = 0; c < 3; c++) z += exp(row[c] - mx);
            for (int c = 0; c < 3; c++) {
                assert_close(at(sm, 3 * r + c), exp(row[c] - mx) / z, tol, 0);
                assert_close(at(lsm, 3 * r + c), row[c] - mx - log(z), tol, 1e-6);
            }
            assert_close(at(ce, r), log(z) + mx - row[labels[r]], tol, 1e-6);
        }
        /* sigmoid cross-entropy: the stable form, and the naive one where it is safe */
        const double X[4] = {-100, -1, 0.5, 100}, Z[4] = {0, 0.3, 1, 0};
        optim_node *bce = optim_sigmoid_cross_entropy(t, cnode(t, dt, 1, (int64_t[]){4}, X),
                                                      cnode(t, dt, 1, (int64_t[]){4}, Z));
        for (int i = 0; i < 4; i++) {
            double ref = fmax(X[i], 0) - X[i] * Z[i] + log1p(exp(-fabs(X[i])));
            assert_close(at(bce, i), ref, tol, 1e-12);
        }
        for (int i = 1; i < 3; i++) {
            double p = 1 / (1 + exp(-X[i]));
            assert_close(at(bce, i), -Z[i] * log(p) - (1 - Z[i]) * log(1 - p), tol * 10, 0);
        }
        optim_tape_destroy(t);
    }
}

OPTIM_TEST(test_array_values)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = dtypes[d];
        optim_tape *t = tape();
        double X[8];
        for (int i = 0; i < 8; i++) X[i] = i + 0.5;
        optim_node *x = cnode(t, dt, 2, (int64_t[]){4, 2}, X);
        const int64_t idx[3] = {3, 0, 3};
        optim_node *g = optim_gather(t, x, idx, 3);
        assert_shape(g, 2, (int64_t[]){3, 2});
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) assert_eq(at(g, i * 2 + j), X[idx[i] * 2 + j]);
        optim_node *y = cnode(t, dt, 2, (int64_t[]){4, 1}, (double[]){-1, -2, -3, -4});
        optim_node *c1 = optim_concat(t, (optim_node *[]){x, y}, 2, -1);
        assert_shape(c1, 2, (int64_t[]){4, 3});
        for (int i = 0; i < 4; i++) {
            assert_eq(at(c1, i * 3), X[i * 2]);
            assert_eq(at(c1, i * 3 + 1), X[i * 2 + 1]);
            assert_eq(at(c1, i * 3 + 2), -(i + 1));
        }
        optim_node *c0 = optim_concat(t, (optim_node *[]){x, x}, 2, 0);
        assert_shape(c0, 2, (int64_t[]){8, 2});
        for (int i = 0; i < 16; i++) assert_eq(at(c0, i), X[i % 8]);
        optim_node *r = optim_reshape(t, x, 3, (int64_t[]){2, -1, 2});
        assert_shape(r, 3, (int64_t[]){2, 2, 2});
        for (int i = 0; i < 8; i++) assert_eq(at(r, i), X[i]);
        /* dropout: a mask of 0 or 1/(1-rate), seeded, identity when not training */
        double ones[4000];
        for (int i = 0; i < 4000; i++) ones[i] = 1;
        optim_node *o = cnode(t, dt, 1, (int64_t[]){4000}, ones);
        optim_node *d1 = optim_dropout(t, o, 0.25, 42, 1), *d2 = optim_dropout(t, o, 0.25, 42, 1);
        optim_node *d3 = optim_dropout(t, o, 0.25, 43, 1);
        int kept = 0, same = 1, differ = 0;
        for (int i = 0; i < 4000; i++) {
            double v = at(d1, i);
            if (v != 0) assert_lt(fabs(v - 1 / 0.75), 1e-6);
            kept += v != 0;
            same &= at(d2, i) == v;
            differ += at(d3, i) != v;
        }
        assert_true(same);
        assert_gt(differ, 100);
        assert_gt(kept, 2850);
        assert_lt(kept, 3150); /* 3000 expected, sd 27 */
        assert_ptr_equal(optim_dropout(t, o, 0.25, 42, 0), o);
        assert_ptr_equal(optim_dropout(t, o, 0, 42, 1), o);
        optim_tape_destroy(t);
    }
}

/* ---- gradients ---------------------------------------------------------------------------- */

/* softmax_cross_entropy(relu(x W + b)) in dtype dt; returns the gradients
 * of W and b as doubles. */
static void mlp_grads(optim_dtype dt, double *gw, double *gb)
{
    double W0[12], B0[3] = {0.1, -0.2, 0.05}, X[8] = {1, -0.5, 0.25, 2, -1, 0.75, 0.3, -0.2};
    for (int i = 0; i < 12; i++) W0[i] = sin(1.7 * i);
    optim_var *w = optim_test_var("w", dt, 2, (int64_t[]){4, 3}, W0);
    optim_var *b = optim_test_var("b", dt, 1, (int64_t[]){3}, B0);
    optim_tape *t = tape();
    optim_node *h = optim_add(
        t, optim_matmul(t, cnode(t, dt, 2, (int64_t[]){2, 4}, X), optim_tape_var(t, w), 0, 0),
        optim_tape_var(t, b));
    optim_node *loss = optim_mean(
        t, optim_softmax_cross_entropy(t, optim_tanh(t, h), (int64_t[]){2, 1}, 2), OPTIM_ALL_AXES);
    optim_grad_var g[2];
    assert_ok(optim_tape_gradient(t, loss, (optim_var *[]){w, b}, 2, g), t);
    assert_int_equal(g[0].grad.kind, OPTIM_GRAD_DENSE);
    assert_int_equal(g[0].grad.dense.dtype, dt);
    assert_int_equal(g[0].grad.dense.rank, 2);
    assert_ptr_equal(g[0].var, w);
    assert_ptr_equal(g[1].var, b);
    for (int i = 0; i < 12; i++) gw[i] = tget(&g[0].grad.dense, i);
    for (int i = 0; i < 3; i++) gb[i] = tget(&g[1].grad.dense, i);
    optim_tape_destroy(t);
    optim_var_destroy(w);
    optim_var_destroy(b);
}

OPTIM_TEST(test_f32_gradients)
{
    double w32[12], b32[3], w64[12], b64[3];
    mlp_grads(OPTIM_F32, w32, b32);
    mlp_grads(OPTIM_F64, w64, b64);
    for (int i = 0; i < 12; i++) assert_close(w32[i], w64[i], 1e-4, 1e-6);
    for (int i = 0; i < 3; i++) assert_close(b32[i], b64[i], 1e-4, 1e-6);
}

OPTIM_TEST(test_none_and_watched)
{
    optim_var *used = optim_test_var("used", OPTIM_F64, 1, (int64_t[]){2}, (double[]){1, 2});
    optim_var *unused = optim_test_var("unused", OPTIM_F64, 1, (int64_t[]){2}, (double[]){3, 4});
    optim_var *frozen = optim_test_var("frozen", OPTIM_F64, 1, (int64_t[]){2}, (double[]){5, 6});
    optim_var *branch = optim_test_var("branch", OPTIM_F64, 1, (int64_t[]){2}, (double[]){7, 8});
    optim_var_set_trainable(frozen, 0);
    optim_tape *t = tape();
    optim_node *u1 = optim_tape_var(t, used), *u2 = optim_tape_var(t, used);
    optim_node *side = optim_exp(t, optim_tape_var(t, branch)); /* never reaches the loss */
    assert_non_null(side);
    /* loss = sum(used * used * frozen): d/dused = 2 used frozen */
    optim_node *loss =
        optim_sum(t, optim_mul(t, optim_mul(t, u1, u2), optim_tape_var(t, frozen)), OPTIM_ALL_AXES);
    optim_node *after = optim_tape_var(t, unused); /* made after the loss */
    assert_non_null(after);
    optim_var *vars[5] = {used, unused, frozen, branch, used};
    optim_grad_var g[5];
    assert_ok(optim_tape_gradient(t, loss, vars, 5, g), t);
    assert_int_equal(g[0].grad.kind, OPTIM_GRAD_DENSE);
    assert_close(tget(&g[0].grad.dense, 0), 2 * 1 * 5, 1e-15, 0);
    assert_close(tget(&g[0].grad.dense, 1), 2 * 2 * 6, 1e-15, 0);
    assert_int_equal(g[1].grad.kind, OPTIM_GRAD_NONE);
    assert_int_equal(g[2].grad.kind, OPTIM_GRAD_NONE); /* not trainable, not watched */
    assert_int_equal(g[3].grad.kind, OPTIM_GRAD_NONE);
    assert_int_equal(g[4].grad.kind, OPTIM_GRAD_DENSE); /* listed twice: the same gradient */
    assert_ptr_equal(g[4].grad.dense.data, g[0].grad.dense.data);
    for (int i = 0; i < 5; i++) assert_ptr_equal(g[i].var, vars[i]);
    /* again: recomputed, same values */
    optim_grad_var g2[1];
    assert_ok(optim_tape_gradient(t, loss, vars, 1, g2), t);
    assert_close(tget(&g2[0].grad.dense, 1), 24, 1e-15, 0);

    /* watched: the frozen variable gets a gradient */
    optim_tape_reset(t);
    assert_ok(optim_tape_watch(t, frozen), t);
    assert_ok(optim_tape_watch(t, frozen), t); /* twice is fine */
    loss = optim_sum(t, optim_mul(t, optim_tape_var(t, used), optim_tape_var(t, frozen)),
                     OPTIM_ALL_AXES);
    assert_ok(optim_tape_gradient(t, loss, (optim_var *[]){frozen}, 1, g), t);
    assert_int_equal(g[0].grad.kind, OPTIM_GRAD_DENSE);
    assert_close(tget(&g[0].grad.dense, 1), 2, 1e-15, 0);
    /* a reset forgets the watch */
    optim_tape_reset(t);
    loss = optim_sum(t, optim_mul(t, optim_tape_var(t, used), optim_tape_var(t, frozen)),
                     OPTIM_ALL_AXES);
    assert_ok(optim_tape_gradient(t, loss, (optim_var *[]){frozen}, 1, g), t);
    assert_int_equal(g[0].grad.kind, OPTIM_GRAD_NONE);

    /* a loss of constants: every gradient none */
    optim_tape_reset(t);
    loss = optim_sum(t, cnode(t, OPTIM_F64, 1, (int64_t[]){2}, (double[]){1, 2}), 0);
    assert_ok(optim_tape_gradient(t, loss, (optim_var *[]){used}, 1, g), t);
    assert_int_equal(g[0].grad.kind, OPTIM_GRAD_NONE);
    /* the loss is the variable itself (a one-element [1] loss is accepted) */
    optim_tape_reset(t);
    optim_var *one = optim_test_var("one", OPTIM_F32, 1, (int64_t[]){1}, (double[]){3});
    loss = optim_tape_var(t, one);
    assert_ok(optim_tape_gradient(t, loss, (optim_var *[]){one}, 1, g), t);
    assert_int_equal(g[0].grad.kind, OPTIM_GRAD_DENSE);
    assert_eq(tget(&g[0].grad.dense, 0), 1);
    assert_eq(optim_node_scalar(loss), 3);
    /* n = 0 is fine */
    assert_ok(optim_tape_gradient(t, loss, NULL, 0, NULL), t);
    optim_tape_destroy(t);
    optim_var_destroy(one);
    optim_var_destroy(used);
    optim_var_destroy(unused);
    optim_var_destroy(frozen);
    optim_var_destroy(branch);
}

OPTIM_TEST(test_sparse_structure)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = dtypes[d];
        double E[10];
        for (int i = 0; i < 10; i++) E[i] = 0.1 * i;
        optim_var *emb = optim_test_var("emb", dt, 2, (int64_t[]){5, 2}, E);
        optim_tape *t = tape();
        /* loss = sum(W * gather(emb, [4, 1, 4, 4])): the values are W */
        const int64_t idx[4] = {4, 1, 4, 4};
        const double W[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        optim_node *rows = optim_gather(t, optim_tape_var(t, emb), idx, 4);
        optim_node *loss =
            optim_sum(t, optim_mul(t, rows, cnode(t, dt, 2, (int64_t[]){4, 2}, W)), OPTIM_ALL_AXES);
        optim_grad_var g;
        assert_ok(optim_tape_gradient(t, loss, &emb, 1, &g), t);
        assert_int_equal(g.grad.kind, OPTIM_GRAD_SPARSE);
        assert_int_equal(g.grad.sparse.n, 4);
        for (int i = 0; i < 4; i++) assert_int_equal(g.grad.sparse.indices[i], idx[i]);
        assert_int_equal(g.grad.sparse.values.dtype, dt);
        assert_int_equal(g.grad.sparse.values.rank, 2);
        assert_int_equal(g.grad.sparse.values.shape[0], 4);
        assert_int_equal(g.grad.sparse.values.shape[1], 2);
        for (int i = 0; i < 8; i++) assert_eq(tget(&g.grad.sparse.values, i), W[i]);

        /* two gathers: concatenated in creation order */
        optim_tape_reset(t);
        optim_node *v = optim_tape_var(t, emb);
        optim_node *r1 = optim_gather(t, v, (int64_t[]){2, 0}, 2);
        optim_node *r2 = optim_gather(t, optim_tape_var(t, emb), (int64_t[]){0, 3, 3}, 3);
        loss =
            optim_add(t, optim_sum(t, r1, OPTIM_ALL_AXES),
                      optim_sum(t, optim_mul(t, optim_tape_scalar(t, dt, 2), r2), OPTIM_ALL_AXES));
        assert_ok(optim_tape_gradient(t, loss, &emb, 1, &g), t);
        assert_int_equal(g.grad.kind, OPTIM_GRAD_SPARSE);
        assert_int_equal(g.grad.sparse.n, 5);
        const int64_t want[5] = {2, 0, 0, 3, 3};
        for (int i = 0; i < 5; i++) {
            assert_int_equal(g.grad.sparse.indices[i], want[i]);
            for (int j = 0; j < 2; j++)
                assert_eq(tget(&g.grad.sparse.values, i * 2 + j), (i < 2 ? 1 : 2));
        }

        /* gathered and used densely: one dense gradient, rows added in */
        optim_tape_reset(t);
        v = optim_tape_var(t, emb);
        r1 = optim_gather(t, v, (int64_t[]){1, 1}, 2);
        loss = optim_add(t, optim_sum(t, r1, OPTIM_ALL_AXES),
                         optim_sum(t, optim_square(t, v), OPTIM_ALL_AXES));
        assert_ok(optim_tape_gradient(t, loss, &emb, 1, &g), t);
        assert_int_equal(g.grad.kind, OPTIM_GRAD_DENSE);
        for (int i = 0; i < 10; i++)
            assert_close(tget(&g.grad.dense, i), 2 * E[i] + (i / 2 == 1 ? 2 : 0), rtol_of(dt),
                         1e-7);

        /* an empty gather still gives a (sparse, empty) gradient */
        optim_tape_reset(t);
        loss = optim_sum(t, optim_gather(t, optim_tape_var(t, emb), NULL, 0), OPTIM_ALL_AXES);
        assert_ok(optim_tape_gradient(t, loss, &emb, 1, &g), t);
        assert_int_equal(g.grad.kind, OPTIM_GRAD_SPARSE);
        assert_int_equal(g.grad.sparse.n, 0);
        assert_int_equal(g.grad.sparse.values.shape[0], 0);

        /* the sparse gradient goes straight into an optimizer (duplicates summed there) */
        optim_tape_reset(t);
        loss = optim_sum(t, optim_square(t, optim_gather(t, optim_tape_var(t, emb), idx, 4)),
                         OPTIM_ALL_AXES);
        assert_ok(optim_tape_gradient(t, loss, &emb, 1, &g), t);
        optim_optimizer *opt;
        optim_error err;
        assert_ok(optim_from_json(&opt,
                                  "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1}}",
                                  &err),
                  &err);
        assert_ok(optim_apply_gradients(opt, &g, 1, 0), opt);
        for (int i = 0; i < 10; i++) {
            int row = i / 2, count = row == 4 ? 3 : row == 1 ? 1 : 0;
            double e = (double)(dt == OPTIM_F32 ? (float)E[i] : E[i]);
            assert_close(optim_var_get(emb, i), e - 0.1 * count * 2 * e,
                         dt == OPTIM_F32 ? 1e-6 : 1e-15, 1e-7);
        }
        optim_destroy(opt);
        optim_tape_destroy(t);
        optim_var_destroy(emb);
    }
}

/* ---- reset and reuse ------------------------------------------------------------------------ */

static optim_node *batch(optim_tape *t, optim_var *w, int64_t rows)
{
    double *x = malloc((size_t)rows * 8 * sizeof *x);
    for (int64_t i = 0; i < rows * 8; i++) x[i] = sin((double)i);
    optim_node *xn = cnode(t, OPTIM_F32, 2, (int64_t[]){rows, 8}, x);
    free(x);
    return optim_mean(
        t, optim_square(t, optim_tanh(t, optim_matmul(t, xn, optim_tape_var(t, w), 0, 0))),
        OPTIM_ALL_AXES);
}

OPTIM_TEST(test_reset_reuse)
{
    double W[32];
    for (int i = 0; i < 32; i++) W[i] = cos(i);
    optim_var *w = optim_test_var("w", OPTIM_F32, 2, (int64_t[]){8, 4}, W);
    optim_tape *t = tape();
    assert_eq(optim_tape_memory(t), 0);
    /* big batches: more than one arena block the first time */
    double first = 0;
    size_t mem[6];
    for (int k = 0; k < 6; k++) {
        optim_tape_reset(t);
        optim_node *loss = batch(t, w, 3000);
        assert_non_null(loss);
        optim_grad_var g;
        assert_ok(optim_tape_gradient(t, loss, &w, 1, &g), t);
        assert_int_equal(g.grad.kind, OPTIM_GRAD_DENSE);
        if (k == 0) first = optim_node_scalar(loss);
        assert_eq(optim_node_scalar(loss), first); /* same batch, same value */
        mem[k] = optim_tape_memory(t);
    }
    assert_gt(mem[0], 0);
    /* after the first reset the arena is one block that fits the batch: constant */
    for (int k = 2; k < 6; k++) assert_int_equal(mem[k], mem[1]);
    /* a failed op's message is cleared by reset */
    optim_node *bad = optim_add(t, cnode(t, OPTIM_F32, 1, (int64_t[]){2}, (double[]){1, 2}),
                                cnode(t, OPTIM_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3}));
    assert_null(bad);
    assert_ne(optim_tape_errmsg(t)[0], 0);
    optim_tape_reset(t);
    assert_string_equal(optim_tape_errmsg(t), "");
    /* NULLs are fine */
    optim_tape_reset(NULL);
    optim_tape_destroy(NULL);
    assert_null(optim_node_value(NULL));
    assert_nan(optim_node_scalar(NULL));
    optim_tape_destroy(t);
    optim_var_destroy(w);
}

/* ---- refusals ------------------------------------------------------------------------------- */

OPTIM_TEST(test_bad_shapes_and_args)
{
    optim_tape *t = tape();
    optim_node *a = cnode(t, OPTIM_F64, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    optim_node *b = cnode(t, OPTIM_F64, 1, (int64_t[]){4}, (double[]){1, 2, 3, 4});
    const char *m = optim_tape_errmsg(t);

    assert_null(optim_add(t, a, b));
    assert_has(m, "add");
    assert_has(m, "[2, 3]");
    assert_has(m, "[4]");
    /* NULL inputs propagate without a new message; the first one stays */
    assert_null(optim_relu(t, NULL));
    assert_null(optim_mul(t, NULL, a));
    assert_null(optim_sub(t, a, b));
    assert_has(m, "add");

    static const char *const binops[] = {"sub", "mul", "div", "squared_error"};
    for (int k = 0; k < 4; k++) {
        optim_tape_reset(t);
        a = cnode(t, OPTIM_F64, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
        b = cnode(t, OPTIM_F64, 2, (int64_t[]){3, 2}, (double[]){1, 2, 3, 4, 5, 6});
        optim_node *r = k == 0 ? optim_sub(t, a, b)
            : k == 1           ? optim_mul(t, a, b)
            : k == 2           ? optim_div(t, a, b)
                               : optim_squared_error(t, a, b);
        assert_null(r);
        assert_has(m, binops[k]);
        assert_has(m, "[2, 3] and [3, 2]");
    }

#define RESET()                                                                      \
    do {                                                                             \
        optim_tape_reset(t);                                                         \
        a = cnode(t, OPTIM_F64, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6}); \
        b = cnode(t, OPTIM_F64, 1, (int64_t[]){4}, (double[]){1, 2, 3, 4});          \
    } while (0)

    RESET();
    optim_node *f = cnode(t, OPTIM_F32, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    assert_null(optim_mul(t, a, f));
    assert_has(m, "mul");
    assert_has(m, "float64");
    assert_has(m, "float32");

    RESET();
    optim_tape *other = tape();
    optim_node *o = cnode(other, OPTIM_F64, 0, NULL, (double[]){1});
    assert_null(optim_add(t, a, o));
    assert_has(m, "another tape");
    optim_tape_destroy(other);

    RESET();
    assert_null(optim_matmul(t, a, a, 0, 0));
    assert_has(m, "matmul");
    assert_has(m, "[2, 3]");
    assert_has(m, "inner dims 3 and 2");
    RESET();
    assert_null(optim_matmul(t, a, b, 0, 0));
    assert_has(m, "rank 2");
    assert_has(m, "[4]");
    RESET();
    if (!optim_matmul(t, a, a, 0, 1)) fail_msg("%s", optim_tape_errmsg(t)); /* [2,3] x [3,2] */

    RESET();
    assert_null(optim_sum(t, a, 2));
    assert_has(m, "sum: axis 2");
    RESET();
    assert_null(optim_mean(t, a, -3));
    assert_has(m, "mean: axis -3");

    RESET();
    assert_null(optim_softmax(t, optim_tape_scalar(t, OPTIM_F64, 1)));
    assert_has(m, "softmax");

    RESET();
    assert_null(optim_softmax_cross_entropy(t, a, (int64_t[]){0, 3}, 2));
    assert_has(m, "softmax_cross_entropy");
    assert_has(m, "label 3 at position 1");
    assert_has(m, "0..2");
    RESET();
    assert_null(optim_softmax_cross_entropy(t, a, (int64_t[]){-1, 0}, 2));
    assert_has(m, "label -1 at position 0");
    RESET();
    assert_null(optim_softmax_cross_entropy(t, a, (int64_t[]){0, 0, 0}, 3));
    assert_has(m, "3 labels");
    assert_has(m, "[2, 3]");
    RESET();
    assert_null(optim_softmax_cross_entropy(t, b, (int64_t[]){0}, 1));
    assert_has(m, "[batch, classes]");
    RESET();
    assert_null(optim_softmax_cross_entropy(t, a, NULL, 2));
    assert_has(m, "labels is NULL");

    RESET();
    assert_null(optim_sigmoid_cross_entropy(t, a, b));
    assert_has(m, "sigmoid_cross_entropy");
    assert_has(m, "[2, 3]");
    assert_has(m, "[4]");

    RESET();
    assert_null(optim_gather(t, a, (int64_t[]){0, 2}, 2));
    assert_has(m, "gather: index 2 at position 1");
    assert_has(m, "[2, 3]");
    RESET();
    assert_null(optim_gather(t, a, (int64_t[]){0}, -1));
    assert_has(m, "gather");
    RESET();
    assert_null(optim_gather(t, optim_tape_scalar(t, OPTIM_F64, 1), (int64_t[]){0}, 1));
    assert_has(m, "gather");

    RESET();
    assert_null(optim_concat(t, (optim_node *[]){a, b}, 2, 0));
    assert_has(m, "concat");
    assert_has(m, "[2, 3]");
    assert_has(m, "[4]");
    RESET();
    assert_null(optim_concat(t, (optim_node *[]){a, a}, 2, 2));
    assert_has(m, "concat: axis 2");
    RESET();
    assert_null(optim_concat(t, (optim_node *[]){a}, 0, 0));
    assert_has(m, "concat");
    RESET();
    assert_null(optim_concat(t, (optim_node *[]){a, NULL}, 2, 0)); /* silent */
    assert_string_equal(m, "");

    RESET();
    assert_null(optim_reshape(t, a, 2, (int64_t[]){4, 2}));
    assert_has(m, "reshape");
    assert_has(m, "[2, 3]");
    assert_has(m, "[4, 2]");
    RESET();
    assert_null(optim_reshape(t, a, 2, (int64_t[]){-1, -1}));
    assert_has(m, "reshape");
    RESET();
    assert_null(optim_reshape(t, a, 2, (int64_t[]){-1, 4}));
    assert_has(m, "reshape");

    const double rates[3] = {1.0, -0.1, NAN};
    for (int k = 0; k < 3; k++) {
        RESET();
        assert_null(optim_dropout(t, a, rates[k], 1, 1));
        assert_has(m, "dropout: rate");
    }

    RESET();
    assert_null(optim_tape_scalar(t, OPTIM_I32, 1));
    assert_has(m, "int32");
    RESET();
    int32_t ints[2] = {1, 2};
    optim_tensor it = optim_tensor_make(OPTIM_I32, ints, 1, (int64_t[]){2});
    assert_null(optim_tape_const(t, &it));
    assert_has(m, "const");
    RESET();
    assert_null(optim_tape_const(t, NULL));
    assert_has(m, "NULL");
    RESET();
    assert_null(optim_tape_var(t, NULL));
    assert_has(m, "NULL");
    assert_status(optim_tape_watch(t, NULL), OPTIM_EINVAL, t);
    assert_status(optim_tape_watch(NULL, NULL), OPTIM_EINVAL, NULL);

    /* a NULL tape is refused everywhere without a crash */
    assert_null(optim_add(NULL, a, a));
    assert_null(optim_tape_var(NULL, NULL));
    assert_null(optim_tape_scalar(NULL, OPTIM_F64, 1));
    assert_null(optim_concat(NULL, NULL, 0, 0));
    assert_status(optim_tape_gradient(NULL, a, NULL, 0, NULL), OPTIM_EINVAL, NULL);
    assert_status(optim_tape_create(NULL, NULL), OPTIM_EINVAL, NULL);
    optim_tape_destroy(t);
#undef RESET
}

OPTIM_TEST(test_gradient_refusals)
{
    optim_var *x = optim_test_var("x", OPTIM_F64, 1, (int64_t[]){2}, (double[]){1, 0});
    optim_var *neg = optim_test_var("neg", OPTIM_F64, 1, (int64_t[]){2}, (double[]){4, -1});
    optim_tape *t = tape();
    const char *m = optim_tape_errmsg(t);
    optim_grad_var g[1];
    optim_var *sentinel = (optim_var *)&g;
    g[0].grad = optim_grad_none();
    g[0].var = sentinel;

    /* a NULL loss: the message repeats why */
    optim_node *loss =
        optim_sum(t,
                  optim_add(t, optim_tape_var(t, x),
                            cnode(t, OPTIM_F64, 1, (int64_t[]){3}, (double[]){1, 2, 3})),
                  OPTIM_ALL_AXES);
    assert_null(loss);
    assert_status(optim_tape_gradient(t, loss, &x, 1, g), OPTIM_EINVAL, t);
    assert_has(m, "loss is NULL");
    assert_has(m, "add: shapes [2] and [3]");
    assert_ptr_equal(g[0].var, sentinel);
    assert_int_equal(g[0].grad.kind, OPTIM_GRAD_NONE);

    /* not a scalar */
    optim_tape_reset(t);
    loss = optim_square(t, optim_tape_var(t, x));
    assert_status(optim_tape_gradient(t, loss, &x, 1, g), OPTIM_ESHAPE, t);
    assert_has(m, "shape [2]");
    assert_has(m, "scalar");
    /* vars[i] NULL, vars NULL */
    optim_tape_reset(t);
    loss = optim_sum(t, optim_tape_var(t, x), 0);
    assert_status(optim_tape_gradient(t, loss, (optim_var *[]){NULL}, 1, g), OPTIM_EINVAL, t);
    assert_has(m, "vars[0] is NULL");
    assert_status(optim_tape_gradient(t, loss, NULL, 1, g), OPTIM_EINVAL, t);
    assert_has(m, "vars is NULL");
    /* a loss of another tape */
    optim_tape *other = tape();
    optim_node *ol = optim_sum(other, optim_tape_var(other, x), 0);
    assert_status(optim_tape_gradient(t, ol, &x, 1, g), OPTIM_EINVAL, t);
    assert_has(m, "another tape");
    optim_tape_destroy(other);

    /* log(0), sqrt(0), sqrt(-1), x / 0: no gradient, the op named */
    struct {
        const char *op;
        int which;
    } cases[] = {{"log", 0}, {"sqrt", 1}, {"sqrt", 2}, {"div", 3}};
    for (int k = 0; k < 4; k++) {
        optim_tape_reset(t);
        optim_node *xv = optim_tape_var(t, k == 2 ? neg : x), *r;
        switch (cases[k].which) {
        case 0: r = optim_log(t, xv); break;
        case 1:
        case 2: r = optim_sqrt(t, xv); break;
        default:
            r = optim_div(t, cnode(t, OPTIM_F64, 1, (int64_t[]){2}, (double[]){1, 1}), xv);
            break;
        }
        loss = optim_sum(t, r, OPTIM_ALL_AXES);
        assert_non_null(loss);
        int rc = optim_tape_gradient(t, loss, (optim_var *[]){k == 2 ? neg : x}, 1, g);
        assert_status(rc, OPTIM_ERANGE, t);
        assert_has(m, "optim_tape_gradient");
        assert_has(m, cases[k].op);
        assert_has(m, "element 1");
        assert_ptr_equal(g[0].var, sentinel);
        assert_int_equal(g[0].grad.kind, OPTIM_GRAD_NONE);
    }
    /* where the upstream gradient is 0 there is nothing to differentiate */
    optim_tape_reset(t);
    loss = optim_sum(t,
                     optim_mul(t, optim_log(t, optim_tape_var(t, x)),
                               cnode(t, OPTIM_F64, 1, (int64_t[]){2}, (double[]){1, 0})),
                     OPTIM_ALL_AXES);
    assert_ok(optim_tape_gradient(t, loss, &x, 1, g), t);
    assert_eq(tget(&g[0].grad.dense, 0), 1);
    assert_eq(tget(&g[0].grad.dense, 1), 0);
    /* the gradient's failure replaces an earlier op message; a success keeps it */
    optim_tape_reset(t);
    assert_null(optim_relu(t,
                           optim_add(t, optim_tape_var(t, x),
                                     cnode(t, OPTIM_F64, 1, (int64_t[]){3}, (double[]){0, 0, 0}))));
    loss = optim_sum(t, optim_tape_var(t, x), 0);
    assert_ok(optim_tape_gradient(t, loss, &x, 1, g), t);
    assert_has(m, "add: shapes");
    loss = optim_sum(t, optim_log(t, optim_tape_var(t, x)), 0);
    assert_status(optim_tape_gradient(t, loss, &x, 1, g), OPTIM_ERANGE, t);
    assert_has(m, "log");
    optim_tape_destroy(t);
    optim_var_destroy(x);
    optim_var_destroy(neg);
}

/* ---- minimize --------------------------------------------------------------------------------- */

typedef struct keras_doc {
    optim_var *var1, *var2;
    int calls;
} keras_doc;

/* loss = 3 * var1 * var1 + 2 * var2 * var2 */
static int doc_loss(optim_tape *t, void *user, optim_node **loss)
{
    keras_doc *k = user;
    k->calls++;
    optim_node *v1 = optim_tape_var(t, k->var1), *v2 = optim_tape_var(t, k->var2);
    optim_dtype dt = optim_var_dtype(k->var1);
    *loss = optim_add(t, optim_mul(t, optim_mul(t, optim_tape_scalar(t, dt, 3), v1), v1),
                      optim_mul(t, optim_mul(t, optim_tape_scalar(t, dt, 2), v2), v2));
    return *loss ? 0 : OPTIM_EINVAL;
}

static optim_optimizer *sgd(double lr)
{
    char json[128];
    snprintf(json, sizeof json, "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": %g}}",
             lr);
    optim_optimizer *opt;
    optim_error err;
    assert_ok(optim_from_json(&opt, json, &err), &err);
    return opt;
}

OPTIM_TEST(test_minimize_array)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = dtypes[d];
        keras_doc k = {optim_test_var("var1", dt, 0, NULL, (double[]){1}),
                       optim_test_var("var2", dt, 0, NULL, (double[]){2}), 0};
        optim_optimizer *opt = sgd(0.1);
        double loss;
        assert_ok(
            optim_minimize(opt, doc_loss, &k, (optim_var *[]){k.var1, k.var2}, 2, NULL, &loss),
            opt);
        assert_close(loss, 3 * 1 + 2 * 4, 1e-15, 0);
        /* var1 -= 0.1 * 6 var1, var2 -= 0.1 * 4 var2 */
        assert_close(optim_var_get(k.var1, 0), 0.4, rtol_of(dt), 0);
        assert_close(optim_var_get(k.var2, 0), 1.2, rtol_of(dt), 0);
        assert_eq(optim_iterations(opt), 1);
        /* a trajectory: var1 = 0.4^k, var2 = 2 * 0.6^k */
        for (int step = 2; step <= 30; step++) {
            assert_ok(
                optim_minimize(opt, doc_loss, &k, (optim_var *[]){k.var1, k.var2}, 2, NULL, NULL),
                opt);
            assert_close(optim_var_get(k.var1, 0), pow(0.4, step), dt == OPTIM_F32 ? 1e-5 : 1e-12,
                         1e-30);
            assert_close(optim_var_get(k.var2, 0), 2 * pow(0.6, step),
                         dt == OPTIM_F32 ? 1e-5 : 1e-12, 1e-30);
        }
        assert_eq(optim_iterations(opt), 30);
        assert_int_equal(k.calls, 30);
        optim_destroy(opt);
        optim_var_destroy(k.var1);
        optim_var_destroy(k.var2);
    }
}

/* A "model" whose variables are created by the loss's first run. */
typedef struct lazy_model {
    optim_var *vars[70];
    size_t nvars;
    int loss_calls, list_calls, list_after_loss;
} lazy_model;

static int lazy_loss(optim_tape *t, void *user, optim_node **loss)
{
    lazy_model *m = user;
    m->loss_calls++;
    if (!m->vars[0]) {
        for (size_t i = 0; i < m->nvars; i++) {
            char name[32];
            snprintf(name, sizeof name, "dense/w%zu", i);
            optim_error err;
            if (optim_var_create(&m->vars[i], name, OPTIM_F64, 1, (int64_t[]){2},
                                 (double[]){1.0 + (double)i, -1}, &err))
                return err.code;
        }
    }
    /* loss = sum_i sum(w_i^2) / 2: the gradient is w_i */
    optim_node *acc = optim_tape_scalar(t, OPTIM_F64, 0);
    for (size_t i = 0; i < m->nvars; i++)
        acc = optim_add(
            t, acc, optim_sum(t, optim_square(t, optim_tape_var(t, m->vars[i])), OPTIM_ALL_AXES));
    *loss = optim_mul(t, acc, optim_tape_scalar(t, OPTIM_F64, 0.5));
    return 0;
}

static size_t lazy_list(void *user, optim_var **vars, size_t cap)
{
    lazy_model *m = user;
    m->list_calls++;
    m->list_after_loss = m->loss_calls > 0 && m->vars[0] != NULL;
    for (size_t i = 0; i < m->nvars && i < cap; i++) vars[i] = m->vars[i];
    return m->nvars;
}

OPTIM_TEST(test_minimize_var_list_fn)
{
    const size_t counts[2] = {3, 70}; /* 70: more than fits the first call */
    for (int c = 0; c < 2; c++) {
        lazy_model m = {.nvars = counts[c]};
        optim_optimizer *opt = sgd(0.5);
        double loss;
        assert_ok(optim_minimize(opt, lazy_loss, &m, NULL, 0, lazy_list, &loss), opt);
        assert_true(m.list_after_loss);
        assert_int_equal(m.list_calls, counts[c] > 64 ? 2 : 1);
        double want = 0;
        for (size_t i = 0; i < m.nvars; i++)
            want += ((1.0 + (double)i) * (1.0 + (double)i) + 1) / 2;
        assert_close(loss, want, 1e-14, 0);
        for (size_t i = 0; i < m.nvars; i++) {
            assert_close(optim_var_get(m.vars[i], 0), 0.5 * (1.0 + (double)i), 1e-15, 0);
            assert_close(optim_var_get(m.vars[i], 1), -0.5, 1e-15, 0);
        }
        optim_destroy(opt);
        for (size_t i = 0; i < m.nvars; i++) optim_var_destroy(m.vars[i]);
    }
}

static int failing_loss(optim_tape *t, void *user, optim_node **loss)
{
    (void)user;
    *loss = optim_add(t, cnode(t, OPTIM_F64, 1, (int64_t[]){2}, (double[]){1, 2}),
                      cnode(t, OPTIM_F64, 1, (int64_t[]){3}, (double[]){1, 2, 3}));
    return *loss ? 0 : OPTIM_EINVAL;
}

static int null_loss(optim_tape *t, void *user, optim_node **loss)
{
    (void)user;
    *loss = optim_matmul(t, optim_tape_scalar(t, OPTIM_F64, 1), optim_tape_scalar(t, OPTIM_F64, 1),
                         0, 0);
    return 0;
}

static int vector_loss(optim_tape *t, void *user, optim_node **loss)
{
    *loss = optim_square(t, optim_tape_var(t, user));
    return 0;
}

static int const_loss(optim_tape *t, void *user, optim_node **loss)
{
    *loss = optim_tape_scalar(t, OPTIM_F64, 1);
    return 0;
}

static int use_var_loss(optim_tape *t, void *user, optim_node **loss)
{
    *loss = optim_sum(t, optim_square(t, optim_tape_var(t, user)), OPTIM_ALL_AXES);
    return 0;
}

static size_t null_list(void *user, optim_var **vars, size_t cap)
{
    if (cap) vars[0] = NULL;
    return 1;
}

OPTIM_TEST(test_minimize_errors)
{
    optim_var *v = optim_test_var("v", OPTIM_F64, 1, (int64_t[]){2}, (double[]){1, 2});
    optim_var *frozen = optim_test_var("frozen", OPTIM_F64, 1, (int64_t[]){2}, (double[]){1, 2});
    optim_var_set_trainable(frozen, 0);
    optim_optimizer *opt = sgd(0.1);
    double loss = 0;
    assert_status(optim_minimize(NULL, use_var_loss, v, &v, 1, NULL, &loss), OPTIM_EINVAL, NULL);
    assert_nan(loss);
    assert_status(optim_minimize(opt, NULL, v, &v, 1, NULL, NULL), OPTIM_EINVAL, opt);
    assert_has(optim_errmsg(opt), "loss_fn is NULL");
    assert_status(optim_minimize(opt, use_var_loss, v, &v, 1, lazy_list, NULL), OPTIM_EINVAL, opt);
    assert_has(optim_errmsg(opt), "both vars and var_list_fn");
    assert_status(optim_minimize(opt, use_var_loss, v, NULL, 0, NULL, NULL), OPTIM_EINVAL, opt);
    assert_has(optim_errmsg(opt), "vars and var_list_fn are both NULL");
    assert_status(optim_minimize(opt, use_var_loss, v, (optim_var *[]){v, NULL}, 2, NULL, NULL),
                  OPTIM_EINVAL, opt);
    assert_has(optim_errmsg(opt), "vars[1] is NULL");
    assert_status(optim_minimize(opt, use_var_loss, v, NULL, 0, null_list, NULL), OPTIM_EINVAL,
                  opt);
    assert_has(optim_errmsg(opt), "var_list_fn");
    /* the loss function fails: its message, with the tape's */
    assert_status(optim_minimize(opt, failing_loss, NULL, &v, 1, NULL, &loss), OPTIM_EINVAL, opt);
    assert_has(optim_errmsg(opt), "loss_fn failed");
    assert_has(optim_errmsg(opt), "add: shapes [2] and [3]");
    assert_nan(loss);
    /* returns 0 without a loss */
    assert_status(optim_minimize(opt, null_loss, NULL, &v, 1, NULL, NULL), OPTIM_EINVAL, opt);
    assert_has(optim_errmsg(opt), "no loss");
    assert_has(optim_errmsg(opt), "matmul");
    /* not a scalar */
    assert_status(optim_minimize(opt, vector_loss, v, &v, 1, NULL, &loss), OPTIM_ESHAPE, opt);
    assert_has(optim_errmsg(opt), "scalar");
    /* no variable gets a gradient: apply_gradients refuses (Keras's ValueError) */
    assert_status(optim_minimize(opt, const_loss, NULL, &v, 1, NULL, &loss), OPTIM_EINVAL, opt);
    assert_has(optim_errmsg(opt), "no gradients");
    assert_close(loss, 1, 0, 0);
    /* a listed variable is watched (Keras's tape.watch(var_list)), so a
     * non-trainable one reaches apply_gradients, which refuses it */
    assert_status(optim_minimize(opt, use_var_loss, frozen, &frozen, 1, NULL, NULL), OPTIM_EINVAL,
                  opt);
    assert_has(optim_errmsg(opt), "not trainable");
    /* nothing changed */
    assert_eq(optim_iterations(opt), 0);
    assert_eq(optim_var_get(v, 0), 1);
    assert_eq(optim_var_get(v, 1), 2);
    assert_eq(optim_var_get(frozen, 0), 1);
    /* and then it works */
    assert_ok(optim_minimize(opt, use_var_loss, v, &v, 1, NULL, &loss), opt);
    assert_string_equal(optim_errmsg(opt), "");
    assert_close(optim_var_get(v, 1), 2 - 0.1 * 4, 1e-15, 0);
    optim_destroy(opt);
    optim_var_destroy(v);
    optim_var_destroy(frozen);
}

OPTIM_TEST(test_loss_and_gradients)
{
    keras_doc k = {optim_test_var("var1", OPTIM_F32, 0, NULL, (double[]){1}),
                   optim_test_var("var2", OPTIM_F32, 0, NULL, (double[]){2}), 0};
    optim_tape *t = tape();
    optim_var *vars[2] = {k.var1, k.var2};
    optim_grad_var g[2];
    double loss;
    optim_error err;
    /* something already on the tape is forgotten */
    assert_null(optim_add(t, NULL, NULL));
    for (int rep = 0; rep < 3; rep++) {
        assert_ok(optim_loss_and_gradients(t, doc_loss, &k, vars, 2, g, &loss, &err), &err);
        assert_close(loss, 11, 1e-7, 0);
        assert_int_equal(g[0].grad.kind, OPTIM_GRAD_DENSE);
        assert_close(tget(&g[0].grad.dense, 0), 6, 1e-7, 0);
        assert_close(tget(&g[1].grad.dense, 0), 8, 1e-7, 0);
        assert_ptr_equal(g[1].var, k.var2);
    }
    size_t mem = optim_tape_memory(t);
    assert_ok(optim_loss_and_gradients(t, doc_loss, &k, vars, 2, g, &loss, &err), &err);
    assert_eq(optim_tape_memory(t), mem);
    /* errors go to err */
    assert_status(optim_loss_and_gradients(NULL, doc_loss, &k, vars, 2, g, &loss, &err),
                  OPTIM_EINVAL, &err);
    assert_has(err.msg, "tape is NULL");
    assert_nan(loss);
    assert_status(optim_loss_and_gradients(t, NULL, &k, vars, 2, g, &loss, &err), OPTIM_EINVAL,
                  &err);
    assert_has(err.msg, "loss_fn is NULL");
    assert_status(optim_loss_and_gradients(t, doc_loss, &k, vars, 2, NULL, &loss, &err),
                  OPTIM_EINVAL, &err);
    assert_has(err.msg, "out is NULL");
    assert_status(optim_loss_and_gradients(t, failing_loss, NULL, vars, 2, g, &loss, &err),
                  OPTIM_EINVAL, &err);
    assert_has(err.msg, "loss_fn failed");
    assert_has(err.msg, "add");
    assert_ok(optim_loss_and_gradients(t, vector_loss, k.var1, vars, 1, g, &loss, &err),
              &err); /* [] is scalar */
    optim_var *vec = optim_test_var("vec", OPTIM_F64, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    assert_status(optim_loss_and_gradients(t, vector_loss, vec, &vec, 1, g, &loss, &err),
                  OPTIM_ESHAPE, &err);
    assert_has(err.msg, "optim_loss_and_gradients");
    assert_has(err.msg, "[3]");
    assert_nan(loss);
    /* then apply them yourself */
    assert_ok(optim_loss_and_gradients(t, doc_loss, &k, vars, 2, g, NULL, &err), &err);
    optim_optimizer *opt = sgd(0.1);
    assert_ok(optim_apply_gradients(opt, g, 2, 0), opt);
    assert_close(optim_var_get(k.var1, 0), 0.4, 1e-6, 0);
    optim_destroy(opt);
    optim_var_destroy(vec);
    optim_tape_destroy(t);
    optim_var_destroy(k.var1);
    optim_var_destroy(k.var2);
}

/* ---- internal: clip and the activations' logits ---------------------------------------- */

/* tf.clip_by_value: the bound for +-inf, NaN kept; gradient where lo <= x
 * <= hi (bounds included), 0 elsewhere (NaN included). */
OPTIM_TEST(test_clip_op)
{
    const double x[8] = {-INFINITY, -1, 0.25, 0.5, 0.75, 2, INFINITY, NAN};
    const double want[8] = {0.25, 0.25, 0.25, 0.5, 0.75, 0.75, 0.75, NAN};
    const double w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const double dwant[8] = {0, 0, 3, 4, 5, 0, 0, 0};
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_var *v = optim_test_var("x", dt, 1, (int64_t[]){8}, x);
        optim_tape *t = tape();
        optim_node *c = optim__tape_clip(t, optim_tape_var(t, v), 0.25, 0.75);
        assert_non_null(c);
        assert_string_equal(c->op, "clip");
        assert_shape(c, 1, (int64_t[]){8});
        for (int i = 0; i < 8; i++) {
            if (isnan(want[i])) assert_nan(at(c, i));
            else assert_eq(at(c, i), want[i]);
        }
        optim_node *loss =
            optim_sum(t, optim_mul(t, c, cnode(t, dt, 1, (int64_t[]){8}, w)), OPTIM_ALL_AXES);
        optim_grad_var g;
        int rc = optim_tape_gradient(t, loss, &v, 1, &g);
        if (rc) print_error("%s\n", optim_tape_errmsg(t));
        assert_ok(rc, t);
        assert_int_equal(g.grad.kind, OPTIM_GRAD_DENSE);
        for (int i = 0; i < 8; i++) assert_eq(tget(&g.grad.dense, i), dwant[i]);
        /* f32 bounds are the doubles rounded: 1 - 1e-7 -> 0.99999988f */
        optim_node *one = cnode(t, dt, 1, (int64_t[]){1}, (double[]){1.0});
        optim_node *c1 = optim__tape_clip(t, one, 1e-7, 1.0 - 1e-7);
        assert_eq(at(c1, 0), (d ? 1.0 - 1e-7 : (double)(1.0f - (float)1e-7)));
        /* a failed input propagates */
        assert_null(optim__tape_clip(t, NULL, 0, 1));
        optim_tape_destroy(t);
        optim_var_destroy(v);
    }
}

/* softmax and sigmoid keep their input for the cross-entropy losses; no
 * other op does. */
OPTIM_TEST(test_activation_logits)
{
    optim_tape *t = tape();
    optim_node *x = cnode(t, OPTIM_F32, 2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6});
    optim_node *sm = optim_softmax(t, x), *sg = optim_sigmoid(t, x);
    assert_ptr_equal(optim__tape_logits(sm, "softmax"), x);
    assert_ptr_equal(optim__tape_logits(sg, "sigmoid"), x);
    assert_null(optim__tape_logits(sm, "sigmoid"));
    assert_null(optim__tape_logits(sg, "softmax"));
    assert_null(optim__tape_logits(optim_log_softmax(t, x), "softmax"));
    assert_null(optim__tape_logits(optim_tanh(t, x), "sigmoid"));
    assert_null(optim__tape_logits(optim_mul(t, sm, x), "softmax"));
    assert_null(optim__tape_logits(x, "softmax"));
    assert_null(optim__tape_logits(NULL, "softmax"));
    optim_tape_destroy(t);
}

int main(void) { return optim_test_run(); }
