/* The top singular pair of a matrix (internal), for ConditionalGradient's
 * nuclear-norm direction u v^T (TF Addons computes it with tf.linalg.svd).
 *
 * Method, all in double, deterministic (one thread, fixed order, a fixed
 * start): A = G^T G or G G^T, the Gram matrix of the shorter side
 * (p = min(rows, cols), p x p, each entry summed in index order); its top
 * eigenvector x by power iteration from a fixed pseudo-random start, 32
 * steps at a time, squaring A (normalised) after each 32 that did not
 * converge, up to 10 times (the convergence ratio (s2/s1)^2 becomes
 * (s2/s1)^(2^11)), then up to 4096 more steps. Converged: no element of x
 * moves by more than 4 ulp of 1 in a step, or the change stops shrinking
 * below 1e-12 (rounding). Then the other vector is G x (or G^T x)
 * normalised. Where s1 > s2 are apart the pair is accurate to about
 * 1e-15; the singular vectors of close s1, s2 are ill-conditioned (an
 * error of eps in G moves them by about eps / (1 - s2/s1)), in any SVD.
 *
 * The zero matrix gives u = e1, v = e1 (Eigen's SVD, which TF's CPU kernel
 * uses, returns identity singular vectors for it); a matrix with a NaN or
 * an infinity gives NaN vectors. The signs of u and v are tied (u v^T is
 * unique for s1 > s2). */
#ifndef OPTIM_CORE_TOP_SINGULAR_H
#define OPTIM_CORE_TOP_SINGULAR_H

#include <stddef.h>
#include <stdint.h>

#include "optim/tensor.h"

/* Doubles of scratch for a rows x cols matrix: 2 p^2 + 2 p + max(rows, cols);
 * SIZE_MAX when that overflows. */
size_t optim__top_singular_doubles(int64_t rows, int64_t cols);

/* The top singular pair of the row-major rows x cols matrix g (F32 or F64
 * elements): *u gets rows doubles, *v cols doubles, both inside scratch
 * (optim__top_singular_doubles(rows, cols) of them). rows, cols >= 1. */
void optim__top_singular(const void *g, optim_dtype dtype, int64_t rows, int64_t cols,
                         double *scratch, const double **u, const double **v);

#endif
