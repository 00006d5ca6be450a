/* The sums of duplicate sparse rows at every instruction-set level
 * (sparse_sum.c): each level's table gives, for float and double, rows of
 * every width (tails of each vector width) and groups of one to five
 * duplicates, the bits of a sum written out here in the duplicates' order
 * from +0 (so a lone -0 row sums to +0). A level the CPU lacks, or a build
 * with one level, is skipped with a printed line. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "optimizer/sparse_walk.h"
#include "testutil.h"

extern const optim__sum_table optim__sum_kernels_avx2 __attribute__((weak));
extern const optim__sum_table optim__sum_kernels_avx512 __attribute__((weak));

enum { ROWS = 40, WIDTH = 37, GROUPS = 12 };

static uint32_t rng = 11u;
static double rnd(void) { return optim_test_uniform(&rng, -4.0, 4.0); }

/* GROUPS groups of 1..5 positions into ROWS rows, in scattered order. */
static int64_t positions(optim__ipos *a, int64_t *first)
{
    int64_t k = 0;
    for (int u = 0; u < GROUPS; u++) {
        first[u] = k;
        for (int d = 0; d <= u % 5; d++, k++) a[k] = (optim__ipos){.idx = u, .pos = (k * 7) % ROWS};
    }
    first[GROUPS] = k;
    return k;
}

/* The tables to compare with the baseline: those this build and CPU have. */
static int levels(const optim__sum_table **t)
{
    const void *cand[] = {&optim__sum_kernels, &optim__sum_kernels_avx2,
                          &optim__sum_kernels_avx512};
    const void *got[3];
    const int n = optim_test_levels(cand, got);
    for (int i = 0; i < n; i++) t[i] = got[i];
    return n;
}

OPTIM_TEST(row_sums_same_bits_every_level)
{
    static float f[ROWS * WIDTH], fo[GROUPS * WIDTH], fr[GROUPS * WIDTH];
    static double d[ROWS * WIDTH], dout[GROUPS * WIDTH], dr[GROUPS * WIDTH];
    for (int i = 0; i < ROWS * WIDTH; i++) f[i] = (float)rnd(), d[i] = rnd();
    f[0] = -0.0f, d[0] = -0.0; /* row 0 is group 0's only row */
    optim__ipos a[GROUPS * 5];
    int64_t first[GROUPS + 1];
    positions(a, first);
    const optim__sum_table *t[3];
    const int nt = levels(t);
    for (int64_t rs = 1; rs <= WIDTH; rs++) {
        for (int u = 0; u < GROUPS; u++)
            for (int64_t j = 0; j < rs; j++) {
                float sf = 0.0f;
                double sd = 0.0;
                for (int64_t k = first[u]; k < first[u + 1]; k++)
                    sf += f[a[k].pos * rs + j], sd += d[a[k].pos * rs + j];
                fr[u * rs + j] = sf, dr[u * rs + j] = sd;
            }
        if (signbit(fr[0]) || signbit(dr[0])) fail_msg("the reference sums -0 to -0");
        for (int k = 0; k < nt; k++) {
            t[k]->sum_float(rs, f, a, first, 0, GROUPS, fo);
            t[k]->sum_double(rs, d, a, first, 0, GROUPS, dout);
            if (memcmp(fo, fr, (size_t)(GROUPS * rs) * sizeof *fo))
                fail_msg("float rows of width %lld: table %d gives other bits than the sum in "
                         "order (first element %.9g, expected %.9g)",
                         (long long)rs, k, fo[0], fr[0]);
            if (memcmp(dout, dr, (size_t)(GROUPS * rs) * sizeof *dout))
                fail_msg("double rows of width %lld: table %d gives other bits than the sum in "
                         "order (first element %.17g, expected %.17g)",
                         (long long)rs, k, dout[0], dr[0]);
        }
    }
}

OPTIM_TEST(row_sums_part_of_the_groups)
{
    static float f[ROWS * WIDTH], all[GROUPS * WIDTH], part[GROUPS * WIDTH];
    for (int i = 0; i < ROWS * WIDTH; i++) f[i] = (float)rnd();
    optim__ipos a[GROUPS * 5];
    int64_t first[GROUPS + 1];
    positions(a, first);
    optim__sum_kernels.sum_float(WIDTH, f, a, first, 0, GROUPS, all);
    memset(part, 0xff, sizeof part);
    optim__sum_kernels.sum_float(WIDTH, f, a, first, 3, 7, part);
    for (int u = 0; u < GROUPS; u++) {
        const int inside = u >= 3 && u < 7;
        const uint32_t *p = (const uint32_t *)(part + u * WIDTH);
        if (inside && memcmp(part + u * WIDTH, all + u * WIDTH, WIDTH * sizeof(float)))
            fail_msg("group %d, inside [3, 7): sum differs from the whole run's", u);
        if (!inside && p[0] != 0xffffffffu)
            fail_msg("group %d, outside [3, 7): written (0x%08x)", u, (unsigned)p[0]);
    }
}

int main(void) { return optim_test_run(); }
