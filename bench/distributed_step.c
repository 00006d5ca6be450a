/* Step time across replicas (docs/distributed.md). Run it alone or under
 * `mpirun -np N`:
 *
 *   bench_distributed_step [--mode step|fit] [--shard] [--steps S] [--runs R]
 *
 * step: optim_group_apply_gradients of Adam on the variables of optim
 *       train's MLP (784-256-128-10, 235,146 float32 parameters);
 * fit:  a whole training step of that MLP (forward, backward, aggregate,
 *       update) by optim_model_fit under the group, global batch 128 on
 *       synthetic data.
 * Each run times S steps; rank 0 prints one JSON line with the median
 * seconds per step over R runs, the bytes each rank sends per step by the
 * comms model of docs/distributed.md, and `ratio`: the median over the
 * median of the same work in one process without a group (measured in the
 * same run on rank 0 while the other ranks wait). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, CLOCK_MONOTONIC */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "optim/distribute.h"
#include "optim/optim.h"

#define BATCH 128

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_distributed_step: %s: %s\n", what, msg);
    exit(1);
}

static optim_model *mlp(optim_optimizer *opt)
{
    optim_error err;
    optim_model *m;
    if (optim_sequential_create(&m, NULL, &err)) die("model", err.msg);
    const int64_t units[3] = {256, 128, 10};
    for (int i = 0; i < 3; i++) {
        optim_dense_options o = optim_dense_defaults(units[i]);
        o.activation = i < 2 ? OPTIM_ACT_RELU : OPTIM_ACT_LINEAR;
        o.seed = i + 1;
        optim_layer *l;
        if (optim_dense_create(&l, &o, &err) || optim_sequential_add(m, l)) die("layer", err.msg);
    }
    optim_loss loss = optim_loss_sparse_categorical_crossentropy(1);
    if (optim_model_compile(m, opt, &loss, OPTIM_METRIC_ACCURACY))
        die("compile", optim_model_errmsg(m));
    if (optim_model_build(m, 2, (int64_t[]){BATCH, 784})) die("build", optim_model_errmsg(m));
    return m;
}

typedef struct setup {
    optim_group *g; /* NULL: one process, no group */
    optim_optimizer *opt;
    optim_model *m;
    optim_var *vars[6];
    float *grads[6];
    optim_grad_var pairs[6];
    float *x;
    int32_t *y;
    int64_t samples;
} setup;

static void setup_make(setup *s, optim_group *g, int steps)
{
    optim_error err;
    memset(s, 0, sizeof *s);
    s->g = g;
    if (optim_from_json(&s->opt, "\"adam\"", &err)) die("optimizer", err.msg);
    if (g && optim_group_attach(g, s->opt)) die("attach", optim_group_errmsg(g));
    s->m = mlp(s->opt);
    if (g && optim_model_distribute(s->m, g)) die("distribute", optim_model_errmsg(s->m));
    size_t n = optim_model_trainable_variables(s->m, s->vars, 6);
    for (size_t i = 0; i < n; i++) {
        int64_t k = optim_var_numel(s->vars[i]);
        s->grads[i] = malloc((size_t)k * sizeof(float));
        for (int64_t j = 0; j < k; j++)
            s->grads[i][j] = (float)sin(0.1 * (double)j + (double)i) * 1e-3f;
        optim_tensor t = optim_var_tensor(s->vars[i]);
        t.data = s->grads[i];
        s->pairs[i] = (optim_grad_var){optim_grad_dense(t), s->vars[i]};
    }
    s->samples = (int64_t)steps * BATCH;
    s->x = malloc((size_t)s->samples * 784 * sizeof *s->x);
    s->y = malloc((size_t)s->samples * sizeof *s->y);
    for (int64_t i = 0; i < s->samples * 784; i++)
        s->x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
    for (int64_t i = 0; i < s->samples; i++) s->y[i] = (int32_t)(i % 10);
}

static void setup_free(setup *s)
{
    optim_model_destroy(s->m);
    if (s->g) optim_group_detach(s->g, s->opt);
    optim_destroy(s->opt);
    for (int i = 0; i < 6; i++) free(s->grads[i]);
    free(s->x);
    free(s->y);
}

/* Seconds per step of `steps` steps. */
static double time_steps(setup *s, int fit, int steps)
{
    double t0 = now();
    if (fit) {
        optim_tensor x = optim_tensor_make(OPTIM_F32, s->x, 2, (int64_t[]){s->samples, 784});
        optim_tensor y = optim_tensor_make(OPTIM_I32, s->y, 1, (int64_t[]){s->samples});
        optim_fit_options fo = optim_fit_defaults();
        fo.batch_size = BATCH;
        fo.verbose = 0;
        if (optim_model_fit(s->m, &x, &y, &fo, NULL)) die("fit", optim_model_errmsg(s->m));
    } else {
        for (int k = 0; k < steps; k++) {
            int rc = s->g ? optim_group_apply_gradients(s->g, s->opt, s->pairs, 6, 0)
                          : optim_apply_gradients(s->opt, s->pairs, 6, 0);
            if (rc) die("step", s->g ? optim_group_errmsg(s->g) : optim_errmsg(s->opt));
        }
    }
    return (now() - t0) / steps;
}

static void sync(optim_group *g)
{
    double v = 0;
    if (optim_group_sum(g, &v, 1)) die("sync", optim_group_errmsg(g));
}

int main(int argc, char **argv)
{
    int fit = 0, shard = 0, steps = 20, runs = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mode") && i + 1 < argc) fit = !strcmp(argv[++i], "fit");
        else if (!strcmp(argv[i], "--shard")) shard = 1;
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else die("usage", "[--mode step|fit] [--shard] [--steps S] [--runs R]");
    }
    if (steps < 1 || runs < 1 || runs > 100) die("usage", "--steps >= 1, --runs 1..100");
    optim_error err;
    optim_group *g;
    optim_group_options go = optim_group_defaults();
    go.shard_optimizer_state = shard;
    int rc = getenv("OMPI_COMM_WORLD_SIZE") ? optim_group_create_mpi(&g, NULL, &go, &err)
                                            : optim_group_create_single(&g, &go, &err);
    if (rc) die("group", err.msg);
    int rank = optim_group_rank(g), size = optim_group_size(g);
    double t[100], peer[100];
    setup s, p;
    setup_make(&s, g, steps);
    time_steps(&s, fit, steps); /* warm-up: slots, tapes */
    for (int r = 0; r < runs; r++) {
        sync(g);
        t[r] = time_steps(&s, fit, steps);
        sync(g);
    }
    if (rank == 0) {
        setup_make(&p, NULL, steps);
        time_steps(&p, fit, steps);
        for (int r = 0; r < runs; r++) peer[r] = time_steps(&p, fit, steps);
        setup_free(&p);
    }
    int64_t params = 0;
    for (int i = 0; i < 6; i++) params += optim_var_numel(s.vars[i]);
    int64_t slot_bytes = 0;
    if (optim_group_slot_bytes(g, s.opt, &slot_bytes)) die("slots", optim_group_errmsg(g));
    sync(g);
    if (rank == 0) {
        /* reduce-scatter + all-gather (= all-reduce): each sends 2 (N-1)/N of the gradient bytes */
        double sent = 2.0 * (size - 1) / size * (double)params * sizeof(float);
        double med = bench_median(t, runs), pm = bench_median(peer, runs);
        printf(
            "{\"mode\": \"%s\", \"ranks\": %d, \"sharded\": %s, \"params\": %lld, \"steps\": %d, \"runs\": %d, "
            "\"median_seconds\": %.6g, \"one_process_seconds\": %.6g, \"ratio\": %.3f, "
            "\"bytes_sent_per_rank\": %.0f, \"slot_bytes_rank0\": %lld}\n",
            fit ? "fit" : "step", size, shard ? "true" : "false", (long long)params, steps, runs,
            med, pm, med / pm, sent, (long long)slot_bytes);
    }
    setup_free(&s);
    optim_group_destroy(g);
    return 0;
}
