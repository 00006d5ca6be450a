/* fit / evaluate / predict (keras/src/trainers/trainer.py and
 * backend/tensorflow/trainer.py): mini-batches in (seeded, per-epoch)
 * shuffled order, one tape step each (call, loss, gradients, optimizer
 * step), running means of the loss and the metric weighted by batch size,
 * validation after each epoch, callbacks and the progress bar. */
#include "nn/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

optim_fit_options optim_fit_defaults(void)
{
    optim_fit_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.epochs = 1;
    o.batch_size = 32;
    o.shuffle = 1;
    o.verbose = OPTIM_VERBOSE_AUTO;
    return o;
}

typedef struct data {
    const optim_tensor *x, *y;
    int64_t n;
    size_t xrow, yrow; /* bytes per sample */
} data;

static const unsigned ANY_DTYPE =
    OPTIM__FLOAT_MASK | OPTIM__MASK(OPTIM_I32) | OPTIM__MASK(OPTIM_I64);

static int check_data(const optim_tensor *x, const optim_tensor *y, const char *xn, const char *yn,
                      data *d, optim_error *err)
{
    int rc;
    if (!x) return optim__err(err, OPTIM_EINVAL, "%s is NULL", xn);
    if ((rc = optim__tensor_check(x, ANY_DTYPE, xn, err))) return rc;
    if (x->rank < 1)
        return optim__err(err, OPTIM_ESHAPE, "%s is a scalar, expected [samples, ...]", xn);
    d->x = x;
    d->y = y;
    d->n = x->shape[0];
    if (d->n == 0) return optim__err(err, OPTIM_ESHAPE, "%s has no samples (shape[0] = 0)", xn);
    d->xrow = (size_t)(optim_tensor_numel(x) / d->n) * optim_dtype_size(x->dtype);
    d->yrow = 0;
    if (yn) {
        if (!y) return optim__err(err, OPTIM_EINVAL, "%s is NULL", yn);
        if ((rc = optim__tensor_check(y, ANY_DTYPE, yn, err))) return rc;
        if (y->rank < 1 || y->shape[0] != d->n)
            return optim__err(
                err, OPTIM_ESHAPE,
                "Data cardinality is ambiguous: %s sizes: %lld, %s sizes: %lld. Make sure all "
                "arrays contain the same number of samples.",
                xn, (long long)d->n, yn, y->rank < 1 ? 0LL : (long long)y->shape[0]);
        d->yrow = (size_t)(optim_tensor_numel(y) / d->n) * optim_dtype_size(y->dtype);
    }
    return OPTIM_OK;
}

/* Checks the targets against the model's output shape for all of x. */
static int check_targets(optim_model *m, const data *d, const char *what, optim_error *err)
{
    int32_t pr;
    int64_t ps[OPTIM_MAX_RANK];
    int rc = optim__model_output_shape(m, d->x->rank, d->x->shape, &pr, ps, err);
    if (rc) return rc;
    if ((rc = optim__loss_check(&m->loss, d->y, pr, ps, what, err))) return rc;
    if (m->metric != OPTIM_METRIC_NONE &&
        (rc = optim__metric_check(m->metric, d->y->rank, d->y->shape, pr, ps, err)))
        return rc;
    return OPTIM_OK;
}

/* Rows [start, start + bs) of t, as a view. */
static optim_tensor slice(const optim_tensor *t, int64_t start, int64_t bs, size_t row)
{
    optim_tensor v = *t;
    v.shape[0] = bs;
    v.data = (char *)t->data + (size_t)start * row;
    return v;
}

/* Rows idx[0 .. bs) of t, copied into buf. */
static optim_tensor gather(const optim_tensor *t, const int64_t *idx, int64_t bs, size_t row,
                           void *buf)
{
    for (int64_t i = 0; i < bs; i++)
        memcpy((char *)buf + (size_t)i * row, (const char *)t->data + (size_t)idx[i] * row, row);
    optim_tensor v = *t;
    v.shape[0] = bs;
    v.data = buf;
    return v;
}

typedef struct accum {
    double loss_total, loss_count, metric_total, metric_count;
    optim_metric_kind metric;
} accum;

static void accum_logs(const accum *a, const char *prefix, optim_logs *logs)
{
    char name[OPTIM_LOGS_NAME_MAX];
    snprintf(name, sizeof name, "%sloss", prefix);
    optim_logs_set(logs, name, a->loss_count ? a->loss_total / a->loss_count : NAN);
    if (a->metric != OPTIM_METRIC_NONE) {
        snprintf(name, sizeof name, "%s%s", prefix, optim__metric_name(a->metric));
        optim_logs_set(logs, name, a->metric_count ? a->metric_total / a->metric_count : NAN);
    }
}

typedef struct fit_run fit_run;
static int gradients_hook(fit_run *f, double loss);

/* Loss and metric of one batch (training: with a gradient step, after the
 * callbacks' on_train_batch_gradients when f is given). */
static int run_batch(optim_model *m, optim_tape *t, optim_grad_var *grads, const optim_tensor *xb,
                     const optim_tensor *yb, int training, double share, fit_run *f, accum *a,
                     optim_error *err)
{
    optim_tape_reset(t);
    optim_node *pred, *loss;
    int rc = optim__model_call(m, t, xb, training, 1, &pred, err); /* xb outlives the step */
    if (rc) return rc;
    if ((rc = optim_loss_call(&m->loss, t, yb, pred, NULL, &loss, err))) return rc;
    double value = optim_node_scalar(loss);
    if (training) {
        /* A replica's loss counts by its share of the global batch. */
        optim_node *target =
            share == 1 ? loss : optim_mul(t, loss, optim_tape_scalar(t, m->dtype, share));
        if (!target) return optim__err(err, OPTIM_ENOMEM, "loss: %s", optim_tape_errmsg(t));
        rc = optim_tape_gradient(t, target, m->train_vars, m->n_train_vars, grads);
        if (rc) return optim__err(err, rc, "gradient: %s", optim_tape_errmsg(t));
        if (f && (rc = gradients_hook(f, value))) return rc;
        if (m->replicas.size)
            rc = m->replicas.apply(m->replicas.user, m->opt, grads, m->n_train_vars, err);
        else if ((rc = optim_apply_gradients(m->opt, grads, m->n_train_vars, 0)))
            optim__err(err, rc, "optimizer step: %s", optim_errmsg(m->opt));
        if (rc) return rc;
    }
    double bs = (double)xb->shape[0];
    a->loss_total += value * bs;
    a->loss_count += bs;
    if (a->metric != OPTIM_METRIC_NONE &&
        (rc = optim_accuracy_update(a->metric, yb, optim_node_value(pred), &a->metric_total,
                                    &a->metric_count, err)))
        return rc;
    return OPTIM_OK;
}

/* A distributed step: this replica's rows of the global batch [start,
 * start + bs), then the loss and metric totals summed over the replicas. */
static int replica_batch(optim_model *m, optim_tape *t, optim_grad_var *grads, const data *d,
                         const int64_t *perm, int64_t start, int64_t bs, void *xb, void *yb,
                         fit_run *f, accum *a, optim_error *err)
{
    int64_t lo, n;
    double share;
    optim__replica_rows(&m->replicas, start, bs, &lo, &n, &share);
    optim_tensor xt = gather(d->x, perm + lo, n, d->xrow, xb),
                 yt = gather(d->y, perm + lo, n, d->yrow, yb);
    accum mine = {0, 0, 0, 0, a->metric};
    int rc = run_batch(m, t, grads, &xt, &yt, 1, share, f, &mine, err);
    if (!rc) rc = optim__replica_sync_stats(m, share, err);
    if (rc) return rc;
    double totals[4] = {mine.loss_total, mine.loss_count, mine.metric_total, mine.metric_count};
    if (share == 0) memset(totals, 0, sizeof totals); /* a borrowed row counts for nothing */
    if ((rc = m->replicas.sum(m->replicas.user, totals, 4, err))) return rc;
    a->loss_total += totals[0], a->loss_count += totals[1], a->metric_total += totals[2],
        a->metric_count += totals[3];
    return OPTIM_OK;
}

/* Loss and metric over all of d in order; a bar or line on out (mode 1 / 2). */
static int evaluate_run(optim_model *m, const data *d, int64_t batch_size, FILE *out, int mode,
                        optim_logs *logs, optim_error *err)
{
    optim_tape *t;
    int rc = optim__model_tape(m, &t);
    if (rc) return optim__err(err, rc, "%s", m->errmsg);
    accum a = {0, 0, 0, 0, m->metric};
    int64_t steps = (d->n + batch_size - 1) / batch_size;
    optim__progbar bar;
    optim__progbar_init(&bar, out, mode, steps);
    for (int64_t s = 0; s < steps; s++) {
        int64_t start = s * batch_size, bs = d->n - start < batch_size ? d->n - start : batch_size;
        optim_tensor xb = slice(d->x, start, bs, d->xrow), yb = slice(d->y, start, bs, d->yrow);
        if ((rc = run_batch(m, t, NULL, &xb, &yb, 0, 1, NULL, &a, err))) return rc;
        memset(logs, 0, sizeof *logs);
        accum_logs(&a, "", logs);
        optim__progbar_update(&bar, s + 1, logs, 0);
    }
    optim__progbar_update(&bar, steps, logs, 1);
    return OPTIM_OK;
}

/* One fit call: its options, data, buffers and the error it reports. */
struct fit_run {
    optim_model *m;
    optim_fit_options o;
    const optim_tensor *x, *y;
    data d, v;
    optim_tape *t;
    optim_grad_var *grads;
    int64_t *perm;
    void *xb, *yb;
    int mode; /* progress bar: 0 none, 1 bar, 2 line per epoch */
    int64_t steps; /* batches per epoch */
    int64_t seen; /* batches run in this epoch (fewer when stopped early) */
    int64_t batch; /* the batch being run */
    accum a;
    optim_history *history;
    optim_error e;
};

/* Runs `hook` of every callback in order until one fails (rc set, f->e
 * holding its message). */
#define CALL_HOOK(f, rc, hook, ...)                                                           \
    do {                                                                                      \
        for (size_t c_ = 0; c_ < (f)->o.n_callbacks && !(rc); c_++) {                         \
            optim_callback *cb_ = (f)->o.callbacks[c_];                                       \
            if (cb_->hooks.hook) {                                                            \
                optim__err_clear(&(f)->e);                                                    \
                (rc) = cb_->hooks.hook(cb_->user, (f)->m, __VA_ARGS__, &(f)->e);              \
                if ((rc) && !(f)->e.msg[0])                                                   \
                    optim__err(&(f)->e, (rc), "callback " #hook " failed (status %d)", (rc)); \
                if (rc) (f)->e.code = (rc);                                                   \
            }                                                                                 \
        }                                                                                     \
    } while (0)

static int gradients_hook(fit_run *f, double loss)
{
    int rc = OPTIM_OK;
    CALL_HOOK(f, rc, on_train_batch_gradients, f->batch, loss, f->grads, f->m->n_train_vars);
    return rc;
}

/* The options, before anything else (the message on m). */
static int check_fit_options(optim_model *m, const optim_fit_options *o)
{
    if (o->size != sizeof *o)
        return optim__model_err(m, OPTIM_EVERSION,
                                "fit: options size %u, expected %zu (use optim_fit_defaults)",
                                (unsigned)o->size, sizeof *o);
    if (!m->compiled)
        return optim__model_err(m, OPTIM_ESTATE, "fit: you must call compile() before fit");
    if (o->epochs < 0)
        return optim__model_err(m, OPTIM_EINVAL, "fit: epochs = %lld, expected >= 0",
                                (long long)o->epochs);
    if (o->batch_size < 1)
        return optim__model_err(m, OPTIM_EINVAL,
                                "fit: batch_size = %lld, expected a positive integer",
                                (long long)o->batch_size);
    if (o->shuffle != 0 && o->shuffle != 1)
        return optim__model_err(m, OPTIM_EINVAL, "fit: shuffle = %d, expected 0 or 1", o->shuffle);
    if (o->initial_epoch < 0)
        return optim__model_err(m, OPTIM_EINVAL, "fit: initial_epoch = %lld, expected >= 0",
                                (long long)o->initial_epoch);
    if (o->verbose < -1 || o->verbose > 2)
        return optim__model_err(m, OPTIM_EINVAL,
                                "fit: verbose = %d, expected OPTIM_VERBOSE_AUTO, 0, 1 or 2",
                                o->verbose);
    if (o->n_callbacks && !o->callbacks)
        return optim__model_err(m, OPTIM_EINVAL, "fit: n_callbacks = %zu but callbacks is NULL",
                                o->n_callbacks);
    for (size_t i = 0; i < o->n_callbacks; i++)
        if (!o->callbacks[i])
            return optim__model_err(m, OPTIM_EINVAL, "fit: callbacks[%zu] is NULL", i);
    if (!o->validation_x != !o->validation_y)
        return optim__model_err(m, OPTIM_EINVAL,
                                "fit: give both validation_x and validation_y, or neither");
    return OPTIM_OK;
}

/* The data against the (built) model, the tape and the batch buffers. */
static int fit_prepare(fit_run *f)
{
    optim_model *m = f->m;
    int rc = check_targets(m, &f->d, "y", &f->e);
    if (!rc && f->o.validation_x) rc = check_targets(m, &f->v, "validation_y", &f->e);
    if (!rc && m->n_train_vars == 0)
        rc = optim__err(&f->e, OPTIM_ESTATE, "fit: model \"%s\" has no trainable variables",
                        m->name);
    if (!rc && optim__model_tape(m, &f->t)) rc = optim__err(&f->e, OPTIM_ENOMEM, "%s", m->errmsg);
    if (rc) return rc;
    int64_t bmax = f->o.batch_size < f->d.n ? f->o.batch_size : f->d.n;
    f->grads = calloc(m->n_train_vars, sizeof *f->grads);
    f->perm = malloc((size_t)f->d.n * sizeof *f->perm);
    f->xb = malloc((size_t)bmax * f->d.xrow + 1);
    f->yb = malloc((size_t)bmax * f->d.yrow + 1);
    if (!f->grads || !f->perm || !f->xb || !f->yb)
        return optim__err(&f->e, OPTIM_ENOMEM, "fit: out of memory for the batches");
    return OPTIM_OK;
}

static void fit_free(fit_run *f) { free(f->grads), free(f->perm), free(f->xb), free(f->yb); }

/* The epoch's sample order: 0..n-1, shuffled with a seed of (seed, epoch). */
static void fit_order(fit_run *f, int64_t epoch)
{
    int64_t *perm = f->perm;
    for (int64_t i = 0; i < f->d.n; i++) perm[i] = i;
    if (!f->o.shuffle) return;
    optim__rng r = optim__rng_make(optim__seed_mix(f->o.seed, (uint64_t)epoch));
    for (int64_t i = f->d.n - 1; i > 0; i--) {
        int64_t j = (int64_t)optim__rng_below(&r, (uint64_t)i + 1), tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}

/* The epoch's batches, each with its callbacks and the bar; stops early
 * when a callback sets stop_training. */
static int fit_batches(fit_run *f, optim__progbar *bar)
{
    optim_model *m = f->m;
    optim_logs logs;
    int rc = OPTIM_OK;
    f->a = (accum){0, 0, 0, 0, m->metric};
    f->seen = 0;
    for (int64_t s = 0; s < f->steps && !rc; s++) {
        memset(&logs, 0, sizeof logs);
        CALL_HOOK(f, rc, on_train_batch_begin, s, &logs);
        if (rc) break;
        int64_t start = s * f->o.batch_size,
                bs = f->d.n - start < f->o.batch_size ? f->d.n - start : f->o.batch_size;
        f->batch = s;
        if (m->replicas.size) {
            rc = replica_batch(m, f->t, f->grads, &f->d, f->perm, start, bs, f->xb, f->yb, f, &f->a,
                               &f->e);
        } else {
            optim_tensor xt = gather(f->x, f->perm + start, bs, f->d.xrow, f->xb);
            optim_tensor yt = gather(f->y, f->perm + start, bs, f->d.yrow, f->yb);
            rc = run_batch(m, f->t, f->grads, &xt, &yt, 1, 1, f, &f->a, &f->e);
        }
        if (rc) break;
        memset(&logs, 0, sizeof logs);
        accum_logs(&f->a, "", &logs);
        CALL_HOOK(f, rc, on_train_batch_end, s, &logs);
        if (rc) break;
        f->seen = s + 1;
        optim__progbar_update(bar, s + 1, &logs, 0);
        if (m->stop_training) break;
    }
    return rc;
}

/* The epoch's logs: the running means, then val_loss and val_METRIC. */
static int fit_epoch_logs(fit_run *f, optim_logs *logs)
{
    memset(logs, 0, sizeof *logs);
    accum_logs(&f->a, "", logs);
    if (!f->o.validation_x) return OPTIM_OK;
    optim_logs vl;
    int rc = evaluate_run(f->m, &f->v, f->o.batch_size, NULL, 0, &vl, &f->e);
    if (rc) return rc;
    double val;
    optim_logs_get(&vl, "loss", &val);
    optim_logs_set(logs, "val_loss", val);
    if (f->m->metric != OPTIM_METRIC_NONE) {
        char name[OPTIM_LOGS_NAME_MAX];
        snprintf(name, sizeof name, "val_%s", optim__metric_name(f->m->metric));
        optim_logs_get(&vl, optim__metric_name(f->m->metric), &val);
        optim_logs_set(logs, name, val);
    }
    return OPTIM_OK;
}

static int history_append(optim_history *history, int64_t epoch, const optim_logs *logs,
                          optim_error *e)
{
    size_t k = history->epochs;
    int64_t *ep = realloc(history->epoch, (k + 1) * sizeof *ep);
    if (ep) history->epoch = ep;
    optim_logs *lg = ep ? realloc(history->logs, (k + 1) * sizeof *lg) : NULL;
    if (lg) history->logs = lg;
    if (!ep || !lg) return optim__err(e, OPTIM_ENOMEM, "fit: out of memory for the history");
    history->epoch[k] = epoch;
    history->logs[k] = *logs;
    history->epochs = k + 1;
    return OPTIM_OK;
}

/* One epoch: callbacks, header, batches, validation, bar, history; *last
 * gets its logs. */
static int fit_epoch(fit_run *f, int64_t epoch, optim_logs *last)
{
    optim_logs logs;
    memset(&logs, 0, sizeof logs);
    int rc = OPTIM_OK;
    CALL_HOOK(f, rc, on_epoch_begin, epoch, &logs);
    if (rc) return rc;
    if (f->mode && f->o.epochs > 1) {
        fprintf(f->o.out, "Epoch %lld/%lld\n", (long long)epoch + 1, (long long)f->o.epochs);
        fflush(f->o.out);
    }
    optim__progbar bar;
    optim__progbar_init(&bar, f->o.out, f->mode, f->steps);
    fit_order(f, epoch);
    if ((rc = fit_batches(f, &bar)) || (rc = fit_epoch_logs(f, &logs))) return rc;
    CALL_HOOK(f, rc, on_epoch_end, epoch, &logs);
    if (rc) return rc;
    optim__progbar_update(&bar, f->seen, &logs, 1); /* "50/469" after a stop at step 50 */
    if (f->history && (rc = history_append(f->history, epoch, &logs, &f->e))) return rc;
    *last = logs;
    return OPTIM_OK;
}

/* Checks, builds (undone if fit fails before training), prepares, then
 * on_train_begin with the logs fit will produce. */
static int fit_begin(fit_run *f)
{
    optim_model *m = f->m;
    int rc = check_data(f->x, f->y, "x", "y", &f->d, &f->e);
    if (!rc && f->o.validation_x)
        rc = check_data(f->o.validation_x, f->o.validation_y, "validation_x", "validation_y", &f->v,
                        &f->e);
    if (rc) return rc;
    int fresh = !m->built;
    if ((rc = optim__model_build(m, f->x->rank, f->x->shape, &f->e))) return rc;
    rc = fit_prepare(f);
    optim_logs logs;
    memset(&logs, 0, sizeof logs);
    f->a = (accum){0, 0, 0, 0, m->metric};
    accum_logs(&f->a, "", &logs);
    if (f->o.validation_x) accum_logs(&f->a, "val_", &logs);
    m->stop_training = 0;
    if (!rc) CALL_HOOK(f, rc, on_train_begin, &logs);
    if (rc && fresh) optim__model_unbuild(m);
    return rc;
}

/* Rank 0 prints. Open MPI gives ranks a terminal even when mpirun's output
 * goes to a file, so replicas print one line per epoch unless told. */
static int print_mode(const optim_model *m, FILE *out, int verbose)
{
    if (m->replicas.rank) return 0;
    if (m->replicas.size && verbose == OPTIM_VERBOSE_AUTO) verbose = 2;
    return optim__progbar_mode(out, verbose);
}

int optim_model_fit(optim_model *m, const optim_tensor *x, const optim_tensor *y,
                    const optim_fit_options *opts, optim_history *history)
{
    if (!m) return OPTIM_EINVAL;
    m->errmsg[0] = '\0';
    if (history) memset(history, 0, sizeof *history);
    fit_run f;
    memset(&f, 0, sizeof f);
    f.m = m, f.x = x, f.y = y, f.history = history;
    f.o = opts ? *opts : optim_fit_defaults();
    int rc = check_fit_options(m, &f.o);
    if (rc) return rc;
    if ((rc = fit_begin(&f))) {
        fit_free(&f);
        return optim__model_fail(m, &f.e);
    }
    f.mode = print_mode(m, f.o.out, f.o.verbose);
    f.steps = (f.d.n + f.o.batch_size - 1) / f.o.batch_size;
    optim_logs last;
    memset(&last, 0, sizeof last);
    for (int64_t epoch = f.o.initial_epoch; epoch < f.o.epochs && !rc; epoch++) {
        rc = fit_epoch(&f, epoch, &last);
        if (m->stop_training) break; /* checked after the epoch, as Keras does */
    }
    if (!rc) CALL_HOOK(&f, rc, on_train_end, &last);
    fit_free(&f);
    optim_tape_reset(f.t);
    return rc ? optim__model_fail(m, &f.e) : OPTIM_OK;
}

/* Shared checks of evaluate: compiled, data, build, targets. */
int optim_model_evaluate(optim_model *m, const optim_tensor *x, const optim_tensor *y,
                         int64_t batch_size, FILE *out, optim_logs *logs)
{
    if (!m) return OPTIM_EINVAL;
    m->errmsg[0] = '\0';
    optim_error e;
    optim__err_clear(&e);
    if (!logs) return optim__model_err(m, OPTIM_EINVAL, "evaluate: logs is NULL");
    if (!m->compiled)
        return optim__model_err(m, OPTIM_ESTATE,
                                "evaluate: you must call compile() before evaluate");
    if (batch_size < 1)
        return optim__model_err(m, OPTIM_EINVAL,
                                "evaluate: batch_size = %lld, expected a positive integer",
                                (long long)batch_size);
    data d;
    int rc = check_data(x, y, "x", "y", &d, &e);
    if (rc) return optim__model_fail(m, &e);
    int fresh = !m->built;
    if ((rc = optim__model_build(m, x->rank, x->shape, &e))) return optim__model_fail(m, &e);
    if ((rc = check_targets(m, &d, "y", &e))) {
        if (fresh) optim__model_unbuild(m);
        return optim__model_fail(m, &e);
    }
    optim_logs res;
    rc = evaluate_run(m, &d, batch_size, out, print_mode(m, out, OPTIM_VERBOSE_AUTO), &res, &e);
    if (m->tape) optim_tape_reset(m->tape);
    if (rc) return optim__model_fail(m, &e);
    *logs = res;
    return OPTIM_OK;
}

int optim_model_predict(optim_model *m, const optim_tensor *x, int64_t batch_size, optim_tensor *y)
{
    if (!m) return OPTIM_EINVAL;
    m->errmsg[0] = '\0';
    optim_error e;
    optim__err_clear(&e);
    if (!y) return optim__model_err(m, OPTIM_EINVAL, "predict: y is NULL");
    if (batch_size < 1)
        return optim__model_err(m, OPTIM_EINVAL,
                                "predict: batch_size = %lld, expected a positive integer",
                                (long long)batch_size);
    data d;
    int rc = check_data(x, NULL, "x", NULL, &d, &e);
    if (rc) return optim__model_fail(m, &e);
    int fresh = !m->built;
    if ((rc = optim__model_build(m, x->rank, x->shape, &e))) return optim__model_fail(m, &e);
    int32_t pr;
    int64_t ps[OPTIM_MAX_RANK];
    optim_tape *t = NULL;
    if ((rc = optim__model_output_shape(m, x->rank, x->shape, &pr, ps, &e)) ||
        (rc = optim__model_tape(m, &t))) {
        if (rc && !e.msg[0]) optim__err(&e, rc, "%s", m->errmsg);
        if (fresh) optim__model_unbuild(m);
        return optim__model_fail(m, &e);
    }
    optim_tensor res = optim_tensor_make(m->dtype, NULL, pr, ps);
    int64_t total = optim_tensor_numel(&res);
    size_t es = optim_dtype_size(m->dtype);
    if (total < 0 || (uint64_t)total > SIZE_MAX / es ||
        !(res.data = malloc(total ? (size_t)total * es : 1))) {
        if (fresh) optim__model_unbuild(m);
        return optim__model_err(m, OPTIM_ENOMEM, "predict: out of memory for the outputs");
    }
    size_t row = (size_t)(total / d.n) * es;
    int64_t steps = (d.n + batch_size - 1) / batch_size;
    for (int64_t s = 0; s < steps && !rc; s++) {
        int64_t start = s * batch_size, bs = d.n - start < batch_size ? d.n - start : batch_size;
        optim_tensor xb = slice(x, start, bs, d.xrow);
        optim_node *pred;
        optim_tape_reset(t);
        if ((rc = optim__model_call(m, t, &xb, 0, 1, &pred, &e))) break;
        const optim_tensor *pv = optim_node_value(pred);
        if (optim_tensor_numel(pv) * (int64_t)es != (int64_t)(row * (size_t)bs)) {
            rc = optim__err(&e, OPTIM_ESHAPE, "predict: batch output has an unexpected size");
            break;
        }
        memcpy((char *)res.data + (size_t)start * row, pv->data, row * (size_t)bs);
    }
    optim_tape_reset(t);
    if (rc) {
        free(res.data);
        return optim__model_fail(m, &e);
    }
    *y = res;
    return OPTIM_OK;
}
