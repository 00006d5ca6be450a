/* Muon against an independent double-precision reference written from
 * keras/src/optimizers/muon.py (Keras 3.10+) and the Muon / Moonlight papers:
 *
 *   decay:  w -= w * wd * lr  (wd = adam_weight_decay for AdamW variables,
 *           weight_decay for Muon ones; None: none)
 *   Muon (2-D, not excluded): m += g + m (momentum - 1); G = g + momentum m
 *           (nesterov) or m; X = G (transposed if rows > cols) / (|G|_F + 1e-7);
 *           ns_steps x { A = X X^T; X = a X + (b A + c A A) X };
 *           w -= lr X^T-back * sqrt(max(rows, cols)) * rms_rate
 *   AdamW (others): lr_a = lr * adam_lr_ratio, the Keras 3 Adam rule.
 *
 * 20-step trajectories of six variables (both rules, both transposes, every
 * AdamW reason) in f32 and f64; Keras's own test values; sparse = dense with
 * zero rows; config keys, order and round trips; bad input; thread counts. */
#include "opt_table.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 20
#define CFG(body) "{\"class_name\": \"Muon\", \"config\": {" body "}}"
#define MAXN 64

/* ---- the reference ------------------------------------------------------------------ */

typedef struct mref {
    double lr, b1, b2, eps, a, b, c, ratio, mom, rms, wd, awd; /* NAN: None */
    int ns, nesterov;
} mref;

static const mref DEFAULTS = {0.001, 0.9,  0.999, 1e-7,  3.4445, -4.7750, 2.0315,
                              1,     0.95, 0.2,   0.004, 0.004,  5,       1};

typedef struct rvar {
    int rows, cols, adamw, n; /* cols 0: not a matrix */
    double w[MAXN], m[MAXN], v[MAXN];
} rvar;

/* X [p, q] -> a X + (b A + c A A) X with A = X X^T, written plainly. */
static void ns_ref(double *x, int p, int q, const mref *r)
{
    double A[MAXN], B[MAXN], y[MAXN];
    for (int s = 0; s < r->ns; s++) {
        for (int i = 0; i < p; i++)
            for (int j = 0; j < p; j++) {
                A[i * p + j] = 0;
                for (int l = 0; l < q; l++) A[i * p + j] += x[i * q + l] * x[j * q + l];
            }
        for (int i = 0; i < p; i++)
            for (int j = 0; j < p; j++) {
                double aa = 0;
                for (int l = 0; l < p; l++) aa += A[i * p + l] * A[l * p + j];
                B[i * p + j] = r->b * A[i * p + j] + r->c * aa;
            }
        for (int i = 0; i < p; i++)
            for (int j = 0; j < q; j++) {
                double bx = 0;
                for (int l = 0; l < p; l++) bx += B[i * p + l] * x[l * q + j];
                y[i * q + j] = r->a * x[i * q + j] + bx;
            }
        memcpy(x, y, sizeof(double) * (size_t)(p * q));
    }
}

static void ref_step(const mref *r, rvar *x, const double *g, int t)
{
    double wd = x->adamw ? r->awd : r->wd;
    if (!isnan(wd))
        for (int i = 0; i < x->n; i++) x->w[i] -= x->w[i] * wd * r->lr;
    if (x->adamw) {
        double alpha = r->lr * r->ratio * sqrt(1 - pow(r->b2, t + 1)) / (1 - pow(r->b1, t + 1));
        for (int i = 0; i < x->n; i++) {
            x->m[i] += (g[i] - x->m[i]) * (1 - r->b1);
            x->v[i] += (g[i] * g[i] - x->v[i]) * (1 - r->b2);
            x->w[i] -= x->m[i] * alpha / (sqrt(x->v[i]) + r->eps);
        }
        return;
    }
    int tr = x->rows > x->cols, p = tr ? x->cols : x->rows, q = tr ? x->rows : x->cols;
    double X[MAXN], norm = 0;
    for (int i = 0; i < x->rows; i++)
        for (int j = 0; j < x->cols; j++) {
            int e = i * x->cols + j;
            x->m[e] += g[e] + x->m[e] * (r->mom - 1);
            double G = r->nesterov ? g[e] + r->mom * x->m[e] : x->m[e];
            X[tr ? j * q + i : e] = G;
            norm += G * G;
        }
    for (int e = 0; e < p * q; e++) X[e] /= sqrt(norm) + 1e-7;
    ns_ref(X, p, q, r);
    double scale = isnan(r->rms) ? 1 : sqrt((double)q) * r->rms;
    for (int i = 0; i < x->rows; i++)
        for (int j = 0; j < x->cols; j++)
            x->w[i * x->cols + j] -= r->lr * X[tr ? j * q + i : i * x->cols + j] * scale;
}

/* ---- helpers --------------------------------------------------------------------------- */

static optim_grad dense(optim_dtype dt, double *g, float *gf, int32_t rank, const int64_t *shape,
                        int n)
{
    for (int i = 0; i < n; i++) {
        gf[i] = (float)g[i];
        if (dt == OPTIM_F32) g[i] = gf[i];
    }
    return optim_grad_dense(
        optim_tensor_make(dt, dt == OPTIM_F32 ? (void *)gf : (void *)g, rank, shape));
}

typedef struct vspec {
    const char *name;
    int32_t rank;
    int64_t shape[3];
    int adamw;
} vspec;

/* 2-D both ways round, a bias, an embedding by name, a 3-D kernel, and a
 * matrix excluded by the pattern "^out/". */
static const vspec VARS[] = {
    {"dense/kernel", 2, {3, 5, 0}, 0}, {"dense_1/kernel", 2, {6, 4, 0}, 0},
    {"dense/bias", 1, {5, 0, 0}, 1},   {"token_Embedding/embeddings", 2, {4, 3, 0}, 1},
    {"conv/kernel", 3, {2, 2, 3}, 1},  {"out/kernel", 2, {3, 3, 0}, 1},
};
#define NV ((int)(sizeof VARS / sizeof *VARS))

static double init_at(int v, int i) { return 0.5 - 0.13 * i + 0.3 * v; }
static double grad_at(int k, int v, int i)
{
    return sin(0.7 * k + 1.3 * i + 0.4 * v) * (1.0 + 0.05 * i) - 0.02 * k;
}

static void check_case(const char *json, const mref *r)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        optim_var *vars[NV];
        rvar ref[NV];
        for (int j = 0; j < NV; j++) {
            memset(&ref[j], 0, sizeof ref[j]);
            ref[j].n = 1;
            for (int k = 0; k < VARS[j].rank; k++) ref[j].n *= (int)VARS[j].shape[k];
            ref[j].rows = (int)VARS[j].shape[0];
            ref[j].cols = VARS[j].rank == 2 ? (int)VARS[j].shape[1] : 0;
            ref[j].adamw = VARS[j].adamw;
            for (int i = 0; i < ref[j].n; i++) ref[j].w[i] = init_at(j, i);
            vars[j] = optim_test_var(VARS[j].name, dt, VARS[j].rank, VARS[j].shape, ref[j].w);
            for (int i = 0; i < ref[j].n; i++) ref[j].w[i] = optim_var_get(vars[j], i);
        }
        for (int k = 0; k < STEPS; k++) {
            double g[NV][MAXN];
            float gf[NV][MAXN];
            optim_grad_var p[NV];
            for (int j = 0; j < NV; j++) {
                for (int i = 0; i < ref[j].n; i++) g[j][i] = grad_at(k, j, i);
                p[j] = (optim_grad_var){
                    dense(dt, g[j], gf[j], VARS[j].rank, VARS[j].shape, ref[j].n), vars[j]};
                ref_step(r, &ref[j], g[j], k);
            }
            ot_step(opt, p, NV);
        }
        double rtol = dt == OPTIM_F64 ? 1e-10 : 2e-4, atol = dt == OPTIM_F64 ? 1e-12 : 2e-5;
        for (int j = 0; j < NV; j++) {
            optim_var *m = optim_get_slot(opt, vars[j], "momentum");
            optim_var *v = optim_get_slot(opt, vars[j], "velocity");
            assert_non_null(m);
            assert_int_equal(v != NULL, VARS[j].adamw);
            for (int i = 0; i < ref[j].n; i++) {
                assert_close(optim_var_get(vars[j], i), ref[j].w[i], rtol, atol);
                assert_close(optim_var_get(m, i), ref[j].m[i], rtol, atol);
                if (v) assert_close(optim_var_get(v, i), ref[j].v[i], rtol, atol);
            }
            optim_var_destroy(vars[j]);
        }
        assert_eq(optim_iterations(opt), STEPS);
        optim_destroy(opt);
    }
}

/* ---- trajectories -------------------------------------------------------------------- */

OPTIM_TEST(test_defaults)
{
    mref r = DEFAULTS;
    r.lr = 0.05;
    check_case("{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 0.05, "
               "\"exclude_layers\": [\"^out/\"]}}",
               &r);
}

OPTIM_TEST(test_options)
{
    mref r = {0.02, 0.8, 0.95, 1e-5, 3.0, -3.2, 1.2, 0.5, 0.9, NAN, 0.01, NAN, 3, 0};
    check_case(
        "{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 0.02, \"adam_beta_1\": 0.8, "
        "\"adam_beta_2\": 0.95, \"epsilon\": 1e-5, \"muon_a\": 3.0, \"muon_b\": -3.2, "
        "\"muon_c\": 1.2, \"adam_lr_ratio\": 0.5, \"momentum\": 0.9, \"ns_steps\": 3, "
        "\"nesterov\": false, \"rms_rate\": null, \"weight_decay\": 0.01, "
        "\"adam_weight_decay\": null, \"exclude_layers\": [\"^ou\", \"t/k\"]}}",
        &r);
    /* weight_decay None: the Muon variables are not decayed, the AdamW ones are. */
    mref n = DEFAULTS;
    n.lr = 0.1;
    n.wd = NAN;
    n.awd = 0.05;
    check_case(
        "{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 0.1, \"weight_decay\": null, "
        "\"adam_weight_decay\": 0.05, \"exclude_layers\": [\"out\"]}}",
        &n);
}

/* ---- Keras's own test values (muon_test.py) --------------------------------------------- */

static optim_var *step_once(const char *json, const char *name, int32_t rank, const int64_t *shape,
                            const double *w0, const double *g, optim_optimizer **out)
{
    optim_var *v = optim_test_var(name, OPTIM_F32, rank, shape, w0);
    float gf[4];
    int64_t n = 1;
    for (int32_t d = 0; d < rank; d++) n *= shape[d];
    for (int64_t i = 0; i < n; i++) gf[i] = (float)g[i];
    *out = optim_test_make(json);
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, gf, rank, shape)), v};
    ot_step(*out, &p, 1);
    return v;
}

OPTIM_TEST(test_keras_values)
{
    optim_optimizer *opt;
    const int64_t sq[2] = {2, 2}, four = 4;
    /* test_Newton_Schulz: with m = 0, no Nesterov, lr 1, no scaling or
     * decay, w = -NS(g). */
    const double z[4] = {0}, ns_in[4] = {0.2499, 0.9105, 0.2655, 0.8824};
    const double ns_out[4] = {-0.4422, 0.6457, 0.7285, 0.2968};
    optim_var *v = step_once(
        "{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 1.0, \"nesterov\": false, "
        "\"rms_rate\": null, \"weight_decay\": 0}}",
        "w", 2, sq, z, ns_in, &opt);
    for (int i = 0; i < 4; i++)
        assert_close(-optim_var_get(v, i), ns_out[i], 1e-3, 1e-3); /* Keras's tolerance */
    optim_test_free(opt, v);
    /* test_muon_single_step: lr 0.5, weight_decay 0 (Keras allows 1e-2; the
     * six digits it gives are matched). */
    const double w0[4] = {1, 2, 3, 4}, g[4] = {1, 6, 7, 2};
    const double want[4] = {0.988775, 1.887053, 2.873428, 3.97035};
    v = step_once(
        "{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 0.5, \"weight_decay\": 0}}",
        "w", 2, sq, w0, g, &opt);
    for (int i = 0; i < 4; i++) assert_close(optim_var_get(v, i), want[i], 0, 1e-6);
    optim_test_free(opt, v);
    /* test_adamw_single_step: a 1-D variable, lr 0.5 (no decay there). */
    const double want1[4] = {0.5, 1.5, 2.5, 3.5};
    v = step_once(
        "{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 0.5, \"adam_weight_decay\": 0}}",
        "test_vars", 1, &four, w0, g, &opt);
    for (int i = 0; i < 4; i++) assert_close(optim_var_get(v, i), want1[i], 1e-4, 1e-4);
    optim_test_free(opt, v);
    /* test_muon_weight_decay / test_adamw_weight_decay: lr 1, a zero
     * gradient moves nothing, the decay alone acts. */
    v = step_once(
        "{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 1.0, \"weight_decay\": 0.01}}",
        "w", 2, sq, w0, z, &opt);
    for (int i = 0; i < 4; i++) assert_close(optim_var_get(v, i), w0[i] * 0.99, 1e-6, 0);
    optim_test_free(opt, v);
    const double two = 2.0;
    v = step_once(
        "{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 1.0, \"adam_weight_decay\": 0.01}}",
        "s", 0, NULL, &two, z, &opt);
    assert_close(optim_var_get(v, 0), 1.98, 1e-6, 0);
    optim_test_free(opt, v);
}

/* test_should_use_adamw: which variables get a velocity. */
OPTIM_TEST(test_rule_choice)
{
    const char *names[4] = {"variable", "embedding/embeddings", "dense/kernel", "x"};
    const int64_t sq[2] = {2, 2};
    const double w[4] = {1, 2, 3, 4};
    const char *cfg[2] = {
        "{\"class_name\": \"Muon\", \"config\": {\"exclude_layers\": [\"var\"]}}",
        "{\"class_name\": \"Muon\", \"config\": {\"exclude_embeddings\": false}}"};
    const int want[2][4] = {{1, 1, 0, 0}, {0, 0, 0, 0}};
    for (int c = 0; c < 2; c++) {
        optim_optimizer *opt = optim_test_make(cfg[c]);
        optim_var *v[4];
        for (int i = 0; i < 4; i++) v[i] = optim_test_var(names[i], OPTIM_F64, 2, sq, w);
        assert_ok(optim_build(opt, v, 4), opt);
        for (int i = 0; i < 4; i++) {
            assert_non_null(optim_get_slot(opt, v[i], "momentum"));
            assert_eq(optim_get_slot(opt, v[i], "velocity") != NULL, want[c][i]);
            optim_var_destroy(v[i]);
        }
        /* Keras's build order: each variable's slots together. */
        assert_string_equal(optim_weight_name(opt, 1), "variable/momentum");
        if (c == 0) assert_string_equal(optim_weight_name(opt, 2), "variable/velocity");
        optim_destroy(opt);
    }
}

/* ---- sparse -------------------------------------------------------------------------- */

/* A sparse gradient (duplicates) gives, bit for bit, the dense step whose
 * gradient has the summed rows and zeros elsewhere, on both rules. */
OPTIM_TEST(test_sparse_dense_equivalent)
{
    const int64_t shape[2] = {5, 3}, idx[4] = {3, 0, 3, 4}, vshape[2] = {4, 3};
    double init[15], rows[12];
    for (int i = 0; i < 15; i++) init[i] = 0.1 * i - 0.6;
    for (int i = 0; i < 12; i++) rows[i] = cos(0.9 * i);
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *os =
            optim_test_make("{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 0.1}}");
        optim_optimizer *od =
            optim_test_make("{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 0.1}}");
        optim_var *vs[2], *vd[2];
        const char *names[2] = {"w", "embedding"};
        for (int j = 0; j < 2; j++) {
            vs[j] = optim_test_var(names[j], dt, 2, shape, init);
            vd[j] = optim_test_var(names[j], dt, 2, shape, init);
        }
        for (int k = 0; k < 3; k++) {
            double dense_g[15] = {0}, vals[12];
            float vf[12], df[15];
            for (int i = 0; i < 12; i++) vals[i] = rows[i] + k, vf[i] = (float)vals[i];
            for (int i = 0; i < 12; i++)
                dense_g[idx[i / 3] * 3 + i % 3] += dt == OPTIM_F64 ? vals[i] : (double)vf[i];
            for (int i = 0; i < 15; i++) df[i] = (float)dense_g[i];
            optim_tensor tv =
                optim_tensor_make(dt, dt == OPTIM_F64 ? (void *)vals : (void *)vf, 2, vshape);
            optim_tensor td =
                optim_tensor_make(dt, dt == OPTIM_F64 ? (void *)dense_g : (void *)df, 2, shape);
            optim_grad_var ps[2] = {{optim_grad_sparse(idx, 4, tv), vs[0]},
                                    {optim_grad_sparse(idx, 4, tv), vs[1]}};
            optim_grad_var pd[2] = {{optim_grad_dense(td), vd[0]}, {optim_grad_dense(td), vd[1]}};
            ot_step(os, ps, 2);
            ot_step(od, pd, 2);
        }
        for (int j = 0; j < 2; j++) {
            assert_vars_bitwise(vs[j], vd[j]);
            assert_vars_bitwise(optim_get_slot(os, vs[j], "momentum"),
                                optim_get_slot(od, vd[j], "momentum"));
            optim_var_destroy(vs[j]);
            optim_var_destroy(vd[j]);
        }
        optim_destroy(os);
        optim_destroy(od);
    }
}

/* ---- config ----------------------------------------------------------------------------- */

OPTIM_TEST(test_config)
{
    optim_optimizer *opt = optim_test_make("\"muon\"");
    char *text = optim_get_config(opt);
    cJSON *c = cJSON_Parse(text);
    /* Keras's keys after the base ones, in its order, with its defaults. */
    const char *tail = strstr(text, "\"adam_beta_1\"");
    assert_non_null(tail);
    assert_string_equal(
        tail,
        "\"adam_beta_1\":0.9,\"adam_beta_2\":0.999,\"epsilon\":1e-07,\"exclude_layers\":[],"
        "\"muon_a\":3.4445,\"muon_b\":-4.775,\"muon_c\":2.0315,\"adam_lr_ratio\":1,"
        "\"momentum\":0.95,\"ns_steps\":5,\"nesterov\":true,\"exclude_embeddings\":true,"
        "\"adam_weight_decay\":0.004,\"rms_rate\":0.2}");
    assert_eq(cJSON_GetObjectItem(c, "learning_rate")->valuedouble, 0.001);
    assert_eq(cJSON_GetObjectItem(c, "weight_decay")->valuedouble, 0.004);
    assert_null(cJSON_GetObjectItem(c, "is_legacy_optimizer"));
    cJSON_Delete(c);
    optim_free(text);
    optim_destroy(opt);
    ot_check_round_trip("\"muon\"");
    /* Keras's test_config, and every option changed. */
    ot_check_round_trip(
        "{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 0.5, \"epsilon\": 1e-5}}");
    ot_check_round_trip(
        "{\"class_name\": \"Muon\", \"config\": {\"exclude_layers\": [\"a\\\\.b\", \"^c\"], \"rms_rate\": null, "
        "\"adam_weight_decay\": null, \"weight_decay\": null, \"nesterov\": false, \"ns_steps\": 7, "
        "\"adam_lr_ratio\": 0.1, \"use_ema\": true, \"clipnorm\": 1.0}}");
    /* exclude_layers null is Keras's `exclude_layers or []`. */
    opt = optim_test_make("{\"class_name\": \"Muon\", \"config\": {\"exclude_layers\": null}}");
    text = optim_get_config(opt);
    assert_contains(text, "\"exclude_layers\":[]");
    optim_free(text);
    optim_destroy(opt);
}

OPTIM_TEST(test_bad_input)
{
    ot_expect_refused(CFG("\"adam_beta_1\": 1.0"), OPTIM_ERANGE, "adam_beta_1", NULL);
    ot_expect_refused(CFG("\"adam_beta_2\": -0.5"), OPTIM_ERANGE, "adam_beta_2", NULL);
    ot_expect_refused(CFG("\"epsilon\": -1"), OPTIM_ERANGE, "epsilon", NULL);
    ot_expect_refused(CFG("\"momentum\": 1.5"), OPTIM_ERANGE, "momentum", NULL);
    ot_expect_refused(CFG("\"ns_steps\": -1"), OPTIM_ERANGE, "ns_steps", NULL);
    ot_expect_refused(CFG("\"ns_steps\": 2.5"), OPTIM_ETYPE, "ns_steps", NULL);
    ot_expect_refused(CFG("\"rms_rate\": -0.2"), OPTIM_ERANGE, "rms_rate", NULL);
    ot_expect_refused(CFG("\"adam_lr_ratio\": \"x\""), OPTIM_ETYPE, "adam_lr_ratio", NULL);
    ot_expect_refused(CFG("\"exclude_layers\": \"dense\""), OPTIM_ETYPE, "exclude_layers", NULL);
    ot_expect_refused(CFG("\"exclude_layers\": [\"a\", 1]"), OPTIM_ETYPE, "exclude_layers[1]",
                      NULL);
    ot_expect_refused(CFG("\"exclude_layers\": [\"(\"]"), OPTIM_EINVAL, "regular expression", NULL);
    ot_expect_refused(CFG("\"lr\": 0.1"), OPTIM_EKEY, "lr",
                      NULL); /* Keras 3 ignores decay; lr is legacy */
    ot_expect_refused(CFG("\"is_legacy_optimizer\": true"), OPTIM_ENOTSUP, "Muon", NULL);
    /* A refused set leaves the old value. */
    optim_optimizer *opt = optim_test_make("\"muon\"");
    assert_status(optim_set_hyper(opt, "adam_beta_2", 1.0), OPTIM_ERANGE, opt);
    double v;
    assert_ok(optim_get_hyper(opt, "adam_beta_2", &v), opt);
    assert_eq(v, 0.999);
    optim_destroy(opt);
}

/* optim_config_put_after, the service Muon's get_config uses: a key put
 * after another, at the end when that one is absent, refused JSON. */
static int put_after_rc[4];
static int put_after_config(optim_optimizer *opt, optim_config *cfg)
{
    (void)opt;
    put_after_rc[0] = optim_config_put_after(cfg, "x", "[1]", "learning_rate");
    put_after_rc[1] = optim_config_put_after(cfg, "y", "\"s\"", "no_such_key");
    put_after_rc[2] = optim_config_put_after(cfg, "z", "{bad", "learning_rate");
    put_after_rc[3] = optim_config_put_after(NULL, "z", "1", "learning_rate");
    /* After the last key, then appended after it (the list's tail kept). */
    int rc = optim_config_put_after(cfg, "w", "2", "y");
    return rc ? rc : optim_config_put_after(cfg, "v", "3", NULL);
}
static void put_after_dense(const optim_dense_update *u) { (void)u; }

OPTIM_TEST(test_config_put_after)
{
    static const optim_class cls = {.size = sizeof(optim_class),
                                    .version = OPTIM_CLASS_VERSION,
                                    .name = "PutAfterProbe",
                                    .flags = OPTIM_CLASS_KERAS3_ONLY,
                                    .apply_dense = put_after_dense,
                                    .get_config = put_after_config};
    optim_optimizer *opt;
    optim_error err;
    assert_ok(optim_create(&opt, &cls, NULL, &err), &err);
    char *text = optim_get_config(opt);
    assert_non_null(text);
    assert_contains(text, "\"learning_rate\":0.0,\"x\":[1],\"weight_decay\"");
    assert_contains(text, ",\"y\":\"s\",\"w\":2,\"v\":3}");
    assert_null(strstr(text, "\"z\""));
    assert_int_equal(put_after_rc[0], 0);
    assert_int_equal(put_after_rc[1], 0);
    assert_int_equal(put_after_rc[2], OPTIM_EPARSE);
    assert_int_equal(put_after_rc[3], OPTIM_EINVAL);
    optim_free(text);
    optim_destroy(opt);
}

/* ---- threads -------------------------------------------------------------------------- */

/* 1, 2 and 3 threads give the same bits: a large matrix (the gemms), a
 * transposed one, a vector and a sparse table. */
OPTIM_TEST(test_threads_bitwise)
{
    const int64_t big[2] = {300, 200}, tall[2] = {90, 40}, vec = 1000, emb[2] = {50, 8},
                  vs[2] = {3, 8};
    double *init = malloc(60000 * sizeof *init);
    float *g = malloc(60000 * sizeof *g);
    for (int i = 0; i < 60000; i++) init[i] = sin(0.001 * i);
    optim_var *vars[3][4];
    optim_optimizer *opts[3];
    for (int t = 0; t < 3; t++) {
        opts[t] = optim_test_make(
            "{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 0.01, \"clipnorm\": 10}}");
        assert_ok(optim_set_num_threads(opts[t], t + 1), opts[t]);
        vars[t][0] = optim_test_var("big", OPTIM_F32, 2, big, init);
        vars[t][1] = optim_test_var("tall", OPTIM_F64, 2, tall, init);
        vars[t][2] = optim_test_var("vec", OPTIM_F32, 1, &vec, init);
        vars[t][3] = optim_test_var("table", OPTIM_F32, 2, emb, init);
        int64_t idx[3] = {7, 49, 7};
        float rows[24];
        double gd[3600];
        for (int i = 0; i < 24; i++) rows[i] = (float)(0.1 * i - 1);
        for (int k = 0; k < 3; k++) {
            for (int i = 0; i < 60000; i++) g[i] = (float)cos(0.37 * i + k);
            for (int i = 0; i < 3600; i++) gd[i] = cos(0.11 * i - k);
            optim_grad_var p[4] = {
                {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 2, big)), vars[t][0]},
                {optim_grad_dense(optim_tensor_make(OPTIM_F64, gd, 2, tall)), vars[t][1]},
                {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, &vec)), vars[t][2]},
                {optim_grad_sparse(idx, 3, optim_tensor_make(OPTIM_F32, rows, 2, vs)), vars[t][3]},
            };
            ot_step(opts[t], p, 4);
        }
    }
    for (int t = 1; t < 3; t++)
        for (int j = 0; j < 4; j++) {
            assert_vars_bitwise(vars[0][j], vars[t][j]);
            assert_vars_bitwise(optim_get_slot(opts[0], vars[0][j], "momentum"),
                                optim_get_slot(opts[t], vars[t][j], "momentum"));
        }
    for (int t = 0; t < 3; t++) {
        for (int j = 0; j < 4; j++) optim_var_destroy(vars[t][j]);
        optim_destroy(opts[t]);
    }
    free(init);
    free(g);
}

int main(void) { return optim_test_run(); }
