/* Half-precision storage (F16, BF16; docs/half-precision.md).
 *
 * 1. Conversions: every one of the 65536 bit patterns of each type decoded
 *    against a decoder written here from the format's definition; rounding
 *    from float32 and float64 against a nearest-value search over the sorted
 *    table of all finite values (ties to the even pattern), at every midpoint
 *    and its neighbours and at random inputs; the vectorised bulk
 *    conversions against the scalar rules.
 * 2. Every built-in optimizer on F16 and BF16 variables, step by step,
 *    against the same class on float32 copies of the half state, rounded
 *    once per write: bit for bit, with clipping, weight decay and
 *    loss_scale_factor included.
 *    A steady-state step allocates nothing.
 * 3. safetensors F16/BF16, `optim replay` on half files (rounding to nearest
 *    and stochastically), and refusals. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "half_pair.h"
#include "testutil.h"

#ifndef OPTIM_CLI_PATH
#error "the build must define OPTIM_CLI_PATH"
#endif

/* ---- 1. conversions ---------------------------------------------------------------------------- */

/* The value of a half pattern from the format's definition: ebits exponent
 * bits, mbits mantissa bits, bias 2^(ebits-1) - 1. */
static double decode(uint16_t h, int ebits, int mbits)
{
    const int emax = (1 << ebits) - 1, bias = (1 << (ebits - 1)) - 1;
    const int e = (h >> mbits) & emax, m = h & ((1 << mbits) - 1);
    const double sign = (h >> 15) ? -1.0 : 1.0;
    if (e == emax) return m ? NAN : sign * INFINITY;
    if (e == 0) return sign * ldexp(m, 1 - bias - mbits);
    return sign * ldexp(m + (1 << mbits), e - bias - mbits);
}

static double dec16(uint16_t h) { return decode(h, 5, 10); }
static double decbf(uint16_t h) { return decode(h, 8, 7); }

/* All finite non-negative values of a type, ascending (pattern = index). */
typedef struct table {
    double v[0x8000];
    int n; /* patterns 0 .. n-1 are finite */
} table;

static table T16, TBF;

static void make_table(table *t, double (*dec)(uint16_t))
{
    t->n = 0;
    while (t->n < 0x8000 && isfinite(dec((uint16_t)t->n))) {
        t->v[t->n] = dec((uint16_t)t->n);
        t->n++;
    }
}

/* The reference rounding of x: the nearest table value, ties to the even
 * pattern; beyond the largest finite value by half an ulp or more, inf. */
static uint16_t ref_round(const table *t, double x)
{
    if (isnan(x)) return 0x7fff;
    const uint16_t sign = signbit(x) ? 0x8000 : 0;
    const double a = fabs(x);
    const double top = t->v[t->n - 1], ulp = top - t->v[t->n - 2];
    if (a >= top + ulp / 2) return sign | (uint16_t)t->n; /* the infinity pattern */
    int lo = 0, hi = t->n - 1; /* v[lo] <= a < v[hi] */
    if (a >= top) return sign | (uint16_t)(t->n - 1);
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (t->v[mid] <= a) lo = mid;
        else hi = mid;
    }
    const double dl = a - t->v[lo], dh = t->v[hi] - a;
    const int pick = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
    return sign | (uint16_t)pick;
}

static void check_round_f32(optim_dtype dt, const table *t, float x)
{
    uint16_t got, want = ref_round(t, x);
    assert_ok(optim_convert(&got, dt, &x, OPTIM_F32, 1), NULL);
    if (isnan(x)) {
        assert_gt(got & 0x7fff, dt == OPTIM_F16 ? 0x7c00 : 0x7f80);
        assert_int_equal(got >> 15, signbit(x) ? 1 : 0);
        return;
    }
    if (got != want)
        fail_msg("%s of %a: got 0x%04x, want 0x%04x", optim_dtype_name(dt), x, got, want);
}

static void check_round_f64(optim_dtype dt, const table *t, double x)
{
    uint16_t got, want = ref_round(t, x);
    assert_ok(optim_convert(&got, dt, &x, OPTIM_F64, 1), NULL);
    if (got != want)
        fail_msg("%s of double %a: got 0x%04x, want 0x%04x", optim_dtype_name(dt), x, got, want);
}

/* Every pattern decodes exactly (to float32 and to float64), and every
 * non-NaN pattern survives a round trip; NaNs stay NaNs of the same sign,
 * quiet ones exactly. */
static void exhaustive_decode(optim_dtype dt, double (*dec)(uint16_t), uint16_t inf, uint16_t quiet)
{
    static uint16_t in[65536], back[65536];
    static float f[65536];
    static double d[65536];
    for (int i = 0; i < 65536; i++) in[i] = (uint16_t)i;
    assert_ok(optim_convert(f, OPTIM_F32, in, dt, 65536), NULL);
    assert_ok(optim_convert(d, OPTIM_F64, in, dt, 65536), NULL);
    assert_ok(optim_convert(back, dt, f, OPTIM_F32, 65536), NULL);
    for (int i = 0; i < 65536; i++) {
        const double want = dec(in[i]);
        if (isnan(want)) {
            assert_nan(f[i]);
            assert_nan(d[i]);
            assert_int_equal(signbit(f[i]) != 0, i >> 15);
            assert_gt(back[i] & 0x7fff, inf);
            assert_true(back[i] & quiet);
            assert_eq(back[i] >> 15, i >> 15);
            if (in[i] & quiet) assert_int_equal(back[i], in[i]);
            continue;
        }
        if (!((double)f[i] == want && d[i] == want && !signbit(f[i]) == !signbit(want)))
            fail_msg("pattern 0x%04x: float %a, double %a, want %a", i, f[i], d[i], want);
        assert_int_equal(back[i], in[i]);
    }
}

OPTIM_TEST(test_f16_exhaustive) { exhaustive_decode(OPTIM_F16, dec16, 0x7c00, 0x0200); }

OPTIM_TEST(test_bf16_exhaustive) { exhaustive_decode(OPTIM_BF16, decbf, 0x7f80, 0x0040); }

/* The same checks on n floats converted in one call (the vectorised and
 * hardware paths take whole runs, the scalar rules the rest). */
static void check_round_bulk(optim_dtype dt, const table *t, const float *x, int64_t n)
{
    uint16_t *got = malloc((size_t)n * sizeof *got);
    assert_non_null(got);
    assert_ok(optim_convert(got, dt, x, OPTIM_F32, n), NULL);
    for (int64_t i = 0; i < n; i++) {
        uint16_t one;
        optim_convert(&one, dt, &x[i], OPTIM_F32, 1);
        if (got[i] != one)
            fail_msg("%s of %a at %lld: bulk 0x%04x, one by one 0x%04x", optim_dtype_name(dt), x[i],
                     (long long)i, got[i], one);
        check_round_f32(dt, t, x[i]);
    }
    free(got);
}

/* Each midpoint between neighbours (ties: to even), the floats just either
 * side of it, and the same from double (where rounding through float32
 * first would round twice: m + 2^-60 m must round up); the floats once
 * more in one bulk conversion. */
static void midpoints(optim_dtype dt, const table *t)
{
    float *all = malloc(6 * 0x8000 * sizeof *all);
    int64_t n = 0;
    assert_non_null(all);
    for (int i = 0; i + 1 <= t->n; i++) {
        const double a = t->v[i];
        const double b =
            i + 1 < t->n ? t->v[i + 1] : a + (a - t->v[i - 1]); /* past the top: 2^(emax+1) */
        const double m = (a + b) / 2;
        for (int s = 0; s < 2; s++) {
            const double x = s ? -m : m;
            check_round_f32(dt, t, (float)x);
            check_round_f32(dt, t, nextafterf((float)x, INFINITY));
            check_round_f32(dt, t, nextafterf((float)x, -INFINITY));
            check_round_f64(dt, t, x);
            check_round_f64(dt, t, x + ldexp(fabs(x), -40));
            check_round_f64(dt, t, x - ldexp(fabs(x), -40));
            all[n++] = (float)x;
            all[n++] = nextafterf((float)x, INFINITY);
            all[n++] = nextafterf((float)x, -INFINITY);
        }
    }
    check_round_bulk(dt, t, all, n);
    free(all);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

OPTIM_TEST(test_rounding)
{
    midpoints(OPTIM_F16, &T16);
    midpoints(OPTIM_BF16, &TBF);
    enum { NRAND = 400000 };
    float *rand32 = malloc(NRAND * sizeof *rand32);
    assert_non_null(rand32);
    for (int k = 0; k < NRAND; k++) {
        const uint64_t r = rng();
        float f;
        uint32_t u = (uint32_t)r;
        memcpy(&f, &u, sizeof f);
        rand32[k] = f;
        double d;
        memcpy(&d, &r, sizeof d);
        check_round_f32(OPTIM_F16, &T16, f);
        check_round_f32(OPTIM_BF16, &TBF, f);
        if (!isnan(d)) {
            check_round_f64(OPTIM_F16, &T16, d);
            check_round_f64(OPTIM_BF16, &TBF, d);
            check_round_f64(OPTIM_F16, &T16,
                            ldexp(d, -(int)(r >> 58) - 940)); /* near the half range */
        }
    }
    check_round_bulk(OPTIM_F16, &T16, rand32, NRAND);
    check_round_bulk(OPTIM_BF16, &TBF, rand32, NRAND);
    free(rand32);
    /* The edges: the largest finite value, overflow, the subnormals. */
    check_round_f32(OPTIM_F16, &T16, 65504.0f);
    check_round_f32(OPTIM_F16, &T16, 65519.99f);
    check_round_f32(OPTIM_F16, &T16, 65520.0f);
    check_round_f32(OPTIM_F16, &T16, 0x1p-25f);
    check_round_f32(OPTIM_F16, &T16, 0x1.000002p-25f);
    check_round_f32(OPTIM_F16, &T16, 0x1.ffcp-15f);
    check_round_f32(OPTIM_BF16, &TBF, 0x1.fffffep127f);
    check_round_f32(OPTIM_BF16, &TBF, 0x1p-149f);
}

/* The vectorised rounding (8 lanes at a time, NaN lanes on a second path)
 * against the scalar rule, which a one-element conversion runs: every
 * float32 high half with low halves at each rounding edge of both types
 * (bfloat16 rounds at bit 16, float16 at bit 13 and, for subnormals,
 * above), in runs where NaN, infinite and finite lanes share an 8. */
OPTIM_TEST(test_bulk_sweep)
{
    static const uint16_t LOW[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x2001,
                                   0x3fff, 0x6000, 0x7fff, 0x8000, 0x8001, 0xa000, 0xe000, 0xffff};
    enum { NLOW = sizeof LOW / sizeof *LOW, N = NLOW * 65536 };
    float *x = malloc(N * sizeof *x);
    uint16_t *got = malloc(N * sizeof *got);
    assert_true(x && got);
    for (int k = 0; k < NLOW; k++)
        for (uint32_t hi = 0; hi < 65536; hi++) {
            const uint32_t u = hi << 16 | LOW[k];
            memcpy(&x[k * 65536 + (int)hi], &u, sizeof u);
        }
    const optim_dtype dts[2] = {OPTIM_BF16, OPTIM_F16};
    for (int d = 0; d < 2; d++) {
        assert_ok(optim_convert(got + 1, dts[d], x + 1, OPTIM_F32, N - 1),
                  NULL); /* unaligned too */
        for (int i = 1; i < N; i++) {
            uint16_t one;
            optim_convert(&one, dts[d], &x[i], OPTIM_F32, 1);
            if (got[i] != one)
                fail_msg("%s of 0x%08x: bulk 0x%04x, one by one 0x%04x", optim_dtype_name(dts[d]),
                         (unsigned)(LOW[i / 65536] | (uint32_t)(i % 65536) << 16), got[i], one);
        }
    }
    free(x);
    free(got);
}

OPTIM_TEST(test_convert_bad_input)
{
    float f[2] = {1, 2};
    uint16_t h[2] = {7, 7};
    assert_status(optim_convert(h, OPTIM_I32, f, OPTIM_F32, 2), OPTIM_EDTYPE, NULL);
    assert_status(optim_convert(h, OPTIM_F16, f, OPTIM_I64, 2), OPTIM_EDTYPE, NULL);
    assert_status(optim_convert(h, OPTIM_F16, f, (optim_dtype)99, 2), OPTIM_EDTYPE, NULL);
    assert_status(optim_convert(h, OPTIM_F16, f, OPTIM_F32, -1), OPTIM_EINVAL, NULL);
    assert_status(optim_convert(NULL, OPTIM_F16, f, OPTIM_F32, 2), OPTIM_EINVAL, NULL);
    assert_status(optim_convert(h, OPTIM_F16, NULL, OPTIM_F32, 2), OPTIM_EINVAL, NULL);
    assert_int_equal(h[0], 7); /* untouched */
    assert_ok(optim_convert(NULL, OPTIM_F16, NULL, OPTIM_F32, 0), NULL);
    assert_eq(optim_dtype_size(OPTIM_F16), 2);
    assert_eq(optim_dtype_size(OPTIM_BF16), 2);
    assert_string_equal(optim_dtype_name(OPTIM_F16), "float16");
    assert_string_equal(optim_dtype_name(OPTIM_BF16), "bfloat16");
    assert_eq(optim_compute_dtype(OPTIM_BF16), OPTIM_F32);
    assert_eq(optim_compute_dtype(OPTIM_F64), OPTIM_F64);
}

/* ---- 2. every built-in on half variables --------------------------------------------------------- */

#define NV 2
static const int64_t SHAPES[NV][3] = {{26, 50, 0},
                                      {9, 1, 0}}; /* 1300 elements: three conversion blocks */
static const int32_t RANKS[NV] = {2, 1};
static const char *const NAMES[NV] = {"dense/kernel", "dense/bias"};

static const char *const CONFIGS[] = {
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05, \"momentum\": 0.9, \"nesterov\": true}}",
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05, \"global_clipnorm\": 0.5, \"weight_decay\": 0.1}}",
    "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.05, \"amsgrad\": true, \"clipnorm\": 0.3}}",
    "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.05, \"clipvalue\": 0.2, \"loss_scale_factor\": 4.0}}",
    "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.05, \"is_legacy_optimizer\": true}}",
    "{\"class_name\": \"AdamW\", \"config\": {\"learning_rate\": 0.05, \"weight_decay\": 0.1}}",
    "{\"class_name\": \"Adamax\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"Nadam\", \"config\": {\"learning_rate\": 0.05, \"is_legacy_optimizer\": true}}",
    "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"RMSprop\", \"config\": {\"learning_rate\": 0.05, \"centered\": true, \"momentum\": 0.5}}",
    "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"Adadelta\", \"config\": {\"learning_rate\": 1.0}}",
    "{\"class_name\": \"Ftrl\", \"config\": {\"learning_rate\": 0.05, \"l1_regularization_strength\": 0.01}}",
    "{\"class_name\": \"Lion\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"Adafactor\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.05, \"clipnorm\": 0.5}}",
    "{\"class_name\": \"Muon\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"LazyAdam\", \"config\": {\"learning_rate\": 0.05}}",
    "{\"class_name\": \"NovoGrad\", \"config\": {\"learning_rate\": 0.05, \"amsgrad\": true, \"weight_decay\": 0.01}}",
    "{\"class_name\": \"ConditionalGradient\", \"config\": {\"learning_rate\": 0.5}}",
    "{\"class_name\": \"ConditionalGradient\", \"config\": {\"learning_rate\": 0.5, \"ord\": \"nuclear\"}}",
    "{\"class_name\": \"MultiOptimizer\", \"config\": {\"optimizer_map\": {\"module\": \"keras.optimizers\", "
    "\"class_name\": \"OptimizerMap\", \"config\": {\"default_optimizer\": {\"class_name\": \"SGD\", \"config\": "
    "{\"learning_rate\": 0.05, \"momentum\": 0.5}}, \"optimizer_map\": {\"dense/bias\": {\"class_name\": \"Adam\", "
    "\"config\": {\"learning_rate\": 0.05}}}}, \"registered_name\": null}}}",
};

static double init_at(int v, int64_t i) { return 0.5 - 0.0007 * (double)i + 0.1 * v; }
static const half_vars VARS = {NV, NAMES, RANKS, SHAPES, init_at};
static double grad_at(int k, int v, int i)
{
    return sin(0.7 * k + 1.3 * i + v) * (1 + 0.01 * (i % 10));
}

/* One step of both; returns how many elements of a's variables changed. */
static int64_t step_both(half_pair *p, int k)
{
    uint16_t gh[NV][1300];
    float gf[NV][1300];
    optim_grad_var pa[NV], pr[NV];
    int64_t changed = 0;
    uint16_t before[NV][1300];
    for (int v = 0; v < NV; v++) {
        const int64_t n = optim_var_numel(p->va[v]);
        for (int64_t i = 0; i < n; i++) gf[v][i] = (float)grad_at(k, v, (int)i);
        optim_convert(gh[v], p->dt, gf[v], OPTIM_F32, n);
        optim_convert(gf[v], OPTIM_F32, gh[v], p->dt, n); /* the reference sees the half gradient */
        memcpy(before[v], optim_var_cdata(p->va[v]), (size_t)n * 2);
        pa[v] = (optim_grad_var){
            optim_grad_dense(optim_tensor_make(p->dt, gh[v], RANKS[v], SHAPES[v])), p->va[v]};
        pr[v] = (optim_grad_var){
            optim_grad_dense(optim_tensor_make(OPTIM_F32, gf[v], RANKS[v], SHAPES[v])), p->vr[v]};
    }
    if (optim_apply_gradients(p->a, pa, NV, 0)) fail_msg("half step: %s", optim_errmsg(p->a));
    if (optim_apply_gradients(p->r, pr, NV, 0)) fail_msg("reference step: %s", optim_errmsg(p->r));
    for (int v = 0; v < NV; v++)
        for (int64_t i = 0; i < optim_var_numel(p->va[v]); i++)
            changed += before[v][i] != ((const uint16_t *)optim_var_cdata(p->va[v]))[i];
    return changed;
}

static void run_config(const char *json, optim_dtype dt)
{
    half_pair p;
    half_pair_make(&p, &VARS, json, dt, 0);
    const int64_t changed = half_pair_steps(&p, json, 4, step_both);
    if (changed < 100)
        fail_msg("%s %s: only %lld elements ever changed", json, optim_dtype_name(dt),
                 (long long)changed);
    half_pair_free(&p);
}

OPTIM_TEST(test_builtins_f16)
{
    for (size_t c = 0; c < sizeof CONFIGS / sizeof *CONFIGS; c++) run_config(CONFIGS[c], OPTIM_F16);
}

OPTIM_TEST(test_builtins_bf16)
{
    for (size_t c = 0; c < sizeof CONFIGS / sizeof *CONFIGS; c++)
        run_config(CONFIGS[c], OPTIM_BF16);
}

/* Thread counts give the same bits (the chunks and blocks are fixed). */
OPTIM_TEST(test_threads)
{
    uint16_t out[3][1300];
    for (int t = 1; t <= 3; t++) {
        half_pair p;
        half_pair_make(&p, &VARS, CONFIGS[4], OPTIM_BF16, 0);
        optim_set_num_threads(p.a, t);
        for (int k = 0; k < 3; k++) step_both(&p, k);
        memcpy(out[t - 1], optim_var_cdata(p.va[0]), 1300 * 2);
        half_pair_free(&p);
    }
    assert_memory_equal(out[0], out[1], sizeof out[0]);
    assert_memory_equal(out[0], out[2], sizeof out[0]);
}

/* ---- no allocation in a steady-state step ----------------------------------------------------- */

#include "alloc_count.h"

/* Steps 2 and 3 of dense half steps on two threads allocate nothing:
 * element-wise blocks (clipped, decayed, rounded stochastically) and a
 * whole-variable class's scratch (the gradients are made before counting
 * starts). */
OPTIM_TEST(test_steady_state_allocates_nothing)
{
    const char *const configs[] = {
        CONFIGS[2],
        CONFIGS[4],
        CONFIGS[19],
        "{\"class_name\": \"Adam\", \"config\": {\"clipvalue\": 0.2, \"weight_decay\": 0.1, "
        "\"bf16_stochastic_rounding_seed\": 7}}",
    };
    for (size_t c = 0; c < sizeof configs / sizeof *configs; c++) {
        half_pair p;
        half_pair_make(&p, &VARS, configs[c], OPTIM_BF16, 2);
        uint16_t gh[NV][1300];
        optim_grad_var pa[NV];
        for (int v = 0; v < NV; v++) {
            float gf[1300];
            const int64_t n = optim_var_numel(p.va[v]);
            for (int64_t i = 0; i < n; i++) gf[i] = (float)grad_at(0, v, (int)i);
            optim_convert(gh[v], OPTIM_BF16, gf, OPTIM_F32, n);
            pa[v] = (optim_grad_var){
                optim_grad_dense(optim_tensor_make(OPTIM_BF16, gh[v], RANKS[v], SHAPES[v])),
                p.va[v]};
        }
        const long before = allocations;
        for (int k = 0; k < 3; k++) {
            counting = k > 0;
            const int rc = optim_apply_gradients(p.a, pa, NV, 0);
            counting = 0;
            if (rc) fail_msg("%s: %s", configs[c], optim_errmsg(p.a));
        }
        if (allocations != before)
            fail_msg("%s: %ld allocations in steady-state steps", configs[c], allocations - before);
        half_pair_free(&p);
    }
}

/* ---- 3. refusals -------------------------------------------------------------------------------- */

/* A step of opt on var with g must fail with code and a message holding
 * needle, and change neither the variable nor the counter. */
static void refused(optim_optimizer *opt, optim_var *var, optim_grad g, int code,
                    const char *needle)
{
    uint16_t before[4];
    memcpy(before, optim_var_cdata(var), sizeof before);
    const int64_t it = optim_iterations(opt);
    optim_grad_var p = {g, var};
    assert_status(optim_apply_gradients(opt, &p, 1, 0), code, opt);
    assert_contains(optim_errmsg(opt), needle);
    assert_memory_equal(before, optim_var_cdata(var), sizeof before);
    assert_eq(optim_iterations(opt), it);
}

OPTIM_TEST(test_refusals)
{
    optim_error err;
    const int64_t shape[2] = {2, 2};
    uint16_t h[4] = {0x3c00, 0x4000, 0xbc00, 0};
    float f[4] = {1, 2, 3, 4};
    int64_t idx[1] = {1};
    optim_var *w;
    assert_ok(optim_var_create(&w, "w", OPTIM_F16, 2, shape, h, &err), &err);
    optim_optimizer *adam = optim_test_make("\"adam\"");
    refused(adam, w, optim_grad_dense(optim_tensor_make(OPTIM_F32, f, 2, shape)), OPTIM_EDTYPE,
            "expected float16");
    refused(adam, w, optim_grad_dense(optim_tensor_make(OPTIM_BF16, h, 2, shape)), OPTIM_EDTYPE,
            "expected float16");
    refused(adam, w,
            optim_grad_sparse(idx, 1, optim_tensor_make(OPTIM_F32, f, 2, (int64_t[]){1, 2})),
            OPTIM_EDTYPE, "expected float16"); /* sparse half gradients: tests/test_half_sparse.c */
    optim_optimizer *ema =
        optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"use_ema\": true}}");
    refused(ema, w, optim_grad_dense(optim_tensor_make(OPTIM_F16, h, 2, shape)), OPTIM_ENOTSUP,
            "use_ema");
    optim_optimizer *acc = optim_test_make(
        "{\"class_name\": \"SGD\", \"config\": {\"gradient_accumulation_steps\": 2}}");
    refused(acc, w, optim_grad_dense(optim_tensor_make(OPTIM_F16, h, 2, shape)), OPTIM_ENOTSUP,
            "gradient_accumulation_steps");
    optim_optimizer *lso = optim_test_make(
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": "
        "{\"class_name\": \"SGD\", \"config\": {}}}}");
    refused(lso, w, optim_grad_dense(optim_tensor_make(OPTIM_F16, h, 2, shape)), OPTIM_ENOTSUP,
            "wrappers take float32");
    /* The wrapper's own functions on the gradients refuse them too (before writing). */
    optim_grad_var up = {optim_grad_dense(optim_tensor_make(OPTIM_F16, h, 2, shape)), w};
    assert_status(optim_unscale_gradients(lso, &up, 1), OPTIM_ENOTSUP, lso);
    assert_int_equal(h[0], 0x3c00);
    assert_status(optim_check_gradients(lso, &up, 1, 1), OPTIM_ENOTSUP, lso);
    assert_contains(optim_errmsg(lso), "'w' is float16");
    const size_t nw = optim_weights_count(lso);
    assert_status(optim_build(lso, &w, 1), OPTIM_ENOTSUP, lso);
    assert_eq(optim_weights_count(lso), nw);
    optim_constraint c = optim_constraint_non_neg();
    assert_status(optim_var_set_constraint(w, &c), OPTIM_ENOTSUP, w);
    assert_contains(optim_var_errmsg(w), "float16");
    assert_null(optim_var_constraint(w));
    optim_tape *tape;
    assert_ok(optim_tape_create(&tape, &err), &err);
    assert_null(optim_tape_var(tape, w));
    assert_contains(optim_tape_errmsg(tape), "'w' is float16, expected float32 or float64");
    optim_tape_destroy(tape);
    optim_destroy(adam);
    optim_destroy(ema);
    optim_destroy(acc);
    optim_destroy(lso);
    optim_var_destroy(w);
    assert_status(optim_var_create(&w, "i", OPTIM_I32, 1, (int64_t[]){2}, NULL, &err), OPTIM_EDTYPE,
                  &err);
    assert_contains(err.msg, "expected float32, float64, float16 or bfloat16");
}

/* A half variable's optim_var_get reads the stored value. */
OPTIM_TEST(test_var_get)
{
    optim_error err;
    uint16_t h[3] = {0x3c00, 0xc000, 0x0001};
    optim_var *a, *b;
    assert_ok(optim_var_create(&a, "a", OPTIM_F16, 1, (int64_t[]){3}, h, &err), &err);
    assert_ok(optim_var_create(&b, "b", OPTIM_BF16, 1, (int64_t[]){3}, h, &err), &err);
    assert_eq(optim_var_get(a, 0), 1.0);
    assert_eq(optim_var_get(a, 1), -2.0);
    assert_eq(optim_var_get(a, 2), 0x1p-24);
    assert_eq(optim_var_get(b, 0), decbf(0x3c00));
    assert_eq(optim_var_get(b, 2), 0x1p-133);
    optim_var_destroy(a);
    optim_var_destroy(b);
}

/* ---- 4. files: safetensors and optim replay ------------------------------------------------------- */

static char dir[64];

static int run_replay(const char *config, const char *init, const char *grads, const char *out)
{
    char *argv[] = {OPTIM_CLI_PATH, "replay", (char *)config, (char *)init, (char *)grads,
                    (char *)out,    NULL};
    return optim_test_exec(argv, 1);
}

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

/* optim replay of config (JSON) on a BF16 and an F16 variable gives what
 * the library gives, bit for bit, with the slots in the variables' dtypes;
 * the files are left in dir, the BF16 variable's result in a_out. */
static void replay_matches(const char *config, const char *cfg, const char *init, const char *grads,
                           const char *out, uint16_t a_out[12])
{
    optim_error err;
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fputs(config, f);
    assert_int_equal(fclose(f), 0);
    const int64_t s[2] = {3, 4};
    uint16_t a0[12], b0[12], ga[2][12], gb[2][12];
    for (int i = 0; i < 12; i++) {
        float x = (float)init_at(0, i), y = (float)init_at(1, i), g[4];
        optim_convert(&a0[i], OPTIM_BF16, &x, OPTIM_F32, 1);
        optim_convert(&b0[i], OPTIM_F16, &y, OPTIM_F32, 1);
        for (int k = 0; k < 2; k++)
            g[k] = (float)grad_at(k, 0, i), g[2 + k] = (float)grad_at(k, 1, i);
        for (int k = 0; k < 2; k++) optim_convert(&ga[k][i], OPTIM_BF16, &g[k], OPTIM_F32, 1);
        for (int k = 0; k < 2; k++) optim_convert(&gb[k][i], OPTIM_F16, &g[2 + k], OPTIM_F32, 1);
    }
    const char *in_names[2] = {"a", "b"};
    optim_tensor in[2] = {optim_tensor_make(OPTIM_BF16, a0, 2, s),
                          optim_tensor_make(OPTIM_F16, b0, 1, (int64_t[]){12})};
    optim_test_write_st(init, in_names, in, 2);
    const char *g_names[4] = {"0/a", "0/b", "1/a", "1/b"};
    optim_tensor g[4] = {optim_tensor_make(OPTIM_BF16, ga[0], 2, s),
                         optim_tensor_make(OPTIM_F16, gb[0], 1, (int64_t[]){12}),
                         optim_tensor_make(OPTIM_BF16, ga[1], 2, s),
                         optim_tensor_make(OPTIM_F16, gb[1], 1, (int64_t[]){12})};
    optim_test_write_st(grads, g_names, g, 4);
    assert_int_equal(run_replay(cfg, init, grads, out), 0);

    /* The same in the library. */
    optim_optimizer *opt = optim_test_make(config);
    optim_var *va, *vb;
    assert_ok(optim_var_create(&va, "a", OPTIM_BF16, 2, s, a0, &err), &err);
    assert_ok(optim_var_create(&vb, "b", OPTIM_F16, 1, (int64_t[]){12}, b0, &err), &err);
    for (int k = 0; k < 2; k++) {
        optim_grad_var p[2] = {{optim_grad_dense(g[2 * k]), va},
                               {optim_grad_dense(g[2 * k + 1]), vb}};
        assert_ok(optim_apply_gradients(opt, p, 2, 0), opt);
    }
    optim_st_file *o;
    if (optim_st_read(out, &o, &err)) fail_msg("%s", err.msg);
    const struct {
        const char *name;
        optim_var *v;
    } want[] = {{"a", va},
                {"b", vb},
                {"a/m", optim_get_slot(opt, va, "m")},
                {"a/v", optim_get_slot(opt, va, "v")},
                {"b/m", optim_get_slot(opt, vb, "m")},
                {"b/v", optim_get_slot(opt, vb, "v")}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        optim_tensor t;
        assert_ok(optim_st_get(o, want[i].name, &t), NULL);
        assert_eq(t.dtype, optim_var_dtype(want[i].v));
        assert_memory_equal(t.data, optim_var_cdata(want[i].v), 24);
    }
    assert_int_not_equal(memcmp(optim_var_cdata(va), a0, 24), 0);
    memcpy(a_out, optim_var_cdata(va), 24);
    optim_st_free(o);
    optim_destroy(opt);
    optim_var_destroy(va);
    optim_var_destroy(vb);
}

/* optim replay on half variables, rounding to nearest and (BF16) with
 * stochastic rounding (docs/half-precision.md); a float32 gradient for a
 * BF16 variable is refused and OUT is not created. */
OPTIM_TEST(test_replay)
{
    char cfg[128], init[128], grads[128], out[128], bad[128];
    path_in(cfg, sizeof cfg, "c.json");
    path_in(init, sizeof init, "init.safetensors");
    path_in(grads, sizeof grads, "grads.safetensors");
    path_in(out, sizeof out, "out.safetensors");
    path_in(bad, sizeof bad, "bad.safetensors");
    uint16_t sr[12], nearest[12];
    replay_matches(
        "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.05, \"clipnorm\": 1.0, "
        "\"bf16_stochastic_rounding_seed\": 3}}",
        cfg, init, grads, out, sr);
    replay_matches(
        "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.05, \"clipnorm\": 1.0}}", cfg,
        init, grads, out, nearest);
    assert_int_not_equal(memcmp(sr, nearest, sizeof sr), 0); /* the seed was used */

    /* A float32 gradient for the BF16 variable. */
    const int64_t s[2] = {3, 4};
    float fg[12] = {0};
    const char *bad_names[1] = {"0/a"};
    optim_tensor bt[1] = {optim_tensor_make(OPTIM_F32, fg, 2, s)};
    optim_test_write_st(bad, bad_names, bt, 1);
    unlink(out);
    assert_int_not_equal(run_replay(cfg, init, bad, out), 0);
    assert_int_equal(access(out, F_OK), -1);
    unlink(cfg), unlink(init), unlink(grads), unlink(bad);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/optim_half_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    make_table(&T16, dec16);
    make_table(&TBF, decbf);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return rmdir(dir);
}

int main(void) { return optim_test_run_group(setup, teardown); }
