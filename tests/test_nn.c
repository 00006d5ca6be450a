/* The nn layer: layer shapes and lazy variable creation, Dense values
 * against a double-precision reference, losses and reductions against
 * closed forms (values and gradients, clipping included, logits taken
 * from softmax / sigmoid outputs), accuracy, an
 * Embedding model whose optimizer step receives sparse gradients, fit
 * (convergence, determinism, validation, history, progress output),
 * callbacks (order, EarlyStopping, LearningRateScheduler), evaluate,
 * predict, summary, and every refusal. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/nn.h"
#include "optim/optim.h"

/* ---- helpers ------------------------------------------------------------------- */

static optim_layer *dense(int64_t units, optim_activation act, int64_t seed)
{
    optim_dense_options o = optim_dense_defaults(units);
    o.activation = act;
    o.seed = seed;
    optim_layer *l;
    optim_error err;
    assert_ok(optim_dense_create(&l, &o, &err), &err);
    return l;
}

static optim_model *model_of(optim_dtype dt, uint64_t seed, optim_layer **layers, size_t n)
{
    optim_sequential_options o = optim_sequential_defaults();
    o.dtype = dt;
    o.seed = seed;
    optim_model *m;
    optim_error err;
    assert_ok(optim_sequential_create(&m, &o, &err), &err);
    for (size_t i = 0; i < n; i++) {
        assert_ok(optim_sequential_add(m, layers[i]), m);
    }
    return m;
}

static optim_tape *tape(void)
{
    optim_tape *t;
    optim_error err;
    assert_ok(optim_tape_create(&t, &err), &err);
    return t;
}

static double lcg_uniform(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) * 0x1.0p-53;
}

/* Writes f32 or f64 values from doubles. */
static void *fill_buf(optim_dtype dt, const double *v, int64_t n)
{
    void *b = malloc((size_t)(n ? n : 1) * 8);
    for (int64_t i = 0; i < n; i++) {
        if (dt == OPTIM_F32) ((float *)b)[i] = (float)v[i];
        else ((double *)b)[i] = v[i];
    }
    return b;
}

static double val(const optim_tensor *t, int64_t i)
{
    return t->dtype == OPTIM_F32 ? ((const float *)t->data)[i] : ((const double *)t->data)[i];
}

/* ---- layers ------------------------------------------------------------------- */

OPTIM_TEST(test_dense_lazy_shapes)
{
    optim_layer *l = dense(5, OPTIM_ACT_LINEAR, 7);
    assert_false(optim_layer_built(l));
    assert_eq(optim_layer_variables(l, NULL, 0), 0);
    assert_string_equal(optim_layer_name(l), "dense");
    assert_string_equal(optim_layer_class_name(l), "Dense");
    optim_tape *t = tape();
    double xv[12];
    for (int i = 0; i < 12; i++) xv[i] = 0.1 * i - 0.5;
    float xf[12];
    for (int i = 0; i < 12; i++) xf[i] = (float)xv[i];
    optim_tensor x = optim_tensor_make(OPTIM_F32, xf, 2, (int64_t[]){3, 4});
    optim_node *y;
    assert_ok(optim_layer_call(l, t, optim_tape_const(t, &x), NULL, 0, &y), l);
    assert_true(optim_layer_built(l));
    const optim_tensor *yv = optim_node_value(y);
    assert_int_equal(yv->rank, 2);
    assert_int_equal(yv->shape[0], 3);
    assert_int_equal(yv->shape[1], 5);
    optim_var *vars[2];
    assert_eq(optim_layer_variables(l, vars, 2), 2);
    assert_string_equal(optim_var_name(vars[0]), "dense/kernel");
    assert_string_equal(optim_var_name(vars[1]), "dense/bias");
    assert_eq(optim_var_shape(vars[0])[0], 4);
    assert_eq(optim_var_shape(vars[0])[1], 5);
    assert_eq(optim_var_shape(vars[1])[0], 5);
    /* glorot_uniform: |w| <= sqrt(6 / (4 + 5)), not all equal; bias zeros */
    double limit = sqrt(6.0 / 9.0), lo = 1, hi = -1;
    for (int i = 0; i < 20; i++) {
        double w = optim_var_get(vars[0], i);
        assert_le(fabs(w), limit);
        lo = fmin(lo, w), hi = fmax(hi, w);
    }
    assert_gt(hi - lo, 0.3 * limit);
    for (int i = 0; i < 5; i++) assert_eq(optim_var_get(vars[1], i), 0);
    /* y = x W + b, against double */
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 5; c++) {
            double ref = 0;
            for (int k = 0; k < 4; k++)
                ref += (double)xf[r * 4 + k] * optim_var_get(vars[0], k * 5 + c);
            assert_close(val(yv, r * 5 + c), ref, 1e-5, 1e-6);
        }
    /* rank 3 input: Dense acts on the last axis */
    float x3[24];
    for (int i = 0; i < 24; i++) x3[i] = (float)(0.05 * i - 0.4);
    optim_tensor t3 = optim_tensor_make(OPTIM_F32, x3, 3, (int64_t[]){2, 3, 4});
    assert_ok(optim_layer_call(l, t, optim_tape_const(t, &t3), NULL, 0, &y), l);
    yv = optim_node_value(y);
    assert_int_equal(yv->rank, 3);
    assert_int_equal(yv->shape[2], 5);
    for (int r = 0; r < 6; r++) {
        double ref = 0;
        for (int k = 0; k < 4; k++)
            ref += (double)x3[r * 4 + k] * optim_var_get(vars[0], k * 5 + 2);
        assert_close(val(yv, r * 5 + 2), ref, 1e-5, 1e-6);
    }
    /* after the build, the last axis must match; rank 1 is refused */
    float x5[10] = {0};
    optim_tensor bad = optim_tensor_make(OPTIM_F32, x5, 2, (int64_t[]){2, 5});
    assert_status(optim_layer_call(l, t, optim_tape_const(t, &bad), NULL, 0, &y), OPTIM_ESHAPE, l);
    assert_contains(optim_layer_errmsg(l), "expected axis -1 of input shape to have value 4");
    assert_null(y);
    optim_tape_destroy(t);
    optim_layer_destroy(l);

    optim_layer *l2 = dense(3, OPTIM_ACT_LINEAR, 7);
    t = tape();
    optim_tensor r1 = optim_tensor_make(OPTIM_F32, x5, 1, (int64_t[]){4});
    assert_status(optim_layer_call(l2, t, optim_tape_const(t, &r1), NULL, 0, &y), OPTIM_ESHAPE, l2);
    assert_contains(optim_layer_errmsg(l2), "min_ndim=2");
    assert_false(optim_layer_built(l2));
    optim_tape_destroy(t);
    optim_layer_destroy(l2);

    /* the same seed gives the same kernel, another seed another; no bias */
    optim_dense_options o = optim_dense_defaults(6);
    o.use_bias = 0;
    o.seed = 123;
    optim_layer *a, *b, *c;
    optim_error err;
    assert_ok(optim_dense_create(&a, &o, &err), &err);
    assert_ok(optim_dense_create(&b, &o, &err), &err);
    o.seed = 124;
    assert_ok(optim_dense_create(&c, &o, &err), &err);
    t = tape();
    optim_tensor x2 = optim_tensor_make(OPTIM_F32, xf, 2, (int64_t[]){3, 4});
    assert_ok(optim_layer_call(a, t, optim_tape_const(t, &x2), NULL, 0, &y), a);
    assert_ok(optim_layer_call(b, t, optim_tape_const(t, &x2), NULL, 0, &y), b);
    assert_ok(optim_layer_call(c, t, optim_tape_const(t, &x2), NULL, 0, &y), c);
    optim_var *va, *vb, *vc;
    assert_eq(optim_layer_variables(a, &va, 1), 1);
    assert_eq(optim_layer_variables(b, &vb, 1), 1);
    assert_eq(optim_layer_variables(c, &vc, 1), 1);
    assert_memory_equal(optim_var_cdata(va), optim_var_cdata(vb), 24 * sizeof(float));
    assert_memory_not_equal(optim_var_cdata(va), optim_var_cdata(vc), 24 * sizeof(float));
    optim_tape_destroy(t);
    optim_layer_destroy(a);
    optim_layer_destroy(b);
    optim_layer_destroy(c);
}

OPTIM_TEST(test_activations)
{
    const optim_activation acts[] = {OPTIM_ACT_LINEAR, OPTIM_ACT_RELU,    OPTIM_ACT_SIGMOID,
                                     OPTIM_ACT_TANH,   OPTIM_ACT_SOFTMAX, OPTIM_ACT_GELU,
                                     OPTIM_ACT_SILU};
    double x[6] = {-1.5, 0.2, 2.0, 0.7, -0.3, 0.0};
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        for (size_t a = 0; a < sizeof acts / sizeof *acts; a++) {
            optim_activation back;
            assert_ok(optim_activation_from_name(optim_activation_name(acts[a]), &back, NULL),
                      NULL);
            assert_int_equal(back, acts[a]);
            optim_tape *t = tape();
            void *b = fill_buf(dt, x, 6);
            optim_tensor xt = optim_tensor_make(dt, b, 2, (int64_t[]){2, 3});
            const optim_tensor *yv =
                optim_node_value(optim_activation_apply(t, acts[a], optim_tape_const(t, &xt)));
            assert_non_null(yv);
            for (int r = 0; r < 2; r++) {
                double mx = fmax(x[3 * r], fmax(x[3 * r + 1], x[3 * r + 2])), z = 0;
                for (int j = 0; j < 3; j++) z += exp(x[3 * r + j] - mx);
                for (int j = 0; j < 3; j++) {
                    double v = x[3 * r + j], ref;
                    switch (acts[a]) {
                    case OPTIM_ACT_RELU: ref = v > 0 ? v : 0; break;
                    case OPTIM_ACT_SIGMOID: ref = 1 / (1 + exp(-v)); break;
                    case OPTIM_ACT_TANH: ref = tanh(v); break;
                    case OPTIM_ACT_SOFTMAX: ref = exp(v - mx) / z; break;
                    case OPTIM_ACT_GELU: ref = 0.5 * v * (1 + erf(v / sqrt(2.0))); break;
                    case OPTIM_ACT_SILU: ref = v / (1 + exp(-v)); break;
                    default: ref = v;
                    }
                    assert_close(val(yv, 3 * r + j), ref, d ? 1e-13 : 1e-6, d ? 1e-15 : 1e-7);
                }
            }
            free(b);
            optim_tape_destroy(t);
        }
    }
    optim_activation a;
    optim_error err;
    assert_ok(optim_activation_from_name(NULL, &a, &err), &err);
    assert_int_equal(a, OPTIM_ACT_LINEAR);
    assert_ok(optim_activation_from_name("swish", &a, &err), &err); /* Keras's alias */
    assert_int_equal(a, OPTIM_ACT_SILU);
    assert_string_equal(optim_activation_name(OPTIM_ACT_GELU), "gelu");
    assert_string_equal(optim_activation_name(OPTIM_ACT_SILU), "silu");
    assert_status(optim_activation_from_name("mish", &a, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "mish");
    assert_null(optim_activation_name((optim_activation)99));
}

OPTIM_TEST(test_sequential_lazy_build)
{
    optim_layer *ls[2] = {dense(8, OPTIM_ACT_RELU, OPTIM_SEED_AUTO),
                          dense(3, OPTIM_ACT_LINEAR, OPTIM_SEED_AUTO)};
    optim_model *m = model_of(OPTIM_F32, 5, ls, 2);
    assert_string_equal(optim_layer_name(ls[1]), "dense_1");
    assert_false(optim_model_built(m));
    assert_eq(optim_model_trainable_variables(m, NULL, 0), 0);
    assert_eq(optim_model_count_params(m), 0);
    optim_tape *t = tape();
    float x[10] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, -0.1f, -0.2f, -0.3f, -0.4f, -0.5f};
    optim_tensor xt = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){2, 5});
    optim_node *y;
    assert_ok(optim_model_call(m, t, &xt, 0, &y), m);
    assert_true(optim_model_built(m));
    optim_var *vars[8];
    assert_eq(optim_model_trainable_variables(m, vars, 8), 4);
    assert_string_equal(optim_var_name(vars[0]), "dense/kernel");
    assert_string_equal(optim_var_name(vars[1]), "dense/bias");
    assert_string_equal(optim_var_name(vars[2]), "dense_1/kernel");
    assert_string_equal(optim_var_name(vars[3]), "dense_1/bias");
    assert_eq(optim_model_count_params(m), 5 * 8 + 8 + 8 * 3 + 3);
    assert_eq(optim_node_value(y)->shape[1], 3);
    /* the two layers got different seeds from the model's */
    assert_memory_not_equal(optim_var_cdata(vars[0]), optim_var_cdata(vars[2]), 24 * sizeof(float));
    int32_t orank;
    int64_t oshape[8];
    assert_ok(optim_model_output_shape(m, 2, (int64_t[]){7, 5}, &orank, oshape), m);
    assert_int_equal(orank, 2);
    assert_int_equal(oshape[0], 7);
    assert_int_equal(oshape[1], 3);
    /* adding after the build is refused */
    optim_layer *late = dense(2, OPTIM_ACT_LINEAR, 0);
    assert_status(optim_sequential_add(m, late), OPTIM_ESTATE, m);
    optim_layer_destroy(late);
    /* summary */
    FILE *f = tmpfile();
    assert_ok(optim_model_summary(m, f), m);
    char buf[4096] = {0};
    rewind(f);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    buf[got] = 0;
    fclose(f);
    assert_contains(buf, "Model: \"sequential\"");
    assert_contains(buf, "dense_1 (Dense)");
    assert_contains(buf, "(None, 3)");
    assert_contains(buf, "Total params: 75 (300.00 B)");
    optim_tape_destroy(t);
    optim_model_destroy(m);

    /* the same model seed gives the same weights */
    optim_layer *l1[1] = {dense(4, OPTIM_ACT_LINEAR, OPTIM_SEED_AUTO)},
                *l2[1] = {dense(4, OPTIM_ACT_LINEAR, OPTIM_SEED_AUTO)};
    optim_model *m1 = model_of(OPTIM_F32, 9, l1, 1), *m2 = model_of(OPTIM_F32, 9, l2, 1);
    assert_ok(optim_model_build(m1, 1, (int64_t[]){5}), m1);
    assert_ok(optim_model_build(m2, 1, (int64_t[]){5}), m2);
    optim_model_trainable_variables(m1, &vars[0], 1);
    optim_model_trainable_variables(m2, &vars[1], 1);
    assert_memory_equal(optim_var_cdata(vars[0]), optim_var_cdata(vars[1]), 20 * sizeof(float));
    assert_status(optim_model_build(m1, 1, (int64_t[]){6}), OPTIM_ESTATE, m1);
    optim_model_destroy(m1);
    optim_model_destroy(m2);
}

/* optim_model_call records a copy of x (fit, evaluate and predict let the
 * tape view their batch instead): overwriting x after the call leaves the
 * kernel's gradient, x^T dY, as it was. */
static double kernel_grad_sum(int overwrite)
{
    optim_layer *ls[1] = {dense(3, OPTIM_ACT_LINEAR, 5)};
    optim_model *m = model_of(OPTIM_F32, 3, ls, 1);
    optim_tape *t = tape();
    float x[8] = {0.5f, -1, 2, 0.25f, 1, 1.5f, -0.5f, 3};
    optim_tensor xt = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){2, 4});
    optim_node *y;
    assert_ok(optim_model_call(m, t, &xt, 1, &y), m);
    if (overwrite) memset(x, 0, sizeof x);
    optim_var *vars[2];
    assert_eq(optim_model_trainable_variables(m, vars, 2), 2);
    optim_grad_var g[2];
    assert_ok(optim_tape_gradient(t, optim_sum(t, optim_square(t, y), OPTIM_ALL_AXES), vars, 2, g),
              t);
    double sum = 0;
    for (int i = 0; i < 12; i++) sum += fabs(((const float *)g[0].grad.dense.data)[i]);
    optim_tape_destroy(t);
    optim_model_destroy(m);
    return sum;
}

OPTIM_TEST(test_model_call_copies_input)
{
    double kept = kernel_grad_sum(0);
    assert_gt(kept, 0);
    assert_eq(kernel_grad_sum(1), kept);
}

OPTIM_TEST(test_failed_first_call_leaves_model_unbuilt)
{
    optim_error err;
    optim_layer *emb;
    assert_ok(
        optim_embedding_create(&emb,
                               &(optim_embedding_options){.size = sizeof(optim_embedding_options),
                                                          .input_dim = 10,
                                                          .output_dim = 2,
                                                          .seed = OPTIM_SEED_AUTO},
                               &err),
        &err);
    optim_layer *ls[2] = {dense(4, OPTIM_ACT_RELU, 0), emb};
    optim_model *m = model_of(OPTIM_F32, 0, ls, 2);
    optim_tape *t = tape();
    float x[6] = {0};
    optim_tensor xt = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){2, 3});
    optim_node *y;
    assert_status(optim_model_call(m, t, &xt, 0, &y), OPTIM_EINVAL, m);
    assert_contains(optim_model_errmsg(m), "must be the model's first layer");
    assert_false(optim_model_built(m));
    assert_false(optim_layer_built(ls[0]));
    assert_eq(optim_model_variables(m, NULL, 0), 0);
    optim_tape_destroy(t);
    optim_model_destroy(m);

    /* an empty model and a layer added twice */
    optim_model *e = model_of(OPTIM_F32, 0, NULL, 0);
    t = tape();
    assert_status(optim_model_call(e, t, &xt, 0, &y), OPTIM_ESTATE, e);
    assert_contains(optim_model_errmsg(e), "no layers");
    optim_layer *d = dense(2, OPTIM_ACT_LINEAR, 0);
    assert_ok(optim_sequential_add(e, d), e);
    assert_status(optim_sequential_add(e, d), OPTIM_ESTATE, e);
    optim_dense_options o = optim_dense_defaults(2);
    o.name = "dense";
    optim_layer *dup;
    assert_ok(optim_dense_create(&dup, &o, &err), &err);
    assert_status(optim_sequential_add(e, dup), OPTIM_EINVAL, e);
    assert_contains(optim_model_errmsg(e), "unique names");
    optim_layer_destroy(dup);
    optim_tape_destroy(t);
    optim_model_destroy(e);
}

OPTIM_TEST(test_dropout_flatten)
{
    optim_error err;
    optim_layer *dr, *fl;
    assert_ok(optim_dropout_create(&dr, 0.5, 3, NULL, &err), &err);
    assert_ok(optim_flatten_create(&fl, NULL, &err), &err);
    optim_layer *ls[2] = {fl, dr};
    optim_model *m = model_of(OPTIM_F64, 0, ls, 2);
    double x[2 * 3 * 100];
    for (int i = 0; i < 600; i++) x[i] = 1.0 + i;
    optim_tensor xt = optim_tensor_make(OPTIM_F64, x, 3, (int64_t[]){2, 3, 100});
    optim_tape *t = tape();
    optim_node *y;
    assert_ok(optim_model_call(m, t, &xt, 0, &y), m);
    const optim_tensor *yv = optim_node_value(y);
    assert_int_equal(yv->rank, 2);
    assert_int_equal(yv->shape[1], 300);
    for (int i = 0; i < 600; i++) assert_eq(val(yv, i), x[i]); /* inference: identity */
    assert_ok(optim_model_call(m, t, &xt, 1, &y), m);
    yv = optim_node_value(y);
    int zeros = 0;
    for (int i = 0; i < 600; i++) {
        if (val(yv, i) == 0) zeros++;
        else assert_close(val(yv, i), 2 * x[i], 1e-15, 0);
    }
    assert_gt(zeros, 200);
    assert_lt(zeros, 400);
    optim_tape_destroy(t);
    optim_model_destroy(m);
}

/* ---- losses ------------------------------------------------------------------------ */

enum { B = 4, K = 3 };

/* tf.clip_by_value(p, eps, 1 - eps) in the loss's dtype (in float32,
 * 1 - 1e-7 rounds to 1 - 2^-23). */
static int ref_f32;
static double clipd(double p)
{
    double lo = ref_f32 ? (double)1e-7f : 1e-7, hi = ref_f32 ? (double)(1.0f - 1e-7f) : 1 - 1e-7;
    return p < lo ? lo : p > hi ? hi : p;
}

/* Per-sample reference values. */
static void ref_per_sample(const optim_loss *l, const double *z, const double *p,
                           const int64_t *lab, double *per)
{
    for (int b = 0; b < B; b++) {
        double acc = 0;
        if (l->kind == OPTIM_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY) {
            if (l->from_logits) {
                double mx = -INFINITY, se = 0;
                for (int j = 0; j < K; j++) mx = fmax(mx, p[b * K + j]);
                for (int j = 0; j < K; j++) se += exp(p[b * K + j] - mx);
                per[b] = mx + log(se) - p[b * K + lab[b]];
            } else {
                double sp = 0;
                for (int j = 0; j < K; j++) sp += clipd(p[b * K + j]);
                per[b] = -log(clipd(p[b * K + lab[b]])) + log(sp);
            }
            continue;
        }
        for (int j = 0; j < K; j++) {
            double zz = z[b * K + j], x = p[b * K + j];
            if (l->label_smoothing) zz = zz * (1 - l->label_smoothing) + 0.5 * l->label_smoothing;
            if (l->kind == OPTIM_LOSS_MEAN_SQUARED_ERROR) acc += (zz - x) * (zz - x);
            else if (l->from_logits) acc += fmax(x, 0) - x * zz + log1p(exp(-fabs(x)));
            else acc += -(zz * log(clipd(x)) + (1 - zz) * log(1 - clipd(x)));
        }
        per[b] = acc / K;
    }
}

static void check_loss(optim_loss l, optim_dtype dt, const double *sw)
{
    /* probabilities include 0 and 1 (clipped); logits any sign */
    double p[B * K] = {0.1, 0.7, 0.2, 0.0, 1.0, 0.5, 0.3, 0.3, 0.4, 0.9, 0.05, 0.05};
    double logits[B * K] = {1.5, -0.3, 0.2, -2.0, 3.0, 0.1, 0.0, 0.4, -1.1, 2.2, -0.7, 0.9};
    double z[B * K] = {0, 1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0};
    int64_t lab[B] = {1, 2, 2, 0};
    const double *pred = l.from_logits ? logits : p;
    double per[B];
    ref_f32 = dt == OPTIM_F32;
    ref_per_sample(&l, z, pred, lab, per);
    for (int red = 0; red < 3; red++) {
        l.reduction = (optim_reduction)red;
        optim_tape *t = tape();
        void *pb = fill_buf(dt, pred, B * K);
        optim_tensor pt = optim_tensor_make(dt, pb, 2, (int64_t[]){B, K});
        optim_tensor yt;
        double zlab[B];
        for (int b = 0; b < B; b++) zlab[b] = (double)lab[b];
        if (l.kind == OPTIM_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
            yt = optim_tensor_make(OPTIM_I64, lab, 1, (int64_t[]){B});
        else yt = optim_tensor_make(OPTIM_F64, z, 2, (int64_t[]){B, K});
        optim_tensor swt = optim_tensor_make(OPTIM_F64, (void *)sw, 1, (int64_t[]){B});
        optim_node *out;
        optim_error err;
        assert_ok(
            optim_loss_call(&l, t, &yt, optim_tape_const(t, &pt), sw ? &swt : NULL, &out, &err),
            &err);
        double sum = 0, w[B];
        for (int b = 0; b < B; b++) w[b] = per[b] * (sw ? sw[b] : 1), sum += w[b];
        double rtol = dt == OPTIM_F32 ? 2e-6 : 1e-13;
        if (l.reduction == OPTIM_REDUCTION_NONE) {
            const optim_tensor *v = optim_node_value(out);
            assert_int_equal(v->rank, 1);
            assert_int_equal(v->shape[0], B);
            for (int b = 0; b < B; b++) assert_close(val(v, b), w[b], rtol, 1e-12);
        } else {
            double ref = l.reduction == OPTIM_REDUCTION_SUM ? sum : sum / B;
            assert_close(optim_node_scalar(out), ref, rtol, 1e-12);
        }
        (void)zlab;
        free(pb);
        optim_tape_destroy(t);
    }
}

OPTIM_TEST(test_losses_closed_forms)
{
    const double sw[B] = {1.0, 0.5, 2.0, 0.0};
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        for (int w = 0; w < 2; w++) {
            const double *sws = w ? sw : NULL;
            check_loss(optim_loss_mean_squared_error(), dt, sws);
            check_loss(optim_loss_binary_crossentropy(0), dt, sws);
            check_loss(optim_loss_binary_crossentropy(1), dt, sws);
            optim_loss ls = optim_loss_binary_crossentropy(0);
            ls.label_smoothing = 0.2;
            check_loss(ls, dt, sws);
            ls.from_logits = 1;
            check_loss(ls, dt, sws);
            check_loss(optim_loss_sparse_categorical_crossentropy(0), dt, sws);
            check_loss(optim_loss_sparse_categorical_crossentropy(1), dt, sws);
        }
    }
    optim_loss l = optim_loss_sparse_categorical_crossentropy(1);
    assert_string_equal(optim_loss_name(&l), "SparseCategoricalCrossentropy");
}

/* Gradient of the clipped cross-entropies: (-z/p + (1-z)/(1-p)) / (B K)
 * inside the clip range, 0 outside, as tf.clip_by_value's. */
OPTIM_TEST(test_loss_gradients_through_clip)
{
    double p[B * K] = {0.1, 0.7, 0.2, 0.0, 1.0, 0.5, 0.3, 0.3, 0.4, 0.9, 0.05, 0.05};
    double z[B * K] = {0, 1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0};
    int64_t lab[B] = {1, 0, 2, 0};
    for (int kind = 0; kind < 2; kind++) {
        optim_var *v;
        optim_error err;
        assert_ok(optim_var_create(&v, "p", OPTIM_F64, 2, (int64_t[]){B, K}, p, &err), &err);
        optim_tape *t = tape();
        optim_loss l = kind ? optim_loss_sparse_categorical_crossentropy(0)
                            : optim_loss_binary_crossentropy(0);
        optim_tensor yt = kind ? optim_tensor_make(OPTIM_I64, lab, 1, (int64_t[]){B})
                               : optim_tensor_make(OPTIM_F64, z, 2, (int64_t[]){B, K});
        optim_node *loss;
        assert_ok(optim_loss_call(&l, t, &yt, optim_tape_var(t, v), NULL, &loss, &err), &err);
        optim_grad_var g;
        assert_ok(optim_tape_gradient(t, loss, &v, 1, &g), t);
        assert_int_equal(g.grad.kind, OPTIM_GRAD_DENSE);
        ref_f32 = 0;
        for (int b = 0; b < B; b++) {
            double sp = 0;
            for (int j = 0; j < K; j++) sp += clipd(p[b * K + j]);
            for (int j = 0; j < K; j++) {
                int i = b * K + j;
                double x = p[i], ref;
                int inside = x >= 1e-7 && x <= 1 - 1e-7;
                if (!inside) ref = 0;
                else if (kind == 0) ref = (-z[i] / x + (1 - z[i]) / (1 - x)) / (B * K);
                else ref = ((j == lab[b] ? -1 / x : 0) + 1 / sp) / B;
                assert_close(((double *)g.grad.dense.data)[i], ref, 1e-12, 1e-15);
            }
        }
        optim_tape_destroy(t);
        optim_var_destroy(v);
    }
}

/* Loss and gradient of a cross-entropy against a variable x fed through
 * `act` (0: none, 1: optim_softmax, 2: optim_sigmoid, 3: softmax then * 1,
 * 4: sigmoid then * 1). */
static double xent_through(optim_loss l, optim_dtype dt, int act, int32_t xr, const int64_t *xs,
                           const double *x, const optim_tensor *yt, double *grad)
{
    optim_tensor h = optim_tensor_make(dt, NULL, xr, xs);
    int64_t n = optim_tensor_numel(&h);
    void *xb = fill_buf(dt, x, n);
    optim_var *v;
    optim_error err;
    assert_ok(optim_var_create(&v, "x", dt, xr, xs, xb, &err), &err);
    free(xb);
    optim_tape *t = tape();
    optim_node *p = optim_tape_var(t, v);
    if (act == 1 || act == 3) p = optim_softmax(t, p);
    if (act == 2 || act == 4) p = optim_sigmoid(t, p);
    if (act >= 3) p = optim_mul(t, p, optim_tape_scalar(t, dt, 1.0));
    optim_node *loss;
    assert_ok(optim_loss_call(&l, t, yt, p, NULL, &loss, &err), &err);
    double r = optim_node_scalar(loss);
    optim_grad_var g;
    assert_ok(optim_tape_gradient(t, loss, &v, 1, &g), t);
    assert_int_equal(g.grad.kind, OPTIM_GRAD_DENSE);
    for (int64_t i = 0; i < n; i++) grad[i] = val(&g.grad.dense, i);
    optim_tape_destroy(t);
    optim_var_destroy(v);
    return r;
}

/* Probabilities straight from optim_softmax / optim_sigmoid: the
 * cross-entropies compute from the logits, as Keras's TF backend
 * (_get_logits), so a saturated output keeps its gradient: logits [0, 20],
 * label 0 give loss 20 and gradient [-1, 1], not the clip's 16.118 and
 * [0, 0]. Any op in between, or a y_pred that must be reshaped to meet
 * y_true, keeps the clip. */
OPTIM_TEST(test_loss_from_activation_logits)
{
    const double clip_loss = -log(1e-7); /* 16.118 */
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        double rtol = d ? 1e-12 : 1e-6, g[4];
        /* SparseCategoricalCrossentropy over softmax */
        optim_loss sc = optim_loss_sparse_categorical_crossentropy(0);
        int64_t lab[1] = {0};
        optim_tensor yl = optim_tensor_make(OPTIM_I64, lab, 1, (int64_t[]){1});
        const double x2[2] = {0, 20};
        double ref = 20 + log1p(exp(-20.0)), p0 = 1 / (1 + exp(20.0));
        assert_close(xent_through(sc, dt, 1, 2, (int64_t[]){1, 2}, x2, &yl, g), ref, rtol, 0);
        assert_close(g[0], p0 - 1, rtol, 1e-7);
        assert_close(g[1], 1 - p0, rtol, 1e-7);
        /* the same logits given directly, from_logits = 1 */
        optim_loss scl = optim_loss_sparse_categorical_crossentropy(1);
        double gl[2];
        assert_close(xent_through(scl, dt, 0, 2, (int64_t[]){1, 2}, x2, &yl, gl), ref, rtol, 0);
        assert_close(g[0], gl[0], rtol, 1e-7);
        assert_close(g[1], gl[1], rtol, 1e-7);
        /* rank 3: [1, 1, 2] with labels [1, 1] */
        optim_tensor yl3 = optim_tensor_make(OPTIM_I64, lab, 2, (int64_t[]){1, 1});
        assert_close(xent_through(sc, dt, 1, 3, (int64_t[]){1, 1, 2}, x2, &yl3, g), ref, rtol, 0);
        assert_close(g[1], 1 - p0, rtol, 1e-7);
        /* softmax, then another op: the clip */
        assert_close(xent_through(sc, dt, 3, 2, (int64_t[]){1, 2}, x2, &yl, g), clip_loss, 1e-5, 0);
        assert_eq(g[0], 0);
        assert_eq(g[1], 0);
        /* BinaryCrossentropy over sigmoid: logits [20, -20] against [0, 1] */
        optim_loss bce = optim_loss_binary_crossentropy(0);
        const double xb[2] = {20, -20}, zb[2] = {0, 1};
        optim_tensor yz = optim_tensor_make(OPTIM_F64, (void *)zb, 2, (int64_t[]){1, 2});
        double q = 1 / (1 + exp(-20.0)); /* sigmoid(20) */
        assert_close(xent_through(bce, dt, 2, 2, (int64_t[]){1, 2}, xb, &yz, g), ref, rtol, 0);
        assert_close(g[0], q / 2, rtol, 1e-7);
        assert_close(g[1], -q / 2, rtol, 1e-7);
        /* with label smoothing 0.2: targets 0.1, 0.9 */
        optim_loss bls = bce;
        bls.label_smoothing = 0.2;
        double lsref =
            (xb[0] * (1 - 0.1) + log1p(exp(-20.0)) + (-xb[1] * 0.9 + log1p(exp(-20.0)))) / 2;
        assert_close(xent_through(bls, dt, 2, 2, (int64_t[]){1, 2}, xb, &yz, g), lsref, rtol, 0);
        assert_close(g[0], (q - 0.1) / 2, rtol, 1e-7);
        assert_close(g[1], ((1 - q) - 0.9) / 2, rtol, 1e-7);
        /* y_pred [1, 1] of y_true [1]: y_true is expanded, y_pred kept, logits used */
        optim_tensor yz1 = optim_tensor_make(OPTIM_F64, (void *)zb, 1, (int64_t[]){1});
        assert_close(xent_through(bce, dt, 2, 2, (int64_t[]){1, 1}, xb, &yz1, g), ref, rtol, 0);
        assert_close(g[0], q, rtol, 1e-7);
        /* y_pred [1] of y_true [1, 1]: y_pred is reshaped (Keras: expand_dims), the clip */
        optim_tensor yz11 = optim_tensor_make(OPTIM_F64, (void *)zb, 2, (int64_t[]){1, 1});
        double lo = d ? 1e-7 : (double)(float)1e-7, hi = d ? 1 - 1e-7 : (double)(float)(1 - 1e-7);
        assert_close(xent_through(bce, dt, 2, 1, (int64_t[]){1}, xb, &yz11, g), -log(1 - hi), 1e-5,
                     0);
        assert_eq(g[0], 0);
        /* sigmoid, then another op: the clip */
        assert_close(xent_through(bce, dt, 4, 2, (int64_t[]){1, 2}, xb, &yz, g),
                     (-log(1 - hi) - log(lo)) / 2, 1e-5, 0);
        assert_eq(g[0], 0);
        assert_eq(g[1], 0);
    }
}

/* The clip gives the bound for +-inf (tf.clip_by_value), not NaN, and no
 * gradient there. */
OPTIM_TEST(test_loss_clip_infinities)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        double eps = d ? 1e-7 : (double)(float)1e-7, g[3];
        const double p[3] = {INFINITY, -INFINITY, 0.5}, z[3] = {1, 0, 1};
        optim_tensor yz = optim_tensor_make(OPTIM_F64, (void *)z, 2, (int64_t[]){1, 3});
        /* -log(1 - eps) twice, -log(0.5) */
        double ref = (2 * -log1p(-eps) + log(2.0)) / 3;
        double r =
            xent_through(optim_loss_binary_crossentropy(0), dt, 0, 2, (int64_t[]){1, 3}, p, &yz, g);
        assert_close(r, ref, d ? 1e-12 : 1e-6, 0);
        assert_eq(g[0], 0);
        assert_eq(g[1], 0);
        assert_close(g[2], -1 / 0.5 / 3, 1e-6, 0);
        int64_t lab[1] = {0};
        optim_tensor yl = optim_tensor_make(OPTIM_I64, lab, 1, (int64_t[]){1});
        /* clipped [1 - eps, eps, 0.5]: -log(1 - eps) + log(1.5) */
        r = xent_through(optim_loss_sparse_categorical_crossentropy(0), dt, 0, 2, (int64_t[]){1, 3},
                         p, &yl, g);
        assert_close(r, -log1p(-eps) + log(1.5), d ? 1e-12 : 1e-6, 0);
        assert_eq(g[0], 0);
        assert_eq(g[1], 0);
        assert_close(g[2], 1 / 1.5, 1e-6, 0);
    }
}

OPTIM_TEST(test_loss_shapes)
{
    optim_tape *t = tape();
    float p[4] = {0.2f, 0.4f, 0.6f, 0.8f};
    double z[4] = {0, 1, 1, 0};
    optim_loss mse = optim_loss_mean_squared_error();
    optim_node *out;
    optim_error err;
    /* y_pred [4, 1] against y_true [4]: expanded, per-sample values [4] */
    optim_tensor pt = optim_tensor_make(OPTIM_F32, p, 2, (int64_t[]){4, 1});
    optim_tensor zt = optim_tensor_make(OPTIM_F64, z, 1, (int64_t[]){4});
    mse.reduction = OPTIM_REDUCTION_NONE;
    assert_ok(optim_loss_call(&mse, t, &zt, optim_tape_const(t, &pt), NULL, &out, &err), &err);
    assert_eq(optim_node_value(out)->rank, 1);
    assert_close(val(optim_node_value(out), 1), 0.36, 1e-6, 0);
    /* y_pred [2, 2, 1] against y_true [2, 2]: y_pred squeezed, per-sample [2] */
    optim_tensor p3 = optim_tensor_make(OPTIM_F32, p, 3, (int64_t[]){2, 2, 1});
    optim_tensor z2 = optim_tensor_make(OPTIM_F64, z, 2, (int64_t[]){2, 2});
    assert_ok(optim_loss_call(&mse, t, &z2, optim_tape_const(t, &p3), NULL, &out, &err), &err);
    assert_eq(optim_node_value(out)->rank, 1);
    assert_close(val(optim_node_value(out), 0), (0.04 + 0.36) / 2, 1e-6, 0);
    /* incompatible shapes */
    optim_tensor z3 = optim_tensor_make(OPTIM_F64, z, 2, (int64_t[]){1, 4});
    assert_status(optim_loss_call(&mse, t, &z3, optim_tape_const(t, &pt), NULL, &out, &err),
                  OPTIM_ESHAPE, &err);
    assert_contains(err.msg, "[1, 4]");
    assert_null(out);
    /* labels: [B, 1] accepted, out of range and fractional refused; rank-3 logits */
    optim_loss sc = optim_loss_sparse_categorical_crossentropy(1);
    float lg[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    optim_tensor lt = optim_tensor_make(OPTIM_F32, lg, 3, (int64_t[]){2, 2, 3});
    int32_t lab[4] = {0, 1, 2, 0};
    optim_tensor labt = optim_tensor_make(OPTIM_I32, lab, 2, (int64_t[]){2, 2});
    sc.reduction = OPTIM_REDUCTION_NONE;
    assert_ok(optim_loss_call(&sc, t, &labt, optim_tape_const(t, &lt), NULL, &out, &err), &err);
    assert_eq(optim_node_value(out)->rank, 2);
    assert_close(val(optim_node_value(out), 3), log(exp(-2) + exp(-1) + 1) + 2, 1e-6, 0);
    optim_tensor lab1 = optim_tensor_make(OPTIM_I32, lab, 3, (int64_t[]){2, 2, 1});
    assert_ok(optim_loss_call(&sc, t, &lab1, optim_tape_const(t, &lt), NULL, &out, &err), &err);
    lab[2] = 3;
    assert_status(optim_loss_call(&sc, t, &labt, optim_tape_const(t, &lt), NULL, &out, &err),
                  OPTIM_ERANGE, &err);
    assert_non_null(strstr(err.msg, "y_true[2] = 3 is not in [0, 3)"));
    double fl[4] = {0, 1.5, 2, 0};
    optim_tensor flt = optim_tensor_make(OPTIM_F64, fl, 2, (int64_t[]){2, 2});
    assert_status(optim_loss_call(&sc, t, &flt, optim_tape_const(t, &lt), NULL, &out, &err),
                  OPTIM_EINVAL, &err);
    assert_contains(err.msg, "whole number");
    /* a sample_weight of the wrong shape */
    double sw[3] = {1, 1, 1};
    optim_tensor swt = optim_tensor_make(OPTIM_F64, sw, 1, (int64_t[]){3});
    mse.reduction = OPTIM_REDUCTION_SUM;
    assert_status(optim_loss_call(&mse, t, &zt, optim_tape_const(t, &pt), &swt, &out, &err),
                  OPTIM_ESHAPE, &err);
    assert_contains(err.msg, "sample_weight");
    /* bad loss structs */
    optim_loss bad = optim_loss_mean_squared_error();
    bad.reduction = (optim_reduction)7;
    assert_status(optim_loss_call(&bad, t, &zt, optim_tape_const(t, &pt), NULL, &out, &err),
                  OPTIM_EINVAL, &err);
    assert_contains(err.msg, "reduction = 7");
    bad = optim_loss_binary_crossentropy(0);
    bad.label_smoothing = 1.5;
    assert_status(optim_loss_call(&bad, t, &zt, optim_tape_const(t, &pt), NULL, &out, &err),
                  OPTIM_EINVAL, &err);
    assert_contains(err.msg, "label_smoothing");
    bad = optim_loss_mean_squared_error();
    bad.label_smoothing = 0.1;
    assert_status(optim_loss_call(&bad, t, &zt, optim_tape_const(t, &pt), NULL, &out, &err),
                  OPTIM_EINVAL, &err);
    bad = optim_loss_mean_squared_error();
    bad.kind = (optim_loss_kind)0;
    assert_status(optim_loss_call(&bad, t, &zt, optim_tape_const(t, &pt), NULL, &out, &err),
                  OPTIM_EINVAL, &err);
    bad = optim_loss_mean_squared_error();
    bad.size = 3;
    assert_status(optim_loss_call(&bad, t, &zt, optim_tape_const(t, &pt), NULL, &out, &err),
                  OPTIM_EVERSION, &err);
    assert_status(optim_loss_call(&mse, t, &zt, NULL, NULL, &out, &err), OPTIM_EINVAL, &err);
    assert_status(optim_loss_call(&mse, NULL, &zt, NULL, NULL, &out, &err), OPTIM_EINVAL, &err);
    assert_status(optim_loss_call(&mse, t, NULL, optim_tape_const(t, &pt), NULL, &out, &err),
                  OPTIM_EINVAL, &err);
    optim_tape_destroy(t);
}

/* ---- metrics ------------------------------------------------------------------------ */

OPTIM_TEST(test_accuracy)
{
    float pred[12] = {0.1f, 0.7f, 0.2f, 0.5f, 0.2f, 0.3f, 0.3f, 0.3f, 0.4f, 0.0f, 0.9f, 0.1f};
    optim_tensor pt = optim_tensor_make(OPTIM_F32, pred, 2, (int64_t[]){4, 3});
    int64_t lab[4] = {1, 0, 0, 1};
    optim_tensor lt = optim_tensor_make(OPTIM_I64, lab, 1, (int64_t[]){4});
    optim_tensor lt1 = optim_tensor_make(OPTIM_I64, lab, 2, (int64_t[]){4, 1});
    double onehot[12] = {0, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 1};
    optim_tensor oh = optim_tensor_make(OPTIM_F64, onehot, 2, (int64_t[]){4, 3});
    assert_eq(optim_metric_resolve(OPTIM_METRIC_ACCURACY, &lt, &pt),
              OPTIM_METRIC_SPARSE_CATEGORICAL_ACCURACY);
    assert_eq(optim_metric_resolve(OPTIM_METRIC_ACCURACY, &lt1, &pt),
              OPTIM_METRIC_SPARSE_CATEGORICAL_ACCURACY);
    assert_eq(optim_metric_resolve(OPTIM_METRIC_ACCURACY, &oh, &pt),
              OPTIM_METRIC_CATEGORICAL_ACCURACY);
    double total = 0, count = 0;
    optim_error err;
    /* argmax: 1, 0, 2 (first of ties would be 0: 0.3,0.3,0.4 -> 2), 1 */
    assert_ok(optim_accuracy_update(OPTIM_METRIC_ACCURACY, &lt, &pt, &total, &count, &err), &err);
    assert_close(total / count, 0.75, 0, 1e-15);
    assert_ok(optim_accuracy_update(OPTIM_METRIC_ACCURACY, &lt1, &pt, &total, &count, &err), &err);
    assert_close(count, 8, 0, 0);
    total = count = 0;
    /* argmax of y_true: 1, 0, 0, 2; of y_pred: 1, 0, 2, 1 */
    assert_ok(
        optim_accuracy_update(OPTIM_METRIC_CATEGORICAL_ACCURACY, &oh, &pt, &total, &count, &err),
        &err);
    assert_close(total / count, 0.5, 0, 1e-15);
    /* ties: argmax takes the first */
    float tie[3] = {0.5f, 0.5f, 0.1f};
    int64_t l0 = 0;
    optim_tensor tt = optim_tensor_make(OPTIM_F32, tie, 2, (int64_t[]){1, 3});
    optim_tensor l0t = optim_tensor_make(OPTIM_I64, &l0, 1, (int64_t[]){1});
    total = count = 0;
    assert_ok(optim_accuracy_update(OPTIM_METRIC_SPARSE_CATEGORICAL_ACCURACY, &l0t, &tt, &total,
                                    &count, &err),
              &err);
    assert_close(total, 1, 0, 0);
    /* binary: y_pred > 0.5; [4, 1] against [4]; 0.5 is not above */
    float bp[4] = {0.2f, 0.5f, 0.51f, 0.9f};
    double bz[4] = {0, 1, 1, 0};
    optim_tensor bpt = optim_tensor_make(OPTIM_F32, bp, 2, (int64_t[]){4, 1});
    optim_tensor bzt = optim_tensor_make(OPTIM_F64, bz, 1, (int64_t[]){4});
    assert_eq(optim_metric_resolve(OPTIM_METRIC_ACCURACY, &bzt, &bpt),
              OPTIM_METRIC_BINARY_ACCURACY);
    total = count = 0;
    assert_ok(optim_accuracy_update(OPTIM_METRIC_ACCURACY, &bzt, &bpt, &total, &count, &err), &err);
    assert_close(total / count, 0.5, 0, 1e-15);
    /* multi-label binary accuracy: per-sample means, then their mean */
    float mp[6] = {0.9f, 0.9f, 0.1f, 0.1f, 0.1f, 0.1f};
    double mz[6] = {1, 0, 0, 0, 0, 0};
    optim_tensor mpt = optim_tensor_make(OPTIM_F32, mp, 2, (int64_t[]){2, 3});
    optim_tensor mzt = optim_tensor_make(OPTIM_F64, mz, 2, (int64_t[]){2, 3});
    total = count = 0;
    assert_ok(optim_accuracy_update(OPTIM_METRIC_BINARY_ACCURACY, &mzt, &mpt, &total, &count, &err),
              &err);
    assert_close(total, 2.0 / 3 + 1, 1e-15, 0);
    assert_close(count, 2, 0, 0);
    /* refusals */
    optim_tensor bad = optim_tensor_make(OPTIM_I64, lab, 1, (int64_t[]){3});
    assert_status(optim_accuracy_update(OPTIM_METRIC_ACCURACY, &bad, &pt, &total, &count, &err),
                  OPTIM_ESHAPE, &err);
    assert_contains(err.msg, "sparse_categorical_accuracy");
    assert_status(optim_accuracy_update(OPTIM_METRIC_NONE, &lt, &pt, &total, &count, &err),
                  OPTIM_EINVAL, &err);
    assert_status(optim_accuracy_update(OPTIM_METRIC_ACCURACY, NULL, &pt, &total, &count, &err),
                  OPTIM_EINVAL, &err);
}

/* ---- Embedding: sparse gradients reach the optimizer -------------------------------- */

typedef struct grad_seen {
    int calls;
    optim_grad_kind emb_kind, kernel_kind;
    int64_t emb_rows;
    int32_t emb_values_rank;
    int64_t emb_values_shape[2];
    const optim_var *emb;
} grad_seen;

static int record_grads(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    grad_seen *g = user;
    g->calls++;
    for (size_t i = 0; i < n; i++) {
        if (pairs[i].var == g->emb) {
            g->emb_kind = pairs[i].grad.kind;
            g->emb_rows = pairs[i].grad.sparse.n;
            g->emb_values_rank = pairs[i].grad.sparse.values.rank;
            g->emb_values_shape[0] = pairs[i].grad.sparse.values.shape[0];
            g->emb_values_shape[1] = pairs[i].grad.sparse.values.shape[1];
        } else if (strstr(optim_var_name(pairs[i].var), "kernel")) {
            g->kernel_kind = pairs[i].grad.kind;
        }
    }
    return 0;
}

OPTIM_TEST(test_embedding_sparse_gradients)
{
    optim_error err;
    optim_layer *emb, *fl;
    optim_embedding_options eo = optim_embedding_defaults(10, 4);
    assert_ok(optim_embedding_create(&emb, &eo, &err), &err);
    assert_ok(optim_flatten_create(&fl, NULL, &err), &err);
    optim_layer *ls[3] = {emb, fl, dense(1, OPTIM_ACT_LINEAR, OPTIM_SEED_AUTO)};
    optim_model *m = model_of(OPTIM_F32, 3, ls, 3);
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1}}");
    grad_seen seen = {0};
    assert_ok(optim_add_gradient_transformer(opt, record_grads, &seen), opt);
    optim_loss mse = optim_loss_mean_squared_error();
    assert_ok(optim_model_compile(m, opt, &mse, OPTIM_METRIC_NONE), m);
    /* ids [6, 3] use only rows 0..5 */
    int32_t ids[18];
    for (int i = 0; i < 18; i++) ids[i] = (i * 7) % 6;
    float y[6] = {1, -1, 0.5f, 0, 2, -0.5f};
    optim_tensor xt = optim_tensor_make(OPTIM_I32, ids, 2, (int64_t[]){6, 3});
    optim_tensor yt = optim_tensor_make(OPTIM_F32, y, 2, (int64_t[]){6, 1});
    assert_ok(optim_model_build(m, 1, (int64_t[]){3}), m);
    optim_var *vars[3];
    assert_eq(optim_model_trainable_variables(m, vars, 3), 3);
    assert_string_equal(optim_var_name(vars[0]), "embedding/embeddings");
    assert_eq(optim_var_shape(vars[0])[0], 10);
    for (int i = 0; i < 40; i++) assert_le(fabs(optim_var_get(vars[0], i)), 0.05);
    seen.emb = vars[0];
    float before[40];
    memcpy(before, optim_var_cdata(vars[0]), sizeof before);
    optim_fit_options fo = optim_fit_defaults();
    fo.batch_size = 6;
    fo.shuffle = 0;
    assert_ok(optim_model_fit(m, &xt, &yt, &fo, NULL), m);
    assert_int_equal(seen.calls, 1);
    assert_int_equal(seen.emb_kind, OPTIM_GRAD_SPARSE);
    assert_int_equal(seen.kernel_kind, OPTIM_GRAD_DENSE);
    assert_int_equal(seen.emb_rows, 18);
    assert_int_equal(seen.emb_values_rank, 2);
    assert_int_equal(seen.emb_values_shape[0], 18);
    assert_int_equal(seen.emb_values_shape[1], 4);
    /* rows never looked up are untouched; looked-up rows moved */
    const float *after = optim_var_cdata(vars[0]);
    for (int r = 6; r < 10; r++)
        for (int j = 0; j < 4; j++) assert_eq(after[r * 4 + j], before[r * 4 + j]);
    int moved = 0;
    for (int i = 0; i < 24; i++) moved += after[i] != before[i];
    assert_gt(moved, 12);
    /* ids out of range are refused before any step */
    ids[5] = 10;
    assert_status(optim_model_fit(m, &xt, &yt, &fo, NULL), OPTIM_ERANGE, m);
    assert_non_null(strstr(optim_model_errmsg(m), "is not in [0, 10)"));
    assert_eq(optim_iterations(opt), 1);
    optim_model_destroy(m);
    optim_destroy(opt);
}

/* ---- fit ------------------------------------------------------------------------------- */

enum { NS = 200 };

/* Points in [-1, 1]^2, label 1 inside the circle r < 0.7. */
static void circle_data(float *x, float *y, int n, uint64_t seed)
{
    for (int i = 0; i < n; i++) {
        x[2 * i] = (float)(2 * lcg_uniform(&seed) - 1);
        x[2 * i + 1] = (float)(2 * lcg_uniform(&seed) - 1);
        y[i] = x[2 * i] * x[2 * i] + x[2 * i + 1] * x[2 * i + 1] < 0.49f ? 1.0f : 0.0f;
    }
}

static optim_model *circle_model(uint64_t seed, optim_optimizer *opt)
{
    optim_layer *ls[2] = {dense(16, OPTIM_ACT_TANH, OPTIM_SEED_AUTO),
                          dense(1, OPTIM_ACT_SIGMOID, OPTIM_SEED_AUTO)};
    optim_model *m = model_of(OPTIM_F32, seed, ls, 2);
    optim_loss bce = optim_loss_binary_crossentropy(0);
    assert_ok(optim_model_compile(m, opt, &bce, OPTIM_METRIC_ACCURACY), m);
    return m;
}

OPTIM_TEST(test_fit_converges)
{
    static float x[NS * 2], y[NS], vx[NS], vy[NS / 2];
    circle_data(x, y, NS, 1);
    circle_data(vx, vy, NS / 2, 2);
    optim_tensor xt = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){NS, 2});
    optim_tensor yt = optim_tensor_make(OPTIM_F32, y, 2, (int64_t[]){NS, 1});
    optim_tensor vxt = optim_tensor_make(OPTIM_F32, vx, 2, (int64_t[]){NS / 2, 2});
    optim_tensor vyt = optim_tensor_make(OPTIM_F32, vy, 1, (int64_t[]){NS / 2});
    float *w[2] = {NULL, NULL};
    for (int run = 0; run < 2; run++) {
        optim_optimizer *opt =
            optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.05}}");
        optim_model *m = circle_model(11, opt);
        optim_fit_options fo = optim_fit_defaults();
        fo.epochs = 60;
        fo.batch_size = 16;
        fo.seed = 4;
        fo.validation_x = &vxt;
        fo.validation_y = &vyt;
        optim_history h;
        assert_ok(optim_model_fit(m, &xt, &yt, &fo, &h), m);
        assert_int_equal(h.epochs, 60);
        assert_eq(optim_iterations(opt), 60 * 13);
        double l0, l1, acc, vacc, vloss;
        assert_ok(optim_logs_get(&h.logs[0], "loss", &l0), NULL);
        assert_ok(optim_logs_get(&h.logs[59], "loss", &l1), NULL);
        assert_ok(optim_logs_get(&h.logs[59], "accuracy", &acc), NULL);
        assert_ok(optim_logs_get(&h.logs[59], "val_accuracy", &vacc), NULL);
        assert_ok(optim_logs_get(&h.logs[59], "val_loss", &vloss), NULL);
        assert_int_equal(h.logs[0].n, 4);
        assert_int_equal(h.epoch[59], 59);
        assert_lt(l1, l0 / 3);
        assert_gt(acc, 0.93);
        assert_gt(vacc, 0.88);
        /* val_loss is evaluate() on the validation data after the epoch */
        optim_logs ev;
        assert_ok(optim_model_evaluate(m, &vxt, &vyt, 7, NULL, &ev), m);
        double el, ea;
        assert_ok(optim_logs_get(&ev, "loss", &el), NULL);
        assert_ok(optim_logs_get(&ev, "accuracy", &ea), NULL);
        assert_close(el, vloss, 1e-5, 1e-7);
        assert_close(ea, vacc, 0, 1e-12);
        /* evaluate's loss is the mean over all samples, whatever the batch size */
        optim_tape *t = tape();
        optim_node *pred, *loss;
        optim_error err;
        assert_ok(optim_model_call(m, t, &vxt, 0, &pred), m);
        optim_loss bce = optim_loss_binary_crossentropy(0);
        assert_ok(optim_loss_call(&bce, t, &vyt, pred, NULL, &loss, &err), &err);
        assert_close(optim_node_scalar(loss), el, 1e-5, 1e-7);
        /* predict = the model's outputs */
        optim_tensor p;
        assert_ok(optim_model_predict(m, &vxt, 32, &p), m);
        assert_int_equal(p.rank, 2);
        assert_int_equal(p.shape[0], NS / 2);
        assert_int_equal(p.shape[1], 1);
        for (int i = 0; i < NS / 2; i++)
            assert_close(val(&p, i), val(optim_node_value(pred), i), 1e-6, 1e-7);
        optim_free(p.data);
        optim_tape_destroy(t);
        optim_history_free(&h);
        assert_null(h.logs);
        optim_var *k;
        optim_model_trainable_variables(m, &k, 1);
        w[run] = malloc(32 * sizeof(float));
        memcpy(w[run], optim_var_cdata(k), 32 * sizeof(float));
        optim_model_destroy(m);
        optim_destroy(opt);
    }
    /* seeded: two runs give the same weights, bit for bit */
    assert_memory_equal(w[0], w[1], 32 * sizeof(float));
    free(w[0]);
    free(w[1]);
}

OPTIM_TEST(test_fit_f64_and_progress_output)
{
    static double x[NS * 2], y[NS];
    float xf[NS * 2], yf[NS];
    circle_data(xf, yf, NS, 3);
    for (int i = 0; i < NS * 2; i++) x[i] = xf[i];
    for (int i = 0; i < NS; i++) y[i] = yf[i];
    optim_layer *ls[2] = {dense(8, OPTIM_ACT_RELU, OPTIM_SEED_AUTO),
                          dense(2, OPTIM_ACT_SOFTMAX, OPTIM_SEED_AUTO)};
    optim_model *m = model_of(OPTIM_F64, 1, ls, 2);
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.02}}");
    optim_loss sc = optim_loss_sparse_categorical_crossentropy(0);
    assert_ok(optim_model_compile(m, opt, &sc, OPTIM_METRIC_ACCURACY), m);
    optim_tensor xt = optim_tensor_make(OPTIM_F64, x, 2, (int64_t[]){NS, 2});
    optim_tensor yt = optim_tensor_make(OPTIM_F64, y, 1, (int64_t[]){NS});
    for (int verbose = 1; verbose <= 2; verbose++) {
        FILE *f = tmpfile();
        optim_fit_options fo = optim_fit_defaults();
        fo.epochs = 2;
        fo.batch_size = 64;
        fo.out = f;
        fo.verbose =
            verbose == 2 ? OPTIM_VERBOSE_AUTO : 1; /* a file is no terminal: AUTO is a line */
        assert_ok(optim_model_fit(m, &xt, &yt, &fo, NULL), m);
        char buf[8192] = {0};
        rewind(f);
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        buf[got] = 0;
        fclose(f);
        assert_contains(buf, "Epoch 1/2\n");
        assert_contains(buf, "Epoch 2/2\n");
        assert_contains(buf, " - loss: ");
        assert_contains(buf, " - accuracy: ");
        if (verbose == 1) {
            assert_contains(buf, "4/4 [==============================] - ");
            assert_contains(buf, "\r");
            assert_contains(buf, "/step");
        } else {
            assert_contains(buf, "4/4 - ");
            assert_contains(buf, "/epoch - ");
            assert_null(strstr(buf, "\r"));
            assert_null(strstr(buf, "["));
        }
    }
    /* evaluate prints one line to a file */
    FILE *f = tmpfile();
    optim_logs ev;
    assert_ok(optim_model_evaluate(m, &xt, &yt, 50, f, &ev), m);
    char buf[1024] = {0};
    rewind(f);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = 0;
    assert_contains(buf, "4/4 - ");
    /* evaluate's accuracy = argmax of predict's outputs against the labels */
    double acc;
    assert_ok(optim_logs_get(&ev, "accuracy", &acc), NULL);
    optim_tensor p;
    assert_ok(optim_model_predict(m, &xt, 33, &p), m);
    assert_int_equal(p.dtype, OPTIM_F64);
    int right = 0;
    for (int i = 0; i < NS; i++) right += (val(&p, 2 * i + 1) > val(&p, 2 * i)) == (y[i] == 1);
    optim_free(p.data);
    assert_close(acc, right / (double)NS, 0, 1e-12);
    /* silent without a stream */
    optim_fit_options fo = optim_fit_defaults();
    fo.verbose = 1;
    assert_ok(optim_model_fit(m, &xt, &yt, &fo, NULL), m);
    optim_model_destroy(m);
    optim_destroy(opt);
}

/* A kernel constraint travels with the variable: the optimizer applies it
 * after every step (NonNeg: no negative weight survives a step). */
OPTIM_TEST(test_dense_kernel_constraint)
{
    static float x[NS * 2], y[NS];
    circle_data(x, y, NS, 12);
    optim_constraint nn = optim_constraint_non_neg();
    optim_dense_options o = optim_dense_defaults(8);
    o.activation = OPTIM_ACT_TANH;
    o.kernel_constraint = &nn;
    optim_layer *l;
    optim_error err;
    assert_ok(optim_dense_create(&l, &o, &err), &err);
    optim_layer *ls[2] = {l, dense(1, OPTIM_ACT_SIGMOID, OPTIM_SEED_AUTO)};
    optim_model *m = model_of(OPTIM_F32, 4, ls, 2);
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.5}}");
    optim_loss bce = optim_loss_binary_crossentropy(0);
    assert_ok(optim_model_compile(m, opt, &bce, OPTIM_METRIC_NONE), m);
    assert_ok(optim_model_build(m, 1, (int64_t[]){2}), m);
    optim_var *vars[4];
    assert_eq(optim_model_trainable_variables(m, vars, 4), 4);
    assert_non_null(optim_var_constraint(vars[0]));
    assert_eq(optim_var_constraint(vars[0])->kind, OPTIM_CONSTRAINT_NON_NEG);
    assert_null(optim_var_constraint(vars[1]));
    int negative = 0;
    for (int i = 0; i < 16; i++) negative += optim_var_get(vars[0], i) < 0;
    assert_gt(negative, 0); /* glorot draws both signs; the constraint acts on updates */
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = 2;
    fo.batch_size = 50;
    optim_tensor xt = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){NS, 2});
    optim_tensor yt = optim_tensor_make(OPTIM_F32, y, 1, (int64_t[]){NS});
    assert_ok(optim_model_fit(m, &xt, &yt, &fo, NULL), m);
    for (int i = 0; i < 16; i++) assert_ge(optim_var_get(vars[0], i), 0);
    optim_model_destroy(m);
    optim_destroy(opt);
}

/* ---- callbacks ------------------------------------------------------------------------- */

typedef struct trace {
    char log[4096];
    int batches, stop_at_batch;
    double last_batch_loss;
} trace;

static void trace_add(trace *t, const char *fmt, long long v)
{
    size_t n = strlen(t->log);
    snprintf(t->log + n, sizeof t->log - n, fmt, v);
}

static int tr_train_begin(void *u, optim_model *m, optim_logs *logs, optim_error *err)
{
    trace_add(u, "TB%lld ", (long long)logs->n);
    return 0;
}
static int tr_epoch_begin(void *u, optim_model *m, int64_t e, optim_logs *logs, optim_error *err)
{
    trace_add(u, "EB%lld ", e);
    return 0;
}
static int tr_batch_begin(void *u, optim_model *m, int64_t b, optim_logs *logs, optim_error *err)
{
    trace_add(u, "bb%lld ", b);
    return 0;
}
static int tr_batch_end(void *u, optim_model *m, int64_t b, optim_logs *logs, optim_error *err)
{
    trace *t = u;
    trace_add(u, "be%lld ", b);
    t->batches++;
    assert_ok(optim_logs_get(logs, "loss", &t->last_batch_loss), NULL);
    if (t->stop_at_batch >= 0 && t->batches == t->stop_at_batch) optim_model_stop_training(m);
    return 0;
}
static int tr_epoch_end(void *u, optim_model *m, int64_t e, optim_logs *logs, optim_error *err)
{
    trace_add(u, "EE%lld ", e);
    return 0;
}
static int tr_train_end(void *u, optim_model *m, optim_logs *logs, optim_error *err)
{
    trace_add(u, "TE%lld", (long long)logs->n);
    return 0;
}
static int tr_fail(void *u, optim_model *m, int64_t e, optim_logs *logs, optim_error *err)
{
    snprintf(err->msg, sizeof err->msg, "my callback refuses epoch %lld", (long long)e);
    return OPTIM_EINVAL;
}

static optim_callback *trace_cb(trace *t)
{
    optim_callback_hooks h = {sizeof h,       tr_train_begin, tr_epoch_begin,
                              tr_batch_begin, tr_batch_end,   tr_epoch_end,
                              tr_train_end,   NULL,           NULL};
    optim_callback *cb;
    optim_error err;
    assert_ok(optim_callback_create(&cb, &h, t, &err), &err);
    return cb;
}

OPTIM_TEST(test_callback_order_and_stop)
{
    static float x[10 * 2], y[10];
    circle_data(x, y, 10, 5);
    optim_tensor xt = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){10, 2});
    optim_tensor yt = optim_tensor_make(OPTIM_F32, y, 1, (int64_t[]){10});
    optim_optimizer *opt = optim_test_make("\"sgd\"");
    optim_model *m = circle_model(1, opt);
    trace tr = {.stop_at_batch = -1};
    optim_callback *cb = trace_cb(&tr);
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = 2;
    fo.batch_size = 4;
    fo.callbacks = &cb;
    fo.n_callbacks = 1;
    assert_ok(optim_model_fit(m, &xt, &yt, &fo, NULL), m);
    assert_string_equal(tr.log,
                        "TB2 EB0 bb0 be0 bb1 be1 bb2 be2 EE0 EB1 bb0 be0 bb1 be1 bb2 be2 EE1 TE2");
    /* stop_training from a batch end stops after that batch */
    memset(&tr, 0, sizeof tr);
    tr.stop_at_batch = 2;
    optim_history h;
    int64_t it = optim_iterations(opt);
    assert_ok(optim_model_fit(m, &xt, &yt, &fo, &h), m);
    assert_string_equal(tr.log, "TB2 EB0 bb0 be0 bb1 be1 EE0 TE2");
    assert_int_equal(h.epochs, 1);
    assert_eq(optim_iterations(opt) - it, 2);
    optim_history_free(&h);
    /* a failing hook stops fit with its message */
    optim_callback_hooks fh = {sizeof fh, NULL, NULL, NULL, NULL, tr_fail, NULL, NULL, NULL};
    optim_callback *fail;
    optim_error err;
    assert_ok(optim_callback_create(&fail, &fh, NULL, &err), &err);
    fo.callbacks = &fail;
    assert_status(optim_model_fit(m, &xt, &yt, &fo, NULL), OPTIM_EINVAL, m);
    assert_string_equal(optim_model_errmsg(m), "my callback refuses epoch 0");
    optim_callback_destroy(fail);
    optim_callback_destroy(cb);
    optim_model_destroy(m);
    optim_destroy(opt);
}

OPTIM_TEST(test_early_stopping)
{
    static float x[NS * 2], y[NS];
    circle_data(x, y, NS, 6);
    optim_tensor xt = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){NS, 2});
    optim_tensor yt = optim_tensor_make(OPTIM_F32, y, 1, (int64_t[]){NS});
    optim_error err;
    /* learning rate 0: the loss never improves; patience 2 stops at epoch 2 */
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.0}}");
    optim_model *m = circle_model(1, opt);
    optim_early_stopping_options eo = optim_early_stopping_defaults();
    eo.monitor = "loss";
    eo.patience = 2;
    FILE *f = tmpfile();
    eo.out = f;
    optim_callback *es;
    assert_ok(optim_early_stopping_create(&es, &eo, &err), &err);
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = 20;
    fo.batch_size = 50;
    fo.shuffle = 0;
    fo.callbacks = &es;
    fo.n_callbacks = 1;
    optim_history h;
    assert_ok(optim_model_fit(m, &xt, &yt, &fo, &h), m);
    assert_int_equal(h.epochs, 3);
    assert_eq(optim_early_stopping_stopped_epoch(es), 2);
    int64_t be;
    double best = optim_early_stopping_best(es, &be);
    assert_int_equal(be, 0);
    double l0;
    optim_logs_get(&h.logs[0], "loss", &l0);
    assert_eq(best, l0);
    char buf[256] = {0};
    rewind(f);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    buf[got] = 0;
    fclose(f);
    assert_string_equal(buf, "Epoch 3: early stopping\n");
    optim_history_free(&h);
    optim_callback_destroy(es);
    optim_model_destroy(m);
    optim_destroy(opt);

    /* min_delta larger than any gain: no epoch counts as an improvement */
    opt = optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01}}");
    m = circle_model(1, opt);
    eo = optim_early_stopping_defaults();
    eo.monitor = "accuracy";
    eo.min_delta = -0.5; /* its absolute value is used */
    eo.patience = 1;
    assert_ok(optim_early_stopping_create(&es, &eo, &err), &err);
    assert_ok(optim_model_fit(m, &xt, &yt, &fo, &h), m);
    assert_int_equal(h.epochs, 2);
    optim_history_free(&h);
    optim_callback_destroy(es);
    optim_model_destroy(m);
    optim_destroy(opt);

    /* a baseline never reached keeps `wait` counting from the first epoch:
     * patience 3 stops at epoch 2 instead of 3 (learning rate 0 again) */
    for (int with_baseline = 0; with_baseline < 2; with_baseline++) {
        opt = optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.0}}");
        m = circle_model(1, opt);
        eo = optim_early_stopping_defaults();
        eo.monitor = "loss";
        eo.patience = 3;
        if (with_baseline) eo.baseline = -1.0;
        assert_ok(optim_early_stopping_create(&es, &eo, &err), &err);
        assert_ok(optim_model_fit(m, &xt, &yt, &fo, &h), m);
        assert_int_equal(h.epochs, with_baseline ? 3 : 4);
        optim_history_free(&h);
        optim_callback_destroy(es);
        optim_model_destroy(m);
        optim_destroy(opt);
    }
}

typedef struct snap {
    float w[8][32];
    int n;
    optim_var *k;
} snap;

static int snap_epoch_end(void *u, optim_model *m, int64_t e, optim_logs *logs, optim_error *err)
{
    snap *s = u;
    if (s->n < 8) memcpy(s->w[s->n++], optim_var_cdata(s->k), sizeof s->w[0]);
    return 0;
}

OPTIM_TEST(test_early_stopping_restores_best_weights)
{
    static float x[NS * 2], y[NS];
    circle_data(x, y, NS, 7);
    optim_tensor xt = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){NS, 2});
    optim_tensor yt = optim_tensor_make(OPTIM_F32, y, 1, (int64_t[]){NS});
    optim_error err;
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.02}}");
    optim_model *m = circle_model(2, opt);
    assert_ok(optim_model_build(m, 1, (int64_t[]){2}), m);
    snap sn = {.n = 0};
    optim_model_trainable_variables(m, &sn.k, 1);
    optim_callback_hooks sh = {sizeof sh, NULL, NULL, NULL, NULL, snap_epoch_end, NULL, NULL, NULL};
    optim_callback *cbs[2];
    assert_ok(optim_callback_create(&cbs[0], &sh, &sn, &err), &err);
    /* "maximise the loss": epoch 0 (the highest loss) stays best */
    optim_early_stopping_options eo = optim_early_stopping_defaults();
    eo.monitor = "loss";
    eo.mode = OPTIM_MODE_MAX;
    eo.patience = 3;
    eo.restore_best_weights = 1;
    assert_ok(optim_early_stopping_create(&cbs[1], &eo, &err), &err);
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = 10;
    fo.batch_size = 20;
    fo.callbacks = cbs;
    fo.n_callbacks = 2;
    optim_history h;
    assert_ok(optim_model_fit(m, &xt, &yt, &fo, &h), m);
    assert_int_equal(h.epochs, 4);
    assert_eq(optim_early_stopping_stopped_epoch(cbs[1]), 3);
    assert_memory_equal(optim_var_cdata(sn.k), sn.w[0], sizeof sn.w[0]);
    assert_memory_not_equal(sn.w[3], sn.w[0], sizeof sn.w[0]);
    optim_history_free(&h);
    optim_callback_destroy(cbs[0]);
    optim_callback_destroy(cbs[1]);
    optim_model_destroy(m);
    optim_destroy(opt);
}

static double halve(void *user, int64_t epoch, double lr)
{
    int *calls = user;
    (*calls)++;
    return epoch == 0 ? 0.1 : lr * 0.5;
}

static double nan_schedule(void *user, int64_t epoch, double lr) { return epoch == 1 ? NAN : lr; }

OPTIM_TEST(test_lr_scheduler)
{
    static float x[40 * 2], y[40];
    circle_data(x, y, 40, 8);
    optim_tensor xt = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){40, 2});
    optim_tensor yt = optim_tensor_make(OPTIM_F32, y, 1, (int64_t[]){40});
    optim_error err;
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.7}}");
    optim_model *m = circle_model(3, opt);
    int calls = 0;
    optim_callback *cb;
    FILE *f = tmpfile();
    assert_ok(optim_lr_scheduler_create(&cb, halve, &calls, f, &err), &err);
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = 3;
    fo.batch_size = 40;
    fo.callbacks = &cb;
    fo.n_callbacks = 1;
    optim_history h;
    assert_ok(optim_model_fit(m, &xt, &yt, &fo, &h), m);
    assert_int_equal(calls, 3);
    double lr;
    assert_ok(optim_get_hyper(opt, "learning_rate", &lr), opt);
    assert_close(lr, 0.025, 1e-15, 0);
    const double expect[3] = {0.1, 0.05, 0.025};
    for (int e = 0; e < 3; e++) {
        double v;
        assert_ok(optim_logs_get(&h.logs[e], "learning_rate", &v), NULL);
        assert_close(v, expect[e], 1e-15, 0);
    }
    char buf[512] = {0};
    rewind(f);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    buf[got] = 0;
    fclose(f);
    assert_contains(buf, "\nEpoch 1: LearningRateScheduler setting learning rate to 0.1.\n");
    assert_contains(buf, "\nEpoch 3: LearningRateScheduler setting learning rate to 0.025.\n");
    optim_history_free(&h);
    optim_callback_destroy(cb);

    /* a non-finite value stops fit */
    assert_ok(optim_lr_scheduler_create(&cb, nan_schedule, NULL, NULL, &err), &err);
    fo.callbacks = &cb;
    assert_status(optim_model_fit(m, &xt, &yt, &fo, NULL), OPTIM_EINVAL, m);
    assert_contains(optim_model_errmsg(m), "should be a finite float");
    optim_callback_destroy(cb);
    optim_model_destroy(m);
    optim_destroy(opt);

    /* a learning rate given by a schedule cannot be set (Keras 3) */
    opt = optim_test_make(
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": {\"class_name\": \"ExponentialDecay\", "
        "\"config\": {\"initial_learning_rate\": 0.1, \"decay_steps\": 10, \"decay_rate\": 0.9}}}}");
    m = circle_model(3, opt);
    assert_ok(optim_lr_scheduler_create(&cb, halve, &calls, NULL, &err), &err);
    assert_status(optim_model_fit(m, &xt, &yt, &fo, NULL), OPTIM_ESTATE, m);
    assert_contains(optim_model_errmsg(m), "not settable");
    assert_eq(optim_iterations(opt), 0);
    assert_false(optim_model_built(m));
    optim_callback_destroy(cb);
    assert_status(optim_lr_scheduler_create(&cb, NULL, NULL, NULL, &err), OPTIM_EINVAL, &err);
    optim_model_destroy(m);
    optim_destroy(opt);
}

/* ---- refusals ------------------------------------------------------------------------- */

OPTIM_TEST(test_bad_inputs)
{
    optim_error err;
    optim_layer *l;
    optim_dense_options o = optim_dense_defaults(0);
    assert_status(optim_dense_create(&l, &o, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "units=0");
    assert_null(l);
    o = optim_dense_defaults(3);
    o.activation = (optim_activation)42;
    assert_status(optim_dense_create(&l, &o, &err), OPTIM_EINVAL, &err);
    o = optim_dense_defaults(3);
    o.use_bias = 2;
    assert_status(optim_dense_create(&l, &o, &err), OPTIM_EINVAL, &err);
    o = optim_dense_defaults(3);
    o.seed = -5;
    assert_status(optim_dense_create(&l, &o, &err), OPTIM_EINVAL, &err);
    o = optim_dense_defaults(3);
    o.name = "a/b";
    assert_status(optim_dense_create(&l, &o, &err), OPTIM_EINVAL, &err);
    o = optim_dense_defaults(3);
    optim_constraint c = optim_constraint_max_norm(2.0, 5);
    o.kernel_constraint = &c;
    assert_status(optim_dense_create(&l, &o, &err), OPTIM_ERANGE, &err);
    assert_contains(err.msg, "kernel_constraint");
    o = optim_dense_defaults(3);
    o.size = 4;
    assert_status(optim_dense_create(&l, &o, &err), OPTIM_EVERSION, &err);
    assert_status(optim_dense_create(&l, NULL, &err), OPTIM_EINVAL, &err);
    optim_embedding_options eo = optim_embedding_defaults(0, 4);
    assert_status(optim_embedding_create(&l, &eo, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "input_dim = 0");
    assert_status(optim_dropout_create(&l, 1.0, 0, NULL, &err), OPTIM_EINVAL, &err);
    assert_status(optim_dropout_create(&l, NAN, 0, NULL, &err), OPTIM_EINVAL, &err);
    optim_sequential_options so = optim_sequential_defaults();
    so.dtype = OPTIM_I32;
    optim_model *m;
    assert_status(optim_sequential_create(&m, &so, &err), OPTIM_EDTYPE, &err);
    assert_null(m);
    optim_early_stopping_options es = optim_early_stopping_defaults();
    optim_callback *cb;
    es.patience = -1;
    assert_status(optim_early_stopping_create(&cb, &es, &err), OPTIM_EINVAL, &err);
    es = optim_early_stopping_defaults();
    es.monitor = "";
    assert_status(optim_early_stopping_create(&cb, &es, &err), OPTIM_EINVAL, &err);
    es = optim_early_stopping_defaults();
    es.mode = (optim_monitor_mode)9;
    assert_status(optim_early_stopping_create(&cb, &es, &err), OPTIM_EINVAL, &err);
    optim_callback_hooks h = {3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    assert_status(optim_callback_create(&cb, &h, NULL, &err), OPTIM_EVERSION, &err);
    optim_logs logs = {0};
    assert_status(optim_logs_get(&logs, "loss", NULL), OPTIM_ENOTFOUND, NULL);
    assert_status(optim_logs_set(&logs, "", 1), OPTIM_EINVAL, NULL);
    for (int i = 0; i < OPTIM_LOGS_MAX; i++) {
        char name[16];
        snprintf(name, sizeof name, "m%d", i);
        assert_ok(optim_logs_set(&logs, name, i), NULL);
    }
    assert_status(optim_logs_set(&logs, "one_more", 1), OPTIM_ERANGE, NULL);
    assert_ok(optim_logs_set(&logs, "m3", 7), NULL);

    /* model-level refusals leave the model unbuilt and the optimizer untouched */
    static float x[20 * 2], y[20];
    circle_data(x, y, 20, 9);
    optim_tensor xt = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){20, 2});
    optim_tensor yt = optim_tensor_make(OPTIM_F32, y, 1, (int64_t[]){20});
    optim_tensor y19 = optim_tensor_make(OPTIM_F32, y, 1, (int64_t[]){19});
    optim_tensor ybad = optim_tensor_make(OPTIM_F32, y, 2, (int64_t[]){10, 2});
    optim_optimizer *opt = optim_test_make("\"adam\"");
    optim_layer *ls[2] = {dense(4, OPTIM_ACT_RELU, 0), dense(1, OPTIM_ACT_SIGMOID, 0)};
    m = model_of(OPTIM_F32, 0, ls, 2);
    optim_fit_options fo = optim_fit_defaults();
    assert_status(optim_model_fit(m, &xt, &yt, &fo, NULL), OPTIM_ESTATE, m);
    assert_contains(optim_model_errmsg(m), "compile");
    optim_loss loss = optim_loss_binary_crossentropy(0);
    loss.reduction = OPTIM_REDUCTION_NONE;
    assert_status(optim_model_compile(m, opt, &loss, OPTIM_METRIC_ACCURACY), OPTIM_EINVAL, m);
    assert_contains(optim_model_errmsg(m), "reduction NONE");
    loss.reduction = OPTIM_REDUCTION_SUM_OVER_BATCH_SIZE;
    assert_status(optim_model_compile(m, NULL, &loss, OPTIM_METRIC_ACCURACY), OPTIM_EINVAL, m);
    assert_status(optim_model_compile(m, opt, &loss, (optim_metric_kind)17), OPTIM_EINVAL, m);
    assert_ok(optim_model_compile(m, opt, &loss, OPTIM_METRIC_ACCURACY), m);
    fo.batch_size = 0;
    assert_status(optim_model_fit(m, &xt, &yt, &fo, NULL), OPTIM_EINVAL, m);
    assert_contains(optim_model_errmsg(m), "batch_size = 0");
    fo = optim_fit_defaults();
    fo.epochs = -1;
    assert_status(optim_model_fit(m, &xt, &yt, &fo, NULL), OPTIM_EINVAL, m);
    fo = optim_fit_defaults();
    fo.verbose = 5;
    assert_status(optim_model_fit(m, &xt, &yt, &fo, NULL), OPTIM_EINVAL, m);
    fo = optim_fit_defaults();
    fo.size = 1;
    assert_status(optim_model_fit(m, &xt, &yt, &fo, NULL), OPTIM_EVERSION, m);
    fo = optim_fit_defaults();
    assert_status(optim_model_fit(m, &xt, &y19, &fo, NULL), OPTIM_ESHAPE, m);
    assert_contains(optim_model_errmsg(m),
                    "Data cardinality is ambiguous: x sizes: 20, y sizes: 19");
    assert_status(optim_model_fit(m, &xt, &ybad, &fo, NULL), OPTIM_ESHAPE, m);
    assert_false(optim_model_built(m)); /* the probe build was undone */
    assert_status(optim_model_fit(m, &xt, NULL, &fo, NULL), OPTIM_EINVAL, m);
    fo.validation_x = &xt;
    assert_status(optim_model_fit(m, &xt, &yt, &fo, NULL), OPTIM_EINVAL, m);
    assert_contains(optim_model_errmsg(m), "validation_x and validation_y");
    fo = optim_fit_defaults();
    fo.n_callbacks = 1;
    assert_status(optim_model_fit(m, &xt, &yt, &fo, NULL), OPTIM_EINVAL, m);
    /* EarlyStopping on val_loss without validation data is refused up front */
    es = optim_early_stopping_defaults();
    assert_ok(optim_early_stopping_create(&cb, &es, &err), &err);
    fo = optim_fit_defaults();
    fo.callbacks = &cb;
    fo.n_callbacks = 1;
    assert_status(optim_model_fit(m, &xt, &yt, &fo, NULL), OPTIM_EINVAL, m);
    assert_contains(optim_model_errmsg(m), "monitor 'val_loss' is not among");
    optim_callback_destroy(cb);
    es.monitor = "auc";
    assert_ok(optim_early_stopping_create(&cb, &es, &err), &err);
    assert_status(optim_model_fit(m, &xt, &yt, &fo, NULL), OPTIM_EINVAL, m);
    assert_contains(optim_model_errmsg(m), "maximized or minimized");
    optim_callback_destroy(cb);
    assert_false(optim_model_built(m));
    assert_eq(optim_iterations(opt), 0);
    /* evaluate / predict refusals */
    optim_logs ev;
    assert_status(optim_model_evaluate(m, &xt, &yt, 0, NULL, &ev), OPTIM_EINVAL, m);
    assert_status(optim_model_evaluate(m, &xt, &ybad, 4, NULL, &ev), OPTIM_ESHAPE, m);
    assert_status(optim_model_evaluate(m, &xt, &yt, 4, NULL, NULL), OPTIM_EINVAL, m);
    optim_tensor p;
    assert_status(optim_model_predict(m, &xt, 0, &p), OPTIM_EINVAL, m);
    assert_status(optim_model_predict(m, NULL, 4, &p), OPTIM_EINVAL, m);
    optim_tensor x3 = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){10, 4});
    assert_ok(optim_model_predict(m, &x3, 4, &p), m); /* builds for 4 features */
    optim_free(p.data);
    assert_status(optim_model_predict(m, &xt, 4, &p), OPTIM_ESHAPE, m);
    assert_contains(optim_model_errmsg(m), "expected axis -1 of input shape to have value 4");
    optim_tape *t = tape();
    optim_node *out;
    assert_status(optim_model_call(m, NULL, &xt, 0, &out), OPTIM_EINVAL, m);
    assert_status(optim_model_call(m, t, NULL, 0, &out), OPTIM_EINVAL, m);
    assert_status(optim_model_call(NULL, t, &xt, 0, &out), OPTIM_EINVAL, t);
    assert_status(optim_model_summary(m, NULL), OPTIM_EINVAL, m);
    optim_tape_destroy(t);
    optim_model_destroy(m);
    optim_destroy(opt);
    optim_model_destroy(NULL);
    optim_layer_destroy(NULL);
    optim_callback_destroy(NULL);
    optim_history_free(NULL);
}

int main(void) { return optim_test_run(); }
