/* Checks that a failed step changes nothing (variables, slots, iterations)
 * and leaves no trace in the next step: a bad pair (a gradient of the wrong
 * shape, a sparse index out of range), a learning rate that turns NaN, and a
 * create_slots hook that fails after the class's own hook ran (the probe
 * class, probe.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/harness.h"

typedef int (*fail_fn)(cf_ctx *c, optim_optimizer *opt, cf_problem *p, char *why, size_t n);

static int wrong_shape(cf_ctx *c, optim_optimizer *opt, cf_problem *p, char *why, size_t n)
{
    size_t es = optim_dtype_size(p->dtype);
    void *g = calloc(CF_ROWS * (CF_COLS + 1), es), *g2 = calloc(37, es);
    if (!g || !g2) return free(g), free(g2), 1;
    optim_grad_var pairs[2] = {
        {optim_grad_dense(optim_tensor_make(p->dtype, g2, 1, (int64_t[]){37})), p->vars[1]},
        {optim_grad_dense(optim_tensor_make(p->dtype, g, 2, (int64_t[]){CF_ROWS, CF_COLS + 1})),
         p->vars[2]},
    };
    int rc = optim_apply_gradients(opt, pairs, 2, 0);
    free(g);
    free(g2);
    return rc == 0 ? (snprintf(why, n, "a [16, 6] gradient for a [16, 5] variable was accepted"), 1)
                   : 0;
}

static int bad_index(cf_ctx *c, optim_optimizer *opt, cf_problem *p, char *why, size_t n)
{
    if (!c->sparse) return 0;
    const int64_t idx[] = {2, CF_ROWS};
    int rc = optim__cf_step_sparse(opt, p, 2, 5, idx, 2, CF_AS_GIVEN);
    return rc == 0
        ? (snprintf(why, n, "sparse index %d of a %d-row variable was accepted", CF_ROWS, CF_ROWS),
           1)
        : 0;
}

static double nan_fn(void *user)
{
    (void)user;
    return NAN;
}

static int nan_lr(cf_ctx *c, optim_optimizer *opt, cf_problem *p, char *why, size_t n)
{
    double lr;
    if (optim_get_hyper(opt, "learning_rate", &lr) ||
        optim_set_hyper_fn(opt, "learning_rate", nan_fn, NULL))
        return 0; /* no settable learning rate: nothing to fail */
    int rc = optim__cf_step_dense(opt, p, 7);
    optim_set_hyper(opt, "learning_rate", lr);
    return rc == 0 ? (snprintf(why, n, "a step with a NaN learning rate was accepted"), 1) : 0;
}

/* A step on p's variables and a new one named OPTIM__CF_FAIL_VAR. */
static int failing_hook(cf_ctx *c, optim_optimizer *opt, cf_problem *p, char *why, size_t n)
{
    optim_var *v;
    long calls = optim__cf_probe_calls();
    if (optim_var_create(&v, OPTIM__CF_FAIL_VAR, p->dtype, 1, (int64_t[]){3}, NULL, NULL)) return 1;
    p->vars[p->n++] = v;
    int rc = optim__cf_step_dense(opt, p, 9);
    p->vars[--p->n] = NULL;
    optim_var_destroy(v);
    if (rc == 0 && optim__cf_probe_calls() == calls) return -1; /* never called: nothing failed */
    return rc == 0 ? (snprintf(why, n, "the step succeeded although create_slots failed"), 1) : 0;
}

static int in(const cf_snapshot *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) return 1;
    return 0;
}

/* after == before, except for optimizer-level weights (no '/' in the name)
 * the failed step created: the contract lets those stay, at their initial
 * values (docs/custom-optimizer.md section 8); the next step shows whether
 * they did. 0 if unchanged. */
static int changed(const cf_snapshot *before, const cf_snapshot *after, char *why, size_t n)
{
    cf_snapshot view = *after;
    size_t m = 0;
    view.names = malloc((after->n + 1) * sizeof *view.names);
    view.dtypes = malloc((after->n + 1) * sizeof *view.dtypes);
    view.sizes = malloc((after->n + 1) * sizeof *view.sizes);
    view.data = malloc((after->n + 1) * sizeof *view.data);
    int bad = !view.names || !view.dtypes || !view.sizes || !view.data;
    for (size_t i = 0; !bad && i < after->n; i++) {
        const char *w = after->names[i];
        if (!in(before, w) && strncmp(w, "weight ", 7) == 0 && !strchr(w + 7, '/')) continue;
        view.names[m] = after->names[i];
        view.dtypes[m] = after->dtypes[i];
        view.sizes[m] = after->sizes[i];
        view.data[m++] = after->data[i];
    }
    view.n = m;
    if (!bad) bad = optim__cf_snap_diff(before, &view, 0, why, n);
    free(view.names);
    free(view.dtypes);
    free(view.sizes);
    free(view.data);
    return bad;
}

/* Runs f on a fresh optimizer (after one step when warm): nothing may
 * change, and the next step must equal that of an optimizer that never
 * failed. 0 ok, 1 failed, -1 when f found nothing to fail. */
static int after_failure(cf_ctx *c, const char *cls, fail_fn f, int warm, optim_dtype dt, char *why,
                         size_t n)
{
    optim_optimizer *a = NULL, *b = NULL;
    cf_problem pa = {0}, pb = {0};
    cf_snapshot s0 = {0}, s1 = {0};
    char sub[CF_TEXT];
    int bad = 1;
    if (optim__cf_create(c, cls, NULL, &a, why, n) || optim__cf_create(c, cls, NULL, &b, why, n))
        goto done;
    if (optim__cf_problem_init(&pa, dt, 0x1f, c->seed) ||
        optim__cf_problem_init(&pb, dt, 0x1f, c->seed))
        goto done;
    if (warm && (optim__cf_step_dense(a, &pa, 0) || optim__cf_step_dense(b, &pb, 0))) {
        snprintf(why, n, "step: %s", optim_errmsg(a));
        goto done;
    }
    if (optim__cf_snap(&s0, a, &pa)) goto done;
    int fr = f(c, a, &pa, why, n);
    if (fr < 0) bad = -1;
    if (fr || optim__cf_snap(&s1, a, &pa)) goto done;
    if (changed(&s0, &s1, sub, sizeof sub)) {
        snprintf(why, n, "%s, the failed step changed %s", optim_dtype_name(dt), sub);
        goto done;
    }
    optim__cf_snap_free(&s0);
    optim__cf_snap_free(&s1);
    if (optim__cf_step_dense(a, &pa, 1) || optim__cf_step_dense(b, &pb, 1)) {
        snprintf(why, n, "the step after the failure failed: %s%s", optim_errmsg(a),
                 optim_errmsg(b));
        goto done;
    }
    if (optim__cf_snap(&s0, a, &pa) || optim__cf_snap(&s1, b, &pb)) goto done;
    bad = optim__cf_snap_diff(&s1, &s0, 0, sub, sizeof sub);
    if (bad)
        snprintf(why, n,
                 "%s, the next step differs from that of an optimizer that never failed: %s",
                 optim_dtype_name(dt), sub);
done:
    optim__cf_snap_free(&s0);
    optim__cf_snap_free(&s1);
    optim__cf_problem_free(&pa);
    optim__cf_problem_free(&pb);
    optim_destroy(a);
    optim_destroy(b);
    return bad;
}

static void report(cf_ctx *c, const char *check, const char *expected, const char *cls, fail_fn f,
                   fail_fn g, int warm)
{
    char why[CF_TEXT] = "";
    int bad = 0;
    for (int d = 0; d < 2 && !bad; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        bad = after_failure(c, cls, f, warm, dt, why, sizeof why);
        if (!bad && g) bad = after_failure(c, cls, g, warm, dt, why, sizeof why);
    }
    if (bad < 0)
        optim__cf_report(c, check, -1, expected,
                         "the class never ran create_slots during a step: skipped");
    else optim__cf_report(c, check, !bad, expected, "%s", bad ? why : "nothing changed");
}

void optim__cf_check_failure(cf_ctx *c)
{
    report(
        c, "failure.bad_pair",
        "a step refused for a bad pair (wrong gradient shape; sparse index out of range) changes no variable, "
        "slot or counter, nor the next step (f32, f64)",
        NULL, wrong_shape, bad_index, 1);
    char why[CF_TEXT] = "", probe[CF_TEXT];
    const char *e =
        "a step refused for a learning rate that turns NaN changes nothing, nor the next step (f32, f64)";
    if (!c->has_lr)
        optim__cf_report(
            c, "failure.hyper", -1, e,
            "no learning_rate of its own (a wrapper, or a class without one): skipped");
    else report(c, "failure.hyper", e, NULL, nan_lr, NULL, 1);
    e = "a step whose create_slots fails (after the class's own hook ran, on the last variable) changes nothing, "
        "nor the next step (f32, f64)";
    if (optim__cf_probe(c, probe, sizeof probe, why, sizeof why))
        optim__cf_report(c, "failure.hook", 0, e, "%s", why);
    else report(c, "failure.hook", e, probe, failing_hook, NULL, 0);
}
