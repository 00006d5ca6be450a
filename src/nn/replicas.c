/* Splitting a global batch across replicas (Keras's fit under a
 * distribution strategy: each replica takes a contiguous part). A replica
 * left without rows (a last batch smaller than the group) borrows the
 * batch's first row with share 0: its gradients are zeros, and the rows a
 * sparse gradient names are rows rank 0 touches anyway. */
#include "nn/internal.h"

#include <stdlib.h>

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

/* The non-trainable values times share into buf (put) or buf[k] / *w back
 * into the variables; returns the count. */
static size_t stats_walk(optim_model *m, double *buf, double share, const double *w)
{
    size_t k = 0;
    for (size_t i = 0; i < m->n_layers; i++)
        for (size_t j = 0; j < m->layers[i]->nvars; j++) {
            optim_var *v = m->layers[i]->vars[j];
            if (optim_var_trainable(v)) continue;
            int f32 = optim_var_dtype(v) == OPTIM_F32;
            void *d = optim_var_data(v);
            for (int64_t e = 0; e < optim_var_numel(v); e++, k++) {
                if (!buf) continue;
                if (!w) buf[k] = share * (f32 ? (double)((float *)d)[e] : ((double *)d)[e]);
                else if (f32) ((float *)d)[e] = (float)(buf[k] / *w);
                else ((double *)d)[e] = buf[k] / *w;
            }
        }
    return k;
}

int optim__replica_sync_stats(optim_model *m, double share, optim_error *err)
{
    size_t n = stats_walk(m, NULL, 0, NULL);
    if (!n) return OPTIM_OK; /* the same on every replica: no collective */
    double *buf = malloc((n + 1) * sizeof *buf);
    if (!buf) return optim__err(err, OPTIM_ENOMEM, "moving statistics: out of memory");
    stats_walk(m, buf, share, NULL);
    buf[n] = share;
    int rc = m->replicas.sum(m->replicas.user, buf, n + 1, err);
    if (!rc) stats_walk(m, buf, 0, buf + n);
    free(buf);
    return rc;
}
