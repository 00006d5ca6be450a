/*
 * examples/custom_wrapper.c - a wrapper optimizer written against the
 * installed public headers only (optim/optim.h: the class table of
 * optim/optimizer_class.h and the step API of optim/step.h), the way the
 * built-in wrappers are written. docs/wrappers.md ("Writing a wrapper")
 * walks through it.
 *
 * The wrapper: "MyAverage", an exponential moving average of the trained
 * variables, the rule of TF Addons' MovingAverage with a constant decay:
 *
 *     inner optimizer's update (with the WRAPPER's clipnorm, at the
 *     wrapper's iterations), then for each variable with a gradient:
 *     average = average - (average - var) * (1 - decay)
 *     then the variable's constraint, then iterations += 1
 *
 * with decay rounded to float32 (TF Addons computes it in float32). Slot
 * "average", a copy of the variable when first seen.
 *
 * Checks (exit status 0 only if all hold):
 *   1. every variable and average equals, bit for bit, what the built-in
 *      MovingAverage computes for the same inner optimizer and inputs;
 *   2. the float64 variable and its average match a double-precision
 *      reference of SGD with momentum, clipnorm and the average (1e-12);
 *   3. a step the inner optimizer refuses changes nothing (no slot made).
 */
#include <optim/optim.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== 1. The wrapper class ================================================ */

enum { P_DECAY };

static const optim_param my_params[] = {
    {"average_decay", OPTIM_PARAM_FLOAT, 0, 0.99, 0.0, 1.0},
};

/* The class state starts with optim_wrapper_state: optim_wrap puts the
 * inner optimizer there. */
typedef struct my_state {
    optim_wrapper_state w;
} my_state;

static optim_optimizer *my_inner(const optim_optimizer *opt)
{
    return ((my_state *)optim_state(opt))->w.inner;
}

static void my_destroy(optim_optimizer *opt)
{
    my_state *st = optim_state(opt);
    if (st->w.owns_inner) optim_destroy(st->w.inner);
    st->w.inner = NULL;
}

static int my_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    return optim_add_slot(opt, var, "average", OPTIM_SLOT_COPY, 0);
}

/* The wrapper's own slot (optim_get_slot also finds the inner's slots). */
static optim_var *own_average(const optim_optimizer *opt, const optim_var *var)
{
    optim_var *s = optim_get_slot(opt, var, "average");
    return s && s != optim_get_slot(my_inner(opt), var, "average") ? s : NULL;
}

static void average_rule(optim_var *var, optim_var *avg, float decay)
{
    const int64_t n = optim_var_numel(var);
    if (optim_var_dtype(var) == OPTIM_F32) {
        const float om = 1.0f - decay, *w = optim_var_cdata(var);
        float *a = optim_var_data(avg);
        for (int64_t i = 0; i < n; i++) a[i] = a[i] - (a[i] - w[i]) * om;
    } else {
        const double om = 1.0 - (double)decay, *w = optim_var_cdata(var);
        double *a = optim_var_data(avg);
        for (int64_t i = 0; i < n; i++) a[i] = a[i] - (a[i] - w[i]) * om;
    }
}

/* Slots for the variables with a gradient that the wrapper has not seen. */
static int track_new(optim_optimizer *opt, const optim_grad_var *pairs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (pairs[i].grad.kind == OPTIM_GRAD_NONE || own_average(opt, pairs[i].var)) continue;
        optim_var *v = pairs[i].var;
        int rc = optim_track_variables(opt, &v, 1);
        if (rc) return rc;
    }
    return 0;
}

/* The step hook: o holds what the wrapper's own caller asked for. */
static int my_step(optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                   const optim_step_options *o)
{
    optim_optimizer *in = my_inner(opt);
    int rc = optim_check_gradients(opt, pairs, n, 1); /* before anything changes */
    if (rc) return rc;
    optim_savepoint sp = optim_savepoint_get(opt);
    if ((rc = track_new(opt, pairs, n))) {
        optim_rollback(opt, &sp);
        return rc;
    }
    /* The inner step: our gradient options and counter unless our caller
     * gave its own; the constraints come after our rule. */
    optim_step_options io = *o;
    io.flags |= OPTIM_STEP_NO_CONSTRAINTS | OPTIM_STEP_SET_ITERATIONS;
    io.iterations = optim_iterations(opt);
    if (!io.clipping) io.clipping = opt;
    if (!io.aggregation) io.aggregation = opt;
    if (!io.transformers) io.transformers = opt;
    if ((rc = optim_step(in, pairs, n, &io))) {
        optim_rollback(opt, &sp);
        return optim_set_error(opt, rc, "MyAverage: %s", optim_errmsg(in));
    }
    const float decay = (float)optim_param_value(opt, P_DECAY);
    for (size_t i = 0; i < n; i++) {
        if (pairs[i].grad.kind == OPTIM_GRAD_NONE) continue;
        average_rule(pairs[i].var, own_average(opt, pairs[i].var), decay);
        if (!(o->flags & OPTIM_STEP_NO_CONSTRAINTS)) optim_var_apply_constraint(pairs[i].var);
    }
    return optim_set_iterations(opt, optim_iterations(in));
}

static const optim_class my_average_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "MyAverage",
    .default_learning_rate = 0.0,
    .params = my_params,
    .n_params = 1,
    .state_size = sizeof(my_state),
    .create_slots = my_create_slots,
    .destroy = my_destroy,
    .inner = my_inner,
    .step = my_step,
};

/* ==== 2. The checks ======================================================= */

#define STEPS 5
#define LR 0.1
#define MOMENTUM 0.9
#define CLIPNORM 1.0
#define DECAY 0.8

static const char *INNER =
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9}}";

static double grad_at(int k, int i) { return sin(1.3 * k + 0.7 * i) * (1 + i); }

/* One run: wrapper JSON around a fresh SGD, over a float32 and a float64
 * variable; leaves the variables and their averages in out. */
static int run(const char *wrapper_json, double out[2][4], double avg[2][4])
{
    optim_error err;
    optim_optimizer *sgd, *w;
    if (optim_from_json(&sgd, INNER, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    if (optim_wrap(&w, wrapper_json, sgd, &err)) {
        optim_destroy(sgd);
        return fprintf(stderr, "%s\n", err.msg), 1;
    }
    const double init[4] = {0.5, -1.0, 2.0, 0.25};
    optim_var *v[2];
    optim_var_create(&v[0], "a", OPTIM_F32, 1, (int64_t[]){4}, (float[]){0.5f, -1.0f, 2.0f, 0.25f},
                     &err);
    optim_var_create(&v[1], "b", OPTIM_F64, 1, (int64_t[]){4}, init, &err);
    int rc = 0;
    for (int k = 0; k < STEPS && !rc; k++) {
        float g32[4];
        double g64[4];
        for (int i = 0; i < 4; i++) g32[i] = (float)grad_at(k, i), g64[i] = grad_at(k, i);
        optim_grad_var p[2] = {
            {optim_grad_dense(optim_tensor_make(OPTIM_F32, g32, 1, (int64_t[]){4})), v[0]},
            {optim_grad_dense(optim_tensor_make(OPTIM_F64, g64, 1, (int64_t[]){4})), v[1]},
        };
        if ((rc = optim_apply_gradients(w, p, 2, 0)))
            fprintf(stderr, "step %d: %s\n", k, optim_errmsg(w));
    }
    for (int j = 0; j < 2 && !rc; j++)
        for (int i = 0; i < 4; i++) {
            out[j][i] = optim_var_get(v[j], i);
            avg[j][i] = optim_var_get(optim_get_slot(w, v[j], "average"), i);
        }
    optim_destroy(w);
    optim_var_destroy(v[0]);
    optim_var_destroy(v[1]);
    return rc;
}

/* Check 2: SGD with momentum (Keras 3: m = momentum * m - lr * g; w += m)
 * after clipnorm, then the average, all in double precision. */
static void reference(double w[4], double a[4])
{
    double m[4] = {0, 0, 0, 0};
    const double init[4] = {0.5, -1.0, 2.0, 0.25};
    const double decay = (float)DECAY;
    memcpy(w, init, sizeof init);
    memcpy(a, init, sizeof init);
    for (int k = 0; k < STEPS; k++) {
        double g[4], norm = 0;
        for (int i = 0; i < 4; i++) g[i] = grad_at(k, i), norm += g[i] * g[i];
        norm = sqrt(norm);
        for (int i = 0; i < 4; i++) {
            if (norm > CLIPNORM) g[i] = g[i] * CLIPNORM / norm;
            m[i] = MOMENTUM * m[i] - LR * g[i];
            w[i] += m[i];
            a[i] = decay * a[i] + (1 - decay) * w[i];
        }
    }
}

/* Check 3: a gradient of the wrong shape is refused and changes nothing. */
static int refused_step_changes_nothing(void)
{
    optim_error err;
    optim_optimizer *sgd, *w;
    if (optim_from_json(&sgd, INNER, &err) ||
        optim_wrap(&w, "{\"class_name\": \"MyAverage\", \"config\": {}}", sgd, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    optim_var *v;
    optim_var_create(&v, "c", OPTIM_F64, 1, (int64_t[]){4}, NULL, &err);
    double g[3] = {1, 2, 3};
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, (int64_t[]){3})), v};
    int bad = optim_apply_gradients(w, &p, 1, 0) != OPTIM_ESHAPE || optim_weights_count(w) != 1 ||
        optim_iterations(w) != 0;
    if (bad)
        fprintf(stderr, "check 3: the refused step changed the wrapper (%s)\n", optim_errmsg(w));
    optim_destroy(w);
    optim_var_destroy(v);
    return bad;
}

int main(void)
{
    optim_error err;
    if (optim_register_class(&my_average_class, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    double mine[2][4], my_avg[2][4], theirs[2][4], their_avg[2][4], w[4], a[4];
    if (run("{\"class_name\": \"MyAverage\", \"config\": {\"average_decay\": 0.8, \"clipnorm\": 1.0}}",
            mine, my_avg) ||
        run("{\"class_name\": \"MovingAverage\", \"config\": {\"average_decay\": 0.8, \"clipnorm\": 1.0}}",
            theirs, their_avg))
        return 1;
    int failures = 0;
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 4; i++)
            if (mine[j][i] != theirs[j][i] || my_avg[j][i] != their_avg[j][i]) {
                fprintf(
                    stderr,
                    "check 1: variable %d element %d: %.17g / %.17g, MovingAverage %.17g / %.17g\n",
                    j, i, mine[j][i], my_avg[j][i], theirs[j][i], their_avg[j][i]);
                failures++;
            }
    reference(w, a);
    for (int i = 0; i < 4; i++)
        if (fabs(mine[1][i] - w[i]) > 1e-12 * fabs(w[i]) + 1e-12 ||
            fabs(my_avg[1][i] - a[i]) > 1e-12 * fabs(a[i]) + 1e-12) {
            fprintf(stderr, "check 2: element %d: %.17g / %.17g, reference %.17g / %.17g\n", i,
                    mine[1][i], my_avg[1][i], w[i], a[i]);
            failures++;
        }
    failures += refused_step_changes_nothing();
    printf("MyAverage: %s (%d failures)\n",
           failures ? "FAILED" : "matches MovingAverage and the reference", failures);
    return failures ? 1 : 0;
}
