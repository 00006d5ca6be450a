/* What the bench programs share: sorting and the median of timings.
 * Header-only (static inline functions), so each bench stays one source file. */
#ifndef OPTIM_BENCH_UTIL_H
#define OPTIM_BENCH_UTIL_H

#include <stdlib.h>

/* qsort comparator for doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0..n) and returns its median (the mean of the middle two for an
 * even n). */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
