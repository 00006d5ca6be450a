/*
 * examples/custom_optimizer.c - a custom optimizer written against the public
 * extension contract (optim/optimizer_class.h), registered, created from
 * Keras JSON, run on two threads and checked against an independent
 * double-precision reference. docs/custom-optimizer.md walks through it.
 *
 * The optimizer: "HeavyBall", Polyak's heavy-ball momentum in the form of
 * TensorFlow 1's tf.compat.v1.train.MomentumOptimizer (TF's ApplyMomentum and
 * SparseApplyMomentum kernels). Unlike Keras's SGD, the learning rate sits
 * outside the accumulator:
 *
 *     a = momentum * a + g
 *     w = w - lr * a                          (use_nesterov false)
 *     w = w - lr * g - lr * momentum * a      (use_nesterov true)
 *
 * B. T. Polyak, "Some methods of speeding up the convergence of iteration
 * methods" (1964); Sutskever et al., "On the importance of initialization and
 * momentum in deep learning" (ICML 2013) for the Nesterov form.
 *
 * Slot: "momentum" (the accumulator a), zeros. Sparse gradients are lazy, as
 * SparseApplyMomentum: duplicate rows are summed by the library, then only
 * the indexed rows of w and a change.
 *
 * Exit status: 0 if every element of every variable and slot matches the
 * reference (f32: |got - ref| <= 1e-5 * |ref| + 1e-6; f64: 1e-12 both) and the
 * 1-thread run is bitwise identical to the 2-thread one; 1 otherwise.
 */
#include <optim/optim.h>

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== 1. The class ====================================================== */

/* The class's own hyperparameters (the base adds learning_rate, clipnorm,
 * clipvalue, global_clipnorm, ... by itself). Index = position here. */
enum { P_MOMENTUM, P_USE_NESTEROV };

static const optim_param heavy_ball_params[] = {
    /* A float in [0, 1) that may also be a variable, callable or schedule. */
    {"momentum", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.9, 0.0, 1.0},
    /* A plain bool: true/false in JSON, 0/1 in C. */
    {"use_nesterov", OPTIM_PARAM_BOOL, 0, 0.0, 0.0, 1.0},
};

/* What prepare computes once per step and dtype; the update hooks read it. */
typedef struct hb_coef {
    double lr; /* learning rate at this step, in the dtype's precision */
    double momentum; /* rounded through float for F32 */
    int nesterov;
} hb_coef;

/* Per-optimizer class state (state_size bytes, zeroed by the library). Here:
 * counters that let main() check the contract (how apply_dense was called,
 * whether sparse indices really arrived unique and ascending). Atomic,
 * because the update hooks run on several threads at once. Real optimizers
 * rarely need state; none of it influences the numbers. */
typedef struct hb_stats {
    atomic_llong dense_calls; /* apply_dense invocations (chunks) */
    atomic_llong dense_elements; /* sum of u->count */
    atomic_llong max_chunk; /* largest u->count seen */
    atomic_llong sparse_calls;
    atomic_llong sparse_unsorted; /* index pairs that were not strictly ascending */
} hb_stats;

/* validate: cross-key rule the per-key ranges cannot express. PyTorch's
 * SGD refuses Nesterov momentum without momentum; so do we. Called after
 * creation and after every change of a hyperparameter; non-zero rejects the
 * change. Values are read with optim_get_hyper (optim_param_value is only
 * meaningful during a step). */
static int hb_validate(optim_optimizer *opt, optim_error *err)
{
    double nesterov = 0, momentum = 0;
    if (optim_get_hyper(opt, "use_nesterov", &nesterov) || nesterov == 0) return OPTIM_OK;
    if (!optim_hyper_is_constant(opt, "momentum")) return OPTIM_OK; /* checked per step */
    if (optim_get_hyper(opt, "momentum", &momentum) || momentum > 0) return OPTIM_OK;
    return optim_error_set(err, OPTIM_EINVAL,
                           "HeavyBall: use_nesterov is true but momentum is %g; Nesterov momentum "
                           "needs momentum > 0",
                           momentum);
}

/* create_slots: once per variable, the first time it gets a gradient. */
static int hb_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err; /* optim_add_slot leaves its own message on failure */
    return optim_add_slot(opt, var, "momentum", OPTIM_SLOT_ZEROS, 0.0);
}

/* prepare: once per step and dtype, before any update, single-threaded. */
static void hb_prepare(optim_optimizer *opt, optim_dtype dtype, void *coef)
{
    hb_coef *c = coef;
    c->lr = optim_learning_rate(opt, dtype); /* schedule and legacy decay applied */
    c->momentum = optim_param_value(opt, P_MOMENTUM);
    if (dtype == OPTIM_F32) c->momentum = (float)c->momentum;
    c->nesterov = optim_param_value(opt, P_USE_NESTEROV) != 0;
}

/* The rule over n contiguous elements, in T's own arithmetic. Shared by the
 * dense hook (one chunk) and the sparse hook (one row). */
#define HB_KERNEL(T)                                                                        \
    static void hb_kernel_##T(T *restrict w, T *restrict a, const T *restrict g, int64_t n, \
                              const hb_coef *c)                                             \
    {                                                                                       \
        const T lr = (T)c->lr, mu = (T)c->momentum;                                         \
        if (c->nesterov) {                                                                  \
            for (int64_t i = 0; i < n; i++) {                                               \
                a[i] = a[i] * mu + g[i];                                                    \
                w[i] = w[i] - (g[i] * lr + a[i] * mu * lr);                                 \
            }                                                                               \
        } else {                                                                            \
            for (int64_t i = 0; i < n; i++) {                                               \
                a[i] = a[i] * mu + g[i];                                                    \
                w[i] = w[i] - a[i] * lr;                                                    \
            }                                                                               \
        }                                                                                   \
    }
HB_KERNEL(float)
HB_KERNEL(double)

static void note_max(atomic_llong *m, long long v)
{
    long long cur = atomic_load(m);
    while (v > cur && !atomic_compare_exchange_weak(m, &cur, v)) {}
}

/* apply_dense: u->count elements starting at u->offset. Because the class
 * is OPTIM_CLASS_ELEMENTWISE this is one chunk of a variable, and other
 * chunks run on other threads at the same time. */
static void hb_apply_dense(const optim_dense_update *u)
{
    hb_stats *st = optim_state(u->opt);
    atomic_fetch_add(&st->dense_calls, 1);
    atomic_fetch_add(&st->dense_elements, u->count);
    note_max(&st->max_chunk, u->count);

    if (u->dtype == OPTIM_F32) hb_kernel_float(u->param, u->slots[0], u->grad, u->count, u->coef);
    else hb_kernel_double(u->param, u->slots[0], u->grad, u->count, u->coef);
}

/* apply_sparse: u->n rows, indices unique and ascending (the library has
 * summed duplicates). Lazy: rows nobody indexed keep w and a unchanged. */
static void hb_apply_sparse(const optim_sparse_update *u)
{
    hb_stats *st = optim_state(u->opt);
    atomic_fetch_add(&st->sparse_calls, 1);
    for (int64_t j = 1; j < u->n; j++)
        if (u->indices[j] <= u->indices[j - 1]) atomic_fetch_add(&st->sparse_unsorted, 1);

    const int64_t rs = u->row_size;
    for (int64_t j = 0; j < u->n; j++) {
        const int64_t r = u->indices[j];
        if (u->dtype == OPTIM_F32)
            hb_kernel_float((float *)u->param + r * rs, (float *)u->slots[0] + r * rs,
                            (const float *)u->values + j * rs, rs, u->coef);
        else
            hb_kernel_double((double *)u->param + r * rs, (double *)u->slots[0] + r * rs,
                             (const double *)u->values + j * rs, rs, u->coef);
    }
}

static const optim_class heavy_ball_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "HeavyBall",
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.01,
    .params = heavy_ball_params,
    .n_params = sizeof heavy_ball_params / sizeof *heavy_ball_params,
    .coef_size = sizeof(hb_coef),
    .state_size = sizeof(hb_stats),
    .validate = hb_validate,
    .create_slots = hb_create_slots,
    .prepare = hb_prepare,
    .apply_dense = hb_apply_dense,
    .apply_sparse = hb_apply_sparse,
    /* apply_sparse_duplicate_indices, apply_gradients, get_config,
     * set_config, destroy: NULL (the base class's defaults). */
};

/* ==== 2. The experiment ================================================== */

#define STEPS 10
#define NVARS 4
#define NIDX 24 /* sparse indices per step, with duplicates */

#define LR0 0.05
#define LR_RATE 0.9 /* learning rate 0.05 * 0.9^step, a schedule written in C */

static const char *const CONFIG =
    "{\"class_name\": \"HeavyBall\", \"config\": "
    "{\"learning_rate\": 0.05, \"momentum\": 0.9, \"use_nesterov\": true}}";

typedef struct spec {
    const char *name;
    optim_dtype dtype;
    int32_t rank;
    int64_t shape[2];
    int sparse; /* 1: gets IndexedSlices-style gradients */
} spec;

/* Two dense variables big enough to be cut into several chunks each (the
 * library chunks dense work into fixed pieces of a few thousand elements),
 * and two embedding tables that receive sparse gradients. */
static const spec SPECS[NVARS] = {
    {"dense/kernel", OPTIM_F32, 2, {181, 160}, 0}, /* 28960 elements */
    {"wide/kernel", OPTIM_F64, 1, {3 * 8192 + 1, 0}, 0},
    {"tokens/embeddings", OPTIM_F32, 2, {50, 8}, 1},
    {"chars/embeddings", OPTIM_F64, 2, {40, 6}, 1},
};

static int64_t numel_of(const spec *s)
{
    return s->rank == 1 ? s->shape[0] : s->shape[0] * s->shape[1];
}

/* No gradient (Python's None) for these (step, variable) pairs. */
static int is_none(int step, int v) { return (step == 4 && v == 2) || (step == 7 && v == 1); }

/* A small deterministic generator (splitmix64), uniform in [-1, 1). */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double uniform(uint64_t *s) { return (double)(mix(s) >> 11) * 0x1.0p-52 - 1.0; }

static void put(optim_dtype dt, void *buf, int64_t i, double x)
{
    if (dt == OPTIM_F32) ((float *)buf)[i] = (float)x;
    else ((double *)buf)[i] = x;
}
static double get(optim_dtype dt, const void *buf, int64_t i)
{
    return dt == OPTIM_F32 ? (double)((const float *)buf)[i] : ((const double *)buf)[i];
}

static void initial_values(int v, void *buf)
{
    uint64_t s = 1000u + (uint64_t)v;
    for (int64_t i = 0; i < numel_of(&SPECS[v]); i++) put(SPECS[v].dtype, buf, i, uniform(&s));
}

/* The gradient of variable v at step k, in v's dtype: dense, or NIDX rows
 * with repeated, unsorted indices. Returns the number of values written. */
static int64_t gradient(int k, int v, void *vals, int64_t *idx)
{
    const spec *sp = &SPECS[v];
    uint64_t s = 7919u * (uint64_t)k + 104729u * (uint64_t)v + 1u;
    if (!sp->sparse) {
        for (int64_t i = 0; i < numel_of(sp); i++) put(sp->dtype, vals, i, uniform(&s));
        return numel_of(sp);
    }
    for (int j = 0; j < NIDX; j++) idx[j] = (int64_t)(mix(&s) % (uint64_t)sp->shape[0]);
    idx[NIDX - 1] = idx[0]; /* make sure of some duplicates, even three-fold ones */
    idx[NIDX - 2] = idx[0];
    idx[NIDX - 3] = idx[5];
    for (int64_t i = 0; i < NIDX * sp->shape[1]; i++) put(sp->dtype, vals, i, uniform(&s));
    return NIDX * sp->shape[1];
}

/* A learning-rate schedule: a function of the step counter. */
typedef struct decay {
    double lr0, rate;
} decay;
static double decay_schedule(void *user, int64_t step)
{
    const decay *d = user;
    return d->lr0 * pow(d->rate, (double)step);
}
static const decay SCHEDULE = {LR0, LR_RATE};

/* ---- the reference: the same rule, in double, written independently ---- */

static void reference(double *w[NVARS], double *a[NVARS])
{
    void *vals = malloc(sizeof(double) * 32768);
    double *gsum = malloc(sizeof(double) * 32768);
    int64_t idx[NIDX];
    const double mu = 0.9;
    for (int v = 0; v < NVARS; v++) {
        void *init = malloc(sizeof(double) * (size_t)numel_of(&SPECS[v]));
        initial_values(v, init);
        for (int64_t i = 0; i < numel_of(&SPECS[v]); i++) {
            w[v][i] = get(SPECS[v].dtype, init, i);
            a[v][i] = 0;
        }
        free(init);
    }
    for (int k = 0; k < STEPS; k++) {
        const double lr = LR0 * pow(LR_RATE, k);
        for (int v = 0; v < NVARS; v++) {
            if (is_none(k, v)) continue;
            const spec *sp = &SPECS[v];
            int64_t n = gradient(k, v, vals, idx);
            int64_t rows = sp->shape[0], rs = sp->sparse ? sp->shape[1] : 1;
            char touched[64] = {0};
            if (sp->sparse) { /* sum duplicates into a dense [rows, rs] gradient */
                memset(gsum, 0, sizeof(double) * (size_t)(rows * rs));
                for (int j = 0; j < NIDX; j++) {
                    touched[idx[j]] = 1;
                    for (int64_t c = 0; c < rs; c++)
                        gsum[idx[j] * rs + c] += get(sp->dtype, vals, j * rs + c);
                }
            } else {
                for (int64_t i = 0; i < n; i++) gsum[i] = get(sp->dtype, vals, i);
            }
            for (int64_t i = 0; i < numel_of(sp); i++) {
                if (sp->sparse && !touched[i / rs]) continue; /* lazy */
                const double g = gsum[i];
                a[v][i] = mu * a[v][i] + g;
                w[v][i] -= lr * g + lr * mu * a[v][i]; /* use_nesterov: true */
            }
        }
    }
    free(vals);
    free(gsum);
}

/* ---- a training run through the library ---- */

typedef struct run {
    optim_optimizer *opt;
    optim_var *vars[NVARS];
} run;

static void run_free(run *r)
{
    optim_destroy(r->opt); /* the optimizer first: it borrows the variables */
    for (int v = 0; v < NVARS; v++) optim_var_destroy(r->vars[v]);
    memset(r, 0, sizeof *r);
}

static int train(int threads, run *r)
{
    optim_error err;
    memset(r, 0, sizeof *r);
    if (optim_from_json(&r->opt, CONFIG, &err)) {
        fprintf(stderr, "optim_from_json: %s\n", err.msg);
        return 1;
    }
    /* learning_rate becomes a schedule (Keras: a LearningRateSchedule);
     * momentum and use_nesterov stay the numbers from the JSON. */
    if (optim_set_hyper_schedule(r->opt, "learning_rate", decay_schedule, (void *)&SCHEDULE) ||
        optim_set_num_threads(r->opt, threads)) {
        fprintf(stderr, "%s\n", optim_errmsg(r->opt));
        return 1;
    }
    void *vals = malloc(sizeof(double) * 32768);
    for (int v = 0; v < NVARS; v++) {
        initial_values(v, vals);
        if (optim_var_create(&r->vars[v], SPECS[v].name, SPECS[v].dtype, SPECS[v].rank,
                             SPECS[v].shape, vals, &err)) {
            fprintf(stderr, "optim_var_create: %s\n", err.msg);
            free(vals);
            return 1;
        }
    }
    /* One gradient buffer per variable, alive until optim_apply_gradients returns. */
    void *grads[NVARS];
    int64_t idx[NVARS][NIDX];
    for (int v = 0; v < NVARS; v++) grads[v] = malloc(sizeof(double) * (size_t)numel_of(&SPECS[v]));
    int rc = 0;
    for (int k = 0; k < STEPS && !rc; k++) {
        optim_grad_var pairs[NVARS];
        for (int v = 0; v < NVARS; v++) {
            const spec *sp = &SPECS[v];
            pairs[v].var = r->vars[v];
            if (is_none(k, v)) {
                pairs[v].grad = optim_grad_none();
                continue;
            }
            gradient(k, v, grads[v], idx[v]);
            if (!sp->sparse) {
                pairs[v].grad =
                    optim_grad_dense(optim_tensor_make(sp->dtype, grads[v], sp->rank, sp->shape));
            } else {
                int64_t vshape[2] = {NIDX, sp->shape[1]};
                pairs[v].grad = optim_grad_sparse(
                    idx[v], NIDX, optim_tensor_make(sp->dtype, grads[v], 2, vshape));
            }
        }
        if (optim_apply_gradients(r->opt, pairs, NVARS, 0)) {
            fprintf(stderr, "step %d: %s\n", k, optim_errmsg(r->opt));
            rc = 1;
        }
    }
    for (int v = 0; v < NVARS; v++) free(grads[v]);
    free(vals);
    if (!rc && optim_iterations(r->opt) != STEPS) {
        fprintf(stderr, "iterations is %lld, expected %d\n", (long long)optim_iterations(r->opt),
                STEPS);
        rc = 1;
    }
    return rc;
}

/* Compares one buffer against the reference; returns the mismatch count and
 * raises *worst to the largest error as a fraction of the tolerance. */
static int64_t compare(const char *what, optim_dtype dt, const void *got, const double *ref,
                       int64_t n, double *worst)
{
    const double rtol = dt == OPTIM_F32 ? 1e-5 : 1e-12, atol = dt == OPTIM_F32 ? 1e-6 : 1e-12;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = get(dt, got, i), d = fabs(x - ref[i]);
        if (!(d <= rtol * fabs(ref[i]) + atol)) {
            if (bad++ < 5)
                fprintf(stderr, "MISMATCH %s[%lld]: got %.9g, reference %.9g\n", what, (long long)i,
                        x, ref[i]);
        }
        double ratio = d / (rtol * fabs(ref[i]) + atol); /* 1.0 = at the tolerance */
        if (ratio > *worst) *worst = ratio;
    }
    return bad;
}

/* ==== 3. main ============================================================= */

static int show_errors(void)
{
    int failures = 0;
    optim_error err;
    optim_optimizer *opt = NULL;

    /* A value out of the declared range, in JSON: the error names the key,
     * the value and the range, and no optimizer is created. */
    int rc = optim_from_json(
        &opt, "{\"class_name\": \"HeavyBall\", \"config\": {\"momentum\": 1.0}}", &err);
    printf("  from_json momentum=1.0     -> %s: %s\n", optim_strerror(rc), err.msg);
    failures += rc != OPTIM_ERANGE || opt != NULL;

    /* The class's validate hook rejecting a combination. */
    rc = optim_from_json(&opt,
                         "{\"class_name\": \"HeavyBall\", \"config\": "
                         "{\"momentum\": 0, \"use_nesterov\": true}}",
                         &err);
    printf("  from_json nesterov, mom. 0 -> %s: %s\n", optim_strerror(rc), err.msg);
    failures += rc != OPTIM_EINVAL || opt != NULL;

    /* On a live optimizer: a rejected set changes nothing. */
    if (optim_from_json(&opt, CONFIG, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return failures + 1;
    }
    rc = optim_set_hyper(opt, "momentum", -0.5);
    printf("  set_hyper momentum=-0.5    -> %s: %s\n", optim_strerror(rc), optim_errmsg(opt));
    failures += rc != OPTIM_ERANGE;
    rc = optim_set_hyper(opt, "momentum", 0.0); /* with use_nesterov true: validate says no */
    printf("  set_hyper momentum=0       -> %s: %s\n", optim_strerror(rc), optim_errmsg(opt));
    failures += rc != OPTIM_EINVAL;
    rc = optim_set_hyper(opt, "use_nesterov", 0.5);
    printf("  set_hyper use_nesterov=0.5 -> %s: %s\n", optim_strerror(rc), optim_errmsg(opt));
    failures += rc != OPTIM_ETYPE;
    double m = 0;
    optim_get_hyper(opt, "momentum", &m);
    failures += m != 0.9;
    optim_destroy(opt);
    return failures;
}

int main(void)
{
    optim_error err;
    if (optim_register_class(&heavy_ball_class, &err)) {
        fprintf(stderr, "optim_register_class: %s\n", err.msg);
        return 1;
    }
    int failures = 0;

    /* --- the run on 2 threads, checked element by element --- */
    run r2;
    if (train(2, &r2)) {
        run_free(&r2);
        return 1;
    }
    double *ref_w[NVARS], *ref_a[NVARS];
    for (int v = 0; v < NVARS; v++) {
        ref_w[v] = malloc(sizeof(double) * (size_t)numel_of(&SPECS[v]));
        ref_a[v] = malloc(sizeof(double) * (size_t)numel_of(&SPECS[v]));
    }
    reference(ref_w, ref_a);

    printf("HeavyBall (TF1 MomentumOptimizer rule), %d steps, 2 threads, generation %s\n", STEPS,
           optim_generation_of(r2.opt) == OPTIM_LEGACY ? "legacy" : "Keras 3");
    for (int v = 0; v < NVARS; v++) {
        const spec *sp = &SPECS[v];
        optim_var *var = r2.vars[v];
        optim_var *slot = optim_get_slot(r2.opt, var, "momentum");
        if (!slot) {
            fprintf(stderr, "no momentum slot for %s\n", sp->name);
            failures++;
            continue;
        }
        char shape[64], what[128];
        double worst = 0;
        int64_t n = numel_of(sp), bad = 0;
        snprintf(what, sizeof what, "%s", sp->name);
        bad += compare(what, sp->dtype, optim_var_cdata(var), ref_w[v], n, &worst);
        snprintf(what, sizeof what, "%s", optim_var_name(slot)); /* "<var>/momentum" */
        bad += compare(what, sp->dtype, optim_var_cdata(slot), ref_a[v], n, &worst);
        printf("  %-18s %-7s %-10s %-6s %6lld elements + slot: worst error %.2g of tolerance  %s\n",
               sp->name, optim_dtype_name(sp->dtype),
               optim_shape_str(sp->rank, sp->shape, shape, sizeof shape),
               sp->sparse ? "sparse" : "dense", (long long)n, worst, bad ? "MISMATCH" : "ok");
        failures += bad != 0;
    }

    /* What the class saw: chunks and sparse calls (from its own state). */
    hb_stats *st = optim_state(r2.opt);
    long long dense_var_steps = 0, dense_elems = 0;
    for (int k = 0; k < STEPS; k++)
        for (int v = 0; v < NVARS; v++)
            if (!SPECS[v].sparse && !is_none(k, v))
                dense_var_steps++, dense_elems += numel_of(&SPECS[v]);
    printf("  apply_dense: %lld calls for %lld dense updates (chunks of at most %lld elements), "
           "apply_sparse: %lld calls, unsorted index pairs seen: %lld\n",
           (long long)st->dense_calls, dense_var_steps, (long long)st->max_chunk,
           (long long)st->sparse_calls, (long long)st->sparse_unsorted);
    if (st->dense_calls <= dense_var_steps || st->dense_elements != dense_elems ||
        st->sparse_unsorted != 0 || st->sparse_calls != 2 * STEPS - 1) {
        fprintf(stderr, "MISMATCH in what the hooks were given\n");
        failures++;
    }

    /* --- the same run on 1 thread: bitwise identical --- */
    run r1;
    if (train(1, &r1)) {
        run_free(&r1);
        failures++;
    } else {
        int same = 1;
        for (int v = 0; v < NVARS; v++) {
            size_t bytes = (size_t)numel_of(&SPECS[v]) * optim_dtype_size(SPECS[v].dtype);
            same &= memcmp(optim_var_cdata(r1.vars[v]), optim_var_cdata(r2.vars[v]), bytes) == 0;
            same &=
                memcmp(optim_var_cdata(optim_get_slot(r1.opt, r1.vars[v], "momentum")),
                       optim_var_cdata(optim_get_slot(r2.opt, r2.vars[v], "momentum")), bytes) == 0;
        }
        printf("  1 thread vs 2 threads: %s\n",
               same ? "bitwise identical" : "MISMATCH (results differ)");
        failures += !same;
        run_free(&r1);
    }

    /* --- slots, config and serialization --- */
    const char *names[OPTIM_MAX_SLOTS];
    size_t ns = optim_get_slot_names(r2.opt, names, OPTIM_MAX_SLOTS);
    printf("slot names:");
    for (size_t i = 0; i < ns && i < OPTIM_MAX_SLOTS; i++) printf(" %s", names[i]);
    printf("; weights: %zu (iterations + one slot per variable)\n", optim_weights_count(r2.opt));

    char *config = optim_get_config(r2.opt);
    char *ser = optim_serialize(r2.opt);
    printf("get_config: %s\n", config ? config : optim_errmsg(r2.opt));
    printf("serialize:  %s\n", ser ? ser : optim_errmsg(r2.opt));
    /* from_config(get_config()) gives the same config back. */
    optim_optimizer *copy = NULL;
    if (!ser || optim_from_json(&copy, ser, &err)) {
        fprintf(stderr, "round trip: %s\n", ser ? err.msg : "no serialization");
        failures++;
    } else {
        char *again = optim_serialize(copy);
        int same = again && strcmp(again, ser) == 0;
        printf("round trip through JSON: %s\n", same ? "same config" : "MISMATCH");
        failures += !same;
        optim_free(again);
    }
    optim_destroy(copy);
    optim_free(config);
    optim_free(ser);

    /* --- errors --- */
    printf("bad hyperparameters are refused, with a message:\n");
    failures += show_errors();

    run_free(&r2);
    for (int v = 0; v < NVARS; v++) {
        free(ref_w[v]);
        free(ref_a[v]);
    }
    printf("%s\n", failures ? "FAILED" : "all elements match the double-precision reference");
    return failures ? 1 : 0;
}
