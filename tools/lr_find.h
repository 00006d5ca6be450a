/* The learning-rate range test of `optim lr-find` (Smith 2017, "Cyclical
 * Learning Rates for Training Neural Networks", section 3.3, with the
 * conventions of fastai's lr_find): the sweep's rates, the smoothed loss
 * and its stop rule, and the suggestions drawn from the recorded curve.
 * Pure arithmetic, no I/O (tests/test_lr_find_math.c includes lr_find_math.c).
 * Internal to tools/. */
#ifndef OPTIM_TOOLS_LR_FIND_H
#define OPTIM_TOOLS_LR_FIND_H

#include <stddef.h>
#include <stdint.h>

#define LRF_BETA 0.98 /* fastai's AvgSmoothLoss */
#define LRF_DIVERGE 4.0 /* stop once smoothed > LRF_DIVERGE * best */

/* The rate of step i (0-based) of an n-step sweep: start * (end /
 * start)^(i / n), fastai's SchedExp at train_iter / num_it (the last step
 * runs just below end). */
double optim_lrf_rate(double start, double end, int64_t i, int64_t n);

/* The exponential moving average of the loss with bias correction:
 * avg = beta * avg + (1 - beta) * loss, smoothed = avg / (1 - beta^count);
 * best is the lowest smoothed value so far (+inf before any). */
typedef struct lrf_smoother {
    double beta, avg, best;
    int64_t count;
} lrf_smoother;

lrf_smoother optim_lrf_smoother(double beta);
/* Adds a loss, sets *smoothed; returns 1 when the sweep should stop: the
 * smoothed loss is not finite or exceeds LRF_DIVERGE times the best. */
int optim_lrf_add(lrf_smoother *s, double loss, double *smoothed);

typedef struct lrf_suggestion {
    size_t first, last; /* the window of recorded points used: [first, last) */
    size_t steep; /* index of the steepest descent's left point */
    size_t min; /* index of the lowest smoothed loss */
    double steep_lr, min_lr; /* lrs[steep], lrs[min]; minimum/10 is min_lr / 10 */
} lrf_suggestion;

/* The suggestions from n recorded (rate, smoothed loss) points of a sweep
 * of n_steps steps. The window is fastai's: points n_steps/10 to n-5, cut
 * at the first non-finite loss; when that leaves fewer than 2 points, all
 * points up to the first non-finite one. "min" is the lowest loss of the
 * window (the first on a tie); "steep" the left point of the most negative
 * slope (L[i+1] - L[i]) / (ln lr[i+1] - ln lr[i]) (the first on a tie) on
 * the way down to it, points first..min. fastai's steep searches the whole
 * window, where the smoothed loss falling back after a spike beyond the
 * minimum can be steeper than the descent itself; when the minimum is the
 * window's first point (the loss only rose), this searches the whole
 * window too. Returns 0, or -1 when the window has fewer than 2 points. */
int optim_lrf_suggest(const double *lrs, const double *losses, size_t n, int64_t n_steps,
                      lrf_suggestion *out);

#endif
