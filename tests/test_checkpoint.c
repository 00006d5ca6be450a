/* Checkpoints (optim/checkpoint.h): a run stopped after one epoch and
 * resumed from its checkpoint ends with bit for bit the model and optimizer
 * state of an uninterrupted run, for every built-in optimizer in both
 * generations, the wrappers (Lookahead, MovingAverage, SWA, ApplyIfFinite,
 * LossScaleOptimizer) and Keras 3's use_ema and gradient accumulation,
 * with a Dropout layer whose masks depend on the restored call count; a
 * checkpoint of another model or optimizer is refused with nothing changed;
 * a process killed with SIGKILL while writing leaves the previous
 * checkpoint loadable; bad arguments are refused. */
#define _DEFAULT_SOURCE
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "optim/checkpoint.h"
#include "optim/optim.h"

#define N 50
#define FEATURES 6
#define CLASSES 3
#define MAXV 16

static float xs[N * FEATURES];
static int32_t ys[N];

static void make_data(void)
{
    uint64_t s = 12345;
    for (int i = 0; i < N * FEATURES; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        xs[i] = (float)((double)(s >> 11) * 0x1.0p-53 * 2 - 1);
    }
    for (int i = 0; i < N; i++) ys[i] = (xs[i * FEATURES] > 0) + (xs[i * FEATURES + 1] > 0.3f);
}

static void add(optim_model *m, optim_layer *l) { assert_ok(optim_sequential_add(m, l), m); }

/* Set: make_model puts a BatchNormalization after the first Dense (its
 * moving statistics must resume too). */
static int with_batch_norm;

/* Dense(units, relu) -> Dropout(0.25) -> Dense(3): built, compiled with opt. */
static optim_model *make_model(optim_optimizer *opt, int64_t units)
{
    optim_model *m;
    optim_layer *l;
    optim_error err;
    assert_ok(optim_sequential_create(&m, NULL, &err), &err);
    optim_dense_options d = optim_dense_defaults(units);
    d.activation = OPTIM_ACT_RELU;
    assert_ok(optim_dense_create(&l, &d, &err), &err);
    add(m, l);
    if (with_batch_norm) {
        optim_batch_normalization_options b = optim_batch_normalization_defaults();
        b.momentum = 0.7;
        assert_ok(optim_batch_normalization_create(&l, &b, &err), &err);
        add(m, l);
    }
    assert_ok(optim_dropout_create(&l, 0.25, 7, NULL, &err), &err);
    add(m, l);
    d = optim_dense_defaults(CLASSES);
    assert_ok(optim_dense_create(&l, &d, &err), &err);
    add(m, l);
    assert_ok(optim_model_build(m, 1, (int64_t[]){FEATURES}), m);
    optim_loss loss = optim_loss_sparse_categorical_crossentropy(1);
    assert_ok(optim_model_compile(m, opt, &loss, OPTIM_METRIC_ACCURACY), m);
    return m;
}

typedef struct saver {
    const char *dir;
    optim_optimizer *opt;
} saver;

static int save_hook(void *user, optim_model *m, int64_t epoch, optim_logs *logs, optim_error *err)
{
    (void)logs;
    saver *s = user;
    return optim_checkpoint_save(s->dir, m, s->opt, epoch + 1, "{\"seed\": 3}", err);
}

/* fit from initial_epoch to epochs, saving a checkpoint after each epoch
 * when dir is non-NULL. */
static void fit(optim_model *m, optim_optimizer *opt, int64_t initial, int64_t epochs,
                const char *dir)
{
    optim_tensor x = optim_tensor_make(OPTIM_F32, xs, 2, (int64_t[]){N, FEATURES});
    optim_tensor y = optim_tensor_make(OPTIM_I32, ys, 1, (int64_t[]){N});
    saver s = {dir, opt};
    optim_callback_hooks h;
    memset(&h, 0, sizeof h);
    h.size = sizeof h;
    h.on_epoch_end = save_hook;
    optim_callback *cb = NULL;
    optim_error err;
    assert_ok(optim_callback_create(&cb, &h, &s, &err), &err);
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = epochs, fo.initial_epoch = initial, fo.batch_size = 8, fo.seed = 3;
    fo.callbacks = &cb, fo.n_callbacks = dir ? 1 : 0;
    int rc = optim_model_fit(m, &x, &y, &fo, NULL);
    assert_ok(rc, m);
    optim_callback_destroy(cb);
}

/* Model variables and optimizer weights are bitwise equal. */
static void assert_same_state(optim_model *a, optim_optimizer *oa, optim_model *b,
                              optim_optimizer *ob, const char *cfg)
{
    optim_var *va[MAXV], *vb[MAXV];
    size_t n = optim_model_variables(a, va, MAXV);
    assert_eq(optim_model_variables(b, vb, MAXV), n);
    for (size_t i = 0; i < n; i++)
        if (memcmp(optim_var_cdata(va[i]), optim_var_cdata(vb[i]),
                   (size_t)optim_var_numel(va[i]) * 4)) {
            print_error("%s: variable %s differs after resume\n", cfg, optim_var_name(va[i]));
            fail();
        }
    optim_tensor wa[64], wb[64];
    size_t nw = optim_get_weights(oa, wa, 64);
    assert_eq(optim_get_weights(ob, wb, 64), nw);
    for (size_t i = 0; i < nw; i++)
        if (memcmp(wa[i].data, wb[i].data,
                   (size_t)optim_tensor_numel(&wa[i]) * optim_dtype_size(wa[i].dtype))) {
            print_error("%s: optimizer weight %s differs after resume\n", cfg,
                        optim_weight_name(oa, i));
            fail();
        }
}

static const char *const CONFIGS[] = {
    "\"sgd\"",
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05, \"momentum\": 0.9, \"nesterov\": true}}",
    "\"adam\"",
    "{\"class_name\": \"Adam\", \"config\": {\"amsgrad\": true, \"is_legacy_optimizer\": true}}",
    "\"adamw\"",
    "\"adamax\"",
    "\"nadam\"",
    "{\"class_name\": \"Nadam\", \"config\": {\"is_legacy_optimizer\": true}}",
    "{\"class_name\": \"RMSprop\", \"config\": {\"momentum\": 0.5, \"centered\": true}}",
    "\"adagrad\"",
    "\"adadelta\"",
    "\"ftrl\"",
    "{\"class_name\": \"Ftrl\", \"config\": {\"l1_regularization_strength\": 0.01, \"is_legacy_optimizer\": true}}",
    "\"lion\"",
    "\"adafactor\"",
    "\"lamb\"",
    "\"lazyadam\"",
    "\"muon\"",
    "\"schedulefreeadamw\"",
    "{\"class_name\": \"NovoGrad\", \"config\": {\"amsgrad\": true, \"grad_averaging\": true}}",
    "{\"class_name\": \"ConditionalGradient\", \"config\": {\"learning_rate\": 0.9, \"ord\": \"nuclear\"}}",
    "{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": {\"class_name\": \"Adam\", \"config\": {}}, "
    "\"sync_period\": 3}}",
    "{\"class_name\": \"MovingAverage\", \"config\": {\"optimizer\": {\"class_name\": \"SGD\", \"config\": "
    "{\"momentum\": 0.9}}, \"average_decay\": 0.9}}",
    "{\"class_name\": \"Adam\", \"config\": {\"use_ema\": true, \"ema_overwrite_frequency\": 4}}",
    "{\"class_name\": \"SWA\", \"config\": {\"optimizer\": {\"class_name\": \"Adam\", \"config\": "
    "{\"is_legacy_optimizer\": true}}, \"start_averaging\": 3, \"average_period\": 2, \"is_legacy_optimizer\": true}}",
    "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": {\"class_name\": \"SGD\", \"config\": "
    "{\"momentum\": 0.5}}}}",
    "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": {\"class_name\": \"Adam\", "
    "\"config\": {}}, \"initial_scale\": 1.0, \"dynamic_growth_steps\": 3}}",
    "{\"class_name\": \"RMSprop\", \"config\": {\"gradient_accumulation_steps\": 3}}",
};

/* Two epochs straight == one epoch, checkpoint, new process state, resume. */
static void resume_one(const char *cfg, const char *dir)
{
    optim_optimizer *oa = optim_test_make(cfg);
    optim_model *a = make_model(oa, 12);
    fit(a, oa, 0, 2, NULL);

    optim_optimizer *o1 = optim_test_make(cfg);
    optim_model *m1 = make_model(o1, 12);
    fit(m1, o1, 0, 1, dir);
    optim_model_destroy(m1);
    optim_destroy(o1);

    optim_checkpoint *c;
    optim_error err;
    int rc = optim_checkpoint_read(dir, &c, &err);
    if (rc) print_error("%s: %s\n", cfg, err.msg);
    assert_ok(rc, &err);
    assert_eq(optim_checkpoint_epoch(c), 1);
    assert_string_equal(optim_checkpoint_extra_json(c), "{\"seed\":3}");
    optim_optimizer *ob = optim_test_make(optim_checkpoint_optimizer_json(c));
    optim_model *b = make_model(ob, 12);
    rc = optim_checkpoint_restore(c, b, ob, &err);
    if (rc) print_error("%s: %s\n", cfg, err.msg);
    assert_ok(rc, &err);
    optim_checkpoint_free(c);
    fit(b, ob, 1, 2, NULL);
    assert_same_state(a, oa, b, ob, cfg);
    optim_model_destroy(a), optim_model_destroy(b);
    optim_destroy(oa), optim_destroy(ob);
}

OPTIM_TEST(test_resume_bitwise)
{
    make_data();
    for (size_t i = 0; i < sizeof CONFIGS / sizeof *CONFIGS; i++) {
        char name[32];
        snprintf(name, sizeof name, "ck%zu", i);
        resume_one(CONFIGS[i], optim_test_tmpfile(name));
    }
}

/* The same with BatchNormalization: the moving statistics (non-trainable)
 * are saved and restored, so the resumed run matches bit for bit. */
OPTIM_TEST(test_resume_bitwise_batch_norm)
{
    make_data();
    with_batch_norm = 1;
    resume_one(CONFIGS[1], optim_test_tmpfile("ck_bn"));
    with_batch_norm = 0;
}

/* A fresh model that is not the checkpoint's, or an optimizer of another
 * class, is refused and left as it was. */
/* The optimizer's config comes back as it was written: every digit of a
 * float32 learning rate, ints as ints, floats as floats. */
OPTIM_TEST(test_config_exact)
{
    make_data();
    const char *dir = optim_test_tmpfile("ckx");
    optim_optimizer *o =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": "
                        "0.009999999776482582, \"clipnorm\": 1, \"momentum\": 0.9}}");
    optim_model *m = make_model(o, 12);
    fit(m, o, 0, 1, dir);
    optim_checkpoint *c;
    optim_error err;
    assert_ok(optim_checkpoint_read(dir, &c, &err), &err);
    char *want = optim_serialize(o);
    assert_string_equal(optim_checkpoint_optimizer_json(c), want);
    assert_non_null(strstr(want, "\"learning_rate\":0.009999999776482582,"));
    assert_non_null(strstr(want, "\"clipnorm\":1,"));
    optim_free(want);
    optim_checkpoint_free(c);
    optim_model_destroy(m);
    optim_destroy(o);
}

OPTIM_TEST(test_refusals)
{
    make_data();
    const char *dir = optim_test_tmpfile("ckr");
    optim_optimizer *o = optim_test_make("\"adam\"");
    optim_model *m = make_model(o, 12);
    fit(m, o, 0, 1, dir);
    optim_checkpoint *c;
    optim_error err;
    assert_ok(optim_checkpoint_read(dir, &c, &err), &err);

    optim_optimizer *o2 = optim_test_make("\"adam\"");
    optim_model *other = make_model(o2, 13);
    optim_var *v[MAXV];
    optim_model_variables(other, v, MAXV);
    float before = ((const float *)optim_var_cdata(v[0]))[0];
    assert_status(optim_checkpoint_restore(c, other, o2, &err), OPTIM_ESTATE, &err);
    assert_non_null(strstr(err.msg, "different model"));
    assert_non_null(strstr(err.msg, "[6, 13]"));
    assert_eq(((const float *)optim_var_cdata(v[0]))[0], before);
    assert_eq(optim_weights_count(o2), 1);
    optim_model_destroy(other);
    optim_destroy(o2);

    optim_optimizer *sgd = optim_test_make("\"sgd\"");
    optim_model *m2 = make_model(sgd, 12);
    assert_status(optim_checkpoint_restore(c, m2, sgd, &err), OPTIM_ESTATE, &err);
    assert_non_null(strstr(err.msg, "written with optimizer Adam, this run's is SGD"));
    assert_eq(optim_weights_count(sgd), 1);
    optim_model_destroy(m2);
    optim_destroy(sgd);

    /* The optimizer that already stepped. */
    assert_status(optim_checkpoint_restore(c, m, o, &err), OPTIM_ESTATE, &err);
    assert_non_null(strstr(err.msg, "not stepped"));
    assert_status(optim_checkpoint_restore(NULL, m, o, &err), OPTIM_EINVAL, &err);
    assert_status(optim_checkpoint_restore(c, NULL, o, &err), OPTIM_EINVAL, &err);
    optim_checkpoint_free(c);
    optim_checkpoint_free(NULL);

    assert_status(optim_checkpoint_save(dir, m, o, -1, NULL, &err), OPTIM_EINVAL, &err);
    assert_non_null(strstr(err.msg, "epoch = -1"));
    assert_status(optim_checkpoint_save(dir, m, o, 1, "[1]", &err), OPTIM_EINVAL, &err);
    assert_non_null(strstr(err.msg, "not a JSON object"));
    assert_status(optim_checkpoint_save(NULL, m, o, 1, NULL, &err), OPTIM_EINVAL, &err);
    assert_status(optim_checkpoint_save("/proc/none/x", m, o, 1, NULL, &err), OPTIM_EIO, &err);
    /* Values restore would refuse are not saved: a NaN weight, an infinite slot. */
    optim_var *mv[MAXV];
    optim_model_variables(m, mv, MAXV);
    float keep = ((float *)optim_var_data(mv[1]))[2];
    ((float *)optim_var_data(mv[1]))[2] = NAN;
    assert_status(optim_checkpoint_save(dir, m, o, 2, NULL, &err), OPTIM_ERANGE, &err);
    assert_contains(err.msg, "variable ");
    assert_contains(err.msg, "element 2 is NaN or infinite");
    ((float *)optim_var_data(mv[1]))[2] = keep;
    optim_var *slot = optim_get_slot(o, mv[0], "v");
    assert_non_null(slot);
    float vkeep = ((float *)optim_var_data(slot))[0];
    ((float *)optim_var_data(slot))[0] = INFINITY;
    assert_status(optim_checkpoint_save(dir, m, o, 2, NULL, &err), OPTIM_ERANGE, &err);
    assert_contains(err.msg, "optimizer weight ");
    assert_contains(err.msg, "/v element 0 is NaN or infinite");
    ((float *)optim_var_data(slot))[0] = vkeep;
    /* The failed saves left the checkpoint as it was. */
    assert_ok(optim_checkpoint_read(dir, &c, &err), &err);
    assert_eq(optim_checkpoint_epoch(c), 1);
    optim_checkpoint_free(c);
    optim_model_destroy(m);
    optim_destroy(o);

    assert_status(optim_layer_set_training_calls(NULL, 1), OPTIM_EINVAL, NULL);
    assert_eq(optim_layer_training_calls(NULL), 0);
    assert_status(optim_checkpoint_read(optim_test_tmpfile("missing"), &c, &err), OPTIM_EIO, &err);
    assert_null(c);
    assert_non_null(strstr(err.msg, "holds no checkpoint"));
    char path[4096];
    snprintf(path, sizeof path, "%s/checkpoint.json", dir);
    assert_eq(optim_test_write_file(path, "{\"format\": 1}", 13), 0);
    assert_status(optim_checkpoint_read(dir, &c, &err), OPTIM_EFORMAT, &err);
    assert_status(optim_checkpoint_read(dir, NULL, &err), OPTIM_EINVAL, &err);
}

/* Saves checkpoints of a 900k-parameter model forever (child process). */
#define BIG 100000
static void save_forever(const char *dir, int done_fd)
{
    optim_optimizer *o = optim_test_make("\"adam\"");
    optim_model *m = make_model(o, BIG);
    optim_error err;
    for (int64_t e = 1;; e++) {
        if (optim_checkpoint_save(dir, m, o, e, NULL, &err)) _exit(2);
        if (write(done_fd, "s", 1) != 1) _exit(3);
    }
}

/* Killed at random moments, the writer leaves a readable, restorable
 * checkpoint at least as new as the last save it finished. The child does
 * nothing but save and report each finished save on a pipe; the parent waits
 * for 1 to 3 finished saves (so the checkpoint has been replaced before the
 * kill in two trials of three), then kills at a varying moment of the next
 * save. Synchronising on the pipe, not on time, keeps the test meaningful on
 * a loaded machine or under a sanitizer. */
OPTIM_TEST(test_sigkill_mid_write)
{
    make_data();
    for (int trial = 0; trial < 12; trial++) {
        char name[32];
        snprintf(name, sizeof name, "kill%d", trial);
        const char *dir = optim_test_tmpfile(name);
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_ge(pid, 0);
        if (pid == 0) {
            close(fds[0]);
            save_forever(dir, fds[1]);
        }
        close(fds[1]);
        const int64_t saves = 1 + trial % 3;
        char b;
        for (int64_t k = 0; k < saves; k++) assert_int_equal(read(fds[0], &b, 1), 1);
        usleep(1000 * trial);
        kill(pid, SIGKILL);
        close(fds[0]);
        int status;
        waitpid(pid, &status, 0);
        assert_true(WIFSIGNALED(status));
        optim_checkpoint *c;
        optim_error err;
        int rc = optim_checkpoint_read(dir, &c, &err);
        if (rc) print_error("trial %d: %s\n", trial, err.msg);
        assert_ok(rc, &err);
        assert_ge(optim_checkpoint_epoch(c), saves);
        optim_optimizer *o = optim_test_make(optim_checkpoint_optimizer_json(c));
        optim_model *m = make_model(o, BIG);
        rc = optim_checkpoint_restore(c, m, o, &err);
        if (rc) print_error("trial %d: %s\n", trial, err.msg);
        assert_ok(rc, &err);
        optim_checkpoint_free(c);
        optim_model_destroy(m);
        optim_destroy(o);
    }
}

int main(void) { return optim_test_run(); }
