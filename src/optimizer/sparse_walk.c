/* The sparse modes of the update stage (sparse_walk.h).
 *
 * The dense-equivalent walk (OPTIM_SPARSE_DENSE) is Keras 3's reading of a
 * sparse gradient: IndexedSlices turned dense, so every element of the
 * variable and its slots goes through the dense rule, with a zero gradient
 * where no index points. The pipeline cuts the variable into the fixed
 * chunks of a dense step and gives each chunk its gradient from here: a
 * shared zero chunk when no indexed row meets it (most chunks of a large
 * table), else a per-thread buffer with the rows copied in and the gaps
 * zeroed. An element-wise rule computes each element from that element
 * alone, so the bits are those of a dense step on the densified gradient,
 * for any chunking and thread count.
 *
 * A lazy update (OPTIM_SPARSE_ROWS) touches only the indexed rows, each on
 * its own, so any split of the unique index list gives the same bits: the
 * list is cut into equal ranges, one per thread at most. A rule that walks
 * every row on its own (OPTIM_SPARSE_ALL_ROWS) gets consecutive ranges of
 * about a chunk of rows each, as variables of their own.
 *
 * A lazy range is given to apply_sparse a few rows at a time, the rows of
 * the next calls prefetched first: the rows are scattered over a table far
 * larger than the caches, and without this each row's loads waited on
 * memory in turn (docs/performance.md, Sparse).
 *
 * De-duplication (apply.c) sorts the indices with their positions by a
 * radix sort whose passes depend on the index bits, not on the table, then
 * sums each group of rows, the groups split over the threads. */
#include "optimizer/sparse_walk.h"

#include <string.h>

#include "core/parallel.h"

/* Zero gradient for any chunk of any dtype (OPTIM__CHUNK doubles). */
static const double zero_chunk[OPTIM__CHUNK];

#define RADIX_BITS 11

void optim__sparse_sort(optim__ipos *a, optim__ipos *tmp, int64_t n, int64_t rows)
{
    int bits = 0;
    while (bits < 63 && (uint64_t)(rows - 1) >> bits) bits++;
    for (int shift = 0; shift < bits; shift += RADIX_BITS) {
        int64_t count[(1 << RADIX_BITS) + 1] = {0};
        for (int64_t k = 0; k < n; k++)
            count[((a[k].idx >> shift) & ((1 << RADIX_BITS) - 1)) + 1]++;
        for (int d = 0; d < 1 << RADIX_BITS; d++) count[d + 1] += count[d];
        for (int64_t k = 0; k < n; k++)
            tmp[count[(a[k].idx >> shift) & ((1 << RADIX_BITS) - 1)]++] = a[k];
        memcpy(a, tmp, (size_t)n * sizeof *a);
    }
}

int64_t optim__sparse_groups(const optim__ipos *a, int64_t n, int64_t *idx, int64_t *first)
{
    int64_t count = 0;
    for (int64_t k = 0; k < n; k++)
        if (k == 0 || a[k].idx != a[k - 1].idx) {
            idx[count] = a[k].idx;
            first[count++] = k;
        }
    first[count] = n;
    return count;
}

/* Start of range k of `pieces` equal ranges of n. */
static int64_t range_start(int64_t n, int64_t pieces, int64_t k)
{
    return (n / pieces) * k + (k < n % pieces ? k : n % pieces);
}

void optim__sparse_sum_part(optim_dtype dt, int64_t rs, const void *raw, const optim__ipos *a,
                            const int64_t *first, int64_t count, int parts, int k, void *vals)
{
    const int64_t u0 = range_start(count, parts, k), u1 = range_start(count, parts, k + 1);
    const optim__sum_table *t = OPTIM__ISA_TABLE(optim__sum_kernels);
    if (dt == OPTIM_F32) t->sum_float(rs, raw, a, first, u0, u1, vals);
    else t->sum_double(rs, raw, a, first, u0, u1, vals);
}

optim_sparse_mode optim__sparse_mode(const optim_class *cls, const optim_sparse_update *u)
{
    if (!cls->apply_sparse) return OPTIM_SPARSE_DENSE; /* element-wise: check.c refused the rest */
    const int mode = cls->sparse_mode ? cls->sparse_mode(u) : OPTIM_SPARSE_WHOLE;
    if ((mode == OPTIM_SPARSE_DENSE || mode == OPTIM_SPARSE_ALL_ROWS) &&
        (cls->flags & OPTIM_CLASS_ELEMENTWISE))
        return (optim_sparse_mode)mode;
    return mode == OPTIM_SPARSE_ROWS ? OPTIM_SPARSE_ROWS : OPTIM_SPARSE_WHOLE;
}

int64_t optim__sparse_lower_bound(const int64_t *idx, int64_t n, int64_t row)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (idx[mid] < row) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Rows per range of a walk of every row: about one chunk of elements. */
static int64_t rows_per_range(int64_t row_size)
{
    return row_size >= OPTIM__CHUNK ? 1 : OPTIM__CHUNK / (row_size > 0 ? row_size : 1);
}

const void *optim__sparse_chunk_grad(const optim_sparse_update *u, int64_t off, int64_t len,
                                     void *buf)
{
    const int64_t rs = u->row_size, end = off + len;
    if (rs <= 0 || len <= 0) return zero_chunk;
    int64_t j = optim__sparse_lower_bound(u->indices, u->n, off / rs);
    if (j == u->n || u->indices[j] * rs >= end) return zero_chunk;
    const size_t es = optim_dtype_size(u->dtype);
    char *out = buf;
    int64_t done = off; /* elements of the range written so far end here */
    for (; j < u->n && u->indices[j] * rs < end; j++) {
        const int64_t a = u->indices[j] * rs > off ? u->indices[j] * rs : off;
        const int64_t b = u->indices[j] * rs + rs < end ? u->indices[j] * rs + rs : end;
        if (a > done) memset(out + (size_t)(done - off) * es, 0, (size_t)(a - done) * es);
        memcpy(out + (size_t)(a - off) * es,
               (const char *)u->values + (size_t)(j * rs + (a - u->indices[j] * rs)) * es,
               (size_t)(b - a) * es);
        done = b;
    }
    if (end > done) memset(out + (size_t)(done - off) * es, 0, (size_t)(end - done) * es);
    return buf;
}

int64_t optim__sparse_pieces(int64_t n, int64_t row_size, int nthreads)
{
    int64_t p = n / rows_per_range(row_size);
    if (p > nthreads) p = nthreads;
    return p < 1 ? 1 : p;
}

void optim__sparse_rows_apply(optim_sparse_update *u, const int64_t *idx, const void *vals,
                              int64_t j0, int64_t j1, void *const *bases, int nbases,
                              void (*apply)(const optim_sparse_update *))
{
    const size_t rb = (size_t)u->row_size * optim_dtype_size(u->dtype);
    int64_t ahead = j0; /* rows of idx[j0, ahead) are prefetched */
    for (int64_t j = j0; j < j1; j += OPTIM__SPARSE_BATCH) {
        const int64_t e = j1 - j > OPTIM__SPARSE_BATCH ? j + OPTIM__SPARSE_BATCH : j1;
        for (const int64_t to = j1 - e > OPTIM__SPARSE_AHEAD ? e + OPTIM__SPARSE_AHEAD : j1;
             ahead < to; ahead++)
            for (int b = 0; b < nbases; b++)
                optim__prefetch_bytes((const char *)bases[b] + (size_t)idx[ahead] * rb, rb, 1);
        u->indices = idx + j;
        u->n = e - j;
        u->values = (const char *)vals + (size_t)j * rb;
        apply(u);
    }
}

int64_t optim__sparse_row_ranges(int64_t rows, int64_t row_size)
{
    const int64_t per = rows_per_range(row_size), r = rows / per + (rows % per != 0);
    return r < 1 ? 1 : r;
}

void optim__sparse_row_range(const optim_sparse_update *u, int64_t k, int64_t *j0, int64_t *j1,
                             int64_t *r0, int64_t *r1)
{
    const int64_t per = rows_per_range(u->row_size);
    *r0 = k * per < u->rows ? k * per : u->rows;
    *r1 = u->rows - *r0 > per ? *r0 + per : u->rows;
    *j0 = optim__sparse_lower_bound(u->indices, u->n, *r0);
    *j1 = optim__sparse_lower_bound(u->indices, u->n, *r1);
}

void optim__sparse_piece(const optim_sparse_update *u, int64_t pieces, int64_t k, int64_t *j0,
                         int64_t *j1, int64_t *r0, int64_t *r1)
{
    *j0 = range_start(u->n, pieces, k);
    *j1 = range_start(u->n, pieces, k + 1);
    *r0 = k == 0 ? 0 : u->indices[*j0];
    *r1 = k == pieces - 1 ? u->rows : u->indices[*j1];
}
