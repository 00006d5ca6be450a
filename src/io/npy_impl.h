/* Internal to the .npy/.npz reader (optim/npy.h): the file object and
 * the pieces shared by npy.c (one array), npz.c (the zip) and
 * npy_convert.c. */
#ifndef OPTIM_IO_NPY_IMPL_H
#define OPTIM_IO_NPY_IMPL_H

#include <stdint.h>

#include "optim/npy.h"

struct optim_npy {
    size_t n, cap;
    optim_npy_array *a; /* a[i].name and a[i].data are owned */
};

/* Little-endian integers at p. */
static inline uint32_t optim__le16(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}
static inline uint32_t optim__le32(const unsigned char *p)
{
    return optim__le16(p) | optim__le16(p + 2) << 16;
}
static inline uint64_t optim__le64(const unsigned char *p)
{
    return optim__le32(p) | (uint64_t)optim__le32(p + 4) << 32;
}

/* Parses the .npy bytes p[0 .. len) into a new array of f named `name`
 * (copied); messages name `src` and the array. */
int optim__npy_add(optim_npy *f, const unsigned char *p, size_t len, const char *src,
                   const char *name, optim_error *err);
/* Parses the zip archive p[0 .. len), adding each NAME.npy member. */
int optim__npz_parse(optim_npy *f, const unsigned char *p, size_t len, const char *src,
                     optim_error *err);
/* The whole file at path into *buf (malloc'd), *len bytes (also csv.c's). */
int optim__read_whole(const char *path, unsigned char **buf, size_t *len, optim_error *err);
/* Bytes of one element of t. */
size_t optim__npy_type_size(optim_npy_type t);

#endif
