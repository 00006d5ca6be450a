/* The safetensors implementation's shared parts (internal to src/io):
 * the reader (safetensors.c), the header parser (safetensors_header.c),
 * the writer (safetensors_write.c) and the helpers they share
 * (safetensors_util.c). */
#ifndef OPTIM_IO_SAFETENSORS_IMPL_H
#define OPTIM_IO_SAFETENSORS_IMPL_H

#include "optim/safetensors.h"

#include "core/dtype.h"

#include <stddef.h>
#include <stdint.h>

/* ---- Byte order ---------------------------------------------------------- */

/* The format is little-endian. The swap code (optim__st_swap) is compiled everywhere and
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
void optim__st_swap(unsigned char *p, size_t nbytes, size_t size);

/* ---- Names and limits ------------------------------------------------------ */

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
size_t optim__st_utf8_seq(const unsigned char *s, size_t n);
/* 1 if the string s is valid UTF-8. */
int optim__st_utf8_valid(const char *s);

/* A name quoted for an error message: escapes quotes, backslashes, control
 * bytes and bytes that are not valid UTF-8, and cuts long names with "...". */
#define ST_QUOTE_MAX 64
typedef struct st_quote {
    char s[ST_QUOTE_MAX * 4 + 16];
} st_quote;
const char *optim__st_q(st_quote *q, const char *name);

/* strerror_r's text for errno e, in buf. */
const char *optim__st_sys(int e, char *buf, size_t n);

/* qsort, after a linear check: files optim writes are in name order with
 * offsets in the same order, and 100k names sorted again cost ~10% of a
 * replay. */
void optim__st_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

/* ---- A file being read ------------------------------------------------------ */

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

/* Parses and validates header bytes hdr[0..n) (NUL-terminated at n) against a
 * data buffer of data_len bytes (safetensors_header.c). Fills f->e (sorted by
 * name) and *order (entries sorted by offset; the caller frees it). */
int optim__st_parse_header(const st_src *src, const char *hdr, size_t n, uint64_t data_len,
                           optim_st_file *f, st_entry ***order, optim_error *err);

#endif
