/*
 * optim/idx.h - read IDX files, the format of MNIST and Fashion-MNIST,
 * plain or gzip'd.
 *
 * An IDX file is a 4-byte magic number - two zero bytes, a type code and the
 * number of dimensions - then each dimension as a big-endian 32-bit unsigned
 * integer, then the data, big-endian, row-major:
 *
 *     type 0x08 unsigned byte, 0x09 signed byte, 0x0B int16, 0x0C int32,
 *          0x0D float32, 0x0E float64
 *
 * optim_idx_read tells a gzip file (RFC 1952; several members are one
 * stream, as gunzip reads them) from a plain one by its first two bytes and
 * reads it strictly: a bad magic, an unknown type, 0 or more than
 * OPTIM_MAX_RANK dimensions, a size that overflows, fewer data bytes than
 * the dimensions need, bytes after the data (or after the gzip stream), and
 * a corrupt or truncated gzip stream (bad CRC, early end) are all refused
 * with OPTIM_EFORMAT (OPTIM_ENOTSUP for more than OPTIM_MAX_RANK dims,
 * OPTIM_EIO when the file cannot be read) and a message naming the file and
 * what is wrong. Memory grows with the bytes actually read, so a header
 * claiming huge dimensions cannot make the reader allocate more than the
 * file holds.
 *
 *     optim_idx *images;
 *     optim_error err;
 *     if (optim_idx_read("train-images-idx3-ubyte.gz", &images, &err))
 *         die(err.msg);
 *     const int64_t *shape = optim_idx_shape(images);       // {60000, 28, 28}
 *     float *x = malloc(optim_idx_numel(images) * sizeof *x);
 *     optim_idx_convert(images, OPTIM_F32, 1.0 / 255, x, &err);   // pixels in [0, 1]
 *     optim_idx_free(images);
 *
 * An optim_idx is immutable once read: it may be used from many threads.
 */
#ifndef OPTIM_IDX_H
#define OPTIM_IDX_H

#include <stdint.h>

#include "optim/status.h"
#include "optim/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum optim_idx_type {
    OPTIM_IDX_U8 = 0x08,
    OPTIM_IDX_I8 = 0x09,
    OPTIM_IDX_I16 = 0x0B,
    OPTIM_IDX_I32 = 0x0C,
    OPTIM_IDX_F32 = 0x0D,
    OPTIM_IDX_F64 = 0x0E
} optim_idx_type;

typedef struct optim_idx optim_idx;

/* Reads the whole file. On error *out is NULL and err (if not NULL) says why. */
OPTIM_API int optim_idx_read(const char *path, optim_idx **out, optim_error *err);
OPTIM_API void optim_idx_free(optim_idx *f); /* NULL is a no-op */

OPTIM_API optim_idx_type optim_idx_type_of(const optim_idx *f);
/* "uint8", "int8", "int16", "int32", "float32", "float64"; NULL if unknown. */
OPTIM_API const char *optim_idx_type_name(optim_idx_type type);
OPTIM_API int32_t optim_idx_rank(const optim_idx *f);
OPTIM_API const int64_t *optim_idx_shape(const optim_idx *f);
OPTIM_API int64_t optim_idx_numel(const optim_idx *f);
/* The elements in host byte order, as the type says (uint8_t, int8_t,
 * int16_t, int32_t, float, double). Valid until optim_idx_free. */
OPTIM_API const void *optim_idx_data(const optim_idx *f);
/* Element i as double; NAN if i is out of range. */
OPTIM_API double optim_idx_get(const optim_idx *f, int64_t i);

/* Writes every element to out (numel elements of dtype): for OPTIM_F32 and
 * OPTIM_F64, value * scale; for OPTIM_I32 and OPTIM_I64 (integer types only,
 * scale must be 1), the value. */
OPTIM_API int optim_idx_convert(const optim_idx *f, optim_dtype dtype, double scale, void *out,
                                optim_error *err);

#ifdef __cplusplus
}
#endif
#endif
