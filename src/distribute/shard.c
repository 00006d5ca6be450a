/* Sharded optimizer state (ZeRO stage 1). Each rank owns a balanced,
 * contiguous block of rows of every variable and sees it as a variable of
 * its own (`part`, borrowing the full variable's storage, with the same
 * name): the optimizer creates slots only for parts, so it keeps about
 * 1/size of the state. A step reduce-scatters the gradients into the
 * parts' gradients, runs the optimizer's ordinary pipeline on the parts
 * and all-gathers the updated rows into every rank's full variables. */
#include "distribute/internal.h"
#include "optim/optimizer_class.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void optim__shards_free(optim__attached *a)
{
    for (size_t i = 0; i < a->nshards; i++) optim_var_destroy(a->shards[i].part);
    free(a->shards);
    a->shards = NULL;
    a->nshards = a->cap = 0;
}

static int64_t rows_of(const optim_var *v) { return optim_var_rank(v) ? optim_var_shape(v)[0] : 1; }
static int64_t row_size(const optim_var *v)
{
    return rows_of(v) ? optim_var_numel(v) / rows_of(v) : 0;
}

/* The rows layout of the given variables (one dtype). */
static int layout_of(optim_group *g, optim__layout *l, optim_var *const *vars, size_t k,
                     optim_error *err)
{
    l->k = k;
    l->lo = optim__group_alloc(g, (k ? k : 1) * (size_t)(g->size + 1) * sizeof *l->lo);
    if (!l->lo) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    for (size_t i = 0; i < k; i++) optim__layout_rows(g, l, i, rows_of(vars[i]), row_size(vars[i]));
    return OPTIM_OK;
}

int optim__check_shardable_class(const optim_optimizer *opt, optim_error *err)
{
    const optim_class *c = optim_class_of(opt);
    if (!(c->flags & OPTIM_CLASS_ELEMENTWISE) || c->apply_gradients)
        return optim__err(err, OPTIM_ENOTSUP,
                          "replica group: %s cannot shard its state: its update is not "
                          "element-wise (it needs whole variables); use an unsharded group",
                          c->name);
    return OPTIM_OK;
}

/* Classes and options a shard can run: element-wise updates only. */
static int check_shardable(optim_optimizer *opt, optim_error *err)
{
    int rc = optim__check_shardable_class(opt, err);
    if (rc) return rc;
    static const char *const per_var[] = {"clipnorm", "global_clipnorm"};
    for (int i = 0; i < 2; i++) {
        double v = NAN;
        if (optim_get_hyper(opt, per_var[i], &v) == OPTIM_OK && !isnan(v))
            return optim__err(err, OPTIM_ENOTSUP,
                              "replica group: %s = %g needs norms of whole gradients, which a "
                              "sharded group does not compute; use an unsharded group",
                              per_var[i], v);
    }
    return OPTIM_OK;
}

/* The shard of var, created on first sight. */
static int shard_of(optim__attached *a, optim_var *var, optim__shard **out, optim_error *err)
{
    for (size_t i = 0; i < a->nshards; i++)
        if (a->shards[i].full == var) {
            *out = &a->shards[i];
            if (a->shards[i].numel != optim_var_numel(var) ||
                a->shards[i].dtype != optim_var_dtype(var))
                return optim__err(err, OPTIM_ESTATE,
                                  "replica group: variable '%s' is not the one this group "
                                  "sharded (destroyed and reused?)",
                                  optim_var_name(var));
            return OPTIM_OK;
        }
    if (a->nshards == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        optim__shard *s = realloc(a->shards, cap * sizeof *s);
        if (!s) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
        a->shards = s;
        a->cap = cap;
    }
    optim_group *g = a->g;
    optim__layout l;
    int rc = layout_of(g, &l, &var, 1, err);
    if (rc) return rc;
    int64_t lo = optim__block_lo(g, &l, 0, g->rank), n = optim__block_n(g, &l, 0, g->rank);
    int64_t shape[OPTIM_MAX_RANK];
    int32_t rank = optim_var_rank(var);
    memcpy(shape, optim_var_shape(var), (size_t)rank * sizeof *shape);
    if (rank) shape[0] = row_size(var) ? n / row_size(var) : 0;
    else if (!n) rank = 1, shape[0] = 0; /* a scalar's other ranks hold nothing */
    optim__shard *s = &a->shards[a->nshards];
    char *data = (char *)optim_var_data(var) + (size_t)lo * optim_dtype_size(optim_var_dtype(var));
    if ((rc = optim_var_wrap(&s->part, optim_var_name(var), optim_var_dtype(var), rank, shape, data,
                             err)))
        return rc;
    optim_var_set_trainable(s->part, optim_var_trainable(var));
    s->full = var;
    s->numel = optim_var_numel(var);
    s->dtype = optim_var_dtype(var);
    *out = s;
    a->nshards++;
    return OPTIM_OK;
}

/* The pairs that have a gradient, checked as far as the exchange needs. */
static int local_checks(optim__attached *a, const optim_grad_var *pairs, size_t n,
                        optim_grad_var *live, size_t *m, optim_error *err)
{
    if (n && !pairs)
        return optim__err(err, OPTIM_EINVAL, "optim_group_apply_gradients: pairs is NULL");
    int rc = check_shardable(a->opt, err);
    *m = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        const optim_grad_var *p = &pairs[i];
        if (!p->var)
            return optim__err(err, OPTIM_EINVAL,
                              "optim_group_apply_gradients: pair %zu has no variable", i);
        if (p->grad.kind == OPTIM_GRAD_NONE) continue;
        const char *vn = optim_var_name(p->var);
        if (p->grad.kind == OPTIM_GRAD_DENSE) {
            const optim_tensor *t = &p->grad.dense;
            if (t->dtype != optim_var_dtype(p->var) ||
                optim_tensor_numel(t) != optim_var_numel(p->var) ||
                (optim_tensor_numel(t) && !t->data))
                return optim__err(err, OPTIM_ESHAPE,
                                  "optim_group_apply_gradients: gradient of '%s' has %lld %s "
                                  "elements, expected %lld %s (the variable's)",
                                  vn, (long long)optim_tensor_numel(t), optim_dtype_name(t->dtype),
                                  (long long)optim_var_numel(p->var),
                                  optim_dtype_name(optim_var_dtype(p->var)));
        } else if (p->grad.kind == OPTIM_GRAD_SPARSE) {
            const optim_slices *s = &p->grad.sparse;
            if (optim_var_rank(p->var) < 1 || s->n < 0 ||
                s->values.dtype != optim_var_dtype(p->var) ||
                optim_tensor_numel(&s->values) != s->n * row_size(p->var) ||
                (s->n && (!s->indices || !s->values.data)))
                return optim__err(err, OPTIM_ESHAPE,
                                  "optim_group_apply_gradients: sparse gradient of '%s': %lld "
                                  "indices need %lld %s values of the variable's row shape",
                                  vn, (long long)s->n, (long long)(s->n * row_size(p->var)),
                                  optim_dtype_name(optim_var_dtype(p->var)));
            for (int64_t k = 0; k < s->n; k++)
                if (s->indices[k] < 0 || s->indices[k] >= rows_of(p->var))
                    return optim__err(err, OPTIM_ERANGE,
                                      "optim_group_apply_gradients: sparse gradient of '%s': index "
                                      "%lld at position %lld, expected 0..%lld",
                                      vn, (long long)s->indices[k], (long long)k,
                                      (long long)rows_of(p->var) - 1);
        } else
            return optim__err(err, OPTIM_EINVAL,
                              "optim_group_apply_gradients: gradient of '%s' has unknown kind %d",
                              vn, (int)p->grad.kind);
        optim__shard *sh;
        if ((rc = shard_of(a, p->var, &sh, err))) return rc;
        live[(*m)++] = *p;
    }
    return rc;
}

/* This rank's rows of a sparse gradient, re-indexed to its part. */
static int own_rows(optim_group *g, const optim_slices *s, const optim__shard *sh, optim_grad *out,
                    optim_error *err)
{
    int64_t rs = row_size(sh->full), r0 = 0, nr = rows_of(sh->part), n = 0;
    if (optim_var_numel(sh->part))
        r0 = ((const char *)optim_var_cdata(sh->part) - (const char *)optim_var_cdata(sh->full)) /
            (int64_t)optim_dtype_size(sh->dtype) / rs;
    size_t rowb = (size_t)rs * optim_dtype_size(sh->dtype);
    int64_t *idx = optim__group_alloc(g, (size_t)s->n * sizeof *idx);
    char *vals = optim__group_alloc(g, (size_t)s->n * rowb);
    if (!idx || !vals) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    for (int64_t k = 0; k < s->n; k++)
        if (s->indices[k] >= r0 && s->indices[k] < r0 + nr) {
            idx[n] = s->indices[k] - r0;
            memcpy(vals + (size_t)n * rowb, (const char *)s->values.data + (size_t)k * rowb, rowb);
            n++;
        }
    optim_tensor v = optim_var_tensor(sh->part);
    v.shape[0] = n;
    v.data = vals;
    *out = optim_grad_sparse(idx, n, v);
    return OPTIM_OK;
}

/* The parts' gradients: dense ones reduce-scattered (or sliced, when
 * already summed), sparse ones gathered and filtered to this rank's rows. */
static int part_grads(optim__attached *a, optim_grad_var *live, size_t m, uint32_t flags,
                      optim_error *err)
{
    optim_group *g = a->g;
    int sum = !(flags & OPTIM_APPLY_NO_AGGREGATE) && g->size > 1, sparse = 0, rc;
    for (size_t i = 0; i < m; i++) sparse |= live[i].grad.kind == OPTIM_GRAD_SPARSE;
    if (sum && sparse && (rc = optim__gather_sparse(g, live, m, err))) return rc;
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_var **vars = optim__group_alloc(g, (m ? m : 1) * sizeof *vars);
        const void **full = optim__group_alloc(g, (m ? m : 1) * sizeof *full);
        void **own = optim__group_alloc(g, (m ? m : 1) * sizeof *own);
        size_t *which = optim__group_alloc(g, (m ? m : 1) * sizeof *which), k = 0;
        if (!vars || !full || !own || !which)
            return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
        for (size_t i = 0; i < m; i++)
            if (live[i].grad.kind == OPTIM_GRAD_DENSE && live[i].grad.dense.dtype == dt)
                which[k] = i, vars[k] = live[i].var, full[k++] = live[i].grad.dense.data;
        if (!k) continue;
        optim__layout l = {0, dt, NULL};
        if ((rc = layout_of(g, &l, vars, k, err))) return rc;
        for (size_t j = 0; j < k; j++) {
            size_t off = (size_t)optim__block_lo(g, &l, j, g->rank) * optim_dtype_size(dt);
            own[j] = sum ? optim__group_alloc(
                               g, (size_t)optim__block_n(g, &l, j, g->rank) * optim_dtype_size(dt))
                         : (char *)full[j] + off;
            if (!own[j]) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
        }
        if (sum && (rc = optim__reduce_scatter(g, &l, full, own, err))) return rc;
        for (size_t j = 0; j < k; j++) {
            optim__shard *sh;
            shard_of(a, vars[j], &sh, err);
            optim_tensor t = optim_var_tensor(sh->part);
            t.data = own[j];
            live[which[j]].grad = optim_grad_dense(t);
        }
    }
    for (size_t i = 0; i < m; i++) {
        optim__shard *sh;
        shard_of(a, live[i].var, &sh, err);
        if (live[i].grad.kind == OPTIM_GRAD_SPARSE &&
            (rc = own_rows(g, &live[i].grad.sparse, sh, &live[i].grad, err)))
            return rc;
        live[i].var = sh->part;
    }
    return OPTIM_OK;
}

/* Every rank's updated rows into every rank's full variables, then the
 * constraints on the whole variables. */
static int gather_vars(optim__attached *a, optim_var *const *fulls, size_t m, optim_error *err)
{
    optim_group *g = a->g;
    for (int d = 0; d < 2 && g->size > 1; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_var **vars = optim__group_alloc(g, (m ? m : 1) * sizeof *vars);
        void **data = optim__group_alloc(g, (m ? m : 1) * sizeof *data);
        if (!vars || !data) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
        size_t k = 0;
        for (size_t i = 0; i < m; i++)
            if (optim_var_dtype(fulls[i]) == dt)
                vars[k] = fulls[i], data[k++] = optim_var_data(fulls[i]);
        optim__layout l = {0, dt, NULL};
        int rc = k ? layout_of(g, &l, vars, k, err) : OPTIM_OK;
        if (!rc && k) rc = optim__all_gather(g, &l, data, err);
        if (rc) return rc;
    }
    for (size_t i = 0; i < m; i++)
        if (optim_var_constraint(fulls[i])) optim_var_apply_constraint(fulls[i]);
    return OPTIM_OK;
}

int optim__shard_step(optim__attached *a, const optim_grad_var *pairs, size_t n, uint32_t flags,
                      optim_error *err)
{
    optim_group *g = a->g;
    optim_grad_var *live = optim__group_alloc(g, (n ? n : 1) * sizeof *live);
    optim_var **fulls = optim__group_alloc(g, (n ? n : 1) * sizeof *fulls);
    if (!live || !fulls) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    size_t m = 0;
    int rc = local_checks(a, pairs, n, live, &m, err);
    if ((rc = optim__agree(g, rc ? NULL : live, rc ? 0 : m, rc, err))) return rc;
    for (size_t i = 0; i < m; i++) fulls[i] = live[i].var;
    if ((rc = part_grads(a, live, m, flags, err))) return rc;
    rc = optim_apply_gradients(a->opt, live, m, flags | OPTIM_APPLY_NO_AGGREGATE);
    if (rc) optim__err(err, rc, "%s", optim_errmsg(a->opt));
    /* Every rank learns whether every update ran before the rows travel. */
    if ((rc = optim__agree(g, NULL, 0, rc, err))) return rc;
    return gather_vars(a, fulls, m, err);
}

/* The optimizer's weights (this rank's views) and, for each, the shard
 * whose slot it is (SIZE_MAX: not a slot of a part, kept whole). */
static int owners(optim__attached *a, optim_tensor **w_out, size_t **owner_out, size_t *nw_out,
                  optim_error *err)
{
    optim_group *g = a->g;
    size_t nw = optim_weights_count(a->opt), ns = optim_get_slot_names(a->opt, NULL, 0);
    optim_tensor *w = optim__group_alloc(g, (nw ? nw : 1) * sizeof *w);
    const char **names = optim__group_alloc(g, (ns ? ns : 1) * sizeof *names);
    size_t *owner = optim__group_alloc(g, (nw ? nw : 1) * sizeof *owner);
    if (!w || !names || !owner)
        return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    optim_get_weights(a->opt, w, nw);
    optim_get_slot_names(a->opt, names, ns);
    for (size_t i = 0; i < nw; i++) owner[i] = SIZE_MAX;
    for (size_t s = 0; s < a->nshards; s++)
        for (size_t j = 0; j < ns; j++) {
            optim_var *slot = optim_get_slot(a->opt, a->shards[s].part, names[j]);
            for (size_t i = 0; slot && i < nw; i++)
                if (w[i].data == optim_var_data(slot)) owner[i] = s;
        }
    *w_out = w, *owner_out = owner, *nw_out = nw;
    return OPTIM_OK;
}

int optim__shard_build(optim__attached *a, optim_var *const *vars, size_t n, optim_error *err)
{
    optim_var **parts = optim__group_alloc(a->g, (n ? n : 1) * sizeof *parts);
    if (!parts) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    int rc = check_shardable(a->opt, err);
    for (size_t i = 0; !rc && i < n; i++) {
        optim__shard *sh;
        if (!vars[i])
            return optim__err(err, OPTIM_EINVAL, "optim_group_build: vars[%zu] is NULL", i);
        if (!(rc = shard_of(a, vars[i], &sh, err))) parts[i] = sh->part;
    }
    if (!rc && (rc = optim_build(a->opt, parts, n)))
        optim__err(err, rc, "%s", optim_errmsg(a->opt));
    return rc;
}

int optim__shard_set_weights(optim__attached *a, const optim_tensor *weights, size_t n,
                             optim_error *err)
{
    optim_tensor *w;
    size_t *owner, nw;
    int rc = owners(a, &w, &owner, &nw, err);
    if (rc) return rc;
    if (n != nw)
        return optim__err(err, OPTIM_EINVAL,
                          "optim_group_set_weights: %zu weights given, the optimizer has %zu "
                          "(create its slots first: optim_group_build)",
                          n, nw);
    for (size_t i = 0; i < n; i++) {
        if (owner[i] == SIZE_MAX) {
            w[i] = weights[i];
            continue;
        }
        const optim_var *full = a->shards[owner[i]].full;
        char a_[160], b_[160];
        if (weights[i].dtype != optim_var_dtype(full) || weights[i].rank != optim_var_rank(full) ||
            optim_tensor_numel(&weights[i]) != optim_var_numel(full) || !weights[i].data)
            return optim__err(
                err, OPTIM_ESHAPE,
                "optim_group_set_weights: weight %zu ('%s') is %s %s, expected %s %s "
                "(its variable's)",
                i, optim_weight_name(a->opt, i), optim_dtype_name(weights[i].dtype),
                optim_shape_str(weights[i].rank, weights[i].shape, a_, sizeof a_),
                optim_dtype_name(optim_var_dtype(full)),
                optim_shape_str(optim_var_rank(full), optim_var_shape(full), b_, sizeof b_));
        const char *mine = optim_var_cdata(a->shards[owner[i]].part), *base = optim_var_cdata(full);
        w[i].data =
            (char *)weights[i].data + (mine - base); /* this rank's rows, at the part's offset */
    }
    if ((rc = optim_set_weights(a->opt, w, n))) optim__err(err, rc, "%s", optim_errmsg(a->opt));
    return rc;
}

int optim__shard_weights(optim__attached *a, optim_tensor *out, size_t cap, size_t *count,
                         optim_error *err)
{
    optim_group *g = a->g;
    optim_tensor *w;
    size_t *owner, nw;
    int rc = owners(a, &w, &owner, &nw, err);
    if (rc) return rc;
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        optim_var **vars = optim__group_alloc(g, (nw ? nw : 1) * sizeof *vars);
        void **full = optim__group_alloc(g, (nw ? nw : 1) * sizeof *full);
        size_t *which = optim__group_alloc(g, (nw ? nw : 1) * sizeof *which), k = 0;
        if (!vars || !full || !which)
            return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
        for (size_t i = 0; i < nw; i++)
            if (owner[i] != SIZE_MAX && w[i].dtype == dt)
                which[k] = i, vars[k++] = a->shards[owner[i]].full;
        if (!k) continue;
        optim__layout l = {0, dt, NULL};
        if ((rc = layout_of(g, &l, vars, k, err))) return rc;
        size_t esz = optim_dtype_size(dt);
        for (size_t j = 0; j < k; j++) {
            optim_tensor *t = &w[which[j]];
            if (optim_tensor_numel(t) != optim__block_n(g, &l, j, g->rank))
                return optim__err(err, OPTIM_ESTATE,
                                  "replica group: weight '%s' has %lld elements, expected %lld "
                                  "(its variable's rows on rank %d)",
                                  optim_weight_name(a->opt, which[j]),
                                  (long long)optim_tensor_numel(t),
                                  (long long)optim__block_n(g, &l, j, g->rank), g->rank);
            if (!(full[j] = optim__group_alloc(g, (size_t)optim_var_numel(vars[j]) * esz)))
                return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
            memcpy((char *)full[j] + (size_t)optim__block_lo(g, &l, j, g->rank) * esz, t->data,
                   (size_t)optim_tensor_numel(t) * esz);
        }
        if ((rc = optim__all_gather(g, &l, full, err))) return rc;
        for (size_t j = 0; j < k; j++)
            w[which[j]] =
                optim_tensor_make(dt, full[j], optim_var_rank(vars[j]), optim_var_shape(vars[j]));
    }
    for (size_t i = 0; i < nw && i < cap; i++) out[i] = w[i];
    *count = nw;
    return OPTIM_OK;
}
