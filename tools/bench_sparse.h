/* optim bench --sparse (internal to tools/): the sparse step of each
 * config on a [ROWS, COLS] table (float32 unless --dtype), and what bench.c
 * shares with it. */
#ifndef OPTIM_TOOLS_BENCH_SPARSE_H
#define OPTIM_TOOLS_BENCH_SPARSE_H

#include <stdint.h>

#include "optim/optim.h"

typedef struct bench_sparse_opts {
    long long rows, cols, indices; /* rows 0: no sparse mode */
    int runs, json;
    optim_dtype dtype; /* of the table, its gradients and slots */
} bench_sparse_opts;

/* Times configs[0..n) (JSON texts that load) as bench.c describes; returns
 * the exit status. */
int optim_bench_sparse(const char *const *configs, int n, const bench_sparse_opts *o);

/* bench.c: monotonic seconds; a triad over n floats, median of `runs`
 * (t holds runs doubles), as GB/s at 16 B/element; the median of t. */
double optim_bench_now(void);
/* CPU seconds of the process, all threads: unlike the wall clock, it does
 * not count the time a thread waits to be scheduled on a loaded machine
 * (with OMP_WAIT_POLICY=passive, no spinning at barriers either). */
double optim_bench_cpu_now(void);
double optim_bench_triad(float *a, const float *b, const float *c, int64_t n, int runs, double *t);
double optim_bench_median(double *t, int runs);

/* The instruction-set level the kernels run at (optim/isa.h), for reports. */
const char *optim_bench_isa(void);
/* The bytes opt's update moves per element of var, in var's dtype
 * (optim_bytes_per_param; a wrapper without the hook: its inner
 * optimizer's that holds var). 0, or a status with *why the message. */
int optim_bench_bytes(optim_optimizer *opt, const optim_var *var, double *bytes, const char **why);

#endif
