/* Checks: steps give the same bits on 1, 2 and 3 threads (dense steps on
 * every shape, and a sparse one with duplicates when the class takes them);
 * and no state shared between kernel calls (a static scratch buffer): one
 * call interrupted by another on other data (interleave.c, deterministic),
 * then a variable of 64 chunks on more threads than cores, repeated. */
#include <omp.h>
#include <stdio.h>

#include "conformance/harness.h"

static const int64_t dup_idx[] = {3, 7, 3, 12, 7, 3};

/* Snapshot after the steps on `threads` threads on the shapes of `mask`
 * (a sparse step too when the matrix is among them), by the class or the
 * class named `cls` (NULL: the checked one); non-zero on failure. */
static int run(cf_ctx *c, const char *cls, optim_dtype dt, unsigned mask, int threads,
               cf_snapshot *s, char *why, size_t n)
{
    optim_optimizer *opt;
    cf_problem p;
    *s = (cf_snapshot){0};
    if (optim__cf_create(c, cls, NULL, &opt, why, n)) return 1;
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
    if (run(c, NULL, dt, mask, 1, &one, why, n)) return 1;
    int bad = 0;
    for (int r = 0; r < nruns && !bad; r++) {
        char sub[CF_TEXT];
        bad = run(c, NULL, dt, mask, threads[r], &other, why, n);
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

/* Two steps on the 64-chunk vector on one thread, through the interleaving
 * probe, against the class's own; non-zero with why on a difference.
 * *ran: whether a kernel call was interrupted (element-wise classes). */
static int interleaved_differs(cf_ctx *c, int *ran, char *why, size_t n)
{
    char name[CF_TEXT], sub[CF_TEXT];
    cf_snapshot one, other;
    *ran = 0;
    if (!c->cls->apply_dense || !(c->cls->flags & OPTIM_CLASS_ELEMENTWISE) || c->wrapper) return 0;
    if (optim__cf_interleave_probe(c, name, sizeof name, why, n)) return 1;
    if (run(c, NULL, OPTIM_F32, 1u << CF_MANY, 1, &one, why, n)) return 1;
    optim__cf_interleave_arm(c->cls);
    int bad = run(c, name, OPTIM_F32, 1u << CF_MANY, 1, &other, why, n);
    *ran = optim__cf_interleave_fired();
    if (!bad && optim__cf_snap_diff(&one, &other, 0, sub, sizeof sub)) {
        snprintf(why, n, "f32, one kernel call interrupted by another on other data: %s", sub);
        bad = 1;
    }
    optim__cf_snap_free(&other);
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
    /* Then 16 runs on the 64-chunk vector, on 4 threads and on twice the
     * cores plus one, alternately. */
    const int many = 2 * omp_get_num_procs() + 1;
    int counts[16], ran;
    for (int r = 0; r < 16; r++) counts[r] = r % 2 ? (many > 4 ? many : 5) : 4;
    bad = interleaved_differs(c, &ran, why, sizeof why) ||
        differs(c, OPTIM_F32, 1u << CF_MANY, counts, 16, why, sizeof why);
    optim__cf_report(
        c, "threads.no_shared_state", !bad,
        "no state shared between kernel calls (such as a static scratch buffer): two steps "
        "on a vector of 64 chunks give one thread's bits with one kernel call interrupted "
        "from its middle by a call on other data, and 16 times on 4 threads and on more "
        "threads than cores",
        "%s",
        bad       ? why
            : ran ? "identical, the interruption included"
                  : "identical (no interruption: not an element-wise kernel, or it never "
                    "read its gradient's middle page)");
}
