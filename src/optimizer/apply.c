/* apply_gradients: the pipeline (docs/architecture.md), one named stage per
 * step of the design (stage 1, validation, is in check.c):
 *
 *  1 validate every pair (nothing changes on error)   5 create missing slots
 *  2 skip absent gradients                            6 prepare, once per dtype
 *  3 aggregate across replicas                        7 update, threaded
 *  4 clip and transform                               8 constrain; iterations += 1
 *
 * Keras 3's base options (keras3_options.c) join in: gradients are divided by
 * loss_scale_factor after 3 (fused into 4's pass); with
 * gradient_accumulation_steps a call either only accumulates (no 4, 6, 7) or
 * replaces the gradients by their mean before 4; after 7 the accumulators
 * are reset and the moving averages (use_ema) updated.
 *
 * optim_step (optim/step.h) runs the same stages with a caller's overrides:
 * another optimizer's aggregator, clip options or transformers, a counter to
 * start from, an inspect function after 3, no constraints or no increment
 * in 8. Wrappers step their inner optimizer that way.
 *
 * Dense gradients are read in place: clipping is fused into the update by
 * transforming each chunk into a small per-thread buffer. Only an aggregator,
 * inspect function or user transformer (which may change gradients) makes the
 * step copy them. Buffers come from the optimizer's arena, reused from step
 * to step. Work is cut into the fixed chunks of core/parallel.h, and every
 * reduction adds fixed partial sums in a fixed order, so results are bitwise
 * identical for any number of threads. */
#include "optimizer/half_sparse.h"
#include "optimizer/half_step.h"
#include "optimizer/impl.h"
#include "optimizer/keras3_options.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/parallel.h"
#include "optimizer/multi_tensor.h"
#include "optimizer/sparse_walk.h"

typedef struct clip_desc {
    double unscale; /* loss_scale_factor to divide by first; 0 for none */
    int has_cv;
    double cv;
    int mode; /* 0 none, 1 clipnorm (x*c/max(n,c)), 2 global (x*scale) */
    double c; /* clipnorm */
    double norm; /* this gradient's norm after clipvalue (mode 1) */
    double scale; /* global factor (mode 2), per dtype at use */
} clip_desc;

typedef struct work {
    optim_var *var;
    void *data; /* var's, and whether it has a constraint: read once, in stage 2 */
    int constrained;
    optim__var_entry *entry;
    optim_grad_kind kind;
    optim_dtype dtype;
    int64_t numel;
    const void *grad; /* dense */
    const int64_t *raw_idx; /* sparse, as given */
    const void *raw_vals;
    int64_t raw_n;
    int64_t *idx; /* sparse, unique ascending (after dedup) */
    void *vals;
    int64_t n;
    int64_t rows, row_size;
    int fused; /* dense: transform per chunk while updating */
    optim_sparse_mode mode; /* sparse: how stage 7 runs it (sparse_walk.h) */
    int64_t *rebased; /* OPTIM_SPARSE_ALL_ROWS: idx relative to each range's first row */
    optim__half_sparse hs; /* sparse on a half variable: float32 rows and buffers (half_sparse.h) */
    double wd; /* Keras 3 weight decay factor, 0 for none */
    clip_desc clip;
} work;

typedef struct task {
    size_t w;
    int64_t off, count; /* element range (dense, or OPTIM_SPARSE_DENSE); OPTIM_SPARSE_ROWS:
                                      range `off` of `count` ranges of the indices; OPTIM_SPARSE_ALL_ROWS:
                                      row range `off` */
} task;

/* One step: the overrides it runs with and its buffers (in opt->arena). */
typedef struct step {
    optim_optimizer *opt;
    const optim_step_options *o;
    const optim_optimizer *agg_src, *clip_src, *tf_src; /* whose options stages 3 and 4 use */
    work *works;
    size_t nworks;
    optim_grad_var *pairs; /* for aggregator, inspect and transformers */
    task *tasks;
    size_t ntasks;
    optim__mt mt; /* stage 7: the tasks and phased variables (multi_tensor.h) */
    void *scratch; /* per thread, one chunk of doubles */
    float *half; /* per thread, OPTIM__HALF_CHUNK_FLOATS (half_step.h) */
    float **
        half_whole; /* per work, a half variable in float32 (non-element-wise, or sparse in one call) */
    float
        *half_range; /* per thread, half_range_floats: lazy and row-range steps of half variables */
    size_t half_range_floats;
    int nthreads;
    optim__k3 k3; /* Keras 3's options for this call */
    optim__k3_grad *k3g; /* the gradients for the accumulation passes */
} step;

/* 64 bytes more than asked, as vectorised loops may expect. */
static void *step_alloc(step *s, size_t bytes)
{
    return bytes > SIZE_MAX - 64 ? NULL : optim__arena_alloc(&s->opt->arena, bytes + 64);
}

static void *step_calloc(step *s, size_t bytes)
{
    void *p = step_alloc(s, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

/* Clip option i (OPTIM__P_CLIP*) of the optimizer whose clipping applies. */
static double clip_option(const step *s, int i)
{
    if (s->clip_src == s->opt) return s->opt->values[i];
    const optim__hyper *h = &s->clip_src->hypers[i]; /* not dynamic: a number or None */
    return h->kind == HYPER_NUMBER ? h->number : NAN;
}

/* ---- sparse de-duplication --------------------------------------------------------- */

static int widen_rows(step *s, work *w);

/* Unique ascending indices; duplicate rows summed in their order of
 * appearance starting from zero (tf.math.unsorted_segment_sum), the rows
 * split over the threads when there are several chunks of them. */
static int dedup(step *s, work *w)
{
    const int64_t n = w->raw_n, rs = w->row_size;
    const optim_dtype vt = optim_compute_dtype(w->dtype); /* half rows are summed in float32 */
    if (vt != w->dtype && widen_rows(s, w)) return OPTIM_ENOMEM;
    optim__ipos *order = step_alloc(s, (size_t)n * sizeof *order),
                *tmp = step_alloc(s, (size_t)n * sizeof *tmp);
    int64_t *first = step_alloc(s, (size_t)(n + 1) * sizeof *first);
    w->idx = step_alloc(s, (size_t)n * sizeof *w->idx);
    w->vals = step_alloc(s, (size_t)n * (size_t)rs * optim_dtype_size(vt));
    if (!order || !tmp || !first || !w->idx || !w->vals) return OPTIM_ENOMEM;
    for (int64_t k = 0; k < n; k++) order[k] = (optim__ipos){w->raw_idx[k], k};
    optim__sparse_sort(order, tmp, n, w->rows);
    const int64_t count = optim__sparse_groups(order, n, w->idx, first);
    const int nt = n * rs >= 4 * OPTIM__CHUNK ? s->nthreads : 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
    optim__sparse_sum_part(vt, rs, vt != w->dtype ? (const void *)w->hs.raw : w->raw_vals, order,
                           first, count, omp_get_num_threads(), omp_get_thread_num(), w->vals);
    w->n = count;
    return OPTIM_OK;
}

/* ---- 4. clipping ---------------------------------------------------------------------- */

/* The loss_scale_factor division, clip_by_value, then clip_by_norm or the
 * global-norm scale, applied in the gradient's own precision (as TF and
 * Keras apply them). */
#define CLIP_CHUNK(T, NAME)                                               \
    static void NAME(const T *src, T *dst, int64_t n, const clip_desc *c) \
    {                                                                     \
        const T cv = (T)c->cv, cn = (T)c->c, nrm = (T)c->norm;            \
        const T denom = nrm > cn ? nrm : cn;                              \
        const T scale = (T)c->scale, us = (T)c->unscale;                  \
        const int unscale = c->unscale != 0;                              \
        for (int64_t i = 0; i < n; i++) {                                 \
            T x = src[i];                                                 \
            if (unscale) x = x / us;                                      \
            if (c->has_cv) x = x < -cv ? -cv : (x > cv ? cv : x);         \
            if (c->mode == 1) x = x * cn / denom;                         \
            else if (c->mode == 2) x = x * scale;                         \
            dst[i] = x;                                                   \
        }                                                                 \
    }
CLIP_CHUNK(float, clip_f32)
CLIP_CHUNK(double, clip_f64)

/* A half-precision gradient is transformed in float32 and rounded once. */
static void clip_run(optim_dtype dt, const void *src, void *dst, int64_t n, const clip_desc *c)
{
    if (dt == OPTIM_F32) clip_f32(src, dst, n, c);
    else if (dt == OPTIM_F64) clip_f64(src, dst, n, c);
    else
        for (int64_t off = 0; off < n; off += 256) {
            float b[256];
            const int64_t m = n - off < 256 ? n - off : 256;
            optim__half_load(dt, (const uint16_t *)src + off, b, m);
            clip_f32(b, b, m, c);
            optim__half_store(dt, b, (uint16_t *)dst + off, m);
        }
}

/* The rows of sparse work w on a half variable, as given, widened to
 * float32 with the pending transform applied (not rounded: as the fused
 * transform of a dense half gradient). */
static int widen_rows(step *s, work *w)
{
    const int64_t n = w->raw_n * w->row_size;
    float *r = step_alloc(s, (size_t)n * sizeof *r);
    if (!r) return OPTIM_ENOMEM;
    optim__half_load(w->dtype, w->raw_vals, r, n);
    if (w->fused) clip_f32(r, r, n, &w->clip);
    w->hs.raw = r;
    return OPTIM_OK;
}

/* Sum of squares after unscaling and clipvalue, accumulated in double (TF
 * accumulates in the gradient's dtype, which overflows to inf for float32
 * norms above about 1.8e19; here the norm is exact to double precision). */
static double sumsq(optim_dtype dt, const void *g, int64_t n, const clip_desc *c)
{
    double s = 0;
    if (dt != OPTIM_F64) {
        const float cv = (float)c->cv, us = (float)c->unscale;
        for (int64_t i = 0; i < n; i++) {
            float v = dt == OPTIM_F32 ? ((const float *)g)[i]
                : dt == OPTIM_F16     ? optim__f16_to_f32(((const uint16_t *)g)[i])
                                      : optim__bf16_to_f32(((const uint16_t *)g)[i]);
            if (c->unscale != 0) v = v / us;
            if (c->has_cv) v = v < -cv ? -cv : (v > cv ? cv : v);
            s += (double)v * v;
        }
    } else {
        const double *x = g;
        for (int64_t i = 0; i < n; i++) {
            double v = x[i];
            if (c->unscale != 0) v = v / c->unscale;
            if (c->has_cv) v = v < -c->cv ? -c->cv : (v > c->cv ? c->cv : v);
            s += v * v;
        }
    }
    return s;
}

/* Global-norm factor clip * min(1/norm, 1/clip), NaN for a non-finite norm,
 * computed in dtype. */
static double global_scale(optim_dtype dt, double norm, double clip)
{
    if (!isfinite(norm)) return NAN;
    if (dt != OPTIM_F64) {
        float n = (float)norm, c = (float)clip, a = 1.0f / n, b = 1.0f / c;
        return c * (a < b ? a : b);
    }
    double a = 1.0 / norm, b = 1.0 / clip;
    return clip * (a < b ? a : b);
}

/* Squared norms of every gradient after unscaling and clipvalue: dense
 * ones by fixed chunks (in parallel, partial sums added in chunk order),
 * sparse ones whole (their rows as given). */
static int grad_norms(step *s, const clip_desc *base, double *norm2)
{
    size_t nchunks = 0;
    for (size_t i = 0; i < s->nworks; i++)
        if (s->works[i].kind == OPTIM_GRAD_DENSE)
            nchunks += (size_t)optim__nchunks(s->works[i].numel);
    task *chunks = step_alloc(s, nchunks * sizeof *chunks);
    double *part = step_alloc(s, nchunks * sizeof *part);
    if (!chunks || !part) return OPTIM_ENOMEM;
    size_t c = 0;
    for (size_t i = 0; i < s->nworks; i++)
        if (s->works[i].kind == OPTIM_GRAD_DENSE)
            OPTIM__FOR_CHUNKS(s->works[i].numel, off, len) chunks[c++] = (task){i, off, len};
#pragma omp parallel for schedule(dynamic, 4) num_threads(s->nthreads)
    for (size_t k = 0; k < nchunks; k++) {
        const work *w = &s->works[chunks[k].w];
        part[k] =
            sumsq(w->dtype, (const char *)w->grad + chunks[k].off * optim_dtype_size(w->dtype),
                  chunks[k].count, base);
    }
    for (size_t k = 0; k < nchunks; k++) norm2[chunks[k].w] += part[k];
    for (size_t i = 0; i < s->nworks; i++)
        if (s->works[i].kind == OPTIM_GRAD_SPARSE)
            norm2[i] = sumsq(s->works[i].dtype, s->works[i].raw_vals,
                             s->works[i].raw_n * s->works[i].row_size, base);
    return OPTIM_OK;
}

/* Gives work w its transform: dense gradients are transformed per chunk
 * while updating; sparse rows as given, duplicates included (tf.clip_by_*
 * on IndexedSlices.values), into a clipped copy proportional to the rows. */
static int set_clip(step *s, work *w, const clip_desc *c)
{
    w->clip = *c;
    if (w->kind != OPTIM_GRAD_SPARSE ||
        optim__is_half(w->dtype)) { /* half rows: when widened (dedup) */
        w->fused = 1;
        return OPTIM_OK;
    }
    void *copy = step_alloc(s, (size_t)(w->raw_n * w->row_size) * optim_dtype_size(w->dtype));
    if (!copy) return OPTIM_ENOMEM;
    clip_run(w->dtype, w->raw_vals, copy, w->raw_n * w->row_size, &w->clip);
    w->raw_vals = copy;
    return OPTIM_OK;
}

/* unscale: Keras 3's loss_scale_factor (0 for none), divided first. */
static int clip_all(step *s, double unscale)
{
    double v[OPTIM__N_BASE];
    for (int i = OPTIM__P_CLIPNORM; i <= OPTIM__P_CLIPVALUE; i++) v[i] = clip_option(s, i);
    /* Keras 3 clips only with a value above 0 (`if self.clipnorm and
     * self.clipnorm > 0`); legacy tf.keras applies whatever is set. */
    const int k3 = s->opt->gen == OPTIM_KERAS3;
#define CLIP_ON(i) (!isnan(v[i]) && (!k3 || v[i] > 0))
    clip_desc base = {0};
    base.unscale = unscale;
    base.has_cv = CLIP_ON(OPTIM__P_CLIPVALUE);
    base.cv = v[OPTIM__P_CLIPVALUE];
    int do_norm = CLIP_ON(OPTIM__P_CLIPNORM), do_global = CLIP_ON(OPTIM__P_GLOBAL_CLIPNORM);
#undef CLIP_ON
    if (!base.has_cv && !do_norm && !do_global && !base.unscale) return OPTIM_OK;
    double *norm2 = step_calloc(s, s->nworks * sizeof *norm2), global = 0;
    if (!norm2 || ((do_norm || do_global) && grad_norms(s, &base, norm2))) return OPTIM_ENOMEM;
    for (size_t i = 0; i < s->nworks; i++) global += norm2[i];
    global = sqrt(global);
    for (size_t i = 0; i < s->nworks; i++) {
        clip_desc c = base;
        if (do_norm) {
            c.mode = 1;
            c.c = v[OPTIM__P_CLIPNORM];
            c.norm = sqrt(norm2[i]);
        } else if (do_global) {
            c.mode = 2;
            c.scale = global_scale(s->works[i].dtype, global, v[OPTIM__P_GLOBAL_CLIPNORM]);
        }
        if (set_clip(s, &s->works[i], &c)) return OPTIM_ENOMEM;
    }
    return OPTIM_OK;
}

/* Applies any pending fused transform in place into owned copies (needed
 * before user functions see the gradients, and for non-element-wise classes). */
static int materialize_dense(step *s, work *w)
{
    size_t bytes = (size_t)w->numel * optim_dtype_size(w->dtype);
    void *copy = step_alloc(s, bytes);
    if (!copy) return OPTIM_ENOMEM;
    if (w->fused) clip_run(w->dtype, w->grad, copy, w->numel, &w->clip);
    else if (bytes) memcpy(copy, w->grad, bytes);
    w->grad = copy;
    w->fused = 0;
    return OPTIM_OK;
}

/* The pending transform of half sparse rows, applied into a copy rounded
 * once (as materialize_dense does), before user functions see them. */
static int materialize_rows(step *s, work *w)
{
    void *copy = step_alloc(s, (size_t)(w->raw_n * w->row_size) * optim_dtype_size(w->dtype));
    if (!copy) return OPTIM_ENOMEM;
    clip_run(w->dtype, w->raw_vals, copy, w->raw_n * w->row_size, &w->clip);
    w->raw_vals = copy;
    w->fused = 0;
    return OPTIM_OK;
}

/* ---- 3/4. user functions over the gradients ------------------------------------------ */

/* Points the work at a (checked) gradient's data, as given. */
static void work_set_grad(work *w, const optim_grad *g)
{
    if (w->kind == OPTIM_GRAD_DENSE) {
        w->grad = g->dense.data;
    } else {
        w->raw_idx = g->sparse.indices;
        w->raw_n = g->sparse.n;
        w->raw_vals = g->sparse.values.data;
    }
}

/* The pair of sparse work w, on copies the functions may change. */
static int sparse_pair(step *s, const work *w, optim_grad_var *p)
{
    const int32_t vr = optim_var_rank(w->var);
    int64_t shape[OPTIM_MAX_RANK];
    memcpy(shape, optim_var_shape(w->var), sizeof(int64_t) * (size_t)vr);
    const int64_t n = w->raw_n;
    shape[0] = n;
    size_t vb = (size_t)(n * w->row_size) * optim_dtype_size(w->dtype);
    int64_t *ic = step_alloc(s, (size_t)n * sizeof *ic);
    void *vc = step_alloc(s, vb);
    if (!ic || !vc) return OPTIM_ENOMEM;
    memcpy(ic, w->raw_idx, (size_t)n * sizeof *ic);
    if (vb) memcpy(vc, w->raw_vals, vb);
    p->grad = optim_grad_sparse(ic, n, optim_tensor_make(w->dtype, vc, vr, shape));
    return OPTIM_OK;
}

static int to_pairs(step *s)
{
    if (!s->pairs && !(s->pairs = step_calloc(s, s->nworks * sizeof *s->pairs)))
        return OPTIM_ENOMEM;
    for (size_t i = 0; i < s->nworks; i++) {
        work *w = &s->works[i];
        optim_grad_var *p = &s->pairs[i];
        p->var = w->var;
        if (w->kind == OPTIM_GRAD_SPARSE) {
            if ((w->fused && materialize_rows(s, w)) || sparse_pair(s, w, p)) return OPTIM_ENOMEM;
            continue;
        }
        if (materialize_dense(s, w)) return OPTIM_ENOMEM;
        p->grad = optim_grad_dense(optim_tensor_make(
            w->dtype, (void *)w->grad, optim_var_rank(w->var), optim_var_shape(w->var)));
    }
    return OPTIM_OK;
}

/* Runs fn over copies of the gradients; what comes back is checked like
 * user input, then becomes the step's. With may_skip, fn may return
 * OPTIM_STEP_SKIP, which is passed on. */
static int run_user_fn(step *s, optim_grad_fn fn, void *user, const char *what, int may_skip,
                       optim_error *err)
{
    optim_optimizer *opt = s->opt;
    int rc = to_pairs(s);
    if (rc) return optim__err(err, rc, "out of memory");
    optim_error local;
    optim__err_clear(&local);
    rc = fn(user, s->pairs, s->nworks, &local);
    if (may_skip && rc == OPTIM_STEP_SKIP) return rc;
    if (rc)
        return optim__err(err, rc < 0 ? rc : OPTIM_EINVAL, "%s: %s failed: %s", opt->cls.name, what,
                          local.msg[0] ? local.msg : optim_strerror(rc));
    for (size_t i = 0; i < s->nworks; i++) {
        optim_grad_var *p = &s->pairs[i];
        if (p->var != s->works[i].var || p->grad.kind != s->works[i].kind)
            return optim__err(err, OPTIM_EINVAL,
                              "%s: %s changed the variable or gradient kind of pair %zu",
                              opt->cls.name, what, i);
        rc = optim__check_pair(opt, opt->cls.name, p, i, err);
        if (rc) return rc;
        work_set_grad(&s->works[i], &p->grad);
    }
    return OPTIM_OK;
}

/* ---- 7. update ---------------------------------------------------------------------------- */

/* The update of elements [off, off + count) of w with gradient g, as
 * apply_dense sees it; slots holds the slot pointers. */
static optim_dense_update dense_view(step *s, const work *w, int64_t off, int64_t count,
                                     const void *g, void **slots)
{
    optim_optimizer *opt = s->opt;
    const size_t at = (size_t)off * optim_dtype_size(w->dtype);
    for (int k = 0; k < w->entry->nown; k++) slots[k] = (char *)w->entry->slot_data[k] + at;
    return (optim_dense_update){opt,
                                w->var,
                                w->dtype,
                                off,
                                count,
                                (char *)w->data + at,
                                g,
                                slots,
                                w->entry->nown,
                                opt->coef[w->dtype == OPTIM_F64],
                                opt->hook_iterations};
}

/* apply_dense on elements [off, off + count) of w with gradient g. */
static void dense_update(step *s, const work *w, int64_t off, int64_t count, const void *g)
{
    void *slots[OPTIM_MAX_SLOTS];
    const optim_dense_update u = dense_view(s, w, off, count, g, slots);
    s->opt->cls.apply_dense(&u);
}

/* optim__half_run's transform: w's fused clipping, on a widened block. */
static void clip_block(const void *clip, float *g, int64_t n) { clip_f32(g, g, n, clip); }

/* A half-precision run (half_step.h) of elements [t->off, t->off +
 * t->count) of w: with g32, the chunk of a sparse gradient's dense
 * equivalent (float32, its rows transformed when widened), else w's dense
 * gradient, widened and transformed per block. */
static void run_half(step *s, const work *w, const task *t, int tid, const float *g32)
{
    void *slots[OPTIM_MAX_SLOTS];
    const void *g =
        g32 ? NULL : (const char *)w->grad + (size_t)t->off * optim_dtype_size(w->dtype);
    const optim_dense_update h = dense_view(s, w, t->off, t->count, g, slots);
    const int whole = !(s->opt->cls.flags & OPTIM_CLASS_ELEMENTWISE);
    const optim__half_run r = {w->entry,
                               whole ? s->half_whole[t->w]
                                     : s->half + (size_t)tid * OPTIM__HALF_CHUNK_FLOATS,
                               whole,
                               g32,
                               w->fused && !g32 ? clip_block : NULL,
                               &w->clip,
                               w->wd,
                               optim_learning_rate(s->opt, OPTIM_F32)};
    optim__half_run_dense(&h, &r);
}

static void *thread_chunk(step *s, int tid)
{
    return (char *)s->scratch + (size_t)tid * OPTIM__CHUNK * sizeof(double);
}

static void run_dense(step *s, const work *w, const task *t, int tid)
{
    if (optim__is_half(w->dtype)) {
        run_half(s, w, t, tid, NULL);
        return;
    }
    const void *g = (const char *)w->grad + (size_t)t->off * optim_dtype_size(w->dtype);
    if (w->fused) {
        clip_run(w->dtype, g, thread_chunk(s, tid), t->count, &w->clip);
        g = thread_chunk(s, tid);
    }
    dense_update(s, w, t->off, t->count, g);
}

/* The sparse update of w as apply_sparse sees it (de-duplicated); slots
 * holds the slot pointers. */
static optim_sparse_update sparse_view(step *s, const work *w, void **slots)
{
    optim_optimizer *opt = s->opt;
    for (int k = 0; k < w->entry->nown; k++) slots[k] = w->entry->slot_data[k];
    return (optim_sparse_update){opt,
                                 w->var,
                                 w->dtype,
                                 w->rows,
                                 w->row_size,
                                 w->data,
                                 slots,
                                 w->entry->nown,
                                 w->idx,
                                 w->n,
                                 w->vals,
                                 opt->coef[w->dtype == OPTIM_F64],
                                 opt->hook_iterations};
}

/* The variable of sparse work w and its slots of its shape and dtype,
 * whose rows a lazy update touches (to prefetch); returns how many. */
static int row_bases(step *s, const work *w, void **bases)
{
    int n = 0;
    bases[n++] = w->data;
    for (int k = 0; k < w->entry->nown; k++) {
        optim_var *v = s->opt->slots[w->entry->slot_ids[k]].var;
        if (optim_var_numel(v) == w->numel && optim_var_dtype(v) == w->dtype)
            bases[n++] = optim_var_data(v);
    }
    return n;
}

/* Turns u (whose slot pointers are slots) into row range k of a walk of
 * every row: a variable of its own, its indices rebased into w->rebased. */
static void all_rows_range(const work *w, optim_sparse_update *u, void **slots, int64_t k)
{
    int64_t j0, j1, r0, r1;
    optim__sparse_row_range(u, k, &j0, &j1, &r0, &r1);
    const size_t es = optim_dtype_size(w->dtype), at = (size_t)(r0 * w->row_size) * es;
    for (int i = 0; i < u->nslots; i++) slots[i] = (char *)slots[i] + at;
    for (int64_t j = j0; j < j1; j++) w->rebased[j] = w->idx[j] - r0;
    u->param = (char *)u->param + at;
    u->rows = r1 - r0;
    u->indices = w->rebased + j0;
    u->n = j1 - j0;
    u->values = (const char *)w->vals + (size_t)(j0 * w->row_size) * es;
}

/* One task of sparse work w on a half variable (half_sparse.h). */
static void run_half_sparse(step *s, const work *w, const task *t, int tid)
{
    void *slots[OPTIM_MAX_SLOTS];
    optim_sparse_update u = sparse_view(s, w, slots);
    if (w->mode == OPTIM_SPARSE_DENSE) {
        u.dtype = OPTIM_F32; /* the chunk's gradient, from the rows summed in float32 */
        run_half(s, w, t, tid,
                 optim__sparse_chunk_grad(&u, t->off, t->count, thread_chunk(s, tid)));
        return;
    }
    const optim__half_sparse_job j = {
        u,        &w->hs,     w->entry, w->raw_idx,
        w->raw_n, w->rebased, w->wd,    optim_learning_rate(s->opt, OPTIM_F32)};
    if (w->mode == OPTIM_SPARSE_ROWS)
        optim__half_sparse_rows(&j, t->count, t->off,
                                s->half_range + (size_t)tid * s->half_range_floats);
    else if (w->mode == OPTIM_SPARSE_ALL_ROWS)
        optim__half_sparse_range(&j, t->off, s->half_range + (size_t)tid * s->half_range_floats);
    else optim__half_sparse_whole(&j, s->half_whole ? s->half_whole[t->w] : NULL);
}

/* One task of sparse work w in its mode (sparse_walk.h). */
static void run_sparse(step *s, const work *w, const task *t, int tid)
{
    optim_optimizer *opt = s->opt;
    if (optim__is_half(w->dtype)) {
        run_half_sparse(s, w, t, tid);
        return;
    }
    void *slots[OPTIM_MAX_SLOTS];
    optim_sparse_update u = sparse_view(s, w, slots);
    if (w->mode == OPTIM_SPARSE_DENSE) {
        dense_update(s, w, t->off, t->count,
                     optim__sparse_chunk_grad(&u, t->off, t->count, thread_chunk(s, tid)));
        return;
    }
    if (w->mode == OPTIM_SPARSE_ROWS) {
        int64_t j0, j1, r0, r1;
        optim__sparse_piece(&u, t->count, t->off, &j0, &j1, &r0, &r1);
        void *bases[1 + OPTIM_MAX_SLOTS];
        optim__sparse_rows_apply(&u, w->idx, w->vals, j0, j1, bases, row_bases(s, w, bases),
                                 opt->cls.apply_sparse);
        return;
    }
    if (w->mode == OPTIM_SPARSE_ALL_ROWS) {
        all_rows_range(w, &u, slots, t->off);
        opt->cls.apply_sparse(&u);
        return;
    }
    optim_sparse_update raw = u;
    raw.indices = w->raw_idx;
    raw.n = w->raw_n;
    raw.values = w->raw_vals;
    if (opt->cls.apply_sparse_duplicate_indices &&
        opt->cls.apply_sparse_duplicate_indices(&raw) != OPTIM_SPARSE_DEFAULT)
        return;
    opt->cls.apply_sparse(&u);
}

/* The elements task t of w updates: its chunk, a lazy range's rows, or
 * the whole variable. */
static void task_elements(step *s, const work *w, const task *t, int64_t *off, int64_t *n)
{
    *off = 0;
    *n = w->numel;
    if (w->kind == OPTIM_GRAD_DENSE || w->mode == OPTIM_SPARSE_DENSE) {
        *off = t->off;
        *n = t->count;
    } else if (w->mode != OPTIM_SPARSE_WHOLE) {
        void *slots[OPTIM_MAX_SLOTS];
        optim_sparse_update u = sparse_view(s, w, slots);
        int64_t j0, j1, r0, r1;
        if (w->mode == OPTIM_SPARSE_ROWS)
            optim__sparse_piece(&u, t->count, t->off, &j0, &j1, &r0, &r1);
        else optim__sparse_row_range(&u, t->off, &j0, &j1, &r0, &r1);
        *off = r0 * w->row_size;
        *n = (r1 - r0) * w->row_size;
    }
}

/* The whole variable of work w for the phase hooks, from element 0. */
static optim_phase_update phase_update(step *s, const work *w, void **slots)
{
    optim_optimizer *opt = s->opt;
    for (int k = 0; k < w->entry->nown; k++) slots[k] = w->entry->slot_data[k];
    optim_dense_update d = {opt,
                            w->var,
                            w->dtype,
                            0,
                            w->numel,
                            w->data,
                            w->grad,
                            slots,
                            w->entry->nown,
                            opt->coef[w->dtype == OPTIM_F64],
                            opt->hook_iterations};
    return (optim_phase_update){d, 0, 0, NULL, NULL, 0};
}

/* Chunk t->chunk of a phased variable in pass t->phase (decayed first in
 * pass 0). */
static void run_phase(step *s, const optim__mt_task *t)
{
    const work *w = &s->works[t->item];
    const optim__mt_item *it = &s->mt.items[t->item];
    if (w->wd != 0 && t->phase == 0)
        optim__decay(w->dtype, (char *)w->data + (size_t)t->off * optim_dtype_size(w->dtype),
                     t->count, w->wd, optim_learning_rate(s->opt, w->dtype));
    void *slots[OPTIM_MAX_SLOTS];
    optim_phase_update u = phase_update(s, w, slots);
    u.dense.offset = t->off;
    u.dense.count = t->count;
    u.phase = t->phase;
    u.chunk = t->chunk;
    u.partial = it->partial + (size_t)t->chunk * it->plan.npartial;
    u.shared = it->shared;
    u.user = it->plan.user;
    s->opt->cls.apply_phase(&u);
}

static void run_reduce(void *ctx, size_t item, int phase)
{
    step *s = ctx;
    const optim__mt_item *it = &s->mt.items[item];
    void *slots[OPTIM_MAX_SLOTS];
    optim_phase_update u = phase_update(s, &s->works[item], slots);
    u.phase = phase;
    u.chunk = it->nchunks;
    u.partial = it->partial;
    u.shared = it->shared;
    u.user = it->plan.user;
    s->opt->cls.reduce_phase(&u);
}

static void run_task(step *s, const task *t, int tid);

/* A task of the step's region: one of s->tasks, or a phased chunk. */
static void run_mt_task(void *ctx, const optim__mt_task *t, int tid)
{
    step *s = ctx;
    if (t->chunk < 0) run_task(s, &s->tasks[t->item], tid);
    else run_phase(s, t);
}

/* A task's weight in the batches: its elements when dense, a batch of its
 * own for a sparse piece. */
static int64_t task_weight(void *ctx, size_t k)
{
    const step *s = ctx;
    const task *t = &s->tasks[k];
    return s->works[t->w].kind == OPTIM_GRAD_DENSE ? t->count : OPTIM__CHUNK;
}

static void run_task(step *s, const task *t, int tid)
{
    const work *w = &s->works[t->w];
    if (w->wd != 0 && !optim__is_half(w->dtype)) {
        /* Decoupled weight decay, fused per task (a sparse update decays
         * the whole variable, as Keras 3 does). */
        int64_t off, n;
        task_elements(s, w, t, &off, &n);
        optim__decay(w->dtype, (char *)w->data + (size_t)off * optim_dtype_size(w->dtype), n, w->wd,
                     optim_learning_rate(s->opt, w->dtype));
    }
    if (w->kind == OPTIM_GRAD_DENSE) run_dense(s, w, t, tid);
    else run_sparse(s, w, t, tid);
}

/* Work w's phase plan, checked (a class's plan is user input). */
static int phase_plan(step *s, const work *w, optim_phase_plan *pl, optim_error *err)
{
    memset(pl, 0, sizeof *pl);
    if (!s->opt->cls.phase_plan) return OPTIM_OK;
    s->opt->cls.phase_plan(s->opt, w->var, pl);
    const size_t lim = (size_t)1 << 20;
    if (pl->nphases == 0 ||
        (pl->nphases > 0 && pl->nphases <= OPTIM_MAX_PHASES && pl->chunk >= 1 &&
         pl->npartial <= lim && pl->nshared <= lim))
        return OPTIM_OK;
    return optim__err(
        err, OPTIM_EINVAL,
        "%s: phase_plan for variable '%s' gave nphases %d, chunk %lld, "
        "npartial %zu, nshared %zu; expected nphases 0..%d, chunk >= 1 and at most %zu doubles",
        s->opt->cls.name, optim_var_name(w->var), pl->nphases, (long long)pl->chunk, pl->npartial,
        pl->nshared, OPTIM_MAX_PHASES, lim);
}

/* Dense work of a class that is not element-wise: in phases when its plan
 * has them (no task here), else one whole task. The gradient is
 * transformed in full first. */
static int whole_or_phased(step *s, size_t i, optim__mt_item *it, optim_error *err)
{
    work *w = &s->works[i];
    const int half =
        optim__is_half(w->dtype); /* whole, in float32 scratch (half_step.h), never phased */
    int rc = half ? OPTIM_OK : phase_plan(s, w, &it->plan, err);
    if (rc) return rc;
    if (w->fused && !half && materialize_dense(s, w))
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    if (it->plan.nphases) it->mode = OPTIM__MT_PHASED;
    else s->tasks[s->ntasks++] = (task){i, 0, w->numel};
    return OPTIM_OK;
}

/* The tasks of dense work; room for those of sparse work, which
 * sparse_tasks adds once its mode is known (after stage 6); the phased
 * variables' buffers. */
static int make_tasks(step *s, optim_error *err)
{
    const int elementwise = (s->opt->cls.flags & OPTIM_CLASS_ELEMENTWISE) != 0;
    size_t n = 0;
    for (size_t i = 0; i < s->nworks; i++) {
        const work *w = &s->works[i];
        if (w->kind == OPTIM_GRAD_SPARSE) /* the most any mode needs (sparse_walk.h) */
            n += (size_t)(elementwise ? 2 * optim__nchunks(w->numel) + 1 : 0) + (size_t)s->nthreads;
        else n += elementwise ? (size_t)optim__nchunks(w->numel) : 1;
    }
    s->tasks = step_alloc(s, n * sizeof *s->tasks);
    optim__mt_item *items = step_calloc(s, s->nworks * sizeof *items);
    if (!s->tasks || !items) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    for (size_t i = 0; i < s->nworks; i++) {
        work *w = &s->works[i];
        items[i].numel = w->numel;
        if (w->kind == OPTIM_GRAD_SPARSE) {
            if (elementwise && !(w->rebased = step_alloc(s, (size_t)w->n * sizeof *w->rebased)))
                return optim__err(err, OPTIM_ENOMEM, "out of memory");
        } else if (!elementwise) {
            int rc = whole_or_phased(s, i, &items[i], err);
            if (rc) return rc;
        } else {
            OPTIM__FOR_CHUNKS(w->numel, off, len) s->tasks[s->ntasks++] = (task){i, off, len};
        }
    }
    if (optim__mt_reserve(&s->mt, items, s->nworks, n, &s->opt->arena))
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    return OPTIM_OK;
}

/* Each sparse work's mode (the class's sparse_mode hook, after prepare)
 * and its tasks, in the room make_tasks left. */
static void sparse_tasks(step *s)
{
    for (size_t i = 0; i < s->nworks; i++) {
        work *w = &s->works[i];
        if (w->kind != OPTIM_GRAD_SPARSE) continue;
        void *slots[OPTIM_MAX_SLOTS];
        optim_sparse_update u = sparse_view(s, w, slots);
        w->mode = optim__sparse_mode(&s->opt->cls, &u);
        if (optim__is_half(w->dtype) && !(s->opt->cls.flags & OPTIM_CLASS_ELEMENTWISE))
            w->mode = OPTIM_SPARSE_WHOLE; /* on the whole-variable scratch (half_sparse.h) */
        if (w->mode == OPTIM_SPARSE_DENSE) {
            OPTIM__FOR_CHUNKS(w->numel, off, len) s->tasks[s->ntasks++] = (task){i, off, len};
        } else if (w->mode == OPTIM_SPARSE_ROWS) {
            const int64_t pieces = optim__sparse_pieces(w->n, w->row_size, s->nthreads);
            for (int64_t k = 0; k < pieces; k++) s->tasks[s->ntasks++] = (task){i, k, pieces};
        } else if (w->mode == OPTIM_SPARSE_ALL_ROWS) {
            const int64_t ranges = optim__sparse_row_ranges(w->rows, w->row_size);
            for (int64_t k = 0; k < ranges; k++) s->tasks[s->ntasks++] = (task){i, k, ranges};
        } else {
            s->tasks[s->ntasks++] = (task){i, 0, 1};
        }
    }
}

/* ---- Keras 3's gradient accumulation (keras3_options.c) -------------------------------------- */

/* Unscales sparse rows (as given) and sums their duplicates; then, on an
 * updating call, replaces every gradient by the dense mean over the
 * accumulation steps (in buffers of the step: nothing of the optimizer
 * changes before stage 5). On an accumulating call the gradients stay as
 * they are until optim__k3_accumulate, after stage 5. */
static int accumulation(step *s, optim_error *err)
{
    const optim__k3 *k = &s->k3;
    s->k3g = step_calloc(s, s->nworks * sizeof *s->k3g);
    if (!s->k3g) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    for (size_t i = 0; i < s->nworks; i++) {
        work *w = &s->works[i];
        optim__k3_grad *g = &s->k3g[i];
        size_t esz = optim_dtype_size(w->dtype);
        if (w->kind == OPTIM_GRAD_SPARSE) {
            if (k->lsf) {
                void *copy = step_alloc(s, (size_t)(w->raw_n * w->row_size) * esz);
                if (!copy) return optim__err(err, OPTIM_ENOMEM, "out of memory");
                optim__k3_unscale(w->dtype, w->raw_vals, copy, w->raw_n * w->row_size, k->lsf);
                w->raw_vals = copy;
            }
            if (dedup(s, w)) return optim__err(err, OPTIM_ENOMEM, "out of memory");
        }
        *g = (optim__k3_grad){w->var,
                              optim__var_entry_at(s->opt, w->var, i),
                              w->dtype,
                              w->numel,
                              w->kind == OPTIM_GRAD_DENSE ? w->grad : NULL,
                              w->idx,
                              w->vals,
                              w->n,
                              w->row_size,
                              NULL};
        if (k->update && !(g->out = step_alloc(s, (size_t)w->numel * esz)))
            return optim__err(err, OPTIM_ENOMEM, "out of memory");
    }
    if (!k->update) return OPTIM_OK;
    optim__k3_mean(k, s->k3g, s->nworks, s->nthreads);
    for (size_t i = 0; i < s->nworks; i++) {
        s->works[i].kind = OPTIM_GRAD_DENSE;
        s->works[i].grad = s->k3g[i].out;
    }
    return OPTIM_OK;
}

/* ---- the stages ------------------------------------------------------------------------------ */

/* 2. The pairs with a gradient become the step's work. */
static int stage_skip_absent(step *s, const optim_grad_var *pairs, size_t n, optim_error *err)
{
    s->works = step_alloc(s, n * sizeof *s->works);
    if (!s->works) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const optim_grad_var *p = &pairs[i];
        if (p->grad.kind == OPTIM_GRAD_NONE) continue;
        work *w = &s->works[s->nworks++];
        /* The rest zeroed in the same pass (not a memset of all n first:
         * with thousands of variables the array outgrows the cache). */
        *w = (work){.var = p->var,
                    .data = optim_var_data(p->var),
                    .constrained = optim_var_constraint(p->var) != NULL,
                    .kind = p->grad.kind,
                    .dtype = optim_var_dtype(p->var),
                    .numel = optim_var_numel(p->var)};
        work_set_grad(w, &p->grad);
        if (w->kind == OPTIM_GRAD_SPARSE) {
            w->rows = optim_var_shape(p->var)[0];
            w->row_size = 1;
            /* The row product overflows only with 0 rows ([0, 2^52, 2^52]): no row to touch. */
            for (int32_t d = 1; d < optim_var_rank(p->var); d++)
                if (optim__mul_overflow_i64(w->row_size, optim_var_shape(p->var)[d], &w->row_size))
                    w->row_size = 0;
        }
    }
    if (s->nworks == 0)
        return optim__err(err, OPTIM_EINVAL,
                          "%s: no gradients provided for any variable (%zu pairs, "
                          "all without gradient)",
                          s->opt->cls.name, n);
    return OPTIM_OK;
}

/* 3. The aggregator, then the caller's inspect function (which may end
 * the step: OPTIM_STEP_SKIP). */
static int stage_aggregate(step *s, optim_error *err)
{
    int rc = OPTIM_OK;
    if (s->agg_src->aggregator.fn && !(s->o->flags & OPTIM_STEP_NO_AGGREGATE))
        rc = run_user_fn(s, s->agg_src->aggregator.fn, s->agg_src->aggregator.user,
                         "gradient aggregator", 0, err);
    if (!rc && s->o->inspect)
        rc = run_user_fn(s, s->o->inspect, s->o->inspect_user, "inspect function", 1, err);
    return rc;
}

/* 4. With Keras 3's accumulation first (an accumulating call stops there);
 * then clipvalue, clipnorm, global_clipnorm and user transformers, all on
 * sparse rows as given; then duplicates are summed (stage 7's input). */
static int stage_transform(step *s, optim_error *err)
{
    const optim__k3 *k = &s->k3;
    int rc = k->acc_steps ? accumulation(s, err) : OPTIM_OK;
    if (rc) return rc;
    if (k->update && clip_all(s, k->acc_steps ? 0 : k->lsf))
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    for (size_t t = 0; k->update && t < s->tf_src->ntransformers; t++) {
        const optim__fn_entry *f = &s->tf_src->transformers[t];
        if ((rc = run_user_fn(s, f->fn, f->user, "gradient transformer", 0, err))) return rc;
    }
    for (size_t i = 0; i < s->nworks; i++)
        if (s->works[i].kind == OPTIM_GRAD_SPARSE && !s->works[i].idx && dedup(s, &s->works[i]))
            return optim__err(err, OPTIM_ENOMEM, "out of memory");
    if (k->update && (rc = make_tasks(s, err))) return rc;
    int fused = 0, half = 0;
    for (size_t i = 0; i < s->nworks; i++) {
        fused |= s->works[i].fused || s->works[i].kind == OPTIM_GRAD_SPARSE;
        half |= optim__is_half(s->works[i].dtype);
    }
    if (fused && !(s->scratch = step_alloc(s, (size_t)s->nthreads * OPTIM__CHUNK * sizeof(double))))
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    if (half && k->update && (s->opt->cls.flags & OPTIM_CLASS_ELEMENTWISE) &&
        !(s->half = step_alloc(s, (size_t)s->nthreads * OPTIM__HALF_CHUNK_FLOATS * sizeof(float))))
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    return OPTIM_OK;
}

/* Whole-variable float32 scratch for the half-precision variables of a
 * class that is not element-wise (half_step.h), once their slots exist. */
static int alloc_half_whole(step *s)
{
    if (!s->k3.update || (s->opt->cls.flags & OPTIM_CLASS_ELEMENTWISE)) return OPTIM_OK;
    for (size_t i = 0; i < s->nworks; i++) {
        if (!optim__is_half(s->works[i].dtype)) continue;
        if (!s->half_whole && !(s->half_whole = step_calloc(s, s->nworks * sizeof *s->half_whole)))
            return OPTIM_ENOMEM;
        const size_t n =
            optim__half_whole_floats(s->opt, optim__var_entry_at(s->opt, s->works[i].var, i));
        if (!(s->half_whole[i] = step_alloc(s, n * sizeof(float)))) return OPTIM_ENOMEM;
    }
    return OPTIM_OK;
}

/* The buffers of sparse gradients on half variables of an element-wise
 * class with a sparse rule (half_sparse.h), once their slots exist. A
 * class without a sparse_mode hook runs one apply_sparse call that may
 * touch any row: it gets the whole variable in float32. */
static int alloc_half_sparse(step *s)
{
    const optim_class *cls = &s->opt->cls;
    if (!s->k3.update || !(cls->flags & OPTIM_CLASS_ELEMENTWISE) || !cls->apply_sparse)
        return OPTIM_OK;
    for (size_t i = 0; i < s->nworks; i++) {
        work *w = &s->works[i];
        if (w->kind != OPTIM_GRAD_SPARSE || !optim__is_half(w->dtype)) continue;
        const optim__var_entry *e = optim__var_entry_at(s->opt, w->var, i);
        const int ns = e->nown;
        if (!cls->sparse_mode) {
            if (!s->half_whole &&
                !(s->half_whole = step_calloc(s, s->nworks * sizeof *s->half_whole)))
                return OPTIM_ENOMEM;
            if (!(s->half_whole[i] =
                      step_alloc(s, optim__half_whole_floats(s->opt, e) * sizeof(float))))
                return OPTIM_ENOMEM;
            continue;
        }
        if (optim__half_sparse_reserve(&s->opt->arena, &w->hs, w->n, w->raw_n, w->row_size, ns,
                                       cls->apply_sparse_duplicate_indices != NULL))
            return OPTIM_ENOMEM;
        const size_t f = optim__half_sparse_range_floats(w->n, w->row_size, ns);
        if (f > s->half_range_floats) s->half_range_floats = f;
    }
    if (s->half_range_floats &&
        !(s->half_range =
              step_alloc(s, (size_t)s->nthreads * s->half_range_floats * sizeof(float))))
        return OPTIM_ENOMEM;
    return OPTIM_OK;
}

/* 5. Slots for variables seen for the first time, in pair order; nothing
 * can fail after this stage. */
static int stage_create_slots(step *s, optim_error *err)
{
    optim_optimizer *opt = s->opt;
    size_t nv = opt->nvars, ns = opt->nslots, nn = opt->nslot_names;
    for (size_t i = 0; i < s->nworks; i++) {
        if (optim__var_entry_at(opt, s->works[i].var, i)) continue;
        int rc = optim__track_var(opt, s->works[i].var, err);
        if (rc) {
            optim__rollback_vars(opt, nv, ns, nn);
            return rc;
        }
    }
    if (alloc_half_whole(s) || alloc_half_sparse(s)) {
        optim__rollback_vars(opt, nv, ns, nn);
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    }
    optim__order_new_slots(opt, ns);
    double wd = opt->gen == OPTIM_KERAS3 ? opt->values[OPTIM__P_WEIGHT_DECAY] : 0;
    for (size_t i = 0; i < s->nworks; i++) {
        work *w = &s->works[i];
        w->entry = optim__var_entry_at(opt, w->var, i);
        const double rate = opt->gen == OPTIM_KERAS3 && opt->cls.weight_decay
            ? opt->cls.weight_decay(opt, w->var, wd)
            : wd;
        w->wd = rate > 0 && optim__use_weight_decay(opt, w->var) ? rate : 0;
        if (s->k3g) s->k3g[i].entry = w->entry;
    }
    return OPTIM_OK;
}

/* 6. Per-step coefficients, once per dtype. From here to the end of the
 * update the hooks see Keras's `iterations` (k3.iterations: the counter
 * divided by gradient_accumulation_steps) as optim_iterations. */
static void stage_prepare(step *s)
{
    optim_optimizer *opt = s->opt;
    opt->hook_iterations = s->k3.iterations;
    opt->in_hooks = 1;
    if (!s->k3.update || !opt->cls.prepare) return;
    int seen[2] = {0, 0};
    for (size_t i = 0; i < s->nworks; i++) seen[s->works[i].dtype == OPTIM_F64] = 1;
    if (seen[0]) opt->cls.prepare(opt, OPTIM_F32, opt->coef[0]);
    if (seen[1]) opt->cls.prepare(opt, OPTIM_F64, opt->coef[1]);
}

/* 7. Update, all variables at once (an accumulating call only
 * accumulates); then Keras 3's accumulator reset and moving averages. */
static void stage_update(step *s)
{
    optim_optimizer *opt = s->opt;
    if (!s->k3.update) optim__k3_accumulate(&s->k3, s->k3g, s->nworks, s->nthreads);
    else sparse_tasks(s);
    if (s->k3.update) {
        optim__mt_fill(&s->mt, s->ntasks, task_weight, s);
        optim__mt_run(&s->mt, s->nthreads, &(optim__mt_fns){run_mt_task, run_reduce, s});
    }
    opt->in_hooks = 0;
    optim__k3_after_update(opt, &s->k3, s->nthreads);
}

/* 8. Constraints, then the counter (unless the caller takes either). */
static void stage_finish(step *s)
{
    size_t constrained = 0; /* no region for none: a step of small tables pays for each */
    for (size_t i = 0; i < s->nworks; i++) constrained += (size_t)s->works[i].constrained;
    if (constrained && !(s->o->flags & OPTIM_STEP_NO_CONSTRAINTS)) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->nthreads) if (constrained > 1)
        for (size_t i = 0; i < s->nworks; i++)
            if (s->works[i].constrained) optim_var_apply_constraint(s->works[i].var);
    }
    if (!(s->o->flags & OPTIM_STEP_NO_ADVANCE)) s->opt->iterations++;
}

/* The stages in order. Returns OPTIM_STEP_SKIP when an inspect function
 * ended the step (before anything changed). */
static int pipeline(step *s, const optim_grad_var *pairs, size_t n, optim_error *err)
{
    optim_optimizer *opt = s->opt;
    int rc = optim__check_pairs(opt, opt->cls.name, pairs, n, 0, err); /* 1 (check.c) */
    if (!rc) rc = optim__resolve(opt, err); /* 1: this step's values */
    if (!rc && opt->iterations >= OPTIM_ITERATIONS_MAX)
        rc = optim__err(err, OPTIM_ERANGE,
                        "%s: iterations is %lld, the largest count "
                        "(OPTIM_ITERATIONS_MAX): no step can follow",
                        opt->cls.name, (long long)opt->iterations);
    if (!rc) rc = stage_skip_absent(s, pairs, n, err); /* 2 */
    if (!rc) rc = stage_aggregate(s, err); /* 3 */
    if (rc) return rc;
    optim__k3_begin(opt, &s->k3);
    rc = stage_transform(s, err); /* 4 */
    if (!rc) rc = stage_create_slots(s, err); /* 5 */
    if (rc) return rc;
    stage_prepare(s); /* 6 */
    stage_update(s); /* 7 */
    stage_finish(s); /* 8 */
    return OPTIM_OK;
}

/* ---- entry points ---------------------------------------------------------------------------- */

optim_step_options optim_step_options_defaults(void)
{
    optim_step_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    return o;
}

static int run_pipeline(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                        const optim_step_options *o)
{
    step s;
    memset(&s, 0, sizeof s);
    s.opt = opt;
    s.o = o;
    s.agg_src = o->aggregation ? o->aggregation : opt;
    s.clip_src = o->clipping ? o->clipping : opt;
    s.tf_src = o->transformers ? o->transformers : opt;
    s.nthreads = o->num_threads > 0 ? o->num_threads : optim_num_threads(opt);
    optim__arena_reset(&opt->arena);
    optim_error err;
    optim__err_clear(&err);
    int rc = pipeline(&s, pairs, n, &err);
    /* A step that needed several arena blocks merges them now, so the next
     * step of the same size allocates nothing. */
    optim__arena_settle(&opt->arena);
    return rc < 0 ? optim__opt_take(opt, &err) : rc;
}

/* The options as this library version reads them (an older caller's
 * shorter struct is zero-extended); NULL: defaults. */
static int read_options(optim_optimizer *opt, const optim_step_options *in, optim_step_options *o)
{
    *o = optim_step_options_defaults();
    if (!in) return OPTIM_OK;
    if (in->size < offsetof(optim_step_options, inspect) || in->size > sizeof *o)
        return optim__opt_err(opt, OPTIM_EVERSION,
                              "optim_step: options size %u, expected %zu..%zu "
                              "(take them from optim_step_options_defaults)",
                              (unsigned)in->size, offsetof(optim_step_options, inspect), sizeof *o);
    memcpy(o, in, in->size);
    o->size = sizeof *o;
    if (o->num_threads < 0)
        return optim__opt_err(opt, OPTIM_EINVAL, "optim_step: num_threads is %d, expected >= 0",
                              o->num_threads);
    if ((o->flags & OPTIM_STEP_SET_ITERATIONS) && o->iterations < 0)
        return optim__opt_err(opt, OPTIM_ERANGE, "optim_step: iterations is %lld, expected >= 0",
                              (long long)o->iterations);
    return OPTIM_OK;
}


int optim_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
               const optim_step_options *options)
{
    if (!opt) return OPTIM_EINVAL;
    opt->errmsg[0] = '\0';
    optim_step_options o;
    int rc = read_options(opt, options, &o);
    if (rc) return rc;
    if (n && !pairs) return optim__opt_err(opt, OPTIM_EINVAL, "%s: pairs is NULL", opt->cls.name);
    /* A version-1 wrapper (apply_gradients only) processes its gradients and
     * constraints itself; the counter options apply around it, an inspect
     * function cannot. */
    if (!opt->cls.step && opt->cls.apply_gradients && o.inspect)
        return optim__opt_err(opt, OPTIM_ENOTSUP,
                              "%s: the class overrides apply_gradients but has no step hook, so it "
                              "cannot take an inspect function (give it a step hook, optim/step.h)",
                              opt->cls.name);
    optim_error err;
    if ((rc = optim__check_half_wrapper(opt, pairs, n, &err))) return optim__opt_take(opt, &err);
    const int64_t counter = opt->iterations;
    if (o.flags & OPTIM_STEP_SET_ITERATIONS) opt->iterations = o.iterations;
    if (!optim__runs_pipeline(opt)) optim__arena_reset(&opt->arena); /* optim_step_scratch */
    if (opt->cls.step) rc = opt->cls.step(opt, pairs, n, &o);
    else if (opt->cls.apply_gradients)
        rc = opt->cls.apply_gradients(opt, pairs, n, o.flags & OPTIM_STEP_NO_AGGREGATE);
    else rc = run_pipeline(opt, pairs, n, &o);
    /* Failed, or ended by the inspect function: the counter as it was. */
    if (rc && (o.flags & OPTIM_STEP_SET_ITERATIONS)) opt->iterations = counter;
    if (!rc && (o.flags & OPTIM_STEP_NO_ADVANCE) && !opt->cls.step && opt->cls.apply_gradients)
        opt->iterations = o.flags & OPTIM_STEP_SET_ITERATIONS ? o.iterations : counter;
    return rc == OPTIM_STEP_SKIP ? OPTIM_OK : rc;
}

int optim_apply_gradients(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                          uint32_t flags)
{
    optim_step_options o = optim_step_options_defaults();
    o.flags = flags & OPTIM_APPLY_NO_AGGREGATE;
    return optim_step(opt, pairs, n, &o);
}
