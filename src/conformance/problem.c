/* Test problems: one variable per shape (scalar, vector, matrix, a vector
 * longer than one element-wise chunk, an empty matrix, a vector of 64
 * chunks) in one dtype, with
 * seeded values and gradients, and the steps the checks take on them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/harness.h"
#include "core/parallel.h"

static const char *const shape_names[CF_NSHAPES] = {"scalar", "vector", "matrix",
                                                    "large",  "empty",  "many"};
static const int32_t ranks[CF_NSHAPES] = {0, 1, 2, 1, 2, 1};
static const int64_t shapes[CF_NSHAPES][2] = {
    {0, 0}, {37, 0}, {CF_ROWS, CF_COLS}, {20011, 0}, {0, CF_COLS}, {64 * OPTIM__CHUNK + 13, 0}};

double optim__cf_rand(uint64_t seed, uint64_t a, uint64_t b, uint64_t i)
{
    /* splitmix64 over the mixed inputs */
    uint64_t z = seed * 0x9E3779B97F4A7C15ull ^ a * 0xBF58476D1CE4E5B9ull ^
        b * 0x94D049BB133111EBull ^ (i + 1) * 0xD6E8FEB86659FD93ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    double u = (double)(z >> 11) / 9007199254740992.0; /* [0, 1) */
    double v = 2 * u - 1;
    return v == 0 ? 0.5 : v;
}

void optim__cf_put(void *buf, optim_dtype dtype, int64_t i, double v)
{
    if (dtype == OPTIM_F32) ((float *)buf)[i] = (float)v;
    else ((double *)buf)[i] = v;
}

double optim__cf_get(const void *buf, optim_dtype dtype, int64_t i)
{
    return dtype == OPTIM_F32 ? ((const float *)buf)[i] : ((const double *)buf)[i];
}

int optim__cf_problem_init(cf_problem *p, optim_dtype dtype, unsigned mask, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->dtype = dtype;
    p->seed = seed;
    size_t es = optim_dtype_size(dtype);
    for (int s = 0; s < CF_NSHAPES; s++) {
        if (!(mask & (1u << s))) continue;
        int64_t numel = ranks[s] == 0 ? 1 : shapes[s][0] * (ranks[s] == 2 ? shapes[s][1] : 1);
        void *init = malloc((size_t)(numel ? numel : 1) * es);
        if (!init) goto fail;
        for (int64_t i = 0; i < numel; i++)
            optim__cf_put(init, dtype, i, optim__cf_rand(seed, 1000 + s, 0, i));
        p->init[p->n] = init;
        if (optim_var_create(&p->vars[p->n], shape_names[s], dtype, ranks[s], shapes[s], init,
                             NULL)) {
            free(init);
            p->init[p->n] = NULL;
            goto fail;
        }
        p->n++;
    }
    return OPTIM_OK;
fail:
    optim__cf_problem_free(p);
    return OPTIM_ENOMEM;
}

void optim__cf_problem_free(cf_problem *p)
{
    for (size_t i = 0; i < p->n; i++) {
        optim_var_destroy(p->vars[i]);
        free(p->init[i]);
    }
    memset(p, 0, sizeof *p);
}

void optim__cf_problem_copy_values(cf_problem *p, const cf_problem *src)
{
    for (size_t i = 0; i < p->n && i < src->n; i++)
        memcpy(optim_var_data(p->vars[i]), optim_var_cdata(src->vars[i]),
               (size_t)optim_var_numel(p->vars[i]) * optim_dtype_size(p->dtype));
}

int optim__cf_step_dense(optim_optimizer *opt, cf_problem *p, int k)
{
    optim_grad_var pairs[CF_NSHAPES + 1];
    void *bufs[CF_NSHAPES + 1] = {0};
    int rc = OPTIM_OK;
    for (size_t v = 0; v < p->n && !rc; v++) {
        int64_t numel = optim_var_numel(p->vars[v]);
        bufs[v] = malloc((size_t)(numel ? numel : 1) * optim_dtype_size(p->dtype));
        if (!bufs[v]) rc = OPTIM_ENOMEM;
        for (int64_t i = 0; !rc && i < numel; i++)
            optim__cf_put(bufs[v], p->dtype, i, optim__cf_rand(p->seed, 2000 + k, v, i));
        optim_tensor t = optim_var_tensor(p->vars[v]);
        t.data = bufs[v];
        pairs[v] = (optim_grad_var){optim_grad_dense(t), p->vars[v]};
    }
    if (!rc) rc = optim_apply_gradients(opt, pairs, p->n, 0);
    for (size_t v = 0; v < p->n; v++) free(bufs[v]);
    return rc;
}

/* Unique ascending indices of idx, and their summed rows from full. */
static int64_t summed(const int64_t *idx, int64_t n, int64_t row, optim_dtype dt, const void *full,
                      int64_t *uniq, void *rows)
{
    int64_t m = 0, last = 0;
    for (int64_t j = 0; j < n; j++) last = idx[j] > last ? idx[j] : last;
    for (int64_t r = 0; r <= last; r++) {
        int hit = 0;
        for (int64_t j = 0; j < n; j++) hit |= idx[j] == r;
        if (!hit) continue;
        for (int64_t e = 0; e < row; e++)
            optim__cf_put(rows, dt, m * row + e, optim__cf_get(full, dt, r * row + e));
        uniq[m++] = r;
    }
    return m;
}

int optim__cf_step_sparse(optim_optimizer *opt, cf_problem *p, size_t v, int k, const int64_t *idx,
                          int64_t n, int form)
{
    optim_var *var = p->vars[v];
    const int64_t *shape = optim_var_shape(var);
    int64_t row = optim_var_numel(var) / (shape[0] ? shape[0] : 1), uniq[64];
    size_t es = optim_dtype_size(p->dtype);
    void *rows = calloc((size_t)(n * row + 1), es);
    void *full = calloc((size_t)(optim_var_numel(var) + 1), es);
    int rc = rows && full && n <= 64 ? OPTIM_OK : OPTIM_ENOMEM;
    for (int64_t j = 0; !rc && j < n; j++)
        for (int64_t e = 0; e < row; e++) {
            double g = optim__cf_rand(p->seed, 3000 + k, (uint64_t)j, (uint64_t)e);
            optim__cf_put(rows, p->dtype, j * row + e, g);
            /* duplicates summed in order of appearance, in the dtype (an
             * index out of range, for the failure check, only as given) */
            int64_t at = idx[j] * row + e;
            if (idx[j] >= 0 && idx[j] < shape[0])
                optim__cf_put(full, p->dtype, at, optim__cf_get(full, p->dtype, at) + g);
        }
    if (!rc && form == CF_SUMMED) {
        n = summed(idx, n, row, p->dtype, full, uniq, rows);
        idx = uniq;
    }
    if (!rc) {
        optim_tensor t = optim_var_tensor(var);
        optim_grad g;
        if (form == CF_DENSE) {
            t.data = full;
            g = optim_grad_dense(t);
        } else {
            t.shape[0] = n;
            t.data = rows;
            g = optim_grad_sparse(idx, n, t);
        }
        optim_grad_var pair = {g, var};
        rc = optim_apply_gradients(opt, &pair, 1, 0);
    }
    free(rows);
    free(full);
    return rc;
}
