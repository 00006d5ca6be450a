/* The .npy, .npz and CSV readers (optim/npy.h, optim/csv.h) on buffers the
 * test builds byte by byte: header versions 1.0/2.0/3.0, byte orders,
 * every number type, conversion and its range checks; a stored zip built
 * here (CRC-32 from zlib); every malformed input refused with its reason.
 * (tests/test_data_files.sh covers the files NumPy writes.) */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "optim/csv.h"
#include "optim/npy.h"

/* A .npy of version major with header dict `dict` (padded to 64) and data. */
static size_t npy(unsigned char *out, int major, const char *dict, const void *data, size_t n)
{
    size_t at = major == 1 ? 10 : 12, h = strlen(dict) + 1;
    size_t pad = (64 - (at + h) % 64) % 64;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)major, out[7] = 0;
    uint32_t len = (uint32_t)(h + pad);
    for (size_t i = 0; i < at - 8; i++) out[8 + i] = (unsigned char)(len >> (8 * i));
    memcpy(out + at, dict, h - 1);
    memset(out + at + h - 1, ' ', pad);
    out[at + h - 1 + pad] = '\n';
    memcpy(out + at + h + pad, data, n);
    return at + h + pad + n;
}

static int parse(const unsigned char *b, size_t n, optim_npy **f, optim_error *err)
{
    return optim_npy_parse(b, n, "t", f, err);
}

OPTIM_TEST(npy_versions_and_types)
{
    (void)state;
    unsigned char b[512];
    float v[6] = {1, 2, 3, 4, 5, -6.5f};
    optim_error err;
    optim_npy *f;
    for (int major = 1; major <= 3; major++) {
        size_t n = npy(b, major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v,
                       sizeof v);
        assert_eq(parse(b, n, &f, &err), OPTIM_OK);
        const optim_npy_array *a = optim_npy_at(f, 0);
        assert_eq(optim_npy_count(f), 1);
        assert_string_equal(a->name, "");
        assert_eq(a->type, OPTIM_NPY_F32);
        assert_eq(a->rank, 2), assert_eq(a->shape[0], 2), assert_eq(a->shape[1], 3);
        double d[6];
        assert_eq(optim_npy_convert(a, OPTIM_F64, 2.0, d, &err), OPTIM_OK);
        for (int i = 0; i < 6; i++) assert_true(d[i] == 2.0 * v[i]);
        optim_npy_free(f);
    }
    /* Big-endian int16, quotes ", Python 2's L, no trailing comma. */
    unsigned char be[4] = {0x01, 0x02, 0xff, 0xfe};
    size_t n = npy(b, 1, "{\"descr\": \">i2\", \"shape\": (2L,), \"fortran_order\": False}", be, 4);
    assert_eq(parse(b, n, &f, &err), OPTIM_OK);
    int32_t y[2];
    assert_eq(optim_npy_convert(optim_npy_at(f, 0), OPTIM_I32, 1, y, &err), OPTIM_OK);
    assert_eq(y[0], 0x0102), assert_eq(y[1], -2);
    optim_npy_free(f);
    /* A scalar (shape ()), an empty array, bool. */
    n = npy(b, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }", "\1", 1);
    assert_eq(parse(b, n, &f, &err), OPTIM_OK);
    assert_eq(optim_npy_at(f, 0)->rank, 0), assert_eq(optim_npy_at(f, 0)->numel, 1);
    assert_string_equal(optim_npy_type_name(optim_npy_at(f, 0)->type), "bool");
    optim_npy_free(f);
    n = npy(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 5), }", "", 0);
    assert_eq(parse(b, n, &f, &err), OPTIM_OK);
    assert_eq(optim_npy_at(f, 0)->numel, 0);
    optim_npy_free(f);
}

OPTIM_TEST(npy_convert_ranges)
{
    (void)state;
    unsigned char b[512];
    optim_error err;
    optim_npy *f;
    double fv[3] = {1, 2.5, 3};
    size_t n =
        npy(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", fv, sizeof fv);
    assert_eq(parse(b, n, &f, &err), OPTIM_OK);
    int32_t y[3];
    assert_eq(optim_npy_convert(optim_npy_at(f, 0), OPTIM_I32, 1, y, &err), OPTIM_ERANGE);
    assert_contains(err.msg, "element 1 is 2.5, expected a whole number");
    assert_eq(optim_npy_convert(optim_npy_at(f, 0), OPTIM_I32, 2, y, &err), OPTIM_EINVAL);
    assert_eq(optim_npy_convert(optim_npy_at(f, 0), OPTIM_F16, 1, y, &err), OPTIM_EDTYPE);
    optim_npy_free(f);
    uint64_t big[2] = {7, (uint64_t)1 << 63};
    n = npy(b, 1, "{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }", big, sizeof big);
    assert_eq(parse(b, n, &f, &err), OPTIM_OK);
    int64_t z[2];
    assert_eq(optim_npy_convert(optim_npy_at(f, 0), OPTIM_I64, 1, z, &err), OPTIM_ERANGE);
    assert_contains(err.msg, "element 1 is 9.2233720368547758e+18");
    optim_npy_free(f);
    uint16_t h[2] = {0x3e00, 0xc000}; /* float16 1.5, -2 */
    n = npy(b, 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", h, sizeof h);
    assert_eq(parse(b, n, &f, &err), OPTIM_OK);
    float x[2];
    assert_eq(optim_npy_convert(optim_npy_at(f, 0), OPTIM_F32, 1, x, &err), OPTIM_OK);
    assert_true(x[0] == 1.5f && x[1] == -2.0f);
    optim_npy_free(f);
}

OPTIM_TEST(npy_refusals)
{
    (void)state;
    static const struct {
        const char *dict;
        size_t data;
        int code;
        const char *msg;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8, OPTIM_ENOTSUP,
         "fortran_order is True"},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16, OPTIM_ENOTSUP,
         "descr '<c8' is not supported"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, OPTIM_ENOTSUP,
         "structured dtype"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 16, OPTIM_ENOTSUP,
         "descr '|O'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8, OPTIM_EFORMAT,
         "needs 12 data bytes, the file has 8"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 8, OPTIM_EFORMAT,
         "needs 4 data bytes, the file has 8"},
        {"{'descr': '<f4', 'shape': (2,), }", 8, OPTIM_EFORMAT, "lacks 'fortran_order'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8,
         OPTIM_EFORMAT, "'descr' unexpected or repeated"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8, OPTIM_EFORMAT,
         "'x' unexpected"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8, OPTIM_EFORMAT,
         "non-negative integer"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4,
         OPTIM_ENOTSUP, "more than 8 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387903, 4), }", 8,
         OPTIM_EFORMAT, "needs more than"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", 8, OPTIM_EFORMAT,
         "bytes after the header dict"},
        {"['descr']", 8, OPTIM_EFORMAT, "header is not a dict"},
    };
    unsigned char b[512], zero[64] = {0};
    optim_error err;
    optim_npy *f = (optim_npy *)1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = npy(b, 1, cases[i].dict, zero, cases[i].data);
        assert_eq(parse(b, n, &f, &err), cases[i].code);
        assert_null(f);
        assert_contains(err.msg, cases[i].msg);
    }
    size_t n = npy(b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", zero, 8);
    b[6] = 4;
    assert_eq(parse(b, n, &f, &err), OPTIM_EFORMAT);
    assert_contains(err.msg, "version 4.0");
    b[6] = 1, b[8] = 0xff, b[9] = 0xff;
    assert_eq(parse(b, n, &f, &err), OPTIM_EFORMAT);
    assert_contains(err.msg, "header of 65535 bytes");
    assert_eq(parse((const unsigned char *)"NUMPY", 5, &f, &err), OPTIM_EFORMAT);
    assert_contains(err.msg, "neither a .npy file");
    assert_eq(optim_npy_read("/nonexistent/x.npz", &f, &err), OPTIM_EIO);
    assert_eq(optim_npy_parse(NULL, 1, NULL, &f, &err), OPTIM_EINVAL);
}

/* ---- a stored zip ------------------------------------------------------------------- */

static void le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* A zip of one stored member NAME holding data[0 .. n). */
static size_t zip1(unsigned char *out, const char *name, const unsigned char *data, size_t n)
{
    size_t k = strlen(name), at = 0;
    uint32_t crc = (uint32_t)crc32(0, data, (uInt)n);
    memset(out, 0, 30 + k + n + 46 + k + 22);
    le(out, 0x04034b50, 4), le(out + 14, crc, 4), le(out + 18, n, 4), le(out + 22, n, 4);
    le(out + 26, k, 2), memcpy(out + 30, name, k), memcpy(out + 30 + k, data, n);
    at = 30 + k + n;
    unsigned char *c = out + at;
    le(c, 0x02014b50, 4), le(c + 16, crc, 4), le(c + 20, n, 4), le(c + 24, n, 4);
    le(c + 28, k, 2), memcpy(c + 46, name, k);
    unsigned char *e = c + 46 + k;
    le(e, 0x06054b50, 4), le(e + 8, 1, 2), le(e + 10, 1, 2), le(e + 12, 46 + k, 4);
    le(e + 16, at, 4);
    return at + 46 + k + 22;
}

OPTIM_TEST(npz_stored)
{
    (void)state;
    unsigned char a[256], z[512];
    int32_t v[3] = {4, 5, 6};
    size_t n = npy(a, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", v, sizeof v);
    size_t m = zip1(z, "y_train.npy", a, n);
    optim_error err;
    optim_npy *f;
    assert_eq(parse(z, m, &f, &err), OPTIM_OK);
    const optim_npy_array *y = optim_npy_find(f, "y_train");
    assert_non_null(y);
    assert_null(optim_npy_find(f, "x_train"));
    assert_eq(((const int32_t *)y->data)[2], 6);
    optim_npy_free(f);
    /* Every prefix is refused (truncation), as is each corrupted field. */
    for (size_t k = 0; k < m; k++) {
        assert_int_not_equal(parse(z, k, &f, &err), OPTIM_OK);
        assert_true(err.msg[0] != '\0');
    }
    unsigned char bad[512];
    static const struct {
        size_t at; /* from the central directory entry */
        const char *msg;
    } flips[] = {{42, "no local header"},
                 {16, "CRC-32"},
                 {10, "compression method"},
                 {24, "impossible"},
                 {8, "encrypted"}};
    size_t cd = 30 + 11 + n;
    for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
        memcpy(bad, z, m);
        bad[cd + flips[i].at] ^= 0x41;
        assert_int_not_equal(parse(bad, m, &f, &err), OPTIM_OK);
        assert_contains(err.msg, flips[i].msg);
    }
    /* The same archive with a ZIP64 end of central directory: the classic
     * record's fields at their 0xFFFF.. markers, the real values in the
     * ZIP64 record (APPNOTE 4.3.14) that its locator (4.3.15) points to. */
    m = zip1(z, "y_train.npy", a, n);
    size_t e = m - 22, cd_size = 46 + 11;
    unsigned char z64[600];
    memcpy(z64, z, e);
    unsigned char *r = z64 + e, *loc = r + 56;
    memset(r, 0, 56 + 20);
    le(r, 0x06064b50, 4), le(r + 4, 44, 8), le(r + 24, 1, 8), le(r + 32, 1, 8);
    le(r + 40, cd_size, 8), le(r + 48, e - cd_size, 8);
    le(loc, 0x07064b50, 4), le(loc + 8, e, 8), le(loc + 16, 1, 4);
    memcpy(loc + 20, z + e, 22);
    le(loc + 20 + 10, 0xFFFF, 2), le(loc + 20 + 8, 0xFFFF, 2), le(loc + 20 + 16, 0xFFFFFFFF, 4);
    assert_eq(parse(z64, e + 56 + 20 + 22, &f, &err), OPTIM_OK);
    assert_eq(((const int32_t *)optim_npy_find(f, "y_train")->data)[1], 5);
    optim_npy_free(f);
    le(loc + 8, e + 1, 8); /* the locator points one byte off */
    assert_eq(parse(z64, e + 56 + 20 + 22, &f, &err), OPTIM_EFORMAT);
    assert_contains(err.msg, "zip64 end of central directory at");
    m = zip1(z, "y_train.txt", a, n);
    assert_eq(parse(z, m, &f, &err), OPTIM_EFORMAT);
    assert_contains(err.msg, "member 'y_train.txt' is not a .npy file");
}

/* ---- CSV ---------------------------------------------------------------------------------- */

static int csv(const char *text, optim_csv **t, optim_error *err)
{
    return optim_csv_parse(text, strlen(text), "c.csv", t, err);
}

OPTIM_TEST(csv_tables)
{
    (void)state;
    optim_csv *t;
    optim_error err;
    assert_eq(csv("a, \"label\" ,b\r\n1,2, 3.5\r\n\r\n-4e1,5,6\n", &t, &err), OPTIM_OK);
    assert_eq(optim_csv_rows(t), 2), assert_eq(optim_csv_cols(t), 3);
    assert_string_equal(optim_csv_name(t, 1), "label");
    assert_null(optim_csv_name(t, 3));
    const double *v = optim_csv_values(t);
    assert_true(v[2] == 3.5 && v[3] == -40 && v[5] == 6);
    optim_csv_free(t);
    assert_eq(csv("1,2\n3,4", &t, &err), OPTIM_OK);
    assert_null(optim_csv_name(t, 0));
    assert_eq(optim_csv_rows(t), 2);
    optim_csv_free(t);
    static const struct {
        const char *text, *msg;
    } bad[] = {{"1,2\n3\n", "line 2 has 1 fields, expected 2"},
               {"a,b\n1,x\n", "line 2, column 2: 'x' is not a finite number"},
               {"a,b\n1,nan\n", "is not a finite number"},
               {"a,b\n1,inf\n", "'inf' is not a finite number"},
               {"a,b\n1,\n", "line 2, column 2: '' is not"},
               {"a,b\n", "no rows of numbers"},
               {"", "no rows of numbers"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_eq(csv(bad[i].text, &t, &err), OPTIM_EFORMAT);
        assert_null(t);
        assert_contains(err.msg, bad[i].msg);
    }
    assert_eq(optim_csv_parse("1\0002", 3, NULL, &t, &err), OPTIM_EFORMAT);
    assert_contains(err.msg, "NUL byte");
    assert_eq(optim_csv_read("/nonexistent.csv", &t, &err), OPTIM_EIO);
}

int main(void) { return optim_test_run(); }
