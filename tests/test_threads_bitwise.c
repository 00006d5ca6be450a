/* 1 vs 2 vs 3 OpenMP threads give the same bits, for every built-in class in
 * each generation it has and every wrapper: the cases of
 * tests/conformance/builtins.txt (CLASS GENERATION [CONFIG]), which this test
 * also checks to name every class of OPTIM_BUILTIN_CLASSES.
 *
 * Each case runs plain and with clipnorm, global_clipnorm and clipvalue
 * (on the wrapper, or on its inner optimizer where the wrapper takes no
 * clipping), three steps each under omp_set_num_threads(1), (2) and (3),
 * and under (3) with optim_set_num_threads(opt, 1) (a step on one thread
 * while OpenMP, and so OpenMP's OpenBLAS, has three), on three variables
 * larger than the pipeline's chunk (8192 elements) or not:
 *   "matrix" [178, 145]: 3 chunks and a ragged tail, a dense gradient
 *                        (MultiOptimizer's case maps it to Adam);
 *   "table"  [300, 64]:  2 chunks and a ragged tail, a sparse gradient
 *                        of 48 rows with duplicates (its dense equivalent
 *                        for a class with OPTIM_CLASS_NO_SPARSE);
 *   "bias"   [37]:       less than a chunk, a dense gradient.
 * After the steps every variable and every weight (iterations and slots) of
 * the optimizer and of each optimizer it wraps must equal the one-thread
 * run's bit for bit.
 *
 * With OPTIM_TEST_DIGEST=FILE each case also appends to FILE one line per
 * tensor of its one-thread run, a hash of its bits: tests/isa/bitwise.sh
 * compares the files written at each instruction-set level. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/hash.h"
#include "optim/optimizers.h"
#include "testutil.h"

#define NVARS 3
#define STEPS 3
#define NIDX 48
#define MAX_CASES 128

static const char *const var_names[NVARS] = {"matrix", "table", "bias"};
static const int32_t var_ranks[NVARS] = {2, 2, 1};
static const int64_t var_shapes[NVARS][2] = {{178, 145}, {300, 64}, {37, 0}};
static const char *const clips[] = {NULL, "clipnorm", "global_clipnorm", "clipvalue"};
static const double clip_values[] = {0, 0.5, 0.8, 0.002};

typedef struct tcase {
    char cls[64];
    optim_generation gen;
    cJSON *config; /* the case's config object (may be empty) */
} tcase;

static tcase cases[MAX_CASES];
static size_t ncases;

/* ---- the cases: tests/conformance/builtins.txt -------------------------------- */

static void read_cases(void)
{
    FILE *f = fopen(OPTIM_TEST_DATA_DIR "/../conformance/builtins.txt", "r");
    assert_non_null(f);
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        char cls[64], gen[16];
        int used = 0;
        if (line[0] < 'A' || line[0] > 'Z' || sscanf(line, "%63s %15s %n", cls, gen, &used) < 2)
            continue;
        assert_lt(ncases, MAX_CASES);
        tcase *c = &cases[ncases++];
        snprintf(c->cls, sizeof c->cls, "%s", cls);
        if (strcmp(gen, "keras3") != 0 && strcmp(gen, "legacy") != 0)
            fail_msg("%s: generation is '%s', expected keras3 or legacy", cls, gen);
        c->gen = strcmp(gen, "legacy") == 0 ? OPTIM_LEGACY : OPTIM_KERAS3;
        c->config = line[used] == '{' ? cJSON_Parse(line + used) : cJSON_CreateObject();
        assert_non_null(c->config);
    }
    fclose(f);
}

static int free_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < ncases; i++) cJSON_Delete(cases[i].config);
    return 0;
}

/* Every built-in class has a case (so a new one cannot be left out). */
OPTIM_TEST(test_cases_cover_every_builtin)
{
#define X(sym) &sym,
    const optim_class *builtins[] = {OPTIM_BUILTIN_CLASSES(X)};
#undef X
    assert_gt(ncases, 0);
    for (size_t b = 0; b < sizeof builtins / sizeof *builtins; b++) {
        int found = 0;
        for (size_t i = 0; i < ncases && !found; i++)
            found = optim_find_class(cases[i].cls) == builtins[b];
        if (!found)
            fail_msg("builtins.txt has no case for the built-in class %s", builtins[b]->name);
    }
}

/* ---- a run: the steps on `threads` threads, then everything they changed --------- */

#define MAX_SNAP 512
typedef struct snap {
    size_t n;
    char *name[MAX_SNAP];
    void *data[MAX_SNAP];
    size_t bytes[MAX_SNAP];
} snap;

static void snap_add(snap *s, const char *a, const char *b, const optim_tensor *t)
{
    assert_lt(s->n, MAX_SNAP);
    size_t bytes = (size_t)optim_tensor_numel(t) * optim_dtype_size(t->dtype), i = s->n++;
    s->name[i] = malloc(strlen(a) + strlen(b) + 1);
    s->data[i] = malloc(bytes + 1);
    assert_true(s->name[i] && s->data[i]);
    strcat(strcpy(s->name[i], a), b);
    memcpy(s->data[i], t->data, bytes);
    s->bytes[i] = bytes;
}

/* The weights of opt and, recursively, of every optimizer it wraps. */
static void snap_weights(snap *s, optim_optimizer *opt, const char *prefix)
{
    size_t n = optim_weights_count(opt);
    optim_tensor *w = calloc(n + 1, sizeof *w);
    assert_non_null(w);
    assert_eq(optim_get_weights(opt, w, n), n);
    for (size_t i = 0; i < n; i++) snap_add(s, prefix, optim_weight_name(opt, i), &w[i]);
    free(w);
    optim_optimizer *inner;
    for (size_t i = 0; (inner = optim_wrapper_inner_at(opt, i)) != NULL; i++) {
        char p[256];
        snprintf(p, sizeof p, "%sinner %zu: ", prefix, i);
        snap_weights(s, inner, p);
    }
}

static void snap_free(snap *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->name[i]), free(s->data[i]);
    s->n = 0;
}

/* The gradients of step k: dense for the matrix and the bias, NIDX rows of
 * the table (duplicates: j and j + 16 share a row for j < 8). */
static double grad_value(int v, int k, int64_t i)
{
    return 0.01 * sin(0.37 * (double)i + 1.1 * k + v) + 0.002 * k;
}
static int64_t sparse_row(int k, int j) { return ((j % 40) * 37 + 11 * k) % 300; }

static void step(optim_optimizer *opt, optim_var **vars, int k)
{
    float *g[NVARS];
    int64_t idx[NIDX], vshape[2] = {NIDX, 64};
    optim_grad_var p[NVARS];
    /* A class that refuses sparse gradients (COCOB) gets the table's rows
     * summed into a dense gradient. */
    const int dense_table = (optim_class_of(opt)->flags & OPTIM_CLASS_NO_SPARSE) != 0;
    for (int j = 0; j < NIDX; j++) idx[j] = sparse_row(k, j);
    for (int v = 0; v < NVARS; v++) {
        const int sparse = v == 1 && !dense_table;
        const int64_t n = sparse ? NIDX * 64 : optim_var_numel(vars[v]);
        assert_non_null(g[v] = calloc((size_t)n, sizeof *g[v]));
        if (v == 1 && dense_table)
            for (int64_t i = 0; i < NIDX * 64; i++)
                g[v][idx[i / 64] * 64 + i % 64] += (float)grad_value(v, k, i);
        else
            for (int64_t i = 0; i < n; i++) g[v][i] = (float)grad_value(v, k, i);
        optim_tensor t = sparse ? optim_tensor_make(OPTIM_F32, g[v], 2, vshape)
                                : optim_tensor_make(OPTIM_F32, g[v], var_ranks[v], var_shapes[v]);
        p[v] = (optim_grad_var){sparse ? optim_grad_sparse(idx, NIDX, t) : optim_grad_dense(t),
                                vars[v]};
    }
    int rc = optim_apply_gradients(opt, p, NVARS, 0);
    if (rc) fail_msg("step %d on %d threads: %s", k, omp_get_max_threads(), optim_errmsg(opt));
    for (int v = 0; v < NVARS; v++) free(g[v]);
}

/* The steps under omp_set_num_threads(omp_threads); step_threads > 0: the
 * optimizer's own thread count (optim_set_num_threads) as well. */
static void run(const char *json, optim_generation gen, int omp_threads, int step_threads, snap *s)
{
    omp_set_num_threads(omp_threads);
    optim_optimizer *opt;
    optim_error err;
    if (optim_from_json_as(&opt, json, gen, &err)) fail_msg("%s: %s", json, err.msg);
    if (step_threads) assert_ok(optim_set_num_threads(opt, step_threads), opt);
    optim_var *vars[NVARS];
    for (int v = 0; v < NVARS; v++) {
        int64_t n = var_shapes[v][0] * (var_ranks[v] == 2 ? var_shapes[v][1] : 1);
        double *init = malloc((size_t)n * sizeof *init);
        assert_non_null(init);
        for (int64_t i = 0; i < n; i++) init[i] = 0.5 * sin(0.001 * (double)i + v) + 0.01;
        vars[v] = optim_test_var(var_names[v], OPTIM_F32, var_ranks[v], var_shapes[v], init);
        free(init);
    }
    for (int k = 0; k < STEPS; k++) step(opt, vars, k);
    for (int v = 0; v < NVARS; v++) {
        optim_tensor t = optim_var_tensor(vars[v]);
        snap_add(s, "variable ", var_names[v], &t);
    }
    snap_weights(s, opt, "weight ");
    optim_destroy(opt);
    for (int v = 0; v < NVARS; v++) optim_var_destroy(vars[v]);
}

/* The first differing element of a and b, as a failure naming it. */
static void compare(const snap *a, const snap *b, const char *json, const char *run)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        assert_string_equal(a->name[i], b->name[i]);
        assert_int_equal(a->bytes[i], b->bytes[i]);
        if (memcmp(a->data[i], b->data[i], a->bytes[i]) == 0) continue;
        size_t at = 0;
        while (((const unsigned char *)a->data[i])[at] == ((const unsigned char *)b->data[i])[at])
            at++;
        fail_msg("%s: %s differs between 1 thread and %s (from byte %zu of %zu)", json, a->name[i],
                 run, at, a->bytes[i]);
    }
}

/* ---- the cases with each clipping option --------------------------------------- */

/* Adds key: value to the config of sub-optimizer o (a name such as "sgd"
 * becomes {"class_name": "sgd", "config": {key: value}}). */
static void put_in_sub(cJSON *parent, cJSON *o, const char *key, double value)
{
    if (cJSON_IsString(o)) {
        cJSON *obj = cJSON_CreateObject();
        cJSON_AddStringToObject(obj, "class_name", o->valuestring);
        cJSON_AddItemToObject(obj, "config", cJSON_CreateObject());
        cJSON_ReplaceItemInObjectCaseSensitive(parent, o->string, obj); /* frees o */
        o = obj;
    }
    cJSON_AddNumberToObject(cJSON_GetObjectItemCaseSensitive(o, "config"), key, value);
}

/* Adds key: value to every optimizer config wraps (a wrapper's "optimizer"
 * or "inner_optimizer", a MultiOptimizer's default and mapped ones);
 * returns how many there were. */
static int put_in_inner(cJSON *config, const char *key, double value)
{
    int n = 0;
    const char *inner_keys[] = {"optimizer", "inner_optimizer"};
    for (int i = 0; i < 2; i++) {
        cJSON *in = cJSON_GetObjectItemCaseSensitive(config, inner_keys[i]);
        if (cJSON_IsObject(in)) put_in_sub(config, in, key, value), n++;
    }
    cJSON *map = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(config, "optimizer_map"), "config");
    cJSON *def = cJSON_GetObjectItemCaseSensitive(map, "default_optimizer"), *sub;
    if (def) put_in_sub(map, def, key, value), n++;
    cJSON *subs = cJSON_GetObjectItemCaseSensitive(map, "optimizer_map");
    for (sub = subs ? subs->child : NULL; sub;) {
        cJSON *next = sub->next;
        put_in_sub(subs, sub, key, value), n++;
        sub = next;
    }
    return n;
}

/* The case's JSON with clip option `clip` (0: none) on the class itself
 * (where = 0) or on the optimizers it wraps (where = 1); NULL if it wraps
 * none. */
static char *case_json(const tcase *c, int clip, int where)
{
    cJSON *root = cJSON_CreateObject(), *cfg = cJSON_Duplicate(c->config, 1);
    assert_true(root && cfg);
    cJSON_AddStringToObject(root, "class_name", c->cls);
    cJSON_AddItemToObject(root, "config", cfg);
    char *json = NULL;
    if (!where && clip) cJSON_AddNumberToObject(cfg, clips[clip], clip_values[clip]);
    if (!where || (clip && put_in_inner(cfg, clips[clip], clip_values[clip]) > 0)) {
        json = cJSON_PrintUnformatted(root);
        assert_non_null(json);
    }
    cJSON_Delete(root);
    return json;
}

/* The JSON of the case with clip option `clip`, where the library takes it. */
static char *taken_json(const tcase *c, int clip)
{
    for (int where = 0; where < 2; where++) {
        char *json = case_json(c, clip, where);
        optim_optimizer *opt;
        optim_error err;
        if (json && optim_from_json_as(&opt, json, c->gen, &err) == 0) {
            optim_destroy(opt);
            return json;
        }
        cJSON_free(json);
    }
    fail_msg("%s %s: neither the class nor an inner optimizer takes %s", c->cls,
             c->gen == OPTIM_LEGACY ? "legacy" : "keras3", clips[clip]);
    return NULL;
}

/* The digest lines of a run (OPTIM_TEST_DIGEST). */
static void write_digest(const snap *s, const char *json)
{
    const char *path = getenv("OPTIM_TEST_DIGEST");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    for (size_t i = 0; i < s->n; i++)
        fprintf(f, "%s %s %016llx\n", json, s->name[i],
                (unsigned long long)optim__fnv1a(s->data[i], s->bytes[i]));
    assert_eq(fclose(f), 0);
}

static int saved_threads;

static void test_case(void **state)
{
    const tcase *c = *state;
    for (int clip = 0; clip < (int)(sizeof clips / sizeof *clips); clip++) {
        char *json = taken_json(c, clip);
        snap one = {0}, other = {0};
        run(json, c->gen, 1, 0, &one);
        write_digest(&one, json);
        for (int t = 2; t <= 4; t++) {
            char what[64] = "a one-thread step under 3 OpenMP threads";
            if (t < 4) snprintf(what, sizeof what, "%d threads", t);
            run(json, c->gen, t < 4 ? t : 3, t < 4 ? 0 : 1, &other);
            compare(&one, &other, json, what);
            snap_free(&other);
        }
        snap_free(&one);
        cJSON_free(json);
    }
}

static int restore_threads(void **state)
{
    (void)state;
    omp_set_num_threads(saved_threads);
    return 0;
}

int main(void)
{
    saved_threads = omp_get_max_threads();
    read_cases();
    static char names[MAX_CASES][128];
    for (size_t i = 0; i < ncases; i++) {
        snprintf(names[i], sizeof names[i], "%.64s %s #%zu", cases[i].cls,
                 cases[i].gen == OPTIM_LEGACY ? "legacy" : "keras3", i + 1);
        optim_test_add((struct CMUnitTest){names[i], test_case, NULL, restore_threads, &cases[i]});
    }
    return optim_test_run_group(NULL, free_cases);
}
