/* The top singular pair of a matrix by power iteration on its Gram matrix
 * (top_singular.h). */
#include "core/top_singular.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define STEPS 32 /* power steps between squarings */
#define SQUARINGS 10
#define FINAL_STEPS 4096
#define TOL (4 * DBL_EPSILON) /* largest move of an element of x in a converged step */
#define FLOOR 1e-12 /* below it, a change that stops shrinking is rounding */

size_t optim__top_singular_doubles(int64_t rows, int64_t cols)
{
    const uint64_t p = (uint64_t)(rows < cols ? rows : cols),
                   q = (uint64_t)(rows < cols ? cols : rows);
    if (rows < 0 || cols < 0 || p > (UINT64_C(1) << 30) || q > (UINT64_C(1) << 60)) return SIZE_MAX;
    const uint64_t n = 2 * p * p + 2 * p + q;
    return n > SIZE_MAX / sizeof(double) ? SIZE_MAX : (size_t)n;
}

static double at(const void *g, optim_dtype dt, int64_t i)
{
    return dt == OPTIM_F64 ? ((const double *)g)[i] : (double)((const float *)g)[i];
}

/* a = G^T G (p = cols <= rows) or G G^T (p = rows < cols), upper triangle
 * summed in index order, then mirrored. */
static void gram(const void *g, optim_dtype dt, int64_t rows, int64_t cols, double *a)
{
    const int64_t p = rows < cols ? rows : cols;
    memset(a, 0, (size_t)(p * p) * sizeof *a);
    if (p == cols) {
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < p; i++) {
                const double gi = at(g, dt, r * cols + i);
                for (int64_t j = i; j < p; j++) a[i * p + j] += gi * at(g, dt, r * cols + j);
            }
    } else {
        for (int64_t i = 0; i < p; i++)
            for (int64_t j = i; j < p; j++) {
                double s = 0;
                for (int64_t c = 0; c < cols; c++)
                    s += at(g, dt, i * cols + c) * at(g, dt, j * cols + c);
                a[i * p + j] = s;
            }
    }
    for (int64_t i = 0; i < p; i++)
        for (int64_t j = 0; j < i; j++) a[i * p + j] = a[j * p + i];
}

/* a / its largest diagonal element (a is symmetric positive semi-definite,
 * so that is its largest element). */
static void normalise(double *a, int64_t p)
{
    double d = 0;
    for (int64_t i = 0; i < p; i++) d = a[i * p + i] > d ? a[i * p + i] : d;
    if (d > 0)
        for (int64_t i = 0; i < p * p; i++) a[i] /= d;
}

/* b = a a (both symmetric: row i of a times row j), normalised. */
static void square(const double *a, double *b, int64_t p)
{
    for (int64_t i = 0; i < p; i++)
        for (int64_t j = i; j < p; j++) {
            double s = 0;
            for (int64_t k = 0; k < p; k++) s += a[i * p + k] * a[j * p + k];
            b[i * p + j] = b[j * p + i] = s;
        }
    normalise(b, p);
}

static double norm2(const double *x, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
    return sqrt(s);
}

/* Up to `steps` steps x = a x / ||a x|| (y scratch); 0 once converged (no
 * element moved by more than TOL, or the move stopped shrinking below
 * FLOOR), 1 if not, -1 if a x vanished. */
static int power(const double *a, int64_t p, double *x, double *y, int steps)
{
    double prev = INFINITY;
    for (int s = 0; s < steps; s++) {
        for (int64_t i = 0; i < p; i++) {
            double t = 0;
            for (int64_t j = 0; j < p; j++) t += a[i * p + j] * x[j];
            y[i] = t;
        }
        const double n = norm2(y, p);
        if (!(n > 0)) return -1;
        double delta = 0;
        for (int64_t i = 0; i < p; i++) {
            y[i] /= n;
            const double d = fabs(y[i] - x[i]);
            delta = d > delta ? d : delta;
        }
        memcpy(x, y, (size_t)p * sizeof *x);
        if (delta <= TOL || (delta >= prev && delta <= FLOOR)) return 0;
        prev = delta;
    }
    return 1;
}

/* The fixed start: xorshift64 values in (-1, 1), never 0, normalised. */
static void start(double *x, int64_t p)
{
    uint64_t s = 0x9E3779B97F4A7C15u;
    for (int64_t i = 0; i < p; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = ((double)(s >> 11) + 0.5) / 4503599627370496.0 - 1.0;
    }
    const double n = norm2(x, p);
    for (int64_t i = 0; i < p; i++) x[i] /= n;
}

/* The top eigenvector of the p x p Gram matrix a (destroyed; b scratch of
 * the same size) into x (y scratch). */
static void top_eigenvector(double *a, double *b, int64_t p, double *x, double *y)
{
    normalise(a, p);
    start(x, p);
    int rc = power(a, p, x, y, STEPS);
    for (int k = 0; rc == 1 && k < SQUARINGS; k++) {
        square(a, b, p);
        double *t = a;
        a = b, b = t;
        rc = power(a, p, x, y, k + 1 < SQUARINGS ? STEPS : FINAL_STEPS);
    }
    if (rc < 0) { /* a x vanished (a start orthogonal to a's range): e_j of the largest a_jj */
        int64_t j = 0;
        for (int64_t i = 1; i < p; i++) j = a[i * p + i] > a[j * p + j] ? i : j;
        for (int64_t i = 0; i < p; i++) x[i] = a[i * p + j];
        const double n = norm2(x, p);
        for (int64_t i = 0; i < p; i++) x[i] /= n;
    }
}

/* out = G x (transpose 0, rows) or G^T x (transpose 1, cols), normalised. */
static void other_side(const void *g, optim_dtype dt, int64_t rows, int64_t cols, int transpose,
                       const double *x, double *out)
{
    const int64_t n = transpose ? cols : rows;
    memset(out, 0, (size_t)n * sizeof *out);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const double e = at(g, dt, r * cols + c);
            if (transpose) out[c] += e * x[r];
            else out[r] += e * x[c];
        }
    const double nrm = norm2(out, n);
    for (int64_t i = 0; i < n; i++) out[i] /= nrm;
}

void optim__top_singular(const void *g, optim_dtype dtype, int64_t rows, int64_t cols,
                         double *scratch, const double **u, const double **v)
{
    const int64_t p = rows < cols ? rows : cols, q = rows < cols ? cols : rows;
    const int tall = p == cols; /* G^T G: x is v; else G G^T: x is u */
    double *a = scratch, *b = a + p * p, *x = b + p * p, *y = x + p, *z = y + p;
    gram(g, dtype, rows, cols, a);
    double trace = 0;
    for (int64_t i = 0; i < p; i++) trace += a[i * p + i];
    if (!isfinite(trace) || trace == 0) {
        /* NaN or infinity: NaN vectors; zero: e1, e1 (Eigen's identity U, V) */
        const double fill = trace == 0 ? 0.0 : NAN;
        for (int64_t i = 0; i < p; i++) x[i] = fill;
        for (int64_t i = 0; i < q; i++) z[i] = fill;
        if (trace == 0) x[0] = z[0] = 1.0;
    } else {
        top_eigenvector(a, b, p, x, y);
        other_side(g, dtype, rows, cols, !tall, x, z);
    }
    *u = tall ? z : x;
    *v = tall ? x : z;
}
