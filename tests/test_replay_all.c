/* `optim replay` for every built-in class and its options: the tool's OUT
 * must equal, bit for bit, what the library computes for the same inputs
 * (variables, every slot and weight, iterations). The update rules
 * themselves are checked against references in tests/test_opt_*.c. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "optim/optim.h"

#define STEPS 6

/* Every class with every documented option, in both generations where the
 * class has them. */
static const char *const CONFIGS[] = {
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1}}",
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9, \"nesterov\": true, \"clipnorm\": 1.0}}",
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9, \"weight_decay\": 0.01}}",
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.5, \"decay\": 0.1, \"clipvalue\": 0.5, \"is_legacy_optimizer\": true}}",
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"global_clipnorm\": 0.8, \"is_legacy_optimizer\": true}}",
#include "replay_configs.inc"
};

static void write_grads(optim_st_writer *w, int k)
{
    /* dense "dense/kernel" [4, 3] f32, sparse "emb" [6, 2] f64 (duplicates),
     * scalar "bias" f64 every other step. */
    static float kg[STEPS][12];
    static double ev[STEPS][8], bg[STEPS];
    static int64_t ei[STEPS][4];
    optim_error err;
    for (int i = 0; i < 12; i++) kg[k][i] = (float)sin(0.9 * k + 0.37 * i);
    int64_t idx[4] = {(k * 2) % 6, 5, (k * 2) % 6, (k + 1) % 6};
    for (int j = 0; j < 4; j++) {
        ei[k][j] = idx[j];
        for (int c = 0; c < 2; c++) ev[k][j * 2 + c] = cos(0.7 * k + 1.1 * j + 0.3 * c);
    }
    bg[k] = 0.25 * (k - 2);
    char name[64];
    optim_tensor t = optim_tensor_make(OPTIM_F32, kg[k], 2, (int64_t[]){4, 3});
    snprintf(name, sizeof name, "%d/dense/kernel", k);
    assert_int_equal(optim_st_writer_add(w, name, &t, &err), 0);
    t = optim_tensor_make(OPTIM_I64, ei[k], 1, (int64_t[]){4});
    snprintf(name, sizeof name, "%d/emb/indices", k);
    assert_int_equal(optim_st_writer_add(w, name, &t, &err), 0);
    t = optim_tensor_make(OPTIM_F64, ev[k], 2, (int64_t[]){4, 2});
    snprintf(name, sizeof name, "%d/emb/values", k);
    assert_int_equal(optim_st_writer_add(w, name, &t, &err), 0);
    if (k % 2 == 0) {
        t = optim_tensor_make(OPTIM_F64, &bg[k], 0, NULL);
        snprintf(name, sizeof name, "%d/bias", k);
        assert_int_equal(optim_st_writer_add(w, name, &t, &err), 0);
    }
}

static void check_config(const char *json)
{
    const char *cfg = optim_test_tmpfile("cfg.json"), *init = optim_test_tmpfile("init.st");
    const char *grads = optim_test_tmpfile("grads.st"), *out = optim_test_tmpfile("out.st");
    assert_int_equal(optim_test_write_file(cfg, json, strlen(json)), 0);
    optim_error err;
    /* INIT */
    float k0[12];
    double e0[12], b0 = 0.5;
    for (int i = 0; i < 12; i++) k0[i] = (float)(0.1 * i - 0.4), e0[i] = 0.2 * i - 1.0;
    optim_var *vars[3];
    assert_int_equal(optim_var_create(&vars[0], "bias", OPTIM_F64, 0, NULL, &b0, &err), 0);
    assert_int_equal(
        optim_var_create(&vars[1], "dense/kernel", OPTIM_F32, 2, (int64_t[]){4, 3}, k0, &err), 0);
    assert_int_equal(optim_var_create(&vars[2], "emb", OPTIM_F64, 2, (int64_t[]){6, 2}, e0, &err),
                     0);
    optim_st_writer *w;
    assert_int_equal(optim_st_writer_create(&w, &err), 0);
    for (int i = 0; i < 3; i++) {
        optim_tensor t = optim_var_tensor(vars[i]);
        assert_int_equal(optim_st_writer_add(w, optim_var_name(vars[i]), &t, &err), 0);
    }
    assert_int_equal(optim_st_writer_save(w, init, &err), 0);
    optim_st_writer_destroy(w);
    assert_int_equal(optim_st_writer_create(&w, &err), 0);
    for (int k = 0; k < STEPS; k++) write_grads(w, k);
    assert_int_equal(optim_st_writer_save(w, grads, &err), 0);
    optim_st_writer_destroy(w);
    /* The tool. */
    unlink(out);
    char *argv[] = {(char *)OPTIM_CLI_PATH, "replay",    (char *)cfg, (char *)init,
                    (char *)grads,          (char *)out, NULL};
    optim_test_proc r;
    if (optim_test_capture(argv, &r)) print_error("for %s:\n%s\n", json, r.err);
    assert_eq(r.status, 0);
    /* The library on the same inputs. */
    optim_optimizer *opt;
    int rc = optim_from_json(&opt, json, &err);
    if (rc) print_error("%s\n", err.msg);
    assert_int_equal(rc, 0);
    optim_st_file *g;
    assert_int_equal(optim_st_read(grads, &g, &err), 0);
    for (int k = 0; k < STEPS; k++) {
        optim_grad_var p[3];
        char name[64];
        optim_tensor t, it;
        snprintf(name, sizeof name, "%d/bias", k);
        p[0].var = vars[0];
        p[0].grad = optim_st_get(g, name, &t) == 0 ? optim_grad_dense(t) : optim_grad_none();
        snprintf(name, sizeof name, "%d/dense/kernel", k);
        assert_int_equal(optim_st_get(g, name, &t), 0);
        p[1].var = vars[1];
        p[1].grad = optim_grad_dense(t);
        snprintf(name, sizeof name, "%d/emb/indices", k);
        assert_int_equal(optim_st_get(g, name, &it), 0);
        snprintf(name, sizeof name, "%d/emb/values", k);
        assert_int_equal(optim_st_get(g, name, &t), 0);
        p[2].var = vars[2];
        p[2].grad = optim_grad_sparse(it.data, it.shape[0], t);
        rc = optim_apply_gradients(opt, p, 3, 0);
        if (rc) print_error("%s\n", optim_errmsg(opt));
        assert_int_equal(rc, 0);
    }
    optim_st_free(g);
    /* Compare everything OUT holds. */
    optim_st_file *o;
    assert_int_equal(optim_st_read(out, &o, &err), 0);
    size_t nw = optim_weights_count(opt);
    assert_int_equal(optim_st_count(o), 3 + nw);
    optim_tensor *wts = calloc(nw, sizeof *wts);
    optim_get_weights(opt, wts, nw);
    for (size_t i = 0; i < 3 + nw; i++) {
        const char *name = i < 3 ? optim_var_name(vars[i]) : optim_weight_name(opt, i - 3);
        optim_tensor want = i < 3 ? optim_var_tensor(vars[i]) : wts[i - 3], got;
        if (optim_st_get(o, name, &got)) print_error("OUT lacks '%s' (%s)\n", name, json);
        assert_int_equal(optim_st_get(o, name, &got), 0);
        assert_int_equal(got.dtype, want.dtype);
        assert_int_equal(optim_tensor_numel(&got), optim_tensor_numel(&want));
        size_t bytes = (size_t)optim_tensor_numel(&want) * optim_dtype_size(want.dtype);
        if (memcmp(got.data, want.data, bytes) != 0) print_error("'%s' differs (%s)\n", name, json);
        assert_memory_equal(got.data, want.data, bytes);
    }
    free(wts);
    optim_st_free(o);
    optim_destroy(opt);
    for (int i = 0; i < 3; i++) optim_var_destroy(vars[i]);
}

enum { N_CONFIGS = sizeof CONFIGS / sizeof *CONFIGS };

/* One case per row of CONFIGS (registered in main). */
static void check_row(void **state) { check_config(*state); }

/* Every registered built-in appears in CONFIGS at least once. */
OPTIM_TEST(test_every_class_covered)
{
#define COVERED(sym)                                                                        \
    {                                                                                       \
        int found = 0;                                                                      \
        char needle[96];                                                                    \
        snprintf(needle, sizeof needle, "\"class_name\": \"%s\"", sym.name);                \
        for (size_t i = 0; i < N_CONFIGS; i++) found |= strstr(CONFIGS[i], needle) != NULL; \
        if (!found) print_error("no replay config for class %s\n", sym.name);               \
        assert_true(found);                                                                 \
    }
    OPTIM_BUILTIN_CLASSES(COVERED)
#undef COVERED
}

/* A row's case name: its class and its number in CONFIGS. */
static const char *row_name(size_t i)
{
    static char names[N_CONFIGS][80];
    const char *c = strstr(CONFIGS[i], "\"class_name\": \"");
    int len = c ? (int)strcspn(c + 15, "\"") : 0;
    snprintf(names[i], sizeof names[i], "%.*s #%zu", len, c ? c + 15 : "", i + 1);
    return names[i];
}

int main(void)
{
    for (size_t i = 0; i < N_CONFIGS; i++)
        optim_test_add((struct CMUnitTest){row_name(i), check_row, NULL, NULL, (void *)CONFIGS[i]});
    return optim_test_run();
}
