/* The one parallel chunk loop (core/parallel.h). */
#include "core/parallel.h"

#include <omp.h>

#include "core/internal.h"

void optim__parallel_chunks(int64_t n, int nthreads, optim__chunk_fn fn, void *ctx)
{
    OPTIM_ASSERT(n >= 0 && nthreads >= 1 && fn);
    const int64_t nc = optim__nchunks(n);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads) if (nc > 1)
    for (int64_t c = 0; c < nc; c++) {
        const int64_t off = c * OPTIM__CHUNK;
        fn(ctx, off, optim__chunk_len(n, off));
    }
}
