/* The BatchNormalization layer (Keras 3's keras.layers.BatchNormalization
 * over the last axis): options and refusals, Keras's variables (gamma,
 * beta, moving_mean, moving_variance; the moving ones not trainable, and
 * model.summary counting them as non-trainable), training and inference
 * calls against a double-precision reference written here, the moving
 * statistics after k training calls against their closed form, the same
 * bits on 1, 2 and 3 threads, and a small MLP whose fit learns while
 * evaluate and predict use the moving statistics. (Gradients:
 * test_tape_gradcheck's test_batch_norm.) */
#include "testutil.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/nn.h"
#include "optim/optim.h"

static optim_layer *batch_norm(double momentum, double eps, int center, int scale, const char *name)
{
    optim_batch_normalization_options o = optim_batch_normalization_defaults();
    o.momentum = momentum, o.epsilon = eps, o.center = center, o.scale = scale, o.name = name;
    optim_layer *l;
    optim_error err;
    assert_ok(optim_batch_normalization_create(&l, &o, &err), &err);
    return l;
}

static double elem(const optim_tensor *v, int64_t i)
{
    return v->dtype == OPTIM_F32 ? (double)((const float *)v->data)[i]
                                 : ((const double *)v->data)[i];
}

/* A deterministic value in [-2, 2) (not exactly representable sums). */
static double val(int64_t i, int k) { return 2 * sin(0.731 * (double)(i + 1) + 1.3 * k) - 0.25; }

OPTIM_TEST(test_defaults_variables_and_summary)
{
    optim_batch_normalization_options o = optim_batch_normalization_defaults();
    assert_int_equal(o.axis, -1);
    assert_eq(o.momentum, 0.99);
    assert_eq(o.epsilon, 1e-3);
    assert_int_equal(o.center, 1);
    assert_int_equal(o.scale, 1);
    optim_error err;
    optim_model *m;
    assert_ok(optim_sequential_create(&m, NULL, &err), &err);
    optim_dense_options d = optim_dense_defaults(4);
    optim_layer *l;
    assert_ok(optim_dense_create(&l, &d, &err), &err);
    assert_ok(optim_sequential_add(m, l), m);
    l = batch_norm(0.99, 1e-3, 1, 1, NULL);
    assert_string_equal(optim_layer_name(l), "batch_normalization");
    assert_string_equal(optim_layer_class_name(l), "BatchNormalization");
    assert_ok(optim_sequential_add(m, l), m);
    assert_ok(optim_model_build(m, 2, (int64_t[]){1, 3}), m);
    optim_var *v[8];
    assert_int_equal(optim_model_variables(m, v, 8), 6);
    static const char *names[4] = {"gamma", "beta", "moving_mean", "moving_variance"};
    static const double init[4] = {1, 0, 0, 1};
    for (int i = 0; i < 4; i++) {
        char want[64];
        snprintf(want, sizeof want, "batch_normalization/%s", names[i]);
        assert_string_equal(optim_var_name(v[2 + i]), want);
        assert_int_equal(optim_var_shape(v[2 + i])[0], 4);
        assert_int_equal(optim_var_trainable(v[2 + i]), i < 2);
        for (int k = 0; k < 4; k++)
            assert_eq(((const float *)optim_var_data(v[2 + i]))[k], init[i]);
    }
    optim_var *tv[8];
    assert_int_equal(optim_model_trainable_variables(m, tv, 8), 4);
    assert_ptr_equal(tv[3], v[3]);
    static char text[4096];
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_ok(optim_model_summary(m, f), m);
    rewind(f);
    text[fread(text, 1, sizeof text - 1, f)] = '\0';
    fclose(f);
    /* Keras: Total params: 32 (128.00 B), Trainable params: 24 (96.00 B),
     * Non-trainable params: 8 (32.00 B) for Dense(4) on 3 features + BN. */
    assert_contains(text, "batch_normalization (BatchNormalization)");
    assert_contains(text, "Total params: 32 (128.00 B)");
    assert_contains(text, "Trainable params: 24 (96.00 B)");
    assert_contains(text, "Non-trainable params: 8 (32.00 B)");
    optim_model_destroy(m);
    /* center / scale off: the moving statistics stay, last */
    for (int k = 1; k < 4; k++) {
        optim_layer *b = batch_norm(0.9, 1e-3, !(k & 1), !(k & 2), "bn");
        optim_tape *t;
        assert_ok(optim_tape_create(&t, &err), &err);
        optim_tensor xt = optim_tensor_make(OPTIM_F32, (float[]){1, 2, 4, 8}, 2, (int64_t[]){2, 2});
        optim_node *out;
        assert_ok(optim_layer_call(b, t, optim_tape_const(t, &xt), NULL, 1, &out), b);
        optim_var *lv[4];
        size_t n = optim_layer_variables(b, lv, 4);
        assert_int_equal(n, 4 - (k == 3 ? 2 : 1));
        assert_string_equal(optim_var_name(lv[n - 2]), "bn/moving_mean");
        assert_string_equal(optim_var_name(lv[n - 1]), "bn/moving_variance");
        if (k != 3) assert_string_equal(optim_var_name(lv[0]), k == 1 ? "bn/gamma" : "bn/beta");
        optim_tape_destroy(t);
        optim_layer_destroy(b);
    }
}

/* The layer on x [2, 3, C] (a CNN's feature map) in dtype dt, training or
 * not, against the formulas in double; gamma, beta and the moving values
 * set to non-trivial numbers first. */
static void check_forward(optim_dtype dt, int training)
{
    enum { R = 6, C = 4 };
    optim_layer *l = batch_norm(0.8, 0.01, 1, 1, NULL);
    optim_error err;
    optim_tape *t;
    assert_ok(optim_tape_create(&t, &err), &err);
    double x[R * C];
    for (int i = 0; i < R * C; i++) x[i] = val(i, dt);
    optim_tensor xt = optim_tensor_make(OPTIM_F64, x, 3, (int64_t[]){2, 3, C});
    void *xc = malloc(sizeof x);
    optim_test_fill(xc, dt, x, R * C);
    xt = optim_tensor_make(dt, xc, 3, (int64_t[]){2, 3, C});
    optim_node *out;
    assert_ok(optim_layer_call(l, t, optim_tape_const(t, &xt), NULL, 0, &out), l);
    optim_var *v[4];
    assert_int_equal(optim_layer_variables(l, v, 4), 4);
    double p[4][C];
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < C; c++) {
            p[k][c] = k == 0 ? 0.5 + 0.25 * c
                : k == 1     ? 0.1 * c - 0.2
                : k == 2     ? 0.3 - 0.2 * c
                             : 0.4 + c;
            if (dt == OPTIM_F32) ((float *)optim_var_data(v[k]))[c] = (float)p[k][c];
            else ((double *)optim_var_data(v[k]))[c] = p[k][c];
            p[k][c] = optim_var_get(v[k], c);
        }
    optim_tape_reset(t);
    assert_ok(optim_layer_call(l, t, optim_tape_const(t, &xt), NULL, training, &out), l);
    double tol = dt == OPTIM_F32 ? 1e-6 : 1e-13;
    for (int c = 0; c < C; c++) {
        double mean = 0, var = 0, xr[R];
        for (int r = 0; r < R; r++) xr[r] = elem(&xt, r * C + c), mean += xr[r] / R;
        for (int r = 0; r < R; r++) var += (xr[r] - mean) * (xr[r] - mean) / R;
        double mu = training ? mean : p[2][c], s2 = training ? var : p[3][c];
        for (int r = 0; r < R; r++)
            assert_close(elem(optim_node_value(out), r * C + c),
                         (xr[r] - mu) / sqrt(s2 + 0.01) * p[0][c] + p[1][c], tol, tol);
        /* the moving statistics moved only in training, by momentum 0.8 */
        assert_close(optim_var_get(v[2], c), training ? 0.8 * p[2][c] + 0.2 * mean : p[2][c], tol,
                     tol);
        assert_close(optim_var_get(v[3], c), training ? 0.8 * p[3][c] + 0.2 * var : p[3][c], tol,
                     tol);
    }
    free(xc);
    optim_tape_destroy(t);
    optim_layer_destroy(l);
}

OPTIM_TEST(test_forward_training_and_inference)
{
    for (int training = 0; training < 2; training++) {
        check_forward(OPTIM_F32, training);
        check_forward(OPTIM_F64, training);
    }
}

/* k training calls on the same batch: moving_mean = (1 - m^k) mean and
 * moving_variance = m^k + (1 - m^k) var (from zeros and ones). */
OPTIM_TEST(test_moving_statistics_closed_form)
{
    enum { R = 5, C = 3, K = 7 };
    const double mom = 0.9;
    optim_layer *l = batch_norm(mom, 1e-3, 1, 1, NULL);
    optim_error err;
    optim_tape *t;
    assert_ok(optim_tape_create(&t, &err), &err);
    double x[R * C];
    for (int i = 0; i < R * C; i++) x[i] = val(i, 3) * 3 + 1;
    optim_tensor xt = optim_tensor_make(OPTIM_F64, x, 2, (int64_t[]){R, C});
    for (int k = 0; k < K; k++) {
        optim_tape_reset(t);
        optim_node *out;
        assert_ok(optim_layer_call(l, t, optim_tape_const(t, &xt), NULL, 1, &out), l);
    }
    optim_var *v[4];
    assert_int_equal(optim_layer_variables(l, v, 4), 4);
    const double mk = pow(mom, K);
    for (int c = 0; c < C; c++) {
        double mean = 0, var = 0;
        for (int r = 0; r < R; r++) mean += x[r * C + c] / R;
        for (int r = 0; r < R; r++) var += (x[r * C + c] - mean) * (x[r * C + c] - mean) / R;
        assert_close(optim_var_get(v[2], c), (1 - mk) * mean, 1e-13, 1e-14);
        assert_close(optim_var_get(v[3], c), mk + (1 - mk) * var, 1e-13, 1e-14);
    }
    /* momentum 1 keeps the initial values, momentum 0 the last batch's */
    for (int edge = 0; edge < 2; edge++) {
        optim_layer *b = batch_norm(edge, 1e-3, 0, 0, NULL);
        optim_tape_reset(t);
        optim_node *out;
        assert_ok(optim_layer_call(b, t, optim_tape_const(t, &xt), NULL, 1, &out), b);
        optim_var *bv[2];
        assert_int_equal(optim_layer_variables(b, bv, 2), 2);
        double mean = 0;
        for (int r = 0; r < R; r++) mean += x[r * C] / R;
        assert_close(optim_var_get(bv[0], 0), edge ? 0 : mean, 1e-15, 1e-15);
        if (edge) assert_eq(optim_var_get(bv[1], 0), 1);
        optim_layer_destroy(b);
    }
    optim_tape_destroy(t);
    optim_layer_destroy(l);
}

OPTIM_TEST(test_refusals)
{
    optim_batch_normalization_options o = optim_batch_normalization_defaults();
    optim_layer *l = NULL;
    optim_error err;
    o.momentum = 1.5;
    assert_status(optim_batch_normalization_create(&l, &o, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "momentum=1.5, expected a value in [0, 1]");
    assert_null(l);
    o.momentum = -0.1;
    assert_status(optim_batch_normalization_create(&l, &o, &err), OPTIM_EINVAL, &err);
    o.momentum = NAN;
    assert_status(optim_batch_normalization_create(&l, &o, &err), OPTIM_EINVAL, &err);
    o = optim_batch_normalization_defaults();
    o.epsilon = -1e-3;
    assert_status(optim_batch_normalization_create(&l, &o, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "epsilon=-0.001, expected a finite value >= 0");
    o = optim_batch_normalization_defaults();
    o.axis = -2;
    assert_status(optim_batch_normalization_create(&l, &o, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "axis=-2, expected the last axis");
    o = optim_batch_normalization_defaults();
    o.scale = 3;
    assert_status(optim_batch_normalization_create(&l, &o, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "scale=3");
    o = optim_batch_normalization_defaults();
    o.size = 8;
    assert_status(optim_batch_normalization_create(&l, &o, &err), OPTIM_EVERSION, &err);
    assert_status(optim_batch_normalization_create(&l, NULL, &err), OPTIM_EINVAL, &err);
    assert_status(optim_batch_normalization_create(NULL, &o, &err), OPTIM_EINVAL, &err);
    /* axis 1 of a rank-3 input: refused at build, nothing created */
    o = optim_batch_normalization_defaults();
    o.axis = 1;
    assert_ok(optim_batch_normalization_create(&l, &o, &err), &err);
    optim_tape *t;
    assert_ok(optim_tape_create(&t, &err), &err);
    optim_tensor x3 = optim_tensor_make(OPTIM_F32, (float[]){1, 2, 3, 4}, 3, (int64_t[]){1, 2, 2});
    optim_node *out;
    assert_status(optim_layer_call(l, t, optim_tape_const(t, &x3), NULL, 1, &out), OPTIM_EINVAL,
                  NULL);
    assert_contains(optim_layer_errmsg(l),
                    "axis=1 for input shape [1, 2, 2], expected the last axis");
    assert_int_equal(optim_layer_built(l), 0);
    optim_layer_destroy(l);
    /* a changed last dim; the tape op's own checks */
    l = batch_norm(0.99, 1e-3, 1, 1, NULL);
    optim_tensor x2 = optim_tensor_make(OPTIM_F32, (float[]){1, 2, 3, 4}, 2, (int64_t[]){2, 2});
    assert_ok(optim_layer_call(l, t, optim_tape_const(t, &x2), NULL, 1, &out), l);
    optim_tensor x4 = optim_tensor_make(OPTIM_F32, (float[]){1, 2, 3, 4}, 2, (int64_t[]){1, 4});
    assert_status(optim_layer_call(l, t, optim_tape_const(t, &x4), NULL, 1, &out), OPTIM_ESHAPE,
                  NULL);
    assert_contains(optim_layer_errmsg(l), "expected axis -1 of input shape to have value 2");
    optim_layer_destroy(l);
    /* the tape op's own checks (a tape keeps its first message: reset) */
    optim_tape_reset(t);
    assert_null(optim_batch_norm(t, optim_tape_const(t, &x2), NULL, NULL, 0, 1e-3, NULL, NULL));
    assert_contains(optim_tape_errmsg(t), "axis = 0 for x of shape [2, 2], expected the last axis");
    optim_tape_reset(t);
    assert_null(optim_batch_norm(t, optim_tape_const(t, &x2), NULL, NULL, -1, -1, NULL, NULL));
    assert_contains(optim_tape_errmsg(t), "epsilon = -1, expected a finite value >= 0");
    optim_tape_reset(t);
    optim_tensor e = optim_tensor_make(OPTIM_F32, NULL, 2, (int64_t[]){0, 2});
    assert_null(optim_batch_norm(t, optim_tape_const(t, &e), NULL, NULL, -1, 1e-3, NULL, NULL));
    assert_contains(optim_tape_errmsg(t), "has no rows");
    optim_tape_reset(t);
    optim_node *xn = optim_tape_const(t, &x2);
    assert_null(optim_batch_norm_inference(t, xn, xn, NULL, NULL, NULL, -1, 1e-3));
    assert_contains(optim_tape_errmsg(t), "variance is NULL");
    optim_tape_reset(t);
    xn = optim_tape_const(t, &x2);
    assert_null(optim_batch_norm_inference(t, xn, xn, xn, NULL, NULL, -1, 1e-3));
    assert_contains(optim_tape_errmsg(t),
                    "mean of shape [2, 2] for x of shape [2, 2], expected [2]");
    optim_tape_destroy(t);
}

/* 3 classes in 6 features, separable by the first two. */
enum { N = 240, F = 6, CLASSES = 3 };
static float xs[N * F];
static int32_t ys[N];

static void make_data(void)
{
    for (int i = 0; i < N * F; i++) xs[i] = (float)(val(i, 11) * 1.5 + 4); /* off-centre */
    for (int i = 0; i < N; i++) ys[i] = (xs[i * F] > 4) + (xs[i * F + 1] > 4.5f);
}

/* Dense(16) -> BatchNormalization -> relu -> Dense(3), compiled with Adam. */
static optim_model *mlp(optim_optimizer **opt)
{
    optim_error err;
    optim_sequential_options so = optim_sequential_defaults();
    so.seed = 4;
    optim_model *m;
    assert_ok(optim_sequential_create(&m, &so, &err), &err);
    optim_dense_options d = optim_dense_defaults(16);
    optim_layer *l;
    assert_ok(optim_dense_create(&l, &d, &err), &err);
    assert_ok(optim_sequential_add(m, l), m);
    assert_ok(optim_sequential_add(m, batch_norm(0.9, 1e-3, 1, 1, NULL)), m);
    assert_ok(optim_activation_layer_create(&l, OPTIM_ACT_RELU, NULL, &err), &err);
    assert_ok(optim_sequential_add(m, l), m);
    d = optim_dense_defaults(CLASSES);
    assert_ok(optim_dense_create(&l, &d, &err), &err);
    assert_ok(optim_sequential_add(m, l), m);
    *opt = optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01}}");
    optim_loss loss = optim_loss_sparse_categorical_crossentropy(1);
    assert_ok(optim_model_compile(m, *opt, &loss, OPTIM_METRIC_ACCURACY), m);
    return m;
}

static void fit(optim_model *m, int64_t epochs, optim_history *h)
{
    optim_tensor x = optim_tensor_make(OPTIM_F32, xs, 2, (int64_t[]){N, F});
    optim_tensor y = optim_tensor_make(OPTIM_I32, ys, 1, (int64_t[]){N});
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = epochs, fo.batch_size = 32, fo.seed = 2;
    assert_ok(optim_model_fit(m, &x, &y, &fo, h), m);
}

OPTIM_TEST(test_mlp_fits_and_evaluates_with_moving_statistics)
{
    make_data();
    optim_optimizer *opt;
    optim_model *m = mlp(&opt);
    optim_history h;
    fit(m, 15, &h);
    double l0, l9, acc;
    assert_ok(optim_logs_get(&h.logs[0], "loss", &l0), NULL);
    assert_ok(optim_logs_get(&h.logs[14], "loss", &l9), NULL);
    assert_ok(optim_logs_get(&h.logs[14], "accuracy", &acc), NULL);
    print_message("loss %.4f -> %.4f, accuracy %.3f\n", l0, l9, acc);
    assert_lt(l9, 0.5 * l0);
    assert_gt(acc, 0.85);
    optim_history_free(&h);
    /* the moving statistics left their initial values */
    optim_var *v[8];
    assert_int_equal(optim_model_variables(m, v, 8), 8);
    assert_string_equal(optim_var_name(v[4]), "batch_normalization/moving_mean");
    assert_ne(optim_var_get(v[4], 0), 0);
    assert_ne(optim_var_get(v[5], 0), 1);
    /* predict: a single example through the moving statistics (with its
     * own batch statistics every example would give beta, the same output) */
    optim_tensor x = optim_tensor_make(OPTIM_F32, xs, 2, (int64_t[]){N, F});
    optim_tensor y = optim_tensor_make(OPTIM_I32, ys, 1, (int64_t[]){N});
    optim_tensor p;
    assert_ok(optim_model_predict(m, &x, 1, &p), m);
    double ce = 0;
    int differ = 0;
    for (int i = 0; i < N; i++) {
        const float *z = (const float *)p.data + i * CLASSES;
        double mx = fmax(z[0], fmax(z[1], z[2])), s = 0;
        for (int k = 0; k < CLASSES; k++) s += exp(z[k] - mx);
        ce += (log(s) + mx - z[ys[i]]) / N;
        differ |= i && z[0] != ((const float *)p.data)[0];
    }
    assert_true(differ);
    /* evaluate's loss is predict's (the same moving statistics) */
    optim_logs logs;
    assert_ok(optim_model_evaluate(m, &x, &y, 17, NULL, &logs), m);
    double el;
    assert_ok(optim_logs_get(&logs, "loss", &el), NULL);
    assert_close(el, ce, 1e-5, 0);
    optim_free(p.data);
    optim_model_destroy(m);
    optim_destroy(opt);
}

/* fit on 1, 2 and 3 threads: every variable (moving statistics included)
 * bitwise the same. */
OPTIM_TEST(test_threads_bitwise)
{
    make_data();
    float ref[8][128];
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        optim_optimizer *opt;
        optim_model *m = mlp(&opt);
        fit(m, 2, NULL);
        optim_var *v[8];
        assert_int_equal(optim_model_variables(m, v, 8), 8);
        for (int i = 0; i < 8; i++) {
            size_t bytes = (size_t)optim_var_numel(v[i]) * sizeof(float);
            assert_true(bytes <= sizeof ref[i]);
            if (threads == 1) memcpy(ref[i], optim_var_data(v[i]), bytes);
            else assert_int_equal(memcmp(ref[i], optim_var_data(v[i]), bytes), 0);
        }
        optim_model_destroy(m);
        optim_destroy(opt);
    }
    omp_set_num_threads(1);
}

int main(void) { return optim_test_run(); }
