/*
 * safetensors writer (see include/optim/safetensors.h).
 *
 * Tensors are copied at add time (already in little-endian order) into
 * blocks of the writer's own (8-byte aligned and packed, a large tensor in
 * a block of its own: core's arena aligns to 64 bytes and doubles its
 * blocks, too much for 300k 4-byte tensors); save sorts them by name
 * (merging the runs already in order), writes the header by hand (cJSON
 * prints large integers in exponent form) and writes through
 * io/atomic_file.c (an unnamed temporary file, fsync, then link or rename).
 */
#define _POSIX_C_SOURCE 200809L

#include "optim/safetensors.h"

#include "core/fd.h"
#include "core/hash.h"
#include "core/internal.h"
#include "io/atomic_file.h"
#include "io/safetensors_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    snprintf(buf, n, "safetensors: tensor %s", optim__st_q(&q, name));
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
    if (!optim__st_utf8_valid(name))
        return optim__err(err, OPTIM_EINVAL, "safetensors: tensor name %s is not valid UTF-8",
                          optim__st_q(&q, name));
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
    if (ST_HOST_BIG_ENDIAN) optim__st_swap(e.data, e.nbytes, optim_dtype_size(e.dtype));
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
        optim__st_sort(p, n, sizeof *p, st_cmp_wname);
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
    return optim__err(err, OPTIM_EIO, "%s: %s: %s", path, what,
                      optim__st_sys(errno, sb, sizeof sb));
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
