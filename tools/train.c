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
#include "replicas.h"
#include "steplog.h"

#define CMD "train"

typedef struct train_args {
    job_config c;
    const char *optimizer, *plot, *history, *save_weights, *checkpoint, *resume, *log, *tb;
    long long replica_timeout;
    int shard; /* --shard-optimizer-state (a flag, taken out of argv before parsing) */
} train_args;

#define N_TRAIN_OPTIONS 9
static size_t options(train_args *a, tool_option *t)
{
    size_t n = optim_job_options(&a->c, t);
    const tool_option own[N_TRAIN_OPTIONS] = {
        {"--optimizer", "JSON", TOOL_TEXT, &a->optimizer, 0, 0,
         "a Keras optimizer config, e.g. '{\"class_name\": \"SGD\", \"config\":\n{\"learning_rate\": 0.1}}', a file "
         "holding one, or a name such as adam\n(default Adam)",
         0},
        {"--plot", "PNG", TOOL_TEXT, &a->plot, 0, 0, "draw loss and accuracy per epoch into PNG",
         0},
        {"--history", "CSV", TOOL_TEXT, &a->history, 0, 0,
         "write every epoch: optimizer,epoch,loss,accuracy,val_loss,val_accuracy,seconds", 0},
        {"--save-weights", "PATH", TOOL_TEXT, &a->save_weights, 0, 0,
         "write the model's variables (safetensors) at the end", 0},
        {"--checkpoint", "DIR", TOOL_TEXT, &a->checkpoint, 0, 0,
         "after every epoch, save the whole run into DIR (atomically)", 0},
        {"--resume", "DIR", TOOL_TEXT, &a->resume, 0, 0,
         "continue the run saved in DIR up to --epochs in total, bit for bit", 0},
        {"--replica-timeout", "S", TOOL_INT, &a->replica_timeout, 1, 86400,
         "under mpirun: a rank that waits S seconds for the others (start-up, a\nstep, exit) fails (30)",
         0},
        {"--log", "JSONL", TOOL_TEXT, &a->log, 0, 0,
         "write one JSON object per optimizer step (step, epoch, batch, loss,\nlearning_rate, "
         "grad_norm, update_ratio, seconds); appended to under --resume",
         0},
        {"--tensorboard", "DIR", TOOL_TEXT, &a->tb, 0, 0,
         "write TensorBoard event files into DIR: loss, learning_rate, grad_norm,\nupdate_ratio "
         "per step, epoch_<metric> per epoch",
         0},
    };
    memcpy(t + n, own, sizeof own);
    return n + N_TRAIN_OPTIONS;
}

static void usage(const tool_option *t, size_t n)
{
    printf(
        "usage: optim train [OPTIONS]\n"
        "\n"
        "Trains an MLP on Fashion-MNIST (or --data FILE) and prints test_accuracy=<value> last.\n");
    optim_tool_usage(stdout, t, n);
    printf("  --shard-optimizer-state\n"
           "                    under mpirun: each rank keeps 1/N of the optimizer slots\n"
           "\n"
           "Under mpirun -np N each process trains on 1/N of every batch (--batch-size stays\n"
           "global) and the gradients are summed across processes; output and files come from\n"
           "rank 0 (docs/distributed.md).\n");
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
static int setup(train_args *a, optim_checkpoint *ck, const job_data *d, optim_optimizer **opt,
                 optim_model **m, job_result *res)
{
    if (ck)
        return optim_job_resume_state(CMD, ck, &a->c, a->optimizer, d->train.features, opt, m, res);
    if (optim_job_optimizer(CMD, "--optimizer", a->optimizer ? a->optimizer : "adam", opt))
        return 1;
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
    if (fflush(stdout) != 0 || ferror(stdout))
        return optim_tool_fail(CMD, "write error on standard output");
    return 0;
}

/* Rank 0 prints the slot bytes each rank keeps (sharding divides them). */
static int report_slots(optim_group *g, optim_optimizer *opt)
{
    int64_t mine = 0;
    if (optim_group_slot_bytes(g, opt, &mine))
        return optim_tool_fail(CMD, "%s", optim_group_errmsg(g));
    double all = (double)mine;
    if (optim_group_sum(g, &all, 1)) {
        optim_tool_fail(CMD, "%s", optim_group_errmsg(g));
        optim_group_abort(g, 1);
        return 1;
    }
    if (optim_group_rank(g) == 0)
        printf("optimizer slot bytes per rank: %lld on rank 0, %.0f on all %d ranks together\n",
               (long long)mine, all, optim_group_size(g));
    return 0;
}

/* Training under the group g (NULL: one process); rank 0 prints and writes. */
static int train(train_args *a, optim_checkpoint *ck, optim_group *g, const job_data *d,
                 optim_optimizer *opt, optim_model *m, step_log *log, job_result *res)
{
    const int rank = optim_group_rank(g) > 0 ? optim_group_rank(g) : 0;
    if (g && optim_tool_replicas_check(CMD, g, &a->c, d, opt, m)) return 1;
    if (g && (optim_group_attach(g, opt) || optim_model_distribute(m, g)))
        return optim_tool_fail(CMD, "%s", optim_group_errmsg(g));
    char *cfg = optim_serialize(opt);
    int idx = strcmp(a->c.data, JOB_DEFAULT_DATA) == 0;
    if (rank == 0)
        printf("%s: %lld training, %lld validation and %lld test %s of %lld %s; replicas=%d%s; "
               "optimizer %s\n",
               idx ? "Fashion-MNIST" : a->c.data, (long long)d->train.n, (long long)d->val.n,
               (long long)d->test.n, idx ? "images" : "examples", (long long)d->train.features,
               idx ? "pixels" : "features", g ? optim_group_size(g) : 1,
               optim_group_sharded(g) ? " (sharded optimizer state)" : "", cfg ? cfg : "?");
    optim_free(cfg);
    if (ck)
        printf("resuming %s after epoch %lld\n", a->resume, (long long)optim_checkpoint_epoch(ck));
    job_run r = {&a->c,
                 d,
                 m,
                 opt,
                 a->checkpoint,
                 rank == 0 ? stdout : NULL,
                 rank == 0 ? OPTIM_VERBOSE_AUTO : 0,
                 log,
                 optim_class_of(opt)->name,
                 NULL};
    if (optim_job_fit(CMD, &r, res)) {
        optim_group_abort(g, 1); /* the other ranks may wait in a collective */
        return 1;
    }
    if (g && report_slots(g, opt)) return 1;
    return rank == 0 ? outputs(a, m, opt, res) : 0;
}

static int run(train_args *a, optim_checkpoint *ck)
{
    optim_group *g = NULL;
    char msg[OPTIM_ERRMSG_MAX];
    if (optim_tool_group_open(a->shard, (double)a->replica_timeout, &g, msg, sizeof msg))
        return optim_tool_fail(CMD, "%s", msg);
    if (g && optim_group_size(g) > 1 && (a->checkpoint || a->resume || a->log || a->tb)) {
        optim_group_destroy(g);
        return optim_tool_fail(
            CMD,
            "--checkpoint, --resume, --log and --tensorboard work in one process only, not under "
            "mpirun (yet); --save-weights works");
    }
    /* One writer per --checkpoint DIR, for the whole run: taken before the
     * data load, so a second run is refused at once. */
    optim_checkpoint_lock *lock = NULL;
    optim_error err;
    if (a->checkpoint && optim_checkpoint_lock_dir(a->checkpoint, &lock, &err)) {
        optim_group_destroy(g);
        return optim_tool_fail(CMD, "--checkpoint: %s", err.msg);
    }
    job_data d;
    step_log *log = NULL;
    if (optim_step_log_open(CMD, a->log, a->resume ? "a" : "w", a->tb, &log) ||
        optim_job_load(CMD, &a->c, &d)) {
        optim_step_log_close(CMD, log);
        optim_checkpoint_unlock(lock);
        optim_group_destroy(g);
        return 1;
    }
    optim_optimizer *opt = NULL;
    optim_model *m = NULL;
    job_result res = {0};
    int rc = setup(a, ck, &d, &opt, &m, &res);
    if (!rc) rc = train(a, ck, g, &d, opt, m, log, &res);
    if (optim_step_log_close(CMD, log)) rc = 1;
    optim_job_result_free(&res);
    optim_model_destroy(m);
    /* MPI_Comm_free and MPI_Finalize (at exit) wait for the other ranks. */
    if (optim_group_size(g) > 1) optim_tool_watchdog((double)a->replica_timeout, "finish");
    optim_group_destroy(g); /* before the optimizer it is attached to */
    optim_destroy(opt);
    optim_job_data_free(&d);
    optim_checkpoint_unlock(lock);
    return rc;
}

int optim_cmd_train(int argc, char **argv)
{
    train_args a = {optim_job_defaults(), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 30, 0};
    tool_option t[JOB_N_OPTIONS + N_TRAIN_OPTIONS];
    size_t n = options(&a, t), npos;
    int kept = 0;
    for (int i = 0; i < argc; i++) /* the one flag without a value */
        if (strcmp(argv[i], "--shard-optimizer-state") == 0) a.shard = 1;
        else argv[kept++] = argv[i];
    int rc = optim_tool_parse(CMD, t, n, kept, argv, NULL, 0, &npos);
    if (rc == 2) {
        usage(t, n);
        return optim_tool_finish_stdout(CMD, 0);
    }
    if (rc) return rc;
    optim_checkpoint *ck = NULL;
    if (a.resume && optim_job_resume_config(CMD, a.resume, &a.c, t, n, &ck)) return 1;
    if (optim_job_check(CMD, &a.c, a.c.validation_split > 0) ||
        optim_tool_check_output(CMD, "--save-weights", a.save_weights) ||
        optim_tool_check_output(CMD, "--history", a.history) ||
        optim_tool_check_output(CMD, "--plot", a.plot))
        rc = 1;
    else rc = run(&a, ck);
    optim_checkpoint_free(ck);
    if (a.plot) optim_plot_cleanup();
    return rc;
}
