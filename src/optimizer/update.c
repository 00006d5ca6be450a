/* Stage 7 of the pipeline (apply.c): the tasks of a step (fixed chunks of
 * dense work, sparse pieces in the mode the class answers, whole or phased
 * variables) and their runners, all run in one region by multi-tensor
 * apply (multi_tensor.c). */
#include "optimizer/half_step.h"
#include "optimizer/pipeline.h"

#include <string.h>

#include "core/half.h"
#include "core/parallel.h"

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
                               w->fused && !g32 ? optim__clip_block : NULL,
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
        optim__clip_run(w->dtype, g, thread_chunk(s, tid), t->count, &w->clip);
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
    if (w->fused && !half && optim__materialize_dense(s, w))
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    if (it->plan.nphases) it->mode = OPTIM__MT_PHASED;
    else s->tasks[s->ntasks++] = (task){i, 0, w->numel};
    return OPTIM_OK;
}

/* The tasks of dense work; room for those of sparse work, which
 * sparse_tasks adds once its mode is known (after stage 6); the phased
 * variables' buffers. */
int optim__make_tasks(step *s, optim_error *err)
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
void optim__sparse_tasks(step *s)
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

void optim__update_run(step *s)
{
    optim__mt_fill(&s->mt, s->ntasks, task_weight, s);
    optim__mt_run(&s->mt, s->nthreads, &(optim__mt_fns){run_mt_task, run_reduce, s});
}
