/* What every layer shares: names, lazy build, variables, calls, messages. */
#include "nn/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int optim__layer_new(optim_layer **out, const optim__layer_ops *ops, const char *name, int64_t seed,
                     optim_error *err)
{
    *out = NULL;
    if (name) {
        size_t len = strlen(name);
        if (len == 0 || len >= OPTIM__NN_NAME_MAX || strchr(name, '/')) {
            return optim__err(err, OPTIM_EINVAL,
                              "%s: name '%s' must be 1 to %d characters without '/'",
                              ops->class_name, name, OPTIM__NN_NAME_MAX - 1);
        }
    }
    if (seed < 0 && seed != OPTIM_SEED_AUTO) {
        return optim__err(err, OPTIM_EINVAL, "%s: seed = %lld, expected >= 0 or OPTIM_SEED_AUTO",
                          ops->class_name, (long long)seed);
    }
    optim_layer *l = calloc(1, sizeof *l);
    if (!l) return optim__err(err, OPTIM_ENOMEM, "%s: out of memory", ops->class_name);
    l->ops = ops;
    l->auto_name = name == NULL;
    snprintf(l->name, sizeof l->name, "%s", name ? name : ops->base_name);
    l->seed = seed;
    l->eff_seed = seed == OPTIM_SEED_AUTO ? 0 : (uint64_t)seed;
    *out = l;
    return OPTIM_OK;
}

void optim__layer_unbuild(optim_layer *l)
{
    for (size_t i = 0; i < l->nvars; i++) optim_var_destroy(l->vars[i]);
    l->nvars = 0;
    l->built = 0;
    l->dtype = OPTIM_DTYPE_INVALID;
}

void optim_layer_destroy(optim_layer *l)
{
    if (!l) return;
    optim__layer_unbuild(l);
    if (l->ops->destroy) l->ops->destroy(l);
    free(l);
}

int optim__check_constraint(const optim_constraint *c, int32_t rank, const char *what,
                            optim_error *err)
{
    if (!c || c->kind == OPTIM_CONSTRAINT_NONE) return OPTIM_OK;
    int64_t shape[OPTIM_MAX_RANK];
    for (int32_t i = 0; i < rank; i++) shape[i] = 1;
    optim_var *v;
    int rc = optim_var_create(&v, what, OPTIM_F32, rank, shape, NULL, err);
    if (rc) return rc;
    rc = optim_var_set_constraint(v, c);
    if (rc) optim__err(err, rc, "%s: %s", what, optim_var_errmsg(v));
    optim_var_destroy(v);
    return rc;
}

int optim__layer_add_var(optim_layer *l, const char *what, optim_dtype dt, int32_t rank,
                         const int64_t *shape, const double *init, const optim_constraint *c,
                         optim_error *err)
{
    if (l->nvars >= sizeof l->vars / sizeof *l->vars)
        return optim__err(err, OPTIM_ESTATE, "%s: too many variables", l->name);
    char vname[2 * OPTIM__NN_NAME_MAX];
    snprintf(vname, sizeof vname, "%s/%s", l->name, what);
    optim_tensor shp = optim_tensor_make(dt, NULL, rank, shape);
    int64_t n = optim_tensor_numel(&shp);
    if (n < 0 || (uint64_t)n > SIZE_MAX / 8)
        return optim__err(err, OPTIM_ESHAPE, "%s: shape too large", vname);
    void *buf = NULL;
    if (init) {
        buf = malloc(n ? (size_t)n * optim_dtype_size(dt) : 1);
        if (!buf) return optim__err(err, OPTIM_ENOMEM, "%s: out of memory", vname);
        for (int64_t i = 0; i < n; i++) {
            if (dt == OPTIM_F32) ((float *)buf)[i] = (float)init[i];
            else ((double *)buf)[i] = init[i];
        }
    }
    optim_var *v;
    int rc = optim_var_create(&v, vname, dt, rank, shape, buf, err);
    free(buf);
    if (rc) return rc;
    if (c && c->kind != OPTIM_CONSTRAINT_NONE) {
        rc = optim_var_set_constraint(v, c);
        if (rc) {
            optim__err(err, rc, "%s: %s", vname, optim_var_errmsg(v));
            optim_var_destroy(v);
            return rc;
        }
    }
    l->vars[l->nvars++] = v;
    return OPTIM_OK;
}

int optim__layer_build(optim_layer *l, int32_t rank, const int64_t *in, optim_dtype dt,
                       optim_error *err)
{
    if (l->built) return OPTIM_OK;
    if (dt != OPTIM_F32 && dt != OPTIM_F64)
        return optim__err(err, OPTIM_EDTYPE, "%s: dtype %s, expected float32 or float64", l->name,
                          optim_dtype_name(dt));
    int32_t orank;
    int64_t oshape[OPTIM_MAX_RANK];
    int rc = l->ops->output_shape(l, rank, in, &orank, oshape, err);
    if (rc) return rc;
    l->dtype = dt;
    if (l->ops->build) {
        rc = l->ops->build(l, rank, in, dt, err);
        if (rc) {
            optim__layer_unbuild(l);
            return rc;
        }
    }
    l->built = 1;
    return OPTIM_OK;
}

const char *optim_layer_name(const optim_layer *l) { return l ? l->name : NULL; }
const char *optim_layer_class_name(const optim_layer *l) { return l ? l->ops->class_name : NULL; }
int optim_layer_built(const optim_layer *l) { return l && l->built; }
const char *optim_layer_errmsg(const optim_layer *l) { return l ? l->errmsg : ""; }

uint64_t optim_layer_training_calls(const optim_layer *l) { return l ? l->calls : 0; }

int optim_layer_set_training_calls(optim_layer *l, uint64_t calls)
{
    if (!l) return OPTIM_EINVAL;
    l->calls = calls;
    return OPTIM_OK;
}

size_t optim_layer_variables(const optim_layer *l, optim_var **vars, size_t cap)
{
    if (!l) return 0;
    for (size_t i = 0; i < l->nvars && i < cap; i++)
        if (vars) vars[i] = l->vars[i];
    return l->nvars;
}

static int layer_fail(optim_layer *l, const optim_error *e)
{
    snprintf(l->errmsg, sizeof l->errmsg, "%s", e->msg);
    return e->code;
}

int optim__layer_forward(optim_layer *l, optim_tape *t, optim_node *x, const optim_tensor *ids,
                         int training, optim_node **out, optim_error *err)
{
    int32_t orank;
    int64_t oshape[OPTIM_MAX_RANK];
    int rc;
    if (l->ops->takes_ids) {
        if (!ids || x)
            return optim__err(err, OPTIM_EINVAL,
                              "%s: an %s takes integer ids (ids non-NULL, x NULL)", l->name,
                              l->ops->class_name);
        rc = optim__tensor_check(
            ids, OPTIM__FLOAT_MASK | OPTIM__MASK(OPTIM_I32) | OPTIM__MASK(OPTIM_I64), "ids", err);
        if (rc) return rc;
        if (!l->built && (rc = optim__layer_build(l, ids->rank, ids->shape, OPTIM_F32, err)))
            return rc;
        if ((rc = l->ops->output_shape(l, ids->rank, ids->shape, &orank, oshape, err))) return rc;
    } else {
        if (ids)
            return optim__err(err, OPTIM_EINVAL, "%s: a %s layer takes a node (x), not ids",
                              l->name, l->ops->class_name);
        const optim_tensor *xv = optim_node_value(x);
        if (!xv)
            return optim__err(err, OPTIM_EINVAL,
                              "%s: the input node is NULL (an earlier op failed: %s)", l->name,
                              optim_tape_errmsg(t));
        if (!l->built && (rc = optim__layer_build(l, xv->rank, xv->shape, xv->dtype, err)))
            return rc;
        if (xv->dtype != l->dtype)
            return optim__err(err, OPTIM_EDTYPE, "%s: input is %s, the layer was built for %s",
                              l->name, optim_dtype_name(xv->dtype), optim_dtype_name(l->dtype));
        if ((rc = l->ops->output_shape(l, xv->rank, xv->shape, &orank, oshape, err))) return rc;
    }
    return l->ops->call(l, t, x, ids, training, out, err);
}

int optim_layer_call(optim_layer *l, optim_tape *t, optim_node *x, const optim_tensor *ids,
                     int training, optim_node **out)
{
    if (!l) return OPTIM_EINVAL;
    optim_error e;
    optim__err_clear(&e);
    l->errmsg[0] = '\0';
    if (!out) {
        optim__err(&e, OPTIM_EINVAL, "%s: out is NULL", l->name);
        return layer_fail(l, &e);
    }
    *out = NULL;
    if (!t) {
        optim__err(&e, OPTIM_EINVAL, "%s: the tape is NULL", l->name);
        return layer_fail(l, &e);
    }
    int rc = optim__layer_forward(l, t, x, ids, training, out, &e);
    if (rc) {
        *out = NULL;
        return layer_fail(l, &e);
    }
    return OPTIM_OK;
}
