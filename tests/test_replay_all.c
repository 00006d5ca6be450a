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
/* Wide enough for every vector width's loop and a ragged tail. */
#define KR 40
#define KC 33
#define EC 35

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

static void write_grads(optim_st_writer *w, int k, int dense_emb)
{
    /* dense "dense/kernel" [KR, KC] f32, sparse "emb" [6, EC] f64 (4 rows
     * with duplicates; dense_emb: its dense equivalent, for a class that
     * refuses sparse gradients), scalar "bias" f64 every other step. */
    static float kg[STEPS][KR * KC];
    static double ev[STEPS][4 * EC], bg[STEPS], ed[STEPS][6 * EC];
    static int64_t ei[STEPS][4];
    optim_error err;
    for (int i = 0; i < KR * KC; i++) kg[k][i] = (float)sin(0.9 * k + 0.37 * i);
    int64_t idx[4] = {(k * 2) % 6, 5, (k * 2) % 6, (k + 1) % 6};
    for (int j = 0; j < 4; j++) {
        ei[k][j] = idx[j];
        for (int c = 0; c < EC; c++) ev[k][j * EC + c] = cos(0.7 * k + 1.1 * j + 0.3 * c);
    }
    bg[k] = 0.25 * (k - 2);
    char name[64];
    optim_tensor t = optim_tensor_make(OPTIM_F32, kg[k], 2, (int64_t[]){KR, KC});
    snprintf(name, sizeof name, "%d/dense/kernel", k);
    assert_ok(optim_st_writer_add(w, name, &t, &err), &err);
    if (dense_emb) {
        memset(ed[k], 0, sizeof ed[k]);
        for (int j = 0; j < 4; j++)
            for (int c = 0; c < EC; c++) ed[k][idx[j] * EC + c] += ev[k][j * EC + c];
        t = optim_tensor_make(OPTIM_F64, ed[k], 2, (int64_t[]){6, EC});
        snprintf(name, sizeof name, "%d/emb", k);
        assert_ok(optim_st_writer_add(w, name, &t, &err), &err);
    } else {
        t = optim_tensor_make(OPTIM_I64, ei[k], 1, (int64_t[]){4});
        snprintf(name, sizeof name, "%d/emb/indices", k);
        assert_ok(optim_st_writer_add(w, name, &t, &err), &err);
        t = optim_tensor_make(OPTIM_F64, ev[k], 2, (int64_t[]){4, EC});
        snprintf(name, sizeof name, "%d/emb/values", k);
        assert_ok(optim_st_writer_add(w, name, &t, &err), &err);
    }
    if (k % 2 == 0) {
        t = optim_tensor_make(OPTIM_F64, &bg[k], 0, NULL);
        snprintf(name, sizeof name, "%d/bias", k);
        assert_ok(optim_st_writer_add(w, name, &t, &err), &err);
    }
}

/* Where the tool writes OUT: with OPTIM_TEST_REPLAY_OUT=DIR, DIR/row-N.st
 * (kept: tests/isa/bitwise.sh compares those of each instruction-set
 * level), else a temporary file. */
static const char *out_path(const char *json)
{
    static char path[4096];
    const char *dir = getenv("OPTIM_TEST_REPLAY_OUT");
    if (!dir || !*dir) return optim_test_tmpfile("out.st");
    size_t row = 0;
    while (CONFIGS[row] != json) row++;
    snprintf(path, sizeof path, "%s/row-%03zu.st", dir, row + 1);
    return path;
}

static void check_config(const char *json)
{
    const char *cfg = optim_test_tmpfile("cfg.json"), *init = optim_test_tmpfile("init.st");
    const char *grads = optim_test_tmpfile("grads.st"), *out = out_path(json);
    assert_eq(optim_test_write_file(cfg, json, strlen(json)), 0);
    optim_error err;
    optim_optimizer *opt;
    assert_ok(optim_from_json(&opt, json, &err), &err);
    const int dense_emb = (optim_class_of(opt)->flags & OPTIM_CLASS_NO_SPARSE) != 0;
    /* INIT */
    static float k0[KR * KC];
    static double e0[6 * EC];
    double b0 = 0.5;
    for (int i = 0; i < KR * KC; i++) k0[i] = (float)(0.001 * i - 0.4);
    for (int i = 0; i < 6 * EC; i++) e0[i] = 0.01 * i - 1.0;
    optim_var *vars[3];
    assert_ok(optim_var_create(&vars[0], "bias", OPTIM_F64, 0, NULL, &b0, &err), &err);
    assert_ok(
        optim_var_create(&vars[1], "dense/kernel", OPTIM_F32, 2, (int64_t[]){KR, KC}, k0, &err),
        &err);
    assert_ok(optim_var_create(&vars[2], "emb", OPTIM_F64, 2, (int64_t[]){6, EC}, e0, &err), &err);
    optim_st_writer *w;
    assert_ok(optim_st_writer_create(&w, &err), &err);
    for (int i = 0; i < 3; i++) {
        optim_tensor t = optim_var_tensor(vars[i]);
        assert_ok(optim_st_writer_add(w, optim_var_name(vars[i]), &t, &err), &err);
    }
    assert_ok(optim_st_writer_save(w, init, &err), &err);
    optim_st_writer_destroy(w);
    assert_ok(optim_st_writer_create(&w, &err), &err);
    for (int k = 0; k < STEPS; k++) write_grads(w, k, dense_emb);
    assert_ok(optim_st_writer_save(w, grads, &err), &err);
    optim_st_writer_destroy(w);
    /* The tool. */
    unlink(out);
    char *argv[] = {(char *)OPTIM_CLI_PATH, "replay",    (char *)cfg, (char *)init,
                    (char *)grads,          (char *)out, NULL};
    optim_test_proc r;
    if (optim_test_capture(argv, &r)) print_error("for %s:\n%s\n", json, r.err);
    assert_eq(r.status, 0);
    /* The library on the same inputs. */
    optim_st_file *g;
    assert_ok(optim_st_read(grads, &g, &err), &err);
    for (int k = 0; k < STEPS; k++) {
        optim_grad_var p[3];
        char name[64];
        optim_tensor t, it;
        snprintf(name, sizeof name, "%d/bias", k);
        p[0].var = vars[0];
        p[0].grad = optim_st_get(g, name, &t) == 0 ? optim_grad_dense(t) : optim_grad_none();
        snprintf(name, sizeof name, "%d/dense/kernel", k);
        assert_ok(optim_st_get(g, name, &t), NULL);
        p[1].var = vars[1];
        p[1].grad = optim_grad_dense(t);
        p[2].var = vars[2];
        if (dense_emb) {
            snprintf(name, sizeof name, "%d/emb", k);
            assert_ok(optim_st_get(g, name, &t), NULL);
            p[2].grad = optim_grad_dense(t);
        } else {
            snprintf(name, sizeof name, "%d/emb/indices", k);
            assert_ok(optim_st_get(g, name, &it), NULL);
            snprintf(name, sizeof name, "%d/emb/values", k);
            assert_ok(optim_st_get(g, name, &t), NULL);
            p[2].grad = optim_grad_sparse(it.data, it.shape[0], t);
        }
        assert_ok(optim_apply_gradients(opt, p, 3, 0), opt);
    }
    optim_st_free(g);
    /* Compare everything OUT holds. */
    optim_st_file *o;
    assert_ok(optim_st_read(out, &o, &err), &err);
    size_t nw = optim_weights_count(opt);
    assert_eq(optim_st_count(o), 3 + nw);
    optim_tensor *wts = calloc(nw, sizeof *wts);
    optim_get_weights(opt, wts, nw);
    for (size_t i = 0; i < 3 + nw; i++) {
        const char *name = i < 3 ? optim_var_name(vars[i]) : optim_weight_name(opt, i - 3);
        optim_tensor want = i < 3 ? optim_var_tensor(vars[i]) : wts[i - 3], got;
        if (optim_st_get(o, name, &got)) print_error("OUT lacks '%s' (%s)\n", name, json);
        assert_ok(optim_st_get(o, name, &got), NULL);
        assert_int_equal(got.dtype, want.dtype);
        assert_eq(optim_tensor_numel(&got), optim_tensor_numel(&want));
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

/* Every registered built-in appears in CONFIGS at least once (a TF Addons
 * class may appear by its registered name, "Addons>NAME"). */
static int covered(const optim_class *c)
{
    char needle[2][96];
    snprintf(needle[0], sizeof needle[0], "\"class_name\": \"%s\"", c->name);
    snprintf(needle[1], sizeof needle[1], "\"class_name\": \"Addons>%s\"",
             c->tfa_name ? c->tfa_name : c->name);
    for (size_t i = 0; i < N_CONFIGS; i++)
        for (int k = 0; k < (c->tfa_name ? 2 : 1); k++)
            if (strstr(CONFIGS[i], needle[k])) return 1;
    return 0;
}

OPTIM_TEST(test_every_class_covered)
{
#define COVERED(sym)                                                                  \
    {                                                                                 \
        if (!covered(&sym)) print_error("no replay config for class %s\n", sym.name); \
        assert_true(covered(&sym));                                                   \
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
