/*
 * safetensors reader (see include/optim/safetensors.h).
 *
 * The 8-byte size and the header are read first and validated completely
 * (safetensors_header.c) before any tensor memory is allocated, so a
 * hostile header cannot make us allocate more than the file holds. The
 * data buffer is then read once, in offset order, into one arena where
 * every tensor starts on an 8-byte boundary. The writer is
 * safetensors_write.c.
 */
#define _POSIX_C_SOURCE 200809L

#include "optim/file.h"
#include "optim/safetensors.h"

#include "core/internal.h"
#include "io/safetensors_impl.h"
#include "io/safetensors_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t st_le64(const unsigned char b[8])
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

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
                              optim__st_sys(errno, sb, sizeof sb));
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
    if ((rc = optim__st_parse_header(src, hdr, (size_t)n, data_len, f, &order, err))) goto fail;
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
            optim__st_swap(e->data, (size_t)(e->end - e->begin), optim_dtype_size(e->dtype));
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
                          optim__st_sys(errno, sb, sizeof sb));
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

void optim_st_free(optim_st_file *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) free(f->e[i].name);
    free(f->e);
    free(f->arena);
    free(f);
}
