/* optim_bytes_per_param (optim/optimizer.h) and the class table's
 * bytes_per_param hook (version 5), the figure optim bench divides by:
 *
 * - Every built-in optimizer, with its documented options, moves what a
 *   count by hand says: the gradient read once, the variable and each
 *   full-size slot read and written once per pass (Lamb's second pass reads
 *   w, m and v again; Adafactor's passes read what they read). float64
 *   doubles the float32 count, bfloat16 halves it.
 * - A user class without the hook gets the element-wise count; a hook's
 *   answer is returned, or refused with a message when not finite and >= 0;
 *   a version 4 table's bytes past its size are never read as the hook.
 * - Bad input: NULL arguments, a variable without slots, a wrapper. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optimizer_class.h"
#include "optim/optimizers.h"

/* One built-in config on one variable, and its bytes per element. */
typedef struct count_case {
    const char *json;
    optim_generation gen;
    optim_dtype dtype;
    const char *var_name;
    int32_t rank;
    int64_t shape[3];
    double bytes;
} count_case;

#define K3 OPTIM_KERAS3
#define LEG OPTIM_LEGACY
#define F32 OPTIM_F32
#define F64 OPTIM_F64
#define BF16 OPTIM_BF16
#define VEC(n) \
    1, { n, 0, 0 }

/* Read (r) and write (w) counts per element, by hand from each kernel. */
static const count_case cases[] = {
    /* g r, w rw: 3; a momentum slot rw: 5. */
    {"\"sgd\"", K3, F32, "w", VEC(1000), 4 * 3},
    {"\"sgd\"", K3, F64, "w", VEC(1000), 8 * 3},
    {"\"sgd\"", K3, BF16, "w", VEC(1000), 2 * 3},
    {"{\"class_name\": \"SGD\", \"config\": {\"momentum\": 0.9}}", K3, F32, "w", VEC(1000), 4 * 5},
    {"{\"class_name\": \"SGD\", \"config\": {\"momentum\": 0.9, \"nesterov\": true}}", LEG, F32,
     "w", VEC(1000), 4 * 5},
    /* Adam family: g r, w m v rw: 7; amsgrad's vhat rw: 9. */
    {"\"adam\"", K3, F32, "w", VEC(1000), 4 * 7},
    {"\"adam\"", LEG, F32, "w", VEC(1000), 4 * 7},
    {"\"adam\"", K3, F64, "w", VEC(1000), 8 * 7},
    {"\"adam\"", K3, BF16, "w", VEC(1000), 2 * 7},
    {"{\"class_name\": \"Adam\", \"config\": {\"amsgrad\": true}}", K3, F32, "w", VEC(1000), 4 * 9},
    /* use_ema's "average" is a base slot, not the class's passes. */
    {"{\"class_name\": \"Adam\", \"config\": {\"use_ema\": true}}", K3, F32, "w", VEC(1000), 4 * 7},
    {"\"adamw\"", K3, F32, "w", VEC(1000), 4 * 7},
    {"{\"class_name\": \"AdamW\", \"config\": {\"amsgrad\": true}}", K3, F32, "w", VEC(1000),
     4 * 9},
    {"\"adamax\"", K3, F32, "w", VEC(1000), 4 * 7},
    {"\"nadam\"", K3, F32, "w", VEC(1000), 4 * 7},
    {"\"nadam\"", LEG, F32, "w", VEC(1000), 4 * 7}, /* momentum_cache: a scalar weight */
    {"\"lazyadam\"", LEG, F32, "w", VEC(1000), 4 * 7},
    {"\"rectifiedadam\"", LEG, F32, "w", VEC(1000), 4 * 7},
    {"{\"class_name\": \"RectifiedAdam\", \"config\": {\"amsgrad\": true}}", LEG, F32, "w",
     VEC(1000), 4 * 9},
    /* Yogi: g r, w v m rw: 7; without m (beta1 0): 5. */
    {"\"yogi\"", LEG, F32, "w", VEC(1000), 4 * 7},
    {"{\"class_name\": \"Yogi\", \"config\": {\"beta1\": 0.0}}", LEG, F64, "w", VEC(1000), 8 * 5},
    {"\"schedulefreeadamw\"", K3, F32, "w", VEC(1000), 4 * 7}, /* z and v rw */
    /* RMSprop: rms rw, plus momentum and mg rw when on. */
    {"\"rmsprop\"", K3, F32, "w", VEC(1000), 4 * 5},
    {"{\"class_name\": \"RMSprop\", \"config\": {\"momentum\": 0.9}}", K3, F32, "w", VEC(1000),
     4 * 7},
    {"{\"class_name\": \"RMSprop\", \"config\": {\"centered\": true}}", K3, F32, "w", VEC(1000),
     4 * 7},
    {"{\"class_name\": \"RMSprop\", \"config\": {\"momentum\": 0.9, \"centered\": true}}", LEG, F32,
     "w", VEC(1000), 4 * 9},
    {"\"adagrad\"", K3, F32, "w", VEC(1000), 4 * 5},
    {"\"adadelta\"", K3, F32, "w", VEC(1000), 4 * 7}, /* accum_grad, accum_var rw */
    {"\"ftrl\"", K3, F32, "w", VEC(1000), 4 * 7}, /* accumulator, linear rw */
    {"{\"class_name\": \"Ftrl\", \"config\": {\"l2_shrinkage_regularization_strength\": 0.1}}", LEG,
     F32, "w", VEC(1000), 4 * 7},
    {"\"lion\"", K3, F32, "w", VEC(1000), 4 * 5},
    /* Lamb: pass 1 g r, m v rw, w r (norms); pass 2 w m v r, w w: 10. */
    {"\"lamb\"", K3, F32, "w", VEC(1000), 4 * 10},
    {"\"lamb\"", LEG, F32, "w", VEC(1000), 4 * 10},
    {"\"lamb\"", K3, F64, "w", VEC(1000), 8 * 10},
    {"\"lamb\"", K3, BF16, "w", VEC(1000), 2 * 10},
    /* Without the trust ratio pass 1 does not read w: 9. */
    {"{\"class_name\": \"Lamb\", \"config\": {\"exclude_from_layer_adaptation\": [\"^w:0$\"]}}",
     LEG, F32, "w", VEC(1000), 4 * 9},
    {"{\"class_name\": \"Lamb\", \"config\": {\"exclude_from_layer_adaptation\": [\"^w:0$\"]}}",
     LEG, F32, "b", VEC(1000), 4 * 10},
    /* Adafactor, rank < 2: pass 1 w g r, v rw; pass 2 g v r, w rw: 8. */
    {"\"adafactor\"", K3, F32, "w", VEC(1000), 4 * 8},
    {"\"adafactor\"", K3, F64, "w", VEC(1000), 8 * 8},
    {"\"adafactor\"", K3, BF16, "w", VEC(1000), 2 * 8},
    /* Factored [R, C]: pass 1 g w r, pass 2 g r, pass 3 g w r, w v w: 7 per
     * element; r (R elements) rw in pass 1, r in its mean and passes 2, 3:
     * 5 per element; c (C) rw in the reduction, r in passes 2, 3: 4. */
    {"\"adafactor\"", K3, F32, "w", 2, {100, 300, 0}, 4 * (7 + (5.0 * 100 + 4.0 * 300) / 30000)},
    {"\"adafactor\"", K3, F64, "w", 2, {100, 300, 0}, 8 * (7 + (5.0 * 100 + 4.0 * 300) / 30000)},
    {"\"adafactor\"", K3, F32, "w", 2, {1, 50, 0}, 4 * (7 + (5.0 * 1 + 4.0 * 50) / 50)},
    /* [B, R, C]: B row and column moments. */
    {"\"adafactor\"", K3, F32, "w", 3, {2, 10, 30}, 4 * (7 + (5.0 * 20 + 4.0 * 60) / 600)},
    /* Muon: AdamW's pass for a variable that is not 2-D or an embedding
     * (7); the Newton-Schulz path reads g, reads and writes m and w (5),
     * its products run on scratch of the class's own. */
    {"\"muon\"", K3, F32, "w", VEC(1000), 4 * 7},
    {"\"muon\"", K3, F32, "dense/kernel", 2, {64, 32, 0}, 4 * 5},
    {"\"muon\"", K3, F32, "token_embedding", 2, {64, 32, 0}, 4 * 7},
    /* COCOB: g r, w and its five slots rw. */
    {"\"cocob\"", LEG, F32, "w", VEC(1000), 4 * 13},
    {"\"cocob\"", LEG, F64, "w", VEC(1000), 8 * 13},
    /* TF Addons' SGDW: SGD's counts (the decay reads w once more, in the
     * same pass); ProximalAdagrad: accumulator rw. */
    {"{\"class_name\": \"SGDW\", \"config\": {\"weight_decay\": 0.01}}", LEG, F32, "w", VEC(1000),
     4 * 3},
    {"{\"class_name\": \"SGDW\", \"config\": {\"weight_decay\": 0.01, \"momentum\": 0.9}}", LEG,
     F32, "w", VEC(1000), 4 * 5},
    {"\"proximaladagrad\"", LEG, F32, "w", VEC(1000), 4 * 5},
    /* NovoGrad: phase 0 g r; phase 1 g r, m w rw: 6; amsgrad's vhat rw: 8
     * (v is one scalar per variable). */
    {"\"novograd\"", LEG, F32, "w", VEC(1000), 4 * 6},
    {"\"novograd\"", LEG, F64, "w", VEC(1000), 8 * 6},
    {"{\"class_name\": \"NovoGrad\", \"config\": {\"amsgrad\": true}}", LEG, F32, "w", VEC(1000),
     4 * 8},
    /* ConditionalGradient: the norm (or Gram matrix) reads g, the update g,
     * w rw: 4; its slot is never touched. */
    {"\"conditionalgradient\"", LEG, F32, "w", VEC(1000), 4 * 4},
    {"{\"class_name\": \"ConditionalGradient\", \"config\": {\"ord\": \"nuclear\"}}",
     LEG,
     F64,
     "w",
     2,
     {20, 30, 0},
     8 * 4},
};

/* A zero variable (optim_test_var takes float32 and float64 only). */
static optim_var *zeros(const char *name, optim_dtype dt, int32_t rank, const int64_t *shape)
{
    optim_var *v = NULL;
    optim_error err;
    assert_ok(optim_var_create(&v, name, dt, rank, shape, NULL, &err), &err);
    return v;
}

static double count_of(const count_case *c)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    if (optim_from_json_as(&opt, c->json, c->gen, &err)) fail_msg("%s: %s", c->json, err.msg);
    optim_var *v = zeros(c->var_name, c->dtype, c->rank, c->shape);
    assert_ok(optim_build(opt, &v, 1), opt);
    double b = -1;
    assert_ok(optim_bytes_per_param(opt, v, &b), opt);
    optim_test_free(opt, v);
    return b;
}

OPTIM_TEST(test_builtins_move_what_a_hand_count_says)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const double got = count_of(&cases[i]);
        if (fabs(got - cases[i].bytes) > 1e-12 * cases[i].bytes)
            fail_msg("case %zu %s (%s '%s'): %.17g bytes per element, expected %.17g", i,
                     cases[i].json, optim_dtype_name(cases[i].dtype), cases[i].var_name, got,
                     cases[i].bytes);
    }
}

/* Every built-in optimizer has a row above (a new class adds its count). */
OPTIM_TEST(test_every_builtin_has_a_count)
{
    (void)state;
#define ENTRY(sym) &sym,
    static const optim_class *const builtins[] = {OPTIM_BUILTIN_OPTIMIZERS(ENTRY)};
#undef ENTRY
    for (size_t k = 0; k < sizeof builtins / sizeof *builtins; k++) {
        size_t i = 0;
        for (; i < sizeof cases / sizeof *cases; i++) {
            optim_optimizer *opt = NULL;
            optim_error err;
            if (optim_from_json_as(&opt, cases[i].json, cases[i].gen, &err)) continue;
            const int same = strcmp(optim_class_of(opt)->name, builtins[k]->name) == 0;
            optim_destroy(opt);
            if (same) break;
        }
        if (i == sizeof cases / sizeof *cases) fail_msg("%s has no count", builtins[k]->name);
    }
}

/* ---- user classes ------------------------------------------------------------ */

static int two_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    int rc = optim_add_slot(opt, var, "acc", OPTIM_SLOT_ZEROS, 0);
    return rc ? rc : optim_add_slot_shaped(opt, var, "scale", 0, NULL, OPTIM_SLOT_ZEROS, 0);
}

static void no_update(const optim_dense_update *u) { (void)u; }

static double answer; /* what the hook says (set before each call, on one thread) */
static double hook(const optim_optimizer *opt, const optim_var *var)
{
    (void)opt;
    (void)var;
    return answer;
}

static optim_class user_class(void)
{
    return (optim_class){
        .size = sizeof(optim_class),
        .version = OPTIM_CLASS_VERSION,
        .name = "BytesUser",
        .default_learning_rate = 0.1,
        .create_slots = two_slots,
        .apply_dense = no_update,
    };
}

/* An optimizer of c with one built float32 variable of 10 elements. */
static optim_optimizer *built(const optim_class *c, optim_var **v)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    assert_ok(optim_create(&opt, c, NULL, &err), &err);
    *v = zeros("w", OPTIM_F32, 1, (int64_t[]){10});
    assert_ok(optim_build(opt, v, 1), opt);
    return opt;
}

/* No hook: g r, w rw and the one full-size slot rw (20 bytes in float32);
 * the scalar slot is not counted. */
static void expect_default(const optim_class *c)
{
    optim_var *v;
    optim_optimizer *opt = built(c, &v);
    double b = 0;
    assert_ok(optim_bytes_per_param(opt, v, &b), opt);
    assert_eq(b, 20.0);
    optim_test_free(opt, v);
}

/* The current table without the hook, and a version 4 table, whose size
 * ends before the hook: the garbage after it is never called. */
OPTIM_TEST(test_user_class_without_hook_gets_the_default)
{
    (void)state;
    optim_class c = user_class();
    expect_default(&c);
    c.version = 4;
    const size_t size = offsetof(optim_class, bytes_per_param);
    unsigned char *buf = malloc(sizeof(optim_class));
    assert_non_null(buf);
    memset(buf, 0xA5, sizeof(optim_class));
    memcpy(buf, &c, size);
    ((optim_class *)buf)->size = (uint32_t)size;
    expect_default((const optim_class *)buf);
    free(buf);
}

OPTIM_TEST(test_hook_answer_returned_or_refused)
{
    (void)state;
    optim_class c = user_class();
    c.bytes_per_param = hook;
    optim_var *v;
    optim_optimizer *opt = built(&c, &v);
    double b = 0;
    answer = 7.5;
    assert_ok(optim_bytes_per_param(opt, v, &b), opt);
    assert_eq(b, 7.5);
    answer = 0;
    assert_ok(optim_bytes_per_param(opt, v, &b), opt);
    assert_eq(b, 0.0);
    const double bad[] = {NAN, INFINITY, -INFINITY, -1.0};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        answer = bad[i];
        b = 3;
        assert_status(optim_bytes_per_param(opt, v, &b), OPTIM_ERANGE, opt);
        assert_contains(optim_errmsg(opt), "BytesUser's bytes_per_param hook gave ");
        assert_contains(optim_errmsg(opt), "for variable 'w', expected a finite number >= 0");
        assert_eq(b, 3.0); /* unchanged */
    }
    optim_test_free(opt, v);
}

OPTIM_TEST(test_bad_input_refused)
{
    (void)state;
    const optim_class c = user_class();
    optim_var *v;
    optim_optimizer *opt = built(&c, &v);
    double b = 0;
    assert_status(optim_bytes_per_param(NULL, v, &b), OPTIM_EINVAL, NULL);
    assert_status(optim_bytes_per_param(opt, NULL, &b), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "var is NULL");
    assert_status(optim_bytes_per_param(opt, v, NULL), OPTIM_EINVAL, opt);
    assert_contains(optim_errmsg(opt), "bytes is NULL");
    optim_var *other = zeros("other", OPTIM_F32, 1, (int64_t[]){10});
    assert_status(optim_bytes_per_param(opt, other, &b), OPTIM_ENOTFOUND, opt);
    assert_contains(optim_errmsg(opt), "BytesUser has no slots for variable 'other' yet");
    optim_test_free(opt, v, other);
    /* A wrapper: its inner optimizer knows the rule. */
    opt = optim_test_make("{\"class_name\": \"Lookahead\", \"config\": {\"optimizer\": "
                          "{\"class_name\": \"SGD\", \"config\": {}}}}");
    v = zeros("w", OPTIM_F32, 1, (int64_t[]){10});
    assert_ok(optim_build(opt, &v, 1), opt);
    assert_status(optim_bytes_per_param(opt, v, &b), OPTIM_ENOTSUP, opt);
    assert_contains(optim_errmsg(opt), "Lookahead is a wrapper without a bytes_per_param hook");
    optim_test_free(opt, v);
}

int main(void) { return optim_test_run(); }
