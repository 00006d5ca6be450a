/* Adafactor (Keras 3) against an independent double-precision reference:
 * trajectories of 25 steps for variables of rank 0, 1, 2, 3 and 4 in f32
 * and f64 (variable and every slot), relative_step on and off, active
 * update clipping, learning-rate schedules, weight decay, sparse gradients
 * (the dense equivalent, with duplicate indices), Keras's golden values,
 * config (key set, defaults, round trip, bad values), and thread-count
 * independence.
 *
 * The reference follows Shazeer & Stern 2018 as Keras 3 writes it
 * (keras/src/optimizers/adafactor.py), with t = iterations + 1:
 *   rho = min(lr, 1/sqrt(t)); alpha = max(eps2, RMS(w)) * rho;
 *   G = g^2 + eps1; beta = 1 - t^beta_2_decay;
 *   rank >= 2: r = beta r + (1-beta) mean(G, -1); c = beta c + (1-beta) mean(G, -2);
 *              v = r / mean(r, -1) (outer) c;
 *   else:      v = beta v + (1-beta) G;
 *   u = g / sqrt(v); w -= alpha * u / max(1, RMS(u) / clip_threshold). */
#include "opt_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 25
#define AF(cfg) "{\"class_name\": \"Adafactor\", \"config\": {" cfg "}}"

/* ---- the reference ------------------------------------------------------------------- */

typedef struct hp {
    double lr, beta_2_decay, eps1, eps2, clip, wd;
} hp;

static const hp DEFAULTS = {0.001, -0.8, 1e-30, 1e-3, 1.0, 0};

/* The drivers' hyperparameters: hp on a variable of this shape; f32: the
 * learning rate as a float32 run sees it. */
typedef struct shaped {
    hp h;
    int32_t rank;
    const int64_t *shape;
    int f32;
} shaped;

/* Steps where max(1, RMS(u)/clip) > 1, over the reference runs of each
 * dtype ([1]: f32). */
static int clipped[2];

static double rms(const double *x, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
    return sqrt(s / (double)n);
}

/* The factored moments (rank >= 2, w is [B, R, C]): r = beta r + (1-beta)
 * mean(G, -1), c = beta c + (1-beta) mean(G, -2), v = r / mean(r) (outer) c. */
static void factored(const shaped *s, double beta, const double *G, double *r, double *c, double *v,
                     int64_t n)
{
    const int64_t C = s->shape[s->rank - 1], R = s->shape[s->rank - 2], B = n / (R * C);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t i = 0; i < R; i++) {
            double m = 0;
            for (int64_t j = 0; j < C; j++) m += G[(b * R + i) * C + j];
            r[b * R + i] = beta * r[b * R + i] + (1 - beta) * (m / C);
        }
        for (int64_t j = 0; j < C; j++) {
            double m = 0;
            for (int64_t i = 0; i < R; i++) m += G[(b * R + i) * C + j];
            c[b * C + j] = beta * c[b * C + j] + (1 - beta) * (m / R);
        }
        double mr = 0;
        for (int64_t i = 0; i < R; i++) mr += r[b * R + i];
        mr /= R;
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < C; j++)
                v[(b * R + i) * C + j] = r[b * R + i] / mr * c[b * C + j];
    }
}

/* One step with dense gradient g at t = k + 1 (the drivers' form); state
 * r, c (the first B R and B C elements; one placeholder below rank 2), v. */
static void ref_step(const void *s_, int k, double *w, double *const *st, const double *g, int n)
{
    const shaped *s = s_;
    const hp *h = &s->h;
    const double t = (double)(k + 1), lr = h->lr;
    if (h->wd > 0)
        for (int i = 0; i < n; i++) w[i] -= w[i] * h->wd * lr;
    double rho = fmin(lr, 1.0 / sqrt(t));
    double alpha = fmax(h->eps2, rms(w, n)) * rho;
    double beta = 1.0 - pow(t, h->beta_2_decay);
    double *G = malloc((size_t)n * sizeof *G), *u = malloc((size_t)n * sizeof *u), *v = st[2];
    assert_true(G && u);
    for (int i = 0; i < n; i++) G[i] = g[i] * g[i] + h->eps1;
    if (s->rank >= 2) factored(s, beta, G, st[0], st[1], v, n);
    else
        for (int i = 0; i < n; i++) v[i] = beta * v[i] + (1 - beta) * G[i];
    for (int i = 0; i < n; i++) u[i] = g[i] / sqrt(v[i]);
    double d = fmax(1.0, rms(u, n) / h->clip);
    if (d > 1) clipped[s->f32]++;
    for (int i = 0; i < n; i++) w[i] -= alpha * (u[i] / d);
    free(G);
    free(u);
}

/* ---- helpers ------------------------------------------------------------------------ */

/* A dense gradient whose scale changes from step to step (so that the
 * clipping threshold is crossed at some steps), some elements tiny. */
static double grad_at(int k, int i)
{
    double scale = 1.0 + 0.9 * sin(0.6 * k);
    return scale * sin(0.7 * k + 1.3 * (double)i + 0.2) * (1.0 + 0.05 * (double)(i % 7)) - 0.02 * k;
}
static double init_at(int i) { return 0.5 - 0.13 * (double)(i % 11) + 0.2 * sin(0.05 * (double)i); }

static void assert_shape(const optim_var *v, int32_t rank, const int64_t *shape)
{
    assert_non_null(v);
    assert_eq(optim_var_rank(v), rank);
    for (int d = 0; d < rank; d++) assert_eq(optim_var_shape(v)[d], shape[d]);
}

/* The dense problem of grad_at on a variable of this shape. */
static ot_dense problem(int32_t rank, const int64_t *shape, int steps)
{
    int n = 1;
    for (int d = 0; d < rank; d++) n *= (int)shape[d];
    return (ot_dense){n, steps, init_at, grad_at, rank, shape};
}

/* The case of json on s's shape (s32: its f32 reference): w after every
 * step against the reference, and the moments relative to their size
 * (they may be tiny). */
static ot_case make_case(const char *json, const shaped *s, const shaped *s32, int n)
{
    int64_t nr = 1, nc = 1;
    if (s->rank >= 2) {
        nr = n / s->shape[s->rank - 1];
        nc = n / s->shape[s->rank - 2];
    }
    return (ot_case){json,
                     ref_step,
                     s,
                     3,
                     {"r", "c", "v"},
                     .tol = {2e-5, 2e-6, 1e-12, 1e-14},
                     .state_atol = {OT_ATOL_0, OT_ATOL_0, OT_ATOL_0},
                     .state_n = {nr, nc, n},
                     .round32 = 1,
                     .every_step = 1,
                     .hp32 = s32};
}

/* The trajectory of json on a variable of this shape, then the slot shapes:
 * r = shape[:-1], c = shape[:-2] + [C], v = shape; scalars as placeholders
 * below rank 2. */
static void check_trajectory(const char *json, const hp *h, int32_t rank, const int64_t *shape)
{
    shaped s = {*h, rank, shape, 0}, s32 = {*h, rank, shape, 1};
    ot_dense d = problem(rank, shape, STEPS);
    ot_case c = make_case(json, &s, &s32, d.n);
    ot_check_dense(&d, c);
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        optim_var *w = ot_run_dense(opt, &d, dt);
        assert_shape(optim_get_slot(opt, w, "v"), rank, shape);
        if (rank >= 2) {
            int64_t cs[OPTIM_MAX_RANK];
            memcpy(cs, shape, sizeof(int64_t) * (size_t)(rank - 2));
            cs[rank - 2] = shape[rank - 1];
            assert_shape(optim_get_slot(opt, w, "r"), rank - 1, shape);
            assert_shape(optim_get_slot(opt, w, "c"), rank - 1, cs);
        } else {
            assert_shape(optim_get_slot(opt, w, "r"), 0, NULL);
            assert_shape(optim_get_slot(opt, w, "c"), 0, NULL);
        }
        optim_test_free(opt, w);
    }
}

/* Ranks 0 to 4; rows longer than the kernels' blocks (512) with a ragged
 * end; a single row (R = 1, the mean over an axis of 1), also batched. */
static const int32_t RANKS[] = {0, 1, 2, 3, 4, 1, 2, 2, 3};
static const int64_t SHAPES[][4] = {{0},    {7},       {5, 4}, {3, 4, 5}, {2, 2, 3, 4},
                                    {1300}, {3, 1100}, {1, 9}, {4, 1, 6}};
#define NSHAPES 9

/* Every shape, both dtypes; returns how many reference steps clipped. */
static int check_all_shapes(const char *json, const hp *h)
{
    clipped[0] = clipped[1] = 0;
    for (int s = 0; s < NSHAPES; s++) check_trajectory(json, h, RANKS[s], SHAPES[s]);
    return clipped[0] + clipped[1];
}

/* ---- trajectories ------------------------------------------------------------------- */

OPTIM_TEST(test_defaults)
{
    check_all_shapes(AF(""), &DEFAULTS);
    check_all_shapes("\"adafactor\"", &DEFAULTS);
}

/* lr 0.5 > 1/sqrt(t) from t = 5 on: rho follows 1/sqrt(t). relative_step
 * on or off gives the same numbers (Keras 3 takes the min either way). */
OPTIM_TEST(test_relative_step)
{
    hp h = DEFAULTS;
    h.lr = 0.5;
    check_all_shapes(AF("\"learning_rate\": 0.5"), &h);
    check_all_shapes(AF("\"learning_rate\": 0.5, "
                        "\"relative_step\": false"),
                     &h);
    /* Bit for bit the same. */
    static const int64_t shape[2] = {4, 5};
    ot_dense d = problem(2, shape, 10);
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *o[2] = {
            optim_test_make(AF("\"learning_rate\": 0.5, \"relative_step\": false")),
            optim_test_make(AF("\"learning_rate\": 0.5"))};
        optim_var *w[2] = {ot_run_dense(o[0], &d, dt), ot_run_dense(o[1], &d, dt)};
        assert_vars_bitwise(w[0], w[1]);
        optim_destroy(o[0]);
        optim_test_free(o[1], w[0], w[1]);
    }
}

/* Small clip_threshold: RMS(u)/clip > 1 at most steps; other epsilons. */
OPTIM_TEST(test_clip_threshold)
{
    hp h = {0.01, -0.65, 1e-15, 1e-4, 0.5, 0};
    int all =
        check_all_shapes(AF("\"learning_rate\": 0.01, "
                            "\"beta_2_decay\": -0.65, \"epsilon_1\": 1e-15, \"epsilon_2\": 1e-4, "
                            "\"clip_threshold\": 0.5"),
                         &h);
    assert_gt(all, NSHAPES * 2 * STEPS / 2); /* more than half the steps */
    /* clip_threshold 1.2: some steps clip, some not. */
    hp h2 = {0.05, -0.8, 1e-30, 1e-3, 1.2, 0};
    clipped[0] = 0;
    check_trajectory(AF("\"learning_rate\": 0.05, "
                        "\"clip_threshold\": 1.2"),
                     &h2, 2, (int64_t[2]){6, 5});
    assert_gt(clipped[0], 0); /* the f64 run */
    assert_lt(clipped[0], STEPS);
    /* epsilon_2 dominating RMS(w) (variable near zero). */
    hp h3 = {0.3, -0.8, 1e-30, 2.0, 1.0, 0};
    check_all_shapes(AF("\"learning_rate\": 0.3, "
                        "\"epsilon_2\": 2.0"),
                     &h3);
    /* A large epsilon_1, so that where it is added (to g^2, before the
     * means and the moving averages) shows. */
    hp h4 = {0.05, -0.8, 0.05, 1e-3, 1.0, 0};
    check_all_shapes(AF("\"learning_rate\": 0.05, "
                        "\"epsilon_1\": 0.05"),
                     &h4);
}

/* Keras 3 weight decay (base option) before the update: RMS(w) sees it. */
OPTIM_TEST(test_weight_decay_trajectory)
{
    hp h = {0.05, -0.8, 1e-30, 1e-3, 1.0, 0.1};
    check_all_shapes(AF("\"learning_rate\": 0.05, "
                        "\"weight_decay\": 0.1"),
                     &h);
}

/* A learning-rate schedule and a callable: rho = min(lr(step), 1/sqrt(t)). */
static double sched(void *user, int64_t step)
{
    (void)user;
    return 0.9 / (1.0 + 0.5 * (double)step);
}
static double lr_now; /* the callable's value */

static void set_lr(void *s_, double lr)
{
    shaped *s = s_;
    s->h.lr = s->f32 ? (float)lr : lr;
}
static void set_lr_sched(optim_optimizer *opt, void *s, int k)
{
    (void)opt, set_lr(s, sched(NULL, k));
}
static void set_lr_fn(optim_optimizer *opt, void *s, int k)
{
    (void)opt, set_lr(s, lr_now = k % 3 == 0 ? 0.7 : 0.02);
}

OPTIM_TEST(test_dynamic_lr)
{
    static const int64_t shape[2] = {3, 4};
    ot_dense d = problem(2, shape, STEPS);
    for (int kind = 0; kind < 2; kind++) OPTIM_FOR_DTYPES(dt)
        {
            optim_optimizer *opt = optim_test_make(AF(""));
            if (kind == 0)
                assert_ok(optim_set_hyper_schedule(opt, "learning_rate", sched, NULL), opt);
            else assert_ok(optim_set_hyper_fn(opt, "learning_rate", ot_value, &lr_now), opt);
            shaped sh = {DEFAULTS, 2, shape, 0}, s32 = {DEFAULTS, 2, shape, 1};
            ot_case c = make_case(NULL, &sh, &s32, d.n);
            optim_test_free(
                opt,
                ot_check_dynamic(opt, &d, STEPS, &c, dt, kind == 0 ? set_lr_sched : set_lr_fn));
        }
}

/* ---- Keras's own tests (keras/src/optimizers/adafactor_test.py) ------------------ */

OPTIM_TEST(test_keras_single_steps)
{
    static const double want[2][4] = {{-0.3693, 0.6307, 1.6307, 2.6307},
                                      {0.7007, -0.0081, 1.2492, 3.4407}};
    OPTIM_FOR_DTYPES(dt) /* test_single_step_1d, then test_single_step_2d */
    for (int rank = 1; rank <= 2; rank++) {
        optim_optimizer *opt = optim_test_make(AF("\"learning_rate\": 0.5"));
        optim_var *w = optim_test_var("w", dt, rank, (int64_t[2]){rank == 1 ? 4 : 2, 2},
                                      (double[4]){1, 2, 3, 4});
        ot_step_dense(opt, w, (double[4]){1, 6, 7, 2});
        assert_var_close(w, want[rank - 1], 4, 1e-4, 1e-4);
        optim_test_free(opt, w);
    }
}

/* test_correctness_with_golden: x = ones(10); one step with 0.01, then
 * steps with arange(0.1, 1.1, 0.1); golden values before each. */
OPTIM_TEST(test_keras_golden)
{
    static const double golden[5][10] = {
        {0.55, 0.55, 0.55, 0.55, 0.55, 0.55, 0.55, 0.55, 0.55, 0.55},
        {0.3031, 0.3026, 0.3025, 0.3024, 0.3024, 0.3024, 0.3024, 0.3024, 0.3024, 0.3024},
        {0.1671, 0.1665, 0.1663, 0.1663, 0.1663, 0.1663, 0.1663, 0.1663, 0.1663, 0.1663},
        {0.0923, 0.0916, 0.0915, 0.0914, 0.0914, 0.0914, 0.0914, 0.0914, 0.0914, 0.0914},
        {0.0554, 0.0548, 0.0546, 0.0546, 0.0546, 0.0546, 0.0546, 0.0545, 0.0545, 0.0545},
    };
    const char *json = AF(
        "\"learning_rate\": 0.5, \"beta_2_decay\": -0.65, \"epsilon_1\": 1e-15, \"epsilon_2\": 1e-4, "
        "\"clip_threshold\": 0.9, \"relative_step\": false");
    ot_check_keras_golden(json, OPTIM_F32, golden[0], 10);
    ot_check_keras_golden(json, OPTIM_F64, golden[0], 10);
}

/* test_weight_decay: three optimizers (lr 1, weight_decay 0.004) each step
 * var1 once with a zero gradient: 2 * 0.996^3 = 1.9760959; excluded
 * variables (by name, by pointer) stay at 2. */
OPTIM_TEST(test_keras_weight_decay)
{
    ot_check_keras_weight_decay(AF("\"learning_rate\": 1.0, \"weight_decay\": 0.004"), OPTIM_F32);
    ot_check_keras_weight_decay(AF("\"learning_rate\": 1.0, \"weight_decay\": 0.004"), OPTIM_F64);
}

/* ---- sparse: the dense equivalent ----------------------------------------------------- */

/* Sparse steps (duplicates, unsorted) on a variable of the given shape, or
 * the same gradients summed into a dense tensor in order of appearance:
 * five rows a step of cos(1.1 k + 0.7 j + 0.3 e), from init_at. */
static int64_t sp_index(int k, int j)
{
    static const int64_t idx[4][5] = {
        {1, 3, 1, 1, 0}, {0, 3, 3, 2, 0}, {2, 2, 1, 3, 2}, {3, 0, 0, 0, 3}};
    return idx[k % 4][j];
}
static double sp_val(int k, int j, int e) { return cos(1.1 * k + 0.7 * j + 0.3 * (double)e); }
static double init_1(int r, int e) { return init_at(r + e); }
static double init_3(int r, int e) { return init_at(r * 3 + e); }
static double init_6(int r, int e) { return init_at(r * 6 + e); }

OPTIM_TEST(test_sparse_equals_dense)
{
    static const int32_t ranks[] = {1, 2, 3};
    static const int64_t shapes[][3] = {{6}, {6, 3}, {5, 2, 3}};
    static const int cols[] = {0, 3, 6};
    double (*const inits[])(int, int) = {init_1, init_3, init_6};
    const char *cfgs[] = {AF("\"learning_rate\": 0.1"),
                          AF("\"learning_rate\": 0.1, "
                             "\"clip_threshold\": 0.5, \"weight_decay\": 0.05")};
    for (int c = 0; c < 2; c++)
        for (int s = 0; s < 3; s++) OPTIM_FOR_DTYPES(dt)
            {
                optim_optimizer *o1 = optim_test_make(cfgs[c]), *o2 = optim_test_make(cfgs[c]);
                const ot_sparse sp = {(int)shapes[s][0], cols[s], 8, 5, sp_index, sp_val, inits[s]};
                optim_var *sv = ot_run_sparse_with(o1, &sp, dt, 0, NULL, NULL, ranks[s], shapes[s]);
                optim_var *dv = ot_run_sparse_with(o2, &sp, dt, 1, NULL, NULL, ranks[s], shapes[s]);
                assert_vars_bitwise(sv, dv);
                static const char *slots[] = {"r", "c", "v"};
                for (int k = 0; k < 3; k++)
                    assert_vars_bitwise(optim_get_slot(o1, sv, slots[k]),
                                        optim_get_slot(o2, dv, slots[k]));
                optim_destroy(o1);
                optim_test_free(o2, sv, dv);
            }
}

/* Rows never indexed: their w stays bit-identical (u = 0 there) while
 * their moments move (G = epsilon_1 enters r, c and v every step); and the
 * indexed rows follow the double-precision reference of the dense
 * equivalent. */
OPTIM_TEST(test_sparse_rows)
{
    int64_t shape[2] = {5, 3}, vs[2] = {3, 3};
    int64_t idx[3] = {3, 1, 3};
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(AF("\"learning_rate\": 0.2"));
        double w0[15], g[15], rw[15], r[15] = {0}, c[15] = {0}, v[15] = {0}, *st[3] = {r, c, v};
        for (int i = 0; i < 15; i++)
            rw[i] = w0[i] = dt == OPTIM_F64 ? init_at(i) : (float)init_at(i);
        optim_var *w = optim_test_var("emb", dt, 2, shape, w0);
        shaped sh = {{0.2, -0.8, 1e-30, 1e-3, 1.0, 0}, 2, shape, dt == OPTIM_F32};
        double prev_v[15];
        for (int k = 0; k < 6; k++) {
            double vals[9];
            float valsf[9];
            for (int i = 0; i < 9; i++) {
                vals[i] = sin(0.4 * k + 0.9 * i);
                valsf[i] = (float)vals[i];
                if (dt == OPTIM_F32) vals[i] = valsf[i];
            }
            memset(g, 0, sizeof g);
            for (int j = 0; j < 3; j++)
                for (int e = 0; e < 3; e++)
                    g[idx[j] * 3 + e] = dt == OPTIM_F64
                        ? g[idx[j] * 3 + e] + vals[j * 3 + e]
                        : (float)(g[idx[j] * 3 + e] + vals[j * 3 + e]);
            for (int i = 0; k > 0 && i < 15; i++)
                prev_v[i] = optim_var_get(optim_get_slot(opt, w, "v"), i);
            optim_grad_var p = {
                optim_grad_sparse(
                    idx, 3,
                    optim_tensor_make(dt, dt == OPTIM_F64 ? (void *)vals : (void *)valsf, 2, vs)),
                w};
            assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
            ref_step(&sh, k, rw, st, g, 15);
            assert_var_close(w, rw, 15, dt == OPTIM_F64 ? 1e-12 : 2e-5,
                             dt == OPTIM_F64 ? 1e-14 : 2e-6);
            assert_var_close(optim_get_slot(opt, w, "v"), v, 15, dt == OPTIM_F64 ? 1e-12 : 2e-5, 0);
            assert_var_close(optim_get_slot(opt, w, "r"), r, 5, dt == OPTIM_F64 ? 1e-12 : 2e-5, 0);
            for (int r = 0; r < 5; r++) {
                if (r == 1 || r == 3) continue;
                for (int e = 0; e < 3; e++) {
                    assert_eq(optim_var_get(w, r * 3 + e), w0[r * 3 + e]);
                    if (k > 0)
                        assert_ne(optim_var_get(optim_get_slot(opt, w, "v"), r * 3 + e),
                                  prev_v[r * 3 + e]);
                }
            }
        }
        optim_test_free(opt, w);
    }
}

/* ---- slots and weights ------------------------------------------------------------------ */

OPTIM_TEST(test_slots_and_weights)
{
    optim_optimizer *opt = optim_test_make(AF(""));
    int64_t s1 = 4, s3[3] = {2, 3, 4};
    double z[24] = {0};
    optim_var *a = optim_test_var("a", OPTIM_F32, 1, &s1, z),
              *b = optim_test_var("b", OPTIM_F64, 3, s3, z);
    optim_var *vars[2] = {a, b};
    assert_ok(optim_build(opt, vars, 2), opt);
    ot_expect_slot_names(opt, "r", "c", "v", NULL);
    /* iterations, then per variable r, c, v (Keras's interleaved order). */
    assert_eq(optim_weights_count(opt), 7);
    static const char *want[] = {"iterations", "a/r", "a/c", "a/v", "b/r", "b/c", "b/v"};
    for (size_t i = 0; i < 7; i++) assert_string_equal(optim_weight_name(opt, i), want[i]);
    assert_shape(optim_get_slot(opt, b, "r"), 2, (int64_t[]){2, 3});
    assert_shape(optim_get_slot(opt, b, "c"), 2, (int64_t[]){2, 4});
    assert_shape(optim_get_slot(opt, b, "v"), 3, s3);
    assert_eq(optim_var_dtype(optim_get_slot(opt, b, "r")), OPTIM_F64);
    assert_eq(optim_var_dtype(optim_get_slot(opt, a, "v")), OPTIM_F32);
    assert_shape(optim_get_slot(opt, a, "r"), 0, NULL);
    assert_null(optim_get_slot(opt, a, "velocity"));
    optim_test_free(opt, a, b);
}

/* ---- config ---------------------------------------------------------------------------- */

static const char *const KEYS[] = {
    OT_KERAS3_BASE_KEYS, "beta_2_decay",   "epsilon_1",
    "epsilon_2",         "clip_threshold", "relative_step",
};

OPTIM_TEST(test_config)
{
    optim_optimizer *opt;
    optim_error err;
    assert_ok(optim_create(&opt, &optim_adafactor_class, NULL, &err), &err);
    cJSON *c = ot_config(opt);
    ot_assert_keys(c, OT_KEYS(KEYS)); /* exactly Keras 3's keys, in get_config's order */
    assert_string_equal(cJSON_GetObjectItem(c, "name")->valuestring, "adafactor");
    ot_expect_numbers(c, "learning_rate", 0.001, "beta_2_decay", -0.8, "epsilon_1", 1e-30,
                      "epsilon_2", 1e-3, "clip_threshold", 1.0, NULL);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(c, "relative_step")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(c, "weight_decay")));
    cJSON_Delete(c);
    optim_destroy(opt);
    /* By name, case-insensitively. */
    assert_ok(optim_create_by_name(&opt, "ADAFACTOR", NULL, &err), &err);
    assert_string_equal(optim_class_of(opt)->name, optim_adafactor_class.name);
    optim_destroy(opt);
}

/* Keras's test_config values, through serialize and back. */
OPTIM_TEST(test_round_trip)
{
    optim_optimizer *opt =
        optim_test_make(AF("\"learning_rate\": 0.5, "
                           "\"beta_2_decay\": -0.65, \"epsilon_1\": 1e-15, \"epsilon_2\": 1e-4, "
                           "\"clip_threshold\": 0.9, \"relative_step\": false, \"clipnorm\": 2.0"));
    char *s1 = optim_serialize(opt);
    ot_check_round_trip(s1);
    optim_optimizer *back = optim_test_make(s1);
    double v;
    assert_ok(optim_get_hyper(back, "epsilon_1", &v), back);
    assert_eq(v, 1e-15);
    assert_ok(optim_get_hyper(back, "relative_step", &v), back);
    assert_eq(v, 0);
    assert_ok(optim_get_hyper(back, "beta_2_decay", &v), back);
    assert_eq(v, -0.65);
    assert_contains(s1, "\"clip_threshold\":0.9");
    optim_free(s1);
    optim_destroy(opt);
    optim_destroy(back);
}

OPTIM_TEST(test_bad_config)
{
    /* No legacy Adafactor in tf.keras. */
    ot_expect_refused(AF(OT_LEGACY), OPTIM_ENOTSUP, "Adafactor", NULL);
    ot_expect_refused(AF("\"beta_2\": 0.9"), OPTIM_EKEY, "beta_2", NULL);
    ot_expect_refused(AF("\"lr\": 0.1, \"is_legacy_optimizer\": false"), OPTIM_EKEY, "lr", NULL);
    ot_expect_refused(AF("\"relative_step\": 1"), OPTIM_ETYPE, "relative_step", NULL);
    ot_expect_refused(AF("\"epsilon_1\": \"1e-30\""), OPTIM_ETYPE, "epsilon_1", NULL);
    ot_expect_refused(AF("\"learning_rate\": -0.1"), OPTIM_ERANGE, "learning_rate", NULL);
    ot_expect_refused(AF("\"clip_threshold\": 1e999"), OPTIM_ERANGE, "clip_threshold", NULL);
    /* Keras validates none of its own keys: any finite number goes. */
    optim_optimizer *opt =
        optim_test_make(AF("\"beta_2_decay\": 0.3, "
                           "\"epsilon_1\": 0, \"epsilon_2\": -1, \"clip_threshold\": 100"));
    assert_status(optim_set_hyper(opt, "clip_threshold", INFINITY), OPTIM_ERANGE, opt);
    assert_contains(optim_errmsg(opt), "clip_threshold");
    assert_status(optim_set_hyper(opt, "relative_step", 0.5), OPTIM_ETYPE, opt);
    assert_contains(optim_errmsg(opt), "relative_step");
    assert_status(optim_set_hyper(opt, "no_such_key", 1), OPTIM_EKEY, opt);
    optim_destroy(opt);
    optim_options o = optim_options_defaults();
    o.generation = OPTIM_LEGACY;
    optim_error err;
    assert_status(optim_create(&opt, &optim_adafactor_class, &o, &err), OPTIM_ENOTSUP, &err);
}

/* Hyperparameters set between steps take effect at the next step. */
static void set_at_3(optim_optimizer *opt, void *s_, int k)
{
    shaped *s = s_;
    if (k != 3) return;
    s->h.clip = 0.3;
    s->h.beta_2_decay = -0.5;
    assert_ok(optim_set_hyper(opt, "clip_threshold", 0.3), opt);
    assert_ok(optim_set_hyper(opt, "beta_2_decay", -0.5), opt);
}

OPTIM_TEST(test_set_hyper_between_steps)
{
    static const int64_t shape[2] = {3, 3};
    ot_dense d = problem(2, shape, 6);
    shaped sh = {DEFAULTS, 2, shape, 0};
    ot_case c = make_case(NULL, &sh, NULL, d.n);
    optim_optimizer *opt = optim_test_make(AF(""));
    optim_test_free(opt, ot_check_dynamic(opt, &d, 6, &c, OPTIM_F64, set_at_3));
}

/* ---- threads --------------------------------------------------------------------------- */

OPTIM_TEST(test_threads_bitwise)
{
    int64_t sa[2] = {301, 257}, sb[1] = {10007}, sc[3] = {3, 50, 41};
    optim_var *vars[2][3];
    for (int t = 0; t < 2; t++) {
        optim_optimizer *opt = optim_test_make(AF("\"learning_rate\": 0.05, "
                                                  "\"global_clipnorm\": 10"));
        assert_ok(optim_set_num_threads(opt, t ? 4 : 1), opt);
        double *init = malloc(301 * 257 * sizeof *init);
        for (int64_t i = 0; i < 301 * 257; i++) init[i] = sin(0.001 * (double)i);
        vars[t][0] = optim_test_var("a", OPTIM_F32, 2, sa, init);
        vars[t][1] = optim_test_var("b", OPTIM_F64, 1, sb, init);
        vars[t][2] = optim_test_var("c", OPTIM_F32, 3, sc, init);
        float *ga = malloc(301 * 257 * sizeof *ga), *gc = malloc(6150 * sizeof *gc);
        double *gb = malloc(10007 * sizeof *gb);
        for (int k = 0; k < 4; k++) {
            for (int64_t i = 0; i < 301 * 257; i++) ga[i] = (float)cos(0.37 * (double)i + k);
            for (int64_t i = 0; i < 10007; i++) gb[i] = sin(0.11 * (double)i - k);
            for (int64_t i = 0; i < 6150; i++) gc[i] = (float)cos(0.5 * (double)i * k);
            optim_grad_var p[3] = {
                {optim_grad_dense(optim_tensor_make(OPTIM_F32, ga, 2, sa)), vars[t][0]},
                {optim_grad_dense(optim_tensor_make(OPTIM_F64, gb, 1, sb)), vars[t][1]},
                {optim_grad_dense(optim_tensor_make(OPTIM_F32, gc, 3, sc)), vars[t][2]},
            };
            assert_ok(optim_apply_gradients(opt, p, 3, 0), opt);
        }
        free(init);
        free(ga);
        free(gb);
        free(gc);
        optim_destroy(opt);
    }
    for (int i = 0; i < 3; i++) {
        assert_vars_bitwise(vars[0][i], vars[1][i]);
        optim_var_destroy(vars[0][i]);
        optim_var_destroy(vars[1][i]);
    }
}

/* A bfloat16 variable's step runs on float32 copies of the variable and its
 * slots packed one after another (src/optimizer/half_step.c), so v, where
 * the factored rule sums the columns of each chunk of rows as doubles, may
 * start at a 4-byte offset: for [4001, 4] (two chunks of rows), after
 * 2 * 16004 + 4001 + 4 floats. The step must equal the float32 step on the
 * widened values, rounded (and, under UBSan, make no misaligned double
 * access). Dense and sparse gradients, one step each from zero slots. */
#define HR 4001
#define HC 4
#define HN (HR * HC)
OPTIM_TEST(test_half_odd_slot_offset)
{
    const int64_t shape[2] = {HR, HC}, vshape[2] = {3, HC}, idx[3] = {HR - 1, 0, 2048};
    float *init = malloc(2 * HN * sizeof *init), *g = init + HN, *back = malloc(HN * sizeof *back);
    uint16_t *hinit = malloc(2 * HN * sizeof *hinit), *hg = hinit + HN,
             *want = malloc(HN * sizeof *want);
    assert_true(init && back && hinit && want);
    for (int i = 0; i < HN; i++) init[i] = (float)(0.5 - 0.0001 * i), g[i] = (float)cos(0.9 * i);
    assert_ok(optim_convert(hinit, OPTIM_BF16, init, OPTIM_F32, 2 * HN), NULL);
    assert_ok(optim_convert(init, OPTIM_F32, hinit, OPTIM_BF16, 2 * HN),
              NULL); /* the reference sees the rounded values */
    for (int sparse = 0; sparse < 2; sparse++) {
        optim_var *h = NULL, *r = NULL;
        optim_error err;
        assert_ok(optim_var_create(&h, "w", OPTIM_BF16, 2, shape, hinit, &err), &err);
        assert_ok(optim_var_create(&r, "w", OPTIM_F32, 2, shape, init, &err), &err);
        optim_optimizer *oh = optim_test_make(AF("\"learning_rate\": 0.05"));
        optim_optimizer *orf = optim_test_make(AF("\"learning_rate\": 0.05"));
        optim_grad_var ph = {
            sparse ? optim_grad_sparse(idx, 3, optim_tensor_make(OPTIM_BF16, hg, 2, vshape))
                   : optim_grad_dense(optim_tensor_make(OPTIM_BF16, hg, 2, shape)),
            h};
        optim_grad_var pr = {
            sparse ? optim_grad_sparse(idx, 3, optim_tensor_make(OPTIM_F32, g, 2, vshape))
                   : optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 2, shape)),
            r};
        assert_ok(optim_apply_gradients(oh, &ph, 1, 0), oh);
        assert_ok(optim_apply_gradients(orf, &pr, 1, 0), orf);
        assert_ok(optim_convert(want, OPTIM_BF16, optim_var_cdata(r), OPTIM_F32, HN), NULL);
        assert_ok(optim_convert(back, OPTIM_F32, optim_var_cdata(h), OPTIM_BF16, HN), NULL);
        for (int i = 0; i < HN; i++)
            if (want[i] != ((const uint16_t *)optim_var_cdata(h))[i])
                fail_msg("%s gradient, element %d: bfloat16 step %g, float32 step rounded %#x",
                         sparse ? "sparse" : "dense", i, (double)back[i], want[i]);
        optim_destroy(oh);
        optim_destroy(orf);
        optim_var_destroy(h);
        optim_var_destroy(r);
    }
    free(init);
    free(back);
    free(hinit);
    free(want);
}

int main(void) { return optim_test_run(); }
