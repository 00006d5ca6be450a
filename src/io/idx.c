/*
 * IDX reader (see include/optim/idx.h), plain or gzip'd.
 *
 * The file goes through one small byte source: plain bytes from stdio, or
 * zlib's inflate over gzip members (windowBits 15 + 16). inflate is driven
 * to Z_STREAM_END, which checks each member's CRC-32 and length; after a
 * member, more input must be another member (magic 1f 8b) or nothing.
 * (zlib's gzread would silently ignore trailing garbage and a missing
 * trailer is only a soft error there, hence inflate.)
 *
 * The header is read and checked first; the data buffer then grows
 * geometrically with the bytes that actually arrive, up to the size the
 * header announces, and one more byte is asked for to catch trailing data.
 */
#include "optim/idx.h"

#include "core/internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define IDX_HOST_LITTLE 1
#elif defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define IDX_HOST_LITTLE 0
#else
#error "optim idx: cannot tell this host's byte order (need __BYTE_ORDER__)"
#endif

struct optim_idx {
    optim_idx_type type;
    int32_t rank;
    int64_t shape[OPTIM_MAX_RANK];
    int64_t numel;
    void *data;
};

/* ---- byte source ---------------------------------------------------------- */

#define IDX_CHUNK 65536

typedef struct source {
    const char *path;
    FILE *f;
    int gz;
    int z_live; /* inflateInit2 done */
    int done; /* no more bytes */
    z_stream zs;
    unsigned char in[IDX_CHUNK + 1]; /* + 1: room to prepend a carried-over byte */
    size_t in_pos, in_len; /* plain: buffered bytes not yet consumed */
} source;

static int fill(source *s, optim_error *err)
{
    size_t got = fread(s->in, 1, IDX_CHUNK, s->f);
    if (got == 0 && ferror(s->f))
        return optim__err(err, OPTIM_EIO, "%s: read error: %s", s->path, strerror(errno));
    s->in_pos = 0;
    s->in_len = got;
    return OPTIM_OK;
}

/* Reads up to n bytes into dst; *got < n only at the end of the data. */
static int src_read(source *s, unsigned char *dst, size_t n, size_t *got, optim_error *err)
{
    *got = 0;
    int rc;
    if (!s->gz) {
        while (*got < n) {
            if (s->in_pos == s->in_len) {
                if ((rc = fill(s, err))) return rc;
                if (s->in_len == 0) return OPTIM_OK;
            }
            size_t take = s->in_len - s->in_pos < n - *got ? s->in_len - s->in_pos : n - *got;
            memcpy(dst + *got, s->in + s->in_pos, take);
            s->in_pos += take;
            *got += take;
        }
        return OPTIM_OK;
    }
    while (*got < n && !s->done) {
        if (s->zs.avail_in == 0) {
            if ((rc = fill(s, err))) return rc;
            s->zs.next_in = s->in;
            s->zs.avail_in = (uInt)s->in_len;
        }
        size_t want = n - *got;
        if (want > (size_t)1 << 30) want = (size_t)1 << 30;
        s->zs.next_out = dst + *got;
        s->zs.avail_out = (uInt)want;
        int z = inflate(&s->zs, Z_NO_FLUSH);
        *got += want - s->zs.avail_out;
        if (z == Z_STREAM_END) {
            /* Another member, or the end of the file. */
            if (s->zs.avail_in == 0) {
                if ((rc = fill(s, err))) return rc;
                s->zs.next_in = s->in;
                s->zs.avail_in = (uInt)s->in_len;
            }
            if (s->zs.avail_in == 0) {
                s->done = 1;
                break;
            }
            if (s->zs.avail_in < 2 && s->zs.next_in[0] == 0x1f) {
                /* the second magic byte is in the next chunk */
                unsigned char first = s->zs.next_in[0];
                if ((rc = fill(s, err))) return rc;
                memmove(s->in + 1, s->in, s->in_len);
                s->in[0] = first;
                s->in_len++;
                s->zs.next_in = s->in;
                s->zs.avail_in = (uInt)s->in_len;
            }
            if (s->zs.avail_in < 2 || s->zs.next_in[0] != 0x1f || s->zs.next_in[1] != 0x8b)
                return optim__err(err, OPTIM_EFORMAT, "%s: bytes after the end of the gzip data",
                                  s->path);
            if (inflateReset(&s->zs) != Z_OK)
                return optim__err(err, OPTIM_EFORMAT, "%s: cannot restart gzip inflation", s->path);
            continue;
        }
        if (z == Z_MEM_ERROR)
            return optim__err(err, OPTIM_ENOMEM, "%s: out of memory inflating", s->path);
        if (z == Z_DATA_ERROR || z == Z_NEED_DICT || z == Z_STREAM_ERROR)
            return optim__err(err, OPTIM_EFORMAT, "%s: corrupt gzip data (%s)", s->path,
                              s->zs.msg ? s->zs.msg : "inflate failed");
        if (z == Z_BUF_ERROR && s->zs.avail_in == 0 && feof(s->f))
            /* no progress possible: the input ended inside a gzip member */
            return optim__err(err, OPTIM_EFORMAT, "%s: the gzip data ends early (truncated file)",
                              s->path);
    }
    return OPTIM_OK;
}

/* ---- reading -------------------------------------------------------------- */

static size_t type_size(int code)
{
    switch (code) {
    case OPTIM_IDX_U8:
    case OPTIM_IDX_I8: return 1;
    case OPTIM_IDX_I16: return 2;
    case OPTIM_IDX_I32:
    case OPTIM_IDX_F32: return 4;
    case OPTIM_IDX_F64: return 8;
    default: return 0;
    }
}

const char *optim_idx_type_name(optim_idx_type type)
{
    switch (type) {
    case OPTIM_IDX_U8: return "uint8";
    case OPTIM_IDX_I8: return "int8";
    case OPTIM_IDX_I16: return "int16";
    case OPTIM_IDX_I32: return "int32";
    case OPTIM_IDX_F32: return "float32";
    case OPTIM_IDX_F64: return "float64";
    }
    return NULL;
}

static int read_exact(source *s, unsigned char *dst, size_t n, const char *what, optim_error *err)
{
    size_t got;
    int rc = src_read(s, dst, n, &got, err);
    if (rc) return rc;
    if (got < n)
        return optim__err(err, OPTIM_EFORMAT, "%s: the file ends inside the %s (%zu of %zu bytes)",
                          s->path, what, got, n);
    return OPTIM_OK;
}

static void to_host(unsigned char *p, size_t nbytes, size_t es)
{
    if (IDX_HOST_LITTLE && es > 1)
        for (size_t i = 0; i + es <= nbytes; i += es)
            for (size_t a = i, b = i + es - 1; a < b; a++, b--) {
                unsigned char t = p[a];
                p[a] = p[b];
                p[b] = t;
            }
}

/* The magic number and dimensions: f's type, rank, shape and numel; *bytes the data's size. */
static int read_header(source *s, optim_idx *f, size_t *es_out, int64_t *bytes_out,
                       optim_error *err)
{
    unsigned char magic[4];
    int rc = read_exact(s, magic, 4, "magic number", err);
    if (rc) return rc;
    if (magic[0] || magic[1])
        return optim__err(
            err, OPTIM_EFORMAT,
            "%s: bad magic number %02x %02x %02x %02x, expected two zero bytes, a type code "
            "and the number of dimensions",
            s->path, magic[0], magic[1], magic[2], magic[3]);
    size_t es = type_size(magic[2]);
    if (!es)
        return optim__err(
            err, OPTIM_EFORMAT,
            "%s: unknown IDX type code 0x%02x, expected 0x08 (uint8), 0x09 (int8), 0x0B "
            "(int16), 0x0C (int32), 0x0D (float32) or 0x0E (float64)",
            s->path, magic[2]);
    if (magic[3] == 0)
        return optim__err(err, OPTIM_EFORMAT, "%s: 0 dimensions, expected 1 to %d", s->path,
                          OPTIM_MAX_RANK);
    if (magic[3] > OPTIM_MAX_RANK)
        return optim__err(err, OPTIM_ENOTSUP, "%s: %d dimensions, optim reads at most %d", s->path,
                          magic[3], OPTIM_MAX_RANK);
    f->type = (optim_idx_type)magic[2];
    f->rank = magic[3];
    unsigned char dims[4 * OPTIM_MAX_RANK];
    if ((rc = read_exact(s, dims, 4 * (size_t)f->rank, "dimensions", err))) return rc;
    int64_t numel = 1, bytes;
    for (int32_t i = 0; i < f->rank; i++) {
        f->shape[i] = (int64_t)dims[4 * i] << 24 | (int64_t)dims[4 * i + 1] << 16 |
            (int64_t)dims[4 * i + 2] << 8 | (int64_t)dims[4 * i + 3];
        if (optim__mul_overflow_i64(numel, f->shape[i], &numel))
            return optim__err(err, OPTIM_EFORMAT,
                              "%s: the dimensions overflow a 64-bit element count", s->path);
    }
    if (optim__mul_overflow_i64(numel, (int64_t)es, &bytes) || (uint64_t)bytes >= SIZE_MAX / 2)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: the dimensions describe more data than memory can hold", s->path);
    f->numel = numel;
    *es_out = es;
    *bytes_out = bytes;
    return OPTIM_OK;
}

static int read_file(source *s, optim_idx *f, optim_error *err)
{
    size_t es = 0;
    int64_t bytes = 0;
    int rc = read_header(s, f, &es, &bytes, err);
    if (rc) return rc;
    /* Grow with the data that arrives. */
    size_t cap = 0, have = 0, want = (size_t)bytes;
    unsigned char *buf = NULL;
    while (have < want) {
        size_t next = cap ? cap * 2 : IDX_CHUNK;
        if (next > want) next = want;
        unsigned char *p = realloc(buf, next ? next : 1);
        if (!p) {
            free(buf);
            return optim__err(err, OPTIM_ENOMEM, "%s: out of memory for %zu bytes", s->path, next);
        }
        buf = p;
        cap = next;
        size_t got;
        if ((rc = src_read(s, buf + have, cap - have, &got, err))) {
            free(buf);
            return rc;
        }
        have += got;
        if (have < cap) {
            free(buf);
            return optim__err(err, OPTIM_EFORMAT,
                              "%s: the data ends after %zu of %zu bytes (truncated file)", s->path,
                              have, want);
        }
    }
    unsigned char extra;
    size_t got;
    if ((rc = src_read(s, &extra, 1, &got, err))) {
        free(buf);
        return rc;
    }
    if (got) {
        free(buf);
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: bytes after the %zu bytes of data the dimensions describe", s->path,
                          want);
    }
    if (!buf && !(buf = malloc(1)))
        return optim__err(err, OPTIM_ENOMEM, "%s: out of memory", s->path);
    to_host(buf, want, es);
    f->data = buf;
    return OPTIM_OK;
}

int optim_idx_read(const char *path, optim_idx **out, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "idx: out is NULL");
    *out = NULL;
    if (!path) return optim__err(err, OPTIM_EINVAL, "idx: path is NULL");
    source *s = calloc(1, sizeof *s);
    optim_idx *f = calloc(1, sizeof *f);
    if (!s || !f) {
        free(s);
        free(f);
        return optim__err(err, OPTIM_ENOMEM, "%s: out of memory", path);
    }
    s->path = path;
    int rc = OPTIM_OK;
    s->f = fopen(path, "rb");
    if (!s->f) rc = optim__err(err, OPTIM_EIO, "%s: %s", path, strerror(errno));
    if (!rc) rc = fill(s, err);
    if (!rc && s->in_len >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b) {
        s->gz = 1;
        if (inflateInit2(&s->zs, 15 + 16) != Z_OK)
            rc = optim__err(err, OPTIM_ENOMEM, "%s: cannot start zlib", path);
        else {
            s->z_live = 1;
            s->zs.next_in = s->in;
            s->zs.avail_in = (uInt)s->in_len;
        }
    }
    if (!rc) rc = read_file(s, f, err);
    if (s->z_live) inflateEnd(&s->zs);
    if (s->f) fclose(s->f);
    free(s);
    if (rc) {
        free(f);
        return rc;
    }
    *out = f;
    return OPTIM_OK;
}

void optim_idx_free(optim_idx *f)
{
    if (!f) return;
    free(f->data);
    free(f);
}

optim_idx_type optim_idx_type_of(const optim_idx *f) { return f ? f->type : (optim_idx_type)0; }
int32_t optim_idx_rank(const optim_idx *f) { return f ? f->rank : 0; }
const int64_t *optim_idx_shape(const optim_idx *f) { return f ? f->shape : NULL; }
int64_t optim_idx_numel(const optim_idx *f) { return f ? f->numel : 0; }
const void *optim_idx_data(const optim_idx *f) { return f ? f->data : NULL; }

double optim_idx_get(const optim_idx *f, int64_t i)
{
    if (!f || i < 0 || i >= f->numel) return NAN;
    switch (f->type) {
    case OPTIM_IDX_U8: return ((const uint8_t *)f->data)[i];
    case OPTIM_IDX_I8: return ((const int8_t *)f->data)[i];
    case OPTIM_IDX_I16: return ((const int16_t *)f->data)[i];
    case OPTIM_IDX_I32: return ((const int32_t *)f->data)[i];
    case OPTIM_IDX_F32: return ((const float *)f->data)[i];
    case OPTIM_IDX_F64: return ((const double *)f->data)[i];
    }
    return NAN;
}

int optim_idx_convert(const optim_idx *f, optim_dtype dtype, double scale, void *out,
                      optim_error *err)
{
    if (!f) return optim__err(err, OPTIM_EINVAL, "idx convert: the file is NULL");
    if (!out && f->numel) return optim__err(err, OPTIM_EINVAL, "idx convert: out is NULL");
    int integer = f->type != OPTIM_IDX_F32 && f->type != OPTIM_IDX_F64;
    if (dtype == OPTIM_I32 || dtype == OPTIM_I64) {
        if (!integer)
            return optim__err(err, OPTIM_EDTYPE, "idx convert: %s data cannot become %s",
                              optim_idx_type_name(f->type), optim_dtype_name(dtype));
        if (scale != 1)
            return optim__err(err, OPTIM_EINVAL,
                              "idx convert: scale = %g for %s output, expected 1", scale,
                              optim_dtype_name(dtype));
    } else if (dtype != OPTIM_F32 && dtype != OPTIM_F64) {
        return optim__err(err, OPTIM_EDTYPE,
                          "idx convert: dtype %s, expected float32, float64, int32 or int64",
                          optim_dtype_name(dtype));
    } else if (!isfinite(scale)) {
        return optim__err(err, OPTIM_EINVAL, "idx convert: scale = %g, expected a finite number",
                          scale);
    }
    /* One loop per (type, dtype): the switch stays out of the loop. */
#define IDX_CONVERT(CT)                                                                         \
    do {                                                                                        \
        const CT *src = f->data;                                                                \
        switch (dtype) {                                                                        \
        case OPTIM_F32:                                                                         \
            for (int64_t i = 0; i < f->numel; i++) ((float *)out)[i] = (float)(src[i] * scale); \
            break;                                                                              \
        case OPTIM_F64:                                                                         \
            for (int64_t i = 0; i < f->numel; i++) ((double *)out)[i] = src[i] * scale;         \
            break;                                                                              \
        case OPTIM_I32:                                                                         \
            for (int64_t i = 0; i < f->numel; i++) ((int32_t *)out)[i] = (int32_t)src[i];       \
            break;                                                                              \
        default:                                                                                \
            for (int64_t i = 0; i < f->numel; i++) ((int64_t *)out)[i] = (int64_t)src[i];       \
        }                                                                                       \
    } while (0)
    switch (f->type) {
    case OPTIM_IDX_U8: IDX_CONVERT(uint8_t); break;
    case OPTIM_IDX_I8: IDX_CONVERT(int8_t); break;
    case OPTIM_IDX_I16: IDX_CONVERT(int16_t); break;
    case OPTIM_IDX_I32: IDX_CONVERT(int32_t); break;
    case OPTIM_IDX_F32: IDX_CONVERT(float); break;
    case OPTIM_IDX_F64: IDX_CONVERT(double); break;
    }
#undef IDX_CONVERT
    return OPTIM_OK;
}
