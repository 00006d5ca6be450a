/* A sparse step on a half variable takes float32 scratch in proportion to
 * the rows it touches (DESIGN section 7), not OPTIM__SPARSE_BATCH whole
 * rows per thread whatever the indices: one index into a bfloat16
 * [2, 2^21] table (8 MB) with Adam on 2 threads had reserved
 * 2 x 3 x 8 x 8 MB of scratch (the arena grew to 537 MB, the float32 step's
 * to 17 MB). Each config's bfloat16 step must hold at most 4x (the arena's
 * power-of-two blocks) the float32 step's arena plus the touched row of the
 * variable and each slot in float32 on each thread. */
#include "testutil.h"

#include <stdlib.h>

#include "optimizer/impl.h" /* the optimizer's arena */

#define ROWS 2
#define COLS ((int64_t)1 << 21)
#define THREADS 2
#define MAX_SLOTS 2 /* of the configs below */

/* Bytes the optimizer's arena holds after two steps of one index on a
 * [ROWS, COLS] table of dtype dt. */
static size_t reserved_after(const char *json, optim_dtype dt)
{
    optim_optimizer *opt = optim_test_make(json);
    assert_ok(optim_set_num_threads(opt, THREADS), opt);
    const int64_t shape[2] = {ROWS, COLS}, vshape[2] = {1, COLS}, idx[1] = {ROWS - 1};
    optim_var *v = NULL;
    optim_error err;
    assert_ok(optim_var_create(&v, "table", dt, 2, shape, NULL, &err), &err);
    void *vals = calloc((size_t)COLS, optim_dtype_size(dt));
    assert_non_null(vals);
    optim_grad_var p = {optim_grad_sparse(idx, 1, optim_tensor_make(dt, vals, 2, vshape)), v};
    for (int k = 0; k < 2; k++)
        if (optim_apply_gradients(opt, &p, 1, 0)) fail_msg("%s: %s", json, optim_errmsg(opt));
    const size_t r = opt->arena.reserved;
    optim_destroy(opt);
    optim_var_destroy(v);
    free(vals);
    return r;
}

static const char *const CONFIGS[] = {
    "{\"class_name\": \"Adam\", \"config\": {}}", /* dense equivalent */
    "{\"class_name\": \"LazyAdam\", \"config\": {}}", /* lazy rows */
    "{\"class_name\": \"Adam\", \"config\": {\"is_legacy_optimizer\": true}}", /* every-row walk */
    "{\"class_name\": \"SGD\", \"config\": {\"momentum\": 0.9, \"is_legacy_optimizer\": true}}",
};

OPTIM_TEST(test_sparse_scratch_follows_rows_touched)
{
    (void)state;
    /* Per thread, the touched row of the variable and each slot in float32. */
    const size_t rows_touched = (size_t)THREADS * (1 + MAX_SLOTS) * (size_t)COLS * sizeof(float);
    for (size_t c = 0; c < sizeof CONFIGS / sizeof *CONFIGS; c++) {
        const size_t f32 = reserved_after(CONFIGS[c], OPTIM_F32),
                     bf16 = reserved_after(CONFIGS[c], OPTIM_BF16);
        /* 4x: the arena rounds its blocks up to powers of two. */
        if (bf16 > 4 * (f32 + rows_touched))
            fail_msg(
                "%s: the bfloat16 step's arena holds %.1f MB, the float32 step's %.1f MB (bound %.1f MB "
                "for one touched row of %lld elements)",
                CONFIGS[c], (double)bf16 / 1e6, (double)f32 / 1e6,
                4.0 * (double)(f32 + rows_touched) / 1e6, (long long)COLS);
    }
}

int main(void) { return optim_test_run(); }
