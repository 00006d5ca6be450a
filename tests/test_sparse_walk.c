/* The sparse modes of the pipeline (src/optimizer/sparse_walk.c, the
 * sparse_mode hook of optim/optimizer_class.h):
 *
 * - the dense-equivalent walk: a sparse step equals, bit for bit, a dense
 *   step on the densified gradient (duplicates summed in order), for the
 *   Keras 3 element-wise built-ins, on a table whose rows straddle the
 *   pipeline's chunks, on 1, 2 and 3 threads, with weight decay;
 * - lazy (row-only) updates split by index ranges, and legacy walks of
 *   every row split by row ranges: 1, 2 and 3 threads bitwise equal,
 *   untouched rows unchanged (lazy), the splits themselves observed;
 * - user classes: element-wise without apply_sparse get the walk, others
 *   are refused; a version-2 table and answers a class cannot take run
 *   apply_sparse whole;
 * - the chunk gradient helper against a directly built dense row range. */
#include "opt_table.h"
#include "optimizer/sparse_walk.h"
#include "core/parallel.h"
#include "user_momentum.h"

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 300
#define COLS 100 /* 8192 is not a multiple: rows straddle chunk boundaries */
#define NIDX 700 /* with duplicates; row 0 and the last row among them */

static int64_t idx_at(int step, int j)
{
    if (j == 0) return 0;
    if (j == 1) return ROWS - 1;
    return (int64_t)((j * 7919 + step * 131) % (ROWS / 2)) * 2 % ROWS; /* even rows, repeated */
}

static double val_at(int step, int j, int c)
{
    return sin(0.37 * j + 0.11 * c + step) * (1 + (j % 3));
}

/* A [ROWS, COLS] table of dtype dt with fixed contents. */
static optim_var *table(optim_dtype dt)
{
    static double init[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++) init[i] = cos(0.001 * i) + 0.25;
    return optim_test_var("table", dt, 2, (int64_t[]){ROWS, COLS}, init);
}

typedef struct grads {
    int64_t idx[NIDX];
    double vd[NIDX * COLS], dense_d[ROWS * COLS];
    float vf[NIDX * COLS], dense_f[ROWS * COLS];
} grads;

/* Step k's sparse gradient and its dense equivalent (rows summed in order
 * from zero, in the dtype's arithmetic). */
static void make_grads(grads *g, int k)
{
    memset(g->dense_d, 0, sizeof g->dense_d);
    memset(g->dense_f, 0, sizeof g->dense_f);
    for (int j = 0; j < NIDX; j++) {
        g->idx[j] = idx_at(k, j);
        for (int c = 0; c < COLS; c++) {
            double v = val_at(k, j, c);
            g->vd[j * COLS + c] = v;
            g->vf[j * COLS + c] = (float)v;
            g->dense_d[g->idx[j] * COLS + c] += v;
            g->dense_f[g->idx[j] * COLS + c] += (float)v;
        }
    }
}

static void step_with(optim_optimizer *opt, optim_var *x, grads *g, int sparse)
{
    const int f64 = optim_var_dtype(x) == OPTIM_F64;
    optim_grad_var p = {optim_grad_none(), x};
    if (sparse)
        p.grad = optim_grad_sparse(g->idx, NIDX,
                                   optim_tensor_make(optim_var_dtype(x),
                                                     f64 ? (void *)g->vd : (void *)g->vf, 2,
                                                     (int64_t[]){NIDX, COLS}));
    else
        p.grad = optim_grad_dense(optim_tensor_make(optim_var_dtype(x),
                                                    f64 ? (void *)g->dense_d : (void *)g->dense_f,
                                                    2, (int64_t[]){ROWS, COLS}));
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
}

/* Every slot of a (in o1) and b (in o2) bit for bit. */
static void all_slots_bitwise(optim_optimizer *o1, optim_var *a, optim_optimizer *o2, optim_var *b)
{
    const char *names[16];
    size_t n = optim_get_slot_names(o1, names, 16);
    assert_le(n, 16);
    for (size_t i = 0; i < n; i++) {
        optim_var *x = optim_get_slot(o1, a, names[i]), *y = optim_get_slot(o2, b, names[i]);
        assert_eq(x == NULL, y == NULL);
        if (x) assert_vars_bitwise(x, y);
    }
}

/* Three steps of json on the table: sparse on `threads` threads (the
 * optimizer's default, set through omp_set_num_threads) against dense on
 * the densified gradients on one thread. */
static void check_equals_densified(const char *json, int threads)
{
    static grads g;
    for (int f64 = 0; f64 < 2; f64++) {
        optim_dtype dt = f64 ? OPTIM_F64 : OPTIM_F32;
        optim_optimizer *os = optim_test_make(json), *od = optim_test_make(json);
        assert_ok(optim_set_num_threads(od, 1), od);
        optim_var *xs = table(dt), *xd = table(dt);
        omp_set_num_threads(threads);
        for (int k = 0; k < 3; k++) {
            make_grads(&g, k);
            step_with(os, xs, &g, 1);
            step_with(od, xd, &g, 0);
        }
        assert_vars_bitwise(xs, xd);
        all_slots_bitwise(os, xs, od, xd);
        optim_destroy(os);
        optim_destroy(od);
        optim_var_destroy(xs);
        optim_var_destroy(xd);
    }
}

#define K3(cls, cfg) \
    "{\"class_name\": \"" cls "\", \"config\": {\"is_legacy_optimizer\": false" cfg "}}"

/* Where Keras 3 reads a sparse gradient as its dense equivalent; SGD
 * without momentum and Adagrad run lazily (OPTIM_SPARSE_ROWS) and still
 * equal it, weight decay included (decayed over each range's rows). */
static const char *const DENSE_EQUIVALENT[] = {
    K3("Adam", ", \"learning_rate\": 0.01"),
    K3("Adam", ", \"amsgrad\": true, \"weight_decay\": 0.05"),
    K3("AdamW", ", \"weight_decay\": 0.1"),
    K3("Adamax", ""),
    K3("Nadam", ""),
    K3("RMSprop", ", \"centered\": true, \"momentum\": 0.5"),
    K3("SGD", ", \"momentum\": 0.9, \"nesterov\": true"),
    K3("SGD", ", \"weight_decay\": 0.2"),
    K3("Adagrad", ", \"weight_decay\": 0.01"),
    K3("Adagrad", ", \"initial_accumulator_value\": 0.0, \"epsilon\": 0.0"), /* NaN on every row */
    K3("Adadelta", ""),
    K3("Ftrl", ", \"l1_regularization_strength\": 0.001"),
    K3("Lion", ""),
    "{\"class_name\": \"ScheduleFreeAdamW\", \"config\": {}}",
};

OPTIM_TEST(test_dense_equivalent)
{
    const int saved = omp_get_max_threads();
    for (size_t i = 0; i < sizeof DENSE_EQUIVALENT / sizeof *DENSE_EQUIVALENT; i++)
        for (int t = 1; t <= 3; t++) check_equals_densified(DENSE_EQUIVALENT[i], t);
    omp_set_num_threads(saved);
}

/* Lazy rules, legacy sparse kernels and the whole-table walks: 1, 2 and
 * 3 threads bit for bit; rows no index names keep their values (lazy). */
static const struct {
    const char *json;
    int lazy;
} LAZY[] = {
    {"{\"class_name\": \"LazyAdam\", \"config\": {}}", 1},
    {"{\"class_name\": \"LazyAdam\", \"config\": {\"is_legacy_optimizer\": true}}", 1},
    {"{\"class_name\": \"SGD\", \"config\": {\"is_legacy_optimizer\": true, \"momentum\": 0.9}}",
     1},
    {"{\"class_name\": \"SGD\", \"config\": {\"is_legacy_optimizer\": true}}", 1},
    {"{\"class_name\": \"Adagrad\", \"config\": {\"is_legacy_optimizer\": true}}", 1},
    {"{\"class_name\": \"Adadelta\", \"config\": {\"is_legacy_optimizer\": true}}", 1},
    {"{\"class_name\": \"Adamax\", \"config\": {\"is_legacy_optimizer\": true}}", 1},
    {"{\"class_name\": \"Ftrl\", \"config\": {\"is_legacy_optimizer\": true}}", 1},
    {"{\"class_name\": \"RMSprop\", \"config\": {\"is_legacy_optimizer\": true, \"momentum\": 0.5}}",
     1},
    {"{\"class_name\": \"RMSprop\", \"config\": {\"is_legacy_optimizer\": true}}", 0},
    {"{\"class_name\": \"Adam\", \"config\": {\"is_legacy_optimizer\": true}}", 0},
    {"{\"class_name\": \"Nadam\", \"config\": {\"is_legacy_optimizer\": true}}", 0},
};

OPTIM_TEST(test_lazy_threads)
{
    static grads g;
    const int saved = omp_get_max_threads();
    for (size_t i = 0; i < sizeof LAZY / sizeof *LAZY; i++) {
        optim_optimizer *o[3];
        optim_var *x[3];
        for (int t = 0; t < 3; t++) {
            o[t] = optim_test_make(LAZY[i].json);
            x[t] = table(OPTIM_F32);
            omp_set_num_threads(t + 1);
            for (int k = 0; k < 2; k++) {
                make_grads(&g, k);
                step_with(o[t], x[t], &g, 1);
            }
        }
        for (int t = 1; t < 3; t++) {
            assert_vars_bitwise(x[0], x[t]);
            all_slots_bitwise(o[0], x[0], o[t], x[t]);
        }
        optim_var *init = table(OPTIM_F32);
        for (int64_t r = 1; LAZY[i].lazy && r < ROWS - 1; r += 2) /* odd rows: no index */
            for (int c = 0; c < COLS; c++)
                assert_eq(optim_var_get(x[0], r * COLS + c), optim_var_get(init, r * COLS + c));
        optim_var_destroy(init);
        for (int t = 0; t < 3; t++) {
            optim_destroy(o[t]);
            optim_var_destroy(x[t]);
        }
    }
    omp_set_num_threads(saved);
}

/* The threaded modes against the same class run whole (its sparse_mode
 * hook removed: apply_sparse once, one thread, as before the modes): bit
 * for bit, for every built-in whose apply_sparse serves the config. */
OPTIM_TEST(test_modes_match_whole)
{
    static const struct {
        const char *cls, *extra;
    } cases[] = {
        {"LazyAdam", ""},
        {"Adam", ""},
        {"Adam", ", \"amsgrad\": true"},
        {"AdamW", ", \"weight_decay\": 0.01"},
        {"Nadam", ""},
        {"RMSprop", ""},
        {"RMSprop", ", \"centered\": true"},
        {"RMSprop", ", \"momentum\": 0.5"},
        {"SGD", ", \"momentum\": 0.5"},
        {"Adagrad", ""},
        {"Adadelta", ""},
        {"Adamax", ""},
        {"Ftrl", ""},
    };
    static char names[sizeof cases / sizeof *cases][64]; /* registered tables keep their name */
    static grads g;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        snprintf(names[c], sizeof names[c], "%sWhole", cases[c].cls);
        if (!optim_find_class(names[c])) {
            optim_class w = *optim_find_class(cases[c].cls);
            w.name = names[c];
            w.sparse_mode = NULL;
            optim_error err;
            assert_ok(optim_register_class(&w, &err), &err);
        }
        optim_optimizer *o[2];
        optim_var *x[2];
        for (int k = 0; k < 2; k++) {
            char json[1024];
            snprintf(json, sizeof json,
                     "{\"class_name\": \"%s\", \"config\": {\"is_legacy_optimizer\": true%s}}",
                     k ? names[c] : cases[c].cls, cases[c].extra);
            o[k] = optim_test_make(json);
            assert_ok(optim_set_num_threads(o[k], 3), o[k]);
            x[k] = table(OPTIM_F32);
            for (int step = 0; step < 2; step++) {
                make_grads(&g, step);
                step_with(o[k], x[k], &g, 1);
            }
        }
        assert_vars_bitwise(x[0], x[1]);
        all_slots_bitwise(o[0], x[0], o[1], x[1]);
        for (int k = 0; k < 2; k++) {
            optim_destroy(o[k]);
            optim_var_destroy(x[k]);
        }
    }
}

/* Keras 3 LazyAdam's indexed rows follow its dense rule: equal, bit for
 * bit, to a dense step on a table of just those rows. */
OPTIM_TEST(test_lazy_rows_follow_dense_rule)
{
    optim_error err;
    static grads g;
    make_grads(&g, 0);
    int64_t uniq[ROWS], nu = 0;
    for (int64_t r = 0; r < ROWS; r++)
        for (int j = 0; j < NIDX; j++)
            if (g.idx[j] == r) {
                uniq[nu++] = r;
                break;
            }
    static float small_init[ROWS * COLS], small_g[ROWS * COLS];
    optim_var *x = table(OPTIM_F32);
    for (int64_t u = 0; u < nu; u++)
        for (int c = 0; c < COLS; c++) {
            small_init[u * COLS + c] = (float)optim_var_get(x, uniq[u] * COLS + c);
            small_g[u * COLS + c] = g.dense_f[uniq[u] * COLS + c];
        }
    optim_var *small;
    assert_ok(
        optim_var_create(&small, "small", OPTIM_F32, 2, (int64_t[]){nu, COLS}, small_init, &err),
        &err);
    const char *json = "{\"class_name\": \"LazyAdam\", \"config\": {\"learning_rate\": 0.01}}";
    optim_optimizer *os = optim_test_make(json), *od = optim_test_make(json);
    omp_set_num_threads(3);
    step_with(os, x, &g, 1);
    optim_grad_var p = {
        optim_grad_dense(optim_tensor_make(OPTIM_F32, small_g, 2, (int64_t[]){nu, COLS})), small};
    assert_ok(optim_apply_gradients(od, &p, 1, 0), od);
    const float *a = optim_var_cdata(x), *b = optim_var_cdata(small);
    for (int64_t u = 0; u < nu; u++)
        assert_memory_equal(a + uniq[u] * COLS, b + u * COLS, COLS * sizeof(float));
    optim_destroy(os);
    optim_destroy(od);
    optim_var_destroy(x);
    optim_var_destroy(small);
}

/* ---- user classes ------------------------------------------------------------------------ */

/* A user's element-wise SGD with momentum (user_momentum.h), no apply_sparse. */
static const optim_class USER_EW = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "SparseWalkUserEW",
    .flags = OPTIM_CLASS_ELEMENTWISE,
    .default_learning_rate = 0.05,
    .coef_size = sizeof(ucoef),
    .create_slots = u_slots,
    .prepare = u_prepare,
    .apply_dense = u_dense,
};

static optim_optimizer *make_user(const optim_class *cls)
{
    optim_optimizer *o;
    optim_error err;
    assert_ok(optim_create(&o, cls, NULL, &err), &err);
    return o;
}

OPTIM_TEST(test_user_elementwise)
{
    static grads g;
    for (int t = 1; t <= 3; t++) {
        optim_optimizer *os = make_user(&USER_EW), *od = make_user(&USER_EW);
        optim_var *xs = table(OPTIM_F32), *xd = table(OPTIM_F32);
        omp_set_num_threads(t);
        for (int k = 0; k < 2; k++) {
            make_grads(&g, k);
            step_with(os, xs, &g, 1);
            step_with(od, xd, &g, 0);
        }
        assert_vars_bitwise(xs, xd);
        all_slots_bitwise(os, xs, od, xd);
        /* Bad input still refused, nothing changed. */
        optim_var *before = table(OPTIM_F32);
        assert_ok(optim_var_assign(before, optim_var_cdata(xs), OPTIM_F32, ROWS * COLS), before);
        int64_t bad = ROWS;
        optim_grad_var p = {
            optim_grad_sparse(&bad, 1, optim_tensor_make(OPTIM_F32, g.vf, 2, (int64_t[]){1, COLS})),
            xs};
        assert_status(optim_apply_gradients(os, &p, 1, 0), OPTIM_ERANGE, os);
        assert_contains(optim_errmsg(os), "table");
        assert_vars_bitwise(xs, before);
        assert_eq(optim_iterations(os), 2);
        optim_var_destroy(before);
        optim_destroy(os);
        optim_destroy(od);
        optim_var_destroy(xs);
        optim_var_destroy(xd);
    }
}

/* What a recording class saw: apply_dense and apply_sparse calls. */
static struct {
    int dense_calls, sparse_calls, mode, max_index_ok;
    int64_t dense_elems, sparse_idx, max_count, first_n[8], rows_total;
    unsigned char starts[ROWS]; /* starts[i]: a call's first index was i */
} seen;

static void rec_dense(const optim_dense_update *u)
{
#pragma omp critical(sparse_walk_rec)
    {
        seen.dense_calls++;
        seen.dense_elems += u->count;
        if (u->count > seen.max_count) seen.max_count = u->count;
    }
}

static void rec_sparse(const optim_sparse_update *u)
{
#pragma omp critical(sparse_walk_rec)
    {
        if (seen.sparse_calls < 8) seen.first_n[seen.sparse_calls] = u->n;
        seen.sparse_calls++;
        seen.sparse_idx += u->n;
        seen.rows_total += u->rows;
        if (u->n > seen.max_count) seen.max_count = u->n;
        if (u->n > 0 && u->indices[0] >= 0 && u->indices[0] < ROWS) seen.starts[u->indices[0]] = 1;
        for (int64_t j = 0; j < u->n; j++)
            seen.max_index_ok &= u->indices[j] >= 0 && u->indices[j] < u->rows;
    }
}

static int rec_mode(const optim_sparse_update *u)
{
    (void)u;
    return seen.mode;
}

static void run_rec(const optim_class *cls, int threads, int64_t nidx)
{
    const int mode = seen.mode;
    memset(&seen, 0, sizeof seen);
    seen.mode = mode;
    seen.max_index_ok = 1;
    static grads g;
    make_grads(&g, 0);
    optim_optimizer *o = make_user(cls);
    assert_ok(optim_set_num_threads(o, threads), o);
    optim_var *x = table(OPTIM_F32);
    int64_t idx[NIDX];
    for (int64_t j = 0; j < nidx; j++) idx[j] = j % ROWS; /* unique up to ROWS */
    optim_grad_var p = {
        optim_grad_sparse(idx, nidx,
                          optim_tensor_make(OPTIM_F32, g.vf, 2, (int64_t[]){nidx, COLS})),
        x};
    assert_ok(optim_apply_gradients(o, &p, 1, 0), o);
    optim_destroy(o);
    optim_var_destroy(x);
}

OPTIM_TEST(test_modes_observed)
{
    optim_class ew = {.size = sizeof(optim_class),
                      .version = OPTIM_CLASS_VERSION,
                      .name = "SparseWalkRec",
                      .flags = OPTIM_CLASS_ELEMENTWISE,
                      .apply_dense = rec_dense,
                      .apply_sparse = rec_sparse,
                      .sparse_mode = rec_mode};
    /* DENSE: one apply_dense per chunk of the table, none of apply_sparse. */
    seen.mode = OPTIM_SPARSE_DENSE;
    run_rec(&ew, 3, 10);
    assert_eq(seen.dense_calls, optim__nchunks(ROWS * COLS));
    assert_int_equal(seen.dense_elems, ROWS * COLS);
    assert_int_equal(seen.max_count, OPTIM__CHUNK);
    assert_int_equal(seen.sparse_calls, 0);
    /* ROWS: 300 unique rows of 100 = 30000 elements: 3 equal ranges on 3
     * threads, 2 on 2, each in calls of OPTIM__SPARSE_BATCH indices (a
     * call starts at each range's first index). */
    const int64_t nb = OPTIM__SPARSE_BATCH;
    seen.mode = OPTIM_SPARSE_ROWS;
    run_rec(&ew, 3, ROWS);
    assert_int_equal(seen.sparse_calls, 3 * ((ROWS / 3 + nb - 1) / nb));
    assert_int_equal(seen.sparse_idx, ROWS);
    assert_int_equal(seen.max_count, nb);
    for (int64_t i = 0; i < ROWS; i++) assert_int_equal(seen.starts[i], (i % (ROWS / 3)) % nb == 0);
    run_rec(&ew, 2, ROWS);
    assert_int_equal(seen.sparse_calls, 2 * ((ROWS / 2 + nb - 1) / nb));
    for (int64_t i = 0; i < ROWS; i++) assert_int_equal(seen.starts[i], (i % (ROWS / 2)) % nb == 0);
    run_rec(&ew, 3, 10); /* 1000 elements: one range */
    assert_int_equal(seen.sparse_calls, (10 + nb - 1) / nb);
    assert_int_equal(seen.first_n[0], nb);
    /* ALL_ROWS: ranges of 81 rows (8192 / 100), each with its own indices rebased. */
    seen.mode = OPTIM_SPARSE_ALL_ROWS;
    run_rec(&ew, 3, 10);
    assert_int_equal(seen.sparse_calls, (ROWS + 80) / 81);
    assert_int_equal(seen.sparse_idx, 10);
    assert_int_equal(seen.first_n[0] + seen.first_n[1] + seen.first_n[2] + seen.first_n[3], 10);
    assert_int_equal(seen.rows_total, ROWS);
    assert_int_equal(seen.max_index_ok, 1);
    /* WHOLE, an unknown answer, or DENSE or ALL_ROWS from a class that is
     * not element-wise: one call. */
    for (int m = 0; m < 4; m++) {
        optim_class c = ew;
        seen.mode = m == 0 ? OPTIM_SPARSE_WHOLE
            : m == 1       ? 42
            : m == 2       ? OPTIM_SPARSE_DENSE
                           : OPTIM_SPARSE_ALL_ROWS;
        if (m >= 2) c.flags = 0;
        run_rec(&c, 3, ROWS);
        assert_int_equal(seen.sparse_calls, 1);
        assert_int_equal(seen.sparse_idx, ROWS);
        assert_int_equal(seen.dense_calls, 0);
    }
    /* A version-2 table (no sparse_mode field) runs apply_sparse whole. */
    optim_class v2 = ew;
    v2.version = 2;
    v2.size = (uint32_t)offsetof(optim_class, sparse_mode);
    seen.mode = OPTIM_SPARSE_ROWS;
    run_rec(&v2, 3, ROWS);
    assert_int_equal(seen.sparse_calls, 1);
}

OPTIM_TEST(test_refused_without_rule)
{
    optim_class c = {.size = sizeof(optim_class),
                     .version = OPTIM_CLASS_VERSION,
                     .name = "SparseWalkWhole",
                     .apply_dense = rec_dense};
    optim_optimizer *o = make_user(&c);
    optim_var *x = table(OPTIM_F32);
    static grads g;
    make_grads(&g, 0);
    optim_grad_var p = {
        optim_grad_sparse(g.idx, 2, optim_tensor_make(OPTIM_F32, g.vf, 2, (int64_t[]){2, COLS})),
        x};
    assert_status(optim_apply_gradients(o, &p, 1, 0), OPTIM_ENOTSUP, o);
    assert_contains(optim_errmsg(o), "no sparse update");
    assert_contains(optim_errmsg(o), "OPTIM_CLASS_ELEMENTWISE");
    assert_eq(optim_iterations(o), 0);
    optim_destroy(o);
    optim_var_destroy(x);
    /* A table of a later version than the library is refused. */
    c.version = OPTIM_CLASS_VERSION + 1;
    optim_error err;
    assert_status(optim_register_class(&c, &err), OPTIM_EVERSION, &err);
}

/* ---- the chunk gradient ------------------------------------------------------------------ */

OPTIM_TEST(test_chunk_grad)
{
    const int64_t rows = 50, rs = 7, idx[] = {0, 3, 4, 17, 49};
    double vals[5 * 7], dense[50 * 7] = {0}, buf[OPTIM__CHUNK];
    for (int j = 0; j < 5; j++)
        for (int c = 0; c < rs; c++) dense[idx[j] * rs + c] = vals[j * rs + c] = 1 + j * 10 + c;
    optim_sparse_update u = {
        .dtype = OPTIM_F64, .rows = rows, .row_size = rs, .indices = idx, .n = 5, .values = vals};
    for (int64_t off = 0; off < rows * rs; off++)
        for (int64_t len = 1; off + len <= rows * rs; len += 5) {
            const double *g = optim__sparse_chunk_grad(&u, off, len, buf);
            for (int64_t i = 0; i < len; i++) assert_eq(g[i], dense[off + i]);
            if (g != buf) /* the shared zero chunk only where no index meets the range */
                for (int64_t i = 0; i < len; i++) assert_eq(dense[off + i], 0.0);
        }
    /* Ranges of a lazy update cover every index and every row once. */
    for (int64_t pieces = 1; pieces <= 5; pieces++) {
        int64_t next_j = 0, next_r = 0;
        for (int64_t k = 0; k < pieces; k++) {
            int64_t j0, j1, r0, r1;
            optim__sparse_piece(&u, pieces, k, &j0, &j1, &r0, &r1);
            assert_int_equal(j0, next_j);
            assert_int_equal(r0, next_r);
            assert_ge(j1 - j0, 5 / pieces);
            assert_le(j1 - j0, 5 / pieces + 1);
            next_j = j1;
            next_r = r1;
        }
        assert_int_equal(next_j, 5);
        assert_int_equal(next_r, rows);
    }
    assert_eq(optim__sparse_pieces(0, 64, 4), 1);
    assert_eq(optim__sparse_pieces(4096, 64, 2), 2);
    assert_eq(optim__sparse_pieces(100, 64, 8), 1);
}

static int cmp_ipos(const void *a, const void *b)
{
    const optim__ipos *x = a, *y = b;
    if (x->idx != y->idx) return x->idx < y->idx ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* The radix sort of de-duplication against qsort by (index, position),
 * for tables needing one to four passes. */
OPTIM_TEST(test_sort)
{
    enum { N = 5000 };
    static optim__ipos a[N], b[N], tmp[N];
    const int64_t rows_list[] = {1, 2, 2047, 2048, 2049, 1000000, (int64_t)1 << 40, INT64_MAX};
    uint64_t seed = 7;
    for (size_t t = 0; t < sizeof rows_list / sizeof *rows_list; t++) {
        for (int n = 0; n <= N; n += n < 10 ? 1 : 997) {
            for (int k = 0; k < n; k++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                int64_t r = (int64_t)((seed >> 1) % (uint64_t)rows_list[t]);
                if (k % 5 == 4) r = a[k / 2].idx; /* repeats */
                a[k] = b[k] = (optim__ipos){r, k};
            }
            optim__sparse_sort(a, tmp, n, rows_list[t]);
            qsort(b, (size_t)n, sizeof *b, cmp_ipos);
            if (n) assert_memory_equal(a, b, (size_t)n * sizeof *a);
        }
    }
}

/* De-duplication's sum: unique indices ascending, each row zero plus its
 * rows in order of position (-0 becomes +0), the same bits for any number
 * of parts; against the sum written out directly. */
OPTIM_TEST(test_sum)
{
    enum { N = 900, RS = 5, NR = 400 };
    static optim__ipos a[N], tmp[N];
    static float raw[N * RS], vals[N * RS], ref[N * RS];
    static int64_t idx[N], first[N + 1], given[N];
    uint64_t seed = 11;
    for (int k = 0; k < N; k++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        given[k] = (int64_t)((seed >> 33) % NR);
        a[k] = (optim__ipos){given[k], k};
        for (int c = 0; c < RS; c++)
            raw[k * RS + c] = c == 0 ? -0.0f : (float)((int)(seed >> (8 + 4 * c)) % 97) / 7.0f;
    }
    optim__sparse_sort(a, tmp, N, NR);
    const int64_t count = optim__sparse_groups(a, N, idx, first);
    int64_t u = 0;
    for (int64_t r = 0; r < NR; r++) { /* the reference: every row r that some index names */
        int any = 0;
        for (int c = 0; c < RS; c++) ref[u * RS + c] = 0.0f;
        for (int pos = 0; pos < N; pos++)
            if (given[pos] == r) {
                any = 1;
                for (int c = 0; c < RS; c++) ref[u * RS + c] += raw[pos * RS + c];
            }
        if (any) assert_int_equal(idx[u++], r);
    }
    assert_int_equal(count, u);
    assert_int_equal(first[0], 0);
    assert_int_equal(first[count], N);
    for (int parts = 1; parts <= 5; parts++) {
        memset(vals, 0xff, sizeof vals);
        for (int k = 0; k < parts; k++)
            optim__sparse_sum_part(OPTIM_F32, RS, raw, a, first, count, parts, k, vals);
        assert_memory_equal(vals, ref, (size_t)count * RS * sizeof *vals);
        for (int64_t j = 0; j < count; j++) assert_false(signbit(vals[j * RS])); /* 0 + -0 is +0 */
    }
}

int main(void) { return optim_test_run(); }
