/* optim conformance CLASS --reference REF: steps the class along the
 * author's reference trajectory and compares the variables after the last
 * step with REF's expect/NAME, one PASS/FAIL line per variable.
 *
 * REF is one safetensors file: init/NAME (the variables, stepped in its
 * dtype), grads/K/NAME or grads/K/NAME/indices + /values (optim replay's
 * GRADS names under "grads/", loaded by replay_load.c), expect/NAME (F32 or
 * F64, NAME's shape), and __metadata__ {"rtol": "..", "atol": "..",
 * "config": "{..}"} (strings; --rtol, --atol and --config take precedence).
 * An element passes when |got - expected| <= atol + rtol * |expected| (as
 * numpy.allclose), NaN matching NaN. tools/make_reference.py writes REF. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "conformance.h"
#include "optim/optim.h"
#include "replay.h"

#define CMD "optim conformance"

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int
fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(CMD ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static int same_shape(const optim_tensor *a, const optim_tensor *b)
{
    if (a->rank != b->rank) return 0;
    for (int32_t i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

/* REF's header JSON (the file was validated by optim_st_read already). */
static cJSON *read_header(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char len8[8];
    cJSON *root = NULL;
    if (f && fread(len8, 1, 8, f) == 8) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
        char *text = n <= OPTIM_ST_MAX_HEADER ? malloc(n + 1) : NULL;
        if (text && fread(text, 1, n, f) == n) root = cJSON_ParseWithLength(text, n);
        free(text);
    }
    if (f) fclose(f);
    return root;
}

/* A tolerance: the flag's text, else REF's __metadata__ KEY. */
static int tolerance(const cJSON *md, const char *key, const char *flag, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(md, key);
    const char *text = flag ? flag : cJSON_IsString(v) ? v->valuestring : NULL;
    if (!text)
        return fail("REF: __metadata__ has no \"%s\" (a string such as \"1e-6\"), and no --%s "
                    "was given",
                    key, key);
    char *end;
    *out = strtod(text, &end);
    if (end == text || *end || !(*out >= 0) || !isfinite(*out))
        return fail("%s%s '%s': expected a finite number >= 0", flag ? "--" : "REF __metadata__ ",
                    key, text);
    return 0;
}

/* The optimizer: class_name with the config of --config, else of REF's
 * __metadata__ "config", else the defaults; generation forced if given. */
static int make_optimizer(optim_optimizer **out, const char *class_name, const char *config,
                          const cJSON *md, int generation)
{
    const cJSON *mc = cJSON_GetObjectItemCaseSensitive(md, "config");
    const char *text = config ? config : cJSON_IsString(mc) ? mc->valuestring : "{}";
    cJSON *root = cJSON_Parse(text);
    cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "config");
    if (!cJSON_GetObjectItemCaseSensitive(root, "class_name") || !cJSON_IsObject(cfg)) cfg = root;
    if (!cJSON_IsObject(cfg)) {
        cJSON_Delete(root);
        return fail("config '%s' is not a JSON object%s", text, config ? "" : " (REF's metadata)");
    }
    if (generation != OPTIM_CONFORMANCE_AUTO) {
        cJSON_DeleteItemFromObjectCaseSensitive(cfg, "is_legacy_optimizer");
        cJSON_AddBoolToObject(cfg, "is_legacy_optimizer", generation == OPTIM_LEGACY);
    }
    char *json = cJSON_PrintUnformatted(cfg);
    cJSON_Delete(root);
    optim_error err;
    int rc = json ? optim_from_config(out, class_name, json, &err) : 1;
    if (rc) fail("%s", json ? err.msg : "out of memory");
    cJSON_free(json);
    return rc != 0;
    return 0;
}

/* Every REF tensor is init/, grads/ or expect/; every expect/NAME names a
 * variable, with its shape, F32 or F64; every variable has one. */
static int check_expect(const replay *r)
{
    optim_st_file *f = r->init;
    size_t have = 0;
    for (size_t i = 0; i < optim_st_count(f); i++) {
        const char *name = optim_st_name(f, i);
        if (!strncmp(name, "init/", 5) || !strncmp(name, "grads/", 6)) continue;
        if (strncmp(name, "expect/", 7))
            return fail("REF tensor '%s': expected a name under init/, grads/ or expect/", name);
        optim_tensor t, v;
        char init[512];
        snprintf(init, sizeof init, "init/%s", name + 7);
        if (optim_st_get(f, init, &v))
            return fail("REF tensor '%s': no variable %s in REF", name, init);
        optim_st_get(f, name, &t);
        if (v.dtype != OPTIM_F32 && v.dtype != OPTIM_F64)
            return fail("REF tensor '%s' has dtype %s, expected F32 or F64 (the dtype the "
                        "variable is stepped in)",
                        init, optim_dtype_name(v.dtype));
        if (t.dtype != OPTIM_F32 && t.dtype != OPTIM_F64)
            return fail("REF tensor '%s' has dtype %s, expected F32 or F64", name,
                        optim_dtype_name(t.dtype));
        if (!same_shape(&t, &v)) {
            char a[128], b[128];
            return fail("REF tensor '%s' has shape %s, expected %s (the shape of %s)", name,
                        optim_shape_str(t.rank, t.shape, a, sizeof a),
                        optim_shape_str(v.rank, v.shape, b, sizeof b), init);
        }
        have++;
    }
    for (size_t v = 0; have < r->nvars && v < r->nvars; v++) {
        char name[512];
        optim_tensor t;
        snprintf(name, sizeof name, "expect/%s", optim_var_name(r->vars[v]));
        if (optim_st_get(f, name, &t))
            return fail("REF has no tensor '%s', expected the variable %s after the last step",
                        name, optim_var_name(r->vars[v]));
    }
    return 0;
}

static double value_at(const void *data, optim_dtype dt, int64_t i)
{
    return dt == OPTIM_F32 ? ((const float *)data)[i] : ((const double *)data)[i];
}

/* One variable's line; 1 when it passed. */
static int compare(const replay *r, size_t v, double rtol, double atol, conformance_counts *k)
{
    const optim_var *var = r->vars[v];
    char name[512], check[600];
    snprintf(name, sizeof name, "expect/%s", optim_var_name(var));
    snprintf(check, sizeof check, "reference.%s", optim_var_name(var));
    optim_tensor e;
    optim_st_get(r->init, name, &e);
    int64_t n = optim_var_numel(var), bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double got = value_at(optim_var_cdata(var), optim_var_dtype(var), i);
        double want = value_at(e.data, e.dtype, i), d = fabs(got - want);
        int ok = isnan(want) ? isnan(got) : got == want || d <= atol + rtol * fabs(want);
        if (!ok && first < 0) first = i;
        bad += !ok;
        if (ok && d > worst && isfinite(d)) worst = d;
    }
    int passed = bad == 0;
    int w;
    if (passed)
        w = printf(
            "PASS %s: expected each of %lld elements within atol %g + rtol %g * |expected| of %s "
            "after %lld steps; seen largest |got - expected| %.3g\n",
            check, (long long)n, atol, rtol, name, (long long)r->steps, worst);
    else
        w = printf("FAIL %s: expected element %lld = %.17g (%s) within atol %g + rtol %g * "
                   "|expected| after %lld steps; seen %.17g, %lld of %lld elements outside\n",
                   check, (long long)first, value_at(e.data, e.dtype, first), name, atol, rtol,
                   (long long)r->steps, value_at(optim_var_cdata(var), optim_var_dtype(var), first),
                   (long long)bad, (long long)n);
    if (w < 0 || fflush(stdout)) k->write_failed = 1;
    k->passed += passed;
    k->failed += !passed;
    return passed;
}

/* Loads REF, reads its tolerances and config, steps, compares. */
static int run(replay *r, const conformance_reference_args *a, cJSON **header,
               conformance_counts *k)
{
    optim_error err;
    double rtol, atol;
    if (optim_st_read(a->path, &r->init, &err)) return fail("REF %s", err.msg);
    r->grads = r->init;
    *header = read_header(a->path);
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(*header, "__metadata__");
    if (tolerance(md, "rtol", a->rtol, &rtol) || tolerance(md, "atol", a->atol, &atol) ||
        make_optimizer(&r->opt, a->class_name, a->config, md, a->generation) || replay_load(r) ||
        check_expect(r))
        return 1;
    for (int64_t s = 0; s < r->steps; s++)
        if (replay_step(r, s)) return 1;
    for (size_t v = 0; v < r->nvars; v++) compare(r, v, rtol, atol, k);
    return 0;
}

int optim_tool_conformance_reference(const conformance_reference_args *a, conformance_counts *k)
{
    replay r = {.cmd = CMD,
                .init_label = "REF",
                .grads_label = "REF",
                .init_prefix = "init/",
                .grads_prefix = "grads/"};
    cJSON *header = NULL;
    int rc = run(&r, a, &header, k);
    cJSON_Delete(header);
    replay_free(&r);
    return rc;
}
