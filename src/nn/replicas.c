/* Splitting a global batch across replicas (Keras's fit under a
 * distribution strategy: each replica takes a contiguous part). A replica
 * left without rows (a last batch smaller than the group) borrows the
 * batch's first row with share 0: its gradients are zeros, and the rows a
 * sparse gradient names are rows rank 0 touches anyway. */
#include "nn/internal.h"

void optim__replica_rows(const optim__replicas *r, int64_t start, int64_t bs, int64_t *lo,
                         int64_t *n, double *share)
{
    int64_t a = bs / r->size * r->rank + bs % r->size * r->rank / r->size;
    int64_t b = bs / r->size * (r->rank + 1) + bs % r->size * (r->rank + 1) / r->size;
    *lo = start + a;
    *n = b - a;
    *share = (double)(b - a) / (double)bs;
    if (*n == 0) *lo = start, *n = 1;
}
