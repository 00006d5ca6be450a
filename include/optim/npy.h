/*
 * optim/npy.h - read NumPy's .npy and .npz files.
 *
 * A .npy file (numpy.lib.format) is the magic "\x93NUMPY", a version byte
 * pair (1.0, 2.0 or 3.0), the header length (little-endian: 2 bytes in
 * 1.0, 4 in 2.0 and 3.0), a Python dict literal such as
 *
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
 *
 * padded with spaces and a newline, then the raw elements in C order. An
 * .npz file is a zip archive of .npy files, one per array, named NAME.npy:
 * np.savez stores them, np.savez_compressed deflates them.
 *
 * optim_npy_read tells the two apart by their first bytes and reads the
 * whole file strictly. Refused with OPTIM_EFORMAT and a message naming the
 * file, the array and what is wrong: a bad magic or version, a header that
 * is not the dict above (the three keys, each once), a shape with negative
 * or overflowing dimensions, fewer or more data bytes than the shape needs,
 * a zip whose records, offsets or sizes fall outside the file, a member
 * whose CRC-32 or size does not match, a member name not ending in .npy or
 * met twice. Refused with OPTIM_ENOTSUP: fortran_order True, a descr other
 * than the plain numbers below (structured, string, object, complex,
 * datetime), more than OPTIM_MAX_RANK dimensions, a zip method other than
 * stored or deflate, encrypted or split archives. OPTIM_EIO when the file
 * cannot be read. Every offset and size is checked against the bytes there
 * before it is used, and memory is allocated only for data the file holds.
 *
 *     optim_npy *f;
 *     optim_error err;
 *     if (optim_npy_read("data.npz", &f, &err)) die(err.msg);
 *     const optim_npy_array *x = optim_npy_find(f, "x_train");   // NULL if absent
 *     float *xs = malloc(x->numel * sizeof *xs);
 *     optim_npy_convert(x, OPTIM_F32, 1.0 / 255, xs, &err);       // uint8 pixels in [0, 1]
 *     optim_npy_free(f);
 *
 * An optim_npy is immutable once read: it may be used from many threads.
 */
#ifndef OPTIM_NPY_H
#define OPTIM_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "optim/status.h"
#include "optim/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types: descr '|b1', '|u1', '|i1', then '<' or '>' with u2 i2 u4
 * i4 u8 i8 f2 f4 f8. OPTIM_NPY_BF16 never comes from a file: it lets a
 * bfloat16 safetensors tensor be viewed as an optim_npy_array. */
typedef enum optim_npy_type {
    OPTIM_NPY_BOOL,
    OPTIM_NPY_U8,
    OPTIM_NPY_I8,
    OPTIM_NPY_U16,
    OPTIM_NPY_I16,
    OPTIM_NPY_U32,
    OPTIM_NPY_I32,
    OPTIM_NPY_U64,
    OPTIM_NPY_I64,
    OPTIM_NPY_F16,
    OPTIM_NPY_F32,
    OPTIM_NPY_F64,
    OPTIM_NPY_BF16
} optim_npy_type;

/* One array: elements in host byte order, C order. */
typedef struct optim_npy_array {
    const char *name; /* the .npz member without ".npy"; "" for a lone .npy file */
    optim_npy_type type;
    int32_t rank; /* 0 .. OPTIM_MAX_RANK */
    int64_t shape[OPTIM_MAX_RANK];
    int64_t numel;
    const void *data;
} optim_npy_array;

typedef struct optim_npy optim_npy;

/* Reads a .npy or .npz file. On error *out is NULL and err says why. */
OPTIM_API int optim_npy_read(const char *path, optim_npy **out, optim_error *err);
/* The same on len bytes at buf (copied: buf may be freed after the call);
 * messages name `source` (NULL: "npy buffer"). */
OPTIM_API int optim_npy_parse(const void *buf, size_t len, const char *source, optim_npy **out,
                              optim_error *err);
OPTIM_API void optim_npy_free(optim_npy *f); /* NULL is a no-op */

/* The arrays in file order (an .npz's central directory order). */
OPTIM_API size_t optim_npy_count(const optim_npy *f);
OPTIM_API const optim_npy_array *optim_npy_at(const optim_npy *f, size_t i); /* NULL past the end */
OPTIM_API const optim_npy_array *optim_npy_find(const optim_npy *f, const char *name);

/* NumPy's name of the type ("uint8", "float32", "bool", "bfloat16"); NULL if unknown. */
OPTIM_API const char *optim_npy_type_name(optim_npy_type type);

/* Writes a's numel elements to out as dtype. OPTIM_F32, OPTIM_F64: value *
 * scale. OPTIM_I32, OPTIM_I64 (scale must be 1): integer values that fit,
 * and float values that are whole numbers that fit; anything else is
 * refused with OPTIM_ERANGE naming the array, the element's index and its
 * value (out is then partly written). Other dtypes: OPTIM_EDTYPE. */
OPTIM_API int optim_npy_convert(const optim_npy_array *a, optim_dtype dtype, double scale,
                                void *out, optim_error *err);

#ifdef __cplusplus
}
#endif
#endif
