/* Stage 4 of the pipeline (apply.c): the loss_scale_factor division,
 * clipvalue, clipnorm and global_clipnorm, fused into the update for dense
 * gradients (a per-chunk transform) and applied to sparse rows as given;
 * the de-duplication of sparse rows that ends the stage. Norms are fixed
 * per-chunk partial sums added in a fixed order: bitwise the same for any
 * number of threads. */
#include "optimizer/pipeline.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/half.h"
#include "core/parallel.h"

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
int optim__dedup(step *s, work *w)
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


/* A half-precision gradient is transformed in float32 and rounded once. */
void optim__clip_run(optim_dtype dt, const void *src, void *dst, int64_t n, const clip_desc *c)
{
    const optim__clip_table *k = OPTIM__ISA_TABLE(optim__clip_kernels);
    if (dt == OPTIM_F32) k->clip_f32(src, dst, n, c);
    else if (dt == OPTIM_F64) k->clip_f64(src, dst, n, c);
    else
        for (int64_t off = 0; off < n; off += 256) {
            float b[256];
            const int64_t m = n - off < 256 ? n - off : 256;
            optim__half_load(dt, (const uint16_t *)src + off, b, m);
            k->clip_f32(b, b, m, c);
            optim__half_store(dt, b, (uint16_t *)dst + off, m);
        }
}

void optim__clip_block(const void *clip, float *g, int64_t n)
{
    OPTIM__ISA_TABLE(optim__clip_kernels)->clip_f32(g, g, n, clip);
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
    if (w->fused) OPTIM__ISA_TABLE(optim__clip_kernels)->clip_f32(r, r, n, &w->clip);
    w->hs.raw = r;
    return OPTIM_OK;
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
    const optim__clip_table *kern = OPTIM__ISA_TABLE(optim__clip_kernels);
#pragma omp parallel for schedule(static) num_threads(s->nthreads)
    for (size_t k = 0; k < nchunks; k++) {
        const work *w = &s->works[chunks[k].w];
        part[k] = kern->sumsq(w->dtype,
                              (const char *)w->grad + chunks[k].off * optim_dtype_size(w->dtype),
                              chunks[k].count, base);
    }
    for (size_t k = 0; k < nchunks; k++) norm2[chunks[k].w] += part[k];
    for (size_t i = 0; i < s->nworks; i++)
        if (s->works[i].kind == OPTIM_GRAD_SPARSE)
            norm2[i] = kern->sumsq(s->works[i].dtype, s->works[i].raw_vals,
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
    optim__clip_run(w->dtype, w->raw_vals, copy, w->raw_n * w->row_size, &w->clip);
    w->raw_vals = copy;
    return OPTIM_OK;
}

/* unscale: Keras 3's loss_scale_factor (0 for none), divided first. */
int optim__clip_all(step *s, double unscale)
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
int optim__materialize_dense(step *s, work *w)
{
    size_t bytes = (size_t)w->numel * optim_dtype_size(w->dtype);
    void *copy = step_alloc(s, bytes);
    if (!copy) return OPTIM_ENOMEM;
    if (w->fused) optim__clip_run(w->dtype, w->grad, copy, w->numel, &w->clip);
    else if (bytes) memcpy(copy, w->grad, bytes);
    w->grad = copy;
    w->fused = 0;
    return OPTIM_OK;
}

/* The pending transform of half sparse rows, applied into a copy rounded
 * once (as materialize_dense does), before user functions see them. */
int optim__materialize_rows(step *s, work *w)
{
    void *copy = step_alloc(s, (size_t)(w->raw_n * w->row_size) * optim_dtype_size(w->dtype));
    if (!copy) return OPTIM_ENOMEM;
    optim__clip_run(w->dtype, w->raw_vals, copy, w->raw_n * w->row_size, &w->clip);
    w->raw_vals = copy;
    w->fused = 0;
    return OPTIM_OK;
}
