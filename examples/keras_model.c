/* keras_model: the example of Keras's optimizer documentation, in C.
 *
 *     opt = tf.keras.optimizers.SGD(learning_rate=0.1)
 *     model = tf.keras.Sequential()
 *     model.add(tf.keras.layers.Dense(num_hidden, activation='relu'))
 *     model.add(tf.keras.layers.Dense(num_classes, activation='sigmoid'))
 *     loss_fn = lambda: tf.keras.losses.mse(model(input), output)
 *     var_list_fn = lambda: model.trainable_weights
 *     for input, output in data:
 *         opt.minimize(loss_fn, var_list_fn)
 *
 * The model's variables do not exist until its first call, inside loss_fn;
 * optim_minimize asks for the variable list only after the loss ran, so the
 * callback sees them. The data is synthetic and seeded: multi-label targets
 * from a fixed random "teacher". The SGD gets momentum=0.9 (plain SGD at 0.1
 * needs about 4x the steps on this data). Exits non-zero unless the loss
 * falls by at least 10x. */
#include <math.h>
#include <stdio.h>

#include <optim/nn.h>
#include <optim/optim.h>

#define NUM_FEATURES 8
#define NUM_HIDDEN 32
#define NUM_CLASSES 4
#define NUM_SAMPLES 256
#define BATCH 32
#define EPOCHS 100

typedef struct step_data {
    optim_model *model;
    optim_tensor input, output; /* one batch */
} step_data;

/* loss_fn = lambda: mse(model(input), output) */
static int loss_fn(optim_tape *t, void *user, optim_node **loss)
{
    step_data *d = user;
    optim_node *pred;
    optim_error err;
    int rc = optim_model_call(d->model, t, &d->input, 1, &pred);
    if (rc) {
        fprintf(stderr, "model: %s\n", optim_model_errmsg(d->model));
        return rc;
    }
    optim_loss mse = optim_loss_mean_squared_error();
    rc = optim_loss_call(&mse, t, &d->output, pred, NULL, loss, &err);
    if (rc) fprintf(stderr, "loss: %s\n", err.msg);
    return rc;
}

/* var_list_fn = lambda: model.trainable_weights */
static size_t var_list_fn(void *user, optim_var **vars, size_t cap)
{
    const step_data *d = user;
    return optim_model_trainable_variables(d->model, vars, cap);
}

/* A small seeded generator (LCG) for the synthetic data. */
static double uniform(unsigned long long *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) * 0x1.0p-53;
}

int main(void)
{
    static float x[NUM_SAMPLES][NUM_FEATURES], y[NUM_SAMPLES][NUM_CLASSES];
    double teacher[NUM_CLASSES][NUM_FEATURES];
    unsigned long long seed = 42;
    for (int j = 0; j < NUM_CLASSES; j++)
        for (int k = 0; k < NUM_FEATURES; k++) teacher[j][k] = 2 * uniform(&seed) - 1;
    for (int i = 0; i < NUM_SAMPLES; i++) {
        for (int k = 0; k < NUM_FEATURES; k++) x[i][k] = (float)(2 * uniform(&seed) - 1);
        for (int j = 0; j < NUM_CLASSES; j++) {
            double z = 0;
            for (int k = 0; k < NUM_FEATURES; k++) z += teacher[j][k] * x[i][k];
            y[i][j] = z > 0 ? 1.0f : 0.0f;
        }
    }

    optim_error err;
    optim_model *model;
    optim_layer *hidden, *out;
    optim_dense_options d1 = optim_dense_defaults(NUM_HIDDEN),
                        d2 = optim_dense_defaults(NUM_CLASSES);
    d1.activation = OPTIM_ACT_RELU;
    d2.activation = OPTIM_ACT_SIGMOID;
    if (optim_sequential_create(&model, NULL, &err) || optim_dense_create(&hidden, &d1, &err) ||
        optim_dense_create(&out, &d2, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (optim_sequential_add(model, hidden) || optim_sequential_add(model, out)) {
        fprintf(stderr, "%s\n", optim_model_errmsg(model));
        return 1;
    }
    optim_optimizer *opt;
    if (optim_from_json(
            &opt,
            "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9}}",
            &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("before the first call: %zu variables\n",
           optim_model_trainable_variables(model, NULL, 0));

    double first = NAN, last = NAN;
    for (int epoch = 0; epoch < EPOCHS; epoch++) {
        double sum = 0;
        for (int b = 0; b < NUM_SAMPLES / BATCH; b++) { /* for input, output in data: */
            step_data sd = {
                model,
                optim_tensor_make(OPTIM_F32, x[b * BATCH], 2, (int64_t[]){BATCH, NUM_FEATURES}),
                optim_tensor_make(OPTIM_F32, y[b * BATCH], 2, (int64_t[]){BATCH, NUM_CLASSES})};
            double loss;
            if (optim_minimize(opt, loss_fn, &sd, NULL, 0, var_list_fn, &loss)) {
                fprintf(stderr, "minimize: %s\n", optim_errmsg(opt));
                return 1;
            }
            sum += loss;
        }
        double mean = sum / (NUM_SAMPLES / BATCH);
        if (epoch == 0) {
            first = mean;
            printf("after the first call: %zu variables\n",
                   optim_model_trainable_variables(model, NULL, 0));
        }
        last = mean;
        if (epoch % 30 == 0 || epoch == EPOCHS - 1)
            printf("epoch %3d  mse %.5f\n", epoch + 1, mean);
    }
    optim_model_summary(model, stdout);
    printf("loss %.5f -> %.5f (%.1fx lower) in %lld steps\n", first, last, first / last,
           (long long)optim_iterations(opt));
    optim_destroy(opt);
    optim_model_destroy(model);
    if (!(last * 10 <= first)) {
        fprintf(stderr, "keras_model: the loss did not fall by 10x\n");
        return 1;
    }
    return 0;
}
