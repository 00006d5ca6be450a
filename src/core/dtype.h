/* The dtype traits table (internal): every fact about a dtype — its names
 * in Keras, safetensors and the `optim` command, its element size and its
 * conversions to and from float32 — is one row of dtype.c. Code that names,
 * sizes or converts a dtype asks the table, so a new dtype is a new enum
 * value (optim/tensor.h), a row and its converters (dtype.c), and its row
 * in tests/test_dtype_table.c. */
#ifndef OPTIM_CORE_DTYPE_H
#define OPTIM_CORE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "optim/tensor.h"

typedef struct optim__dtype_traits {
    const char *keras; /* "float32": optim_dtype_name, Keras's dtype string */
    const char *safetensors; /* "F32": the dtype field of a safetensors header */
    const char *cli; /* "f32": the `optim` command's --dtype */
    size_t size; /* bytes per element */
    /* n elements to float32 and back (rounding to nearest even); NULL for
     * the integer types, which optimizers never compute in. */
    void (*to_f32)(float *dst, const void *src, int64_t n);
    void (*from_f32)(void *dst, const float *src, int64_t n);
} optim__dtype_traits;

/* One past the largest dtype: dtypes are OPTIM_DTYPE_INVALID + 1 .. this - 1
 * (the table's length, so a new dtype is one row in dtype.c). */
int optim__dtype_end(void);

/* The row of dtype, NULL for an invalid one. */
const optim__dtype_traits *optim__dtype(optim_dtype dtype);

/* Which name a lookup matches: the fields of optim__dtype_traits. */
typedef enum optim__dtype_naming {
    OPTIM__DTYPE_KERAS,
    OPTIM__DTYPE_SAFETENSORS,
    OPTIM__DTYPE_CLI
} optim__dtype_naming;

/* The dtype whose `naming` name is s (exact, case-sensitive);
 * OPTIM_DTYPE_INVALID for NULL or any other string. */
optim_dtype optim__dtype_by_name(const char *s, optim__dtype_naming naming);

/* The dtype's name in `naming`, "invalid" for an invalid dtype. */
const char *optim__dtype_name_in(optim_dtype dtype, optim__dtype_naming naming);

/* 1 if dtype converts to and from float32 (F32, F64, F16, BF16). */
int optim__dtype_is_float(optim_dtype dtype);

/* The dtypes in mask (bits 1u << dtype), in table order, as a message
 * lists them: "float32", "float32 or float64", "float32, float64 or
 * float16", spelled in `naming`. Returns buf (always NUL-terminated). */
char *optim__dtype_list(unsigned mask, optim__dtype_naming naming, char *buf, size_t n);

/* Bit mask of every valid dtype. */
unsigned optim__dtype_all(void);

#endif
