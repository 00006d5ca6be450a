/* Check: steps give the same bits on 1, 2 and 3 threads (dense steps on
 * every shape, and a sparse one with duplicates when the class takes them). */
#include <stdio.h>

#include "conformance/harness.h"

static const int64_t dup_idx[] = {3, 7, 3, 12, 7, 3};

/* Snapshot after the steps on `threads` threads; non-zero on failure. */
static int run(cf_ctx *c, optim_dtype dt, int threads, cf_snapshot *s, char *why, size_t n)
{
    optim_optimizer *opt;
    cf_problem p;
    *s = (cf_snapshot){0};
    if (optim__cf_create(c, NULL, NULL, &opt, why, n)) return 1;
    int rc = optim__cf_problem_init(&p, dt, 0x1f, c->seed);
    if (!rc) optim_set_num_threads(opt, threads);
    for (int k = 0; !rc && k < 2; k++) rc = optim__cf_step_dense(opt, &p, k);
    if (!rc && c->sparse)
        rc = optim__cf_step_sparse(opt, &p, CF_MATRIX, 2, dup_idx, 6, CF_AS_GIVEN);
    if (rc)
        snprintf(why, n, "%s step on %d threads failed: %s", optim_dtype_name(dt), threads,
                 optim_errmsg(opt));
    if (!rc) rc = optim__cf_snap(s, opt, &p);
    optim__cf_problem_free(&p);
    optim_destroy(opt);
    return rc;
}

static int differs(cf_ctx *c, optim_dtype dt, char *why, size_t n)
{
    cf_snapshot one, other;
    if (run(c, dt, 1, &one, why, n)) return 1;
    int bad = 0;
    for (int t = 2; t <= 3 && !bad; t++) {
        char sub[CF_TEXT];
        bad = run(c, dt, t, &other, why, n);
        if (!bad && optim__cf_snap_diff(&one, &other, 0, sub, sizeof sub)) {
            snprintf(why, n, "%s, 1 vs %d threads: %s", optim_dtype_name(dt), t, sub);
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
    int bad = differs(c, OPTIM_F32, why, sizeof why) || differs(c, OPTIM_F64, why, sizeof why);
    optim__cf_report(
        c, "threads.independent", !bad,
        "3 steps (2 dense, 1 sparse with duplicates when taken) give the same variables and "
        "weights on 1, 2 and 3 threads, bit for bit, f32 and f64",
        "%s", bad ? why : "identical");
}
