/* Limits on sizes and counts (docs/reliability.md): values at the edge of
 * what the library accepts must be refused cleanly or work, never overflow.
 * These are the regression tests of the hardening issue's items 7, 8 and 11;
 * run them under UBSan (.ci/run) to see the overflows they guard against. */
#define _DEFAULT_SOURCE /* MAP_NORESERVE */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

/* Item 8: a counter that cannot advance is refused, by set_iterations and
 * by set_weights, and the step at the limit fails without changing anything. */
OPTIM_TEST(test_iterations_limit)
{
    optim_optimizer *opt = optim_test_make("\"adam\"");
    const double init[2] = {1, 2};
    optim_var *v = optim_test_var("v", OPTIM_F32, 1, (int64_t[]){2}, init);
    assert_ok(optim_build(opt, &v, 1), opt);
    size_t n = optim_weights_count(opt);
    optim_tensor w[8];
    assert_le(n, 8);
    optim_get_weights(opt, w, n);
    const int64_t refused[] = {INT64_MAX, OPTIM_ITERATIONS_MAX + 1, -1};
    for (size_t i = 0; i < 3; i++) {
        int64_t it = refused[i];
        w[0] = optim_tensor_make(OPTIM_I64, &it, 0, NULL);
        assert_status(optim_set_weights(opt, w, n), OPTIM_ERANGE, opt);
        assert_non_null(strstr(optim_errmsg(opt), "iterations"));
        assert_status(optim_set_iterations(opt, refused[i]), OPTIM_ERANGE, opt);
        assert_eq(optim_iterations(opt), 0);
    }
    double big = 0x1p63;
    w[0] = optim_tensor_make(OPTIM_F64, &big, 0, NULL);
    assert_status(optim_set_weights(opt, w, n), OPTIM_ERANGE, opt);
    /* At the limit: the next step is refused and changes nothing. */
    assert_ok(optim_set_iterations(opt, OPTIM_ITERATIONS_MAX), opt);
    float g[2] = {1, 1};
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, (int64_t[]){2})), v};
    assert_status(optim_apply_gradients(opt, &p, 1, 0), OPTIM_ERANGE, opt);
    assert_non_null(strstr(optim_errmsg(opt), "iterations"));
    assert_eq(optim_iterations(opt), OPTIM_ITERATIONS_MAX);
    assert_eq(optim_var_get(v, 0), 1);
    assert_eq(optim_var_get(v, 1), 2);
    /* One below: one step works in every update rule (each computes t + 1;
     * UBSan checks that nothing overflows). */
    const char *classes[] = {"adam", "nadam", "adamax", "ftrl", "lion", "adafactor", "lamb"};
    for (size_t c = 0; c < sizeof classes / sizeof *classes; c++) {
        char json[64];
        snprintf(json, sizeof json, "\"%s\"", classes[c]);
        optim_optimizer *o = optim_test_make(json);
        const float init32[2] = {1, 2};
        assert_ok(optim_var_assign(v, init32, OPTIM_F32, 2), v);
        assert_ok(optim_set_iterations(o, OPTIM_ITERATIONS_MAX - 1), o);
        assert_ok(optim_apply_gradients(o, &p, 1, 0), o);
        assert_eq(optim_iterations(o), OPTIM_ITERATIONS_MAX);
        /* Adafactor's own formula gives 0/0 on a first step there (its
         * 1 - t^-0.8 rounds to 1 in float32, as in Keras); the others stay finite. */
        if (strcmp(classes[c], "adafactor") != 0)
            assert_lt(fabs(optim_var_get(v, 0)), INFINITY); /* finite */
        optim_destroy(o);
    }
    optim_destroy(opt);
    optim_var_destroy(v);
}

/* Item 7: counts whose maximum is INF (gradient_accumulation_steps,
 * ema_overwrite_frequency) at 2^63 and above: no double -> int64 overflow. */
OPTIM_TEST(test_huge_step_counts)
{
    const char *configs[] = {
        "{\"class_name\": \"Ftrl\", \"config\": {\"gradient_accumulation_steps\": 1e46, \"use_ema\": true}}",
        "{\"class_name\": \"SGD\", \"config\": {\"use_ema\": true, \"ema_overwrite_frequency\": 1e300}}",
        "{\"class_name\": \"Adam\", \"config\": {\"gradient_accumulation_steps\": 9.3e18}}",
    };
    for (size_t i = 0; i < 3; i++) {
        optim_optimizer *opt = optim_test_make(configs[i]);
        optim_var *v = optim_test_var("v", OPTIM_F64, 1, (int64_t[]){2}, (double[]){1, 2});
        double g[2] = {0.5, 0.5};
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, (int64_t[]){2})),
                            v};
        for (int s = 0; s < 3; s++) assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
        assert_eq(optim_iterations(opt), 3);
        /* Accumulating every 1e46 steps: the variable never moves. With an
         * overwrite frequency of 1e300, SGD moves it each step. */
        if (i != 1) assert_eq(optim_var_get(v, 0), 1);
        else assert_lt(optim_var_get(v, 0), 1);
        optim_destroy(opt);
        optim_var_destroy(v);
    }
}

/* Item 7: an empty gradient may have NULL data (ApplyIfFinite and
 * LossScaleOptimizer check it for finiteness without touching it). */
OPTIM_TEST(test_empty_gradient_null_data)
{
    const char *configs[] = {
        "{\"class_name\": \"ApplyIfFinite\", \"config\": {\"inner_optimizer\": \"sgd\"}}",
        "{\"class_name\": \"LossScaleOptimizer\", \"config\": {\"inner_optimizer\": \"sgd\"}}",
    };
    for (size_t i = 0; i < 2; i++) {
        optim_optimizer *opt = optim_test_make(configs[i]);
        optim_var *v = optim_test_var("v", OPTIM_F64, 1, (int64_t[]){0}, NULL);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, NULL, 1, (int64_t[]){0})),
                            v};
        assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
        assert_eq(optim_iterations(opt), 1);
        optim_destroy(opt);
        optim_var_destroy(v);
    }
}

/* Item 7: a sparse gradient for a variable of shape [0, 2^52, 2^52] (0
 * elements, but a row of 2^104): no index can be valid, and the row size
 * must not overflow. */
OPTIM_TEST(test_sparse_row_size_overflow)
{
    optim_optimizer *opt = optim_test_make("\"sgd\"");
    const int64_t shape[3] = {0, (int64_t)1 << 52, (int64_t)1 << 52};
    optim_var *v = optim_test_var("emb", OPTIM_F32, 3, shape, NULL);
    optim_grad_var p = {optim_grad_sparse(NULL, 0, optim_tensor_make(OPTIM_F32, NULL, 3, shape)),
                        v};
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    int64_t bad = 0;
    p.grad =
        optim_grad_sparse(&bad, 1, optim_tensor_make(OPTIM_F32, NULL, 3, (int64_t[]){1, 0, 0}));
    assert_ne(optim_apply_gradients(opt, &p, 1, 0), OPTIM_OK);
    assert_non_null(strstr(optim_errmsg(opt), "emb"));
    assert_eq(optim_iterations(opt), 1);
    optim_destroy(opt);
    optim_var_destroy(v);
}

/* 8 GiB of zeros that cost nothing until written (MAP_NORESERVE), or NULL. */
static void *huge_zeros(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Item 11: BLAS takes 32-bit dimensions; a matmul with a dimension of 2^31
 * or more is refused before any work (it would compute with a truncated
 * dimension). The matrices are [1, 2^31] and [2^31, 1]: 8 GiB each of
 * untouched virtual memory. */
OPTIM_TEST(test_matmul_dims_beyond_blas)
{
    const int64_t big = (int64_t)1 << 31;
    size_t bytes = (size_t)big * sizeof(float);
    void *a = huge_zeros(bytes), *b = huge_zeros(bytes);
    if (!a || !b) {
        if (a) munmap(a, bytes);
        if (b) munmap(b, bytes);
        skip(); /* no address space for it here */
    }
    optim_var *va, *vb;
    optim_error err;
    assert_ok(optim_var_wrap(&va, "a", OPTIM_F32, 2, (int64_t[]){1, big}, a, &err), &err);
    assert_ok(optim_var_wrap(&vb, "b", OPTIM_F32, 2, (int64_t[]){big, 1}, b, &err), &err);
    optim_tape *t;
    assert_ok(optim_tape_create(&t, &err), &err);
    optim_node *na = optim_tape_var(t, va), *nb = optim_tape_var(t, vb);
    assert_non_null(na);
    assert_non_null(nb);
    assert_null(optim_matmul(t, na, nb, 0, 0)); /* inner dim 2^31 */
    assert_non_null(strstr(optim_tape_errmsg(t), "32-bit"));
    assert_null(optim_matmul(t, nb, na, 0, 0)); /* output [2^31, 2^31] */
    assert_null(optim_matmul(t, na, na, 1, 0)); /* [2^31, 1] x [1, 2^31] */
    optim_tape_destroy(t);
    optim_var_destroy(va);
    optim_var_destroy(vb);
    munmap(a, bytes);
    munmap(b, bytes);
}

int main(void) { return optim_test_run(); }
