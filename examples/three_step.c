/* three_step: Keras's "processing gradients before applying them", in C.
 *
 *     with tf.GradientTape() as tape:
 *         loss = <call_loss_function>
 *     grads = tape.gradient(loss, vars)
 *     grads, _ = tf.clip_by_global_norm(grads, 1.0)   # process them
 *     opt.apply_gradients(zip(grads, vars))
 *
 * A linear regression y = x w + b (3 features) fitted by mean squared
 * error: the gradients come from a tape, are clipped by their global norm
 * here (tf.clip_by_global_norm's rule: g * clip / max(norm, clip)), then
 * handed to SGD. Exits non-zero unless w and b are recovered. */
#include <math.h>
#include <stdio.h>

#include <optim/optim.h>

#define N 64
#define F 3

/* Scales every gradient by clip / max(global norm, clip); returns the norm. */
static double clip_by_global_norm(optim_grad_var *g, size_t n, double clip)
{
    double sq = 0;
    for (size_t i = 0; i < n; i++) {
        const float *d = g[i].grad.dense.data;
        int64_t k = optim_tensor_numel(&g[i].grad.dense);
        for (int64_t j = 0; j < k; j++) sq += (double)d[j] * d[j];
    }
    double norm = sqrt(sq), scale = clip / fmax(norm, clip);
    for (size_t i = 0; i < n; i++) {
        float *d = g[i].grad.dense.data; /* the tape's memory: ours to change */
        int64_t k = optim_tensor_numel(&g[i].grad.dense);
        for (int64_t j = 0; j < k; j++) d[j] = (float)(d[j] * scale);
    }
    return norm;
}

int main(void)
{
    const float w_true[F] = {2.0f, -3.0f, 0.5f}, b_true = 1.5f;
    float x[N * F], y[N];
    for (int i = 0; i < N; i++) {
        y[i] = b_true;
        for (int j = 0; j < F; j++) {
            x[i * F + j] = (float)sin(1.3 * i * (j + 1) + 0.7 * j);
            y[i] += w_true[j] * x[i * F + j];
        }
    }
    optim_error err;
    optim_var *w, *b;
    if (optim_var_create(&w, "dense/kernel", OPTIM_F32, 2, (int64_t[]){F, 1}, NULL, &err) ||
        optim_var_create(&b, "dense/bias", OPTIM_F32, 1, (int64_t[]){1}, NULL, &err)) {
        fprintf(stderr, "three_step: %s\n", err.msg);
        return 1;
    }
    optim_optimizer *opt;
    if (optim_from_json(&opt, "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1}}",
                        &err)) {
        fprintf(stderr, "three_step: %s\n", err.msg);
        return 1;
    }
    optim_tape *t;
    if (optim_tape_create(&t, &err)) {
        fprintf(stderr, "three_step: %s\n", err.msg);
        return 1;
    }
    optim_tensor xs = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){N, F});
    optim_tensor ys = optim_tensor_make(OPTIM_F32, y, 2, (int64_t[]){N, 1});
    optim_var *vars[2] = {w, b};
    double loss = NAN;
    int rc = 0;
    for (int step = 0; step < 300; step++) {
        /* 1. the gradients, from a tape */
        optim_tape_reset(t);
        optim_node *pred =
            optim_add(t, optim_matmul(t, optim_tape_const(t, &xs), optim_tape_var(t, w), 0, 0),
                      optim_tape_var(t, b));
        optim_node *l =
            optim_mean(t, optim_squared_error(t, pred, optim_tape_const(t, &ys)), OPTIM_ALL_AXES);
        optim_grad_var g[2];
        if ((rc = optim_tape_gradient(t, l, vars, 2, g))) {
            fprintf(stderr, "three_step: %s\n", optim_tape_errmsg(t));
            break;
        }
        loss = optim_node_scalar(l);
        /* 2. process them */
        double norm = clip_by_global_norm(g, 2, 1.0);
        /* 3. apply them */
        if ((rc = optim_apply_gradients(opt, g, 2, 0))) {
            fprintf(stderr, "three_step: %s\n", optim_errmsg(opt));
            break;
        }
        if (step % 50 == 0) printf("step %3d  loss %-12.6g gradient norm %.4g\n", step, loss, norm);
    }
    int ok = !rc && fabs(optim_var_get(b, 0) - b_true) < 1e-3;
    for (int j = 0; j < F; j++) ok &= fabs(optim_var_get(w, j) - w_true[j]) < 1e-3;
    if (!rc)
        printf("w = [%.4f, %.4f, %.4f] (true [2, -3, 0.5]), b = %.4f (true 1.5), loss %.3g\n",
               optim_var_get(w, 0), optim_var_get(w, 1), optim_var_get(w, 2), optim_var_get(b, 0),
               loss);
    if (!rc && !ok) fprintf(stderr, "three_step: the regression did not converge\n");
    optim_tape_destroy(t);
    optim_destroy(opt);
    optim_var_destroy(w);
    optim_var_destroy(b);
    return !ok;
}
