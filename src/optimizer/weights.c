/* get_weights / set_weights: iterations, then the slots in creation order. */
#include "core/hash.h"
#include "optimizer/impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A wrapper's weights are its iterations, then each inner optimizer's
 * weights after the inner iterations, then its own. */
optim_optimizer *optim__inner_at(const optim_optimizer *opt, size_t i)
{
    if (opt->cls.inner_at) return opt->cls.inner_at(opt, i);
    return i == 0 && opt->cls.inner ? opt->cls.inner(opt) : NULL;
}

size_t optim_weights_count(const optim_optimizer *opt)
{
    size_t n = 1 + opt->nslots;
    const optim_optimizer *in;
    for (size_t k = 0; (in = optim__inner_at(opt, k)); k++) n += optim_weights_count(in) - 1;
    return n;
}

/* Weight i >= 1 as a variable, NULL past the end. */
static optim_var *weight_var(const optim_optimizer *opt, size_t i)
{
    const optim_optimizer *in;
    for (size_t k = 0; i >= 1 && (in = optim__inner_at(opt, k)); k++) {
        size_t nin = optim_weights_count(in) - 1;
        if (i <= nin) return weight_var(in, i);
        i -= nin;
    }
    return i >= 1 && i <= opt->nslots ? opt->slots[i - 1].var : NULL;
}

/* The class's slot of weight i >= 1 (NULL for an optimizer-level weight
 * or past the end), and the optimizer that owns it. */
static const optim__slot *weight_slot(const optim_optimizer *opt, size_t i,
                                      const optim_optimizer **owner)
{
    const optim_optimizer *in;
    for (size_t k = 0; i >= 1 && (in = optim__inner_at(opt, k)); k++) {
        size_t nin = optim_weights_count(in) - 1;
        if (i <= nin) return weight_slot(in, i, owner);
        i -= nin;
    }
    if (i < 1 || i > opt->nslots || opt->slots[i - 1].owner == OPTIM__NO_OWNER) return NULL;
    *owner = opt;
    return &opt->slots[i - 1];
}

/* The slot name of weight i when its class declares it non-negative. */
static const char *nonnegative_slot(const optim_optimizer *opt, size_t i)
{
    const optim_optimizer *o = NULL;
    const optim__slot *sl = weight_slot(opt, i, &o);
    const char *const *d = sl ? o->cls.nonnegative_slots : NULL;
    for (size_t k = 0; d && d[k]; k++)
        if (strcmp(d[k], o->slot_names[sl->name_id]) == 0) return d[k];
    return NULL;
}

/* Index of the first element of t that is negative or NaN (-0 is not), or
 * -1; *value is it. */
static int64_t first_negative(const optim_tensor *t, double *value)
{
    int64_t n = optim_tensor_numel(t);
    for (int64_t k = 0; k < n; k++) {
        double v;
        if (t->dtype == OPTIM_F32) v = ((const float *)t->data)[k];
        else if (t->dtype == OPTIM_F64) v = ((const double *)t->data)[k];
        else optim_convert(&v, OPTIM_F64, (const uint16_t *)t->data + k, t->dtype, 1);
        if (!(v >= 0)) return *value = v, k;
    }
    return -1;
}

/* Weight i >= 1 is in the domain its class declares for the slot. */
static int check_domain(optim_optimizer *opt, size_t i, const optim_tensor *t, const char *what)
{
    const char *slot = nonnegative_slot(opt, i);
    double v = 0;
    int64_t k = slot ? first_negative(t, &v) : -1;
    if (k < 0) return OPTIM_OK;
    return optim__opt_err(opt, OPTIM_ERANGE,
                          "%s element %lld is %g, expected >= 0 (the class declares slot '%s' "
                          "non-negative)",
                          what, (long long)k, v, slot);
}

size_t optim_get_weights(optim_optimizer *opt, optim_tensor *out, size_t cap)
{
    size_t n = optim_weights_count(opt);
    if (cap > 0) out[0] = optim_tensor_make(OPTIM_I64, &opt->iterations, 0, NULL);
    for (size_t i = 1; i < n && i < cap; i++) out[i] = optim_var_tensor(weight_var(opt, i));
    return n;
}

/* ---- names: nested wrappers qualify their weights per level ------------------------------ *
 *
 * A weight is listed under its own name (VAR/SLOT, or the weight's name)
 * unless a weight listed before it, an inner optimizer's, has that name
 * already (Lookahead in Lookahead: two "w/slow"). It is then listed as
 * "OPTNAME/NAME" with the name of the optimizer that owns it, or
 * "OPTNAME_K/NAME" with the first K = 1, 2, ... that is free. */

/* Every weight after iterations, in listing order, with its owner. */
static size_t list_weights(const optim_optimizer *opt, optim_var **vars,
                           const optim_optimizer **owner)
{
    size_t n = 0;
    const optim_optimizer *in;
    for (size_t k = 0; (in = optim__inner_at(opt, k)); k++)
        n += list_weights(in, vars + n, owner + n);
    for (size_t i = 0; i < opt->nslots; i++, n++) {
        vars[n] = opt->slots[i].var;
        owner[n] = opt;
    }
    return n;
}
typedef struct name_set {
    const char **slot;
    size_t cap;
} name_set;

/* Adds name (kept by pointer); returns 0 if it was there already. */
static int set_add(name_set *set, const char *name)
{
    size_t i = (size_t)optim__fnv1a_str(name) & (set->cap - 1);
    for (; set->slot[i]; i = (i + 1) & (set->cap - 1))
        if (strcmp(set->slot[i], name) == 0) return 0;
    set->slot[i] = name;
    return 1;
}

void optim__weight_names_free(optim_optimizer *opt)
{
    for (size_t i = 0; opt->weight_names && opt->weight_names[i] != (char *)opt; i++)
        free(opt->weight_names[i]);
    free(opt->weight_names);
    opt->weight_names = NULL;
}

/* The version of the weights of every level. */
static uint64_t weights_version(const optim_optimizer *opt)
{
    uint64_t v = opt->weights_version + 1;
    const optim_optimizer *in;
    for (size_t k = 0; (in = optim__inner_at(opt, k)); k++) v = v * 31 + weights_version(in);
    return v;
}

/* The qualified name of weight j owned by o, free in set (malloc'd). */
static char *qualify(name_set *set, const optim_optimizer *o, const char *name)
{
    size_t len = strlen(o->name) + strlen(name) + 24;
    char *q = malloc(len);
    for (unsigned k = 0; q; k++) {
        if (k == 0) snprintf(q, len, "%s/%s", o->name, name);
        else snprintf(q, len, "%s_%u/%s", o->name, k, name);
        if (set_add(set, q)) return q;
    }
    return NULL;
}

/* Computes opt->weight_names: NULL where a weight keeps its own name. */
static int name_weights(optim_optimizer *opt, size_t n)
{
    optim__weight_names_free(opt);
    optim_var **vars = malloc((n + 1) * sizeof *vars);
    const optim_optimizer **owner = malloc((n + 1) * sizeof *owner);
    name_set set = {NULL, 16};
    while (set.cap < 2 * n + 2) set.cap *= 2;
    set.slot = calloc(set.cap, sizeof *set.slot);
    char **names = calloc(n + 1, sizeof *names); /* names[n] = opt: the end */
    int ok = vars && owner && set.slot && names;
    if (ok) list_weights(opt, vars, owner);
    if (ok) set_add(&set, "iterations");
    for (size_t j = 0; ok && j < n; j++)
        if (!set_add(&set, optim_var_name(vars[j])) &&
            !(names[j] = qualify(&set, owner[j], optim_var_name(vars[j]))))
            ok = 0;
    if (names) names[n] = (char *)opt;
    opt->weight_names = names;
    opt->names_version = weights_version(opt);
    if (!ok) optim__weight_names_free(opt);
    free(vars);
    free(owner);
    free(set.slot);
    return ok;
}

const char *optim_weight_name(const optim_optimizer *opt, size_t i)
{
    if (i == 0) return "iterations";
    optim_var *v = weight_var(opt, i);
    if (!v) return NULL;
    if (!optim__inner_at(opt, 0)) return optim_var_name(v);
    /* Names are computed for the weights as they are now, and again after
     * weights were added, removed or moved at any level. */
    optim_optimizer *o = (optim_optimizer *)opt;
    if ((!o->weight_names || o->names_version != weights_version(opt)) &&
        !name_weights(o, optim_weights_count(opt) - 1))
        return NULL;
    return o->weight_names[i - 1] ? o->weight_names[i - 1] : optim_var_name(v);
}


int optim_set_iterations(optim_optimizer *opt, int64_t iterations)
{
    if (iterations < 0 || iterations > OPTIM_ITERATIONS_MAX)
        return optim_set_error(opt, OPTIM_ERANGE, "iterations is %lld, expected 0..%lld",
                               (long long)iterations, (long long)OPTIM_ITERATIONS_MAX);
    opt->iterations = iterations;
    optim_optimizer *in = opt->cls.inner_at ? NULL : optim__inner_at(opt, 0);
    if (in) optim_set_iterations(in, iterations);
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}

/* Reads the iterations weight; any integer or float scalar holding an
 * integral, non-negative value is accepted (Keras stores it as int64). */
static int read_iterations(optim_optimizer *opt, const optim_tensor *t, int64_t *out)
{
    optim_error e;
    unsigned all = OPTIM__FLOAT_MASK | OPTIM__MASK(OPTIM_I32) | OPTIM__MASK(OPTIM_I64);
    if (optim__tensor_check(t, all, "set_weights: weight 0 (iterations)", &e))
        return optim__opt_take(opt, &e);
    if (optim_tensor_numel(t) != 1)
        return optim__opt_err(opt, OPTIM_ESHAPE,
                              "set_weights: weight 0 (iterations) has %lld elements, expected a "
                              "scalar",
                              (long long)optim_tensor_numel(t));
    double v;
    switch (t->dtype) {
    case OPTIM_I64:
        *out = *(const int64_t *)t->data;
        return *out >= 0 && *out <= OPTIM_ITERATIONS_MAX
            ? OPTIM_OK
            : optim__opt_err(opt, OPTIM_ERANGE, "set_weights: iterations is %lld, expected 0..%lld",
                             (long long)*out, (long long)OPTIM_ITERATIONS_MAX);
    case OPTIM_I32: v = *(const int32_t *)t->data; break;
    case OPTIM_F32: v = *(const float *)t->data; break;
    default: v = *(const double *)t->data; break;
    }
    if (!(v >= 0) || v != floor(v) || v > (double)OPTIM_ITERATIONS_MAX)
        return optim__opt_err(opt, OPTIM_ERANGE,
                              "set_weights: iterations is %g, expected an integer in 0..%lld", v,
                              (long long)OPTIM_ITERATIONS_MAX);
    *out = (int64_t)v;
    return OPTIM_OK;
}

int optim_set_weights(optim_optimizer *opt, const optim_tensor *w, size_t n)
{
    size_t want = optim_weights_count(opt);
    if (n != want)
        return optim__opt_err(opt, OPTIM_ESHAPE,
                              "set_weights: %zu weights given, expected %zu (iterations and %zu "
                              "slots)",
                              n, want, want - 1);
    if (!w) return optim__opt_err(opt, OPTIM_EINVAL, "set_weights: weights is NULL");
    int64_t it = 0;
    int rc = read_iterations(opt, &w[0], &it);
    if (rc) return rc;
    for (size_t i = 1; i < n; i++) {
        optim_var *s = weight_var(opt, i);
        char what[300];
        optim_error e;
        snprintf(what, sizeof what, "set_weights: weight %zu ('%s')", i, optim_var_name(s));
        if (optim__tensor_check(&w[i], OPTIM__MASK(optim_var_dtype(s)), what, &e))
            return optim__opt_take(opt, &e);
        int same = w[i].rank == optim_var_rank(s);
        for (int32_t d = 0; same && d < w[i].rank; d++)
            same = w[i].shape[d] == optim_var_shape(s)[d];
        if (!same) {
            char a[160], b[160];
            return optim__opt_err(
                opt, OPTIM_ESHAPE, "%s has shape %s, expected %s", what,
                optim_shape_str(w[i].rank, w[i].shape, a, sizeof a),
                optim_shape_str(optim_var_rank(s), optim_var_shape(s), b, sizeof b));
        }
        if ((rc = check_domain(opt, i, &w[i], what))) return rc;
    }
    optim_set_iterations(opt, it);
    for (size_t i = 1; i < n; i++) {
        optim_var *s = weight_var(opt, i);
        optim_var_assign(s, w[i].data, w[i].dtype, optim_var_numel(s));
    }
    opt->errmsg[0] = '\0';
    return OPTIM_OK;
}
