/* A steady-state step allocates nothing: the library's malloc, calloc,
 * realloc, aligned_alloc and posix_memalign calls are counted (the test is
 * linked with -Wl,--wrap for each, tests/CMakeLists section of
 * CMakeLists.txt) while steps 2..N run, for element-wise and phased
 * classes, clipping, thousands of small variables and several threads.
 * The first step may allocate (slots, the optimizer's arena). */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"

/* nvars variables of `each` f32 elements (a rank-2 shape when cols > 0),
 * stepped `steps` times; returns the allocations of steps 2..steps. */
static long steady_allocations(const char *json, int nvars, int64_t each, int64_t cols, int threads,
                               int steps)
{
    optim_optimizer *opt = optim_test_make(json);
    assert_ok(optim_set_num_threads(opt, threads), opt);
    optim_var **vars = calloc((size_t)nvars, sizeof *vars);
    optim_grad_var *p = calloc((size_t)nvars, sizeof *p);
    float *g = malloc((size_t)each * sizeof *g);
    double *init = malloc((size_t)each * sizeof *init);
    assert_true(vars && p && g && init);
    const int64_t shape[2] = {cols ? each / cols : each, cols};
    for (int64_t i = 0; i < each; i++)
        init[i] = sin(0.01 * (double)i), g[i] = (float)cos(0.3 * (double)i);
    for (int v = 0; v < nvars; v++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d/kernel", v);
        vars[v] = optim_test_var(name, OPTIM_F32, cols ? 2 : 1, shape, init);
        p[v] = (optim_grad_var){
            optim_grad_dense(optim_tensor_make(OPTIM_F32, g, cols ? 2 : 1, shape)), vars[v]};
    }
    long before = 0;
    for (int k = 0; k < steps; k++) {
        if (k == 1) {
            before = allocations;
            counting = 1;
        }
        int rc = optim_apply_gradients(opt, p, (size_t)nvars, 0);
        counting = 0;
        assert_ok(rc, opt);
        counting = k >= 1;
    }
    counting = 0;
    for (int v = 0; v < nvars; v++) optim_var_destroy(vars[v]);
    optim_destroy(opt);
    free(vars);
    free(p);
    free(g);
    free(init);
    return allocations - before;
}

/* The counter itself works: a first step allocates (its slots). */
OPTIM_TEST(test_counter_counts)
{
    optim_optimizer *opt = optim_test_make("\"adam\"");
    const int64_t n = 10;
    const double init[10] = {0};
    const float g[10] = {1};
    optim_var *v = optim_test_var("w", OPTIM_F32, 1, &n, init);
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, (void *)g, 1, &n)), v};
    long before = allocations;
    counting = 1;
    int rc = optim_apply_gradients(opt, &p, 1, 0);
    counting = 0;
    assert_ok(rc, opt);
    assert_gt(allocations, before);
    optim_destroy(opt);
    optim_var_destroy(v);
}

OPTIM_TEST(test_steady_state_steps_do_not_allocate)
{
    static const char *const configs[] = {
        "\"adam\"",
        "{\"class_name\": \"Adam\", \"config\": {\"global_clipnorm\": 1.0, \"is_legacy_optimizer\": true}}",
        "{\"class_name\": \"AdamW\", \"config\": {\"clipnorm\": 0.5}}",
        "\"lamb\"",
        "{\"class_name\": \"Lamb\", \"config\": {\"clipvalue\": 0.1, \"is_legacy_optimizer\": true}}",
        "\"adafactor\"",
    };
    for (size_t c = 0; c < sizeof configs / sizeof *configs; c++)
        for (int threads = 1; threads <= 2; threads++) {
            /* one large variable (several chunks), a matrix, many small ones */
            assert_int_equal(steady_allocations(configs[c], 1, 100003, 0, threads, 4), 0);
            assert_int_equal(steady_allocations(configs[c], 2, 40000, 200, threads, 4), 0);
            assert_int_equal(steady_allocations(configs[c], 3000, 100, 0, threads, 4), 0);
        }
}

int main(void) { return optim_test_run(); }
