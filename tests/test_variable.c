/* Variables: owned and borrowed storage, accessors, assign, bad inputs, and
 * the Keras constraints (NonNeg, MaxNorm, UnitNorm, MinMaxNorm, custom), each
 * checked against a double-precision reference written here from Keras's
 * formulas (keras/src/constraints/constraints.py):
 *
 *     norms      = sqrt(sum(w^2, axis, keepdims=True))
 *     NonNeg     : w * (w >= 0)
 *     MaxNorm    : w * clip(norms, 0, max) / (epsilon + norms)
 *     UnitNorm   : w / (epsilon + norms)
 *     MinMaxNorm : w * (rate * clip(norms, min, max) + (1 - rate) * norms) / (epsilon + norms)
 *     epsilon    = 1e-7
 */
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optimizer.h"
#include "optim/optimizers.h"
#include "optim/variable.h"

#define KERAS_EPS 1e-7

/* A non-NULL pointer that no constructor could return: constructors must
 * overwrite *out with NULL on failure. */
static char not_a_var;
#define SENTINEL ((optim_var *)(void *)&not_a_var)

/* ---- Creation: owned and borrowed ----------------------------------------- */

OPTIM_TEST(test_create_owned_copies_init)
{
    float init[6] = {1, -2, 3, -4, 5, -6};
    int64_t shape[2] = {2, 3};
    char name[16] = "dense/kernel";
    optim_var *v = SENTINEL;
    optim_error err;
    assert_ok(optim_var_create(&v, name, OPTIM_F32, 2, shape, init, &err), &err);
    assert_non_null(v);
    assert_ptr_not_equal(v, SENTINEL);
    assert_int_equal(err.code, OPTIM_OK);
    /* Everything given is copied: init, shape and name. */
    assert_ptr_not_equal(optim_var_data(v), init);
    init[0] = 100.0f;
    shape[0] = 7;
    name[0] = 'X';
    assert_string_equal(optim_var_name(v), "dense/kernel");
    assert_eq(optim_var_shape(v)[0], 2);
    assert_eq(optim_var_shape(v)[1], 3);
    assert_eq(optim_var_numel(v), 6);
    const float expect[6] = {1, -2, 3, -4, 5, -6};
    for (int i = 0; i < 6; i++) assert_eq(optim_var_get(v, i), expect[i]);
    assert_memory_equal(optim_var_cdata(v), expect, sizeof expect);
    optim_var_destroy(v);
}

OPTIM_TEST(test_create_zeros_when_init_null)
{
    optim_error err;
    int64_t shape[3] = {2, 3, 4};
    optim_var *v = NULL;
    assert_ok(optim_var_create(&v, "z", OPTIM_F64, 3, shape, NULL, &err), &err);
    assert_eq(optim_var_numel(v), 24);
    const double *d = optim_var_cdata(v);
    for (int i = 0; i < 24; i++) assert_eq(d[i], 0.0);
    optim_var_destroy(v);
}

OPTIM_TEST(test_create_scalar_and_empty)
{
    optim_error err;
    optim_var *s = NULL, *e = NULL;
    double one = 3.5;
    assert_ok(optim_var_create(&s, "scalar", OPTIM_F64, 0, NULL, &one, &err), &err);
    assert_eq(optim_var_rank(s), 0);
    assert_eq(optim_var_numel(s), 1);
    assert_eq(optim_var_get(s, 0), 3.5);
    optim_tensor t = optim_var_tensor(s);
    assert_int_equal(t.rank, 0);
    assert_eq(optim_tensor_numel(&t), 1);

    int64_t shape[2] = {0, 5};
    assert_ok(optim_var_create(&e, "empty", OPTIM_F32, 2, shape, NULL, &err), &err);
    assert_eq(optim_var_numel(e), 0);
    assert_nan(optim_var_get(e, 0));
    optim_var_destroy(s);
    optim_var_destroy(e);
}

/* A variable's data starts on a 64-byte boundary whatever its size and
 * name, and holds every element apart from the name (the struct, data and
 * name share one heap block). */
OPTIM_TEST(test_create_layout)
{
    optim_error err;
    const int64_t sizes[] = {0, 1, 3, 16, 17, 1000};
    char name[301];
    for (size_t len = 1; len < sizeof name; len += 37)
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
            for (int f64 = 0; f64 < 2; f64++) {
                memset(name, 'a' + (int)(len % 26), len);
                name[len] = '\0';
                optim_var *v = NULL;
                const optim_dtype dt = f64 ? OPTIM_F64 : OPTIM_F32;
                assert_ok(optim_var_create(&v, name, dt, 1, &sizes[k], NULL, &err), &err);
                assert_eq((uintptr_t)optim_var_data(v) % 64, 0);
                size_t bytes = (size_t)sizes[k] * optim_dtype_size(dt);
                memset(optim_var_data(v), 0xA5, bytes);
                assert_string_equal(optim_var_name(v), name);
                for (int64_t i = 0; i < sizes[k]; i++) assert_false(isnan(optim_var_get(v, i)));
                optim_var_destroy(v);
            }
}

/* THPeligible of the mapping that holds p in /proc/self/smaps: 1 or 0, -1
 * where the system does not say (not Linux, or an older kernel). */
static int thp_eligible(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0, r = -1;
    while (r < 0 && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        int v;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && sscanf(line, "THPeligible: %d", &v) == 1) r = v;
    }
    fclose(f);
    return r;
}

/* Whether transparent huge pages are on for memory that asks (Linux). */
static int thp_on(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char mode[128] = "";
    if (!f) return 0;
    const int ok = fgets(mode, sizeof mode, f) != NULL;
    fclose(f);
    return ok && !strstr(mode, "[never]");
}

/* Data of 2 MiB or more: its own block on 2 MiB boundaries, advised onto
 * huge pages where the system has them (huge_pages.h); zeroed or copied as
 * any other, the name intact. Below that, the one 64-byte aligned block. */
OPTIM_TEST(test_create_large_on_huge_pages)
{
    optim_error err;
    const size_t mib2 = (size_t)2 << 20;
    const int64_t sizes[] = {(int64_t)(mib2 / 4) - 16, (int64_t)(mib2 / 4), (int64_t)(mib2 / 4) + 1,
                             (int64_t)(3 * mib2 / 4)};
    float *init = malloc(3 * mib2);
    assert_non_null(init);
    for (size_t i = 0; i < 3 * mib2 / 4; i++) init[i] = (float)i;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (int copy = 0; copy < 2; copy++) {
            optim_var *v = NULL;
            assert_ok(
                optim_var_create(&v, "big", OPTIM_F32, 1, &sizes[k], copy ? init : NULL, &err),
                &err);
            const float *d = optim_var_data(v);
            const int big = (size_t)sizes[k] * 4 >= mib2;
            assert_int_equal((uintptr_t)d % (big ? mib2 : 64), 0);
            for (int64_t i = 0; i < sizes[k]; i += 4099)
                assert_float_equal(d[i], copy ? (float)i : 0.0f, 0);
            assert_float_equal(d[sizes[k] - 1], copy ? (float)(sizes[k] - 1) : 0.0f, 0);
            assert_string_equal(optim_var_name(v), "big");
            if (big && thp_on() && thp_eligible(d) >= 0) assert_int_equal(thp_eligible(d), 1);
            optim_var_destroy(v);
        }
    free(init);
}

OPTIM_TEST(test_accessors)
{
    optim_error err;
    double init[4] = {0.5, 1.5, 2.5, 3.5};
    int64_t shape[2] = {4, 1};
    optim_var *v;
    assert_ok(optim_var_create(&v, "bias", OPTIM_F64, 2, shape, init, &err), &err);
    assert_string_equal(optim_var_name(v), "bias");
    assert_eq(optim_var_dtype(v), OPTIM_F64);
    assert_eq(optim_var_rank(v), 2);
    assert_eq(optim_var_shape(v)[0], 4);
    assert_eq(optim_var_shape(v)[1], 1);
    assert_eq(optim_var_numel(v), 4);
    assert_ptr_equal(optim_var_data(v), optim_var_cdata(v));
    optim_tensor t = optim_var_tensor(v);
    assert_int_equal(t.dtype, OPTIM_F64);
    assert_int_equal(t.rank, 2);
    assert_int_equal(t.shape[0], 4);
    assert_int_equal(t.shape[1], 1);
    assert_ptr_equal(t.data, optim_var_data(v));
    /* Element reads, out of range gives NaN. */
    for (int i = 0; i < 4; i++) assert_eq(optim_var_get(v, i), init[i]);
    assert_nan(optim_var_get(v, 4));
    assert_nan(optim_var_get(v, -1));
    /* Trainable flag: default 1, normalised to 0/1. */
    assert_eq(optim_var_trainable(v), 1);
    optim_var_set_trainable(v, 0);
    assert_eq(optim_var_trainable(v), 0);
    optim_var_set_trainable(v, 7);
    assert_eq(optim_var_trainable(v), 1);
    /* No constraint, no message. */
    assert_null(optim_var_constraint(v));
    assert_string_equal(optim_var_errmsg(v), "");
    optim_var_destroy(v);
    optim_var_destroy(NULL); /* no-op */
}

OPTIM_TEST(test_wrap_borrows_memory)
{
    /* Heap memory the caller frees after the variable: if the library freed
     * it too, the sanitizer build reports a double free. */
    float *buf = malloc(6 * sizeof *buf);
    assert_non_null(buf);
    for (int i = 0; i < 6; i++) buf[i] = (float)i;
    int64_t shape[2] = {3, 2};
    optim_var *v = SENTINEL;
    optim_error err;
    assert_ok(optim_var_wrap(&v, "emb", OPTIM_F32, 2, shape, buf, &err), &err);
    assert_ptr_equal(optim_var_data(v), buf);
    assert_ptr_equal(optim_var_cdata(v), buf);
    assert_ptr_equal(optim_var_tensor(v).data, buf);
    /* Caller changes are seen by the library... */
    buf[4] = 42.0f;
    assert_eq(optim_var_get(v, 4), 42.0);
    /* ...and library writes land in the caller's memory. */
    const float src[6] = {6, 5, 4, 3, 2, 1};
    assert_ok(optim_var_assign(v, src, OPTIM_F32, 6), v);
    assert_memory_equal(buf, src, sizeof src);
    optim_constraint c = optim_constraint_non_neg();
    buf[0] = -1.0f;
    assert_ok(optim_var_set_constraint(v, &c), v);
    optim_var_apply_constraint(v);
    assert_eq(buf[0], 0.0f);
    optim_var_destroy(v);
    /* Still ours and intact after destroy. */
    assert_eq(buf[1], 5.0f);
    buf[1] = 9.0f;
    free(buf);

    /* Stack memory works too (freeing it would crash). */
    double local[2] = {1, 2};
    int64_t s1 = 2;
    assert_ok(optim_var_wrap(&v, "local", OPTIM_F64, 1, &s1, local, &err), &err);
    local[1] = -7;
    assert_eq(optim_var_get(v, 1), -7.0);
    optim_var_destroy(v);
}

/* A zero-element borrowed variable needs no memory: NULL data is valid
 * (the header requires data only to hold the elements). */
OPTIM_TEST(test_wrap_zero_elements_null_data)
{
    int64_t shape[2] = {0, 3};
    optim_var *v = SENTINEL;
    optim_error err;
    int rc = optim_var_wrap(&v, "empty_borrowed", OPTIM_F32, 2, shape, NULL, &err);
    if (rc != OPTIM_OK) print_error("optim_var_wrap: rc %d, msg '%s'\n", rc, err.msg);
    assert_ok(rc, &err);
    assert_non_null(v);
    assert_eq(optim_var_numel(v), 0);
    optim_var_destroy(v);
}

/* ---- assign ------------------------------------------------------------------ */

OPTIM_TEST(test_assign)
{
    optim_error err;
    int64_t shape[1] = {3};
    const double init[3] = {1, 2, 3};
    optim_var *v;
    assert_ok(optim_var_create(&v, "acc", OPTIM_F64, 1, shape, init, &err), &err);
    const double src[3] = {-1.25, 0.5, 8};
    assert_ok(optim_var_assign(v, src, OPTIM_F64, 3), v);
    assert_memory_equal(optim_var_cdata(v), src, sizeof src);
    assert_string_equal(optim_var_errmsg(v), "");

    /* Wrong dtype: refused, value unchanged, message names the variable. */
    const float fsrc[3] = {9, 9, 9};
    assert_status(optim_var_assign(v, fsrc, OPTIM_F32, 3), OPTIM_EDTYPE, v);
    assert_memory_equal(optim_var_cdata(v), src, sizeof src);
    assert_contains(optim_var_errmsg(v), "'acc'");
    assert_contains(optim_var_errmsg(v), "float32");
    assert_contains(optim_var_errmsg(v), "float64");

    /* Wrong element count. */
    const double big[4] = {9, 9, 9, 9};
    assert_status(optim_var_assign(v, big, OPTIM_F64, 4), OPTIM_ESHAPE, v);
    assert_memory_equal(optim_var_cdata(v), src, sizeof src);
    assert_contains(optim_var_errmsg(v), "'acc'");
    assert_contains(optim_var_errmsg(v), "4");
    assert_contains(optim_var_errmsg(v), "3");

    /* NULL source. */
    assert_status(optim_var_assign(v, NULL, OPTIM_F64, 3), OPTIM_EINVAL, v);
    assert_memory_equal(optim_var_cdata(v), src, sizeof src);
    assert_contains(optim_var_errmsg(v), "'acc'");

    /* A success clears the message; assigning from its own data is fine. */
    assert_ok(optim_var_assign(v, optim_var_cdata(v), OPTIM_F64, 3), v);
    assert_string_equal(optim_var_errmsg(v), "");
    assert_memory_equal(optim_var_cdata(v), src, sizeof src);
    optim_var_destroy(v);
}

/* ---- Bad inputs -------------------------------------------------------------- */

/* Expects creation (owned, or borrowed when wrap) to fail with code, leave
 * *out NULL and fill err with a message containing each non-NULL needle. */
static void expect_create_fails(int wrap, const char *name, optim_dtype dtype, int32_t rank,
                                const int64_t *shape, void *data, int code, const char *needle1,
                                const char *needle2)
{
    optim_var *v = SENTINEL;
    optim_error err;
    memset(&err, 0, sizeof err);
    int rc = wrap ? optim_var_wrap(&v, name, dtype, rank, shape, data, &err)
                  : optim_var_create(&v, name, dtype, rank, shape, data, &err);
    assert_status(rc, code, &err);
    assert_null(v);
    assert_int_equal(err.code, code);
    assert_gt(strlen(err.msg), 0);
    if (needle1 && !strstr(err.msg, needle1)) {
        print_error("message '%s' lacks '%s'\n", err.msg, needle1);
        fail();
    }
    if (needle2 && !strstr(err.msg, needle2)) {
        print_error("message '%s' lacks '%s'\n", err.msg, needle2);
        fail();
    }
    /* Without an optim_error the call fails the same way. */
    v = SENTINEL;
    rc = wrap ? optim_var_wrap(&v, name, dtype, rank, shape, data, NULL)
              : optim_var_create(&v, name, dtype, rank, shape, data, NULL);
    assert_status(rc, code, NULL);
    assert_null(v);
}

OPTIM_TEST(test_bad_inputs)
{
    int64_t shape2[2] = {2, 3};
    float buf[6] = {0};
    for (int wrap = 0; wrap <= 1; wrap++) {
        void *data = wrap ? buf : NULL;
        expect_create_fails(wrap, "", OPTIM_F32, 2, shape2, data, OPTIM_EINVAL, "name", "empty");
        expect_create_fails(wrap, NULL, OPTIM_F32, 2, shape2, data, OPTIM_EINVAL, "name", "NULL");
        expect_create_fails(wrap, "w", OPTIM_I32, 2, shape2, data, OPTIM_EDTYPE, "'w'", "int32");
        expect_create_fails(wrap, "w", OPTIM_I64, 2, shape2, data, OPTIM_EDTYPE, "'w'", "int64");
        expect_create_fails(wrap, "w", OPTIM_DTYPE_INVALID, 2, shape2, data, OPTIM_EDTYPE, "'w'",
                            "float32");
        int64_t shape9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
        expect_create_fails(wrap, "deep", OPTIM_F32, 9, shape9, data, OPTIM_ESHAPE, "'deep'", "9");
        expect_create_fails(wrap, "neg_rank", OPTIM_F32, -1, shape2, data, OPTIM_ESHAPE,
                            "'neg_rank'", "-1");
        int64_t negdim[2] = {2, -3};
        expect_create_fails(wrap, "negdim", OPTIM_F32, 2, negdim, data, OPTIM_ESHAPE, "'negdim'",
                            "-3");
        int64_t overflow[2] = {INT64_MAX, 4};
        expect_create_fails(wrap, "huge", OPTIM_F32, 2, overflow, data, OPTIM_ESHAPE, "'huge'",
                            NULL);
        expect_create_fails(wrap, "noshape", OPTIM_F32, 2, NULL, data, OPTIM_EINVAL, "'noshape'",
                            "shape");
    }
    /* Borrowed data must be given when there are elements. */
    expect_create_fails(1, "borrowed", OPTIM_F32, 2, shape2, NULL, OPTIM_EINVAL, "'borrowed'",
                        "NULL");
    int64_t one = 1;
    expect_create_fails(1, "scalar", OPTIM_F64, 0, &one, NULL, OPTIM_EINVAL, "'scalar'", "NULL");
    /* out NULL: an error, not a crash. */
    optim_error err;
    assert_status(optim_var_create(NULL, "w", OPTIM_F32, 2, shape2, NULL, &err), OPTIM_EINVAL,
                  &err);
    assert_status(optim_var_wrap(NULL, "w", OPTIM_F32, 2, shape2, buf, &err), OPTIM_EINVAL, &err);
}

/* ---- Constraints: references --------------------------------------------------- */

/* Double-precision reference for a rank-2 [r, c] array `w` (row-major),
 * norms along `axis` (0: one norm per column, 1: one norm per row). */
enum { REF_NON_NEG, REF_MAX_NORM, REF_UNIT_NORM, REF_MIN_MAX_NORM };

static double ref_scale(int kind, double n, double mn, double mx, double rate)
{
    switch (kind) {
    case REF_MAX_NORM: {
        double d = n < 0 ? 0 : (n > mx ? mx : n);
        return d / (KERAS_EPS + n);
    }
    case REF_UNIT_NORM: return 1.0 / (KERAS_EPS + n);
    case REF_MIN_MAX_NORM: {
        double cl = n < mn ? mn : (n > mx ? mx : n);
        return (rate * cl + (1 - rate) * n) / (KERAS_EPS + n);
    }
    }
    return NAN;
}

static void ref_rank2(int kind, const double *w, double *out, int r, int c, int axis, double mn,
                      double mx, double rate)
{
    if (kind == REF_NON_NEG) {
        for (int i = 0; i < r * c; i++) out[i] = w[i] * (double)(w[i] >= 0);
        return;
    }
    if (axis == 0) {
        for (int j = 0; j < c; j++) {
            double ss = 0;
            for (int i = 0; i < r; i++) ss += w[i * c + j] * w[i * c + j];
            double f = ref_scale(kind, sqrt(ss), mn, mx, rate);
            for (int i = 0; i < r; i++) out[i * c + j] = w[i * c + j] * f;
        }
    } else {
        for (int i = 0; i < r; i++) {
            double ss = 0;
            for (int j = 0; j < c; j++) ss += w[i * c + j] * w[i * c + j];
            double f = ref_scale(kind, sqrt(ss), mn, mx, rate);
            for (int j = 0; j < c; j++) out[i * c + j] = w[i * c + j] * f;
        }
    }
}

/* A 4x5 test matrix: column and row norms spread below and above the
 * limits used below, one all-zero column (norm 0, the epsilon case), and
 * a negative zero. */
#define R 4
#define C 5
static const double W0[R * C] = {
    0.30, -1.20, 0.0, 2.50, -0.05, -0.40, 0.90,  0.0,  -1.75, 0.02,
    0.10, 1.10,  0.0, 3.00, -0.01, -0.25, -0.60, -0.0, 0.80,  0.04,
};

/* Applies constraint c to a fresh f32 and f64 copy of W0 and compares with
 * the reference. `ref_axis` is the normalised axis (0 or 1). */
static void check_constraint(const optim_constraint *c, int kind, int ref_axis)
{
    optim_error err;
    double ref[R * C], w[R * C];
    memcpy(w, W0, sizeof w);
    int64_t shape[2] = {R, C};

    /* f64: the variable's values are W0 exactly. */
    ref_rank2(kind, w, ref, R, C, ref_axis, c->min_value, c->max_value, c->rate);
    optim_var *v;
    assert_ok(optim_var_create(&v, "k64", OPTIM_F64, 2, shape, w, &err), &err);
    assert_ok(optim_var_set_constraint(v, c), v);
    optim_var_apply_constraint(v);
    for (int i = 0; i < R * C; i++) {
        assert_close(optim_var_get(v, i), ref[i], 1e-14, 1e-300);
        if (kind == REF_NON_NEG) assert_eq(!!signbit(optim_var_get(v, i)), !!signbit(ref[i]));
    }
    optim_var_destroy(v);

    /* f32: the reference starts from the float-rounded values. */
    float wf[R * C];
    for (int i = 0; i < R * C; i++) {
        wf[i] = (float)W0[i];
        w[i] = (double)wf[i];
    }
    ref_rank2(kind, w, ref, R, C, ref_axis, c->min_value, c->max_value, c->rate);
    assert_ok(optim_var_create(&v, "k32", OPTIM_F32, 2, shape, wf, &err), &err);
    assert_ok(optim_var_set_constraint(v, c), v);
    optim_var_apply_constraint(v);
    for (int i = 0; i < R * C; i++) {
        assert_close(optim_var_get(v, i), ref[i], 3e-6, 1e-30);
        if (kind == REF_NON_NEG) assert_eq(!!signbit(optim_var_get(v, i)), !!signbit(ref[i]));
    }
    optim_var_destroy(v);
}

OPTIM_TEST(test_constraint_non_neg)
{
    optim_error err;
    optim_constraint c = optim_constraint_non_neg();
    assert_int_equal(c.kind, OPTIM_CONSTRAINT_NON_NEG);
    check_constraint(&c, REF_NON_NEG, 0);

    /* Any rank, scalars included. */
    double s = -2.0;
    optim_var *v;
    assert_ok(optim_var_create(&v, "s", OPTIM_F64, 0, NULL, &s, &err), &err);
    assert_ok(optim_var_set_constraint(v, &c), v);
    optim_var_apply_constraint(v);
    assert_eq(optim_var_get(v, 0), 0.0);
    optim_var_destroy(v);
}

OPTIM_TEST(test_constraint_max_norm)
{
    /* Column norms of W0: ~0.58, ~2.10, 0, ~4.34, ~0.07; row norms ~2.8, ~2.2, ~3.2, ~1.1. */
    const double limits[] = {1.5, 2.5, 0.0};
    for (size_t k = 0; k < sizeof limits / sizeof *limits; k++) {
        optim_constraint c = optim_constraint_max_norm(limits[k], 0);
        assert_int_equal(c.kind, OPTIM_CONSTRAINT_MAX_NORM);
        assert_eq(c.max_value, limits[k]);
        assert_int_equal(c.axis, 0);
        check_constraint(&c, REF_MAX_NORM, 0);
        c = optim_constraint_max_norm(limits[k], 1);
        check_constraint(&c, REF_MAX_NORM, 1);
        c = optim_constraint_max_norm(limits[k], -1);
        check_constraint(&c, REF_MAX_NORM, 1);
        c = optim_constraint_max_norm(limits[k], -2);
        check_constraint(&c, REF_MAX_NORM, 0);
    }
}

OPTIM_TEST(test_constraint_unit_norm)
{
    optim_error err;
    optim_constraint c = optim_constraint_unit_norm(0);
    assert_int_equal(c.kind, OPTIM_CONSTRAINT_UNIT_NORM);
    check_constraint(&c, REF_UNIT_NORM, 0);
    c = optim_constraint_unit_norm(1);
    check_constraint(&c, REF_UNIT_NORM, 1);
    c = optim_constraint_unit_norm(-1);
    check_constraint(&c, REF_UNIT_NORM, 1);

    /* Closed form on one column: [3, 4] / (1e-7 + 5). */
    const double w[2] = {3, 4};
    int64_t shape[2] = {2, 1};
    optim_var *v;
    assert_ok(optim_var_create(&v, "col", OPTIM_F64, 2, shape, w, &err), &err);
    c = optim_constraint_unit_norm(0);
    assert_ok(optim_var_set_constraint(v, &c), v);
    optim_var_apply_constraint(v);
    assert_close(optim_var_get(v, 0), 3.0 / (5.0 + 1e-7), 1e-15, 0);
    assert_close(optim_var_get(v, 1), 4.0 / (5.0 + 1e-7), 1e-15, 0);
    optim_var_destroy(v);
}

OPTIM_TEST(test_constraint_min_max_norm)
{
    const struct {
        double mn, mx, rate;
    } p[] = {
        {0.0, 1.0, 1.0}, /* Keras's defaults */
        {0.5, 2.0, 1.0},  {1.0, 2.5, 0.3}, {0.2, 0.2, 0.0}, /* rate 0: unchanged up to epsilon */
        {2.0, 3.0, 0.75},
    };
    for (size_t k = 0; k < sizeof p / sizeof *p; k++) {
        optim_constraint c = optim_constraint_min_max_norm(p[k].mn, p[k].mx, p[k].rate, 0);
        assert_int_equal(c.kind, OPTIM_CONSTRAINT_MIN_MAX_NORM);
        assert_eq(c.min_value, p[k].mn);
        assert_eq(c.max_value, p[k].mx);
        assert_eq(c.rate, p[k].rate);
        check_constraint(&c, REF_MIN_MAX_NORM, 0);
        c = optim_constraint_min_max_norm(p[k].mn, p[k].mx, p[k].rate, 1);
        check_constraint(&c, REF_MIN_MAX_NORM, 1);
        c = optim_constraint_min_max_norm(p[k].mn, p[k].mx, p[k].rate, -1);
        check_constraint(&c, REF_MIN_MAX_NORM, 1);
    }
}

/* Rank 3 along the middle axis, [2, 3, 2], written out element by element. */
OPTIM_TEST(test_constraint_rank3_middle_axis)
{
    optim_error err;
    double w[12];
    for (int i = 0; i < 12; i++) w[i] = (double)(i % 5) - 1.5 + 0.25 * i;
    int64_t shape[3] = {2, 3, 2};
    optim_var *v;
    assert_ok(optim_var_create(&v, "r3", OPTIM_F64, 3, shape, w, &err), &err);
    optim_constraint c = optim_constraint_max_norm(1.0, 1);
    assert_ok(optim_var_set_constraint(v, &c), v);
    optim_var_apply_constraint(v);
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            double ss = 0;
            for (int m = 0; m < 3; m++) ss += w[a * 6 + m * 2 + b] * w[a * 6 + m * 2 + b];
            double n = sqrt(ss);
            double f = (n > 1.0 ? 1.0 : n) / (KERAS_EPS + n);
            for (int m = 0; m < 3; m++)
                assert_close(optim_var_get(v, a * 6 + m * 2 + b), w[a * 6 + m * 2 + b] * f, 1e-14,
                             0);
        }
    optim_var_destroy(v);
}

/* ---- Constraints: management and bad parameters ------------------------------------ */

OPTIM_TEST(test_constraint_is_copied_and_removable)
{
    optim_error err;
    int64_t shape[2] = {2, 2};
    optim_var *v;
    assert_ok(optim_var_create(&v, "w", OPTIM_F32, 2, shape, NULL, &err), &err);
    optim_constraint c = optim_constraint_max_norm(2.0, 1);
    assert_ok(optim_var_set_constraint(v, &c), v);
    const optim_constraint *got = optim_var_constraint(v);
    assert_non_null(got);
    assert_ptr_not_equal(got, &c);
    c.max_value = 99; /* the variable keeps its copy */
    assert_int_equal(got->kind, OPTIM_CONSTRAINT_MAX_NORM);
    assert_eq(got->max_value, 2.0);
    assert_int_equal(got->axis, 1);
    assert_ok(optim_var_set_constraint(v, NULL), v);
    assert_null(optim_var_constraint(v));
    assert_ok(optim_var_set_constraint(v, &c), v);
    optim_constraint none = {0};
    none.kind = OPTIM_CONSTRAINT_NONE;
    assert_ok(optim_var_set_constraint(v, &none), v);
    assert_null(optim_var_constraint(v));
    optim_var_apply_constraint(v); /* no constraint: no-op */
    for (int i = 0; i < 4; i++) assert_eq(optim_var_get(v, i), 0.0);
    optim_var_destroy(v);
}

/* Setting c on v must fail with code; the variable keeps its previous
 * constraint (MaxNorm 3 along axis 0) and values; the message names it. */
static void expect_constraint_rejected(optim_var *v, const optim_constraint *c, int code,
                                       const char *needle)
{
    size_t bytes = (size_t)optim_var_numel(v) * optim_dtype_size(optim_var_dtype(v));
    unsigned char before[256];
    assert_le(bytes, sizeof before);
    memcpy(before, optim_var_cdata(v), bytes);
    int rc = optim_var_set_constraint(v, c);
    if (rc != code) print_error("rc %d, expected %d; msg '%s'\n", rc, code, optim_var_errmsg(v));
    assert_status(rc, code, v);
    const char *msg = optim_var_errmsg(v);
    char quoted[80];
    snprintf(quoted, sizeof quoted, "'%s'", optim_var_name(v));
    if (!strstr(msg, quoted) || (needle && !strstr(msg, needle))) {
        print_error("message '%s' lacks %s or '%s'\n", msg, quoted, needle ? needle : "");
        fail();
    }
    const optim_constraint *kept = optim_var_constraint(v);
    assert_non_null(kept);
    assert_int_equal(kept->kind, OPTIM_CONSTRAINT_MAX_NORM);
    assert_eq(kept->max_value, 3.0);
    assert_int_equal(kept->axis, 0);
    assert_memory_equal(optim_var_cdata(v), before, bytes);
}

static void never_called(optim_var *v, void *user)
{
    (void)v;
    (void)user;
    fail_msg("constraint fn called");
}

OPTIM_TEST(test_constraint_bad_parameters)
{
    optim_error err;
    int64_t shape[2] = {3, 2};
    const double init[6] = {1, 2, 3, 4, 5, 6};
    optim_var *v;
    assert_ok(optim_var_create(&v, "layer/kernel", OPTIM_F64, 2, shape, init, &err), &err);
    optim_constraint good = optim_constraint_max_norm(3.0, 0);
    assert_ok(optim_var_set_constraint(v, &good), v);

    optim_constraint c;
    /* Axis out of range for rank 2 (valid: -2..1). */
    c = optim_constraint_max_norm(1.0, 2);
    expect_constraint_rejected(v, &c, OPTIM_ERANGE, "axis 2");
    c = optim_constraint_max_norm(1.0, -3);
    expect_constraint_rejected(v, &c, OPTIM_ERANGE, "axis -3");
    c = optim_constraint_unit_norm(5);
    expect_constraint_rejected(v, &c, OPTIM_ERANGE, "axis 5");
    c = optim_constraint_min_max_norm(0.0, 1.0, 1.0, INT32_MIN);
    expect_constraint_rejected(v, &c, OPTIM_ERANGE, "axis");
    /* MaxNorm needs max_value >= 0. */
    c = optim_constraint_max_norm(-1.0, 0);
    expect_constraint_rejected(v, &c, OPTIM_ERANGE, "max_value");
    c = optim_constraint_max_norm(NAN, 0);
    expect_constraint_rejected(v, &c, OPTIM_ERANGE, "max_value");
    /* MinMaxNorm: min > max, rate outside [0, 1]. */
    c = optim_constraint_min_max_norm(2.0, 1.0, 1.0, 0);
    expect_constraint_rejected(v, &c, OPTIM_ERANGE, "min_value");
    c = optim_constraint_min_max_norm(0.0, 1.0, 1.5, 0);
    expect_constraint_rejected(v, &c, OPTIM_ERANGE, "rate");
    c = optim_constraint_min_max_norm(0.0, 1.0, -0.1, 0);
    expect_constraint_rejected(v, &c, OPTIM_ERANGE, "rate");
    c = optim_constraint_min_max_norm(0.0, 1.0, NAN, 0);
    expect_constraint_rejected(v, &c, OPTIM_ERANGE, "rate");
    /* CUSTOM without fn; unknown kind. */
    memset(&c, 0, sizeof c);
    c.kind = OPTIM_CONSTRAINT_CUSTOM;
    expect_constraint_rejected(v, &c, OPTIM_EINVAL, "fn");
    memset(&c, 0, sizeof c);
    c.kind = (optim_constraint_kind)99;
    c.fn = never_called;
    expect_constraint_rejected(v, &c, OPTIM_EINVAL, "99");

    /* The kept constraint still works, and a success clears the message. */
    assert_ok(optim_var_set_constraint(v, &good), v);
    assert_string_equal(optim_var_errmsg(v), "");
    optim_var_destroy(v);

    /* A norm constraint on a scalar has no valid axis. */
    double s = 1;
    assert_ok(optim_var_create(&v, "scalar", OPTIM_F64, 0, NULL, &s, &err), &err);
    c = optim_constraint_unit_norm(0);
    assert_status(optim_var_set_constraint(v, &c), OPTIM_ERANGE, v);
    assert_contains(optim_var_errmsg(v), "'scalar'");
    assert_null(optim_var_constraint(v));
    optim_var_destroy(v);
}

/* ---- Custom constraints ---------------------------------------------------------------- */

typedef struct custom_log {
    int calls;
    optim_var *seen;
    double first_value; /* element 0 when called */
} custom_log;

static void halve_constraint(optim_var *v, void *user)
{
    custom_log *log = user;
    log->calls++;
    log->seen = v;
    log->first_value = optim_var_get(v, 0);
    float *w = optim_var_data(v);
    for (int64_t i = 0; i < optim_var_numel(v); i++) w[i] *= 0.5f;
}

OPTIM_TEST(test_constraint_custom_called)
{
    optim_error err;
    float init[3] = {2, 4, -8};
    int64_t shape[1] = {3};
    optim_var *v;
    assert_ok(optim_var_create(&v, "custom", OPTIM_F32, 1, shape, init, &err), &err);
    custom_log log = {0};
    optim_constraint c;
    memset(&c, 0, sizeof c);
    c.kind = OPTIM_CONSTRAINT_CUSTOM;
    c.fn = halve_constraint;
    c.user = &log;
    assert_ok(optim_var_set_constraint(v, &c), v);
    assert_int_equal(log.calls, 0); /* setting does not apply */
    optim_var_apply_constraint(v);
    assert_int_equal(log.calls, 1);
    assert_ptr_equal(log.seen, v);
    assert_eq(optim_var_get(v, 0), 1.0);
    assert_eq(optim_var_get(v, 1), 2.0);
    assert_eq(optim_var_get(v, 2), -4.0);

    /* After a dense optimizer step, on the updated value: SGD lr 0.5,
     * gradient 2 -> w = 1 - 0.5 * 2 = 0 (then halved). */
    optim_optimizer *opt;
    assert_ok(optim_from_json(&opt,
                              "{\"class_name\": \"SGD\", \"config\": "
                              "{\"learning_rate\": 0.5}}",
                              &err),
              &err);
    float g[3] = {2, 2, 2};
    optim_grad_var pair = {optim_grad_dense(optim_tensor_make(OPTIM_F32, g, 1, shape)), v};
    assert_ok(optim_apply_gradients(opt, &pair, 1, 0), opt);
    assert_int_equal(log.calls, 2);
    assert_eq(log.first_value, 0.0);
    assert_eq(optim_var_get(v, 1), 0.5 * (2.0 - 0.5 * 2));
    assert_eq(optim_var_get(v, 2), 0.5 * (-4.0 - 0.5 * 2));
    optim_destroy(opt);
    optim_var_destroy(v);
}

int main(void) { return optim_test_run(); }
