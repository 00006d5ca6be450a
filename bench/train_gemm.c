/* An epoch of `optim train` against the same epoch's GEMMs alone, in one run.
 *
 *   build/bench_train_gemm OPTIM [EPOCHS [RUNS]]
 *
 * OPTIM is the optim command. Each of RUNS rounds (default 1): half of
 * EPOCHS (default 5) epochs of GEMMs alone, then `OPTIM train --epochs
 * EPOCHS --history CSV` in a child with this process's environment, then
 * the other half of the EPOCHS epochs of GEMMs alone. An epoch of GEMMs is
 * the cblas_sgemm calls of one epoch of the default 784-256-128-10 MLP,
 * with the tape's shapes, transposes and betas (src/tape/matmul.c): 469
 * batches (468 of 128 rows, one of 96), each three forward products, three
 * weight gradients (x^T dY) and two input gradients (dY W^T). Prints, per
 * round, the median epoch of each and their ratio (epoch / GEMMs), then the
 * median ratio over the rounds, and each round's test accuracy.
 *
 * Thread counts match the command's: OpenMP's (OMP_NUM_THREADS) for the
 * OpenMP build of OpenBLAS; one BLAS thread for any other build unless
 * OPENBLAS_NUM_THREADS is set (tools/main.c). */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

#define TRAIN_N 60000
#define BATCH 128
#define MAX_EPOCHS 100
static const int dims[4] = {784, 256, 128, 10};

/* Row-major C[m, n] = op(X) op(Y) + beta C, as the tape's gemm calls it. */
static void gemm(int tx, int ty, int m, int n, int k, const float *x, const float *y, float beta,
                 float *c)
{
    cblas_sgemm(CblasRowMajor, tx ? CblasTrans : CblasNoTrans, ty ? CblasTrans : CblasNoTrans, m, n,
                k, 1.0f, x, tx ? m : k, y, ty ? k : n, beta, c, n);
}

typedef struct net {
    float *act[4]; /* act[0] the batch [BATCH, 784], act[l] layer l's output [BATCH, dims[l]] */
    float *dact[4]; /* their gradients (dact[0] unused: the batch is a constant) */
    float *w[3], *dw[3];
} net;

/* One batch of b rows: the forward products, then backward from the top. */
static void batch_gemms(net *m, int b)
{
    for (int l = 0; l < 3; l++)
        gemm(0, 0, b, dims[l + 1], dims[l], m->act[l], m->w[l], 0.0f, m->act[l + 1]);
    for (int l = 2; l >= 0; l--) {
        if (l > 0) gemm(0, 1, b, dims[l], dims[l + 1], m->dact[l + 1], m->w[l], 1.0f, m->dact[l]);
        gemm(1, 0, dims[l], dims[l + 1], b, m->act[l], m->dact[l + 1], 1.0f, m->dw[l]);
    }
}

static double gemm_epoch(net *m)
{
    double t0 = omp_get_wtime();
    for (int done = 0; done < TRAIN_N; done += BATCH)
        batch_gemms(m, TRAIN_N - done < BATCH ? TRAIN_N - done : BATCH);
    return omp_get_wtime() - t0;
}

static float *filled(size_t n, unsigned *seed)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; p && i < n; i++)
        p[i] = (float)rand_r(seed) / (float)RAND_MAX * 0.02f - 0.01f;
    return p;
}

static int net_init(net *m)
{
    unsigned seed = 1;
    memset(m, 0, sizeof *m);
    int ok = 1;
    for (int l = 0; l < 4; l++) {
        ok &= (m->act[l] = filled((size_t)BATCH * dims[l], &seed)) != NULL;
        ok &= (m->dact[l] = filled((size_t)BATCH * dims[l], &seed)) != NULL;
    }
    for (int l = 0; l < 3; l++) {
        ok &= (m->w[l] = filled((size_t)dims[l] * dims[l + 1], &seed)) != NULL;
        ok &= (m->dw[l] = filled((size_t)dims[l] * dims[l + 1], &seed)) != NULL;
    }
    return ok;
}

static void net_free(net *m)
{
    for (int l = 0; l < 4; l++) free(m->act[l]), free(m->dact[l]);
    for (int l = 0; l < 3; l++) free(m->w[l]), free(m->dw[l]);
}

/* `optim train --epochs E --history DIR/h.csv > DIR/out`; epoch times into
 * ep (the history's seconds are cumulative), the test accuracy into acc.
 * Returns the number of epochs read, -1 on failure. */
static int train_run(const char *optim, int epochs, const char *dir, double *ep, double *acc)
{
    char csv[512], out[512], e[32], line[1024];
    snprintf(csv, sizeof csv, "%s/h.csv", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(e, sizeof e, "%d", epochs);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(out, "w", stdout)) _exit(127);
        execl(optim, optim, "train", "--epochs", e, "--history", csv, (char *)NULL);
        _exit(127);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        return -1;
    FILE *f = fopen(csv, "r");
    int n = 0;
    double prev = 0, s;
    while (f && fgets(line, sizeof line, f) && n < MAX_EPOCHS) {
        const char *last = strrchr(line, ',');
        if (last && sscanf(last + 1, "%lf", &s) == 1 && strncmp(line, "optimizer,", 10) != 0) {
            ep[n++] = s - prev;
            prev = s;
        }
    }
    if (f) fclose(f);
    *acc = -1;
    if ((f = fopen(out, "r"))) {
        while (fgets(line, sizeof line, f)) sscanf(line, "test_accuracy=%lf", acc);
        fclose(f);
    }
    return n == epochs && *acc >= 0 ? n : -1;
}

/* One round; its ratio (median epoch / median GEMM epoch), -1 on failure. */
static double round_ratio(net *m, const char *optim, int epochs, const char *dir)
{
    double g[MAX_EPOCHS], ep[MAX_EPOCHS], acc;
    const int before = (epochs + 1) / 2;
    for (int i = 0; i < before; i++) g[i] = gemm_epoch(m);
    int n = train_run(optim, epochs, dir, ep, &acc);
    if (n < 0) {
        fprintf(
            stderr,
            "bench_train_gemm: %s train --epochs %d failed (or printed no history/test_accuracy)\n",
            optim, epochs);
        return -1;
    }
    for (int i = before; i < epochs; i++) g[i] = gemm_epoch(m);
    double me = bench_median(ep, n), mg = bench_median(g, epochs);
    printf(
        "epoch %.3f s (median of %d), GEMMs alone %.3f s (median of %d), ratio %.2f, test_accuracy=%.4f\n",
        me, n, mg, epochs, me / mg, acc);
    return me / mg;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: bench_train_gemm OPTIM [EPOCHS [RUNS]]\n");
        return 2;
    }
    const int epochs = argc > 2 ? atoi(argv[2]) : 5, runs = argc > 3 ? atoi(argv[3]) : 1;
    if (epochs < 1 || epochs > MAX_EPOCHS || runs < 1 || runs > 100) {
        fprintf(stderr, "bench_train_gemm: EPOCHS must be 1..%d and RUNS 1..100\n", MAX_EPOCHS);
        return 2;
    }
    const int openmp = openblas_get_parallel() == 2;
    if (!openmp && !getenv("OPENBLAS_NUM_THREADS"))
        openblas_set_num_threads(1); /* as the command does */
    printf("OpenBLAS %s (%s build), %d OpenMP threads, BLAS threads %d\n", openblas_get_config(),
           openmp ? "OpenMP" : "not the OpenMP", omp_get_max_threads(), openblas_get_num_threads());
    char dir[] = "/tmp/bench_train_gemm.XXXXXX";
    net m;
    if (!mkdtemp(dir) || !net_init(&m)) {
        fprintf(stderr, "bench_train_gemm: out of memory or no temporary directory\n");
        return 1;
    }
    double r[100];
    int rc = 0;
    for (int i = 0; i < runs && !rc; i++) rc = (r[i] = round_ratio(&m, argv[1], epochs, dir)) < 0;
    if (!rc) printf("median ratio over %d runs: %.2f\n", runs, bench_median(r, runs));
    char path[512];
    snprintf(path, sizeof path, "%s/h.csv", dir), remove(path);
    snprintf(path, sizeof path, "%s/out", dir), remove(path);
    remove(dir);
    net_free(&m);
    return rc;
}
