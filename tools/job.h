/* The main job shared by `optim train` and `optim compare`: an MLP on
 * Fashion-MNIST. Its settings and their options (job_options.c), the data
 * (dataset.c), the model and one training run with its callbacks (job.c),
 * the history as CSV and as a plot (history.c). Internal to tools/. */
#ifndef OPTIM_TOOLS_JOB_H
#define OPTIM_TOOLS_JOB_H

#include <stdio.h>

#include "optim/optim.h"
#include "options.h"

#define JOB_DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
#define JOB_CLASSES 10

/* What defines a run (model, data, order) and how it trains. */
typedef struct job_config {
    long long epochs, batch, seed, limit, steps, threads, patience;
    double validation_split, dropout, min_delta, lr_decay;
    tool_int_list hidden;
    const char *data, *monitor;
    const char *label_column, *test_data; /* --data files (dataset_files.c); NULL: default */
} job_config;

job_config optim_job_defaults(void);

/* The rows of the shared options (model, data, training) into out, which
 * has room for JOB_N_OPTIONS; returns the count. */
#define JOB_N_OPTIONS 16
size_t optim_job_options(job_config *c, tool_option *out);
/* Checks the options against each other (has_validation: the run will
 * have validation data); 1 after a message. */
int optim_job_check(const char *cmd, const job_config *c, int has_validation);

/* ---- data ---------------------------------------------------------------------- */

typedef struct job_split {
    float *x;
    int32_t *y;
    int64_t n, features;
    int32_t rank; /* one example's shape (features = its product); 0: [features] */
    int64_t shape[OPTIM_MAX_RANK];
} job_split;

/* train and test own their memory; val is a view of train's last rows. */
typedef struct job_data {
    job_split train, val, test;
} job_data;

/* Loads DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz], keeps the
 * first `limit` examples of each (0: all) and splits the last
 * validation_split of the training set off as validation data (Keras's
 * validation_split). 1 after a message. */
int optim_job_load(const char *cmd, const job_config *c, job_data *d);
/* --data naming a file (.npz, safetensors, CSV; dataset_files.c): fills
 * d->train and d->test (from the file's x_test/y_test or --test-data).
 * 1 after a message. */
int optim_job_load_file(const char *cmd, const job_config *c, job_data *d);
/* Memory for n floats, on huge pages where Linux gives them; free with free(). */
float *optim_job_images_alloc(int64_t n);
void optim_job_data_free(job_data *d);

/* ---- one run ---------------------------------------------------------------------- */

/* One epoch of history (validation values NaN without validation data). */
typedef struct job_row {
    int64_t epoch; /* 1-based */
    double loss, accuracy, val_loss, val_accuracy, seconds; /* seconds: since the run began */
} job_row;

typedef struct job_result {
    job_row *rows;
    size_t n;
    double test_loss, test_accuracy;
    double step_seconds; /* mean wall time of a training step */
    int64_t steps; /* optimizer steps taken in total */
} job_result;

void optim_job_result_free(job_result *r);

/* The model of c (Dense layers of c->hidden with relu, Dropout after each
 * when c->dropout > 0, Dense(10) logits), built for `features` inputs and
 * compiled with opt. 1 after a message. */
int optim_job_model(const char *cmd, const job_config *c, int64_t features, optim_optimizer *opt,
                    optim_model **out);

typedef struct job_run {
    const job_config *c;
    const job_data *d;
    optim_model *m;
    optim_optimizer *opt;
    const char *checkpoint_dir; /* NULL: none */
    FILE *out; /* progress (NULL: silent) */
    int verbose; /* fit's verbose */
    struct step_log *log; /* --log / --tensorboard (steplog.h); NULL: none */
    const char *log_label, *log_sub; /* the run's "optimizer" and event subdirectory */
} job_run;

/* Trains r->m from the state it is in (res holds the rows of the epochs
 * already done, from a checkpoint, or none) up to c->epochs, then
 * evaluates on the test set. res gets every epoch. 1 after a message. */
int optim_job_fit(const char *cmd, const job_run *r, job_result *res);

/* Resuming from the checkpoint in dir, in two parts. First, before the
 * data is loaded: reads it and takes its model and data settings into c,
 * refusing any that was given on the command line (opts) with another
 * value. Then restore: creates *opt from the checkpoint (refusing another
 * class chain than opt_text's, when given) and the model with its state,
 * and fills res with the earlier epochs. Both: 1 after a message. */
int optim_job_resume_config(const char *cmd, const char *dir, job_config *c,
                            const tool_option *opts, size_t n_opts, optim_checkpoint **ck);
int optim_job_resume_state(const char *cmd, const optim_checkpoint *ck, const job_config *c,
                           const char *opt_text, int64_t features, optim_optimizer **opt,
                           optim_model **m, job_result *res);

/* The checkpoint's "extra" object: c's model and data settings and res's
 * rows and step counts. malloc'd JSON, NULL when out of memory. */
char *optim_job_extra_json(const job_config *c, const job_result *res);

/* An optimizer from a JSON config, a file holding one, or a bare name;
 * messages start with `what` ("--optimizer"). 1 after a message. */
int optim_job_optimizer(const char *cmd, const char *what, const char *text, optim_optimizer **opt);

/* ---- output ----------------------------------------------------------------------------- */

/* optimizer,epoch,loss,accuracy,val_loss,val_accuracy,seconds: one row per
 * run per epoch. 1 after a message. */
int optim_job_write_csv(const char *cmd, const char *path, const char *const *labels,
                        const job_result *res, size_t n);
/* Loss and accuracy per epoch, train solid and validation dashed, one
 * colour per run, legend naming each. 1 after a message. */
int optim_job_plot(const char *cmd, const char *path, const char *title, const char *const *labels,
                   const job_result *res, size_t n);

#endif
