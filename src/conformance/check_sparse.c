/* Checks of sparse gradients, for classes that take them. After a dense
 * step, a sparse step on the matrix with unique indices must follow the
 * rules of docs/custom-optimizer.md section 5, recognised from the result
 * for the variable and each slot: dense-equivalent (the dense step with zero
 * rows, within rounding) or lazy (unindexed rows keep their bits; indexed
 * rows get the dense rule, for an element-wise class, or at least change).
 * Most classes are one or the other throughout; legacy Nadam updates only
 * the indexed rows of the variable but decays its slots everywhere, as
 * tf.keras does. Duplicate indices must act as their sum. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance/harness.h"

static const int64_t uniq_idx[] = {11, 1, 5, 4};
static const int64_t dup_idx[] = {3, 7, 3, 12, 7, 3};

/* Snapshots after a dense step (before) and then a sparse one in `form`. */
static int run(cf_ctx *c, optim_dtype dt, const int64_t *idx, int64_t n, int form,
               cf_snapshot *before, cf_snapshot *after, char *why, size_t wn)
{
    optim_optimizer *opt;
    cf_problem p;
    *after = (cf_snapshot){0};
    if (before) *before = (cf_snapshot){0};
    if (optim__cf_create(c, NULL, NULL, &opt, why, wn)) return 1;
    int rc = optim__cf_problem_init(&p, dt, 1u << CF_MATRIX, c->seed);
    if (!rc) rc = optim__cf_step_dense(opt, &p, 0);
    if (!rc && before) rc = optim__cf_snap(before, opt, &p);
    if (!rc) rc = optim__cf_step_sparse(opt, &p, 0, 1, idx, n, form);
    if (rc) snprintf(why, wn, "%s step failed: %s", optim_dtype_name(dt), optim_errmsg(opt));
    if (!rc) rc = optim__cf_snap(after, opt, &p);
    optim__cf_problem_free(&p);
    optim_destroy(opt);
    return rc;
}

static int indexed(int64_t r)
{
    for (size_t j = 0; j < sizeof uniq_idx / sizeof *uniq_idx; j++)
        if (uniq_idx[j] == r) return 1;
    return 0;
}

static int near(double x, double y, double tol)
{
    return x == y || fabs(x - y) <= tol * (fabs(x) + fabs(y) + 1e-3);
}

/* Entry i of s against the dense run d: 1 if every element is close. */
static int dense_like(const cf_snapshot *s, const cf_snapshot *d, size_t i, double tol)
{
    for (int64_t e = 0; e < s->sizes[i]; e++)
        if (!near(optim__cf_get(s->data[i], s->dtypes[i], e),
                  optim__cf_get(d->data[i], d->dtypes[i], e), tol))
            return 0;
    return 1;
}

/* Entry i (row-shaped): unindexed rows keep their bits; indexed rows get the
 * dense rule (element-wise classes) or, for the variable, at least change. */
static int lazy_like(cf_ctx *c, const cf_snapshot *before, const cf_snapshot *s,
                     const cf_snapshot *d, size_t i, double tol, char *why, size_t n)
{
    size_t es = optim_dtype_size(s->dtypes[i]), rb = CF_COLS * es;
    int ew = (c->cls->flags & OPTIM_CLASS_ELEMENTWISE) != 0;
    for (int64_t r = 0; r < CF_ROWS; r++) {
        const char *now = (const char *)s->data[i] + r * rb,
                   *was = (const char *)before->data[i] + r * rb;
        const char *ref = (const char *)d->data[i] + r * rb;
        if (!indexed(r) && memcmp(now, was, rb))
            return snprintf(why, n, "'%s' row %lld is not indexed but changed", s->names[i],
                            (long long)r),
                   0;
        for (int64_t e = 0; indexed(r) && ew && e < CF_COLS; e++) {
            double x = optim__cf_get(now, s->dtypes[i], e), y = optim__cf_get(ref, s->dtypes[i], e);
            if (!near(x, y, tol))
                return snprintf(why, n,
                                "'%s' row %lld element %lld: %.17g, the dense rule gives %.17g",
                                s->names[i], (long long)r, (long long)e, x, y),
                       0;
        }
        if (i == 0 && indexed(r) && !memcmp(now, was, rb))
            return snprintf(why, n, "indexed row %lld of the variable did not change",
                            (long long)r),
                   0;
    }
    return 1;
}

/* Classifies each of the variable and its slots as dense-equivalent or lazy
 * (other weights must match the dense run); writes the summary to rule. */
static int classify(cf_ctx *c, const cf_snapshot *before, const cf_snapshot *s,
                    const cf_snapshot *d, double tol, char *rule, size_t rn, char *why, size_t n)
{
    if (s->n != d->n || s->n != before->n)
        return snprintf(why, n, "%zu weights after the sparse step, %zu after the dense one", s->n,
                        d->n),
               1;
    char lazy[CF_TEXT] = "", dense[CF_TEXT] = "";
    for (size_t i = 0; i < s->n; i++) {
        char sub[CF_TEXT] = "";
        int rows = s->sizes[i] == CF_ROWS * CF_COLS && s->dtypes[i] == s->dtypes[0];
        /* lazy first: a row that a zero gradient leaves alone is both */
        int is_lazy = rows && lazy_like(c, before, s, d, i, tol, sub, sizeof sub);
        int is_dense = !is_lazy && dense_like(s, d, i, tol);
        if (!is_dense && !is_lazy) {
            char dd[CF_TEXT];
            optim__cf_snap_diff(s, d, tol, dd, sizeof dd);
            return snprintf(why, n, "'%s' is neither dense-equivalent (%s) nor lazy (%s)",
                            s->names[i], dd, sub[0] ? sub : "not row-shaped"),
                   1;
        }
        if (!rows) continue;
        char *list = is_lazy ? lazy : dense;
        size_t len = strlen(list);
        snprintf(list + len, CF_TEXT - len, "%s%s", len ? ", " : "", s->names[i]);
    }
    if (!lazy[0]) snprintf(rule, rn, "dense-equivalent");
    else if (!dense[0]) snprintf(rule, rn, "lazy");
    else snprintf(rule, rn, "lazy: %s; dense-equivalent: %s", lazy, dense);
    return 0;
}

static double tolerance(optim_dtype dt) { return dt == OPTIM_F32 ? 1e-5 : 1e-12; }

/* 0 ok, 1 failed; rule says which rule the class follows. */
static int rule(cf_ctx *c, optim_dtype dt, char *rule_name, size_t rn, char *why, size_t n)
{
    cf_snapshot before, s, d;
    const int64_t nu = sizeof uniq_idx / sizeof *uniq_idx;
    int bad = run(c, dt, uniq_idx, nu, CF_AS_GIVEN, &before, &s, why, n) ||
        run(c, dt, uniq_idx, nu, CF_DENSE, NULL, &d, why, n);
    char sub[CF_TEXT];
    if (!bad && classify(c, &before, &s, &d, tolerance(dt), rule_name, rn, sub, sizeof sub)) {
        snprintf(why, n, "%s: %s", optim_dtype_name(dt), sub);
        bad = 1;
    }
    optim__cf_snap_free(&before);
    optim__cf_snap_free(&s);
    optim__cf_snap_free(&d);
    return bad;
}

static int duplicates(cf_ctx *c, optim_dtype dt, char *why, size_t n)
{
    cf_snapshot a, b;
    char sub[CF_TEXT];
    int bad = run(c, dt, dup_idx, 6, CF_AS_GIVEN, NULL, &a, why, n) ||
        run(c, dt, dup_idx, 6, CF_SUMMED, NULL, &b, why, n);
    if (!bad && optim__cf_snap_diff(&a, &b, tolerance(dt), sub, sizeof sub)) {
        snprintf(why, n, "%s, indices {3, 7, 3, 12, 7, 3} vs {3, 7, 12} with the rows summed: %s",
                 optim_dtype_name(dt), sub);
        bad = 1;
    }
    optim__cf_snap_free(&a);
    optim__cf_snap_free(&b);
    return bad;
}

void optim__cf_check_sparse(cf_ctx *c)
{
    const char *e1 =
        "after a sparse step with unique indices, the variable and each slot are dense-equivalent (as the dense step with zero rows) "
        "or lazy (unindexed rows keep their bits, indexed rows as the dense rule); f32 within 1e-5, f64 1e-12";
    const char *e2 =
        "a sparse step with duplicate indices equals one with each index once and its rows summed (same tolerances)";
    if (!c->sparse) {
        optim__cf_report(c, "sparse.rule", -1, e1, "the class takes no sparse gradients: skipped");
        optim__cf_report(c, "sparse.duplicates", -1, e2,
                         "the class takes no sparse gradients: skipped");
        return;
    }
    char why[CF_TEXT] = "", r32[CF_TEXT] = "", r64[CF_TEXT] = "";
    int bad = rule(c, OPTIM_F32, r32, sizeof r32, why, sizeof why) ||
        rule(c, OPTIM_F64, r64, sizeof r64, why, sizeof why);
    if (!bad && strcmp(r32, r64)) {
        snprintf(why, sizeof why, "f32 is %s but f64 is %s", r32, r64);
        bad = 1;
    }
    optim__cf_report(c, "sparse.rule", !bad, e1, "%s%s", bad ? why : r32,
                     bad ? "" : " (f32 and f64)");
    why[0] = '\0';
    bad = duplicates(c, OPTIM_F32, why, sizeof why) || duplicates(c, OPTIM_F64, why, sizeof why);
    optim__cf_report(c, "sparse.duplicates", !bad, e2, "%s", bad ? why : "the same");
}
