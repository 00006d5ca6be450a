/* --log FILE.jsonl and --tensorboard DIR (steplog.h): a callback that sees
 * each training batch's loss and gradients before the optimizer step
 * (on_train_batch_gradients), keeps a copy of the trainable weights, and
 * after the step writes one JSON line (flushed) and the step's scalars.
 * Without either option no callback exists and training does no extra
 * work. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "options.h"
#include "steplog.h"
#include "tfevents.h"

struct step_log {
    FILE *json; /* NULL: no --log */
    char json_path[4096], tb_dir[4096]; /* tb_dir "": no --tensorboard */
    tfevents tb;
    char label[128];
    int64_t step, epoch; /* epoch: 1-based, as the epoch line */
    double t0, loss, lr, grad_norm, w_norm;
    const optim_grad_var *pairs; /* of the step under way */
    size_t n_pairs;
    double *before; /* the weights before the step, as doubles */
    size_t cap;
    int failed; /* a write failed and fit said so: closing says no more */
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- norms -------------------------------------------------------------------------- */

#define CHUNK 1024

/* Sum of squares of n elements of a float dtype, and of their differences
 * from ref when ref is not NULL. -1 for a dtype that is not a float. */
static double sum_sq(const void *data, optim_dtype dt, int64_t n, const double *ref)
{
    double buf[CHUNK], s = 0;
    if (dt == OPTIM_F32) { /* the usual case, without the copies */
        const float *x = data;
        for (int64_t i = 0; i < n; i++) {
            double d = ref ? (double)x[i] - ref[i] : (double)x[i];
            s += d * d;
        }
        return s;
    }
    size_t es = optim_dtype_size(dt);
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t k = n - i < CHUNK ? n - i : CHUNK;
        if (optim_convert(buf, OPTIM_F64, (const char *)data + (size_t)i * es, dt, k)) return -1;
        for (int64_t j = 0; j < k; j++) {
            double d = ref ? buf[j] - ref[i + j] : buf[j];
            s += d * d;
        }
    }
    return s;
}

static double grad_sum_sq(const optim_grad *g)
{
    if (g->kind == OPTIM_GRAD_DENSE)
        return sum_sq(g->dense.data, g->dense.dtype, optim_tensor_numel(&g->dense), NULL);
    if (g->kind == OPTIM_GRAD_SPARSE) /* the rows as given, as Keras's global_norm */
        return sum_sq(g->sparse.values.data, g->sparse.values.dtype,
                      optim_tensor_numel(&g->sparse.values), NULL);
    return 0;
}

/* Copies the weights into s->before (as doubles); their norm into w_norm. */
static int snapshot(step_log *s, optim_error *err)
{
    size_t total = 0;
    for (size_t i = 0; i < s->n_pairs; i++) total += (size_t)optim_var_numel(s->pairs[i].var);
    if (total > s->cap) {
        double *b = realloc(s->before, total * sizeof *b);
        if (!b) {
            snprintf(err->msg, sizeof err->msg, "--log: out of memory for a copy of the weights");
            return OPTIM_ENOMEM;
        }
        s->before = b, s->cap = total;
    }
    double w2 = 0;
    size_t at = 0;
    for (size_t i = 0; i < s->n_pairs; i++) {
        optim_var *v = s->pairs[i].var;
        int64_t n = optim_var_numel(v);
        if (optim_var_dtype(v) == OPTIM_F32) {
            const float *x = optim_var_cdata(v);
            for (int64_t j = 0; j < n; j++) s->before[at + (size_t)j] = x[j];
        } else if (optim_convert(s->before + at, OPTIM_F64, optim_var_cdata(v), optim_var_dtype(v),
                                 n))
            memset(s->before + at, 0, (size_t)n * sizeof *s->before); /* not a float: no norm */
        for (int64_t j = 0; j < n; j++) w2 += s->before[at + (size_t)j] * s->before[at + (size_t)j];
        at += (size_t)n;
    }
    s->w_norm = sqrt(w2);
    return OPTIM_OK;
}

/* ||w_after - w_before|| / ||w_before|| (NaN when w_before is 0). */
static double update_ratio(const step_log *s)
{
    double d2 = 0;
    size_t at = 0;
    for (size_t i = 0; i < s->n_pairs; i++) {
        const optim_var *v = s->pairs[i].var;
        int64_t n = optim_var_numel(v);
        double d = sum_sq(optim_var_cdata(v), optim_var_dtype(v), n, s->before + at);
        if (d > 0) d2 += d;
        at += (size_t)n;
    }
    return s->w_norm > 0 ? sqrt(d2) / s->w_norm : NAN;
}

/* ---- the callback ------------------------------------------------------------------- */

static int on_train_begin(void *user, optim_model *m, optim_logs *logs, optim_error *err)
{
    (void)m, (void)logs, (void)err;
    ((step_log *)user)->t0 = now();
    return 0;
}

static int on_epoch_begin(void *user, optim_model *m, int64_t epoch, optim_logs *logs,
                          optim_error *err)
{
    (void)m, (void)logs, (void)err;
    ((step_log *)user)->epoch = epoch + 1;
    return 0;
}

/* The learning rate the next step uses: a wrapper's is its inner
 * optimizer's (as Keras's wrappers delegate learning_rate); NaN for one with
 * several (a MultiOptimizer) or none. */
static double learning_rate(optim_optimizer *opt)
{
    optim_optimizer *inner;
    while ((inner = optim_wrapper_inner(opt))) {
        if (optim_wrapper_inner_at(opt, 1)) return NAN;
        opt = inner;
    }
    double lr;
    return optim_get_hyper(opt, "learning_rate", &lr) ? NAN : lr;
}

static int on_gradients(void *user, optim_model *m, int64_t batch, double loss,
                        const optim_grad_var *grads, size_t n, optim_error *err)
{
    (void)batch;
    step_log *s = user;
    s->loss = loss, s->pairs = grads, s->n_pairs = n;
    s->lr = learning_rate(optim_model_optimizer(m));
    double g2 = 0;
    for (size_t i = 0; i < n; i++) {
        double v = grad_sum_sq(&grads[i].grad);
        g2 += v > 0 ? v : 0;
    }
    s->grad_norm = sqrt(g2);
    return snapshot(s, err);
}

/* A JSON number, or null for NaN and infinities (JSON has neither). */
static int put_num(FILE *f, const char *key, double v)
{
    return isfinite(v) ? fprintf(f, ",\"%s\":%.9g", key, v) : fprintf(f, ",\"%s\":null", key);
}

static int json_line(step_log *s, int64_t batch, double ratio, double secs)
{
    FILE *f = s->json;
    int bad = fputs("{\"optimizer\":\"", f) < 0;
    for (const char *c = s->label; *c && !bad; c++) /* labels are file names: escape */
        bad = (*c == '"' || *c == '\\'        ? fprintf(f, "\\%c", *c)
                   : (unsigned char)*c < 0x20 ? fprintf(f, "\\u%04x", *c)
                                              : fputc(*c, f)) < 0;
    bad = bad ||
        fprintf(f, "\",\"step\":%lld,\"epoch\":%lld,\"batch\":%lld", (long long)s->step,
                (long long)s->epoch, (long long)batch + 1) < 0;
    bad = bad || put_num(f, "loss", s->loss) < 0 || put_num(f, "learning_rate", s->lr) < 0 ||
        put_num(f, "grad_norm", s->grad_norm) < 0 || put_num(f, "update_ratio", ratio) < 0 ||
        fprintf(f, ",\"seconds\":%.6f}\n", secs) < 0;
    return bad || fflush(f) != 0 || ferror(f) ? -1 : 0;
}

static int on_batch_end(void *user, optim_model *m, int64_t batch, optim_logs *logs,
                        optim_error *err)
{
    (void)m, (void)logs;
    step_log *s = user;
    double ratio = update_ratio(s), secs = now() - s->t0;
    s->step++;
    if (s->json && json_line(s, batch, ratio, secs)) {
        snprintf(err->msg, sizeof err->msg, "--log %.400s: write error: %s", s->json_path,
                 strerror(errno));
        s->failed = 1;
        return OPTIM_EIO;
    }
    if (!s->tb.f) return 0;
    const char *tags[4] = {"loss", "learning_rate", "grad_norm", "update_ratio"};
    const double vals[4] = {s->loss, s->lr, s->grad_norm, ratio};
    int bad = 0;
    for (int i = 0; i < 4 && !bad; i++)
        bad = optim_tool_tfevents_scalar(&s->tb, s->step, tags[i], vals[i], err->msg,
                                         sizeof err->msg);
    if (bad || optim_tool_tfevents_flush(&s->tb, err->msg, sizeof err->msg)) s->failed = 1;
    return s->failed ? OPTIM_EIO : 0;
}

/* The epoch's logs as epoch_<name> scalars at step = the epoch (1-based). */
static int on_epoch_end(void *user, optim_model *m, int64_t epoch, optim_logs *logs,
                        optim_error *err)
{
    (void)m;
    step_log *s = user;
    if (!s->tb.f) return 0;
    int bad = 0;
    for (size_t i = 0; i < logs->n && !bad; i++) {
        char tag[OPTIM_LOGS_NAME_MAX + 8];
        snprintf(tag, sizeof tag, "epoch_%s", logs->names[i]);
        bad = optim_tool_tfevents_scalar(&s->tb, epoch + 1, tag, logs->values[i], err->msg,
                                         sizeof err->msg);
    }
    if (bad || optim_tool_tfevents_flush(&s->tb, err->msg, sizeof err->msg)) s->failed = 1;
    return s->failed ? OPTIM_EIO : 0;
}

int optim_step_log_callback(const char *cmd, step_log *s, optim_callback **out)
{
    *out = NULL;
    if (!s) return 0;
    optim_callback_hooks h;
    memset(&h, 0, sizeof h);
    h.size = sizeof h;
    h.on_train_begin = on_train_begin, h.on_epoch_begin = on_epoch_begin;
    h.on_train_batch_gradients = on_gradients, h.on_train_batch_end = on_batch_end;
    h.on_epoch_end = on_epoch_end;
    optim_error err;
    return optim_callback_create(out, &h, s, &err) ? optim_tool_fail(cmd, "%s", err.msg) : 0;
}

/* ---- files -------------------------------------------------------------------------- */

int optim_step_log_open(const char *cmd, const char *jsonl, const char *mode, const char *tb_dir,
                        step_log **out)
{
    *out = NULL;
    if (!jsonl && !tb_dir) return 0;
    if (optim_tool_check_output(cmd, "--log", jsonl)) return 1;
    if (tb_dir && (!tb_dir[0] || strlen(tb_dir) >= 4000))
        return optim_tool_fail(cmd, "--tensorboard '%s': expected a directory path", tb_dir);
    step_log *s = calloc(1, sizeof *s);
    if (!s) return optim_tool_fail(cmd, "out of memory");
    if (tb_dir) snprintf(s->tb_dir, sizeof s->tb_dir, "%s", tb_dir);
    if (jsonl) {
        snprintf(s->json_path, sizeof s->json_path, "%s", jsonl);
        if (!(s->json = fopen(jsonl, mode))) {
            optim_tool_fail(cmd, "--log %s: %s", jsonl, strerror(errno));
            free(s);
            return 1;
        }
    }
    *out = s;
    return 0;
}

int optim_step_log_run(const char *cmd, step_log *s, const char *label, const char *sub,
                       int64_t first_step)
{
    if (!s) return 0;
    snprintf(s->label, sizeof s->label, "%s", label);
    s->step = first_step, s->epoch = 0;
    if (!s->tb_dir[0]) return 0;
    char dir[4096 + 130], msg[OPTIM_ERRMSG_MAX];
    if (sub) {
        snprintf(dir, sizeof dir, "%s/%s", s->tb_dir, sub);
        for (char *c = dir + strlen(s->tb_dir) + 1; *c; c++)
            if (*c == '/') *c = '_'; /* one directory per run */
    } else {
        snprintf(dir, sizeof dir, "%s", s->tb_dir);
    }
    return optim_tool_tfevents_open(&s->tb, dir, msg, sizeof msg) ? optim_tool_fail(cmd, "%s", msg)
                                                                  : 0;
}

int optim_step_log_end_run(const char *cmd, step_log *s)
{
    char msg[OPTIM_ERRMSG_MAX];
    if (s && optim_tool_tfevents_close(&s->tb, msg, sizeof msg) && !s->failed)
        return optim_tool_fail(cmd, "%s", msg);
    return 0;
}

int optim_step_log_close(const char *cmd, step_log *s)
{
    if (!s) return 0;
    int rc = optim_step_log_end_run(cmd, s);
    if (s->json) {
        int bad = ferror(s->json);
        bad |= fclose(s->json) != 0;
        if (bad && !rc && !s->failed)
            rc = optim_tool_fail(cmd, "--log %s: write error: %s", s->json_path, strerror(errno));
    }
    free(s->before);
    free(s);
    return rc;
}
