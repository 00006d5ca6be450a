/* The apply_gradients pipeline of the base class: absent gradients, lazy
 * slots, weights, constraints, transformers and aggregators, build, and
 * every bad input leaving variables, slots and iterations unchanged. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"


static optim_var *vec(const char *name, optim_dtype dt, int64_t n, double start)
{
    double *b = malloc((size_t)n * sizeof *b);
    float *f = malloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++) b[i] = start + i, f[i] = (float)(start + i);
    optim_var *v;
    optim_error err;
    assert_ok(optim_var_create(&v, name, dt, 1, &n, dt == OPTIM_F32 ? (void *)f : (void *)b, &err),
              &err);
    free(b);
    free(f);
    return v;
}

static optim_var *mat(const char *name, int64_t r, int64_t c)
{
    int64_t shape[2] = {r, c};
    optim_var *v;
    optim_error err;
    assert_ok(optim_var_create(&v, name, OPTIM_F32, 2, shape, NULL, &err), &err);
    float *d = optim_var_data(v);
    for (int64_t i = 0; i < r * c; i++) d[i] = (float)i;
    return v;
}

/* A snapshot of all state: iterations, every weight's bytes, variables. */
typedef struct snap {
    int64_t it;
    size_t nw;
    char *bytes;
    size_t len;
} snap;

static snap take(optim_optimizer *opt, optim_var **vars, size_t nv)
{
    snap s = {optim_iterations(opt), optim_weights_count(opt), NULL, 0};
    optim_tensor w[32];
    size_t n = optim_get_weights(opt, w, 32);
    for (size_t i = 0; i < n; i++)
        s.len += (size_t)optim_tensor_numel(&w[i]) * optim_dtype_size(w[i].dtype);
    for (size_t i = 0; i < nv; i++)
        s.len += (size_t)optim_var_numel(vars[i]) * optim_dtype_size(optim_var_dtype(vars[i]));
    s.bytes = malloc(s.len + 1);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t b = (size_t)optim_tensor_numel(&w[i]) * optim_dtype_size(w[i].dtype);
        memcpy(s.bytes + off, w[i].data, b);
        off += b;
    }
    for (size_t i = 0; i < nv; i++) {
        size_t b = (size_t)optim_var_numel(vars[i]) * optim_dtype_size(optim_var_dtype(vars[i]));
        memcpy(s.bytes + off, optim_var_data(vars[i]), b);
        off += b;
    }
    return s;
}

static void assert_unchanged(optim_optimizer *opt, optim_var **vars, size_t nv, snap *before)
{
    snap now = take(opt, vars, nv);
    assert_int_equal(now.it, before->it);
    assert_int_equal(now.nw, before->nw);
    assert_int_equal(now.len, before->len);
    assert_memory_equal(now.bytes, before->bytes, now.len);
    free(now.bytes);
    free(before->bytes);
}

static const char *MOMENTUM =
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9}}";

OPTIM_TEST(test_absent_gradients_skipped)
{
    optim_optimizer *opt = optim_test_make(MOMENTUM);
    optim_var *a = vec("a", OPTIM_F32, 3, 1), *b = vec("b", OPTIM_F32, 3, 1);
    float g[3] = {1, 1, 1};
    optim_grad_var p[2] = {
        {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, (int64_t[]){3})), a},
        {optim_grad_none(), b}};
    assert_ok(optim_apply_gradients(opt, p, 2, 0), opt);
    assert_eq(optim_var_get(a, 0), 0.9f);
    assert_eq(optim_var_get(b, 0), 1.0f);
    assert_eq(optim_var_get(b, 2), 3.0f);
    assert_null(optim_get_slot(opt, b, "momentum"));
    assert_non_null(optim_get_slot(opt, a, "momentum"));
    assert_eq(optim_iterations(opt), 1);
    /* All absent: refused, as Keras's "No gradients provided for any variable". */
    p[0].grad = optim_grad_none();
    snap before = take(opt, (optim_var *[]){a, b}, 2);
    assert_status(optim_apply_gradients(opt, p, 2, 0), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "no gradients");
    assert_unchanged(opt, (optim_var *[]){a, b}, 2, &before);
    optim_destroy(opt);
    optim_var_destroy(a);
    optim_var_destroy(b);
}

OPTIM_TEST(test_lazy_slots_and_names)
{
    optim_optimizer *opt = optim_test_make(MOMENTUM);
    optim_var *a = vec("a", OPTIM_F32, 2, 0), *b = vec("b", OPTIM_F64, 2, 0);
    assert_eq(optim_weights_count(opt), 1);
    const char *names[4];
    assert_eq(optim_get_slot_names(opt, names, 4), 0);
    double gb[2] = {1, 2};
    optim_grad_var pb = {optim_grad_dense(optim_tensor_make(OPTIM_F64, gb, 1, (int64_t[]){2})), b};
    assert_ok(optim_apply_gradients(opt, &pb, 1, 0), opt);
    assert_null(optim_get_slot(opt, a, "momentum"));
    assert_eq(optim_weights_count(opt), 2);
    float ga[2] = {1, 2};
    optim_grad_var pa = {optim_grad_dense(optim_tensor_make(OPTIM_F32, ga, 1, (int64_t[]){2})), a};
    assert_ok(optim_apply_gradients(opt, &pa, 1, 0), opt);
    assert_eq(optim_weights_count(opt), 3);
    /* Creation order: b's slot first. */
    assert_string_equal(optim_weight_name(opt, 0), "iterations");
    assert_string_equal(optim_weight_name(opt, 1), "b/momentum");
    assert_string_equal(optim_weight_name(opt, 2), "a/momentum");
    assert_null(optim_weight_name(opt, 3));
    assert_eq(optim_get_slot_names(opt, names, 4), 1);
    assert_string_equal(names[0], "momentum");
    assert_null(optim_get_slot(opt, a, "nope"));
    assert_eq(optim_var_dtype(optim_get_slot(opt, b, "momentum")), OPTIM_F64);
    optim_destroy(opt);
    optim_var_destroy(a);
    optim_var_destroy(b);
}

OPTIM_TEST(test_weights_round_trip)
{
    optim_optimizer *o1 = optim_test_make(MOMENTUM), *o2 = optim_test_make(MOMENTUM);
    optim_var *a = vec("a", OPTIM_F32, 3, 0), *b = vec("b", OPTIM_F32, 3, 0);
    float g[3] = {1, -2, 3};
    optim_grad_var pa = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, (int64_t[]){3})), a};
    for (int k = 0; k < 3; k++) assert_ok(optim_apply_gradients(o1, &pa, 1, 0), o1);
    pa.var = b;
    assert_ok(optim_apply_gradients(o2, &pa, 1, 0), o2);
    optim_tensor w[2];
    assert_eq(optim_get_weights(o1, w, 2), 2);
    assert_int_equal(w[0].dtype, OPTIM_I64);
    assert_int_equal(*(int64_t *)w[0].data, 3);
    /* Mismatches are refused and change nothing. */
    snap before = take(o2, &b, 1);
    assert_status(optim_set_weights(o2, w, 1), OPTIM_ESHAPE, o2);
    optim_tensor bad[2] = {w[0], w[1]};
    bad[1].shape[0] = 2;
    assert_status(optim_set_weights(o2, bad, 2), OPTIM_ESHAPE, o2);
    assert_contains(optim_errmsg(o2), "b/momentum");
    bad[1] = w[1];
    bad[1].dtype = OPTIM_F64;
    assert_status(optim_set_weights(o2, bad, 2), OPTIM_EDTYPE, o2);
    int64_t neg = -1;
    bad[0] = optim_tensor_make(OPTIM_I64, &neg, 0, NULL);
    bad[1] = w[1];
    assert_status(optim_set_weights(o2, bad, 2), OPTIM_ERANGE, o2);
    assert_unchanged(o2, &b, 1, &before);
    /* The real thing: o2 continues exactly like o1. */
    assert_ok(optim_set_weights(o2, w, 2), o2);
    assert_eq(optim_iterations(o2), 3);
    assert_ok(optim_var_assign(b, optim_var_data(a), OPTIM_F32, 3), b);
    pa.var = a;
    assert_ok(optim_apply_gradients(o1, &pa, 1, 0), o1);
    pa.var = b;
    assert_ok(optim_apply_gradients(o2, &pa, 1, 0), o2);
    assert_memory_equal(optim_var_data(a), optim_var_data(b), 3 * sizeof(float));
    optim_destroy(o1);
    optim_destroy(o2);
    optim_var_destroy(a);
    optim_var_destroy(b);
}

OPTIM_TEST(test_constraints_after_update)
{
    for (int legacy = 0; legacy < 2; legacy++) {
        optim_optimizer *opt = optim_test_make(
            legacy
                ? "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1.0, \"is_legacy_optimizer\": true}}"
                : "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1.0}}");
        optim_var *a = vec("a", OPTIM_F64, 3, 0); /* 0 1 2 */
        optim_constraint nn = optim_constraint_non_neg();
        assert_ok(optim_var_set_constraint(a, &nn), a);
        double g[3] = {1, 0.5, 3};
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, (int64_t[]){3})),
                            a};
        assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
        /* -1 -> -0, 0.5, -1 -> -0 */
        assert_eq(optim_var_get(a, 0), 0);
        assert_eq(optim_var_get(a, 1), 0.5);
        assert_eq(optim_var_get(a, 2), 0);
        /* Sparse: Keras 3 constrains too; legacy refuses a constrained
         * variable with a sparse gradient, and changes nothing. */
        optim_var *e = mat("e", 3, 2);
        optim_constraint mx = optim_constraint_max_norm(1.0, 1);
        assert_ok(optim_var_set_constraint(e, &mx), e);
        int64_t idx[1] = {2};
        float rows[2] = {1, 1};
        optim_grad_var ps = {
            optim_grad_sparse(idx, 1, optim_tensor_make(OPTIM_F32, rows, 2, (int64_t[]){1, 2})), e};
        snap before = take(opt, &e, 1);
        int rc = optim_apply_gradients(opt, &ps, 1, 0);
        if (legacy) {
            assert_status(rc, OPTIM_EINVAL, opt);
            assert_contains(optim_errmsg(opt), "constraint");
            assert_unchanged(opt, &e, 1, &before);
        } else {
            free(before.bytes);
            assert_ok(rc, opt);
            /* every row now has norm <= 1 */
            for (int r = 0; r < 3; r++) {
                double x = optim_var_get(e, 2 * r), y = optim_var_get(e, 2 * r + 1);
                assert_le(sqrt(x * x + y * y), 1.0 + 1e-6);
            }
            /* row 2 was (4, 5) - (1, 1) = (3, 4), norm 5 -> (0.6, 0.8) */
            assert_close(optim_var_get(e, 4), 3.0 / (5.0 + 1e-7), 1e-6, 0);
        }
        optim_destroy(opt);
        optim_var_destroy(a);
        optim_var_destroy(e);
    }
}

/* ---- bad inputs: each leaves everything unchanged ------------------------------- */

OPTIM_TEST(test_bad_inputs_change_nothing)
{
    optim_optimizer *opt = optim_test_make(MOMENTUM);
    optim_var *a = vec("a", OPTIM_F32, 4, 1), *e = mat("emb", 5, 2);
    optim_var *vars[2] = {a, e};
    float ga[4] = {1, 2, 3, 4}, rows[6] = {1, 1, 1, 1, 1, 1};
    double gd[4] = {1, 2, 3, 4};
    int64_t idx[3] = {0, 4, 0};
    /* One good step first so slots exist. */
    optim_grad_var good[2] = {
        {optim_grad_dense(optim_tensor_make(OPTIM_F32, ga, 1, (int64_t[]){4})), a},
        {optim_grad_sparse(idx, 3, optim_tensor_make(OPTIM_F32, rows, 2, (int64_t[]){3, 2})), e}};
    assert_ok(optim_apply_gradients(opt, good, 2, 0), opt);

    struct {
        const char *what;
        int code;
        const char *needle;
    } cases[] = {
        {"shape", OPTIM_ESHAPE, "expected [4]"},
        {"dtype", OPTIM_EDTYPE, "float64"},
        {"index range", OPTIM_ERANGE, "index 5"},
        {"negative index", OPTIM_ERANGE, "index -1"},
        {"rows/indices", OPTIM_ESHAPE, "indices"},
        {"row shape", OPTIM_ESHAPE, "values have shape"},
        {"null var", OPTIM_EINVAL, "no variable"},
        {"twice", OPTIM_EINVAL, "more than once"},
        {"non-trainable", OPTIM_EINVAL, "not trainable"},
        {"null data", OPTIM_EINVAL, "data is NULL"},
        {"bad kind", OPTIM_EINVAL, "unknown kind"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        optim_grad_var p[2] = {good[0], good[1]};
        int64_t bad_idx[3] = {0, 5, 0}, neg_idx[3] = {0, -1, 0};
        size_t n = 2;
        switch (c) {
        case 0: p[0].grad.dense.shape[0] = 3; break;
        case 1:
            p[0].grad = optim_grad_dense(optim_tensor_make(OPTIM_F64, gd, 1, (int64_t[]){4}));
            break;
        case 2: p[1].grad.sparse.indices = bad_idx; break;
        case 3: p[1].grad.sparse.indices = neg_idx; break;
        case 4: p[1].grad.sparse.n = 2; break;
        case 5: p[1].grad.sparse.values.shape[1] = 3; break;
        case 6: p[1].var = NULL; break;
        case 7: p[1] = p[0]; break;
        case 8: optim_var_set_trainable(e, 0); break;
        case 9: p[0].grad.dense.data = NULL; break;
        case 10: p[0].grad.kind = (optim_grad_kind)7; break;
        }
        snap before = take(opt, vars, 2);
        int rc = optim_apply_gradients(opt, p, n, 0);
        if (rc != cases[c].code || !strstr(optim_errmsg(opt), cases[c].needle))
            print_error("case %s: rc %d, message '%s'\n", cases[c].what, rc, optim_errmsg(opt));
        assert_status(rc, cases[c].code, opt);
        assert_contains(optim_errmsg(opt), cases[c].needle);
        assert_unchanged(opt, vars, 2, &before);
        optim_var_set_trainable(e, 1);
    }
    /* A variable never seen, with an error elsewhere in the call: no slot is
     * created for it either. */
    optim_var *fresh = vec("fresh", OPTIM_F32, 4, 0);
    optim_grad_var p[2] = {{good[0].grad, fresh}, good[1]};
    int64_t bad_idx[3] = {0, 9, 0};
    p[1].grad.sparse.indices = bad_idx;
    size_t w = optim_weights_count(opt);
    assert_status(optim_apply_gradients(opt, p, 2, 0), OPTIM_ERANGE, opt);
    assert_eq(optim_weights_count(opt), w);
    assert_null(optim_get_slot(opt, fresh, "momentum"));
    /* NULL pairs with n > 0. */
    assert_status(optim_apply_gradients(opt, NULL, 1, 0), OPTIM_EINVAL, opt);
    optim_destroy(opt);
    optim_var_destroy(a);
    optim_var_destroy(e);
    optim_var_destroy(fresh);
}

OPTIM_TEST(test_build_fixes_variables)
{
    optim_optimizer *opt = optim_test_make(MOMENTUM);
    optim_var *a = vec("a", OPTIM_F32, 2, 0), *b = vec("b", OPTIM_F32, 2, 0);
    assert_ok(optim_build(opt, (optim_var *[]){a}, 1), opt);
    assert_non_null(optim_get_slot(opt, a, "momentum"));
    float g[2] = {1, 1};
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, (int64_t[]){2})), b};
    snap before = take(opt, &b, 1);
    assert_status(optim_apply_gradients(opt, &p, 1, 0), OPTIM_ENOTFOUND, opt);
    assert_contains(optim_errmsg(opt), "'b' is unknown");
    assert_unchanged(opt, &b, 1, &before);
    assert_status(optim_build(opt, (optim_var *[]){a, a}, 2), OPTIM_EINVAL, opt);
    optim_destroy(opt);
    optim_var_destroy(a);
    optim_var_destroy(b);
}

/* ---- transformers and aggregators ------------------------------------------------------ */

typedef struct calls {
    int n;
    int fail;
    float scale;
} calls;

static int scale_fn(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    calls *c = user;
    c->n++;
    if (c->fail) {
        snprintf(err->msg, sizeof err->msg, "refusing on purpose");
        return OPTIM_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        optim_tensor *t = pairs[i].grad.kind == OPTIM_GRAD_DENSE ? &pairs[i].grad.dense
                                                                 : &pairs[i].grad.sparse.values;
        float *d = t->data;
        for (int64_t j = 0; j < optim_tensor_numel(t); j++) d[j] *= c->scale;
    }
    return 0;
}

OPTIM_TEST(test_transformers_and_aggregator)
{
    optim_optimizer *opt = optim_test_make(
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1.0, \"clipvalue\": 1.0}}");
    calls agg = {0, 0, 2.0f}, tr = {0, 0, 0.5f};
    assert_ok(optim_set_gradient_aggregator(opt, scale_fn, &agg), opt);
    assert_ok(optim_add_gradient_transformer(opt, scale_fn, &tr), opt);
    optim_var *a = vec("a", OPTIM_F32, 3, 0), *e = mat("e", 3, 1);
    float g[3] = {0.25f, 1.0f, -4.0f}, rows[2] = {0.25f, 0.25f};
    int64_t idx[2] = {1, 1};
    optim_grad_var p[2] = {
        {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, (int64_t[]){3})), a},
        {optim_grad_sparse(idx, 2, optim_tensor_make(OPTIM_F32, rows, 2, (int64_t[]){2, 1})), e}};
    /* aggregate (x2) -> dedup -> clipvalue 1 -> transformer (x0.5) */
    assert_ok(optim_apply_gradients(opt, p, 2, 0), opt);
    assert_int_equal(agg.n, 1);
    assert_int_equal(tr.n, 1);
    assert_eq(optim_var_get(a, 0), -0.25f);
    assert_eq(optim_var_get(a, 1), 0.5f);
    assert_eq(optim_var_get(a, 2), 2.5f);
    assert_eq(optim_var_get(e, 1), 1.0f - 0.5f);
    /* The caller's gradients are not modified. */
    assert_eq(g[0], 0.25f);
    assert_eq(rows[0], 0.25f);
    /* No aggregation when asked. */
    assert_ok(optim_apply_gradients(opt, p, 2, OPTIM_APPLY_NO_AGGREGATE), opt);
    assert_int_equal(agg.n, 1);
    /* A failing transformer aborts the step with nothing changed. */
    tr.fail = 1;
    optim_var *vars[2] = {a, e};
    snap before = take(opt, vars, 2);
    assert_status(optim_apply_gradients(opt, p, 2, 0), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "refusing on purpose");
    assert_unchanged(opt, vars, 2, &before);
    optim_destroy(opt);
    optim_var_destroy(a);
    optim_var_destroy(e);
}

OPTIM_TEST(test_borrowed_variable)
{
    double mem[2] = {1, 2};
    optim_var *v;
    optim_error err;
    assert_ok(optim_var_wrap(&v, "w", OPTIM_F64, 1, (int64_t[]){2}, mem, &err), &err);
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.5}}");
    double g[2] = {1, 1};
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, (int64_t[]){2})), v};
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    assert_eq(mem[0], 0.5);
    assert_eq(mem[1], 1.5);
    optim_destroy(opt);
    optim_var_destroy(v);
    assert_eq(mem[0], 0.5); /* still ours */
}

/* ---- shaped slots and optimizer-level weights ----------------------------------------- */

/* A non-element-wise class: a per-row slot "rowsum" ([rows]) accumulating
 * row sums of the gradient, and one optimizer-level weight "count". */
typedef struct cstate {
    optim_var *count;
} cstate;

static int rs_create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    cstate *st = optim_state(opt);
    if (!st->count) {
        int rc = optim_add_weight(opt, "count", OPTIM_F64, 0, NULL, OPTIM_SLOT_CONSTANT, 1.0,
                                  &st->count);
        if (rc) return rc;
    }
    if (strcmp(optim_var_name(var), "fail") == 0) return OPTIM_EINVAL;
    return optim_add_slot_shaped(opt, var, "rowsum", 1, optim_var_shape(var), OPTIM_SLOT_ZEROS, 0);
}

static void rs_apply_dense(const optim_dense_update *u)
{
    const float *g = u->grad;
    float *r = u->slots[0];
    const int64_t rows = optim_var_shape(u->var)[0], cols = u->count / rows;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) r[i] += g[i * cols + j];
    cstate *st = optim_state(u->opt);
    *(double *)optim_var_data(st->count) += 1;
}

static const optim_class rowsum_class = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "RowSumTest",
    .state_size = sizeof(cstate),
    .create_slots = rs_create_slots,
    .apply_dense = rs_apply_dense,
};

OPTIM_TEST(test_shaped_slots_and_weights)
{
    optim_optimizer *opt;
    optim_error err;
    assert_ok(optim_create(&opt, &rowsum_class, NULL, &err), &err);
    optim_var *a = mat("a", 2, 3), *bad = mat("fail", 2, 3);
    float g[6] = {1, 2, 3, 4, 5, 6};
    optim_grad_var p[2] = {
        {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 2, (int64_t[]){2, 3})), a},
        {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 2, (int64_t[]){2, 3})), bad}};
    /* The second variable's create_slots fails: a's slot is rolled back,
     * the optimizer-level weight stays (the class state points at it). */
    assert_status(optim_apply_gradients(opt, p, 2, 0), OPTIM_EINVAL, opt);
    assert_eq(optim_weights_count(opt), 2);
    assert_string_equal(optim_weight_name(opt, 1), "count");
    assert_ok(optim_apply_gradients(opt, p, 1, 0), opt);
    assert_eq(optim_weights_count(opt), 3);
    assert_string_equal(optim_weight_name(opt, 2), "a/rowsum");
    optim_var *r = optim_get_slot(opt, a, "rowsum");
    assert_eq(optim_var_rank(r), 1);
    assert_eq(optim_var_shape(r)[0], 2);
    assert_eq(optim_var_get(r, 0), 6);
    assert_eq(optim_var_get(r, 1), 15);
    const char *names[4];
    assert_eq(optim_get_slot_names(opt, names, 4), 1); /* "count" is not a slot name */
    optim_tensor w[3];
    assert_eq(optim_get_weights(opt, w, 3), 3);
    assert_eq(*(double *)w[1].data, 2.0);
    /* An element-wise class cannot have shaped slots. */
    optim_optimizer *sgd;
    assert_ok(optim_create_by_name(&sgd, "sgd", NULL, &err), &err);
    assert_status(optim_add_slot_shaped(sgd, a, "x", 1, (int64_t[]){2}, OPTIM_SLOT_ZEROS, 0),
                  OPTIM_EINVAL, sgd);
    optim_destroy(sgd);
    optim_destroy(opt);
    optim_var_destroy(a);
    optim_var_destroy(bad);
}

int main(void) { return optim_test_run(); }
