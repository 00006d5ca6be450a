/* Ftrl against independent double-precision references, both generations:
 * trajectories (lr_power -0.5, -0.7, 0; l1, l2, l2_shrinkage, beta each on
 * and off, all together) in f32 and f64, checking the variable and both slots;
 * the legacy dense l2_shrinkage kernel's lr-scaled linear slot (and where it
 * parts from Keras 3: a decaying learning rate); sparse gradients (Keras 3 the
 * dense equivalent, legacy the indexed rows only, rows of one element and of
 * several); the Keras and tf.keras test golden values; config keys, defaults,
 * round trips, ranges, dynamic hyperparameters; threads.
 *
 * The references are written from the FTRL-Proximal per-coordinate update of
 * McMahan et al. 2013 (Algorithm 1) with Keras's extensions, not from the
 * library's code:
 *
 *   gs = g + 2 * l2_shrinkage * w
 *   n' = n + g^2
 *   z  = z + gs - (n'^e - n^e) / lr * w            (e = -learning_rate_power)
 *   w  = 0                                          if |z| <= l1
 *        (sgn(z) * l1 - z) / ((beta + n'^e) / lr + 2 * l2)   otherwise
 *
 * and, for tf.keras's dense l2_shrinkage kernel, the same recurrence with the
 * linear slot kept multiplied by the learning rate (zl, threshold l1 * lr,
 * denominator beta + n'^e + 2 * l2 * lr). */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 25
#define N 6

#define FTRL(cfg) "{\"class_name\": \"Ftrl\", \"config\": {" cfg "}}"

/* The value a float32 run sees for x. */
static double rd(int f32, double x) { return f32 ? (double)(float)x : x; }

/* ---- the reference -------------------------------------------------------------- */

typedef struct cfg {
    double lr, lr_power, init_acc, l1, l2, shr, beta, decay;
} cfg;

/* The drivers' hyperparameters: a cfg in a generation and dtype. */
typedef struct hp {
    cfg c;
    int legacy, f32, scaled;
} hp;

static const cfg DEFAULTS = {0.001, -0.5, 0.1, 0, 0, 0, 0, 0};

/* The config as Keras JSON, every Ftrl key written out. */
static const char *cfg_json(const cfg *c, int legacy)
{
    return ot_fmt(
        FTRL(
            "\"learning_rate\": %.17g, \"learning_rate_power\": %.17g, \"initial_accumulator_value\": %.17g, "
            "\"l1_regularization_strength\": %.17g, \"l2_regularization_strength\": %.17g, "
            "\"l2_shrinkage_regularization_strength\": %.17g, \"beta\": %.17g%s"),
        c->lr, c->lr_power, c->init_acc, c->l1, c->l2, c->shr, c->beta,
        legacy ? ot_fmt(", \"decay\": %.17g, " OT_LEGACY, c->decay) : "");
}

/* One coordinate, one step, the paper's form (z is the paper's z); scaled:
 * tf.keras dense with l2_shrinkage > 0, the linear slot holds lr * z. */
static void ref_coord(const cfg *c, int f32, int scaled, double lr, double g, double *w, double *n,
                      double *z)
{
    double e = -rd(f32, c->lr_power), l1 = rd(f32, c->l1), l2 = rd(f32, c->l2);
    double beta = rd(f32, c->beta), shr = rd(f32, c->shr);
    double gs = g + 2 * shr * *w;
    double n_new = *n + g * g;
    if (scaled) *z += gs * lr - (pow(n_new, e) - pow(*n, e)) * *w;
    else *z += gs - (pow(n_new, e) - pow(*n, e)) / lr * *w;
    *n = n_new;
    double th = scaled ? l1 * lr : l1;
    if (fabs(*z) <= th) *w = 0;
    else if (scaled) *w = ((*z > 0 ? th : -th) - *z) / (beta + pow(n_new, e) + 2 * l2 * lr);
    else *w = ((*z > 0 ? th : -th) - *z) / ((beta + pow(n_new, e)) / lr + 2 * l2);
}

static double ref_lr(const cfg *c, int legacy, int f32, int k)
{
    return rd(f32, legacy ? c->lr / (1.0 + c->decay * k) : c->lr);
}

/* ---- dense trajectories ----------------------------------------------------------- */

static double grad_at(int k, int i) { return sin(0.7 * k + 1.3 * i) * (1.0 + 0.2 * i) - 0.04 * k; }
static double init_at(int i) { return 0.6 - 0.25 * i; }

static const ot_dense DENSE = {N, STEPS, init_at, grad_at, 0, NULL};

/* The drivers' form: state accumulator, linear. */
static void ref_table(const void *h_, int k, double *w, double *const *st, const double *g, int n)
{
    const hp *h = h_;
    for (int i = 0; i < n; i++)
        ref_coord(&h->c, h->f32, h->scaled, ref_lr(&h->c, h->legacy, h->f32, k), g[i], &w[i],
                  &st[0][i], &st[1][i]);
}

/* c in one generation against the reference in each dtype (f32: the
 * values a float32 run sees): the dense problem, variable and both slots
 * (legacy with l2_shrinkage: the lr-scaled linear slot), or, legacy, the
 * sparse problem sp on the indexed rows only. */
static void check(const cfg *c, int legacy, const ot_sparse *sp)
{
    hp h = {*c, legacy, 0, legacy && c->shr > 0 && !sp}, h32 = h;
    h32.f32 = 1;
    ot_case oc = {
        cfg_json(c, legacy),         ref_table,    &h,          2, {"accumulator", "linear"},
        .state_init = {c->init_acc}, .round32 = 1, .hp32 = &h32};
    if (sp) ot_check_sparse(sp, oc, 1);
    else ot_check_dense(&DENSE, oc);
}

static void check_both(const cfg *c)
{
    check(c, 0, NULL);
    check(c, 1, NULL);
}

OPTIM_TEST(test_dense_plain)
{
    cfg c = DEFAULTS;
    c.lr = 0.1;
    check_both(&c);
    c.init_acc = 0.5;
    check_both(&c);
}

OPTIM_TEST(test_dense_lr_power)
{
    cfg c = DEFAULTS;
    c.lr = 0.2;
    c.lr_power = -0.7; /* pow in both generations */
    check_both(&c);
    c.lr_power = -0.25;
    c.init_acc = 0.3;
    check_both(&c);
    c.lr_power = 0.0; /* a fixed learning rate: n^0 == 1 */
    check_both(&c);
}

OPTIM_TEST(test_dense_l1)
{
    cfg c = DEFAULTS;
    c.lr = 0.3;
    c.l1 = 0.4; /* large enough to pin some coordinates at 0 */
    check_both(&c);
    c.lr_power = -0.7;
    check_both(&c);
}

OPTIM_TEST(test_dense_l2)
{
    cfg c = DEFAULTS;
    c.lr = 0.3;
    c.l2 = 0.25;
    check_both(&c);
    c.lr_power = -0.7;
    check_both(&c);
}

OPTIM_TEST(test_dense_l2_shrinkage)
{
    cfg c = DEFAULTS;
    c.lr = 0.3;
    c.shr = 0.1;
    check_both(&c);
    c.lr_power = -0.7;
    check_both(&c);
}

OPTIM_TEST(test_dense_beta)
{
    cfg c = DEFAULTS;
    c.lr = 0.3;
    c.beta = 0.5;
    check_both(&c);
    c.lr_power = -0.7;
    c.l2 = 0.1;
    check_both(&c);
}

OPTIM_TEST(test_dense_all)
{
    cfg c = {0.25, -0.6, 0.2, 0.05, 0.1, 0.05, 0.2, 0};
    check_both(&c);
    c.lr_power = -0.5;
    check_both(&c);
}

/* Legacy decay: lr_t = lr / (1 + decay * t) changes every step. With
 * l2_shrinkage the legacy kernel's lr-scaled linear slot then gives another
 * trajectory than Keras 3's rule would (checked to differ). */
OPTIM_TEST(test_dense_legacy_decay)
{
    cfg c = {0.5, -0.5, 0.1, 0.02, 0.1, 0, 0.1, 0.3};
    check(&c, 1, NULL);
    c.shr = 0.2;
    check(&c, 1, NULL);
    /* The two recurrences part: same inputs, standard vs lr-scaled. */
    double w1 = 1, n1 = 0.1, z1 = 0, w2 = 1, n2 = 0.1, z2 = 0;
    for (int k = 0; k < STEPS; k++) {
        double lr = ref_lr(&c, 1, 0, k);
        ref_coord(&c, 0, 0, lr, grad_at(k, 1), &w1, &n1, &z1);
        ref_coord(&c, 0, 1, lr, grad_at(k, 1), &w2, &n2, &z2);
    }
    assert_gt(fabs(w1 - w2), 1e-3);
}

/* The optimizers of ja and jb on F64 [rows, cols] variables (cols 0:
 * [rows]) from init, the same gradients grad_at(k, i) for `steps` steps
 * (jb's sparse, every row indexed, if sparse_b): the same w, to 1e-12,
 * and ja's linear slot `scale` times jb's. */
static void check_linear_scale(const char *ja, const char *jb, int sparse_b, int rows, int cols,
                               const double *init, int steps, double scale)
{
    optim_optimizer *o[2] = {optim_test_make(ja), optim_test_make(jb)};
    int64_t shape[2] = {rows, cols}, idx[16];
    int n = rows * (cols ? cols : 1);
    optim_var *v[2] = {optim_test_var("a", OPTIM_F64, cols ? 2 : 1, shape, init),
                       optim_test_var("b", OPTIM_F64, cols ? 2 : 1, shape, init)};
    for (int r = 0; r < rows; r++) idx[r] = r;
    for (int k = 0; k < steps; k++) {
        double g[16];
        for (int i = 0; i < n; i++) g[i] = grad_at(k, i);
        for (int j = 0; j < 2; j++) {
            optim_tensor t = optim_tensor_make(OPTIM_F64, g, cols ? 2 : 1, shape);
            optim_grad_var p = {
                j && sparse_b ? optim_grad_sparse(idx, rows, t) : optim_grad_dense(t), v[j]};
            ot_step(o[j], &p, 1);
        }
    }
    optim_var *za = optim_get_slot(o[0], v[0], "linear"),
              *zb = optim_get_slot(o[1], v[1], "linear");
    for (int i = 0; i < n; i++) {
        assert_close(optim_var_get(v[0], i), optim_var_get(v[1], i), 1e-12, 1e-14);
        assert_close(optim_var_get(za, i), scale * optim_var_get(zb, i), 1e-12, 1e-14);
    }
    optim_destroy(o[0]);
    optim_test_free(o[1], v[0], v[1]);
}

/* With a constant learning rate the legacy dense l2_shrinkage kernel lands
 * on Keras 3's variable while its linear slot is lr times Keras 3's. */
OPTIM_TEST(test_legacy_shrinkage_linear_scale)
{
    cfg c = {0.25, -0.5, 0.1, 0.01, 0.2, 0.1, 0.1, 0};
    double init[N];
    for (int i = 0; i < N; i++) init[i] = init_at(i);
    check_linear_scale(cfg_json(&c, 1), cfg_json(&c, 0), 0, N, 0, init, STEPS, 0.25);
}

/* Legacy hyperparameters (learning_rate_power, l1, l2, beta) may change
 * between steps, as tf.keras's _set_hyper values; the reference follows. */
static double l1_now;
static double l1_fn(void *user)
{
    (void)user;
    return l1_now;
}

static void set_hypers(optim_optimizer *opt, void *c_, int k)
{
    cfg *c = &((hp *)c_)->c;
    c->l1 = l1_now = 0.05 * (k % 4);
    c->lr_power = k < 5 ? -0.5 : -0.7;
    c->beta = k < 7 ? 0.0 : 0.3;
    assert_ok(optim_set_hyper(opt, "learning_rate_power", c->lr_power), opt);
    assert_ok(optim_set_hyper(opt, "beta", c->beta), opt);
}

OPTIM_TEST(test_legacy_dynamic)
{
    optim_optimizer *opt = optim_test_make(FTRL("\"learning_rate\": 0.3, " OT_LEGACY));
    assert_ok(optim_set_hyper_fn(opt, "l1_regularization_strength", l1_fn, NULL), opt);
    hp h = {{0.3, -0.5, 0.1, 0, 0, 0, 0, 0}, 1, 0, 0};
    ot_case oc = {NULL, ref_table, &h, 2, .state_init = {0.1}, .tol = {2e-5, 2e-6, 1e-12, 1e-14}};
    optim_var *v = ot_check_dynamic(opt, &DENSE, 10, &oc, OPTIM_F64, set_hypers);
    /* A callable out of range fails the step; nothing changes. */
    l1_now = -0.1;
    ot_expect_step_refused(opt, v, 1, OPTIM_ERANGE, "l1_regularization_strength");
    optim_test_free(opt, v);
}

/* ---- golden values --------------------------------------------------------------- */

/* keras/src/optimizers/ftrl_test.py test_single_step. */
OPTIM_TEST(test_keras3_golden_single_step)
{
    ot_check_keras_single_step(FTRL("\"learning_rate\": 0.5"),
                               (double[]){0.2218, 1.3954, 2.3651, 2.8814});
}

/* keras/src/optimizers/ftrl_test.py test_correctness_with_golden. */
OPTIM_TEST(test_keras3_golden_correctness)
{
    static const double golden[5][10] = {
        {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0},
        {-0.0034, -0.0077, -0.0118, -0.0157, -0.0194, -0.023, -0.0263, -0.0294, -0.0325, -0.0354},
        {-0.0078, -0.0162, -0.0242, -0.0317, -0.0387, -0.0454, -0.0516, -0.0575, -0.0631, -0.0685},
        {-0.0121, -0.0246, -0.0363, -0.0472, -0.0573, -0.0668, -0.0757, -0.0842, -0.0922, -0.0999},
        {-0.0164, -0.0328, -0.0481, -0.0623, -0.0753, -0.0875, -0.099, -0.1098, -0.1201, -0.1299},
    };
    const char *json = FTRL(
        "\"learning_rate\": 0.05, \"learning_rate_power\": -0.2, \"initial_accumulator_value\": 0.4, "
        "\"l1_regularization_strength\": 0.05, \"l2_regularization_strength\": 0.15, "
        "\"l2_shrinkage_regularization_strength\": 0.01, \"beta\": 0.3");
    ot_check_keras_golden(json, OPTIM_F32, golden[0], 10);
    ot_check_keras_golden(json, OPTIM_F64, golden[0], 10);
}

/* tf_keras/optimizers/legacy/ftrl_test.py's two float32 variables var0 and
 * var1 stepped together `steps` times: grads0 = [0.1, 0.2] and grads1 =
 * [0.01, 0.02] ([2]), or, sparse, 0.1 at row 0 of var0 and 0.02 at row 1
 * of var1 ([2, 1], rows of one element). */
static void run_two(optim_optimizer *opt, int sparse, const double *init0, const double *init1,
                    int steps, optim_var **v)
{
    int64_t shape[2] = {2, 1}, vs[2] = {1, 1}, idx[2] = {0, 1};
    float g[2][2] = {{0.1f, 0.2f}, {0.01f, 0.02f}}, s[2] = {0.1f, 0.02f};
    v[0] = optim_test_var("var0", OPTIM_F32, sparse ? 2 : 1, shape, init0);
    v[1] = optim_test_var("var1", OPTIM_F32, sparse ? 2 : 1, shape, init1);
    for (int k = 0; k < steps; k++) {
        optim_grad_var p[2];
        for (int j = 0; j < 2; j++)
            p[j] = (optim_grad_var){
                sparse ? optim_grad_sparse(&idx[j], 1, optim_tensor_make(OPTIM_F32, &s[j], 2, vs))
                       : optim_grad_dense(optim_tensor_make(OPTIM_F32, g[j], 1, shape)),
                v[j]};
        ot_step(opt, p, 2);
    }
}

/* The dense tests: lr 3.0, initial_accumulator_value 0.1. */
static void legacy_golden(const char *extra, const double *init0, const double *init1, int steps,
                          const double *want0, const double *want1)
{
    optim_optimizer *opt = optim_test_make(ot_fmt(
        FTRL("\"learning_rate\": 3.0, \"initial_accumulator_value\": 0.1%s, " OT_LEGACY), extra));
    optim_var *v[2];
    run_two(opt, 0, init0, init1, steps, v);
    assert_var_close(v[0], want0, 2, 1e-5, 1e-6);
    assert_var_close(v[1], want1, 2, 1e-5, 1e-6);
    optim_test_free(opt, v[0], v[1]);
}

OPTIM_TEST(test_legacy_golden)
{
    const double zero[2] = {0, 0}, a[2] = {1, 2}, b[2] = {4, 3};
    legacy_golden("", zero, zero, 3, (double[]){-2.60260963, -4.29698515},
                  (double[]){-0.28432083, -0.56694895});
    legacy_golden("", a, b, 3, (double[]){-2.55607247, -3.98729396},
                  (double[]){-0.28232238, -0.56096673});
    legacy_golden(", \"l1_regularization_strength\": 0.001", a, b, 10,
                  (double[]){-7.66718769, -10.91273689}, (double[]){-0.93460727, -1.86147261});
    legacy_golden(", \"beta\": 0.1", a, b, 10, (double[]){-6.096838, -9.162214},
                  (double[]){-0.717741, -1.425132});
    legacy_golden(", \"l2_regularization_strength\": 0.1, \"beta\": 0.1", a, b, 10,
                  (double[]){-2.735487, -4.704625}, (double[]){-0.294335, -0.586556});
    legacy_golden(", \"l1_regularization_strength\": 0.001, \"l2_regularization_strength\": 2.0", a,
                  b, 10, (double[]){-0.24059935, -0.46829352},
                  (double[]){-0.02406147, -0.04830509});
    legacy_golden(", \"l1_regularization_strength\": 0.001, \"l2_regularization_strength\": 2.0, "
                  "\"l2_shrinkage_regularization_strength\": 0.1",
                  a, b, 10, (double[]){-0.22578995, -0.44345796},
                  (double[]){-0.14378493, -0.13229476});
}

/* testFtrlWithL1_L2_L2ShrinkageSparse: one-element rows, index 0 of var0
 * and index 1 of var1; the other rows stay. */
OPTIM_TEST(test_legacy_golden_sparse)
{
    optim_optimizer *opt = optim_test_make(
        FTRL("\"learning_rate\": 3.0, "
             "\"initial_accumulator_value\": 0.1, \"l1_regularization_strength\": 0.001, "
             "\"l2_regularization_strength\": 2.0, "
             "\"l2_shrinkage_regularization_strength\": 0.1, " OT_LEGACY));
    optim_var *v[2];
    run_two(opt, 1, (double[]){1, 2}, (double[]){4, 3}, 10, v);
    assert_close(optim_var_get(v[0], 0), -0.22578995, 1e-5, 1e-6);
    assert_eq(optim_var_get(v[0], 1), 2.0);
    assert_eq(optim_var_get(v[1], 0), 4.0);
    assert_close(optim_var_get(v[1], 1), -0.13229476, 1e-5, 1e-6);
    optim_test_free(opt, v[0], v[1]);
}

/* testMinimizeSparseResourceVariable: var [[1, 2]], loss = (var[0] . [4, 5])^2,
 * so the sparse gradient of row 0 is 2 * 14 * [4, 5]; Ftrl(1.0), one step. */
OPTIM_TEST(test_legacy_golden_minimize_sparse)
{
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(FTRL("\"learning_rate\": 1.0, " OT_LEGACY));
        optim_var *v = optim_test_var("var0", dt, 2, (int64_t[2]){1, 2}, (double[]){1, 2});
        ot_step_row(opt, v, 0, (double[]){112, 140});
        assert_close(optim_var_get(v, 0), 0, 0, 0.01);
        assert_close(optim_var_get(v, 1), 1, 0, 0.01);
        optim_test_free(opt, v);
    }
}

/* From w = 0 without regularisation FTRL is Adagrad (lr_power -0.5) and
 * gradient descent (lr_power 0): testEquiv{,Sparse}{Adagrad,GradientDescent}. */
OPTIM_TEST(test_legacy_equivalences)
{
    for (int gd_case = 0; gd_case < 2; gd_case++)
        for (int sparse = 0; sparse < 2; sparse++) {
            optim_optimizer *opt =
                optim_test_make(gd_case ? FTRL("\"learning_rate\": 3.0, "
                                               "\"learning_rate_power\": -0.0, " OT_LEGACY)
                                        : FTRL("\"learning_rate\": 3.0, " OT_LEGACY));
            optim_var *v[2];
            run_two(opt, sparse, (double[]){0, 0}, (double[]){0, 0}, 5, v);
            /* Adagrad (TF1 AdagradOptimizer): acc += g^2; w -= lr * g / sqrt(acc). */
            double want[2][2];
            for (int v = 0; v < 2; v++)
                for (int i = 0; i < 2; i++) {
                    double g = sparse ? (v == 0 ? (i == 0 ? 0.1 : 0) : (i == 1 ? 0.02 : 0))
                                      : (v == 0 ? (i ? 0.2 : 0.1) : (i ? 0.02 : 0.01));
                    double w = 0, acc = 0.1;
                    for (int k = 0; k < 5; k++) {
                        if (gd_case) {
                            w -= 3.0 * g;
                        } else if (g != 0) {
                            acc += g * g;
                            w -= 3.0 * g / sqrt(acc);
                        }
                    }
                    want[v][i] = w;
                }
            assert_var_close(v[0], want[0], 2, 1e-5, 1e-6);
            assert_var_close(v[1], want[1], 2, 1e-5, 1e-6);
            optim_test_free(opt, v[0], v[1]);
        }
}

/* ---- sparse ------------------------------------------------------------------------- */

#define ROWS 6
#define SSTEPS 12

/* Step k: 5 indices over rows 0..4 (row 5 never indexed), with duplicates. */
static int64_t sp_index(int k, int j)
{
    static const int64_t pat[4][5] = {
        {1, 4, 1, 1, 0}, {0, 4, 3, 4, 0}, {2, 2, 3, 1, 2}, {3, 0, 0, 4, 1}};
    return pat[k % 4][j];
}
static double sp_val(int k, int j, int c)
{
    return cos(1.1 * k + 0.7 * j + 0.3 * c) * (1 + 0.1 * c);
}
static double table_init(int r, int c) { return 0.3 * r - 0.2 * c - 0.4; }

/* Keras 3: a sparse gradient gives exactly the dense-equivalent step (every
 * row, zero gradient where no index points), bit for bit, slots included. */
OPTIM_TEST(test_sparse_keras3_equals_dense)
{
    static const cfg cfgs[] = {
        {0.2, -0.5, 0.1, 0, 0, 0, 0, 0},
        {0.2, -0.7, 0.1, 0.05, 0, 0, 0, 0},
        {0.2, -0.5, 0.1, 0, 0.1, 0.1, 0.3, 0},
        {0.2, -0.6, 0.2, 0.02, 0.1, 0.05, 0.2, 0},
    };
    static const int widths[] = {0, 3, 300};
    static const char *const slots[] = {"accumulator", "linear", NULL};
    for (size_t ci = 0; ci < sizeof cfgs / sizeof *cfgs; ci++)
        for (size_t wi = 0; wi < 3; wi++) {
            const char *json = cfg_json(&cfgs[ci], 0);
            ot_sparse sp = {ROWS, widths[wi], SSTEPS, 5, sp_index, sp_val, table_init};
            ot_check_sparse_equals_dense(&sp, json, slots);
        }
}

/* Keras 3: a row nobody indexes still changes. Its w is recomputed from its
 * z and n (0 when z == 0), and l2_shrinkage moves its z by 2 * s * w. */
OPTIM_TEST(test_sparse_keras3_untouched_rows)
{
    for (int shrink = 0; shrink < 2; shrink++) {
        optim_optimizer *opt =
            optim_test_make(shrink ? FTRL("\"learning_rate\": 0.5, "
                                          "\"l2_shrinkage_regularization_strength\": 0.25")
                                   : FTRL("\"learning_rate\": 0.5"));
        optim_var *v = optim_test_var("e", OPTIM_F64, 2, (int64_t[2]){3, 1}, (double[]){1, 2, 3});
        ot_step_row(opt, v, 0, (double[]){1});
        optim_var *lin = optim_get_slot(opt, v, "linear"),
                  *acc = optim_get_slot(opt, v, "accumulator");
        for (int r = 1; r < 3; r++) {
            double w0 = r + 1.0, z = shrink ? 2 * 0.25 * w0 : 0.0;
            assert_eq(optim_var_get(acc, r), 0.1);
            assert_eq(optim_var_get(lin, r), z);
            /* w = (clip(z) - z) / (sqrt(n) / lr), l1 = 0: -z / q. */
            assert_close(optim_var_get(v, r), -z / (sqrt(0.1) / 0.5), 1e-15, 0);
            if (!shrink) assert_eq(optim_var_get(v, r), 0.0);
        }
        /* Row 0 follows the rule with g = 1. */
        double z0 = 1 + (shrink ? 0.5 : 0) - (sqrt(1.1) - sqrt(0.1)) / 0.5;
        assert_close(optim_var_get(lin, 0), z0, 1e-14, 0);
        assert_close(optim_var_get(v, 0), -z0 / (sqrt(1.1) / 0.5), 1e-14, 0);
        optim_test_free(opt, v);
    }
}

/* Legacy: duplicates summed, then only the indexed rows of w, accumulator
 * and linear change (SparseApplyFtrl, linear not lr-scaled even with
 * l2_shrinkage); rows of one element (a [ROWS] table) take TF's scalar
 * path. Row 5, never indexed, stays bit-identical. */
OPTIM_TEST(test_sparse_legacy_rows_only)
{
    static const cfg cfgs[] = {
        {0.2, -0.5, 0.1, 0, 0, 0, 0, 0},
        {0.2, -0.7, 0.1, 0, 0, 0, 0, 0},
        {0.2, -0.5, 0.1, 0.05, 0.1, 0, 0.3, 0.1},
        {0.2, -0.5, 0.1, 0, 0.1, 0.1, 0, 0},
        {0.2, -0.6, 0.2, 0.02, 0.1, 0.05, 0.2, 0.2},
        {0.2, 0.0, 0.1, 0.01, 0, 0.05, 0, 0},
    };
    for (size_t ci = 0; ci < sizeof cfgs / sizeof *cfgs; ci++)
        for (int cols = 0; cols <= 3; cols += 3)
            check(&cfgs[ci], 1, &(ot_sparse){ROWS, cols, SSTEPS, 5, sp_index, sp_val, table_init});
}

/* Legacy with l2_shrinkage: the same gradient dense or sparse (every row
 * indexed) gives the same w, but the dense kernel keeps lr * z in linear
 * and the sparse one z. */
OPTIM_TEST(test_legacy_sparse_vs_dense_linear)
{
    const char *json = FTRL("\"learning_rate\": 0.5, "
                            "\"l2_shrinkage_regularization_strength\": 0.1, " OT_LEGACY);
    check_linear_scale(json, json, 1, 3, 2, (double[6]){1, -1, 0.5, 2, -0.3, 0}, 8, 0.5);
}

/* initial_accumulator_value 0 and a zero gradient: n' = 0 and the
 * denominator is 0. Keras 3 divides (0 / 0, NaN, as keras.ops would); the
 * legacy dense kernel selects 0 since |z| > l1 fails; TF's sparse kernel
 * divides too. */
OPTIM_TEST(test_zero_accumulator)
{
    for (int legacy = 0; legacy < 2; legacy++)
        for (int sparse = 0; sparse < 2; sparse++) {
            optim_optimizer *opt =
                optim_test_make(ot_gen(FTRL("\"initial_accumulator_value\": 0.0"), legacy));
            int64_t shape[2] = {2, 2};
            optim_var *v = optim_test_var("v", OPTIM_F64, 2, shape, (double[]){0, 0, 0, 0});
            double g[4] = {0, 0, 0, 0};
            if (sparse) ot_step_row(opt, v, 0, g);
            else ot_step_dense(opt, v, g);
            if (legacy && !sparse) assert_eq(optim_var_get(v, 0), 0.0);
            else assert_nan(optim_var_get(v, 0));
            if (legacy && sparse) assert_eq(optim_var_get(v, 2), 0.0); /* row 1 untouched */
            optim_test_free(opt, v);
        }
}

/* ---- slots and config ------------------------------------------------------------- */

OPTIM_TEST(test_slots)
{
    for (int legacy = 0; legacy < 2; legacy++) OPTIM_FOR_DTYPES(dt)
        {
            optim_optimizer *opt =
                optim_test_make(ot_gen(FTRL("\"initial_accumulator_value\": 0.3"), legacy));
            int64_t n3 = 3;
            optim_var *a = optim_test_var("a", dt, 1, &n3, (double[]){1, 2, 3});
            optim_var *b = optim_test_var("b", dt, 1, &n3, (double[]){1, 2, 3});
            optim_var *vars[2] = {a, b};
            assert_ok(optim_build(opt, vars, 2), opt);
            ot_expect_slot_names(opt, "accumulator", "linear", NULL);
            assert_eq(optim_weights_count(opt), 5);
            ot_expect_weight_names(opt, 1, "a/accumulator", "a/linear", "b/accumulator", NULL);
            const double acc = rd(dt == OPTIM_F32, 0.3);
            assert_var_eq(optim_get_slot(opt, a, "accumulator"), ((double[3]){acc, acc, acc}), 3);
            assert_var_eq(optim_get_slot(opt, b, "linear"), ((double[3]){0, 0, 0}), 3);
            optim_test_free(opt, a, b);
        }
}

/* keras.optimizers.Ftrl().get_config() and
 * tf.keras.optimizers.legacy.Ftrl().get_config(), keys in their order. */
OPTIM_TEST(test_config_defaults)
{
    ot_expect_config(
        "\"ftrl\"",
        "{\"name\":\"ftrl\",\"learning_rate\":0.001,\"weight_decay\":null,\"clipnorm\":null,"
        "\"global_clipnorm\":null,\"clipvalue\":null,\"use_ema\":false,\"ema_momentum\":0.99,"
        "\"ema_overwrite_frequency\":null,\"loss_scale_factor\":null,"
        "\"gradient_accumulation_steps\":null,\"learning_rate_power\":-0.5,"
        "\"initial_accumulator_value\":0.1,\"l1_regularization_strength\":0.0,"
        "\"l2_regularization_strength\":0.0,\"l2_shrinkage_regularization_strength\":0.0,"
        "\"beta\":0.0}");
    ot_expect_config(
        FTRL("" OT_LEGACY),
        "{\"name\":\"Ftrl\",\"learning_rate\":0.001,\"decay\":0.0,"
        "\"initial_accumulator_value\":0.1,\"learning_rate_power\":-0.5,"
        "\"l1_regularization_strength\":0.0,\"l2_regularization_strength\":0.0,\"beta\":0.0,"
        "\"l2_shrinkage_regularization_strength\":0.0}");
}

OPTIM_TEST(test_config_round_trip)
{
    /* keras ftrl_test.py test_config's values. */
    ot_expect_config(
        FTRL(
            "\"learning_rate\": 0.05, \"learning_rate_power\": -0.2, "
            "\"initial_accumulator_value\": 0.4, \"l1_regularization_strength\": 0.05, "
            "\"l2_regularization_strength\": 0.15, \"l2_shrinkage_regularization_strength\": 0.01, "
            "\"beta\": 0.3, \"clipnorm\": 1.0"),
        "{\"name\":\"ftrl\",\"learning_rate\":0.05,\"weight_decay\":null,\"clipnorm\":1.0,"
        "\"global_clipnorm\":null,\"clipvalue\":null,\"use_ema\":false,\"ema_momentum\":0.99,"
        "\"ema_overwrite_frequency\":null,\"loss_scale_factor\":null,"
        "\"gradient_accumulation_steps\":null,\"learning_rate_power\":-0.2,"
        "\"initial_accumulator_value\":0.4,\"l1_regularization_strength\":0.05,"
        "\"l2_regularization_strength\":0.15,\"l2_shrinkage_regularization_strength\":0.01,"
        "\"beta\":0.3}");
    ot_expect_config(
        FTRL(
            "\"name\": \"wide\", \"lr\": 0.05, \"decay\": 0.01, "
            "\"learning_rate_power\": -0.2, \"initial_accumulator_value\": 0.4, "
            "\"l1_regularization_strength\": 0.05, \"l2_regularization_strength\": 0.15, "
            "\"l2_shrinkage_regularization_strength\": 0.01, \"beta\": -0.3, \"clipvalue\": 2.0, " OT_LEGACY),
        "{\"name\":\"wide\",\"clipvalue\":2.0,\"learning_rate\":0.05,\"decay\":0.01,"
        "\"initial_accumulator_value\":0.4,\"learning_rate_power\":-0.2,"
        "\"l1_regularization_strength\":0.05,\"l2_regularization_strength\":0.15,\"beta\":-0.3,"
        "\"l2_shrinkage_regularization_strength\":0.01}");
}

OPTIM_TEST(test_config_ranges)
{
    ot_expect_refused_gens(FTRL("\"learning_rate_power\": 0.1"), OPTIM_ERANGE,
                           "learning_rate_power", "[-inf, 0]");
    ot_expect_refused_gens(FTRL("\"initial_accumulator_value\": -0.1"), OPTIM_ERANGE,
                           "initial_accumulator_value", "[0, inf)");
    ot_expect_refused_gens(FTRL("\"l1_regularization_strength\": -0.1"), OPTIM_ERANGE,
                           "l1_regularization_strength", "[0, inf)");
    ot_expect_refused_gens(FTRL("\"l2_regularization_strength\": -0.1"), OPTIM_ERANGE,
                           "l2_regularization_strength", "[0, inf)");
    ot_expect_refused_gens(FTRL("\"l2_shrinkage_regularization_strength\": -0.1"), OPTIM_ERANGE,
                           "l2_shrinkage_regularization_strength", "[0, inf)");
    ot_expect_refused_gens(FTRL("\"learning_rate\": -1"), OPTIM_ERANGE, "learning_rate",
                           "[0, inf)");
    ot_expect_refused_gens(FTRL("\"beta\": true"), OPTIM_ETYPE, "beta", NULL);
    ot_expect_refused_gens(FTRL("\"l1\": 0.1"), OPTIM_EKEY, "l1", NULL);
    ot_expect_refused_gens(FTRL("\"epsilon\": 0.1"), OPTIM_EKEY, "unknown config key 'epsilon'",
                           NULL);
    for (int legacy = 0; legacy < 2; legacy++) {
        /* beta has no range in either generation; 0 is allowed where >= 0. */
        optim_optimizer *opt = optim_test_make(
            ot_gen(FTRL("\"beta\": -2.5, "
                        "\"learning_rate_power\": 0.0, \"initial_accumulator_value\": 0.0"),
                   legacy));
        /* optim_set_hyper checks the same ranges and changes nothing on error. */
        assert_status(optim_set_hyper(opt, "learning_rate_power", 0.5), OPTIM_ERANGE, opt);
        assert_contains(optim_errmsg(opt),
                        "learning_rate_power is 0.5, expected a value in [-inf, 0]");
        assert_status(optim_set_hyper(opt, "l2_regularization_strength", -1), OPTIM_ERANGE, opt);
        assert_contains(optim_errmsg(opt), "l2_regularization_strength");
        double v;
        assert_ok(optim_get_hyper(opt, "learning_rate_power", &v), opt);
        assert_eq(v, 0.0);
        assert_ok(optim_set_hyper(opt, "beta", 1e6), opt);
        optim_destroy(opt);
    }
    /* Keys of the other generation. */
    ot_expect_refused(FTRL("\"lr\": 0.1, \"is_legacy_optimizer\": false"), OPTIM_EKEY, "lr",
                      "other Keras generation");
    ot_expect_refused(FTRL("\"use_ema\": false, " OT_LEGACY), OPTIM_EKEY, "use_ema",
                      "other Keras generation");
}

/* Legacy learning_rate_power, l1, l2 and beta are hyperparameters (variables,
 * callables); Keras 3 keeps them as plain numbers, as are
 * initial_accumulator_value and l2_shrinkage in both. */
OPTIM_TEST(test_config_dynamic_kinds)
{
    static const char *const hypers[] = {"learning_rate_power", "l1_regularization_strength",
                                         "l2_regularization_strength", "beta"};
    static const char *const plain[] = {"initial_accumulator_value",
                                        "l2_shrinkage_regularization_strength"};
    optim_optimizer *k3 = optim_test_make("\"Ftrl\"");
    optim_optimizer *lg = optim_test_make(FTRL("" OT_LEGACY));
    for (int i = 0; i < 4; i++) {
        assert_ok(optim_set_hyper_fn(lg, hypers[i], l1_fn, NULL), lg);
        assert_status(optim_set_hyper_fn(k3, hypers[i], l1_fn, NULL), OPTIM_ETYPE, k3);
    }
    for (int i = 0; i < 2; i++) {
        assert_status(optim_set_hyper_fn(lg, plain[i], l1_fn, NULL), OPTIM_ETYPE, lg);
        assert_status(optim_set_hyper_fn(k3, plain[i], l1_fn, NULL), OPTIM_ETYPE, k3);
    }
    optim_destroy(k3);
    optim_destroy(lg);
}

/* ---- threads ---------------------------------------------------------------------- */

OPTIM_TEST(test_threads_bitwise)
{
    static const char *const slots[] = {"accumulator", "linear", NULL};
    ot_check_threads(
        FTRL(
            "\"learning_rate\": 0.05, \"l1_regularization_strength\": 0.01, "
            "\"l2_shrinkage_regularization_strength\": 0.01, \"beta\": 0.1, \"learning_rate_power\": -0.6"),
        2, 3, 0, slots);
    ot_check_threads(FTRL("\"learning_rate\": 0.05, \"l1_regularization_strength\": 0.01, "
                          "\"l2_shrinkage_regularization_strength\": 0.01, " OT_LEGACY),
                     2, 3, 0, slots);
}

int main(void) { return optim_test_run(); }
