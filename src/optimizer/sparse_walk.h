/* The sparse modes of the pipeline's update stage (internal): which
 * optim_sparse_mode a sparse gradient runs in, the gradient of one chunk of
 * the dense-equivalent walk, and the split of a lazy update's index list
 * into ranges for the threads. apply.c schedules them; sparse_walk.c. */
#ifndef OPTIM_OPTIMIZER_SPARSE_WALK_H
#define OPTIM_OPTIMIZER_SPARSE_WALK_H

#include "core/isa.h"
#include "optim/optimizer_class.h"

/* An index and its position in the gradient as given. */
typedef struct optim__ipos {
    int64_t idx, pos;
} optim__ipos;

/* Sorts a[0..n) by (idx, pos), given ascending pos and every idx in
 * [0, rows): a stable LSD radix sort, 11 bits of the index per pass (two
 * passes for up to 4M rows), through tmp (n more). O(n) per pass, never
 * O(rows). */
void optim__sparse_sort(optim__ipos *a, optim__ipos *tmp, int64_t n, int64_t rows);

/* The groups of equal indices of a[0..n), sorted as above: the unique
 * indices into idx (ascending), the start of each group in a into first
 * (first[count] = n). Returns count. */
int64_t optim__sparse_groups(const optim__ipos *a, int64_t n, int64_t *idx, int64_t *first);

/* Part k of `parts` equal parts of the de-duplicated rows, of the `count`
 * groups: row u of vals is zero plus the rows a[first[u]] ... a[first[u +
 * 1] - 1] of raw (positions in the gradient as given), added in that
 * order (tf.math.unsorted_segment_sum); rows of rs elements of float32
 * (dt OPTIM_F32) or float64. Each row is summed by one part alone, so any
 * split gives the same bits. */
void optim__sparse_sum_part(optim_dtype dt, int64_t rs, const void *raw, const optim__ipos *a,
                            const int64_t *first, int64_t count, int parts, int k, void *vals);

/* The row sums behind it, once per instruction-set level (sparse_sum.c). */
typedef struct optim__sum_table {
    void (*sum_float)(int64_t rs, const float *raw, const optim__ipos *a, const int64_t *first,
                      int64_t u0, int64_t u1, float *vals);
    void (*sum_double)(int64_t rs, const double *raw, const optim__ipos *a, const int64_t *first,
                       int64_t u0, int64_t u1, double *vals);
} optim__sum_table;
OPTIM__ISA_DECLARE(optim__sum_table, optim__sum_kernels);

#if defined(__GNUC__) || defined(__clang__)
#define OPTIM__PREFETCH(p, rw) __builtin_prefetch((p), (rw), 3)
#else
#define OPTIM__PREFETCH(p, rw) ((void)(p))
#endif

/* Every cache line of the n bytes at p (64-byte lines). */
static inline void optim__prefetch_bytes(const char *p, size_t n, int write)
{
    for (size_t b = 0; b < n; b += 64) {
        if (write) OPTIM__PREFETCH(p + b, 1);
        else OPTIM__PREFETCH(p + b, 0);
    }
}

/* The first j in [0, n) with idx[j] >= row (idx ascending), n if none. */
int64_t optim__sparse_lower_bound(const int64_t *idx, int64_t n, int64_t row);

/* The mode u runs in for class cls (optim_class.sparse_mode, resolved as
 * its comment says). */
optim_sparse_mode optim__sparse_mode(const optim_class *cls, const optim_sparse_update *u);

/* Elements [off, off + len) (len <= OPTIM__CHUNK) of the dense equivalent
 * of u's rows (unique ascending indices): the summed row where an index
 * points, zero elsewhere. Returns a shared read-only zero chunk when no
 * indexed row meets the range, else buf (len elements of u->dtype), filled. */
const void *optim__sparse_chunk_grad(const optim_sparse_update *u, int64_t off, int64_t len,
                                     void *buf);

/* How many ranges a lazy update of n unique indices of row_size elements
 * is split into on nthreads threads: about one per OPTIM__CHUNK elements
 * of gradient, at most nthreads, at least 1. */
int64_t optim__sparse_pieces(int64_t n, int64_t row_size, int nthreads);

/* Indices per apply_sparse call of a lazy range, and how many indices
 * ahead of the call the rows it will touch are prefetched. */
#define OPTIM__SPARSE_BATCH 8
#define OPTIM__SPARSE_AHEAD 16

/* apply(u) on indices [j0, j1) of the de-duplicated list idx / vals, in
 * batches of OPTIM__SPARSE_BATCH (u->indices, u->values and u->n set to
 * each batch), after prefetching the rows of bases[0..nbases) (the
 * variable and its slots of the variable's shape and dtype) that the next
 * OPTIM__SPARSE_AHEAD indices name. A lazy update touches rows scattered
 * over a table far larger than the caches; one call per range left each
 * row's loads waiting on memory in turn. */
void optim__sparse_rows_apply(optim_sparse_update *u, const int64_t *idx, const void *vals,
                              int64_t j0, int64_t j1, void *const *bases, int nbases,
                              void (*apply)(const optim_sparse_update *));

/* How many row ranges a walk of every row (OPTIM_SPARSE_ALL_ROWS) of rows
 * rows of row_size elements takes: about one per OPTIM__CHUNK elements, at
 * least 1 (at most 2 * optim__nchunks(rows * row_size) + 1). */
int64_t optim__sparse_row_ranges(int64_t rows, int64_t row_size);

/* Row range k of such a walk of u: rows [*r0, *r1) and the indices among
 * u's that fall in it, [*j0, *j1). */
void optim__sparse_row_range(const optim_sparse_update *u, int64_t k, int64_t *j0, int64_t *j1,
                             int64_t *r0, int64_t *r1);

/* Range k of `pieces` equal ranges of u's index list: indices [*j0, *j1),
 * and the rows it owns, [*r0, *r1): from its first index up to the next
 * range's first, the first range from row 0, the last to u->rows. The
 * ranges' rows cover every row once (for per-row work such as weight
 * decay). */
void optim__sparse_piece(const optim_sparse_update *u, int64_t pieces, int64_t k, int64_t *j0,
                         int64_t *j1, int64_t *r0, int64_t *r1);

#endif
