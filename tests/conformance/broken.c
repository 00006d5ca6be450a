/* A plugin of deliberately broken optimizer classes, one fault each, for
 * tests/conformance/broken.sh: every class must be caught by the check
 * named in its comment (`optim conformance NAME` prints FAIL for it). They
 * are all plain SGD, w = w - lr * g, except for their fault, but for the
 * two Adam classes at the end, for tests/conformance/reference.sh: PluginAdam
 * (Keras 3's Adam, right) and BrokenAdamEps (epsilon inside the square
 * root), which `optim conformance --reference` must tell apart. */
#include <omp.h>
#include <optim/plugin.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct coef {
    double lr;
} coef;

static void prepare(optim_optimizer *opt, optim_dtype dt, void *c)
{
    ((coef *)c)->lr = optim_learning_rate(opt, dt);
}

/* w[i] -= scale * lr * g[i] over n elements. */
static void sgd(optim_dtype dt, void *w, const void *g, int64_t n, double lr, double scale)
{
    for (int64_t i = 0; i < n; i++)
        if (dt == OPTIM_F32) ((float *)w)[i] -= (float)(scale * lr) * ((const float *)g)[i];
        else ((double *)w)[i] -= scale * lr * ((const double *)g)[i];
}

static void dense_ok(const optim_dense_update *u)
{
    sgd(u->dtype, u->param, u->grad, u->count, ((const coef *)u->coef)->lr, 1);
}

static void sparse_ok(const optim_sparse_update *u)
{
    size_t es = u->dtype == OPTIM_F32 ? 4 : 8;
    for (int64_t j = 0; j < u->n; j++)
        sgd(u->dtype, (char *)u->param + (size_t)(u->indices[j] * u->row_size) * es,
            (const char *)u->values + (size_t)(j * u->row_size) * es, u->row_size,
            ((const coef *)u->coef)->lr, 1);
}

/* update.changes_variable: the step never writes the variable (TF issue 33227). */
static void dense_noop(const optim_dense_update *u) { (void)u; }

/* update.zero_learning_rate: moves the variable even with lr = 0. */
static void dense_lr_floor(const optim_dense_update *u)
{
    sgd(u->dtype, u->param, u->grad, u->count, ((const coef *)u->coef)->lr + 1e-3, 1);
}

/* elementwise.guards: writes one element before its chunk. */
static void dense_writes_outside(const optim_dense_update *u)
{
    dense_ok(u);
    if (u->offset > 0) {
        if (u->dtype == OPTIM_F32) ((float *)u->param)[-1] = 0.5f;
        else ((double *)u->param)[-1] = 0.5;
    }
}

/* elementwise.guards: reads the element after its chunk (when there is one). */
static void dense_reads_outside(const optim_dense_update *u)
{
    int64_t n = u->count, total = optim_var_numel(u->var);
    for (int64_t i = 0; i < n; i++) {
        int64_t next = u->offset + i + 1 < total ? i + 1 : i;
        if (u->dtype == OPTIM_F32)
            ((float *)u->param)[i] -= (float)((const coef *)u->coef)->lr *
                (((const float *)u->grad)[i] + 0.0f * ((const float *)u->grad)[next]);
        else
            ((double *)u->param)[i] -= ((const coef *)u->coef)->lr *
                (((const double *)u->grad)[i] + 0.0 * ((const double *)u->grad)[next]);
    }
}

/* elementwise.chunking: the step depends on where the chunk starts. */
static void dense_by_offset(const optim_dense_update *u)
{
    sgd(u->dtype, u->param, u->grad, u->count, ((const coef *)u->coef)->lr, u->offset % 2 ? 2 : 1);
}

/* threads.independent: the step depends on the thread that runs it. */
static void dense_by_thread(const optim_dense_update *u)
{
    sgd(u->dtype, u->param, u->grad, u->count, ((const coef *)u->coef)->lr,
        1 + omp_get_thread_num());
}

/* threads.no_shared_state: one static scratch buffer for every thread (a
 * copy of the gradient, then the update from it): two threads in the
 * kernel at once overwrite each other's copy. */
static double shared_scratch[1 << 16];

static void dense_shared_scratch(const optim_dense_update *u)
{
    const int64_t n = u->count < (1 << 16) ? u->count : (1 << 16);
    for (int64_t i = 0; i < n; i++)
        shared_scratch[i] =
            u->dtype == OPTIM_F32 ? ((const float *)u->grad)[i] : ((const double *)u->grad)[i];
    for (int64_t i = 0; i < n; i++) {
        const double step = ((const coef *)u->coef)->lr * shared_scratch[i];
        if (u->dtype == OPTIM_F32) ((float *)u->param)[i] -= (float)step;
        else ((double *)u->param)[i] -= step;
    }
}

/* sparse.rule: updates rows 0..n-1 instead of the indexed rows. */
static void sparse_wrong_rows(const optim_sparse_update *u)
{
    size_t es = u->dtype == OPTIM_F32 ? 4 : 8;
    for (int64_t j = 0; j < u->n; j++)
        sgd(u->dtype, (char *)u->param + (size_t)(j * u->row_size) * es,
            (const char *)u->values + (size_t)(j * u->row_size) * es, u->row_size,
            ((const coef *)u->coef)->lr, 1);
}

/* sparse.duplicates: applies only the first occurrence of each index. */
static int sparse_drops_duplicates(const optim_sparse_update *u)
{
    size_t es = u->dtype == OPTIM_F32 ? 4 : 8;
    for (int64_t j = 0; j < u->n; j++) {
        int seen = 0;
        for (int64_t k = 0; k < j; k++) seen |= u->indices[k] == u->indices[j];
        if (!seen)
            sgd(u->dtype, (char *)u->param + (size_t)(u->indices[j] * u->row_size) * es,
                (const char *)u->values + (size_t)(j * u->row_size) * es, u->row_size,
                ((const coef *)u->coef)->lr, 1);
    }
    return 0;
}

/* slots.resume: counts steps in the class state instead of using
 * iterations, so get_weights/set_weights cannot carry it. */
typedef struct hidden {
    int64_t steps;
    int64_t vars; /* variables seen by create_slots (failure.hook) */
} hidden;

static void prepare_hidden(optim_optimizer *opt, optim_dtype dt, void *c)
{
    hidden *h = optim_state(opt);
    if (dt == OPTIM_F32) h->steps++;
    ((coef *)c)->lr = optim_learning_rate(opt, dt) / (double)(h->steps + 1);
}

/* failure.hook: create_slots keeps a count the rule uses, which a failed
 * step cannot take back. */
static int create_slots_counting(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    ((hidden *)optim_state(opt))->vars++;
    return optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
}

static void prepare_counting(optim_optimizer *opt, optim_dtype dt, void *c)
{
    ((coef *)c)->lr = optim_learning_rate(opt, dt) * (double)((hidden *)optim_state(opt))->vars;
}

/* hyper.changes_step: reads the declared default, never the value set. */
static const optim_param beta_param[] = {
    {"beta", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.5, 0.0, 1.0},
};

static void prepare_ignores_beta(optim_optimizer *opt, optim_dtype dt, void *c)
{
    ((coef *)c)->lr = optim_learning_rate(opt, dt) * (1 + beta_param[0].default_value);
}

/* config.round_trip: get_config writes a key that set_config refuses. */
static int get_config_extra(optim_optimizer *opt, optim_config *cfg)
{
    return optim_config_put(cfg, "mode", "\"fast\"");
}

/* config.bad_values: set_config takes any key, known or not. */
static int set_config_anything(optim_optimizer *opt, const char *key, const char *json,
                               optim_error *err)
{
    return 0;
}

/* config.keys_kept: set_config takes "mode", get_config forgets it. */
static int set_config_mode(optim_optimizer *opt, const char *key, const char *json,
                           optim_error *err)
{
    if (strcmp(key, "mode") != 0) return OPTIM_EKEY;
    ((hidden *)optim_state(opt))->steps = atoi(json);
    return 0;
}

/* A slot short: the kernel reads slots[0] and slots[1] (as the class
 * table's min_slots 2 promises) but create_slots adds only "m", or adds "m"
 * twice. The library refuses the step before the kernel runs. */
static void dense_two_slots(const optim_dense_update *u)
{
    for (int k = 0; k < 2; k++)
        memset(u->slots[k], 0, (size_t)u->count * (u->dtype == OPTIM_F32 ? 4 : 8));
    dense_ok(u);
}

static int create_slots_one(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    return optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
}

static int create_slots_twice(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
    return rc ? rc : optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
}

/* The crash report (CRASH update (SIGSEGV)): the kernel writes through a
 * null pointer once the variable is longer than one element, so the table
 * and config checks pass first and their lines must survive the crash. */
static float *volatile nowhere; /* NULL, unknown to the compiler */

static void dense_crashes(const optim_dense_update *u)
{
    if (u->count > 1) nowhere[u->count] = 1;
    dense_ok(u);
}

/* Adam as Keras 3 writes it, epsilon outside the square root (PluginAdam)
 * or, the fault, inside it (BrokenAdamEps): caught by --reference only. */
static const optim_param adam_params[] = {
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_MAX_EXCLUSIVE, 0.999, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, 0, 1e-7, 0.0, INFINITY},
};

typedef struct adam_coef {
    double step, b1, b2, eps; /* step: lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) */
} adam_coef;

static int adam_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0.0);
    return rc ? rc : optim_add_slot(opt, var, "v", OPTIM_SLOT_ZEROS, 0.0);
}

static void adam_prepare(optim_optimizer *opt, optim_dtype dt, void *coef)
{
    adam_coef *k = coef;
    double t = (double)optim_iterations(opt) + 1;
    k->b1 = optim_param_value(opt, 0);
    k->b2 = optim_param_value(opt, 1);
    k->eps = optim_param_value(opt, 2);
    k->step = optim_learning_rate(opt, dt) * sqrt(1 - pow(k->b2, t)) / (1 - pow(k->b1, t));
}

#define ADAM_KERNEL(T, SQRT, NAME, DENOM)                                         \
    static void NAME(T *w, const T *g, T *m, T *v, int64_t n, const adam_coef *k) \
    {                                                                             \
        const T b1 = (T)k->b1, b2 = (T)k->b2, eps = (T)k->eps, step = (T)k->step; \
        for (int64_t i = 0; i < n; i++) {                                         \
            m[i] += (g[i] - m[i]) * (1 - b1);                                     \
            v[i] += (g[i] * g[i] - v[i]) * (1 - b2);                              \
            w[i] -= step * m[i] / (DENOM);                                        \
        }                                                                         \
    }
ADAM_KERNEL(float, sqrtf, adam_f32, sqrtf(v[i]) + eps)
ADAM_KERNEL(double, sqrt, adam_f64, sqrt(v[i]) + eps)
ADAM_KERNEL(float, sqrtf, adam_eps_f32, sqrtf(v[i] + eps))
ADAM_KERNEL(double, sqrt, adam_eps_f64, sqrt(v[i] + eps))

static void adam_dense(const optim_dense_update *u)
{
    if (u->dtype == OPTIM_F32)
        adam_f32(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
    else adam_f64(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
}

static void adam_eps_dense(const optim_dense_update *u)
{
    if (u->dtype == OPTIM_F32)
        adam_eps_f32(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
    else adam_eps_f64(u->param, u->grad, u->slots[0], u->slots[1], u->count, u->coef);
}

#define ADAM(NAME, DENSE)                                                                          \
    {                                                                                              \
        .size = sizeof(optim_class), .version = OPTIM_CLASS_VERSION, .name = NAME,                 \
        .flags = OPTIM_CLASS_ELEMENTWISE, .default_learning_rate = 0.001, .params = adam_params,   \
        .n_params = 3, .coef_size = sizeof(adam_coef), .min_slots = 2, .create_slots = adam_slots, \
        .prepare = adam_prepare, .apply_dense = DENSE                                              \
    }

#define BROKEN(NAME, ...)                                                          \
    {                                                                              \
        .size = sizeof(optim_class), .version = OPTIM_CLASS_VERSION, .name = NAME, \
        .flags = OPTIM_CLASS_ELEMENTWISE, .default_learning_rate = 0.01,           \
        .coef_size = sizeof(coef), .prepare = prepare, .apply_dense = dense_ok,    \
        .apply_sparse = sparse_ok, __VA_ARGS__                                     \
    }

static const optim_class broken[] = {
    BROKEN("BrokenNoop", .apply_dense = dense_noop),
    BROKEN("BrokenZeroLr", .apply_dense = dense_lr_floor),
    BROKEN("BrokenWritesOutside", .apply_dense = dense_writes_outside),
    BROKEN("BrokenReadsOutside", .apply_dense = dense_reads_outside),
    BROKEN("BrokenByOffset", .apply_dense = dense_by_offset),
    BROKEN("BrokenByThread", .apply_dense = dense_by_thread),
    BROKEN("BrokenSharedScratch", .apply_dense = dense_shared_scratch),
    BROKEN("BrokenSparseRows", .apply_sparse = sparse_wrong_rows),
    BROKEN("BrokenDuplicates", .apply_sparse_duplicate_indices = sparse_drops_duplicates),
    BROKEN("BrokenResume", .state_size = sizeof(hidden), .prepare = prepare_hidden),
    BROKEN("BrokenRollback", .state_size = sizeof(hidden), .create_slots = create_slots_counting,
           .prepare = prepare_counting),
    BROKEN("BrokenHyper", .params = beta_param, .n_params = 1, .prepare = prepare_ignores_beta),
    BROKEN("BrokenConfig", .get_config = get_config_extra),
    BROKEN("BrokenBadValues", .set_config = set_config_anything),
    BROKEN("BrokenCrash", .apply_dense = dense_crashes),
    BROKEN("BrokenMissingSlot", .min_slots = 2, .create_slots = create_slots_one,
           .apply_dense = dense_two_slots),
    BROKEN("BrokenSlotTwice", .min_slots = 2, .create_slots = create_slots_twice,
           .apply_dense = dense_two_slots),
    BROKEN("BrokenDropsKey", .state_size = sizeof(hidden), .set_config = set_config_mode),
    ADAM("PluginAdam", adam_dense),
    ADAM("BrokenAdamEps", adam_eps_dense),
};

OPTIM_PLUGIN_INIT(optim_error *err)
{
    for (size_t i = 0; i < sizeof broken / sizeof *broken; i++) {
        int rc = optim_register_class(&broken[i], err);
        if (rc) return rc;
    }
    return 0;
}
