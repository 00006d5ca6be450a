/* The tape's element-wise inner loops, built once per instruction-set
 * level (elementwise_kernels.c, core/isa.h) and reached through one table:
 * the binary ops over a broadcast plan's contiguous runs (elementwise.c
 * keeps the plan and its odometer), the unary ops, clip, the first
 * gradient pass, the fused relu(x + bias) (activations.c) and the
 * cross-entropy losses' element loops (losses.c). Each loop is
 * element by element, or a sum in the elements' order, so every level
 * gives the same bits. */
#ifndef OPTIM_TAPE_KERNELS_H
#define OPTIM_TAPE_KERNELS_H

#include <stdint.h>

#include "core/isa.h"

/* A binary op's operands: a, b, the result out and its gradient g; dst
 * the side's gradient (backward); bad: the first result element without a
 * gradient, -1 if none. */
typedef struct optim__bin_ctx {
    const void *a, *b, *out, *g;
    void *dst;
    int64_t bad;
} optim__bin_ctx;

/* A contiguous run of len result elements from po; inputs from pa and pb,
 * advancing when sa / sb is 1 (staying when 0). */
typedef void (*optim__seg_fn)(optim__bin_ctx *c, int64_t po, int64_t pa, int64_t pb, int64_t len,
                              int sa, int sb);

/* Forward o = f(x) over n elements; backward d += g * f'(x) (given x, o
 * and g; with set, d = 0 + g * f'(x): the first contribution, d
 * uninitialised), returning the first element where the gradient is
 * undefined, or -1. */
typedef void (*optim__unary_fwd_fn)(const void *x, void *o, int64_t n);
typedef int64_t (*optim__unary_bwd_fn)(const void *x, const void *o, const void *g, void *d,
                                       int64_t n, int set);

enum {
    OPTIM__BIN_ADD,
    OPTIM__BIN_SUB,
    OPTIM__BIN_MUL,
    OPTIM__BIN_DIV,
    OPTIM__BIN_SQERR,
    OPTIM__NBIN
};
enum {
    OPTIM__UN_NEG,
    OPTIM__UN_SQUARE,
    OPTIM__UN_SQRT,
    OPTIM__UN_EXP,
    OPTIM__UN_LOG,
    OPTIM__UN_TANH,
    OPTIM__UN_SIGMOID,
    OPTIM__UN_RELU,
    OPTIM__UN_GELU,
    OPTIM__UN_GELU_TANH,
    OPTIM__UN_SILU,
    OPTIM__NUN
};

/* [op][0] float32, [op][1] float64. */
typedef struct optim__tape_table {
    optim__seg_fn fwd[OPTIM__NBIN][2], ga[OPTIM__NBIN][2], gb[OPTIM__NBIN][2];
    optim__unary_fwd_fn ufwd[OPTIM__NUN][2];
    optim__unary_bwd_fn ubwd[OPTIM__NUN][2];
    /* y = x < lo ? lo : x > hi ? hi : x; d += g where lo <= x <= hi (the
     * bounds converted to the dtype) */
    void (*clip_fwd[2])(const void *x, void *y, int64_t n, double lo, double hi);
    void (*clip_bwd[2])(const void *x, const void *g, void *d, int64_t n, double lo, double hi);
    /* d = 0 + g (a first contribution of g itself) */
    void (*pass[2])(const void *g, void *d, int64_t n);
    /* y = relu(x + b) over rows of cols (b of cols); backward: 0 + (y > 0 ?
     * g : 0) into dx (written when set) and db (summed over the rows in
     * order), each skipped when NULL */
    void (*bias_relu_fwd[2])(const void *x, const void *b, void *y, int64_t rows, int64_t cols);
    void (*bias_relu_bwd[2])(const void *y, const void *g, void *dx, void *db, int64_t rows,
                             int64_t cols, int set);
    /* sigmoid cross-entropy (losses.c): o = max(x, 0) - x z + log1p(exp(-|x|));
     * backward dx += g (sigmoid(x) - z), dz += -(g x), each skipped when
     * NULL */
    void (*bce_fwd[2])(const void *x, const void *z, void *o, int64_t n);
    void (*bce_bwd[2])(const void *x, const void *z, const void *g, void *dx, void *dz, int64_t n);
    /* softmax cross-entropy's backward (losses.c): dx += g[r] p over each
     * row r of cols, then dx[label[r]] -= g[r] */
    void (*sce_bwd[2])(const void *p, const void *g, const int64_t *label, void *dx, int64_t rows,
                       int64_t cols);
} optim__tape_table;
OPTIM__ISA_DECLARE(optim__tape_table, optim__tape_kernels);

/* The table of the level in use. */
#define OPTIM__TAPE_K() OPTIM__ISA_TABLE(optim__tape_kernels)

#endif
