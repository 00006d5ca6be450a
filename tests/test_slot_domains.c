/* Slot domains (optim_class.nonnegative_slots, version 4): set_weights
 * refuses a negative or NaN value in a slot its class declares
 * non-negative (Adam's "v"), naming the weight, the element, the value and
 * the rule, and changes nothing; a signed slot (Adam's "m") takes any
 * value; every built-in's marked slots refuse -1 and its other slots take
 * it; a user class declares its own; a table shorter than the field reads
 * it as absent; registration refuses a malformed name. */
#include "testutil.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"
#include "optim/optimizer_class.h"

#define MAXW 32

static size_t nbytes(const optim_tensor *t)
{
    return (size_t)optim_tensor_numel(t) * optim_dtype_size(t->dtype);
}

typedef struct snapshot {
    size_t n;
    optim_tensor t[MAXW];
    void *data[MAXW];
} snapshot;

/* A copy of opt's weights (data owned by the snapshot). */
static void take(optim_optimizer *opt, snapshot *s)
{
    s->n = optim_get_weights(opt, s->t, MAXW);
    assert_true(s->n <= MAXW);
    for (size_t i = 0; i < s->n; i++) {
        size_t bytes = nbytes(&s->t[i]);
        s->data[i] = malloc(bytes ? bytes : 1);
        memcpy(s->data[i], s->t[i].data, bytes);
        s->t[i].data = s->data[i];
    }
}

static void drop(snapshot *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->data[i]);
}

/* opt's weights are bit for bit the snapshot's. */
static void same(optim_optimizer *opt, const snapshot *s)
{
    optim_tensor now[MAXW];
    assert_eq(optim_get_weights(opt, now, MAXW), s->n);
    for (size_t i = 0; i < s->n; i++)
        assert_memory_equal(now[i].data, s->t[i].data, nbytes(&s->t[i]));
}

/* Element 0 of weight i of the snapshot <- v (F32 or F64). */
static void poke(snapshot *s, size_t i, size_t k, double v)
{
    if (s->t[i].dtype == OPTIM_F32) ((float *)s->data[i])[k] = (float)v;
    else ((double *)s->data[i])[k] = v;
}

static const double bvals[6] = {0.5, -1, 2, 0.25, 1.5, -0.75};

/* One step on a vector and a matrix (Adafactor factors it, Muon orthogonalises it). */
static void step(optim_optimizer *opt, optim_var *a, optim_var *b)
{
    static const float ga[3] = {0.5f, -0.25f, 1.0f}, gb[6] = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f};
    optim_grad_var pairs[2] = {
        {optim_grad_dense(optim_tensor_make(OPTIM_F32, (void *)ga, 1, (int64_t[]){3})), a},
        {optim_grad_dense(optim_tensor_make(OPTIM_F32, (void *)gb, 2, (int64_t[]){2, 3})), b},
    };
    assert_ok(optim_apply_gradients(opt, pairs, 2, 0), opt);
}

OPTIM_TEST(negative_v_refused_state_unchanged)
{
    optim_optimizer *opt = optim_test_make("\"adam\"");
    optim_var *a = optim_test_var("a", OPTIM_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    optim_var *b = optim_test_var("b", OPTIM_F32, 2, (int64_t[]){2, 3}, bvals);
    step(opt, a, b);
    snapshot before, w;
    take(opt, &before);
    take(opt, &w);
    size_t iv = 0;
    for (size_t i = 1; i < w.n; i++)
        if (strcmp(optim_weight_name(opt, i), "a/v") == 0) iv = i;
    assert_true(iv > 0);
    *(int64_t *)w.data[0] = 7; /* would change iterations */
    poke(&w, iv, 1, -1.0);
    assert_status(optim_set_weights(opt, w.t, w.n), OPTIM_ERANGE, opt);
    assert_contains(optim_errmsg(opt), "'a/v'");
    assert_contains(optim_errmsg(opt), "element 1 is -1");
    assert_contains(optim_errmsg(opt), ">= 0");
    assert_contains(optim_errmsg(opt), "slot 'v'");
    same(opt, &before);
    poke(&w, iv, 1, NAN);
    assert_status(optim_set_weights(opt, w.t, w.n), OPTIM_ERANGE, opt);
    assert_contains(optim_errmsg(opt), "element 1 is nan");
    same(opt, &before);
    poke(&w, iv, 1, -0.0); /* -0 >= 0 */
    assert_ok(optim_set_weights(opt, w.t, w.n), opt);
    assert_eq(optim_iterations(opt), 7);
    drop(&w);
    drop(&before);
    optim_test_free(opt, a, b);
}

static int marked(const optim_class *c, const char *weight_name)
{
    const char *slash = strrchr(weight_name, '/');
    for (size_t k = 0; slash && c->nonnegative_slots && c->nonnegative_slots[k]; k++)
        if (strcmp(c->nonnegative_slots[k], slash + 1) == 0) return 1;
    return 0;
}

/* Every weight of the optimizer of `json`: -1 in a marked slot is refused,
 * in any other weight taken. Returns how many were refused. */
static int try_each_weight(const char *json)
{
    optim_optimizer *opt = optim_test_make(json);
    optim_var *a = optim_test_var("a", OPTIM_F32, 1, (int64_t[]){3}, (double[]){1, 2, 3});
    optim_var *b = optim_test_var("b", OPTIM_F32, 2, (int64_t[]){2, 3}, bvals);
    step(opt, a, b);
    int refused = 0;
    snapshot w;
    take(opt, &w);
    for (size_t i = 1; i < w.n; i++) {
        snapshot before;
        take(opt, &before);
        poke(&before, i, 0, -1.0);
        const char *name = optim_weight_name(opt, i);
        int rc = optim_set_weights(opt, before.t, before.n);
        if (marked(optim_class_of(opt), name)) {
            if (rc != OPTIM_ERANGE) print_error("%s: %s took -1\n", json, name);
            assert_status(rc, OPTIM_ERANGE, opt);
            assert_contains(optim_errmsg(opt), name);
            refused++;
        } else {
            if (rc) print_error("%s: %s refused -1\n", json, name);
            assert_ok(rc, opt);
        }
        assert_ok(optim_set_weights(opt, w.t, w.n), opt);
        drop(&before);
    }
    drop(&w);
    optim_test_free(opt, a, b);
    return refused;
}

OPTIM_TEST(builtin_marked_slots_refuse_minus_one)
{
    static const struct {
        const char *json;
        int refused; /* marked slots: per variable, times 2 variables */
    } cases[] = {
        {"\"adam\"", 2},
        {"{\"class_name\": \"Adam\", \"config\": {\"amsgrad\": true}}", 4},
        {"{\"class_name\": \"Adam\", \"config\": {\"amsgrad\": true, \"is_legacy_optimizer\": "
         "true}}",
         4},
        {"{\"class_name\": \"AdamW\", \"config\": {\"amsgrad\": true}}", 4},
        {"\"lazyadam\"", 2},
        {"\"nadam\"", 2},
        {"{\"class_name\": \"Nadam\", \"config\": {\"is_legacy_optimizer\": true}}", 2},
        {"\"adamax\"", 2},
        {"\"lamb\"", 2},
        {"\"ftrl\"", 2},
        {"{\"class_name\": \"Ftrl\", \"config\": {\"is_legacy_optimizer\": true}}", 2},
        {"\"scheduleFreeAdamW\"", 2},
        {"\"muon\"", -1}, /* velocity only for Muon's AdamW variables */
        {"\"novograd\"", 2}, /* v: one scalar per variable */
        {"{\"class_name\": \"NovoGrad\", \"config\": {\"amsgrad\": true}}", 4},
        {"{\"class_name\": \"ConditionalGradient\", \"config\": {\"ord\": \"nuclear\"}}", 0},
        /* Not marked: a hyperparameter can drive them negative (rho or
         * beta_2_decay outside [0, 1], epsilon_1 < 0, Keras 3 Adagrad's
         * initial_accumulator_value < 0). */
        {"{\"class_name\": \"RMSprop\", \"config\": {\"momentum\": 0.5, \"centered\": true}}", 0},
        {"\"adagrad\"", 0},
        {"\"adadelta\"", 0},
        {"\"adafactor\"", 0},
        {"\"sgd\"", 0},
        {"\"lion\"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int n = try_each_weight(cases[i].json);
        if (cases[i].refused >= 0 && n != cases[i].refused)
            print_error("%s: %d refused, expected %d\n", cases[i].json, n, cases[i].refused);
        if (cases[i].refused >= 0) assert_eq(n, cases[i].refused);
        else assert_true(n >= 1);
    }
}

/* ---- a user class: acc += g^2, w -= lr * g / sqrt(acc + 1) ---------------- */

static int user_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    int rc = optim_add_slot(opt, var, "acc", OPTIM_SLOT_ZEROS, 0);
    return rc ? rc : optim_add_slot(opt, var, "sum", OPTIM_SLOT_ZEROS, 0);
}

static void user_prepare(optim_optimizer *opt, optim_dtype dt, void *c)
{
    *(double *)c = optim_learning_rate(opt, dt);
}

static void user_dense(const optim_dense_update *u)
{
    double lr = *(const double *)u->coef;
    for (int64_t i = 0; i < u->count; i++) {
        if (u->dtype == OPTIM_F32) {
            float *w = u->param, *acc = u->slots[0], *sum = u->slots[1];
            const float *g = u->grad;
            acc[i] += g[i] * g[i];
            sum[i] += g[i];
            w[i] -= (float)lr * g[i] / sqrtf(acc[i] + 1.0f);
        } else {
            double *w = u->param, *acc = u->slots[0], *sum = u->slots[1];
            const double *g = u->grad;
            acc[i] += g[i] * g[i];
            sum[i] += g[i];
            w[i] -= lr * g[i] / sqrt(acc[i] + 1.0);
        }
    }
}

static const char *const user_domains[] = {"acc", NULL};

static optim_class user_class(void)
{
    return (optim_class){
        .size = sizeof(optim_class),
        .version = OPTIM_CLASS_VERSION,
        .name = "DomainUser",
        .flags = OPTIM_CLASS_ELEMENTWISE,
        .default_learning_rate = 0.1,
        .coef_size = sizeof(double),
        .create_slots = user_slots,
        .prepare = user_prepare,
        .apply_dense = user_dense,
        .nonnegative_slots = user_domains,
    };
}

/* Sets element 0 of w's slot `slot` to -2 through set_weights; returns rc. */
static int set_minus_two(optim_optimizer *opt, const char *weight)
{
    snapshot s;
    take(opt, &s);
    for (size_t i = 1; i < s.n; i++)
        if (strcmp(optim_weight_name(opt, i), weight) == 0) poke(&s, i, 0, -2.0);
    int rc = optim_set_weights(opt, s.t, s.n);
    drop(&s);
    return rc;
}

OPTIM_TEST(user_class_declares_a_domain)
{
    optim_class c = user_class();
    optim_error err;
    assert_ok(optim_register_class(&c, &err), &err);
    optim_optimizer *opt = NULL;
    assert_ok(optim_from_json(&opt, "{\"class_name\": \"DomainUser\", \"config\": {}}", &err),
              &err);
    optim_var *a = optim_test_var("a", OPTIM_F64, 1, (int64_t[]){2}, (double[]){1, 2});
    double g[2] = {0.5, -1};
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, (int64_t[]){2})), a};
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    assert_status(set_minus_two(opt, "a/acc"), OPTIM_ERANGE, opt);
    assert_contains(optim_errmsg(opt), "('a/acc') element 0 is -2, expected >= 0");
    assert_ok(set_minus_two(opt, "a/sum"), opt);
    optim_test_free(opt, a);
}

OPTIM_TEST(shorter_table_reads_no_domain)
{
    optim_class c = user_class();
    c.name = "DomainShort";
    /* A table compiled before the field: what follows its size is garbage. */
    size_t size = offsetof(optim_class, nonnegative_slots);
    unsigned char *buf = malloc(sizeof(optim_class));
    memset(buf, 0xA5, sizeof(optim_class));
    memcpy(buf, &c, size);
    ((optim_class *)buf)->size = (uint32_t)size;
    optim_optimizer *opt = NULL;
    optim_error err;
    assert_ok(optim_create(&opt, (const optim_class *)buf, NULL, &err), &err);
    free(buf);
    optim_var *a = optim_test_var("a", OPTIM_F64, 1, (int64_t[]){2}, (double[]){1, 2});
    double g[2] = {0.5, -1};
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F64, g, 1, (int64_t[]){2})), a};
    assert_ok(optim_apply_gradients(opt, &p, 1, 0), opt);
    assert_ok(set_minus_two(opt, "a/acc"), opt);
    optim_test_free(opt, a);
}

OPTIM_TEST(registration_refuses_a_bad_domain)
{
    static const char *const empty[] = {"acc", "", NULL}, *const path[] = {"w/acc", NULL};
    const char *const *bad[] = {empty, path};
    const char *needle[] = {"nonnegative_slots[1] is \"\"", "nonnegative_slots[0] is \"w/acc\""};
    for (size_t i = 0; i < 2; i++) {
        optim_class c = user_class();
        c.name = "DomainBad";
        c.nonnegative_slots = bad[i];
        optim_error err;
        assert_status(optim_register_class(&c, &err), OPTIM_EINVAL, &err);
        assert_contains(err.msg, needle[i]);
        assert_contains(err.msg, "DomainBad");
        optim_optimizer *opt = NULL;
        assert_status(optim_create(&opt, &c, NULL, &err), OPTIM_EINVAL, &err);
    }
    const char *many[70];
    for (size_t i = 0; i < 69; i++) many[i] = "x";
    many[69] = NULL;
    optim_class c = user_class();
    c.name = "DomainMany";
    c.nonnegative_slots = many;
    optim_error err;
    assert_status(optim_register_class(&c, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "more than 64");
}

int main(void) { return optim_test_run(); }
