/* The arithmetic of `optim lr-find` (tools/lr_find_math.c, included here:
 * the command's sources are not a library): the exponential sweep, the
 * bias-corrected smoothed loss and its stop rule, and the suggestions on
 * synthetic curves whose steepest point and minimum are known by
 * construction. The command itself: tests/test_lr_find.sh. */
#include "testutil.h"

#include <math.h>

#include "../tools/lr_find_math.c"

#define N 100

/* fastai's defaults: 1e-7 to 10 over 100 steps, so lr_i = 10^(-7 + 8 i / 100). */
static void sweep_rates(double *lrs, size_t n)
{
    for (size_t i = 0; i < n; i++) lrs[i] = optim_lrf_rate(1e-7, 10.0, (int64_t)i, N);
}

OPTIM_TEST(rate_is_exponential)
{
    assert_eq(optim_lrf_rate(1e-7, 10.0, 0, N), 1e-7);
    assert_close(optim_lrf_rate(1e-7, 10.0, N, N), 10.0, 1e-14, 0);
    for (int64_t i = 0; i < N; i++)
        assert_close(optim_lrf_rate(1e-7, 10.0, i, N), pow(10.0, -7.0 + 8.0 * (double)i / N), 1e-13,
                     0);
    assert_close(optim_lrf_rate(0.5, 2.0, 1, 2), 1.0, 1e-15, 0);
}

OPTIM_TEST(smoothing_is_bias_corrected)
{
    lrf_smoother s = optim_lrf_smoother(LRF_BETA);
    double v;
    assert_true(isinf(s.best));
    for (int k = 0; k < 50; k++) { /* a constant loss stays itself from the first step */
        assert_int_equal(optim_lrf_add(&s, 2.5, &v), 0);
        assert_close(v, 2.5, 1e-13, 0);
    }
    const double b = 0.98;
    s = optim_lrf_smoother(b);
    optim_lrf_add(&s, 3.0, &v);
    assert_eq(v, 3.0); /* (1 - b) 3 / (1 - b) */
    optim_lrf_add(&s, 1.0, &v);
    assert_close(v, (b * 3.0 + 1.0) / (1.0 + b), 1e-13, 0);
    optim_lrf_add(&s, 2.0, &v);
    assert_close(v, (b * b * 3.0 + b * 1.0 + 2.0) / (1.0 + b + b * b), 1e-13, 0);
    assert_close(s.best, (b * 3.0 + 1.0) / (1.0 + b), 1e-13, 0); /* the lowest so far */
}

/* After three losses of 1 (smoothed 1, the best), a loss x: smoothed =
 * (b (1 - b^3) + (1 - b) x) / (1 - b^4), which stops the sweep above 4. */
OPTIM_TEST(stops_on_divergence)
{
    const double b = LRF_BETA;
    const double xs[] = {4.5, 100.0, 160.0, 170.0, 1e6};
    for (size_t k = 0; k < sizeof xs / sizeof *xs; k++) {
        lrf_smoother s = optim_lrf_smoother(b);
        double v;
        for (int i = 0; i < 3; i++) assert_int_equal(optim_lrf_add(&s, 1.0, &v), 0);
        double expect = (b * (1 - b * b * b) + (1 - b) * xs[k]) / (1 - b * b * b * b);
        assert_int_equal(optim_lrf_add(&s, xs[k], &v), expect > 4.0);
        assert_close(v, expect, 1e-13, 0);
    }
    lrf_smoother s = optim_lrf_smoother(b);
    double v;
    optim_lrf_add(&s, 1.0, &v);
    assert_int_equal(optim_lrf_add(&s, NAN, &v), 1);
    s = optim_lrf_smoother(b);
    assert_int_equal(optim_lrf_add(&s, INFINITY, &v), 1);
}

/* A curve falling 0.01 a step with one drop of 0.5 from point 40 to 41,
 * its minimum at point 70, rising after; decoys the suggestions must not
 * take: a drop of 1 in the first tenth (points 2-3), a fall of 0.78 back
 * from a spike after the minimum (points 80-81) and a drop of 5 in the last
 * five points (97-98). */
static void known_curve(double *L)
{
    L[0] = 5.0;
    for (size_t i = 1; i < N; i++) L[i] = L[i - 1] + (i <= 70 ? -0.01 : 0.02);
    for (size_t i = 41; i < N; i++) L[i] -= 0.49; /* the steepest descent */
    for (size_t i = 3; i < N; i++) L[i] -= 0.99;
    L[80] += 0.8; /* a spike, falling back by 0.78 */
    for (size_t i = 98; i < N; i++) L[i] -= 5;
}

OPTIM_TEST(suggests_the_steepest_descent_and_minimum)
{
    double lrs[N], L[N];
    sweep_rates(lrs, N);
    known_curve(L);
    lrf_suggestion s = {0};
    assert_int_equal(optim_lrf_suggest(lrs, L, N, N, &s), 0);
    assert_int_equal(s.first, 10);
    assert_int_equal(s.last, 95);
    assert_int_equal(s.steep, 40);
    assert_int_equal(s.min, 70);
    assert_close(s.steep_lr, pow(10.0, -7.0 + 8.0 * 0.40), 1e-13, 0); /* 10^-3.8 */
    assert_close(s.min_lr / 10, pow(10.0, -7.0 + 8.0 * 0.70 - 1), 1e-13, 0); /* 10^-2.4 */
    /* The slope is against ln(lr): on unequal spacing a smaller drop can be
     * steeper. Squeeze the step 20-21 to a hundredth of a log step. */
    lrs[21] = lrs[20] * pow(lrs[21] / lrs[20], 0.01);
    L[21] = L[20] - 0.02; /* slope -0.02 / (0.01 h) beats -0.5 / h */
    for (size_t i = 22; i < N; i++) L[i] -= 0.01;
    assert_int_equal(optim_lrf_suggest(lrs, L, N, N, &s), 0);
    assert_int_equal(s.steep, 20);
}

/* Two equal lowest losses (exact in binary): the first is the minimum. */
OPTIM_TEST(minimum_tie_takes_the_first)
{
    double lrs[N], L[N];
    sweep_rates(lrs, N);
    for (size_t i = 0; i < N; i++)
        L[i] = i <= 40 ? 0.125 * (double)(40 - i)
            : i <= 60  ? 0.25 * (double)(i < 50 ? i - 40 : 60 - i)
                       : 0.5 * (double)(i - 60);
    lrf_suggestion s = {0};
    assert_int_equal(optim_lrf_suggest(lrs, L, N, N, &s), 0);
    assert_eq(L[40], L[60]);
    assert_int_equal(s.min, 40);
}

/* A sweep stopped early: the window ends 5 points before the last, at the
 * first non-finite loss, and with fewer than 2 points left falls back to all
 * points before it. */
OPTIM_TEST(short_and_non_finite_records)
{
    double lrs[N], L[N];
    sweep_rates(lrs, N);
    for (size_t i = 0; i < N; i++) L[i] = 4.0 - 0.01 * (double)i - (i > 30 ? 0.2 : 0) + (i > 50);
    L[50] = NAN;
    lrf_suggestion s = {0};
    assert_int_equal(optim_lrf_suggest(lrs, L, 60, N, &s), 0);
    assert_int_equal(s.first, 10);
    assert_int_equal(s.last, 50);
    assert_int_equal(s.steep, 30);
    assert_int_equal(s.min, 49);
    /* 14 points of a 100-step sweep: the window 10..9 is empty, so all 14. */
    assert_int_equal(optim_lrf_suggest(lrs, L, 14, N, &s), 0);
    assert_int_equal(s.first, 0);
    assert_int_equal(s.last, 14);
    assert_int_equal(s.min, 13);
    double two[2] = {1.0, 0.5};
    assert_int_equal(optim_lrf_suggest(lrs, two, 2, N, &s), 0);
    assert_int_equal(s.steep, 0);
    assert_int_equal(s.min, 1);
    assert_int_equal(optim_lrf_suggest(lrs, two, 1, N, &s), -1);
    two[1] = INFINITY;
    assert_int_equal(optim_lrf_suggest(lrs, two, 2, N, &s), -1);
}

/* A loss that only rises: the minimum is the window's first point and the
 * steepest point is the least rise of the whole window. */
OPTIM_TEST(rising_loss)
{
    double lrs[N], L[N];
    sweep_rates(lrs, N);
    L[0] = 1.0;
    for (size_t i = 1; i < N; i++) L[i] = L[i - 1] + (i == 33 ? 0.001 : 0.1);
    lrf_suggestion s = {0};
    assert_int_equal(optim_lrf_suggest(lrs, L, N, N, &s), 0);
    assert_int_equal(s.min, 10);
    assert_int_equal(s.steep, 32);
}

int main(void) { return optim_test_run(); }
