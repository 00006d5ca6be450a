/* minimize and loss_and_gradients: Keras's optimizer.minimize(loss,
 * var_list) over a tape.
 *
 * Order as tf-keras's Optimizer.compute_gradients / legacy OptimizerV2.
 * _compute_gradients: a fresh tape; if var_list is a list, watch it; run
 * the loss; if var_list is a callable, call it now (so variables the loss
 * created on its first run are included); gradients; then apply_gradients,
 * which skips None gradients and fails if none is left. */
#include "tape/impl.h"

#include <math.h>
#include <stdlib.h>

#include "optim/optimizer_class.h"

/* Runs loss_fn on t (reset first) with vars watched; *loss set on success. */
static int run_loss(optim_tape *t, const char *who, optim_loss_fn loss_fn, void *user,
                    optim_var *const *vars, size_t n, optim_node **loss, optim_error *err)
{
    optim_tape_reset(t);
    for (size_t i = 0; i < n; i++) {
        int rc = optim_tape_watch(t, vars[i]);
        if (rc) return optim__err(err, rc, "%s: %s", who, optim_tape_errmsg(t));
    }
    *loss = NULL;
    int rc = loss_fn(t, user, loss);
    if (rc)
        return optim__err(err, rc < 0 ? rc : OPTIM_EINVAL, "%s: loss_fn failed (returned %d)%s%s",
                          who, rc, t->errmsg[0] ? ": " : "", t->errmsg);
    if (!*loss)
        return optim__err(err, OPTIM_EINVAL, "%s: loss_fn returned no loss%s%s", who,
                          t->errmsg[0] ? ": " : "", t->errmsg);
    return OPTIM_OK;
}

static int check_vars(const char *who, optim_var *const *vars, size_t n, optim_error *err)
{
    if (n > 0 && !vars)
        return optim__err(err, OPTIM_EINVAL, "%s: vars is NULL with n = %zu", who, n);
    for (size_t i = 0; i < n; i++)
        if (!vars[i]) return optim__err(err, OPTIM_EINVAL, "%s: vars[%zu] is NULL", who, i);
    return OPTIM_OK;
}

int optim_loss_and_gradients(optim_tape *t, optim_loss_fn loss_fn, void *user,
                             optim_var *const *vars, size_t n, optim_grad_var *out,
                             double *loss_value, optim_error *err)
{
    static const char who[] = "optim_loss_and_gradients";
    if (loss_value) *loss_value = NAN;
    if (!t) return optim__err(err, OPTIM_EINVAL, "%s: tape is NULL", who);
    if (!loss_fn) return optim__err(err, OPTIM_EINVAL, "%s: loss_fn is NULL", who);
    int rc = check_vars(who, vars, n, err);
    if (rc) return rc;
    if (n > 0 && !out) return optim__err(err, OPTIM_EINVAL, "%s: out is NULL with n = %zu", who, n);
    optim_node *loss;
    rc = run_loss(t, who, loss_fn, user, vars, n, &loss, err);
    if (rc) return rc;
    if (loss_value) *loss_value = optim_node_scalar(loss);
    rc = optim_tape_gradient(t, loss, vars, n, out);
    if (rc) return optim__err(err, rc, "%s: %s", who, optim_tape_errmsg(t));
    optim__err_clear(err);
    return OPTIM_OK;
}

#define STACK_VARS 64

int optim_minimize(optim_optimizer *opt, optim_loss_fn loss_fn, void *user, optim_var *const *vars,
                   size_t n, optim_var_list_fn var_list_fn, double *loss_value)
{
    static const char who[] = "minimize";
    if (loss_value) *loss_value = NAN;
    if (!opt) return OPTIM_EINVAL;
    if (!loss_fn) return optim_set_error(opt, OPTIM_EINVAL, "%s: loss_fn is NULL", who);
    if (vars && var_list_fn)
        return optim_set_error(
            opt, OPTIM_EINVAL,
            "%s: both vars and var_list_fn were given, expected one (a list or a callable)", who);
    if (!vars && !var_list_fn)
        return optim_set_error(opt, OPTIM_EINVAL,
                               "%s: no variables: vars and var_list_fn are both NULL", who);
    optim_error e;
    int rc = vars ? check_vars(who, vars, n, &e) : OPTIM_OK;
    if (rc) return optim_set_error(opt, rc, "%s", e.msg);

    optim_tape *t = NULL;
    optim_var *stack_vars[STACK_VARS], **list = NULL;
    optim_grad_var stack_pairs[STACK_VARS], *pairs = stack_pairs;
    if ((rc = optim_tape_create(&t, &e))) return optim_set_error(opt, rc, "%s: %s", who, e.msg);
    optim_node *loss;
    rc = run_loss(t, who, loss_fn, user, vars, vars ? n : 0, &loss, &e);
    if (rc) {
        optim_set_error(opt, rc, "%s", e.msg);
        goto done;
    }
    if (loss_value) *loss_value = optim_node_scalar(loss);
    optim_var *const *use = vars;
    size_t count = n;
    if (!vars) {
        count = var_list_fn(user, stack_vars, STACK_VARS);
        use = stack_vars;
        if (count > STACK_VARS) {
            list = malloc(count * sizeof *list);
            if (!list) {
                rc = optim_set_error(opt, OPTIM_ENOMEM, "%s: out of memory", who);
                goto done;
            }
            size_t again = var_list_fn(user, list, count);
            if (again < count) count = again;
            use = list;
        }
        if ((rc = check_vars(who, use, count, &e))) {
            optim_set_error(opt, rc, "%s (from var_list_fn)", e.msg);
            goto done;
        }
    }
    if (count > STACK_VARS && !(pairs = malloc(count * sizeof *pairs))) {
        rc = optim_set_error(opt, OPTIM_ENOMEM, "%s: out of memory", who);
        goto done;
    }
    if ((rc = optim_tape_gradient(t, loss, use, count, pairs))) {
        optim_set_error(opt, rc, "%s: %s", who, optim_tape_errmsg(t));
        goto done;
    }
    rc = optim_apply_gradients(opt, pairs, count, 0);
done:
    if (pairs != stack_pairs) free(pairs);
    free(list);
    optim_tape_destroy(t);
    return rc;
}
