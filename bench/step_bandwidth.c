/* step_bandwidth: one optimizer step on a 16M-element float32 variable,
 * as effective memory bandwidth (bytes the rule must move per parameter /
 * time), against an OpenMP triad measured in the same run (16 bytes per
 * element counting the write-allocate). Median of 7 runs each.
 *
 *     build/bench_step_bandwidth                 # the built-in list
 *     build/bench_step_bandwidth CONFIG BYTES... # your own pairs
 *
 * A ratio near or above 1 means the step runs at the memory limit (a fused
 * in-place update avoids the write-allocate the triad pays). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "optim/optim.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

#define RUNS 7

static const char *const DEFAULTS[] = {
    "\"sgd\"", "12",
    "{\"class_name\": \"SGD\", \"config\": {\"momentum\": 0.9}}", "20",
    "\"adam\"", "28",
    "{\"class_name\": \"Adam\", \"config\": {\"is_legacy_optimizer\": true}}", "28",
    "\"adamw\"", "28",
    "\"adamax\"", "28",
    "\"nadam\"", "28",
    "\"rmsprop\"", "20",
    "\"adagrad\"", "20",
    "\"adadelta\"", "28",
    "\"ftrl\"", "28",
    "\"lion\"", "20",
    "\"lamb\"", "28",
    "\"adafactor\"", "24",
    "\"lazyadam\"", "28",
};

int main(int argc, char **argv)
{
    const int64_t n = (int64_t)1 << 24;
    const char *const *list = (const char *const *)argv + 1;
    int count = argc - 1;
    if (count == 0) {
        list = DEFAULTS;
        count = (int)(sizeof DEFAULTS / sizeof *DEFAULTS);
    }
    if (count % 2) {
        fprintf(stderr, "usage: %s [CONFIG BYTES_PER_PARAM]...\n", argv[0]);
        return 2;
    }
    float *g = malloc((size_t)n * sizeof *g), *a = malloc((size_t)n * sizeof *a);
    float *b = malloc((size_t)n * sizeof *b), *c = malloc((size_t)n * sizeof *c);
    if (!g || !a || !b || !c) return 1;
    for (int64_t i = 0; i < n; i++) g[i] = 1e-3f * (float)(i % 7), a[i] = 1, b[i] = 2, c[i] = 0;
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now();
#pragma omp parallel for
        for (int64_t i = 0; i < n; i++) c[i] = a[i] + 0.5f * b[i];
        t[r] = now() - t0;
    }
    qsort(t, RUNS, sizeof *t, cmp);
    const double triad = 16.0 * (double)n / t[RUNS / 2] / 1e9;
    printf("triad: %.1f GB/s (16 B/element)\n", triad);
    for (int k = 0; k < count; k += 2) {
        optim_error err;
        optim_var *w;
        optim_optimizer *opt;
        if (optim_var_create(&w, "w", OPTIM_F32, 1, &n, NULL, &err) ||
            optim_from_json(&opt, list[k], &err)) {
            fprintf(stderr, "%s: %s\n", list[k], err.msg);
            return 1;
        }
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, &n)), w};
        if (optim_apply_gradients(opt, &p, 1, 0)) { /* warm-up: slots, pages */
            fprintf(stderr, "%s: %s\n", list[k], optim_errmsg(opt));
            return 1;
        }
        for (int r = 0; r < RUNS; r++) {
            double t0 = now();
            optim_apply_gradients(opt, &p, 1, 0);
            t[r] = now() - t0;
        }
        qsort(t, RUNS, sizeof *t, cmp);
        double bytes = atof(list[k + 1]), bw = bytes * (double)n / t[RUNS / 2] / 1e9;
        printf("%-62s %6.1f GB/s  %4.0f B/param  %.2f x triad\n", list[k], bw, bytes, bw / triad);
        optim_destroy(opt);
        optim_var_destroy(w);
    }
    free(g);
    free(a);
    free(b);
    free(c);
    return 0;
}
