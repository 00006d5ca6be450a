/* Checks of hyperparameters: learning_rate and each OPTIM_PARAM_DYNAMIC
 * param of the generation take the same value as a number, a scalar
 * variable, a callable and a schedule, with the same two steps bit for bit;
 * and a different value gives different steps. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance/harness.h"

enum { NUMBER, VARIABLE, CALLABLE, SCHEDULE, NKINDS };
static const char *const kind_names[NKINDS] = {"number", "variable", "callable", "schedule"};

static double constant_fn(void *user) { return *(const double *)user; }
static double constant_schedule(void *user, int64_t step)
{
    (void)step;
    return *(const double *)user;
}

static int set(optim_optimizer *opt, const char *name, int kind, double *value, optim_var *scalar)
{
    switch (kind) {
    case NUMBER: return optim_set_hyper(opt, name, *value);
    case VARIABLE:
        *(double *)optim_var_data(scalar) = *value;
        return optim_set_hyper_var(opt, name, scalar);
    case CALLABLE: return optim_set_hyper_fn(opt, name, constant_fn, value);
    default: return optim_set_hyper_schedule(opt, name, constant_schedule, value);
    }
}

/* Three steps on f32 and f64 variables with `name` set to value as `kind`:
 * s[0] has the f32 variables and every weight, s[1] the f64 variables. */
static int run(cf_ctx *c, const char *name, int kind, double value, cf_snapshot s[2], char *why,
               size_t n)
{
    optim_optimizer *opt;
    optim_var *scalar = NULL;
    cf_problem p32 = {0}, p64 = {0};
    s[0] = s[1] = (cf_snapshot){0};
    if (optim__cf_create(c, NULL, NULL, &opt, why, n)) return 1;
    int rc = optim_var_create(&scalar, "hyper", OPTIM_F64, 0, NULL, NULL, NULL);
    if (!rc && (rc = set(opt, name, kind, &value, scalar)))
        snprintf(why, n, "%s as a %s (%g) refused: %s", name, kind_names[kind], value,
                 optim_errmsg(opt));
    if (!rc) rc = optim__cf_problem_init(&p32, OPTIM_F32, 0x1f, c->seed);
    if (!rc) rc = optim__cf_problem_init(&p64, OPTIM_F64, 0x1f, c->seed);
    for (int k = 0; !rc && k < 3; k++)
        if ((rc = optim__cf_step_dense(opt, &p32, k)) || (rc = optim__cf_step_dense(opt, &p64, k)))
            snprintf(why, n, "step with %s as a %s: %s", name, kind_names[kind], optim_errmsg(opt));
    if (!rc) rc = optim__cf_snap(&s[0], opt, &p32);
    if (!rc) rc = optim__cf_snap(&s[1], NULL, &p64);
    optim__cf_problem_free(&p32);
    optim__cf_problem_free(&p64);
    optim_var_destroy(scalar);
    optim_destroy(opt);
    return rc != 0;
}

static int diff2(const cf_snapshot *a, const cf_snapshot *b, char *why, size_t n)
{
    return optim__cf_snap_diff(&a[0], &b[0], 0, why, n) ||
        optim__cf_snap_diff(&a[1], &b[1], 0, why, n);
}

static void free2(cf_snapshot *s)
{
    optim__cf_snap_free(&s[0]);
    optim__cf_snap_free(&s[1]);
}

static int in_range(const optim_param *p, double v)
{
    int lo = (p->flags & OPTIM_PARAM_MIN_EXCLUSIVE) ? v > p->min : v >= p->min;
    int hi = (p->flags & OPTIM_PARAM_MAX_EXCLUSIVE) ? v < p->max : v <= p->max;
    return isfinite(v) && lo && hi;
}

/* A value other than the current one that the optimizer accepts, or NAN. */
static double other_value(cf_ctx *c, const optim_param *p, double now)
{
    const double hi = p ? p->max : INFINITY, lo = p ? p->min : 0;
    const double cand[] = {
        now * 0.5, now * 0.8, (now + hi) / 2, (now + lo) / 2, now + 0.25, now - 0.25, 0.5, 0.1};
    optim_optimizer *opt;
    char why[CF_TEXT];
    if (optim__cf_create(c, NULL, NULL, &opt, why, sizeof why)) return NAN;
    double found = NAN;
    for (size_t i = 0; i < sizeof cand / sizeof *cand && isnan(found); i++)
        if (cand[i] != now && (p ? in_range(p, cand[i]) : cand[i] > 0) &&
            optim_set_hyper(opt, p ? p->name : "learning_rate", cand[i]) == 0)
            found = cand[i];
    optim_destroy(opt);
    return found;
}

/* Both checks for one hyperparameter: a failure's message goes to the
 * check's buffer (the first one stays). */
static void one(cf_ctx *c, const char *name, const optim_param *p, char *kinds, char *change,
                size_t n)
{
    optim_optimizer *opt;
    double now = NAN, other;
    char why[CF_TEXT];
    if (optim__cf_create(c, NULL, NULL, &opt, why, sizeof why) == 0)
        optim_get_hyper(opt, name, &now);
    optim_destroy(opt);
    if (isnan(now) || isnan(other = other_value(c, p, now))) {
        if (!change[0]) snprintf(change, n, "%s: no value other than %g is accepted", name, now);
        return;
    }
    cf_snapshot ref[2], s[2];
    if (run(c, name, NUMBER, other, ref, why, sizeof why)) {
        if (!kinds[0]) snprintf(kinds, n, "%s", why);
        free2(ref);
        return;
    }
    for (int k = VARIABLE; k < NKINDS && !kinds[0]; k++) {
        char sub[CF_TEXT];
        if (run(c, name, k, other, s, why, sizeof why)) snprintf(kinds, n, "%s", why);
        else if (diff2(ref, s, sub, sizeof sub))
            snprintf(kinds, n, "%s = %g as a %s and as a number: %s", name, other, kind_names[k],
                     sub);
        free2(s);
    }
    if (!run(c, name, NUMBER, now, s, why, sizeof why) && !diff2(ref, s, why, sizeof why) &&
        !change[0])
        snprintf(change, n, "%s = %g and %g give the same 3 steps", name, now, other);
    free2(s);
    free2(ref);
}

void optim__cf_check_hypers(cf_ctx *c)
{
    const char *e1 =
        "learning_rate and each dynamic param give the same 3 steps as a number, a variable, a callable and a schedule";
    const char *e2 = "another value of learning_rate or of a dynamic param changes the 3 steps";
    char kinds[CF_TEXT] = "", change[CF_TEXT] = "", names[CF_TEXT] = "learning_rate";
    int have_lr = c->has_lr, count = have_lr;
    if (have_lr) one(c, "learning_rate", NULL, kinds, change, sizeof kinds);
    uint32_t other =
        c->generation == OPTIM_LEGACY ? OPTIM_PARAM_KERAS3_ONLY : OPTIM_PARAM_LEGACY_ONLY;
    for (size_t i = 0; i < c->cls->n_params; i++) {
        const optim_param *p = &c->cls->params[i];
        if (!(p->flags & OPTIM_PARAM_DYNAMIC) || (p->flags & other)) continue;
        one(c, p->name, p, kinds, change, sizeof kinds);
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", count ? ", " : "", p->name);
        count++;
    }
    if (!count) {
        optim__cf_report(c, "hyper.kinds", -1, e1,
                         "no learning_rate and no dynamic param: skipped");
        optim__cf_report(c, "hyper.changes_step", -1, e2,
                         "no learning_rate and no dynamic param: skipped");
        return;
    }
    if (!have_lr)
        memmove(names, names + strlen("learning_rate"),
                strlen(names) - strlen("learning_rate") + 1);
    optim__cf_report(c, "hyper.kinds", !kinds[0], e1, "%s", kinds[0] ? kinds : names);
    optim__cf_report(c, "hyper.changes_step", !change[0], e2, "%s", change[0] ? change : names);
}
