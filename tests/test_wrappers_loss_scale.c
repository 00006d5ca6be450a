/* LossScaleOptimizer (Keras 3 and legacy) and ApplyIfFinite against an
 * independent double-precision reference: the loss-scale state machine
 * (skip and halve on Inf/NaN, double after dynamic_growth_steps finite
 * steps) re-implemented here from the Keras sources, around SGD and Adam
 * written out from their published rules; f32 and f64, dense and sparse
 * gradients with duplicate rows. Also: Keras 3 vs legacy iteration counting
 * on skipped steps, the caller's gradients left untouched, bit-exactness
 * against the bare inner optimizer, aggregation before the check, config
 * round trips with the inner optimizer nested, refusals, optim_wrap,
 * get/set_weights. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

#define N 5 /* dense variable "w" */
#define R 4 /* sparse variable "emb": [R, C] */
#define C 2
#define NI 3 /* sparse indices per step: {1, 3, 1} (a duplicate) */
#define STEPS 16

static const int64_t SPARSE_IDX[NI] = {1, 3, 1};

static double g_dense(int k, int i) { return sin(0.7 * k + 1.3 * i) * (1.0 + 0.1 * i) - 0.05 * k; }
static double g_rows(int k, int j, int c) { return cos(0.9 * k + 1.1 * j + 0.4 * c) * 0.5; }
static double w_init(int i) { return 0.5 - 0.3 * i; }
static double e_init(int i) { return 0.2 * i - 0.7; }

/* Which steps carry a non-finite gradient: 0 none, 1 Inf in the dense
 * gradient, 2 NaN in the dense gradient, 3 NaN in the sparse rows, 4 -Inf
 * in the dense gradient. */
static int bad_kind(int k)
{
    switch (k) {
    case 4: return 1;
    case 8: return 2;
    case 9: return 3;
    case 13: return 4;
    default: return 0;
    }
}


static void expect_json_fails(const char *json, int code, const char *needle)
{
    optim_optimizer *opt = (optim_optimizer *)1;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc != code) print_error("rc %d (%s), expected %d for %s\n", rc, err.msg, code, json);
    assert_status(rc, code, &err);
    assert_null(opt);
    if (!strstr(err.msg, needle)) print_error("message '%s' lacks '%s'\n", err.msg, needle);
    assert_contains(err.msg, needle);
}


static void make_vars(optim_dtype dt, optim_var **w, optim_var **e)
{
    double wi[N], ei[R * C];
    for (int i = 0; i < N; i++) wi[i] = w_init(i);
    for (int i = 0; i < R * C; i++) ei[i] = e_init(i);
    *w = optim_test_var("w", dt, 1, (int64_t[]){N}, wi);
    *e = optim_test_var("emb", dt, 2, (int64_t[]){R, C}, ei);
}

/* ---- the reference -------------------------------------------------------------- */

/* The inner update rule: SGD (w -= lr g) or Adam in Keras's form
 * (t = iterations + 1, alpha = lr sqrt(1 - b2^t) / (1 - b1^t),
 * w -= alpha m / (sqrt(v) + eps)), on the dense view of every gradient. */
typedef struct inner_ref {
    int adam;
    double lr, b1, b2, eps;
} inner_ref;

typedef struct ref_state {
    double w[N], e[R * C];
    double mw[N], me[R * C], vw[N], ve[R * C];
    double scale;
    int64_t counter, iterations, skipped;
} ref_state;

static void ref_inner_step(const inner_ref *r, double *x, double *m, double *v, const double *g,
                           int n, int64_t iterations)
{
    if (!r->adam) {
        for (int i = 0; i < n; i++) x[i] -= r->lr * g[i];
        return;
    }
    double t = (double)(iterations + 1);
    double alpha = r->lr * sqrt(1 - pow(r->b2, t)) / (1 - pow(r->b1, t));
    for (int i = 0; i < n; i++) {
        m[i] += (g[i] - m[i]) * (1 - r->b1);
        v[i] += (g[i] * g[i] - v[i]) * (1 - r->b2);
        x[i] -= alpha * m[i] / (sqrt(v[i]) + r->eps);
    }
}

/* The gradient a step hands the variable (before any scaling), rounded to
 * the variable's dtype as the test hands it over. */
static double true_dense(optim_dtype dt, int k, int i)
{
    return dt == OPTIM_F32 ? (double)(float)g_dense(k, i) : g_dense(k, i);
}
static double true_rows(optim_dtype dt, int k, int j, int c)
{
    return dt == OPTIM_F32 ? (double)(float)g_rows(k, j, c) : g_rows(k, j, c);
}

enum { MODE_K3, MODE_LEGACY, MODE_LEGACY_FIXED, MODE_AIF };

/* One reference step. Keras 3: skip -> counter 0, scale * 0.5, iterations
 * unchanged; finite -> inner step, then counter == G - 1 ? (0, scale * 2) :
 * counter + 1. Legacy: skip -> counter 0, scale max(scale / 2, 1),
 * iterations + 1; finite -> inner step, counter + 1 >= G ? (0, scale * 2 if
 * finite) : counter + 1. ApplyIfFinite: skip -> skipped + 1 only. */
static void ref_step(ref_state *s, const inner_ref *r, int mode, int growth, optim_dtype dt, int k)
{
    int bad = bad_kind(k) != 0;
    if (bad && mode != MODE_LEGACY_FIXED) {
        if (mode == MODE_K3) s->scale *= 0.5, s->counter = 0;
        if (mode == MODE_LEGACY) s->scale = fmax(s->scale / 2, 1), s->counter = 0, s->iterations++;
        if (mode == MODE_AIF) s->skipped++;
        return;
    }
    double gw[N], ge[R * C] = {0};
    for (int i = 0; i < N; i++) gw[i] = true_dense(dt, k, i);
    for (int j = 0; j < NI; j++)
        for (int c = 0; c < C; c++) ge[SPARSE_IDX[j] * C + c] += true_rows(dt, k, j, c);
    ref_inner_step(r, s->w, s->mw, s->vw, gw, N, s->iterations);
    ref_inner_step(r, s->e, s->me, s->ve, ge, R * C, s->iterations);
    s->iterations++;
    if (mode == MODE_K3) {
        if (s->counter == growth - 1) s->counter = 0, s->scale *= 2;
        else s->counter++;
    } else if (mode == MODE_LEGACY) {
        if (s->counter + 1 >= growth) {
            if (isfinite((float)(s->scale * 2))) s->scale *= 2;
            s->counter = 0;
        } else {
            s->counter++;
        }
    }
}

static void ref_init(ref_state *s, double scale)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < N; i++) s->w[i] = w_init(i);
    for (int i = 0; i < R * C; i++) s->e[i] = e_init(i);
    s->scale = scale;
}

/* ---- driving the library -------------------------------------------------------- */

/* Step k's gradients multiplied by `scale` (the caller scaled the loss),
 * with step k's Inf/NaN, in the test's own buffers. */
typedef struct grads {
    float wf[N], ef[NI * C];
    double wd[N], ed[NI * C];
    optim_grad_var p[2];
} grads;

static void fill_grads(grads *g, optim_dtype dt, int k, double scale, optim_var *w, optim_var *e)
{
    memset(g, 0, sizeof *g); /* padding too: the test compares whole structs */
    for (int i = 0; i < N; i++) {
        g->wd[i] = true_dense(dt, k, i) * scale;
        g->wf[i] = (float)true_dense(dt, k, i) * (float)scale;
    }
    for (int j = 0; j < NI; j++)
        for (int c = 0; c < C; c++) {
            g->ed[j * C + c] = true_rows(dt, k, j, c) * scale;
            g->ef[j * C + c] = (float)true_rows(dt, k, j, c) * (float)scale;
        }
    switch (bad_kind(k)) {
    case 1: g->wd[2] = INFINITY, g->wf[2] = INFINITY; break;
    case 2: g->wd[0] = NAN, g->wf[0] = NAN; break;
    case 3: g->ed[3] = NAN, g->ef[3] = NAN; break;
    case 4: g->wd[4] = -INFINITY, g->wf[4] = -INFINITY; break;
    default: break;
    }
    int f = dt == OPTIM_F32;
    g->p[0].var = w;
    g->p[0].grad = optim_grad_dense(
        optim_tensor_make(dt, f ? (void *)g->wf : (void *)g->wd, 1, (int64_t[]){N}));
    g->p[1].var = e;
    g->p[1].grad = optim_grad_sparse(
        SPARSE_IDX, NI,
        optim_tensor_make(dt, f ? (void *)g->ef : (void *)g->ed, 2, (int64_t[]){NI, C}));
}

static void check_vars(optim_var *w, optim_var *e, const ref_state *s, optim_dtype dt)
{
    double rtol = dt == OPTIM_F32 ? 1e-4 : 1e-11, atol = dt == OPTIM_F32 ? 1e-5 : 1e-12;
    for (int i = 0; i < N; i++) assert_close(optim_var_get(w, i), s->w[i], rtol, atol);
    for (int i = 0; i < R * C; i++) assert_close(optim_var_get(e, i), s->e[i], rtol, atol);
}

static double lso_scale(optim_optimizer *opt)
{
    double s = -1;
    assert_ok(optim_loss_scale_get(opt, &s), opt);
    return s;
}

static int64_t lso_counter(optim_optimizer *opt)
{
    int64_t c = -1;
    assert_ok(optim_loss_scale_counter(opt, &c), opt);
    return c;
}

/* Runs STEPS steps of `json` (mode as above) next to the reference and
 * checks variables, scale, counter, iterations and skips after every step. */
static void check_trajectory(const char *json, int mode, const inner_ref *r, double init_scale,
                             int growth)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = optim_test_make(json);
        optim_var *w, *e;
        make_vars(dt, &w, &e);
        ref_state s;
        ref_init(&s, init_scale);
        for (int k = 0; k < STEPS; k++) {
            grads g;
            /* Keras 3 gets the scaled gradients; legacy the caller unscales
             * first (get_unscaled_gradients); ApplyIfFinite has no scale. */
            fill_grads(&g, dt, k, mode == MODE_AIF ? 1.0 : s.scale, w, e);
            grads keep;
            memcpy(&keep, &g, sizeof g); /* with the padding, unlike `keep = g` */
            if (mode == MODE_LEGACY || mode == MODE_LEGACY_FIXED)
                assert_ok(optim_unscale_gradients(opt, g.p, 2), opt);
            int rc = optim_apply_gradients(opt, g.p, 2, 0);
            if (rc) print_error("step %d: %s\n", k, optim_errmsg(opt));
            assert_ok(rc, opt);
            if (mode == MODE_K3) /* the caller's gradients are borrowed, never written */
                assert_memory_equal(&keep, &g, sizeof g);
            ref_step(&s, r, mode, growth, dt, k);
            if (mode != MODE_LEGACY_FIXED) check_vars(w, e, &s, dt);
            assert_eq(optim_iterations(opt), s.iterations);
            assert_eq(optim_iterations(optim_wrapper_inner(opt)), s.iterations);
            if (mode == MODE_AIF) {
                assert_eq(optim_skipped_steps(opt), s.skipped);
            } else if (mode != MODE_LEGACY_FIXED) {
                assert_eq(lso_scale(opt), s.scale);
                assert_int_equal(lso_counter(opt), s.counter);
            }
        }
        optim_destroy(opt);
        optim_var_destroy(w);
        optim_var_destroy(e);
    }
}

#define SGD_K3 "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1}}"
#define ADAM_K3 "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01}}"
#define SGD_LEG \
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"is_legacy_optimizer\": true}}"
#define ADAM_LEG \
    "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01, \"is_legacy_optimizer\": true}}"

static const inner_ref SGD_REF = {0, 0.1, 0, 0, 0};
static const inner_ref ADAM_REF = {1, 0.01, 0.9, 0.999, 1e-7};

OPTIM_TEST(test_keras3_sgd)
{
    check_trajectory(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"initial_scale\": 1024.0, \"dynamic_growth_steps\": 3}}",
        MODE_K3, &SGD_REF, 1024, 3);
}

OPTIM_TEST(test_keras3_adam)
{
    check_trajectory(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " ADAM_K3
        ", \"initial_scale\": 256.0, \"dynamic_growth_steps\": 3}}",
        MODE_K3, &ADAM_REF, 256, 3);
    /* dynamic_growth_steps 1: the scale doubles after every finite step. */
    check_trajectory(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " ADAM_K3
        ", \"initial_scale\": 4.0, \"dynamic_growth_steps\": 1}}",
        MODE_K3, &ADAM_REF, 4, 1);
}

OPTIM_TEST(test_legacy_sgd)
{
    check_trajectory(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"initial_scale\": 1024.0, \"dynamic_growth_steps\": 3, \"is_legacy_optimizer\": true}}",
        MODE_LEGACY, &SGD_REF, 1024, 3);
}

OPTIM_TEST(test_legacy_adam)
{
    /* Adam's bias correction sees the iterations a skipped step added. */
    check_trajectory(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " ADAM_LEG
        ", \"initial_scale\": 256.0, \"dynamic_growth_steps\": 3, \"is_legacy_optimizer\": true}}",
        MODE_LEGACY, &ADAM_REF, 256, 3);
    /* The floor of 1: from 2, two skips give 1 then 1. */
    check_trajectory(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " ADAM_LEG
        ", \"initial_scale\": 2.0, \"dynamic_growth_steps\": 5, \"is_legacy_optimizer\": true}}",
        MODE_LEGACY, &ADAM_REF, 2, 5);
}

OPTIM_TEST(test_apply_if_finite)
{
    check_trajectory(
        "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": " ADAM_K3 "}}",
        MODE_AIF, &ADAM_REF, 1, 1);
    check_trajectory(
        "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"is_legacy_optimizer\": true}}",
        MODE_AIF, &SGD_REF, 1, 1);
}

/* Keras 3 vs legacy on one skipped step, side by side. */
OPTIM_TEST(test_iterations_on_skip)
{
    optim_optimizer *k3 = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3 "}}");
    optim_optimizer *lg = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"is_legacy_optimizer\": true}}");
    optim_optimizer *af = optim_test_make(
        "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": " SGD_K3 "}}");
    optim_var *w, *e;
    make_vars(OPTIM_F32, &w, &e);
    float g[N] = {1, 2, INFINITY, 4, 5};
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, (int64_t[]){N})), w};
    optim_optimizer *all[3] = {k3, lg, af};
    for (int i = 0; i < 3; i++) {
        assert_ok(optim_apply_gradients(all[i], &p, 1, 0), all[i]);
        for (int j = 0; j < N; j++) assert_eq(optim_var_get(w, j), (double)(float)w_init(j));
    }
    assert_eq(optim_iterations(k3), 0); /* Keras 3: the inner did not run */
    assert_eq(optim_iterations(lg), 1); /* legacy: do_not_apply_fn */
    assert_eq(optim_iterations(optim_wrapper_inner(lg)), 1);
    assert_eq(optim_iterations(af), 0);
    assert_eq(optim_skipped_steps(af), 1);
    assert_eq(lso_scale(k3), 16384.0);
    assert_eq(lso_scale(lg), 16384.0);
    /* The weights exist after a first step that was skipped. */
    assert_eq(optim_weights_count(k3), 3);
    assert_eq(optim_weights_count(lg), 3);
    assert_eq(optim_weights_count(af), 2);
    for (int i = 0; i < 3; i++) optim_destroy(all[i]);
    optim_var_destroy(w);
    optim_var_destroy(e);
}

/* Growth at the top of float32: Keras 3 lets the scale become Inf, legacy
 * keeps it (_assign_if_finite). Halving without a floor in Keras 3. */
OPTIM_TEST(test_scale_limits)
{
    optim_optimizer *k3 = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"initial_scale\": 1.7014118346046923e38, \"dynamic_growth_steps\": 1}}");
    optim_optimizer *lg = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"initial_scale\": 1.7014118346046923e38, \"dynamic_growth_steps\": 1, "
        "\"is_legacy_optimizer\": true}}");
    optim_var *w, *e;
    make_vars(OPTIM_F64, &w, &e);
    double g[N] = {0};
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, (int64_t[]){N})), w};
    assert_ok(optim_apply_gradients(k3, &p, 1, 0), k3);
    assert_ok(optim_apply_gradients(lg, &p, 1, 0), lg);
    assert_eq(fabs(lso_scale(k3)), INFINITY);
    assert_eq(lso_scale(lg), 1.7014118346046923e38);
    assert_int_equal(lso_counter(lg), 0);
    optim_destroy(k3);
    optim_destroy(lg);
    /* Keras 3 halves below 1: 2 -> 1 -> 0.5 -> 0.25. */
    k3 = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"initial_scale\": 2.0}}");
    g[1] = NAN;
    for (int i = 0; i < 3; i++) assert_ok(optim_apply_gradients(k3, &p, 1, 0), k3);
    assert_eq(lso_scale(k3), 0.25);
    optim_destroy(k3);
    optim_var_destroy(w);
    optim_var_destroy(e);
}

/* Legacy dynamic=false: a fixed scale, no weights, no skipping. */
OPTIM_TEST(test_legacy_fixed)
{
    const char *json =
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"dynamic\": false, \"initial_scale\": 0.1, \"dynamic_growth_steps\": null, "
        "\"is_legacy_optimizer\": true}}";
    optim_optimizer *opt = optim_test_make(json);
    assert_eq(lso_scale(opt), (double)0.1f);
    int64_t c;
    assert_status(optim_loss_scale_counter(opt, &c), OPTIM_ENOTSUP, opt);
    assert_contains(optim_errmsg(opt), "dynamic");
    double scaled;
    assert_ok(optim_scale_loss(opt, 3.0, &scaled), opt);
    assert_eq(scaled, 3.0 * (double)0.1f);
    optim_var *w, *e;
    make_vars(OPTIM_F64, &w, &e);
    double g[N] = {0.1, 0.2, 0.3, NAN, 0.5};
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, (int64_t[]){N})), w};
    assert_ok(optim_unscale_gradients(opt, &p, 1), opt);
    double r = (double)(1.0f / 0.1f);
    assert_eq(g[0], 0.1 * r);
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    assert_nan(optim_var_get(w, 3)); /* applied, not skipped */
    assert_eq(optim_var_get(w, 0), w_init(0) - 0.1 * (0.1 * r));
    assert_eq(optim_iterations(opt), 1);
    assert_eq(optim_weights_count(opt), 1); /* iterations; SGD has no slots */
    assert_eq(lso_scale(opt), (double)0.1f);
    /* The counter and trajectory of a fixed scale never change. */
    check_trajectory(json, MODE_LEGACY_FIXED, &SGD_REF, (double)0.1f, 1);
    optim_destroy(opt);
    optim_var_destroy(w);
    optim_var_destroy(e);
}

/* Keras 3's unscaling is g / S in the gradient's dtype on copies: the
 * wrapper equals the bare inner optimizer fed g / S, bit for bit, with a
 * scale that is not a power of two, sparse duplicates and a gradient large
 * enough for the threaded loops. */
OPTIM_TEST(test_bit_exact_vs_inner)
{
    enum { BIG = 70001 };
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        size_t es = d ? 8 : 4;
        optim_optimizer *lso = optim_test_make(
            "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": "
            "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01, \"amsgrad\": true}}, "
            "\"initial_scale\": 1000.0, \"dynamic_growth_steps\": 100}}");
        optim_optimizer *bare = optim_test_make(
            "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01, \"amsgrad\": true}}");
        double *zero = calloc(BIG, sizeof *zero);
        optim_var *a1 = optim_test_var("big", dt, 1, (int64_t[]){BIG}, zero),
                  *a2 = optim_test_var("big", dt, 1, (int64_t[]){BIG}, zero);
        optim_var *w1, *e1, *w2, *e2;
        make_vars(dt, &w1, &e1);
        make_vars(dt, &w2, &e2);
        void *gb = malloc(BIG * es), *gb2 = malloc(BIG * es);
        for (int k = 0; k < 5; k++) {
            grads g, h;
            fill_grads(&g, dt, k + 20, 1000.0 * 1.37, w1, e1); /* not the scale: any values */
            for (int i = 0; i < BIG; i++) {
                double x = sin(0.001 * i + k) * 1000.0;
                if (d) ((double *)gb)[i] = x;
                else ((float *)gb)[i] = (float)x;
            }
            h = g;
            /* The test's g / S: float32 divides by (float)S, float64 by S. */
            for (int i = 0; i < N; i++) h.wf[i] = g.wf[i] / 1000.0f, h.wd[i] = g.wd[i] / 1000.0;
            for (int i = 0; i < NI * C; i++)
                h.ef[i] = g.ef[i] / 1000.0f, h.ed[i] = g.ed[i] / 1000.0;
            for (int i = 0; i < BIG; i++) {
                if (d) ((double *)gb2)[i] = ((double *)gb)[i] / 1000.0;
                else ((float *)gb2)[i] = ((float *)gb)[i] / 1000.0f;
            }
            optim_grad_var p1[3] = {
                {g.p[0].grad, w1},
                {g.p[1].grad, e1},
                {optim_grad_dense(optim_tensor_make(dt, gb, 1, (int64_t[]){BIG})), a1}};
            p1[0].grad.dense.data = d ? (void *)g.wd : (void *)g.wf;
            p1[1].grad.sparse.values.data = d ? (void *)g.ed : (void *)g.ef;
            optim_grad_var p2[3] = {
                {p1[0].grad, w2},
                {p1[1].grad, e2},
                {optim_grad_dense(optim_tensor_make(dt, gb2, 1, (int64_t[]){BIG})), a2}};
            p2[0].grad.dense.data = d ? (void *)h.wd : (void *)h.wf;
            p2[1].grad.sparse.values.data = d ? (void *)h.ed : (void *)h.ef;
            assert_ok(optim_apply_gradients(lso, p1, 3, 0), lso);
            assert_ok(optim_apply_gradients(bare, p2, 3, 0), bare);
        }
        assert_memory_equal(optim_var_data(w1), optim_var_data(w2), N * es);
        assert_memory_equal(optim_var_data(e1), optim_var_data(e2), R * C * es);
        assert_memory_equal(optim_var_data(a1), optim_var_data(a2), BIG * es);
        assert_memory_equal(optim_var_data(optim_get_slot(lso, a1, "vhat")),
                            optim_var_data(optim_get_slot(bare, a2, "vhat")), BIG * es);
        /* A large gradient with one Inf at its very end is skipped. */
        if (d) ((double *)gb)[BIG - 1] = INFINITY;
        else ((float *)gb)[BIG - 1] = INFINITY;
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(dt, gb, 1, (int64_t[]){BIG})), a1};
        assert_ok(optim_apply_gradients(lso, &p, 1, 0), lso);
        assert_memory_equal(optim_var_data(a1), optim_var_data(a2), BIG * es);
        assert_eq(lso_scale(lso), 500.0);
        assert_eq(optim_iterations(lso), 5);
        free(gb);
        free(gb2);
        free(zero);
        optim_destroy(lso);
        optim_destroy(bare);
        optim_var_destroy(a1);
        optim_var_destroy(a2);
        optim_var_destroy(w1);
        optim_var_destroy(w2);
        optim_var_destroy(e1);
        optim_var_destroy(e2);
    }
}

/* ---- aggregation, transformers, errors -------------------------------------------------------- */

typedef struct agg_ctx {
    int calls;
    int inject_inf;
} agg_ctx;

/* A stand-in for the sum over two replicas: doubles every gradient (in
 * place, on the copies the step owns), or puts an Inf in. */
static int agg_double(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    (void)err;
    agg_ctx *c = user;
    c->calls++;
    for (size_t i = 0; i < n; i++) {
        optim_tensor *t = pairs[i].grad.kind == OPTIM_GRAD_DENSE ? &pairs[i].grad.dense
                                                                 : &pairs[i].grad.sparse.values;
        int64_t m = optim_tensor_numel(t);
        for (int64_t j = 0; j < m; j++) {
            if (t->dtype == OPTIM_F32) ((float *)t->data)[j] *= 2;
            else ((double *)t->data)[j] *= 2;
        }
        if (c->inject_inf && m > 0) {
            if (t->dtype == OPTIM_F32) ((float *)t->data)[0] = INFINITY;
            else ((double *)t->data)[0] = INFINITY;
        }
    }
    return 0;
}

static int agg_fail(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    (void)user, (void)pairs, (void)n;
    snprintf(err->msg, sizeof err->msg, "replica 3 is gone");
    return OPTIM_EIO;
}

static int transformer(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    (void)user, (void)pairs, (void)n, (void)err;
    return 0;
}

OPTIM_TEST(test_aggregation)
{
    const char *json =
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"initial_scale\": 8.0}}";
    optim_optimizer *opt = optim_test_make(json);
    agg_ctx c = {0, 0};
    assert_ok(optim_set_gradient_aggregator(optim_wrapper_inner(opt), agg_double, &c),
              optim_wrapper_inner(opt));
    optim_var *w, *e;
    make_vars(OPTIM_F64, &w, &e);
    double g[N] = {8, 16, 24, 32, 40}, keep[N];
    memcpy(keep, g, sizeof g);
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, (int64_t[]){N})), w};
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    assert_int_equal(c.calls, 1); /* once, by the wrapper; the inner does not aggregate again */
    for (int i = 0; i < N; i++) assert_eq(optim_var_get(w, i), w_init(i) - 0.1 * (2.0 * (i + 1)));
    assert_memory_equal(g, keep, sizeof g);
    /* The check sees the aggregated gradients: an Inf from another replica skips. */
    c.inject_inf = 1;
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    assert_int_equal(c.calls, 2);
    assert_eq(lso_scale(opt), 4.0);
    assert_eq(optim_iterations(opt), 1);
    /* experimental_aggregate_gradients=False: no aggregation at all. */
    c.inject_inf = 0;
    assert_ok(optim_apply_gradients(opt, &p, 1, OPTIM_APPLY_NO_AGGREGATE), opt);
    assert_int_equal(c.calls, 2);
    for (int i = 0; i < N; i++)
        assert_close(optim_var_get(w, i),
                     w_init(i) - 0.1 * (2.0 * (i + 1)) - 0.1 * (8.0 * (i + 1) / 4.0), 1e-15, 0);
    /* A failing aggregator fails the step; nothing changes. */
    optim_set_gradient_aggregator(opt, agg_fail, NULL); /* the wrapper's own comes first */
    double before[N];
    for (int i = 0; i < N; i++) before[i] = optim_var_get(w, i);
    int rc = optim_apply_gradients(opt, &p, 1, 0);
    assert_status(rc, OPTIM_EIO, opt);
    assert_contains(optim_errmsg(opt), "replica 3 is gone");
    for (int i = 0; i < N; i++) assert_eq(optim_var_get(w, i), before[i]);
    assert_eq(lso_scale(opt), 4.0);
    assert_eq(optim_iterations(opt), 2);
    optim_set_gradient_aggregator(opt, NULL, NULL);
    /* Transformers belong to the inner optimizer. */
    assert_ok(optim_add_gradient_transformer(opt, transformer, NULL), opt);
    rc = optim_apply_gradients(opt, &p, 1, 0);
    assert_status(rc, OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "inner optimizer");
    optim_destroy(opt);
    optim_var_destroy(w);
    optim_var_destroy(e);
}

static double nan_lr(void *user)
{
    (void)user;
    return NAN;
}

/* Bad input: refused on the skip path as on the step path, nothing changes. */
OPTIM_TEST(test_bad_input)
{
    const char *jsons[2] = {
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"initial_scale\": 8.0}}",
        "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": " SGD_K3 "}}",
    };
    for (int j = 0; j < 2; j++) {
        optim_optimizer *opt = optim_test_make(jsons[j]);
        optim_var *w, *e;
        make_vars(OPTIM_F32, &w, &e);
        float g[N] = {1, 2, INFINITY, 4, 5}, g6[6] = {0};
        float rows[NI * C] = {0}, full[R * C] = {0};
        int64_t bad_idx[NI] = {0, 7, 1};
        optim_grad_var p[2] = {
            {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, (int64_t[]){N})), w},
            {optim_grad_dense(optim_tensor_make(OPTIM_F32, g6, 1, (int64_t[]){6})), e}};
        /* shape */
        assert_status(optim_apply_gradients(opt, p, 2, 0), OPTIM_ESHAPE, opt);
        assert_contains(optim_errmsg(opt), "'emb'");
        /* index range (sparse) */
        p[1].grad = optim_grad_sparse(bad_idx, NI,
                                      optim_tensor_make(OPTIM_F32, rows, 2, (int64_t[]){NI, C}));
        assert_status(optim_apply_gradients(opt, p, 2, 0), OPTIM_ERANGE, opt);
        assert_contains(optim_errmsg(opt), "index 7");
        /* dtype */
        double gd[N] = {0};
        p[1].grad = optim_grad_dense(optim_tensor_make(OPTIM_F64, gd, 1, (int64_t[]){N}));
        p[1].var = w;
        assert_status(optim_apply_gradients(opt, &p[1], 1, 0), OPTIM_EDTYPE, opt);
        /* the same variable twice */
        p[1] = p[0];
        assert_status(optim_apply_gradients(opt, p, 2, 0), OPTIM_EINVAL, opt);
        assert_contains(optim_errmsg(opt), "more than once");
        /* no gradient at all, NULL pairs, NULL variable */
        p[1].grad = optim_grad_none();
        assert_status(optim_apply_gradients(opt, &p[1], 1, 0), OPTIM_EINVAL, opt);
        assert_contains(optim_errmsg(opt), "no gradients");
        assert_status(optim_apply_gradients(opt, NULL, 2, 0), OPTIM_EINVAL, opt);
        p[1].var = NULL;
        assert_status(optim_apply_gradients(opt, &p[1], 1, 0), OPTIM_EINVAL, opt);
        /* not trainable */
        optim_var_set_trainable(e, 0);
        p[1].var = e;
        p[1].grad = optim_grad_dense(optim_tensor_make(OPTIM_F32, full, 2, (int64_t[]){R, C}));
        assert_status(optim_apply_gradients(opt, &p[1], 1, 0), OPTIM_EINVAL, opt);
        assert_contains(optim_errmsg(opt), "not trainable");
        optim_var_set_trainable(e, 1);
        /* Nothing changed: no weights yet, no skip counted, no step. */
        assert_eq(optim_weights_count(opt), 1);
        assert_eq(optim_iterations(opt), 0);
        for (int i = 0; i < N; i++) assert_eq(optim_var_get(w, i), (double)(float)w_init(i));
        if (j == 0) assert_eq(lso_scale(opt), 8.0);
        else assert_eq(optim_skipped_steps(opt), 0);
        /* The inner optimizer failing on a finite step: its message, no
         * change of scale, counter, skips or iterations. */
        g[2] = 3;
        assert_ok(optim_set_hyper_fn(optim_wrapper_inner(opt), "learning_rate", nan_lr, NULL),
                  optim_wrapper_inner(opt));
        int rc = optim_apply_gradients(opt, p, 1, 0);
        assert_status(rc, OPTIM_ERANGE, opt);
        assert_contains(optim_errmsg(opt), "inner optimizer");
        assert_contains(optim_errmsg(opt), "learning_rate");
        assert_eq(optim_iterations(opt), 0);
        for (int i = 0; i < N; i++) assert_eq(optim_var_get(w, i), (double)(float)w_init(i));
        if (j == 0) {
            assert_eq(lso_scale(opt), 8.0);
            assert_int_equal(lso_counter(opt), 0);
        } else {
            assert_eq(optim_skipped_steps(opt), 0);
        }
        /* Variables unknown to a built inner optimizer. */
        optim_optimizer *in = optim_wrapper_inner(opt);
        assert_ok(optim_set_hyper(in, "learning_rate", 0.1), in);
        assert_ok(optim_build(in, &w, 1), in);
        g[2] = INFINITY;
        p[0].var = e;
        p[0].grad = optim_grad_dense(optim_tensor_make(OPTIM_F32, full, 2, (int64_t[]){R, C}));
        assert_status(optim_apply_gradients(opt, p, 1, 0), OPTIM_ENOTFOUND, opt);
        optim_destroy(opt);
        optim_var_destroy(w);
        optim_var_destroy(e);
    }
    /* The loss-scale functions on another class, NULL arguments. */
    optim_optimizer *sgd = optim_test_make(SGD_K3);
    double s;
    int64_t c;
    assert_status(optim_loss_scale_get(sgd, &s), OPTIM_EINVAL, sgd);
    assert_contains(optim_errmsg(sgd), "LossScaleOptimizer");
    assert_status(optim_loss_scale_counter(sgd, &c), OPTIM_EINVAL, sgd);
    /* scale_loss works on any optimizer: Keras 3's loss * loss_scale_factor
     * (None: the loss itself). */
    assert_ok(optim_scale_loss(sgd, 1.5, &s), sgd);
    assert_eq(s, 1.5);
    assert_status(optim_scale_loss(sgd, 1.5, NULL), OPTIM_EINVAL, sgd);
    assert_status(optim_unscale_gradients(sgd, NULL, 0), OPTIM_EINVAL, sgd);
    assert_status(optim_loss_scale_get(NULL, &s), OPTIM_EINVAL, NULL);
    assert_eq(optim_skipped_steps(sgd), -1);
    assert_eq(optim_skipped_steps(NULL), -1);
    optim_destroy(sgd);
    optim_optimizer *lso = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3 "}}");
    assert_status(optim_loss_scale_get(lso, NULL), OPTIM_EINVAL, lso);
    assert_status(optim_loss_scale_counter(lso, NULL), OPTIM_EINVAL, lso);
    assert_status(optim_scale_loss(lso, 1.0, NULL), OPTIM_EINVAL, lso);
    assert_eq(optim_skipped_steps(lso), -1);
    /* optim_unscale_gradients checks before it writes anything. */
    optim_var *w, *e;
    make_vars(OPTIM_F64, &w, &e);
    double g[N] = {1, 2, 3, 4, 5}, g2[3] = {1, 2, 3};
    optim_grad_var p[2] = {
        {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, (int64_t[]){N})), w},
        {optim_grad_dense(optim_tensor_make(OPTIM_F64, g2, 1, (int64_t[]){3})), e}};
    assert_status(optim_unscale_gradients(lso, p, 2), OPTIM_ESHAPE, lso);
    assert_eq(g[0], 1);
    assert_eq(g[4], 5);
    p[1].grad = optim_grad_none();
    assert_ok(optim_unscale_gradients(lso, p, 2), lso); /* Keras 3: g / S */
    assert_eq(g[0], 1.0 / 32768.0);
    optim_destroy(lso);
    optim_var_destroy(w);
    optim_var_destroy(e);
}

/* scale_loss: Keras 3 uses initial_scale as given before build, the float32
 * weight after; legacy is float32 throughout. */
OPTIM_TEST(test_scale_loss)
{
    optim_optimizer *k3 = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"initial_scale\": 0.1}}");
    optim_optimizer *lg = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"initial_scale\": 0.1, \"is_legacy_optimizer\": true}}");
    double s;
    assert_ok(optim_scale_loss(k3, 2.0, &s), k3);
    assert_eq(s, 2.0 * 0.1);
    assert_eq(lso_scale(k3), 0.1);
    assert_ok(optim_scale_loss(lg, 2.0, &s), lg);
    assert_eq(s, 2.0 * (double)0.1f);
    optim_var *w, *e;
    make_vars(OPTIM_F64, &w, &e);
    assert_ok(optim_build(k3, &w, 1), k3); /* Keras's build creates the weights */
    assert_eq(optim_weights_count(k3), 3);
    assert_eq(lso_scale(k3), (double)0.1f);
    assert_ok(optim_scale_loss(k3, 2.0, &s), k3);
    assert_eq(s, 2.0 * (double)0.1f);
    optim_destroy(k3);
    optim_destroy(lg);
    optim_var_destroy(w);
    optim_var_destroy(e);
}

/* ---- weights ------------------------------------------------------------------------------------- */

OPTIM_TEST(test_weights)
{
    const char *jsons[3] = {
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " ADAM_K3
        ", \"initial_scale\": 64.0, \"dynamic_growth_steps\": 3}}",
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " ADAM_LEG
        ", \"initial_scale\": 64.0, \"dynamic_growth_steps\": 3, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": " ADAM_K3 "}}",
    };
    static const char *const names[3][8] = {
        {"iterations", "w/m", "emb/m", "w/v", "emb/v", "step_counter", "dynamic_scale", NULL},
        {"iterations", "w/m", "emb/m", "w/v", "emb/v", "current_loss_scale", "good_steps", NULL},
        {"iterations", "w/m", "emb/m", "w/v", "emb/v", "skipped_steps", NULL, NULL},
    };
    for (int j = 0; j < 3; j++) {
        int mode = j == 0 ? MODE_K3 : j == 1 ? MODE_LEGACY : MODE_AIF;
        optim_optimizer *a = optim_test_make(jsons[j]), *b = optim_test_make(jsons[j]);
        optim_var *w, *e, *w2, *e2;
        make_vars(OPTIM_F64, &w, &e);
        make_vars(OPTIM_F64, &w2, &e2);
        ref_state s;
        ref_init(&s, mode == MODE_AIF ? 1 : 64);
        /* 10 steps on a (two skips); b gets its slots from one step, then
         * a's weights and variables. */
        for (int k = 0; k < 10; k++) {
            grads g;
            fill_grads(&g, OPTIM_F64, k, s.scale, w, e);
            if (mode == MODE_LEGACY) optim_unscale_gradients(a, g.p, 2);
            assert_ok(optim_apply_gradients(a, g.p, 2, 0), a);
            ref_step(&s, &ADAM_REF, mode, 3, OPTIM_F64, k);
        }
        size_t nw = optim_weights_count(a);
        size_t want = 0;
        while (want < 8 && names[j][want]) want++;
        assert_int_equal(nw, want);
        optim_tensor wts[8];
        assert_eq(optim_get_weights(a, wts, 8), nw);
        for (size_t i = 0; i < nw; i++) assert_string_equal(optim_weight_name(a, i), names[j][i]);
        assert_null(optim_weight_name(a, nw));
        assert_int_equal(wts[0].dtype, OPTIM_I64);
        assert_int_equal(*(int64_t *)wts[0].data, s.iterations);
        for (int i = 0; i < N; i++) assert_close(((double *)wts[1].data)[i], s.mw[i], 1e-11, 1e-13);
        for (int i = 0; i < R * C; i++)
            assert_close(((double *)wts[4].data)[i], s.ve[i], 1e-11, 1e-13);
        if (mode == MODE_AIF) {
            assert_int_equal(wts[5].dtype, OPTIM_F64);
            assert_eq(*(double *)wts[5].data, (double)s.skipped);
        } else {
            const optim_tensor *sc = &wts[mode == MODE_K3 ? 6 : 5],
                               *ct = &wts[mode == MODE_K3 ? 5 : 6];
            assert_int_equal(sc->dtype, OPTIM_F32);
            assert_int_equal(sc->rank, 0);
            assert_eq(*(float *)sc->data, (float)s.scale);
            assert_int_equal(ct->dtype, OPTIM_F64);
            assert_eq(*(double *)ct->data, (double)s.counter);
        }
        /* Resume: b takes a's state and both continue identically. */
        {
            grads g;
            fill_grads(&g, OPTIM_F64, 0, mode == MODE_AIF ? 1 : 64, w2, e2);
            if (mode == MODE_LEGACY) optim_unscale_gradients(b, g.p, 2);
            assert_ok(optim_apply_gradients(b, g.p, 2, 0), b);
        }
        assert_ok(optim_set_weights(b, wts, nw), b);
        optim_var_assign(w2, optim_var_data(w), OPTIM_F64, N);
        optim_var_assign(e2, optim_var_data(e), OPTIM_F64, R * C);
        assert_eq(optim_iterations(b), s.iterations);
        assert_eq(optim_iterations(optim_wrapper_inner(b)), s.iterations);
        for (int k = 10; k < STEPS; k++) {
            double scale = 1;
            if (mode != MODE_AIF) scale = lso_scale(a);
            grads g, h;
            fill_grads(&g, OPTIM_F64, k, scale, w, e);
            fill_grads(&h, OPTIM_F64, k, scale, w2, e2);
            if (mode == MODE_LEGACY) {
                optim_unscale_gradients(a, g.p, 2);
                optim_unscale_gradients(b, h.p, 2);
            }
            assert_ok(optim_apply_gradients(a, g.p, 2, 0), a);
            assert_ok(optim_apply_gradients(b, h.p, 2, 0), b);
        }
        assert_memory_equal(optim_var_data(w), optim_var_data(w2), N * 8);
        assert_memory_equal(optim_var_data(e), optim_var_data(e2), R * C * 8);
        assert_eq(optim_iterations(a), optim_iterations(b));
        if (mode != MODE_AIF) {
            assert_eq(lso_scale(a), lso_scale(b));
            assert_int_equal(lso_counter(a), lso_counter(b));
        } else {
            assert_eq(optim_skipped_steps(a), optim_skipped_steps(b));
        }
        /* A scale of the wrong dtype is refused, nothing changes. */
        optim_tensor bad[8];
        optim_get_weights(a, bad, 8);
        double d = 1; /* 8 bytes: enough for either dtype */
        bad[nw - 1] =
            optim_tensor_make(bad[nw - 1].dtype == OPTIM_F64 ? OPTIM_F32 : OPTIM_F64, &d, 0, NULL);
        int64_t it_before = optim_iterations(b);
        assert_status(optim_set_weights(b, bad, nw), OPTIM_EDTYPE, b);
        assert_eq(optim_iterations(b), it_before);
        optim_destroy(a);
        optim_destroy(b);
        optim_var_destroy(w);
        optim_var_destroy(e);
        optim_var_destroy(w2);
        optim_var_destroy(e2);
    }
}

/* ---- config ------------------------------------------------------------------------------------- */

static char *serialize(optim_optimizer *opt)
{
    char *s = optim_serialize(opt);
    assert_non_null(s);
    return s;
}

/* Writes, reads back, writes again: the same text. Returns the first text. */
static char *round_trip(const char *json)
{
    optim_optimizer *a = optim_test_make(json);
    char *s1 = serialize(a);
    optim_optimizer *b = optim_test_make(s1);
    char *s2 = serialize(b);
    if (strcmp(s1, s2)) print_error("%s\n!=\n%s\n", s1, s2);
    assert_string_equal(s1, s2);
    optim_free(s2);
    optim_destroy(a);
    optim_destroy(b);
    return s1;
}

static void assert_keys(const char *json, const char *const *keys, size_t n)
{
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "config"), *it;
    size_t i = 0;
    cJSON_ArrayForEach(it, cfg)
    {
        if (i >= n || strcmp(it->string, keys[i]))
            print_error("key %zu is '%s' in %s\n", i, it->string, json);
        assert_lt(i, n);
        assert_string_equal(it->string, keys[i]);
        i++;
    }
    assert_int_equal(i, n);
    cJSON_Delete(root);
}

OPTIM_TEST(test_config_keras3)
{
    char *s = round_trip(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " ADAM_K3 "}}");
    static const char *const keys[] = {"name", "inner_optimizer", "initial_scale",
                                       "dynamic_growth_steps"};
    assert_keys(s, keys, 4);
    assert_contains(s, "\"initial_scale\":32768.0,\"dynamic_growth_steps\":2000}");
    /* Nested as serialize_keras_object writes it, with Keras 3.15+'s default name. */
    assert_contains(s,
                    "\"inner_optimizer\":{\"module\":\"keras.optimizers\",\"class_name\":\"Adam\","
                    "\"config\":{\"name\":\"adam\",");
    optim_free(s);
    s = round_trip(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"name\": \"lso\", \"inner_optimizer\": " SGD_K3
        ", \"initial_scale\": 128, \"dynamic_growth_steps\": 7}}");
    assert_contains(
        s,
        "{\"name\":\"lso\",\"inner_optimizer\":{\"module\":\"keras.optimizers\",\"class_name\":\"SGD\"");
    /* Keras 3 keeps initial_scale as given (an int here); Keras's default is
     * the float 2.0**15. */
    assert_contains(s,
                    "\"initial_scale\":128,\"dynamic_growth_steps\":7},\"registered_name\":null}");
    /* The keys are exactly Keras 3's get_config: no base option leaks out. */
    cJSON *root = cJSON_Parse(s);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "config");
    assert_int_equal(cJSON_GetArraySize(cfg), 4);
    cJSON_Delete(root);
    optim_free(s);
    /* Keras 3 configs written before keras#21706 carry the base options at
     * their defaults, and `dynamic: true`: accepted, not written back. */
    s = round_trip(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"name\": \"loss_scale_optimizer\", "
        "\"weight_decay\": null, \"clipnorm\": null, \"global_clipnorm\": null, \"clipvalue\": null, "
        "\"use_ema\": false, \"ema_momentum\": 0.99, \"ema_overwrite_frequency\": null, "
        "\"loss_scale_factor\": null, \"gradient_accumulation_steps\": null, \"dynamic\": true, "
        "\"inner_optimizer\": " SGD_K3
        ", \"initial_scale\": 32768.0, \"dynamic_growth_steps\": 2000}}");
    assert_keys(s, keys, 4);
    optim_free(s);
    /* Keras 3's serialize_keras_object adds module and registered_name. */
    optim_optimizer *o = optim_test_make(
        "{\"module\": \"keras.optimizers\", \"class_name\": \"LossScaleOptimizer\", \"config\": "
        "{\"name\": \"loss_scale_optimizer\", \"inner_optimizer\": {\"module\": \"keras.optimizers\", "
        "\"class_name\": \"SGD\", \"config\": {\"name\": \"SGD\", \"learning_rate\": 0.5}, "
        "\"registered_name\": null}, \"initial_scale\": 4.0, \"dynamic_growth_steps\": 10}, "
        "\"registered_name\": null}");
    double v;
    assert_ok(optim_get_hyper(optim_wrapper_inner(o), "learning_rate", &v), optim_wrapper_inner(o));
    assert_eq(v, 0.5);
    assert_ok(optim_get_hyper(o, "dynamic_growth_steps", &v), o);
    assert_eq(v, 10);
    assert_string_equal(optim_name(o), "loss_scale_optimizer");
    optim_destroy(o);
}

OPTIM_TEST(test_config_legacy)
{
    /* tf.keras's LossScaleOptimizer.get_config; "dynamic" tells the
     * generation, so no is_legacy_optimizer (OptimizerV2 refuses it). */
    static const char *const keys[] = {"inner_optimizer", "dynamic", "initial_scale",
                                       "dynamic_growth_steps"};
    char *s = round_trip(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " ADAM_LEG
        ", \"is_legacy_optimizer\": true}}");
    assert_keys(s, keys, 4);
    assert_contains(s,
                    "\"dynamic\":true,\"initial_scale\":32768.0,\"dynamic_growth_steps\":2000}}");
    assert_contains(s, "}},\"dynamic\"");
    optim_free(s);
    s = round_trip(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"dynamic\": false, \"initial_scale\": 128, \"is_legacy_optimizer\": true}}");
    assert_keys(s, keys, 4);
    assert_contains(s, "\"dynamic\":false,\"initial_scale\":128.0,\"dynamic_growth_steps\":null}}");
    optim_free(s);
    s = round_trip(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"dynamic\": true, \"initial_scale\": null, \"dynamic_growth_steps\": 5, \"is_legacy_optimizer\": true}}");
    assert_contains(s, "\"dynamic\":true,\"initial_scale\":32768.0,\"dynamic_growth_steps\":5}}");
    optim_free(s);
}

OPTIM_TEST(test_config_apply_if_finite)
{
    char *s = round_trip(
        "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": " SGD_K3 "}}");
    /* Not a Keras class: written as a custom object (no module). */
    assert_string_equal(
        s,
        "{\"module\":null,\"class_name\":\"ApplyIfFinite\",\"config\":{\"name\":\"apply_if_finite\",\"inner_optimizer\":"
        "{\"module\":\"keras.optimizers\",\"class_name\":\"SGD\",\"config\":{\"name\":\"sgd\",\"learning_rate\":0.1,\"weight_decay\":null,"
        "\"clipnorm\":null,\"global_clipnorm\":null,\"clipvalue\":null,\"use_ema\":false,"
        "\"ema_momentum\":0.99,\"ema_overwrite_frequency\":null,\"loss_scale_factor\":null,"
        "\"gradient_accumulation_steps\":null,\"momentum\":0.0,\"nesterov\":false},"
        "\"registered_name\":null}},\"registered_name\":\"ApplyIfFinite\"}");
    optim_free(s);
    s = round_trip(
        "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"name\": \"guard\", \"inner_optimizer\": " SGD_LEG
        ", \"is_legacy_optimizer\": true}}");
    static const char *const keys[] = {"name", "inner_optimizer", "is_legacy_optimizer"};
    assert_keys(s, keys, 3);
    optim_free(s);
    /* Nested wrappers: ApplyIfFinite around a LossScaleOptimizer. */
    s = round_trip(
        "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": {\"class_name\": "
        "\"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " ADAM_K3
        ", \"initial_scale\": 2.0}}}}");
    assert_contains(
        s,
        "\"inner_optimizer\":{\"module\":\"keras.optimizers\",\"class_name\":\"LossScaleOptimizer\",\"config\":{\"name\":");
    optim_free(s);
}

OPTIM_TEST(test_config_refusals)
{
    /* no inner optimizer */
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"initial_scale\": 2.0}}",
        OPTIM_EINVAL, "inner_optimizer");
    expect_json_fails("\"LossScaleOptimizer\"", OPTIM_EINVAL, "inner_optimizer");
    expect_json_fails("{\"class_name\": \"ApplyIfFinite\", \"config\": {}}", OPTIM_EINVAL,
                      "inner_optimizer");
    optim_optimizer *o = (optim_optimizer *)1;
    optim_error err;
    assert_status(optim_create(&o, &optim_loss_scale_class, NULL, &err), OPTIM_EINVAL, &err);
    assert_null(o);
    /* initial_scale <= 0, dynamic_growth_steps < 1 or not an integer */
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"initial_scale\": 0}}",
        OPTIM_ERANGE, "initial_scale is 0");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"initial_scale\": -4.0}}",
        OPTIM_ERANGE, "initial_scale is -4");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"initial_scale\": -1, \"is_legacy_optimizer\": true}}",
        OPTIM_ERANGE, "initial_scale");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"dynamic_growth_steps\": 0}}",
        OPTIM_ERANGE, "dynamic_growth_steps is 0");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"dynamic_growth_steps\": 2.5}}",
        OPTIM_ETYPE, "dynamic_growth_steps");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"dynamic_growth_steps\": null}}",
        OPTIM_ETYPE, "dynamic_growth_steps");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"dynamic_growth_steps\": -3, \"is_legacy_optimizer\": true}}",
        OPTIM_ERANGE, "dynamic_growth_steps");
    /* Keras 3: dynamic=False, base options off their defaults, learning_rate */
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"dynamic\": false, \"is_legacy_optimizer\": false}}",
        OPTIM_EINVAL, "dynamic");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"dynamic\": 1, \"is_legacy_optimizer\": false}}",
        OPTIM_ETYPE, "dynamic");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"clipnorm\": 1.0}}",
        OPTIM_EINVAL, "does not support `clipnorm`");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"ema_momentum\": 0.5}}",
        OPTIM_EINVAL, "`ema_momentum`");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"learning_rate\": 0.1}}",
        OPTIM_EINVAL, "`learning_rate`");
    expect_json_fails(
        "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"global_clipnorm\": 1.0}}",
        OPTIM_EINVAL, "`global_clipnorm`");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"decay\": 0.1, \"is_legacy_optimizer\": true}}",
        OPTIM_EINVAL, "`decay`");
    /* unknown keys, per generation */
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"loss_scale\": 2}}",
        OPTIM_EKEY, "loss_scale");
    expect_json_fails(
        "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"initial_scale\": 2}}",
        OPTIM_EKEY, "initial_scale");
    /* generations must match; legacy rules of dynamic=false; LSO in LSO */
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG "}}",
        OPTIM_EINVAL, "is_legacy_optimizer");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"is_legacy_optimizer\": true}}",
        OPTIM_EINVAL, "legacy");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"dynamic\": false, \"is_legacy_optimizer\": true}}",
        OPTIM_EINVAL, "\"initial_scale\" must be specified");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"dynamic\": false, \"initial_scale\": 2, \"dynamic_growth_steps\": 5, \"is_legacy_optimizer\": true}}",
        OPTIM_EINVAL, "\"dynamic_growth_steps\" must be None");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": "
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"is_legacy_optimizer\": true}}, \"is_legacy_optimizer\": true}}",
        OPTIM_EINVAL, "cannot wrap another LossScaleOptimizer");
    /* a bad inner config, and the inner given twice */
    expect_json_fails("{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": "
                      "{\"class_name\": \"SGD\", \"config\": {\"momentum\": 2}}}}",
                      OPTIM_ERANGE, "momentum");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": \"nope\"}}",
        OPTIM_ENOTFOUND, "nope");
    expect_json_fails(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
        ", \"inner_optimizer\": " SGD_K3 "}}",
        OPTIM_EPARSE, "twice");

    /* optim_set_hyper on a live wrapper: refused, unchanged. */
    optim_optimizer *lso = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3 "}}");
    assert_status(optim_set_hyper(lso, "initial_scale", 0), OPTIM_ERANGE, lso);
    assert_contains(optim_errmsg(lso), "initial_scale");
    assert_status(optim_set_hyper(lso, "dynamic_growth_steps", 0), OPTIM_ERANGE, lso);
    assert_status(optim_set_hyper(lso, "clipnorm", 1.0), OPTIM_EINVAL, lso);
    assert_status(optim_set_hyper(lso, "learning_rate", 0.1), OPTIM_EINVAL, lso);
    assert_contains(optim_errmsg(lso), "inner_optimizer");
    double v;
    assert_ok(optim_get_hyper(lso, "initial_scale", &v), lso);
    assert_eq(v, 32768.0);
    assert_ok(optim_set_hyper(lso, "dynamic_growth_steps", 3), lso);
    assert_ok(optim_get_hyper(lso, "dynamic_growth_steps", &v), lso);
    assert_eq(v, 3);
    optim_destroy(lso);
    /* Legacy: dynamic cannot turn false once the dynamic state exists. */
    lso = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_LEG
        ", \"initial_scale\": 4, \"is_legacy_optimizer\": true}}");
    optim_var *w, *e;
    make_vars(OPTIM_F64, &w, &e);
    assert_ok(optim_build(lso, &w, 1), lso);
    assert_ok(optim_set_hyper(lso, "dynamic_growth_steps", NAN), lso);
    assert_status(optim_set_hyper(lso, "dynamic", 0), OPTIM_ESTATE, lso);
    assert_ok(optim_get_hyper(lso, "dynamic", &v), lso);
    assert_eq(v, 1);
    optim_destroy(lso);
    optim_var_destroy(w);
    optim_var_destroy(e);
}

/* ApplyIfFinite inside a LossScaleOptimizer checks the unscaled gradients:
 * finite scaled gradients whose quotient by a tiny scale overflows float32
 * are skipped by ApplyIfFinite while the loss scale counts a finite step. */
OPTIM_TEST(test_apply_if_finite_inside_lso)
{
    optim_optimizer *opt = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": "
        "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": " SGD_K3 "}}, "
        "\"initial_scale\": 1e-10, \"dynamic_growth_steps\": 5}}");
    optim_optimizer *aif = optim_wrapper_inner(opt);
    optim_var *w, *e;
    make_vars(OPTIM_F32, &w, &e);
    float g[N] = {1e30f, 0, 0, 0, 0};
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, (int64_t[]){N})), w};
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    assert_eq(optim_skipped_steps(aif), 1);
    assert_int_equal(lso_counter(opt), 1);
    assert_eq(optim_iterations(opt), 0);
    for (int i = 0; i < N; i++) assert_eq(optim_var_get(w, i), (double)(float)w_init(i));
    g[0] = 1e-12f; /* 1e-12 / 1e-10 = 0.01: stepped */
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    assert_eq(optim_skipped_steps(aif), 1);
    assert_eq(optim_iterations(opt), 1);
    assert_eq(optim_iterations(aif), 1);
    assert_close(optim_var_get(w, 0), w_init(0) - 0.1 * 0.01, 1e-5, 1e-7);
    /* Weights: iterations, then ApplyIfFinite's, then the loss scale's. */
    assert_string_equal(optim_weight_name(opt, 1), "skipped_steps");
    assert_string_equal(optim_weight_name(opt, 2), "step_counter");
    assert_string_equal(optim_weight_name(opt, 3), "dynamic_scale");
    optim_destroy(opt);
    optim_var_destroy(w);
    optim_var_destroy(e);
}

/* Keras 3: "self.inner_optimizer.loss_scale_factor = None", so that the
 * gradients are not scaled twice (where the base supports the option). */
OPTIM_TEST(test_inner_loss_scale_factor_cleared)
{
    optim_optimizer *probe = NULL;
    optim_error err;
    if (optim_from_json(&probe,
                        "{\"class_name\": \"SGD\", \"config\": {\"loss_scale_factor\": 128.0}}",
                        &err)) {
        assert_int_equal(err.code, OPTIM_ENOTSUP); /* not in this build: nothing to clear */
        return;
    }
    optim_destroy(probe);
    optim_optimizer *lso = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": "
        "{\"class_name\": \"SGD\", \"config\": {\"loss_scale_factor\": 128.0}}}}");
    double v = 0;
    assert_ok(optim_get_hyper(optim_wrapper_inner(lso), "loss_scale_factor", &v),
              optim_wrapper_inner(lso));
    assert_nan(v);
    optim_destroy(lso);
}

/* ---- optim_wrap ----------------------------------------------------------------------------------- */

OPTIM_TEST(test_wrap_from_c)
{
    optim_error err;
    optim_optimizer *adam = optim_test_make(ADAM_K3), *lso;
    assert_ok(
        optim_wrap(&lso,
                   "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"initial_scale\": 16.0, "
                   "\"dynamic_growth_steps\": 3}}",
                   adam, &err),
        &err);
    assert_ptr_equal(optim_wrapper_inner(lso), adam);
    char *s = serialize(lso);
    assert_contains(s,
                    "\"inner_optimizer\":{\"module\":\"keras.optimizers\",\"class_name\":\"Adam\"");
    assert_contains(s, "\"initial_scale\":16.0,\"dynamic_growth_steps\":3}");
    /* Same trajectory as the JSON-built one. */
    optim_optimizer *twin = optim_test_make(s);
    optim_free(s);
    optim_var *w, *e, *w2, *e2;
    make_vars(OPTIM_F32, &w, &e);
    make_vars(OPTIM_F32, &w2, &e2);
    for (int k = 0; k < 10; k++) {
        grads g, h;
        double sc = lso_scale(lso);
        fill_grads(&g, OPTIM_F32, k, sc, w, e);
        fill_grads(&h, OPTIM_F32, k, sc, w2, e2);
        assert_ok(optim_apply_gradients(lso, g.p, 2, 0), lso);
        assert_ok(optim_apply_gradients(twin, h.p, 2, 0), twin);
    }
    assert_memory_equal(optim_var_data(w), optim_var_data(w2), N * 4);
    assert_memory_equal(optim_var_data(e), optim_var_data(e2), R * C * 4);
    assert_eq(lso_scale(lso), lso_scale(twin));
    optim_destroy(lso); /* frees adam too */
    optim_destroy(twin);
    /* A refused wrapper config leaves the inner optimizer with the caller. */
    optim_optimizer *sgd = optim_test_make(SGD_K3), *out = (optim_optimizer *)1;
    assert_status(
        optim_wrap(&out,
                   "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"initial_scale\": 0}}",
                   sgd, &err),
        OPTIM_ERANGE, &err);
    assert_null(out);
    assert_status(
        optim_wrap(
            &out,
            "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": " SGD_K3
            "}}",
            sgd, &err),
        OPTIM_EINVAL, &err);
    assert_contains(err.msg, "twice");
    optim_optimizer *legacy_sgd = optim_test_make(SGD_LEG);
    assert_status(optim_wrap(&out, "{\"class_name\": \"LossScaleOptimizer\", \"config\": {}}",
                             legacy_sgd, &err),
                  OPTIM_EINVAL, &err);
    assert_ok(
        optim_wrap(
            &out,
            "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"is_legacy_optimizer\": true}}",
            legacy_sgd, &err),
        &err);
    optim_destroy(out);
    /* ApplyIfFinite from C; the wrapper takes the inner's iterations. */
    assert_ok(optim_set_iterations(sgd, 7), sgd);
    assert_ok(optim_wrap(&out, "{\"class_name\": \"ApplyIfFinite\", \"config\": {}}", sgd, &err),
              &err);
    assert_eq(optim_iterations(out), 7);
    optim_destroy(out);
    optim_var_destroy(w);
    optim_var_destroy(e);
    optim_var_destroy(w2);
    optim_var_destroy(e2);
}

/* Review fixes: a failed inner step leaves the wrapper's weights as they
 * were (none created), and optim_build on a wrapper builds its inner
 * optimizer first (its slots listed, unknown variables refused). */
static int refuse(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    (void)user;
    (void)pairs;
    (void)n;
    snprintf(err->msg, sizeof err->msg, "no");
    return OPTIM_EINVAL;
}

OPTIM_TEST(test_failed_inner_step_and_build)
{
    const char *cfgs[2] = {
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": \"adam\"}}",
        "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": \"adam\"}}",
    };
    for (int c = 0; c < 2; c++) {
        optim_optimizer *w;
        optim_error err;
        assert_ok(optim_from_json(&w, cfgs[c], &err), &err);
        assert_ok(optim_add_gradient_transformer(optim_wrapper_inner(w), refuse, NULL),
                  optim_wrapper_inner(w));
        float x[2] = {1, 2}, g[2] = {0.5f, 0.5f};
        optim_var *v, *u;
        assert_ok(optim_var_create(&v, "v", OPTIM_F32, 1, (int64_t[]){2}, x, &err), &err);
        assert_ok(optim_var_create(&u, "u", OPTIM_F32, 1, (int64_t[]){2}, x, &err), &err);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, (int64_t[]){2})),
                            v};
        assert_ne(optim_apply_gradients(w, &p, 1, 0), 0);
        assert_eq(optim_weights_count(w), 1);
        assert_eq(optim_iterations(w), 0);
        optim_destroy(w);
        /* Build: the inner optimizer's slots exist right away. */
        assert_ok(optim_from_json(&w, cfgs[c], &err), &err);
        assert_ok(optim_build(w, &v, 1), w);
        assert_non_null(optim_get_slot(w, v, "m"));
        assert_non_null(optim_get_slot(w, v, "v"));
        p.var = u;
        assert_status(optim_apply_gradients(w, &p, 1, 0), OPTIM_ENOTFOUND, w);
        optim_destroy(w);
        optim_var_destroy(v);
        optim_var_destroy(u);
    }
}

int main(void) { return optim_test_run(); }
