/* quickstart: fit y = 3x + 2 with Keras's SGD (momentum 0.9), gradients of
 * the mean squared error written by hand, the optimizer from Keras JSON.
 * Exits non-zero if the fit does not converge. */
#include <math.h>
#include <stdio.h>

#include <optim/optim.h>

#define N 64

int main(void)
{
    float x[N], y[N];
    for (int i = 0; i < N; i++) {
        x[i] = -1.0f + 2.0f * (float)i / (N - 1);
        y[i] = 3.0f * x[i] + 2.0f + 0.01f * sinf(37.0f * (float)i); /* a little noise */
    }

    optim_error err;
    optim_var *w, *b;
    if (optim_var_create(&w, "dense/kernel", OPTIM_F32, 0, NULL, NULL, &err) ||
        optim_var_create(&b, "dense/bias", OPTIM_F32, 0, NULL, NULL, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    optim_optimizer *opt;
    const char *config = "{\"class_name\": \"SGD\", \"config\": "
                         "{\"learning_rate\": 0.05, \"momentum\": 0.9, \"clipnorm\": 10.0}}";
    if (optim_from_json(&opt, config, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }

    float loss = 0;
    for (int epoch = 0; epoch < 200; epoch++) {
        float *wv = optim_var_data(w), *bv = optim_var_data(b);
        float gw = 0, gb = 0;
        loss = 0;
        for (int i = 0; i < N; i++) {
            float e = *wv * x[i] + *bv - y[i];
            loss += e * e / N;
            gw += 2 * e * x[i] / N;
            gb += 2 * e / N;
        }
        optim_grad_var pairs[2] = {
            {optim_grad_dense(optim_tensor_make(OPTIM_F32, &gw, 0, NULL)), w},
            {optim_grad_dense(optim_tensor_make(OPTIM_F32, &gb, 0, NULL)), b},
        };
        if (optim_apply_gradients(opt, pairs, 2, 0)) {
            fprintf(stderr, "%s\n", optim_errmsg(opt));
            return 1;
        }
        if (epoch % 40 == 0) printf("epoch %3d  loss %.6f\n", epoch, loss);
    }
    double wf = optim_var_get(w, 0), bf = optim_var_get(b, 0);
    char *json = optim_serialize(opt);
    printf("after %lld steps: w = %.4f, b = %.4f, loss %.6f\n", (long long)optim_iterations(opt),
           wf, bf, loss);
    printf("optimizer: %s\n", json);
    optim_free(json);
    optim_destroy(opt);
    optim_var_destroy(w);
    optim_var_destroy(b);
    if (fabs(wf - 3.0) > 1e-2 || fabs(bf - 2.0) > 1e-2) {
        fprintf(stderr, "quickstart: did not converge\n");
        return 1;
    }
    return 0;
}
