/* The dtype traits table (src/core/dtype.h): every dtype's Keras,
 * safetensors and short names round-trip through their lookups, its size
 * is the size of its C element, its float32 converters agree with
 * optim_convert, and unknown names are refused, by the lookups and, with a
 * message that lists what is accepted, by the safetensors reader. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/dtype.h"
#include "core/internal.h"
#include "testutil.h"

/* What each dtype must be: written here by hand, so that a wrong row of
 * the table is caught, and a new dtype without a row here fails
 * every_dtype_has_a_row. */
static const struct {
    optim_dtype dt;
    const char *keras, *safetensors, *cli;
    size_t size;
    int is_float;
} expect[] = {
    {OPTIM_F32, "float32", "F32", "f32", sizeof(float), 1},
    {OPTIM_F64, "float64", "F64", "f64", sizeof(double), 1},
    {OPTIM_I32, "int32", "I32", "i32", sizeof(int32_t), 0},
    {OPTIM_I64, "int64", "I64", "i64", sizeof(int64_t), 0},
    {OPTIM_F16, "float16", "F16", "f16", sizeof(uint16_t), 1},
    {OPTIM_BF16, "bfloat16", "BF16", "bf16", sizeof(uint16_t), 1},
};
#define NEXPECT (sizeof expect / sizeof *expect)

OPTIM_TEST(every_dtype_has_a_row)
{
    assert_eq(NEXPECT, (size_t)(optim__dtype_end() - 1));
    for (int d = OPTIM_DTYPE_INVALID + 1; d < optim__dtype_end(); d++) {
        int found = 0;
        for (size_t i = 0; i < NEXPECT; i++) found += expect[i].dt == (optim_dtype)d;
        if (found != 1) print_error("dtype %d has %d rows in this test\n", d, found);
        assert_eq(found, 1);
        assert_non_null(optim__dtype((optim_dtype)d));
    }
    assert_null(optim__dtype(OPTIM_DTYPE_INVALID));
    assert_null(optim__dtype((optim_dtype)optim__dtype_end()));
    assert_null(optim__dtype((optim_dtype)-1));
}

OPTIM_TEST(names_round_trip)
{
    for (size_t i = 0; i < NEXPECT; i++) {
        const optim_dtype dt = expect[i].dt;
        assert_string_equal(optim_dtype_name(dt), expect[i].keras);
        assert_string_equal(optim__dtype_name_in(dt, OPTIM__DTYPE_SAFETENSORS),
                            expect[i].safetensors);
        assert_string_equal(optim__dtype_name_in(dt, OPTIM__DTYPE_CLI), expect[i].cli);
        assert_eq(optim__dtype_by_name(expect[i].keras, OPTIM__DTYPE_KERAS), dt);
        assert_eq(optim__dtype_by_name(expect[i].safetensors, OPTIM__DTYPE_SAFETENSORS), dt);
        assert_eq(optim__dtype_by_name(expect[i].cli, OPTIM__DTYPE_CLI), dt);
        assert_eq(optim_dtype_from_short_name(expect[i].cli), dt);
        /* Each naming takes its own spelling only. */
        assert_eq(optim__dtype_by_name(expect[i].keras, OPTIM__DTYPE_SAFETENSORS),
                  OPTIM_DTYPE_INVALID);
        assert_eq(optim_dtype_from_short_name(expect[i].keras), OPTIM_DTYPE_INVALID);
        assert_eq(optim_dtype_from_short_name(expect[i].safetensors), OPTIM_DTYPE_INVALID);
    }
    assert_string_equal(optim_dtype_name(OPTIM_DTYPE_INVALID), "invalid");
    assert_string_equal(optim_dtype_name((optim_dtype)99), "invalid");
}

OPTIM_TEST(sizes_match)
{
    for (size_t i = 0; i < NEXPECT; i++) {
        assert_eq(optim_dtype_size(expect[i].dt), expect[i].size);
        assert_eq(optim__dtype(expect[i].dt)->size, expect[i].size);
        assert_eq(optim__dtype_is_float(expect[i].dt), expect[i].is_float);
    }
    assert_eq(optim_dtype_size(OPTIM_DTYPE_INVALID), (size_t)0);
    assert_eq(optim_dtype_size((optim_dtype)optim__dtype_end()), (size_t)0);
}

/* A float dtype's converters against optim_convert, bit for bit, on
 * values that round (ties, subnormals, overflow, NaN). */
OPTIM_TEST(converters_agree_with_optim_convert)
{
    const float src[] = {0.0f,  -0.0f,    1.0f,   1.00048828125f, 3.1415926f,
                         1e-8f, 65520.0f, -1e30f, INFINITY,       NAN};
    enum { N = sizeof src / sizeof *src };
    for (size_t i = 0; i < NEXPECT; i++) {
        const optim__dtype_traits *t = optim__dtype(expect[i].dt);
        if (!expect[i].is_float) {
            assert_null(t->to_f32);
            assert_null(t->from_f32);
            assert_eq(optim_convert(NULL, expect[i].dt, NULL, OPTIM_F32, 0), OPTIM_EDTYPE);
            continue;
        }
        unsigned char a[N * 8], b[N * 8];
        float back_a[N], back_b[N];
        t->from_f32(a, src, N);
        assert_eq(optim_convert(b, expect[i].dt, src, OPTIM_F32, N), OPTIM_OK);
        assert_memory_equal(a, b, N * t->size);
        t->to_f32(back_a, a, N);
        assert_eq(optim_convert(back_b, OPTIM_F32, a, expect[i].dt, N), OPTIM_OK);
        assert_memory_equal(back_a, back_b, sizeof back_a);
        assert_same(back_a[2], 1.0f); /* 1 is exact in every float dtype */
    }
}

OPTIM_TEST(unknown_names_refused)
{
    const char *bad[] = {"",        "F32 ",    "float", "f8",     "F8_E4M3",
                         "FLOAT32", "Float32", "bf",    "invalid"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_eq(optim__dtype_by_name(bad[i], OPTIM__DTYPE_KERAS), OPTIM_DTYPE_INVALID);
        assert_eq(optim__dtype_by_name(bad[i], OPTIM__DTYPE_SAFETENSORS), OPTIM_DTYPE_INVALID);
        assert_eq(optim_dtype_from_short_name(bad[i]), OPTIM_DTYPE_INVALID);
    }
    assert_eq(optim_dtype_from_short_name(NULL), OPTIM_DTYPE_INVALID);

    /* The safetensors reader names the dtype and lists the table's names. */
    const char hdr[] = "{\"w\":{\"dtype\":\"F8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
    unsigned char file[8 + sizeof hdr];
    for (int i = 0; i < 8; i++) file[i] = (unsigned char)((sizeof hdr - 1) >> (8 * i));
    memcpy(file + 8, hdr, sizeof hdr - 1);
    file[8 + sizeof hdr - 1] = 0; /* the one data byte */
    optim_st_file *f = NULL;
    optim_error err;
    assert_status(optim_st_parse(file, sizeof file, &f, &err), OPTIM_ENOTSUP, &err);
    assert_null(f);
    assert_contains(err.msg, "dtype \"F8\" is not supported");
    assert_contains(err.msg, "optim reads F32, F64, I32, I64, F16 or BF16");
}

OPTIM_TEST(lists_read_as_a_sentence)
{
    char buf[96];
    assert_string_equal(
        optim__dtype_list(OPTIM__MASK(OPTIM_F16), OPTIM__DTYPE_KERAS, buf, sizeof buf), "float16");
    assert_string_equal(optim__dtype_list(OPTIM__FLOAT_MASK, OPTIM__DTYPE_KERAS, buf, sizeof buf),
                        "float32 or float64");
    assert_string_equal(optim__dtype_list(OPTIM__VAR_MASK, OPTIM__DTYPE_KERAS, buf, sizeof buf),
                        "float32, float64, float16 or bfloat16");
    assert_string_equal(optim__dtype_list(0, OPTIM__DTYPE_CLI, buf, sizeof buf), "");
    /* Bits that are no dtype are left out (and read nothing past the table). */
    assert_string_equal(optim__dtype_list(OPTIM__MASK(OPTIM_F32) | 1u << 20 | 1u,
                                          OPTIM__DTYPE_KERAS, buf, sizeof buf),
                        "float32");
    assert_string_equal(optim__dtype_list(optim__dtype_all(), OPTIM__DTYPE_CLI, buf, 8), "f32, f6");
}

int main(void) { return optim_test_run(); }
