/* fit under a replica group: the model's steps go through the group
 * (nn/fit.c splits the batch and scales the loss; see optim__replicas). */
#include "distribute/internal.h"
#include "nn/internal.h"

#include <string.h>

static int apply(void *user, optim_optimizer *opt, const optim_grad_var *pairs, size_t n,
                 optim_error *err)
{
    optim_group *g = user;
    int rc = optim_group_apply_gradients(g, opt, pairs, n, 0);
    return rc
        ? optim__err(err, rc, "optimizer step on rank %d of %d: %s", g->rank, g->size, g->errmsg)
        : OPTIM_OK;
}

static int sum(void *user, double *values, size_t n, optim_error *err)
{
    optim_group *g = user;
    int rc = optim_group_sum(g, values, n);
    return rc ? optim__err(err, rc, "%s", g->errmsg) : OPTIM_OK;
}

int optim_model_distribute(optim_model *m, optim_group *g)
{
    if (!m) return OPTIM_EINVAL;
    m->errmsg[0] = '\0';
    memset(&m->replicas, 0, sizeof m->replicas);
    if (!g) return OPTIM_OK;
    m->replicas = (optim__replicas){g->rank, g->size, apply, sum, g};
    return OPTIM_OK;
}
