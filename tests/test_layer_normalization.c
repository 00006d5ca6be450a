/* The Activation and LayerNormalization layers: Keras's names for the
 * layers and their variables ("layer_normalization/gamma", ".../beta"),
 * initial values, options (center, scale, epsilon), values against a
 * double-precision reference written here, the refusals (epsilon < 0, an
 * axis other than the last, a changed last dim), and a training smoke test:
 * Dense + LayerNormalization + gelu + Dense on 2000 Fashion-MNIST images,
 * whose loss must fall. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "optim/idx.h"
#include "optim/nn.h"
#include "optim/optim.h"

static optim_layer *layer_norm(double eps, int center, int scale, const char *name)
{
    optim_layer_normalization_options o = optim_layer_normalization_defaults();
    o.epsilon = eps, o.center = center, o.scale = scale, o.name = name;
    optim_layer *l;
    optim_error err;
    assert_ok(optim_layer_normalization_create(&l, &o, &err), &err);
    return l;
}

static double elem(const optim_tensor *v, int64_t i)
{
    return v->dtype == OPTIM_F32 ? (double)((const float *)v->data)[i]
                                 : ((const double *)v->data)[i];
}

OPTIM_TEST(test_defaults_and_names)
{
    optim_layer_normalization_options o = optim_layer_normalization_defaults();
    assert_int_equal(o.axis, -1);
    assert_eq(o.epsilon, 1e-3);
    assert_int_equal(o.center, 1);
    assert_int_equal(o.scale, 1);
    optim_layer *ln = layer_norm(1e-3, 1, 1, NULL);
    assert_string_equal(optim_layer_name(ln), "layer_normalization");
    assert_string_equal(optim_layer_class_name(ln), "LayerNormalization");
    optim_layer *act, *ln2 = layer_norm(1e-3, 1, 1, NULL);
    optim_error err;
    assert_ok(optim_activation_layer_create(&act, OPTIM_ACT_GELU, NULL, &err), &err);
    assert_string_equal(optim_layer_name(act), "activation");
    assert_string_equal(optim_layer_class_name(act), "Activation");
    optim_model *m;
    assert_ok(optim_sequential_create(&m, NULL, &err), &err);
    assert_ok(optim_sequential_add(m, ln), m);
    assert_ok(optim_sequential_add(m, act), m);
    assert_ok(optim_sequential_add(m, ln2), m);
    assert_ok(optim_model_build(m, 2, (int64_t[]){1, 4}), m);
    optim_var *v[4];
    assert_int_equal(optim_model_variables(m, v, 4), 4);
    assert_int_equal(optim_model_trainable_variables(m, v, 4), 4);
    const char *names[4] = {"layer_normalization/gamma", "layer_normalization/beta",
                            "layer_normalization_1/gamma", "layer_normalization_1/beta"};
    for (int i = 0; i < 4; i++) {
        assert_string_equal(optim_var_name(v[i]), names[i]);
        assert_int_equal(optim_var_rank(v[i]), 1);
        assert_int_equal(optim_var_shape(v[i])[0], 4);
        for (int k = 0; k < 4; k++)
            assert_eq(((const float *)optim_var_data(v[i]))[k], i % 2 ? 0 : 1);
    }
    assert_eq(optim_model_count_params(m), 16);
    optim_model_destroy(m);
    /* center / scale off: only the other variable */
    for (int k = 0; k < 3; k++) {
        optim_layer *l = layer_norm(1e-3, k != 1, k != 2, "ln");
        optim_tape *t;
        assert_ok(optim_tape_create(&t, &err), &err);
        double x[3] = {1, 2, 4};
        optim_tensor xt = optim_tensor_make(OPTIM_F32, (float[]){1, 2, 4}, 2, (int64_t[]){1, 3});
        optim_node *out;
        assert_ok(optim_layer_call(l, t, optim_tape_const(t, &xt), NULL, 1, &out), l);
        optim_var *lv[2];
        size_t n = optim_layer_variables(l, lv, 2);
        assert_int_equal(n, k ? 1 : 2);
        if (k) assert_string_equal(optim_var_name(lv[0]), k == 1 ? "ln/gamma" : "ln/beta");
        double m0 = 7.0 / 3, var = 0;
        for (int i = 0; i < 3; i++) var += (x[i] - m0) * (x[i] - m0) / 3;
        for (int i = 0; i < 3; i++)
            assert_close(elem(optim_node_value(out), i), (x[i] - m0) / sqrt(var + 1e-3), 1e-6, 0);
        optim_tape_destroy(t);
        optim_layer_destroy(l);
    }
}

/* Dense(5) -> LayerNormalization -> Activation(silu), float64, against the
 * computation written out. */
OPTIM_TEST(test_values_in_a_model)
{
    optim_error err;
    optim_dense_options d = optim_dense_defaults(5);
    d.seed = 3;
    optim_layer *l[3];
    assert_ok(optim_dense_create(&l[0], &d, &err), &err);
    l[1] = layer_norm(0.01, 1, 1, NULL);
    assert_ok(optim_activation_layer_create(&l[2], OPTIM_ACT_SILU, NULL, &err), &err);
    optim_sequential_options so = optim_sequential_defaults();
    so.dtype = OPTIM_F64;
    optim_model *m;
    assert_ok(optim_sequential_create(&m, &so, &err), &err);
    for (int i = 0; i < 3; i++) assert_ok(optim_sequential_add(m, l[i]), m);
    double x[2 * 3] = {0.5, -1, 2, 1.5, 0.25, -0.75};
    optim_tensor xt = optim_tensor_make(OPTIM_F64, x, 2, (int64_t[]){2, 3});
    optim_tape *t;
    assert_ok(optim_tape_create(&t, &err), &err);
    optim_node *out;
    assert_ok(optim_model_call(m, t, &xt, 0, &out), m);
    optim_var *v[4];
    assert_int_equal(optim_model_variables(m, v, 4), 4);
    double *g = optim_var_data(v[2]), *b = optim_var_data(v[3]);
    for (int j = 0; j < 5; j++) g[j] = 0.5 + 0.25 * j, b[j] = 0.1 * j - 0.2;
    optim_tape_reset(t);
    assert_ok(optim_model_call(m, t, &xt, 0, &out), m);
    const double *W = optim_var_data(v[0]), *bias = optim_var_data(v[1]);
    for (int r = 0; r < 2; r++) {
        double h[5], mean = 0, var = 0;
        for (int j = 0; j < 5; j++) {
            h[j] = bias[j];
            for (int k = 0; k < 3; k++) h[j] += x[3 * r + k] * W[k * 5 + j];
            mean += h[j] / 5;
        }
        for (int j = 0; j < 5; j++) var += (h[j] - mean) * (h[j] - mean) / 5;
        for (int j = 0; j < 5; j++) {
            double z = (h[j] - mean) / sqrt(var + 0.01) * g[j] + b[j];
            assert_close(elem(optim_node_value(out), 5 * r + j), z / (1 + exp(-z)), 1e-12, 1e-15);
        }
    }
    optim_tape_destroy(t);
    optim_model_destroy(m);
}

OPTIM_TEST(test_refusals)
{
    optim_layer_normalization_options o = optim_layer_normalization_defaults();
    optim_layer *l = NULL;
    optim_error err;
    o.epsilon = -1e-3;
    assert_status(optim_layer_normalization_create(&l, &o, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "epsilon=-0.001, expected a finite value >= 0");
    assert_null(l);
    o.epsilon = NAN;
    assert_status(optim_layer_normalization_create(&l, &o, &err), OPTIM_EINVAL, &err);
    o = optim_layer_normalization_defaults();
    o.axis = -2;
    assert_status(optim_layer_normalization_create(&l, &o, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "axis=-2, expected the last axis");
    o = optim_layer_normalization_defaults();
    o.center = 2;
    assert_status(optim_layer_normalization_create(&l, &o, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "center=2");
    o = optim_layer_normalization_defaults();
    o.size = 4;
    assert_status(optim_layer_normalization_create(&l, &o, &err), OPTIM_EVERSION, &err);
    assert_status(optim_layer_normalization_create(&l, NULL, &err), OPTIM_EINVAL, &err);
    assert_status(optim_layer_normalization_create(NULL, &o, &err), OPTIM_EINVAL, &err);
    assert_status(optim_activation_layer_create(&l, (optim_activation)99, NULL, &err), OPTIM_EINVAL,
                  &err);
    assert_contains(err.msg, "activation = 99");
    /* axis 0 on a rank-2 input: refused at build, nothing created */
    o = optim_layer_normalization_defaults();
    o.axis = 0;
    assert_ok(optim_layer_normalization_create(&l, &o, &err), &err);
    optim_tape *t;
    assert_ok(optim_tape_create(&t, &err), &err);
    optim_tensor xt = optim_tensor_make(OPTIM_F32, (float[]){1, 2, 3, 4}, 2, (int64_t[]){2, 2});
    optim_node *out;
    assert_status(optim_layer_call(l, t, optim_tape_const(t, &xt), NULL, 1, &out), OPTIM_EINVAL,
                  NULL);
    assert_contains(optim_layer_errmsg(l), "axis=0 for input shape [2, 2], expected the last axis");
    assert_int_equal(optim_layer_built(l), 0);
    optim_layer_destroy(l);
    /* axis 1 is the last of a rank-2 input; a changed last dim is refused */
    o.axis = 1;
    assert_ok(optim_layer_normalization_create(&l, &o, &err), &err);
    assert_ok(optim_layer_call(l, t, optim_tape_const(t, &xt), NULL, 1, &out), l);
    optim_tensor x3 = optim_tensor_make(OPTIM_F32, (float[]){1, 2, 3}, 2, (int64_t[]){1, 3});
    assert_status(optim_layer_call(l, t, optim_tape_const(t, &x3), NULL, 1, &out), OPTIM_ESHAPE,
                  NULL);
    assert_contains(optim_layer_errmsg(l), "expected axis -1 of input shape to have value 2");
    optim_layer_destroy(l);
    optim_tape_destroy(t);
}

/* Reads n Fashion-MNIST training examples (pixels / 255); 0 if absent. */
static int fashion(int64_t n, float *x, int32_t *y)
{
    const char *dir = "/usr/share/datasets/fashion-mnist/";
    char pi[256], pl[256];
    snprintf(pi, sizeof pi, "%strain-images-idx3-ubyte.gz", dir);
    snprintf(pl, sizeof pl, "%strain-labels-idx1-ubyte.gz", dir);
    if (access(pi, R_OK) || access(pl, R_OK)) return 0;
    optim_idx *fi, *fl;
    optim_error err;
    assert_ok(optim_idx_read(pi, &fi, &err), &err);
    assert_ok(optim_idx_read(pl, &fl, &err), &err);
    const unsigned char *px = optim_idx_data(fi);
    for (int64_t i = 0; i < n * 784; i++) x[i] = (float)px[i] / 255.0f;
    for (int64_t i = 0; i < n; i++) y[i] = (int32_t)optim_idx_get(fl, i);
    optim_idx_free(fi);
    optim_idx_free(fl);
    return 1;
}

OPTIM_TEST(test_trains_on_fashion_mnist)
{
    enum { N = 2000 };
    float *x = malloc(sizeof(float) * N * 784);
    int32_t *y = malloc(sizeof(int32_t) * N);
    if (!fashion(N, x, y)) {
        print_message("skipped: Fashion-MNIST is not installed\n");
        free(x), free(y);
        return;
    }
    optim_error err;
    optim_dense_options d1 = optim_dense_defaults(64), d2 = optim_dense_defaults(10);
    optim_layer *l[4];
    assert_ok(optim_dense_create(&l[0], &d1, &err), &err);
    l[1] = layer_norm(1e-3, 1, 1, NULL);
    assert_ok(optim_activation_layer_create(&l[2], OPTIM_ACT_GELU, NULL, &err), &err);
    assert_ok(optim_dense_create(&l[3], &d2, &err), &err);
    optim_sequential_options so = optim_sequential_defaults();
    so.seed = 5;
    optim_model *m;
    assert_ok(optim_sequential_create(&m, &so, &err), &err);
    for (int i = 0; i < 4; i++) assert_ok(optim_sequential_add(m, l[i]), m);
    optim_optimizer *opt = optim_test_make("\"adam\"");
    optim_loss loss = optim_loss_sparse_categorical_crossentropy(1);
    assert_ok(optim_model_compile(m, opt, &loss, OPTIM_METRIC_ACCURACY), m);
    optim_tensor xt = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){N, 784});
    optim_tensor yt = optim_tensor_make(OPTIM_I32, y, 1, (int64_t[]){N});
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = 3, fo.batch_size = 64, fo.seed = 1;
    optim_history h;
    assert_ok(optim_model_fit(m, &xt, &yt, &fo, &h), m);
    double l0, l2, acc;
    assert_ok(optim_logs_get(&h.logs[0], "loss", &l0), NULL);
    assert_ok(optim_logs_get(&h.logs[2], "loss", &l2), NULL);
    assert_ok(optim_logs_get(&h.logs[2], "accuracy", &acc), NULL);
    print_message("loss %.4f -> %.4f, accuracy %.3f\n", l0, l2, acc);
    assert_true(isfinite(l2));
    assert_lt(l2, 0.75 * l0);
    assert_gt(acc, 0.75);
    /* gamma and beta were trained */
    optim_var *v[6];
    assert_int_equal(optim_model_trainable_variables(m, v, 6), 6);
    assert_string_equal(optim_var_name(v[2]), "layer_normalization/gamma");
    assert_ne(((const float *)optim_var_data(v[2]))[0], 1);
    assert_ne(((const float *)optim_var_data(v[3]))[0], 0);
    optim_history_free(&h);
    optim_model_destroy(m);
    optim_destroy(opt);
    free(x), free(y);
}

int main(void) { return optim_test_run(); }
