/* optim train [OPTIONS] (DESIGN.md section 5).
 *
 * Trains a 784-256-128-10 MLP (relu, relu, logits) with
 * SparseCategoricalCrossentropy(from_logits=True) on Fashion-MNIST read from
 * IDX files, prints Keras's progress (a bar on a terminal, a line per epoch
 * otherwise), evaluates on the test set and ends its output with the line
 * `test_accuracy=<value>`. Bad input: one line on stderr, exit status 1. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "replicas.h"
#include "optim/idx.h"
#include "optim/nn.h"
#include "optim/optim.h"

#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
#define CLASSES 10

static void usage(FILE *f)
{
    fprintf(f,
            "usage: optim train [--epochs N] [--batch-size N] [--optimizer JSON] [--data DIR] [--seed N]\n"
            "\n"
            "Trains a 784-256-128-10 MLP on Fashion-MNIST and prints test_accuracy=<value> last.\n"
            "  --epochs N        passes over the training set (default 2)\n"
            "  --batch-size N    samples per step (default 128)\n"
            "  --optimizer JSON  a Keras optimizer config, e.g. '{\"class_name\": \"SGD\", \"config\":\n"
            "                    {\"learning_rate\": 0.1}}', or a bare name such as adam (default Adam)\n"
            "  --data DIR        directory of {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz\n"
            "                    (default " DEFAULT_DATA ")\n"
            "  --seed N          seeds the initial weights and the shuffling (default 0)\n"
            "  --steps N         stop after N optimizer steps (default: all batches of --epochs)\n"
            "  --threads T       threads per process for the optimizer step (default: OpenMP's)\n"
            "  --save-weights P  write the model's variables to P (safetensors; rank 0 under mpirun)\n"
            "  --shard-optimizer-state  under mpirun: each rank keeps 1/N of the optimizer slots\n"
            "  --replica-timeout S  under mpirun: a rank waiting S seconds for the others fails (30)\n"
            "\n"
            "Under mpirun -np N each process trains on 1/N of every batch (batch size stays global)\n"
            "and the gradients are summed across processes; see docs/distributed.md.\n");
}

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("optim train: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* A whole decimal number in [lo, hi]. */
static int parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno == ERANGE || v < lo || v > hi)
        return fail("%s '%s': expected a whole number from %lld to %lld", opt, s, lo, hi);
    *out = v;
    return 0;
}

typedef struct split {
    float *x;
    int32_t *y;
    int64_t n, features;
} split;

static void split_free(split *s)
{
    free(s->x);
    free(s->y);
}

/* DIR/PREFIX-images-idx3-ubyte.gz and DIR/PREFIX-labels-idx1-ubyte.gz. */
static int load_split(const char *dir, const char *prefix, split *s)
{
    char ipath[4096], lpath[4096];
    snprintf(ipath, sizeof ipath, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(lpath, sizeof lpath, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    optim_idx *im = NULL, *lb = NULL;
    optim_error err;
    int rc = 1;
    memset(s, 0, sizeof *s);
    if (optim_idx_read(ipath, &im, &err) || optim_idx_read(lpath, &lb, &err)) {
        fail("%s", err.msg);
        goto done;
    }
    if (optim_idx_type_of(im) != OPTIM_IDX_U8 || optim_idx_rank(im) != 3) {
        fail("%s: expected uint8 images [n, rows, cols], got %s of rank %d", ipath,
             optim_idx_type_name(optim_idx_type_of(im)), (int)optim_idx_rank(im));
        goto done;
    }
    if (optim_idx_type_of(lb) != OPTIM_IDX_U8 || optim_idx_rank(lb) != 1) {
        fail("%s: expected uint8 labels [n], got %s of rank %d", lpath, optim_idx_type_name(optim_idx_type_of(lb)),
             (int)optim_idx_rank(lb));
        goto done;
    }
    s->n = optim_idx_shape(im)[0];
    s->features = optim_idx_shape(im)[1] * optim_idx_shape(im)[2];
    if (optim_idx_shape(lb)[0] != s->n) {
        fail("%s has %lld labels for %lld images in %s", lpath, (long long)optim_idx_shape(lb)[0], (long long)s->n,
             ipath);
        goto done;
    }
    if (s->n == 0 || s->features == 0) {
        fail("%s: no images", ipath);
        goto done;
    }
    s->x = malloc((size_t)optim_idx_numel(im) * sizeof *s->x);
    s->y = malloc((size_t)s->n * sizeof *s->y);
    if (!s->x || !s->y) {
        fail("out of memory for %s", ipath);
        goto done;
    }
    if (optim_idx_convert(im, OPTIM_F32, 1.0 / 255.0, s->x, &err) || optim_idx_convert(lb, OPTIM_I32, 1, s->y, &err)) {
        fail("%s", err.msg);
        goto done;
    }
    for (int64_t i = 0; i < s->n; i++)
        if (s->y[i] >= CLASSES) {
            fail("%s: label %d at index %lld, expected 0 to %d", lpath, (int)s->y[i], (long long)i, CLASSES - 1);
            goto done;
        }
    rc = 0;
done:
    optim_idx_free(im);
    optim_idx_free(lb);
    if (rc) split_free(s);
    return rc;
}

static int make_optimizer(const char *text, optim_optimizer **opt)
{
    optim_error err;
    char *json = NULL;
    size_t len = strlen(text);
    if (text[0] != '{' && text[0] != '"') {
        /* a bare class name: adam -> "adam" */
        for (size_t i = 0; i < len; i++)
            if (!(text[i] == '_' || (text[i] >= '0' && text[i] <= '9') || (text[i] >= 'a' && text[i] <= 'z') ||
                  (text[i] >= 'A' && text[i] <= 'Z')))
                return fail("--optimizer '%s': expected a JSON config {\"class_name\": ..., \"config\": {...}} or an "
                            "optimizer name",
                            text);
        if (!len) return fail("--optimizer '': expected a JSON config or an optimizer name");
        json = malloc(len + 3);
        if (!json) return fail("out of memory");
        snprintf(json, len + 3, "\"%s\"", text);
    }
    int rc = optim_from_json(opt, json ? json : text, &err);
    free(json);
    if (rc) return fail("--optimizer: %s", err.msg);
    return 0;
}

static int add_dense(optim_model *m, int64_t units, optim_activation act)
{
    optim_error err;
    optim_layer *l;
    optim_dense_options o = optim_dense_defaults(units);
    o.activation = act;
    if (optim_dense_create(&l, &o, &err)) return fail("%s", err.msg);
    if (optim_sequential_add(m, l)) {
        optim_layer_destroy(l);
        return fail("%s", optim_model_errmsg(m));
    }
    return 0;
}

/* Rank 0 prints the slot bytes every rank keeps (sharding divides them). */
static int report_slots(optim_group *g, optim_optimizer *opt)
{
    int64_t mine = 0;
    if (optim_group_slot_bytes(g, opt, &mine)) return fail("%s", optim_group_errmsg(g));
    double all = (double)mine;
    if (optim_group_sum(g, &all, 1)) {
        fail("%s", optim_group_errmsg(g));
        optim_group_abort(g, 1);
        return 1;
    }
    if (optim_group_rank(g) == 0)
        printf("optimizer slot bytes per rank: %lld on rank 0, %.0f on all %d ranks together\n", (long long)mine, all,
               optim_group_size(g));
    return 0;
}

int optim_cmd_train(int argc, char **argv)
{
    long long epochs = 2, batch = 128, seed = 0, steps = 0, threads = 0, timeout = 30;
    int epochs_given = 0, shard = 0;
    const char *save_path = NULL;
    const char *opt_text = "{\"class_name\": \"Adam\", \"config\": {}}", *dir = DEFAULT_DATA;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--shard-optimizer-state") == 0) {
            shard = 1;
            continue;
        }
        const char *names[] = {"--epochs", "--batch-size", "--optimizer", "--data", "--seed", "--steps", "--threads",
                               "--save-weights", "--replica-timeout"};
        const char *val = NULL;
        size_t k;
        for (k = 0; k < sizeof names / sizeof *names; k++) {
            size_t nl = strlen(names[k]);
            if (strcmp(a, names[k]) == 0) {
                if (i + 1 >= argc) return fail("%s needs a value (try 'optim train --help')", a);
                val = argv[++i];
                break;
            }
            if (strncmp(a, names[k], nl) == 0 && a[nl] == '=') {
                val = a + nl + 1;
                break;
            }
        }
        if (!val) return fail("unknown argument '%s' (try 'optim train --help')", a);
        int rc = 0;
        switch (k) {
        case 0: rc = parse_int("--epochs", val, 1, 1000000, &epochs), epochs_given = 1; break;
        case 1: rc = parse_int("--batch-size", val, 1, 1LL << 31, &batch); break;
        case 2: opt_text = val; break;
        case 3: dir = val; break;
        case 4: rc = parse_int("--seed", val, 0, INT64_MAX, &seed); break;
        case 5: rc = parse_int("--steps", val, 1, INT64_MAX, &steps); break;
        case 6: rc = parse_int("--threads", val, 1, 4096, &threads); break;
        case 7: save_path = val; break;
        default: rc = parse_int("--replica-timeout", val, 1, 86400, &timeout); break;
        }
        if (rc) return rc;
    }
    struct stat st;
    if (stat(dir, &st) != 0) return fail("--data '%s': %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return fail("--data '%s': not a directory", dir);

    optim_optimizer *opt = NULL;
    if (make_optimizer(opt_text, &opt)) return 1;
    if (threads) optim_set_num_threads(opt, (int)threads);
    char msg[OPTIM_ERRMSG_MAX];
    optim_group *g = NULL;
    if (optim_tool_group_open(shard, (double)timeout, &g, msg, sizeof msg) || (g && optim_group_attach(g, opt))) {
        if (g) snprintf(msg, sizeof msg, "%s", optim_group_errmsg(g));
        optim_group_destroy(g);
        optim_destroy(opt);
        return fail("%s", msg);
    }
    const int rank = g ? optim_group_rank(g) : 0, replicas = g ? optim_group_size(g) : 1;
    split train, test;
    if (load_split(dir, "train", &train)) {
        optim_group_destroy(g);
        optim_destroy(opt);
        return 1;
    }
    if (load_split(dir, "t10k", &test)) {
        split_free(&train);
        optim_group_destroy(g);
        optim_destroy(opt);
        return 1;
    }
    int rc = 1;
    optim_model *m = NULL;
    optim_callback *stop = NULL;
    int64_t steps_left = 0;
    optim_error err;
    optim_sequential_options so = optim_sequential_defaults();
    so.seed = (uint64_t)seed;
    if (optim_sequential_create(&m, &so, &err)) {
        fail("%s", err.msg);
        goto done;
    }
    if (add_dense(m, 256, OPTIM_ACT_RELU) || add_dense(m, 128, OPTIM_ACT_RELU) || add_dense(m, CLASSES, OPTIM_ACT_LINEAR))
        goto done;
    optim_loss loss = optim_loss_sparse_categorical_crossentropy(1);
    if (optim_model_compile(m, opt, &loss, OPTIM_METRIC_ACCURACY)) {
        fail("%s", optim_model_errmsg(m));
        goto done;
    }
    optim_tensor xtr = optim_tensor_make(OPTIM_F32, train.x, 2, (int64_t[]){train.n, train.features});
    optim_tensor ytr = optim_tensor_make(OPTIM_I32, train.y, 1, (int64_t[]){train.n});
    optim_tensor xte = optim_tensor_make(OPTIM_F32, test.x, 2, (int64_t[]){test.n, test.features});
    optim_tensor yte = optim_tensor_make(OPTIM_I32, test.y, 1, (int64_t[]){test.n});
    char *cfg = optim_serialize(opt);
    if (rank == 0)
        printf("Fashion-MNIST: %lld training and %lld test images of %lld pixels; replicas=%d%s; optimizer %s\n",
               (long long)train.n, (long long)test.n, (long long)train.features, replicas,
               g && optim_group_sharded(g) ? " (sharded optimizer state)" : "", cfg ? cfg : "?");
    optim_free(cfg);
    if (g && optim_model_distribute(m, g)) {
        fail("%s", optim_model_errmsg(m));
        goto done;
    }
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = epochs;
    fo.batch_size = batch;
    fo.seed = (uint64_t)seed;
    fo.out = rank == 0 ? stdout : NULL;
    if (steps) {
        int64_t per_epoch = (train.n + batch - 1) / batch;
        if (!epochs_given) fo.epochs = (steps + per_epoch - 1) / per_epoch;
        steps_left = steps;
        if (optim_tool_steps_callback(&steps_left, &stop, msg, sizeof msg)) {
            fail("%s", msg);
            goto done;
        }
        fo.callbacks = &stop;
        fo.n_callbacks = 1;
    }
    if (optim_model_fit(m, &xtr, &ytr, &fo, NULL)) {
        fail("fit (rank %d of %d): %s", rank, replicas, optim_model_errmsg(m));
        optim_group_abort(g, 1); /* the other ranks may wait in a collective */
        goto done;
    }
    if (g && report_slots(g, opt)) goto done;
    if (rank != 0) { /* output and files come from rank 0 */
        rc = 0;
        goto done;
    }
    if (save_path && optim_tool_save_weights(m, save_path, msg, sizeof msg)) {
        fail("%s", msg);
        goto done;
    }
    optim_logs res;
    double acc;
    if (optim_model_evaluate(m, &xte, &yte, batch, stdout, &res) || optim_logs_get(&res, "accuracy", &acc)) {
        fail("evaluate: %s", optim_model_errmsg(m));
        goto done;
    }
    printf("test_accuracy=%.4f\n", acc);
    fflush(stdout);
    rc = ferror(stdout) ? fail("write error on standard output") : 0;
done:
    optim_model_destroy(m);
    optim_callback_destroy(stop);
    optim_group_destroy(g);
    optim_destroy(opt);
    split_free(&train);
    split_free(&test);
    return rc;
}
