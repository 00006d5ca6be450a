/* One run of the main job (tools/job.h): the model, the optimizer, fit
 * with the job's callbacks (history with timings, --steps, checkpoints,
 * EarlyStopping, LearningRateScheduler) and the test evaluation. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "job.h"
#include "steplog.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void optim_job_result_free(job_result *r)
{
    free(r->rows);
    memset(r, 0, sizeof *r);
}

static int add_layer(const char *cmd, optim_model *m, optim_layer *l)
{
    if (!optim_sequential_add(m, l)) return 0;
    optim_layer_destroy(l);
    return optim_tool_fail(cmd, "%s", optim_model_errmsg(m));
}

static int add_dense(const char *cmd, optim_model *m, int64_t units, optim_activation act)
{
    optim_error err;
    optim_layer *l;
    optim_dense_options o = optim_dense_defaults(units);
    o.activation = act;
    if (optim_dense_create(&l, &o, &err)) return optim_tool_fail(cmd, "%s", err.msg);
    return add_layer(cmd, m, l);
}

int optim_job_model(const char *cmd, const job_config *c, int64_t features, optim_optimizer *opt,
                    optim_model **out)
{
    optim_error err;
    optim_model *m;
    optim_sequential_options so = optim_sequential_defaults();
    so.seed = (uint64_t)c->seed;
    if (optim_sequential_create(&m, &so, &err)) return optim_tool_fail(cmd, "%s", err.msg);
    int rc = 0;
    for (size_t i = 0; i < c->hidden.n && !rc; i++) {
        rc = add_dense(cmd, m, c->hidden.v[i], OPTIM_ACT_RELU);
        optim_layer *l;
        if (!rc && c->dropout > 0)
            rc = optim_dropout_create(&l, c->dropout, OPTIM_SEED_AUTO, NULL, &err)
                ? optim_tool_fail(cmd, "%s", err.msg)
                : add_layer(cmd, m, l);
    }
    if (!rc) rc = add_dense(cmd, m, JOB_CLASSES, OPTIM_ACT_LINEAR);
    optim_loss loss = optim_loss_sparse_categorical_crossentropy(1);
    if (!rc &&
        (optim_model_build(m, 1, &features) ||
         optim_model_compile(m, opt, &loss, OPTIM_METRIC_ACCURACY)))
        rc = optim_tool_fail(cmd, "%s", optim_model_errmsg(m));
    if (!rc && c->threads > 0 && optim_set_num_threads(opt, (int)c->threads))
        rc = optim_tool_fail(cmd, "--threads: %s", optim_errmsg(opt));
    if (rc) optim_model_destroy(m);
    else *out = m;
    return rc;
}

/* ---- the job's callback ------------------------------------------------------------ */

typedef struct job_state {
    const job_run *r;
    job_result *res;
    double t_start, t_batch;
    double seconds_before; /* of the epochs done before this process */
    int stopped_by_steps;
} job_state;

static int on_train_begin(void *user, optim_model *m, optim_logs *logs, optim_error *err)
{
    (void)m, (void)logs, (void)err;
    job_state *s = user;
    s->t_start = now();
    return 0;
}

static int on_batch_begin(void *user, optim_model *m, int64_t batch, optim_logs *logs,
                          optim_error *err)
{
    (void)m, (void)batch, (void)logs, (void)err;
    ((job_state *)user)->t_batch = now();
    return 0;
}

static int on_batch_end(void *user, optim_model *m, int64_t batch, optim_logs *logs,
                        optim_error *err)
{
    (void)batch, (void)logs, (void)err;
    job_state *s = user;
    s->res->step_seconds += now() - s->t_batch; /* a sum until the run ends */
    s->res->steps++;
    if (s->r->c->steps && s->res->steps >= s->r->c->steps) {
        s->stopped_by_steps = 1;
        optim_model_stop_training(m);
    }
    return 0;
}

static double log_or_nan(const optim_logs *logs, const char *name)
{
    double v;
    return optim_logs_get(logs, name, &v) ? NAN : v;
}

static int on_epoch_end(void *user, optim_model *m, int64_t epoch, optim_logs *logs,
                        optim_error *err)
{
    job_state *s = user;
    job_result *res = s->res;
    job_row *rows = realloc(res->rows, (res->n + 1) * sizeof *rows);
    if (!rows) {
        snprintf(err->msg, sizeof err->msg, "out of memory for the history");
        return OPTIM_ENOMEM;
    }
    res->rows = rows;
    rows[res->n++] = (job_row){epoch + 1,
                               log_or_nan(logs, "loss"),
                               log_or_nan(logs, "accuracy"),
                               log_or_nan(logs, "val_loss"),
                               log_or_nan(logs, "val_accuracy"),
                               s->seconds_before + now() - s->t_start};
    /* An epoch cut short by --steps is not one to resume from. */
    if (!s->r->checkpoint_dir || s->stopped_by_steps) return 0;
    char *extra = optim_job_extra_json(s->r->c, res);
    if (!extra) {
        snprintf(err->msg, sizeof err->msg, "out of memory for the checkpoint");
        return OPTIM_ENOMEM;
    }
    int rc = optim_checkpoint_save(s->r->checkpoint_dir, m, s->r->opt, epoch + 1, extra, err);
    free(extra);
    if (rc) {
        char msg[OPTIM_ERRMSG_MAX];
        snprintf(msg, sizeof msg, "--checkpoint %.480s", err->msg);
        snprintf(err->msg, sizeof err->msg, "%s", msg);
    }
    return rc;
}

static double lr_decay(void *user, int64_t epoch, double lr)
{
    return epoch == 0 ? lr : lr * *(const double *)user;
}

/* The callbacks the options ask for: the job's own, then EarlyStopping,
 * LearningRateScheduler and the step log. Returns their count, -1 after a
 * message. */
static int make_callbacks(const char *cmd, const job_run *r, job_state *s, optim_callback **cbs)
{
    optim_error err;
    optim_callback_hooks h;
    memset(&h, 0, sizeof h);
    h.size = sizeof h;
    h.on_train_begin = on_train_begin, h.on_train_batch_begin = on_batch_begin;
    h.on_train_batch_end = on_batch_end, h.on_epoch_end = on_epoch_end;
    int n = 0;
    if (optim_callback_create(&cbs[n++], &h, s, &err))
        return optim_tool_fail(cmd, "%s", err.msg), -1;
    if (r->c->patience >= 0) {
        optim_early_stopping_options o = optim_early_stopping_defaults();
        o.monitor = r->c->monitor ? r->c->monitor : r->d->val.n ? "val_loss" : "loss";
        o.patience = r->c->patience, o.min_delta = r->c->min_delta, o.out = r->out;
        if (optim_early_stopping_create(&cbs[n++], &o, &err))
            return optim_tool_fail(cmd, "%s", err.msg), -1;
    }
    if (r->c->lr_decay > 0 &&
        optim_lr_scheduler_create(&cbs[n++], lr_decay, (void *)&r->c->lr_decay, r->out, &err))
        return optim_tool_fail(cmd, "%s", err.msg), -1;
    if (r->log && optim_step_log_callback(cmd, r->log, &cbs[n++])) return -1;
    return n;
}

static optim_tensor x_of(const job_split *s)
{
    return optim_tensor_make(OPTIM_F32, s->x, 2, (int64_t[]){s->n, s->features});
}
static optim_tensor y_of(const job_split *s)
{
    return optim_tensor_make(OPTIM_I32, s->y, 1, (int64_t[]){s->n});
}

/* fit from the epochs res already has up to c->epochs. */
static int fit(const char *cmd, const job_run *r, job_result *res)
{
    job_state s = {r, res, 0, 0, res->n ? res->rows[res->n - 1].seconds : 0, 0};
    optim_callback *cbs[4] = {NULL, NULL, NULL, NULL};
    int n = make_callbacks(cmd, r, &s, cbs), rc = n < 0;
    if (!rc) rc = optim_step_log_run(cmd, r->log, r->log_label, r->log_sub, res->steps);
    res->step_seconds *= (double)res->steps; /* back to a sum */
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = r->c->epochs, fo.initial_epoch = (int64_t)res->n, fo.batch_size = r->c->batch;
    fo.seed = (uint64_t)r->c->seed, fo.out = r->out, fo.verbose = r->verbose;
    fo.callbacks = cbs, fo.n_callbacks = n < 0 ? 0 : (size_t)n;
    optim_tensor x = x_of(&r->d->train), y = y_of(&r->d->train), vx = x_of(&r->d->val),
                 vy = y_of(&r->d->val);
    if (r->d->val.n) fo.validation_x = &vx, fo.validation_y = &vy;
    int stepped = !rc && r->c->steps && res->steps >= r->c->steps;
    if (!rc && stepped)
        fprintf(stderr,
                "optim %s: --resume: %lld steps done, --steps %lld asks for no more; "
                "evaluating only\n",
                cmd, (long long)res->steps, r->c->steps);
    else if (!rc && (int64_t)res->n >= r->c->epochs)
        fprintf(stderr,
                "optim %s: --resume: %zu epochs done, --epochs %lld asks for no more; "
                "evaluating only\n",
                cmd, res->n, r->c->epochs);
    if (!rc && !stepped && (int64_t)res->n < r->c->epochs &&
        optim_model_fit(r->m, &x, &y, &fo, NULL))
        rc = optim_tool_fail(cmd, "fit: %s", optim_model_errmsg(r->m));
    res->step_seconds = res->steps ? res->step_seconds / (double)res->steps : NAN;
    if (optim_step_log_end_run(cmd, r->log)) rc = 1;
    for (int i = 0; i < 4; i++) optim_callback_destroy(cbs[i]);
    return rc;
}

int optim_job_fit(const char *cmd, const job_run *r, job_result *res)
{
    if (fit(cmd, r, res)) return 1;
    /* Keras 3's fit ends with finalize_variable_values (use_ema). */
    optim_finalize_variable_values(r->opt);
    optim_tensor x = x_of(&r->d->test), y = y_of(&r->d->test);
    optim_logs logs;
    if (optim_model_evaluate(r->m, &x, &y, r->c->batch, r->verbose ? r->out : NULL, &logs))
        return optim_tool_fail(cmd, "evaluate: %s", optim_model_errmsg(r->m));
    res->test_loss = log_or_nan(&logs, "loss");
    res->test_accuracy = log_or_nan(&logs, "accuracy");
    return 0;
}

int optim_job_optimizer(const char *cmd, const char *what, const char *text, optim_optimizer **opt)
{
    optim_error err;
    char *json = NULL;
    size_t len = strlen(text);
    int is_name = len > 0;
    for (size_t i = 0; i < len; i++)
        is_name &= text[i] == '_' || (text[i] >= '0' && text[i] <= '9') ||
            (text[i] >= 'a' && text[i] <= 'z') || (text[i] >= 'A' && text[i] <= 'Z');
    if (is_name) {
        json = malloc(len + 3);
        if (!json) return optim_tool_fail(cmd, "out of memory");
        snprintf(json, len + 3, "\"%s\"", text);
    } else if (text[0] != '{' && text[0] != '"') {
        if (!(json = optim_tool_read_text(text, &err)))
            return optim_tool_fail(
                cmd,
                "%s '%s': expected a JSON config {\"class_name\": ..., \"config\": {...}}, "
                "a file holding one, or an optimizer name (%s)",
                what, text, err.msg);
    }
    int rc = optim_from_json(opt, json ? json : text, &err);
    free(json);
    return rc ? optim_tool_fail(cmd, "%s: %s", what, err.msg) : 0;
}
