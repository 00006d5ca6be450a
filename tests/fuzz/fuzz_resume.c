/* fuzz_resume: resume is bit for bit. Input: a config of
 * tests/replay_configs.inc (every built-in class and wrapper, both
 * generations) with up to three of its class's params set to other values
 * in range, a model of two tiny Dense layers with initial values, k steps
 * (1..6) of dense gradients, and a save point j < k. Run A takes the k
 * steps. Run B takes j steps, saves a checkpoint (optim_checkpoint_save,
 * into a directory of this process), reads it, creates a fresh optimizer
 * from the checkpoint's optimizer JSON, restores into it and a fresh model,
 * and takes the other k - j steps. Promises: save, read, the config and
 * restore succeed; the two runs end with the same model variables and the
 * same optimizer weights (names, dtypes, shapes, bytes). Save refuses a
 * state at the save point that is not finite (OPTIM_ERANGE, as restore
 * would: Adafactor's factored v underflows to 0 for zero gradients, u is
 * NaN, as in Keras), and only such a state; that input ends there. A config whose
 * mutated params the class refuses falls back to the unmutated one; an
 * input whose run A fails a step is skipped. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "optim/checkpoint.h"
#include "optim/optim.h"
#include "optim/optimizer_class.h"

static const char *const configs[] = {
#include "../replay_configs.inc"
};
#define NCONFIGS (sizeof configs / sizeof *configs)
#define MAXSTEPS 6
#define MAXVARS 4

typedef struct input {
    const uint8_t *p;
    size_t n;
} input;

static unsigned take(input *in)
{
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

/* The checkpoint directory of this process, emptied and removed at exit. */
static char ckpt_dir[4200];

static void remove_dir(void)
{
    DIR *d = opendir(ckpt_dir);
    struct dirent *e;
    char path[4600];
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", ckpt_dir, e->d_name);
        (void)unlink(path);
    }
    if (d) closedir(d);
    (void)rmdir(ckpt_dir);
}

static const char *dir_path(void)
{
    if (!ckpt_dir[0]) {
        snprintf(ckpt_dir, sizeof ckpt_dir, "%s", fuzz_scratch_path("ckpt"));
        atexit(remove_dir);
    }
    return ckpt_dir;
}

/* A value of param p in its range, from two input bytes. */
static double param_value(const optim_param *p, input *in)
{
    double lo = isfinite(p->min) ? p->min : -2, hi = isfinite(p->max) ? p->max : 2;
    if (hi - lo > 4) hi = lo + 4;
    double frac = ((take(in) << 8 | take(in)) + 0.5) / 65536.0, v = lo + frac * (hi - lo);
    if (p->type == OPTIM_PARAM_INT || (p->flags & OPTIM_PARAM_COUNT)) v = ceil(v);
    return v;
}

/* The config, with up to three params of its class set from the input. */
static char *mutate(const char *config, input *in)
{
    cJSON *root = cJSON_Parse(config), *cfg = cJSON_GetObjectItemCaseSensitive(root, "config");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "class_name");
    const optim_class *cls = cJSON_IsString(name) ? optim_find_class(name->valuestring) : NULL;
    unsigned n = take(in) % 4;
    for (unsigned i = 0; cls && cls->n_params && cJSON_IsObject(cfg) && i < n; i++) {
        size_t k = take(in) % cls->n_params;
        const optim_param *p = &cls->params[k];
        cJSON *v;
        if (p->type == OPTIM_PARAM_BOOL) v = cJSON_CreateBool(take(in) & 1);
        else if (p->type == OPTIM_PARAM_STRING) {
            const char *const *ch = cls->param_choices[k];
            size_t m = 0;
            while (ch[m]) m++;
            v = cJSON_CreateString(ch[take(in) % m]);
        } else if (p->type == OPTIM_PARAM_PATTERNS) continue;
        else v = cJSON_CreateNumber(param_value(p, in));
        cJSON_DeleteItemFromObjectCaseSensitive(cfg, p->name);
        cJSON_AddItemToObject(cfg, p->name, v);
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

static optim_model *make_model(const float *init)
{
    optim_model *m;
    optim_layer *l;
    optim_error err;
    FUZZ_CHECK(optim_sequential_create(&m, NULL, &err) == 0, "%s", err.msg);
    for (int units = 3; units >= 2; units--) {
        optim_dense_options d = optim_dense_defaults(units);
        FUZZ_CHECK(optim_dense_create(&l, &d, &err) == 0 && optim_sequential_add(m, l) == 0,
                   "dense");
    }
    FUZZ_CHECK(optim_model_build(m, 2, (int64_t[]){1, 2}) == 0, "%s", optim_model_errmsg(m));
    optim_var *v[MAXVARS];
    size_t nv = optim_model_trainable_variables(m, v, MAXVARS), at = 0;
    for (size_t i = 0; i < nv; i++) {
        optim_tensor t = optim_var_tensor(v[i]);
        int64_t numel = optim_tensor_numel(&t);
        FUZZ_CHECK(optim_var_assign(v[i], init + at, OPTIM_F32, numel) == 0, "assign");
        at += (size_t)numel;
    }
    return m;
}

/* Model: kernel [2,3], bias [3], kernel [3,2], bias [2]: 17 values. */
#define NVALUES 17

/* Steps from..to of grads (NVALUES per step) on m's variables; 0 or the
 * failing call's status. */
static int steps(optim_optimizer *o, optim_model *m, const float *grads, int from, int to)
{
    optim_var *v[MAXVARS];
    size_t nv = optim_model_trainable_variables(m, v, MAXVARS);
    for (int s = from; s < to; s++) {
        optim_grad_var pairs[MAXVARS];
        const float *g = grads + (size_t)s * NVALUES;
        for (size_t i = 0; i < nv; i++) {
            optim_tensor t = optim_var_tensor(v[i]);
            t.data = (void *)g;
            g += optim_tensor_numel(&t);
            pairs[i].var = v[i];
            pairs[i].grad = optim_grad_dense(t);
        }
        int rc = optim_apply_gradients(o, pairs, nv, 0);
        if (rc) return rc;
    }
    return 0;
}

static void same_tensor(optim_tensor a, optim_tensor b, const char *what, const char *config)
{
    FUZZ_CHECK(a.dtype == b.dtype && a.rank == b.rank &&
                   !memcmp(a.shape, b.shape, sizeof(int64_t) * (size_t)a.rank),
               "%s: %s differs in dtype or shape after resume", config, what);
    size_t n = (size_t)optim_tensor_numel(&a) * optim_dtype_size(a.dtype);
    FUZZ_CHECK(!n || !memcmp(a.data, b.data, n), "%s: %s differs after resume", config, what);
}

static void same_state(optim_model *ma, optim_optimizer *oa, optim_model *mb, optim_optimizer *ob,
                       const char *config)
{
    optim_var *va[MAXVARS], *vb[MAXVARS];
    size_t n = optim_model_trainable_variables(ma, va, MAXVARS);
    optim_model_trainable_variables(mb, vb, MAXVARS);
    for (size_t i = 0; i < n; i++)
        same_tensor(optim_var_tensor(va[i]), optim_var_tensor(vb[i]), optim_var_name(va[i]),
                    config);
    size_t nw = optim_weights_count(oa);
    FUZZ_CHECK(nw == optim_weights_count(ob), "%s: %zu optimizer weights, %zu after resume", config,
               nw, optim_weights_count(ob));
    optim_tensor *wa = calloc(nw + 1, sizeof *wa), *wb = calloc(nw + 1, sizeof *wb);
    FUZZ_CHECK(wa && wb, "out of memory");
    optim_get_weights(oa, wa, nw);
    optim_get_weights(ob, wb, nw);
    for (size_t i = 0; i < nw; i++) {
        const char *name = optim_weight_name(oa, i), *nb = optim_weight_name(ob, i);
        FUZZ_CHECK(name && nb && !strcmp(name, nb), "%s: weight %zu is %s, %s after resume", config,
                   i, name ? name : "?", nb ? nb : "?");
        same_tensor(wa[i], wb[i], name, config);
    }
    free(wa), free(wb);
}

static int finite_tensor(optim_tensor t)
{
    int64_t n = optim_tensor_numel(&t);
    for (int64_t i = 0; i < n; i++)
        if ((t.dtype == OPTIM_F32 && !isfinite(((const float *)t.data)[i])) ||
            (t.dtype == OPTIM_F64 && !isfinite(((const double *)t.data)[i])))
            return 0;
    return 1;
}

/* Whether every variable and optimizer weight is finite: restore refuses a
 * checkpoint that holds a NaN or an infinity (checkpoint.h). */
static int finite_state(optim_model *m, optim_optimizer *o)
{
    optim_var *v[MAXVARS];
    size_t n = optim_model_trainable_variables(m, v, MAXVARS), nw = optim_weights_count(o);
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= finite_tensor(optim_var_tensor(v[i]));
    optim_tensor *w = calloc(nw + 1, sizeof *w);
    FUZZ_CHECK(w != NULL, "out of memory");
    optim_get_weights(o, w, nw);
    for (size_t i = 0; i < nw; i++) ok &= finite_tensor(w[i]);
    free(w);
    return ok;
}

/* Run B: j steps, save, read, a fresh optimizer and model, restore, the
 * rest; 0 (nothing made) if the state after j steps is not finite, which
 * save must refuse. */
static int resumed(const char *config, const float *init, const float *grads, int j, int k,
                   optim_model **mb, optim_optimizer **ob)
{
    optim_error err = {0};
    optim_optimizer *o;
    FUZZ_CHECK(optim_from_json(&o, config, &err) == 0, "%s", err.msg);
    optim_model *m = make_model(init);
    FUZZ_CHECK(steps(o, m, grads, 0, j) == 0, "%s: step failed in run B: %s", config,
               optim_errmsg(o));
    int saved = optim_checkpoint_save(dir_path(), m, o, j, NULL, &err), finite = finite_state(m, o);
    optim_destroy(o), optim_model_destroy(m);
    FUZZ_CHECK(saved == (finite ? OPTIM_OK : OPTIM_ERANGE),
               "%s: save returned %d for a %s state: %s", config, saved,
               finite ? "finite" : "non-finite", err.msg);
    if (!finite) return 0;
    optim_checkpoint *c;
    FUZZ_CHECK(optim_checkpoint_read(dir_path(), &c, &err) == 0, "%s: read: %s", config, err.msg);
    FUZZ_CHECK(optim_from_json(&o, optim_checkpoint_optimizer_json(c), &err) == 0,
               "%s: the checkpoint's config %s: %s", config, optim_checkpoint_optimizer_json(c),
               err.msg);
    m = make_model(init + NVALUES); /* other values: restore must set them all */
    FUZZ_CHECK(optim_checkpoint_restore(c, m, o, &err) == 0, "%s: restore after %d steps: %s",
               config, j, err.msg);
    optim_checkpoint_free(c);
    FUZZ_CHECK(steps(o, m, grads, j, k) == 0, "%s: step failed after resume: %s", config,
               optim_errmsg(o));
    *mb = m, *ob = o;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input in = {data, size};
    const char *base = configs[take(&in) % NCONFIGS];
    char *config = mutate(base, &in);
    optim_optimizer *oa = NULL;
    optim_error err;
    if (!config || optim_from_json(&oa, config, &err)) {
        free(config);
        config = strdup(base);
        FUZZ_CHECK(config && optim_from_json(&oa, config, &err) == 0, "%s: %s", base, err.msg);
    }
    int k = 1 + (int)(take(&in) % MAXSTEPS), j = (int)(take(&in) % (unsigned)k);
    float init[2 * NVALUES], grads[MAXSTEPS * NVALUES];
    for (size_t i = 0; i < 2 * NVALUES; i++) init[i] = (float)((int8_t)take(&in)) / 32.0f;
    for (size_t i = 0; i < MAXSTEPS * NVALUES; i++) grads[i] = (float)((int8_t)take(&in)) / 16.0f;
    optim_model *ma = make_model(init), *mb = NULL;
    optim_optimizer *ob = NULL;
    if (steps(oa, ma, grads, 0, k) == 0 && resumed(config, init, grads, j, k, &mb, &ob))
        same_state(ma, oa, mb, ob, config);
    optim_destroy(oa), optim_destroy(ob);
    optim_model_destroy(ma), optim_model_destroy(mb);
    free(config);
    return 0;
}
