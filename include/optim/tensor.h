/*
 * optim/tensor.h - dense tensor views and sparse gradients.
 *
 * optim_tensor is a plain view: dtype, shape and a pointer the caller owns.
 * optim_slices is the C form of tf.IndexedSlices: `n` row indices into the
 * first dimension of a variable, and an [n, row shape...] tensor of rows.
 * Indices may repeat; the optimizer sums repeated rows before a sparse update
 * (unless its class says it handles duplicates itself).
 *
 *     float g[6] = {...};
 *     optim_tensor t = optim_tensor_make(OPTIM_F32, g, 2, (int64_t[]){2, 3});
 */
#ifndef OPTIM_TENSOR_H
#define OPTIM_TENSOR_H

#include "optim/export.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OPTIM_MAX_RANK 8

typedef enum optim_dtype {
    OPTIM_DTYPE_INVALID = 0,
    OPTIM_F32 = 1,
    OPTIM_F64 = 2,
    OPTIM_I32 = 3,
    OPTIM_I64 = 4,
    OPTIM_F16 = 5, /* IEEE 754 binary16 (Keras "float16") */
    OPTIM_BF16 = 6 /* bfloat16: the top 16 bits of a float32 (Keras "bfloat16") */
} optim_dtype;

typedef struct optim_tensor {
    optim_dtype dtype;
    int32_t rank; /* 0 (scalar) .. OPTIM_MAX_RANK */
    int64_t shape[OPTIM_MAX_RANK];
    void *data; /* borrowed; row-major, contiguous */
} optim_tensor;

/* Sparse gradient (tf.IndexedSlices). `values` has shape [n, row shape...]. */
typedef struct optim_slices {
    const int64_t *indices; /* borrowed, n entries, may repeat */
    int64_t n;
    optim_tensor values;
} optim_slices;

/* Size of one element of `dtype` in bytes, 0 for an invalid dtype. */
OPTIM_API size_t optim_dtype_size(optim_dtype dtype);

/* "float32", "float64", "int32", "int64", "float16", "bfloat16", or "invalid". */
OPTIM_API const char *optim_dtype_name(optim_dtype dtype);

/* The dtype the `optim` command's --dtype names "f32", "f64", "i32", "i64",
 * "f16" or "bf16"; OPTIM_DTYPE_INVALID for NULL or any other string. */
OPTIM_API optim_dtype optim_dtype_from_short_name(const char *name);

/* The dtype an optimizer computes a variable of `dtype` in: OPTIM_F32 for
 * the half-precision storage types (F16, BF16), `dtype` itself otherwise.
 * Update hooks only ever see F32 or F64 (docs/half-precision.md). */
OPTIM_API optim_dtype optim_compute_dtype(optim_dtype dtype);

/* Converts n elements of src (dtype `from`) into dst (dtype `to`), both
 * among F16, BF16, F32 and F64. Narrowing rounds to nearest, ties to even,
 * once (F64 to F16 or BF16 is not rounded twice); overflow gives +-inf,
 * subnormals are kept, NaN stays NaN (quiet, sign and top payload bits
 * kept). dst and src must not overlap. Returns 0, or OPTIM_EDTYPE for
 * another dtype, OPTIM_EINVAL for n < 0 or a NULL pointer with n > 0. */
OPTIM_API int optim_convert(void *dst, optim_dtype to, const void *src, optim_dtype from,
                            int64_t n);

/* Builds a view; copies `rank` dims from `shape` (rank is clamped to
 * OPTIM_MAX_RANK; check with optim_tensor_check when it comes from users). */
OPTIM_API optim_tensor optim_tensor_make(optim_dtype dtype, void *data, int32_t rank,
                                         const int64_t *shape);

/* Number of elements (1 for a scalar). Returns -1 if a dim is negative or the
 * product overflows int64. */
OPTIM_API int64_t optim_tensor_numel(const optim_tensor *t);

/* Writes "[2, 3]" into buf (always NUL-terminated). Returns buf. */
OPTIM_API char *optim_shape_str(int32_t rank, const int64_t *shape, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
