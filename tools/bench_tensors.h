/* optim bench --tensors K: the measured size split over K variables (internal to tools/). */
#ifndef OPTIM_TOOLS_BENCH_TENSORS_H
#define OPTIM_TOOLS_BENCH_TENSORS_H

#include "optim/optim.h"

typedef struct bench_tensors {
    int64_t k; /* variables */
    optim_var **vars;
    optim_grad_var *pairs; /* each variable with its slice of the gradient */
} bench_tensors;

/* K variables of dtype dt "w0".."w{K-1}" ("w" when K is 1) whose sizes add
 * to n (the first n % K one element larger), zero-initialised, each paired
 * with its consecutive slice of g (n elements of dt, borrowed). 0, or -1
 * with err filled. */
int bench_tensors_make(bench_tensors *t, int64_t n, int64_t k, optim_dtype dt, void *g,
                       optim_error *err);
void bench_tensors_free(bench_tensors *t);

#endif
