/* The running step of the pipeline (internal): apply.c's stages, clip.c's
 * clipping and de-duplication (stage 4) and update.c's tasks and runners
 * (stage 7) share it, and stage 4's loops (clip_kernels.c). Nothing else
 * includes it. */
#ifndef OPTIM_OPTIMIZER_PIPELINE_H
#define OPTIM_OPTIMIZER_PIPELINE_H

#include <stdint.h>
#include <string.h>

#include "core/isa.h"
#include "optimizer/half_sparse.h"
#include "optimizer/impl.h"
#include "optimizer/keras3_options.h"
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

/* Stage 4's element loops once per instruction-set level (clip_kernels.c). */
typedef struct optim__clip_table {
    void (*clip_f32)(const float *src, float *dst, int64_t n, const clip_desc *c);
    void (*clip_f64)(const double *src, double *dst, int64_t n, const clip_desc *c);
    double (*sumsq)(optim_dtype dt, const void *g, int64_t n, const clip_desc *c);
} optim__clip_table;
OPTIM__ISA_DECLARE(optim__clip_table, optim__clip_kernels);

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
static inline void *step_alloc(step *s, size_t bytes)
{
    return bytes > SIZE_MAX - 64 ? NULL : optim__arena_alloc(&s->opt->arena, bytes + 64);
}

static inline void *step_calloc(step *s, size_t bytes)
{
    void *p = step_alloc(s, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

/* ---- clip.c: stage 4 ------------------------------------------------------------------- */

/* Clipvalue, clipnorm, global_clipnorm (the clip options of s->clip_src)
 * after dividing by unscale (Keras 3's loss_scale_factor, 0 for none):
 * each work gets its transform, fused into the update for dense gradients.
 * Returns OPTIM_ENOMEM or OPTIM_OK. */
int optim__clip_all(step *s, double unscale);
/* Sparse work w's unique ascending indices and summed rows (w->idx, w->vals, w->n). */
int optim__dedup(step *s, work *w);
/* The transform c from src to dst, n elements of dtype dt. */
void optim__clip_run(optim_dtype dt, const void *src, void *dst, int64_t n, const clip_desc *c);
/* optim__half_run's transform: a work's fused clipping (clip), on a widened block. */
void optim__clip_block(const void *clip, float *g, int64_t n);
/* The pending transform of w applied into a copy the step owns: its dense
 * gradient, or its half sparse rows. */
int optim__materialize_dense(step *s, work *w);
int optim__materialize_rows(step *s, work *w);

/* ---- update.c: stage 7 ----------------------------------------------------------------- */

/* The tasks of dense work, room for those of sparse work, the phased
 * variables' buffers (end of stage 4). */
int optim__make_tasks(step *s, optim_error *err);
/* Each sparse work's mode and its tasks (after stage 6). */
void optim__sparse_tasks(step *s);
/* Runs every task, all variables at once. */
void optim__update_run(step *s);

#endif
