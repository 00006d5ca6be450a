/* The arithmetic of `optim lr-find` (tools/lr_find.h). */
#include <math.h>

#include "lr_find.h"

double optim_lrf_rate(double start, double end, int64_t i, int64_t n)
{
    return start * pow(end / start, (double)i / (double)n);
}

lrf_smoother optim_lrf_smoother(double beta) { return (lrf_smoother){beta, 0.0, INFINITY, 0}; }

int optim_lrf_add(lrf_smoother *s, double loss, double *smoothed)
{
    s->count++;
    s->avg = s->beta * s->avg + (1.0 - s->beta) * loss;
    *smoothed = s->avg / (1.0 - pow(s->beta, (double)s->count));
    if (!isfinite(*smoothed)) return 1;
    if (*smoothed < s->best) s->best = *smoothed;
    return *smoothed > LRF_DIVERGE * s->best;
}

/* Points [first, last) cut at the first non-finite loss. */
static size_t finite_end(const double *losses, size_t first, size_t last)
{
    for (size_t i = first; i < last; i++)
        if (!isfinite(losses[i])) return i;
    return last;
}

int optim_lrf_suggest(const double *lrs, const double *losses, size_t n, int64_t n_steps,
                      lrf_suggestion *out)
{
    size_t first = (size_t)(n_steps / 10), last = n > 5 ? n - 5 : 0;
    if (first < last) last = finite_end(losses, first, last);
    if (first >= last || last - first < 2) first = 0, last = finite_end(losses, 0, n);
    if (last < 2) return -1;
    size_t min = first;
    for (size_t i = first + 1; i < last; i++)
        if (losses[i] < losses[min]) min = i;
    /* The descent to the minimum; all of the window when the loss only rose. */
    size_t steep = first, end = min > first ? min + 1 : last;
    double best_slope = INFINITY;
    for (size_t i = first; i + 1 < end; i++) {
        double slope = (losses[i + 1] - losses[i]) / (log(lrs[i + 1]) - log(lrs[i]));
        if (slope < best_slope) best_slope = slope, steep = i;
    }
    *out = (lrf_suggestion){first, last, steep, min, lrs[steep], lrs[min]};
    return 0;
}
