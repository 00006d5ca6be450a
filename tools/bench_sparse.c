/* optim bench --sparse ROWS COLS INDICES: one sparse step of each config on
 * a [ROWS, COLS] table (float32, or --dtype's type), INDICES random row indices (fixed seed,
 * about one in 16 a repeat of an earlier one, so duplicates are summed as
 * in an embedding's gradient), median of R runs after a warm-up step. The
 * same table's dense step (the gradient dense, same optimizer) is timed
 * first (which also faults in every page of the table and its slots, as
 * in a training run), so each line also gives the sparse step's time
 * relative to a dense one. gb_per_s and ratio count the whole table as a dense step
 * moves it (bytes_per_param per element): a lazy step, which touches only
 * the indexed rows, shows a ratio far above 1; the dense-equivalent walk
 * of Keras 3 moves the whole table and sits near the dense step's ratio. */
#define _POSIX_C_SOURCE 200809L
#include "bench_sparse.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "commands.h"
#include "optim/optim.h"

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct sparse_work {
    int64_t *idx;
    void *vals, *dense; /* in o->dtype */
    float *a, *b, *c;
    double *t, *cpu; /* per run: seconds, and the process's CPU seconds */
} sparse_work;

static void work_free(sparse_work *w)
{
    free(w->idx);
    free(w->vals);
    free(w->dense);
    free(w->a);
    free(w->b);
    free(w->c);
    free(w->t);
    free(w->cpu);
}

/* The floats of f in dtype dt, into dst (n elements). */
static void put(void *dst, optim_dtype dt, const float *f, size_t n)
{
    optim_convert(dst, dt, f, OPTIM_F32, (int64_t)n);
}

/* Indices, rows of values, and the dense gradient of the same table. */
static int work_make(sparse_work *w, const bench_sparse_opts *o)
{
    const size_t n = (size_t)o->indices, numel = (size_t)(o->rows * o->cols),
                 es = optim_dtype_size(o->dtype);
    const size_t nv = n * (size_t)o->cols, most = nv > numel ? nv : numel;
    float *f = malloc(most * sizeof *f);
    w->idx = malloc(n * sizeof *w->idx);
    w->vals = malloc(nv * es);
    w->dense = malloc(numel * es);
    w->t = malloc((size_t)o->runs * sizeof *w->t);
    w->cpu = malloc((size_t)o->runs * sizeof *w->cpu);
    if (!f || !w->idx || !w->vals || !w->dense || !w->t || !w->cpu) {
        free(f);
        return -1;
    }
    uint64_t seed = 20261201;
    for (size_t j = 0; j < n; j++) {
        const uint64_t r = splitmix(&seed);
        w->idx[j] = j % 16 == 15 ? w->idx[r % j] : (int64_t)(r % (uint64_t)o->rows);
    }
    for (size_t i = 0; i < nv; i++) f[i] = 1e-3f * (float)(splitmix(&seed) % 2001) - 1.0f;
    put(w->vals, o->dtype, f, nv);
    for (size_t i = 0; i < numel; i++) f[i] = 1e-3f * (float)(i % 7);
    put(w->dense, o->dtype, f, numel);
    free(f);
    return 0;
}

/* Median seconds of R steps of p after a warm-up, and into *cpu their
 * median CPU seconds; -1 on error. */
static double time_steps(optim_optimizer *opt, optim_grad_var *p, sparse_work *w, int runs,
                         double *cpu)
{
    if (optim_apply_gradients(opt, p, 1, 0)) return -1;
    for (int r = 0; r < runs; r++) {
        const double t0 = optim_bench_now(), c0 = optim_bench_cpu_now();
        if (optim_apply_gradients(opt, p, 1, 0)) return -1;
        w->t[r] = optim_bench_now() - t0;
        w->cpu[r] = optim_bench_cpu_now() - c0;
    }
    *cpu = optim_bench_median(w->cpu, runs);
    return optim_bench_median(w->t, runs);
}

static int report(const char *config, optim_optimizer *opt, const optim_var *x,
                  const bench_sparse_opts *o, double secs, double cpu, double dense_secs,
                  double triad)
{
    const int64_t numel = o->rows * o->cols;
    double bytes;
    const char *why;
    if (optim_bench_bytes(opt, x, &bytes, &why)) {
        fprintf(stderr, "optim bench: %s\n", why);
        return 1;
    }
    const double bw = bytes * (double)numel / secs / 1e9;
    if (!o->json) {
        printf("%-62s sparse %9.3f ms (cpu %.3f ms)  dense %8.3f ms  sparse/dense %.3f\n", config,
               1e3 * secs, 1e3 * cpu, 1e3 * dense_secs, secs / dense_secs);
        return 0;
    }
    printf("{\"config\": \"");
    for (const char *s = config; *s; s++) printf(*s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
    printf(
        "\", \"class_name\": \"%s\", \"elements\": %lld, \"dtype\": \"%s\", \"threads\": %d, "
        "\"bytes_per_param\": %.4g, \"median_seconds\": %.9g, \"gb_per_s\": %.4g, \"triad_gb_per_s\": %.4g, "
        "\"ratio\": %.4g, \"rows\": %lld, \"cols\": %lld, \"indices\": %lld, \"dense_median_seconds\": %.9g, "
        "\"cpu_median_seconds\": %.9g, \"isa\": \"%s\"}\n",
        optim_class_of(opt)->name, (long long)numel, optim_dtype_name(o->dtype),
        omp_get_max_threads(), bytes, secs, bw, triad, bw / triad, o->rows, o->cols, o->indices,
        dense_secs, cpu, optim_bench_isa());
    return 0;
}

/* One config: dense steps of the table, then sparse steps. */
static int bench_one(const char *config, const bench_sparse_opts *o, sparse_work *w, double triad)
{
    optim_error err;
    optim_var *x = NULL;
    optim_optimizer *opt = NULL;
    const int64_t shape[2] = {o->rows, o->cols}, vshape[2] = {o->indices, o->cols};
    int rc = 0;
    if (optim_from_json(&opt, config, &err) ||
        optim_var_create(&x, "table", o->dtype, 2, shape, NULL, &err)) {
        fprintf(stderr, "optim bench: %s\n", err.msg);
        rc = 1;
    } else {
        optim_grad_var ps = {
            optim_grad_sparse(w->idx, o->indices, optim_tensor_make(o->dtype, w->vals, 2, vshape)),
            x};
        optim_grad_var pd = {optim_grad_dense(optim_tensor_make(o->dtype, w->dense, 2, shape)), x};
        /* Dense first: it touches every page of the table and its slots, so
         * the sparse steps run on memory a training run has long faulted in. */
        double cpu = 0;
        const double dense = time_steps(opt, &pd, w, o->runs, &cpu);
        const double secs = dense < 0 ? -1 : time_steps(opt, &ps, w, o->runs, &cpu);
        if (secs < 0) {
            fprintf(stderr, "optim bench: %s\n", optim_errmsg(opt));
            rc = 1;
        } else {
            rc = report(config, opt, x, o, secs, cpu, dense, triad);
        }
    }
    optim_destroy(opt);
    optim_var_destroy(x);
    return rc;
}

int optim_bench_sparse(const char *const *configs, int n, const bench_sparse_opts *o)
{
    sparse_work w = {0};
    const int64_t numel = o->rows * o->cols;
    int rc = work_make(&w, o);
    if (!rc) {
        w.a = malloc((size_t)numel * sizeof *w.a);
        w.b = malloc((size_t)numel * sizeof *w.b);
        w.c = malloc((size_t)numel * sizeof *w.c);
        rc = w.a && w.b && w.c ? 0 : -1;
        for (int64_t i = 0; !rc && i < numel; i++) w.a[i] = 0, w.b[i] = 1, w.c[i] = 2;
    }
    if (rc) {
        work_free(&w);
        fprintf(stderr, "optim bench: out of memory for a %lld x %lld table\n", o->rows, o->cols);
        return 1;
    }
    const double triad = optim_bench_triad(w.a, w.b, w.c, numel, o->runs, w.t);
    free(w.a), free(w.b), free(w.c);
    w.a = w.b = w.c = NULL;
    if (!o->json)
        printf("triad: %.1f GB/s; sparse step: %lld x %lld %s table, %lld indices, %d threads\n",
               triad, o->rows, o->cols, optim_dtype_name(o->dtype), o->indices,
               omp_get_max_threads());
    for (int k = 0; k < n && !rc; k++) rc = bench_one(configs[k], o, &w, triad);
    work_free(&w);
    return rc;
}
