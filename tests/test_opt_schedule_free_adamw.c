/* ScheduleFreeAdamW against an independent double-precision reference written
 * from Defazio et al. 2024 (arXiv:2405.15682) and
 * keras/src/optimizers/schedule_free_adamw.py (Keras 3.14+):
 *
 *   y = the variable, z = "momentum" (starts as y), v = "velocity"
 *   y -= y * wd * lr                           (Keras 3 weight_decay, if set)
 *   lr_t = lr * min(t / warmup_steps, 1)        (warmup_steps > 0)
 *   v = beta_2 v + (1 - beta_2) g^2
 *   z' = z - lr_t g / (sqrt(v / (1 - beta_2^t)) + epsilon)
 *   x = (y - (1 - beta_1) z) / beta_1;  x' = (1 - 1/t) x + z' / t
 *   y = (1 - beta_1) z' + beta_1 x'
 *
 * 20-step trajectories in f32 and f64 (defaults, options, warmup, weight
 * decay), Keras's test checks, sparse = dense with zero rows, config keys and
 * round trips, bad input, thread counts. */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 20
#define CFG(body) "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {" body "}}"
#define N 7

typedef struct sref {
    double lr, b1, b2, eps, warmup, wd;
} sref;

typedef struct rvar {
    double y[N], z[N], v[N];
} rvar;

static void ref_step(const sref *r, rvar *s, const double *g, int k)
{
    double t = k + 1, lr = r->warmup > 0 ? r->lr * fmin(t / r->warmup, 1.0) : r->lr;
    for (int i = 0; i < N; i++) {
        s->y[i] -= s->y[i] * r->wd * r->lr;
        double z_old = s->z[i];
        s->v[i] = r->b2 * s->v[i] + (1 - r->b2) * g[i] * g[i];
        s->z[i] = z_old - lr * g[i] / (sqrt(s->v[i] / (1 - pow(r->b2, t))) + r->eps);
        double x = (s->y[i] - (1 - r->b1) * z_old) / r->b1;
        x = (1 - 1 / t) * x + s->z[i] / t;
        s->y[i] = (1 - r->b1) * s->z[i] + r->b1 * x;
    }
}

static double grad_at(int k, int i) { return sin(0.8 * k + 1.1 * i) * (1 + 0.1 * i) + 0.05; }

static void check_case(const char *json, const sref *r)
{
    const int64_t n = N;
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        rvar s;
        memset(&s, 0, sizeof s);
        for (int i = 0; i < N; i++) s.y[i] = 0.7 - 0.3 * i;
        optim_var *var = optim_test_var("dense/kernel", dt, 1, &n, s.y);
        for (int i = 0; i < N; i++) s.z[i] = s.y[i] = optim_var_get(var, i);
        for (int k = 0; k < STEPS; k++) {
            double g[N];
            float gf[N];
            for (int i = 0; i < N; i++) {
                gf[i] = (float)grad_at(k, i);
                g[i] = dt == OPTIM_F64 ? grad_at(k, i) : gf[i];
            }
            optim_grad_var p = {optim_grad_dense(optim_tensor_make(
                                    dt, dt == OPTIM_F64 ? (void *)g : (void *)gf, 1, &n)),
                                var};
            ot_step(opt, &p, 1);
            ref_step(r, &s, g, k);
        }
        double rtol = dt == OPTIM_F64 ? 1e-11 : 1e-4, atol = dt == OPTIM_F64 ? 1e-13 : 1e-5;
        optim_var *z = optim_get_slot(opt, var, "momentum"),
                  *v = optim_get_slot(opt, var, "velocity");
        assert_non_null(z);
        assert_non_null(v);
        for (int i = 0; i < N; i++) {
            assert_close(optim_var_get(var, i), s.y[i], rtol, atol);
            assert_close(optim_var_get(z, i), s.z[i], rtol, atol);
            assert_close(optim_var_get(v, i), s.v[i], rtol, atol);
        }
        optim_var_destroy(var);
        optim_destroy(opt);
    }
}

OPTIM_TEST(test_trajectories)
{
    sref def = {0.0025, 0.9, 0.999, 1e-8, 0, 0};
    check_case("\"schedulefreeadamw\"", &def);
    sref opt = {0.05, 0.8, 0.95, 1e-4, 0, 0};
    check_case(
        "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"learning_rate\": 0.05, \"beta_1\": 0.8, "
        "\"beta_2\": 0.95, \"epsilon\": 1e-4}}",
        &opt);
    sref warm = {0.05, 0.9, 0.999, 1e-8, 7, 0.01};
    check_case(
        "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"learning_rate\": 0.05, \"warmup_steps\": 7, "
        "\"weight_decay\": 0.01}}",
        &warm);
}

/* The paper's form (Keras with JAX), not the one Keras's TensorFlow and
 * torch backends run, where momentum_old aliases the updated z and y' =
 * (1 - 1/t) y + z'/t (docs/optimizers.md says why; issue 27, defect 3):
 * w = 1, g = 1, lr = 0.1, 3 steps, both in double here. */
OPTIM_TEST(test_paper_form_not_backend_alias)
{
    double paper = 1, alias = 1, zp = 1, za = 1, v = 0;
    for (int k = 0; k < 3; k++) {
        const double t = k + 1;
        v += (1 - v) * (1 - 0.999);
        const double step = 0.1 / (sqrt(v / (1 - pow(0.999, t))) + 1e-8);
        const double x = (paper - 0.1 * zp) / 0.9;
        zp -= step;
        paper = 0.1 * zp + 0.9 * ((1 - 1 / t) * x + zp / t);
        za -= step;
        alias = (1 - 1 / t) * alias + za / t;
    }
    optim_optimizer *opt = optim_test_make(
        "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"learning_rate\": 0.1}}");
    double one = 1;
    optim_var *w = optim_test_var("w", OPTIM_F64, 0, NULL, &one);
    for (int k = 0; k < 3; k++) ot_step_dense(opt, w, &one);
    const double got = optim_var_get(w, 0);
    optim_test_free(opt, w);
    if (fabs(got - paper) > 1e-15 * fabs(paper))
        print_error("3 steps: %.17g, the paper's form %.17g, the backends' alias %.17g\n", got,
                    paper, alias);
    assert_true(fabs(got - paper) <= 1e-15 * fabs(paper));
    assert_true(fabs(got - alias) > 5e-3);
}

/* The checks of schedule_free_adamw_test.py, with their numbers. */
OPTIM_TEST(test_keras_checks)
{
    const int64_t n3 = 3, n4 = 4;
    const double w4[4] = {1, 2, 3, 4}, w3[3] = {1, 2, 3};
    /* test_single_step: one step moves the variable. */
    optim_optimizer *o = optim_test_make(
        "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"learning_rate\": 0.5}}");
    optim_var *v = optim_test_var("v", OPTIM_F32, 1, &n4, w4);
    optim_grad_var p = {
        optim_grad_dense(optim_tensor_make(OPTIM_F32, (float[4]){1, 6, 7, 2}, 1, &n4)), v};
    ot_step(o, &p, 1);
    /* Step 1: z' = z - 0.5 g / (|g| + eps) = w - 0.5 sign(g); x' = z'; y = z'. */
    for (int i = 0; i < 4; i++) assert_close(optim_var_get(v, i), w4[i] - 0.5, 1e-6, 1e-6);
    optim_test_free(o, v);
    /* test_warmup: with warmup_steps 10 the first step is 10 times smaller. */
    double moved[2];
    for (int wu = 0; wu < 2; wu++) {
        o = optim_test_make(
            wu ? "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"learning_rate\": 0.5, \"warmup_steps\": 10}}"
               : "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"learning_rate\": 0.5, \"warmup_steps\": 0}}");
        v = optim_test_var("v", OPTIM_F64, 1, &n3, w3);
        p = (optim_grad_var){
            optim_grad_dense(optim_tensor_make(OPTIM_F64, (double[3]){1, 1, 1}, 1, &n3)), v};
        ot_step(o, &p, 1);
        moved[wu] = w3[0] - optim_var_get(v, 0);
        optim_test_free(o, v);
    }
    assert_close(moved[0], 0.5, 1e-7, 0);
    assert_close(moved[1], 0.05, 1e-7, 0);
    /* test_multiple_steps: 10 steps of +0.1 lower every element. */
    o = optim_test_make(
        "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"learning_rate\": 0.01}}");
    v = optim_test_var("v", OPTIM_F32, 1, &n3, w3);
    p = (optim_grad_var){
        optim_grad_dense(optim_tensor_make(OPTIM_F32, (float[3]){0.1f, 0.1f, 0.1f}, 1, &n3)), v};
    for (int k = 0; k < 10; k++) ot_step(o, &p, 1);
    for (int i = 0; i < 3; i++) assert_lt(optim_var_get(v, i), w3[i]);
    optim_test_free(o, v);
    /* test_weight_decay: a zero gradient on a variable excluded by name
     * leaves it at 2.0; not excluded, it decays by lr * wd on step 1. */
    o = optim_test_make(
        "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"learning_rate\": 1.0, \"weight_decay\": 0.004}}");
    const char *pat = "exclude";
    assert_ok(optim_exclude_from_weight_decay(o, NULL, 0, &pat, 1), o);
    double two = 2.0, zero = 0.0;
    optim_var *a = optim_test_var("var1", OPTIM_F64, 0, NULL, &two),
              *b = optim_test_var("exclude", OPTIM_F64, 0, NULL, &two);
    optim_grad_var pp[2] = {{optim_grad_dense(optim_tensor_make(OPTIM_F64, &zero, 0, NULL)), a},
                            {optim_grad_dense(optim_tensor_make(OPTIM_F64, &zero, 0, NULL)), b}};
    ot_step(o, pp, 2);
    ot_step(o, pp, 2);
    assert_eq(optim_var_get(b, 0), 2.0);
    /* z stays 2. Step 1: x' = z (weight 1), y = 2. Step 2: y = 2 - 0.008,
     * x = (y - 0.1 * 2) / 0.9, x' = (x + 2) / 2, y = 0.2 + 0.9 x'. */
    assert_close(optim_var_get(a, 0), 0.2 + 0.9 * (((1.992 - 0.2) / 0.9 + 2) / 2), 1e-12, 0);
    optim_test_free(o, a, b);
}

/* A sparse gradient with duplicates equals, bit for bit, the dense step with
 * the summed rows and zeros elsewhere. */
OPTIM_TEST(test_sparse_dense_equivalent)
{
    const int64_t shape[2] = {5, 2}, idx[3] = {4, 1, 4}, vshape[2] = {3, 2};
    double init[10];
    for (int i = 0; i < 10; i++) init[i] = 0.3 * i - 1;
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *os = optim_test_make(
            "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"learning_rate\": 0.1}}");
        optim_optimizer *od = optim_test_make(
            "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"learning_rate\": 0.1}}");
        optim_var *vs = optim_test_var("t", dt, 2, shape, init),
                  *vd = optim_test_var("t", dt, 2, shape, init);
        for (int k = 0; k < 3; k++) {
            double vals[6], dg[10] = {0};
            float vf[6], df[10];
            for (int i = 0; i < 6; i++) {
                vf[i] = (float)cos(k + 0.7 * i);
                vals[i] = dt == OPTIM_F64 ? cos(k + 0.7 * i) : vf[i];
                dg[idx[i / 2] * 2 + i % 2] += vals[i];
            }
            for (int i = 0; i < 10; i++) df[i] = (float)dg[i];
            optim_grad_var ps = {
                optim_grad_sparse(
                    idx, 3,
                    optim_tensor_make(dt, dt == OPTIM_F64 ? (void *)vals : (void *)vf, 2, vshape)),
                vs};
            optim_grad_var pd = {optim_grad_dense(optim_tensor_make(
                                     dt, dt == OPTIM_F64 ? (void *)dg : (void *)df, 2, shape)),
                                 vd};
            ot_step(os, &ps, 1);
            ot_step(od, &pd, 1);
        }
        assert_vars_bitwise(vs, vd);
        assert_vars_bitwise(optim_get_slot(os, vs, "momentum"), optim_get_slot(od, vd, "momentum"));
        assert_vars_bitwise(optim_get_slot(os, vs, "velocity"), optim_get_slot(od, vd, "velocity"));
        optim_var_destroy(vs);
        optim_var_destroy(vd);
        optim_destroy(os);
        optim_destroy(od);
    }
}

OPTIM_TEST(test_config)
{
    optim_optimizer *opt = optim_test_make("\"ScheduleFreeAdamW\"");
    char *text = optim_get_config(opt);
    assert_contains(text, "\"learning_rate\":0.0025,\"weight_decay\":null,");
    const char *tail = strstr(text, "\"beta_1\"");
    assert_non_null(tail);
    assert_string_equal(tail,
                        "\"beta_1\":0.9,\"beta_2\":0.999,\"epsilon\":1e-08,\"warmup_steps\":0}");
    optim_free(text);
    /* Slots: each variable's momentum then velocity. */
    const int64_t two = 2;
    const double w[2] = {1, 2};
    optim_var *a = optim_test_var("a", OPTIM_F64, 1, &two, w),
              *b = optim_test_var("b", OPTIM_F64, 1, &two, w);
    optim_var *vars[2] = {a, b};
    assert_ok(optim_build(opt, vars, 2), opt);
    const char *want[5] = {"iterations", "a/momentum", "a/velocity", "b/momentum", "b/velocity"};
    for (int i = 0; i < 5; i++) assert_string_equal(optim_weight_name(opt, (size_t)i), want[i]);
    assert_eq(optim_var_get(optim_get_slot(opt, b, "momentum"), 1), 2.0);
    optim_test_free(opt, a, b);
    ot_check_round_trip("\"ScheduleFreeAdamW\"");
    /* Keras's test_config. */
    ot_check_round_trip(
        "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"learning_rate\": 0.005, \"beta_1\": 0.95, "
        "\"beta_2\": 0.99, \"epsilon\": 1e-6, \"warmup_steps\": 100}}");
    ot_check_round_trip(
        "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"weight_decay\": 0.01, \"clipvalue\": 0.5, "
        "\"use_ema\": true, \"gradient_accumulation_steps\": 2}}");
}

OPTIM_TEST(test_bad_input)
{
    ot_expect_refused(CFG("\"beta_1\": 0"), OPTIM_ERANGE, "beta_1", NULL);
    ot_expect_refused(CFG("\"beta_1\": 1.1"), OPTIM_ERANGE, "beta_1", NULL);
    ot_expect_refused(CFG("\"beta_2\": 1.0"), OPTIM_ERANGE, "beta_2", NULL);
    ot_expect_refused(CFG("\"epsilon\": -1e-8"), OPTIM_ERANGE, "epsilon", NULL);
    ot_expect_refused(CFG("\"warmup_steps\": -1"), OPTIM_ERANGE, "warmup_steps", NULL);
    ot_expect_refused(CFG("\"warmup_steps\": 1.5"), OPTIM_ETYPE, "warmup_steps", NULL);
    ot_expect_refused(CFG("\"momentum\": 0.9"), OPTIM_EKEY, "momentum", NULL);
    ot_expect_refused(CFG("\"is_legacy_optimizer\": true"), OPTIM_ENOTSUP, "ScheduleFreeAdamW",
                      NULL);
    optim_optimizer *opt = optim_test_make("\"schedulefreeadamw\"");
    assert_status(optim_set_hyper(opt, "beta_1", 0.0), OPTIM_ERANGE, opt);
    double v;
    assert_ok(optim_get_hyper(opt, "beta_1", &v), opt);
    assert_eq(v, 0.9);
    optim_destroy(opt);
}

/* 1, 2 and 3 threads: the same bits (element-wise chunks of a large
 * variable, a sparse table). */
OPTIM_TEST(test_threads_bitwise)
{
    const int64_t n = 200003, tshape[2] = {40, 4}, vshape[2] = {2, 4}, idx[2] = {3, 39};
    double *init = malloc((size_t)n * sizeof *init);
    float *g = malloc((size_t)n * sizeof *g), rows[8] = {1, -2, 3, -4, 5, -6, 7, -8};
    for (int64_t i = 0; i < n; i++) init[i] = cos(0.001 * (double)i);
    optim_var *big[3], *tab[3];
    optim_optimizer *o[3];
    for (int t = 0; t < 3; t++) {
        o[t] = optim_test_make(
            "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"warmup_steps\": 2, \"weight_decay\": 0.1}}");
        assert_ok(optim_set_num_threads(o[t], t + 1), o[t]);
        big[t] = optim_test_var("big", OPTIM_F32, 1, &n, init);
        tab[t] = optim_test_var("tab", OPTIM_F64, 2, tshape, init);
        for (int k = 0; k < 3; k++) {
            for (int64_t i = 0; i < n; i++) g[i] = (float)sin(0.3 * (double)i + k);
            double r[8];
            for (int i = 0; i < 8; i++) r[i] = rows[i] * (k + 1);
            optim_grad_var p[2] = {
                {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, &n)), big[t]},
                {optim_grad_sparse(idx, 2, optim_tensor_make(OPTIM_F64, r, 2, vshape)), tab[t]}};
            ot_step(o[t], p, 2);
        }
    }
    for (int t = 1; t < 3; t++) {
        assert_vars_bitwise(big[0], big[t]);
        assert_vars_bitwise(tab[0], tab[t]);
        assert_vars_bitwise(optim_get_slot(o[0], big[0], "momentum"),
                            optim_get_slot(o[t], big[t], "momentum"));
    }
    for (int t = 0; t < 3; t++) {
        optim_var_destroy(big[t]);
        optim_var_destroy(tab[t]);
        optim_destroy(o[t]);
    }
    free(init);
    free(g);
}

int main(void) { return optim_test_run(); }
