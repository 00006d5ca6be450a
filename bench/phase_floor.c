/* The compute floor of Lamb and Adafactor steps (docs/performance.md,
 * "Lamb and Adafactor"):
 *
 *     build/bench_phase_floor [RUNS]        (default 7)
 *
 * On one thread, in CPU time (the machine is shared), with the data in
 * cache. First the divide/square-root unit: ns per float32 element of a
 * division, a square root, a float -> double -> float round trip, a division
 * followed by the round trip or by multiplications and additions (which of
 * them share the unit: the sum of the two times, or the division's), Adam's
 * update w - a * m / (sqrt(v) + eps) (one division, one root) and Lamb's
 * u = (m / bc1) / (sqrt(v / bc2) + eps) (three divisions and a root; the
 * same with the two constant divisions done as double products, which
 * round the same for normal results but convert to double and back; two
 * once 1 - beta_1^t rounds to 1 in float32, at t >= 165 for 0.9; one once
 * 1 - beta_2^t does too, t >= 17320 for 0.999), over 2048-element arrays.
 * Then one library step per element on 16384 float32 parameters, the
 * median of 100 steps: Adam, Lamb from three starting iterations, and
 * Adafactor (no update clipping: d = 1). Each step's floor is what its
 * kernels must divide and take roots of, at the speed just measured: Adam
 * one Adam update; Lamb two u's (pass 1 for the norm, pass 2 to apply it);
 * Adafactor two divisions and two roots (u = g / sqrt(v) in each pass);
 * plus, for both, one float -> double conversion per element (the sums of
 * squares add doubles), which on this machine's cores runs on the same unit
 * as divisions and roots (the round trip costs one conversion per element
 * too). Prints one JSON line per measurement (median of RUNS) and, for the
 * steps, floor / step. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"
#include "optim/optim.h"

#define K 2048 /* elements per kernel call (24 KB: L1) */
#define N 16384 /* parameters per step (Lamb: 256 KB with g, m, v: L2) */

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float A[K], B[K], W[K];

static void k_div(void)
{
    for (int i = 0; i < K; i++) W[i] = A[i] / B[i];
}
static void k_sqrt(void)
{
    for (int i = 0; i < K; i++) W[i] = sqrtf(B[i]);
}
static double third = 1.0 / 3; /* inexact in float: the product needs double */
static void k_cvt(void)
{
    for (int i = 0; i < K; i++) W[i] = (float)((double)A[i] * third);
}
static void k_div_cvt(void)
{
    for (int i = 0; i < K; i++) W[i] = (float)((double)(A[i] / B[i]) * third);
}
static void k_div_mul(void)
{
    for (int i = 0; i < K; i++) W[i] = (A[i] / B[i]) * 1.5f + (A[i] * B[i] + 0.5f) * (B[i] * 3.0f);
}
static void k_adam(void)
{
    for (int i = 0; i < K; i++) W[i] = W[i] - 1e-3f * A[i] / (sqrtf(B[i]) + 1e-7f);
}
static void k_lamb_u(void)
{
    for (int i = 0; i < K; i++) W[i] = (A[i] / 0.1f) / (sqrtf(B[i] / 0.001f) + 1e-7f);
}
static double rb1 = 1 / (double)0.1f, rb2 = 1 / (double)0.001f;
static void k_lamb_u_recip(void) /* the two constant divisions as double products */
{
    for (int i = 0; i < K; i++)
        W[i] = (float)((double)A[i] * rb1) / (sqrtf((float)((double)B[i] * rb2)) + 1e-7f);
}
static void k_lamb_u1(void) /* 1 - beta_1^t rounded to 1 */
{
    for (int i = 0; i < K; i++) W[i] = A[i] / (sqrtf(B[i] / 0.001f) + 1e-7f);
}
static void k_lamb_u2(void) /* both rounded to 1 */
{
    for (int i = 0; i < K; i++) W[i] = A[i] / (sqrtf(B[i]) + 1e-7f);
}

/* ns per element of fn over K elements, median of runs. */
static double kernel_ns(void (*fn)(void), int runs)
{
    double t[64];
    const int reps = 4000;
    for (int r = 0; r < runs; r++) {
        double t0 = cpu_now();
        for (int k = 0; k < reps; k++) {
            fn();
            __asm__ volatile("" : : : "memory");
        }
        t[r] = (cpu_now() - t0) / reps / K * 1e9;
    }
    return bench_median(t, runs);
}

/* ns per element of one step of `json` on N float32 parameters, starting at
 * iterations `it`: the median of 100 steps, median of runs. */
static double step_ns(const char *json, int64_t it, int runs)
{
    static float w[N], g[N];
    double t[64], s[100];
    const int64_t n = N;
    for (int i = 0; i < N; i++)
        w[i] = sinf(0.001f * (float)i), g[i] = 1e-3f * (float)(i % 7) - 2e-3f;
    optim_optimizer *opt;
    optim_var *var;
    optim_error err;
    if (optim_from_json(&opt, json, &err) ||
        optim_var_create(&var, "w", OPTIM_F32, 1, &n, w, &err)) {
        fprintf(stderr, "bench_phase_floor: %s\n", err.msg);
        exit(1);
    }
    optim_set_num_threads(opt, 1);
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, &n)), var};
    for (int r = 0; r < runs; r++) {
        optim_set_iterations(opt, it);
        optim_apply_gradients(opt, &p, 1, 0); /* slots, and every step after it timed alike */
        for (int k = 0; k < 100; k++) {
            double t0 = cpu_now();
            if (optim_apply_gradients(opt, &p, 1, 0)) {
                fprintf(stderr, "bench_phase_floor: %s\n", optim_errmsg(opt));
                exit(1);
            }
            s[k] = cpu_now() - t0;
        }
        t[r] = bench_median(s, 100) / N * 1e9;
    }
    optim_destroy(opt);
    optim_var_destroy(var);
    return bench_median(t, runs);
}

static void line(const char *name, double ns, double floor_ns)
{
    if (floor_ns > 0)
        printf(
            "{\"name\": \"%s\", \"ns_per_element\": %.4f, \"floor_ns\": %.4f, \"floor_over_step\": %.3f}\n",
            name, ns, floor_ns, floor_ns / ns);
    else printf("{\"name\": \"%s\", \"ns_per_element\": %.4f}\n", name, ns);
}

int main(int argc, char **argv)
{
    const int runs = argc > 1 ? atoi(argv[1]) : 7;
    if (runs < 1 || runs > 64) {
        fprintf(stderr, "usage: bench_phase_floor [RUNS]   (1..64, default 7)\n");
        return 2;
    }
    for (int i = 0; i < K; i++) A[i] = 0.01f * (float)i - 1.0f, B[i] = 0.001f * (float)i + 0.1f;
    const double adam = kernel_ns(k_adam, runs), u = kernel_ns(k_lamb_u, runs);
    const double u1 = kernel_ns(k_lamb_u1, runs), u2 = kernel_ns(k_lamb_u2, runs),
                 cv = kernel_ns(k_cvt, runs);
    line("division", kernel_ns(k_div, runs), 0);
    line("square root", kernel_ns(k_sqrt, runs), 0);
    line("float -> double * c -> float", cv, 0);
    line("division, then the round trip", kernel_ns(k_div_cvt, runs), 0);
    line("division and 4 multiplications, 2 additions", kernel_ns(k_div_mul, runs), 0);
    line("Adam update (1 division, 1 root)", adam, 0);
    line("Lamb u (3 divisions, 1 root)", u, 0);
    line("Lamb u, divisions by constants as double products", kernel_ns(k_lamb_u_recip, runs), 0);
    line("Lamb u, 1 - beta_1^t = 1 (2 divisions, 1 root)", u1, 0);
    line("Lamb u, both = 1 (1 division, 1 root)", u2, 0);
    line("step: Adam", step_ns("\"adam\"", 0, runs), adam);
    line("step: Lamb, t = 2..101", step_ns("\"lamb\"", 0, runs), 2 * u + cv);
    line("step: Lamb, t = 1002..1101", step_ns("\"lamb\"", 1000, runs), 2 * u1 + cv);
    line("step: Lamb, t = 20002..20101", step_ns("\"lamb\"", 20000, runs), 2 * u2 + cv);
    line("step: Adafactor (d = 1)", step_ns("\"adafactor\"", 0, runs), 2 * u2 + cv);
    return 0;
}
