/* Phased updates (optim/optimizer_class.h, version 3): a class that needs
 * whole-variable reductions runs one variable on all threads.
 *
 * - Lamb and Adafactor on variables of many chunks (ragged ends, factored
 *   with several chunks per matrix, batched matrices, f32 and f64, clipping
 *   on): 1, 2 and 3 threads bit for bit, set on the optimizer or through
 *   omp_set_num_threads.
 * - Their sparse rules (one thread) equal the dense phases bit for bit on
 *   tables of several chunks.
 * - Multi-chunk Lamb and Adafactor against double-precision references.
 * - A user class written only against the public header: its phases against
 *   a closed form, any thread count; a variable its plan sends whole; bad
 *   plans and incomplete tables refused, nothing changed. */
#include "testutil.h"
#include "opt_table.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optimizer_class.h"

/* ---- Lamb and Adafactor: thread counts ---------------------------------------------- */

typedef struct shape_case {
    optim_dtype dt;
    int32_t rank;
    int64_t shape[3];
} shape_case;

static int64_t numel(const shape_case *c)
{
    int64_t n = 1;
    for (int d = 0; d < c->rank; d++) n *= c->shape[d];
    return n;
}

/* Every case stepped 3 times in one call per step on `threads` threads:
 * the optimizer's own setting, or with omp_threads OpenMP's default
 * (omp_set_num_threads) that an optimizer without a setting follows. */
static void run_cases(const char *json, const shape_case *cs, int ncase, int threads,
                      int omp_threads, optim_var **out, optim_optimizer **opt)
{
    const int omp_before = omp_get_max_threads();
    *opt = optim_test_make(json);
    if (omp_threads) omp_set_num_threads(threads);
    else assert_ok(optim_set_num_threads(*opt, threads), *opt);
    optim_grad_var p[8];
    void *grads[8];
    for (int c = 0; c < ncase; c++) {
        const int64_t n = numel(&cs[c]);
        double *init = malloc((size_t)n * sizeof *init);
        grads[c] = malloc((size_t)n * sizeof(double));
        assert_true(init && grads[c]);
        for (int64_t i = 0; i < n; i++) init[i] = sin(0.001 * (double)i + c);
        char name[16];
        snprintf(name, sizeof name, "v%d", c);
        out[c] = optim_test_var(name, cs[c].dt, cs[c].rank, cs[c].shape, init);
        free(init);
    }
    for (int k = 0; k < 3; k++) {
        for (int c = 0; c < ncase; c++) {
            const int64_t n = numel(&cs[c]);
            for (int64_t i = 0; i < n; i++) {
                const double g = cos(0.37 * (double)i + k + c) * (1 + (i % 5));
                if (cs[c].dt == OPTIM_F32) ((float *)grads[c])[i] = (float)g;
                else ((double *)grads[c])[i] = g;
            }
            p[c] = (optim_grad_var){
                optim_grad_dense(optim_tensor_make(cs[c].dt, grads[c], cs[c].rank, cs[c].shape)),
                out[c]};
        }
        ot_step(*opt, p, (size_t)ncase);
    }
    omp_set_num_threads(omp_before);
    for (int c = 0; c < ncase; c++) free(grads[c]);
}

static void check_threads(const char *json, const shape_case *cs, int ncase,
                          const char *const *slots)
{
    optim_var *v[6][8];
    optim_optimizer *o[6];
    for (int t = 0; t < 6; t++) run_cases(json, cs, ncase, t % 3 + 1, t >= 3, v[t], &o[t]);
    for (int t = 1; t < 6; t++)
        for (int c = 0; c < ncase; c++) {
            assert_vars_bitwise(v[0][c], v[t][c]);
            for (int s = 0; slots[s]; s++)
                assert_vars_bitwise(optim_get_slot(o[0], v[0][c], slots[s]),
                                    optim_get_slot(o[t], v[t][c], slots[s]));
        }
    for (int t = 0; t < 6; t++) {
        for (int c = 0; c < ncase; c++) optim_var_destroy(v[t][c]);
        optim_destroy(o[t]);
    }
}

OPTIM_TEST(test_lamb_threads)
{
    static const shape_case cs[] = {
        {OPTIM_F32, 1, {100003}},
        {OPTIM_F64, 2, {3, 40001}},
        {OPTIM_F32, 1, {5}},
        {OPTIM_F32, 1, {0}},
    };
    static const char *const slots[] = {"m", "v", NULL};
    check_threads(
        "{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.01, \"weight_decay\": 0.1, "
        "\"global_clipnorm\": 10}}",
        cs, 4, slots);
    check_threads(
        "{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.01, \"weight_decay\": 0.1, "
        "\"clipnorm\": 3, \"is_legacy_optimizer\": true}}",
        cs, 4, slots);
}

OPTIM_TEST(test_adafactor_threads)
{
    /* Factored: 36 chunks of 28 rows; batched [4, 50, 60]; two rows (one
     * chunk); one row (c updated directly); unfactored, several chunks; a
     * scalar; batched f32 whose matrices start at odd 4-byte offsets. */
    static const shape_case cs[] = {
        {OPTIM_F32, 2, {1000, 300}}, {OPTIM_F64, 3, {4, 50, 60}}, {OPTIM_F32, 2, {2, 5000}},
        {OPTIM_F64, 2, {1, 9000}},   {OPTIM_F32, 1, {100003}},    {OPTIM_F64, 0, {0}},
        {OPTIM_F32, 3, {3, 5, 7}}, /* matrices at odd 4-byte offsets of v */
    };
    static const char *const slots[] = {"r", "c", "v", NULL};
    check_threads(
        "{\"class_name\": \"Adafactor\", \"config\": {\"learning_rate\": 0.01, \"weight_decay\": 0.01, "
        "\"global_clipnorm\": 50}}",
        cs, 7, slots);
}

/* ---- sparse (one thread) == dense phases, several chunks --------------------------- */

static int64_t sp_index(int k, int j) { return (int64_t)((j * 977 + k * 131) % 3000); }
static double sp_val(int k, int j, int c) { return sin(0.3 * j + 0.7 * k + 0.11 * c); }
static double sp_init(int r, int c) { return cos(0.01 * r + 0.5 * c); }

OPTIM_TEST(test_sparse_equals_dense)
{
    /* [3000, 7]: Lamb 3 chunks, Adafactor 3 chunks of 1171 rows; [3000] rank 1. */
    const ot_sparse table = {3000, 7, 3, 40, sp_index, sp_val, sp_init};
    const ot_sparse vec = {3000 * 7, 0, 3, 40, sp_index, sp_val, sp_init};
    static const char *const lamb[] = {"m", "v", NULL}, *const ada[] = {"r", "c", "v", NULL};
    const char *lamb_k3 = "{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.01}}";
    const char *lamb_legacy = "{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.01, "
                              "\"weight_decay\": 0.01, \"is_legacy_optimizer\": true}}";
    const char *ada_k3 = "{\"class_name\": \"Adafactor\", \"config\": {\"learning_rate\": 0.01}}";
    ot_check_sparse_equals_dense(&table, lamb_k3, lamb);
    ot_check_sparse_equals_dense(&table, lamb_legacy, lamb);
    ot_check_sparse_equals_dense(&table, ada_k3, ada);
    ot_check_sparse_equals_dense(&vec, ada_k3, ada);
}

/* ---- references in double precision --------------------------------------------------- */

static double grad_at(int k, int64_t i) { return cos(0.37 * (double)i + k) * (1 + (i % 5)); }

OPTIM_TEST(test_lamb_reference)
{
    const int64_t n = 20001; /* 3 chunks */
    double *w = malloc((size_t)n * 4 * sizeof *w), *m = w + n, *v = m + n, *u = v + n;
    assert_true(w);
    for (int64_t i = 0; i < n; i++) w[i] = sin(0.001 * (double)i), m[i] = v[i] = 0;
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.01}}");
    optim_var *var = optim_test_var("w", OPTIM_F64, 1, &n, w);
    double *g = malloc((size_t)n * sizeof *g);
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < n; i++) g[i] = grad_at(k, i);
        ot_step_dense(opt, var, g);
        const double b1t = 1 - pow(0.9, k + 1), b2t = 1 - pow(0.999, k + 1);
        double sw = 0, su = 0;
        for (int64_t i = 0; i < n; i++) {
            m[i] += (g[i] - m[i]) * (1 - 0.9);
            v[i] += (g[i] * g[i] - v[i]) * (1 - 0.999);
            u[i] = (m[i] / b1t) / (sqrt(v[i] / b2t) + 1e-7);
            sw += w[i] * w[i];
            su += u[i] * u[i];
        }
        const double ratio = sqrt(sw) / sqrt(su);
        for (int64_t i = 0; i < n; i++) w[i] -= ratio * 0.01 * u[i];
    }
    assert_var_close(var, w, n, 1e-12, 1e-14);
    optim_destroy(opt);
    optim_var_destroy(var);
    free(w);
    free(g);
}

/* Lamb in float32, bit for bit against the documented order of operations
 * (src/optimizers/lamb.c: float element-wise arithmetic, sums of double
 * squares in lanes i % 4 per chunk of 8192, the chunks added in order), two
 * steps from iterations `it`. From it = 40 on, beta_1 = 0.5 and beta_2 = 0.6
 * make 1 - beta^t round to 1 in float32, where the kernels skip the two
 * divisions by the bias corrections; beta_2 = 0.3 with beta_1 = 0.9 skips
 * only the second. The reference always divides. */
static void lamb_f32_exact(const char *json, double b1, double b2, int64_t it)
{
    enum { N = 20001, CH = 8192 };
    float *w = malloc(N * 4 * sizeof *w), *m = w + N, *v = m + N, *u = v + N;
    double *g = malloc(N * sizeof *g);
    assert_true(w && g);
    for (int64_t i = 0; i < N; i++)
        w[i] = (float)sin(0.001 * (double)i), m[i] = v[i] = 0, g[i] = w[i];
    optim_optimizer *opt = optim_test_make(json);
    assert_ok(optim_set_num_threads(opt, 2), opt);
    const int64_t n = N;
    optim_var *var = optim_test_var("w", OPTIM_F32, 1, &n, g);
    assert_ok(optim_set_iterations(opt, it), opt);
    for (int k = 0; k < 2; k++) {
        for (int64_t i = 0; i < N; i++) g[i] = (float)grad_at(k, i);
        ot_step_dense(opt, var, g);
        const float t = (float)(it + k + 1), bc1 = 1.0f - powf((float)b1, t),
                    bc2 = 1.0f - powf((float)b2, t);
        const float c1 = (float)(1.0 - b1),
                    c2 = (float)(1.0 - b2); /* Keras 3: 1 - beta in Python */
        double tw = 0, tu = 0;
        for (int64_t c0 = 0; c0 < N; c0 += CH) {
            double sw[4] = {0}, su[4] = {0};
            for (int64_t i = c0; i < N && i < c0 + CH; i++) {
                const float gi = (float)g[i];
                m[i] = m[i] + (gi - m[i]) * c1;
                v[i] = v[i] + (gi * gi - v[i]) * c2;
                u[i] = (m[i] / bc1) / (sqrtf(v[i] / bc2) + 1e-7f);
                sw[i % 4] += (double)w[i] * (double)w[i];
                su[i % 4] += (double)u[i] * (double)u[i];
            }
            tw += ((sw[0] + sw[1]) + sw[2]) + sw[3];
            tu += ((su[0] + su[1]) + su[2]) + su[3];
        }
        const float rl = ((float)sqrt(tw) / (float)sqrt(tu)) * 0.01f;
        for (int64_t i = 0; i < N; i++) w[i] = w[i] - rl * u[i];
    }
    assert_var_floats(var, w, N);
    assert_var_floats(optim_get_slot(opt, var, "m"), m, N);
    optim_destroy(opt);
    optim_var_destroy(var);
    free(w);
    free(g);
}

OPTIM_TEST(test_lamb_f32_bias_corrections)
{
    const char *half =
        "{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.01, \"beta_1\": 0.5, \"beta_2\": 0.6}}";
    lamb_f32_exact(half, 0.5, 0.6, 0);
    lamb_f32_exact(half, 0.5, 0.6, 40);
    lamb_f32_exact(
        "{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.01, \"beta_2\": 0.3}}", 0.9,
        0.3, 40);
}

/* Adafactor on [B, R, C] (Keras 3 defaults, learning rate 0.01): r is
 * [B, R], c is [B, C]; the RMSs over the whole variable. */
static void adafactor_ref(double *w, double *r, double *c, const double *g, int64_t B, int64_t R,
                          int64_t C, int k)
{
    const double t = k + 1, rho = fmin(0.01, 1 / sqrt(t)), beta = 1 - pow(t, -0.8),
                 n = (double)(B * R * C);
    double sw = 0, su = 0, mr[8] = {0};
    for (int64_t i = 0; i < B * R * C; i++) sw += w[i] * w[i];
    const double alpha = fmax(1e-3, sqrt(sw / n)) * rho;
    for (int64_t b = 0; b < B; b++) {
        const double *gb = g + b * R * C;
        for (int64_t i = 0; i < R; i++) {
            double s = 0;
            for (int64_t j = 0; j < C; j++) s += gb[i * C + j] * gb[i * C + j] + 1e-30;
            r[b * R + i] = beta * r[b * R + i] + (1 - beta) * s / (double)C;
            mr[b] += r[b * R + i] / (double)R;
        }
        for (int64_t j = 0; j < C; j++) {
            double s = 0;
            for (int64_t i = 0; i < R; i++) s += gb[i * C + j] * gb[i * C + j] + 1e-30;
            c[b * C + j] = beta * c[b * C + j] + (1 - beta) * s / (double)R;
        }
    }
#define V_AT(i) (r[(i) / C] / mr[(i) / (R * C)] * c[(i) / (R * C) * C + (i) % C])
    for (int64_t i = 0; i < B * R * C; i++) su += g[i] * g[i] / V_AT(i);
    const double d = fmax(1, sqrt(su / n));
    for (int64_t i = 0; i < B * R * C; i++) w[i] -= alpha * (g[i] / sqrt(V_AT(i))) / d;
#undef V_AT
}

/* [300, 50]: 2 chunks of 164 rows; [3, 5, 7]: a chunk per matrix. */
static void check_adafactor_reference(int32_t rank, const int64_t *shape)
{
    const int64_t C = shape[rank - 1], R = shape[rank - 2], B = rank == 3 ? shape[0] : 1,
                  n = B * R * C;
    double *w = malloc((size_t)(2 * n + B * (R + C)) * sizeof *w), *g = w + n, *r = g + n,
           *c = r + B * R;
    assert_true(w);
    for (int64_t i = 0; i < n; i++) w[i] = sin(0.001 * (double)i);
    memset(r, 0, (size_t)(B * (R + C)) * sizeof *r);
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"Adafactor\", \"config\": {\"learning_rate\": 0.01}}");
    optim_var *var = optim_test_var("w", OPTIM_F64, rank, shape, w);
    assert_ok(optim_set_num_threads(opt, 2), opt);
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < n; i++) g[i] = grad_at(k, i);
        ot_step_dense(opt, var, g);
        adafactor_ref(w, r, c, g, B, R, C, k);
    }
    assert_var_close(var, w, n, 1e-12, 1e-15);
    assert_var_close(optim_get_slot(opt, var, "r"), r, B * R, 1e-12, 0);
    assert_var_close(optim_get_slot(opt, var, "c"), c, B * C, 1e-12, 0);
    optim_destroy(opt);
    optim_var_destroy(var);
    free(w);
}

OPTIM_TEST(test_adafactor_reference)
{
    check_adafactor_reference(2, (int64_t[]){300, 50});
    check_adafactor_reference(3, (int64_t[]){3, 5, 7});
}

/* ---- a user class: normalised SGD, w = w - lr * g / ||g|| ---------------------------------- */

typedef struct nsgd_coef {
    double lr;
} nsgd_coef;

static void nsgd_prepare(optim_optimizer *opt, optim_dtype dt, void *c)
{
    ((nsgd_coef *)c)->lr = optim_learning_rate(opt, dt);
}

static double nsgd_sumsq(const double *g, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += g[i] * g[i];
    return s;
}

static void nsgd_apply(double *w, const double *g, int64_t n, double scale)
{
    for (int64_t i = 0; i < n; i++) w[i] -= scale * g[i];
}

/* Whole variables (the plan's "whole" and float32 ones): the same sums, one per 1000. */
static void nsgd_dense(const optim_dense_update *u)
{
    if (u->dtype != OPTIM_F64) return;
    double s = 0;
    for (int64_t o = 0; o < u->count; o += 1000)
        s += nsgd_sumsq((const double *)u->grad + o, u->count - o < 1000 ? u->count - o : 1000);
    nsgd_apply(u->param, u->grad, u->count, ((const nsgd_coef *)u->coef)->lr / sqrt(s));
}

static void nsgd_plan(const optim_optimizer *opt, const optim_var *var, optim_phase_plan *plan)
{
    (void)opt;
    const char *name = optim_var_name(var);
    if (!strcmp(name, "whole") || optim_var_dtype(var) != OPTIM_F64) return;
    *plan = (optim_phase_plan){2, 1000, 1, 1, 0};
    if (!strcmp(name, "bad")) plan->nphases = OPTIM_MAX_PHASES + 1;
    if (!strcmp(name, "bad_chunk")) plan->chunk = 0;
}

static void nsgd_phase(const optim_phase_update *pu)
{
    const optim_dense_update *u = &pu->dense;
    const double *g = (const double *)u->grad + u->offset;
    if (pu->phase == 0) pu->partial[0] = nsgd_sumsq(g, u->count);
    else nsgd_apply((double *)u->param + u->offset, g, u->count, pu->shared[0]);
}

static void nsgd_reduce(const optim_phase_update *pu)
{
    double s = 0;
    for (int64_t k = 0; k < pu->chunk; k++) s += pu->partial[k];
    if (pu->phase == 0) pu->shared[0] = ((const nsgd_coef *)pu->dense.coef)->lr / sqrt(s);
}

static const optim_class nsgd_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "TestNormSGD",
    .default_learning_rate = 0.5,
    .coef_size = sizeof(nsgd_coef),
    .prepare = nsgd_prepare,
    .apply_dense = nsgd_dense,
    .phase_plan = nsgd_plan,
    .apply_phase = nsgd_phase,
    .reduce_phase = nsgd_reduce,
};

OPTIM_TEST(test_user_class)
{
    const int64_t n = 5003;
    double *init = malloc((size_t)n * 2 * sizeof *init), *g = init + n;
    assert_true(init);
    for (int64_t i = 0; i < n; i++) init[i] = 0.01 * (double)i, g[i] = sin(0.3 * (double)i);
    const double norm = sqrt(nsgd_sumsq(g, n));
    optim_var *first = NULL;
    for (int t = 1; t <= 3; t++) {
        optim_optimizer *opt = optim_test_make("\"TestNormSGD\"");
        assert_ok(optim_set_num_threads(opt, t), opt);
        optim_var *a = optim_test_var("phased", OPTIM_F64, 1, &n, init);
        optim_var *b = optim_test_var("whole", OPTIM_F64, 1, &n, init);
        optim_grad_var p[2] = {{optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n)), a},
                               {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n)), b}};
        ot_step(opt, p, 2);
        for (int64_t i = 0; i < n; i += 97)
            assert_close(optim_var_get(a, i), init[i] - 0.5 * g[i] / norm, 1e-14, 1e-15);
        assert_vars_bitwise(a, b); /* the same sums in the same order, whole */
        if (first) assert_vars_bitwise(first, a);
        optim_var_destroy(b);
        optim_var_destroy(first);
        first = a;
        optim_destroy(opt);
    }
    optim_var_destroy(first);
    free(init);
}

OPTIM_TEST(test_bad_plan)
{
    static const char *const names[] = {"bad", "bad_chunk"};
    const int64_t n = 10;
    double init[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, g[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int k = 0; k < 2; k++) {
        optim_optimizer *opt = optim_test_make("\"TestNormSGD\"");
        optim_var *ok = optim_test_var("ok", OPTIM_F64, 1, &n, init),
                  *bad = optim_test_var(names[k], OPTIM_F64, 1, &n, init);
        optim_grad_var p[2] = {{optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n)), ok},
                               {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, &n)), bad}};
        assert_status(optim_apply_gradients(opt, p, 2, 0), OPTIM_EINVAL, opt);
        assert_contains(optim_errmsg(opt), "phase_plan");
        assert_contains(optim_errmsg(opt), names[k]);
        assert_var_eq(ok, init, n);
        assert_var_eq(bad, init, n);
        assert_eq(optim_iterations(opt), 0);
        optim_destroy(opt);
        optim_var_destroy(ok);
        optim_var_destroy(bad);
    }
}

OPTIM_TEST(test_incomplete_table)
{
    optim_error err;
    optim_class c = nsgd_class;
    c.name = "TestHalfPhased";
    c.reduce_phase = NULL;
    assert_status(optim_register_class(&c, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "2 of 3");
    c = nsgd_class;
    c.name = "TestElementwisePhased";
    c.flags = OPTIM_CLASS_ELEMENTWISE;
    assert_status(optim_register_class(&c, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "ELEMENTWISE");
    assert_null(optim_find_class("TestHalfPhased"));
}

int main(void)
{
    optim_error err;
    if (optim_register_class(&nsgd_class, &err)) return 1;
    return optim_test_run();
}
