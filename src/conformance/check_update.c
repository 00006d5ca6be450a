/* Checks that a step really updates (TensorFlow issue 33227: a custom
 * optimizer whose step silently changed nothing) on every shape and dtype,
 * and that a zero learning rate leaves the variables alone. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance/harness.h"

/* Every element of every variable changed and finite after one step. */
static int changes(cf_ctx *c, optim_dtype dt, char *why, size_t n)
{
    optim_optimizer *opt;
    cf_problem p;
    if (optim__cf_create(c, NULL, NULL, &opt, why, n)) return 1;
    if (optim__cf_problem_init(&p, dt, 0x1f, c->seed)) {
        optim_destroy(opt);
        return snprintf(why, n, "out of memory"), 1;
    }
    int bad = optim__cf_step_dense(opt, &p, 0);
    if (bad) snprintf(why, n, "%s step failed: %s", optim_dtype_name(dt), optim_errmsg(opt));
    for (size_t v = 0; !bad && v < p.n; v++) {
        int64_t numel = optim_var_numel(p.vars[v]), same = 0, nonfinite = 0;
        for (int64_t i = 0; i < numel; i++) {
            double x = optim__cf_get(optim_var_cdata(p.vars[v]), dt, i);
            same += x == optim__cf_get(p.init[v], dt, i);
            nonfinite += !isfinite(x);
        }
        if (same || nonfinite) {
            bad = 1;
            snprintf(why, n, "%s '%s': %lld of %lld elements unchanged, %lld not finite",
                     optim_dtype_name(dt), optim_var_name(p.vars[v]), (long long)same,
                     (long long)numel, (long long)nonfinite);
        }
    }
    optim__cf_problem_free(&p);
    optim_destroy(opt);
    return bad;
}

/* learning_rate 0: the variables keep their bits (-1: not applicable). */
static int zero_lr(cf_ctx *c, optim_dtype dt, char *why, size_t n)
{
    optim_optimizer *opt;
    cf_problem p;
    cf_snapshot before, after;
    if (!c->has_lr || optim__cf_create(c, NULL, "{\"learning_rate\": 0.0}", &opt, why, n))
        return -1;
    if (optim__cf_problem_init(&p, dt, 0x1f, c->seed)) {
        optim_destroy(opt);
        return snprintf(why, n, "out of memory"), 1;
    }
    int bad = optim__cf_snap(&before, NULL, &p);
    if (!bad && optim__cf_step_dense(opt, &p, 0)) {
        snprintf(why, n, "%s step with learning_rate 0 failed: %s", optim_dtype_name(dt),
                 optim_errmsg(opt));
        bad = 1;
    } else if (!bad) {
        /* within rounding: a rule may re-derive w from its slots (schedule-free
         * AdamW interpolates y from x and z), moving it by an ulp or two */
        double tol = dt == OPTIM_F32 ? 1e-6 : 1e-14;
        bad = optim__cf_snap(&after, NULL, &p) || optim__cf_snap_diff(&before, &after, tol, why, n);
        optim__cf_snap_free(&after);
    }
    optim__cf_snap_free(&before);
    optim__cf_problem_free(&p);
    optim_destroy(opt);
    return bad;
}

void optim__cf_check_update(cf_ctx *c)
{
    char why[CF_TEXT] = "";
    int bad = changes(c, OPTIM_F32, why, sizeof why) || changes(c, OPTIM_F64, why, sizeof why);
    optim__cf_report(
        c, "update.changes_variable", !bad,
        "one step with a non-zero gradient changes every element of a scalar, vector, "
        "matrix and large variable to a finite value, f32 and f64 (an empty one is accepted)",
        "%s", bad ? why : "every element changed");
    char sub[CF_TEXT] = "";
    int r = zero_lr(c, OPTIM_F32, sub, sizeof sub);
    if (r == 0) r = zero_lr(c, OPTIM_F64, sub, sizeof sub);
    optim__cf_report(
        c, "update.zero_learning_rate", r < 0 ? -1 : !r,
        "with learning_rate 0 a step leaves every variable alone, up to rounding (relative 1e-6 in f32, 1e-14 in f64)",
        "%s",
        r < 0   ? "a wrapper, or learning_rate 0 is not accepted: skipped"
            : r ? sub
                : "unchanged");
}
