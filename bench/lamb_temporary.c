/* Would a temporary holding Lamb's update u reach 0.8 of the triad?
 * (docs/performance.md, "Lamb and Adafactor")
 *
 *     OMP_NUM_THREADS=2 build/bench_lamb_temporary [N [RUNS]]   (defaults 50000000, 9)
 *
 * docs/architecture.md rules out temporaries proportional to the variable,
 * so the library's Lamb computes u = (m / bc1) / (sqrt(v / bc2) + eps)
 * twice: pass 1 for the norm ||u||, pass 2 to apply it. This program times,
 * on N float32 parameters and all OpenMP threads, in the same process:
 *
 *   - the triad a = b + 0.5 c (16 B per element with the write-allocate),
 *   - the library's Keras 3 Lamb step (optim_apply_gradients),
 *   - "recompute": the same two passes written plainly (static halves of
 *     the variable per thread, double sums in four lanes), and
 *   - "temporary": pass 1 also stores u in an N-float array, pass 2 reads
 *     it (w = w - r * u): half the divisions and roots, four bytes more
 *     written in pass 1, four read in pass 2 instead of m and v's eight,
 *
 * each from step 10 (both bias corrections below 1: three divisions and a
 * root per u) and from step 20000 (both rounded to 1 in float32: one
 * division, one root). N is rounded down to whole blocks of 256. Prints, per case, the median step time and the
 * ratio to the triad with the 28 bytes per parameter optim bench counts for
 * Lamb. The two plain versions follow the library's arithmetic element for
 * element; their norms add in another order, so w is checked against the
 * library's within 1e-6, not bit for bit. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "optim/optim.h"

typedef struct lamb {
    float *w, *g, *m, *v, *u; /* u: the temporary */
    int64_t n;
    float bc1, bc2, lr;
} lamb;

static const float B1 = 0.9f, B2 = 0.999f, EPS = 1e-7f;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* u with the divisions by bias corrections that round to 1 left out (as the
 * library's float32 kernels do: x / 1 is x); SKIP a constant, so each
 * caller's loop is specialised and vectorised. */
static inline float u_of(float m, float v, float bc1, float bc2, int skip)
{
    return (skip ? m : m / bc1) / (sqrtf(skip ? v : v / bc2) + EPS);
}

typedef double d2 __attribute__((vector_size(2 * sizeof(double))));
typedef double d4 __attribute__((vector_size(4 * sizeof(double))));
typedef float f4 __attribute__((vector_size(4 * sizeof(float))));

/* s[0..1] += w^2 and s[2..3] += u^2 over n (a multiple of 4) elements, in
 * four lanes two to a register (GCC leaves the plain loop scalar). */
static void squares(d2 *s, const float *w, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i += 4) {
        f4 a, b;
        memcpy(&a, w + i, sizeof a);
        memcpy(&b, u + i, sizeof b);
        const d4 x = __builtin_convertvector(a, d4), y = __builtin_convertvector(b, d4);
        const d2 x0 = __builtin_shufflevector(x, x, 0, 1), x1 = __builtin_shufflevector(x, x, 2, 3);
        const d2 y0 = __builtin_shufflevector(y, y, 0, 1), y1 = __builtin_shufflevector(y, y, 2, 3);
        s[0] += x0 * x0, s[1] += x1 * x1, s[2] += y0 * y0, s[3] += y1 * y1;
    }
}

enum { BLOCK = 256 };

/* m, v (Keras 3's forms) and u on [i0, i0 + BLOCK), u into ub. */
static inline void moments(const lamb *L, int64_t i0, float *restrict ub, int skip)
{
    const float c1 = (float)(1.0 - 0.9), c2 = (float)(1.0 - 0.999), bc1 = L->bc1, bc2 = L->bc2;
    float *restrict m = L->m + i0, *restrict v = L->v + i0;
    const float *restrict g = L->g + i0;
    for (int i = 0; i < BLOCK; i++) {
        const float mi = m[i] + (g[i] - m[i]) * c1, vi = v[i] + (g[i] * g[i] - v[i]) * c2;
        m[i] = mi;
        v[i] = vi;
        ub[i] = u_of(mi, vi, bc1, bc2, skip);
    }
}

/* Pass 1 on [i0, i1) (whole blocks): u into u (temporary) or a stack
 * block, the sums of squares into s. */
static void pass1(const lamb *L, int64_t i0, int64_t i1, float *u, d2 *s)
{
    float block[BLOCK];
    const int skip = L->bc1 == 1 && L->bc2 == 1;
    for (int64_t i = i0; i < i1; i += BLOCK) {
        float *ub = u ? u + i : block;
        if (skip) moments(L, i, ub, 1);
        else moments(L, i, ub, 0);
        squares(s, L->w + i, ub, BLOCK);
    }
}

static inline void apply_u(const lamb *L, int64_t i0, int64_t i1, float rl, int skip)
{
    float *restrict w = L->w;
    const float *restrict m = L->m, *restrict v = L->v;
    const float bc1 = L->bc1, bc2 = L->bc2;
    for (int64_t i = i0; i < i1; i++) w[i] = w[i] - rl * u_of(m[i], v[i], bc1, bc2, skip);
}

static void apply_temporary(const lamb *L, int64_t i0, int64_t i1, float rl)
{
    float *restrict w = L->w;
    const float *restrict u = L->u;
    for (int64_t i = i0; i < i1; i++) w[i] = w[i] - rl * u[i];
}

/* One step, recomputing u in pass 2 (temp 0) or reading it back (temp 1).
 * Threads take equal ranges of whole blocks (n a multiple of BLOCK). */
static void step(const lamb *L, int temp)
{
    const int64_t nb = L->n / BLOCK;
    double sw = 0, su = 0;
#pragma omp parallel reduction(+ : sw, su)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        d2 s[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
        pass1(L, nb * t / T * BLOCK, nb * (t + 1) / T * BLOCK, temp ? L->u : NULL, s);
        sw = s[0][0] + s[0][1] + s[1][0] + s[1][1];
        su = s[2][0] + s[2][1] + s[3][0] + s[3][1];
    }
    const float wn = (float)sqrt(sw), un = (float)sqrt(su);
    const float rl = (wn > 0 && un > 0 ? wn / un : 1.0f) * L->lr;
    const int skip = L->bc1 == 1 && L->bc2 == 1;
#pragma omp parallel
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        const int64_t i0 = nb * t / T * BLOCK, i1 = nb * (t + 1) / T * BLOCK;
        if (temp) apply_temporary(L, i0, i1, rl);
        else if (skip) apply_u(L, i0, i1, rl, 1);
        else apply_u(L, i0, i1, rl, 0);
    }
}

static void fill(const lamb *L)
{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < L->n; i++) {
        L->w[i] = 0.5f + (float)(i % 13) * 0.01f;
        L->g[i] = (float)(i % 7) * 1e-3f - 3e-3f;
        L->m[i] = L->v[i] = L->u[i] = 0;
    }
}

static double triad(float *a, const float *b, const float *c, int64_t n)
{
    const double t0 = now();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) a[i] = b[i] + 0.5f * c[i];
    return now() - t0;
}

/* The library's Lamb at step `it` + 1 on a copy of L's start. */
static optim_optimizer *library_lamb(optim_var **var, optim_grad_var *p, const lamb *L, int64_t it)
{
    optim_optimizer *opt;
    optim_error err;
    int64_t shape[1] = {L->n};
    if (optim_from_json(&opt, "{\"class_name\": \"Lamb\", \"config\": {\"learning_rate\": 0.001}}",
                        &err) ||
        optim_var_create(var, "w", OPTIM_F32, 1, shape, L->w, &err)) {
        fprintf(stderr, "bench_lamb_temporary: %s\n", err.msg);
        exit(1);
    }
    optim_set_iterations(opt, it);
    *p = (optim_grad_var){optim_grad_dense(optim_tensor_make(OPTIM_F32, L->g, 1, shape)), *var};
    return opt;
}

/* Median seconds of `runs` steps of the library (which < 0) or of step(L, which). */
static double time_case(lamb *L, int which, int64_t it, int runs, double *t, float *w_after)
{
    fill(L);
    optim_var *var = NULL;
    optim_grad_var p;
    optim_optimizer *opt = which < 0 ? library_lamb(&var, &p, L, it) : NULL;
    for (int r = 0; r < runs; r++) {
        const float ts = (float)(it + 1 + r); /* Keras 3: pow(cast(beta), cast(t)) in float32 */
        L->bc1 = 1.0f - powf(B1, ts);
        L->bc2 = 1.0f - powf(B2, ts);
        const double t0 = now();
        if (opt && optim_apply_gradients(opt, &p, 1, 0))
            fprintf(stderr, "%s\n", optim_errmsg(opt)), exit(1);
        if (!opt) step(L, which);
        t[r] = now() - t0;
    }
    if (w_after) memcpy(w_after, opt ? optim_var_data(var) : L->w, 16 * sizeof *w_after);
    optim_destroy(opt);
    optim_var_destroy(var);
    return bench_median(t, runs);
}

int main(int argc, char **argv)
{
    const int64_t n = (argc > 1 ? atoll(argv[1]) : 50000000) / BLOCK * BLOCK;
    const int runs = argc > 2 ? atoi(argv[2]) : 9;
    if (n < 16 || runs < 1)
        return fprintf(stderr, "usage: bench_lamb_temporary [N >= 16 [RUNS >= 1]]\n"), 2;
    lamb L = {malloc((size_t)n * 4),
              malloc((size_t)n * 4),
              malloc((size_t)n * 4),
              malloc((size_t)n * 4),
              malloc((size_t)n * 4),
              n,
              1,
              1,
              1e-3f};
    double *t = malloc((size_t)runs * sizeof *t), *tt = malloc((size_t)runs * sizeof *tt);
    if (!L.w || !L.g || !L.m || !L.v || !L.u || !t || !tt)
        return fprintf(stderr, "out of memory\n"), 1;
    const int64_t iters[2] = {9, 19999};
    for (int k = 0; k < 2; k++) {
        fill(&L);
        for (int r = 0; r < runs; r++) tt[r] = triad(L.u, L.g, L.m, n);
        const double tri = bench_median(tt, runs), tri_gbs = 16.0 * (double)n / tri / 1e9;
        float wl[16], wr[16], wt[16];
        const char *names[3] = {"library (recompute)", "plain, recompute", "plain, temporary"};
        double secs[3];
        secs[0] = time_case(&L, -1, iters[k], runs, t, wl);
        secs[1] = time_case(&L, 0, iters[k], runs, t, wr);
        secs[2] = time_case(&L, 1, iters[k], runs, t, wt);
        for (int i = 0; i < 16; i++)
            if (fabsf(wr[i] - wl[i]) > 1e-6f || wt[i] != wr[i])
                return fprintf(stderr, "w[%d]: library %.9g, recompute %.9g, temporary %.9g\n", i,
                               wl[i], wr[i], wt[i]),
                       1;
        printf("from step %lld, %lld parameters, %d threads, triad %.1f GB/s:\n",
               (long long)iters[k] + 1, (long long)n, omp_get_max_threads(), tri_gbs);
        for (int c = 0; c < 3; c++)
            printf("  %-22s %8.2f ms  ratio %.3f\n", names[c], 1e3 * secs[c],
                   28.0 * (double)n / secs[c] / 1e9 / tri_gbs);
    }
    free(L.w), free(L.g), free(L.m), free(L.v), free(L.u), free(t), free(tt);
    return 0;
}
