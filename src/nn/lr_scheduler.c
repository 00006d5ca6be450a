/* LearningRateScheduler (keras/src/callbacks/learning_rate_scheduler.py):
 * at each epoch's start, learning_rate = schedule(epoch, learning_rate);
 * at its end, logs["learning_rate"] = the optimizer's learning rate. */
#include "nn/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lrs {
    optim_epoch_schedule_fn fn;
    void *user;
    FILE *out;
} lrs;

static int lrs_optimizer(optim_model *m, optim_optimizer **opt, optim_error *err)
{
    *opt = optim_model_optimizer(m);
    if (!*opt)
        return optim__err(err, OPTIM_ESTATE,
                          "LearningRateScheduler: the model has no optimizer (compile it)");
    if (!optim_hyper_is_constant(*opt, "learning_rate"))
        return optim__err(
            err, OPTIM_ESTATE,
            "LearningRateScheduler: the optimizer's learning_rate is a schedule, variable or "
            "callable, hence not settable (as in Keras 3)");
    return OPTIM_OK;
}

/* Python's repr of a float: the shortest form that reads back the same. */
static void float_repr(double v, char *buf, size_t n)
{
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", n - strlen(buf) - 1);
}

static int lrs_train_begin(void *user, optim_model *m, optim_logs *logs, optim_error *err)
{
    optim_optimizer *opt;
    int rc = lrs_optimizer(m, &opt, err);
    if (rc) return rc;
    if (logs) optim_logs_set(logs, "learning_rate", NAN);
    return OPTIM_OK;
}

static int lrs_epoch_begin(void *user, optim_model *m, int64_t epoch, optim_logs *logs,
                           optim_error *err)
{
    lrs *s = user;
    optim_optimizer *opt;
    int rc = lrs_optimizer(m, &opt, err);
    if (rc) return rc;
    double lr;
    if ((rc = optim_get_hyper(opt, "learning_rate", &lr)))
        return optim__err(err, rc, "LearningRateScheduler: %s", optim_errmsg(opt));
    double next = s->fn(s->user, epoch, lr);
    if (!isfinite(next))
        return optim__err(
            err, OPTIM_EINVAL,
            "LearningRateScheduler: the output of the `schedule` function should be a "
            "finite float. Got: %g at epoch %lld",
            next, (long long)epoch);
    if ((rc = optim_set_hyper(opt, "learning_rate", next)))
        return optim__err(err, rc, "LearningRateScheduler: %s", optim_errmsg(opt));
    if (s->out) {
        char buf[40];
        float_repr(next, buf, sizeof buf);
        fprintf(s->out, "\nEpoch %lld: LearningRateScheduler setting learning rate to %s.\n",
                (long long)epoch + 1, buf);
        fflush(s->out);
    }
    return OPTIM_OK;
}

static int lrs_epoch_end(void *user, optim_model *m, int64_t epoch, optim_logs *logs,
                         optim_error *err)
{
    optim_optimizer *opt = optim_model_optimizer(m);
    double lr;
    if (opt && optim_get_hyper(opt, "learning_rate", &lr) == OPTIM_OK && logs)
        optim_logs_set(logs, "learning_rate", lr);
    return OPTIM_OK;
}

int optim_lr_scheduler_create(optim_callback **out, optim_epoch_schedule_fn fn, void *user,
                              FILE *verbose_out, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "LearningRateScheduler: out is NULL");
    *out = NULL;
    if (!fn)
        return optim__err(err, OPTIM_EINVAL,
                          "LearningRateScheduler: the schedule function is NULL");
    lrs *s = calloc(1, sizeof *s);
    if (!s) return optim__err(err, OPTIM_ENOMEM, "LearningRateScheduler: out of memory");
    s->fn = fn;
    s->user = user;
    s->out = verbose_out;
    optim_callback_hooks h;
    memset(&h, 0, sizeof h);
    h.size = sizeof h;
    h.on_train_begin = lrs_train_begin;
    h.on_epoch_begin = lrs_epoch_begin;
    h.on_epoch_end = lrs_epoch_end;
    h.destroy = free;
    int rc = optim_callback_create(out, &h, s, err);
    if (rc) {
        free(s);
        return rc;
    }
    (*out)->kind = OPTIM__CB_LR_SCHEDULER;
    return OPTIM_OK;
}
