/* Keras 3's base options use_ema, ema_momentum, ema_overwrite_frequency,
 * loss_scale_factor and gradient_accumulation_steps, against an independent
 * double-precision re-implementation of keras/src/optimizers/
 * base_optimizer.py (apply, _backend_apply_gradients and the EMA and
 * accumulator helpers) with SGD and Adam as update rules: trajectories of
 * the variables and of every slot over many steps in f32 and f64, dense and
 * sparse gradients, each option alone and combined; then slots and weights,
 * finalize_variable_values, the iterations the update rule sees, thread
 * independence, refusals and config round trips. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"
#include "optimizer/keras3_options.h" /* optim__k3_scale_loss */

#define STEPS 26
#define NV 2
#define MAXN 24
#define SPROWS 4 /* rows per sparse gradient (one duplicate) */

/* ---- the reference ------------------------------------------------------------ */

typedef struct cfg {
    int adam; /* 0: SGD, 1: Adam */
    double lr, momentum; /* SGD (momentum 0: none) */
    int nesterov;
    double b1, b2, eps; /* Adam */
    double lsf; /* loss_scale_factor, 0: None */
    int steps; /* gradient_accumulation_steps, 0: None */
    int ema;
    double ema_m;
    int freq; /* ema_overwrite_frequency, 0: None */
    double clipnorm, clipvalue, global_clipnorm, wd; /* 0: None */
    int nvars; /* 1 or 2 */
    int sparse[NV]; /* variable v takes sparse gradients ([rows, 3]) */
    int none_every; /* > 0: variable 1 has no gradient at calls k % none_every == 2 */
    int build; /* optim_build all variables first */
    int nonneg; /* non_neg constraint on variable 0 */
} cfg;

static int numel_of(const cfg *c, int v) { return c->sparse[v] ? 6 * 3 : (v ? 5 : 7); }
static double init_at(int v, int i) { return 0.4 - 0.13 * i + 0.2 * v; }
static double gval(int k, int v, int i)
{
    return sin(0.37 * k + 1.1 * i + 2.3 * v) * (1.0 + 0.05 * i) - 0.02 * k;
}
static int has_grad(const cfg *c, int k, int v)
{
    return !(v == 1 && c->none_every && k % c->none_every == 2);
}
static int64_t sp_index(int k, int v, int j)
{
    return j == 3 ? (k + v) % 6 : (k * 3 + j * 2 + v) % 6;
}
/* j == 3 repeats row (k + v) % 6, which is also j == 0's when (3k + v) % 6 == (k + v) % 6. */

typedef struct ref {
    double w[NV][MAXN], m[NV][MAXN], v[NV][MAXN], avg[NV][MAXN], acc[NV][MAXN];
} ref;

/* Clips the gradients of the variables in `on` as Keras 3's _clip_gradients
 * (rows as given for sparse ones: sizes n[v]). */
static void ref_clip(const cfg *c, double g[NV][MAXN], const int *n, const int *on)
{
    if (c->clipnorm > 0) {
        for (int v = 0; v < c->nvars; v++) {
            if (!on[v]) continue;
            double s = 0;
            for (int i = 0; i < n[v]; i++) s += g[v][i] * g[v][i];
            double nrm = sqrt(s), d = nrm > c->clipnorm ? nrm : c->clipnorm;
            for (int i = 0; i < n[v]; i++) g[v][i] = g[v][i] * c->clipnorm / d;
        }
    } else if (c->global_clipnorm > 0) {
        double s = 0;
        for (int v = 0; v < c->nvars; v++)
            for (int i = 0; on[v] && i < n[v]; i++) s += g[v][i] * g[v][i];
        double nrm = sqrt(s),
               scale = c->global_clipnorm * fmin(1.0 / nrm, 1.0 / c->global_clipnorm);
        for (int v = 0; v < c->nvars; v++)
            for (int i = 0; on[v] && i < n[v]; i++) g[v][i] *= scale;
    } else if (c->clipvalue > 0) {
        for (int v = 0; v < c->nvars; v++)
            for (int i = 0; on[v] && i < n[v]; i++)
                g[v][i] = fmax(-c->clipvalue, fmin(c->clipvalue, g[v][i]));
    }
}

static void ref_init(const cfg *c, ref *r)
{
    memset(r, 0, sizeof *r);
    for (int v = 0; v < c->nvars; v++)
        for (int i = 0; i < numel_of(c, v); i++) r->w[v][i] = init_at(v, i);
}

/* One call of apply (call number k, the counter before it). */
static void ref_step(const cfg *c, ref *r, int k)
{
    double raw[NV][MAXN] = {{0}}, g[NV][MAXN] = {{0}};
    int on[NV] = {0}, n[NV] = {0};
    for (int v = 0; v < c->nvars; v++) {
        on[v] = has_grad(c, k, v);
        n[v] = c->sparse[v] ? SPROWS * 3 : numel_of(c, v);
        for (int i = 0; on[v] && i < n[v]; i++) raw[v][i] = gval(k, v, i); /* already unscaled */
    }
    /* Rows to dense, duplicates summed. */
#define DENSIFY(src)                                                      \
    for (int v = 0; v < c->nvars; v++) {                                  \
        if (!on[v]) continue;                                             \
        if (!c->sparse[v]) {                                              \
            memcpy(g[v], src[v], sizeof g[v]);                            \
            continue;                                                     \
        }                                                                 \
        memset(g[v], 0, sizeof g[v]);                                     \
        for (int j = 0; j < SPROWS; j++)                                  \
            for (int col = 0; col < 3; col++)                             \
                g[v][sp_index(k, v, j) * 3 + col] += src[v][j * 3 + col]; \
    }
    int update = 1;
    int64_t it = k;
    if (c->steps) {
        update = (k + 1) % c->steps == 0;
        it = k / c->steps;
        DENSIFY(raw)
        if (!update) {
            for (int v = 0; v < c->nvars; v++)
                for (int i = 0; on[v] && i < numel_of(c, v); i++) r->acc[v][i] += g[v][i];
            goto ema;
        }
        int dn[NV];
        for (int v = 0; v < c->nvars; v++) {
            dn[v] = numel_of(c, v);
            for (int i = 0; on[v] && i < dn[v]; i++) g[v][i] = (g[v][i] + r->acc[v][i]) / c->steps;
        }
        ref_clip(c, g, dn, on);
    } else {
        ref_clip(c, raw, n, on);
        DENSIFY(raw)
    }
    for (int v = 0; v < c->nvars; v++) {
        if (!on[v]) continue;
        int nn = numel_of(c, v);
        if (c->wd > 0)
            for (int i = 0; i < nn; i++) r->w[v][i] -= r->w[v][i] * c->wd * c->lr;
        double t = (double)it + 1;
        double alpha = c->lr * sqrt(1 - pow(c->b2, t)) / (1 - pow(c->b1, t));
        for (int i = 0; i < nn; i++) {
            double gi = g[v][i];
            if (c->adam) {
                r->m[v][i] += (gi - r->m[v][i]) * (1 - c->b1);
                r->v[v][i] += (gi * gi - r->v[v][i]) * (1 - c->b2);
                r->w[v][i] -= r->m[v][i] * alpha / (sqrt(r->v[v][i]) + c->eps);
            } else if (c->momentum == 0) {
                r->w[v][i] -= c->lr * gi;
            } else {
                r->m[v][i] = c->momentum * r->m[v][i] - c->lr * gi;
                r->w[v][i] += c->nesterov ? c->momentum * r->m[v][i] - c->lr * gi : r->m[v][i];
            }
        }
    }
    if (c->steps) memset(r->acc, 0, sizeof r->acc); /* every accumulator */
ema:
    if (c->ema) {
        double m = it != 0 ? c->ema_m : 0;
        for (int v = 0; v < c->nvars; v++)
            for (int i = 0; i < numel_of(c, v); i++)
                r->avg[v][i] = m * r->avg[v][i] + (1 - m) * r->w[v][i];
        if (c->freq && (it + 1) % c->freq == 0) memcpy(r->w, r->avg, sizeof r->w);
    }
    if (c->nonneg && on[0])
        for (int i = 0; i < numel_of(c, 0); i++) r->w[0][i] = r->w[0][i] >= 0 ? r->w[0][i] : 0;
#undef DENSIFY
}

/* ---- the library run ------------------------------------------------------------- */


static void cfg_json(const cfg *c, char *buf, size_t cap)
{
    int n = c->adam ? snprintf(buf, cap,
                               "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": %.17g, "
                               "\"beta_1\": %.17g, \"beta_2\": %.17g, \"epsilon\": %.17g",
                               c->lr, c->b1, c->b2, c->eps)
                    : snprintf(buf, cap,
                               "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": %.17g, "
                               "\"momentum\": %.17g, \"nesterov\": %s",
                               c->lr, c->momentum, c->nesterov ? "true" : "false");
    if (c->lsf) n += snprintf(buf + n, cap - n, ", \"loss_scale_factor\": %.17g", c->lsf);
    if (c->steps)
        n += snprintf(buf + n, cap - n, ", \"gradient_accumulation_steps\": %d", c->steps);
    if (c->ema)
        n += snprintf(buf + n, cap - n, ", \"use_ema\": true, \"ema_momentum\": %.17g", c->ema_m);
    if (c->freq) n += snprintf(buf + n, cap - n, ", \"ema_overwrite_frequency\": %d", c->freq);
    if (c->clipnorm) n += snprintf(buf + n, cap - n, ", \"clipnorm\": %.17g", c->clipnorm);
    if (c->clipvalue) n += snprintf(buf + n, cap - n, ", \"clipvalue\": %.17g", c->clipvalue);
    if (c->global_clipnorm)
        n += snprintf(buf + n, cap - n, ", \"global_clipnorm\": %.17g", c->global_clipnorm);
    if (c->wd) n += snprintf(buf + n, cap - n, ", \"weight_decay\": %.17g", c->wd);
    snprintf(buf + n, cap - n, "}}");
}

typedef struct run {
    optim_optimizer *opt;
    optim_var *vars[NV];
    optim_dtype dt;
} run;


static void run_start(run *R, const cfg *c, optim_dtype dt)
{
    char json[1024];
    cfg_json(c, json, sizeof json);
    R->opt = optim_test_make(json);
    R->dt = dt;
    for (int v = 0; v < c->nvars; v++) {
        double init[MAXN];
        for (int i = 0; i < numel_of(c, v); i++) init[i] = init_at(v, i);
        int64_t shape[2] = {c->sparse[v] ? 6 : numel_of(c, v), 3};
        R->vars[v] = optim_test_var(v ? "b" : "a", dt, c->sparse[v] ? 2 : 1, shape, init);
    }
    if (c->nonneg) {
        optim_constraint nn = optim_constraint_non_neg();
        assert_ok(optim_var_set_constraint(R->vars[0], &nn), R->vars[0]);
    }
    if (c->build) assert_ok(optim_build(R->opt, R->vars, (size_t)c->nvars), R->opt);
}

/* Call k: the gradients (times loss_scale_factor, in the dtype). */
static int run_call(run *R, const cfg *c, int k)
{
    float fb[NV][MAXN];
    double db[NV][MAXN];
    int64_t idx[NV][SPROWS];
    optim_grad_var pairs[NV];
    const double scale = c->lsf ? c->lsf : 1;
    for (int v = 0; v < c->nvars; v++) {
        pairs[v].var = R->vars[v];
        if (!has_grad(c, k, v)) {
            pairs[v].grad = optim_grad_none();
            continue;
        }
        int n = c->sparse[v] ? SPROWS * 3 : numel_of(c, v);
        for (int i = 0; i < n; i++)
            fb[v][i] = (float)(gval(k, v, i) * scale), db[v][i] = gval(k, v, i) * scale;
        void *data = R->dt == OPTIM_F32 ? (void *)fb[v] : (void *)db[v];
        if (c->sparse[v]) {
            for (int j = 0; j < SPROWS; j++) idx[v][j] = sp_index(k, v, j);
            int64_t vs[2] = {SPROWS, 3};
            pairs[v].grad =
                optim_grad_sparse(idx[v], SPROWS, optim_tensor_make(R->dt, data, 2, vs));
        } else {
            int64_t shape[1] = {n};
            pairs[v].grad = optim_grad_dense(optim_tensor_make(R->dt, data, 1, shape));
        }
    }
    return optim_apply_gradients(R->opt, pairs, (size_t)c->nvars, 0);
}

static void run_end(run *R, const cfg *c)
{
    optim_destroy(R->opt);
    for (int v = 0; v < c->nvars; v++) optim_var_destroy(R->vars[v]);
}

static void compare(const char *what, int k, const optim_var *got, const double *want, int n,
                    double rtol, double atol)
{
    assert_non_null(got);
    for (int i = 0; i < n; i++) {
        double a = optim_var_get(got, i);
        if (!(fabs(a - want[i]) <= atol + rtol * fabs(want[i]))) {
            print_error("%s after call %d, element %d: %.17g, expected %.17g\n", what, k, i, a,
                        want[i]);
            fail();
        }
    }
}

/* Runs the config in f32 and f64 for STEPS calls, comparing the variables
 * and every slot with the reference after each call. */
static void check_cfg(const cfg *c0)
{
    cfg c = *c0;
    if (!c.nvars) c.nvars = 1;
    if (c.adam && !c.b1) c.b1 = 0.9, c.b2 = 0.999, c.eps = 1e-7;
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        double rtol = d ? 1e-11 : 1e-4, atol = d ? 1e-12 : 2e-6;
        run R;
        run_start(&R, &c, dt);
        ref r;
        ref_init(&c, &r);
        for (int k = 0; k < STEPS; k++) {
            int rc = run_call(&R, &c, k);
            assert_ok(rc, R.opt);
            ref_step(&c, &r, k);
            for (int v = 0; v < c.nvars; v++) {
                int n = numel_of(&c, v);
                compare("w", k, R.vars[v], r.w[v], n, rtol, atol);
                if (c.adam) {
                    compare("m", k, optim_get_slot(R.opt, R.vars[v], "m"), r.m[v], n, rtol, atol);
                    compare("v", k, optim_get_slot(R.opt, R.vars[v], "v"), r.v[v], n, rtol, atol);
                } else if (c.momentum) {
                    compare("momentum", k, optim_get_slot(R.opt, R.vars[v], "momentum"), r.m[v], n,
                            rtol, atol);
                } else {
                    assert_null(optim_get_slot(R.opt, R.vars[v], "momentum"));
                }
                if (c.ema)
                    compare("average", k, optim_get_slot(R.opt, R.vars[v], "average"), r.avg[v], n,
                            rtol, atol);
                else assert_null(optim_get_slot(R.opt, R.vars[v], "average"));
                if (c.steps)
                    compare("gradient_accumulator", k,
                            optim_get_slot(R.opt, R.vars[v], "gradient_accumulator"), r.acc[v], n,
                            rtol, atol);
                else assert_null(optim_get_slot(R.opt, R.vars[v], "gradient_accumulator"));
            }
        }
        assert_eq(optim_iterations(R.opt), STEPS);
        run_end(&R, &c);
    }
}

/* ---- trajectories ----------------------------------------------------------------- */

OPTIM_TEST(test_loss_scale_factor)
{
    check_cfg(&(cfg){.lr = 0.1, .momentum = 0.9, .lsf = 128});
    check_cfg(&(cfg){.lr = 0.05, .lsf = 3}); /* not a power of two */
    check_cfg(&(cfg){.adam = 1, .lr = 0.01, .lsf = 1024});
    check_cfg(&(cfg){.adam = 1, .lr = 0.01, .lsf = 0.25, .nvars = 2, .sparse = {0, 1}});
}

OPTIM_TEST(test_loss_scale_with_clipping)
{
    check_cfg(&(cfg){.lr = 0.1, .momentum = 0.5, .lsf = 256, .clipnorm = 0.5});
    check_cfg(&(cfg){.lr = 0.1, .lsf = 256, .clipvalue = 0.3, .nvars = 2, .sparse = {0, 1}});
    check_cfg(&(cfg){.adam = 1, .lr = 0.01, .lsf = 64, .global_clipnorm = 1.0, .nvars = 2});
    check_cfg(&(cfg){.lr = 0.1, .lsf = 32, .clipnorm = 0.4, .nvars = 2, .sparse = {1, 1}});
}

/* A power-of-two loss_scale_factor is exact: the run with scaled gradients
 * gives the bits of the run without, clipping included (it is unscaled
 * before clipping). */
OPTIM_TEST(test_loss_scale_bitwise)
{
    const cfg base[] = {{.lr = 0.1, .momentum = 0.9, .clipnorm = 0.5, .nvars = 2, .sparse = {0, 1}},
                        {.adam = 1,
                         .lr = 0.01,
                         .b1 = 0.9,
                         .b2 = 0.999,
                         .eps = 1e-7,
                         .global_clipnorm = 1,
                         .nvars = 2}};
    for (int b = 0; b < 2; b++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            cfg plain = base[b], scaled = base[b];
            scaled.lsf = 4096;
            run P, S;
            run_start(&P, &plain, dt);
            run_start(&S, &scaled, dt);
            for (int k = 0; k < STEPS; k++) {
                assert_int_equal(run_call(&P, &plain, k), 0);
                assert_int_equal(run_call(&S, &scaled, k), 0);
            }
            for (int v = 0; v < 2; v++)
                assert_memory_equal(optim_var_data(P.vars[v]), optim_var_data(S.vars[v]),
                                    (size_t)optim_var_numel(P.vars[v]) * optim_dtype_size(dt));
            run_end(&P, &plain);
            run_end(&S, &scaled);
        }
}

OPTIM_TEST(test_accumulation)
{
    check_cfg(&(cfg){.lr = 0.1, .steps = 3});
    check_cfg(&(cfg){.lr = 0.05, .momentum = 0.9, .steps = 3});
    check_cfg(&(cfg){.lr = 0.05, .momentum = 0.8, .nesterov = 1, .steps = 2, .nvars = 2});
    /* Adam's bias correction counts updates: t = iterations // steps + 1. */
    check_cfg(&(cfg){.adam = 1, .lr = 0.01, .steps = 4});
    check_cfg(
        &(cfg){.adam = 1, .lr = 0.02, .b1 = 0.8, .b2 = 0.95, .eps = 1e-5, .steps = 2, .nvars = 2});
}

/* Clipping and weight decay run only on the updating calls, on the mean. */
OPTIM_TEST(test_accumulation_clip_decay)
{
    check_cfg(&(cfg){.lr = 0.1, .momentum = 0.9, .steps = 2, .clipnorm = 0.4, .wd = 0.1});
    check_cfg(&(cfg){.adam = 1, .lr = 0.01, .steps = 3, .global_clipnorm = 0.5, .nvars = 2});
    check_cfg(&(cfg){.lr = 0.1, .steps = 3, .clipvalue = 0.2, .wd = 0.05, .nvars = 2});
    check_cfg(&(cfg){.lr = 0.1, .momentum = 0.5, .steps = 3, .lsf = 512});
    check_cfg(&(cfg){.adam = 1, .lr = 0.01, .steps = 2, .lsf = 3, .clipnorm = 0.3});
}

/* Sparse gradients accumulate into dense accumulators; the update sees the
 * dense mean. */
OPTIM_TEST(test_accumulation_sparse)
{
    check_cfg(&(cfg){.lr = 0.1, .momentum = 0.5, .steps = 3, .nvars = 2, .sparse = {1, 0}});
    check_cfg(&(cfg){.adam = 1, .lr = 0.01, .steps = 2, .lsf = 4, .nvars = 2, .sparse = {1, 1}});
    check_cfg(&(cfg){
        .lr = 0.2, .steps = 2, .lsf = 3, .global_clipnorm = 0.7, .nvars = 2, .sparse = {0, 1}});
}

OPTIM_TEST(test_ema)
{
    check_cfg(&(cfg){.lr = 0.1, .ema = 1, .ema_m = 0.9}); /* SGD without slots of its own */
    check_cfg(&(cfg){.lr = 0.1, .momentum = 0.9, .ema = 1, .ema_m = 0.99, .nvars = 2});
    check_cfg(&(cfg){.adam = 1, .lr = 0.01, .ema = 1, .ema_m = 0.8});
    check_cfg(&(cfg){.lr = 0.1, .ema = 1, .ema_m = 0.0});
    check_cfg(&(cfg){.lr = 0.1, .ema = 1, .ema_m = 1.0, .nvars = 2, .sparse = {0, 1}});
}

OPTIM_TEST(test_ema_overwrite)
{
    check_cfg(&(cfg){.lr = 0.1, .momentum = 0.5, .ema = 1, .ema_m = 0.8, .freq = 3});
    check_cfg(&(cfg){.adam = 1, .lr = 0.01, .ema = 1, .ema_m = 0.9, .freq = 5, .nvars = 2});
    check_cfg(&(cfg){.lr = 0.1, .ema = 1, .ema_m = 0.7, .freq = 1});
}

/* With accumulation, EMA looks at iterations // steps: momentum 0 for the
 * whole first cycle, overwrite on every call of a due cycle. */
OPTIM_TEST(test_ema_with_accumulation)
{
    check_cfg(&(cfg){.lr = 0.1, .momentum = 0.9, .steps = 2, .ema = 1, .ema_m = 0.9, .freq = 2});
    check_cfg(&(cfg){.adam = 1,
                     .lr = 0.01,
                     .steps = 3,
                     .ema = 1,
                     .ema_m = 0.9,
                     .freq = 1,
                     .nvars = 2,
                     .sparse = {0, 1}});
    check_cfg(&(cfg){.lr = 0.1, .steps = 4, .ema = 1, .ema_m = 0.5});
}

/* Everything at once; variable b lacks a gradient at some calls: its
 * average still moves (every tracked variable), its accumulator is still
 * reset, and it is not updated or constrained. */
OPTIM_TEST(test_all_options)
{
    check_cfg(&(cfg){.adam = 1,
                     .lr = 0.01,
                     .lsf = 128,
                     .steps = 2,
                     .ema = 1,
                     .ema_m = 0.9,
                     .freq = 3,
                     .clipnorm = 1.0,
                     .wd = 0.01,
                     .nvars = 2,
                     .sparse = {0, 1},
                     .none_every = 3,
                     .build = 1});
    check_cfg(&(cfg){.lr = 0.1,
                     .momentum = 0.9,
                     .lsf = 8,
                     .steps = 3,
                     .ema = 1,
                     .ema_m = 0.95,
                     .freq = 2,
                     .global_clipnorm = 0.8,
                     .nvars = 2,
                     .none_every = 4,
                     .build = 1});
    check_cfg(&(cfg){.lr = 0.1,
                     .momentum = 0.9,
                     .ema = 1,
                     .ema_m = 0.6,
                     .freq = 4,
                     .nvars = 2,
                     .none_every = 3,
                     .build = 1});
}

/* Keras's order: update, moving average (of the unconstrained value),
 * overwrite, then the constraint. */
OPTIM_TEST(test_constraint_order)
{
    check_cfg(&(cfg){.lr = 0.5, .ema = 1, .ema_m = 0.5, .freq = 1, .nonneg = 1});
    check_cfg(&(cfg){.lr = 0.5, .momentum = 0.5, .steps = 2, .ema = 1, .ema_m = 0.5, .nonneg = 1});
}

/* ---- slots, weights, finalize ---------------------------------------------------- */

OPTIM_TEST(test_slots_and_weights)
{
    cfg c = {.lr = 0.1,
             .momentum = 0.9,
             .steps = 2,
             .ema = 1,
             .ema_m = 0.9,
             .freq = 3,
             .nvars = 2,
             .sparse = {0, 1}};
    run R;
    run_start(&R, &c, OPTIM_F32);
    assert_int_equal(run_call(&R, &c, 0), 0);
    const char *want[] = {"iterations",
                          "a/momentum",
                          "b/momentum",
                          "a/average",
                          "b/average",
                          "a/gradient_accumulator",
                          "b/gradient_accumulator"};
    assert_eq(optim_weights_count(R.opt), 7);
    for (size_t i = 0; i < 7; i++) assert_string_equal(optim_weight_name(R.opt, i), want[i]);
    assert_null(optim_weight_name(R.opt, 7));
    const char *names[4];
    assert_eq(optim_get_slot_names(R.opt, names, 4), 3);
    assert_string_equal(names[0], "momentum");
    assert_string_equal(names[1], "average");
    assert_string_equal(names[2], "gradient_accumulator");

    /* set_weights into a fresh optimizer, then both continue identically. */
    cfg c2 = c;
    run Q;
    run_start(&Q, &c2, OPTIM_F32);
    assert_ok(optim_build(Q.opt, Q.vars, 2), Q.opt);
    for (int v = 0; v < 2; v++)
        assert_ok(optim_var_assign(Q.vars[v], optim_var_data(R.vars[v]), OPTIM_F32,
                                   optim_var_numel(R.vars[v])),
                  Q.vars[v]);
    optim_tensor w[7];
    assert_eq(optim_get_weights(R.opt, w, 7), 7);
    assert_ok(optim_set_weights(Q.opt, w, 7), Q.opt);
    for (int k = 1; k < 12; k++) {
        assert_int_equal(run_call(&R, &c, k), 0);
        assert_int_equal(run_call(&Q, &c2, k), 0);
    }
    optim_tensor a[7], b[7];
    optim_get_weights(R.opt, a, 7);
    optim_get_weights(Q.opt, b, 7);
    for (int i = 0; i < 7; i++)
        assert_memory_equal(a[i].data, b[i].data,
                            (size_t)optim_tensor_numel(&a[i]) * optim_dtype_size(a[i].dtype));
    for (int v = 0; v < 2; v++)
        assert_memory_equal(optim_var_data(R.vars[v]), optim_var_data(Q.vars[v]),
                            (size_t)optim_var_numel(R.vars[v]) * 4);
    run_end(&R, &c);
    run_end(&Q, &c2);

    /* Adam: m, v (and vhat) first, then the base slots; by-variable
     * classes keep each variable's slots together. */
    optim_optimizer *opt = optim_test_make(
        "{\"class_name\": \"Adam\", \"config\": {\"amsgrad\": true, \"use_ema\": true}}");
    double z[3] = {0, 0, 0};
    int64_t sh[1] = {3};
    optim_var *x = optim_test_var("x", OPTIM_F64, 1, sh, z);
    assert_ok(optim_build(opt, &x, 1), opt);
    const char *aw[] = {"iterations", "x/m", "x/v", "x/vhat", "x/average"};
    assert_eq(optim_weights_count(opt), 5);
    for (size_t i = 0; i < 5; i++) assert_string_equal(optim_weight_name(opt, i), aw[i]);
    optim_destroy(opt);
    opt = optim_test_make(
        "{\"class_name\": \"Ftrl\", \"config\": {\"gradient_accumulation_steps\": 2, \"use_ema\": true}}");
    optim_var *y = optim_test_var("y", OPTIM_F64, 1, sh, z);
    optim_var *xy[2] = {x, y};
    assert_ok(optim_build(opt, xy, 2), opt);
    const char *fw[] = {"iterations",
                        "x/accumulator",
                        "x/linear",
                        "x/average",
                        "x/gradient_accumulator",
                        "y/accumulator",
                        "y/linear",
                        "y/average",
                        "y/gradient_accumulator"};
    assert_eq(optim_weights_count(opt), 9);
    for (size_t i = 0; i < 9; i++) assert_string_equal(optim_weight_name(opt, i), fw[i]);
    optim_destroy(opt);
    optim_var_destroy(x);
    optim_var_destroy(y);
}

OPTIM_TEST(test_finalize_variable_values)
{
    assert_status(optim_finalize_variable_values(NULL), OPTIM_EINVAL, NULL);
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        cfg c = {.lr = 0.1, .momentum = 0.9, .ema = 1, .ema_m = 0.9, .nvars = 2, .sparse = {0, 1}};
        run R;
        run_start(&R, &c, dt);
        for (int k = 0; k < 10; k++) assert_int_equal(run_call(&R, &c, k), 0);
        size_t esz = optim_dtype_size(dt);
        for (int v = 0; v < 2; v++)
            assert_ne(memcmp(optim_var_data(R.vars[v]),
                             optim_var_data(optim_get_slot(R.opt, R.vars[v], "average")),
                             (size_t)optim_var_numel(R.vars[v]) * esz),
                      0);
        assert_ok(optim_finalize_variable_values(R.opt), R.opt);
        for (int v = 0; v < 2; v++)
            assert_memory_equal(optim_var_data(R.vars[v]),
                                optim_var_data(optim_get_slot(R.opt, R.vars[v], "average")),
                                (size_t)optim_var_numel(R.vars[v]) * esz);
        assert_eq(optim_iterations(R.opt), 10);
        run_end(&R, &c);
    }
    /* Without use_ema (and in the legacy generation) it changes nothing. */
    const char *cfgs[] = {
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1}}",
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"is_legacy_optimizer\": true}}"};
    for (int i = 0; i < 2; i++) {
        optim_optimizer *opt = optim_test_make(cfgs[i]);
        double w0[2] = {1, 2}, g[2] = {0.5, -0.5};
        int64_t sh[1] = {2};
        optim_var *w = optim_test_var("w", OPTIM_F64, 1, sh, w0);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, sh)), w};
        assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
        double before[2] = {optim_var_get(w, 0), optim_var_get(w, 1)};
        assert_ok(optim_finalize_variable_values(opt), opt);
        assert_eq(optim_var_get(w, 0), before[0]);
        assert_eq(optim_var_get(w, 1), before[1]);
        optim_destroy(opt);
        optim_var_destroy(w);
    }
}

/* A variable first seen after the first step starts its average at its
 * own value (Keras builds every average before its first step). */
OPTIM_TEST(test_late_variable_average)
{
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, "
                        "\"use_ema\": true, \"ema_momentum\": 0.9}}");
    double w0[2] = {1, 2}, u0[2] = {3, -4}, g[2] = {0.5, -0.5};
    int64_t sh[1] = {2};
    optim_var *w = optim_test_var("w", OPTIM_F64, 1, sh, w0),
              *u = optim_test_var("u", OPTIM_F64, 1, sh, u0);
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, sh)), w};
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    p.var = u;
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    optim_var *avg = optim_get_slot(opt, u, "average");
    for (int i = 0; i < 2; i++) {
        double ui = u0[i] - 0.1 * g[i];
        assert_close(optim_var_get(u, i), ui, 1e-15, 0);
        assert_close(optim_var_get(avg, i), 0.9 * u0[i] + 0.1 * ui, 1e-15, 0);
    }
    optim_destroy(opt);
    optim_var_destroy(w);
    optim_var_destroy(u);
}

/* ---- what the update rule sees -------------------------------------------------- */

static int64_t seen_prepare[64], seen_dense[64], seen_sched[64];
static int nprepare, ndense, nsched;

static void rec_prepare(optim_optimizer *o, optim_dtype dt, void *c)
{
    (void)dt;
    *(double *)c = optim_learning_rate(o, OPTIM_F64);
    seen_prepare[nprepare++ & 63] = optim_iterations(o);
}

static void rec_dense(const optim_dense_update *u)
{
    seen_dense[ndense++ & 63] = u->iterations;
    double *w = u->param;
    const double *g = u->grad;
    for (int64_t i = 0; i < u->count; i++) w[i] -= *(const double *)u->coef * g[i];
}

static double rec_sched(void *user, int64_t step)
{
    (void)user;
    seen_sched[nsched++ & 63] = step;
    return 0.1 * (double)(step + 1);
}

static const optim_class rec_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Recorder",
    .default_learning_rate = 0.1,
    .coef_size = sizeof(double),
    .prepare = rec_prepare,
    .apply_dense = rec_dense,
};

/* Keras's `iterations` property (counter // steps) in the hooks; the
 * counter for schedules; prepare and the update only on updating calls. */
OPTIM_TEST(test_hooks_see_keras_iterations)
{
    optim_optimizer *opt;
    optim_error err;
    assert_ok(optim_create(&opt, &rec_class, NULL, &err), &err);
    assert_ok(optim_set_hyper(opt, "gradient_accumulation_steps", 3), opt);
    assert_ok(optim_set_hyper_schedule(opt, "learning_rate", rec_sched, NULL), opt);
    double w0[1] = {0}, g[1] = {1};
    int64_t sh[1] = {1};
    optim_var *w = optim_test_var("w", OPTIM_F64, 1, sh, w0);
    nprepare = ndense = nsched = 0;
    double want = 0;
    for (int k = 0; k < 9; k++) {
        g[0] = k + 1;
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, sh)), w};
        assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
        if ((k + 1) % 3 == 0) want -= 0.1 * (k + 1) * ((k - 1) + k + (k + 1)) / 3.0;
        assert_close(optim_var_get(w, 0), want, 1e-14, 1e-14);
    }
    assert_int_equal(nprepare, 3);
    assert_int_equal(ndense, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(seen_prepare[i], i);
        assert_int_equal(seen_dense[i], i);
    }
    assert_ge(nsched, 9);
    for (int i = 0; i < 9; i++) assert_int_equal(seen_sched[i], i);
    assert_eq(optim_iterations(opt), 9);
    optim_destroy(opt);
    optim_var_destroy(w);
}

/* ---- threads ------------------------------------------------------------------------ */

OPTIM_TEST(test_threads_bitwise)
{
    const char *cfgs[] = {
        "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01, \"gradient_accumulation_steps\": 3, "
        "\"loss_scale_factor\": 64, \"use_ema\": true, \"ema_momentum\": 0.9, \"ema_overwrite_frequency\": 2, "
        "\"clipnorm\": 1.0}}",
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9, "
        "\"loss_scale_factor\": 3, \"use_ema\": true, \"global_clipnorm\": 2.0}}",
    };
    enum { BIG = 3 * 8192 + 77, ROWS = 5000, COLS = 3, NR = 700 };
    for (int c = 0; c < 2; c++)
        for (int d = 0; d < 2; d++) {
            optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
            size_t esz = optim_dtype_size(dt);
            optim_optimizer *opt[3];
            optim_var *big[3], *emb[3];
            double *init = malloc(sizeof(double) * BIG);
            for (int i = 0; i < BIG; i++) init[i] = sin(0.01 * i);
            int threads[3] = {1, 2, 3};
            for (int t = 0; t < 3; t++) {
                opt[t] = optim_test_make(cfgs[c]);
                assert_ok(optim_set_num_threads(opt[t], threads[t]), opt[t]);
                int64_t sb[1] = {BIG}, se[2] = {ROWS, COLS};
                big[t] = optim_test_var("big", dt, 1, sb, init);
                emb[t] = optim_test_var("emb", dt, 2, se, init);
            }
            void *g = malloc(esz * BIG), *rows = malloc(esz * NR * COLS);
            int64_t idx[NR];
            for (int k = 0; k < 7; k++) {
                for (int i = 0; i < BIG; i++) {
                    double x = cos(0.3 * k + 0.001 * i) * 64;
                    if (d) ((double *)g)[i] = x;
                    else ((float *)g)[i] = (float)x;
                }
                for (int j = 0; j < NR; j++) {
                    idx[j] = (j * 7 + k * 13) % ROWS;
                    if (j % 9 == 0) idx[j] = idx[j / 2];
                    for (int q = 0; q < COLS; q++) {
                        double x = sin(0.1 * j + q + k);
                        if (d) ((double *)rows)[j * COLS + q] = x;
                        else ((float *)rows)[j * COLS + q] = (float)x;
                    }
                }
                for (int t = 0; t < 3; t++) {
                    int64_t sb[1] = {BIG}, sr[2] = {NR, COLS};
                    optim_grad_var p[2] = {
                        {optim_grad_dense(optim_tensor_make(dt, g, 1, sb)), big[t]},
                        {optim_grad_sparse(idx, NR, optim_tensor_make(dt, rows, 2, sr)), emb[t]},
                    };
                    assert_ok(optim_apply_gradients(opt[t], p, 2, 0), opt[t]);
                }
            }
            for (int t = 1; t < 3; t++) {
                assert_memory_equal(optim_var_data(big[0]), optim_var_data(big[t]), esz * BIG);
                assert_memory_equal(optim_var_data(emb[0]), optim_var_data(emb[t]),
                                    esz * ROWS * COLS);
                size_t n = optim_weights_count(opt[0]);
                assert_eq(optim_weights_count(opt[t]), n);
                optim_tensor *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
                optim_get_weights(opt[0], a, n);
                optim_get_weights(opt[t], b, n);
                for (size_t i = 0; i < n; i++)
                    assert_memory_equal(a[i].data, b[i].data,
                                        (size_t)optim_tensor_numel(&a[i]) *
                                            optim_dtype_size(a[i].dtype));
                free(a);
                free(b);
            }
            for (int t = 0; t < 3; t++) {
                optim_destroy(opt[t]);
                optim_var_destroy(big[t]);
                optim_var_destroy(emb[t]);
            }
            free(g);
            free(rows);
            free(init);
        }
}

/* ---- refusals ------------------------------------------------------------------------- */

#define J(cfg) "{\"class_name\": \"SGD\", \"config\": " cfg "}"

static void expect_json_fails(const char *json, int code, const char *s1, const char *s2)
{
    optim_optimizer *opt = (optim_optimizer *)1;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    if (rc != code) print_error("%s: rc %d (%s), expected %d\n", json, rc, err.msg, code);
    assert_status(rc, code, &err);
    assert_null(opt);
    if (s1) assert_contains(err.msg, s1);
    if (s2) assert_contains(err.msg, s2);
}

OPTIM_TEST(test_bad_configs)
{
    expect_json_fails(J("{\"gradient_accumulation_steps\": 1}"), OPTIM_ERANGE,
                      "gradient_accumulation_steps", "1");
    expect_json_fails(J("{\"gradient_accumulation_steps\": -3}"), OPTIM_ERANGE,
                      "gradient_accumulation_steps", "-3");
    expect_json_fails(J("{\"gradient_accumulation_steps\": 2.5}"), OPTIM_ETYPE,
                      "gradient_accumulation_steps", "integer");
    expect_json_fails(J("{\"gradient_accumulation_steps\": true}"), OPTIM_ETYPE,
                      "gradient_accumulation_steps", NULL);
    expect_json_fails(J("{\"use_ema\": true, \"ema_momentum\": 1.5}"), OPTIM_ERANGE, "ema_momentum",
                      "1.5");
    expect_json_fails(J("{\"use_ema\": true, \"ema_momentum\": -0.1}"), OPTIM_ERANGE,
                      "ema_momentum", "-0.1");
    expect_json_fails(J("{\"use_ema\": true, \"ema_overwrite_frequency\": -2}"), OPTIM_ERANGE,
                      "ema_overwrite_frequency", "-2");
    expect_json_fails(J("{\"use_ema\": true, \"ema_overwrite_frequency\": 1.5}"), OPTIM_ETYPE,
                      "ema_overwrite_frequency", NULL);
    expect_json_fails(J("{\"use_ema\": 1}"), OPTIM_ETYPE, "use_ema", NULL);
    expect_json_fails(J("{\"loss_scale_factor\": 0}"), OPTIM_ERANGE, "loss_scale_factor", "0");
    expect_json_fails(J("{\"loss_scale_factor\": -128}"), OPTIM_ERANGE, "loss_scale_factor",
                      "-128");
    expect_json_fails(J("{\"loss_scale_factor\": \"big\"}"), OPTIM_ETYPE, "loss_scale_factor",
                      NULL);
    /* Keras 3 only. */
    expect_json_fails(J("{\"use_ema\": true, \"is_legacy_optimizer\": true}"), OPTIM_EKEY,
                      "use_ema", NULL);
    expect_json_fails(J("{\"gradient_accumulation_steps\": 2, \"is_legacy_optimizer\": true}"),
                      OPTIM_EKEY, "gradient_accumulation_steps", NULL);
    expect_json_fails(J("{\"loss_scale_factor\": 2, \"is_legacy_optimizer\": true}"), OPTIM_EKEY,
                      "loss_scale_factor", NULL);

    /* optim_set_hyper: refused, nothing changes. */
    optim_optimizer *opt = optim_test_make(
        J("{\"gradient_accumulation_steps\": 4, \"use_ema\": true, \"ema_momentum\": 0.5}"));
    struct {
        const char *key;
        double v;
        int code;
    } bad[] = {
        {"gradient_accumulation_steps", 1, OPTIM_ERANGE},
        {"gradient_accumulation_steps", 3.5, OPTIM_ETYPE},
        {"ema_momentum", 2, OPTIM_ERANGE},
        {"ema_momentum", NAN, OPTIM_ERANGE},
        {"ema_overwrite_frequency", -1, OPTIM_ERANGE},
        {"loss_scale_factor", 0, OPTIM_ERANGE},
        {"loss_scale_factor", INFINITY, OPTIM_ERANGE},
        {"use_ema", 2, OPTIM_ETYPE},
    };
    char *before = optim_serialize(opt);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = optim_set_hyper(opt, bad[i].key, bad[i].v);
        if (rc != bad[i].code)
            print_error("%s = %g: %d %s\n", bad[i].key, bad[i].v, rc, optim_errmsg(opt));
        assert_status(rc, bad[i].code, opt);
        assert_contains(optim_errmsg(opt), bad[i].key);
        char *now = optim_serialize(opt);
        assert_string_equal(now, before);
        optim_free(now);
    }
    optim_free(before);
    optim_destroy(opt);
}

/* use_ema and accumulation on/off make slots: they cannot change once a
 * variable is tracked (the step count and momentum can). */
OPTIM_TEST(test_options_fixed_once_tracked)
{
    optim_optimizer *opt = optim_test_make(J("{\"learning_rate\": 0.1}"));
    assert_ok(optim_set_hyper(opt, "use_ema", 1), opt); /* nothing tracked yet */
    assert_ok(optim_set_hyper(opt, "use_ema", 0), opt);
    double w0[2] = {1, 2}, g[2] = {0.5, -0.5};
    int64_t sh[1] = {2};
    optim_var *w = optim_test_var("w", OPTIM_F64, 1, sh, w0);
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, sh)), w};
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    assert_status(optim_set_hyper(opt, "use_ema", 1), OPTIM_ESTATE, opt);
    assert_contains(optim_errmsg(opt), "use_ema");
    assert_status(optim_set_hyper(opt, "gradient_accumulation_steps", 2), OPTIM_ESTATE, opt);
    assert_contains(optim_errmsg(opt), "gradient_accumulation_steps");
    double v;
    assert_ok(optim_get_hyper(opt, "use_ema", &v), opt);
    assert_eq(v, 0);
    assert_ok(optim_get_hyper(opt, "gradient_accumulation_steps", &v), opt);
    assert_nan(v);
    assert_ok(optim_set_hyper(opt, "loss_scale_factor", 8), opt); /* no slots: fine */
    assert_eq(optim_weights_count(opt), 1);
    optim_destroy(opt);

    opt = optim_test_make(
        J("{\"learning_rate\": 0.1, \"gradient_accumulation_steps\": 2, \"use_ema\": true}"));
    assert_ok(optim_build(opt, &w, 1), opt);
    assert_ok(optim_set_hyper(opt, "gradient_accumulation_steps", 5), opt);
    assert_ok(optim_set_hyper(opt, "ema_momentum", 0.5), opt);
    assert_ok(optim_set_hyper(opt, "ema_overwrite_frequency", 3), opt);
    assert_status(optim_set_hyper(opt, "gradient_accumulation_steps", NAN), OPTIM_ESTATE, opt);
    assert_status(optim_set_hyper(opt, "use_ema", 0), OPTIM_ESTATE, opt);
    assert_ok(optim_get_hyper(opt, "gradient_accumulation_steps", &v), opt);
    assert_eq(v, 5);
    optim_destroy(opt);
    optim_var_destroy(w);
}

static int fail_transformer(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    (void)pairs;
    (void)n;
    if (*(int *)user) {
        snprintf(err->msg, sizeof err->msg, "refused on purpose");
        return OPTIM_EINVAL;
    }
    return 0;
}

static void snapshot(optim_optimizer *opt, optim_var *const *vars, int nv, char **out, size_t *len)
{
    size_t n = optim_weights_count(opt), total = 0;
    optim_tensor *w = calloc(n, sizeof *w);
    optim_get_weights(opt, w, n);
    for (size_t i = 0; i < n; i++)
        total += (size_t)optim_tensor_numel(&w[i]) * optim_dtype_size(w[i].dtype);
    for (int v = 0; v < nv; v++)
        total += (size_t)optim_var_numel(vars[v]) * optim_dtype_size(optim_var_dtype(vars[v]));
    char *buf = malloc(total), *p = buf;
    for (size_t i = 0; i < n; i++) {
        size_t b = (size_t)optim_tensor_numel(&w[i]) * optim_dtype_size(w[i].dtype);
        memcpy(p, w[i].data, b);
        p += b;
    }
    for (int v = 0; v < nv; v++) {
        size_t b = (size_t)optim_var_numel(vars[v]) * optim_dtype_size(optim_var_dtype(vars[v]));
        memcpy(p, optim_var_data(vars[v]), b);
        p += b;
    }
    free(w);
    *out = buf;
    *len = total;
}

/* A failing call changes nothing: no accumulator, average, variable or counter. */
OPTIM_TEST(test_nothing_changes_on_error)
{
    cfg c = {.lr = 0.1,
             .momentum = 0.9,
             .steps = 2,
             .ema = 1,
             .ema_m = 0.9,
             .freq = 2,
             .lsf = 4,
             .nvars = 2,
             .sparse = {0, 1}};
    run R;
    run_start(&R, &c, OPTIM_F32);
    int refuse = 0;
    assert_ok(optim_add_gradient_transformer(R.opt, fail_transformer, &refuse), R.opt);
    assert_int_equal(run_call(&R, &c, 0), 0);
    char *a, *b;
    size_t la, lb;
    for (int k = 1; k <= 2; k++) {
        snapshot(R.opt, R.vars, 2, &a, &la);
        /* A bad pair (wrong shape) on an updating (k = 1) and an accumulating (k = 2) call. */
        float g[3] = {1, 2, 3};
        int64_t sh[1] = {3};
        optim_grad_var p[2] = {
            {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, sh)), R.vars[0]},
            {optim_grad_none(), R.vars[1]}};
        assert_status(optim_apply_gradients(R.opt, p, 2, 0), OPTIM_ESHAPE, R.opt);
        snapshot(R.opt, R.vars, 2, &b, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(a, b, la);
        free(b);
        /* A transformer failing (only updating calls run transformers). */
        refuse = 1;
        int rc = run_call(&R, &c, k);
        refuse = 0;
        assert_status(rc, k == 1 ? OPTIM_EINVAL : 0, R.opt);
        if (k == 1) {
            assert_contains(optim_errmsg(R.opt), "refused on purpose");
            snapshot(R.opt, R.vars, 2, &b, &lb);
            assert_int_equal(la, lb);
            assert_memory_equal(a, b, la);
            free(b);
            assert_int_equal(run_call(&R, &c, k), 0);
        }
        free(a);
    }
    assert_eq(optim_iterations(R.opt), 3);
    run_end(&R, &c);
}

static void rs_prepare(optim_optimizer *o, optim_dtype dt, void *c) { (void)o, (void)dt, (void)c; }
static void rs_dense(const optim_dense_update *u) { (void)u; }
static int rs_slots(optim_optimizer *o, optim_var *v, optim_error *err)
{
    (void)err;
    return optim_add_slot(o, v, "average", OPTIM_SLOT_ZEROS, 0);
}
static const optim_class rs_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "ReservedSlot",
    .default_learning_rate = 0.1,
    .prepare = rs_prepare,
    .apply_dense = rs_dense,
    .create_slots = rs_slots,
};

/* "average" and "gradient_accumulator" belong to the base in Keras 3. */
OPTIM_TEST(test_reserved_slot_names)
{
    double w0[2] = {1, 2}, g[2] = {0.5, -0.5};
    int64_t sh[1] = {2};
    optim_var *w = optim_test_var("w", OPTIM_F64, 1, sh, w0);
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, sh)), w};
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_options o = optim_options_defaults();
        o.generation = legacy ? OPTIM_LEGACY : OPTIM_KERAS3;
        optim_optimizer *opt;
        optim_error err;
        assert_ok(optim_create(&opt, &rs_class, &o, &err), &err);
        int rc = optim_apply_gradients(opt, &p, 1, 0);
        if (legacy) {
            assert_ok(rc, opt);
            assert_non_null(optim_get_slot(opt, w, "average"));
        } else {
            assert_status(rc, OPTIM_EINVAL, opt);
            assert_contains(optim_errmsg(opt), "reserved");
            assert_contains(optim_errmsg(opt), "average");
            assert_eq(optim_weights_count(opt), 1);
            assert_eq(optim_iterations(opt), 0);
            assert_eq(optim_var_get(w, 0), 1);
        }
        optim_destroy(opt);
    }
    optim_var_destroy(w);
}

/* ---- config -------------------------------------------------------------------------- */

OPTIM_TEST(test_config_round_trip)
{
    const char *cfgs[] = {
        J("{\"learning_rate\": 0.1, \"use_ema\": true, \"ema_momentum\": 0.95, \"ema_overwrite_frequency\": 5, "
          "\"loss_scale_factor\": 256, \"gradient_accumulation_steps\": 4}"),
        ("{\"class_name\": \"Adam\", \"config\": {\"use_ema\": true, \"ema_momentum\": 0.5, "
         "\"loss_scale_factor\": 0.125, \"gradient_accumulation_steps\": 2, \"clipnorm\": 1.0}}"),
        "{\"class_name\": \"Adam\", \"config\": {\"use_ema\": false, \"ema_overwrite_frequency\": 3}}",
    };
    for (int i = 0; i < 3; i++) {
        optim_optimizer *opt = optim_test_make(cfgs[i]);
        char *text = optim_serialize(opt);
        optim_optimizer *back = optim_test_make(text);
        char *again = optim_serialize(back);
        assert_string_equal(text, again);
        const char *keys[] = {"use_ema", "ema_momentum", "ema_overwrite_frequency",
                              "loss_scale_factor", "gradient_accumulation_steps"};
        for (int k = 0; k < 5; k++) {
            double x, y;
            assert_ok(optim_get_hyper(opt, keys[k], &x), opt);
            assert_ok(optim_get_hyper(back, keys[k], &y), back);
            assert_same(x, y);
        }
        optim_free(text);
        optim_free(again);
        optim_destroy(back);
        optim_destroy(opt);
    }
    optim_optimizer *opt = optim_test_make(cfgs[0]);
    char *text = optim_get_config(opt);
    assert_contains(text,
                    "\"use_ema\":true,\"ema_momentum\":0.95,\"ema_overwrite_frequency\":5,"
                    "\"loss_scale_factor\":256,\"gradient_accumulation_steps\":4");
    optim_free(text);
    optim_destroy(opt);
}

OPTIM_TEST(test_scale_loss)
{
    optim_optimizer *opt = optim_test_make(J("{\"loss_scale_factor\": 128}"));
    assert_eq(optim__k3_scale_loss(opt, 0.75), 96);
    assert_ok(optim_set_hyper(opt, "loss_scale_factor", NAN), opt);
    assert_eq(optim__k3_scale_loss(opt, 0.75), 0.75);
    optim_destroy(opt);
    opt = optim_test_make(J("{\"is_legacy_optimizer\": true}"));
    assert_eq(optim__k3_scale_loss(opt, 0.75), 0.75);
    optim_destroy(opt);
    assert_eq(optim__k3_scale_loss(NULL, 2.5), 2.5);
}

int main(void) { return optim_test_run(); }
