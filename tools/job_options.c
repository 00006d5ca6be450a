/* The settings of the main job and their command-line options (tools/job.h). */
#include <string.h>

#include "job.h"

job_config optim_job_defaults(void)
{
    job_config c;
    memset(&c, 0, sizeof c);
    c.epochs = 2;
    c.batch = 128;
    c.threads = 0;
    c.patience = -1;
    c.hidden.v[0] = 256, c.hidden.v[1] = 128, c.hidden.n = 2;
    c.data = JOB_DEFAULT_DATA;
    return c;
}

size_t optim_job_options(job_config *c, tool_option *out)
{
    const tool_option rows[JOB_N_OPTIONS] = {
        {"--epochs", "N", TOOL_INT, &c->epochs, 1, 1e6, "epochs in total (default 2)", 0},
        {"--batch-size", "N", TOOL_INT, &c->batch, 1, 2147483648.0,
         "samples per step (default 128)", 0},
        {"--seed", "N", TOOL_INT, &c->seed, 0, 9007199254740992.0,
         "seeds the initial weights, the shuffling and dropout (default 0)", 0},
        {"--data", "PATH", TOOL_TEXT, &c->data, 0, 0,
         "directory of {train,t10k}-{images-idx3,labels-idx1}-ubyte, gzip'd (.gz)\nor not (default " JOB_DEFAULT_DATA
         "),\nor a file: .npz (np.savez), safetensors (x_train, y_train, x_test, y_test)\nor .csv",
         0},
        {"--test-data", "PATH", TOOL_TEXT, &c->test_data, 0, 0,
         "the test set for a --data file without x_test/y_test (its x_test/y_test,\nelse x_train/y_train; a .csv whole)",
         0},
        {"--label-column", "NAME|INDEX", TOOL_TEXT, &c->label_column, 0, 0,
         "CSV: the label column, by header name or 0-based index (negative: from\nthe end; default: a column named label, else the last)",
         0},
        {"--limit", "N", TOOL_INT, &c->limit, 0, 1e9,
         "use the first N training and test examples (default 0: all)", 0},
        {"--validation-split", "F", TOOL_REAL, &c->validation_split, 0, 0.99,
         "hold out the last fraction F of the training set for validation", 0},
        {"--hidden", "LIST", TOOL_LIST, &c->hidden, 1, 65536,
         "hidden layer sizes (default 256,128; '' for none)", 0},
        {"--dropout", "R", TOOL_REAL, &c->dropout, 0, 0.99,
         "Dropout rate after each hidden layer (default 0: none)", 0},
        {"--steps", "N", TOOL_INT, &c->steps, 0, 1e15,
         "stop after N optimizer steps in total (default 0: no limit)", 0},
        {"--threads", "T", TOOL_INT, &c->threads, 0, 1024,
         "threads of the optimizer step (default 0: OpenMP's)", 0},
        {"--early-stopping", "PATIENCE", TOOL_INT, &c->patience, 0, 1e6,
         "EarlyStopping: stop once --monitor has not improved for PATIENCE epochs", 0},
        {"--monitor", "NAME", TOOL_TEXT, &c->monitor, 0, 0,
         "what EarlyStopping watches: loss, accuracy, val_loss, val_accuracy\n(default val_loss with validation data, else loss)",
         0},
        {"--min-delta", "D", TOOL_REAL, &c->min_delta, 0, 1e300,
         "EarlyStopping: the least change that counts (default 0)", 0},
        {"--lr-decay", "F", TOOL_REAL, &c->lr_decay, 0, 1e6,
         "LearningRateScheduler: learning_rate *= F at the start of every\nepoch after the first (default: none)",
         0},
    };
    memcpy(out, rows, sizeof rows);
    return JOB_N_OPTIONS;
}

int optim_job_check(const char *cmd, const job_config *c, int has_validation)
{
    static const char *const monitors[] = {"loss", "accuracy", "val_loss", "val_accuracy"};
    int ok = !c->monitor;
    for (size_t i = 0; i < 4 && !ok; i++) ok = strcmp(c->monitor, monitors[i]) == 0;
    if (!ok)
        return optim_tool_fail(
            cmd, "--monitor '%s': expected loss, accuracy, val_loss or val_accuracy", c->monitor);
    if (c->monitor && strncmp(c->monitor, "val_", 4) == 0 && !has_validation)
        return optim_tool_fail(cmd, "--monitor %s needs validation data (give --validation-split)",
                               c->monitor);
    if ((c->monitor || c->min_delta) && c->patience < 0)
        return optim_tool_fail(
            cmd, "--monitor and --min-delta configure EarlyStopping: give --early-stopping too");
    if (!c->data[0]) return optim_tool_fail(cmd, "--data '': expected a directory or a file");
    return 0;
}
