/* The callbacks' on_train_batch_gradients hook of fit: it sees each
 * training batch's loss and gradients before the optimizer step, checked
 * against a closed form (a linear model under mean squared error: loss =
 * mean (x.k + b - y)^2, dk = 2/B sum (x.k + b - y) x, db = 2/B sum (x.k + b
 * - y)), and a hooks table of the earlier size is still taken. */
#include <math.h>
#include <string.h>

#include "optim/optim.h"
#include "testutil.h"

#define N 6
#define B 3
#define F 3

static const double X[N][F] = {{1, 2, -1},    {0.5, -1, 2}, {3, 0, 1},
                               {-2, 1, 0.25}, {1, 1, 1},    {0, -3, 2}};
static const double Y[N] = {1, -2, 0.5, 3, -1, 2};

typedef struct seen {
    int calls;
    double k[F], b, dk[F], db; /* at the last call */
    double lr;
    int64_t fail_at; /* the call (1-based) that fails; 0: none */
    int64_t it0; /* the optimizer's iterations before fit */
} seen;

static int on_grads(void *user, optim_model *m, int64_t batch, double loss, const optim_grad_var *g,
                    size_t n, optim_error *err)
{
    seen *s = user;
    assert_int_equal(n, 2);
    assert_int_equal(g[0].grad.kind, OPTIM_GRAD_DENSE);
    assert_int_equal(g[1].grad.kind, OPTIM_GRAD_DENSE);
    const double *k = optim_var_cdata(g[0].var), *b = optim_var_cdata(g[1].var);
    if (s->calls) /* the previous step applied SGD's rule with the gradients seen then */
        for (int j = 0; j < F; j++) assert_close(k[j], s->k[j] - s->lr * s->dk[j], 1e-12, 1e-15);
    s->calls++;
    assert_eq(optim_iterations(optim_model_optimizer(m)),
              s->it0 + s->calls - 1); /* before the step */
    if (s->fail_at == s->calls) {
        snprintf(err->msg, sizeof err->msg, "hook refuses batch %lld", (long long)batch);
        return OPTIM_EINVAL;
    }
    double want = 0, dk[F] = {0}, db = 0;
    for (int i = 0; i < B; i++) {
        const int r = (int)batch * B + i; /* no shuffling */
        double e = b[0] - Y[r];
        for (int j = 0; j < F; j++) e += X[r][j] * k[j];
        want += e * e / B;
        for (int j = 0; j < F; j++) dk[j] += 2 * e * X[r][j] / B;
        db += 2 * e / B;
    }
    assert_close(loss, want, 1e-12, 1e-15);
    const double *gk = g[0].grad.dense.data, *gb = g[1].grad.dense.data;
    for (int j = 0; j < F; j++) assert_close(gk[j], dk[j], 1e-12, 1e-15);
    assert_close(gb[0], db, 1e-12, 1e-15);
    memcpy(s->k, k, sizeof s->k), memcpy(s->dk, gk, sizeof s->dk);
    s->b = b[0], s->db = gb[0];
    assert_ok(optim_get_hyper(optim_model_optimizer(m), "learning_rate", &s->lr), NULL);
    return 0;
}

static optim_model *linear_model(optim_optimizer *opt)
{
    optim_sequential_options so = optim_sequential_defaults();
    so.dtype = OPTIM_F64;
    so.seed = 3;
    optim_model *m;
    optim_layer *l;
    optim_error err;
    assert_ok(optim_sequential_create(&m, &so, &err), &err);
    optim_dense_options d = optim_dense_defaults(1);
    assert_ok(optim_dense_create(&l, &d, &err), &err);
    assert_ok(optim_sequential_add(m, l), m);
    optim_loss mse = optim_loss_mean_squared_error();
    assert_ok(optim_model_compile(m, opt, &mse, OPTIM_METRIC_NONE), m);
    return m;
}

static int fit(optim_model *m, optim_callback *cb)
{
    static double x[N * F], y[N];
    memcpy(x, X, sizeof x), memcpy(y, Y, sizeof y);
    optim_tensor xt = optim_tensor_make(OPTIM_F64, x, 2, (int64_t[]){N, F});
    optim_tensor yt = optim_tensor_make(OPTIM_F64, y, 2, (int64_t[]){N, 1});
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = 1, fo.batch_size = B, fo.shuffle = 0, fo.callbacks = &cb, fo.n_callbacks = 1;
    return optim_model_fit(m, &xt, &yt, &fo, NULL);
}

static optim_callback *hook_cb(seen *s, uint32_t size)
{
    optim_callback_hooks h;
    memset(&h, 0, sizeof h);
    h.size = size;
    h.on_train_batch_gradients = on_grads;
    optim_callback *cb = NULL;
    optim_error err;
    int rc = optim_callback_create(&cb, &h, s, &err);
    return rc ? NULL : cb;
}

OPTIM_TEST(test_hook_sees_loss_and_gradients_before_the_step)
{
    optim_optimizer *opt = optim_test_make("{\"class_name\": \"SGD\", \"config\": "
                                           "{\"learning_rate\": 0.05}}");
    optim_model *m = linear_model(opt);
    seen s = {0};
    optim_callback *cb = hook_cb(&s, sizeof(optim_callback_hooks));
    assert_non_null(cb);
    assert_ok(fit(m, cb), m);
    assert_int_equal(s.calls, N / B);
    assert_close(s.lr, 0.05, 0, 0);
    optim_callback_destroy(cb);
    /* a failing hook stops fit before that batch's step */
    memset(&s, 0, sizeof s);
    s.fail_at = 1;
    int64_t it = optim_iterations(opt);
    s.it0 = it;
    cb = hook_cb(&s, sizeof(optim_callback_hooks));
    assert_status(fit(m, cb), OPTIM_EINVAL, m);
    assert_string_equal(optim_model_errmsg(m), "hook refuses batch 0");
    assert_eq(optim_iterations(opt), it);
    optim_callback_destroy(cb);
    optim_model_destroy(m);
    optim_destroy(opt);
}

OPTIM_TEST(test_hooks_table_of_the_earlier_size)
{
    optim_optimizer *opt = optim_test_make("\"sgd\"");
    optim_model *m = linear_model(opt);
    seen s = {0};
    /* the earlier table ends before the hook: what lies past it is not read */
    optim_callback *cb = hook_cb(&s, (uint32_t)OPTIM_CALLBACK_HOOKS_V1_SIZE);
    assert_non_null(cb);
    assert_ok(fit(m, cb), m);
    assert_int_equal(s.calls, 0);
    assert_eq(optim_iterations(opt), N / B);
    optim_callback_destroy(cb);
    assert_null(hook_cb(&s, (uint32_t)OPTIM_CALLBACK_HOOKS_V1_SIZE + 1));
    assert_null(hook_cb(&s, (uint32_t)sizeof(optim_callback_hooks) + 8));
    optim_model_destroy(m);
    optim_destroy(opt);
}

int main(void) { return optim_test_run(); }
