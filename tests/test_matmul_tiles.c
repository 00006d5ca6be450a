/* matmul over several tiles of its fixed grid (src/tape/matmul.c): values
 * and both gradients against a double-precision reference for every
 * transpose combination, and the same bits on 1, 2 and 3 threads. */
#include "testutil.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"

/* op(A) [M, K], op(B) [K, N]: 3 row tiles (the last partial) and 2 column tiles. */
enum { M = 150, K = 37, N = 300 };

typedef struct {
    double a[M * K], b[K * N], w[M * N]; /* w: dLoss/dC, loss = sum(C * w) */
    double c[M * N], da[M * K], db[K * N]; /* reference values, in stored layouts */
} ref;

static double val(int i, int salt) { return ((i * 7919 + salt * 104729) % 2003) / 1001.5 - 1.0; }

static double ea(const ref *r, int ta, int i, int k)
{
    return ta ? r->a[k * M + i] : r->a[i * K + k];
}
static double eb(const ref *r, int tb, int k, int j)
{
    return tb ? r->b[j * K + k] : r->b[k * N + j];
}

static void reference(ref *r, int ta, int tb)
{
    memset(r->c, 0, sizeof r->c), memset(r->da, 0, sizeof r->da), memset(r->db, 0, sizeof r->db);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            for (int k = 0; k < K; k++) {
                r->c[i * N + j] += ea(r, ta, i, k) * eb(r, tb, k, j);
                r->da[ta ? k * M + i : i * K + k] += r->w[i * N + j] * eb(r, tb, k, j);
                r->db[tb ? j * K + k : k * N + j] += ea(r, ta, i, k) * r->w[i * N + j];
            }
}

static optim_var *var(optim_dtype dt, int64_t rows, int64_t cols, const double *v)
{
    optim_error err;
    int64_t shape[2] = {rows, cols};
    optim_var *out = NULL;
    assert_ok(optim_var_create(&out, "x", dt, 2, shape, NULL, &err), &err);
    for (int64_t i = 0; i < rows * cols; i++) {
        if (dt == OPTIM_F32) ((float *)optim_var_data(out))[i] = (float)v[i];
        else ((double *)optim_var_data(out))[i] = v[i];
    }
    return out;
}

static double get(const void *p, optim_dtype dt, int64_t i)
{
    return dt == OPTIM_F32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

/* C, dA and dB concatenated as bytes, for the bitwise comparison. */
static size_t run(const ref *r, optim_dtype dt, int ta, int tb, unsigned char *out)
{
    optim_error err;
    optim_var *a = ta ? var(dt, K, M, r->a) : var(dt, M, K, r->a);
    optim_var *b = tb ? var(dt, N, K, r->b) : var(dt, K, N, r->b);
    optim_var *w = var(dt, M, N, r->w);
    optim_tape *t = NULL;
    assert_ok(optim_tape_create(&t, &err), &err);
    optim_node *c = optim_matmul(t, optim_tape_var(t, a), optim_tape_var(t, b), ta, tb);
    assert_non_null(c);
    optim_node *loss = optim_sum(t, optim_mul(t, c, optim_tape_var(t, w)), OPTIM_ALL_AXES);
    optim_grad_var g[2];
    assert_ok(optim_tape_gradient(t, loss, (optim_var *[]){a, b}, 2, g), t);
    size_t es = dt == OPTIM_F32 ? 4 : 8, n = 0;
    double tol = dt == OPTIM_F32 ? 1e-4 : 1e-12;
    const void *parts[3] = {optim_node_value(c)->data, g[0].grad.dense.data, g[1].grad.dense.data};
    const double *refs[3] = {r->c, r->da, r->db};
    const size_t counts[3] = {M * N, M * K, K * N};
    for (int p = 0; p < 3; p++) {
        for (size_t i = 0; i < counts[p]; i++)
            assert_close(get(parts[p], dt, (int64_t)i), refs[p][i], tol, tol);
        memcpy(out + n, parts[p], counts[p] * es);
        n += counts[p] * es;
    }
    optim_tape_destroy(t);
    optim_var_destroy(a), optim_var_destroy(b), optim_var_destroy(w);
    return n;
}

OPTIM_TEST(test_tiles_match_reference_on_any_thread_count)
{
    static ref r;
    for (int i = 0; i < M * K; i++) r.a[i] = val(i, 1);
    for (int i = 0; i < K * N; i++) r.b[i] = val(i, 2);
    for (int i = 0; i < M * N; i++) r.w[i] = val(i, 3);
    size_t cap = (size_t)(M * N + M * K + K * N) * 8;
    unsigned char *first = malloc(cap), *again = malloc(cap);
    const optim_dtype dts[2] = {OPTIM_F32, OPTIM_F64};
    for (int d = 0; d < 2; d++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                reference(&r, ta, tb);
                omp_set_num_threads(1);
                size_t n = run(&r, dts[d], ta, tb, first);
                for (int threads = 2; threads <= 3; threads++) {
                    omp_set_num_threads(threads);
                    assert_eq(run(&r, dts[d], ta, tb, again), n);
                    assert_eq(memcmp(first, again, n), 0);
                }
            }
    free(first), free(again);
}

int main(void) { return optim_test_run(); }
