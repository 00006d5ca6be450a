/* TF Addons' MultiOptimizer (tensorflow_addons/optimizers/
 * discriminative_layer_training.py at d208d75), the legacy generation of
 * class MultiOptimizer, against an independent reference: the spec's
 * optimizers as plain legacy optimizers, each stepping on a copy of the
 * variables its spec names, spec after spec, as TF Addons' apply_gradients
 * hands them their pairs. Bit for bit, f32 and f64, dense and sparse
 * (legacy Adam's every-row rule, LazyAdam's rows), over several steps:
 * variables, each optimizer's weights and names, step counts. Also: a
 * variable named by two specs (TF Addons' test_model) and by none, a
 * spec without pairs, one whose pairs all lack a gradient, optim_build and
 * a resume through get/set_weights, optim_multi_optimizer_assign, both
 * envelopes (2.11-2.12 with tf.keras's passive marks, 2.13+) written back
 * key for key, and bad input. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ADAM                                                                                   \
    "{\"class_name\":\"Adam\",\"config\":{\"name\":\"Adam\",\"learning_rate\":0.01,\"decay\":" \
    "0.0,\"beta_1\":0.9,\"beta_2\":0.999,\"epsilon\":1e-07,\"amsgrad\":false}}"
#define SGD                                                                                  \
    "{\"class_name\":\"SGD\",\"config\":{\"name\":\"SGD\",\"learning_rate\":0.05,\"decay\":" \
    "0.01,\"momentum\":0.9,\"nesterov\":true}}"
#define LAZY                                                                                   \
    "{\"class_name\":\"Addons>LazyAdam\",\"config\":{\"name\":\"LazyAdam\",\"learning_rate\":" \
    "0.02,\"decay\":0.0,\"beta_1\":0.8,\"beta_2\":0.99,\"epsilon\":1e-07,\"amsgrad\":false}}"
#define SPEC(opt, weights) "{\"optimizer\":" opt ",\"weights\":[" weights "]}"
#define MULTI(specs) \
    "{\"class_name\":\"Addons>MultiOptimizer\",\"config\":{\"optimizer_specs\":[" specs "]}}"

/* ---- the problem ---------------------------------------------------------------------------- */

/* Variables: rows x cols (cols 0: a vector); rank-2 ones get sparse
 * gradients in the sparse runs. */
typedef struct vdef {
    const char *name;
    int64_t rows, cols;
} vdef;

#define MAXV 8

static double init_at(int v, int64_t e) { return 0.4 - 0.15 * (double)e + 0.07 * v; }

static double grad_at(int k, int v, int64_t e)
{
    return sin(0.7 * k + 1.3 * (double)e + 0.5 * v) * (1.0 + 0.1 * (double)e) - 0.02 * k;
}

static optim_var *make_var(const vdef *d, int v, optim_dtype dt)
{
    const int64_t shape[2] = {d->rows, d->cols};
    double init[64];
    const int64_t n = d->rows * (d->cols ? d->cols : 1);
    for (int64_t e = 0; e < n; e++) init[e] = init_at(v, e);
    return optim_test_var(d->name, dt, d->cols ? 2 : 1, shape, init);
}

/* Pair v's gradient at step k in buf (dense, or four rows with a repeat). */
typedef struct gbuf {
    double d[64];
    float f[64];
    int64_t idx[4];
} gbuf;

static optim_grad grad_of(optim_var *var, int v, int k, int sparse, gbuf *b)
{
    optim_tensor t = optim_var_tensor(var);
    const int64_t rows = t.rank == 2 ? t.shape[0] : 0, cols = rows ? t.shape[1] : 0;
    const int use_rows = sparse && rows;
    const int64_t n = use_rows ? 4 * cols : optim_var_numel(var);
    for (int64_t e = 0; e < n; e++) {
        b->d[e] = grad_at(k, v, e);
        b->f[e] = (float)b->d[e];
    }
    void *data = t.dtype == OPTIM_F32 ? (void *)b->f : (void *)b->d;
    if (!use_rows) return optim_grad_dense(optim_tensor_make(t.dtype, data, t.rank, t.shape));
    const int64_t idx[4] = {1, (k + 2) % rows, 1, (3 * k) % rows}, vs[2] = {4, cols};
    memcpy(b->idx, idx, sizeof idx);
    return optim_grad_sparse(b->idx, 4, optim_tensor_make(t.dtype, data, 2, vs));
}

/* Pairs at step k for vars[i], i in which[0..m) (v numbers the gradient). */
static void step_pairs(optim_optimizer *opt, optim_var *const *vars, const int *which, size_t m,
                       int k, int sparse)
{
    gbuf b[MAXV];
    optim_grad_var p[MAXV];
    for (size_t j = 0; j < m; j++)
        p[j] =
            (optim_grad_var){grad_of(vars[which[j]], which[j], k, sparse, &b[j]), vars[which[j]]};
    ot_step(opt, p, m);
}

/* Weights of a and b: the same count, names and bytes (weight 0 too). */
static void assert_weights_bitwise(optim_optimizer *a, optim_optimizer *b)
{
    const size_t n = optim_weights_count(a);
    assert_eq(optim_weights_count(b), n);
    optim_tensor wa[32], wb[32];
    assert_true(n <= 32);
    optim_get_weights(a, wa, n);
    optim_get_weights(b, wb, n);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(optim_weight_name(a, i), optim_weight_name(b, i));
        const size_t bytes = (size_t)optim_tensor_numel(&wa[i]) * optim_dtype_size(wa[i].dtype);
        assert_eq(wa[i].dtype, wb[i].dtype);
        assert_eq(optim_tensor_numel(&wa[i]), optim_tensor_numel(&wb[i]));
        assert_true(memcmp(wa[i].data, wb[i].data, bytes) == 0);
    }
}

/* ---- against the plain optimizers ------------------------------------------------------------ */

/* A run: the MultiOptimizer of json on vars m[], the reference's plain
 * optimizers ref[k] (spec k's config) on copies r[]; spec k names the
 * variables names[k] (indices into the problem). */
typedef struct spec_def {
    const char *opt;
    int vars[MAXV];
    size_t n;
} spec_def;

static void check_against_plain(const char *json, const vdef *defs, size_t nv,
                                const spec_def *specs, size_t nspecs, optim_dtype dt, int sparse,
                                int steps)
{
    optim_optimizer *multi = optim_test_make(json), *ref[4];
    optim_var *m[MAXV], *r[MAXV];
    int all[MAXV];
    for (size_t v = 0; v < nv; v++) {
        m[v] = make_var(&defs[v], (int)v, dt);
        r[v] = make_var(&defs[v], (int)v, dt);
        all[v] = (int)v;
    }
    for (size_t k = 0; k < nspecs; k++) ref[k] = optim_test_make(specs[k].opt);
    for (int k = 0; k < steps; k++) {
        step_pairs(multi, m, all, nv, k, sparse);
        for (size_t s = 0; s < nspecs; s++)
            step_pairs(ref[s], r, specs[s].vars, specs[s].n, k, sparse);
    }
    for (size_t v = 0; v < nv; v++) assert_vars_bitwise(m[v], r[v]);
    assert_eq(optim_iterations(multi), steps);
    for (size_t k = 0; k < nspecs; k++) {
        optim_optimizer *in = optim_wrapper_inner_at(multi, k);
        assert_non_null(in);
        assert_eq(optim_generation_of(in), OPTIM_LEGACY);
        assert_weights_bitwise(in, ref[k]);
        optim_destroy(ref[k]);
    }
    assert_null(optim_wrapper_inner_at(multi, nspecs));
    optim_destroy(multi);
    for (size_t v = 0; v < nv; v++) {
        optim_var_destroy(m[v]);
        optim_var_destroy(r[v]);
    }
}

static const vdef MODEL[] = {{"dense/kernel", 3, 2}, {"dense/bias", 2, 0}, {"dense_1/kernel", 2, 1},
                             {"dense_1/bias", 1, 0}, {"emb", 6, 3},        {"other", 4, 0}};

/* Disjoint specs (TF Addons' test_fit_layer_optimizer, with an embedding):
 * Adam on dense/ and emb, SGD (nesterov, decay) on dense_1/, "other"
 * named by no spec and left alone. */
OPTIM_TEST(test_disjoint_specs_bitwise)
{
    const char *json = MULTI(SPEC(ADAM, "\"dense/kernel:0\",\"dense/bias:0\",\"emb:0\"") "," SPEC(
        SGD, "\"dense_1/kernel:0\",\"dense_1/bias:0\""));
    const spec_def specs[2] = {{ADAM, {0, 1, 4}, 3}, {SGD, {2, 3}, 2}};
    OPTIM_FOR_DTYPES(dt)
    for (int sparse = 0; sparse < 2; sparse++)
        check_against_plain(json, MODEL, 6, specs, 2, dt, sparse, 9);
}

/* LazyAdam's rows-only rule through a spec; names without ":0" select too. */
OPTIM_TEST(test_lazy_sparse_spec_bitwise)
{
    const vdef defs[] = {{"emb", 6, 3}, {"w", 3, 0}, {"emb2", 5, 2}};
    const char *json = MULTI(SPEC(LAZY, "\"emb:0\"") "," SPEC(ADAM, "\"w\",\"emb2:0\""));
    const spec_def specs[2] = {{LAZY, {0}, 1}, {ADAM, {1, 2}, 2}};
    OPTIM_FOR_DTYPES(dt)
    for (int sparse = 0; sparse < 2; sparse++)
        check_against_plain(json, defs, 3, specs, 2, dt, sparse, 7);
}

/* TF Addons' test_model: Adam on the whole model, SGD again on its last
 * layer, which both step, Adam first. */
OPTIM_TEST(test_variable_in_two_specs)
{
    const vdef defs[] = {{"d0/kernel", 2, 2}, {"d1/kernel", 2, 1}, {"d1/bias", 1, 0}};
    const char *json = MULTI(SPEC(ADAM, "\"d0/kernel:0\",\"d1/kernel:0\",\"d1/bias:0\"") "," SPEC(
        SGD, "\"d1/kernel:0\",\"d1/bias:0\""));
    const spec_def specs[2] = {{ADAM, {0, 1, 2}, 3}, {SGD, {1, 2}, 2}};
    OPTIM_FOR_DTYPES(dt) check_against_plain(json, defs, 3, specs, 2, dt, 0, 6);
    /* Every weight has its own name (the second optimizer's "d1/kernel/momentum"
     * is qualified only if it clashes). */
    optim_optimizer *opt = optim_test_make(json);
    optim_var *v[3];
    for (int i = 0; i < 3; i++) v[i] = make_var(&defs[i], i, OPTIM_F64);
    assert_ok(optim_build(opt, v, 3), opt);
    const size_t n = optim_weights_count(opt);
    assert_eq(n, 1 + 6 + 2 + 2);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            assert_true(strcmp(optim_weight_name(opt, i), optim_weight_name(opt, j)) != 0);
    assert_string_equal(optim_weight_name(opt, n - 2), "optimizer_specs/0/iterations");
    assert_string_equal(optim_weight_name(opt, n - 1), "optimizer_specs/1/iterations");
    optim_destroy(opt);
    for (int i = 0; i < 3; i++) optim_var_destroy(v[i]);
}

/* ---- step counts, pairs without gradient, refused steps ------------------------------------- */

static optim_grad_var pair_of(optim_var *v, int i, int k, gbuf *b)
{
    return (optim_grad_var){grad_of(v, i, k, 0, b), v};
}

/* A spec without pairs does not step (its apply_gradients([]) is a no-op);
 * one whose pairs all lack a gradient fails the call, which changes
 * nothing; a call of variables no spec names, or of none, still counts. */
OPTIM_TEST(test_step_counts_and_missing_gradients)
{
    const vdef defs[] = {{"a", 3, 0}, {"b", 2, 0}, {"c", 2, 0}};
    optim_optimizer *opt = optim_test_make(MULTI(SPEC(SGD, "\"a:0\"") "," SPEC(
        ADAM, "\"b:0\"") "," SPEC(ADAM, "\"bn/moving_mean:0\",\"bn/moving_variance:0\"")));
    optim_var *v[3];
    for (int i = 0; i < 3; i++) v[i] = make_var(&defs[i], i, OPTIM_F64);
    gbuf b[3];
    optim_grad_var p[3] = {pair_of(v[0], 0, 0, &b[0]), pair_of(v[1], 1, 0, &b[1]),
                           pair_of(v[2], 2, 0, &b[2])};
    ot_step(opt, p, 3);
    const int64_t want[3] = {1, 1, 0};
    for (size_t k = 0; k < 3; k++)
        assert_eq(optim_iterations(optim_wrapper_inner_at(opt, k)), want[k]);
    assert_eq(optim_iterations(opt), 1);
    assert_var_eq(v[2], ((double[]){init_at(2, 0), init_at(2, 1)}), 2);
    assert_null(optim_get_slot(opt, v[2], "momentum"));
    /* b without gradient: spec 1 has a pair, none with a gradient. */
    optim_var *a0 = make_var(&defs[0], 0, OPTIM_F64);
    memcpy(optim_var_data(a0), optim_var_data(v[0]), 3 * sizeof(double));
    p[1].grad = optim_grad_none();
    assert_status(optim_apply_gradients(opt, p, 3, 0), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "optimizer_specs[1] (Adam): no gradients provided");
    assert_contains(optim_errmsg(opt), "'b'");
    assert_vars_bitwise(v[0], a0);
    assert_eq(optim_iterations(opt), 1);
    assert_eq(optim_iterations(optim_wrapper_inner_at(opt, 0)), 1);
    /* Only c (named by no spec), then nothing: TF Addons counts the call. */
    ot_step(opt, &p[2], 1);
    ot_step(opt, NULL, 0);
    assert_eq(optim_iterations(opt), 3);
    for (size_t k = 0; k < 3; k++)
        assert_eq(optim_iterations(optim_wrapper_inner_at(opt, k)), want[k]);
    assert_vars_bitwise(v[0], a0);
    /* A gradient of the wrong shape is the spec's optimizer's refusal. */
    p[1] = pair_of(v[1], 1, 1, &b[1]);
    p[0].grad = optim_grad_dense(optim_tensor_make(OPTIM_F64, b[0].d, 1, (int64_t[]){2}));
    assert_status(optim_apply_gradients(opt, p, 2, 0), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "optimizer_specs[0] (SGD)");
    assert_vars_bitwise(v[0], a0);
    assert_eq(optim_iterations(opt), 3);
    /* The same variable twice in one call. */
    p[0] = pair_of(v[1], 1, 1, &b[0]);
    assert_status(optim_apply_gradients(opt, p, 2, 0), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "appears more than once");
    optim_destroy(opt);
    for (int i = 0; i < 3; i++) optim_var_destroy(v[i]);
    optim_var_destroy(a0);
}

/* ---- build, weights, resume ---------------------------------------------------------------- */

/* optim_build makes the slots a first step makes (each optimizer's kinds
 * over its variables, as _create_slots(var_list)); a resume through
 * get/set_weights continues bit for bit. */
OPTIM_TEST(test_build_order_and_resume)
{
    const char *json = MULTI(SPEC(ADAM, "\"dense/kernel:0\",\"dense/bias:0\",\"emb:0\"") "," SPEC(
        SGD, "\"dense_1/kernel:0\",\"dense_1/bias:0\""));
    optim_optimizer *a = optim_test_make(json), *b = optim_test_make(json);
    optim_var *va[6], *vb[6];
    int all[6];
    for (int i = 0; i < 6; i++) {
        va[i] = make_var(&MODEL[i], i, OPTIM_F32);
        vb[i] = make_var(&MODEL[i], i, OPTIM_F32);
        all[i] = i;
    }
    for (int k = 0; k < 3; k++) step_pairs(a, va, all, 6, k, 1);
    assert_ok(optim_build(b, vb, 6), b);
    const char *adam[] = {"iterations",     "dense/kernel/m", "dense/bias/m", "emb/m",
                          "dense/kernel/v", "dense/bias/v",   "emb/v"};
    optim_optimizer *in = optim_wrapper_inner_at(b, 0);
    assert_eq(optim_weights_count(in), 7);
    for (size_t i = 0; i < 7; i++) assert_string_equal(optim_weight_name(in, i), adam[i]);
    const size_t n = optim_weights_count(a);
    assert_eq(optim_weights_count(b), n);
    assert_eq(n, 1 + 6 + 2 + 2);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(optim_weight_name(a, i), optim_weight_name(b, i));
    assert_string_equal(optim_weight_name(a, n - 1), "optimizer_specs/1/iterations");
    optim_tensor w[16];
    optim_get_weights(a, w, n);
    assert_ok(optim_set_weights(b, w, n), b);
    for (int i = 0; i < 6; i++)
        memcpy(optim_var_data(vb[i]), optim_var_data(va[i]), (size_t)optim_var_numel(va[i]) * 4);
    assert_eq(optim_iterations(b), 3);
    for (int k = 3; k < 6; k++) {
        step_pairs(a, va, all, 6, k, 1);
        step_pairs(b, vb, all, 6, k, 1);
    }
    for (int i = 0; i < 6; i++) assert_vars_bitwise(va[i], vb[i]);
    for (size_t k = 0; k < 2; k++)
        assert_weights_bitwise(optim_wrapper_inner_at(a, k), optim_wrapper_inner_at(b, k));
    optim_destroy(a);
    optim_destroy(b);
    for (int i = 0; i < 6; i++) {
        optim_var_destroy(va[i]);
        optim_var_destroy(vb[i]);
    }
}

/* ---- optim_multi_optimizer_assign ------------------------------------------------------------ */

/* The variables' names join spec k's weights, as create_optimizer_spec
 * writes a layer's (with ":0"), and are written back. */
OPTIM_TEST(test_assign_adds_names)
{
    optim_optimizer *opt = optim_test_make(MULTI(SPEC(SGD, "\"a:0\"") "," SPEC(ADAM, "")));
    const int64_t two = 2;
    const double x[2] = {1, 2};
    optim_var *a = optim_test_var("a", OPTIM_F64, 1, &two, x);
    optim_var *b = optim_test_var("b", OPTIM_F64, 1, &two, x);
    optim_var *c = optim_test_var("c:1", OPTIM_F64, 1, &two, x);
    optim_var *vars[3] = {a, b, c};
    assert_ok(optim_multi_optimizer_assign(opt, vars, 3, 1), opt);
    assert_ok(optim_multi_optimizer_assign(opt, &b, 1, 1), opt); /* named already */
    assert_ok(optim_multi_optimizer_assign(opt, &a, 1, 0), opt);
    assert_status(optim_multi_optimizer_assign(opt, vars, 1, 2), OPTIM_ERANGE, opt);
    optim_var *none[1] = {NULL};
    assert_status(optim_multi_optimizer_assign(opt, none, 1, 0), OPTIM_EINVAL, opt);
    /* A call that fails part way adds nothing: d's name leaves the index too. */
    optim_var *d = optim_test_var("d", OPTIM_F64, 1, &two, x);
    optim_var *d_then_none[2] = {d, NULL};
    assert_status(optim_multi_optimizer_assign(opt, d_then_none, 2, 0), OPTIM_EINVAL, opt);
    char *cfg = optim_get_config(opt);
    assert_contains(cfg, "\"weights\":[\"a:0\"]},{\"optimizer\"");
    assert_contains(cfg, "\"weights\":[\"a:0\",\"b:0\",\"c:1\"]}]");
    optim_free(cfg);
    double g[2] = {1, 1};
    optim_grad_var p[3];
    for (int i = 0; i < 3; i++)
        p[i] =
            (optim_grad_var){optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &two)), vars[i]};
    ot_step(opt, p, 3);
    assert_non_null(optim_get_slot(optim_wrapper_inner_at(opt, 0), a, "momentum"));
    assert_non_null(optim_get_slot(optim_wrapper_inner_at(opt, 1), a, "m"));
    assert_non_null(optim_get_slot(optim_wrapper_inner_at(opt, 1), c, "m"));
    assert_null(optim_get_slot(optim_wrapper_inner_at(opt, 0), b, "momentum"));
    p[0] = (optim_grad_var){optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &two)), d};
    ot_step(opt, p, 1); /* named by no spec now: skipped */
    assert_eq(optim_var_get(d, 0), 1.0);
    optim_test_free(opt, a, b, c, d);
}

/* ---- configs ------------------------------------------------------------------------------- */

/* json read as legacy and written back as the same text, twice. */
static void assert_round_trip(const char *json)
{
    optim_optimizer *opt = optim_test_make(json);
    assert_eq(optim_generation_of(opt), OPTIM_LEGACY);
    char *s = optim_serialize(opt);
    assert_string_equal(s, json);
    optim_free(s);
    optim_destroy(opt);
    ot_check_round_trip(json);
}

/* tf.keras 2.11-2.12 (h5 / SavedModel metadata: tf.keras's JSON encoder
 * marks each nested optimizer passive; tf-keras's new-style Adam under its
 * registered name) and 2.13+ (serialize_keras_object's envelope, at every
 * level), key for key; the clip options kept in OptimizerV2's order. */
OPTIM_TEST(test_both_envelopes_round_trip)
{
    assert_round_trip(
        "{\"class_name\":\"Addons>MultiOptimizer\",\"config\":{\"name\":\"MultiOptimizer\","
        "\"clipnorm\":1.0,\"optimizer_specs\":[{\"optimizer\":{\"class_name\":\"Adam\",\"config\":"
        "{\"name\":\"Adam\",\"learning_rate\":0.001,\"decay\":0.0,\"beta_1\":0.9,\"beta_2\":0.999,"
        "\"epsilon\":1e-07,\"amsgrad\":false},\"__passive_serialization__\":true},\"weights\":"
        "[\"dense/kernel:0\",\"dense/bias:0\"]},{\"optimizer\":{\"class_name\":\"Custom>Adam\","
        "\"config\":{\"name\":\"Adam\",\"weight_decay\":null,\"clipnorm\":null,\"global_clipnorm\":"
        "null,\"clipvalue\":null,\"use_ema\":false,\"ema_momentum\":0.99,"
        "\"ema_overwrite_frequency\":null,\"jit_compile\":true,\"is_legacy_optimizer\":false,"
        "\"learning_rate\":0.0010000000474974513,\"beta_1\":0.9,\"beta_2\":0.999,\"epsilon\":1e-07,"
        "\"amsgrad\":false},\"__passive_serialization__\":true},\"weights\":[\"dense_1/kernel:0\"]}]}}");
    assert_round_trip(
        "{\"module\":\"tensorflow_addons.optimizers.discriminative_layer_training\",\"class_name\":"
        "\"MultiOptimizer\",\"config\":{\"name\":\"MultiOptimizer\",\"optimizer_specs\":[{"
        "\"optimizer\":{\"module\":\"keras.optimizers\",\"class_name\":\"Adam\",\"config\":{\"name\":"
        "\"Adam\",\"weight_decay\":null,\"clipnorm\":null,\"global_clipnorm\":null,\"clipvalue\":"
        "null,\"use_ema\":false,\"ema_momentum\":0.99,\"ema_overwrite_frequency\":null,"
        "\"jit_compile\":true,\"is_legacy_optimizer\":false,\"learning_rate\":0.0010000000474974513,"
        "\"beta_1\":0.9,\"beta_2\":0.999,\"epsilon\":1e-07,\"amsgrad\":false},\"registered_name\":"
        "null},\"weights\":[\"dense/kernel:0\",\"dense/bias:0\"]},{\"optimizer\":{\"module\":"
        "\"keras.optimizers.legacy\",\"class_name\":\"SGD\",\"config\":{\"name\":\"SGD\","
        "\"learning_rate\":0.0,\"decay\":0.0,\"momentum\":0.0,\"nesterov\":false},"
        "\"registered_name\":null},\"weights\":[\"dense_1/kernel:0\",\"dense_1/bias:0\"]}]},"
        "\"registered_name\":\"Addons>MultiOptimizer\"}");
    /* Written as TF Addons writes it: name, then optimizer_specs; decay
     * (OptimizerV2's, read) is not written. */
    optim_optimizer *opt = optim_test_make(
        "{\"class_name\":\"Addons>MultiOptimizer\",\"config\":{\"decay\":0.5,\"global_clipnorm\":2,"
        "\"optimizer_specs\":[" SPEC(SGD, "\"w:0\"") "]}}");
    char *s = optim_get_config(opt);
    assert_string_equal(s,
                        "{\"name\":\"MultiOptimizer\",\"global_clipnorm\":2,\"optimizer_specs\":[{"
                        "\"optimizer\":" SGD ",\"weights\":[\"w:0\"]}]}");
    optim_free(s);
    optim_destroy(opt);
}

/* The two generations of one class: Keras 3's keys read as Keras 3's. */
OPTIM_TEST(test_generations_apart)
{
    optim_optimizer *k3 = optim_test_make(
        "{\"class_name\":\"MultiOptimizer\",\"config\":{\"optimizer_map\":{\"class_name\":"
        "\"OptimizerMap\",\"config\":{\"default_optimizer\":\"sgd\",\"optimizer_map\":null}}}}");
    assert_eq(optim_generation_of(k3), OPTIM_KERAS3);
    optim_destroy(k3);
    assert_ptr_equal(optim_find_class("Addons>MultiOptimizer"), optim_find_class("MultiOptimizer"));
    optim_optimizer *tfa = optim_test_make(
        "{\"class_name\":\"MultiOptimizer\",\"config\":{\"is_legacy_optimizer\":true,"
        "\"optimizer_specs\":[" SPEC(SGD, "\"w:0\"") "]}}");
    assert_eq(optim_generation_of(tfa), OPTIM_LEGACY);
    char *s = optim_serialize(tfa);
    assert_true(strncmp(s,
                        "{\"class_name\":\"Addons>MultiOptimizer\",\"config\":{\"name\":"
                        "\"MultiOptimizer\",",
                        70) == 0);
    optim_free(s);
    optim_destroy(tfa);
    /* optim_from_config under TF Addons' name reads its generation. */
    optim_error err;
    assert_ok(optim_from_config(&tfa, "Addons>MultiOptimizer",
                                "{\"optimizer_specs\":[" SPEC(SGD, "\"w:0\"") "]}", &err),
              &err);
    assert_eq(optim_generation_of(tfa), OPTIM_LEGACY);
    optim_destroy(tfa);
    assert_ok(optim_from_config(&tfa, "Addons>LAMB", "{}", &err), &err);
    assert_eq(optim_generation_of(tfa), OPTIM_LEGACY);
    optim_destroy(tfa);
}

#define SPECS_OF(x) \
    "{\"class_name\":\"Addons>MultiOptimizer\",\"config\":{\"optimizer_specs\":" x "}}"

OPTIM_TEST(test_bad_input)
{
    ot_expect_refused("{\"class_name\":\"Addons>MultiOptimizer\",\"config\":{}}", OPTIM_EINVAL,
                      "Must specify one of", NULL);
    ot_expect_refused(SPECS_OF("null"), OPTIM_ETYPE, "Must specify one of", NULL);
    ot_expect_refused(SPECS_OF("[]"), OPTIM_EINVAL, "optimizer_specs is empty", NULL);
    ot_expect_refused(SPECS_OF("[3]"), OPTIM_ETYPE, "optimizer_specs[0] is a number", NULL);
    ot_expect_refused(SPECS_OF("[{\"optimizer\":" SGD "}]"), OPTIM_EKEY, "has no 'weights'", NULL);
    ot_expect_refused(SPECS_OF("[{\"weights\":[]}]"), OPTIM_EKEY, "has no 'optimizer'", NULL);
    ot_expect_refused(SPECS_OF("[{\"optimizer\":" SGD ",\"weights\":[],\"gv\":[]}]"), OPTIM_EKEY,
                      "unknown key 'gv'", NULL);
    ot_expect_refused(SPECS_OF("[{\"optimizer\":" SGD ",\"weights\":\"w:0\"}]"), OPTIM_ETYPE,
                      "['weights'] is a string, expected a list", NULL);
    ot_expect_refused(SPECS_OF("[" SPEC(SGD, "\"a:0\",1") "]"), OPTIM_ETYPE,
                      "['weights'][1] is a number", NULL);
    ot_expect_refused(SPECS_OF("[" SPEC(SGD, "\"\"") "]"), OPTIM_ETYPE, "['weights'][0] is empty",
                      NULL);
    /* One name twice in a spec; in two specs it is TF Addons' overlap. */
    ot_expect_refused(SPECS_OF("[" SPEC(SGD, "\"a:0\",\"b:0\",\"a:0\"") "]"), OPTIM_EINVAL,
                      "names 'a:0' twice (entries 0 and 2)", NULL);
    ot_expect_refused(SPECS_OF("[" SPEC(ADAM, "\"a:0\"") "," SPEC("{\"class_name\":\"SGD\","
                                                                  "\"config\":{\"momentum\":2}}",
                                                                  "\"b:0\"") "]"),
                      OPTIM_ERANGE, "optimizer_specs[1]['optimizer']", "momentum");
    ot_expect_refused(SPECS_OF("[{\"optimizer\":{\"class_name\":\"SGD\",\"config\":{\"decay\":0.0},"
                               "\"__passive_serialization__\":1},\"weights\":[]}]"),
                      OPTIM_ETYPE, "expected true", NULL);
}

/* Nested generations: tf.keras 2's optimizers only. */
OPTIM_TEST(test_bad_nested_generation)
{
    /* Keras 3's keys in a config read as legacy (no is_legacy_optimizer). */
    ot_expect_refused(
        SPECS_OF("[" SPEC("{\"class_name\":\"SGD\",\"config\":{\"loss_scale_factor\":null}}",
                          "\"a:0\"") "]"),
        OPTIM_EKEY, "optimizer_specs[0]['optimizer']", "other Keras generation");
    /* A Keras 3 class tf-keras does not have (Muon), or a bare name. */
    ot_expect_refused(
        SPECS_OF("[" SPEC("{\"class_name\":\"Muon\",\"config\":{\"is_legacy_optimizer\":"
                          "false}}",
                          "\"a:0\"") "]"),
        OPTIM_EINVAL, "is a Muon: a Keras 3 optimizer cannot be in TF Addons'", NULL);
    ot_expect_refused(SPECS_OF("[" SPEC("\"adam\"", "\"a:0\"") "]"), OPTIM_EINVAL,
                      "a Keras 3 optimizer cannot be", NULL);
    ot_expect_refused(
        SPECS_OF("[" SPEC("{\"class_name\":\"Lion\",\"config\":{\"learning_rate\":0.1}}",
                          "\"a:0\"") "]"),
        OPTIM_ENOTSUP, "optimizer_specs[0]['optimizer'] (read as legacy", "Lion");
    /* Wrappers, this class included. */
    ot_expect_refused(SPECS_OF("[" SPEC("{\"class_name\":\"Addons>Lookahead\",\"config\":{"
                                        "\"optimizer\":" SGD "}}",
                                        "\"a:0\"") "]"),
                      OPTIM_EINVAL, "is a Lookahead: a wrapper cannot be a sub-optimizer", NULL);
    ot_expect_refused(SPECS_OF("[" SPEC(MULTI(SPEC(SGD, "\"a:0\"")), "\"a:0\"") "]"), OPTIM_EINVAL,
                      "MultiOptimizer cannot be used inside a MultiOptimizer", NULL);
    /* Each generation's key in the other. */
    ot_expect_refused(
        "{\"class_name\":\"Addons>MultiOptimizer\",\"config\":{\"optimizer_map\":{}}}", OPTIM_EKEY,
        "'optimizer_map' is Keras 3's", NULL);
    ot_expect_refused("{\"class_name\":\"MultiOptimizer\",\"config\":{\"optimizer_specs\":[" SPEC(
                          SGD, "\"a:0\"") "]}}",
                      OPTIM_EKEY, "\"Addons>MultiOptimizer\"", NULL);
    /* Its own learning rate, in either spelling. */
    ot_expect_refused("{\"class_name\":\"Addons>MultiOptimizer\",\"config\":{\"lr\":0.1,"
                      "\"optimizer_specs\":[" SPEC(SGD, "\"a:0\"") "]}}",
                      OPTIM_EINVAL, "learning_rate is 0.1", "set it on the optimizers");
    ot_expect_refused("{\"class_name\":\"Addons>MultiOptimizer\",\"config\":{\"learning_rate\":"
                      "0.1,\"optimizer_specs\":[" SPEC(SGD, "\"a:0\"") "]}}",
                      OPTIM_EINVAL, "no learning_rate of its own", NULL);
}

int main(void) { return optim_test_run(); }
