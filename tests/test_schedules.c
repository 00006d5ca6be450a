/* The built-in learning-rate schedules (src/schedules/): each against its
 * closed form, written here independently from Keras's (and TF Addons')
 * published formulas,
 * at every step of a range that crosses every edge (staircase steps,
 * piecewise boundaries, polynomial cycles, warmup end, restart periods);
 * exact configs and round trips; every refused config; a schedule nested in
 * an optimizer's JSON; SGD driven by each schedule (Keras 3, and legacy
 * with `decay`); `optim replay` with each; `optim schedule-plot`. */
#define _POSIX_C_SOURCE 200809L
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "optim/optim.h"

static const double PI = 3.14159265358979323846;

/* ---- closed forms (double precision) ---------------------------------------- */

/* p: initial_learning_rate, decay_steps, decay_rate, staircase.
 * rate^e written as exp(e * ln(rate)). */
static double ref_exponential(const double *p, int64_t k)
{
    double e = p[3] != 0 ? floor((double)k / p[1]) : (double)k / p[1];
    return p[0] * exp(e * log(p[2]));
}

/* p: n, boundaries[n], values[n + 1]. Keras's sum of indicator * value,
 * boundaries cast to the step's integer type (truncated). */
static double ref_piecewise(const double *p, int64_t k)
{
    int n = (int)p[0];
    const double *b = p + 1, *v = p + 1 + n;
    double r = 0.0;
    r += (k <= (int64_t)b[0]) * v[0];
    r += (k > (int64_t)b[n - 1]) * v[n];
    for (int j = 0; j + 1 < n; j++) r += (k > (int64_t)b[j] && k <= (int64_t)b[j + 1]) * v[j + 1];
    return r;
}

/* p: initial_learning_rate, decay_steps (integral), end_learning_rate, power, cycle. */
static double ref_polynomial(const double *p, int64_t k)
{
    const int64_t ds = (int64_t)p[1];
    double t = (double)k, d = p[1];
    if (p[4] != 0) {
        int64_t mult = k == 0 ? 1 : (k + ds - 1) / ds; /* integer ceil */
        d = (double)(ds * mult);
    } else if (k > ds) {
        t = (double)ds;
    }
    return (p[0] - p[2]) * pow((d - t) / d, p[3]) + p[2];
}

/* p: initial_learning_rate, decay_steps (integral), decay_rate, staircase. */
static double ref_inverse_time(const double *p, int64_t k)
{
    double q = p[3] != 0 ? (double)(k / (int64_t)p[1]) : (double)k / p[1];
    return p[0] / (1.0 + p[2] * q);
}

/* p: initial_learning_rate, decay_steps, alpha, warmup_target (NAN: none), warmup_steps. */
static double ref_cosine(const double *p, int64_t k)
{
    const double lr0 = p[0], ds = p[1], alpha = p[2], target = p[3], ws = p[4];
    if (isnan(target)) {
        double t = fmin((double)k, ds);
        return lr0 * (alpha + (1.0 - alpha) * (1.0 + cos(PI * t / ds)) / 2.0);
    }
    double t = fmin((double)k, ds + ws);
    if (t < ws) return lr0 + (target - lr0) * t / ws;
    return target * (alpha + (1.0 - alpha) * (1.0 + cos(PI * (t - ws) / ds)) / 2.0);
}

/* p: initial_learning_rate, first_decay_steps, t_mul, m_mul, alpha. Walks the
 * periods one by one (t_mul >= 1 here). */
static double ref_restarts(const double *p, int64_t k)
{
    double start = 0.0, len = p[1], m = 1.0;
    while ((double)k >= start + len) {
        start += len;
        len *= p[2];
        m *= p[3];
    }
    double f = ((double)k - start) / len;
    return p[0] * (p[4] + (1.0 - p[4]) * 0.5 * m * (1.0 + cos(PI * f)));
}

/* p: initial_learning_rate, maximal_learning_rate, step_size, scale (0: 1,
 * 1: halved every cycle, 2: gamma^step), gamma. TF Addons' cyclical rates
 * as a triangle wave over periods of 2 * step_size steps. */
static double ref_cyclical(const double *p, int64_t k)
{
    const double period = 2 * p[2], done = floor((double)k / period);
    const double up = 1.0 - fabs(fmod((double)k, period) - p[2]) / p[2];
    const double scale = p[3] == 1 ? pow(0.5, done) : p[3] == 2 ? pow(p[4], (double)k) : 1.0;
    return p[0] + (p[1] - p[0]) * up * scale;
}

typedef struct sched_case {
    const char *json;
    double (*ref)(const double *p, int64_t k);
    double p[12];
    int64_t steps; /* checked at 0..steps */
} sched_case;

#define J(cls, cfg) "{\"class_name\": \"" cls "\", \"config\": {" cfg "}}"

static const sched_case CASES[] = {
    {J("ExponentialDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 10, \"decay_rate\": 0.5"),
     ref_exponential,
     {0.1, 10, 0.5, 0},
     100},
    {J("ExponentialDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 10, \"decay_rate\": 0.5, \"staircase\": true"),
     ref_exponential,
     {0.1, 10, 0.5, 1},
     100},
    {J("ExponentialDecay",
       "\"initial_learning_rate\": 0.3, \"decay_steps\": 2.5, \"decay_rate\": 0.9, \"staircase\": true"),
     ref_exponential,
     {0.3, 2.5, 0.9, 1},
     30},
    {J("PiecewiseConstantDecay", "\"boundaries\": [5, 10, 20], \"values\": [1.0, 0.5, 0.25, 0.1]"),
     ref_piecewise,
     {3, 5, 10, 20, 1.0, 0.5, 0.25, 0.1},
     30},
    {J("PiecewiseConstantDecay", "\"boundaries\": [2.5, 7.9], \"values\": [0.3, 0.2, 0.1]"),
     ref_piecewise,
     {2, 2.5, 7.9, 0.3, 0.2, 0.1},
     12},
    {J("PiecewiseConstantDecay", "\"values\": [0.5, 0.05], \"boundaries\": [0], \"name\": \"pw\""),
     ref_piecewise,
     {1, 0, 0.5, 0.05},
     5},
    {J("PolynomialDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 10, \"end_learning_rate\": 0.01, \"power\": 2.0"),
     ref_polynomial,
     {0.1, 10, 0.01, 2.0, 0},
     40},
    {J("PolynomialDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 10, \"end_learning_rate\": 0.01, "
       "\"power\": 2.0, \"cycle\": true"),
     ref_polynomial,
     {0.1, 10, 0.01, 2.0, 1},
     45},
    {J("PolynomialDecay", "\"initial_learning_rate\": 0.1, \"decay_steps\": 20"),
     ref_polynomial,
     {0.1, 20, 0.0001, 1.0, 0},
     30},
    {J("PolynomialDecay",
       "\"initial_learning_rate\": 0.05, \"decay_steps\": 7, \"power\": 0.5, \"cycle\": true"),
     ref_polynomial,
     {0.05, 7, 0.0001, 0.5, 1},
     50},
    {J("InverseTimeDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 5, \"decay_rate\": 0.5"),
     ref_inverse_time,
     {0.1, 5, 0.5, 0},
     50},
    {J("InverseTimeDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 5, \"decay_rate\": 0.5, \"staircase\": true"),
     ref_inverse_time,
     {0.1, 5, 0.5, 1},
     50},
    {J("CosineDecay", "\"initial_learning_rate\": 0.1, \"decay_steps\": 20, \"alpha\": 0.1"),
     ref_cosine,
     {0.1, 20, 0.1, NAN, 0},
     40},
    {J("CosineDecay",
       "\"initial_learning_rate\": 0.0, \"decay_steps\": 20, \"alpha\": 0.05, "
       "\"warmup_target\": 0.1, \"warmup_steps\": 10"),
     ref_cosine,
     {0.0, 20, 0.05, 0.1, 10},
     50},
    {J("CosineDecay",
       "\"initial_learning_rate\": 0.05, \"decay_steps\": 15, \"warmup_target\": 0.2"),
     ref_cosine,
     {0.05, 15, 0.0, 0.2, 0},
     30},
    {J("CosineDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 20, \"warmup_steps\": 10, "
       "\"warmup_target\": null"),
     ref_cosine,
     {0.1, 20, 0.0, NAN, 10},
     30},
    {J("CosineDecayRestarts",
       "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 10, \"t_mul\": 2.0, "
       "\"m_mul\": 0.5, \"alpha\": 0.1"),
     ref_restarts,
     {0.1, 10, 2.0, 0.5, 0.1},
     200},
    {J("CosineDecayRestarts",
       "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 10, \"t_mul\": 1.0, \"m_mul\": 0.8"),
     ref_restarts,
     {0.1, 10, 1.0, 0.8, 0.0},
     60},
    {J("CosineDecayRestarts",
       "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 4, \"t_mul\": 1.5, \"m_mul\": 0.9"),
     ref_restarts,
     {0.1, 4, 1.5, 0.9, 0.0},
     100},
    {J("CosineDecayRestarts",
       "\"initial_learning_rate\": 0.2, \"first_decay_steps\": 5, \"t_mul\": 3.0, "
       "\"alpha\": 0.2"),
     ref_restarts,
     {0.2, 5, 3.0, 1.0, 0.2},
     250},
    {J("CosineDecayRestarts", "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 8"),
     ref_restarts,
     {0.1, 8, 2.0, 1.0, 0.0},
     130},
    /* Restarts where log() rounds the period index one low (at steps 121
     * and 211): the new period must start there. */
    {J("CosineDecayRestarts",
       "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 1, \"t_mul\": 3.0, "
       "\"m_mul\": 0.9"),
     ref_restarts,
     {0.1, 1, 3.0, 0.9, 0.0},
     400},
    {J("CosineDecayRestarts",
       "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 16, \"t_mul\": 1.5"),
     ref_restarts,
     {0.1, 16, 1.5, 1.0, 0.0},
     260},
    {J("Addons>TriangularCyclicalLearningRate",
       "\"initial_learning_rate\": 0.01, \"maximal_learning_rate\": 0.1, \"step_size\": 5"),
     ref_cyclical,
     {0.01, 0.1, 5, 0, 0},
     60},
    {J("Addons>Triangular2CyclicalLearningRate",
       "\"initial_learning_rate\": 0.01, \"maximal_learning_rate\": 0.1, \"step_size\": 4, "
       "\"scale_mode\": \"cycle\""),
     ref_cyclical,
     {0.01, 0.1, 4, 1, 0},
     50},
    {J("Addons>ExponentialCyclicalLearningRate",
       "\"initial_learning_rate\": 0.01, \"maximal_learning_rate\": 0.1, \"step_size\": 3, "
       "\"gamma\": 0.9"),
     ref_cyclical,
     {0.01, 0.1, 3, 2, 0.9},
     40},
};
#define N_CASES (sizeof CASES / sizeof *CASES)

static optim_schedule *parse(const char *json) { return optim_test_schedule(json); }

static void check_case(const sched_case *c)
{
    optim_schedule *s = parse(c->json);
    for (int64_t k = 0; k <= c->steps; k++) {
        double got = optim_schedule_value(s, k), want = c->ref(c->p, k);
        if (!(fabs(got - want) <= 1e-15 + 1e-12 * fabs(want)))
            print_error("%s at step %lld\n", c->json, (long long)k);
        assert_close(got, want, 1e-12, 1e-15);
    }
    optim_schedule_destroy(s);
}

OPTIM_TEST(test_closed_forms)
{
    for (size_t i = 0; i < N_CASES; i++) check_case(&CASES[i]);
}

static double value_of(const char *json, int64_t k)
{
    optim_schedule *s = parse(json);
    double v = optim_schedule_value(s, k);
    optim_schedule_destroy(s);
    return v;
}

/* The edges by hand: which side of each edge a step falls on. */
OPTIM_TEST(test_edges)
{
    /* ExponentialDecay staircase: 0.1 through step 9, 0.05 from step 10. */
    assert_eq(value_of(CASES[1].json, 9), 0.1);
    assert_eq(value_of(CASES[1].json, 10), 0.05);
    assert_eq(value_of(CASES[1].json, 20), 0.025);
    /* Piecewise: a boundary belongs to the interval below it. */
    assert_eq(value_of(CASES[3].json, 5), 1.0);
    assert_eq(value_of(CASES[3].json, 6), 0.5);
    assert_eq(value_of(CASES[3].json, 20), 0.25);
    assert_eq(value_of(CASES[3].json, 21), 0.1);
    assert_eq(value_of(CASES[3].json, 1000000), 0.1);
    /* Fractional boundaries 2.5 and 7.9 cut at 2 and 7 (Keras 3's cast). */
    assert_eq(value_of(CASES[4].json, 2), 0.3);
    assert_eq(value_of(CASES[4].json, 3), 0.2);
    assert_eq(value_of(CASES[4].json, 7), 0.2);
    assert_eq(value_of(CASES[4].json, 8), 0.1);
    assert_eq(value_of(CASES[5].json, 0), 0.5);
    assert_eq(value_of(CASES[5].json, 1), 0.05);
    /* Polynomial, cycle: the end value at each multiple, then a longer decay. */
    assert_close(value_of(CASES[7].json, 10), 0.01, 1e-15, 1e-17);
    assert_close(value_of(CASES[7].json, 11), 0.09 * pow(9.0 / 20.0, 2) + 0.01, 1e-14, 0);
    assert_close(value_of(CASES[7].json, 0), 0.1, 1e-15, 0);
    /* Without cycle: flat at the end value after decay_steps. */
    assert_close(value_of(CASES[6].json, 10), 0.01, 1e-15, 1e-17);
    assert_close(value_of(CASES[6].json, 1000), 0.01, 1e-15, 1e-17);
    /* InverseTimeDecay staircase: 0.1 through step 4, 0.1 / 1.5 from step 5. */
    assert_eq(value_of(CASES[11].json, 4), 0.1);
    assert_close(value_of(CASES[11].json, 5), 0.1 / 1.5, 1e-15, 0);
    /* CosineDecay warmup: linear to the target at step 10, then the decay;
     * alpha * target from step 30 on. */
    assert_close(value_of(CASES[13].json, 5), 0.05, 1e-15, 0);
    assert_close(value_of(CASES[13].json, 10), 0.1, 1e-15, 0);
    assert_close(value_of(CASES[13].json, 20), 0.1 * (0.05 + 0.95 * 0.5), 1e-14, 0);
    assert_close(value_of(CASES[13].json, 30), 0.005, 1e-14, 1e-17);
    assert_close(value_of(CASES[13].json, 10000), 0.005, 1e-14, 1e-17);
    /* Without warmup: alpha * initial from decay_steps on. */
    assert_close(value_of(CASES[12].json, 20), 0.01, 1e-14, 1e-17);
    assert_close(value_of(CASES[12].json, 500), 0.01, 1e-14, 1e-17);
    /* Restarts (first 10, t_mul 2, m_mul 0.5, alpha 0.1): periods start at
     * 10, 30, 70, 150 from m_mul^i of the peak. */
    const char *r = CASES[16].json;
    const double starts[] = {0, 10, 30, 70, 150};
    for (int i = 0; i < 5; i++) {
        double peak = 0.1 * (0.1 + 0.9 * pow(0.5, i));
        assert_close(value_of(r, (int64_t)starts[i]), peak, 1e-14, 0);
        if (i) assert_lt(value_of(r, (int64_t)starts[i] - 1), peak);
    }
    /* Periods 1, 3, 9, 27, 81: the restart at step 121 (where
     * floor(log(243) / log(3)) comes out as 4) starts from 0.1 * 0.9^5. */
    assert_close(value_of(CASES[21].json, 121), 0.1 * pow(0.9, 5), 1e-14, 0);
    assert_lt(value_of(CASES[21].json, 120), 0.001);
    /* t_mul 1.5: periods 4, 6, 9, 13.5: restarts at steps 4, 10 and 19. */
    assert_close(value_of(CASES[18].json, 10), 0.1 * 0.81, 1e-14, 0);
    assert_close(value_of(CASES[18].json, 19), 0.1 * 0.729, 1e-14, 0);
}

/* CosineDecayRestarts with t_mul < 1: the periods sum to a finite horizon
 * (first / (1 - t_mul)); past it the value is NaN, as in Keras. */
OPTIM_TEST(test_restarts_horizon)
{
    optim_schedule *s =
        parse(J("CosineDecayRestarts",
                "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 10, \"t_mul\": 0.5"));
    /* Periods 10, 5, 2.5, 1.25, 0.625, ... starting at 0, 10, 15, 17.5, 18.75, 19.375. */
    const double starts[] = {0, 10, 15, 17.5, 18.75, 19.375, 19.6875};
    for (int64_t k = 0; k < 20; k++) {
        int i = 0;
        while (i + 1 < 7 && (double)k >= starts[i + 1]) i++;
        double len = 10.0 * pow(0.5, i), f = ((double)k - starts[i]) / len;
        assert_close(optim_schedule_value(s, k), 0.1 * 0.5 * (1.0 + cos(PI * f)), 1e-12, 1e-15);
    }
    assert_nan(optim_schedule_value(s, 20));
    assert_nan(optim_schedule_value(s, 100));
    optim_schedule_destroy(s);
}

/* ---- configs ------------------------------------------------------------------- */

static char *serialize_of(const char *json) { return optim_test_schedule_text(json); }

static void expect_text(const char *json, const char *want)
{
    char *got = serialize_of(json);
    if (strcmp(got, want) != 0) print_error("got  %s\nwant %s\n", got, want);
    assert_string_equal(got, want);
    optim_free(got);
}

/* Keras's keys in get_config order with the defaults filled in; numbers
 * that read back exactly, each in the form it was given in (Keras keeps the
 * Python int or float); defaults as Keras's (warmup_steps 0, power 1.0). */
OPTIM_TEST(test_config_text)
{
    expect_text(
        J("ExponentialDecay",
          "\"initial_learning_rate\": 0.1, \"decay_steps\": 1000, \"decay_rate\": "
          "0.96, \"staircase\": true, \"name\": \"exp\""),
        "{\"class_name\":\"ExponentialDecay\",\"config\":{\"initial_learning_rate\":0.1,\"decay_steps\":"
        "1000,\"decay_rate\":0.96,\"staircase\":true,\"name\":\"exp\"}}");
    expect_text(
        J("ExponentialDecay",
          "\"decay_rate\": 0.5, \"decay_steps\": 1000.0, \"initial_learning_rate\": 1"),
        "{\"class_name\":\"ExponentialDecay\",\"config\":{\"initial_learning_rate\":1,\"decay_steps\":"
        "1000.0,\"decay_rate\":0.5,\"staircase\":false,\"name\":null}}");
    expect_text(
        J("PiecewiseConstantDecay",
          "\"boundaries\": [100000, 110000], \"values\": [1.0, 0.5, 0.1]"),
        "{\"class_name\":\"PiecewiseConstantDecay\",\"config\":{\"boundaries\":[100000,110000],\"values\":"
        "[1.0,0.5,0.1],\"name\":null}}");
    expect_text(
        J("PiecewiseConstantDecay",
          "\"boundaries\": [2.5, 1e3], \"values\": [0.01, 2, 1e-7], \"name\": \"pc\""),
        "{\"class_name\":\"PiecewiseConstantDecay\",\"config\":{\"boundaries\":[2.5,1000.0],\"values\":"
        "[0.01,2,1e-07],\"name\":\"pc\"}}");
    expect_text(
        J("PolynomialDecay", "\"initial_learning_rate\": 0.1, \"decay_steps\": 10000"),
        "{\"class_name\":\"PolynomialDecay\",\"config\":{\"initial_learning_rate\":0.1,\"decay_steps\":"
        "10000,\"end_learning_rate\":0.0001,\"power\":1.0,\"cycle\":false,\"name\":null}}");
    expect_text(
        J("InverseTimeDecay",
          "\"initial_learning_rate\": 0.1, \"decay_steps\": 2.5, \"decay_rate\": 0.5"),
        "{\"class_name\":\"InverseTimeDecay\",\"config\":{\"initial_learning_rate\":0.1,\"decay_steps\":"
        "2.5,\"decay_rate\":0.5,\"staircase\":false,\"name\":null}}");
    /* Keras 3 writes "name" between alpha and warmup_target; the base
     * writes it last (see docs/schedules.md). */
    expect_text(
        J("CosineDecay",
          "\"initial_learning_rate\": 0.0, \"decay_steps\": 1000, \"warmup_target\": 0.1, "
          "\"warmup_steps\": 100"),
        "{\"class_name\":\"CosineDecay\",\"config\":{\"initial_learning_rate\":0.0,\"decay_steps\":1000,"
        "\"alpha\":0.0,\"name\":null,\"warmup_target\":0.1,\"warmup_steps\":100}}");
    expect_text(
        J("CosineDecay", "\"initial_learning_rate\": 0.1, \"decay_steps\": 1000"),
        "{\"class_name\":\"CosineDecay\",\"config\":{\"initial_learning_rate\":0.1,\"decay_steps\":1000,"
        "\"alpha\":0.0,\"name\":null,\"warmup_target\":null,\"warmup_steps\":0}}");
    expect_text(
        J("CosineDecayRestarts", "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 1000"),
        "{\"class_name\":\"CosineDecayRestarts\",\"config\":{\"initial_learning_rate\":0.1,"
        "\"first_decay_steps\":1000,\"t_mul\":2.0,\"m_mul\":1.0,\"alpha\":0.0,\"name\":null}}");
    /* Keras 3's serialize adds module and registered_name: read, not written. */
    expect_text(
        "{\"module\": \"keras.optimizers.schedules\", \"class_name\": \"InverseTimeDecay\", \"config\": "
        "{\"initial_learning_rate\": 0.1, \"decay_steps\": 1, \"decay_rate\": 0.5, \"name\": "
        "\"InverseTimeDecay\"}, \"registered_name\": null}",
        "{\"class_name\":\"InverseTimeDecay\",\"config\":{\"initial_learning_rate\":0.1,\"decay_steps\":"
        "1,\"decay_rate\":0.5,\"staircase\":false,\"name\":\"InverseTimeDecay\"}}");
}

/* PiecewiseConstantDecay's lists keep their numbers exactly, float32-derived
 * ones included (0.009999999776482582 is float32(0.01), as a config saved
 * from TF holds it). Depends on the base handing set_config the list with
 * exact numbers: src/optimizer/schedule.c re-prints it with cJSON's printer,
 * which keeps 15 digits whenever they come within an ulp. */
OPTIM_TEST(test_lists_keep_exact_numbers)
{
    const double f32_01 = 0.009999999776482582, f32_0001 = 0.0010000000474974513;
    optim_schedule *s = parse(J("PiecewiseConstantDecay",
                                "\"boundaries\": [10, 1000000000000001], "
                                "\"values\": [0.009999999776482582, 0.0010000000474974513, 0.5]"));
    double v0 = optim_schedule_value(s, 0), v1 = optim_schedule_value(s, 11);
    if (v0 != f32_01 || v1 != f32_0001) print_error("values %.17g %.17g: not exact\n", v0, v1);
    assert_eq(v0, f32_01);
    assert_eq(v1, f32_0001);
    char *text = optim_schedule_serialize(s);
    assert_non_null(text);
    assert_string_equal(
        text,
        "{\"class_name\":\"PiecewiseConstantDecay\",\"config\":{\"boundaries\":"
        "[10,1000000000000001],\"values\":[0.009999999776482582,0.0010000000474974513,0.5],"
        "\"name\":null}}");
    optim_free(text);
    optim_schedule_destroy(s);
}

/* from_json(serialize(s)) == s: same text, same value at every step. */
OPTIM_TEST(test_round_trips)
{
    for (size_t i = 0; i < N_CASES; i++) {
        optim_schedule *a = parse(CASES[i].json);
        char *ta = optim_schedule_serialize(a);
        assert_non_null(ta);
        optim_schedule *b = parse(ta);
        char *tb = optim_schedule_serialize(b);
        assert_non_null(tb);
        assert_string_equal(ta, tb);
        assert_string_equal(optim_schedule_class_of(a)->name, optim_schedule_class_of(b)->name);
        for (int64_t k = 0; k <= CASES[i].steps; k++) {
            double va = optim_schedule_value(a, k), vb = optim_schedule_value(b, k);
            assert_memory_equal(&va, &vb, sizeof va);
        }
        optim_free(ta);
        optim_free(tb);
        optim_schedule_destroy(a);
        optim_schedule_destroy(b);
    }
}

OPTIM_TEST(test_registry)
{
    static const char *const names[] = {"ExponentialDecay", "PiecewiseConstantDecay",
                                        "PolynomialDecay",  "InverseTimeDecay",
                                        "CosineDecay",      "CosineDecayRestarts"};
    for (size_t i = 0; i < 6; i++) {
        const optim_schedule_class *c = optim_find_schedule_class(names[i]);
        assert_non_null(c);
        assert_string_equal(c->name, names[i]);
    }
    /* Case-sensitive, like Keras's deserialization. */
    assert_null(optim_find_schedule_class("exponentialdecay"));
    assert_null(optim_find_schedule_class("SGDRDecay"));
    /* Every built-in has a closed-form case above (TF Addons' under
     * "Addons>NAME"), but CyclicalLearningRate, whose scale_fn must be
     * registered in the process (the CLI's replay and plot cases have none):
     * test_schedule_cyclical.c has its cases. */
#define COVERED(sym)                                                              \
    {                                                                             \
        char needle[96], tfa[112];                                                \
        int found = strcmp(sym.name, "CyclicalLearningRate") == 0;                \
        snprintf(needle, sizeof needle, "\"class_name\": \"%s\"", sym.name);      \
        snprintf(tfa, sizeof tfa, "\"class_name\": \"Addons>%s\"", sym.name);     \
        for (size_t i = 0; i < N_CASES; i++)                                      \
            found |= strstr(CASES[i].json, needle) || strstr(CASES[i].json, tfa); \
        if (!found) print_error("no closed-form case for %s\n", sym.name);        \
        assert_true(found);                                                       \
    }
    OPTIM_BUILTIN_SCHEDULES(COVERED)
#undef COVERED
}

typedef struct bad_case {
    const char *json;
    int code;
    const char *words[3]; /* each must appear in the message */
} bad_case;

static const bad_case BAD[] = {
    /* decay_steps <= 0 */
    {J("ExponentialDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 0, \"decay_rate\": 0.5"),
     OPTIM_ERANGE,
     {"ExponentialDecay", "decay_steps", "is 0"}},
    {J("ExponentialDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": -10, \"decay_rate\": 0.5"),
     OPTIM_ERANGE,
     {"decay_steps", "-10", "(0, inf)"}},
    {J("PolynomialDecay", "\"initial_learning_rate\": 0.1, \"decay_steps\": 0"),
     OPTIM_ERANGE,
     {"PolynomialDecay", "decay_steps", "is 0"}},
    {J("InverseTimeDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": -1, \"decay_rate\": 0.5"),
     OPTIM_ERANGE,
     {"InverseTimeDecay", "decay_steps", "-1"}},
    {J("CosineDecay", "\"initial_learning_rate\": 0.1, \"decay_steps\": 0"),
     OPTIM_ERANGE,
     {"CosineDecay", "decay_steps", "is 0"}},
    {J("CosineDecayRestarts", "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 0"),
     OPTIM_ERANGE,
     {"CosineDecayRestarts", "first_decay_steps", "is 0"}},
    {J("CosineDecayRestarts", "\"initial_learning_rate\": 0.1, \"first_decay_steps\": -5"),
     OPTIM_ERANGE,
     {"first_decay_steps", "-5", ""}},
    /* other ranges */
    {J("CosineDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 10, \"warmup_target\": 0.2, "
       "\"warmup_steps\": -1"),
     OPTIM_ERANGE,
     {"warmup_steps", "-1", ""}},
    {J("CosineDecayRestarts",
       "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 10, \"t_mul\": 0"),
     OPTIM_ERANGE,
     {"t_mul", "is 0", ""}},
    {J("CosineDecayRestarts",
       "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 10, \"t_mul\": -2.0"),
     OPTIM_ERANGE,
     {"t_mul", "-2", ""}},
    /* PiecewiseConstantDecay lists */
    {J("PiecewiseConstantDecay", "\"boundaries\": [10, 20], \"values\": [1.0, 0.5]"),
     OPTIM_EINVAL,
     {"PiecewiseConstantDecay", "one more element", "2"}},
    {J("PiecewiseConstantDecay", "\"boundaries\": [10], \"values\": [1.0, 0.5, 0.1]"),
     OPTIM_EINVAL,
     {"boundaries has 1", "values 3", ""}},
    {J("PiecewiseConstantDecay", "\"boundaries\": [20, 10], \"values\": [1.0, 0.5, 0.1]"),
     OPTIM_EINVAL,
     {"boundaries[1] is 10", "strictly increasing", ""}},
    {J("PiecewiseConstantDecay", "\"boundaries\": [10, 10], \"values\": [1.0, 0.5, 0.1]"),
     OPTIM_EINVAL,
     {"boundaries[1]", "strictly increasing", ""}},
    {J("PiecewiseConstantDecay",
       "\"boundaries\": [1, 5, 3, 9], \"values\": [1.0, 0.5, 0.1, 0.05, 0.01]"),
     OPTIM_EINVAL,
     {"boundaries[2] is 3", "boundaries[1] = 5", ""}},
    {J("PiecewiseConstantDecay", "\"boundaries\": [], \"values\": [1.0]"),
     OPTIM_EINVAL,
     {"boundaries is empty", "", ""}},
    {J("PiecewiseConstantDecay", "\"boundaries\": [10]"),
     OPTIM_EKEY,
     {"'values' is required", "", ""}},
    {J("PiecewiseConstantDecay", "\"values\": [1.0, 0.5]"),
     OPTIM_EKEY,
     {"'boundaries' is required", "", ""}},
    {J("PiecewiseConstantDecay", ""), OPTIM_EKEY, {"'boundaries' is required", "", ""}},
    {J("PiecewiseConstantDecay", "\"boundaries\": 10, \"values\": [1.0, 0.5]"),
     OPTIM_ETYPE,
     {"'boundaries' is a number", "expected a list of numbers", ""}},
    {J("PiecewiseConstantDecay", "\"boundaries\": [10], \"values\": {\"a\": 1}"),
     OPTIM_ETYPE,
     {"'values' is an object", "", ""}},
    {J("PiecewiseConstantDecay", "\"boundaries\": [10, \"20\"], \"values\": [1.0, 0.5, 0.1]"),
     OPTIM_ETYPE,
     {"'boundaries'", "element 1 is a string", "expected a finite number"}},
    {J("PiecewiseConstantDecay", "\"boundaries\": [10], \"values\": [1.0, null]"),
     OPTIM_ETYPE,
     {"'values'", "element 1 is null", ""}},
    {J("PiecewiseConstantDecay", "\"boundaries\": [10], \"values\": [true, 0.5]"),
     OPTIM_ETYPE,
     {"'values'", "element 0 is a boolean", ""}},
    {J("PiecewiseConstantDecay", "\"boundaries\": [10], \"values\": [1.0, 1e999]"),
     OPTIM_ETYPE,
     {"'values'", "element 1", ""}},
    {J("PiecewiseConstantDecay",
       "\"boundaries\": [10], \"values\": [1.0, 0.5], \"boundaries\": [20]"),
     OPTIM_EPARSE,
     {"'boundaries' appears twice", "", ""}},
    /* unknown class, malformed */
    {J("ExponentialDecayy", "\"initial_learning_rate\": 0.1"),
     OPTIM_ENOTFOUND,
     {"unknown schedule class 'ExponentialDecayy'", "", ""}},
    {J("SGD", "\"learning_rate\": 0.1"), OPTIM_ENOTFOUND, {"unknown schedule class 'SGD'", "", ""}},
    {"{\"config\": {\"initial_learning_rate\": 0.1}}", OPTIM_EKEY, {"class_name", "missing", ""}},
    {"{\"class_name\": 7, \"config\": {}}", OPTIM_ETYPE, {"class_name", "a number", ""}},
    {"{\"class_name\": \"CosineDecay\", \"config\": {}, \"extra\": 1}",
     OPTIM_EKEY,
     {"'extra'", "", ""}},
    {"[\"CosineDecay\"]", OPTIM_ETYPE, {"an array", "class_name", ""}},
    {"{\"class_name\": \"CosineDecay\", \"config\": [1]}",
     OPTIM_ETYPE,
     {"CosineDecay", "config", "an array"}},
    {"{\"class_name\": \"CosineDecay\", \"config\": {", OPTIM_EPARSE, {"malformed", "", ""}},
    /* missing required keys */
    {J("ExponentialDecay", "\"decay_steps\": 10, \"decay_rate\": 0.5"),
     OPTIM_EKEY,
     {"ExponentialDecay", "'initial_learning_rate' is required", ""}},
    {J("ExponentialDecay", "\"initial_learning_rate\": 0.1, \"decay_rate\": 0.5"),
     OPTIM_EKEY,
     {"'decay_steps' is required", "", ""}},
    {J("ExponentialDecay", "\"initial_learning_rate\": 0.1, \"decay_steps\": 10"),
     OPTIM_EKEY,
     {"'decay_rate' is required", "", ""}},
    {J("PolynomialDecay", "\"initial_learning_rate\": 0.1"),
     OPTIM_EKEY,
     {"'decay_steps' is required", "", ""}},
    {J("PolynomialDecay", "\"decay_steps\": 10"),
     OPTIM_EKEY,
     {"'initial_learning_rate' is required", "", ""}},
    {J("InverseTimeDecay", "\"initial_learning_rate\": 0.1, \"decay_steps\": 10"),
     OPTIM_EKEY,
     {"InverseTimeDecay", "'decay_rate' is required", ""}},
    {J("InverseTimeDecay", "\"decay_steps\": 10, \"decay_rate\": 0.5"),
     OPTIM_EKEY,
     {"'initial_learning_rate' is required", "", ""}},
    {J("InverseTimeDecay", "\"initial_learning_rate\": 0.1, \"decay_rate\": 0.5"),
     OPTIM_EKEY,
     {"'decay_steps' is required", "", ""}},
    {J("CosineDecay", "\"initial_learning_rate\": 0.1"),
     OPTIM_EKEY,
     {"'decay_steps' is required", "", ""}},
    {J("CosineDecay", "\"decay_steps\": 10"),
     OPTIM_EKEY,
     {"'initial_learning_rate' is required", "", ""}},
    {J("CosineDecayRestarts", "\"initial_learning_rate\": 0.1"),
     OPTIM_EKEY,
     {"'first_decay_steps' is required", "", ""}},
    {J("CosineDecayRestarts", "\"first_decay_steps\": 10"),
     OPTIM_EKEY,
     {"'initial_learning_rate' is required", "", ""}},
    {"{\"class_name\": \"CosineDecay\"}", OPTIM_EKEY, {"is required", "", ""}},
    /* wrong types, unknown keys */
    {J("ExponentialDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": \"10\", \"decay_rate\": 0.5"),
     OPTIM_ETYPE,
     {"'decay_steps' is a string", "a number", ""}},
    {J("ExponentialDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 10, \"decay_rate\": 0.5, "
       "\"staircase\": 1"),
     OPTIM_ETYPE,
     {"'staircase' is a number", "true or false", ""}},
    {J("ExponentialDecay",
       "\"initial_learning_rate\": null, \"decay_steps\": 10, \"decay_rate\": 0.5"),
     OPTIM_ETYPE,
     {"'initial_learning_rate' is null", "", ""}},
    {J("PolynomialDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 10, \"cycle\": \"yes\""),
     OPTIM_ETYPE,
     {"'cycle' is a string", "", ""}},
    {J("PolynomialDecay", "\"initial_learning_rate\": [0.1], \"decay_steps\": 10"),
     OPTIM_ETYPE,
     {"'initial_learning_rate' is an array", "", ""}},
    {J("CosineDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 10, \"warmup_target\": \"0.2\""),
     OPTIM_ETYPE,
     {"'warmup_target' is a string", "", ""}},
    {J("CosineDecayRestarts",
       "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 10, \"m_mul\": true"),
     OPTIM_ETYPE,
     {"'m_mul' is a boolean", "", ""}},
    {J("ExponentialDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 10, \"decay_rate\": 0.5, "
       "\"name\": 3"),
     OPTIM_ETYPE,
     {"'name' is a number", "", ""}},
    {J("ExponentialDecay",
       "\"initial_learning_rate\": 0.1, \"decay_steps\": 10, \"decay_rate\": 0.5, "
       "\"decay\": 0.1"),
     OPTIM_EKEY,
     {"unknown config key 'decay'", "decay_rate", ""}},
    {J("CosineDecayRestarts",
       "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 10, \"_t_mul\": 2.0"),
     OPTIM_EKEY,
     {"unknown config key '_t_mul'", "t_mul", ""}},
    {J("PiecewiseConstantDecay", "\"boundaries\": [10], \"values\": [1.0, 0.5], \"value\": 1"),
     OPTIM_EKEY,
     {"unknown config key 'value'", "", ""}},
};

OPTIM_TEST(test_bad_configs)
{
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        optim_schedule *s = (optim_schedule *)&s; /* must come back NULL */
        optim_error err;
        int rc = optim_schedule_from_json(&s, BAD[i].json, &err);
        if (rc != BAD[i].code)
            print_error("%s: rc %d (%s), expected %d\n", BAD[i].json, rc, err.msg, BAD[i].code);
        assert_status(rc, BAD[i].code, &err);
        assert_int_equal(err.code, rc);
        assert_null(s);
        for (int w = 0; w < 3; w++)
            if (BAD[i].words[w][0] && !strstr(err.msg, BAD[i].words[w])) {
                print_error("%s: message '%s' lacks '%s'\n", BAD[i].json, err.msg, BAD[i].words[w]);
                fail();
            }
    }
    optim_error err;
    assert_status(optim_schedule_from_json(NULL, CASES[0].json, &err), OPTIM_EINVAL, &err);
    optim_schedule *s;
    assert_status(optim_schedule_from_json(&s, NULL, &err), OPTIM_EINVAL, &err);
    assert_null(s);
    optim_schedule_destroy(NULL);
}

/* ---- in an optimizer ---------------------------------------------------------- */

/* learning_rate given as a nested schedule; get_config writes it back so. */
OPTIM_TEST(test_nested_in_optimizer)
{
    for (size_t i = 0; i < N_CASES; i++) {
        char json[1024];
        snprintf(
            json, sizeof json,
            "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": %s, \"momentum\": 0.5}}",
            CASES[i].json);
        optim_optimizer *opt = optim_test_make(json);
        char *sched = serialize_of(CASES[i].json);
        char *cfg = optim_get_config(opt);
        assert_non_null(cfg);
        char want[1200];
        /* Nested in a Keras 3 config as serialize_keras_object writes it
         * (TF Addons' schedules with their module). */
        snprintf(want, sizeof want, "\"learning_rate\":{\"module\":\"%s\",\"class_name\":",
                 strstr(CASES[i].json, "Addons>")
                     ? "tensorflow_addons.optimizers.cyclical_learning_rate"
                     : "keras.optimizers.schedules");
        if (!strstr(cfg, want)) print_error("%s lacks %s\n", cfg, want);
        assert_contains(cfg, want);
        /* optim_serialize -> optim_from_json -> optim_serialize is the identity. */
        char *text = optim_serialize(opt);
        assert_non_null(text);
        optim_optimizer *again = optim_test_make(text);
        char *text2 = optim_serialize(again);
        assert_string_equal(text, text2);
        /* get_hyper reads the schedule at the current step. */
        double lr;
        assert_ok(optim_get_hyper(opt, "learning_rate", &lr), opt);
        assert_close(lr, CASES[i].ref(CASES[i].p, 0), 1e-12, 1e-15);
        assert_eq(optim_hyper_is_constant(opt, "learning_rate"), 0);
        optim_free(cfg);
        optim_free(text);
        optim_free(text2);
        optim_free(sched);
        optim_destroy(opt);
        optim_destroy(again);
    }
    /* In the legacy generation too. */
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": " J(
            "PolynomialDecay",
            "\"initial_learning_rate\": 0.1, \"decay_steps\": 10") ", \"decay\": 0.01, "
                                                                   "\"is_legacy_optimizer\": true}}");
    char *cfg = optim_get_config(opt);
    assert_contains(cfg, "\"learning_rate\":{\"class_name\":\"PolynomialDecay\",\"config\":{");
    optim_free(cfg);
    optim_destroy(opt);
    /* A bad nested schedule: refused, the message names learning_rate and the schedule's key. */
    optim_error err;
    optim_optimizer *bad = NULL;
    assert_status(optim_from_json(
                      &bad,
                      "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": " J(
                          "CosineDecay", "\"initial_learning_rate\": 0.1, \"decay_steps\": 0") "}}",
                      &err),
                  OPTIM_ERANGE, &err);
    assert_null(bad);
    assert_contains(err.msg, "learning_rate");
    assert_contains(err.msg, "decay_steps");
    assert_status(optim_from_json(&bad,
                                  "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": " J(
                                      "NoSuchDecay", "\"initial_learning_rate\": 0.1") "}}",
                                  &err),
                  OPTIM_ENOTFOUND, &err);
    assert_contains(err.msg, "NoSuchDecay");
    /* Only hyperparameters may be schedules. */
    assert_status(optim_from_json(&bad,
                                  "{\"class_name\": \"SGD\", \"config\": {\"nesterov\": " J(
                                      "CosineDecay",
                                      "\"initial_learning_rate\": 0.1, \"decay_steps\": 10") "}}",
                                  &err),
                  OPTIM_ETYPE, &err);
    assert_null(bad);
}

/* Deterministic gradient for step k, element i. */
static double grad_at(int k, int i) { return sin(0.7 * k + 1.3 * i) * (1.0 + 0.1 * i) - 0.05 * k; }
static double init_at(int i) { return 0.5 - 0.3 * i; }

#define N 5
#define SGD_STEPS 35

/* SGD (no momentum) for SGD_STEPS steps with `json`'s optimizer, compared
 * with w -= lr(k) * g: bit for bit with the library's schedule value and
 * the pipeline's arithmetic, and against the closed form. decay > 0:
 * legacy lr(k) = schedule(k) / (1 + decay * k) (OptimizerV2._decayed_lr). */
static void check_sgd(const char *opt_json, const sched_case *c, double decay)
{
    for (int d = 0; d < 2; d++) {
        const optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *opt = optim_test_make(opt_json);
        optim_schedule *twin = parse(c->json);
        float wf[N], gf[N], ef[N];
        double wd[N], gd[N], ed[N], closed[N];
        for (int i = 0; i < N; i++) {
            wf[i] = (float)init_at(i), wd[i] = init_at(i);
            ef[i] = wf[i], ed[i] = wd[i], closed[i] = init_at(i);
        }
        optim_var *w;
        optim_error err;
        assert_ok(
            optim_var_create(&w, "w", dt, 1, (int64_t[]){N}, d ? (void *)wd : (void *)wf, &err),
            &err);
        for (int k = 0; k < SGD_STEPS; k++) {
            for (int i = 0; i < N; i++) gd[i] = grad_at(k, i), gf[i] = (float)gd[i];
            optim_grad_var p = {optim_grad_dense(optim_tensor_make(dt, d ? (void *)gd : (void *)gf,
                                                                   1, (int64_t[]){N})),
                                w};
            assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
            const double s = optim_schedule_value(twin, k);
            const double lr_closed = c->ref(c->p, k) / (1.0 + decay * k);
            if (d) {
                double lr = decay > 0 ? s / (1.0 + decay * (double)k) : s;
                for (int i = 0; i < N; i++) ed[i] = ed[i] - gd[i] * lr;
            } else {
                float lr = (float)s;
                if (decay > 0) lr = lr / (1.0f + (float)decay * (float)k);
                for (int i = 0; i < N; i++) ef[i] = ef[i] - gf[i] * lr;
            }
            for (int i = 0; i < N; i++) closed[i] -= lr_closed * gd[i];
        }
        assert_eq(optim_iterations(opt), SGD_STEPS);
        for (int i = 0; i < N; i++) {
            if (d) {
                double got = optim_var_get(w, i);
                if (got != ed[i])
                    print_error("%s f64 w[%d] = %.17g, expected %.17g\n", opt_json, i, got, ed[i]);
                assert_eq(got, ed[i]);
                assert_close(got, closed[i], 1e-12, 1e-13);
            } else {
                float got = (float)optim_var_get(w, i);
                if (got != ef[i])
                    print_error("%s f32 w[%d] = %.9g, expected %.9g\n", opt_json, i, got, ef[i]);
                assert_eq(got, ef[i]);
                assert_close(got, closed[i], 1e-5, 2e-6);
            }
        }
        optim_var_destroy(w);
        optim_schedule_destroy(twin);
        optim_destroy(opt);
    }
}

OPTIM_TEST(test_sgd_with_each_schedule)
{
    char json[1024];
    for (size_t i = 0; i < N_CASES; i++) {
        snprintf(json, sizeof json,
                 "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": %s}}", CASES[i].json);
        check_sgd(json, &CASES[i], 0.0);
        snprintf(
            json, sizeof json,
            "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": %s, \"is_legacy_optimizer\": true}}",
            CASES[i].json);
        check_sgd(json, &CASES[i], 0.0);
    }
}

/* Legacy `decay` composes with a schedule: lr = schedule(t) / (1 + decay * t). */
OPTIM_TEST(test_sgd_schedule_and_legacy_decay)
{
    char json[1024];
    for (size_t i = 0; i < N_CASES; i++) {
        snprintf(json, sizeof json,
                 "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": %s, \"decay\": 0.05, "
                 "\"is_legacy_optimizer\": true}}",
                 CASES[i].json);
        check_sgd(json, &CASES[i], 0.05);
    }
    /* lr is a legacy alias: Keras 3 refuses it. */
    optim_optimizer *opt = NULL;
    optim_error err;
    snprintf(json, sizeof json,
             "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": %s, \"lr\": 0.05, "
             "\"is_legacy_optimizer\": false}}",
             CASES[0].json);
    assert_status(optim_from_json(&opt, json, &err), OPTIM_EKEY, &err);
    assert_null(opt);
}

/* A schedule whose value leaves the learning rate's range (NaN past the end
 * of CosineDecayRestarts with t_mul < 1; a negative end value): that step is
 * refused and changes nothing. */
OPTIM_TEST(test_schedule_value_refused_at_step)
{
    static const char *const jsons[] = {
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": " J(
            "CosineDecayRestarts",
            "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 5, \"t_mul\": 0.5") "}}",
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": " J(
            "PolynomialDecay",
            "\"initial_learning_rate\": 0.1, \"decay_steps\": 5, \"end_learning_rate\": -0.2") "}}",
    };
    /* The horizon 5 / (1 - 0.5) = 10; 0.3 * (1 - k / 5) - 0.2 < 0 from k = 2. */
    const int first_bad[] = {10, 2};
    for (int j = 0; j < 2; j++) {
        optim_optimizer *opt = optim_test_make(jsons[j]);
        double w0[2] = {1.0, 2.0}, g[2] = {0.5, -0.5};
        optim_var *w;
        optim_error err;
        assert_ok(optim_var_create(&w, "w", OPTIM_F64, 1, (int64_t[]){2}, w0, &err), &err);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, (int64_t[]){2})),
                            w};
        for (int k = 0; k < first_bad[j]; k++) assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
        double before[2] = {optim_var_get(w, 0), optim_var_get(w, 1)};
        assert_status(optim_apply_gradients(opt, &p, 1, 0), OPTIM_ERANGE, opt);
        assert_contains(optim_errmsg(opt), "learning_rate");
        assert_eq(optim_iterations(opt), first_bad[j]);
        assert_eq(optim_var_get(w, 0), before[0]);
        assert_eq(optim_var_get(w, 1), before[1]);
        optim_var_destroy(w);
        optim_destroy(opt);
    }
}

/* optim_set_hyper_schedule_object: the optimizer takes the schedule. */
OPTIM_TEST(test_set_schedule_object)
{
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.5}}");
    optim_schedule *s = parse(CASES[1].json);
    assert_ok(optim_set_hyper_schedule_object(opt, "learning_rate", s), opt);
    double lr;
    assert_ok(optim_get_hyper(opt, "learning_rate", &lr), opt);
    assert_eq(lr, 0.1);
    char *cfg = optim_get_config(opt);
    assert_contains(
        cfg,
        "\"learning_rate\":{\"module\":\"keras.optimizers.schedules\",\"class_name\":\"ExponentialDecay\"");
    optim_free(cfg);
    /* Replacing it frees the old one (ASan checks); a bad name leaves s with the caller. */
    optim_schedule *s2 = parse(CASES[3].json);
    assert_ok(optim_set_hyper_schedule_object(opt, "learning_rate", s2), opt);
    optim_schedule *s3 = parse(CASES[3].json);
    assert_status(optim_set_hyper_schedule_object(opt, "no_such_hyper", s3), OPTIM_EKEY, opt);
    optim_schedule_destroy(s3);
    optim_destroy(opt);
}

/* ---- the command-line tool ---------------------------------------------------- */

/* `optim replay` with SGD driven by each schedule: OUT against the closed form. */
OPTIM_TEST(test_replay_with_each_schedule)
{
    enum { STEPS = 40, NW = 4, NV = 3 };
    const char *cfg = optim_test_tmpfile("sched_cfg.json"),
               *init = optim_test_tmpfile("sched_init.st");
    const char *grads = optim_test_tmpfile("sched_grads.st"),
               *out = optim_test_tmpfile("sched_out.st");
    optim_error err;
    /* INIT: "w" f64 [4], "v" f32 [3]. GRADS: K/w and K/v, dense, every step. */
    double w0[NW];
    float v0[NV];
    for (int i = 0; i < NW; i++) w0[i] = init_at(i);
    for (int i = 0; i < NV; i++) v0[i] = (float)init_at(i + 1);
    optim_st_writer *wr;
    assert_ok(optim_st_writer_create(&wr, &err), &err);
    optim_tensor t = optim_tensor_make(OPTIM_F64, w0, 1, (int64_t[]){NW});
    assert_ok(optim_st_writer_add(wr, "w", &t, &err), &err);
    t = optim_tensor_make(OPTIM_F32, v0, 1, (int64_t[]){NV});
    assert_ok(optim_st_writer_add(wr, "v", &t, &err), &err);
    assert_ok(optim_st_writer_save(wr, init, &err), &err);
    optim_st_writer_destroy(wr);
    static double gw[STEPS][NW];
    static float gv[STEPS][NV];
    assert_ok(optim_st_writer_create(&wr, &err), &err);
    for (int k = 0; k < STEPS; k++) {
        char name[32];
        for (int i = 0; i < NW; i++) gw[k][i] = grad_at(k, i);
        for (int i = 0; i < NV; i++) gv[k][i] = (float)grad_at(k, i + 2);
        snprintf(name, sizeof name, "%d/w", k);
        t = optim_tensor_make(OPTIM_F64, gw[k], 1, (int64_t[]){NW});
        assert_ok(optim_st_writer_add(wr, name, &t, &err), &err);
        snprintf(name, sizeof name, "%d/v", k);
        t = optim_tensor_make(OPTIM_F32, gv[k], 1, (int64_t[]){NV});
        assert_ok(optim_st_writer_add(wr, name, &t, &err), &err);
    }
    assert_ok(optim_st_writer_save(wr, grads, &err), &err);
    optim_st_writer_destroy(wr);

    for (size_t c = 0; c < N_CASES; c++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": %s}}", CASES[c].json);
        assert_eq(optim_test_write_file(cfg, json, strlen(json)), 0);
        unlink(out);
        char *argv[] = {(char *)OPTIM_CLI_PATH, "replay",    (char *)cfg, (char *)init,
                        (char *)grads,          (char *)out, NULL};
        optim_test_proc r;
        if (optim_test_capture(argv, &r)) print_error("for %s:\n%s\n", json, r.err);
        assert_eq(r.status, 0);
        double ew[NW], ev[NV];
        for (int i = 0; i < NW; i++) ew[i] = w0[i];
        for (int i = 0; i < NV; i++) ev[i] = v0[i];
        for (int k = 0; k < STEPS; k++) {
            double lr = CASES[c].ref(CASES[c].p, k);
            for (int i = 0; i < NW; i++) ew[i] -= lr * gw[k][i];
            for (int i = 0; i < NV; i++) ev[i] -= lr * gv[k][i];
        }
        optim_st_file *o;
        assert_ok(optim_st_read(out, &o, &err), &err);
        optim_tensor got;
        assert_ok(optim_st_get(o, "w", &got), NULL);
        assert_int_equal(got.dtype, OPTIM_F64);
        for (int i = 0; i < NW; i++)
            assert_close(((const double *)got.data)[i], ew[i], 1e-12, 1e-13);
        assert_ok(optim_st_get(o, "v", &got), NULL);
        assert_int_equal(got.dtype, OPTIM_F32);
        for (int i = 0; i < NV; i++) assert_close(((const float *)got.data)[i], ev[i], 1e-5, 2e-6);
        assert_ok(optim_st_get(o, "iterations", &got), NULL);
        assert_int_equal(got.dtype, OPTIM_I64);
        assert_int_equal(*(const int64_t *)got.data, STEPS);
        optim_st_free(o);
    }
    unlink(cfg);
    unlink(init);
    unlink(grads);
    unlink(out);
}

static int file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Reads the first n bytes of path into buf; returns how many were read. */
static size_t read_head(const char *path, unsigned char *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    return got;
}

OPTIM_TEST(test_schedule_plot)
{
    /* optim_test_tmpfile recycles 8 buffers: keep copies. */
    char cfg[512], png[512], missing[512], badjson[512], badcls[512], badcfg[512], dir[512],
        nodir[512];
    snprintf(cfg, sizeof cfg, "%s", optim_test_tmpfile("plot.json"));
    snprintf(png, sizeof png, "%s", optim_test_tmpfile("plot.png"));
    snprintf(missing, sizeof missing, "%s", optim_test_tmpfile("no_such.json"));
    snprintf(badjson, sizeof badjson, "%s", optim_test_tmpfile("bad.json"));
    snprintf(badcls, sizeof badcls, "%s", optim_test_tmpfile("badcls.json"));
    snprintf(badcfg, sizeof badcfg, "%s", optim_test_tmpfile("badcfg.json"));
    snprintf(dir, sizeof dir, "%s", optim_test_tmpfile(""));
    snprintf(nodir, sizeof nodir, "%s", optim_test_tmpfile("no_dir/out.png"));
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static optim_test_proc r;
    /* Every case, default and explicit STEPS: a valid 640x360 PNG. */
    for (size_t c = 0; c < N_CASES; c++) {
        assert_eq(optim_test_write_file(cfg, CASES[c].json, strlen(CASES[c].json)), 0);
        unlink(png);
        char steps[32];
        snprintf(steps, sizeof steps, "%lld", (long long)CASES[c].steps);
        char *argv[] = {
            (char *)OPTIM_CLI_PATH, "schedule-plot", cfg, png, c % 2 ? steps : NULL, NULL};
        if (optim_test_capture(argv, &r)) print_error("for %s:\n%s\n", CASES[c].json, r.err);
        assert_eq(r.status, 0);
        unsigned char head[24];
        assert_int_equal(read_head(png, head, sizeof head), sizeof head);
        assert_memory_equal(head, sig, 8);
        assert_memory_equal(head + 12, "IHDR", 4);
        uint32_t width = (uint32_t)head[16] << 24 | (uint32_t)head[17] << 16 |
            (uint32_t)head[18] << 8 | head[19];
        uint32_t height = (uint32_t)head[20] << 24 | (uint32_t)head[21] << 16 |
            (uint32_t)head[22] << 8 | head[23];
        assert_int_equal(width, 640);
        assert_int_equal(height, 360);
    }
    /* Large STEPS are sampled; a schedule that goes NaN leaves a gap. */
    const char *restart =
        J("CosineDecayRestarts",
          "\"initial_learning_rate\": 0.1, \"first_decay_steps\": 10, \"t_mul\": 0.5");
    assert_eq(optim_test_write_file(cfg, restart, strlen(restart)), 0);
    {
        char *argv[] = {(char *)OPTIM_CLI_PATH, "schedule-plot", cfg, png, "1000000000", NULL};
        assert_eq(optim_test_capture(argv, &r), 0);
        unsigned char head[8];
        assert_int_equal(read_head(png, head, 8), 8);
        assert_memory_equal(head, sig, 8);
    }

    /* Bad input: non-zero status, one line on stderr, OUT not created. */
    assert_eq(optim_test_write_file(badjson, "{\"class_name\": ", 15), 0);
    const char *u = J("StepDecay", "\"initial_learning_rate\": 0.1");
    assert_eq(optim_test_write_file(badcls, u, strlen(u)), 0);
    const char *b =
        J("PiecewiseConstantDecay", "\"boundaries\": [10, 5], \"values\": [1.0, 0.5, 0.1]");
    assert_eq(optim_test_write_file(badcfg, b, strlen(b)), 0);
    assert_eq(optim_test_write_file(cfg, CASES[0].json, strlen(CASES[0].json)), 0);
    struct {
        const char *args[4];
        int status;
        const char *word;
    } bad[] = {
        {{missing, png, NULL}, 1, "no_such.json"},
        {{badjson, png, NULL}, 1, "malformed"},
        {{badcls, png, NULL}, 1, "StepDecay"},
        {{badcfg, png, NULL}, 1, "strictly increasing"},
        {{dir, png, NULL}, 1, "SCHEDULE_JSON"},
        {{cfg, png, "0"}, 1, "STEPS '0'"},
        {{cfg, png, "-5"}, 1, "STEPS"},
        {{cfg, png, "abc"}, 1, "STEPS 'abc'"},
        {{cfg, png, "1e3"}, 1, "STEPS"},
        {{cfg, png, "10x"}, 1, "STEPS"},
        {{cfg, png, ""}, 1, "STEPS"},
        {{cfg, png, "2000000000"}, 1, "STEPS"},
        {{cfg, nodir, NULL}, 1, "OUT"},
        {{cfg, NULL}, 2, "usage"},
        {{NULL}, 2, "usage"},
        {{cfg, png, "10", "extra"}, 2, "usage"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        unlink(png);
        char *argv[7] = {(char *)OPTIM_CLI_PATH, "schedule-plot"};
        for (int a = 0; a < 4 && bad[i].args[a]; a++) argv[2 + a] = (char *)bad[i].args[a];
        if (optim_test_capture(argv, &r) != bad[i].status) print_error("case %zu\n", i);
        assert_eq(r.status, bad[i].status);
        assert_false(file_exists(png));
        assert_false(file_exists(nodir));
        if (!strstr(r.err, bad[i].word)) print_error("case %zu\n", i);
        assert_contains(r.err, bad[i].word);
        char *nl = strchr(r.err, '\n');
        assert_non_null(nl);
        assert_int_equal(nl[1], '\0'); /* one line */
    }
    /* Nothing left behind (no temporary files beside OUT). */
    char where[512];
    snprintf(where, sizeof where, "%s", png);
    *strrchr(where, '/') = '\0';
    DIR *d = opendir(where);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        int tmp = strstr(e->d_name, ".tmp") != NULL; /* any temporary name */
        if (tmp) print_error("left behind: %s\n", e->d_name);
        assert_false(tmp);
    }
    closedir(d);
    unlink(cfg);
    unlink(badjson);
    unlink(badcls);
    unlink(badcfg);
}

/* One schedule object belongs to one hyperparameter. */
OPTIM_TEST(test_schedule_object_single_owner)
{
    optim_schedule *s;
    optim_error err;
    assert_ok(optim_schedule_from_json(&s,
                                       "{\"class_name\": \"ExponentialDecay\", \"config\": "
                                       "{\"initial_learning_rate\": 0.1, \"decay_steps\": 10, "
                                       "\"decay_rate\": 0.5}}",
                                       &err),
              &err);
    optim_optimizer *opt;
    assert_ok(optim_from_json(&opt, "\"sgd\"", &err), &err);
    assert_ok(optim_set_hyper_schedule_object(opt, "learning_rate", s), opt);
    assert_status(optim_set_hyper_schedule_object(opt, "momentum", s), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "already belongs to 'learning_rate'");
    assert_ok(optim_set_hyper_schedule_object(opt, "learning_rate", s), opt); /* same owner: fine */
    optim_destroy(opt); /* frees s once */
}

int main(void) { return optim_test_run(); }
