/* optim bench --tensors K (bench_tensors.h). */
#include "bench_tensors.h"

#include <stdio.h>
#include <stdlib.h>

int bench_tensors_make(bench_tensors *t, int64_t n, int64_t k, optim_dtype dt, void *g,
                       optim_error *err)
{
    t->k = 0;
    t->vars = calloc((size_t)k, sizeof *t->vars);
    t->pairs = calloc((size_t)k, sizeof *t->pairs);
    if (!t->vars || !t->pairs) {
        bench_tensors_free(t);
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return -1;
    }
    for (int64_t j = 0, off = 0; j < k; j++) {
        int64_t len = n / k + (j < n % k);
        char name[32];
        snprintf(name, sizeof name, k == 1 ? "w" : "w%lld", (long long)j);
        if (optim_var_create(&t->vars[j], name, dt, 1, &len, NULL, err)) {
            bench_tensors_free(t);
            return -1;
        }
        t->k = j + 1;
        t->pairs[j] =
            (optim_grad_var){optim_grad_dense(optim_tensor_make(
                                 dt, (char *)g + (size_t)off * optim_dtype_size(dt), 1, &len)),
                             t->vars[j]};
        off += len;
    }
    return 0;
}

void bench_tensors_free(bench_tensors *t)
{
    for (int64_t j = 0; t->vars && j < t->k; j++) optim_var_destroy(t->vars[j]);
    free(t->vars);
    free(t->pairs);
    t->vars = NULL;
    t->pairs = NULL;
    t->k = 0;
}
