/* The sums of duplicate sparse rows (optim__sparse_sum_part, sparse_walk.c),
 * built once per instruction-set level (core/isa.h): each element of a row
 * is summed over its duplicates in their order, lane by lane, so every
 * level gives the same bits. */
#include "optimizer/sparse_walk.h"

/* Rows [u0, u1) of the sum (optim__sparse_sum_part) in T. The positions
 * come in index order, so the source rows are read in random order: the
 * one SUM_AHEAD entries on is prefetched. */
#define SUM_AHEAD 8
#define SUM_ROWS(T)                                                                              \
    static void sum_##T(int64_t rs, const T *raw, const optim__ipos *a, const int64_t *first,    \
                        int64_t u0, int64_t u1, T *vals)                                         \
    {                                                                                            \
        const int64_t end = first[u1];                                                           \
        for (int64_t u = u0; u < u1; u++) {                                                      \
            T *dst = vals + u * rs;                                                              \
            for (int64_t k = first[u]; k < first[u + 1]; k++) {                                  \
                const T *src = raw + a[k].pos * rs;                                              \
                if (k + SUM_AHEAD < end)                                                         \
                    optim__prefetch_bytes((const char *)(raw + a[k + SUM_AHEAD].pos * rs),       \
                                          (size_t)rs * sizeof(T), 0);                            \
                if (k == first[u]) /* zero plus the row: -0 becomes +0, as in a sum from zero */ \
                    for (int64_t j = 0; j < rs; j++) dst[j] = (T)0 + src[j];                     \
                else                                                                             \
                    for (int64_t j = 0; j < rs; j++) dst[j] += src[j];                           \
            }                                                                                    \
        }                                                                                        \
    }
SUM_ROWS(float)
SUM_ROWS(double)


const optim__sum_table OPTIM_ISA_NAME(optim__sum_kernels) = {sum_float, sum_double};
