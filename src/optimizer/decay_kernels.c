/* Keras 3's decoupled weight decay, w = w - w * wd * lr in the variable's
 * dtype (weight_decay.c's optim__decay), built once per instruction-set
 * level (core/isa.h): AdamW's and Muon's steps run it on each chunk before
 * the update, so the baseline's 4-wide loop cost them up to 1.2x against a
 * native build. Plain loops without contraction: the same bits on every
 * level. */
#include "optimizer/impl.h"

static void decay_float(float *w, int64_t n, float wd, float lr)
{
    for (int64_t i = 0; i < n; i++) w[i] = w[i] - w[i] * wd * lr;
}

static void decay_double(double *w, int64_t n, double wd, double lr)
{
    for (int64_t i = 0; i < n; i++) w[i] = w[i] - w[i] * wd * lr;
}

const optim__decay_table OPTIM_ISA_NAME(optim__decay_kernels) = {decay_float, decay_double};
