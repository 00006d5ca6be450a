/* The IDX reader on small files the test writes, plain and gzip'd (one or
 * several members): every element type, round trips, conversion; every
 * malformed file refused with its reason. Then `optim train` end to end on
 * a small synthetic IDX dataset, and its refusals of bad input. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "optim/idx.h"
#include "optim/optim.h"

#ifndef OPTIM_CLI_PATH
#error "the build must define OPTIM_CLI_PATH"
#endif

/* ---- writing test files ------------------------------------------------------------ */

typedef struct bytes {
    unsigned char *p;
    size_t n;
    size_t cap; /* 0: unknown (p from malloc, or NULL) */
} bytes;

/* Grows geometrically: a file is written one element at a time, and a
 * realloc per byte is quadratic under AddressSanitizer (which moves every
 * reallocated block). */
static void put(bytes *b, const void *src, size_t n)
{
    if (n > SIZE_MAX / 4) abort(); /* (tells GCC that n + 1 cannot wrap) */
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1) > 64 ? 2 * (b->n + n + 1) : 64;
        b->p = realloc(b->p, b->cap);
    }
    assert_non_null(b->p);
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_be32(bytes *b, uint32_t v)
{
    unsigned char c[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 8), (unsigned char)v};
    put(b, c, 4);
}

/* The header of an IDX file. */
static bytes header(int type, int rank, const uint32_t *dims)
{
    bytes b = {NULL, 0, 0};
    unsigned char m[4] = {0, 0, (unsigned char)type, (unsigned char)rank};
    put(&b, m, 4);
    for (int i = 0; i < rank; i++) put_be32(&b, dims[i]);
    return b;
}

/* Element i of a test pattern, as the type holds it. */
static double pattern(int type, int64_t i)
{
    switch (type) {
    case OPTIM_IDX_U8: return (double)((i * 37 + 11) % 256);
    case OPTIM_IDX_I8: return (double)((i * 37 + 11) % 256 - 128);
    case OPTIM_IDX_I16: return (double)((i * 4099 + 7) % 65536 - 32768);
    case OPTIM_IDX_I32: return (double)((i * 2654435761LL) % 4000000000LL - 2000000000LL);
    case OPTIM_IDX_F32: return (double)(float)(i * 0.37 - 5.1);
    default: return i * 0.123456789012345 - 3.3;
    }
}

/* Appends the big-endian element. */
static void put_elem(bytes *b, int type, double v)
{
    unsigned char c[8];
    size_t n;
    uint64_t u = 0;
    switch (type) {
    case OPTIM_IDX_U8:
        c[0] = (unsigned char)(int)v;
        n = 1;
        break;
    case OPTIM_IDX_I8:
        c[0] = (unsigned char)(int8_t)(int)v;
        n = 1;
        break;
    case OPTIM_IDX_I16:
        u = (uint16_t)(int16_t)(int)v;
        n = 2;
        break;
    case OPTIM_IDX_I32:
        u = (uint32_t)(int32_t)(int64_t)v;
        n = 4;
        break;
    case OPTIM_IDX_F32: {
        float f = (float)v;
        uint32_t w;
        memcpy(&w, &f, 4);
        u = w;
        n = 4;
        break;
    }
    default: memcpy(&u, &v, 8); n = 8;
    }
    if (n > 1)
        for (size_t i = 0; i < n; i++) c[i] = (unsigned char)(u >> (8 * (n - 1 - i)));
    put(b, c, n);
}

static bytes idx_file(int type, int rank, const uint32_t *dims)
{
    bytes b = header(type, rank, dims);
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    for (int64_t i = 0; i < n; i++) put_elem(&b, type, pattern(type, i));
    return b;
}

/* One gzip member of data[0 .. n). */
static bytes gz(const unsigned char *data, size_t n)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    bytes out = {malloc(deflateBound(&z, n) + 64), 0, 0};
    z.next_in = (unsigned char *)data;
    z.avail_in = (uInt)n;
    z.next_out = out.p;
    z.avail_out = (uInt)(deflateBound(&z, n) + 64);
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    out.n = z.total_out;
    deflateEnd(&z);
    return out;
}

static const char *write_bytes(const char *name, const bytes *b)
{
    const char *path = optim_test_tmpfile(name);
    assert_eq(optim_test_write_file(path, b->p, b->n), 0);
    return path;
}

/* Reads path and expects failure with code and a message containing what. */
static void expect_refused(const char *path, int code, const char *what)
{
    optim_idx *f = (optim_idx *)1;
    optim_error err;
    int rc = optim_idx_read(path, &f, &err);
    if (rc != code || !strstr(err.msg, what))
        print_error("%s: rc %d, message '%s'\n", path, rc, err.msg);
    assert_status(rc, code, &err);
    assert_null(f);
    assert_contains(err.msg, what);
    assert_contains(err.msg, path);
}

/* Refused both plain and gzip'd. */
static void expect_refused_both(const bytes *b, int code, const char *what)
{
    expect_refused(write_bytes("bad.idx", b), code, what);
    bytes z = gz(b->p, b->n);
    expect_refused(write_bytes("bad.idx.gz", &z), code, what);
    free(z.p);
}

/* ---- reading ------------------------------------------------------------------------ */

static void check_file(const char *path, int type, int rank, const uint32_t *dims)
{
    optim_idx *f;
    optim_error err;
    assert_ok(optim_idx_read(path, &f, &err), &err);
    assert_eq(optim_idx_type_of(f), type);
    assert_eq(optim_idx_rank(f), rank);
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        assert_eq(optim_idx_shape(f)[i], dims[i]);
        n *= dims[i];
    }
    assert_eq(optim_idx_numel(f), n);
    for (int64_t i = 0; i < n; i++) assert_eq(optim_idx_get(f, i), pattern(type, i));
    assert_nan(optim_idx_get(f, n));
    assert_nan(optim_idx_get(f, -1));
    /* host-order data of the announced type */
    const void *d = optim_idx_data(f);
    if (n > 1) {
        double v;
        switch (type) {
        case OPTIM_IDX_U8: v = ((const uint8_t *)d)[1]; break;
        case OPTIM_IDX_I8: v = ((const int8_t *)d)[1]; break;
        case OPTIM_IDX_I16: v = ((const int16_t *)d)[1]; break;
        case OPTIM_IDX_I32: v = ((const int32_t *)d)[1]; break;
        case OPTIM_IDX_F32: v = ((const float *)d)[1]; break;
        default: v = ((const double *)d)[1];
        }
        assert_eq(v, pattern(type, 1));
    }
    /* conversions */
    double *o64 = malloc((size_t)(n ? n : 1) * sizeof *o64);
    float *o32 = malloc((size_t)(n ? n : 1) * sizeof *o32);
    assert_ok(optim_idx_convert(f, OPTIM_F64, 0.5, o64, &err), &err);
    assert_ok(optim_idx_convert(f, OPTIM_F32, 2.0, o32, &err), &err);
    for (int64_t i = 0; i < n; i++) {
        assert_eq(o64[i], pattern(type, i) * 0.5);
        assert_eq(o32[i], (float)(pattern(type, i) * 2.0));
    }
    int integer = type != OPTIM_IDX_F32 && type != OPTIM_IDX_F64;
    int64_t *oi = malloc((size_t)(n ? n : 1) * sizeof *oi);
    if (integer) {
        assert_ok(optim_idx_convert(f, OPTIM_I64, 1, oi, &err), &err);
        for (int64_t i = 0; i < n; i++) assert_eq((double)oi[i], pattern(type, i));
        assert_status(optim_idx_convert(f, OPTIM_I64, 2, oi, &err), OPTIM_EINVAL, &err);
    } else {
        assert_status(optim_idx_convert(f, OPTIM_I32, 1, oi, &err), OPTIM_EDTYPE, &err);
        assert_contains(err.msg, "cannot become int32");
    }
    assert_status(optim_idx_convert(f, OPTIM_DTYPE_INVALID, 1, o64, &err), OPTIM_EDTYPE, &err);
    assert_status(optim_idx_convert(f, OPTIM_F64, INFINITY, o64, &err), OPTIM_EINVAL, &err);
    free(o64);
    free(o32);
    free(oi);
    optim_idx_free(f);
}

OPTIM_TEST(test_types_plain_and_gzip)
{
    const int types[] = {OPTIM_IDX_U8,  OPTIM_IDX_I8,  OPTIM_IDX_I16,
                         OPTIM_IDX_I32, OPTIM_IDX_F32, OPTIM_IDX_F64};
    const uint32_t shapes[3][3] = {{7, 0, 0}, {3, 5, 0}, {2, 3, 4}};
    for (size_t t = 0; t < 6; t++)
        for (int r = 1; r <= 3; r++) {
            bytes b = idx_file(types[t], r, shapes[r - 1]);
            check_file(write_bytes("ok.idx", &b), types[t], r, shapes[r - 1]);
            bytes z = gz(b.p, b.n);
            check_file(write_bytes("ok.idx.gz", &z), types[t], r, shapes[r - 1]);
            /* the same data split over three gzip members */
            bytes multi = {NULL, 0, 0};
            size_t cut1 = b.n / 3, cut2 = 2 * b.n / 3;
            bytes m1 = gz(b.p, cut1), m2 = gz(b.p + cut1, cut2 - cut1),
                  m3 = gz(b.p + cut2, b.n - cut2);
            put(&multi, m1.p, m1.n);
            put(&multi, m2.p, m2.n);
            put(&multi, m3.p, m3.n);
            check_file(write_bytes("multi.idx.gz", &multi), types[t], r, shapes[r - 1]);
            free(m1.p), free(m2.p), free(m3.p), free(multi.p), free(z.p), free(b.p);
        }
    /* zero elements and the largest rank */
    uint32_t zero[2] = {0, 5};
    bytes b = idx_file(OPTIM_IDX_U8, 2, zero);
    check_file(write_bytes("zero.idx", &b), OPTIM_IDX_U8, 2, zero);
    free(b.p);
    uint32_t eight[8] = {1, 2, 1, 2, 1, 2, 1, 3};
    b = idx_file(OPTIM_IDX_I16, 8, eight);
    check_file(write_bytes("eight.idx", &b), OPTIM_IDX_I16, 8, eight);
    free(b.p);
    /* a file larger than the reader's 64 KiB chunks, gzip'd */
    uint32_t big[2] = {300, 784};
    b = idx_file(OPTIM_IDX_U8, 2, big);
    bytes z = gz(b.p, b.n);
    check_file(write_bytes("big.idx.gz", &z), OPTIM_IDX_U8, 2, big);
    free(z.p);
    free(b.p);
    assert_string_equal(optim_idx_type_name(OPTIM_IDX_F64), "float64");
    assert_null(optim_idx_type_name((optim_idx_type)0x0A));
}

OPTIM_TEST(test_malformed_files)
{
    uint32_t d2[2] = {3, 4};
    bytes b = {NULL, 0, 0};
    /* empty and short */
    put(&b, "", 0);
    expect_refused_both(&b, OPTIM_EFORMAT, "ends inside the magic number");
    put(&b, "\0\0\x08", 3);
    expect_refused_both(&b, OPTIM_EFORMAT, "ends inside the magic number");
    free(b.p);
    /* bad magic */
    b = idx_file(OPTIM_IDX_U8, 2, d2);
    b.p[0] = 1;
    expect_refused_both(&b, OPTIM_EFORMAT, "bad magic number 01 00 08 02");
    b.p[0] = 0, b.p[1] = 0x20;
    expect_refused_both(&b, OPTIM_EFORMAT, "bad magic number");
    free(b.p);
    /* unknown type, no dimensions, too many */
    b = idx_file(OPTIM_IDX_U8, 2, d2);
    b.p[2] = 0x0A;
    expect_refused_both(&b, OPTIM_EFORMAT, "unknown IDX type code 0x0a");
    b.p[2] = 0x08, b.p[3] = 0;
    expect_refused_both(&b, OPTIM_EFORMAT, "0 dimensions");
    b.p[3] = 9;
    expect_refused_both(&b, OPTIM_ENOTSUP, "9 dimensions");
    free(b.p);
    /* truncated dimensions */
    b = header(OPTIM_IDX_U8, 3, (uint32_t[]){2, 2, 2});
    b.n -= 2;
    expect_refused_both(&b, OPTIM_EFORMAT, "ends inside the dimensions (10 of 12 bytes)");
    free(b.p);
    /* truncated data, one byte short and all of it */
    b = idx_file(OPTIM_IDX_I32, 2, d2);
    b.n -= 1;
    expect_refused_both(&b, OPTIM_EFORMAT, "the data ends after 47 of 48 bytes");
    b.n = 12;
    expect_refused_both(&b, OPTIM_EFORMAT, "the data ends after 0 of 48 bytes");
    free(b.p);
    /* trailing bytes */
    b = idx_file(OPTIM_IDX_F32, 2, d2);
    put(&b, "x", 1);
    expect_refused_both(&b, OPTIM_EFORMAT, "bytes after the 48 bytes of data");
    free(b.p);
    /* dimensions whose product overflows, or that no memory could hold */
    b = header(OPTIM_IDX_F64, 4, (uint32_t[]){0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 2});
    expect_refused_both(&b, OPTIM_EFORMAT, "overflow");
    free(b.p);
    b = header(OPTIM_IDX_F64, 2, (uint32_t[]){0xFFFFFFFFu, 0x7FFFFFFFu});
    expect_refused_both(&b, OPTIM_EFORMAT, "more data than memory can hold");
    free(b.p);
    /* a header claiming 4 GiB over 10 bytes of data: refused as truncated,
     * without allocating what the header claims */
    b = header(OPTIM_IDX_U8, 1, (uint32_t[]){0xFFFFFFFFu});
    put(&b, "0123456789", 10);
    expect_refused_both(&b, OPTIM_EFORMAT, "the data ends after 10 of 4294967295 bytes");
    free(b.p);

    /* gzip damage */
    bytes ok = idx_file(OPTIM_IDX_U8, 2, (uint32_t[]){40, 50});
    bytes z = gz(ok.p, ok.n);
    bytes bad = {NULL, 0, 0};
    put(&bad, z.p, z.n);
    bad.p[bad.n - 6] ^= 0x55; /* CRC-32 */
    expect_refused(write_bytes("crc.gz", &bad), OPTIM_EFORMAT,
                   "corrupt gzip data (incorrect data check)");
    bad.p[bad.n - 6] ^= 0x55;
    bad.p[bad.n - 2] ^= 0x01; /* ISIZE */
    expect_refused(write_bytes("isize.gz", &bad), OPTIM_EFORMAT,
                   "corrupt gzip data (incorrect length check)");
    bad.p[bad.n - 2] ^= 0x01;
    bad.n -= 4; /* no ISIZE */
    expect_refused(write_bytes("short.gz", &bad), OPTIM_EFORMAT, "gzip data ends early");
    bad.n = z.n / 2;
    expect_refused(write_bytes("half.gz", &bad), OPTIM_EFORMAT, "gzip data ends early");
    bad.n = z.n;
    bad.p[12] ^= 0xFF; /* inside the deflate stream */
    optim_idx *f = (optim_idx *)1;
    optim_error err;
    assert_status(optim_idx_read(write_bytes("flip.gz", &bad), &f, &err), OPTIM_EFORMAT, &err);
    assert_null(f);
    bad.p[12] ^= 0xFF;
    put(&bad, "garbage", 7);
    expect_refused(write_bytes("trail.gz", &bad), OPTIM_EFORMAT,
                   "bytes after the end of the gzip data");
    bad.n = z.n;
    put(&bad, "\x1f", 1); /* half a second member's magic */
    expect_refused(write_bytes("trail1.gz", &bad), OPTIM_EFORMAT,
                   "bytes after the end of the gzip data");
    bad.n = z.n;
    put(&bad, "\x1f\x8b", 2); /* a second member that stops after its magic */
    expect_refused(write_bytes("trail2.gz", &bad), OPTIM_EFORMAT, "");
    /* a gzip'd file whose content is malformed */
    ok.p[3] = 0;
    bytes z0 = gz(ok.p, ok.n);
    expect_refused(write_bytes("rank0.gz", &z0), OPTIM_EFORMAT, "0 dimensions");
    free(z0.p), free(bad.p), free(z.p), free(ok.p);

    /* not a file */
    expect_refused("/nonexistent/dir/file.idx", OPTIM_EIO, "No such file or directory");
    const char *dir = optim_test_tmpfile("adir");
    mkdir(dir, 0700);
    expect_refused(dir, OPTIM_EIO, "read error");
    /* argument checks */
    assert_status(optim_idx_read(NULL, &f, &err), OPTIM_EINVAL, &err);
    assert_status(optim_idx_read("x", NULL, &err), OPTIM_EINVAL, &err);
    assert_status(optim_idx_read("/nonexistent", &f, NULL), OPTIM_EIO, NULL);
    assert_status(optim_idx_convert(NULL, OPTIM_F32, 1, NULL, &err), OPTIM_EINVAL, &err);
    optim_idx_free(NULL);
    assert_eq(optim_idx_rank(NULL), 0);
}

OPTIM_TEST(test_fashion_mnist_if_installed)
{
    const char *path = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
    if (access(path, R_OK) != 0) {
        print_message("skipped: %s is not installed\n", path);
        return;
    }
    optim_idx *f;
    optim_error err;
    assert_ok(optim_idx_read(path, &f, &err), &err);
    assert_eq(optim_idx_rank(f), 1);
    assert_eq(optim_idx_shape(f)[0], 10000);
    int counts[10] = {0};
    for (int64_t i = 0; i < 10000; i++) counts[(int)optim_idx_get(f, i)]++;
    for (int c = 0; c < 10; c++) assert_int_equal(counts[c], 1000);
    optim_idx_free(f);
}

/* ---- optim train ----------------------------------------------------------------------- */

/* Runs `optim train args...` (args NULL-terminated) with its output in *r. */
static void run_train(const char *const *args, optim_test_proc *r)
{
    char *argv[20];
    int n = 0;
    argv[n++] = (char *)OPTIM_CLI_PATH;
    argv[n++] = (char *)"train";
    for (int i = 0; args[i]; i++) argv[n++] = (char *)args[i];
    argv[n] = NULL;
    optim_test_capture(argv, r);
}

/* Writes a small, easy 10-class dataset: class c lights rows 2c..2c+2. */
static void write_dataset(const char *dir, const char *prefix, uint32_t n, uint64_t seed)
{
    bytes im = header(OPTIM_IDX_U8, 3, (uint32_t[]){n, 28, 28}), lb = header(OPTIM_IDX_U8, 1, &n);
    for (uint32_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned char c = (unsigned char)((seed >> 33) % 10);
        put(&lb, &c, 1);
        for (int p = 0; p < 784; p++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            int row = p / 28;
            unsigned char v = (unsigned char)((seed >> 40) % 60 +
                                              (row >= 2 * c + 4 && row < 2 * c + 7 ? 180 : 0));
            put(&im, &v, 1);
        }
    }
    char path[600];
    bytes zi = gz(im.p, im.n), zl = gz(lb.p, lb.n);
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    assert_eq(optim_test_write_file(path, zi.p, zi.n), 0);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    assert_eq(optim_test_write_file(path, zl.p, zl.n), 0);
    free(im.p), free(lb.p), free(zi.p), free(zl.p);
}

static const char *last_line(const char *s)
{
    size_t n = strlen(s);
    if (n && s[n - 1] == '\n') n--;
    while (n && s[n - 1] != '\n') n--;
    return s + n;
}

OPTIM_TEST(test_train_command)
{
    /* (optim_test_tmpfile's buffers are reused: keep copies) */
    char dir[512], adir[512], afile[512], bdir[512];
    snprintf(dir, sizeof dir, "%s", optim_test_tmpfile("fmnist"));
    snprintf(adir, sizeof adir, "%s", optim_test_tmpfile("empty_dir"));
    snprintf(afile, sizeof afile, "%s", optim_test_tmpfile("a_file"));
    snprintf(bdir, sizeof bdir, "%s", optim_test_tmpfile("badset"));
    mkdir(dir, 0700);
    mkdir(adir, 0700);
    mkdir(bdir, 0700);
    assert_eq(optim_test_write_file(afile, "x", 1), 0);
    write_dataset(dir, "train", 512, 1);
    write_dataset(dir, "t10k", 200, 2);
    optim_test_proc r;
    const char *args[] = {"--data",
                          dir,
                          "--epochs",
                          "3",
                          "--batch-size",
                          "32",
                          "--seed",
                          "5",
                          "--optimizer",
                          "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.003}}",
                          NULL};
    run_train(args, &r);
    if (r.status) print_error("status %d: %s\n", r.status, r.err);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.err, "");
    assert_contains(r.out, "Epoch 1/3\n16/16 - ");
    assert_contains(r.out, "Epoch 3/3\n");
    const char *last = last_line(r.out);
    double acc;
    char tail;
    assert_int_equal(sscanf(last, "test_accuracy=%lf%c", &acc, &tail), 2);
    assert_int_equal(tail, '\n');
    assert_gt(acc, 0.9);
    assert_le(acc, 1.0);
    /* the same seed, the same run */
    char first[sizeof r.out];
    snprintf(first, sizeof first, "%s", last);
    run_train(args, &r);
    assert_string_equal(last_line(r.out), first);
    /* a bare optimizer name and the = form */
    const char *args2[] = {"--data", dir, "--epochs=1", "--optimizer", "sgd", NULL};
    run_train(args2, &r);
    assert_int_equal(r.status, 0);
    assert_contains(last_line(r.out), "test_accuracy=");
    assert_null(strstr(r.out, "Epoch 1/1")); /* Keras prints "Epoch" only for epochs > 1 */

    /* bad input: one line on stderr, non-zero status, nothing on stdout */
    struct {
        const char *args[8];
        const char *msg;
    } bad[] = {
        {{"--data", "/nonexistent/fmnist", NULL},
         "optim train: --data '/nonexistent/fmnist': No such file or directory\n"},
        {{"--data", dir, "--optimizer", "{\"class_name\": \"Adam\"", NULL},
         "optim train: --optimizer: "},
        {{"--data", dir, "--optimizer", "{\"class_name\": \"Nope\", \"config\": {}}", NULL},
         "Nope"},
        {{"--data", dir, "--optimizer", "not json!", NULL},
         "optim train: --optimizer 'not json!': expected"},
        {{"--data", dir, "--epochs", "two", NULL},
         "optim train: --epochs 'two': expected a whole number"},
        {{"--data", dir, "--epochs", "0", NULL}, "--epochs '0'"},
        {{"--data", dir, "--batch-size", "-3", NULL}, "--batch-size '-3'"},
        {{"--data", dir, "--batch-size", "12x", NULL}, "--batch-size '12x'"},
        {{"--data", dir, "--seed", "99999999999999999999", NULL}, "--seed '99999999999999999999'"},
        {{"--data", dir, "--epochs", NULL}, "optim train: --epochs needs a value"},
        {{"--frobnicate", NULL}, "optim train: unknown argument '--frobnicate'"},
        {{"--data", afile, NULL}, "nor a directory of IDX files"},
        {{"--data", adir, NULL}, "train-images-idx3-ubyte.gz: No such file or directory"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        run_train(bad[i].args, &r);
        if (r.status == 0 || !strstr(r.err, bad[i].msg))
            print_error("case %zu: status %d, stderr '%s'\n", i, r.status, r.err);
        assert_int_not_equal(r.status, 0);
        assert_contains(r.err, bad[i].msg);
        assert_non_null(strchr(r.err, '\n'));
        assert_string_equal(strchr(r.err, '\n'), "\n"); /* one line */
        assert_string_equal(r.out, "");
    }
    /* malformed data files */
    write_dataset(bdir, "train", 20, 3);
    write_dataset(bdir, "t10k", 10, 4);
    char path[600];
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", bdir);
    bytes lb = header(OPTIM_IDX_U8, 1, (uint32_t[]){9});
    put(&lb, "\1\2\3\4\5\6\7\1\2", 9);
    bytes zl = gz(lb.p, lb.n);
    assert_eq(optim_test_write_file(path, zl.p, zl.n), 0);
    const char *a3[] = {"--data", bdir, NULL};
    run_train(a3, &r);
    assert_int_not_equal(r.status, 0);
    assert_contains(r.err, "has 9 labels for 10 images");
    free(lb.p), free(zl.p);
    lb = header(OPTIM_IDX_U8, 1, (uint32_t[]){10});
    put(&lb, "\1\2\3\4\5\6\7\1\2\12", 10);
    zl = gz(lb.p, lb.n);
    assert_eq(optim_test_write_file(path, zl.p, zl.n), 0);
    run_train(a3, &r);
    assert_int_not_equal(r.status, 0);
    assert_contains(r.err, "label 10 at index 9, expected 0 to 9");
    assert_eq(optim_test_write_file(path, "\x1f\x8b\x08", 3), 0);
    run_train(a3, &r);
    assert_int_not_equal(r.status, 0);
    assert_contains(r.err, "gzip data ends early");
    free(lb.p), free(zl.p);
    /* --help */
    const char *h[] = {"--help", NULL};
    run_train(h, &r);
    assert_int_equal(r.status, 0);
    assert_contains(r.out, "usage: optim train");
}

int main(void) { return optim_test_run(); }
