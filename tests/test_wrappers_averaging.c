/* TF Addons' MovingAverage, SWA and Lookahead against independent
 * double-precision references (the inner SGD / Adam rule and each wrapper's
 * published rule re-implemented here), over 24-step trajectories in f32 and
 * f64, dense and sparse; the averaging schedules at their edges; TF Addons'
 * own test values; swap / assign of the averages; weights, iterations,
 * gradient processing and constraint order; configs (round trips, TF
 * Addons' key order, refusals) and optim_wrap. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

#define STEPS 24
#define N 5

/* Deterministic gradients (both signs) and initial values. */
static double grad_at(int k, int i)
{
    return sin(0.9 * k + 1.7 * i) * (1.0 + 0.2 * i) + 0.1 * cos(0.3 * k * i);
}
static double init_at(int i) { return 0.3 - 0.25 * i; }

/* ---- helpers ------------------------------------------------------------------------------------ */


/* Refuses json with `code` and a message containing `needle`. */
static void refuse(const char *json, int code, const char *needle)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc != code || !strstr(err.msg, needle))
        print_error("json %s\n  rc %d (want %d), msg '%s' (want '%s')\n", json, rc, code, err.msg,
                    needle);
    assert_status(rc, code, &err);
    assert_contains(err.msg, needle);
    assert_null(opt);
}


static optim_var *make_vec(const char *name, optim_dtype dt)
{
    double init[N];
    for (int i = 0; i < N; i++) init[i] = init_at(i);
    int64_t shape[1] = {N};
    return optim_test_var(name, dt, 1, shape, init);
}

/* A dense gradient tensor for step k over n elements, kept in buf. */
static optim_tensor grad_tensor(optim_dtype dt, void *buf, int k, int n, int32_t rank,
                                const int64_t *shape)
{
    for (int i = 0; i < n; i++) {
        if (dt == OPTIM_F32) ((float *)buf)[i] = (float)grad_at(k, i);
        else ((double *)buf)[i] = grad_at(k, i);
    }
    return optim_tensor_make(dt, buf, rank, shape);
}

static void step_dense(optim_optimizer *opt, optim_var *v, int k)
{
    double buf[N];
    int64_t shape[1] = {N};
    optim_grad_var p = {optim_grad_dense(grad_tensor(optim_var_dtype(v), buf, k, N, 1, shape)), v};
    int rc = optim_apply_gradients(opt, &p, 1, 0);
    assert_ok(rc, opt);
}

static double rtol_of(optim_dtype dt) { return dt == OPTIM_F32 ? 2e-5 : 1e-11; }
static double atol_of(optim_dtype dt) { return dt == OPTIM_F32 ? 2e-6 : 1e-13; }

/* ---- the reference ------------------------------------------------------------------------------- */

typedef enum { IN_SGD, IN_ADAM } inner_kind;
typedef enum { W_MA, W_SWA, W_LA } wrap_kind;

typedef struct spec {
    inner_kind inner;
    double lr, momentum; /* SGD */
    int nesterov;
    double b1, b2, eps; /* Adam */
    wrap_kind wrap;
    double average_decay, num_updates; /* MA (num_updates NAN: None) */
    double start_step;
    int dynamic;
    int64_t period, start; /* SWA */
    int64_t sync; /* Lookahead */
    double alpha;
} spec;

typedef struct ref_state {
    double w[64], m[64], v[64], slot[64];
    int n;
} ref_state;

/* MovingAverage's decay, TF Addons' formula in float32 arithmetic. */
static float ref_ma_decay(const spec *s, int64_t step)
{
    float d = (float)s->average_decay;
    if (!isnan(s->num_updates)) {
        float nu = (float)s->num_updates, r = (1.0f + nu) / (10.0f + nu);
        d = d < r ? d : r;
    }
    float st = (float)step, start = (float)s->start_step;
    if (st < start) return 0.0f;
    if (s->dynamic) {
        float c = st - start, r = (1.0f + c) / (10.0f + c);
        return d < r ? d : r;
    }
    return d;
}

static void ref_init(const spec *s, ref_state *r, const double *w0, int n)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    for (int i = 0; i < n; i++) {
        r->w[i] = w0[i];
        r->slot[i] = s->wrap == W_SWA ? 0.0 : w0[i];
    }
}

/* One step k (iterations before the step = k) with gradient g. */
static void ref_step(const spec *s, ref_state *r, int k, const double *g)
{
    int n = r->n;
    if (s->inner == IN_SGD) {
        for (int i = 0; i < n; i++) {
            if (s->momentum == 0) {
                r->w[i] -= s->lr * g[i];
                continue;
            }
            r->m[i] = s->momentum * r->m[i] - s->lr * g[i];
            r->w[i] += s->nesterov ? s->momentum * r->m[i] - s->lr * g[i] : r->m[i];
        }
    } else {
        double t = k + 1;
        double alpha = s->lr * sqrt(1 - pow(s->b2, t)) / (1 - pow(s->b1, t));
        for (int i = 0; i < n; i++) {
            r->m[i] += (g[i] - r->m[i]) * (1 - s->b1);
            r->v[i] += (g[i] * g[i] - r->v[i]) * (1 - s->b2);
            r->w[i] -= r->m[i] * alpha / (sqrt(r->v[i]) + s->eps);
        }
    }
    if (s->wrap == W_MA) {
        double d = ref_ma_decay(s, k);
        for (int i = 0; i < n; i++) r->slot[i] -= (r->slot[i] - r->w[i]) * (1 - d);
    } else if (s->wrap == W_SWA) {
        if (k >= s->start && (k - s->start) % s->period == 0) {
            double c = (double)((k - s->start) / s->period);
            for (int i = 0; i < n; i++) r->slot[i] = (r->slot[i] * c + r->w[i]) / (c + 1);
        }
    } else if ((k + 1) % s->sync == 0) {
        for (int i = 0; i < n; i++) {
            r->slot[i] += s->alpha * (r->w[i] - r->slot[i]);
            r->w[i] = r->slot[i];
        }
    }
}

static const char *slot_name_of(const spec *s) { return s->wrap == W_LA ? "slow" : "average"; }

static void spec_json(const spec *s, int legacy, char *buf, size_t cap)
{
    char inner[400], own[300];
    const char *lg = legacy ? ", \"is_legacy_optimizer\": true" : "";
    if (s->inner == IN_SGD)
        snprintf(inner, sizeof inner,
                 "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": %.17g, \"momentum\": "
                 "%.17g, \"nesterov\": %s%s}}",
                 s->lr, s->momentum, s->nesterov ? "true" : "false", lg);
    else
        snprintf(inner, sizeof inner,
                 "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": %.17g, \"beta_1\": "
                 "%.17g, \"beta_2\": %.17g, \"epsilon\": %.17g%s}}",
                 s->lr, s->b1, s->b2, s->eps, lg);
    if (s->wrap == W_MA) {
        char nu[32];
        if (isnan(s->num_updates)) snprintf(nu, sizeof nu, "null");
        else snprintf(nu, sizeof nu, "%.0f", s->num_updates);
        snprintf(own, sizeof own,
                 "\"average_decay\": %.17g, \"num_updates\": %s, \"start_step\": %.0f, "
                 "\"dynamic_decay\": %s",
                 s->average_decay, nu, s->start_step, s->dynamic ? "true" : "false");
    } else if (s->wrap == W_SWA) {
        snprintf(own, sizeof own, "\"average_period\": %lld, \"start_averaging\": %lld",
                 (long long)s->period, (long long)s->start);
    } else {
        snprintf(own, sizeof own, "\"sync_period\": %lld, \"slow_step_size\": %.17g",
                 (long long)s->sync, s->alpha);
    }
    snprintf(buf, cap, "{\"class_name\": \"%s\", \"config\": {\"optimizer\": %s, %s%s}}",
             s->wrap == W_MA        ? "MovingAverage"
                 : s->wrap == W_SWA ? "SWA"
                                    : "Lookahead",
             inner, own, lg);
}

static void compare(const optim_var *v, const double *ref, int n, const char *what, int k)
{
    optim_dtype dt = optim_var_dtype(v);
    for (int i = 0; i < n; i++) {
        double got = optim_var_get(v, i);
        double tol = atol_of(dt) + rtol_of(dt) * fabs(ref[i]);
        if (!(fabs(got - ref[i]) <= tol))
            print_error("%s step %d element %d (%s): got %.17g, reference %.17g\n", what, k, i,
                        optim_dtype_name(dt), got, ref[i]);
        assert_close(got, ref[i], rtol_of(dt), atol_of(dt));
    }
}

/* Runs s for `steps` dense steps and checks the variable, the wrapper's slot
 * and the inner optimizer's slots against the reference after every step. */
static void check_dense(const spec *s, int legacy, optim_dtype dt, int steps)
{
    char json[1200];
    spec_json(s, legacy, json, sizeof json);
    optim_optimizer *opt = optim_test_make(json);
    optim_var *w = make_vec("w", dt);
    double w0[N], g[N];
    for (int i = 0; i < N; i++) w0[i] = init_at(i);
    ref_state r;
    ref_init(s, &r, w0, N);
    for (int k = 0; k < steps; k++) {
        step_dense(opt, w, k);
        for (int i = 0; i < N; i++)
            g[i] = dt == OPTIM_F32 ? (double)(float)grad_at(k, i) : grad_at(k, i);
        ref_step(s, &r, k, g);
        compare(w, r.w, N, "variable", k);
        compare(optim_get_slot(opt, w, slot_name_of(s)), r.slot, N, slot_name_of(s), k);
        if (s->inner == IN_ADAM) {
            compare(optim_get_slot(opt, w, "m"), r.m, N, "m", k);
            compare(optim_get_slot(opt, w, "v"), r.v, N, "v", k);
        } else if (s->momentum > 0) {
            compare(optim_get_slot(opt, w, "momentum"), r.m, N, "momentum", k);
        }
        assert_eq(optim_iterations(opt), k + 1);
        assert_eq(optim_iterations(optim_wrapper_inner(opt)), k + 1);
    }
    optim_destroy(opt);
    optim_var_destroy(w);
}

static spec sgd_spec(wrap_kind wrap)
{
    spec s = {0};
    s.inner = IN_SGD;
    s.lr = 0.05;
    s.momentum = 0.9;
    s.wrap = wrap;
    s.average_decay = 0.9;
    s.num_updates = NAN;
    s.period = 10;
    s.sync = 6;
    s.alpha = 0.5;
    return s;
}

static spec adam_spec(wrap_kind wrap)
{
    spec s = sgd_spec(wrap);
    s.inner = IN_ADAM;
    s.lr = 0.02;
    s.b1 = 0.8;
    s.b2 = 0.95;
    s.eps = 1e-5;
    return s;
}

static const optim_dtype DTYPES[2] = {OPTIM_F32, OPTIM_F64};

/* ---- trajectories -------------------------------------------------------------------------------- */

OPTIM_TEST(test_moving_average_trajectories)
{
    for (int d = 0; d < 2; d++)
        for (int legacy = 0; legacy < 2; legacy++) {
            spec s = sgd_spec(W_MA);
            check_dense(&s, legacy, DTYPES[d], STEPS);
            s.nesterov = 1;
            s.start_step = 4;
            check_dense(&s, legacy, DTYPES[d], STEPS);
            s = adam_spec(W_MA);
            s.dynamic = 1;
            check_dense(&s, legacy, DTYPES[d], STEPS);
            s.start_step = 7; /* dynamic decay counted from start_step */
            check_dense(&s, legacy, DTYPES[d], STEPS);
            s.dynamic = 0;
            s.num_updates = 3; /* min(0.9, 4/13) */
            check_dense(&s, legacy, DTYPES[d], STEPS);
            s.average_decay = 0; /* the average follows the variable */
            s.num_updates = NAN;
            check_dense(&s, legacy, DTYPES[d], STEPS);
            s.average_decay = 1; /* the average stays the initial value */
            check_dense(&s, legacy, DTYPES[d], STEPS);
        }
}

OPTIM_TEST(test_swa_trajectories)
{
    static const int64_t schedules[][2] = {{10, 0}, {1, 0}, {4, 3}, {5, 23}, {3, 24}, {1, 7}};
    for (int d = 0; d < 2; d++)
        for (size_t c = 0; c < sizeof schedules / sizeof *schedules; c++) {
            spec s = sgd_spec(W_SWA);
            s.period = schedules[c][0];
            s.start = schedules[c][1];
            check_dense(&s, c % 2, DTYPES[d], STEPS);
            s = adam_spec(W_SWA);
            s.period = schedules[c][0];
            s.start = schedules[c][1];
            check_dense(&s, (c + 1) % 2, DTYPES[d], STEPS);
        }
}

OPTIM_TEST(test_lookahead_trajectories)
{
    static const int64_t syncs[] = {6, 1, 2, 5, 24, 25};
    static const double alphas[] = {0.5, 0.3, 0.0, 1.0, 0.7, 0.5};
    for (int d = 0; d < 2; d++)
        for (size_t c = 0; c < sizeof syncs / sizeof *syncs; c++) {
            spec s = sgd_spec(W_LA);
            s.sync = syncs[c];
            s.alpha = alphas[c];
            check_dense(&s, c % 2, DTYPES[d], STEPS);
            s = adam_spec(W_LA);
            s.sync = syncs[c];
            s.alpha = alphas[c];
            check_dense(&s, (c + 1) % 2, DTYPES[d], STEPS);
        }
}

/* The schedules' boundaries, exactly: an SWA average changes only at
 * snapshot steps and its first snapshot is a copy; Lookahead's slow weights
 * change only at sync steps, where the variable equals them; with
 * slow_step_size 0 every sync resets the variable to its initial value. */
OPTIM_TEST(test_schedule_edges_exact)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = DTYPES[d];
        optim_optimizer *swa =
            optim_test_make("{\"class_name\": \"SWA\", \"config\": {\"optimizer\": "
                            "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1}}, "
                            "\"average_period\": 4, \"start_averaging\": 3}}");
        optim_var *w = make_vec("w", dt);
        double before[N], cur[N];
        for (int k = 0; k < 20; k++) {
            optim_var *avg = optim_get_slot(swa, w, "average");
            for (int i = 0; i < N; i++) before[i] = avg ? optim_var_get(avg, i) : 0.0;
            step_dense(swa, w, k);
            avg = optim_get_slot(swa, w, "average");
            for (int i = 0; i < N; i++) cur[i] = optim_var_get(avg, i);
            int snapshot = k >= 3 && (k - 3) % 4 == 0;
            for (int i = 0; i < N; i++) {
                if (!snapshot) assert_eq(cur[i], before[i]);
                if (k == 3) assert_eq(cur[i], optim_var_get(w, i)); /* (0 * 0 + w) / 1 */
                if (k < 3) assert_eq(cur[i], 0.0);
            }
        }
        optim_destroy(swa);
        optim_var_destroy(w);

        optim_optimizer *la =
            optim_test_make("{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": "
                            "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1}}, "
                            "\"sync_period\": 5, \"slow_step_size\": 0.0}}");
        w = make_vec("w", dt);
        for (int k = 0; k < 20; k++) {
            step_dense(la, w, k);
            optim_var *slow = optim_get_slot(la, w, "slow");
            for (int i = 0; i < N; i++) {
                double w0 = dt == OPTIM_F32 ? (double)(float)init_at(i) : init_at(i);
                assert_eq(optim_var_get(slow, i), w0);
                if ((k + 1) % 5 == 0) assert_eq(optim_var_get(w, i), w0);
                else assert_ne(optim_var_get(w, i), w0);
            }
        }
        optim_destroy(la);
        optim_var_destroy(w);
    }
}

/* TF Addons' own tests, with their values (legacy SGD, float32). */
OPTIM_TEST(test_tfa_examples)
{
    /* moving_average_test.py: test_run */
    optim_optimizer *ma =
        optim_test_make("{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": "
                        "{\"class_name\": \"SGD\", \"config\": {\"lr\": 2.0, "
                        "\"is_legacy_optimizer\": true}}, \"average_decay\": 0.5, "
                        "\"is_legacy_optimizer\": true}}");
    int64_t two[1] = {2};
    optim_var *v0 = optim_test_var("var0", OPTIM_F32, 1, two, (double[]){1.0, 2.0});
    optim_var *v1 = optim_test_var("var1", OPTIM_F32, 1, two, (double[]){3.0, 4.0});
    float g0[2] = {0.1f, 0.1f}, g1[2] = {0.01f, 0.01f};
    optim_grad_var p[2] = {{optim_grad_dense(optim_tensor_make(OPTIM_F32, g0, 1, two)), v0},
                           {optim_grad_dense(optim_tensor_make(OPTIM_F32, g1, 1, two)), v1}};
    for (int k = 0; k < 2; k++) assert_ok(optim_apply_gradients(ma, p, 2, 0), ma);
    assert_close(optim_var_get(v0, 0), 0.6, 1e-6, 1e-6);
    assert_close(optim_var_get(v0, 1), 1.6, 1e-6, 1e-6);
    assert_close(optim_var_get(v1, 0), 2.96, 1e-6, 1e-6);
    assert_close(optim_var_get(optim_get_slot(ma, v0, "average"), 0), 0.75, 1e-6, 1e-6);
    assert_close(optim_var_get(optim_get_slot(ma, v0, "average"), 1), 1.75, 1e-6, 1e-6);
    assert_close(optim_var_get(optim_get_slot(ma, v1, "average"), 0), 2.975, 1e-6, 1e-6);
    optim_var *both[2] = {v0, v1};
    size_t assigned = 99;
    assert_ok(optim_assign_average_vars(ma, both, 2, &assigned), ma);
    assert_int_equal(assigned, 2);
    assert_close(optim_var_get(v0, 0), 0.75, 1e-6, 1e-6);
    assert_close(optim_var_get(v1, 1), 3.975, 1e-6, 1e-6);
    optim_destroy(ma);
    optim_var_destroy(v0);
    optim_var_destroy(v1);

    /* test_start_step and test_dynamic_decay */
    static const char *const cfgs[2] = {
        "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": {\"class_name\": \"SGD\", "
        "\"config\": {\"learning_rate\": 1.0, \"is_legacy_optimizer\": true}}, \"average_decay\": 0.5, "
        "\"start_step\": 1, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": {\"class_name\": \"SGD\", "
        "\"config\": {\"learning_rate\": 2.0, \"is_legacy_optimizer\": true}}, \"average_decay\": 0.5, "
        "\"dynamic_decay\": true, \"is_legacy_optimizer\": true}}"};
    static const double want_var[2][2] = {{0.8, 1.8}, {0.6, 1.6}},
                        want_avg[2][2] = {{0.85, 1.85}, {0.64, 1.64}};
    for (int c = 0; c < 2; c++) {
        ma = optim_test_make(cfgs[c]);
        v0 = optim_test_var("var0", OPTIM_F32, 1, two, (double[]){1.0, 2.0});
        optim_grad_var q = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g0, 1, two)), v0};
        assert_ok(optim_apply_gradients(ma, &q, 1, 0), ma);
        assert_ok(optim_apply_gradients(ma, &q, 1, 0), ma);
        for (int i = 0; i < 2; i++) {
            assert_close(optim_var_get(v0, i), want_var[c][i], 1e-6, 1e-6);
            assert_close(optim_var_get(optim_get_slot(ma, v0, "average"), i), want_avg[c][i], 1e-6,
                         1e-6);
        }
        optim_destroy(ma);
        optim_var_destroy(v0);
    }

    /* stochastic_weight_averaging_test.py: test_averaging */
    optim_optimizer *swa =
        optim_test_make("{\"class_name\": \"SWA\", \"config\": {\"optimizer\": {\"class_name\": "
                        "\"SGD\", \"config\": {\"lr\": 1.0, \"is_legacy_optimizer\": true}}, "
                        "\"start_averaging\": 0, \"average_period\": 1, "
                        "\"is_legacy_optimizer\": true}}");
    v0 = optim_test_var("var_0", OPTIM_F32, 1, two, (double[]){1.0, 1.0});
    v1 = optim_test_var("var_1", OPTIM_F32, 1, two, (double[]){2.0, 2.0});
    p[0].var = v0;
    p[1].var = v1;
    p[1].grad = p[0].grad;
    for (int k = 0; k < 3; k++) assert_ok(optim_apply_gradients(swa, p, 2, 0), swa);
    assert_close(optim_var_get(v0, 0), 0.7, 1e-6, 1e-6);
    assert_close(optim_var_get(v1, 1), 1.7, 1e-6, 1e-6);
    both[0] = v0;
    both[1] = v1;
    assert_ok(optim_assign_average_vars(swa, both, 2, NULL), swa);
    assert_close(optim_var_get(v0, 0), 0.8, 1e-6, 1e-6);
    assert_close(optim_var_get(v1, 1), 1.8, 1e-6, 1e-6);
    optim_destroy(swa);
    optim_var_destroy(v0);
    optim_var_destroy(v1);
}

/* lookahead_test.py's exact-ratio property: after k steps with sync_period
 * k, slow = initial + (plain inner result - initial) * alpha. */
OPTIM_TEST(test_lookahead_exact_ratio)
{
    static const int ks[3] = {5, 10, 100};
    static const double alphas[2] = {0.3, 0.7};
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 3; c++) {
            int k = ks[c];
            optim_optimizer *adam = optim_test_make("\"adam\"");
            char json[300];
            snprintf(json, sizeof json,
                     "{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": \"adam\", "
                     "\"sync_period\": %d, \"slow_step_size\": %g}}",
                     k, alphas[a]);
            optim_optimizer *la = optim_test_make(json);
            optim_var *quick = make_vec("q", OPTIM_F64), *slow = make_vec("s", OPTIM_F64);
            for (int t = 0; t < k; t++) {
                step_dense(adam, quick, t % 7);
                step_dense(la, slow, t % 7);
            }
            for (int i = 0; i < N; i++) {
                double want = init_at(i) + (optim_var_get(quick, i) - init_at(i)) * alphas[a];
                assert_close(optim_var_get(slow, i), want, 1e-12, 1e-14);
            }
            optim_destroy(adam);
            optim_destroy(la);
            optim_var_destroy(quick);
            optim_var_destroy(slow);
        }
}

/* Sparse gradients with duplicate indices: the inner optimizer's sparse
 * rule (Keras 3 SGD: the indexed rows; Keras 3 Adam: the dense equivalent)
 * and the wrapper's rule on the whole variable. The reference is the dense
 * rule on the gradient with the duplicates summed. */
OPTIM_TEST(test_sparse)
{
    enum { ROWS = 4, COLS = 3 };
    for (int d = 0; d < 2; d++)
        for (int w = 0; w < 3; w++)
            for (int in = 0; in < 2; in++) {
                optim_dtype dt = DTYPES[d];
                spec s = in ? adam_spec((wrap_kind)w) : sgd_spec((wrap_kind)w);
                s.momentum = 0;
                s.sync = 3;
                s.period = 2;
                s.start = 1;
                s.start_step = 2;
                char json[1200];
                spec_json(&s, 0, json, sizeof json);
                optim_optimizer *opt = optim_test_make(json);
                double w0[ROWS * COLS];
                for (int i = 0; i < ROWS * COLS; i++) w0[i] = init_at(i);
                int64_t shape[2] = {ROWS, COLS};
                optim_var *emb = optim_test_var("emb", dt, 2, shape, w0);
                ref_state r;
                ref_init(&s, &r, w0, ROWS * COLS);
                for (int k = 0; k < STEPS; k++) {
                    int64_t idx[4] = {(k * 2) % ROWS, 3, (k * 2) % ROWS, (k + 1) % ROWS};
                    double vals[4 * COLS], g[ROWS * COLS] = {0};
                    float vals32[4 * COLS];
                    for (int j = 0; j < 4 * COLS; j++) {
                        vals[j] = grad_at(k, j);
                        vals32[j] = (float)vals[j];
                        if (dt == OPTIM_F32) vals[j] = vals32[j];
                    }
                    /* Summed in order of appearance, as the library does. */
                    for (int j = 0; j < 4; j++)
                        for (int c = 0; c < COLS; c++) {
                            if (dt == OPTIM_F32)
                                g[idx[j] * COLS + c] =
                                    (float)(g[idx[j] * COLS + c] + vals[j * COLS + c]);
                            else g[idx[j] * COLS + c] += vals[j * COLS + c];
                        }
                    int64_t vshape[2] = {4, COLS};
                    optim_tensor t = optim_tensor_make(
                        dt, dt == OPTIM_F32 ? (void *)vals32 : (void *)vals, 2, vshape);
                    optim_grad_var p = {optim_grad_sparse(idx, 4, t), emb};
                    int rc = optim_apply_gradients(opt, &p, 1, 0);
                    assert_ok(rc, opt);
                    ref_step(&s, &r, k, g);
                    compare(emb, r.w, ROWS * COLS, json, k);
                    compare(optim_get_slot(opt, emb, slot_name_of(&s)), r.slot, ROWS * COLS, "slot",
                            k);
                }
                optim_destroy(opt);
                optim_var_destroy(emb);
            }
}

/* ---- weights, iterations, gradient processing, constraints, threads -------------------------- */

OPTIM_TEST(test_weights_and_iterations)
{
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": "
                        "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01}}}}");
    optim_var *w = make_vec("w", OPTIM_F64), *b = make_vec("b", OPTIM_F32);
    double gw[N];
    float gb[N];
    int64_t shape[1] = {N};
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < N; i++) gw[i] = grad_at(k, i), gb[i] = (float)grad_at(k, i + 3);
        optim_grad_var p[2] = {{optim_grad_dense(optim_tensor_make(OPTIM_F64, gw, 1, shape)), w},
                               {optim_grad_dense(optim_tensor_make(OPTIM_F32, gb, 1, shape)), b}};
        assert_ok(optim_apply_gradients(opt, p, 2, 0), opt);
    }
    optim_optimizer *inner = optim_wrapper_inner(opt);
    assert_non_null(inner);
    assert_string_equal(optim_class_of(inner)->name, "Adam");
    assert_eq(optim_iterations(opt), 5);
    assert_eq(optim_iterations(inner), 5);
    /* iterations, the inner optimizer's slots, then the wrapper's. */
    static const char *const names[] = {"iterations", "w/m",       "b/m",      "w/v",
                                        "b/v",        "w/average", "b/average"};
    assert_eq(optim_weights_count(opt), 7);
    for (size_t i = 0; i < 7; i++) assert_string_equal(optim_weight_name(opt, i), names[i]);
    assert_null(optim_weight_name(opt, 7));
    assert_ptr_equal(optim_get_slot(opt, w, "average"), optim_get_slot(opt, w, "average"));
    assert_ptr_equal(optim_get_slot(opt, w, "m"), optim_get_slot(inner, w, "m"));
    assert_null(optim_get_slot(inner, w, "average"));

    /* set_weights round trip: copies, a change, then the copies back. */
    optim_tensor ws[7];
    assert_eq(optim_get_weights(opt, ws, 7), 7);
    double saved[7][N];
    for (size_t i = 1; i < 7; i++)
        for (int j = 0; j < N; j++)
            saved[i][j] =
                ws[i].dtype == OPTIM_F32 ? ((float *)ws[i].data)[j] : ((double *)ws[i].data)[j];
    for (int k = 5; k < 8; k++) step_dense(opt, w, k);
    assert_eq(optim_iterations(inner), 8);
    float f32buf[4][N];
    double f64buf[4][N];
    optim_tensor back[7];
    int64_t it = 5;
    back[0] = optim_tensor_make(OPTIM_I64, &it, 0, NULL);
    for (size_t i = 1; i < 7; i++) {
        optim_dtype dt = optim_var_dtype(optim_get_slot(opt, i % 2 ? w : b, names[i] + 2));
        for (int j = 0; j < N; j++) {
            if (dt == OPTIM_F32) f32buf[i / 2][j] = (float)saved[i][j];
            else f64buf[i / 2][j] = saved[i][j];
        }
        back[i] = optim_tensor_make(
            dt, dt == OPTIM_F32 ? (void *)f32buf[i / 2] : (void *)f64buf[i / 2], 1, shape);
    }
    assert_ok(optim_set_weights(opt, back, 7), opt);
    assert_eq(optim_iterations(opt), 5);
    assert_eq(optim_iterations(inner), 5);
    for (size_t i = 1; i < 7; i++) {
        optim_var *s = optim_get_slot(opt, i % 2 ? w : b, names[i] + 2);
        for (int j = 0; j < N; j++) assert_eq(optim_var_get(s, j), saved[i][j]);
    }
    assert_ok(optim_set_iterations(opt, 11), opt);
    assert_eq(optim_iterations(inner), 11);
    step_dense(opt, w, 0);
    assert_eq(optim_iterations(opt), 12);
    assert_eq(optim_iterations(inner), 12);
    /* A wrong count of weights changes nothing. */
    assert_status(optim_set_weights(opt, back, 6), OPTIM_ESHAPE, opt);
    assert_eq(optim_iterations(opt), 12);
    optim_destroy(opt);
    optim_var_destroy(w);
    optim_var_destroy(b);
}

/* The inner optimizer steps at the wrapper's iterations even when it had
 * stepped on its own before being wrapped (TF Addons assigns the
 * wrapper's counter to it), so Adam's bias correction restarts. */
OPTIM_TEST(test_inner_follows_wrapper_counter)
{
    optim_optimizer *adam =
        optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.02, "
                        "\"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 1e-05}}");
    optim_var *scratch = make_vec("scratch", OPTIM_F64);
    for (int k = 0; k < 3; k++) step_dense(adam, scratch, k);
    optim_optimizer *la;
    optim_error err;
    assert_ok(optim_wrap(&la,
                         "{\"class_name\": \"Lookahead\", \"config\": {\"sync_period\": 4, "
                         "\"slow_step_size\": 0.25}}",
                         adam, &err),
              &err);
    assert_eq(optim_iterations(la), 0);
    spec s = adam_spec(W_LA);
    s.sync = 4;
    s.alpha = 0.25;
    optim_var *w = make_vec("w", OPTIM_F64);
    double w0[N], g[N];
    for (int i = 0; i < N; i++) w0[i] = init_at(i);
    ref_state r;
    ref_init(&s, &r, w0, N);
    for (int k = 0; k < 10; k++) {
        step_dense(la, w, k);
        for (int i = 0; i < N; i++) g[i] = grad_at(k, i);
        ref_step(&s, &r, k, g);
        compare(w, r.w, N, "variable", k);
    }
    optim_destroy(la);
    optim_var_destroy(w);
    optim_var_destroy(scratch);
}

static int double_grads(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    (void)err;
    (*(int *)user)++;
    for (size_t i = 0; i < n; i++) {
        optim_tensor *t = &pairs[i].grad.dense;
        for (int64_t j = 0; j < optim_tensor_numel(t); j++) ((double *)t->data)[j] *= 2;
    }
    return 0;
}

/* As in TF Addons: the wrapper's clipnorm / clipvalue / transformers apply;
 * the inner optimizer's are not used by a wrapper step. */
OPTIM_TEST(test_gradient_processing_is_the_wrappers)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        const char *lg = legacy ? ", \"is_legacy_optimizer\": true" : "";
        char json[600];
        snprintf(
            json, sizeof json,
            "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": {\"class_name\": "
            "\"SGD\", \"config\": {\"learning_rate\": 0.1, \"clipnorm\": 0.001%s}}, \"clipnorm\": "
            "0.5, \"average_decay\": 0.5%s}}",
            lg, lg);
        optim_optimizer *opt = optim_test_make(json);
        int inner_calls = 0, outer_calls = 0;
        assert_ok(
            optim_add_gradient_transformer(optim_wrapper_inner(opt), double_grads, &inner_calls),
            optim_wrapper_inner(opt));
        assert_ok(optim_add_gradient_transformer(opt, double_grads, &outer_calls), opt);
        optim_var *w = make_vec("w", OPTIM_F64);
        double avg[N], x[N];
        for (int i = 0; i < N; i++) avg[i] = x[i] = init_at(i);
        for (int k = 0; k < 6; k++) {
            step_dense(opt, w, k);
            double norm = 0, g[N];
            for (int i = 0; i < N; i++) norm += grad_at(k, i) * grad_at(k, i);
            norm = sqrt(norm);
            for (int i = 0; i < N; i++) {
                g[i] = 2 *
                    (grad_at(k, i) * 0.5 / (norm > 0.5 ? norm : 0.5)); /* clip, then transform */
                x[i] -= 0.1 * g[i];
                avg[i] -= (avg[i] - x[i]) * 0.5;
            }
            compare(w, x, N, "variable", k);
            compare(optim_get_slot(opt, w, "average"), avg, N, "average", k);
        }
        assert_int_equal(outer_calls, 6);
        assert_int_equal(inner_calls, 0);
        /* The inner optimizer's own options are back for its own steps. */
        optim_var *u = make_vec("u", OPTIM_F64);
        step_dense(optim_wrapper_inner(opt), u, 0);
        assert_int_equal(inner_calls, 1);
        double norm = 0;
        for (int i = 0; i < N; i++) norm += grad_at(0, i) * grad_at(0, i);
        norm = sqrt(norm);
        for (int i = 0; i < N; i++)
            assert_close(optim_var_get(u, i), init_at(i) - 0.1 * 2 * grad_at(0, i) * 0.001 / norm,
                         1e-12, 1e-15);
        optim_destroy(opt);
        optim_var_destroy(w);
        optim_var_destroy(u);
    }
}

/* The wrapper's rule sees the variable before its constraint; the
 * constraint then applies to the variable only (OptimizerV2's
 * _distributed_apply constrains after the wrapper's _resource_apply_dense). */
OPTIM_TEST(test_constraint_after_rule)
{
    optim_constraint nn = optim_constraint_non_neg();
    /* MovingAverage */
    optim_optimizer *ma = optim_test_make(
        "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": {\"class_name\": "
        "\"SGD\", \"config\": {\"learning_rate\": 0.5}}, \"average_decay\": 0.5}}");
    optim_var *w = make_vec("w", OPTIM_F64);
    assert_ok(optim_var_set_constraint(w, &nn), w);
    double x[N], avg[N];
    for (int i = 0; i < N; i++) x[i] = avg[i] = init_at(i);
    for (int k = 0; k < 8; k++) {
        step_dense(ma, w, k);
        for (int i = 0; i < N; i++) {
            double unc = x[i] - 0.5 * grad_at(k, i);
            avg[i] -= (avg[i] - unc) * 0.5;
            x[i] = unc >= 0 ? unc : 0.0;
        }
        compare(w, x, N, "variable", k);
        compare(optim_get_slot(ma, w, "average"), avg, N, "average", k);
    }
    assert_non_null(optim_var_constraint(w)); /* still there */
    optim_destroy(ma);
    /* Lookahead: the slow weights keep the unconstrained step back. */
    optim_optimizer *la = optim_test_make(
        "{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": {\"class_name\": "
        "\"SGD\", \"config\": {\"learning_rate\": 0.5}}, \"sync_period\": 2, "
        "\"slow_step_size\": 0.5}}");
    optim_var *v = make_vec("v", OPTIM_F64);
    assert_ok(optim_var_set_constraint(v, &nn), v);
    double slow[N];
    for (int i = 0; i < N; i++) x[i] = slow[i] = init_at(i);
    for (int k = 0; k < 8; k++) {
        step_dense(la, v, k);
        for (int i = 0; i < N; i++) {
            double unc = x[i] - 0.5 * grad_at(k, i);
            if ((k + 1) % 2 == 0) {
                slow[i] += 0.5 * (unc - slow[i]);
                unc = slow[i];
            }
            x[i] = unc >= 0 ? unc : 0.0;
        }
        compare(v, x, N, "variable", k);
        compare(optim_get_slot(la, v, "slow"), slow, N, "slow", k);
    }
    optim_destroy(la);
    optim_var_destroy(w);
    optim_var_destroy(v);
}

/* Results do not depend on the number of threads (large variables cross
 * the chunk size). */
OPTIM_TEST(test_threads)
{
    enum { BIG = 20000 };
    static const char *const cfgs[3] = {
        "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": \"adam\", \"dynamic_decay\": true}}",
        "{\"class_name\": \"SWA\", \"config\": {\"optimizer\": \"adam\", \"average_period\": 2}}",
        "{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": \"adam\", \"sync_period\": 2}}"};
    double *init = malloc(BIG * sizeof *init), *g = malloc(BIG * sizeof *g);
    for (int i = 0; i < BIG; i++) init[i] = sin(0.01 * i);
    int64_t shape[1] = {BIG};
    for (int c = 0; c < 3; c++) {
        optim_var *vs[2];
        optim_optimizer *os[2];
        for (int r = 0; r < 2; r++) {
            os[r] = optim_test_make(cfgs[c]);
            assert_ok(optim_set_num_threads(os[r], r + 1), os[r]);
            vs[r] = optim_test_var("big", OPTIM_F32, 1, shape, init);
            float *gf = malloc(BIG * sizeof *gf);
            for (int k = 0; k < 5; k++) {
                for (int i = 0; i < BIG; i++) gf[i] = (float)cos(0.003 * i + k);
                optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, gf, 1, shape)),
                                    vs[r]};
                assert_ok(optim_apply_gradients(os[r], &p, 1, 0), os[r]);
            }
            free(gf);
        }
        assert_memory_equal(optim_var_cdata(vs[0]), optim_var_cdata(vs[1]), BIG * sizeof(float));
        const char *sn = c == 2 ? "slow" : "average";
        assert_memory_equal(optim_var_cdata(optim_get_slot(os[0], vs[0], sn)),
                            optim_var_cdata(optim_get_slot(os[1], vs[1], sn)), BIG * sizeof(float));
        for (int r = 0; r < 2; r++) {
            optim_destroy(os[r]);
            optim_var_destroy(vs[r]);
        }
    }
    free(init);
    free(g);
}

/* ---- swap and assign ------------------------------------------------------------------------------ */

OPTIM_TEST(test_swap_and_assign)
{
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = DTYPES[d];
        optim_optimizer *ma =
            optim_test_make("{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": "
                            "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1}}, "
                            "\"average_decay\": 0.7}}");
        optim_var *w = make_vec("w", dt), *b = make_vec("b", dt), *frozen = make_vec("frozen", dt);
        assert_status(optim_swap_average_weights(ma), OPTIM_ESTATE, ma); /* no step yet */
        assert_contains(optim_errmsg(ma), "before any step");
        double buf[2][N];
        int64_t shape[1] = {N};
        for (int k = 0; k < 6; k++) {
            optim_grad_var p[3] = {
                {optim_grad_dense(grad_tensor(dt, buf[0], k, N, 1, shape)), w},
                {optim_grad_dense(grad_tensor(dt, buf[1], k + 1, N, 1, shape)), b},
                {optim_grad_none(), frozen}};
            assert_ok(optim_apply_gradients(ma, p, 3, 0), ma);
        }
        size_t esz = optim_dtype_size(dt);
        unsigned char w_before[N * 8], a_before[N * 8], b_before[N * 8], f_before[N * 8];
        optim_var *aw = optim_get_slot(ma, w, "average");
        memcpy(w_before, optim_var_cdata(w), N * esz);
        memcpy(a_before, optim_var_cdata(aw), N * esz);
        memcpy(b_before, optim_var_cdata(b), N * esz);
        memcpy(f_before, optim_var_cdata(frozen), N * esz);
        assert_memory_not_equal(w_before, a_before, N * esz);
        assert_ok(optim_swap_average_weights(ma), ma);
        assert_memory_equal(optim_var_cdata(w), a_before, N * esz);
        assert_memory_equal(optim_var_cdata(aw), w_before, N * esz);
        assert_memory_not_equal(optim_var_cdata(b), b_before, N * esz);
        assert_memory_equal(optim_var_cdata(frozen), f_before, N * esz); /* had no gradient */
        assert_ok(optim_swap_average_weights(ma), ma);
        assert_memory_equal(optim_var_cdata(w), w_before, N * esz);
        assert_memory_equal(optim_var_cdata(aw), a_before, N * esz);
        assert_memory_equal(optim_var_cdata(b), b_before, N * esz);

        /* The latest step's variables only (TF Addons' _model_weights). */
        step_dense(ma, b, 9);
        memcpy(w_before, optim_var_cdata(w), N * esz);
        assert_ok(optim_swap_average_weights(ma), ma);
        assert_memory_equal(optim_var_cdata(w), w_before, N * esz);
        assert_ok(optim_swap_average_weights(ma), ma);

        /* assign: variables without an average are skipped and counted out. */
        optim_var *all[3] = {w, frozen, b};
        size_t assigned = 99;
        assert_ok(optim_assign_average_vars(ma, all, 3, &assigned), ma);
        assert_int_equal(assigned, 2);
        assert_memory_equal(optim_var_cdata(w), optim_var_cdata(aw), N * esz);
        assert_memory_equal(optim_var_cdata(b), optim_var_cdata(optim_get_slot(ma, b, "average")),
                            N * esz);
        assert_memory_equal(optim_var_cdata(frozen), f_before, N * esz);

        /* Refusals change nothing. */
        optim_var *with_null[2] = {w, NULL};
        assert_status(optim_assign_average_vars(ma, with_null, 2, &assigned), OPTIM_EINVAL, ma);
        assert_int_equal(assigned, 0);
        assert_contains(optim_errmsg(ma), "vars[1] is NULL");
        assert_status(optim_assign_average_vars(ma, NULL, 1, NULL), OPTIM_EINVAL, ma);
        assert_ok(optim_assign_average_vars(ma, NULL, 0, &assigned), ma);
        assert_int_equal(assigned, 0);
        assert_status(optim_assign_average_vars(NULL, all, 1, NULL), OPTIM_EINVAL, NULL);
        assert_status(optim_swap_average_weights(NULL), OPTIM_EINVAL, NULL);
        optim_destroy(ma);

        optim_optimizer *la = optim_test_make(
            "{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": \"sgd\"}}");
        step_dense(la, w, 0);
        assert_status(optim_assign_average_vars(la, all, 1, NULL), OPTIM_EINVAL, la);
        assert_contains(optim_errmsg(la), "not MovingAverage or SWA");
        assert_status(optim_swap_average_weights(la), OPTIM_EINVAL, la);
        optim_destroy(la);
        optim_optimizer *swa =
            optim_test_make("{\"class_name\": \"SWA\", \"config\": {\"optimizer\": \"sgd\", "
                            "\"average_period\": 1}}");
        step_dense(swa, w, 0);
        step_dense(swa, w, 1);
        assert_status(optim_swap_average_weights(swa), OPTIM_EINVAL, swa);
        assert_contains(optim_errmsg(swa), "not MovingAverage");
        assert_ok(optim_assign_average_vars(swa, all, 1, &assigned), swa);
        assert_int_equal(assigned, 1);
        assert_memory_equal(optim_var_cdata(w), optim_var_cdata(optim_get_slot(swa, w, "average")),
                            N * esz);
        optim_optimizer *sgd = optim_test_make("\"sgd\"");
        assert_status(optim_assign_average_vars(sgd, all, 1, NULL), OPTIM_EINVAL, sgd);
        assert_status(optim_swap_average_weights(sgd), OPTIM_EINVAL, sgd);
        optim_destroy(sgd);
        optim_destroy(swa);
        optim_var_destroy(w);
        optim_var_destroy(b);
        optim_var_destroy(frozen);
    }
}

/* ---- failed steps change nothing --------------------------------------------------------------- */

OPTIM_TEST(test_failed_steps)
{
    static const char *const cfgs[3] = {
        "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": \"adam\"}}",
        "{\"class_name\": \"SWA\", \"config\": {\"optimizer\": \"adam\", \"average_period\": 1}}",
        "{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": \"adam\", \"sync_period\": 1}}"};
    for (int c = 0; c < 3; c++) {
        optim_optimizer *opt = optim_test_make(cfgs[c]);
        optim_optimizer *in = optim_wrapper_inner(opt);
        optim_var *w = make_vec("w", OPTIM_F32), *u = make_vec("u", OPTIM_F32);
        step_dense(opt, w, 0);
        size_t nweights = optim_weights_count(opt);
        float before[N];
        memcpy(before, optim_var_cdata(w), sizeof before);
        /* A gradient of the wrong shape for a new variable: no slot anywhere. */
        float g3[3] = {1, 2, 3}, g5[N] = {1, 2, 3, 4, 5};
        int64_t s3[1] = {3}, s5[1] = {N};
        optim_grad_var p[2] = {{optim_grad_dense(optim_tensor_make(OPTIM_F32, g5, 1, s5)), w},
                               {optim_grad_dense(optim_tensor_make(OPTIM_F32, g3, 1, s3)), u}};
        assert_status(optim_apply_gradients(opt, p, 2, 0), OPTIM_ESHAPE, opt);
        const char *msg = optim_errmsg(opt);
        assert_contains(msg, optim_class_of(opt)->name);
        assert_contains(msg, "'u'");
        assert_eq(optim_weights_count(opt), nweights);
        assert_null(optim_get_slot(opt, u, c == 2 ? "slow" : "average"));
        assert_null(optim_get_slot(opt, u, "m"));
        assert_memory_equal(optim_var_cdata(w), before, sizeof before);
        assert_eq(optim_iterations(opt), 1);
        assert_eq(optim_iterations(in), 1);
        /* Nothing to apply; a variable twice; a NULL variable; NULL pairs. */
        optim_grad_var none = {optim_grad_none(), w};
        assert_status(optim_apply_gradients(opt, &none, 1, 0), OPTIM_EINVAL, opt);
        assert_contains(optim_errmsg(opt), "no gradients");
        assert_status(optim_apply_gradients(opt, p, 0, 0), OPTIM_EINVAL, opt);
        optim_grad_var twice[2] = {p[0], p[0]};
        assert_status(optim_apply_gradients(opt, twice, 2, 0), OPTIM_EINVAL, opt);
        assert_contains(optim_errmsg(opt), "more than once");
        optim_grad_var nul = {p[0].grad, NULL};
        assert_status(optim_apply_gradients(opt, &nul, 1, 0), OPTIM_EINVAL, opt);
        assert_status(optim_apply_gradients(opt, NULL, 1, 0), OPTIM_EINVAL, opt);
        /* A sparse gradient for a constrained variable (OptimizerV2 refuses it). */
        optim_constraint nn = optim_constraint_non_neg();
        assert_ok(optim_var_set_constraint(u, &nn), u);
        int64_t idx[1] = {0}, rs[1] = {1};
        optim_grad_var sp = {optim_grad_sparse(idx, 1, optim_tensor_make(OPTIM_F32, g5, 1, rs)), u};
        assert_status(optim_apply_gradients(opt, &sp, 1, 0), OPTIM_EINVAL, opt);
        assert_contains(optim_errmsg(opt), "constraint");
        /* A bad hyperparameter value from a variable at step time. */
        optim_var *hv = optim_test_var("hv", OPTIM_F64, 0, NULL, (double[]){2.0});
        const char *hyper = c == 0 ? "average_decay" : c == 2 ? "slow_step_size" : NULL;
        if (hyper) {
            assert_ok(optim_set_hyper_var(opt, hyper, hv), opt);
            assert_status(optim_apply_gradients(opt, p, 1, 0), OPTIM_ERANGE, opt);
            assert_contains(optim_errmsg(opt), hyper);
            assert_ok(optim_set_hyper(opt, hyper, 0.5), opt);
        }
        assert_memory_equal(optim_var_cdata(w), before, sizeof before);
        assert_eq(optim_iterations(opt), 1);
        assert_eq(optim_iterations(in), 1);
        assert_eq(optim_weights_count(opt), nweights);
        /* Built for {w}: another variable is refused. */
        optim_var *wl[1] = {w};
        assert_ok(optim_build(opt, wl, 1), opt);
        optim_grad_var pu = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g5, 1, s5)), u};
        assert_status(optim_apply_gradients(opt, &pu, 1, 0), OPTIM_ENOTFOUND, opt);
        step_dense(opt, w, 1);
        assert_eq(optim_iterations(in), 2);
        optim_destroy(opt);
        optim_var_destroy(w);
        optim_var_destroy(u);
        optim_var_destroy(hv);
    }
}

/* ---- configs ------------------------------------------------------------------------------------------ */

static void round_trip(const char *json)
{
    optim_optimizer *a = optim_test_make(json);
    char *s1 = optim_serialize(a);
    assert_non_null(s1);
    optim_optimizer *b = optim_test_make(s1);
    char *s2 = optim_serialize(b);
    if (strcmp(s1, s2)) print_error("%s\n!=\n%s\n", s1, s2);
    assert_string_equal(s1, s2);
    char *c1 = optim_get_config(a), *c2 = optim_get_config(b);
    assert_string_equal(c1, c2);
    optim_free(s1);
    optim_free(s2);
    optim_free(c1);
    optim_free(c2);
    optim_destroy(a);
    optim_destroy(b);
}

OPTIM_TEST(test_config_round_trips)
{
    static const char *const cfgs[] = {
        "\"MovingAverage\"" /* refused below: no inner optimizer */,
        "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": {\"class_name\": \"SGD\", "
        "\"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9, \"is_legacy_optimizer\": true}}, "
        "\"average_decay\": 0.9, \"start_step\": 2, \"dynamic_decay\": true, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"Addons>MovingAverage\", \"config\": {\"name\": \"ema\", \"optimizer\": "
        "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01, \"amsgrad\": true}}, "
        "\"num_updates\": 7, \"clipvalue\": 0.5}}",
        "{\"class_name\": \"SWA\", \"config\": {\"optimizer\": {\"class_name\": \"RMSprop\", \"config\": "
        "{\"rho\": 0.8}}, \"start_averaging\": 5, \"average_period\": 3, \"global_clipnorm\": 1.0}}",
        "{\"class_name\": \"Addons>SWA\", \"config\": {\"optimizer\": {\"class_name\": \"SGD\", "
        "\"config\": {\"is_legacy_optimizer\": true}}, \"clipnorm\": 1.0, \"clipvalue\": 2.0, "
        "\"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": {\"class_name\": \"Adam\", "
        "\"config\": {\"learning_rate\": 0.001, \"is_legacy_optimizer\": true}}, \"sync_period\": 5, "
        "\"slow_step_size\": 0.8, \"decay\": 0.5, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"Lookahead\", \"config\": {\"name\": \"la\", \"optimizer\": {\"class_name\": "
        "\"Lookahead\", \"config\": {\"optimizer\": \"adam\"}}, \"sync_period\": 2}}",
        "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": {\"class_name\": \"Lookahead\", "
        "\"config\": {\"optimizer\": \"sgd\", \"sync_period\": 3}}, \"weight_decay\": null, "
        "\"use_ema\": false, \"learning_rate\": 0.0}}",
    };
    for (size_t i = 1; i < sizeof cfgs / sizeof *cfgs; i++) round_trip(cfgs[i]);
    refuse(cfgs[0], OPTIM_EINVAL, "no inner optimizer");

    /* TF Addons' keys and order: {**OptimizerV2.get_config(), **own}. */
    optim_optimizer *opt = optim_test_make(cfgs[1]);
    char *s = optim_serialize(opt);
    /* Registered as "Addons>MovingAverage"; no is_legacy_optimizer (OptimizerV2 refuses it). */
    assert_string_equal(
        s,
        "{\"class_name\":\"Addons>MovingAverage\",\"config\":{\"name\":\"MovingAverage\","
        "\"optimizer\":{\"class_name\":\"SGD\",\"config\":{\"name\":\"SGD\","
        "\"learning_rate\":0.1,\"decay\":0.0,\"momentum\":0.9,\"nesterov\":false"
        "}},\"average_decay\":0.9,\"num_updates\":null,"
        "\"start_step\":2,\"dynamic_decay\":true}}");
    optim_free(s);
    optim_destroy(opt);
    opt = optim_test_make(cfgs[4]);
    s = optim_get_config(opt);
    assert_string_equal(
        s,
        "{\"name\":\"SWA\",\"clipnorm\":1.0,\"clipvalue\":2.0,\"optimizer\":{\"class_name\":"
        "\"SGD\",\"config\":{\"name\":\"SGD\",\"learning_rate\":0.01,\"decay\":0.0,"
        "\"momentum\":0.0,\"nesterov\":false}},"
        "\"average_period\":10,\"start_averaging\":0}");
    optim_free(s);
    optim_destroy(opt);
    opt = optim_test_make("{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": \"sgd\"}}");
    s = optim_get_config(opt);
    assert_string_equal(
        s,
        "{\"name\":\"lookahead\",\"optimizer\":{\"module\":\"keras.optimizers\",\"class_name\":\"SGD\",\"config\":{"
        "\"name\":\"sgd\",\"learning_rate\":0.01,\"weight_decay\":null,\"clipnorm\":null,"
        "\"global_clipnorm\":null,\"clipvalue\":null,\"use_ema\":false,\"ema_momentum\":0.99,"
        "\"ema_overwrite_frequency\":null,\"loss_scale_factor\":null,"
        "\"gradient_accumulation_steps\":null,\"momentum\":0.0,\"nesterov\":false},"
        "\"registered_name\":null},\"sync_period\":6,\"slow_step_size\":0.5}");
    optim_free(s);
    optim_destroy(opt);

    /* num_updates: TF Addons writes average_decay as the float32
     * min(average_decay, (1 + n) / (10 + n)). */
    opt = optim_test_make(
        "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": \"sgd\", \"num_updates\": 4}}");
    s = optim_get_config(opt);
    cJSON *root = cJSON_Parse(s);
    assert_non_null(root);
    double d = cJSON_GetObjectItemCaseSensitive(root, "average_decay")->valuedouble;
    assert_eq(d, (double)(5.0f / 14.0f));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(root, "num_updates")->valueint, 4);
    cJSON_Delete(root);
    optim_free(s);
    double hv;
    assert_ok(optim_get_hyper(opt, "average_decay", &hv), opt);
    assert_eq(hv, 0.99); /* the hyperparameter as set */
    optim_destroy(opt);

    /* Defaults, and the hyperparameters from C. */
    opt = optim_test_make("{\"class_name\": \"SWA\", \"config\": {\"optimizer\": \"sgd\"}}");
    assert_ok(optim_get_hyper(opt, "average_period", &hv), opt);
    assert_eq(hv, 10);
    assert_ok(optim_get_hyper(opt, "start_averaging", &hv), opt);
    assert_eq(hv, 0);
    assert_status(optim_set_hyper(opt, "average_period", 0), OPTIM_ERANGE, opt);
    assert_contains(optim_errmsg(opt), "average_period");
    assert_ok(optim_get_hyper(opt, "average_period", &hv), opt);
    assert_eq(hv, 10);
    assert_status(optim_set_hyper(opt, "learning_rate", 0.1), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "inner optimizer");
    assert_ok(optim_get_hyper(opt, "learning_rate", &hv), opt);
    assert_eq(hv, 0);
    optim_destroy(opt);
    opt = optim_test_make("{\"class_name\": \"lookahead\", \"config\": {\"optimizer\": \"sgd\"}}");
    assert_ok(optim_get_hyper(opt, "sync_period", &hv), opt);
    assert_eq(hv, 6);
    assert_ok(optim_get_hyper(opt, "slow_step_size", &hv), opt);
    assert_eq(hv, 0.5);
    assert_status(optim_set_hyper(opt, "slow_step_size", 1.5), OPTIM_ERANGE, opt);
    assert_status(optim_set_hyper(opt, "sync_period", 2.5), OPTIM_ETYPE, opt);
    optim_destroy(opt);
    opt = optim_test_make(
        "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": \"sgd\"}}");
    assert_ok(optim_get_hyper(opt, "average_decay", &hv), opt);
    assert_eq(hv, 0.99);
    assert_ok(optim_get_hyper(opt, "num_updates", &hv), opt);
    assert_nan(hv);
    assert_ok(optim_get_hyper(opt, "start_step", &hv), opt);
    assert_eq(hv, 0);
    assert_ok(optim_get_hyper(opt, "dynamic_decay", &hv), opt);
    assert_eq(hv, 0);
    optim_destroy(opt);
}

OPTIM_TEST(test_bad_configs)
{
#define MA(x) "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": \"sgd\", " x "}}"
#define SWA(x) "{\"class_name\": \"SWA\", \"config\": {\"optimizer\": \"sgd\", " x "}}"
#define LA(x) "{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": \"sgd\", " x "}}"
    refuse("{\"class_name\": \"MovingAverage\", \"config\": {\"average_decay\": 0.5}}",
           OPTIM_EINVAL, "'optimizer'");
    refuse("{\"class_name\": \"SWA\", \"config\": {}}", OPTIM_EINVAL, "no inner optimizer");
    refuse("\"lookahead\"", OPTIM_EINVAL, "no inner optimizer");
    refuse(
        "{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": {\"class_name\": \"Nope\"}}}",
        OPTIM_ENOTFOUND, "Nope");
    refuse("{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": null}}", OPTIM_ETYPE,
           "inner optimizer");
    refuse("{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": {\"class_name\": \"SGD\", "
           "\"config\": {\"momentum\": 2}}}}",
           OPTIM_ERANGE, "momentum");
    refuse(MA("\"average_decay\": 1.5"), OPTIM_ERANGE, "average_decay");
    refuse(MA("\"average_decay\": -0.1"), OPTIM_ERANGE, "average_decay");
    refuse(MA("\"average_decay\": \"x\""), OPTIM_ETYPE, "average_decay");
    refuse(MA("\"num_updates\": -1"), OPTIM_ERANGE, "num_updates");
    refuse(MA("\"num_updates\": 1.5"), OPTIM_ETYPE, "num_updates");
    refuse(MA("\"start_step\": 0.5"), OPTIM_ETYPE, "start_step");
    refuse(MA("\"dynamic_decay\": 1"), OPTIM_ETYPE, "dynamic_decay");
    refuse(MA("\"learning_rate\": 0.1"), OPTIM_EINVAL, "learning_rate");
    refuse(MA("\"lr\": 0.1, \"is_legacy_optimizer\": true"), OPTIM_EINVAL, "learning_rate");
    refuse(MA("\"weight_decay\": 0.1"), OPTIM_EINVAL, "weight_decay");
    /* Refused by the base (OPTIM_ENOTSUP) or by the wrapper (OPTIM_EINVAL). */
    optim_optimizer *ema = NULL;
    optim_error e2;
    int rc = optim_from_json(&ema, MA("\"use_ema\": true"), &e2);
    if (rc != OPTIM_ENOTSUP) assert_status(rc, OPTIM_EINVAL, &e2);
    assert_contains(e2.msg, "use_ema");
    assert_null(ema);
    refuse(MA("\"lr\": 0.1, \"is_legacy_optimizer\": false"), OPTIM_EKEY, "lr"); /* legacy only */
    refuse(MA("\"sync_period\": 3"), OPTIM_EKEY, "sync_period");
    refuse(MA("\"optimizer\": \"adam\""), OPTIM_EPARSE, "twice");
    refuse(SWA("\"average_period\": 0"), OPTIM_ERANGE, "average_period");
    refuse(SWA("\"average_period\": 2.5"), OPTIM_ETYPE, "average_period");
    refuse(SWA("\"start_averaging\": -1"), OPTIM_ERANGE, "start_averaging");
    refuse(SWA("\"clipnorm\": 1.0, \"global_clipnorm\": 1.0"), OPTIM_EINVAL, "clipnorm");
    refuse(LA("\"sync_period\": 0"), OPTIM_ERANGE, "sync_period");
    refuse(LA("\"sync_period\": -6"), OPTIM_ERANGE, "sync_period");
    refuse(LA("\"slow_step_size\": 1.5"), OPTIM_ERANGE, "slow_step_size");
    refuse(LA("\"slow_step_size\": -0.5"), OPTIM_ERANGE, "slow_step_size");
    refuse(LA("\"slow_step_size\": null"), OPTIM_ETYPE, "slow_step_size");
    refuse(LA("\"clipnorm\": -1"), OPTIM_ERANGE, "clipnorm");
#undef MA
#undef SWA
#undef LA
    optim_optimizer *opt = NULL;
    optim_error err;
    assert_status(optim_create(&opt, &optim_swa_class, NULL, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "optim_wrap");
    assert_null(opt);
    assert_status(optim_create_by_name(&opt, "Addons>Lookahead", NULL, &err), OPTIM_EINVAL, &err);
    assert_null(opt);
}

/* optim_wrap from C: the wrapper owns the inner optimizer only on success. */
OPTIM_TEST(test_wrap_from_c)
{
    optim_optimizer *adam =
        optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.02, "
                        "\"beta_1\": 0.8, \"beta_2\": 0.95, \"epsilon\": 1e-05, "
                        "\"is_legacy_optimizer\": true}}");
    optim_optimizer *w = NULL;
    optim_error err;
    /* Refusals: the caller keeps adam. */
    assert_status(
        optim_wrap(&w, "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": \"sgd\"}}",
                   adam, &err),
        OPTIM_EINVAL, &err);
    assert_contains(err.msg, "twice");
    assert_null(w);
    assert_status(optim_wrap(&w, "{\"class_name\": \"SWA\", \"config\": {\"average_period\": 0}}",
                             adam, &err),
                  OPTIM_ERANGE, &err);
    assert_null(w);
    assert_status(optim_wrap(&w, "{\"class_name\": \"Adam\", \"config\": {}}", adam, &err),
                  OPTIM_EINVAL, &err);
    assert_status(optim_wrap(&w, "{\"class_name\": \"SWA\"}", NULL, &err), OPTIM_EINVAL, &err);
    assert_status(optim_wrap(&w, NULL, adam, &err), OPTIM_EINVAL, &err);
    assert_null(optim_wrapper_inner(adam));
    /* Success: MovingAverage(Adam) behaves as from JSON. */
    assert_ok(optim_wrap(&w,
                         "{\"class_name\": \"MovingAverage\", \"config\": {\"average_decay\": 0.9, "
                         "\"dynamic_decay\": true, \"is_legacy_optimizer\": true}}",
                         adam, &err),
              &err);
    assert_ptr_equal(optim_wrapper_inner(w), adam);
    spec s = adam_spec(W_MA);
    s.dynamic = 1;
    optim_var *v = make_vec("v", OPTIM_F32);
    double w0[N], g[N];
    for (int i = 0; i < N; i++) w0[i] = (float)init_at(i);
    ref_state r;
    ref_init(&s, &r, w0, N);
    for (int k = 0; k < STEPS; k++) {
        step_dense(w, v, k);
        for (int i = 0; i < N; i++) g[i] = (float)grad_at(k, i);
        ref_step(&s, &r, k, g);
        compare(v, r.w, N, "variable", k);
        compare(optim_get_slot(w, v, "average"), r.slot, N, "average", k);
    }
    /* Its config nests the inner optimizer; a round trip gives it back. */
    char *text = optim_serialize(w);
    assert_contains(text, "\"optimizer\":{\"class_name\":\"Adam\"");
    round_trip(text);
    optim_free(text);
    optim_destroy(w); /* frees adam */
    optim_var_destroy(v);
}

int main(void) { return optim_test_run(); }
