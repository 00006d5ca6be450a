/* Sparse gradients on half-precision variables (docs/half-precision.md,
 * src/optimizer/half_sparse.c).
 *
 * 1. Every built-in optimizer, in each of its sparse modes (lazy rows,
 *    the dense-equivalent walk, the every-row walk, the whole update with
 *    the duplicates hook, whole-variable classes), on F16 and BF16 tables
 *    with sparse gradients full of duplicates: step by step against the
 *    same class on float32 copies of the widened state and gradient rows,
 *    rounded once per write, bit for bit (clipping, weight decay and
 *    loss_scale_factor included); 1, 2 and 3 threads give the same bits;
 *    a user's class without a sparse_mode hook whose one call touches rows
 *    without an index; a gradient transformer sees the clipped rows
 *    rounded once.
 * 2. Duplicates are widened before they are summed: a closed form.
 * 3. A steady-state sparse half step allocates nothing.
 * 4. Refusals that remain, with messages naming the variable, the value
 *    and what was expected.
 * 5. `optim replay` with sparse bfloat16 GRADS (a closed form). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half_pair.h"
#include "testutil.h"
#include "user_momentum.h"

#ifndef OPTIM_CLI_PATH
#error "the build must define OPTIM_CLI_PATH"
#endif

/* ---- 1. every built-in against the float32 rule, rounded ------------------------------------- */

#define NV 3
/* A table of several chunks, ranges and lazy pieces (rows of 4: 2048 rows
 * a range), a rank-3 one and a rank-1 one (rows of one element). */
static const int64_t SHAPES[NV][3] = {{7000, 4, 0}, {40, 3, 5}, {300, 0, 0}};
static const int32_t RANKS[NV] = {2, 3, 1};
static const char *const NAMES[NV] = {"emb/table", "emb/cube", "emb/bias"};
static const int64_t NIDX[NV] = {9000, 60, 400}; /* indices per step, with duplicates */

static const char *const CONFIGS[] = {
    /* Keras 3 */
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05, \"momentum\": 0.9, \"nesterov\": true}}",
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05, \"global_clipnorm\": 0.5, \"weight_decay\": 0.1}}",
    "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.05, \"clipvalue\": 0.2, \"loss_scale_factor\": 4.0}}",
    "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.05, \"amsgrad\": true, \"clipnorm\": 0.3}}",
    "{\"class_name\": \"AdamW\", \"config\": {\"learning_rate\": 0.05, \"weight_decay\": 0.1}}",
    "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.05, \"centered\": true, \"momentum\": 0.5}}",
    "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 0.05, \"weight_decay\": 0.2}}",
    "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 0.05, \"initial_accumulator_value\": 0.0, \"epsilon\": 0.0}}",
    "{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 1.0}}",
    "{\"class_name\": \"Ftrl\", \"config\": {\"learning_rate\": 0.05, \"l1_regularization_strength\": 0.01}}",
    "{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"Adafactor\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.05, \"clipnorm\": 0.5}}",
    "{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"LazyAdam\", \"config\": {\"learning_rate\": 0.05, \"weight_decay\": 0.1}}",
    /* legacy tf.keras: lazy rows, every-row walks, the scatter-add with duplicates */
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05, \"is_legacy_optimizer\": true}}",
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05, \"momentum\": 0.9, \"is_legacy_optimizer\": true}}",
    "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.05, \"is_legacy_optimizer\": true, \"clipnorm\": 0.4}}",
    "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.05, \"is_legacy_optimizer\": true}}",
    "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.05, \"is_legacy_optimizer\": true}}",
    "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.05, \"is_legacy_optimizer\": true}}",
    "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.05, \"momentum\": 0.5, \"is_legacy_optimizer\": true}}",
    "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 0.05, \"is_legacy_optimizer\": true}}",
    "{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 1.0, \"is_legacy_optimizer\": true}}",
    "{\"class_name\": \"Ftrl\", \"config\": {\"learning_rate\": 0.05, \"is_legacy_optimizer\": true}}",
    /* TF Addons (legacy only): whole updates from the summed rows' norm */
    "{\"class_name\": \"NovoGrad\", \"config\": {\"learning_rate\": 0.05, \"amsgrad\": true, \"weight_decay\": 0.01}}",
    "{\"class_name\": \"ConditionalGradient\", \"config\": {\"learning_rate\": 0.5, \"clipnorm\": 0.5}}",
};

static double init_at(int v, int64_t i) { return 0.5 - 0.0007 * (double)(i % 1500) + 0.1 * v; }
static const half_vars VARS = {NV, NAMES, RANKS, SHAPES, init_at};
static int64_t numel_of(int v) { return half_vars_numel(&VARS, v); }

static uint64_t rng_state;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* The sparse gradient of variable v at step k: NIDX[v] random rows (many
 * repeated), as half rows (h) and their widened values (f). */
typedef struct grads {
    int64_t *idx[NV];
    uint16_t *h[NV];
    float *f[NV];
} grads;

static void make_grads(grads *g, optim_dtype dt, int k)
{
    rng_state = 0x9e3779b97f4a7c15u + (uint64_t)k;
    for (int v = 0; v < NV; v++) {
        const int64_t rs = numel_of(v) / SHAPES[v][0], n = NIDX[v] * rs;
        g->idx[v] = malloc((size_t)NIDX[v] * sizeof *g->idx[v]);
        g->h[v] = malloc((size_t)n * sizeof *g->h[v]);
        g->f[v] = malloc((size_t)n * sizeof *g->f[v]);
        assert_true(g->idx[v] && g->h[v] && g->f[v]);
        for (int64_t j = 0; j < NIDX[v]; j++)
            g->idx[v][j] = (int64_t)(rng() % (uint64_t)SHAPES[v][0]);
        for (int64_t i = 0; i < n; i++)
            g->f[v][i] = (float)sin(0.7 * k + 1.3 * (double)i + v) * 0.8f;
        optim_convert(g->h[v], dt, g->f[v], OPTIM_F32, n);
        optim_convert(g->f[v], OPTIM_F32, g->h[v], dt, n); /* the reference sees the half rows */
    }
}

static void free_grads(grads *g)
{
    for (int v = 0; v < NV; v++) {
        free(g->idx[v]);
        free(g->h[v]);
        free(g->f[v]);
    }
}

static optim_grad sparse_of(optim_dtype dt, int v, const int64_t *idx, void *vals)
{
    int64_t shape[3] = {NIDX[v], SHAPES[v][1], SHAPES[v][2]};
    return optim_grad_sparse(idx, NIDX[v], optim_tensor_make(dt, vals, RANKS[v], shape));
}

/* One step of both (a only when r is NULL); returns how many elements of
 * a's variables changed. */
static int64_t step_both(half_pair *p, int k)
{
    grads g;
    make_grads(&g, p->dt, k);
    optim_grad_var pa[NV], pr[NV];
    int64_t changed = 0;
    uint16_t *before[NV];
    for (int v = 0; v < NV; v++) {
        before[v] = malloc((size_t)numel_of(v) * 2);
        assert_non_null(before[v]);
        memcpy(before[v], optim_var_cdata(p->va[v]), (size_t)numel_of(v) * 2);
        pa[v] = (optim_grad_var){sparse_of(p->dt, v, g.idx[v], g.h[v]), p->va[v]};
        pr[v] = (optim_grad_var){sparse_of(OPTIM_F32, v, g.idx[v], g.f[v]), p->vr[v]};
    }
    if (optim_apply_gradients(p->a, pa, NV, 0)) fail_msg("half step: %s", optim_errmsg(p->a));
    if (p->r && optim_apply_gradients(p->r, pr, NV, 0))
        fail_msg("reference step: %s", optim_errmsg(p->r));
    for (int v = 0; v < NV; v++) {
        for (int64_t i = 0; i < numel_of(v); i++)
            changed += before[v][i] != ((const uint16_t *)optim_var_cdata(p->va[v]))[i];
        free(before[v]);
    }
    free_grads(&g);
    return changed;
}

static void run_config(const char *json, optim_dtype dt)
{
    half_pair p;
    half_pair_make(&p, &VARS, json, dt, 2);
    const int64_t changed = half_pair_steps(&p, json, 3, step_both);
    if (changed < 1000)
        fail_msg("%s %s: only %lld elements ever changed", json, optim_dtype_name(dt),
                 (long long)changed);
    half_pair_free(&p);
}

OPTIM_TEST(test_builtins_f16)
{
    (void)state;
    for (size_t c = 0; c < sizeof CONFIGS / sizeof *CONFIGS; c++) run_config(CONFIGS[c], OPTIM_F16);
}

OPTIM_TEST(test_builtins_bf16)
{
    (void)state;
    for (size_t c = 0; c < sizeof CONFIGS / sizeof *CONFIGS; c++)
        run_config(CONFIGS[c], OPTIM_BF16);
}

/* 1, 2 and 3 threads give the same bits in every mode. */
OPTIM_TEST(test_threads)
{
    (void)state;
    for (size_t c = 0; c < sizeof CONFIGS / sizeof *CONFIGS; c++) {
        uint16_t *out[3];
        for (int t = 1; t <= 3; t++) {
            half_pair p;
            half_pair_make(&p, &VARS, CONFIGS[c], OPTIM_BF16, t);
            optim_optimizer *r = p.r;
            p.r = NULL;
            for (int k = 0; k < 2; k++) step_both(&p, k);
            p.r = r;
            out[t - 1] = malloc((size_t)numel_of(0) * 2);
            assert_non_null(out[t - 1]);
            memcpy(out[t - 1], optim_var_cdata(p.va[0]), (size_t)numel_of(0) * 2);
            half_pair_free(&p);
        }
        if (memcmp(out[0], out[1], (size_t)numel_of(0) * 2) ||
            memcmp(out[0], out[2], (size_t)numel_of(0) * 2))
            fail_msg("%s: 1, 2 and 3 threads differ", CONFIGS[c]);
        for (int t = 0; t < 3; t++) free(out[t]);
    }
}

/* A gradient transformer sees the clipped half rows rounded once (as a
 * dense half gradient is before a user function): the step equals the
 * unclipped float32 rule on those rounded rows. */
static int saw_clipped(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    (void)err;
    const uint16_t *want = user;
    for (size_t i = 0; i < n; i++) {
        if (pairs[i].grad.kind != OPTIM_GRAD_SPARSE ||
            pairs[i].grad.sparse.values.dtype != OPTIM_BF16)
            return OPTIM_EINVAL;
        if (i == 0 && memcmp(pairs[i].grad.sparse.values.data, want, (size_t)NIDX[0] * 4 * 2))
            return OPTIM_EINVAL;
    }
    return OPTIM_OK;
}

OPTIM_TEST(test_transformer_sees_rounded_clip)
{
    (void)state;
    half_pair p;
    half_pair_make(
        &p, &VARS,
        "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.05, \"clipvalue\": 0.2}}",
        OPTIM_BF16, 3);
    optim_destroy(p.r);
    p.r = optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.05}}");
    assert_ok(optim_build(p.r, p.vr, NV), p.r);
    half_pair_copy_state(&p);
    grads g;
    make_grads(&g, OPTIM_BF16, 0);
    optim_grad_var pa[NV], pr[NV];
    uint16_t *want[NV];
    for (int v = 0; v < NV; v++) {
        const int64_t n = NIDX[v] * (numel_of(v) / SHAPES[v][0]);
        pa[v] = (optim_grad_var){sparse_of(OPTIM_BF16, v, g.idx[v], g.h[v]), p.va[v]};
        for (int64_t i = 0; i < n; i++) g.f[v][i] = fminf(fmaxf(g.f[v][i], -0.2f), 0.2f);
        want[v] = malloc((size_t)n * 2);
        assert_non_null(want[v]);
        optim_convert(want[v], OPTIM_BF16, g.f[v], OPTIM_F32, n);
        optim_convert(g.f[v], OPTIM_F32, want[v], OPTIM_BF16, n);
        pr[v] = (optim_grad_var){sparse_of(OPTIM_F32, v, g.idx[v], g.f[v]), p.vr[v]};
    }
    assert_ok(optim_add_gradient_transformer(p.a, saw_clipped, want[0]), p.a);
    if (optim_apply_gradients(p.a, pa, NV, 0)) fail_msg("half step: %s", optim_errmsg(p.a));
    if (optim_apply_gradients(p.r, pr, NV, 0)) fail_msg("reference step: %s", optim_errmsg(p.r));
    half_pair_compare(&p, "Adam clipvalue with a transformer", 0);
    for (int v = 0; v < NV; v++) free(want[v]);
    free_grads(&g);
    half_pair_free(&p);
}

/* A user's element-wise class without a sparse_mode hook (version 1-2
 * style): its one apply_sparse call decays the momentum of every row, then
 * moves the indexed ones, so it touches rows without an index. On a half
 * table it must see the whole table in float32 (user_momentum.h: its
 * dense rule). */
static void u_sparse(const optim_sparse_update *u)
{
    const float lr = (float)((const ucoef *)u->coef)->lr;
    float *w = u->param, *m = u->slots[0];
    const float *g = u->values;
    for (int64_t i = 0; i < u->rows * u->row_size; i++) m[i] *= 0.9f, w[i] += m[i];
    for (int64_t j = 0; j < u->n; j++)
        for (int64_t c = 0; c < u->row_size; c++) {
            const int64_t i = u->indices[j] * u->row_size + c;
            m[i] -= lr * g[j * u->row_size + c];
            w[i] -= lr * g[j * u->row_size + c];
        }
}

static const optim_class USER_WHOLE = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "HalfSparseUserWhole",
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.05,
    .coef_size = sizeof(ucoef),
    .create_slots = u_slots,
    .prepare = u_prepare,
    .apply_dense = u_dense,
    .apply_sparse = u_sparse,
};

OPTIM_TEST(test_user_class_whole_table)
{
    (void)state;
    for (optim_dtype dt = OPTIM_F16; dt; dt = dt == OPTIM_F16 ? OPTIM_BF16 : OPTIM_DTYPE_INVALID) {
        const int64_t shape[2] = {50, 3}, gshape[2] = {4, 3};
        float f[150], gf[12];
        uint16_t h[150], gh[12];
        for (int i = 0; i < 150; i++) f[i] = (float)init_at(0, i);
        for (int i = 0; i < 12; i++) gf[i] = (float)sin(1.3 * i) * 0.8f;
        optim_convert(h, dt, f, OPTIM_F32, 150);
        optim_convert(f, OPTIM_F32, h, dt, 150);
        optim_convert(gh, dt, gf, OPTIM_F32, 12);
        optim_convert(gf, OPTIM_F32, gh, dt, 12);
        int64_t idx[2][4] = {{7, 3, 7, 41},
                             {10, 12, 10, 20}}; /* step 1: rows 3, 7, 41 only decay */
        optim_var *va, *vr;
        optim_optimizer *a, *r;
        optim_error err;
        assert_ok(optim_var_create(&va, "user/table", dt, 2, shape, h, &err), &err);
        assert_ok(optim_var_create(&vr, "user/table", OPTIM_F32, 2, shape, f, &err), &err);
        assert_ok(optim_create(&a, &USER_WHOLE, NULL, &err), &err);
        assert_ok(optim_create(&r, &USER_WHOLE, NULL, &err), &err);
        for (int k = 0; k < 2; k++) {
            optim_grad_var pa = {optim_grad_sparse(idx[k], 4, optim_tensor_make(dt, gh, 2, gshape)),
                                 va};
            optim_grad_var pr = {
                optim_grad_sparse(idx[k], 4, optim_tensor_make(OPTIM_F32, gf, 2, gshape)), vr};
            if (k > 0) /* the reference restarts from the widened half state */
                assert_ok(
                    optim_convert(optim_var_data(optim_get_slot(r, vr, "momentum")), OPTIM_F32,
                                  optim_var_cdata(optim_get_slot(a, va, "momentum")), dt, 150),
                    NULL);
            if (optim_apply_gradients(a, &pa, 1, 0)) fail_msg("half step: %s", optim_errmsg(a));
            if (optim_apply_gradients(r, &pr, 1, 0))
                fail_msg("reference step: %s", optim_errmsg(r));
            uint16_t want[150];
            optim_convert(want, dt, optim_var_cdata(vr), OPTIM_F32, 150);
            for (int i = 0; i < 150; i++)
                if (want[i] != ((const uint16_t *)optim_var_cdata(va))[i])
                    fail_msg(
                        "%s step %d: user/table[%d] is 0x%04x, the rounded float32 reference 0x%04x",
                        optim_dtype_name(dt), k, i, ((const uint16_t *)optim_var_cdata(va))[i],
                        want[i]);
            assert_ok(optim_convert(optim_var_data(vr), OPTIM_F32, optim_var_cdata(va), dt, 150),
                      NULL);
        }
        optim_test_free(a, va);
        optim_test_free(r, vr);
    }
}

/* With bf16_stochastic_rounding_seed, each stored element's random bits
 * depend on the element alone: Keras 3 Adam's sparse step (the dense
 * equivalent, no duplicates) equals its dense step on the densified
 * gradient bit for bit, and differs from rounding to nearest; LazyAdam's
 * lazy rows give the same bits on 1 and 3 threads. */
static void sr_run(const char *json, int sparse, int threads, uint16_t *out)
{
    optim_error err;
    enum { ROWS = 3000, RS = 4, N = 900 };
    static float f[ROWS * RS], dense[ROWS * RS], gf[N * RS];
    static uint16_t h[ROWS * RS], gd[ROWS * RS], gh[N * RS];
    int64_t idx[N];
    for (int i = 0; i < ROWS * RS; i++) f[i] = (float)init_at(0, i), dense[i] = 0;
    for (int j = 0; j < N; j++) idx[j] = (int64_t)j * 3 + (j % 3); /* unique, ascending */
    for (int i = 0; i < N * RS; i++)
        gf[i] = (float)sin(0.9 * i) * 0.7f, dense[idx[i / RS] * RS + i % RS] = gf[i];
    optim_convert(h, OPTIM_BF16, f, OPTIM_F32, ROWS * RS);
    optim_convert(gh, OPTIM_BF16, gf, OPTIM_F32, N * RS);
    optim_convert(gd, OPTIM_BF16, dense, OPTIM_F32, ROWS * RS);
    optim_var *w;
    assert_ok(optim_var_create(&w, "sr/table", OPTIM_BF16, 2, (int64_t[]){ROWS, RS}, h, &err),
              &err);
    optim_optimizer *opt = optim_test_make(json);
    assert_ok(optim_set_num_threads(opt, threads), opt);
    optim_grad_var p = {
        sparse ? optim_grad_sparse(idx, N, optim_tensor_make(OPTIM_BF16, gh, 2, (int64_t[]){N, RS}))
               : optim_grad_dense(optim_tensor_make(OPTIM_BF16, gd, 2, (int64_t[]){ROWS, RS})),
        w};
    for (int k = 0; k < 2; k++)
        if (optim_apply_gradients(opt, &p, 1, 0)) fail_msg("%s: %s", json, optim_errmsg(opt));
    memcpy(out, optim_var_cdata(w), sizeof h);
    optim_test_free(opt, w);
}

OPTIM_TEST(test_stochastic_rounding)
{
    (void)state;
    static uint16_t a[12000], b[12000], c[12000];
    /* {seeded, unseeded} per class; Adam's check is against its dense step (b: sparse 0). */
    const char *const cfg[2][2] = {
        {"{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01, \"bf16_stochastic_rounding_seed\": 42}}",
         "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01}}"},
        {"{\"class_name\": \"LazyAdam\", \"config\": {\"learning_rate\": 0.01, \"bf16_stochastic_rounding_seed\": 7}}",
         "{\"class_name\": \"LazyAdam\", \"config\": {\"learning_rate\": 0.01}}"}};
    for (int c2 = 0; c2 < 2; c2++) {
        sr_run(cfg[c2][0], 1, 1, a);
        sr_run(cfg[c2][0], c2 == 1, 3, b);
        if (memcmp(a, b, sizeof a)) fail_msg("%s: the two runs differ", cfg[c2][0]);
        sr_run(cfg[c2][1], 1, 2, c);
        if (!memcmp(a, c, sizeof a))
            fail_msg("%s: the same bits as rounding to nearest", cfg[c2][0]);
    }
}

/* ---- 2. duplicates summed in float32 ----------------------------------------------------------- */

/* Rows 1, 2^-8, 2^-8 at one index: their float32 sum 1 + 2^-7 is a
 * bfloat16 value, while a bfloat16 running sum stays at 1 (1 + 2^-8 is a
 * tie, rounded to even). SGD, learning rate 1, from 0: -(1 + 2^-7). */
OPTIM_TEST(test_duplicates_summed_in_f32)
{
    optim_error err;
    (void)state;
    const char *const cfg[] = {
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1.0}}",
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1.0, \"momentum\": 0.5}}",
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1.0, \"is_legacy_optimizer\": true}}"};
    for (int c = 0; c < 3; c++) {
        uint16_t w0[2] = {0, 0}, g[3];
        const float gf[3] = {1.0f, 0x1p-8f, 0x1p-8f};
        assert_ok(optim_convert(g, OPTIM_BF16, gf, OPTIM_F32, 3), NULL);
        int64_t idx[3] = {1, 1, 1};
        optim_var *w;
        assert_ok(optim_var_create(&w, "w", OPTIM_BF16, 1, (int64_t[]){2}, w0, &err), &err);
        optim_optimizer *opt = optim_test_make(cfg[c]);
        optim_grad_var p = {
            optim_grad_sparse(idx, 3, optim_tensor_make(OPTIM_BF16, g, 1, (int64_t[]){3})), w};
        if (optim_apply_gradients(opt, &p, 1, 0)) fail_msg("%s: %s", cfg[c], optim_errmsg(opt));
        float got[2];
        optim_convert(got, OPTIM_F32, optim_var_cdata(w), OPTIM_BF16, 2);
        /* Legacy SGD's scatter-add subtracts each duplicate in float32 (exact here), rounded once. */
        if (got[1] != -(1.0f + 0x1p-7f))
            fail_msg("%s: w[1] is %.9g, expected %.9g", cfg[c], got[1], -(1.0 + 0x1p-7));
        assert_float_equal(got[0], 0.0f, 0);
        optim_test_free(opt, w);
    }
}

/* ---- 3. no allocation in a steady-state step -------------------------------------------------- */

#include "alloc_count.h"

/* Steps 2 and 3 of each sparse mode on half tables allocate nothing (the
 * gradients are made before counting starts). */
OPTIM_TEST(test_steady_state_allocates_nothing)
{
    (void)state;
    /* CONFIGS: dense walk, clipped dense walk, lazy rows, duplicates hook, every row, whole variable */
    const int modes[] = {1, 3, 18, 19, 21, 15};
    for (size_t c = 0; c < sizeof modes / sizeof *modes; c++) {
        half_pair p;
        half_pair_make(&p, &VARS, CONFIGS[modes[c]], OPTIM_BF16, 2);
        grads g;
        make_grads(&g, OPTIM_BF16, 0);
        optim_grad_var pa[NV];
        for (int v = 0; v < NV; v++)
            pa[v] = (optim_grad_var){sparse_of(OPTIM_BF16, v, g.idx[v], g.h[v]), p.va[v]};
        for (int k = 0; k < 3; k++) {
            counting = k > 0;
            const int rc = optim_apply_gradients(p.a, pa, NV, 0);
            counting = 0;
            if (rc) fail_msg("%s: %s", CONFIGS[modes[c]], optim_errmsg(p.a));
        }
        if (allocations)
            fail_msg("%s: %ld allocations in steady-state steps", CONFIGS[modes[c]], allocations);
        free_grads(&g);
        half_pair_free(&p);
    }
}

/* ---- 4. refusals ------------------------------------------------------------------------------- */

/* A step of opt on var with g fails with code and a message holding every
 * needle, changing neither the variable nor the counter. */
static void refused(optim_optimizer *opt, optim_var *var, optim_grad g, int code, const char *n1,
                    const char *n2)
{
    uint16_t before[8];
    memcpy(before, optim_var_cdata(var), sizeof before);
    const int64_t it = optim_iterations(opt);
    optim_grad_var p = {g, var};
    assert_status(optim_apply_gradients(opt, &p, 1, 0), code, opt);
    assert_contains(optim_errmsg(opt), n1);
    assert_contains(optim_errmsg(opt), n2);
    assert_memory_equal(before, optim_var_cdata(var), sizeof before);
    assert_eq(optim_iterations(opt), it);
}

OPTIM_TEST(test_refusals)
{
    optim_error err;
    (void)state;
    const int64_t shape[2] = {4, 2};
    uint16_t h[8] = {0x3c00, 0x4000, 0xbc00, 0, 0x3c00, 0x4000, 0xbc00, 0};
    float f[2] = {1, 2};
    int64_t idx[1] = {1}, bad[1] = {4};
    optim_var *w;
    assert_ok(optim_var_create(&w, "emb", OPTIM_F16, 2, shape, h, &err), &err);
    const int64_t row[2] = {1, 2};
    optim_optimizer *adam = optim_test_make("\"adam\"");
    refused(adam, w, optim_grad_sparse(idx, 1, optim_tensor_make(OPTIM_F32, f, 2, row)),
            OPTIM_EDTYPE, "'emb'", "has dtype float32, expected float16");
    refused(adam, w, optim_grad_sparse(idx, 1, optim_tensor_make(OPTIM_BF16, h, 2, row)),
            OPTIM_EDTYPE, "'emb'", "has dtype bfloat16, expected float16");
    refused(adam, w, optim_grad_sparse(bad, 1, optim_tensor_make(OPTIM_F16, h, 2, row)),
            OPTIM_ERANGE, "'emb'", "index 4 at position 0 is out of range, expected 0..3");
    optim_optimizer *ema =
        optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"use_ema\": true}}");
    refused(ema, w, optim_grad_sparse(idx, 1, optim_tensor_make(OPTIM_F16, h, 2, row)),
            OPTIM_ENOTSUP, "'emb'", "is float16; use_ema");
    optim_optimizer *lso = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": "
        "{\"class_name\": \"SGD\", \"config\": {}}}}");
    refused(lso, w, optim_grad_sparse(idx, 1, optim_tensor_make(OPTIM_F16, h, 2, row)),
            OPTIM_ENOTSUP, "'emb' is float16", "wrappers take float32");
    /* The refusal that went: the same sparse gradient now steps Adam. */
    optim_grad_var p = {optim_grad_sparse(idx, 1, optim_tensor_make(OPTIM_F16, h, 2, row)), w};
    assert_ok(optim_apply_gradients(adam, &p, 1, 0), adam);
    assert_eq(optim_iterations(adam), 1);
    assert_memory_equal(optim_var_cdata(w), h,
                        2 * sizeof *h); /* row 0 untouched (Keras 3 Adam: m, v only) */
    assert_memory_not_equal((const uint16_t *)optim_var_cdata(w) + 2, h + 2, 2 * sizeof *h);
    optim_destroy(adam);
    optim_destroy(ema);
    optim_destroy(lso);
    optim_var_destroy(w);
}

/* ---- 5. optim replay with sparse bfloat16 GRADS ------------------------------------------------ */

/* SGD, learning rate 0.5, on a bfloat16 [4, 2] table 1..8 with rows
 * [1, 0.5], [0.25, 1], [1, 1] at indices 1, 3, 1: row 1 becomes
 * [3, 4] - 0.5 [2, 1.5] = [2, 3.25], row 3 [7, 8] - 0.5 [0.25, 1] =
 * [6.875, 7.5] (all bfloat16 values), rows 0 and 2 stay. */
OPTIM_TEST(test_replay_sparse_bf16)
{
    (void)state;
    const char *cfg = optim_test_tmpfile("c.json"), *init = optim_test_tmpfile("i.safetensors"),
               *grads = optim_test_tmpfile("g.safetensors"),
               *out = optim_test_tmpfile("o.safetensors");
    const char *json = "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.5}}";
    assert_eq(optim_test_write_file(cfg, json, strlen(json)), 0);
    const float w0[8] = {1, 2, 3, 4, 5, 6, 7, 8}, g0[6] = {1, 0.5f, 0.25f, 1, 1, 1};
    const float want[8] = {1, 2, 2, 3.25f, 5, 6, 6.875f, 7.5f};
    uint16_t w[8], g[6];
    optim_convert(w, OPTIM_BF16, w0, OPTIM_F32, 8);
    optim_convert(g, OPTIM_BF16, g0, OPTIM_F32, 6);
    int64_t idx[3] = {1, 3, 1};
    const char *in_name[1] = {"w"}, *g_names[2] = {"0/w/indices", "0/w/values"};
    optim_tensor in[1] = {optim_tensor_make(OPTIM_BF16, w, 2, (int64_t[]){4, 2})};
    optim_tensor gt[2] = {optim_tensor_make(OPTIM_I64, idx, 1, (int64_t[]){3}),
                          optim_tensor_make(OPTIM_BF16, g, 2, (int64_t[]){3, 2})};
    optim_test_write_st(init, in_name, in, 1);
    optim_test_write_st(grads, g_names, gt, 2);
    char *argv[] = {OPTIM_CLI_PATH, "replay",    (char *)cfg, (char *)init,
                    (char *)grads,  (char *)out, NULL};
    assert_eq(optim_test_exec(argv, 0), 0);
    optim_st_file *o;
    optim_error err;
    if (optim_st_read(out, &o, &err)) fail_msg("%s", err.msg);
    optim_tensor t;
    assert_ok(optim_st_get(o, "w", &t), NULL);
    assert_int_equal(t.dtype, OPTIM_BF16);
    float got[8];
    optim_convert(got, OPTIM_F32, t.data, OPTIM_BF16, 8);
    for (int i = 0; i < 8; i++)
        if (got[i] != want[i]) fail_msg("replay: w[%d] is %g, expected %g", i, got[i], want[i]);
    optim_st_free(o);
}

int main(void) { return optim_test_run(); }
