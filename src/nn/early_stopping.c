/* EarlyStopping (keras/src/callbacks/early_stopping.py and
 * monitor_callback.py): stop when `monitor` has not improved by more than
 * min_delta for `patience` epochs; optionally restore the weights of the
 * best epoch when training ends. One difference from Keras: a monitor that
 * fit will not log (e.g. "val_loss" without validation data) is refused when
 * training begins, where Keras warns at every epoch. */
#include "nn/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct es {
    char monitor[OPTIM_LOGS_NAME_MAX];
    double min_delta; /* signed: negative when minimising */
    int64_t patience;
    optim_monitor_mode mode;
    double baseline;
    int restore_best_weights;
    int64_t start_from_epoch;
    FILE *out;
    int greater; /* resolved direction */
    int64_t wait, stopped_epoch, best_epoch;
    double best;
    int has_best;
    optim__weights best_weights;
    int has_weights;
} es;

static const char *const max_names[] = {"accuracy", "acc", "binary_accuracy",
                                        "sparse_categorical_accuracy", "categorical_accuracy"};

static int improvement(const es *s, double value, double ref)
{
    return s->greater ? value - s->min_delta > ref : value - s->min_delta < ref;
}

static int es_train_begin(void *user, optim_model *m, optim_logs *logs, optim_error *err)
{
    es *s = user;
    s->wait = s->stopped_epoch = s->best_epoch = 0;
    s->has_best = 0;
    s->best = NAN;
    optim__weights_free(&s->best_weights);
    s->has_weights = 0;
    s->min_delta = fabs(s->min_delta);
    if (s->mode == OPTIM_MODE_MIN) s->greater = 0;
    else if (s->mode == OPTIM_MODE_MAX) s->greater = 1;
    else {
        const char *metric = strncmp(s->monitor, "val_", 4) == 0 ? s->monitor + 4 : s->monitor;
        int known = 0;
        if (strcmp(metric, "loss") == 0) s->greater = 0, known = 1;
        for (size_t i = 0; i < sizeof max_names / sizeof *max_names; i++)
            if (strcmp(metric, max_names[i]) == 0) s->greater = 1, known = 1;
        if (!known)
            return optim__err(err, OPTIM_EINVAL,
                              "EarlyStopping callback received monitor=%s, but optim isn't able to "
                              "automatically determine whether that metric should be maximized or "
                              "minimized. Pass mode OPTIM_MODE_MAX or OPTIM_MODE_MIN",
                              s->monitor);
    }
    if (!s->greater) s->min_delta = -s->min_delta;
    if (logs && optim_logs_get(logs, s->monitor, NULL) != OPTIM_OK) {
        char avail[OPTIM_LOGS_MAX * (OPTIM_LOGS_NAME_MAX + 2)] = "";
        for (size_t i = 0; i < logs->n; i++) {
            if (i) strcat(avail, ", ");
            strcat(avail, logs->names[i]);
        }
        return optim__err(err, OPTIM_EINVAL,
                          "EarlyStopping: monitor '%s' is not among the metrics fit logs (%s)%s",
                          s->monitor, avail,
                          strncmp(s->monitor, "val_", 4) == 0 ? "; give fit validation data" : "");
    }
    return OPTIM_OK;
}

static int es_epoch_end(void *user, optim_model *m, int64_t epoch, optim_logs *logs,
                        optim_error *err)
{
    es *s = user;
    double current;
    if (optim_logs_get(logs, s->monitor, &current) != OPTIM_OK || epoch < s->start_from_epoch)
        return OPTIM_OK;
    if (s->restore_best_weights && !s->has_weights) {
        if (optim__model_get_weights(m, &s->best_weights))
            return optim__err(err, OPTIM_ENOMEM,
                              "EarlyStopping: out of memory for the best weights");
        s->has_weights = 1;
        s->best_epoch = epoch;
    }
    s->wait++;
    if (!s->has_best || improvement(s, current, s->best)) {
        s->best = current;
        s->has_best = 1;
        s->best_epoch = epoch;
        if (s->restore_best_weights) {
            optim__weights w;
            if (optim__model_get_weights(m, &w))
                return optim__err(err, OPTIM_ENOMEM,
                                  "EarlyStopping: out of memory for the best weights");
            optim__weights_free(&s->best_weights);
            s->best_weights = w;
        }
        if (isnan(s->baseline) || improvement(s, current, s->baseline)) s->wait = 0;
        return OPTIM_OK;
    }
    if (s->wait >= s->patience && epoch > 0) {
        s->stopped_epoch = epoch;
        optim_model_stop_training(m);
    }
    return OPTIM_OK;
}

static int es_train_end(void *user, optim_model *m, optim_logs *logs, optim_error *err)
{
    es *s = user;
    if (s->stopped_epoch > 0 && s->out)
        fprintf(s->out, "Epoch %lld: early stopping\n", (long long)s->stopped_epoch + 1);
    if (s->restore_best_weights && s->has_weights) {
        if (s->out)
            fprintf(s->out, "Restoring model weights from the end of the best epoch: %lld.\n",
                    (long long)s->best_epoch + 1);
        optim__model_set_weights(m, &s->best_weights);
    }
    if (s->out) fflush(s->out);
    return OPTIM_OK;
}

static void es_destroy(void *user)
{
    es *s = user;
    optim__weights_free(&s->best_weights);
    free(s);
}

optim_early_stopping_options optim_early_stopping_defaults(void)
{
    optim_early_stopping_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.monitor = "val_loss";
    o.mode = OPTIM_MODE_AUTO;
    o.baseline = NAN;
    return o;
}

int optim_early_stopping_create(optim_callback **out, const optim_early_stopping_options *o,
                                optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "EarlyStopping: out is NULL");
    *out = NULL;
    if (!o)
        return optim__err(err, OPTIM_EINVAL,
                          "EarlyStopping: options are NULL (use optim_early_stopping_defaults)");
    if (o->size != sizeof *o)
        return optim__err(err, OPTIM_EVERSION, "EarlyStopping: options size %u, expected %zu",
                          (unsigned)o->size, sizeof *o);
    if (!o->monitor || !*o->monitor || strlen(o->monitor) >= OPTIM_LOGS_NAME_MAX)
        return optim__err(err, OPTIM_EINVAL,
                          "EarlyStopping: monitor must be a metric name of 1 to %d characters",
                          OPTIM_LOGS_NAME_MAX - 1);
    if (!isfinite(o->min_delta))
        return optim__err(err, OPTIM_EINVAL,
                          "EarlyStopping: min_delta = %g, expected a finite number", o->min_delta);
    if (o->patience < 0)
        return optim__err(err, OPTIM_EINVAL, "EarlyStopping: patience = %lld, expected >= 0",
                          (long long)o->patience);
    if (o->mode != OPTIM_MODE_AUTO && o->mode != OPTIM_MODE_MIN && o->mode != OPTIM_MODE_MAX)
        return optim__err(err, OPTIM_EINVAL, "EarlyStopping: mode = %d, expected AUTO, MIN or MAX",
                          (int)o->mode);
    if (isinf(o->baseline))
        return optim__err(err, OPTIM_EINVAL,
                          "EarlyStopping: baseline = %g, expected a finite number or NAN (none)",
                          o->baseline);
    if (o->restore_best_weights != 0 && o->restore_best_weights != 1)
        return optim__err(err, OPTIM_EINVAL,
                          "EarlyStopping: restore_best_weights = %d, expected 0 or 1",
                          o->restore_best_weights);
    if (o->start_from_epoch < 0)
        return optim__err(err, OPTIM_EINVAL,
                          "EarlyStopping: start_from_epoch = %lld, expected >= 0",
                          (long long)o->start_from_epoch);
    es *s = calloc(1, sizeof *s);
    if (!s) return optim__err(err, OPTIM_ENOMEM, "EarlyStopping: out of memory");
    snprintf(s->monitor, sizeof s->monitor, "%s", o->monitor);
    s->min_delta = fabs(o->min_delta);
    s->patience = o->patience;
    s->mode = o->mode;
    s->baseline = o->baseline;
    s->restore_best_weights = o->restore_best_weights;
    s->start_from_epoch = o->start_from_epoch;
    s->out = o->out;
    s->best = NAN;
    optim_callback_hooks h;
    memset(&h, 0, sizeof h);
    h.size = sizeof h;
    h.on_train_begin = es_train_begin;
    h.on_epoch_end = es_epoch_end;
    h.on_train_end = es_train_end;
    h.destroy = es_destroy;
    int rc = optim_callback_create(out, &h, s, err);
    if (rc) {
        free(s);
        return rc;
    }
    (*out)->kind = OPTIM__CB_EARLY_STOPPING;
    return OPTIM_OK;
}

int64_t optim_early_stopping_stopped_epoch(const optim_callback *cb)
{
    if (!cb || cb->kind != OPTIM__CB_EARLY_STOPPING) return -1;
    return ((const es *)cb->user)->stopped_epoch;
}

double optim_early_stopping_best(const optim_callback *cb, int64_t *best_epoch)
{
    if (!cb || cb->kind != OPTIM__CB_EARLY_STOPPING) return NAN;
    const es *s = cb->user;
    if (best_epoch) *best_epoch = s->best_epoch;
    return s->has_best ? s->best : NAN;
}
