/*
 * optim/safetensors.h - read and write tensors in the safetensors format.
 *
 * A safetensors file is an 8-byte little-endian unsigned header size N, then
 * N bytes of UTF-8 JSON, then a data buffer of raw little-endian values:
 *
 *     {"__metadata__": {"k": "v"},                       (optional, ignored)
 *      "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
 *
 * data_offsets are [begin, end) byte offsets into the data buffer. optim reads
 * and writes the dtypes F32, F64, F16, BF16, I32 and I64, rank 0 (shape []) to
 * OPTIM_MAX_RANK.
 *
 * Reading (optim_st_read, optim_st_parse) loads and validates the whole file
 * up front, as strictly as the reference implementation: the header must be
 * valid UTF-8 JSON starting with '{', every entry must be well formed, each
 * tensor's byte count must equal numel * dtype size, and the tensors, sorted
 * by offset, must cover the data buffer exactly (no overlaps, holes or
 * trailing bytes). Duplicate names are rejected, and header integers must be
 * below 2^53. Anything wrong gives OPTIM_EFORMAT (a tensor optim cannot hold,
 * such as dtype "F8_E4M3" or rank 9, gives OPTIM_ENOTSUP; a file that cannot be
 * read gives OPTIM_EIO), and the optim_error names the file, the tensor and
 * the offending value. Tensor data is copied into 8-byte aligned memory owned
 * by the optim_st_file.
 *
 * Writing (optim_st_writer_*) collects copies of tensors, then saves them
 * sorted by name with the data laid out in the same order and the header
 * padded with spaces to a multiple of 8 bytes, so the output depends only on
 * the tensors. The save is atomic: the file either appears complete under its
 * name or is not touched.
 *
 * Values are stored little-endian; on a big-endian host they are byte-swapped
 * on the way in and out.
 *
 *     optim_error err;
 *     float w[6] = {1, 2, 3, 4, 5, 6};
 *     optim_tensor t = optim_tensor_make(OPTIM_F32, w, 2, (int64_t[]){2, 3});
 *     optim_st_writer *wr;
 *     if (optim_st_writer_create(&wr, &err) != OPTIM_OK ||
 *         optim_st_writer_add(wr, "w", &t, &err) != OPTIM_OK ||
 *         optim_st_writer_save(wr, "model.safetensors", &err) != OPTIM_OK)
 *         fprintf(stderr, "%s\n", err.msg);
 *     optim_st_writer_destroy(wr);
 *
 *     optim_st_file *f;
 *     if (optim_st_read("model.safetensors", &f, &err) != OPTIM_OK) {
 *         fprintf(stderr, "%s\n", err.msg);
 *         return 1;
 *     }
 *     for (size_t i = 0; i < optim_st_count(f); i++) {
 *         optim_tensor v;
 *         optim_st_get(f, optim_st_name(f, i), &v);
 *         ...                            (v.data stays valid until optim_st_free)
 *     }
 *     optim_st_free(f);
 *
 * Thread safety: distinct objects may be used from distinct threads; one
 * optim_st_file may be read (count, name, get) from many threads at once.
 * (cJSON notes its last parse error in a global of its own, which optim never
 * reads; concurrent failing parses race only on that.)
 */
#ifndef OPTIM_SAFETENSORS_H
#define OPTIM_SAFETENSORS_H

#include <stddef.h>

#include "optim/status.h"
#include "optim/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest header optim reads or writes (as the reference implementation). */
#define OPTIM_ST_MAX_HEADER 100000000u

/* ---- Reading ------------------------------------------------------------ */

/* A parsed file: names, shapes and a copy of all tensor data. Opaque. */
typedef struct optim_st_file optim_st_file;

/* Reads and validates the whole file at `path`.
 * On success *out is a new optim_st_file the caller owns (free it with
 * optim_st_free) and returns OPTIM_OK. On error *out = NULL and returns
 * OPTIM_EINVAL (NULL argument), OPTIM_EIO (cannot open or read, not a regular
 * file; the message has the path and the system's reason), OPTIM_EFORMAT
 * (malformed content), OPTIM_ENOTSUP (a well-formed tensor optim cannot hold:
 * a dtype other than F32/F64/F16/BF16/I32/I64, or rank above OPTIM_MAX_RANK) or
 * OPTIM_ENOMEM; `err` (may be NULL) says exactly what is wrong. */
OPTIM_API int optim_st_read(const char *path, optim_st_file **out, optim_error *err);

/* Same as optim_st_read on the `len` bytes at `buf`, which stay the caller's:
 * everything needed is copied, so buf may be freed right after the call.
 * Messages name the source "safetensors buffer". */
OPTIM_API int optim_st_parse(const void *buf, size_t len, optim_st_file **out, optim_error *err);

/* Frees f and all its tensor data. NULL is a no-op. */
OPTIM_API void optim_st_free(optim_st_file *f);

/* Number of tensors in f (the "__metadata__" entry is not one); 0 for NULL. */
OPTIM_API size_t optim_st_count(const optim_st_file *f);

/* Name of the i-th tensor, tensors sorted by name (strcmp order). The string
 * is owned by f. Returns NULL if f is NULL or i >= optim_st_count(f). */
OPTIM_API const char *optim_st_name(const optim_st_file *f, size_t i);

/* Looks up the tensor called `name` and fills *out with a view of it: dtype,
 * rank, shape, and data pointing at an 8-byte aligned copy owned by f, valid
 * until optim_st_free(f) (the caller may write to it; no one else does).
 * Returns OPTIM_OK, OPTIM_ENOTFOUND if f has no such tensor, or OPTIM_EINVAL
 * if an argument is NULL. *out is left unchanged on error. */
OPTIM_API int optim_st_get(const optim_st_file *f, const char *name, optim_tensor *out);

/* ---- Writing ------------------------------------------------------------ */

/* Tensors collected for one file. Opaque. */
typedef struct optim_st_writer optim_st_writer;

/* Creates an empty writer; *out is owned by the caller (destroy it with
 * optim_st_writer_destroy). Returns OPTIM_OK, OPTIM_EINVAL (out is NULL) or
 * OPTIM_ENOMEM; on error *out = NULL. */
OPTIM_API int optim_st_writer_create(optim_st_writer **out, optim_error *err);

/* Adds a copy of tensor `t` under `name` (both copied; t stays the caller's).
 * t must be F32, F64, F16, BF16, I32 or I64, rank 0..OPTIM_MAX_RANK, dims >= 0 and
 * below 2^53 (JSON readers that use doubles lose exactness from there), data
 * non-NULL when it has elements. The name must be valid UTF-8 (the empty
 * name too, as the reader and the reference implementation accept it), not
 * "__metadata__", and not already added. Returns OPTIM_OK, OPTIM_EINVAL (NULL
 * argument, bad or duplicate name, NULL data), OPTIM_EDTYPE, OPTIM_ESHAPE or
 * OPTIM_ENOMEM; on error the writer is unchanged. */
OPTIM_API int optim_st_writer_add(optim_st_writer *w, const char *name, const optim_tensor *t,
                                  optim_error *err);

/* Writes all added tensors to `path` atomically: to a temporary file in the
 * same directory, fsync, then publish it under path (and a best-effort fsync
 * of the directory). The temporary file has no name while it is written
 * (Linux O_TMPFILE), so a process killed by any signal leaves nothing
 * behind; a new path appears in one step (link), an existing one is replaced
 * by rename from a short name (.optim-PID-N.tmp) held for that instant only.
 * Where the file system has no O_TMPFILE the temporary file has that short
 * name throughout. An existing path that is not a regular file (symbolic
 * link, directory, device, FIFO, socket) is refused with OPTIM_EIO, never
 * replaced. On any error path is neither created nor changed and the
 * temporary file is removed. The writer keeps its tensors, so it may be saved
 * again. Returns OPTIM_OK, OPTIM_EINVAL (NULL argument, header too large),
 * OPTIM_EIO (the message has the path and the system's reason) or
 * OPTIM_ENOMEM. */
OPTIM_API int optim_st_writer_save(optim_st_writer *w, const char *path, optim_error *err);

/* Frees the writer and its copies. NULL is a no-op. */
OPTIM_API void optim_st_writer_destroy(optim_st_writer *w);

#ifdef __cplusplus
}
#endif
#endif
