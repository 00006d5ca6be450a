/* Checks: steps give the same bits on 1, 2 and 3 threads (dense steps on
 * every shape, and a sparse one with duplicates when the class takes them);
 * and on a variable of 64 chunks, repeated on more threads than cores, so
 * that state the threads share (a static scratch buffer) shows as a race. */
#include <omp.h>
#include <stdio.h>

#include "conformance/harness.h"

static const int64_t dup_idx[] = {3, 7, 3, 12, 7, 3};

/* Snapshot after the steps on `threads` threads on the shapes of `mask`
 * (a sparse step too when the matrix is among them); non-zero on failure. */
static int run(cf_ctx *c, optim_dtype dt, unsigned mask, int threads, cf_snapshot *s, char *why,
               size_t n)
{
    optim_optimizer *opt;
    cf_problem p;
    *s = (cf_snapshot){0};
    if (optim__cf_create(c, NULL, NULL, &opt, why, n)) return 1;
    int rc = optim__cf_problem_init(&p, dt, mask, c->seed);
    if (!rc) optim_set_num_threads(opt, threads);
    for (int k = 0; !rc && k < 2; k++) rc = optim__cf_step_dense(opt, &p, k);
    if (!rc && c->sparse && (mask & 1u << CF_MATRIX))
        rc = optim__cf_step_sparse(opt, &p, CF_MATRIX, 2, dup_idx, 6, CF_AS_GIVEN);
    if (rc)
        snprintf(why, n, "%s step on %d threads failed: %s", optim_dtype_name(dt), threads,
                 optim_errmsg(opt));
    if (!rc) rc = optim__cf_snap(s, opt, &p);
    optim__cf_problem_free(&p);
    optim_destroy(opt);
    return rc;
}

/* Runs on each of the `nruns` thread counts, each compared with one
 * thread's bits; non-zero with the first difference in why. */
static int differs(cf_ctx *c, optim_dtype dt, unsigned mask, const int *threads, int nruns,
                   char *why, size_t n)
{
    cf_snapshot one, other;
    if (run(c, dt, mask, 1, &one, why, n)) return 1;
    int bad = 0;
    for (int r = 0; r < nruns && !bad; r++) {
        char sub[CF_TEXT];
        bad = run(c, dt, mask, threads[r], &other, why, n);
        if (!bad && optim__cf_snap_diff(&one, &other, 0, sub, sizeof sub)) {
            snprintf(why, n, "%s, run %d of %d, 1 vs %d threads: %s", optim_dtype_name(dt), r + 1,
                     nruns, threads[r], sub);
            bad = 1;
        }
        optim__cf_snap_free(&other);
    }
    optim__cf_snap_free(&one);
    return bad;
}

void optim__cf_check_threads(cf_ctx *c)
{
    char why[CF_TEXT] = "";
    static const int two_three[2] = {2, 3};
    int bad = differs(c, OPTIM_F32, 0x1f, two_three, 2, why, sizeof why) ||
        differs(c, OPTIM_F64, 0x1f, two_three, 2, why, sizeof why);
    optim__cf_report(
        c, "threads.independent", !bad,
        "3 steps (2 dense, 1 sparse with duplicates when taken) give the same variables and "
        "weights on 1, 2 and 3 threads, bit for bit, f32 and f64",
        "%s", bad ? why : "identical");
    /* 16 runs on the 64-chunk vector, on 4 threads and on twice the cores
     * plus one, alternately. */
    const int many = 2 * omp_get_num_procs() + 1;
    int counts[16];
    for (int r = 0; r < 16; r++) counts[r] = r % 2 ? (many > 4 ? many : 5) : 4;
    bad = differs(c, OPTIM_F32, 1u << CF_MANY, counts, 16, why, sizeof why);
    optim__cf_report(
        c, "threads.no_shared_state", !bad,
        "two steps on a vector of 64 chunks, 16 times on 4 threads and on more threads "
        "than cores, give one thread's bits each time (no state shared between "
        "threads, such as a static scratch buffer)",
        "%s", bad ? why : "identical");
}
