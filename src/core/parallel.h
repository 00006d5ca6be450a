/* Parallel-for over fixed chunks (internal).
 *
 * Element-wise work is cut into chunks of OPTIM__CHUNK elements, a size that
 * does not depend on the thread count: every chunk computes the same bits on
 * any thread, and reductions add per-chunk partial sums in chunk order, so
 * results never depend on the number of threads. This is the one place the
 * chunk size is defined. */
#ifndef OPTIM_CORE_PARALLEL_H
#define OPTIM_CORE_PARALLEL_H

#include <stdint.h>

#define OPTIM__CHUNK ((int64_t)8192) /* elements per task */

/* How many chunks n elements make. */
static inline int64_t optim__nchunks(int64_t n) { return (n + OPTIM__CHUNK - 1) / OPTIM__CHUNK; }

/* Elements of the chunk that starts at `off` of n (the last one is short). */
static inline int64_t optim__chunk_len(int64_t n, int64_t off)
{
    return n - off < OPTIM__CHUNK ? n - off : OPTIM__CHUNK;
}

/* for (each chunk of n elements) { body with `off` and `len` }, serially;
 * inside `#pragma omp for` loops use optim__nchunks and optim__chunk_len. */
#define OPTIM__FOR_CHUNKS(n, off, len)                                                   \
    for (int64_t off = 0, len = 0; off < (n) && ((len = optim__chunk_len((n), off)), 1); \
         off += OPTIM__CHUNK)

/* fn(ctx, off, len) for every chunk of n elements, on nthreads threads (one
 * chunk per task, dynamically scheduled). */
typedef void (*optim__chunk_fn)(void *ctx, int64_t off, int64_t len);
void optim__parallel_chunks(int64_t n, int nthreads, optim__chunk_fn fn, void *ctx);

#endif
