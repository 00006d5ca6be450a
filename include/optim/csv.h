/*
 * optim/csv.h - read a table of numbers from a CSV file.
 *
 * Fields are separated by commas, records by "\n" or "\r\n"; a final
 * newline is optional and blank lines are skipped. The first record is a
 * header of column names when any of its fields is not a number (names may
 * be in double quotes, which are removed; no other quoting). Every other
 * field must be a finite decimal number (strtod's syntax in the C locale,
 * spaces around it allowed), and every record must have as many fields as
 * the first. Anything else is refused with OPTIM_EFORMAT and a message
 * naming the file, the line, the column and the field; OPTIM_EIO when the
 * file cannot be read.
 *
 *     optim_csv *t;
 *     if (optim_csv_read("iris.csv", &t, &err)) die(err.msg);
 *     optim_csv_rows(t), optim_csv_cols(t), optim_csv_name(t, j), optim_csv_values(t)[i * cols + j]
 */
#ifndef OPTIM_CSV_H
#define OPTIM_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "optim/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct optim_csv optim_csv;

/* Reads the whole file. On error *out is NULL and err says why. */
OPTIM_API int optim_csv_read(const char *path, optim_csv **out, optim_error *err);
/* The same on len bytes at buf (not kept); messages name `source` (NULL: "csv buffer"). */
OPTIM_API int optim_csv_parse(const char *buf, size_t len, const char *source, optim_csv **out,
                              optim_error *err);
OPTIM_API void optim_csv_free(optim_csv *t); /* NULL is a no-op */

OPTIM_API int64_t optim_csv_rows(const optim_csv *t); /* records after the header */
OPTIM_API int64_t optim_csv_cols(const optim_csv *t);
/* Column j's header name; NULL without a header or past the end. */
OPTIM_API const char *optim_csv_name(const optim_csv *t, int64_t j);
/* rows * cols values, row-major. */
OPTIM_API const double *optim_csv_values(const optim_csv *t);

#ifdef __cplusplus
}
#endif
#endif
