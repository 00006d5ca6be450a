/* safetensors reader and writer: round trips, exact layout, atomic saves, and
 * one test per kind of malformed file. */
#define _POSIX_C_SOURCE 200809L

#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "optim/safetensors.h"

/* ---- Helpers ------------------------------------------------------------- */

/* 8-byte little-endian `n`, then hlen header bytes, then dlen data bytes
 * (from data, or zeros when data is NULL). */
static unsigned char *mk_raw(uint64_t n, const char *hdr, size_t hlen, const void *data,
                             size_t dlen, size_t *len)
{
    unsigned char *b = calloc(1, 8 + hlen + dlen + 1);
    assert_non_null(b);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(n >> (8 * i));
    memcpy(b + 8, hdr, hlen);
    if (data) memcpy(b + 8 + hlen, data, dlen);
    *len = 8 + hlen + dlen;
    return b;
}

static unsigned char *mk(const char *hdr, const void *data, size_t dlen, size_t *len)
{
    return mk_raw(strlen(hdr), hdr, strlen(hdr), data, dlen, len);
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Number of entries in directory `dir` other than . and .. */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* A fresh empty directory under the test temporary directory. */
static void fresh_dir(const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s", optim_test_tmpfile(name));
    assert_int_equal(mkdir(out, 0700), 0);
}

static void check_msg(int line, const optim_error *err, const char *const *needles)
{
    for (; *needles; needles++)
        if (!strstr(err->msg, *needles)) {
            print_error("line %d: message \"%s\" lacks \"%s\"\n", line, err->msg, *needles);
            _fail(__FILE__, line);
        }
}

/* Parses hdr + dlen zero bytes; expects status `code`, *out == NULL, and
 * every needle in the message. */
static void expect_bad_buf(int line, const unsigned char *buf, size_t len, int code,
                           const char *const *needles)
{
    optim_st_file *f = (optim_st_file *)&f; /* must be reset to NULL */
    optim_error err;
    memset(&err, 0, sizeof err);
    int rc = optim_st_parse(buf, len, &f, &err);
    if (rc != code || err.code != code || f != NULL) {
        print_error("line %d: status %d (%s), expected %d (%s): %s\n", line, rc, optim_strerror(rc),
                    code, optim_strerror(code), err.msg);
        _fail(__FILE__, line);
    }
    check_msg(line, &err, needles);
}

static void expect_bad(int line, const char *hdr, size_t dlen, int code, const char *const *needles)
{
    size_t len;
    unsigned char *b = mk(hdr, NULL, dlen, &len);
    expect_bad_buf(line, b, len, code, needles);
    free(b);
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define BAD(hdr, dlen, code, ...) expect_bad(__LINE__, hdr, dlen, code, NEEDLES(__VA_ARGS__))
#define BAD_BUF(buf, len, code, ...) expect_bad_buf(__LINE__, buf, len, code, NEEDLES(__VA_ARGS__))

static optim_st_file *parse_ok(const char *hdr, const void *data, size_t dlen)
{
    size_t len;
    unsigned char *b = mk(hdr, data, dlen, &len);
    optim_st_file *f = NULL;
    optim_error err;
    int rc = optim_st_parse(b, len, &f, &err);
    free(b);
    if (rc != OPTIM_OK) print_error("unexpected error: %s\n", err.msg);
    assert_ok(rc, &err);
    assert_non_null(f);
    return f;
}

static void save_ok(optim_st_writer *w, const char *path)
{
    optim_error err;
    int rc = optim_st_writer_save(w, path, &err);
    if (rc != OPTIM_OK) print_error("save failed: %s\n", err.msg);
    assert_ok(rc, &err);
}

static optim_st_file *read_ok(const char *path)
{
    optim_st_file *f = NULL;
    optim_error err;
    int rc = optim_st_read(path, &f, &err);
    if (rc != OPTIM_OK) print_error("read failed: %s\n", err.msg);
    assert_ok(rc, &err);
    assert_non_null(f);
    return f;
}

static void add_ok(optim_st_writer *w, const char *name, optim_dtype dt, void *data, int32_t rank,
                   const int64_t *shape)
{
    optim_tensor t = optim_tensor_make(dt, data, rank, shape);
    optim_error err;
    int rc = optim_st_writer_add(w, name, &t, &err);
    if (rc != OPTIM_OK) print_error("add failed: %s\n", err.msg);
    assert_ok(rc, &err);
}

/* Asserts f has `name` with this dtype, shape and bytes; data 8-byte aligned. */
static void expect_tensor(const optim_st_file *f, const char *name, optim_dtype dt, int32_t rank,
                          const int64_t *shape, const void *data, size_t nbytes)
{
    optim_tensor t;
    assert_ok(optim_st_get(f, name, &t), NULL);
    assert_int_equal(t.dtype, dt);
    assert_int_equal(t.rank, rank);
    for (int32_t i = 0; i < rank; i++) assert_int_equal(t.shape[i], shape[i]);
    assert_non_null(t.data);
    assert_int_equal((uintptr_t)t.data % 8, 0);
    if (nbytes) assert_memory_equal(t.data, data, nbytes);
}

/* ---- Round trips ---------------------------------------------------------- */

OPTIM_TEST(test_roundtrip_all_dtypes)
{
    optim_error err;
    float f32[6] = {1.5f, -2.25f, 3.0e38f, 1e-45f, -0.0f, INFINITY};
    double f64[4] = {3.141592653589793, -1e308, 5e-324, NAN};
    int32_t i32[4] = {INT32_MIN, -1, 0, INT32_MAX};
    int64_t i64[3] = {INT64_MIN, INT64_MAX, 1234567890123};
    const int64_t s_f32[2] = {2, 3}, s_f64[1] = {4}, s_i32[3] = {2, 1, 2}, s_i64[1] = {3};

    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    add_ok(w, "w_f64", OPTIM_F64, f64, 1, s_f64);
    add_ok(w, "w_i64", OPTIM_I64, i64, 1, s_i64);
    add_ok(w, "w_f32", OPTIM_F32, f32, 2, s_f32);
    add_ok(w, "w_i32", OPTIM_I32, i32, 3, s_i32);
    /* The writer copied: changing the sources now must not matter. */
    float f32_copy[6];
    memcpy(f32_copy, f32, sizeof f32);
    f32[0] = 99.0f;
    const char *path = optim_test_tmpfile("all_dtypes.safetensors");
    save_ok(w, path);
    optim_st_writer_destroy(w);

    optim_st_file *f = read_ok(path);
    assert_eq(optim_st_count(f), 4);
    assert_string_equal(optim_st_name(f, 0), "w_f32");
    assert_string_equal(optim_st_name(f, 1), "w_f64");
    assert_string_equal(optim_st_name(f, 2), "w_i32");
    assert_string_equal(optim_st_name(f, 3), "w_i64");
    assert_null(optim_st_name(f, 4));
    expect_tensor(f, "w_f32", OPTIM_F32, 2, s_f32, f32_copy, sizeof f32_copy);
    expect_tensor(f, "w_f64", OPTIM_F64, 1, s_f64, f64, sizeof f64);
    expect_tensor(f, "w_i32", OPTIM_I32, 3, s_i32, i32, sizeof i32);
    expect_tensor(f, "w_i64", OPTIM_I64, 1, s_i64, i64, sizeof i64);
    optim_tensor t;
    assert_ok(optim_st_get(f, "w_f64", &t), NULL);
    assert_close(((double *)t.data)[0], 3.141592653589793, 0, 0);
    assert_nan(((double *)t.data)[3]);
    optim_st_free(f);
}

OPTIM_TEST(test_roundtrip_scalar)
{
    optim_error err;
    int64_t it = 42;
    double lr = 0.001;
    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    add_ok(w, "iterations", OPTIM_I64, &it, 0, NULL);
    add_ok(w, "lr", OPTIM_F64, &lr, 0, NULL);
    const char *path = optim_test_tmpfile("scalar.safetensors");
    save_ok(w, path);
    optim_st_writer_destroy(w);

    size_t len;
    unsigned char *raw = slurp(path, &len);
    char *hdr = calloc(1, len + 1);
    memcpy(hdr, raw + 8, len - 8);
    assert_contains(hdr, "\"iterations\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]}");
    free(hdr);
    free(raw);

    optim_st_file *f = read_ok(path);
    assert_eq(optim_st_count(f), 2);
    expect_tensor(f, "iterations", OPTIM_I64, 0, NULL, &it, sizeof it);
    expect_tensor(f, "lr", OPTIM_F64, 0, NULL, &lr, sizeof lr);
    optim_st_free(f);
}

OPTIM_TEST(test_roundtrip_zero_element)
{
    optim_error err;
    float one = 7.0f;
    const int64_t s0[1] = {0}, s30[2] = {3, 0}, s1[1] = {1};
    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    add_ok(w, "empty", OPTIM_F32, NULL, 1, s0); /* NULL data is fine with no elements */
    add_ok(w, "empty2", OPTIM_I64, NULL, 2, s30);
    add_ok(w, "one", OPTIM_F32, &one, 1, s1);
    const char *path = optim_test_tmpfile("zero.safetensors");
    save_ok(w, path);
    optim_st_writer_destroy(w);

    optim_st_file *f = read_ok(path);
    assert_eq(optim_st_count(f), 3);
    expect_tensor(f, "empty", OPTIM_F32, 1, s0, NULL, 0);
    expect_tensor(f, "empty2", OPTIM_I64, 2, s30, NULL, 0);
    expect_tensor(f, "one", OPTIM_F32, 1, s1, &one, sizeof one);
    optim_st_free(f);
}

OPTIM_TEST(test_roundtrip_slash_names)
{
    optim_error err;
    int64_t idx[2] = {3, 0};
    float vals[4] = {1, 2, 3, 4}, g[2] = {0.5f, -0.5f};
    const int64_t s_idx[1] = {2}, s_vals[2] = {2, 2}, s_g[1] = {2};
    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    add_ok(w, "0/w/indices", OPTIM_I64, idx, 1, s_idx);
    add_ok(w, "0/w/values", OPTIM_F32, vals, 2, s_vals);
    add_ok(w, "1/w", OPTIM_F32, g, 1, s_g);
    add_ok(w, "0/b", OPTIM_F32, g, 1, s_g);
    const char *path = optim_test_tmpfile("slash.safetensors");
    save_ok(w, path);
    optim_st_writer_destroy(w);

    optim_st_file *f = read_ok(path);
    assert_eq(optim_st_count(f), 4);
    assert_string_equal(optim_st_name(f, 0), "0/b");
    assert_string_equal(optim_st_name(f, 1), "0/w/indices");
    assert_string_equal(optim_st_name(f, 2), "0/w/values");
    assert_string_equal(optim_st_name(f, 3), "1/w");
    expect_tensor(f, "0/w/indices", OPTIM_I64, 1, s_idx, idx, sizeof idx);
    expect_tensor(f, "0/w/values", OPTIM_F32, 2, s_vals, vals, sizeof vals);
    expect_tensor(f, "1/w", OPTIM_F32, 1, s_g, g, sizeof g);
    optim_tensor t;
    assert_status(optim_st_get(f, "0/w", &t), OPTIM_ENOTFOUND, NULL);
    optim_st_free(f);
}

OPTIM_TEST(test_roundtrip_escaped_names)
{
    optim_error err;
    const char *names[] = {"q\"uote",     "back\\slash", "new\nline",
                           "caf\xc3\xa9", "tab\t",       "\xf0\x9f\x98\x80"};
    const size_t n = sizeof names / sizeof *names;
    int32_t v[6] = {10, 11, 12, 13, 14, 15};
    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    for (size_t i = 0; i < n; i++) add_ok(w, names[i], OPTIM_I32, &v[i], 0, NULL);
    const char *path = optim_test_tmpfile("escaped.safetensors");
    save_ok(w, path);
    optim_st_writer_destroy(w);
    optim_st_file *f = read_ok(path);
    assert_eq(optim_st_count(f), n);
    for (size_t i = 0; i < n; i++) expect_tensor(f, names[i], OPTIM_I32, 0, NULL, &v[i], 4);
    optim_st_free(f);
}

/* Parsing from memory copies: the buffer may be freed right away. */
OPTIM_TEST(test_roundtrip_parse_buffer)
{
    optim_error err;
    double d[3] = {1, 2, 3};
    const int64_t s[1] = {3};
    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    add_ok(w, "d", OPTIM_F64, d, 1, s);
    const char *path = optim_test_tmpfile("buffer.safetensors");
    save_ok(w, path);
    optim_st_writer_destroy(w);
    size_t len;
    unsigned char *raw = slurp(path, &len);
    optim_st_file *f = NULL;
    assert_ok(optim_st_parse(raw, len, &f, &err), &err);
    memset(raw, 0xAB, len);
    free(raw);
    expect_tensor(f, "d", OPTIM_F64, 1, s, d, sizeof d);
    optim_st_free(f);
}

/* Many tensors added out of order: the writer's name index grows, names come
 * back sorted. */
OPTIM_TEST(test_roundtrip_many)
{
    optim_error err;
    enum { N = 1000 };
    int64_t vals[N];
    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    for (int k = 0; k < N; k++) {
        int i = (k * 7919) % N;
        char name[32];
        snprintf(name, sizeof name, "t%04d", i);
        vals[i] = (int64_t)i * 1000003;
        add_ok(w, name, OPTIM_I64, &vals[i], 0, NULL);
    }
    optim_tensor t = optim_tensor_make(OPTIM_I64, &vals[0], 0, NULL);
    assert_status(optim_st_writer_add(w, "t0500", &t, NULL), OPTIM_EINVAL, NULL);
    const char *path = optim_test_tmpfile("many.safetensors");
    save_ok(w, path);
    optim_st_writer_destroy(w);
    optim_st_file *f = read_ok(path);
    assert_eq(optim_st_count(f), N);
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%04d", i);
        assert_string_equal(optim_st_name(f, (size_t)i), name);
        assert_ok(optim_st_get(f, name, &t), NULL);
        assert_int_equal(*(int64_t *)t.data, vals[i]);
    }
    optim_st_free(f);
}

/* ---- Writer layout ------------------------------------------------------- */

/* The exact bytes: sorted names, data in the same order, header padded with
 * spaces to a multiple of 8, shape [] for a scalar, little-endian values. */
OPTIM_TEST(test_write_exact_layout)
{
    optim_error err;
    int32_t b[2] = {1, 2};
    float a = 1.0f;
    const int64_t sb[1] = {2};
    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    add_ok(w, "b", OPTIM_I32, b, 1, sb);
    add_ok(w, "a", OPTIM_F32, &a, 0, NULL);
    const char *path = optim_test_tmpfile("layout.safetensors");
    save_ok(w, path);
    optim_st_writer_destroy(w);

    const char *json = "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                       "\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
    size_t jl = strlen(json), hl = (jl + 7) / 8 * 8;
    unsigned char expect[512];
    memset(expect, 0, sizeof expect);
    for (int i = 0; i < 8; i++) expect[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(expect + 8, json, jl);
    memset(expect + 8 + jl, ' ', hl - jl);
    const unsigned char data[12] = {0x00, 0x00, 0x80, 0x3f, 1, 0, 0, 0, 2, 0, 0, 0};
    memcpy(expect + 8 + hl, data, sizeof data);
    size_t len;
    unsigned char *raw = slurp(path, &len);
    assert_int_equal(len, 8 + hl + sizeof data);
    assert_int_equal(hl % 8, 0);
    assert_memory_equal(raw, expect, len);
    free(raw);
}

OPTIM_TEST(test_write_deterministic)
{
    optim_error err;
    float x[3] = {1, 2, 3};
    int64_t y = 5;
    double z[2] = {0.25, 0.5};
    const int64_t sx[1] = {3}, sz[2] = {1, 2};
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s", optim_test_tmpfile("det1.safetensors"));
    snprintf(p2, sizeof p2, "%s", optim_test_tmpfile("det2.safetensors"));
    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    add_ok(w, "x", OPTIM_F32, x, 1, sx);
    add_ok(w, "y", OPTIM_I64, &y, 0, NULL);
    add_ok(w, "z", OPTIM_F64, z, 2, sz);
    save_ok(w, p1);
    optim_st_writer_destroy(w);
    assert_ok(optim_st_writer_create(&w, &err), &err);
    add_ok(w, "z", OPTIM_F64, z, 2, sz);
    add_ok(w, "x", OPTIM_F32, x, 1, sx);
    add_ok(w, "y", OPTIM_I64, &y, 0, NULL);
    save_ok(w, p2);
    save_ok(w, p2); /* saving twice is fine and gives the same bytes */
    optim_st_writer_destroy(w);
    size_t l1, l2;
    unsigned char *r1 = slurp(p1, &l1), *r2 = slurp(p2, &l2);
    assert_int_equal(l1, l2);
    assert_memory_equal(r1, r2, l1);
    free(r1);
    free(r2);
}

OPTIM_TEST(test_write_empty)
{
    optim_error err;
    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    const char *path = optim_test_tmpfile("empty.safetensors");
    save_ok(w, path);
    optim_st_writer_destroy(w);
    size_t len;
    unsigned char *raw = slurp(path, &len);
    const unsigned char expect[16] = {8,   0,   0,   0,   0,   0,   0,   0,
                                      '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    assert_int_equal(len, 16);
    assert_memory_equal(raw, expect, 16);
    free(raw);
    optim_st_file *f = read_ok(path);
    assert_eq(optim_st_count(f), 0);
    assert_null(optim_st_name(f, 0));
    optim_st_free(f);
}

/* ---- Atomic saves -------------------------------------------------------- */

OPTIM_TEST(test_save_replaces_existing)
{
    optim_error err;
    char dir[600], path[700];
    fresh_dir("replace", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    assert_eq(optim_test_write_file(path, "old contents", 12), 0);
    float v = 2.5f;
    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    add_ok(w, "v", OPTIM_F32, &v, 0, NULL);
    save_ok(w, path);
    optim_st_writer_destroy(w);
    assert_int_equal(dir_entries(dir), 1); /* no temporary file left behind */
    optim_st_file *f = read_ok(path);
    expect_tensor(f, "v", OPTIM_F32, 0, NULL, &v, 4);
    optim_st_free(f);
}

OPTIM_TEST(test_save_missing_dir)
{
    optim_error err;
    char dir[600], path[700];
    fresh_dir("missing_parent", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/no/such/dir/out.safetensors", dir);
    float v = 1.0f;
    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    add_ok(w, "v", OPTIM_F32, &v, 0, NULL);
    assert_status(optim_st_writer_save(w, path, &err), OPTIM_EIO, &err);
    assert_int_equal(err.code, OPTIM_EIO);
    check_msg(__LINE__, &err, NEEDLES(path, strerror(ENOENT)));
    optim_st_writer_destroy(w);
    assert_false(file_exists(path));
    assert_int_equal(dir_entries(dir), 0);
}

/* The temporary file is created but the rename fails (path is a directory):
 * the temporary file must be removed and path left as it was. */
OPTIM_TEST(test_save_failure_removes_temp)
{
    optim_error err;
    char dir[600], path[700];
    fresh_dir("rename_fails", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/target", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    float v = 1.0f;
    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    add_ok(w, "v", OPTIM_F32, &v, 0, NULL);
    assert_status(optim_st_writer_save(w, path, &err), OPTIM_EIO, &err);
    check_msg(__LINE__, &err, NEEDLES(path, "rename"));
    optim_st_writer_destroy(w);
    assert_int_equal(dir_entries(dir), 1); /* only "target" */
    assert_int_equal(dir_entries(path), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
}

/* ---- Writer argument checks ----------------------------------------------- */

static void expect_add_fails(int line, optim_st_writer *w, const char *name, const optim_tensor *t,
                             int code, const char *needle)
{
    optim_error err;
    memset(&err, 0, sizeof err);
    int rc = optim_st_writer_add(w, name, t, &err);
    if (rc != code || err.code != code) {
        print_error("line %d: status %d, expected %d: %s\n", line, rc, code, err.msg);
        _fail(__FILE__, line);
    }
    check_msg(line, &err, NEEDLES(needle));
}
#define ADD_FAILS(w, name, t, code, needle) expect_add_fails(__LINE__, w, name, t, code, needle)

OPTIM_TEST(test_writer_rejects)
{
    float data[4] = {1, 2, 3, 4};
    const int64_t s4[1] = {4};
    optim_tensor good = optim_tensor_make(OPTIM_F32, data, 1, s4);
    optim_st_writer *w;
    optim_error err;
    assert_status(optim_st_writer_create(NULL, &err), OPTIM_EINVAL, &err);
    assert_ok(optim_st_writer_create(&w, &err), &err);
    add_ok(w, "w", OPTIM_F32, data, 1, s4);

    ADD_FAILS(NULL, "x", &good, OPTIM_EINVAL, "writer is NULL");
    ADD_FAILS(w, NULL, &good, OPTIM_EINVAL, "name is NULL");
    ADD_FAILS(w, "__metadata__", &good, OPTIM_EINVAL, "reserved");
    ADD_FAILS(w, "bad\xff", &good, OPTIM_EINVAL, "not valid UTF-8");
    ADD_FAILS(w, "w", &good, OPTIM_EINVAL, "already added");
    ADD_FAILS(w, "x", NULL, OPTIM_EINVAL, "NULL");

    optim_tensor t = good;
    t.dtype = OPTIM_DTYPE_INVALID;
    ADD_FAILS(w, "x", &t, OPTIM_EDTYPE, "\"x\"");
    t = good;
    t.rank = 9;
    ADD_FAILS(w, "x", &t, OPTIM_ESHAPE, "rank 9");
    t = good;
    t.rank = -1;
    ADD_FAILS(w, "x", &t, OPTIM_ESHAPE, "rank -1");
    t = good;
    t.shape[0] = -2;
    ADD_FAILS(w, "x", &t, OPTIM_ESHAPE, "[-2]");
    t = good;
    t.data = NULL;
    ADD_FAILS(w, "x", &t, OPTIM_EINVAL, "data is NULL");
    const int64_t huge[2] = {(int64_t)1 << 53, 0};
    t = optim_tensor_make(OPTIM_F32, NULL, 2, huge);
    ADD_FAILS(w, "x", &t, OPTIM_ESHAPE, "2^53");
    const int64_t big[2] = {(int64_t)1 << 40, (int64_t)1 << 40}; /* numel overflows */
    t = optim_tensor_make(OPTIM_F32, data, 2, big);
    ADD_FAILS(w, "x", &t, OPTIM_ESHAPE, "\"x\"");
    const int64_t bytes[2] = {(int64_t)1 << 31, (int64_t)1 << 31}; /* numel * 4 overflows */
    t = optim_tensor_make(OPTIM_F32, data, 2, bytes);
    ADD_FAILS(w, "x", &t, OPTIM_ESHAPE, "too many bytes");
    /* err may be NULL */
    assert_status(optim_st_writer_add(w, "__metadata__", &good, NULL), OPTIM_EINVAL, NULL);

    assert_status(optim_st_writer_save(NULL, "x", &err), OPTIM_EINVAL, &err);
    assert_status(optim_st_writer_save(w, NULL, &err), OPTIM_EINVAL, &err);
    assert_status(optim_st_writer_save(w, "", &err), OPTIM_EINVAL, &err);

    /* Failed adds left the writer as it was: one tensor, original data. */
    data[0] = 100;
    const char *path = optim_test_tmpfile("rejects.safetensors");
    save_ok(w, path);
    optim_st_writer_destroy(w);
    optim_st_writer_destroy(NULL);
    optim_st_file *f = read_ok(path);
    assert_eq(optim_st_count(f), 1);
    const float orig[4] = {1, 2, 3, 4};
    expect_tensor(f, "w", OPTIM_F32, 1, s4, orig, sizeof orig);
    optim_st_free(f);
}

/* ---- Reader API ------------------------------------------------------------ */

OPTIM_TEST(test_reader_api)
{
    const unsigned char data[12] = {0};
    optim_st_file *f = parse_ok("{\"b\":{\"dtype\":\"I32\",\"shape\":[3],\"data_offsets\":[0,12]}}",
                                data, sizeof data);
    optim_tensor t, untouched;
    memset(&untouched, 0x5A, sizeof untouched);
    t = untouched;
    assert_status(optim_st_get(f, "a", &t), OPTIM_ENOTFOUND, NULL);
    assert_status(optim_st_get(f, "c", &t), OPTIM_ENOTFOUND, NULL);
    assert_status(optim_st_get(f, "", &t), OPTIM_ENOTFOUND, NULL);
    assert_memory_equal(&t, &untouched, sizeof t);
    assert_status(optim_st_get(NULL, "b", &t), OPTIM_EINVAL, NULL);
    assert_status(optim_st_get(f, NULL, &t), OPTIM_EINVAL, NULL);
    assert_status(optim_st_get(f, "b", NULL), OPTIM_EINVAL, NULL);
    assert_eq(optim_st_count(NULL), 0);
    assert_null(optim_st_name(NULL, 0));
    assert_null(optim_st_name(f, 1));
    assert_null(optim_st_name(f, (size_t)-1));
    optim_st_free(f);
    optim_st_free(NULL);

    optim_error err;
    optim_st_file *g = (optim_st_file *)&g;
    assert_status(optim_st_parse(NULL, 5, &g, &err), OPTIM_EINVAL, &err);
    assert_null(g);
    assert_status(optim_st_parse(data, sizeof data, NULL, &err), OPTIM_EINVAL, &err);
    g = (optim_st_file *)&g;
    assert_status(optim_st_read(NULL, &g, &err), OPTIM_EINVAL, &err);
    assert_null(g);
    assert_status(optim_st_read("x", NULL, &err), OPTIM_EINVAL, &err);
    /* err may be NULL on every error path */
    assert_status(optim_st_parse(data, 3, &g, NULL), OPTIM_EFORMAT, NULL);
    assert_status(optim_st_read("/nonexistent/optim/x", &g, NULL), OPTIM_EIO, NULL);
}

/* The example file from the reference implementation's documentation. */
OPTIM_TEST(test_read_reference_example)
{
    const char *hdr = "{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
    assert_int_equal(strlen(hdr), 0x3c);
    const int32_t v[4] = {1, -2, 3, -4};
    const unsigned char le[16] = {1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff,
                                  3, 0, 0, 0, 0xfc, 0xff, 0xff, 0xff};
    optim_st_file *f = parse_ok(hdr, le, sizeof le);
    const int64_t s[2] = {2, 2};
    expect_tensor(f, "test", OPTIM_I32, 2, s, v, sizeof v);
    optim_st_free(f);
}

/* A file as another writer may lay it out: header not a multiple of 8, entries
 * not in name or offset order, offsets not 8-aligned, metadata present, other
 * fields ignored. Every returned tensor is still an 8-byte aligned copy. */
OPTIM_TEST(test_read_foreign_layout)
{
    unsigned char data[12 + 16 + 4];
    const float a[3] = {1, 2, 3};
    const double b[2] = {-1.5, 2.5};
    const int32_t c = 77;
    memcpy(data, a, 12);
    memcpy(data + 12, b, 16);
    memcpy(data + 28, &c, 4);
    const char *hdr =
        "{\"c\":{\"shape\":[],\"dtype\":\"I32\",\"data_offsets\":[28,32]},"
        "\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\"},"
        "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[12,28],\"extra\":1},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}\n \t";
    optim_st_file *f = parse_ok(hdr, data, sizeof data);
    assert_eq(optim_st_count(f), 3);
    const int64_t sa[1] = {3}, sb[1] = {2};
    expect_tensor(f, "a", OPTIM_F32, 1, sa, a, sizeof a);
    expect_tensor(f, "b", OPTIM_F64, 1, sb, b, sizeof b);
    expect_tensor(f, "c", OPTIM_I32, 0, NULL, &c, sizeof c);
    optim_tensor t;
    assert_status(optim_st_get(f, "__metadata__", &t), OPTIM_ENOTFOUND, NULL);
    optim_st_free(f);

    /* Zero-element tensors may share an offset with each other and with the
     * start of the next tensor; an empty name and dims just below 2^53 are
     * legal. */
    f = parse_ok("{\"z1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                 "\"\":{\"dtype\":\"I64\",\"shape\":[9007199254740991,0],\"data_offsets\":[0,0]},"
                 "\"x\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"z2\":{\"dtype\":\"F64\",\"shape\":[2,0,3],\"data_offsets\":[4,4]}}",
                 &c, 4);
    assert_eq(optim_st_count(f), 4);
    assert_string_equal(optim_st_name(f, 0), "");
    assert_ok(optim_st_get(f, "", &t), NULL);
    assert_int_equal(t.shape[0], 9007199254740991LL);
    const int64_t sx[1] = {1};
    expect_tensor(f, "x", OPTIM_I32, 1, sx, &c, 4);
    optim_st_free(f);
}

/* The empty name: the reader accepts it (as the reference implementation),
 * so the writer must too - whatever is read can be written back and reread. */
OPTIM_TEST(test_empty_name_round_trip)
{
    const int32_t v = 5;
    optim_st_file *f =
        parse_ok("{\"\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]}}", &v, 4);
    optim_tensor t;
    assert_ok(optim_st_get(f, "", &t), NULL);
    optim_st_writer *w;
    optim_error err;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    assert_ok(optim_st_writer_add(w, "", &t, &err), &err);
    const char *path = optim_test_tmpfile("empty_name.safetensors");
    save_ok(w, path);
    optim_st_writer_destroy(w);
    optim_st_free(f);
    f = read_ok(path);
    assert_eq(optim_st_count(f), 1);
    assert_string_equal(optim_st_name(f, 0), "");
    expect_tensor(f, "", OPTIM_I32, 0, NULL, &v, 4);
    optim_st_free(f);
}

OPTIM_TEST(test_read_missing_file)
{
    char path[700];
    snprintf(path, sizeof path, "%s", optim_test_tmpfile("does-not-exist.safetensors"));
    optim_st_file *f = (optim_st_file *)&f;
    optim_error err;
    assert_status(optim_st_read(path, &f, &err), OPTIM_EIO, &err);
    assert_null(f);
    assert_int_equal(err.code, OPTIM_EIO);
    check_msg(__LINE__, &err, NEEDLES(path, strerror(ENOENT)));
}

OPTIM_TEST(test_read_directory)
{
    char dir[600];
    fresh_dir("a_directory", dir, sizeof dir);
    optim_st_file *f = (optim_st_file *)&f;
    optim_error err;
    assert_status(optim_st_read(dir, &f, &err), OPTIM_EIO, &err);
    assert_null(f);
    check_msg(__LINE__, &err, NEEDLES(dir, "not a regular file"));
}

/* Errors from optim_st_read name the file; the same checks run as for a
 * buffer. */
OPTIM_TEST(test_read_malformed_file_names_path)
{
    char path[700];
    snprintf(path, sizeof path, "%s", optim_test_tmpfile("bf16.safetensors"));
    size_t len;
    unsigned char *b =
        mk("{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,4]}}", NULL, 4, &len);
    assert_eq(optim_test_write_file(path, b, len), 0);
    free(b);
    optim_st_file *f = (optim_st_file *)&f;
    optim_error err;
    assert_status(optim_st_read(path, &f, &err), OPTIM_ENOTSUP, &err);
    assert_null(f);
    check_msg(__LINE__, &err, NEEDLES(path, "\"w\"", "\"F8_E4M3\""));

    snprintf(path, sizeof path, "%s", optim_test_tmpfile("short.safetensors"));
    assert_eq(optim_test_write_file(path, "abc", 3), 0);
    assert_status(optim_st_read(path, &f, &err), OPTIM_EFORMAT, &err);
    check_msg(__LINE__, &err, NEEDLES(path, "3 bytes"));

    snprintf(path, sizeof path, "%s", optim_test_tmpfile("trailing.safetensors"));
    b = mk("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", NULL, 5, &len);
    assert_eq(optim_test_write_file(path, b, len), 0);
    free(b);
    assert_status(optim_st_read(path, &f, &err), OPTIM_EFORMAT, &err);
    check_msg(__LINE__, &err, NEEDLES(path, "1 trailing bytes"));
}

/* ---- Malformed files: one test per kind ------------------------------------ */

#define T_OK "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"

OPTIM_TEST(test_bad_short_file)
{
    const unsigned char b[8] = {2, 0, 0, 0, 0, 0, 0, 0};
    BAD_BUF(b, 0, OPTIM_EFORMAT, "0 bytes", "8-byte header size");
    BAD_BUF(b, 1, OPTIM_EFORMAT, "1 bytes");
    BAD_BUF(b, 7, OPTIM_EFORMAT, "7 bytes");
    /* 8 bytes: a size, then nothing */
    BAD_BUF(b, 8, OPTIM_EFORMAT, "header size 2", "0 bytes that follow");
}

OPTIM_TEST(test_bad_header_size_zero)
{
    size_t len;
    unsigned char *b = mk_raw(0, "{}", 2, NULL, 0, &len);
    BAD_BUF(b, len, OPTIM_EFORMAT, "header size is 0");
    free(b);
}

OPTIM_TEST(test_bad_header_size_past_file)
{
    size_t len;
    unsigned char *b = mk_raw(100, "{}      ", 8, NULL, 12, &len);
    BAD_BUF(b, len, OPTIM_EFORMAT, "header size 100", "20 bytes that follow");
    free(b);
}

OPTIM_TEST(test_bad_header_size_too_large)
{
    size_t len;
    unsigned char *b = mk_raw(100000001, "{}", 2, NULL, 0, &len);
    BAD_BUF(b, len, OPTIM_EFORMAT, "header size 100000001", "limit of 100000000");
    free(b);
    b = mk_raw(UINT64_MAX - 3, "{}", 2, NULL, 0, &len);
    BAD_BUF(b, len, OPTIM_EFORMAT, "header size 18446744073709551612", "limit");
    free(b);
}

OPTIM_TEST(test_bad_header_not_json)
{
    BAD("{", 0, OPTIM_EFORMAT, "not valid JSON");
    BAD("{\"a\":", 0, OPTIM_EFORMAT, "not valid JSON");
    BAD("{abc}", 0, OPTIM_EFORMAT, "not valid JSON");
    BAD("{\"a\":" T_OK ",}", 4, OPTIM_EFORMAT, "not valid JSON");
    BAD("{}x", 0, OPTIM_EFORMAT, "after the JSON object", "offset 2");
    BAD("{} {}", 0, OPTIM_EFORMAT, "after the JSON object");
}

OPTIM_TEST(test_bad_header_not_object)
{
    BAD("[]", 0, OPTIM_EFORMAT, "starting with '{'", "'['");
    BAD("\"x\"", 0, OPTIM_EFORMAT, "starting with '{'");
    BAD("1", 0, OPTIM_EFORMAT, "starting with '{'");
    BAD(" {}", 0, OPTIM_EFORMAT, "starting with '{'", "0x20");
    BAD("\xef\xbb\xbf{}", 0, OPTIM_EFORMAT, "starting with '{'"); /* UTF-8 BOM */
}

OPTIM_TEST(test_bad_header_bytes)
{
    BAD("{\"a\xff\":" T_OK "}", 4, OPTIM_EFORMAT, "not valid UTF-8", "0xff", "offset 3");
    BAD("{\"\xc0\xaf\":" T_OK "}", 4, OPTIM_EFORMAT, "not valid UTF-8"); /* overlong */
    BAD("{\"\xed\xa0\x80\":" T_OK "}", 4, OPTIM_EFORMAT, "not valid UTF-8"); /* surrogate */
    BAD("{\"a\nb\":" T_OK "}", 4, OPTIM_EFORMAT, "control character 0x0a", "inside a string");
    BAD("{\"a\\u0000b\":" T_OK "}", 4, OPTIM_EFORMAT, "\\u0000");
    BAD("{\x01\"a\":" T_OK "}", 4, OPTIM_EFORMAT, "control character 0x01");
    /* a raw NUL byte inside the header */
    size_t len;
    unsigned char *b = mk_raw(4, "{\0}", 4, NULL, 0, &len);
    BAD_BUF(b, len, OPTIM_EFORMAT, "control character 0x00");
    free(b);
    /* an escaped backslash before u0000 is not a NUL escape: valid name */
    optim_st_file *f = parse_ok("{\"a\\\\u0000\":" T_OK "}", "\0\0\0\0", 4);
    assert_string_equal(optim_st_name(f, 0), "a\\u0000");
    optim_st_free(f);
}

OPTIM_TEST(test_bad_entry_not_object)
{
    BAD("{\"a\":5}", 0, OPTIM_EFORMAT, "tensor \"a\"", "entry is 5", "expected an object");
    BAD("{\"a\":[]}", 0, OPTIM_EFORMAT, "entry is an array");
    BAD("{\"a\":\"F32\"}", 0, OPTIM_EFORMAT, "entry is the string \"F32\"");
    BAD("{\"a\":null}", 0, OPTIM_EFORMAT, "entry is null");
}

OPTIM_TEST(test_bad_dtype)
{
    BAD("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, OPTIM_EFORMAT, "\"w\"",
        "missing \"dtype\"");
    BAD("{\"w\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, OPTIM_EFORMAT,
        "dtype is 32");
    BAD("{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, OPTIM_ENOTSUP,
        "tensor \"w\"", "dtype \"F8_E4M3\" is not supported");
    BAD("{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, OPTIM_ENOTSUP,
        "\"U8\"");
    BAD("{\"w\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, OPTIM_ENOTSUP,
        "\"f32\"");
    BAD("{\"w\":{\"dtype\":\"bogus\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, OPTIM_ENOTSUP,
        "\"bogus\"");
    BAD("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
        OPTIM_EFORMAT, "field \"dtype\" appears twice");
}

OPTIM_TEST(test_bad_shape)
{
    BAD("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, OPTIM_EFORMAT,
        "missing \"shape\"");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", 16, OPTIM_EFORMAT,
        "shape is 4", "array");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", 4, OPTIM_EFORMAT,
        "shape is an object");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,4]}}", 4, OPTIM_EFORMAT,
        "shape[1] is -1");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, OPTIM_EFORMAT,
        "shape[0] is 1.5");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4, OPTIM_EFORMAT,
        "shape[0] is the string \"1\"");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,4]}}", 4, OPTIM_EFORMAT,
        "shape[0] is null");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[[1]],\"data_offsets\":[0,4]}}", 4, OPTIM_EFORMAT,
        "shape[0] is an array");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1e400],\"data_offsets\":[0,4]}}", 4, OPTIM_EFORMAT,
        "shape[0] is inf");
    /* 2^53 + 1 would read back as 2^53: refused */
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[9007199254740993,0],\"data_offsets\":[0,0]}}", 0,
        OPTIM_EFORMAT, "shape[0]", "2^53");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
        OPTIM_ENOTSUP, "tensor \"w\"", "rank 9");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
        OPTIM_EFORMAT, "[4294967296, 4294967296]", "more than 2^63-1 elements");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[2147483648,2147483648],\"data_offsets\":[0,4]}}", 4,
        OPTIM_EFORMAT, "more than 2^63-1 bytes");
}

OPTIM_TEST(test_bad_data_offsets)
{
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, OPTIM_EFORMAT, "missing \"data_offsets\"");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":4}}", 4, OPTIM_EFORMAT,
        "data_offsets is 4");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 4, OPTIM_EFORMAT,
        "1 entries", "expected 2");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4, OPTIM_EFORMAT,
        "3 entries");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, OPTIM_EFORMAT,
        "data_offsets[0] is -4");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}}", 4, OPTIM_EFORMAT,
        "data_offsets[1] is 4.5");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}}", 4, OPTIM_EFORMAT,
        "data_offsets[1] is the string \"4\"");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4, OPTIM_EFORMAT,
        "[4, 0]", "begin after end");
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, OPTIM_EFORMAT,
        "tensor \"w\"", "[0, 8]", "end past the 4-byte data buffer");
    /* a huge claim is refused before anything is allocated */
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1000000000000],\"data_offsets\":[0,4000000000000]}}",
        4, OPTIM_EFORMAT, "end past");
}

OPTIM_TEST(test_bad_byte_count)
{
    BAD("{\"w\":{\"dtype\":\"F64\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, OPTIM_EFORMAT,
        "tensor \"w\"", "span 24 bytes", "[2, 3] of F64 needs 48");
    BAD("{\"w\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,8]}}", 8, OPTIM_EFORMAT,
        "span 8 bytes", "[] of I32 needs 4");
    BAD("{\"w\":{\"dtype\":\"I64\",\"shape\":[0],\"data_offsets\":[0,8]}}", 8, OPTIM_EFORMAT,
        "needs 0");
}

OPTIM_TEST(test_bad_overlap)
{
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
        12, OPTIM_EFORMAT, "tensor \"b\" data_offsets [4, 12] overlap tensor \"a\" [0, 8]");
    /* the same bytes twice */
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        4, OPTIM_EFORMAT, "overlap");
    /* an empty tensor inside another */
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
        8, OPTIM_EFORMAT, "tensor \"z\"", "overlap tensor \"a\"");
}

OPTIM_TEST(test_bad_hole)
{
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
        12, OPTIM_EFORMAT, "bytes [4, 8) belong to no tensor", "\"b\"");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, OPTIM_EFORMAT,
        "bytes [0, 4) belong to no tensor");
}

OPTIM_TEST(test_bad_trailing_bytes)
{
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 7, OPTIM_EFORMAT,
        "7 bytes", "cover only [0, 4)", "3 trailing bytes");
    BAD("{}", 1, OPTIM_EFORMAT, "1 trailing bytes");
    BAD("{\"__metadata__\":{}}", 8, OPTIM_EFORMAT, "8 trailing bytes");
}

OPTIM_TEST(test_bad_duplicate_names)
{
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        8, OPTIM_EFORMAT, "tensor name \"w\" appears more than once");
    /* the same name spelled with an escape */
    BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"\\u0077\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
        8, OPTIM_EFORMAT, "\"w\" appears more than once");
    BAD("{\"__metadata__\":{},\"__metadata__\":{}}", 0, OPTIM_EFORMAT,
        "\"__metadata__\" appears twice");
}

OPTIM_TEST(test_bad_metadata)
{
    BAD("{\"__metadata__\":{\"format\":\"pt\",\"epoch\":3}}", 0, OPTIM_EFORMAT,
        "value for key \"epoch\" is 3", "expected a string");
    BAD("{\"__metadata__\":{\"x\":{\"y\":\"z\"}}}", 0, OPTIM_EFORMAT, "\"x\" is an object");
    BAD("{\"__metadata__\":[\"a\"]}", 0, OPTIM_EFORMAT, "\"__metadata__\" is an array");
    BAD("{\"__metadata__\":\"pt\"}", 0, OPTIM_EFORMAT, "\"__metadata__\" is the string");
    /* an all-string map is fine and is not a tensor */
    optim_st_file *f = parse_ok("{\"__metadata__\":{\"format\":\"pt\"}}", NULL, 0);
    assert_eq(optim_st_count(f), 0);
    optim_st_free(f);
}

/* Long and odd names are quoted and cut in messages, never printed raw. */
OPTIM_TEST(test_bad_message_quoting)
{
    char hdr[1024];
    char name[301];
    memset(name, 'n', 300);
    name[300] = '\0';
    snprintf(hdr, sizeof hdr,
             "{\"%s\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,2]}}", name);
    BAD(hdr, 2, OPTIM_ENOTSUP, "nnnn...\"", "\"F8_E4M3\"");
    BAD("{\"a\\tb\\\"c\":5}", 0, OPTIM_EFORMAT, "tensor \"a\\x09b\\\"c\"");
}

int main(void) { return optim_test_run(); }
