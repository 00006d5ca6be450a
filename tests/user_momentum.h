/* A user's element-wise SGD with momentum 0.9, float32 only (tests that
 * need a user class: include in one test file per executable). */
#ifndef OPTIM_TESTS_USER_MOMENTUM_H
#define OPTIM_TESTS_USER_MOMENTUM_H

#include "optim/optim.h"

typedef struct ucoef {
    double lr;
} ucoef;

static int u_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    return optim_add_slot(opt, var, "momentum", OPTIM_SLOT_ZEROS, 0);
}

static void u_prepare(optim_optimizer *opt, optim_dtype dt, void *c)
{
    ((ucoef *)c)->lr = optim_learning_rate(opt, dt);
}

static void u_dense(const optim_dense_update *u)
{
    const float lr = (float)((const ucoef *)u->coef)->lr;
    float *w = u->param, *m = u->slots[0];
    const float *g = u->grad;
    for (int64_t i = 0; i < u->count; i++) {
        m[i] = 0.9f * m[i] - lr * g[i];
        w[i] = w[i] + m[i];
    }
}

#endif
