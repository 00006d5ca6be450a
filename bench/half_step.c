/* Where the time of a half-precision step goes (docs/performance.md,
 * docs/half-precision.md):
 *
 *     build/bench_half_step [RUNS]        (default 7)
 *
 * On one thread, in CPU time (the machine is shared: wall time measures the
 * other tenants), over a 512-element block that stays in the L1 cache (the
 * pipeline's conversion block): the float32 -> F16/BF16 rounding and the
 * F16/BF16 -> float32 widening per element, and one Keras 3 Adam step per
 * element on float32, BF16 and F16 variables of 65536 elements (in cache:
 * the compute cost, not the memory cost). Prints one JSON line per
 * measurement with the median of RUNS runs. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"
#include "optim/optim.h"

#define BLOCK 512
#define N 65536

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double median(double *t, int runs)
{
    qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
    return t[runs / 2];
}

/* ns per element of converting BLOCK elements from `from` to `to`. */
static double convert_ns(optim_dtype to, void *dst, optim_dtype from, const void *src, int runs)
{
    double t[64];
    const int reps = 20000;
    for (int r = 0; r < runs; r++) {
        double t0 = cpu_now();
        for (int k = 0; k < reps; k++) {
            optim_convert(dst, to, src, from, BLOCK);
            __asm__ volatile("" : : "r"(dst) : "memory");
        }
        t[r] = (cpu_now() - t0) / reps / BLOCK * 1e9;
    }
    return median(t, runs);
}

/* ns per element of one Adam step on an N-element variable of dtype dt. */
static double adam_ns(optim_dtype dt, int runs)
{
    static float g32[N];
    static uint16_t g16[N];
    for (int i = 0; i < N; i++) g32[i] = 1e-3f * (float)(i % 7) - 2e-3f;
    optim_convert(g16, dt == OPTIM_F32 ? OPTIM_BF16 : dt, g32, OPTIM_F32, N);
    int64_t n = N;
    optim_var *w = NULL;
    optim_optimizer *opt = NULL;
    optim_error err;
    if (optim_var_create(&w, "w", dt, 1, &n, NULL, &err) ||
        optim_from_json(&opt, "\"adam\"", &err)) {
        fprintf(stderr, "bench_half_step: %s\n", err.msg);
        exit(1);
    }
    optim_set_num_threads(opt, 1);
    optim_grad_var p = {
        optim_grad_dense(optim_tensor_make(dt, dt == OPTIM_F32 ? (void *)g32 : (void *)g16, 1, &n)),
        w};
    double t[64];
    const int reps = 50;
    optim_apply_gradients(opt, &p, 1, 0);
    for (int r = 0; r < runs; r++) {
        double t0 = cpu_now();
        for (int k = 0; k < reps; k++) optim_apply_gradients(opt, &p, 1, 0);
        t[r] = (cpu_now() - t0) / reps / N * 1e9;
    }
    optim_destroy(opt);
    optim_var_destroy(w);
    return median(t, runs);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 7;
    if (runs < 1 || runs > 64) {
        fprintf(stderr, "usage: bench_half_step [RUNS 1..64]\n");
        return 1;
    }
    static float f[BLOCK];
    static uint16_t h[BLOCK];
    for (int i = 0; i < BLOCK; i++) f[i] = 0.37f * (float)i - 50.0f;
    const optim_dtype half[2] = {OPTIM_BF16, OPTIM_F16};
    for (int d = 0; d < 2; d++) {
        printf("{\"what\": \"round f32 to %s\", \"ns_per_element\": %.3f}\n",
               optim_dtype_name(half[d]), convert_ns(half[d], h, OPTIM_F32, f, runs));
        printf("{\"what\": \"widen %s to f32\", \"ns_per_element\": %.3f}\n",
               optim_dtype_name(half[d]), convert_ns(OPTIM_F32, f, half[d], h, runs));
    }
    printf("{\"what\": \"Adam step, float32, in cache\", \"ns_per_element\": %.3f}\n",
           adam_ns(OPTIM_F32, runs));
    for (int d = 0; d < 2; d++)
        printf("{\"what\": \"Adam step, %s, in cache\", \"ns_per_element\": %.3f}\n",
               optim_dtype_name(half[d]), adam_ns(half[d], runs));
    return 0;
}
