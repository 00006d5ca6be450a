/*
 * .npy reader (optim/npy.h): the header dict, one array, the file object
 * and its accessors. The zip of an .npz is npz.c's; conversion is
 * npy_convert.c's.
 *
 * The header is parsed as the small subset of Python literals that
 * numpy.lib.format writes: a dict of exactly 'descr' (a string),
 * 'fortran_order' (True/False) and 'shape' (a tuple of integers, Python 2's
 * trailing L allowed), quotes ' or ", then spaces and a newline.
 */
#define _POSIX_C_SOURCE 200809L
#include "io/npy_impl.h"

#include "core/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define NPY_HOST_BIG 1
#else
#define NPY_HOST_BIG 0
#endif

typedef struct cursor {
    const char *p, *end;
} cursor;

typedef struct header {
    char descr[32];
    int fortran, have; /* have: bit per key seen (1 descr, 2 fortran_order, 4 shape) */
    int32_t rank;
    int64_t shape[OPTIM_MAX_RANK];
} header;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int eat(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) return c->p++, 1;
    return 0;
}

/* A quoted string into out (n bytes); 0 if there is none or it is too long. */
static int string(cursor *c, char *out, size_t n)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char q = *c->p++;
    size_t k = 0;
    while (c->p < c->end && *c->p != q && *c->p != '\\' && k + 1 < n) out[k++] = *c->p++;
    if (c->p >= c->end || *c->p != q) return 0;
    c->p++;
    out[k] = '\0';
    return 1;
}

/* A non-negative decimal below 2^62 (Python 2's trailing L allowed). */
static int integer(cursor *c, int64_t *v)
{
    skip_ws(c);
    int64_t x = 0;
    const char *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (x > ((int64_t)1 << 62) / 10) return 0;
        x = x * 10 + (*c->p++ - '0');
    }
    if (c->p == start) return 0;
    if (c->p < c->end && *c->p == 'L') c->p++;
    *v = x;
    return 1;
}

static int shape(cursor *c, header *h, const char *what, optim_error *err)
{
    if (!eat(c, '(')) return optim__err(err, OPTIM_EFORMAT, "%s: 'shape' is not a tuple", what);
    h->rank = 0;
    while (!eat(c, ')')) {
        int64_t v;
        if (h->rank == OPTIM_MAX_RANK)
            return optim__err(err, OPTIM_ENOTSUP, "%s: more than %d dimensions", what,
                              OPTIM_MAX_RANK);
        if (!integer(c, &v))
            return optim__err(err, OPTIM_EFORMAT,
                              "%s: 'shape' holds something other than a non-negative integer",
                              what);
        h->shape[h->rank++] = v;
        if (!eat(c, ',')) {
            if (eat(c, ')')) break;
            return optim__err(err, OPTIM_EFORMAT, "%s: 'shape' tuple is malformed", what);
        }
    }
    return OPTIM_OK;
}

static int value(cursor *c, const char *key, header *h, const char *what, optim_error *err)
{
    skip_ws(c);
    if (strcmp(key, "descr") == 0 && !(h->have & 1)) {
        h->have |= 1;
        if (c->p < c->end && *c->p == '[')
            return optim__err(err, OPTIM_ENOTSUP, "%s: structured dtype (descr is a list)", what);
        if (!string(c, h->descr, sizeof h->descr))
            return optim__err(err, OPTIM_EFORMAT, "%s: 'descr' is not a short string", what);
        return OPTIM_OK;
    }
    if (strcmp(key, "fortran_order") == 0 && !(h->have & 2)) {
        h->have |= 2;
        size_t left = (size_t)(c->end - c->p);
        if (left >= 4 && memcmp(c->p, "True", 4) == 0) return h->fortran = 1, c->p += 4, OPTIM_OK;
        if (left >= 5 && memcmp(c->p, "False", 5) == 0) return c->p += 5, OPTIM_OK;
        return optim__err(err, OPTIM_EFORMAT, "%s: 'fortran_order' is not True or False", what);
    }
    if (strcmp(key, "shape") == 0 && !(h->have & 4)) {
        h->have |= 4;
        return shape(c, h, what, err);
    }
    return optim__err(err, OPTIM_EFORMAT, "%s: header key '%s' unexpected or repeated", what, key);
}

static int parse_dict(cursor *c, header *h, const char *what, optim_error *err)
{
    if (!eat(c, '{')) return optim__err(err, OPTIM_EFORMAT, "%s: header is not a dict", what);
    while (!eat(c, '}')) {
        char key[32];
        int rc;
        if (!string(c, key, sizeof key) || !eat(c, ':'))
            return optim__err(err, OPTIM_EFORMAT, "%s: header dict is malformed", what);
        if ((rc = value(c, key, h, what, err))) return rc;
        if (!eat(c, ',') && !(skip_ws(c), c->p < c->end && *c->p == '}'))
            return optim__err(err, OPTIM_EFORMAT, "%s: header dict is malformed", what);
    }
    skip_ws(c);
    if (c->p != c->end)
        return optim__err(err, OPTIM_EFORMAT, "%s: bytes after the header dict", what);
    if (h->have != 7)
        return optim__err(err, OPTIM_EFORMAT, "%s: header lacks '%s'", what,
                          !(h->have & 1)       ? "descr"
                              : !(h->have & 2) ? "fortran_order"
                                               : "shape");
    return OPTIM_OK;
}

static const struct {
    char code[3];
    optim_npy_type type;
} TYPES[] = {{"b1", OPTIM_NPY_BOOL}, {"u1", OPTIM_NPY_U8},  {"i1", OPTIM_NPY_I8},
             {"u2", OPTIM_NPY_U16},  {"i2", OPTIM_NPY_I16}, {"u4", OPTIM_NPY_U32},
             {"i4", OPTIM_NPY_I32},  {"u8", OPTIM_NPY_U64}, {"i8", OPTIM_NPY_I64},
             {"f2", OPTIM_NPY_F16},  {"f4", OPTIM_NPY_F32}, {"f8", OPTIM_NPY_F64}};

/* The type of descr and whether its bytes need swapping. */
static int descr_type(const char *descr, optim_npy_type *t, int *swap, const char *what,
                      optim_error *err)
{
    char order = descr[0];
    if ((order == '<' || order == '>' || order == '|' || order == '=') && strlen(descr) == 3)
        for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
            if (strcmp(descr + 1, TYPES[i].code) == 0 &&
                (order != '|' || optim__npy_type_size(TYPES[i].type) == 1)) {
                *t = TYPES[i].type;
                *swap = optim__npy_type_size(*t) > 1 && order != '=' && order != '|' &&
                    (order == '>') != NPY_HOST_BIG;
                return OPTIM_OK;
            }
    return optim__err(err, OPTIM_ENOTSUP,
                      "%s: descr '%s' is not supported (expected a number type: |b1, |u1, |i1, "
                      "<u2 <i2 <u4 <i4 <u8 <i8 <f2 <f4 <f8, or big-endian >)",
                      what, descr);
}

/* The header of p[0 .. len): h, and *data_at, where the elements begin. */
static int parse_header(const unsigned char *p, size_t len, header *h, size_t *data_at,
                        const char *what, optim_error *err)
{
    if (len < 10 || memcmp(p, "\x93NUMPY", 6) != 0)
        return optim__err(err, OPTIM_EFORMAT, "%s: not a .npy array (no \\x93NUMPY magic)", what);
    if (p[6] < 1 || p[6] > 3 || p[7] != 0)
        return optim__err(err, OPTIM_EFORMAT, "%s: .npy version %u.%u, expected 1.0, 2.0 or 3.0",
                          what, p[6], p[7]);
    size_t at = p[6] == 1 ? 10 : 12;
    if (len < at) return optim__err(err, OPTIM_EFORMAT, "%s: truncated header", what);
    size_t hlen = p[6] == 1 ? optim__le16(p + 8) : optim__le32(p + 8);
    if (hlen > len - at)
        return optim__err(err, OPTIM_EFORMAT, "%s: header of %zu bytes, only %zu in the file", what,
                          hlen, len - at);
    memset(h, 0, sizeof *h);
    cursor c = {(const char *)p + at, (const char *)p + at + hlen};
    *data_at = at + hlen;
    return parse_dict(&c, h, what, err);
}

/* numel of h, checked against the bytes there. */
static int numel_of(const header *h, size_t size, size_t bytes, int64_t *numel, const char *what,
                    optim_error *err)
{
    int64_t n = 1;
    int over = 0;
    for (int32_t i = 0; i < h->rank; i++) {
        if (h->shape[i] && n > INT64_MAX / 8 / h->shape[i]) over = 1;
        else n *= h->shape[i];
    }
    if (over || (uint64_t)n * size != bytes)
        return optim__err(
            err, OPTIM_EFORMAT, "%s: the shape needs %s%llu data bytes, the file has %zu", what,
            over ? "more than " : "",
            over ? (unsigned long long)INT64_MAX : (unsigned long long)n * size, bytes);
    *numel = n;
    return OPTIM_OK;
}

static int push(optim_npy *f, optim_npy_array *a, optim_error *err)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 4;
        optim_npy_array *b = realloc(f->a, cap * sizeof *b);
        if (!b) return optim__err(err, OPTIM_ENOMEM, "out of memory for the array list");
        f->a = b, f->cap = cap;
    }
    f->a[f->n++] = *a;
    return OPTIM_OK;
}

static void swap_bytes(unsigned char *p, size_t nbytes, size_t size)
{
    for (size_t i = 0; i + size <= nbytes; i += size)
        for (size_t a = i, b = i + size - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b], p[b] = t;
        }
}

int optim__npy_add(optim_npy *f, const unsigned char *p, size_t len, const char *src,
                   const char *name, optim_error *err)
{
    char what[320];
    snprintf(what, sizeof what, name[0] ? "%s: array '%s'" : "%s%s", src, name);
    header h;
    size_t at = 0;
    optim_npy_array a = {0};
    int swap = 0, rc;
    if ((rc = parse_header(p, len, &h, &at, what, err)) ||
        (rc = descr_type(h.descr, &a.type, &swap, what, err)))
        return rc;
    if (h.fortran)
        return optim__err(err, OPTIM_ENOTSUP,
                          "%s: fortran_order is True (column-major); save "
                          "np.ascontiguousarray(a) instead",
                          what);
    size_t size = optim__npy_type_size(a.type);
    if ((rc = numel_of(&h, size, len - at, &a.numel, what, err))) return rc;
    a.rank = h.rank;
    memcpy(a.shape, h.shape, sizeof a.shape);
    void *data = malloc(len - at + 8);
    char *nm = malloc(strlen(name) + 1);
    if (!data || !nm) {
        free(data), free(nm);
        return optim__err(err, OPTIM_ENOMEM, "%s: out of memory for %zu bytes", what, len - at);
    }
    memcpy(data, p + at, len - at);
    if (swap) swap_bytes(data, len - at, size);
    a.data = data, a.name = strcpy(nm, name);
    if ((rc = push(f, &a, err))) free(data), free(nm);
    return rc;
}

/* ---- the file object ------------------------------------------------------------------ */

int optim_npy_parse(const void *buf, size_t len, const char *source, optim_npy **out,
                    optim_error *err)
{
    if (out) *out = NULL;
    if (!out || (!buf && len))
        return optim__err(err, OPTIM_EINVAL, "optim_npy_parse: %s is NULL", out ? "buf" : "out");
    const char *src = source ? source : "npy buffer";
    const unsigned char *p = buf;
    optim_npy *f = calloc(1, sizeof *f);
    if (!f) return optim__err(err, OPTIM_ENOMEM, "%s: out of memory", src);
    int rc;
    if (len >= 6 && memcmp(p, "\x93NUMPY", 6) == 0) rc = optim__npy_add(f, p, len, src, "", err);
    else if (len >= 4 && p[0] == 'P' && p[1] == 'K' &&
             ((p[2] == 3 && p[3] == 4) || (p[2] == 5 && p[3] == 6)))
        rc = optim__npz_parse(f, p, len, src, err);
    else
        rc = optim__err(err, OPTIM_EFORMAT,
                        "%s: neither a .npy file (magic \\x93NUMPY) nor an .npz (zip, PK\\3\\4)",
                        src);
    if (rc) optim_npy_free(f);
    else *out = f;
    return rc;
}

int optim__read_whole(const char *path, unsigned char **buf, size_t *len, optim_error *err)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return optim__err(err, OPTIM_EIO, "%s: %s", path, strerror(errno));
    size_t cap = 65536, n = 0;
    unsigned char *b = malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n, fp);
        if (n < cap) break;
        unsigned char *nb = cap < SIZE_MAX / 2 ? realloc(b, cap * 2) : NULL;
        if (!nb) free(b);
        b = nb, cap *= 2;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (!b) return optim__err(err, OPTIM_ENOMEM, "%s: out of memory reading it", path);
    if (bad) {
        free(b);
        return optim__err(err, OPTIM_EIO, "%s: read error", path);
    }
    *buf = b, *len = n;
    return OPTIM_OK;
}

int optim_npy_read(const char *path, optim_npy **out, optim_error *err)
{
    if (out) *out = NULL;
    if (!path || !out)
        return optim__err(err, OPTIM_EINVAL, "optim_npy_read: %s is NULL", path ? "out" : "path");
    unsigned char *buf;
    size_t len;
    int rc = optim__read_whole(path, &buf, &len, err);
    if (rc) return rc;
    rc = optim_npy_parse(buf, len, path, out, err);
    free(buf);
    return rc;
}

void optim_npy_free(optim_npy *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) free((void *)f->a[i].name), free((void *)f->a[i].data);
    free(f->a);
    free(f);
}

size_t optim_npy_count(const optim_npy *f) { return f ? f->n : 0; }

const optim_npy_array *optim_npy_at(const optim_npy *f, size_t i)
{
    return f && i < f->n ? &f->a[i] : NULL;
}

const optim_npy_array *optim_npy_find(const optim_npy *f, const char *name)
{
    for (size_t i = 0; f && name && i < f->n; i++)
        if (strcmp(f->a[i].name, name) == 0) return &f->a[i];
    return NULL;
}
