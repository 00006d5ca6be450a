/*
 * The safetensors header parser (io/safetensors_impl.h): a pre-scan for
 * UTF-8 and control characters, then the entries, read in one pass by the
 * hand-written reader of the usual header form or, for anything else, by
 * cJSON with a message for every error, then the offsets sorted as the
 * reference implementation does and checked to tile the data buffer.
 */
#define _POSIX_C_SOURCE 200809L

#include "core/internal.h"
#include "io/safetensors_impl.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Describes a JSON value for a message: "-1", "1.5", "the string \"3\"", ... */
static const char *st_describe(const cJSON *v, char *buf, size_t n)
{
    if (!v) snprintf(buf, n, "missing");
    else if (cJSON_IsNumber(v)) snprintf(buf, n, "%.17g", v->valuedouble);
    else if (cJSON_IsString(v)) {
        st_quote q;
        snprintf(buf, n, "the string %s", optim__st_q(&q, v->valuestring));
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

/* Checks the raw header bytes before cJSON sees them: valid UTF-8, no control
 * characters except JSON whitespace between tokens, none inside strings, and
 * no \u0000 escape (a NUL would silently cut a name short in C). */
static int st_scan_header(const st_src *src, const unsigned char *s, size_t n, optim_error *err)
{
    int in_str = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c >= 0x80) {
            size_t k = optim__st_utf8_seq(s + i, n - i);
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
                          src->label, optim__st_q(&q, tname), st_describe(obj, d, sizeof d));
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
                          optim__st_q(&q, tname));
    if (!cJSON_IsArray(shape))
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: shape is %s, expected an array of non-negative integers",
                          src->label, optim__st_q(&q, tname), st_describe(shape, d, sizeof d));
    *rank = cJSON_GetArraySize(shape);
    if (*rank > OPTIM_MAX_RANK)
        return optim__err(err, OPTIM_ENOTSUP,
                          "%s: tensor %s: rank %d is above optim's maximum of %d", src->label,
                          optim__st_q(&q, tname), *rank, OPTIM_MAX_RANK);
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
                          optim__st_q(&q, tname));
    if (!cJSON_IsArray(offs))
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: data_offsets is %s, expected [begin, end]", L,
                          optim__st_q(&q, tname), st_describe(offs, d, sizeof d));
    int noffs = cJSON_GetArraySize(offs);
    if (noffs != 2)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: data_offsets has %d entries, expected 2 ([begin, end])",
                          L, optim__st_q(&q, tname), noffs);
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetArrayItem(offs, i);
        if (st_json_uint(v, &be[i]) != 0)
            return optim__err(err, OPTIM_EFORMAT,
                              "%s: tensor %s: data_offsets[%d] is %s, expected an integer in "
                              "[0, 2^53)",
                              L, optim__st_q(&q, tname), i, st_describe(v, d, sizeof d));
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
                                  src->label, optim__st_q(&q, tname), key);
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
                          optim__st_q(&q, e->name));
    if (!cJSON_IsString(dt))
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: dtype is %s, expected a string such as \"F32\"", L,
                          optim__st_q(&q, e->name), st_describe(dt, d, sizeof d));
    e->dtype = st_dtype_by_name(dt->valuestring);
    if (e->dtype == OPTIM_DTYPE_INVALID) {
        st_quote qd;
        char names[96];
        return optim__err(
            err, OPTIM_ENOTSUP, "%s: tensor %s: dtype %s is not supported (optim reads %s)", L,
            optim__st_q(&q, e->name), optim__st_q(&qd, dt->valuestring),
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
                              optim__st_q(&q, e->name), k, st_describe(dim, d, sizeof d));
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
            return optim__err(
                err, OPTIM_EFORMAT, "%s: tensor %s: shape %s has more than 2^63-1 elements", L,
                optim__st_q(&q, e->name), optim_shape_str(e->rank, e->shape, ss, sizeof ss));
    if (optim__mul_overflow_i64(numel, (int64_t)optim_dtype_size(e->dtype), &nbytes))
        return optim__err(
            err, OPTIM_EFORMAT, "%s: tensor %s: shape %s of %s needs more than 2^63-1 bytes", L,
            optim__st_q(&q, e->name), optim_shape_str(e->rank, e->shape, ss, sizeof ss),
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
                          optim__st_q(&q, e->name), (ull)e->begin, (ull)e->end);
    if (e->end > data_len)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: data_offsets [%llu, %llu] end past the %llu-byte data "
                          "buffer",
                          L, optim__st_q(&q, e->name), (ull)e->begin, (ull)e->end, (ull)data_len);
    if (e->end - e->begin != (uint64_t)nbytes)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: tensor %s: data_offsets [%llu, %llu] span %llu bytes, but shape %s "
                          "of %s needs %lld bytes",
                          L, optim__st_q(&q, e->name), (ull)e->begin, (ull)e->end,
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
                              src->label, optim__st_q(&q, c->string ? c->string : ""),
                              st_describe(c, d, sizeof d));
        }
    }
    return OPTIM_OK;
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
    optim__st_sort(f->e, f->n, sizeof *f->e, st_cmp_name);
    for (size_t i = 1; i < f->n; i++)
        if (strcmp(f->e[i - 1].name, f->e[i].name) == 0) {
            st_quote q;
            return optim__err(err, OPTIM_EFORMAT, "%s: tensor name %s appears more than once", L,
                              optim__st_q(&q, f->e[i].name));
        }

    /* The tensors, in offset order, must tile [0, data_len) exactly. */
    for (size_t i = 0; i < f->n; i++) o[i] = &f->e[i];
    optim__st_sort(o, f->n, sizeof *o, st_cmp_offset);
    uint64_t cursor = 0;
    for (size_t i = 0; i < f->n; i++) {
        st_quote q1, q2;
        if (o[i]->begin < cursor)
            return optim__err(
                err, OPTIM_EFORMAT,
                "%s: tensor %s data_offsets [%llu, %llu] overlap tensor %s [%llu, %llu]", L,
                optim__st_q(&q1, o[i]->name), (ull)o[i]->begin, (ull)o[i]->end,
                optim__st_q(&q2, o[i - 1]->name), (ull)o[i - 1]->begin, (ull)o[i - 1]->end);
        if (o[i]->begin > cursor)
            return optim__err(err, OPTIM_EFORMAT,
                              "%s: data buffer bytes [%llu, %llu) belong to no tensor (a hole "
                              "before tensor %s)",
                              L, (ull)cursor, (ull)o[i]->begin, optim__st_q(&q1, o[i]->name));
        cursor = o[i]->end;
    }
    if (cursor != data_len)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: data buffer is %llu bytes but the tensors cover only [0, %llu): "
                          "%llu trailing bytes",
                          L, (ull)data_len, (ull)cursor, (ull)(data_len - cursor));
    return OPTIM_OK;
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

int optim__st_parse_header(const st_src *src, const char *hdr, size_t n, uint64_t data_len,
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
