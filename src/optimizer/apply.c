/* apply_gradients: the pipeline of DESIGN.md section 3.
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
 * Dense gradients are read in place: clipping is fused into the update by
 * transforming each chunk into a small per-thread buffer. Only an aggregator
 * or user transformer (which may change gradients) makes the step copy them.
 * Work is cut into fixed chunks independent of the thread count, and every
 * reduction adds fixed partial sums in a fixed order, so results are bitwise
 * identical for any number of threads. */
#include "optimizer/impl.h"
#include "optimizer/keras3_options.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 8192 /* elements per dense task; fixed, so results never depend on threads */

typedef struct clip_desc {
    double unscale; /* loss_scale_factor to divide by first; 0 for none */
    int has_cv;
    double cv;
    int mode;      /* 0 none, 1 clipnorm (x*c/max(n,c)), 2 global (x*scale) */
    double c;      /* clipnorm */
    double norm;   /* this gradient's norm after clipvalue (mode 1) */
    double scale;  /* global factor (mode 2), per dtype at use */
} clip_desc;

typedef struct work {
    optim_var *var;
    optim__var_entry *entry;
    optim_grad_kind kind;
    optim_dtype dtype;
    int64_t numel;
    const void *grad;              /* dense */
    const int64_t *raw_idx;        /* sparse, as given */
    const void *raw_vals;
    int64_t raw_n;
    int64_t *idx;                  /* sparse, unique ascending, owned (after dedup) */
    void *vals;
    int64_t n;
    int64_t rows, row_size;
    int fused;                     /* dense: transform per chunk while updating */
    double wd;                     /* Keras 3 weight decay factor, 0 for none */
    clip_desc clip;
} work;

typedef struct task {
    size_t w;
    int64_t off, count;            /* dense element range; count < 0: sparse task */
} task;

/* Per-step allocations, freed together. */
typedef struct step {
    optim_optimizer *opt;
    work *works;
    size_t nworks;
    optim_grad_var *pairs;         /* for aggregator and transformers */
    void **owned;
    size_t nowned, cap_owned;
    task *tasks;
    size_t ntasks;
    double *partials;              /* per dense chunk sum of squares */
    void *scratch;
    int nthreads;
    int nbase;                     /* base slots after each variable's own (keras3_options.h) */
    optim__k3_grad *k3;            /* the gradients for the accumulation passes */
} step;

static void *step_alloc(step *s, size_t bytes)
{
    if (s->nowned == s->cap_owned) {
        size_t cap = s->cap_owned ? s->cap_owned * 2 : 32;
        void **o = realloc(s->owned, cap * sizeof *o);
        if (!o) return NULL;
        s->owned = o;
        s->cap_owned = cap;
    }
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
    if (p) s->owned[s->nowned++] = p;
    return p;
}

static void *step_calloc(step *s, size_t bytes)
{
    void *p = step_alloc(s, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

static void step_free(step *s)
{
    for (size_t i = 0; i < s->nowned; i++) free(s->owned[i]);
    free(s->owned);
    free(s->works);
    free(s->pairs);
    free(s->tasks);
    free(s->partials);
    free(s->scratch);
}

/* ---- 1. validation ------------------------------------------------------------ */

static int same_dims(int32_t rank, const int64_t *a, const int64_t *b)
{
    for (int32_t i = 0; i < rank; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

int optim__check_pair(const optim_optimizer *opt, const char *cn, const optim_grad_var *p, size_t i,
                      optim_error *err)
{
    if (!p->var) return optim__err(err, OPTIM_EINVAL, "%s: pair %zu has no variable (NULL)", cn, i);
    optim_var *v = p->var;
    const char *vn = optim_var_name(v);
    if (p->grad.kind == OPTIM_GRAD_NONE) return OPTIM_OK;
    if (opt->built && !optim__var_entry_of(opt, v))
        return optim__err(err, OPTIM_ENOTFOUND,
                          "%s: variable '%s' is unknown to this optimizer, which was built for "
                          "%zu variables",
                          cn, vn, opt->nvars);
    if (!optim_var_trainable(v))
        return optim__err(err, OPTIM_EINVAL, "%s: variable '%s' is not trainable", cn, vn);
    const optim__var_entry *known = optim__var_entry_of(opt, v);
    if (known && (known->numel != optim_var_numel(v) || known->dtype != optim_var_dtype(v)))
        return optim__err(err, OPTIM_ESTATE,
                          "%s: variable '%s' (%lld %s elements) is not the one this optimizer "
                          "made slots for (%lld %s); was a variable destroyed while the "
                          "optimizer still used it?",
                          cn, vn, (long long)optim_var_numel(v), optim_dtype_name(optim_var_dtype(v)),
                          (long long)known->numel, optim_dtype_name(known->dtype));
    char what[300], a[160], b[160];
    int32_t vr = optim_var_rank(v);
    const int64_t *vs = optim_var_shape(v);
    optim_dtype vd = optim_var_dtype(v);
    if (p->grad.kind == OPTIM_GRAD_DENSE) {
        const optim_tensor *g = &p->grad.dense;
        snprintf(what, sizeof what, "%s: gradient of '%s'", cn, vn);
        int rc = optim__tensor_check(g, OPTIM__FLOAT_MASK, what, err);
        if (rc) return rc;
        if (g->dtype != vd)
            return optim__err(err, OPTIM_EDTYPE, "%s has dtype %s, expected %s (the variable's)",
                              what, optim_dtype_name(g->dtype), optim_dtype_name(vd));
        if (g->rank != vr || !same_dims(vr, g->shape, vs))
            return optim__err(err, OPTIM_ESHAPE, "%s has shape %s, expected %s", what,
                              optim_shape_str(g->rank, g->shape, a, sizeof a),
                              optim_shape_str(vr, vs, b, sizeof b));
        return OPTIM_OK;
    }
    if (p->grad.kind != OPTIM_GRAD_SPARSE)
        return optim__err(err, OPTIM_EINVAL, "%s: gradient of '%s' has unknown kind %d", cn, vn,
                          (int)p->grad.kind);
    const optim_slices *s = &p->grad.sparse;
    snprintf(what, sizeof what, "%s: sparse gradient of '%s'", cn, vn);
    if (!opt->cls.apply_sparse && !opt->cls.apply_sparse_duplicate_indices)
        return optim__err(err, OPTIM_ENOTSUP, "%s: class has no sparse update", what);
    if (opt->gen == OPTIM_LEGACY && optim_var_constraint(v))
        return optim__err(err, OPTIM_EINVAL,
                          "%s: the variable has a constraint, which the legacy generation cannot "
                          "apply to a sparse update",
                          what);
    if (vr < 1)
        return optim__err(err, OPTIM_ESHAPE, "%s: the variable is a scalar; sparse rows need rank >= 1",
                          what);
    int rc = optim__tensor_check(&s->values, OPTIM__FLOAT_MASK, what, err);
    if (rc) return rc;
    if (s->values.dtype != vd)
        return optim__err(err, OPTIM_EDTYPE, "%s has dtype %s, expected %s (the variable's)", what,
                          optim_dtype_name(s->values.dtype), optim_dtype_name(vd));
    if (s->n < 0) return optim__err(err, OPTIM_ESHAPE, "%s: %lld indices, expected >= 0", what, (long long)s->n);
    if (s->n > 0 && !s->indices) return optim__err(err, OPTIM_EINVAL, "%s: indices is NULL", what);
    if (s->values.rank != vr || s->values.shape[0] != s->n || !same_dims(vr - 1, s->values.shape + 1, vs + 1)) {
        int64_t want[OPTIM_MAX_RANK];
        want[0] = s->n;
        for (int32_t d = 1; d < vr; d++) want[d] = vs[d];
        return optim__err(err, OPTIM_ESHAPE, "%s: values have shape %s, expected %s (%lld indices "
                          "and the variable's row shape)",
                          what, optim_shape_str(s->values.rank, s->values.shape, a, sizeof a),
                          optim_shape_str(vr, want, b, sizeof b), (long long)s->n);
    }
    for (int64_t k = 0; k < s->n; k++)
        if (s->indices[k] < 0 || s->indices[k] >= vs[0])
            return optim__err(err, OPTIM_ERANGE,
                              "%s: index %lld at position %lld is out of range, expected 0..%lld",
                              what, (long long)s->indices[k], (long long)k, (long long)vs[0] - 1);
    return OPTIM_OK;
}

static int cmp_ptr(const void *a, const void *b)
{
    const void *const *pa = a, *const *pb = b;
    uintptr_t x = (uintptr_t)*pa, y = (uintptr_t)*pb;
    return x < y ? -1 : x > y;
}

int optim__check_pairs(const optim_optimizer *opt, const char *cn, const optim_grad_var *pairs,
                       size_t n, int require_any, optim_error *err)
{
    if (n && !pairs) return optim__err(err, OPTIM_EINVAL, "%s: pairs is NULL", cn);
    size_t with_grad = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = optim__check_pair(opt, cn, &pairs[i], i, err);
        if (rc) return rc;
        with_grad += pairs[i].grad.kind != OPTIM_GRAD_NONE;
    }
    if (require_any && with_grad == 0)
        return optim__err(err, OPTIM_EINVAL,
                          "%s: no gradients provided for any variable (%zu pairs, all without "
                          "gradient)",
                          cn, n);
    /* Each variable at most once. */
    const void **ptrs = optim__malloc(n * sizeof *ptrs);
    if (!ptrs) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) ptrs[i] = pairs[i].var;
    qsort(ptrs, n, sizeof *ptrs, cmp_ptr);
    for (size_t i = 1; i < n; i++)
        if (ptrs[i] == ptrs[i - 1]) {
            const char *vn = optim_var_name(ptrs[i]);
            free(ptrs);
            return optim__err(err, OPTIM_EINVAL,
                              "%s: variable '%s' appears more than once in one apply_gradients call",
                              cn, vn);
        }
    free(ptrs);
    return OPTIM_OK;
}

/* ---- sparse de-duplication --------------------------------------------------------- */

typedef struct ipos {
    int64_t idx, pos;
} ipos;

static int cmp_ipos(const void *a, const void *b)
{
    const ipos *x = a, *y = b;
    if (x->idx != y->idx) return x->idx < y->idx ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Unique ascending indices; duplicate rows summed in their order of
 * appearance starting from zero (tf.math.unsorted_segment_sum). */
static int dedup(step *s, work *w)
{
    int64_t n = w->raw_n, rs = w->row_size;
    size_t esz = optim_dtype_size(w->dtype);
    ipos *order = optim__malloc((size_t)n * sizeof *order);
    w->idx = step_alloc(s, (size_t)n * sizeof *w->idx);
    w->vals = step_alloc(s, (size_t)n * (size_t)rs * esz);
    if (!order || !w->idx || !w->vals) {
        free(order);
        return OPTIM_ENOMEM;
    }
    for (int64_t k = 0; k < n; k++) order[k] = (ipos){w->raw_idx[k], k};
    qsort(order, (size_t)n, sizeof *order, cmp_ipos);
    int64_t u = -1;
    for (int64_t k = 0; k < n; k++) {
        if (k == 0 || order[k].idx != order[k - 1].idx) {
            w->idx[++u] = order[k].idx;
            memset((char *)w->vals + (size_t)u * rs * esz, 0, (size_t)rs * esz);
        }
        if (w->dtype == OPTIM_F32) {
            float *dst = (float *)w->vals + u * rs;
            const float *src = (const float *)w->raw_vals + order[k].pos * rs;
            for (int64_t j = 0; j < rs; j++) dst[j] += src[j];
        } else {
            double *dst = (double *)w->vals + u * rs;
            const double *src = (const double *)w->raw_vals + order[k].pos * rs;
            for (int64_t j = 0; j < rs; j++) dst[j] += src[j];
        }
    }
    w->n = u + 1;
    free(order);
    return OPTIM_OK;
}

/* ---- 4. clipping ---------------------------------------------------------------------- */

/* The loss_scale_factor division, clip_by_value, then clip_by_norm or the
 * global-norm scale, applied in the gradient's own precision (as TF and
 * Keras apply them). */
#define CLIP_CHUNK(T, NAME)                                                                 \
    static void NAME(const T *src, T *dst, int64_t n, const clip_desc *c)                  \
    {                                                                                       \
        const T cv = (T)c->cv, cn = (T)c->c, nrm = (T)c->norm;                             \
        const T denom = nrm > cn ? nrm : cn;                                                \
        const T scale = (T)c->scale, us = (T)c->unscale;                                    \
        const int unscale = c->unscale != 0;                                                \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T x = src[i];                                                                   \
            if (unscale) x = x / us;                                                        \
            if (c->has_cv) x = x < -cv ? -cv : (x > cv ? cv : x);                           \
            if (c->mode == 1) x = x * cn / denom;                                           \
            else if (c->mode == 2) x = x * scale;                                           \
            dst[i] = x;                                                                     \
        }                                                                                   \
    }
CLIP_CHUNK(float, clip_f32)
CLIP_CHUNK(double, clip_f64)

static void clip_run(optim_dtype dt, const void *src, void *dst, int64_t n, const clip_desc *c)
{
    if (dt == OPTIM_F32) clip_f32(src, dst, n, c);
    else clip_f64(src, dst, n, c);
}

/* Sum of squares after unscaling and clipvalue, accumulated in double (TF
 * accumulates in the gradient's dtype, which overflows to inf for float32
 * norms above about 1.8e19; here the norm is exact to double precision). */
static double sumsq(optim_dtype dt, const void *g, int64_t n, const clip_desc *c)
{
    double s = 0;
    if (dt == OPTIM_F32) {
        const float *x = g;
        const float cv = (float)c->cv, us = (float)c->unscale;
        for (int64_t i = 0; i < n; i++) {
            float v = x[i];
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
    if (dt == OPTIM_F32) {
        float n = (float)norm, c = (float)clip, a = 1.0f / n, b = 1.0f / c;
        return c * (a < b ? a : b);
    }
    double a = 1.0 / norm, b = 1.0 / clip;
    return clip * (a < b ? a : b);
}

/* unscale: Keras 3's loss_scale_factor (0 for none), divided first. */
static int clip_all(step *s, double unscale)
{
    optim_optimizer *opt = s->opt;
    const double *v = opt->values;
    /* Keras 3 clips only with a value above 0 (`if self.clipnorm and
     * self.clipnorm > 0`); legacy tf.keras applies whatever is set. */
    const int k3 = opt->gen == OPTIM_KERAS3;
#define CLIP_ON(i) (!isnan(v[i]) && (!k3 || v[i] > 0))
    clip_desc base = {0};
    base.unscale = unscale;
    base.has_cv = CLIP_ON(OPTIM__P_CLIPVALUE);
    base.cv = v[OPTIM__P_CLIPVALUE];
    int do_norm = CLIP_ON(OPTIM__P_CLIPNORM), do_global = CLIP_ON(OPTIM__P_GLOBAL_CLIPNORM);
#undef CLIP_ON
    if (!base.has_cv && !do_norm && !do_global && !base.unscale) return OPTIM_OK;

    /* Norms: dense gradients by fixed chunks (in parallel), sparse ones whole. */
    size_t nchunks = 0;
    for (size_t i = 0; i < s->nworks; i++)
        if (s->works[i].kind == OPTIM_GRAD_DENSE) nchunks += (size_t)((s->works[i].numel + CHUNK - 1) / CHUNK);
    double *norm2 = step_calloc(s, s->nworks * sizeof *norm2);
    task *chunks = step_calloc(s, nchunks * sizeof *chunks);
    double *part = step_calloc(s, nchunks * sizeof *part);
    if (!norm2 || !chunks || !part) return OPTIM_ENOMEM;
    if (do_norm || do_global) {
        size_t c = 0;
        for (size_t i = 0; i < s->nworks; i++)
            if (s->works[i].kind == OPTIM_GRAD_DENSE)
                for (int64_t off = 0; off < s->works[i].numel; off += CHUNK)
                    chunks[c++] = (task){i, off, s->works[i].numel - off < CHUNK ? s->works[i].numel - off : CHUNK};
#pragma omp parallel for schedule(dynamic, 4) num_threads(s->nthreads)
        for (size_t k = 0; k < nchunks; k++) {
            const work *w = &s->works[chunks[k].w];
            part[k] = sumsq(w->dtype, (const char *)w->grad + chunks[k].off * optim_dtype_size(w->dtype),
                            chunks[k].count, &base);
        }
        for (size_t k = 0; k < nchunks; k++) norm2[chunks[k].w] += part[k];
        for (size_t i = 0; i < s->nworks; i++)
            if (s->works[i].kind == OPTIM_GRAD_SPARSE)
                norm2[i] = sumsq(s->works[i].dtype, s->works[i].raw_vals,
                                 s->works[i].raw_n * s->works[i].row_size, &base);
    }
    double global = 0;
    for (size_t i = 0; i < s->nworks; i++) global += norm2[i];
    global = sqrt(global);
    for (size_t i = 0; i < s->nworks; i++) {
        work *w = &s->works[i];
        w->clip = base;
        if (do_norm) {
            w->clip.mode = 1;
            w->clip.c = v[OPTIM__P_CLIPNORM];
            w->clip.norm = sqrt(norm2[i]);
        } else if (do_global) {
            w->clip.mode = 2;
            w->clip.scale = global_scale(w->dtype, global, v[OPTIM__P_GLOBAL_CLIPNORM]);
        }
        if (w->kind == OPTIM_GRAD_SPARSE) {
            /* Rows as given, duplicates included (tf.clip_by_* on
             * IndexedSlices.values): a clipped copy, proportional to the rows. */
            size_t bytes = (size_t)(w->raw_n * w->row_size) * optim_dtype_size(w->dtype);
            void *copy = step_alloc(s, bytes);
            if (!copy) return OPTIM_ENOMEM;
            clip_run(w->dtype, w->raw_vals, copy, w->raw_n * w->row_size, &w->clip);
            w->raw_vals = copy;
        } else {
            w->fused = 1;
        }
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

static int to_pairs(step *s)
{
    for (size_t i = 0; i < s->nworks; i++) {
        work *w = &s->works[i];
        optim_grad_var *p = &s->pairs[i];
        p->var = w->var;
        const int32_t vr = optim_var_rank(w->var);
        const int64_t *vs = optim_var_shape(w->var);
        if (w->kind == OPTIM_GRAD_DENSE) {
            if (materialize_dense(s, w)) return OPTIM_ENOMEM;
            p->grad = optim_grad_dense(optim_tensor_make(w->dtype, (void *)w->grad, vr, vs));
        } else {
            int64_t shape[OPTIM_MAX_RANK];
            memcpy(shape, vs, sizeof(int64_t) * (size_t)vr);
            int64_t n = w->raw_n;
            const void *vals = w->raw_vals;
            shape[0] = n;
            /* Give the functions a copy they may change. */
            size_t vb = (size_t)(n * w->row_size) * optim_dtype_size(w->dtype);
            int64_t *ic = step_alloc(s, (size_t)n * sizeof *ic);
            void *vc = step_alloc(s, vb);
            if (!ic || !vc) return OPTIM_ENOMEM;
            memcpy(ic, w->raw_idx, (size_t)n * sizeof *ic);
            if (vb) memcpy(vc, vals, vb);
            p->grad = optim_grad_sparse(ic, n, optim_tensor_make(w->dtype, vc, vr, shape));
        }
    }
    return OPTIM_OK;
}

static int run_user_fn(step *s, const optim__fn_entry *f, const char *what, optim_error *err)
{
    optim_optimizer *opt = s->opt;
    int rc = to_pairs(s);
    if (rc) return optim__err(err, rc, "out of memory");
    optim_error local;
    optim__err_clear(&local);
    rc = f->fn(f->user, s->pairs, s->nworks, &local);
    if (rc)
        return optim__err(err, rc < 0 ? rc : OPTIM_EINVAL, "%s: %s failed: %s", opt->cls.name, what,
                          local.msg[0] ? local.msg : optim_strerror(rc));
    /* What comes back is checked like user input, then becomes the step's. */
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

static void run_task(step *s, const task *t, int tid)
{
    optim_optimizer *opt = s->opt;
    work *w = &s->works[t->w];
    size_t esz = optim_dtype_size(w->dtype);
    void *slots[OPTIM_MAX_SLOTS];
    const void *coef = opt->coef[w->dtype == OPTIM_F64];
    if (w->wd != 0) {
        /* Decoupled weight decay, fused per chunk (a sparse update decays
         * the whole variable, as Keras 3 does). */
        int64_t off = t->count >= 0 ? t->off : 0, n = t->count >= 0 ? t->count : w->numel;
        optim__decay(w->dtype, (char *)optim_var_data(w->var) + (size_t)off * esz, n, w->wd,
                     optim_learning_rate(opt, w->dtype));
    }
    const int nslots = w->entry->nslots - s->nbase; /* the class's own */
    if (t->count >= 0) {
        for (int k = 0; k < nslots; k++)
            slots[k] = (char *)optim_var_data(opt->slots[w->entry->slot_ids[k]].var) + (size_t)t->off * esz;
        const void *g = (const char *)w->grad + (size_t)t->off * esz;
        if (w->fused) {
            void *buf = (char *)s->scratch + (size_t)tid * CHUNK * sizeof(double);
            clip_run(w->dtype, g, buf, t->count, &w->clip);
            g = buf;
        }
        optim_dense_update u = {opt, w->var, w->dtype, t->off, t->count,
                                (char *)optim_var_data(w->var) + (size_t)t->off * esz, g, slots,
                                nslots, coef,
                                opt->iterations};
        opt->cls.apply_dense(&u);
        return;
    }
    for (int k = 0; k < nslots; k++)
        slots[k] = optim_var_data(opt->slots[w->entry->slot_ids[k]].var);
    optim_sparse_update u = {opt, w->var, w->dtype, w->rows, w->row_size, optim_var_data(w->var), slots,
                             nslots, w->raw_idx, w->raw_n, w->raw_vals, coef, opt->iterations};
    if (opt->cls.apply_sparse_duplicate_indices &&
        opt->cls.apply_sparse_duplicate_indices(&u) != OPTIM_SPARSE_DEFAULT)
        return;
    if (!opt->cls.apply_sparse) return;
    u.indices = w->idx;
    u.n = w->n;
    u.values = w->vals;
    opt->cls.apply_sparse(&u);
}

static int make_tasks(step *s)
{
    optim_optimizer *opt = s->opt;
    int elementwise = (opt->cls.flags & OPTIM_CLASS_ELEMENTWISE) != 0;
    size_t n = 0;
    for (size_t i = 0; i < s->nworks; i++) {
        work *w = &s->works[i];
        if (w->kind == OPTIM_GRAD_DENSE && elementwise) n += (size_t)((w->numel + CHUNK - 1) / CHUNK);
        else n++;
    }
    s->tasks = optim__malloc(n * sizeof *s->tasks);
    if (!s->tasks) return OPTIM_ENOMEM;
    for (size_t i = 0; i < s->nworks; i++) {
        work *w = &s->works[i];
        if (w->kind == OPTIM_GRAD_SPARSE) s->tasks[s->ntasks++] = (task){i, 0, -1};
        else if (!elementwise) {
            if (w->fused && materialize_dense(s, w)) return OPTIM_ENOMEM;
            s->tasks[s->ntasks++] = (task){i, 0, w->numel};
        } else
            for (int64_t off = 0; off < w->numel; off += CHUNK)
                s->tasks[s->ntasks++] = (task){i, off, w->numel - off < CHUNK ? w->numel - off : CHUNK};
    }
    return OPTIM_OK;
}

/* ---- Keras 3's gradient accumulation (keras3_options.c) -------------------------------------- */

/* Unscales sparse rows (as given) and sums their duplicates; then, on an
 * updating call, replaces every gradient by the dense mean over the
 * accumulation steps (in buffers of the step: nothing of the optimizer
 * changes before step 5). On an accumulating call the gradients stay as
 * they are until optim__k3_accumulate, after step 5. */
static int accumulation(step *s, const optim__k3 *k, optim_error *err)
{
    s->k3 = step_calloc(s, s->nworks * sizeof *s->k3);
    if (!s->k3) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    for (size_t i = 0; i < s->nworks; i++) {
        work *w = &s->works[i];
        optim__k3_grad *g = &s->k3[i];
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
        *g = (optim__k3_grad){w->var, optim__var_entry_of(s->opt, w->var), w->dtype, w->numel,
                              w->kind == OPTIM_GRAD_DENSE ? w->grad : NULL, w->idx, w->vals, w->n,
                              w->row_size, NULL};
        if (k->update && !(g->out = step_alloc(s, (size_t)w->numel * esz)))
            return optim__err(err, OPTIM_ENOMEM, "out of memory");
    }
    if (!k->update) return OPTIM_OK;
    optim__k3_mean(s->opt, k, s->k3, s->nworks, s->nthreads);
    for (size_t i = 0; i < s->nworks; i++) {
        s->works[i].kind = OPTIM_GRAD_DENSE;
        s->works[i].grad = s->k3[i].out;
    }
    return OPTIM_OK;
}

/* ---- the pipeline ---------------------------------------------------------------------------- */

static int pipeline(step *s, const optim_grad_var *pairs, size_t n, uint32_t flags, optim_error *err)
{
    optim_optimizer *opt = s->opt;
    const char *cn = opt->cls.name;
    /* 1. Validate everything, including this step's hyperparameter values. */
    int rc = optim__check_pairs(opt, opt->cls.name, pairs, n, 0, err);
    if (!rc) rc = optim__resolve(opt, err);
    if (rc) return rc;
    /* 2. Skip absent gradients. */
    s->works = optim__calloc(n, sizeof *s->works);
    s->pairs = optim__calloc(n, sizeof *s->pairs);
    if (!s->works || !s->pairs) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const optim_grad_var *p = &pairs[i];
        if (p->grad.kind == OPTIM_GRAD_NONE) continue;
        work *w = &s->works[s->nworks++];
        w->var = p->var;
        w->kind = p->grad.kind;
        w->dtype = optim_var_dtype(p->var);
        w->numel = optim_var_numel(p->var);
        work_set_grad(w, &p->grad);
        if (w->kind == OPTIM_GRAD_SPARSE) {
            w->rows = optim_var_shape(p->var)[0];
            w->row_size = 1;
            for (int32_t d = 1; d < optim_var_rank(p->var); d++) w->row_size *= optim_var_shape(p->var)[d];
        }
    }
    if (s->nworks == 0)
        return optim__err(err, OPTIM_EINVAL, "%s: no gradients provided for any variable (%zu pairs, "
                          "all without gradient)", cn, n);
    /* 3. Aggregate across replicas. */
    if (opt->aggregator.fn && !(flags & OPTIM_APPLY_NO_AGGREGATE)) {
        rc = run_user_fn(s, &opt->aggregator, "gradient aggregator", err);
        if (rc) return rc;
    }
    s->nthreads = opt->num_threads > 0 ? opt->num_threads : omp_get_max_threads();
    /* Keras 3: loss_scale_factor and gradient_accumulation_steps. */
    optim__k3 k3;
    optim__k3_begin(opt, &k3);
    if (k3.acc_steps && (rc = accumulation(s, &k3, err))) return rc;
    /* 4. clipvalue, clipnorm, global_clipnorm, then user transformers, all
     * on sparse rows as given; then duplicates are summed (step 7's input).
     * An accumulating call does none of it. */
    if (k3.update && clip_all(s, k3.acc_steps ? 0 : k3.lsf))
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    for (size_t t = 0; k3.update && t < opt->ntransformers; t++) {
        rc = run_user_fn(s, &opt->transformers[t], "gradient transformer", err);
        if (rc) return rc;
    }
    for (size_t i = 0; i < s->nworks; i++)
        if (s->works[i].kind == OPTIM_GRAD_SPARSE && !s->works[i].idx && dedup(s, &s->works[i]))
            return optim__err(err, OPTIM_ENOMEM, "out of memory");
    if (k3.update && make_tasks(s)) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    int fused = 0;
    for (size_t i = 0; i < s->nworks; i++) fused |= s->works[i].fused;
    if (fused) {
        s->scratch = optim__malloc((size_t)s->nthreads * CHUNK * sizeof(double));
        if (!s->scratch) return optim__err(err, OPTIM_ENOMEM, "out of memory");
    }
    /* 5. Slots for variables seen for the first time, in pair order. */
    size_t nv = opt->nvars, ns = opt->nslots, nn = opt->nslot_names;
    for (size_t i = 0; i < s->nworks; i++) {
        rc = optim__track_var(opt, s->works[i].var, err);
        if (rc) {
            optim__rollback_vars(opt, nv, ns, nn);
            return rc;
        }
    }
    optim__order_new_slots(opt, ns);
    double wd = opt->gen == OPTIM_KERAS3 ? opt->values[OPTIM__P_WEIGHT_DECAY] : 0;
    for (size_t i = 0; i < s->nworks; i++) {
        work *w = &s->works[i];
        w->entry = optim__var_entry_of(opt, w->var);
        const double rate = opt->gen == OPTIM_KERAS3 && opt->cls.weight_decay
                                ? opt->cls.weight_decay(opt, w->var, wd) : wd;
        w->wd = rate > 0 && optim__use_weight_decay(opt, w->var) ? rate : 0;
        if (s->k3) s->k3[i].entry = w->entry;
    }
    s->nbase = optim__k3_nslots(opt);
    /* Nothing below can fail. An accumulating call only accumulates. */
    if (!k3.update) optim__k3_accumulate(opt, &k3, s->k3, s->nworks, s->nthreads);
    /* The update rule sees Keras's `iterations` (the counter divided by
     * gradient_accumulation_steps) as optim_iterations. */
    const int64_t counter = opt->iterations;
    opt->iterations = k3.iterations;
    /* 6. Per-step coefficients, once per dtype. */
    if (k3.update && opt->cls.prepare) {
        int seen[2] = {0, 0};
        for (size_t i = 0; i < s->nworks; i++) seen[s->works[i].dtype == OPTIM_F64] = 1;
        if (seen[0]) opt->cls.prepare(opt, OPTIM_F32, opt->coef[0]);
        if (seen[1]) opt->cls.prepare(opt, OPTIM_F64, opt->coef[1]);
    }
    /* 7. Update, all variables at once. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->nthreads)
    for (size_t t = 0; t < s->ntasks; t++) run_task(s, &s->tasks[t], omp_get_thread_num());
    opt->iterations = counter;
    /* Keras 3: reset the accumulators, update the moving averages of every
     * tracked variable and overwrite the variables with them when due. */
    optim__k3_after_update(opt, &k3, s->nthreads);
    /* 8. Constraints, then the counter. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(s->nthreads)
    for (size_t i = 0; i < s->nworks; i++) optim_var_apply_constraint(s->works[i].var);
    opt->iterations++;
    return OPTIM_OK;
}

int optim_apply_gradients(optim_optimizer *opt, const optim_grad_var *pairs, size_t n, uint32_t flags)
{
    if (!opt) return OPTIM_EINVAL;
    opt->errmsg[0] = '\0';
    if (opt->cls.apply_gradients) return opt->cls.apply_gradients(opt, pairs, n, flags);
    if (n && !pairs) return optim__opt_err(opt, OPTIM_EINVAL, "%s: pairs is NULL", opt->cls.name);
    step s;
    memset(&s, 0, sizeof s);
    s.opt = opt;
    optim_error err;
    optim__err_clear(&err);
    int rc = pipeline(&s, pairs, n, flags, &err);
    step_free(&s);
    if (rc) return optim__opt_take(opt, &err);
    return OPTIM_OK;
}
