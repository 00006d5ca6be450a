/* The tape's element-wise loops at every instruction-set level
 * (src/tape/elementwise_kernels.c): each level's table gives the bits of
 * the baseline's, for float32 and float64, on runs of every length up to
 * past the widest vector's tails, with NaN, +-inf and +-0 among the inputs
 * (at the same places in each, then mixed); the baseline's binary forward
 * results and relu are checked against the expressions written out here.
 * A level the CPU lacks, or a build with one level, is skipped with a
 * printed line. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "optim/tape.h"
#include "tape/kernels.h"
#include "testutil.h"

extern const optim__tape_table optim__tape_kernels_avx2 __attribute__((weak));
extern const optim__tape_table optim__tape_kernels_avx512 __attribute__((weak));

enum { N = 72, MAXLEN = 67, OFF = 3 };

static uint32_t rng = 5u;
static double rnd(void) { return optim_test_uniform(&rng, -3.0, 3.0); }

/* Inputs: random values with specials among them, at the same places in
 * every input (-0 + -0, inf - inf, NaN with NaN, ...), then mixed. */
static void fill(double *d, float *f, int salt)
{
    static const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-30, -1e-30, 1.0, 100.0};
    for (int i = 0; i < N; i++) {
        const int m = i / 5; /* every fifth: the same specials in every input, then mixed */
        d[i] = i % 5 == 0 ? sp[(m + salt * (m / 9)) % 9] : rnd();
        f[i] = (float)d[i];
    }
}

/* The tables to compare with the baseline: those this build and CPU have.
 * The weak references alone pull nothing from liboptim.a: optim_relu's
 * file (activations.c), which dispatches, brings the level tables in. */
static int levels(const optim__tape_table **t)
{
    static optim_node *(*volatile keep)(optim_tape *, optim_node *) = optim_relu;
    (void)keep;
    const void *cand[] = {&optim__tape_kernels, &optim__tape_kernels_avx2,
                          &optim__tape_kernels_avx512};
    const void *got[3];
    const int n = optim_test_levels(cand, got);
    for (int i = 0; i < n; i++) t[i] = got[i];
    return n;
}

/* Operands of both dtypes; [0] the baseline's results, [1] a level's. */
static double xa[N], xb[N], xg[N], xo[N], dd[2][N];
static float fa[N], fb[N], fg[N], fo[N], df[2][N];

static void *A(int di) { return di ? (void *)xa : (void *)fa; }
static void *B(int di) { return di ? (void *)xb : (void *)fb; }
static void *G(int di) { return di ? (void *)xg : (void *)fg; }
static void *O(int di) { return di ? (void *)xo : (void *)fo; }
static void *D(int di, int r) { return di ? (void *)dd[r] : (void *)df[r]; }

/* D[r] reset to the same values (a gradient holding earlier contributions). */
static void reset(int r)
{
    for (int i = 0; i < N; i++) dd[r][i] = (double)(i % 9) - 4.25, df[r][i] = (float)dd[r][i];
}

static void same(int di, const char *what, int op, int level, int64_t len)
{
    size_t sz = di ? sizeof(double) : sizeof(float);
    if (memcmp(D(di, 0), D(di, 1), N * sz))
        fail_msg("%s %d, %s, length %lld: table %d gives other bits than the baseline", what, op,
                 di ? "float64" : "float32", (long long)len, level);
}

/* Binary op `op` written out in T. */
#define BIN_REF(T, NAME)                   \
    static T NAME(int op, T x, T y)        \
    {                                      \
        switch (op) {                      \
        case OPTIM__BIN_ADD: return x + y; \
        case OPTIM__BIN_SUB: return x - y; \
        case OPTIM__BIN_MUL: return x * y; \
        case OPTIM__BIN_DIV: return x / y; \
        default: return (x - y) * (x - y); \
        }                                  \
    }
BIN_REF(float, bin_ref_f)
BIN_REF(double, bin_ref_d)

/* The baseline's forward run (in D[0] from 1, inputs from 1)
 * against the expressions. */
static void bin_check_ref(int op, int di, int64_t len, int sa, int sb)
{
    for (int64_t j = 0; j < len; j++) {
        const int64_t ia = 1 + j * sa, ib = 1 + j * sb, io = 1 + j;
        const double w = di ? bin_ref_d(op, xa[ia], xb[ib]) : bin_ref_f(op, fa[ia], fb[ib]);
        const double got = di ? dd[0][io] : df[0][io];
        if (!(w == got && signbit(w) == signbit(got)) && !(isnan(w) && isnan(got)))
            fail_msg("binary op %d, %s, sa %d sb %d, element %lld: %g, expected %g", op,
                     di ? "float64" : "float32", sa, sb, (long long)j, got, w);
    }
}

/* One binary kernel (fwd, ga or gb: which) of every level into D[0] /
 * D[1], compared. */
static void bin_levels(const optim__tape_table **t, int nt, int which, int op, int di, int64_t len,
                       int sa, int sb)
{
    static const char *names[] = {"binary forward", "binary gradient a", "binary gradient b"};
    int64_t bad0 = -1;
    for (int k = 0; k < nt; k++) {
        const optim__seg_fn f = which == 0 ? t[k]->fwd[op][di]
            : which == 1                   ? t[k]->ga[op][di]
                                           : t[k]->gb[op][di];
        const int r = k ? 1 : 0;
        reset(r);
        optim__bin_ctx c = {A(di), B(di), which ? O(di) : D(di, r), G(di), D(di, r), -1};
        f(&c, 1, 1, 1, len, sa, sb);
        if (!k) bad0 = c.bad;
        else if (c.bad != bad0)
            fail_msg("%s %d, length %lld: table %d stops at %lld, the baseline at %lld",
                     names[which], op, (long long)len, k, (long long)c.bad, (long long)bad0);
        if (k) same(di, names[which], op, k, len);
        else if (which == 0) bin_check_ref(op, di, len, sa, sb);
    }
}

OPTIM_TEST(binary_runs_same_bits_every_level)
{
    const optim__tape_table *t[3];
    const int nt = levels(t);
    fill(xa, fa, 0), fill(xb, fb, 1), fill(xg, fg, 2), fill(xo, fo, 3);
    xg[10] = xg[20] = 0.0, fg[10] = fg[20] = 0.0f; /* zero gradient where y may be 0 */
    for (int op = 0; op < OPTIM__NBIN; op++)
        for (int di = 0; di < 2; di++)
            for (int64_t len = 1; len <= MAXLEN; len++)
                for (int s = 0; s < 4; s++)
                    for (int which = 0; which < 3; which++)
                        bin_levels(t, nt, which, op, di, len, s & 1, s >> 1);
}

/* Unary op `op`'s forward (set < 0) or backward (set 0 or 1) at every
 * level into D[0] / D[1], compared (results and where each stops). */
static void un_levels(const optim__tape_table **t, int nt, int op, int di, int64_t len, int set)
{
    int64_t bad0 = -1;
    const size_t sz = di ? sizeof(double) : sizeof(float);
    for (int k = 0; k < nt; k++) {
        const int r = k ? 1 : 0;
        char *x = (char *)A(di) + sz, *o = (char *)O(di) + 2 * sz, *g = (char *)G(di) + sz;
        char *d = (char *)D(di, r) + OFF * sz;
        reset(r);
        int64_t bad = -1;
        if (set < 0) t[k]->ufwd[op][di](x, d, len);
        else bad = t[k]->ubwd[op][di](x, o, g, d, len, set);
        if (!k) bad0 = bad;
        else if (bad != bad0)
            fail_msg("unary backward %d, length %lld: table %d stops at %lld, the baseline at %lld",
                     op, (long long)len, k, (long long)bad, (long long)bad0);
        if (k)
            same(di,
                 set < 0   ? "unary forward"
                     : set ? "unary first backward"
                           : "unary backward",
                 op, k, len);
    }
}

OPTIM_TEST(unary_same_bits_every_level)
{
    const optim__tape_table *t[3];
    const int nt = levels(t);
    fill(xa, fa, 4), fill(xg, fg, 5), fill(xo, fo, 6);
    xg[7] = 0.0, fg[7] = 0.0f;
    for (int op = 0; op < OPTIM__NUN; op++)
        for (int di = 0; di < 2; di++)
            for (int64_t len = 1; len <= MAXLEN; len++)
                for (int set = -1; set <= 1; set++) un_levels(t, nt, op, di, len, set);
}

/* relu's forward in the baseline: x > 0 ? x : 0 (NaN and -0 give +0). */
OPTIM_TEST(relu_forward_written_out)
{
    fill(xa, fa, 7);
    optim__tape_kernels.ufwd[OPTIM__UN_RELU][0](fa, df[0], N);
    optim__tape_kernels.ufwd[OPTIM__UN_RELU][1](xa, dd[0], N);
    for (int i = 0; i < N; i++) {
        const float wf = fa[i] > 0 ? fa[i] : 0.0f;
        const double wd = xa[i] > 0 ? xa[i] : 0.0;
        if (memcmp(&wf, &df[0][i], sizeof wf) || memcmp(&wd, &dd[0][i], sizeof wd))
            fail_msg("relu of %g at %d: %g and %g, expected %g", xa[i], i, (double)df[0][i],
                     dd[0][i], wd);
    }
}

/* clip (forward and backward) and the first pass at every level. */
static void clip_levels(const optim__tape_table **t, int nt, int di, int64_t len, int which)
{
    const size_t sz = di ? sizeof(double) : sizeof(float);
    for (int k = 0; k < nt; k++) {
        const int r = k ? 1 : 0;
        char *x = (char *)A(di) + sz, *g = (char *)G(di) + 2 * sz;
        char *d = (char *)D(di, r) + OFF * sz;
        reset(r);
        if (which == 0) t[k]->clip_fwd[di](x, d, len, -1.5, 1e-7);
        else if (which == 1) t[k]->clip_bwd[di](x, g, d, len, -1.5, 1e-7);
        else t[k]->pass[di](g, d, len);
        if (k) same(di, "clip / pass", which, k, len);
    }
}

OPTIM_TEST(clip_and_pass_same_bits_every_level)
{
    const optim__tape_table *t[3];
    const int nt = levels(t);
    fill(xa, fa, 8), fill(xg, fg, 9);
    for (int di = 0; di < 2; di++)
        for (int64_t len = 1; len <= MAXLEN; len++)
            for (int which = 0; which < 3; which++) clip_levels(t, nt, di, len, which);
}

/* relu(x + b) over rows x cols, forward and backward (dx written or added,
 * or none; db or none) at every level. */
static void bias_relu_levels(const optim__tape_table **t, int nt, int di, int64_t rows,
                             int64_t cols, int mode)
{
    static double bd[2][N];
    static float bf[2][N];
    const size_t sz = di ? sizeof(double) : sizeof(float);
    for (int k = 0; k < nt; k++) {
        const int r = k ? 1 : 0;
        reset(r);
        for (int i = 0; i < N; i++) bd[r][i] = 0.5 * i - 3, bf[r][i] = (float)bd[r][i];
        void *db = di ? (void *)bd[r] : (void *)bf[r];
        if (mode == 0) t[k]->bias_relu_fwd[di](A(di), (char *)B(di) + sz, D(di, r), rows, cols);
        else
            t[k]->bias_relu_bwd[di](A(di), G(di), mode == 3 ? NULL : D(di, r),
                                    mode == 4 ? NULL : db, rows, cols, mode == 2);
        if (!k) continue;
        same(di, "bias_relu", mode, k, rows * cols);
        if (memcmp(bd[0], bd[1], sizeof bd[0]) || memcmp(bf[0], bf[1], sizeof bf[0]))
            fail_msg("bias_relu bias gradient, %lld x %lld: table %d gives other bits",
                     (long long)rows, (long long)cols, k);
    }
}

OPTIM_TEST(bias_relu_same_bits_every_level)
{
    const optim__tape_table *t[3];
    const int nt = levels(t);
    fill(xa, fa, 10), fill(xb, fb, 11), fill(xg, fg, 12);
    for (int di = 0; di < 2; di++)
        for (int64_t rows = 1; rows <= 3; rows++)
            for (int64_t cols = 1; cols * rows <= N && cols <= 40; cols++)
                for (int mode = 0; mode < 5; mode++) bias_relu_levels(t, nt, di, rows, cols, mode);
}

/* The cross-entropy losses' loops: sigmoid's forward (mode 0) and backward
 * (1: both gradients, 2: x's, 3: z's), softmax's backward (4: rows of
 * len / 3 + 1 columns, labels spread over them). */
static void loss_levels(const optim__tape_table **t, int nt, int di, int64_t len, int mode)
{
    static double ed[2][N];
    static float ef[2][N];
    static int64_t label[N];
    const int64_t cols = len / 3 + 1, rows = len / cols;
    for (int64_t r = 0; r < rows; r++) label[r] = (r * 5) % cols;
    for (int k = 0; k < nt; k++) {
        const int r = k ? 1 : 0;
        reset(r);
        for (int i = 0; i < N; i++) ed[r][i] = 0.25 * i - 7, ef[r][i] = (float)ed[r][i];
        void *e = di ? (void *)ed[r] : (void *)ef[r];
        if (mode == 0) t[k]->bce_fwd[di](A(di), B(di), D(di, r), len);
        else if (mode < 4)
            t[k]->bce_bwd[di](A(di), B(di), G(di), mode == 3 ? NULL : D(di, r),
                              mode == 2 ? NULL : e, len);
        else t[k]->sce_bwd[di](A(di), G(di), label, D(di, r), rows, cols);
        if (!k) continue;
        same(di, "cross-entropy loop", mode, k, len);
        if (memcmp(ed[0], ed[1], sizeof ed[0]) || memcmp(ef[0], ef[1], sizeof ef[0]))
            fail_msg("sigmoid cross-entropy's targets gradient, length %lld: table %d gives other "
                     "bits",
                     (long long)len, k);
    }
}

OPTIM_TEST(losses_same_bits_every_level)
{
    const optim__tape_table *t[3];
    const int nt = levels(t);
    fill(xa, fa, 13), fill(xb, fb, 14), fill(xg, fg, 15);
    for (int di = 0; di < 2; di++)
        for (int64_t len = 1; len <= MAXLEN; len++)
            for (int mode = 0; mode < 5; mode++) loss_levels(t, nt, di, len, mode);
}

int main(void) { return optim_test_run(); }
