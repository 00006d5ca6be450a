/* Stochastic rounding of BF16 variables and slots, the opt-in
 * "bf16_stochastic_rounding_seed" config key (docs/half-precision.md).
 *
 * 1. The rounding: the SSE2 loop against the scalar rule; each result one of
 *    the two neighbouring bfloat16 values; the frequency of rounding up
 *    against the distance fraction (binomial bounds); special values as
 *    round-to-nearest.
 * 2. In a step: plain bf16 SGD with a learning rate below half an ulp
 *    stalls, stochastic rounding follows the closed-form expectation;
 *    slots rounded too; the same bits for 1, 2 and 3 threads and across
 *    optimizers, other bits for another seed, step, element, variable
 *    index or name; F16, F32, F64 variables untouched.
 * 3. The config key: read strictly, written only when set, settable from C,
 *    kept by an optim_serialize -> optim_from_json resume. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "testutil.h"

#define KEY "bf16_stochastic_rounding_seed"

static uint32_t rng_state = 12345u;
static uint32_t rnd(void)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state ^ (rng_state >> 15);
}

static double bf(uint16_t h) { return optim__bf16_to_f32(h); }

/* ---- 1. the rounding -------------------------------------------------------------------------- */

OPTIM_TEST(bulk_matches_scalar_and_neighbours)
{
    enum { N = 300 };
    float src[N];
    uint16_t out[N];
    for (int i = 0; i < N; i++) src[i] = optim__bits_f32(rnd());
    src[3] = NAN, src[4] = INFINITY, src[5] = -INFINITY, src[6] = 0.0f, src[7] = -0.0f;
    const uint32_t firsts[] = {
        0, 5, 0xfffffdffu}; /* the last: no wrap within N (the caller splits there) */
    for (int n = 0; n <= N; n += n < 40 ? 1 : 37)
        for (int f = 0; f < 3; f++) {
            const uint64_t key = 0x9e3779b97f4a7c15u * (uint64_t)(n + 1) + (uint64_t)f;
            optim__bf16_store_sr(src, out, n, key, firsts[f]);
            for (int i = 0; i < n; i++) {
                const uint32_t x = optim__f32_bits(src[i]);
                assert_eq(
                    out[i],
                    optim__f32_to_bf16_sr(src[i], optim__sr_bits(key, firsts[f] + (uint32_t)i)));
                if (isnan(src[i])) assert_eq(out[i], optim__f32_to_bf16(src[i]));
                else if (out[i] != (uint16_t)(x >> 16) && out[i] != (uint16_t)((x >> 16) + 1))
                    fail_msg("out[%d] = %#x, expected %#x or %#x", i, out[i], (uint16_t)(x >> 16),
                             (uint16_t)((x >> 16) + 1));
            }
        }
}

/* n copies of the float with bits x, rounded with key; how many went up
 * (to the pattern above x's truncation). */
static int64_t count_up(uint32_t x, int64_t n, uint64_t key)
{
    float *src = malloc((size_t)n * sizeof *src);
    uint16_t *out = malloc((size_t)n * sizeof *out);
    assert_non_null(src);
    assert_non_null(out);
    for (int64_t i = 0; i < n; i++) src[i] = optim__bits_f32(x);
    optim__bf16_store_sr(src, out, n, key, 0);
    int64_t up = 0;
    for (int64_t i = 0; i < n; i++) {
        if (out[i] != (uint16_t)(x >> 16) && out[i] != (uint16_t)((x >> 16) + 1))
            fail_msg("out[%lld] = %#x, expected %#x or %#x", (long long)i, out[i],
                     (uint16_t)(x >> 16), (uint16_t)((x >> 16) + 1));
        up += out[i] != (uint16_t)(x >> 16);
    }
    free(src);
    free(out);
    return up;
}

/* Rounds up with probability (low 16 bits) / 65536: the count of n trials
 * within 6 standard deviations of the binomial mean, and the mean of the
 * rounded values within the same bound of x (unbiased). */
OPTIM_TEST(probability_is_the_distance_fraction)
{
    const int64_t n = 1 << 16;
    const uint32_t highs[] = {0x3f80u, 0xbf80u, 0x0001u /* subnormal */, 0x7f7fu /* -> inf above */,
                              0x4b12u};
    const uint32_t lows[] = {1, 0x1000, 0x4000, 0x8000, 0xa5a5, 0xffff};
    for (size_t a = 0; a < sizeof highs / sizeof *highs; a++)
        for (size_t b = 0; b < sizeof lows / sizeof *lows; b++) {
            const uint32_t x = highs[a] << 16 | lows[b];
            const double p = lows[b] / 65536.0, sd = sqrt(n * p * (1 - p));
            const int64_t up = count_up(x, n, 0x1234567800000000u + a * 16 + b);
            assert_le(fabs((double)up - n * p), 6 * sd + 1);
            if (highs[a] == 0x7f7fu) continue; /* the neighbour above is inf */
            const double lo = bf((uint16_t)highs[a]), hi = bf((uint16_t)(highs[a] + 1));
            const double mean = lo + (hi - lo) * (double)up / (double)n, xv = optim__bits_f32(x);
            assert_le(fabs(mean - xv), fabs(hi - lo) * (6 * sd + 1) / n);
        }
}

/* Exact values never move; inf, NaN, zeros as round to nearest; past the
 * largest finite bfloat16, inf with the distance fraction (above). */
OPTIM_TEST(special_values)
{
    const float v[] = {0.0f,
                       -0.0f,
                       1.0f,
                       -2.5f,
                       INFINITY,
                       -INFINITY,
                       NAN,
                       -NAN,
                       optim__bits_f32(0x7fa00001u),
                       optim__bits_f32(0x7f7f0000u),
                       optim__bits_f32(0x00010000u)};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        for (uint32_t r = 0; r < 0x10000u; r += 0x1111u) {
            const uint16_t want = optim__f32_to_bf16(v[i]), got = optim__f32_to_bf16_sr(v[i], r);
            assert_eq(got, want);
        }
    /* 0x7f7fffff, the largest float: inf unless r == 0. */
    assert_eq(optim__f32_to_bf16_sr(optim__bits_f32(0x7f7fffffu), 1), 0x7f80);
    assert_eq(optim__f32_to_bf16_sr(optim__bits_f32(0x7f7fffffu), 0), 0x7f7f);
    assert_eq(optim__f32_to_bf16_sr(optim__bits_f32(0xff7fffffu), 1), 0xff80);
}

/* ---- 2. in a step ------------------------------------------------------------------------------ */

/* A BF16 variable of n elements (rows x n / rows when rows > 1) holding value. */
static optim_var *bf16_var2(const char *name, int64_t rows, int64_t n, float value)
{
    uint16_t *h = malloc((size_t)n * sizeof *h);
    assert_non_null(h);
    for (int64_t i = 0; i < n; i++) h[i] = optim__f32_to_bf16(value);
    optim_var *v;
    optim_error err;
    int rc = optim_var_create(&v, name, OPTIM_BF16, rows > 1 ? 2 : 1,
                              rows > 1 ? (int64_t[]){rows, n / rows} : (int64_t[]){n}, h, &err);
    free(h);
    assert_ok(rc, &err);
    return v;
}

static optim_var *bf16_var(const char *name, int64_t n, float value)
{
    return bf16_var2(name, 1, n, value);
}

/* T steps of opt on v with every gradient element g (v's dtype). */
static void steps(optim_optimizer *opt, optim_var **v, size_t nv, double g, int T)
{
    optim_grad_var p[4];
    void *bufs[4];
    for (size_t k = 0; k < nv; k++) {
        const int64_t n = optim_var_numel(v[k]);
        const optim_dtype dt = optim_var_dtype(v[k]);
        bufs[k] = malloc((size_t)n * 8);
        assert_non_null(bufs[k]);
        for (int64_t i = 0; i < n; i++) {
            const double gi = g * (1 + (double)(i % 7) / 8);
            assert_ok(
                optim_convert((char *)bufs[k] + i * optim_dtype_size(dt), dt, &gi, OPTIM_F64, 1),
                NULL);
        }
        p[k] = (optim_grad_var){optim_grad_dense(optim_tensor_make(
                                    dt, bufs[k], optim_var_rank(v[k]), optim_var_shape(v[k]))),
                                v[k]};
    }
    for (int t = 0; t < T; t++) assert_ok(optim_apply_gradients(opt, p, nv, 0), opt);
    for (size_t k = 0; k < nv; k++) free(bufs[k]);
}

/* SGD, w = 1, g = 1, lr = 2^-10: w - lr lies a quarter of the way from
 * 1 - 2^-8 to 1, below half an ulp; round to nearest keeps w = 1 forever.
 * Stochastic rounding is unbiased: E[w_T] = 1 - T lr exactly (w stays in
 * [0.5, 1], where the spacing is 2^-8), each step adding rounding noise of
 * variance <= ulp^2 / 4, so the mean of n elements lies within 6 sd of it. */
OPTIM_TEST(sgd_tiny_learning_rate)
{
    const int64_t n = 4096;
    const int T = 64;
    const double lr = 1.0 / 1024, ulp = 1.0 / 256;
    for (int sr = 0; sr < 2; sr++) {
        char json[200];
        snprintf(json, sizeof json,
                 "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": %.17g%s}}", lr,
                 sr ? ", \"" KEY "\": 7" : "");
        optim_optimizer *opt = optim_test_make(json);
        optim_var *w = bf16_var("w", n, 1.0f);
        const uint16_t *h = optim_var_data(w);
        /* a constant gradient of 1 */
        uint16_t *g = malloc((size_t)n * sizeof *g);
        assert_non_null(g);
        for (int64_t i = 0; i < n; i++) g[i] = 0x3f80;
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_BF16, g, 1, (int64_t[]){n})),
                            w};
        for (int t = 0; t < T; t++) assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
        double mean = 0;
        for (int64_t i = 0; i < n; i++) mean += bf(h[i]);
        mean /= (double)n;
        if (!sr)
            for (int64_t i = 0; i < n; i++) assert_eq(h[i], 0x3f80); /* stalled */
        else assert_le(fabs(mean - (1 - T * lr)), 6 * sqrt(T * ulp * ulp / 4 / (double)n));
        free(g);
        optim_test_free(opt, w);
    }
}

/* Slots too: Adagrad's accumulator, bf16(0.1) + g^2 with g = 2^-6, lies
 * exactly half way between two bfloat16 values (spacing 2^-11 there):
 * round to nearest takes the even one everywhere, stochastic rounding
 * each with probability 1/2. */
OPTIM_TEST(slots_rounded_too)
{
    const int64_t n = 1 << 14;
    const double g = 1.0 / 64;
    for (int sr = 0; sr < 2; sr++) {
        optim_optimizer *opt =
            optim_test_make(sr ? "{\"class_name\": \"Adagrad\", \"config\": {\"" KEY "\": 3}}"
                               : "{\"class_name\": \"Adagrad\", \"config\": {}}");
        optim_var *w = bf16_var("w", n, 1.0f);
        uint16_t *gb = malloc((size_t)n * sizeof *gb);
        assert_non_null(gb);
        for (int64_t i = 0; i < n; i++) gb[i] = optim__f32_to_bf16((float)g);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_BF16, gb, 1, (int64_t[]){n})),
                            w};
        assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
        const uint16_t *acc = optim_var_data(optim_get_slot(opt, w, "accumulator"));
        const uint16_t a0 = optim__f32_to_bf16(0.1f);
        const float exact = optim__bf16_to_f32(a0) + (float)(g * g);
        assert_eq(optim__f32_bits(exact) & 0xffffu, 0x8000u); /* the midpoint */
        int64_t up = 0;
        for (int64_t i = 0; i < n; i++) {
            if (acc[i] != a0 && acc[i] != a0 + 1)
                fail_msg("accumulator[%lld] = %#x, expected %#x or %#x", (long long)i, acc[i], a0,
                         a0 + 1);
            up += acc[i] == a0 + 1;
        }
        if (!sr) assert_eq(up, (a0 & 1) ? n : 0); /* ties to even */
        else assert_le(fabs((double)up - n / 2.0), 6 * sqrt(n / 4.0) + 1);
        free(gb);
        optim_test_free(opt, w);
    }
}

/* A class on three BF16 variables, one of them over many chunks, for 3
 * steps; the variables and every slot after it, in out (bytes). Adam (an
 * element-wise class: three arrays rounded per element), Lamb and
 * Adafactor (whole-variable updates; Adafactor's factored slots of their
 * own sizes on the 100 x 200 variable). */
static size_t class_run(const char *json, int threads, unsigned char *out, size_t cap)
{
    optim_optimizer *opt = optim_test_make(json);
    assert_ok(optim_set_num_threads(opt, threads), opt);
    optim_var *v[3] = {bf16_var2("a", 100, 20000, 0.3f), bf16_var("b", 777, -1.7f),
                       bf16_var("c", 1, 2.0f)};
    steps(opt, v, 3, 1e-3, 3);
    size_t at = 0;
    for (int k = 0; k < 3; k++) {
        const size_t m = (size_t)optim_var_numel(v[k]) * 2;
        assert_le(at + m, cap);
        memcpy(out + at, optim_var_data(v[k]), m);
        at += m;
    }
    optim_tensor w[16];
    const size_t nw = optim_get_weights(opt, w, 16);
    for (size_t k = 1; k < nw; k++) { /* 0: iterations */
        int64_t m = 1;
        for (int d = 0; d < w[k].rank; d++) m *= w[k].shape[d];
        const size_t bytes = (size_t)m * optim_dtype_size(w[k].dtype);
        assert_le(at + bytes, cap);
        memcpy(out + at, w[k].data, bytes);
        at += bytes;
    }
    optim_test_free(opt, v[0], v[1], v[2]);
    return at;
}

OPTIM_TEST(same_bits_for_any_thread_count_and_seed_dependence)
{
    enum { CAP = 8 * 3 * (20000 + 777 + 1) };
    static unsigned char one[CAP], other[CAP];
    const char *classes[] = {"Adam", "Lamb", "Adafactor"};
    for (int c = 0; c < 3; c++) {
        char seeded[160], seed12[160], plain[160];
        snprintf(seeded, sizeof seeded,
                 "{\"class_name\": \"%s\", \"config\": {\"learning_rate\": 0.01, \"" KEY "\": 11}}",
                 classes[c]);
        snprintf(seed12, sizeof seed12,
                 "{\"class_name\": \"%s\", \"config\": {\"learning_rate\": 0.01, \"" KEY "\": 12}}",
                 classes[c]);
        snprintf(plain, sizeof plain,
                 "{\"class_name\": \"%s\", \"config\": {\"learning_rate\": 0.01}}", classes[c]);
        const size_t n = class_run(seeded, 1, one, CAP);
        for (int t = 2; t <= 3; t++) {
            assert_int_equal(class_run(seeded, t, other, CAP), n);
            assert_int_equal(memcmp(one, other, n), 0);
        }
        assert_int_equal(class_run(seed12, 2, other, CAP), n);
        assert_int_not_equal(memcmp(one, other, n), 0);
        assert_int_equal(class_run(plain, 2, other, CAP), n);
        assert_int_not_equal(memcmp(one, other, n), 0);
    }
}

/* The decisions differ between elements and between steps: x = 1 + 2^-8
 * (half way to 1 + 2^-7) rounded at steps 0 and 1 of one variable and in two
 * variables; neither pattern of ups repeats. */
OPTIM_TEST(bits_differ_between_steps_elements_and_variables)
{
    const int64_t n = 4096;
    /* SGD with lr 1 and g = -2^-8 from w = 1: w + 2^-8, a midpoint. */
    optim_optimizer *opt = optim_test_make(
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1.0, \"" KEY "\": 5}}");
    optim_var *v[2] = {bf16_var("a", n, 1.0f), bf16_var("b", n, 1.0f)};
    uint16_t *g = malloc((size_t)n * sizeof *g), *first = malloc((size_t)n * sizeof *first);
    assert_non_null(g);
    assert_non_null(first);
    for (int64_t i = 0; i < n; i++) g[i] = optim__f32_to_bf16(-1.0f / 256);
    optim_grad_var p[2];
    for (int k = 0; k < 2; k++)
        p[k] = (optim_grad_var){
            optim_grad_dense(optim_tensor_make(OPTIM_BF16, g, 1, (int64_t[]){n})), v[k]};
    assert_ok(optim_apply_gradients(opt, p, 2, 0), opt);
    const uint16_t *a = optim_var_data(v[0]), *b = optim_var_data(v[1]);
    memcpy(first, a, (size_t)n * sizeof *first);
    assert_int_not_equal(memcmp(a, b, (size_t)n * sizeof *a), 0);
    /* elements 512 apart (one block of a half step apart) */
    assert_int_not_equal(memcmp(a, a + 512, 512 * sizeof *a), 0);
    int64_t up = 0;
    for (int64_t i = 0; i < n; i++) up += a[i] != 0x3f80;
    assert_le(fabs((double)up - n / 2.0), 6 * sqrt(n / 4.0) + 1); /* not all the same */
    /* Step 1 from w = 1 again. */
    for (int64_t i = 0; i < n; i++) ((uint16_t *)optim_var_data((optim_var *)v[0]))[i] = 0x3f80;
    assert_ok(optim_apply_gradients(opt, p, 1, 0), opt);
    assert_int_not_equal(memcmp(first, a, (size_t)n * sizeof *a), 0);
    free(g);
    free(first);
    optim_test_free(opt, v[0], v[1]);
}

/* The variable's name is in the key: two optimizers with the same seed
 * round their first variables alike only when the names are the same. */
OPTIM_TEST(name_in_key)
{
    const int64_t n = 1024;
    const char *names[3] = {"dense/kernel", "dense_1/kernel", "dense/kernel"};
    optim_var *v[3];
    uint16_t *g = malloc((size_t)n * sizeof *g);
    assert_non_null(g);
    for (int64_t i = 0; i < n; i++)
        g[i] = optim__f32_to_bf16(-1.0f / 256); /* w + 2^-8: a midpoint */
    for (int k = 0; k < 3; k++) {
        optim_optimizer *opt = optim_test_make(
            "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1.0, \"" KEY "\": 5}}");
        v[k] = bf16_var(names[k], n, 1.0f);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_BF16, g, 1, (int64_t[]){n})),
                            v[k]};
        assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
        optim_destroy(opt);
    }
    assert_int_not_equal(memcmp(optim_var_data(v[0]), optim_var_data(v[1]), (size_t)n * 2), 0);
    assert_int_equal(memcmp(optim_var_data(v[0]), optim_var_data(v[2]), (size_t)n * 2), 0);
    free(g);
    optim_test_free(NULL, v[0], v[1], v[2]);
}

/* Off (absent, null, or set back to NAN from C) is round to nearest: the
 * bits of an optimizer that never had the key. */
OPTIM_TEST(off_is_round_to_nearest)
{
    enum { CAP = 8 * 3 * (20000 + 777 + 1) };
    static unsigned char plain[CAP], other[CAP];
    const size_t n = class_run("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01}}",
                               2, plain, CAP);
    assert_int_equal(
        class_run("{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01, \"" KEY
                  "\": null}}",
                  3, other, CAP),
        n);
    assert_int_equal(memcmp(plain, other, n), 0);
    /* set, then unset from C before the steps */
    optim_optimizer *opt = optim_test_make(
        "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01, \"" KEY "\": 8}}");
    assert_ok(optim_set_hyper(opt, KEY, NAN), opt);
    char *cfg = optim_serialize(opt);
    assert_int_equal(class_run(cfg, 1, other, CAP), n);
    assert_int_equal(memcmp(plain, other, n), 0);
    optim_free(cfg);
    optim_destroy(opt);
}

/* F16, F32 and F64 variables are rounded (or not) exactly as without the key. */
OPTIM_TEST(other_dtypes_untouched)
{
    const optim_dtype dts[] = {OPTIM_F16, OPTIM_F32, OPTIM_F64};
    for (size_t d = 0; d < 3; d++) {
        optim_var *v[2];
        for (int sr = 0; sr < 2; sr++) {
            optim_optimizer *opt =
                optim_test_make(sr ? "{\"class_name\": \"Adam\", \"config\": {\"" KEY "\": 9}}"
                                   : "{\"class_name\": \"Adam\", \"config\": {}}");
            double init[1000];
            for (int i = 0; i < 1000; i++) init[i] = 0.5 + i * 1e-3;
            void *buf = malloc(1000 * 8);
            assert_non_null(buf);
            assert_ok(optim_convert(buf, dts[d], init, OPTIM_F64, 1000), NULL);
            optim_error err;
            assert_ok(optim_var_create(&v[sr], "w", dts[d], 1, (int64_t[]){1000}, buf, &err), &err);
            free(buf);
            steps(opt, &v[sr], 1, 1e-3, 3);
            optim_destroy(opt);
        }
        assert_int_equal(
            memcmp(optim_var_data(v[0]), optim_var_data(v[1]), 1000 * optim_dtype_size(dts[d])), 0);
        optim_var_destroy(v[0]);
        optim_var_destroy(v[1]);
    }
}

/* ---- 3. the config key ------------------------------------------------------------------------- */

static void refused(const char *value, int code, const char *msg)
{
    char json[200];
    snprintf(json, sizeof json, "{\"class_name\": \"SGD\", \"config\": {\"" KEY "\": %s}}", value);
    optim_optimizer *opt = (optim_optimizer *)1;
    optim_error err;
    assert_status(optim_from_json(&opt, json, &err), code, &err);
    assert_null(opt);
    assert_contains(err.msg, KEY);
    assert_contains(err.msg, msg);
}

OPTIM_TEST(config_read_strictly)
{
    refused("\"7\"", OPTIM_ETYPE, "is a string, expected an integer or null");
    refused("true", OPTIM_ETYPE, "expected an integer or null");
    refused("{\"seed\": 1}", OPTIM_ETYPE, "expected an integer or null");
    refused("-1", OPTIM_ERANGE, "is -1, expected a value in [0, 9007199254740991]");
    refused("1e16", OPTIM_ERANGE, "is 1e+16, expected a value in [0, 9007199254740991]");
    refused("2.5", OPTIM_ETYPE, "is 2.5, expected an integer");
    /* null is off, as absent */
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"" KEY "\": null}}");
    double s = 0;
    assert_ok(optim_get_hyper(opt, KEY, &s), opt);
    assert_nan(s);
    char *cfg = optim_serialize(opt);
    assert_null(strstr(cfg, KEY));
    optim_free(cfg);
    optim_destroy(opt);
}

OPTIM_TEST(config_written_only_when_set)
{
    const char *keras3 =
        "{\"module\": \"keras.optimizers\", \"class_name\": \"SGD\", \"config\": {\"name\": \"SGD\", "
        "\"learning_rate\": 0.01, \"weight_decay\": null, \"clipnorm\": null, \"global_clipnorm\": null, "
        "\"clipvalue\": null, \"use_ema\": false, \"ema_momentum\": 0.99, \"ema_overwrite_frequency\": "
        "null, \"loss_scale_factor\": null, \"gradient_accumulation_steps\": null, \"momentum\": 0.0, "
        "\"nesterov\": false}, \"registered_name\": null}";
    optim_optimizer *opt = optim_test_make(keras3);
    char *a = optim_serialize(opt);
    assert_null(strstr(a, KEY));
    /* set from C: written last in the config, read back as set */
    assert_ok(optim_set_hyper(opt, KEY, 9007199254740991.0), opt);
    char *b = optim_serialize(opt);
    assert_contains(b, "\"nesterov\":false,\"" KEY "\":9007199254740991}");
    optim_optimizer *back = optim_test_make(b);
    double s = 0;
    assert_ok(optim_get_hyper(back, KEY, &s), back);
    assert_eq(s, 9007199254740991.0);
    char *c = optim_serialize(back);
    assert_string_equal(b, c);
    /* off again from C (NAN, Keras's None): the Keras config comes back */
    assert_ok(optim_set_hyper(back, KEY, NAN), back);
    char *d = optim_serialize(back);
    assert_string_equal(a, d);
    optim_free(a), optim_free(b), optim_free(c), optim_free(d);
    optim_destroy(back);
    optim_destroy(opt);
    /* legacy: read and written back in the legacy form */
    opt = optim_test_make(
        "{\"class_name\": \"SGD\", \"config\": {\"name\": \"SGD\", \"learning_rate\": 0.01, "
        "\"decay\": 0.0, \"momentum\": 0.0, \"nesterov\": false, \"" KEY "\": 4}}");
    assert_eq(optim_generation_of(opt), OPTIM_LEGACY);
    a = optim_serialize(opt);
    assert_string_equal(
        a,
        "{\"class_name\":\"SGD\",\"config\":{\"name\":\"SGD\",\"learning_rate\":0.01,\"decay\":0.0,"
        "\"momentum\":0.0,\"nesterov\":false,\"" KEY "\":4}}");
    optim_free(a);
    optim_destroy(opt);
    /* tf-keras's new-style form: kept, the key last */
    const char *tfk =
        "{\"class_name\":\"SGD\",\"config\":{\"name\":\"SGD\",\"weight_decay\":null,\"clipnorm\":null,"
        "\"global_clipnorm\":null,\"clipvalue\":null,\"use_ema\":false,\"ema_momentum\":0.99,"
        "\"ema_overwrite_frequency\":null,\"jit_compile\":true,\"is_legacy_optimizer\":false,"
        "\"learning_rate\":0.01,\"momentum\":0.0,\"nesterov\":false,\"" KEY "\":0}}";
    opt = optim_test_make(tfk);
    a = optim_serialize(opt);
    assert_string_equal(a, tfk);
    optim_free(a);
    optim_destroy(opt);
}

OPTIM_TEST(config_set_from_c_checked)
{
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"Adam\", \"config\": {\"" KEY "\": 5}}");
    double s = 0;
    assert_status(optim_set_hyper(opt, KEY, -3), OPTIM_ERANGE, opt);
    assert_contains(optim_errmsg(opt), KEY " is -3, expected a value in [0, 9007199254740991]");
    assert_status(optim_set_hyper(opt, KEY, 0.5), OPTIM_ETYPE, opt);
    assert_contains(optim_errmsg(opt), KEY " is 0.5, expected an integer");
    assert_status(optim_set_hyper(opt, KEY, INFINITY), OPTIM_ERANGE, opt);
    assert_ne(optim_set_hyper_schedule(opt, KEY, NULL, NULL), 0);
    assert_ok(optim_get_hyper(opt, KEY, &s), opt);
    assert_eq(s, 5); /* unchanged */
    assert_ok(optim_set_hyper(opt, KEY, 0), opt);
    assert_ok(optim_get_hyper(opt, KEY, &s), opt);
    assert_eq(s, 0);
    optim_destroy(opt);
    /* A wrapper has no half variables: it refuses the key (a base option). */
    optim_optimizer *w = NULL;
    optim_error err;
    assert_ne(optim_from_json(&w,
                              "{\"class_name\": \"Addons>Lookahead\", \"config\": {\"optimizer\": "
                              "\"sgd\", \"" KEY "\": 1}}",
                              &err),
              0);
    assert_contains(err.msg, KEY);
}

/* Resume: 2 steps, optim_serialize -> optim_from_json, the weights set,
 * 2 more steps: bit for bit the 4 steps of one optimizer. */
OPTIM_TEST(resume_through_json)
{
    const char *json =
        "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.01, \"" KEY "\": 21}}";
    optim_optimizer *a = optim_test_make(json), *b = optim_test_make(json);
    optim_var *va = bf16_var("w", 5000, 0.7f), *vb = bf16_var("w", 5000, 0.7f);
    steps(a, &va, 1, 1e-3, 4);
    steps(b, &vb, 1, 1e-3, 2);
    char *cfg = optim_serialize(b);
    optim_optimizer *c = optim_test_make(cfg);
    optim_free(cfg);
    assert_ok(optim_build(c, &vb, 1), c);
    optim_tensor wts[8];
    const size_t nw = optim_get_weights(b, wts, 8);
    assert_ok(optim_set_weights(c, wts, nw), c);
    optim_destroy(b);
    steps(c, &vb, 1, 1e-3, 2);
    assert_vars_bitwise(va, vb);
    assert_vars_bitwise(optim_get_slot(a, va, "v"), optim_get_slot(c, vb, "v"));
    optim_test_free(a, va);
    optim_test_free(c, vb);
}

int main(void) { return optim_test_run(); }
