/* Sparse gradients on half-precision variables: the class's float32 sparse
 * rule on widened rows, rounded back once (half_sparse.h). */
#include "optimizer/half_sparse.h"

#include "core/half.h"
#include "core/parallel.h"
#include "optimizer/half_step.h"
#include "optimizer/sparse_walk.h"

/* 64 bytes more than asked, as vectorised loops may expect. */
static void *reserve(optim__arena *a, size_t bytes) { return optim__arena_alloc(a, bytes + 64); }

/* Rows of a lazy batch for n unique indices: OPTIM__SPARSE_BATCH, or fewer
 * when fewer rows are touched (a step costs what it touches, even in
 * scratch: one index into a table of long rows needs one row). */
static int64_t batch_rows(int64_t n)
{
    return n >= OPTIM__SPARSE_BATCH ? OPTIM__SPARSE_BATCH : n > 0 ? n : 1;
}

size_t optim__half_sparse_range_floats(int64_t n, int64_t row_size, int nslots)
{
    /* A row range: about a chunk, or one row; a lazy batch: batch_rows rows. */
    const int64_t batch = batch_rows(n) * row_size,
                  per = batch > OPTIM__CHUNK ? batch : OPTIM__CHUNK;
    return (size_t)(1 + nslots) * (size_t)per;
}

int optim__half_sparse_reserve(optim__arena *a, optim__half_sparse *b, int64_t n, int64_t raw_n,
                               int64_t row_size, int nslots, int remap)
{
    b->rows = reserve(a, (size_t)(1 + nslots) * (size_t)(n * row_size) * sizeof(float));
    b->iota = reserve(a, (size_t)n * sizeof *b->iota);
    b->remap = remap ? reserve(a, (size_t)raw_n * sizeof *b->remap) : NULL;
    if (!b->rows || !b->iota || (remap && !b->remap)) return OPTIM_ENOMEM;
    for (int64_t k = 0; k < n; k++) b->iota[k] = k;
    return OPTIM_OK;
}

/* The variable (base 0) and slot k (base k + 1) of j's update. */
static void *base_of(const optim__half_sparse_job *j, int k)
{
    return k == 0 ? j->u.param : j->u.slots[k - 1];
}

/* Elements [a, b) of the half array p, decayed in float32 and rounded once. */
static void decay_span(const optim__half_sparse_job *j, void *p, int64_t a, int64_t b)
{
    float buf[OPTIM__HALF_BLOCK];
    const size_t es = optim_dtype_size(j->u.dtype);
    for (int64_t off = a; off < b; off += OPTIM__HALF_BLOCK) {
        const int64_t m = b - off < OPTIM__HALF_BLOCK ? b - off : OPTIM__HALF_BLOCK;
        char *at = (char *)p + (size_t)off * es;
        optim__half_load(j->u.dtype, at, buf, m);
        optim__decay(OPTIM_F32, buf, m, j->wd, j->lr);
        optim__half_store_stream(j->u.opt, j->entry, j->u.dtype, 0, buf, at, off, m);
    }
}

/* Rows [r0, r1) of the variable other than the indices idx[j0, j1), decayed
 * (Keras 3 decays every row of a sparse update's variable). */
static void decay_gaps(const optim__half_sparse_job *j, int64_t j0, int64_t j1, int64_t r0,
                       int64_t r1)
{
    if (j->wd == 0) return;
    const int64_t rs = j->u.row_size;
    int64_t row = r0;
    for (int64_t q = j0; q < j1; q++) {
        decay_span(j, j->u.param, row * rs, j->u.indices[q] * rs);
        row = j->u.indices[q] + 1;
    }
    decay_span(j, j->u.param, row * rs, r1 * rs);
}

/* Rows idx[0, n) of the variable and its slots into (to != 0) or out of
 * buf: the variable's rows first, each slot's `stride` floats on. */
static void move_rows(const optim__half_sparse_job *j, const int64_t *idx, int64_t n, float *rows,
                      int64_t stride, int to)
{
    const int64_t rs = j->u.row_size;
    const size_t es = optim_dtype_size(j->u.dtype);
    for (int k = 0; k <= j->u.nslots; k++) {
        float *buf = rows + (size_t)k * (size_t)stride;
        char *base = base_of(j, k);
        for (int64_t q = 0; q < n; q++) {
            char *row = base + (size_t)(idx[q] * rs) * es;
            if (to) optim__half_load(j->u.dtype, row, buf + q * rs, rs);
            else
                optim__half_store_stream(j->u.opt, j->entry, j->u.dtype, k, buf + q * rs, row,
                                         idx[q] * rs, rs);
        }
    }
}

/* j's update on the float32 rows in buf (the variable's, then each
 * slot's `stride` floats on): stride / row_size rows, indices 0 .. n - 1;
 * slots holds the slot pointers. */
static optim_sparse_update on_rows(const optim__half_sparse_job *j, float *buf, int64_t stride,
                                   void **slots)
{
    optim_sparse_update u = j->u;
    u.dtype = OPTIM_F32;
    u.param = buf;
    for (int k = 0; k < u.nslots; k++) slots[k] = buf + (size_t)(k + 1) * (size_t)stride;
    u.slots = slots;
    u.rows = stride / (j->u.row_size > 0 ? j->u.row_size : 1);
    u.indices = j->b->iota;
    return u;
}

/* apply_sparse on the unique indices [at, at + n) (n <= batch_rows),
 * their rows loaded into the per-thread buf and stored back after. */
static void rows_update(const optim__half_sparse_job *j, int64_t at, int64_t n, float *buf)
{
    const int64_t rs = j->u.row_size, stride = batch_rows(j->u.n) * rs;
    move_rows(j, j->u.indices + at, n, buf, stride, 1);
    if (j->wd != 0) optim__decay(OPTIM_F32, buf, n * rs, j->wd, j->lr);
    void *slots[OPTIM_MAX_SLOTS];
    optim_sparse_update u = on_rows(j, buf, stride, slots);
    u.n = n;
    u.values = (const float *)j->u.values + at * rs;
    j->u.opt->cls.apply_sparse(&u);
    move_rows(j, j->u.indices + at, n, buf, stride, 0);
}

/* optim__sparse_rows_apply's callback: u is the first member. */
typedef struct rows_ctx {
    optim_sparse_update u;
    const optim__half_sparse_job *j;
    float *buf;
} rows_ctx;

static void rows_batch(const optim_sparse_update *u)
{
    const rows_ctx *c = (const rows_ctx *)(const void *)u;
    rows_update(c->j, u->indices - c->j->u.indices, u->n, c->buf);
}

void optim__half_sparse_rows(const optim__half_sparse_job *j, int64_t pieces, int64_t k,
                             float *scratch)
{
    int64_t j0, j1, r0, r1;
    optim__sparse_piece(&j->u, pieces, k, &j0, &j1, &r0, &r1);
    decay_gaps(j, j0, j1, r0, r1);
    rows_ctx c = {j->u, j, scratch};
    void *bases[1 + OPTIM_MAX_SLOTS];
    for (int b = 0; b <= j->u.nslots; b++) bases[b] = base_of(j, b);
    optim__sparse_rows_apply(&c.u, j->u.indices, j->u.values, j0, j1, bases, 1 + j->u.nslots,
                             rows_batch);
}

void optim__half_sparse_range(const optim__half_sparse_job *j, int64_t k, float *scratch)
{
    int64_t j0, j1, r0, r1;
    optim__sparse_row_range(&j->u, k, &j0, &j1, &r0, &r1);
    const int64_t rs = j->u.row_size, cnt = (r1 - r0) * rs;
    const size_t at = (size_t)(r0 * rs) * optim_dtype_size(j->u.dtype);
    void *slots[OPTIM_MAX_SLOTS];
    optim_sparse_update u = j->u;
    for (int b = 0; b <= u.nslots; b++)
        optim__half_load(u.dtype, (char *)base_of(j, b) + at, scratch + b * cnt, cnt);
    if (j->wd != 0) optim__decay(OPTIM_F32, scratch, cnt, j->wd, j->lr);
    for (int64_t q = j0; q < j1; q++) j->rebased[q] = j->u.indices[q] - r0;
    for (int b = 0; b < u.nslots; b++) slots[b] = scratch + (b + 1) * cnt;
    u.dtype = OPTIM_F32;
    u.param = scratch;
    u.slots = slots;
    u.rows = r1 - r0;
    u.indices = j->rebased + j0;
    u.n = j1 - j0;
    u.values = (const float *)j->u.values + j0 * rs;
    j->u.opt->cls.apply_sparse(&u);
    for (int b = 0; b <= j->u.nslots; b++)
        optim__half_store_stream(j->u.opt, j->entry, j->u.dtype, b, scratch + b * cnt,
                                 (char *)base_of(j, b) + at, r0 * rs, cnt);
}

/* The duplicates hook (when the class has one) on u with the rows as
 * given, their indices mapped by remap (NULL: u's indices are the
 * variable's rows); returns whether it did the update. */
static int duplicates(const optim__half_sparse_job *j, const optim_sparse_update *u,
                      const int64_t *remap)
{
    const optim_class *cls = &j->u.opt->cls;
    if (!cls->apply_sparse_duplicate_indices) return 0;
    optim_sparse_update raw = *u;
    raw.indices = remap ? remap : j->raw_idx;
    raw.n = j->raw_n;
    raw.values = j->b->raw;
    return cls->apply_sparse_duplicate_indices(&raw) != OPTIM_SPARSE_DEFAULT;
}

/* OPTIM_SPARSE_WHOLE on the variable and its slots (of any shape)
 * widened whole. */
static void whole_variable(const optim__half_sparse_job *j, float *buf)
{
    const optim_optimizer *opt = j->u.opt;
    const int64_t numel = j->entry->numel;
    optim_sparse_update u = j->u;
    void *slots[OPTIM_MAX_SLOTS];
    int64_t n[1 + OPTIM_MAX_SLOTS];
    float *at[1 + OPTIM_MAX_SLOTS];
    at[0] = buf;
    n[0] = numel;
    float *p = buf + 2 * numel; /* the layout of optim__half_whole_floats: param, gradient, slots */
    for (int k = 1; k <= u.nslots; k++) {
        n[k] = optim_var_numel(opt->slots[j->entry->slot_ids[k - 1]].var);
        at[k] = p;
        slots[k - 1] = p;
        p += n[k];
    }
    for (int k = 0; k <= u.nslots; k++) optim__half_load(u.dtype, base_of(j, k), at[k], n[k]);
    if (j->wd != 0) optim__decay(OPTIM_F32, buf, numel, j->wd, j->lr);
    u.dtype = OPTIM_F32;
    u.param = buf;
    u.slots = slots;
    if (!duplicates(j, &u, NULL)) opt->cls.apply_sparse(&u);
    for (int k = 0; k <= u.nslots; k++)
        optim__half_store_stream(opt, j->entry, j->u.dtype, k, at[k], base_of(j, k), 0, n[k]);
}

void optim__half_sparse_whole(const optim__half_sparse_job *j, float *whole)
{
    if (whole) {
        whole_variable(j, whole);
        return;
    }
    const int64_t stride = j->u.n * j->u.row_size;
    decay_gaps(j, 0, j->u.n, 0, j->u.rows);
    move_rows(j, j->u.indices, j->u.n, j->b->rows, stride, 1);
    if (j->wd != 0) optim__decay(OPTIM_F32, j->b->rows, stride, j->wd, j->lr);
    void *slots[OPTIM_MAX_SLOTS];
    optim_sparse_update u = on_rows(j, j->b->rows, stride, slots);
    if (j->b->remap)
        for (int64_t q = 0; q < j->raw_n; q++)
            j->b->remap[q] = optim__sparse_lower_bound(j->u.indices, j->u.n, j->raw_idx[q]);
    if (!duplicates(j, &u, j->b->remap)) j->u.opt->cls.apply_sparse(&u);
    move_rows(j, j->u.indices, j->u.n, j->b->rows, stride, 0);
}
