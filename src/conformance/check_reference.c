/* The "reference" group: the class's steps against the author's own rule
 * (optim_conformance_options.reference), computed in double precision on
 * the same seeded values and dense gradients, one line per dtype and
 * variable; nothing without a reference (no line: a run without one is
 * the contract checks alone). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/harness.h"

#define REF_SHAPES ((1u << CF_SCALAR) | (1u << CF_VECTOR) | (1u << CF_MATRIX))

/* The reference's numbers for p's variables: values, gradients, state. */
typedef struct ref_vars {
    double *w[CF_NSHAPES], *g[CF_NSHAPES], *s[CF_NSHAPES];
} ref_vars;

static int ref_alloc(ref_vars *r, const cf_problem *p, int nstate)
{
    for (size_t v = 0; v < p->n; v++) {
        size_t n = (size_t)optim_var_numel(p->vars[v]) + 1;
        r->w[v] = malloc(n * sizeof(double));
        r->g[v] = malloc(n * sizeof(double));
        r->s[v] = calloc(n * (size_t)(nstate ? nstate : 1), sizeof(double));
        if (!r->w[v] || !r->g[v] || !r->s[v]) return 1;
        for (int64_t i = 0; i + 1 < (int64_t)n; i++)
            r->w[v][i] = optim__cf_get(p->init[v], p->dtype, i);
    }
    return 0;
}

static void ref_free(ref_vars *r)
{
    for (int v = 0; v < CF_NSHAPES; v++) free(r->w[v]), free(r->g[v]), free(r->s[v]);
}

/* Step k of the reference: optim__cf_step_dense's gradients, rounded to
 * the dtype as the class sees them. */
static int ref_step(cf_ctx *c, ref_vars *r, const cf_problem *p, int k)
{
    for (size_t v = 0; v < p->n; v++) {
        int64_t n = optim_var_numel(p->vars[v]);
        for (int64_t i = 0; i < n; i++) {
            double x = optim__cf_rand(p->seed, 2000 + k, v, i);
            r->g[v][i] = p->dtype == OPTIM_F32 ? (double)(float)x : x;
        }
        if (c->reference(c->reference_user, r->w[v], r->g[v], r->s[v], n, k + 1)) return 1;
    }
    return 0;
}

/* One line for variable v: its values against the reference's. */
static void compare(cf_ctx *c, const ref_vars *r, const cf_problem *p, size_t v, int steps)
{
    const int f32 = p->dtype == OPTIM_F32;
    double rtol = c->rtol > 0 ? c->rtol : f32 ? 1e-5 : 1e-12;
    double atol = c->atol > 0 ? c->atol : f32 ? 1e-6 : 1e-14;
    const char *name = optim_var_name(p->vars[v]);
    int64_t n = optim_var_numel(p->vars[v]), bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
        double got = optim__cf_get(optim_var_cdata(p->vars[v]), p->dtype, i), want = r->w[v][i];
        int ok =
            isnan(want) ? isnan(got) : got == want || fabs(got - want) <= atol + rtol * fabs(want);
        if (!ok && first < 0) first = i;
        bad += !ok;
    }
    char check[64], expected[CF_TEXT];
    snprintf(check, sizeof check, "reference.%s.%s", f32 ? "f32" : "f64", name);
    snprintf(expected, sizeof expected,
             "after %d steps, every element of '%s' within atol %g + rtol %g * |expected| of "
             "the reference rule's",
             steps, name, atol, rtol);
    if (!bad) {
        optim__cf_report(c, check, 1, expected, "%lld elements agree", (long long)n);
        return;
    }
    optim__cf_report(c, check, 0, expected,
                     "element %lld is %.17g, the reference's %.17g (%lld of %lld elements outside)",
                     (long long)first, optim__cf_get(optim_var_cdata(p->vars[v]), p->dtype, first),
                     r->w[v][first], (long long)bad, (long long)n);
}

static void one_dtype(cf_ctx *c, optim_dtype dt, int steps)
{
    char check[64], why[CF_TEXT] = "";
    snprintf(check, sizeof check, "reference.%s", dt == OPTIM_F32 ? "f32" : "f64");
    optim_optimizer *opt = NULL;
    cf_problem p = {0};
    ref_vars r;
    memset(&r, 0, sizeof r);
    int bad = optim__cf_create(c, NULL, NULL, &opt, why, sizeof why);
    if (!bad &&
        (optim__cf_problem_init(&p, dt, REF_SHAPES, c->seed) ||
         ref_alloc(&r, &p, c->reference_state)))
        bad = 1, snprintf(why, sizeof why, "out of memory");
    for (int k = 0; !bad && k < steps; k++) {
        if (optim__cf_step_dense(opt, &p, k))
            bad = 1, snprintf(why, sizeof why, "step %d failed: %s", k + 1, optim_errmsg(opt));
        else if (ref_step(c, &r, &p, k))
            bad = 1,
            snprintf(why, sizeof why,
                     "the reference function returned non-zero at "
                     "step %d",
                     k + 1);
    }
    if (bad) optim__cf_report(c, check, 0, "the class and the reference rule step", "%s", why);
    for (size_t v = 0; !bad && v < p.n; v++) compare(c, &r, &p, v, steps);
    ref_free(&r);
    optim__cf_problem_free(&p);
    optim_destroy(opt);
}

void optim__cf_check_reference(cf_ctx *c)
{
    if (!c->reference) return;
    int steps = c->reference_steps > 0 ? c->reference_steps : 5;
    one_dtype(c, OPTIM_F32, steps);
    one_dtype(c, OPTIM_F64, steps);
}
