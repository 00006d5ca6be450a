/* Adam and AdamW references shared by test_opt_adam.c, test_opt_adamw.c and
 * test_opt_lazyadam.c, written from the published formulas, t = k + 1:
 *
 *   lr_k = lr / (1 + decay * k)                    (decay: legacy only)
 *   decoupled weight decay before the Adam step (AdamW; wd 0: plain Adam):
 *     Keras 3 (keras/src/optimizers/adamw.py + base_optimizer weight decay):
 *       w = w - w * wd * lr
 *     legacy (TF Addons tfa.optimizers.AdamW, DecoupledWeightDecayExtension):
 *       w = w - wd * w  (not times lr); sparse: on the indexed rows only
 *   m = beta_1 * m + (1 - beta_1) * g
 *   v = beta_2 * v + (1 - beta_2) * g^2
 *   vhat = max(vhat, v)                              (amsgrad)
 *   w = w - lr_k * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v or vhat) + epsilon)
 *
 * in double, and the float32 order of operations of each generation (Keras 3
 * Adam.update_step; legacy: TF's ApplyAdam kernel and
 * Adam._resource_apply_sparse), emulated in float. */
#ifndef OPTIM_TEST_REF_ADAM_H
#define OPTIM_TEST_REF_ADAM_H

#include "opt_table.h"

typedef struct ref_adam {
    double lr, b1, b2, eps, wd, decay;
    int ams, legacy;
} ref_adam;

/* One step in double on n elements with this step's beta_1 and weight decay;
 * decay_row[i] says whether element i is decayed (NULL: all). */
void ref_adam_step(const ref_adam *r, int k, double b1, double wd, double *w, double *m, double *v,
                   double *vh, const double *g, const int *decay_row, int n);

/* The drivers' case: state m, v, vhat (vhat absent without amsgrad); legacy
 * sparse with weight decay: a row without a gradient is not decayed. */
ot_case ref_adam_case(const char *json, const ref_adam *r);

/* The float32 trajectory of OT_DENSE_SHRINK (legacy: ApplyAdam; Keras 3:
 * Adam.update_step) with lr, wd and the default betas and epsilon, checked
 * bit for bit against opt's result; returns x's final weights in last_w
 * (OT_DENSE_SHRINK.n floats) when last_w is not NULL. */
void ref_adam_check_dense_f32(const char *json, int legacy, int ams, double lr, double wd,
                              float *last_w);

/* Legacy sparse in float32 on OT_SPARSE_ADAM: the indexed rows decayed
 * (scatter_add of -wd * w), then Adam._resource_apply_sparse moves every
 * row; checked bit for bit against opt's result. */
void ref_adam_check_legacy_sparse_f32(const char *json, int ams, double lr, double wd);

/* TF Addons' two-variable test (weight_decay_optimizers_test.py do_test,
 * lazy_adam_test.py _test_sparse) in f32 and f64: var0 and var1 of n
 * elements from i0 and i1, gradients 0.1 and 0.01 on the nidx rows idx
 * (sparse) or on all n (dense: idx is 0..n-1), 3 steps against the numpy
 * update param * (1 - wd) - lr_t * m / (sqrt(v) + eps) of the indexed rows
 * (lr 0.001, betas 0.9 and 0.999); the other rows keep their bits. */
void ref_adam_check_tfa(const char *json, int sparse, double wd, double eps, const double *i0,
                        const double *i1, int n, const int64_t *idx, int nidx);

#endif
