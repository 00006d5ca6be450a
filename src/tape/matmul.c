/* matmul: C = op(A) op(B) through CBLAS (OpenBLAS's sgemm / dgemm).
 *
 * With G the gradient of C, the rules for each transpose combination are
 * products of A, B and G with their own transpose flags, so every pass is
 * one gemm that adds into the input's gradient (beta = 1):
 *
 *   ta tb | dA (shape of A)          | dB (shape of B)
 *   0  0  | G  B^T                   | A^T G
 *   0  1  | G  B                     | G^T A
 *   1  0  | B  G^T                   | A   G
 *   1  1  | B^T G^T                  | G^T A^T
 */
#include <cblas.h>

#include "tape/impl.h"

/* Tiles of C, fixed whatever the thread count: each is one single-threaded
 * BLAS call (OpenBLAS's OpenMP build runs on one thread inside a parallel
 * region), so every element of C is computed by the same kernel in the same
 * order on 1 thread or 64, and training is bitwise the same on any machine.
 * OpenBLAS's own threading splits C by the thread count, and its edge
 * kernels round differently from its full ones. */
enum { TILE_ROWS = 64, TILE_COLS = 256 };

static void gemm_tile(optim_dtype dt, int tx, int ty, int64_t m, int64_t n, int64_t k,
                      const void *x, int64_t ldx, const void *y, int64_t ldy, double beta, void *c,
                      int64_t ldc)
{
    enum CBLAS_TRANSPOSE ox = tx ? CblasTrans : CblasNoTrans, oy = ty ? CblasTrans : CblasNoTrans;
    if (dt == OPTIM_F32)
        cblas_sgemm(CblasRowMajor, ox, oy, (blasint)m, (blasint)n, (blasint)k, 1.0f, x,
                    (blasint)ldx, y, (blasint)ldy, (float)beta, c, (blasint)ldc);
    else
        cblas_dgemm(CblasRowMajor, ox, oy, (blasint)m, (blasint)n, (blasint)k, 1.0, x, (blasint)ldx,
                    y, (blasint)ldy, beta, c, (blasint)ldc);
}

static void zero(void *c, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++) ((unsigned char *)c)[i] = 0;
}

/* C[m, n] (+)= op(X) op(Y), op(X) [m, k], op(Y) [k, n], row-major. */
static void gemm(optim_dtype dt, int tx, int ty, int64_t m, int64_t n, int64_t k, const void *x,
                 const void *y, double beta, void *c)
{
    if (m == 0 || n == 0) return;
    size_t es = optim_dtype_size(dt);
    if (k == 0) {
        if (beta == 0) zero(c, (size_t)(m * n) * es);
        return;
    }
    /* Leading dims of the stored (untransposed) matrices. */
    int64_t ldx = tx ? m : k, ldy = ty ? k : n;
    int64_t tm = (m + TILE_ROWS - 1) / TILE_ROWS, tn = (n + TILE_COLS - 1) / TILE_COLS;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tm * tn; t++) {
        int64_t r0 = t / tn * TILE_ROWS, c0 = t % tn * TILE_COLS;
        int64_t rows = m - r0 < TILE_ROWS ? m - r0 : TILE_ROWS;
        int64_t cols = n - c0 < TILE_COLS ? n - c0 : TILE_COLS;
        /* Row r0 of op(X) and column c0 of op(Y), in their stored layouts. */
        const char *xt = (const char *)x + (size_t)(tx ? r0 : r0 * ldx) * es;
        const char *yt = (const char *)y + (size_t)(ty ? c0 * ldy : c0) * es;
        gemm_tile(dt, tx, ty, rows, cols, k, xt, ldx, yt, ldy, beta,
                  (char *)c + (size_t)(r0 * n + c0) * es, n);
    }
}

static int matmul_backward(optim_tape *t, optim_node *n)
{
    optim_node *a = n->in[0], *b = n->in[1];
    int ta = n->flags & 1, tb = (n->flags >> 1) & 1;
    optim_dtype dt = n->value.dtype;
    int64_t m = n->value.shape[0], nn = n->value.shape[1];
    int64_t k = ta ? a->value.shape[0] : a->value.shape[1];
    const void *A = a->value.data, *B = b->value.data, *G = n->grad;
    if (a->need) {
        void *dA = optim__tape_grad(t, a);
        if (!dA) return OPTIM_ENOMEM;
        if (!ta) gemm(dt, 0, !tb, m, k, nn, G, B, 1, dA); /* [m, k] = G op(B)^T */
        else gemm(dt, tb, 1, k, m, nn, B, G, 1, dA); /* [k, m] = op(B) G^T */
    }
    if (b->need) {
        void *dB = optim__tape_grad(t, b);
        if (!dB) return OPTIM_ENOMEM;
        if (!tb) gemm(dt, !ta, 0, k, nn, m, A, G, 1, dB); /* [k, n] = op(A)^T G */
        else gemm(dt, 1, ta, nn, k, m, G, A, 1, dB); /* [n, k] = G^T op(A) */
    }
    return OPTIM_OK;
}

optim_node *optim_matmul(optim_tape *t, optim_node *a, optim_node *b, int transpose_a,
                         int transpose_b)
{
    optim_node *in[2] = {a, b};
    if (optim__tape_check_inputs(t, "matmul", in, 2)) return NULL;
    int ta = transpose_a != 0, tb = transpose_b != 0;
    char sa[OPTIM__SHAPE_STR], sb[OPTIM__SHAPE_STR];
    if (a->value.rank != 2 || b->value.rank != 2) {
        optim__tape_err(t, OPTIM_ESHAPE, "matmul: shapes %s and %s, expected two matrices (rank 2)",
                        optim__tape_shape(&a->value, sa), optim__tape_shape(&b->value, sb));
        return NULL;
    }
    int64_t m = a->value.shape[ta], ka = a->value.shape[!ta];
    int64_t kb = b->value.shape[tb], nn = b->value.shape[!tb];
    if (ka != kb) {
        optim__tape_err(
            t, OPTIM_ESHAPE,
            "matmul: shapes %s%s and %s%s do not multiply: inner dims %lld and %lld differ",
            optim__tape_shape(&a->value, sa), ta ? " (transposed)" : "",
            optim__tape_shape(&b->value, sb), tb ? " (transposed)" : "", (long long)ka,
            (long long)kb);
        return NULL;
    }
    if (m > INT32_MAX || nn > INT32_MAX || ka > INT32_MAX) {
        optim__tape_err(t, OPTIM_ESHAPE, "matmul: shapes %s and %s exceed BLAS's 32-bit dims",
                        optim__tape_shape(&a->value, sa), optim__tape_shape(&b->value, sb));
        return NULL;
    }
    int64_t shape[2] = {m, nn};
    optim_node *n = optim__tape_node(t, "matmul", a->value.dtype, 2, shape, a, b);
    if (!n) return NULL;
    gemm(a->value.dtype, ta, tb, m, nn, ka, a->value.data, b->value.data, 0, n->value.data);
    n->flags = ta | (tb << 1);
    n->backward = matmul_backward;
    return n;
}
