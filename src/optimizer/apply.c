/* apply_gradients: the pipeline (docs/architecture.md), one named stage per
 * step of the design (stage 1, validation, is in check.c; stage 4's
 * clipping and de-duplication in clip.c; stage 7's tasks and runners in
 * update.c; the step they share in pipeline.h):
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
#include "optimizer/half_step.h"
#include "optimizer/pipeline.h"

#include <string.h>

#include "core/half.h"
#include "core/parallel.h"

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
            if ((w->fused && optim__materialize_rows(s, w)) || sparse_pair(s, w, p))
                return OPTIM_ENOMEM;
            continue;
        }
        if (optim__materialize_dense(s, w)) return OPTIM_ENOMEM;
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
            if (optim__dedup(s, w)) return optim__err(err, OPTIM_ENOMEM, "out of memory");
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
    if (k->update && optim__clip_all(s, k->acc_steps ? 0 : k->lsf))
        return optim__err(err, OPTIM_ENOMEM, "out of memory");
    for (size_t t = 0; k->update && t < s->tf_src->ntransformers; t++) {
        const optim__fn_entry *f = &s->tf_src->transformers[t];
        if ((rc = run_user_fn(s, f->fn, f->user, "gradient transformer", 0, err))) return rc;
    }
    for (size_t i = 0; i < s->nworks; i++)
        if (s->works[i].kind == OPTIM_GRAD_SPARSE && !s->works[i].idx &&
            optim__dedup(s, &s->works[i]))
            return optim__err(err, OPTIM_ENOMEM, "out of memory");
    if (k->update && (rc = optim__make_tasks(s, err))) return rc;
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
    else optim__sparse_tasks(s);
    if (s->k3.update) optim__update_run(s);
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
