/* optim compare CONFIG_OR_NAME... [OPTIONS] (docs/command.md).
 *
 * Trains the main job's model once per optimizer, each from the same
 * initial weights (the same seed) on the same batches in the same order,
 * validating on the test set (or on --validation-split of the training
 * set), then prints a table: final train loss, test loss and accuracy,
 * the epoch and time at which the validation accuracy was best, and the
 * mean time of an optimizer step. --history writes every epoch of every
 * run as CSV, --plot draws them. Every config is loaded before any
 * training, and one that fails is reported then. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "job.h"
#include "plot.h"
#include "steplog.h"

#define CMD "compare"
#define MAX_RUNS 10
#define LABEL_MAX 64

typedef struct compare_args {
    job_config c;
    const char *plot, *history, *log, *tb;
} compare_args;

static void usage(const tool_option *t, size_t n)
{
    printf("usage: optim compare CONFIG_OR_NAME CONFIG_OR_NAME... [OPTIONS]\n"
           "\n"
           "Trains the same MLP on Fashion-MNIST (or --data FILE) with each optimizer (a JSON\n"
           "config, a file holding one, or a name such as adam; 2 to %d of them), from the\n"
           "same initial "
           "weights on the same batches, validating on the test set unless\n"
           "--validation-split is given, and prints a table of the results.\n",
           MAX_RUNS);
    optim_tool_usage(stdout, t, n);
}

/* A name for the run: the bare name, a file's name without .json, or the
 * config's "name" (else its class). Made unique with #2, #3... */
static void label_of(const char *arg, optim_optimizer *opt, char labels[][LABEL_MAX], size_t i)
{
    const char *slash = strrchr(arg, '/');
    if (arg[0] == '{' || arg[0] == '"') snprintf(labels[i], LABEL_MAX, "%s", optim_name(opt));
    else snprintf(labels[i], LABEL_MAX, "%s", slash ? slash + 1 : arg);
    size_t len = strlen(labels[i]);
    if (len > 5 && strcmp(labels[i] + len - 5, ".json") == 0) labels[i][len - 5] = '\0';
    int same = 1;
    len = strlen(labels[i]);
    for (size_t k = 0; k < i; k++)
        same += strncmp(labels[k], labels[i], len) == 0 &&
            (labels[k][len] == '\0' || labels[k][len] == '#');
    if (same > 1)
        snprintf(labels[i] + strlen(labels[i]), LABEL_MAX - strlen(labels[i]), "#%d", same);
}

/* All optimizers, before any training; every failure is reported. */
static int load_all(char **args, size_t n, optim_optimizer **opts, char labels[][LABEL_MAX])
{
    int bad = 0;
    char what[32];
    for (size_t i = 0; i < n; i++) {
        snprintf(what, sizeof what, "optimizer %zu", i + 1);
        if (optim_job_optimizer(CMD, what, args[i], &opts[i])) bad++, opts[i] = NULL;
        else label_of(args[i], opts[i], labels, i);
    }
    if (bad) optim_tool_fail(CMD, "%d of %zu configs did not load; nothing was trained", bad, n);
    return bad != 0;
}

static void print_table(const char *const *labels, const job_result *res, size_t n)
{
    printf("\n%-16s %10s %10s %14s %11s %13s %8s\n", "optimizer", "train_loss", "test_loss",
           "test_accuracy", "best_epoch", "best_seconds", "step_ms");
    for (size_t i = 0; i < n; i++) {
        const job_result *r = &res[i];
        size_t best = 0;
        for (size_t k = 1; k < r->n; k++)
            if (r->rows[k].val_accuracy > r->rows[best].val_accuracy) best = k;
        printf("%-16s %10.4f %10.4f %14.4f %11lld %13.2f %8.3f\n", labels[i],
               r->n ? r->rows[r->n - 1].loss : NAN, r->test_loss, r->test_accuracy,
               r->n ? (long long)r->rows[best].epoch : 0LL, r->n ? r->rows[best].seconds : NAN,
               1e3 * r->step_seconds);
    }
}

/* One run per optimizer, then the table and the files. */
static int run_all(const compare_args *a, const job_data *d, optim_optimizer **opts,
                   const char *const *labels, size_t n, step_log *log)
{
    job_result res[MAX_RUNS];
    memset(res, 0, sizeof res);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        char *cfg = optim_serialize(opts[i]);
        printf("== %s: %s\n", labels[i], cfg ? cfg : "?");
        optim_free(cfg);
        fflush(stdout);
        optim_model *m = NULL;
        rc = optim_job_model(CMD, &a->c, d->train.features, opts[i], &m);
        job_run r = {&a->c, d, m, opts[i], NULL, stdout, 2, log, labels[i], labels[i]};
        if (!rc) rc = optim_job_fit(CMD, &r, &res[i]);
        optim_model_destroy(m);
    }
    if (!rc) print_table(labels, res, n);
    if (!rc && a->history) rc = optim_job_write_csv(CMD, a->history, labels, res, n);
    if (!rc && a->plot) rc = optim_job_plot(CMD, a->plot, "optim compare", labels, res, n);
    for (size_t i = 0; i < n; i++) optim_job_result_free(&res[i]);
    if (!rc && (fflush(stdout) != 0 || ferror(stdout)))
        rc = optim_tool_fail(CMD, "write error on standard output");
    return rc;
}

int optim_cmd_compare(int argc, char **argv)
{
    compare_args a = {optim_job_defaults(), NULL, NULL, NULL, NULL};
    tool_option t[JOB_N_OPTIONS + 4];
    size_t n = optim_job_options(&a.c, t), npos;
    t[n++] = (tool_option){
        "--plot", "PNG", TOOL_TEXT, &a.plot, 0, 0, "draw loss and accuracy of every run into PNG",
        0};
    t[n++] = (tool_option){
        "--history",
        "CSV",
        TOOL_TEXT,
        &a.history,
        0,
        0,
        "write every epoch of every run:\noptimizer,epoch,loss,accuracy,val_loss,val_accuracy,seconds",
        0};
    t[n++] = (tool_option){"--log",
                           "JSONL",
                           TOOL_TEXT,
                           &a.log,
                           0,
                           0,
                           "write one JSON object per optimizer step of every run (its\n"
                           "\"optimizer\" field is the run's label, as in the table)",
                           0};
    t[n++] = (tool_option){"--tensorboard",
                           "DIR",
                           TOOL_TEXT,
                           &a.tb,
                           0,
                           0,
                           "write TensorBoard event files, one subdirectory DIR/LABEL per run",
                           0};
    char *args[MAX_RUNS];
    int rc = optim_tool_parse(CMD, t, n, argc, argv, args, MAX_RUNS, &npos);
    if (rc == 2) usage(t, n);
    if (rc) return rc == 2 ? optim_tool_finish_stdout(CMD, 0) : rc;
    if (npos < 2)
        return optim_tool_fail(CMD,
                               "expected 2 to %d optimizers, got %zu (try 'optim compare --help')",
                               MAX_RUNS, npos);
    if (optim_job_check(CMD, &a.c, 1) || optim_tool_check_output(CMD, "--plot", a.plot) ||
        optim_tool_check_output(CMD, "--history", a.history))
        return 1;
    optim_optimizer *opts[MAX_RUNS] = {NULL};
    char labels[MAX_RUNS][LABEL_MAX];
    const char *lp[MAX_RUNS];
    job_data d;
    step_log *log = NULL;
    rc = load_all(args, npos, opts, labels) || optim_step_log_open(CMD, a.log, "w", a.tb, &log) ||
        optim_job_load(CMD, &a.c, &d);
    if (!rc) {
        if (!d.val.n) d.val = d.test;
        for (size_t i = 0; i < npos; i++) lp[i] = labels[i];
        rc = run_all(&a, &d, opts, lp, npos, log);
        optim_job_data_free(&d);
    }
    if (optim_step_log_close(CMD, log)) rc = 1;
    for (size_t i = 0; i < npos; i++) optim_destroy(opts[i]);
    if (a.plot) optim_plot_cleanup();
    return rc;
}
