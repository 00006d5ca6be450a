/* minimize: the example of Keras's Optimizer docstring, in C.
 *
 *     opt = keras.optimizers.SGD(learning_rate=0.1)
 *     var1, var2 = tf.Variable(1.0), tf.Variable(2.0)
 *     loss = lambda: 3 * var1 * var1 + 2 * var2 * var2
 *     opt.minimize(loss, var_list=[var1, var2])
 *
 * The loss is a function that records itself on a tape; optim_minimize
 * runs it, takes the gradients (6 var1 and 4 var2) and applies them. Each
 * step multiplies var1 by 0.4 and var2 by 0.6; the program steps until both
 * are 0 within 1e-6 and exits non-zero if they are not. */
#include <math.h>
#include <stdio.h>

#include <optim/optim.h>

typedef struct model {
    optim_var *var1, *var2;
} model;

/* loss = 3 * var1 * var1 + 2 * var2 * var2 */
static int loss_fn(optim_tape *t, void *user, optim_node **loss)
{
    model *m = user;
    optim_node *v1 = optim_tape_var(t, m->var1), *v2 = optim_tape_var(t, m->var2);
    optim_node *three = optim_tape_scalar(t, OPTIM_F32, 3),
               *two = optim_tape_scalar(t, OPTIM_F32, 2);
    *loss = optim_add(t, optim_mul(t, optim_mul(t, three, v1), v1),
                      optim_mul(t, optim_mul(t, two, v2), v2));
    return *loss ? 0 : OPTIM_EINVAL; /* the reason is in optim_tape_errmsg(t) */
}

int main(void)
{
    optim_error err;
    model m;
    float one = 1.0f, two = 2.0f;
    if (optim_var_create(&m.var1, "var1", OPTIM_F32, 0, NULL, &one, &err) ||
        optim_var_create(&m.var2, "var2", OPTIM_F32, 0, NULL, &two, &err)) {
        fprintf(stderr, "minimize: %s\n", err.msg);
        return 1;
    }
    optim_optimizer *opt;
    if (optim_from_json(&opt, "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1}}",
                        &err)) {
        fprintf(stderr, "minimize: %s\n", err.msg);
        return 1;
    }
    optim_var *var_list[2] = {m.var1, m.var2};
    int rc = 0, converged = 0;
    for (int step = 1; step <= 1000 && !converged; step++) {
        double loss;
        if ((rc = optim_minimize(opt, loss_fn, &m, var_list, 2, NULL, &loss))) {
            fprintf(stderr, "minimize: %s\n", optim_errmsg(opt));
            break;
        }
        double v1 = optim_var_get(m.var1, 0), v2 = optim_var_get(m.var2, 0);
        converged = fabs(v1) < 1e-6 && fabs(v2) < 1e-6;
        if (step <= 3 || step % 5 == 0 || converged)
            printf("step %2d  loss %-12.6g var1 %-12.6g var2 %.6g\n", step, loss, v1, v2);
    }
    if (!rc && !converged) fprintf(stderr, "minimize: var1 and var2 did not reach 0\n");
    else if (!rc)
        printf("var1 = var2 = 0 (within 1e-6) after %lld steps\n",
               (long long)optim_iterations(opt));
    optim_destroy(opt);
    optim_var_destroy(m.var1);
    optim_var_destroy(m.var2);
    return rc || !converged;
}
