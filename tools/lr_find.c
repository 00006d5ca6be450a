/* optim lr-find [OPTIONS] (docs/command.md, docs/training.md).
 *
 * The learning-rate range test (Smith 2017, section 3.3; fastai's
 * lr_find): the model and data of `optim train`, trained for --steps
 * batches while the optimizer's learning rate grows exponentially from
 * --start-lr to --end-lr; the loss is smoothed (tools/lr_find.h) and the
 * sweep stops once it diverges. Prints a line per step (a bar on a
 * terminal), then `suggested learning_rate=<steepest> (steepest)
 * minimum/10=<rate>`; --plot draws the curve. Nothing is saved: the run is
 * thrown away. Bad input: one line on stderr, exit status 1. */
#define _POSIX_C_SOURCE 200809L /* fileno */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "job.h"
#include "lr_find.h"
#include "plot.h"

#define CMD "lr-find"

typedef struct lrf_args {
    job_config c;
    const char *optimizer, *plot;
    double start, end;
} lrf_args;

/* The sweep as it runs: the rate the optimizer reads, what was recorded. */
typedef struct lrf_run {
    const lrf_args *a;
    int64_t n_train;
    double lr; /* learning_rate of the current step (the optimizer's callable) */
    double epoch_total, epoch_count; /* fit's running mean of the epoch, as a sum */
    double *lrs, *losses, *smoothed;
    size_t n;
    lrf_smoother sm;
    int diverged, tty;
} lrf_run;

/* Options of the job that a sweep has no use for. */
static int unused_option(const char *name)
{
    static const char *const names[] = {"--epochs",  "--validation-split", "--early-stopping",
                                        "--monitor", "--min-delta",        "--lr-decay"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0) return 1;
    return 0;
}

#define N_OWN 4
static size_t options(lrf_args *a, tool_option *t)
{
    tool_option job[JOB_N_OPTIONS];
    size_t n = 0, nj = optim_job_options(&a->c, job);
    for (size_t i = 0; i < nj; i++) {
        if (unused_option(job[i].name)) continue;
        t[n] = job[i];
        if (strcmp(job[i].name, "--steps") == 0)
            t[n].lo = 2, t[n].hi = 1e6, t[n].help = "steps of the sweep (default 100)";
        n++;
    }
    const tool_option own[N_OWN] = {
        {"--optimizer", "JSON", TOOL_TEXT, &a->optimizer, 0, 0,
         "a Keras optimizer config, a file holding one, or a name such as adam\n(default Adam); "
         "its learning_rate (the innermost optimizer's, for a\nwrapper) is replaced by the sweep's",
         0},
        {"--start-lr", "LR", TOOL_REAL, &a->start, 1e-300, 1e300,
         "learning rate of the first step (default 1e-7)", 0},
        {"--end-lr", "LR", TOOL_REAL, &a->end, 1e-300, 1e300,
         "learning rate the sweep grows towards (default 10)", 0},
        {"--plot", "PNG", TOOL_TEXT, &a->plot, 0, 0,
         "draw the smoothed loss against the learning rate (log axis), with the\nsuggestions marked",
         0},
    };
    memcpy(t + n, own, sizeof own);
    return n + N_OWN;
}

static void usage(const tool_option *t, size_t n)
{
    printf("usage: optim lr-find [OPTIONS]\n"
           "\n"
           "The learning-rate range test (Smith 2017; fastai's lr_find): trains optim train's\n"
           "model for --steps batches while the learning rate grows exponentially from\n"
           "--start-lr to --end-lr, smooths the loss (EMA, beta 0.98, bias-corrected) and stops\n"
           "once it exceeds 4x its best. Prints one line per step (a bar on a terminal), then\n"
           "  suggested learning_rate=<rate> (steepest) minimum/10=<rate>\n"
           "steepest: the rate where the smoothed loss falls fastest against log(rate);\n"
           "minimum/10: a tenth of the rate at its lowest. Nothing is saved.\n\n");
    optim_tool_usage(stdout, t, n);
}

/* ---- the sweep ---------------------------------------------------------------------- */

static double current_lr(void *user) { return ((const lrf_run *)user)->lr; }

/* The optimizer whose learning rate the sweep drives: the innermost one,
 * through the wrappers (whose own learning_rate is unused). */
static int drive_learning_rate(optim_optimizer *opt, lrf_run *r)
{
    optim_optimizer *t = opt, *in;
    while ((in = optim_wrapper_inner_at(t, 0))) {
        if (optim_wrapper_inner_at(t, 1))
            return optim_tool_fail(
                CMD,
                "--optimizer: %s holds several optimizers, each with its own learning rate; "
                "lr-find sweeps one (give the one to sweep as --optimizer)",
                optim_class_of(t)->name);
        t = in;
    }
    if (optim_set_hyper_fn(t, "learning_rate", current_lr, r))
        return optim_tool_fail(CMD, "--optimizer: %s cannot take a learning rate to sweep: %s",
                               optim_class_of(t)->name, optim_errmsg(t));
    return 0;
}

static int on_batch_begin(void *user, optim_model *m, int64_t batch, optim_logs *logs,
                          optim_error *err)
{
    (void)m, (void)logs, (void)err;
    lrf_run *r = user;
    r->lr = optim_lrf_rate(r->a->start, r->a->end, (int64_t)r->n, r->a->c.steps);
    if (batch == 0) r->epoch_total = 0, r->epoch_count = 0;
    return 0;
}

static void show_step(const lrf_run *r)
{
    size_t i = r->n - 1;
    long long steps = r->a->c.steps;
    if (!r->tty) {
        printf("step %zu/%lld learning_rate=%.4e loss=%.6f smoothed_loss=%.6f\n", i + 1, steps,
               r->lrs[i], r->losses[i], r->smoothed[i]);
        return;
    }
    char bar[31];
    size_t done = (size_t)((double)(i + 1) * 30.0 / (double)steps);
    for (size_t k = 0; k < 30; k++) bar[k] = k < done ? '=' : '.';
    bar[30] = '\0';
    printf("\r%zu/%lld [%s] learning_rate=%.3e smoothed_loss=%.4f ", i + 1, steps, bar, r->lrs[i],
           r->smoothed[i]);
    fflush(stdout);
}

/* fit's logs hold the epoch's running mean of the loss, weighted by batch
 * size; the batch's own loss is the change of the weighted sum. */
static int on_batch_end(void *user, optim_model *m, int64_t batch, optim_logs *logs,
                        optim_error *err)
{
    lrf_run *r = user;
    double mean;
    if (optim_logs_get(logs, "loss", &mean)) {
        snprintf(err->msg, sizeof err->msg, "lr-find: fit logged no loss");
        return OPTIM_EINVAL;
    }
    int64_t left = r->n_train - batch * r->a->c.batch;
    double bs = (double)(left < r->a->c.batch ? left : r->a->c.batch);
    r->epoch_count += bs;
    double total = mean * r->epoch_count;
    size_t i = r->n++;
    r->lrs[i] = r->lr;
    r->losses[i] = (total - r->epoch_total) / bs;
    r->epoch_total = total;
    r->diverged = optim_lrf_add(&r->sm, r->losses[i], &r->smoothed[i]);
    show_step(r);
    if (r->diverged || (long long)r->n >= r->a->c.steps) optim_model_stop_training(m);
    return 0;
}

static int sweep(lrf_run *r, const job_data *d, optim_model *m)
{
    optim_error err;
    optim_callback_hooks h;
    memset(&h, 0, sizeof h);
    h.size = sizeof h;
    h.on_train_batch_begin = on_batch_begin, h.on_train_batch_end = on_batch_end;
    optim_callback *cb;
    if (optim_callback_create(&cb, &h, r, &err)) return optim_tool_fail(CMD, "%s", err.msg);
    const job_config *c = &r->a->c;
    int64_t per_epoch = (d->train.n + c->batch - 1) / c->batch;
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = (c->steps + per_epoch - 1) / per_epoch, fo.batch_size = c->batch;
    fo.seed = (uint64_t)c->seed, fo.callbacks = &cb, fo.n_callbacks = 1, fo.verbose = 0;
    optim_tensor x = optim_tensor_make(OPTIM_F32, d->train.x, 2,
                                       (int64_t[]){d->train.n, d->train.features}),
                 y = optim_tensor_make(OPTIM_I32, d->train.y, 1, (int64_t[]){d->train.n});
    int rc = optim_model_fit(m, &x, &y, &fo, NULL);
    optim_callback_destroy(cb);
    if (r->tty && r->n) printf("\n");
    return rc ? optim_tool_fail(CMD, "fit: %s", optim_model_errmsg(m)) : 0;
}

/* ---- results ------------------------------------------------------------------------ */

/* Points drawn: fastai's plot leaves out the last 5 (the divergence). */
static size_t plotted(const lrf_run *r) { return r->n > 10 ? r->n - 5 : r->n; }

static int plot(const lrf_run *r, const lrf_suggestion *s, const char *title)
{
    size_t n = plotted(r);
    double *x = malloc((n + 1) * sizeof *x), lo = INFINITY, hi = -INFINITY;
    if (!x) return optim_tool_fail(CMD, "--plot: out of memory");
    for (size_t i = 0; i < n; i++) {
        x[i] = log10(r->lrs[i]);
        if (isfinite(r->smoothed[i])) lo = fmin(lo, r->smoothed[i]), hi = fmax(hi, r->smoothed[i]);
    }
    double sx = log10(s->steep_lr), mx = log10(s->min_lr / 10), vx[2][2] = {{sx, sx}, {mx, mx}},
           vy[2] = {lo, hi}, dx[2] = {sx, log10(s->min_lr)},
           dy[2] = {r->smoothed[s->steep], r->smoothed[s->min]};
    plot_series ser[5] = {{x, r->smoothed, n, 0, 0, 0},
                          {vx[0], vy, 2, 1, 1, 0},
                          {vx[1], vy, 2, 2, 1, 0},
                          {dx, dy, 1, 1, 0, 1},
                          {dx + 1, dy + 1, 1, 2, 0, 1}};
    plot_panel p = {NULL, "learning rate", "smoothed loss", ser, 5, 0, 0, 0, 0, 0, 1};
    char ks[2][64], msg[512];
    snprintf(ks[0], sizeof ks[0], "steepest %.1e", s->steep_lr);
    snprintf(ks[1], sizeof ks[1], "minimum/10 %.1e (minimum at %.1e)", s->min_lr / 10, s->min_lr);
    plot_key keys[3] = {{"smoothed loss", 0, 0}, {ks[0], 1, 1}, {ks[1], 2, 1}};
    plot_figure fig = {800, 500, title, &p, 1, keys, 3};
    int rc = optim_plot_autoscale(&p, 0)
        ? optim_tool_fail(CMD, "--plot %s: no finite loss to draw", r->a->plot)
        : optim_plot_write_png(&fig, r->a->plot, msg, sizeof msg)
        ? optim_tool_fail(CMD, "--plot %s", msg)
        : 0;
    free(x);
    return rc;
}

static int report(const lrf_run *r, const char *label)
{
    if (r->diverged && r->n)
        printf("stopped at step %zu of %lld: smoothed loss %.6g %s\n", r->n, r->a->c.steps,
               r->smoothed[r->n - 1],
               isfinite(r->smoothed[r->n - 1]) ? "exceeds 4x its best (diverging)"
                                               : "is not finite");
    lrf_suggestion s;
    if (optim_lrf_suggest(r->lrs, r->smoothed, r->n, r->a->c.steps, &s))
        return optim_tool_fail(
            CMD,
            "no suggestion: fewer than 2 finite losses were recorded (%zu steps ran); "
            "lower --start-lr or raise --steps",
            r->n);
    printf("suggested learning_rate=%.1e (steepest) minimum/10=%.1e\n", s.steep_lr, s.min_lr / 10);
    if (r->a->plot && plot(r, &s, label)) return 1;
    return optim_tool_finish_stdout(CMD, 0);
}

static int run(const lrf_args *a)
{
    job_data d;
    if (optim_job_load(CMD, &a->c, &d)) return 1;
    lrf_run r = {a,        d.train.n,
                 a->start, 0,
                 0,        NULL,
                 NULL,     NULL,
                 0,        optim_lrf_smoother(LRF_BETA),
                 0,        isatty(fileno(stdout))};
    size_t cap = (size_t)a->c.steps;
    r.lrs = malloc(cap * sizeof(double)), r.losses = malloc(cap * sizeof(double));
    r.smoothed = malloc(cap * sizeof(double));
    optim_optimizer *opt = NULL;
    optim_model *m = NULL;
    int rc = !r.lrs || !r.losses || !r.smoothed ? optim_tool_fail(CMD, "out of memory") : 0;
    if (!rc)
        rc = optim_job_optimizer(CMD, "--optimizer", a->optimizer ? a->optimizer : "adam", &opt);
    char *cfg = rc ? NULL : optim_serialize(opt);
    if (!rc) rc = drive_learning_rate(opt, &r);
    if (!rc) rc = optim_job_model(CMD, &a->c, d.train.features, opt, &m);
    if (!rc) {
        printf("lr-find: %lld training examples of %lld features, batch size %lld; optimizer %s; "
               "learning_rate from %g to %g over %lld steps\n",
               (long long)d.train.n, (long long)d.train.features, a->c.batch, cfg ? cfg : "?",
               a->start, a->end, a->c.steps);
        rc = sweep(&r, &d, m);
    }
    optim_free(cfg);
    char title[160];
    if (!rc)
        snprintf(title, sizeof title, "learning-rate range test: %s", optim_class_of(opt)->name);
    if (!rc) rc = report(&r, title);
    optim_model_destroy(m);
    optim_destroy(opt);
    free(r.lrs), free(r.losses), free(r.smoothed);
    optim_job_data_free(&d);
    return rc;
}

int optim_cmd_lr_find(int argc, char **argv)
{
    lrf_args a = {optim_job_defaults(), NULL, NULL, 1e-7, 10.0};
    a.c.steps = 100;
    tool_option t[JOB_N_OPTIONS + N_OWN];
    size_t n = options(&a, t), npos;
    int rc = optim_tool_parse(CMD, t, n, argc, argv, NULL, 0, &npos);
    if (rc == 2) {
        usage(t, n);
        return optim_tool_finish_stdout(CMD, 0);
    }
    if (rc) return rc;
    if (a.start >= a.end)
        return optim_tool_fail(CMD, "--start-lr %g >= --end-lr %g: expected start < end", a.start,
                               a.end);
    if (optim_job_check(CMD, &a.c, 0) || optim_tool_check_output(CMD, "--plot", a.plot)) return 1;
    rc = run(&a);
    if (a.plot) optim_plot_cleanup();
    return rc;
}
