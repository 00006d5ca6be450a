/* Sparse gradients on half-precision variables (internal;
 * docs/half-precision.md).
 *
 * The rows of a sparse gradient on an F16 or BF16 variable are widened to
 * float32 (after any fused clipping) and their duplicates summed in
 * float32 (apply.c's dedup), so the class's float32 sparse rule sees what
 * it would see on a float32 copy of the widened state. Each mode then runs
 * the class's float32 rule on float32 scratch and rounds each stored value
 * once:
 *
 *  - OPTIM_SPARSE_DENSE (not here: apply.c): a chunk's gradient is built in
 *    float32 (zero where no index points) and the chunk runs through the
 *    dense half runner, optim__half_run_dense (half_step.h);
 *  - OPTIM_SPARSE_ROWS: each batch of indexed rows of the variable and its
 *    slots is gathered into per-thread scratch (it stays in the L1 cache),
 *    apply_sparse runs on it as a variable of OPTIM__SPARSE_BATCH rows
 *    (fewer when the step touches fewer; indices 0 .. n - 1), and the rows
 *    are scattered back;
 *  - OPTIM_SPARSE_ALL_ROWS: a row range is widened whole into per-thread
 *    scratch and given to apply_sparse as a variable of its own;
 *  - OPTIM_SPARSE_WHOLE: an element-wise class whose sparse_mode hook
 *    asked for it gets all the unique rows gathered (the duplicates hook
 *    gets the rows as given, their indices mapped into the buffer); a
 *    class without the hook (its one call may touch any row) or one that
 *    is not element-wise gets the whole variable and all its slots widened
 *    (the pipeline's whole-variable scratch).
 *
 * Keras 3's decoupled weight decay (a sparse update decays the whole
 * variable) is applied in float32 before the update: rows without an index
 * are widened, decayed and rounded once. */
#ifndef OPTIM_OPTIMIZER_HALF_SPARSE_H
#define OPTIM_OPTIMIZER_HALF_SPARSE_H

#include "optimizer/impl.h"

/* The float32 buffers of one sparse gradient on a half variable, from the
 * optimizer's arena (no allocation in a steady-state step). */
typedef struct optim__half_sparse {
    const float *raw; /* the rows as given, widened (and transformed) */
    float
        *rows; /* element-wise class, one call: n unique rows of the variable, then of each slot */
    int64_t *iota; /* 0 .. n - 1 */
    int64_t *remap; /* with a duplicates hook: each raw index's position among the unique ones */
} optim__half_sparse;

/* One task's view of such a gradient. */
typedef struct optim__half_sparse_job {
    optim_sparse_update u; /* storage dtype, whole variable, unique indices, float32 summed rows */
    const optim__half_sparse *b;
    const optim__var_entry *entry;
    const int64_t *raw_idx; /* the indices as given */
    int64_t raw_n;
    int64_t *rebased; /* OPTIM_SPARSE_ALL_ROWS: room for n indices */
    double wd, lr; /* Keras 3 weight decay (0: none) and the float32 learning rate */
} optim__half_sparse_job;

/* Floats of per-thread scratch a row range of OPTIM_SPARSE_ALL_ROWS or a
 * batch of OPTIM_SPARSE_ROWS needs for n unique indices, rows of row_size
 * elements and nslots slots. */
size_t optim__half_sparse_range_floats(int64_t n, int64_t row_size, int nslots);

/* Reserves b's buffers in the arena for n unique indices of rows of
 * row_size elements, raw_n as given, nslots slots; remap only when the
 * class has a duplicates hook. Returns OPTIM_ENOMEM on failure. */
int optim__half_sparse_reserve(optim__arena *a, optim__half_sparse *b, int64_t n, int64_t raw_n,
                               int64_t row_size, int nslots, int remap);

/* OPTIM_SPARSE_ROWS: range k of `pieces` of the unique indices, in
 * scratch of optim__half_sparse_range_floats floats. */
void optim__half_sparse_rows(const optim__half_sparse_job *j, int64_t pieces, int64_t k,
                             float *scratch);

/* OPTIM_SPARSE_ALL_ROWS: row range k, in scratch of
 * optim__half_sparse_range_floats floats. */
void optim__half_sparse_range(const optim__half_sparse_job *j, int64_t k, float *scratch);

/* OPTIM_SPARSE_WHOLE; whole: the whole-variable scratch
 * (optim__half_whole_floats) when the pipeline reserved it, else NULL (the
 * gathered rows). */
void optim__half_sparse_whole(const optim__half_sparse_job *j, float *whole);

#endif
