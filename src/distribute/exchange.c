/* The exchanges a step needs, built on the byte collectives of comm.c:
 * a reduce-scatter that adds the ranks' blocks in rank order (so every
 * rank and every thread count gets the same bits), an all-gather of blocks,
 * the agreement check that precedes them, and the sparse gather. An
 * all-reduce is a reduce-scatter followed by an all-gather. */
#include "distribute/internal.h"
#include "core/hash.h"

#include <string.h>

void optim__layout_rows(const optim_group *g, optim__layout *l, size_t i, int64_t rows,
                        int64_t row_size)
{
    int64_t *lo = l->lo + i * (size_t)(g->size + 1);
    for (int r = 0; r <= g->size; r++) lo[r] = rows / g->size * r + rows % g->size * r / g->size;
    for (int r = 0; r <= g->size; r++) lo[r] *= row_size;
}

/* Bytes of this rank's blocks, summed over the tensors, for rank r. */
static size_t block_bytes(const optim_group *g, const optim__layout *l, int r)
{
    size_t b = 0;
    for (size_t i = 0; i < l->k; i++) b += (size_t)optim__block_n(g, l, i, r);
    return b * optim_dtype_size(l->dtype);
}

#define SUM_BLOCKS(T)                                             \
    for (size_t i = 0; i < l->k; i++) {                           \
        int64_t n = optim__block_n(g, l, i, g->rank);             \
        T *dst = own[i];                                          \
        for (int r = 0; r < g->size; r++) {                       \
            const T *src = (const T *)(recv + off[r]);            \
            if (r == 0) memcpy(dst, src, (size_t)n * sizeof(T));  \
            else                                                  \
                for (int64_t j = 0; j < n; j++) dst[j] += src[j]; \
            off[r] += (size_t)n * sizeof(T);                      \
        }                                                         \
    }

int optim__reduce_scatter(optim_group *g, const optim__layout *l, const void *const *full,
                          void *const *own, optim_error *err)
{
    int n = g->size;
    size_t esz = optim_dtype_size(l->dtype),
           *sb = optim__group_alloc(g, 3 * (size_t)n * sizeof *sb);
    if (!sb) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    size_t *rb = sb + n, *off = sb + 2 * n, stot = 0, mine = block_bytes(g, l, g->rank);
    for (int r = 0; r < n; r++) {
        sb[r] = block_bytes(g, l, r);
        rb[r] = mine;
        off[r] = r * mine;
        stot += sb[r];
    }
    char *send = optim__group_alloc(g, stot), *recv = optim__group_alloc(g, mine * (size_t)n),
         *p = send;
    if (!send || !recv)
        return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory for %zu bytes", stot);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < l->k; i++) {
            size_t b = (size_t)optim__block_n(g, l, i, r) * esz;
            if (b) memcpy(p, (const char *)full[i] + (size_t)optim__block_lo(g, l, i, r) * esz, b);
            p += b;
        }
    int rc = optim__alltoallv(g, send, sb, recv, rb, err);
    if (rc) return rc;
    if (l->dtype == OPTIM_F32) SUM_BLOCKS(float)
    else SUM_BLOCKS(double)
    return OPTIM_OK;
}

int optim__all_gather(optim_group *g, const optim__layout *l, void *const *full, optim_error *err)
{
    int n = g->size;
    size_t esz = optim_dtype_size(l->dtype), *rb = optim__group_alloc(g, (size_t)n * sizeof *rb),
           tot = 0;
    if (!rb) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    for (int r = 0; r < n; r++) tot += rb[r] = block_bytes(g, l, r);
    char *send = optim__group_alloc(g, rb[g->rank]), *recv = optim__group_alloc(g, tot), *p = send;
    if (!send || !recv)
        return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory for %zu bytes", tot);
    for (size_t i = 0; i < l->k; i++) {
        size_t b = (size_t)optim__block_n(g, l, i, g->rank) * esz;
        if (b)
            memcpy(p, (const char *)full[i] + (size_t)optim__block_lo(g, l, i, g->rank) * esz, b);
        p += b;
    }
    int rc = optim__allgatherv(g, send, rb[g->rank], recv, rb, err);
    if (rc) return rc;
    p = recv;
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < l->k; i++) {
            size_t b = (size_t)optim__block_n(g, l, i, r) * esz;
            if (b) memcpy((char *)full[i] + (size_t)optim__block_lo(g, l, i, r) * esz, p, b);
            p += b;
        }
    return OPTIM_OK;
}

enum { HDR = 5 }; /* per pair: kind, dtype, numel, sparse rows, name hash */

static int64_t name_hash(const char *s) { return (int64_t)(optim__fnv1a_str(s) >> 1); }

/* What rank r sent about pair i, and a message naming the first difference. */
static int compare(optim_group *g, const int64_t *all, size_t n, const optim_grad_var *pairs,
                   optim_error *err)
{
    static const char *what[HDR] = {"gradient kind", "dtype", "element count", "sparse row count",
                                    "name"};
    const size_t stride = 2 + HDR * n;
    for (int r = 0; r < g->size; r++) {
        const int64_t *h = all + (size_t)r * stride;
        if (h[0] != OPTIM_OK)
            return optim__err(err, OPTIM_EINVAL,
                              "replica group: rank %d refused its gradients (status %lld: %s); "
                              "no rank was updated",
                              r, (long long)h[0], optim_strerror((int)h[0]));
        if (h[1] != (int64_t)n)
            return optim__err(err, OPTIM_EINVAL,
                              "replica group: rank %d passed %lld pairs, rank %d passed %zu; every "
                              "rank must pass the same variables in the same order",
                              r, (long long)h[1], g->rank, n);
    }
    for (int r = 0; r < g->size; r++)
        for (size_t i = 0; i < n; i++)
            for (int f = 0; f < HDR; f++) {
                if (f == 3) continue; /* sparse row counts may differ */
                int64_t a = all[(size_t)r * stride + 2 + HDR * i + f], b = all[2 + HDR * i + f];
                if (a != b && f == 4)
                    return optim__err(
                        err, OPTIM_EINVAL,
                        "replica group: pair %zu ('%s' on rank %d): rank %d passes "
                        "a variable of another name than rank 0; every rank must pass the same "
                        "variables in the same order",
                        i, optim_var_name(pairs[i].var), g->rank, r);
                if (a != b)
                    return optim__err(
                        err, OPTIM_EINVAL,
                        "replica group: pair %zu ('%s'): rank %d has %s %lld, "
                        "rank 0 has %lld; every rank must pass the same variables in the same order",
                        i, optim_var_name(pairs[i].var), r, what[f], (long long)a, (long long)b);
            }
    return OPTIM_OK;
}

int optim__agree(optim_group *g, const optim_grad_var *pairs, size_t n, int local_rc,
                 optim_error *err)
{
    /* Each rank's status and pair count first, in a frame (agree.c), so
     * that the headers below have one size. */
    size_t stride = 2 + HDR * n, words = stride > OPTIM__FRAME ? stride : OPTIM__FRAME;
    int64_t *h = optim__group_alloc(g, stride * sizeof *h),
            *all = optim__group_alloc(g, words * sizeof *h * (size_t)g->size),
            *fr = optim__group_alloc(g, OPTIM__FRAME * sizeof *h * (size_t)g->size);
    if (!h || !all || !fr) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    int rc = optim__frame(g, OPTIM__CALL_AGREE, local_rc, (int64_t)n, 0, fr, err);
    if (rc) return rc;
    for (int r = 0; r < g->size; r++)
        if (fr[OPTIM__FRAME * r + 2] != OPTIM_OK || fr[OPTIM__FRAME * r + 3] != (int64_t)n) {
            if (local_rc) return local_rc; /* err holds this rank's own reason */
            for (int q = 0; q < g->size; q++)
                memcpy(all + (size_t)q * stride, fr + OPTIM__FRAME * q + 2, 2 * sizeof *all);
            return compare(g, all, n, pairs, err);
        }
    h[0] = local_rc;
    h[1] = (int64_t)n;
    if (n == 0) return OPTIM_OK; /* a status check only */
    for (size_t i = 0; i < n; i++) {
        const optim_grad *gr = &pairs[i].grad;
        int64_t *p = h + 2 + HDR * i;
        p[0] = gr->kind;
        p[1] = optim_var_dtype(pairs[i].var);
        p[2] = optim_var_numel(pairs[i].var);
        p[3] = gr->kind == OPTIM_GRAD_SPARSE ? gr->sparse.n : 0;
        p[4] = name_hash(optim_var_name(pairs[i].var));
    }
    if ((rc = optim__allgather(g, h, stride * sizeof *h, all, err))) return rc;
    return compare(g, all, n, pairs, err);
}

/* Elements per row of the variable. */
static int64_t row_size(const optim_var *v)
{
    int64_t rs = 1;
    for (int32_t d = 1; d < optim_var_rank(v); d++) rs *= optim_var_shape(v)[d];
    return rs;
}

/* Points each sparse pair at all ranks' indices and rows, in rank order,
 * taken from recv (rank by rank, pair by pair: indices then rows). */
static int unpack_sparse(optim_group *g, optim_grad_var *pairs, size_t n, const int64_t *counts,
                         const char *recv, optim_error *err)
{
    char **vals = optim__group_alloc(g, n * sizeof *vals);
    int64_t **idx = optim__group_alloc(g, n * sizeof *idx),
            *tot = optim__group_alloc(g, n * sizeof *tot);
    if (!vals || !idx || !tot) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    for (size_t i = 0; i < n; i++) {
        tot[i] = 0;
        if (pairs[i].grad.kind != OPTIM_GRAD_SPARSE) continue;
        for (int r = 0; r < g->size; r++) tot[i] += counts[(size_t)r * n + i];
        size_t rowb =
            (size_t)row_size(pairs[i].var) * optim_dtype_size(optim_var_dtype(pairs[i].var));
        idx[i] = optim__group_alloc(g, (size_t)tot[i] * sizeof(int64_t));
        vals[i] = optim__group_alloc(g, (size_t)tot[i] * rowb);
        if (!idx[i] || !vals[i])
            return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
        optim_slices *s = &pairs[i].grad.sparse;
        s->indices = idx[i];
        s->n = tot[i];
        s->values.data = vals[i];
        s->values.shape[0] = tot[i];
    }
    for (int r = 0; r < g->size; r++)
        for (size_t i = 0; i < n; i++) {
            if (pairs[i].grad.kind != OPTIM_GRAD_SPARSE) continue;
            size_t c = (size_t)counts[(size_t)r * n + i];
            size_t rowb =
                (size_t)row_size(pairs[i].var) * optim_dtype_size(optim_var_dtype(pairs[i].var));
            if (c)
                memcpy(idx[i], recv, c * sizeof(int64_t)),
                    memcpy(vals[i], recv + c * sizeof(int64_t), c * rowb);
            recv += c * (sizeof(int64_t) + rowb);
            idx[i] += c;
            vals[i] += c * rowb;
        }
    return OPTIM_OK;
}

int optim__gather_sparse(optim_group *g, optim_grad_var *pairs, size_t n, optim_error *err)
{
    /* One all-gather: each rank sends, pair by pair, its indices then its rows. */
    size_t *rb = optim__group_alloc(g, (size_t)g->size * sizeof *rb), tot = 0;
    int64_t *counts = optim__group_alloc(g, ((size_t)g->size + 1) * (n ? n : 1) * sizeof *counts);
    if (!rb || !counts) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    int64_t *mine = counts + (size_t)g->size * n;
    for (size_t i = 0; i < n; i++)
        mine[i] = pairs[i].grad.kind == OPTIM_GRAD_SPARSE ? pairs[i].grad.sparse.n : 0;
    int rc = optim__allgather(g, mine, n * sizeof *mine, counts, err);
    if (rc) return rc;
    for (int r = 0; r < g->size; r++) {
        rb[r] = 0;
        for (size_t i = 0; i < n; i++)
            if (pairs[i].grad.kind == OPTIM_GRAD_SPARSE)
                rb[r] += (size_t)counts[(size_t)r * n + i] *
                    (sizeof(int64_t) +
                     (size_t)row_size(pairs[i].var) *
                         optim_dtype_size(optim_var_dtype(pairs[i].var)));
        tot += rb[r];
    }
    char *send = optim__group_alloc(g, rb[g->rank]), *recv = optim__group_alloc(g, tot), *p = send;
    if (!send || !recv)
        return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory for %zu bytes", tot);
    for (size_t i = 0; i < n; i++) {
        const optim_slices *s = &pairs[i].grad.sparse;
        if (pairs[i].grad.kind != OPTIM_GRAD_SPARSE) continue;
        size_t ib = (size_t)s->n * sizeof(int64_t),
               vb = (size_t)(s->n * row_size(pairs[i].var)) * optim_dtype_size(s->values.dtype);
        if (ib) memcpy(p, s->indices, ib), memcpy(p + ib, s->values.data, vb);
        p += ib + vb;
    }
    if ((rc = optim__allgatherv(g, send, rb[g->rank], recv, rb, err))) return rc;
    return unpack_sparse(g, pairs, n, counts, recv, err);
}

int optim__sum_dense(optim_group *g, optim_grad_var *pairs, size_t n, optim_error *err)
{
    for (int d = 0; d < 2; d++) {
        optim__layout l = {0, d ? OPTIM_F64 : OPTIM_F32, NULL};
        for (size_t i = 0; i < n; i++)
            l.k += pairs[i].grad.kind == OPTIM_GRAD_DENSE && pairs[i].grad.dense.dtype == l.dtype;
        if (!l.k) continue;
        l.lo = optim__group_alloc(g, l.k * (size_t)(g->size + 1) * sizeof *l.lo);
        void **full = optim__group_alloc(g, 2 * l.k * sizeof *full);
        if (!l.lo || !full) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (pairs[i].grad.kind == OPTIM_GRAD_DENSE && pairs[i].grad.dense.dtype == l.dtype) {
                optim__layout_rows(g, &l, k, optim_tensor_numel(&pairs[i].grad.dense), 1);
                full[k++] = pairs[i].grad.dense.data;
            }
        void **own = full + l.k;
        size_t esz = optim_dtype_size(l.dtype);
        for (k = 0; k < l.k; k++) {
            own[k] = optim__group_alloc(g, (size_t)optim__block_n(g, &l, k, g->rank) * esz);
            if (!own[k]) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
        }
        int rc = optim__reduce_scatter(g, &l, (const void *const *)full, own, err);
        for (k = 0; !rc && k < l.k; k++)
            memcpy((char *)full[k] + (size_t)optim__block_lo(g, &l, k, g->rank) * esz, own[k],
                   (size_t)optim__block_n(g, &l, k, g->rank) * esz);
        if (!rc) rc = optim__all_gather(g, &l, full, err);
        if (rc) return rc;
    }
    return OPTIM_OK;
}
