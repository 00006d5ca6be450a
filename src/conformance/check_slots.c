/* Checks of slots: none before the first step, then created once per
 * variable (the same slot objects on later steps), with the variable's dtype
 * (and shape, for element-wise classes), in an order that is the same on
 * every run; and get_weights -> fresh optimizer -> set_weights resumes bit
 * for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/harness.h"

#define MAXW 64

static int shapes_ok(cf_ctx *c, optim_optimizer *opt, const cf_problem *p, char *why, size_t n)
{
    const char *names[MAXW];
    size_t ns = optim_get_slot_names(opt, names, MAXW);
    for (size_t v = 0; v < p->n; v++)
        for (size_t s = 0; s < ns && s < MAXW; s++) {
            optim_var *var = p->vars[v], *slot = optim_get_slot(opt, var, names[s]);
            if (!slot) continue;
            int same_shape = optim_var_rank(slot) == optim_var_rank(var) &&
                !memcmp(optim_var_shape(slot), optim_var_shape(var),
                        sizeof(int64_t) * (size_t)optim_var_rank(var));
            if (optim_var_dtype(slot) != optim_var_dtype(var) ||
                ((c->cls->flags & OPTIM_CLASS_ELEMENTWISE) && !same_shape)) {
                snprintf(
                    why, n,
                    "slot '%s' of '%s' is %s [%lld elements]; the variable is %s [%lld elements]",
                    names[s], optim_var_name(var), optim_dtype_name(optim_var_dtype(slot)),
                    (long long)optim_var_numel(slot), optim_dtype_name(optim_var_dtype(var)),
                    (long long)optim_var_numel(var));
                return 0;
            }
        }
    return 1;
}

/* Lazy, once, same objects; fills names (weight names after step 1). */
static int lazy_once(cf_ctx *c, optim_optimizer *opt, cf_problem *p, char *why, size_t n)
{
    const char *early[MAXW];
    size_t s0 = optim_get_slot_names(opt, early, MAXW);
    if (s0)
        return snprintf(why, n, "%zu slots (first '%s') before the first step", s0, early[0]), 0;
    if (optim__cf_step_dense(opt, p, 0))
        return snprintf(why, n, "step 0: %s", optim_errmsg(opt)), 0;
    const char *names[MAXW];
    optim_var *first[CF_NSHAPES + 1][MAXW] = {{0}};
    size_t ns = optim_get_slot_names(opt, names, MAXW), w1 = optim_weights_count(opt);
    for (size_t v = 0; v < p->n; v++)
        for (size_t s = 0; s < ns && s < MAXW; s++)
            first[v][s] = optim_get_slot(opt, p->vars[v], names[s]);
    if (optim__cf_step_dense(opt, p, 1))
        return snprintf(why, n, "step 1: %s", optim_errmsg(opt)), 0;
    if (optim_weights_count(opt) != w1)
        return snprintf(why, n, "%zu weights after step 1, %zu after step 2", w1,
                        optim_weights_count(opt)),
               0;
    for (size_t v = 0; v < p->n; v++)
        for (size_t s = 0; s < ns && s < MAXW; s++)
            if (optim_get_slot(opt, p->vars[v], names[s]) != first[v][s])
                return snprintf(why, n, "slot '%s' of '%s' was created again on step 2", names[s],
                                optim_var_name(p->vars[v])),
                       0;
    return 1;
}

static int same_order(cf_ctx *c, optim_optimizer *a, char *why, size_t n)
{
    optim_optimizer *b;
    cf_problem p;
    if (optim__cf_create(c, NULL, NULL, &b, why, n)) return 0;
    int ok = !optim__cf_problem_init(&p, OPTIM_F64, 0x1f, c->seed + 1);
    optim_set_num_threads(b, 3);
    ok = ok && !optim__cf_step_dense(b, &p, 0);
    if (ok && optim_weights_count(a) != optim_weights_count(b)) ok = 0;
    for (size_t i = 0; ok && i < optim_weights_count(a); i++)
        if (strcmp(optim_weight_name(a, i), optim_weight_name(b, i))) {
            snprintf(why, n, "weight %zu is '%s' in one run and '%s' in another", i,
                     optim_weight_name(a, i), optim_weight_name(b, i));
            ok = 0;
        }
    if (!ok && !why[0])
        snprintf(why, n, "a second run made %zu weights, the first %zu", optim_weights_count(b),
                 optim_weights_count(a));
    optim__cf_problem_free(&p);
    optim_destroy(b);
    return ok;
}

/* A's weights after 2 steps into a fresh, built B: the third step agrees. */
static int resume(cf_ctx *c, optim_dtype dt, char *why, size_t n)
{
    optim_optimizer *a = NULL, *b = NULL;
    cf_problem p1 = {0}, p2 = {0};
    cf_snapshot sa = {0}, sb = {0};
    optim_tensor w[MAXW];
    int bad = 1;
    if (optim__cf_create(c, NULL, NULL, &a, why, n) || optim__cf_create(c, NULL, NULL, &b, why, n))
        goto done;
    if (optim__cf_problem_init(&p1, dt, 0x1f, c->seed) ||
        optim__cf_problem_init(&p2, dt, 0x1f, c->seed))
        goto done;
    if (optim__cf_step_dense(a, &p1, 0) || optim__cf_step_dense(a, &p1, 1)) {
        snprintf(why, n, "step: %s", optim_errmsg(a));
        goto done;
    }
    optim__cf_problem_copy_values(&p2, &p1);
    if (optim_build(b, p2.vars, p2.n)) {
        snprintf(why, n, "optim_build: %s", optim_errmsg(b));
        goto done;
    }
    size_t nw = optim_get_weights(a, w, MAXW);
    if (nw > MAXW || optim_set_weights(b, w, nw)) {
        snprintf(why, n, "set_weights of %zu weights after optim_build: %s", nw, optim_errmsg(b));
        goto done;
    }
    if (optim__cf_step_dense(a, &p1, 2) || optim__cf_step_dense(b, &p2, 2)) {
        snprintf(why, n, "step 2: %s%s", optim_errmsg(a), optim_errmsg(b));
        goto done;
    }
    char sub[CF_TEXT];
    if (optim__cf_snap(&sa, a, &p1) || optim__cf_snap(&sb, b, &p2)) goto done;
    bad = optim__cf_snap_diff(&sa, &sb, 0, sub, sizeof sub);
    if (bad) snprintf(why, n, "%s, the step after set_weights: %s", optim_dtype_name(dt), sub);
done:
    optim__cf_snap_free(&sa);
    optim__cf_snap_free(&sb);
    optim__cf_problem_free(&p1);
    optim__cf_problem_free(&p2);
    optim_destroy(a);
    optim_destroy(b);
    return bad;
}

void optim__cf_check_slots(cf_ctx *c)
{
    optim_optimizer *opt;
    cf_problem p;
    char why[CF_TEXT] = "", w2[CF_TEXT] = "", w3[CF_TEXT] = "";
    int once = 0, shapes = 0, order = 0;
    if (optim__cf_create(c, NULL, NULL, &opt, why, sizeof why) == 0) {
        if (optim__cf_problem_init(&p, OPTIM_F64, 0x1f, c->seed) == 0) {
            once = lazy_once(c, opt, &p, why, sizeof why);
            shapes = once && shapes_ok(c, opt, &p, w2, sizeof w2);
            order = once && same_order(c, opt, w3, sizeof w3);
            optim__cf_problem_free(&p);
        }
        optim_destroy(opt);
    }
    optim__cf_report(c, "slots.lazy_once", once,
                     "no slot before the first step; the same slots after the second", "%s",
                     once ? "created on the first step, once" : why);
    optim__cf_report(c, "slots.shapes", once ? shapes : -1,
                     "each slot has its variable's dtype (and shape, for an element-wise class)",
                     "%s",
                     !once        ? "slots.lazy_once failed: skipped"
                         : shapes ? "as declared"
                                  : w2);
    optim__cf_report(c, "slots.order", once ? order : -1,
                     "the same weight names in the same order on another run (3 threads)", "%s",
                     !once       ? "slots.lazy_once failed: skipped"
                         : order ? "the same"
                                 : w3);
    why[0] = '\0';
    int bad = resume(c, OPTIM_F32, why, sizeof why) || resume(c, OPTIM_F64, why, sizeof why);
    optim__cf_report(
        c, "slots.resume", !bad,
        "2 steps, get_weights, a fresh optimizer built on copies of the variables, set_weights: "
        "the next step is the same bit for bit (f32, f64)",
        "%s", bad ? why : "resumed");
}
