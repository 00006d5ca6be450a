/*
 * safetensors reader and writer (see include/optim/safetensors.h).
 *
 * Reading: the 8-byte size and the header are read first and validated
 * completely (a pre-scan for UTF-8 and control characters, cJSON for the
 * structure, then every entry, then the offsets sorted as the reference
 * implementation does) before any tensor memory is allocated, so a hostile
 * header cannot make us allocate more than the file holds. The data buffer is
 * then read once, in offset order, into one arena where every tensor starts on
 * an 8-byte boundary.
 *
 * Writing: tensors are copied at add time (already in little-endian order);
 * save sorts them by name, writes the header by hand (cJSON prints large
 * integers in exponent form) and writes through io/atomic_file.c (an
 * unnamed temporary file, fsync, then link or rename).
 */
#define _POSIX_C_SOURCE 200809L

#include "optim/file.h"
#include "optim/safetensors.h"

#include "core/dtype.h"
#include "core/fd.h"
#include "core/hash.h"
#include "core/internal.h"
#include "io/atomic_file.h"
#include "io/safetensors_json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- Byte order ---------------------------------------------------------- */

/* The format is little-endian. The swap code below is compiled everywhere and
 * runs only on big-endian hosts; a host whose order we cannot tell is a
 * compile error rather than silently wrong files. */
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ST_HOST_BIG_ENDIAN 0
#elif defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define ST_HOST_BIG_ENDIAN 1
#else
#error "optim safetensors: cannot tell this host's byte order (need __BYTE_ORDER__)"
#endif

_Static_assert(sizeof(float) == 4 && sizeof(double) == 8, "IEEE float32/float64 expected");

/* Reverses each `size`-byte element of p[0 .. nbytes). */
static void st_swap(unsigned char *p, size_t nbytes, size_t size)
{
    for (size_t i = 0; i + size <= nbytes; i += size)
        for (size_t a = i, b = i + size - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

static uint64_t st_le64(const unsigned char b[8])
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

/* ---- Small helpers -------------------------------------------------------- */

/* safetensors stores every dtype optim has, under the table's names (core/dtype.h). */
#define ST_ALL_DTYPES optim__dtype_all()
#define st_dtype_name(dt) optim__dtype_name_in(dt, OPTIM__DTYPE_SAFETENSORS)
#define st_dtype_by_name(s) optim__dtype_by_name(s, OPTIM__DTYPE_SAFETENSORS)
/* Integers in the header must be below 2^53: from there on a double (cJSON's
 * number) no longer tells n from n + 1, so 2^53 + 1 would read as 2^53. */
#define ST_MAX_EXACT ((uint64_t)1 << 53)
#define ST_METADATA "__metadata__"
#define ST_MEM_LABEL "safetensors buffer"

typedef unsigned long long ull; /* for printf */

/* Length of the valid UTF-8 sequence starting at s[0] (n > 0 bytes left), or
 * 0 if it is not one (overlong forms, surrogates and > U+10FFFF refused). */
static size_t st_utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t len;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if (n < len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}

static int st_utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = st_utf8_seq(p + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

/* A name quoted for an error message: escapes quotes, backslashes, control
 * bytes and bytes that are not valid UTF-8, and cuts long names with "...". */
#define ST_QUOTE_MAX 64
typedef struct st_quote {
    char s[ST_QUOTE_MAX * 4 + 16];
} st_quote;

static const char *st_q(st_quote *q, const char *name)
{
    const unsigned char *p = (const unsigned char *)name;
    size_t n = strlen(name), o = 0, i = 0;
    q->s[o++] = '"';
    while (i < n && i < ST_QUOTE_MAX) {
        unsigned char c = p[i];
        size_t k = c >= 0x80 ? st_utf8_seq(p + i, n - i) : 1;
        if (c == '"' || c == '\\') {
            q->s[o++] = '\\';
            q->s[o++] = (char)c;
        } else if (c < 0x20 || c == 0x7F || k == 0) {
            snprintf(q->s + o, 5, "\\x%02x", c);
            o += 4;
            k = 1;
        } else {
            memcpy(q->s + o, p + i, k);
            o += k;
        }
        i += k ? k : 1;
    }
    if (i < n) {
        memcpy(q->s + o, "...", 3);
        o += 3;
    }
    q->s[o++] = '"';
    q->s[o] = '\0';
    return q->s;
}

/* Describes a JSON value for a message: "-1", "1.5", "the string \"3\"", ... */
static const char *st_describe(const cJSON *v, char *buf, size_t n)
{
    if (!v) snprintf(buf, n, "missing");
    else if (cJSON_IsNumber(v)) snprintf(buf, n, "%.17g", v->valuedouble);
    else if (cJSON_IsString(v)) {
        st_quote q;
        snprintf(buf, n, "the string %s", st_q(&q, v->valuestring));
    } else if (cJSON_IsTrue(v)) snprintf(buf, n, "true");
    else if (cJSON_IsFalse(v)) snprintf(buf, n, "false");
    else if (cJSON_IsNull(v)) snprintf(buf, n, "null");
    else if (cJSON_IsArray(v)) snprintf(buf, n, "an array");
    else if (cJSON_IsObject(v)) snprintf(buf, n, "an object");
    else snprintf(buf, n, "an invalid value");
    return buf;
}

/* 0 and *out set if v is an integer in [0, 2^53); -1 otherwise. */
static int st_json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0.0) || d >= (double)ST_MAX_EXACT) return -1;
    uint64_t u = (uint64_t)d;
    if ((double)u != d) return -1; /* fractional */
    *out = u;
    return 0;
}

static const char *st_sys(int e, char *buf, size_t n)
{
    if (strerror_r(e, buf, n) != 0) snprintf(buf, n, "system error %d", e);
    return buf;
}

/* ---- Reading ----------------------------------------------------------- */

typedef struct st_entry {
    char *name;
    optim_dtype dtype;
    int32_t rank;
    int64_t shape[OPTIM_MAX_RANK];
    uint64_t begin, end; /* byte offsets in the data buffer */
    unsigned char *data; /* into the arena */
} st_entry;

struct optim_st_file {
    size_t n;
    st_entry *e; /* sorted by name */
    unsigned char *arena;
};

/* Where the bytes come from: a file descriptor (read through a buffer, so
 * that 100k small tensors are not 100k read calls) or a memory buffer. */
#define ST_READ_BUF ((size_t)1 << 18)
typedef struct st_src {
    const char *label; /* path, or ST_MEM_LABEL */
    int fd; /* -1 for memory */
    const unsigned char *mem;
    uint64_t size; /* total bytes */
    uint64_t pos; /* bytes handed out */
    unsigned char *buf; /* fd only: read ahead, NULL to read directly */
    size_t buf_at, buf_len;
    int json_only; /* optim__st_parse_json: no st_plain_entries */
} st_src;

/* Reads exactly n bytes of the file into dst; `at` is their offset, for messages. */
static int st_fd_read(const st_src *s, unsigned char *p, size_t n, uint64_t at, optim_error *err)
{
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t r = read(s->fd, p, chunk);
        if (r < 0) {
            if (errno == EINTR) continue;
            char sb[128];
            return optim__err(err, OPTIM_EIO, "%s: read failed at byte %llu: %s", s->label, (ull)at,
                              st_sys(errno, sb, sizeof sb));
        }
        if (r == 0)
            return optim__err(err, OPTIM_EIO,
                              "%s: file ended at byte %llu, but it was %llu bytes when opened "
                              "(changed while being read?)",
                              s->label, (ull)at, (ull)s->size);
        p += r;
        n -= (size_t)r;
        at += (uint64_t)r;
    }
    return OPTIM_OK;
}

static int st_src_read(st_src *s, void *dst, uint64_t n, optim_error *err)
{
    unsigned char *p = dst;
    if (n > s->size - s->pos) /* cannot happen after validation; be safe */
        return optim__err(err, OPTIM_EFORMAT, "%s: needs %llu bytes at byte %llu, only %llu left",
                          s->label, (ull)n, (ull)s->pos, (ull)(s->size - s->pos));
    if (s->fd < 0) {
        if (n) memcpy(p, s->mem + s->pos, (size_t)n);
        s->pos += n;
        return OPTIM_OK;
    }
    size_t take = s->buf_len - s->buf_at < n ? s->buf_len - s->buf_at : (size_t)n;
    if (take) memcpy(p, s->buf + s->buf_at, take);
    s->buf_at += take;
    s->pos += take;
    p += take;
    n -= take;
    if (n == 0) return OPTIM_OK;
    if (!s->buf || n >= ST_READ_BUF) { /* large: straight into place */
        int rc = st_fd_read(s, p, (size_t)n, s->pos, err);
        if (!rc) s->pos += n;
        return rc;
    }
    uint64_t left = s->size - s->pos; /* >= n */
    size_t want = left < ST_READ_BUF ? (size_t)left : ST_READ_BUF;
    int rc = st_fd_read(s, s->buf, want, s->pos, err);
    if (rc) return rc;
    s->buf_len = want;
    memcpy(p, s->buf, (size_t)n);
    s->buf_at = (size_t)n;
    s->pos += n;
    return OPTIM_OK;
}

/* Checks the raw header bytes before cJSON sees them: valid UTF-8, no control
 * characters except JSON whitespace between tokens, none inside strings, and
 * no \u0000 escape (a NUL would silently cut a name short in C). */
static int st_scan_header(const st_src *src, const unsigned char *s, size_t n, optim_error *err)
{
    int in_str = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c >= 0x80) {
            size_t k = st_utf8_seq(s + i, n - i);
            if (!k)
                return optim__err(
                    err, OPTIM_EFORMAT,
                    "%s: header is not valid UTF-8 (byte 0x%02x at header offset %zu)", src->label,
                    c, i);
            i += k;
            continue;
        }
        if (c < 0x20 && (in_str || (c != '\t' && c != '\n' && c != '\r')))
            return optim__err(err, OPTIM_EFORMAT,
                              "%s: header has control character 0x%02x at header offset %zu%s",
                              src->label, c, i, in_str ? " inside a string" : "");
        if (in_str && c == '\\') {
            if (i + 5 < n && s[i + 1] == 'u' && memcmp(s + i + 2, "0000", 4) == 0)
                return optim__err(err, OPTIM_EFORMAT,
                                  "%s: header has an escaped NUL (\\u0000) at header offset %zu; "
                                  "names cannot hold NUL",
                                  src->label, i);
            i += 2;
            continue;
        }
        if (c == '"') in_str = !in_str;
        i++;
    }
    return OPTIM_OK;
}

static int st_field(const st_src *src, const char *tname, const cJSON *obj, const char *key,
                    const cJSON **out, optim_error *err);

/* Tensor tname's entry is an object; its fields dtype, shape and
 * data_offsets (NULL when absent), each at most once. */
static int st_entry_fields(const st_src *src, const char *tname, const cJSON *obj, const cJSON **dt,
                           const cJSON **shape, const cJSON **offs, optim_error *err)
{
    st_quote q;
    char d[128];
    int rc;
    if (!cJSON_IsObject(obj))
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: entry is %s, expected an object with dtype, shape and "
                          "data_offsets",
                          src->label, st_q(&q, tname), st_describe(obj, d, sizeof d));
    if ((rc = st_field(src, tname, obj, "dtype", dt, err)) ||
        (rc = st_field(src, tname, obj, "shape", shape, err)) ||
        (rc = st_field(src, tname, obj, "data_offsets", offs, err)))
        return rc;
    return OPTIM_OK;
}

/* Tensor tname's "shape" is an array of at most OPTIM_MAX_RANK entries;
 * *rank gets their count. */
static int st_entry_rank(const st_src *src, const char *tname, const cJSON *shape, int *rank,
                         optim_error *err)
{
    st_quote q;
    char d[128];
    if (!shape)
        return optim__err(err, OPTIM_EFORMAT, "%s: tensor %s: missing \"shape\"", src->label,
                          st_q(&q, tname));
    if (!cJSON_IsArray(shape))
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: shape is %s, expected an array of non-negative integers",
                          src->label, st_q(&q, tname), st_describe(shape, d, sizeof d));
    *rank = cJSON_GetArraySize(shape);
    if (*rank > OPTIM_MAX_RANK)
        return optim__err(err, OPTIM_ENOTSUP,
                          "%s: tensor %s: rank %d is above optim's maximum of %d", src->label,
                          st_q(&q, tname), *rank, OPTIM_MAX_RANK);
    return OPTIM_OK;
}

/* Tensor tname's "data_offsets": [begin, end], two integers in [0, 2^53),
 * into be. */
static int st_entry_offsets(const st_src *src, const char *tname, const cJSON *offs, uint64_t be[2],
                            optim_error *err)
{
    const char *L = src->label;
    st_quote q;
    char d[128];
    if (!offs)
        return optim__err(err, OPTIM_EFORMAT, "%s: tensor %s: missing \"data_offsets\"", L,
                          st_q(&q, tname));
    if (!cJSON_IsArray(offs))
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: data_offsets is %s, expected [begin, end]", L,
                          st_q(&q, tname), st_describe(offs, d, sizeof d));
    int noffs = cJSON_GetArraySize(offs);
    if (noffs != 2)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: data_offsets has %d entries, expected 2 ([begin, end])",
                          L, st_q(&q, tname), noffs);
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetArrayItem(offs, i);
        if (st_json_uint(v, &be[i]) != 0)
            return optim__err(err, OPTIM_EFORMAT,
                              "%s: tensor %s: data_offsets[%d] is %s, expected an integer in "
                              "[0, 2^53)",
                              L, st_q(&q, tname), i, st_describe(v, d, sizeof d));
    }
    return OPTIM_OK;
}

/* Finds the single field `key` of entry object `obj` (NULL if absent); error
 * if it appears more than once (cJSON keeps duplicate keys). */
static int st_field(const st_src *src, const char *tname, const cJSON *obj, const char *key,
                    const cJSON **out, optim_error *err)
{
    const cJSON *found = NULL, *c;
    cJSON_ArrayForEach(c, obj)
    {
        if (c->string && strcmp(c->string, key) == 0) {
            if (found) {
                st_quote q;
                return optim__err(err, OPTIM_EFORMAT, "%s: tensor %s: field \"%s\" appears twice",
                                  src->label, st_q(&q, tname), key);
            }
            found = c;
        }
    }
    *out = found;
    return OPTIM_OK;
}

static int st_entry_nbytes(const st_src *src, const st_entry *e, int64_t *out, optim_error *err);
static int st_entry_span(const st_src *src, const st_entry *e, uint64_t data_len, int64_t nbytes,
                         optim_error *err);

static int st_parse_entry(const st_src *src, const cJSON *obj, uint64_t data_len, st_entry *e,
                          optim_error *err)
{
    const char *L = src->label;
    st_quote q;
    char d[128];
    const cJSON *dt = NULL, *shape = NULL, *offs = NULL;
    int rc;

    if ((rc = st_entry_fields(src, e->name, obj, &dt, &shape, &offs, err))) return rc;

    /* dtype */
    if (!dt)
        return optim__err(err, OPTIM_EFORMAT, "%s: tensor %s: missing \"dtype\"", L,
                          st_q(&q, e->name));
    if (!cJSON_IsString(dt))
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: dtype is %s, expected a string such as \"F32\"", L,
                          st_q(&q, e->name), st_describe(dt, d, sizeof d));
    e->dtype = st_dtype_by_name(dt->valuestring);
    if (e->dtype == OPTIM_DTYPE_INVALID) {
        st_quote qd;
        char names[96];
        return optim__err(
            err, OPTIM_ENOTSUP, "%s: tensor %s: dtype %s is not supported (optim reads %s)", L,
            st_q(&q, e->name), st_q(&qd, dt->valuestring),
            optim__dtype_list(ST_ALL_DTYPES, OPTIM__DTYPE_SAFETENSORS, names, sizeof names));
    }

    /* shape */
    int rank = 0;
    if ((rc = st_entry_rank(src, e->name, shape, &rank, err))) return rc;
    e->rank = rank;
    int k = 0;
    const cJSON *dim;
    cJSON_ArrayForEach(dim, shape)
    {
        uint64_t v;
        if (st_json_uint(dim, &v) != 0)
            return optim__err(err, OPTIM_EFORMAT,
                              "%s: tensor %s: shape[%d] is %s, expected an integer in [0, 2^53)", L,
                              st_q(&q, e->name), k, st_describe(dim, d, sizeof d));
        e->shape[k++] = (int64_t)v;
    }
    int64_t nbytes;
    if ((rc = st_entry_nbytes(src, e, &nbytes, err))) return rc;

    /* data_offsets */
    uint64_t be[2];
    if ((rc = st_entry_offsets(src, e->name, offs, be, err))) return rc;
    e->begin = be[0];
    e->end = be[1];
    return st_entry_span(src, e, data_len, nbytes, err);
}

/* The bytes of an entry's dtype and shape, if they fit in an int64. */
static int st_entry_nbytes(const st_src *src, const st_entry *e, int64_t *out, optim_error *err)
{
    const char *L = src->label;
    st_quote q;
    int64_t numel = 1, nbytes;
    char ss[200];
    for (int i = 0; i < e->rank; i++)
        if (optim__mul_overflow_i64(numel, e->shape[i], &numel))
            return optim__err(err, OPTIM_EFORMAT,
                              "%s: tensor %s: shape %s has more than 2^63-1 elements", L,
                              st_q(&q, e->name), optim_shape_str(e->rank, e->shape, ss, sizeof ss));
    if (optim__mul_overflow_i64(numel, (int64_t)optim_dtype_size(e->dtype), &nbytes))
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: shape %s of %s needs more than 2^63-1 bytes", L,
                          st_q(&q, e->name), optim_shape_str(e->rank, e->shape, ss, sizeof ss),
                          st_dtype_name(e->dtype));
    *out = nbytes;
    return OPTIM_OK;
}

/* An entry's data_offsets lie in the data buffer and span nbytes. */
static int st_entry_span(const st_src *src, const st_entry *e, uint64_t data_len, int64_t nbytes,
                         optim_error *err)
{
    const char *L = src->label;
    st_quote q;
    char ss[200];
    if (e->begin > e->end)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: data_offsets [%llu, %llu] has begin after end", L,
                          st_q(&q, e->name), (ull)e->begin, (ull)e->end);
    if (e->end > data_len)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: data_offsets [%llu, %llu] end past the %llu-byte data "
                          "buffer",
                          L, st_q(&q, e->name), (ull)e->begin, (ull)e->end, (ull)data_len);
    if (e->end - e->begin != (uint64_t)nbytes)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: data_offsets [%llu, %llu] span %llu bytes, but shape %s "
                          "of %s needs %lld bytes",
                          L, st_q(&q, e->name), (ull)e->begin, (ull)e->end,
                          (ull)(e->end - e->begin),
                          optim_shape_str(e->rank, e->shape, ss, sizeof ss),
                          st_dtype_name(e->dtype), (long long)nbytes);
    return OPTIM_OK;
}

static int st_parse_metadata(const st_src *src, const cJSON *md, optim_error *err)
{
    char d[128];
    const cJSON *c;
    if (!cJSON_IsObject(md))
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: \"__metadata__\" is %s, expected an object of strings", src->label,
                          st_describe(md, d, sizeof d));
    cJSON_ArrayForEach(c, md)
    {
        if (!cJSON_IsString(c)) {
            st_quote q;
            return optim__err(err, OPTIM_EFORMAT,
                              "%s: \"__metadata__\" value for key %s is %s, expected a string",
                              src->label, st_q(&q, c->string ? c->string : ""),
                              st_describe(c, d, sizeof d));
        }
    }
    return OPTIM_OK;
}

/* qsort, after a linear check: files optim writes are in name order with
 * offsets in the same order, and 100k names sorted again cost ~10% of a
 * replay. */
static void st_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    const char *p = base;
    size_t i = 1;
    while (i < n && cmp(p + (i - 1) * size, p + i * size) <= 0) i++;
    if (i < n) qsort(base, n, size, cmp);
}

static int st_cmp_name(const void *a, const void *b)
{
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

/* Offset order, as the reference: (begin, end); names break ties so the
 * reported error never depends on qsort's whims. */
static int st_cmp_offset(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The entries, sorted by name (f->e), have distinct names, and in offset
 * order (o: f->n entries) tile [0, data_len) exactly. */
static int st_check_entries(const st_src *src, optim_st_file *f, st_entry **o, uint64_t data_len,
                            optim_error *err)
{
    const char *L = src->label;
    st_sort(f->e, f->n, sizeof *f->e, st_cmp_name);
    for (size_t i = 1; i < f->n; i++)
        if (strcmp(f->e[i - 1].name, f->e[i].name) == 0) {
            st_quote q;
            return optim__err(err, OPTIM_EFORMAT, "%s: tensor name %s appears more than once", L,
                              st_q(&q, f->e[i].name));
        }

    /* The tensors, in offset order, must tile [0, data_len) exactly. */
    for (size_t i = 0; i < f->n; i++) o[i] = &f->e[i];
    st_sort(o, f->n, sizeof *o, st_cmp_offset);
    uint64_t cursor = 0;
    for (size_t i = 0; i < f->n; i++) {
        st_quote q1, q2;
        if (o[i]->begin < cursor)
            return optim__err(
                err, OPTIM_EFORMAT,
                "%s: tensor %s data_offsets [%llu, %llu] overlap tensor %s [%llu, %llu]", L,
                st_q(&q1, o[i]->name), (ull)o[i]->begin, (ull)o[i]->end, st_q(&q2, o[i - 1]->name),
                (ull)o[i - 1]->begin, (ull)o[i - 1]->end);
        if (o[i]->begin > cursor)
            return optim__err(err, OPTIM_EFORMAT,
                              "%s: data buffer bytes [%llu, %llu) belong to no tensor (a hole "
                              "before tensor %s)",
                              L, (ull)cursor, (ull)o[i]->begin, st_q(&q1, o[i]->name));
        cursor = o[i]->end;
    }
    if (cursor != data_len)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: data buffer is %llu bytes but the tensors cover only [0, %llu): "
                          "%llu trailing bytes",
                          L, (ull)data_len, (ull)cursor, (ull)(data_len - cursor));
    return OPTIM_OK;
}

void optim_st_free(optim_st_file *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) free(f->e[i].name);
    free(f->e);
    free(f->arena);
    free(f);
}

/* ---- The usual header, without cJSON ----------------------------------- */

/* Headers as writers print them: {"NAME":{"dtype":"F32","shape":[2,3],
 * "data_offsets":[0,24]},...}, names and strings without escapes, integers
 * in plain digits, JSON whitespace anywhere, "__metadata__" an object of
 * such strings. Read here in one pass (cJSON's tree, a dozen heap blocks
 * per tensor, was 40% of reading a 100k-tensor file); anything else, and
 * any entry that fails a check, goes to st_json_entries, which reads the
 * same entries or reports the error. */
typedef struct st_lex {
    const char *p, *end;
} st_lex;

static int st_tok(st_lex *x, char c)
{
    while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' || *x->p == '\n' || *x->p == '\r'))
        x->p++;
    if (x->p == x->end || *x->p != c) return 0;
    x->p++;
    return 1;
}

/* A string without escapes: its bytes [*s, *s + *len). */
static int st_plain_str(st_lex *x, const char **s, size_t *len)
{
    if (!st_tok(x, '"')) return 0;
    const char *b = x->p;
    while (x->p < x->end && *x->p != '"' && *x->p != '\\') x->p++;
    if (x->p == x->end || *x->p != '"') return 0;
    *s = b;
    *len = (size_t)(x->p++ - b);
    return 1;
}

/* An integer below 2^53 in plain digits, followed by ',' or ']'. */
static int st_plain_uint(st_lex *x, uint64_t *v)
{
    st_tok(x, '\0'); /* whitespace */
    const char *b = x->p;
    for (*v = 0; x->p < x->end && *x->p >= '0' && *x->p <= '9' && x->p - b < 16; x->p++)
        *v = *v * 10 + (uint64_t)(*x->p - '0');
    return x->p > b && (x->p - b == 1 || *b != '0') && *v < ST_MAX_EXACT && x->p < x->end &&
        (*x->p == ',' || *x->p == ']' || *x->p == ' ' || *x->p == '\n' || *x->p == '\r' ||
         *x->p == '\t');
}

/* [a, b, ...]: up to max integers into v; their count in *n. */
static int st_plain_uints(st_lex *x, uint64_t *v, int max, int *n)
{
    *n = 0;
    if (!st_tok(x, '[')) return 0;
    const char *p = x->p;
    if (st_tok(x, ']')) return 1;
    x->p = p;
    do
        if (*n == max || !st_plain_uint(x, &v[(*n)++])) return 0;
    while (st_tok(x, ','));
    return st_tok(x, ']');
}

static int st_plain_field(st_lex *x, st_entry *e, unsigned *seen)
{
    const char *k;
    size_t len;
    uint64_t v[OPTIM_MAX_RANK];
    int n;
    if (!st_plain_str(x, &k, &len) || !st_tok(x, ':')) return 0;
    if (len == 5 && memcmp(k, "dtype", 5) == 0 && !(*seen & 1)) {
        const char *d;
        char name[8] = {0};
        if (!st_plain_str(x, &d, &len) || len >= sizeof name) return 0;
        memcpy(name, d, len);
        e->dtype = st_dtype_by_name(name);
        *seen |= 1;
        return e->dtype != OPTIM_DTYPE_INVALID;
    }
    int shape = len == 5 && memcmp(k, "shape", 5) == 0 && !(*seen & 2);
    if (!shape && !(len == 12 && memcmp(k, "data_offsets", 12) == 0 && !(*seen & 4))) return 0;
    if (!st_plain_uints(x, v, shape ? OPTIM_MAX_RANK : 2, &n) || (!shape && n != 2)) return 0;
    for (int i = 0; shape && i < n; i++) e->shape[i] = (int64_t)v[i];
    if (shape) e->rank = n;
    else e->begin = v[0], e->end = v[1];
    *seen |= shape ? 2 : 4;
    return 1;
}

/* One value of the header object: a tensor entry (appended to f->e, *cap
 * its room) or "__metadata__". */
static int st_plain_value(const st_src *src, st_lex *x, const char *key, size_t len,
                          uint64_t data_len, optim_st_file *f, size_t *cap, int *seen_md)
{
    if (!st_tok(x, '{')) return 0;
    if (len == sizeof ST_METADATA - 1 && memcmp(key, ST_METADATA, len) == 0) {
        const char *s;
        if (st_tok(x, '}')) return !(*seen_md)++;
        do
            if (!st_plain_str(x, &s, &len) || !st_tok(x, ':') || !st_plain_str(x, &s, &len))
                return 0;
        while (st_tok(x, ','));
        return st_tok(x, '}') && !(*seen_md)++;
    }
    if (f->n == *cap) {
        st_entry *e = realloc(f->e, (*cap = *cap ? 2 * *cap : 64) * sizeof *e);
        if (!e) return 0;
        f->e = e;
    }
    st_entry *e = memset(&f->e[f->n], 0, sizeof *e);
    unsigned seen = 0;
    do
        if (!st_plain_field(x, e, &seen)) return 0;
    while (st_tok(x, ','));
    int64_t nbytes;
    if (!st_tok(x, '}') || seen != 7 || !(e->name = malloc(len + 1))) return 0;
    memcpy(e->name, key, len);
    e->name[len] = '\0';
    f->n++;
    return st_entry_nbytes(src, e, &nbytes, NULL) == 0 &&
        st_entry_span(src, e, data_len, nbytes, NULL) == 0;
}

/* 0 with f->e filled if hdr[0..n) is a header of the usual form whose
 * entries pass their checks; -1 with f as it was otherwise. */
static int st_plain_entries(const st_src *src, const char *hdr, size_t n, uint64_t data_len,
                            optim_st_file *f)
{
    st_lex x = {hdr, hdr + n};
    size_t cap = 0;
    int seen_md = 0, ok = st_tok(&x, '{');
    const char *key;
    size_t len;
    if (ok && !st_tok(&x, '}')) {
        do
            ok = st_plain_str(&x, &key, &len) && st_tok(&x, ':') &&
                st_plain_value(src, &x, key, len, data_len, f, &cap, &seen_md);
        while (ok && st_tok(&x, ','));
        ok = ok && st_tok(&x, '}');
    }
    st_tok(&x, '\0');
    if (ok && x.p == x.end) return 0;
    for (size_t i = 0; i < f->n; i++) free(f->e[i].name);
    free(f->e);
    f->e = NULL;
    f->n = 0;
    return -1;
}

/* The entries of header hdr[0..n) into f->e, in the header's order, by
 * cJSON: any valid JSON, every error with its message. */
static int st_json_entries(const st_src *src, const char *hdr, size_t n, uint64_t data_len,
                           optim_st_file *f, optim_error *err)
{
    const char *L = src->label;
    int rc;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, n, &end, 0);
    if (!root) {
        size_t at = (end && end >= hdr && end <= hdr + n) ? (size_t)(end - hdr) : 0;
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: header is not valid JSON (error near header offset %zu of %zu)", L,
                          at, n);
    }
    for (const char *p = end; p < hdr + n; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            return optim__err(err, OPTIM_EFORMAT,
                              "%s: header has data after the JSON object at header offset %zu "
                              "(only whitespace may pad it)",
                              L, (size_t)(p - hdr));
        }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return optim__err(err, OPTIM_EFORMAT, "%s: header is not a JSON object", L);
    }

    size_t count = 0;
    int seen_md = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, root)
    {
        if (strcmp(c->string, ST_METADATA) == 0) {
            if (seen_md++) {
                cJSON_Delete(root);
                return optim__err(err, OPTIM_EFORMAT, "%s: \"__metadata__\" appears twice", L);
            }
            if ((rc = st_parse_metadata(src, c, err))) {
                cJSON_Delete(root);
                return rc;
            }
        } else count++;
    }
    f->e = optim__calloc(count, sizeof *f->e);
    if (!f->e) {
        cJSON_Delete(root);
        return optim__err(err, OPTIM_ENOMEM, "%s: out of memory for %zu tensor entries", L, count);
    }
    cJSON_ArrayForEach(c, root)
    {
        if (strcmp(c->string, ST_METADATA) == 0) continue;
        st_entry *e = &f->e[f->n];
        if (!(e->name = optim__strdup(c->string))) {
            cJSON_Delete(root);
            return optim__err(err, OPTIM_ENOMEM, "%s: out of memory", L);
        }
        f->n++;
        if ((rc = st_parse_entry(src, c, data_len, e, err))) {
            cJSON_Delete(root);
            return rc;
        }
    }
    cJSON_Delete(root);
    return OPTIM_OK;
}

/* Parses and validates header bytes hdr[0..n) (NUL-terminated at n) against a
 * data buffer of data_len bytes. Fills f->e (sorted by name) and *order
 * (entries sorted by offset; the caller frees it). */
static int st_parse_header(const st_src *src, const char *hdr, size_t n, uint64_t data_len,
                           optim_st_file *f, st_entry ***order, optim_error *err)
{
    const char *L = src->label;
    int rc;
    if ((rc = st_scan_header(src, (const unsigned char *)hdr, n, err))) return rc;
    if (hdr[0] != '{')
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: header must be a JSON object starting with '{', found byte 0x%02x "
                          "('%c')",
                          L, (unsigned char)hdr[0],
                          (unsigned char)hdr[0] >= 0x20 && (unsigned char)hdr[0] < 0x7F ? hdr[0]
                                                                                        : '?');
    if ((src->json_only || st_plain_entries(src, hdr, n, data_len, f) != 0) &&
        (rc = st_json_entries(src, hdr, n, data_len, f, err)))
        return rc;
    if (!(*order = optim__malloc((f->n ? f->n : 1) * sizeof **order)))
        return optim__err(err, OPTIM_ENOMEM, "%s: out of memory for %zu tensor entries", L, f->n);

    return st_check_entries(src, f, *order, data_len, err);
}

static int st_load(st_src *src, optim_st_file **out, optim_error *err)
{
    const char *L = src->label;
    unsigned char nb[8];
    char *hdr = NULL;
    st_entry **order = NULL;
    optim_st_file *f = NULL;
    int rc;

    if (src->size < 8)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: %llu bytes long, too short for the 8-byte header size", L,
                          (ull)src->size);
    if ((rc = st_src_read(src, nb, 8, err))) return rc;
    uint64_t n = st_le64(nb);
    if (n == 0)
        return optim__err(err, OPTIM_EFORMAT, "%s: header size is 0, expected a JSON object", L);
    if (n > OPTIM_ST_MAX_HEADER)
        return optim__err(err, OPTIM_EFORMAT, "%s: header size %llu is above the limit of %u bytes",
                          L, (ull)n, OPTIM_ST_MAX_HEADER);
    if (n > src->size - 8)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: header size %llu is larger than the %llu bytes that follow it", L,
                          (ull)n, (ull)(src->size - 8));
    uint64_t data_len = src->size - 8 - n;

    if (!(hdr = optim__malloc((size_t)n + 1)) || !(f = optim__calloc(1, sizeof *f))) {
        rc = optim__err(err, OPTIM_ENOMEM, "%s: out of memory for a %llu-byte header", L, (ull)n);
        goto fail;
    }
    if ((rc = st_src_read(src, hdr, n, err))) goto fail;
    hdr[n] = '\0';
    if ((rc = st_parse_header(src, hdr, (size_t)n, data_len, f, &order, err))) goto fail;
    free(hdr);
    hdr = NULL;

    /* One arena; each tensor starts on an 8-byte boundary. */
    uint64_t total = 0;
    for (size_t i = 0; i < f->n; i++)
        total = ((total + 7) & ~(uint64_t)7) + (f->e[i].end - f->e[i].begin);
    if (total > SIZE_MAX) {
        rc = optim__err(err, OPTIM_ENOMEM, "%s: %llu bytes of tensor data do not fit in memory", L,
                        (ull)total);
        goto fail;
    }
    if (!(f->arena = optim__malloc((size_t)total))) {
        rc = optim__err(err, OPTIM_ENOMEM, "%s: out of memory for %llu bytes of tensor data", L,
                        (ull)total);
        goto fail;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < f->n; i++) {
        off = (off + 7) & ~(uint64_t)7;
        f->e[i].data = f->arena + off;
        off += f->e[i].end - f->e[i].begin;
    }
    /* The data buffer is exactly the tensors in offset order: read it once. */
    for (size_t i = 0; i < f->n; i++) {
        st_entry *e = order[i];
        if ((rc = st_src_read(src, e->data, e->end - e->begin, err))) goto fail;
        if (ST_HOST_BIG_ENDIAN)
            st_swap(e->data, (size_t)(e->end - e->begin), optim_dtype_size(e->dtype));
    }
    free(order);
    *out = f;
    return OPTIM_OK;

fail:
    free(hdr);
    free(order);
    optim_st_free(f);
    return rc;
}

int optim_st_read(const char *path, optim_st_file **out, optim_error *err)
{
    if (out) *out = NULL;
    if (!path || !out)
        return optim__err(err, OPTIM_EINVAL, "optim_st_read: %s is NULL", path ? "out" : "path");
    char sb[128];
    int64_t size;
    int fd = optim_file_open_regular(path, &size);
    if (fd < 0 && (errno == EISDIR || errno == EINVAL))
        return optim__err(err, OPTIM_EIO, "%s: not a regular file", path);
    if (fd < 0)
        return optim__err(err, OPTIM_EIO, "%s: cannot open: %s", path,
                          st_sys(errno, sb, sizeof sb));
    st_src src = {path, fd, NULL, (uint64_t)size, 0, optim__malloc(ST_READ_BUF), 0, 0, 0};
    int rc = st_load(&src, out, err);
    free(src.buf);
    close(fd);
    return rc;
}

int optim_st_parse(const void *buf, size_t len, optim_st_file **out, optim_error *err)
{
    if (out) *out = NULL;
    if ((!buf && len) || !out)
        return optim__err(err, OPTIM_EINVAL, "optim_st_parse: %s is NULL", out ? "buf" : "out");
    st_src src = {ST_MEM_LABEL, -1, buf, (uint64_t)len, 0, NULL, 0, 0, 0};
    return st_load(&src, out, err);
}

int optim__st_parse_json(const void *buf, size_t len, optim_st_file **out, optim_error *err)
{
    if (out) *out = NULL;
    if ((!buf && len) || !out) return optim__err(err, OPTIM_EINVAL, "optim__st_parse_json: NULL");
    st_src src = {ST_MEM_LABEL, -1, buf, (uint64_t)len, 0, NULL, 0, 0, 1};
    return st_load(&src, out, err);
}

size_t optim_st_count(const optim_st_file *f) { return f ? f->n : 0; }

const char *optim_st_name(const optim_st_file *f, size_t i)
{
    return (f && i < f->n) ? f->e[i].name : NULL;
}

int optim_st_get(const optim_st_file *f, const char *name, optim_tensor *out)
{
    if (!f || !name || !out) return OPTIM_EINVAL;
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, f->e[mid].name);
        if (c == 0) {
            const st_entry *e = &f->e[mid];
            *out = optim_tensor_make(e->dtype, e->data, e->rank, e->shape);
            return OPTIM_OK;
        }
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return OPTIM_ENOTFOUND;
}

/* ---- Writing ------------------------------------------------------------ */

typedef struct st_wentry {
    char *name;
    optim_dtype dtype;
    int32_t rank;
    int64_t shape[OPTIM_MAX_RANK];
    size_t nbytes;
    unsigned char *data; /* little-endian copy */
} st_wentry;

/* Names and data copies are carved from blocks of ST_BLOCK bytes, a large
 * tensor from a block of its own (a heap block per name and per tensor
 * was a fifth of replay's saving 300k small tensors). */
#define ST_BLOCK ((size_t)1 << 20)
typedef struct st_block {
    struct st_block *next;
    size_t used, cap;
    max_align_t mem[]; /* cap bytes */
} st_block;

struct optim_st_writer {
    st_wentry *e;
    size_t n, cap;
    st_block *blocks; /* the one being filled first */
    struct st_slot {
        uint64_t hash; /* of the name: most probes compare this alone */
        size_t at; /* entry index + 1, 0 = empty */
    } * slot; /* open-addressing name index */
    size_t nslot; /* power of two, at least 2 * n */
};

static uint64_t st_hash(const char *s)
{
    const uint64_t h = optim__fnv1a_str(s);
    return h ^ (h >> 32); /* the table indexes by the low bits: fold the high ones in */
}

/* Slot holding `name`, or the empty slot where it would go. */
static size_t st_find(const optim_st_writer *w, const char *name, uint64_t h)
{
    size_t mask = w->nslot - 1, i = (size_t)h & mask;
    while (w->slot[i].at &&
           (w->slot[i].hash != h || strcmp(w->e[w->slot[i].at - 1].name, name) != 0))
        i = (i + 1) & mask;
    return i;
}

int optim_st_writer_create(optim_st_writer **out, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_st_writer_create: out is NULL");
    *out = NULL;
    optim_st_writer *w = optim__calloc(1, sizeof *w);
    if (w) {
        w->nslot = 16;
        w->slot = optim__calloc(w->nslot, sizeof *w->slot);
    }
    if (!w || !w->slot) {
        free(w);
        return optim__err(err, OPTIM_ENOMEM, "optim_st_writer_create: out of memory");
    }
    *out = w;
    return OPTIM_OK;
}

void optim_st_writer_destroy(optim_st_writer *w)
{
    if (!w) return;
    for (st_block *b = w->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(w->e);
    free(w->slot);
    free(w);
}

/* Makes room for one more entry (array and index) without changing contents
 * visible to callers; on failure the writer is as before. */
static int st_reserve(optim_st_writer *w)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        st_wentry *e = realloc(w->e, cap * sizeof *e);
        if (!e) return -1;
        w->e = e;
        w->cap = cap;
    }
    if (2 * (w->n + 1) > w->nslot) {
        size_t nslot = 2 * w->nslot;
        struct st_slot *slot = optim__calloc(nslot, sizeof *slot);
        if (!slot) return -1;
        for (size_t i = 0; i < w->nslot; i++) {
            size_t at = (size_t)w->slot[i].hash & (nslot - 1);
            while (w->slot[i].at && slot[at].at) at = (at + 1) & (nslot - 1);
            if (w->slot[i].at) slot[at] = w->slot[i];
        }
        free(w->slot);
        w->slot = slot;
        w->nslot = nslot;
    }
    return 0;
}

/* n bytes on an 8-byte boundary from the writer's blocks, NULL if out of
 * memory (the writer is unchanged then, but for an empty block). */
static void *st_take(optim_st_writer *w, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    st_block *b = w->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ST_BLOCK / 4 ? n : ST_BLOCK;
        if (cap > SIZE_MAX - sizeof *b || !(b = optim__malloc(sizeof *b + cap))) return NULL;
        b->used = 0;
        b->cap = cap;
        if (cap == ST_BLOCK || !w->blocks) {
            b->next = w->blocks;
            w->blocks = b;
        } else { /* keep filling the current block */
            b->next = w->blocks->next;
            w->blocks->next = b;
        }
    }
    void *p = (unsigned char *)b->mem + b->used;
    b->used += n;
    return p;
}

static const char *st_what(char *buf, size_t n, const char *name)
{
    st_quote q;
    snprintf(buf, n, "safetensors: tensor %s", st_q(&q, name));
    return buf;
}
#define ST_WHAT() st_what(what, sizeof what, name)

int optim_st_writer_add(optim_st_writer *w, const char *name, const optim_tensor *t,
                        optim_error *err)
{
    if (!w || !name)
        return optim__err(err, OPTIM_EINVAL, "optim_st_writer_add: %s is NULL",
                          w ? "name" : "writer");
    st_quote q;
    if (strcmp(name, ST_METADATA) == 0)
        return optim__err(
            err, OPTIM_EINVAL,
            "safetensors: tensor name \"__metadata__\" is reserved for file metadata");
    if (!st_utf8_valid(name))
        return optim__err(err, OPTIM_EINVAL, "safetensors: tensor name %s is not valid UTF-8",
                          st_q(&q, name));
    char what[sizeof q.s + 32];
    /* The name is quoted for messages only (replay adds 300k tensors for 100k variables). */
    if (optim__tensor_check(t, ST_ALL_DTYPES, "", NULL) != OPTIM_OK)
        return optim__tensor_check(t, ST_ALL_DTYPES, ST_WHAT(), err);
    char ss[200];
    for (int32_t i = 0; i < t->rank; i++)
        if ((uint64_t)t->shape[i] >= ST_MAX_EXACT)
            return optim__err(err, OPTIM_ESHAPE,
                              "%s: shape %s has a dim of 2^53 or more, which JSON readers cannot "
                              "hold exactly",
                              ST_WHAT(), optim_shape_str(t->rank, t->shape, ss, sizeof ss));
    int64_t nbytes;
    if (optim__mul_overflow_i64(optim_tensor_numel(t), (int64_t)optim_dtype_size(t->dtype),
                                &nbytes) ||
        (uint64_t)nbytes > SIZE_MAX)
        return optim__err(err, OPTIM_ESHAPE, "%s: shape %s of %s is too many bytes", ST_WHAT(),
                          optim_shape_str(t->rank, t->shape, ss, sizeof ss),
                          st_dtype_name(t->dtype));
    const uint64_t h = st_hash(name);
    size_t at = st_find(w, name, h), nslot = w->nslot;
    if (w->slot[at].at) return optim__err(err, OPTIM_EINVAL, "%s was already added", ST_WHAT());

    if (st_reserve(w) != 0) return optim__err(err, OPTIM_ENOMEM, "%s: out of memory", ST_WHAT());
    if (w->nslot != nslot) at = st_find(w, name, h); /* the index grew */
    st_wentry e;
    memset(&e, 0, sizeof e);
    size_t len = strlen(name) + 1;
    e.data = st_take(w, (size_t)nbytes);
    e.name = e.data ? st_take(w, len) : NULL;
    if (!e.name)
        return optim__err(err, OPTIM_ENOMEM, "%s: out of memory for %lld bytes", ST_WHAT(),
                          (long long)nbytes);
    memcpy(e.name, name, len);
    e.dtype = t->dtype;
    e.rank = t->rank;
    for (int32_t i = 0; i < t->rank; i++) e.shape[i] = t->shape[i];
    e.nbytes = (size_t)nbytes;
    if (nbytes) memcpy(e.data, t->data, (size_t)nbytes);
    if (ST_HOST_BIG_ENDIAN) st_swap(e.data, e.nbytes, optim_dtype_size(e.dtype));
    w->e[w->n] = e;
    w->slot[at] = (struct st_slot){h, w->n + 1};
    w->n++;
    return OPTIM_OK;
}

/* Growable byte string for the header. */
typedef struct st_buf {
    char *p;
    size_t len, cap;
    int oom;
} st_buf;

static void st_put(st_buf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void st_puts(st_buf *b, const char *s) { st_put(b, s, strlen(s)); }

/* Decimal digits by hand: snprintf was 12% of saving 300k small tensors. */
static void st_put_u64(st_buf *b, uint64_t v)
{
    char s[24];
    size_t i = sizeof s;
    do s[--i] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    st_put(b, s + i, sizeof s - i);
}

/* A JSON string literal for a (valid UTF-8) name. */
static void st_put_json_str(st_buf *b, const char *s)
{
    st_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            st_put(b, esc, 2);
        } else if (c < 0x20) {
            st_put(b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", c));
        } else st_put(b, (const char *)&c, 1);
    }
    st_put(b, "\"", 1);
}

static int st_cmp_wname(const void *a, const void *b)
{
    return strcmp((*(const st_wentry *const *)a)->name, (*(const st_wentry *const *)b)->name);
}

/* The end of the run of names in order that starts at p[lo]. */
static size_t st_run_end(const st_wentry **p, size_t lo, size_t n)
{
    while (lo + 1 < n && strcmp(p[lo]->name, p[lo + 1]->name) <= 0) lo++;
    return lo + 1;
}

/* Sorts p[0..n) by name, merging the runs already in order pairwise until
 * one is left: O(n log runs). Tensors are often added in a few sorted runs
 * (replay: the variables, then each kind of slot), where qsort compared
 * 300k names 18 times each. qsort if there is no memory for the merge. */
static void st_sort_wentries(const st_wentry **p, size_t n)
{
    const st_wentry **tmp = st_run_end(p, 0, n) < n ? optim__malloc(n * sizeof *tmp) : NULL;
    if (!tmp) {
        st_sort(p, n, sizeof *p, st_cmp_wname);
        return;
    }
    for (size_t runs = 2; runs > 1;) {
        runs = 0;
        for (size_t lo = 0, k = 0; lo < n; runs++) {
            size_t mid = st_run_end(p, lo, n), hi = mid < n ? st_run_end(p, mid, n) : n, j = mid;
            while (lo < mid && j < hi)
                tmp[k++] = strcmp(p[j]->name, p[lo]->name) < 0 ? p[j++] : p[lo++];
            while (lo < mid) tmp[k++] = p[lo++];
            while (j < hi) tmp[k++] = p[j++];
            lo = hi;
        }
        memcpy(p, tmp, n * sizeof *p);
    }
    free(tmp);
}

/* Output gathered into ST_WRITE_BUF-byte writes (replay saves 300k tensors of
 * 4 bytes for 100k variables); without a buffer, or for large pieces, direct. */
#define ST_WRITE_BUF ((size_t)1 << 20)
typedef struct st_out {
    int fd;
    unsigned char *buf;
    size_t len;
} st_out;

static int st_out_flush(st_out *o)
{
    int rc = o->len ? optim__write_all(o->fd, o->buf, o->len) : 0;
    o->len = 0;
    return rc;
}

static int st_out_put(st_out *o, const void *p, size_t n)
{
    if (!o->buf || n >= ST_WRITE_BUF)
        return st_out_flush(o) || optim__write_all(o->fd, p, n) ? -1 : 0;
    if (o->len + n > ST_WRITE_BUF && st_out_flush(o) != 0) return -1;
    memcpy(o->buf + o->len, p, n);
    o->len += n;
    return 0;
}

/* The header, deterministic: {"name":{"dtype":..,"shape":[..],"data_offsets":[b,e]},...},
 * padded with spaces to a multiple of 8; *data_len is the data size. */
static int st_build_header(const st_wentry **sorted, size_t n, const char *path, st_buf *h,
                           uint64_t *data_len, optim_error *err)
{
    uint64_t off = 0;
    st_puts(h, "{");
    for (size_t i = 0; i < n; i++) {
        const st_wentry *e = sorted[i];
        if (i) st_puts(h, ",");
        st_put_json_str(h, e->name);
        st_puts(h, ":{\"dtype\":\"");
        st_puts(h, st_dtype_name(e->dtype));
        st_puts(h, "\",\"shape\":[");
        for (int32_t k = 0; k < e->rank; k++) {
            if (k) st_puts(h, ",");
            st_put_u64(h, (uint64_t)e->shape[k]);
        }
        st_puts(h, "],\"data_offsets\":[");
        st_put_u64(h, off);
        st_puts(h, ",");
        off += e->nbytes;
        st_put_u64(h, off);
        st_puts(h, "]}");
    }
    st_puts(h, "}");
    while (!h->oom && h->len % 8) st_puts(h, " ");
    *data_len = off;
    if (h->oom) return optim__err(err, OPTIM_ENOMEM, "%s: out of memory for the header", path);
    if (h->len > OPTIM_ST_MAX_HEADER)
        return optim__err(err, OPTIM_EINVAL, "%s: header would be %zu bytes, above the limit of %u",
                          path, h->len, OPTIM_ST_MAX_HEADER);
    if (off >= ST_MAX_EXACT)
        return optim__err(err, OPTIM_EINVAL,
                          "%s: %llu bytes of tensor data, 2^53 or more, which JSON offsets cannot "
                          "hold exactly",
                          path, (ull)off);
    return OPTIM_OK;
}

/* An OPTIM_EIO for a failed step of the atomic write: what, then errno's reason. */
static int st_save_err(optim_error *err, const char *path, const char *what)
{
    char sb[128];
    if (errno == 0) return optim__err(err, OPTIM_EIO, "%s: %s", path, what);
    return optim__err(err, OPTIM_EIO, "%s: %s: %s", path, what, st_sys(errno, sb, sizeof sb));
}

int optim_st_writer_save(optim_st_writer *w, const char *path, optim_error *err)
{
    if (!w || !path)
        return optim__err(err, OPTIM_EINVAL, "optim_st_writer_save: %s is NULL",
                          w ? "path" : "writer");
    if (!path[0]) return optim__err(err, OPTIM_EINVAL, "optim_st_writer_save: path is empty");
    st_buf h = {0};
    uint64_t data_len;
    const st_wentry **sorted = optim__malloc(w->n * sizeof *sorted);
    if (!sorted) return optim__err(err, OPTIM_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < w->n; i++) sorted[i] = &w->e[i];
    st_sort_wentries(sorted, w->n);
    int rc = st_build_header(sorted, w->n, path, &h, &data_len, err);
    unsigned char nb[8];
    for (int i = 0; i < 8; i++) nb[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    optim__atomic_file f;
    const char *what;
    if (!rc && optim__atomic_open(&f, path, &what) != 0) rc = st_save_err(err, path, what);
    if (!rc) {
        st_out o = {f.fd, optim__malloc(ST_WRITE_BUF), 0};
        int ok = st_out_put(&o, nb, 8) == 0 && st_out_put(&o, h.p, h.len) == 0;
        for (size_t i = 0; ok && i < w->n; i++)
            ok = st_out_put(&o, sorted[i]->data, sorted[i]->nbytes) == 0;
        ok = ok && st_out_flush(&o) == 0;
        free(o.buf);
        if (!ok) {
            rc = st_save_err(err, path, "cannot write the temporary file");
            optim__atomic_abort(&f);
        } else if (optim__atomic_commit(&f, &what) != 0) {
            rc = st_save_err(err, path, what);
        }
    }
    free(h.p);
    free(sorted);
    return rc;
}
