/* Keras 3's weight decay at every instruction-set level (decay_kernels.c):
 * each level's table gives, for float and double, arrays of every length
 * up to 70 (each vector width's tails), the bits of w - w * wd * lr
 * computed here element by element in that order, for values of both signs,
 * zeros, subnormals, infinities and NaN. A level the CPU lacks, or a build
 * with one level, is skipped with a printed line. */
#include <math.h>
#include <string.h>

#include "optimizer/impl.h"
#include "testutil.h"

extern const optim__decay_table optim__decay_kernels_avx2 __attribute__((weak));
extern const optim__decay_table optim__decay_kernels_avx512 __attribute__((weak));

enum { N = 70 };

static uint32_t rng = 5u;
static double rnd(void) { return optim_test_uniform(&rng, -4.0, 4.0); }

OPTIM_TEST(decay_same_bits_every_level)
{
    const void *cand[] = {&optim__decay_kernels, &optim__decay_kernels_avx2,
                          &optim__decay_kernels_avx512};
    const void *got[3];
    const int nt = optim_test_levels(cand, got);
    float f[N], fw[N], fr[N];
    double d[N], dw[N], dr[N];
    for (int i = 0; i < N; i++) f[i] = (float)rnd(), d[i] = rnd();
    f[1] = -0.0f, f[2] = 1e-40f, f[3] = INFINITY, f[4] = NAN;
    d[1] = -0.0, d[2] = 1e-310, d[3] = -INFINITY, d[4] = NAN;
    const float wdf = 0.004f, lrf = 0.001f;
    const double wdd = 0.004, lrd = 0.001;
    for (int n = 0; n <= N; n++)
        for (int k = 0; k < nt; k++) {
            const optim__decay_table *t = got[k];
            memcpy(fw, f, sizeof f), memcpy(dw, d, sizeof d);
            t->decay_float(fw, n, wdf, lrf);
            t->decay_double(dw, n, wdd, lrd);
            for (int i = 0; i < N; i++) {
                fr[i] = i < n ? f[i] - f[i] * wdf * lrf : f[i];
                dr[i] = i < n ? d[i] - d[i] * wdd * lrd : d[i];
            }
            if (memcmp(fw, fr, sizeof fw))
                fail_msg("float, %d elements: table %d gives other bits than w - w * wd * lr", n,
                         k);
            if (memcmp(dw, dr, sizeof dw))
                fail_msg("double, %d elements: table %d gives other bits than w - w * wd * lr", n,
                         k);
        }
}

int main(void) { return optim_test_run(); }
