/* Keras 3's base options: moving average of the variables (use_ema,
 * ema_momentum, ema_overwrite_frequency), loss scaling (loss_scale_factor)
 * and gradient accumulation (gradient_accumulation_steps).
 *
 * Source: keras/src/optimizers/base_optimizer.py (BaseOptimizer) and its
 * TensorFlow variant keras/src/backend/tensorflow/optimizer.py. One call of
 * apply_gradients, in order (apply.c runs the steps, this file does the
 * arithmetic):
 *
 *   g = g / loss_scale_factor                        (apply: "Unscale gradients")
 *   with gradient_accumulation_steps = S, at counter value c:
 *     (c + 1) % S != 0: acc = g + acc                (only; no clipping, no update)
 *     (c + 1) % S == 0: g = (g + acc) / S, then clip, weight decay, update,
 *                       and every accumulator = 0    (_backend_apply_gradients)
 *   without: clip, weight decay, update
 *   with use_ema, for every variable the optimizer tracks, with it = c // S
 *   (c without accumulation), Keras's `iterations` property:
 *     m = ema_momentum if it != 0 else 0
 *     average = m * average + (1 - m) * w            (_update_model_variables_moving_average)
 *     if ema_overwrite_frequency and (it + 1) % ema_overwrite_frequency == 0:
 *       w = average                                  (_overwrite_model_variables_with_average_value)
 *   constraints, then c += 1
 *
 * Each operation runs in the variable's dtype, with the Python numbers
 * (loss_scale_factor, S, ema_momentum) converted to it, as Keras's TF ops
 * convert them. A sparse gradient is unscaled row by row, and accumulation
 * adds it to the dense accumulator with its duplicate rows summed (TF adds
 * an IndexedSlices to a tensor by densifying it); the update then sees the
 * dense mean. The update rule's hooks see Keras's `iterations` (c // S) as
 * optim_iterations() (Adam's bias correction counts updates), while
 * schedules see the counter c ("Learning rate schedules will look at 'real'
 * iterations value").
 *
 * The passes are element-wise over fixed chunks, so they give the same bits
 * for any number of threads. */
#include "optimizer/keras3_options.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/parallel.h"

/* ---- configuration --------------------------------------------------------------- */

/* The options exist for optimizers of the Keras 3 generation that run the
 * base pipeline (a wrapper's apply_gradients replaces it). */
static int runs_options(const optim_optimizer *opt)
{
    return opt->gen == OPTIM_KERAS3 && optim__runs_pipeline(opt);
}

/* A non-dynamic base option as configured: NAN for None. */
static double option(const optim_optimizer *opt, int i)
{
    const optim__hyper *h = &opt->hypers[i];
    return h->kind == HYPER_NUMBER ? h->number : NAN;
}

/* `if self.gradient_accumulation_steps:` -- None and 0 are off. */
static int64_t acc_steps_of(const optim_optimizer *opt)
{
    double v = option(opt, OPTIM__P_GRADIENT_ACCUMULATION_STEPS);
    return isnan(v) || v == 0 ? 0 : v >= 0x1p63 ? INT64_MAX : (int64_t)v; /* max is INF */
}

int optim__k3_wants_average(const optim_optimizer *opt)
{
    return runs_options(opt) && option(opt, OPTIM__P_USE_EMA) != 0 &&
        !isnan(option(opt, OPTIM__P_USE_EMA));
}

int optim__k3_wants_accumulator(const optim_optimizer *opt)
{
    return runs_options(opt) && acc_steps_of(opt) != 0;
}

int optim__k3_average_copies(const optim_optimizer *opt)
{
    /* Keras builds every average (zeros) before its first step, where the
     * momentum is 0: the average becomes the variable. A variable that
     * optim meets later starts from its own value instead of from zeros,
     * which would bias its average towards 0. */
    int64_t s = acc_steps_of(opt);
    return (s ? opt->iterations / s : opt->iterations) != 0;
}

int optim__k3_slot_name_reserved(const optim_optimizer *opt, const char *name)
{
    return runs_options(opt) && name &&
        (strcmp(name, OPTIM__SLOT_AVERAGE) == 0 || strcmp(name, OPTIM__SLOT_ACCUMULATOR) == 0);
}

void optim__k3_begin(const optim_optimizer *opt, optim__k3 *k)
{
    memset(k, 0, sizeof *k);
    k->update = 1;
    k->iterations = opt->iterations;
    if (!runs_options(opt)) return;
    const double *v = opt->values;
    k->lsf = isnan(v[OPTIM__P_LOSS_SCALE_FACTOR]) ? 0 : v[OPTIM__P_LOSS_SCALE_FACTOR];
    double s = v[OPTIM__P_GRADIENT_ACCUMULATION_STEPS];
    k->acc_steps = isnan(s) || s == 0 ? 0 : s >= 0x1p63 ? INT64_MAX : (int64_t)s;
    if (k->acc_steps) {
        k->update = (opt->iterations + 1) % k->acc_steps == 0;
        k->iterations = opt->iterations / k->acc_steps;
    }
    k->ema = v[OPTIM__P_USE_EMA] != 0;
    if (k->ema) {
        k->ema_momentum = k->iterations != 0 ? v[OPTIM__P_EMA_MOMENTUM] : 0.0;
        double f = v[OPTIM__P_EMA_OVERWRITE_FREQUENCY];
        int64_t freq = isnan(f) ? 0
            : f >= 0x1p63       ? INT64_MAX
                                : (int64_t)f; /* `if self.ema_overwrite_frequency:` */
        k->overwrite = freq > 0 && (k->iterations + 1) % freq == 0;
    }
}

int optim__k3_validate(optim_optimizer *opt, optim_error *err)
{
    if (opt->gen != OPTIM_KERAS3) return OPTIM_OK;
    const char *cn = opt->cls.name;
    const double use_ema = option(opt, OPTIM__P_USE_EMA), mom = option(opt, OPTIM__P_EMA_MOMENTUM);
    const double freq = option(opt, OPTIM__P_EMA_OVERWRITE_FREQUENCY);
    const double lsf = option(opt, OPTIM__P_LOSS_SCALE_FACTOR);
    const double steps = option(opt, OPTIM__P_GRADIENT_ACCUMULATION_STEPS);
    const int ema = use_ema != 0 && !isnan(use_ema);
    /* BaseOptimizer.__init__: `if gradient_accumulation_steps:` it must be >= 2. */
    if (!isnan(steps) && steps != 0 && !(steps >= 2))
        return optim__err(err, OPTIM_ERANGE,
                          "%s: gradient_accumulation_steps is %g, expected an integer >= 2 or None",
                          cn, steps);
    /* Checked only with use_ema, like Keras's "Verify the arguments related to EMA". */
    if (ema && !(mom >= 0 && mom <= 1))
        return optim__err(err, OPTIM_ERANGE,
                          "%s: ema_momentum is %g, expected a value in [0, 1] (use_ema is true)",
                          cn, mom);
    if (ema && !isnan(freq) && freq != 0 && !(freq >= 1))
        return optim__err(err, OPTIM_ERANGE,
                          "%s: ema_overwrite_frequency is %g, expected an integer >= 1 or None", cn,
                          freq);
    /* Keras does not check it; gradients are divided by it. */
    if (!isnan(lsf) && !(lsf > 0))
        return optim__err(err, OPTIM_ERANGE,
                          "%s: loss_scale_factor is %g, expected a positive number or None "
                          "(gradients are divided by it)",
                          cn, lsf);
    const int acc = !isnan(steps) && steps != 0;
    /* A wrapper of several optimizers (MultiOptimizer) hands loss_scale_factor on to them. */
    if (!optim__runs_pipeline(opt) && (ema || acc || (!isnan(lsf) && !opt->cls.inner_at)))
        return optim__err(err, OPTIM_ENOTSUP,
                          "%s: %s is set, but %s replaces the base class's apply_gradients (a "
                          "wrapper); set it on the inner optimizer",
                          cn,
                          ema       ? "use_ema"
                              : acc ? "gradient_accumulation_steps"
                                    : "loss_scale_factor",
                          cn);
    /* The base slots are made when a variable is first tracked (Keras's
     * build); like Keras, the options that create them cannot change after. */
    if (opt->nvars > 0 && optim__runs_pipeline(opt)) {
        const optim__var_entry *e = &opt->vars[0];
        int had_ema = e->average != NULL;
        int had_acc = e->accumulator != NULL;
        if (had_ema != ema)
            return optim__err(err, OPTIM_ESTATE,
                              "%s: use_ema cannot change once the optimizer has slots for its %zu "
                              "variables (they were created with use_ema=%s)",
                              cn, opt->nvars, had_ema ? "true" : "false");
        if (had_acc != acc)
            return optim__err(err, OPTIM_ESTATE,
                              "%s: gradient_accumulation_steps cannot change between None and a "
                              "number once the optimizer has slots for its %zu variables (they "
                              "were created with %s)",
                              cn, opt->nvars, had_acc ? "accumulators" : "None");
    }
    return OPTIM_OK;
}

/* ---- the passes ---------------------------------------------------------------------- */

#define UNSCALE(T)                                                                  \
    static void unscale_##T(const T *restrict src, T *restrict dst, int64_t n, T s) \
    {                                                                               \
        for (int64_t i = 0; i < n; i++) dst[i] = src[i] / s;                        \
    }
UNSCALE(float)
UNSCALE(double)

void optim__k3_unscale(optim_dtype dt, const void *src, void *dst, int64_t n, double lsf)
{
    if (dt == OPTIM_F32) unscale_float(src, dst, n, (float)lsf);
    else unscale_double(src, dst, n, lsf);
}

/* acc = g / s + acc (s = 0: no unscaling). */
#define ACC_DENSE(T)                                                                \
    static void acc_dense_##T(T *restrict acc, const T *restrict g, int64_t n, T s) \
    {                                                                               \
        if (s != 0)                                                                 \
            for (int64_t i = 0; i < n; i++) acc[i] = g[i] / s + acc[i];             \
        else                                                                        \
            for (int64_t i = 0; i < n; i++) acc[i] = g[i] + acc[i];                 \
    }
ACC_DENSE(float)
ACC_DENSE(double)

/* out = (g / s + acc) / steps; g NULL: a zero gradient, acc NULL: a zero
 * accumulator. The zeros are added, not folded, for the bits of TF's sums. */
#define MEAN_DENSE(T)                                                                       \
    static void mean_dense_##T(T *restrict out, const T *restrict g, const T *restrict acc, \
                               int64_t n, T s, T steps)                                     \
    {                                                                                       \
        const T zero = 0;                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T gi = g ? (s != 0 ? g[i] / s : g[i]) : zero;                                   \
            out[i] = (gi + (acc ? acc[i] : zero)) / steps;                                  \
        }                                                                                   \
    }
MEAN_DENSE(float)
MEAN_DENSE(double)

/* average = m * average + (1 - m) * w, then w = average when overwriting. */
#define EMA(T)                                                                         \
    static void ema_##T(T *restrict avg, T *restrict w, int64_t n, T m, int overwrite) \
    {                                                                                  \
        const T om = (T)1 - m;                                                         \
        for (int64_t i = 0; i < n; i++) avg[i] = m * avg[i] + om * w[i];               \
        if (overwrite) memcpy(w, avg, (size_t)n * sizeof(T));                          \
    }
EMA(float)
EMA(double)

/* Rows per task of a sparse pass: about one chunk of elements. */
static int64_t rows_per_task(int64_t row_size)
{
    return row_size >= OPTIM__CHUNK ? 1 : OPTIM__CHUNK / (row_size > 0 ? row_size : 1);
}

void optim__k3_accumulate(const optim__k3 *k, const optim__k3_grad *g, size_t n, int nthreads)
{
    /* Dense gradients by chunks; rows (unique indices, so no two tasks share
     * an element) by chunks of rows. */
#pragma omp parallel num_threads(nthreads)
    for (size_t v = 0; v < n; v++) {
        const optim__k3_grad *x = &g[v];
        char *acc = optim_var_data(x->entry->accumulator);
        const size_t esz = optim_dtype_size(x->dtype);
        if (x->dense) {
            const int64_t nc = optim__nchunks(x->numel);
#pragma omp for schedule(dynamic, 1) nowait
            for (int64_t c = 0; c < nc; c++) {
                int64_t off = c * OPTIM__CHUNK, cnt = optim__chunk_len(x->numel, off);
                const size_t b = (size_t)off * esz;
                const char *gp = (const char *)x->dense + b;
                if (x->dtype == OPTIM_F32)
                    acc_dense_float((float *)(acc + b), (const float *)gp, cnt, (float)k->lsf);
                else acc_dense_double((double *)(acc + b), (const double *)gp, cnt, k->lsf);
            }
        } else {
            const int64_t rs = x->row_size, per = rows_per_task(rs);
            const int64_t nc = (x->n + per - 1) / per;
#pragma omp for schedule(dynamic, 1) nowait
            for (int64_t c = 0; c < nc; c++) {
                for (int64_t r = c * per; r < x->n && r < (c + 1) * per; r++) {
                    char *dst = acc + (size_t)(x->idx[r] * rs) * esz;
                    const char *src = (const char *)x->vals + (size_t)(r * rs) * esz;
                    if (x->dtype == OPTIM_F32)
                        acc_dense_float((float *)dst, (const float *)src, rs, 0.0f);
                    else acc_dense_double((double *)dst, (const double *)src, rs, 0.0);
                }
            }
        }
    }
}

void optim__k3_mean(const optim__k3 *k, const optim__k3_grad *g, size_t n, int nthreads)
{
    const double steps = (double)k->acc_steps;
#pragma omp parallel num_threads(nthreads)
    {
        /* Dense gradients, and the zero rows of sparse ones. */
        for (size_t v = 0; v < n; v++) {
            const optim__k3_grad *x = &g[v];
            const char *acc = x->entry ? optim_var_cdata(x->entry->accumulator) : NULL;
            const size_t esz = optim_dtype_size(x->dtype);
            const int64_t nc = optim__nchunks(x->numel);
#pragma omp for schedule(dynamic, 1) nowait
            for (int64_t c = 0; c < nc; c++) {
                int64_t off = c * OPTIM__CHUNK, cnt = optim__chunk_len(x->numel, off);
                size_t b = (size_t)off * esz;
                const char *gp = x->dense ? (const char *)x->dense + b : NULL;
                const char *ap = acc ? acc + b : NULL;
                if (x->dtype == OPTIM_F32)
                    mean_dense_float((float *)((char *)x->out + b), (const float *)gp,
                                     (const float *)ap, cnt, (float)k->lsf, (float)steps);
                else
                    mean_dense_double((double *)((char *)x->out + b), (const double *)gp,
                                      (const double *)ap, cnt, k->lsf, steps);
            }
        }
#pragma omp barrier
        /* The rows of sparse gradients (unscaled and summed already). */
        for (size_t v = 0; v < n; v++) {
            const optim__k3_grad *x = &g[v];
            if (x->dense) continue;
            const char *acc = x->entry ? optim_var_cdata(x->entry->accumulator) : NULL;
            const size_t esz = optim_dtype_size(x->dtype);
            const int64_t rs = x->row_size, per = rows_per_task(rs);
            const int64_t nc = (x->n + per - 1) / per;
#pragma omp for schedule(dynamic, 1) nowait
            for (int64_t c = 0; c < nc; c++) {
                for (int64_t r = c * per; r < x->n && r < (c + 1) * per; r++) {
                    size_t b = (size_t)(x->idx[r] * rs) * esz;
                    const char *src = (const char *)x->vals + (size_t)(r * rs) * esz;
                    if (x->dtype == OPTIM_F32)
                        mean_dense_float((float *)((char *)x->out + b), (const float *)src,
                                         acc ? (const float *)(acc + b) : NULL, rs, 0.0f,
                                         (float)steps);
                    else
                        mean_dense_double((double *)((char *)x->out + b), (const double *)src,
                                          acc ? (const double *)(acc + b) : NULL, rs, 0.0, steps);
                }
            }
        }
    }
}

void optim__k3_after_update(optim_optimizer *opt, const optim__k3 *k, int nthreads)
{
    const int reset = k->acc_steps && k->update;
    if (!reset && !k->ema) return;
#pragma omp parallel num_threads(nthreads)
    for (size_t v = 0; v < opt->nvars; v++) {
        const optim__var_entry *e = &opt->vars[v];
        const size_t esz = optim_dtype_size(e->dtype);
        char *acc = reset ? optim_var_data(e->accumulator) : NULL;
        char *avg = k->ema ? optim_var_data(e->average) : NULL;
        char *w = optim_var_data(e->var);
        const int64_t nc = optim__nchunks(e->numel);
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t c = 0; c < nc; c++) {
            int64_t off = c * OPTIM__CHUNK, cnt = optim__chunk_len(e->numel, off);
            size_t b = (size_t)off * esz;
            if (acc) memset(acc + b, 0, (size_t)cnt * esz);
            if (!avg) continue;
            if (e->dtype == OPTIM_F32)
                ema_float((float *)(avg + b), (float *)(w + b), cnt, (float)k->ema_momentum,
                          k->overwrite);
            else
                ema_double((double *)(avg + b), (double *)(w + b), cnt, k->ema_momentum,
                           k->overwrite);
        }
    }
}

/* ---- public entry points ------------------------------------------------------------- */

int optim_finalize_variable_values(optim_optimizer *opt)
{
    if (!opt) return OPTIM_EINVAL;
    opt->errmsg[0] = '\0';
    /* Keras 3's LossScaleOptimizer and MultiOptimizer pass it on. */
    optim_optimizer *in;
    for (size_t k = 0; (in = optim__inner_at(opt, k)); k++) {
        int rc = optim_finalize_variable_values(in);
        if (rc)
            return optim__opt_err(opt, rc, "%s: inner optimizer: %s", opt->cls.name,
                                  optim_errmsg(in));
    }
    if (optim__inner_at(opt, 0)) return OPTIM_OK;
    if (!optim__k3_wants_average(opt)) return OPTIM_OK;
    for (size_t v = 0; v < opt->nvars; v++) {
        const optim__var_entry *e = &opt->vars[v];
        const size_t bytes = (size_t)e->numel * optim_dtype_size(e->dtype);
        if (bytes) memcpy(optim_var_data(e->var), optim_var_cdata(e->average), bytes);
    }
    return OPTIM_OK;
}

double optim__k3_scale_loss(const optim_optimizer *opt, double loss)
{
    /* A MultiOptimizer (inner_at) scales by its own factor, which its
     * sub-optimizers take over. */
    if (!opt || !(runs_options(opt) || (opt->gen == OPTIM_KERAS3 && opt->cls.inner_at)))
        return loss;
    double lsf = option(opt, OPTIM__P_LOSS_SCALE_FACTOR);
    return isnan(lsf) ? loss : loss * lsf;
}
