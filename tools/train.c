/* optim train [OPTIONS] (docs/command.md).
 *
 * Trains an MLP (784-256-128-10 by default: relu, relu, logits) with
 * SparseCategoricalCrossentropy(from_logits=True) on Fashion-MNIST read from
 * IDX files, prints Keras's progress (a bar on a terminal, a line per epoch
 * otherwise), evaluates on the test set and ends its output with the line
 * `test_accuracy=<value>`. Optionally writes the weights, the history (CSV
 * and PNG), and a checkpoint every epoch that --resume continues bit for
 * bit. Bad input: one line on stderr, exit status 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "job.h"
#include "plot.h"

#define CMD "train"

typedef struct train_args {
    job_config c;
    const char *optimizer, *plot, *history, *save_weights, *checkpoint, *resume;
} train_args;

#define N_TRAIN_OPTIONS 6
static size_t options(train_args *a, tool_option *t)
{
    size_t n = optim_job_options(&a->c, t);
    const tool_option own[N_TRAIN_OPTIONS] = {
        {"--optimizer", "JSON", TOOL_TEXT, &a->optimizer, 0, 0,
         "a Keras optimizer config, e.g. '{\"class_name\": \"SGD\", \"config\":\n{\"learning_rate\": 0.1}}', a file "
         "holding one, or a name such as adam\n(default Adam)", 0},
        {"--plot", "PNG", TOOL_TEXT, &a->plot, 0, 0, "draw loss and accuracy per epoch into PNG", 0},
        {"--history", "CSV", TOOL_TEXT, &a->history, 0, 0,
         "write every epoch: optimizer,epoch,loss,accuracy,val_loss,val_accuracy,seconds", 0},
        {"--save-weights", "PATH", TOOL_TEXT, &a->save_weights, 0, 0, "write the model's variables (safetensors) at the end", 0},
        {"--checkpoint", "DIR", TOOL_TEXT, &a->checkpoint, 0, 0,
         "after every epoch, save the whole run into DIR (atomically)", 0},
        {"--resume", "DIR", TOOL_TEXT, &a->resume, 0, 0,
         "continue the run saved in DIR up to --epochs in total, bit for bit", 0},
    };
    memcpy(t + n, own, sizeof own);
    return n + N_TRAIN_OPTIONS;
}

static void usage(const tool_option *t, size_t n)
{
    printf("usage: optim train [OPTIONS]\n"
           "\n"
           "Trains an MLP on Fashion-MNIST and prints test_accuracy=<value> last.\n");
    optim_tool_usage(stdout, t, n);
}

static int save_weights(optim_model *m, const char *path)
{
    optim_var *vars[64];
    size_t n = optim_model_variables(m, vars, 64);
    optim_st_writer *w;
    optim_error err;
    int rc = optim_st_writer_create(&w, &err);
    for (size_t i = 0; i < n && i < 64 && !rc; i++) {
        optim_tensor t = optim_var_tensor(vars[i]);
        rc = optim_st_writer_add(w, optim_var_name(vars[i]), &t, &err);
    }
    if (!rc) rc = optim_st_writer_save(w, path, &err);
    optim_st_writer_destroy(w);
    return rc ? optim_tool_fail(CMD, "--save-weights: %s", err.msg) : 0;
}

/* The optimizer and model, fresh or from --resume; res gets the epochs
 * already done. */
static int setup(train_args *a, optim_checkpoint *ck, const job_data *d, optim_optimizer **opt, optim_model **m,
                 job_result *res)
{
    if (ck) return optim_job_resume_state(CMD, ck, &a->c, a->optimizer, d->train.features, opt, m, res);
    if (optim_job_optimizer(CMD, "--optimizer", a->optimizer ? a->optimizer : "adam", opt)) return 1;
    if (optim_job_model(CMD, &a->c, d->train.features, *opt, m)) {
        optim_destroy(*opt);
        return 1;
    }
    return 0;
}

/* Weights, history and plot, then the last line. */
static int outputs(const train_args *a, optim_model *m, optim_optimizer *opt, const job_result *res)
{
    const char *label = optim_class_of(opt)->name;
    if (a->save_weights && save_weights(m, a->save_weights)) return 1;
    if (a->history && optim_job_write_csv(CMD, a->history, &label, res, 1)) return 1;
    if (a->plot && optim_job_plot(CMD, a->plot, label, &label, res, 1)) return 1;
    printf("test_accuracy=%.4f\n", res->test_accuracy);
    if (fflush(stdout) != 0 || ferror(stdout)) return optim_tool_fail(CMD, "write error on standard output");
    return 0;
}

static int run(train_args *a, optim_checkpoint *ck)
{
    job_data d;
    if (optim_job_load(CMD, &a->c, &d)) return 1;
    optim_optimizer *opt = NULL;
    optim_model *m = NULL;
    job_result res = {0};
    int rc = setup(a, ck, &d, &opt, &m, &res);
    if (!rc) {
        char *cfg = optim_serialize(opt);
        printf("Fashion-MNIST: %lld training, %lld validation and %lld test images of %lld pixels; optimizer %s\n",
               (long long)d.train.n, (long long)d.val.n, (long long)d.test.n, (long long)d.train.features, cfg ? cfg : "?");
        optim_free(cfg);
        if (ck) printf("resuming %s after epoch %lld\n", a->resume, (long long)optim_checkpoint_epoch(ck));
        job_run r = {&a->c, &d, m, opt, a->checkpoint, stdout, OPTIM_VERBOSE_AUTO};
        rc = optim_job_fit(CMD, &r, &res) || outputs(a, m, opt, &res);
    }
    optim_job_result_free(&res);
    optim_model_destroy(m);
    optim_destroy(opt);
    optim_job_data_free(&d);
    return rc;
}

int optim_cmd_train(int argc, char **argv)
{
    train_args a = {optim_job_defaults(), NULL, NULL, NULL, NULL, NULL, NULL};
    tool_option t[JOB_N_OPTIONS + N_TRAIN_OPTIONS];
    size_t n = options(&a, t), npos;
    int rc = optim_tool_parse(CMD, t, n, argc, argv, NULL, 0, &npos);
    if (rc == 2) {
        usage(t, n);
        return 0;
    }
    if (rc) return rc;
    optim_checkpoint *ck = NULL;
    if (a.resume && optim_job_resume_config(CMD, a.resume, &a.c, t, n, &ck)) return 1;
    if (optim_job_check(CMD, &a.c, a.c.validation_split > 0)) rc = 1;
    else rc = run(&a, ck);
    optim_checkpoint_free(ck);
    if (a.plot) optim_plot_cleanup();
    return rc;
}
