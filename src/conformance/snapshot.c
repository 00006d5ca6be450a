/* Snapshots of everything a step may change: the problem's variables and the
 * optimizer's weights (iterations and every slot), by name, and their
 * comparison bit for bit or within a tolerance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/harness.h"

static int add(cf_snapshot *s, const char *name, const optim_tensor *t)
{
    size_t i = s->n;
    int64_t numel = optim_tensor_numel(t);
    size_t bytes = (size_t)numel * optim_dtype_size(t->dtype);
    s->names[i] = malloc(strlen(name) + 1);
    s->data[i] = malloc(bytes ? bytes : 1);
    if (!s->names[i] || !s->data[i]) {
        free(s->names[i]);
        free(s->data[i]);
        return OPTIM_ENOMEM;
    }
    strcpy(s->names[i], name);
    if (bytes) memcpy(s->data[i], t->data, bytes);
    s->dtypes[i] = t->dtype;
    s->sizes[i] = numel;
    s->n++;
    return OPTIM_OK;
}

int optim__cf_snap(cf_snapshot *s, optim_optimizer *opt, const cf_problem *p)
{
    memset(s, 0, sizeof *s);
    size_t nw = opt ? optim_weights_count(opt) : 0, cap = nw + p->n;
    optim_tensor *w = calloc(nw + 1, sizeof *w);
    s->names = calloc(cap + 1, sizeof *s->names);
    s->dtypes = calloc(cap + 1, sizeof *s->dtypes);
    s->sizes = calloc(cap + 1, sizeof *s->sizes);
    s->data = calloc(cap + 1, sizeof *s->data);
    int rc = w && s->names && s->dtypes && s->sizes && s->data ? OPTIM_OK : OPTIM_ENOMEM;
    for (size_t i = 0; !rc && i < p->n; i++) {
        optim_tensor t = optim_var_tensor(p->vars[i]);
        rc = add(s, optim_var_name(p->vars[i]), &t);
    }
    if (!rc && nw) nw = optim_get_weights(opt, w, nw);
    for (size_t i = 0; !rc && i < nw; i++) {
        char name[CF_TEXT];
        snprintf(name, sizeof name, "weight %s", optim_weight_name(opt, i));
        rc = add(s, name, &w[i]);
    }
    free(w);
    if (rc) optim__cf_snap_free(s);
    return rc;
}

void optim__cf_snap_free(cf_snapshot *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->names[i]);
        free(s->data[i]);
    }
    free(s->names);
    free(s->dtypes);
    free(s->sizes);
    free(s->data);
    memset(s, 0, sizeof *s);
}

static double value(optim_dtype dt, const void *d, int64_t i)
{
    switch (dt) {
    case OPTIM_F32: return ((const float *)d)[i];
    case OPTIM_F64: return ((const double *)d)[i];
    case OPTIM_I64: return (double)((const int64_t *)d)[i];
    default: return (double)((const int32_t *)d)[i];
    }
}

int optim__cf_snap_diff(const cf_snapshot *a, const cf_snapshot *b, double tol, char *why, size_t n)
{
    if (a->n != b->n) {
        snprintf(why, n, "%zu vs %zu variables and weights", a->n, b->n);
        return 1;
    }
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->names[i], b->names[i]) || a->dtypes[i] != b->dtypes[i] ||
            a->sizes[i] != b->sizes[i]) {
            snprintf(why, n, "'%s' (%lld elements) vs '%s' (%lld elements)", a->names[i],
                     (long long)a->sizes[i], b->names[i], (long long)b->sizes[i]);
            return 1;
        }
        size_t es = optim_dtype_size(a->dtypes[i]);
        for (int64_t e = 0; e < a->sizes[i]; e++) {
            if (!memcmp((const char *)a->data[i] + e * es, (const char *)b->data[i] + e * es, es))
                continue;
            double x = value(a->dtypes[i], a->data[i], e), y = value(b->dtypes[i], b->data[i], e);
            if (tol > 0 && fabs(x - y) <= tol * (fabs(x) + fabs(y) + 1e-3)) continue;
            snprintf(why, n, "'%s' element %lld: %.17g vs %.17g", a->names[i], (long long)e, x, y);
            return 1;
        }
    }
    return 0;
}
