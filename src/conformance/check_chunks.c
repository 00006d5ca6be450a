/* Checks for OPTIM_CLASS_ELEMENTWISE classes: apply_dense, called directly
 * on chunks of 1, 7, 1000 and all elements, each chunk copied between guard
 * zones of NaN, gives the pipeline's step bit for bit (so the result does not
 * depend on the chunking), writes nothing in the guards and reads nothing
 * from them (a NaN read would show in the result). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/harness.h"

#define GUARD 16

typedef struct run {
    optim_optimizer *opt;
    cf_problem p;
    int nslots;
    void *state[1 + OPTIM_MAX_SLOTS]; /* param, slots: the whole variable */
    void *grad;
    void *coef;
} run;

/* An optimizer without Keras 3's weight_decay, which the pipeline applies
 * before apply_dense (AdamW defaults to 0.004): weight_decay 0. */
static int create_plain(cf_ctx *c, optim_optimizer **opt, char *why, size_t n)
{
    if (c->generation == OPTIM_KERAS3 &&
        optim__cf_create(c, NULL, "{\"weight_decay\": 0.0}", opt, why, n) == 0)
        return 0;
    return optim__cf_create(c, NULL, NULL, opt, why, n);
}

/* A fresh optimizer built on the large variable, its slots copied out, and
 * prepare's coefficients for the first step. */
static int start(cf_ctx *c, run *r, optim_dtype dt, char *why, size_t n)
{
    memset(r, 0, sizeof *r);
    if (create_plain(c, &r->opt, why, n)) return 1;
    if (optim__cf_problem_init(&r->p, dt, 1u << CF_LARGE, c->seed)) return 1;
    optim_var *var = r->p.vars[0];
    if (optim_build(r->opt, &var, 1))
        return snprintf(why, n, "optim_build: %s", optim_errmsg(r->opt)), 1;
    const char *names[OPTIM_MAX_SLOTS * 4];
    size_t ns = optim_get_slot_names(r->opt, names, OPTIM_MAX_SLOTS * 4);
    int64_t numel = optim_var_numel(var);
    size_t bytes = (size_t)numel * optim_dtype_size(dt);
    r->state[0] = malloc(bytes);
    r->grad = malloc(bytes);
    r->coef = calloc(1, c->cls->coef_size + 16);
    if (!r->state[0] || !r->grad || !r->coef) return 1;
    memcpy(r->state[0], optim_var_cdata(var), bytes);
    for (int64_t i = 0; i < numel; i++)
        optim__cf_put(r->grad, dt, i, optim__cf_rand(c->seed, 2000, 0, i));
    for (size_t s = 0; s < ns && r->nslots < OPTIM_MAX_SLOTS; s++) {
        optim_var *slot = optim_get_slot(r->opt, var, names[s]);
        if (!slot) continue;
        if (!(r->state[1 + r->nslots] = malloc(bytes))) return 1;
        memcpy(r->state[1 + r->nslots++], optim_var_cdata(slot), bytes);
    }
    if (c->cls->prepare) c->cls->prepare(r->opt, dt, r->coef);
    return 0;
}

static void finish(run *r)
{
    for (int i = 0; i <= r->nslots; i++) free(r->state[i]);
    free(r->grad);
    free(r->coef);
    optim__cf_problem_free(&r->p);
    optim_destroy(r->opt);
}

/* One chunk [off, off + cnt) through guarded copies; 1 if a guard changed. */
static int chunk(cf_ctx *c, run *r, optim_dtype dt, int64_t off, int64_t cnt, char *buf)
{
    size_t es = optim_dtype_size(dt), span = (size_t)(cnt + 2 * GUARD) * es;
    void *ptr[2 + OPTIM_MAX_SLOTS];
    for (int b = 0; b < r->nslots + 2; b++) {
        char *z = buf + (size_t)b * span;
        for (int64_t i = 0; i < cnt + 2 * GUARD; i++) optim__cf_put(z, dt, i, NAN);
        const char *src = b == 0 ? r->state[0] : b == 1 ? r->grad : r->state[b - 1];
        memcpy(z + GUARD * es, src + off * (int64_t)es, (size_t)cnt * es);
        ptr[b] = z + GUARD * es;
    }
    void *slots[OPTIM_MAX_SLOTS];
    for (int s = 0; s < r->nslots; s++) slots[s] = ptr[2 + s];
    optim_dense_update u = {r->opt, r->p.vars[0], dt,        off,     cnt, ptr[0],
                            ptr[1], slots,        r->nslots, r->coef, 0};
    c->cls->apply_dense(&u);
    int bad = 0;
    char nan_bits[8];
    optim__cf_put(nan_bits, dt, 0, NAN);
    for (int b = 0; b < r->nslots + 2; b++) {
        char *z = buf + (size_t)b * span;
        for (int64_t i = 0; i < GUARD; i++)
            bad |= memcmp(z + i * (int64_t)es, nan_bits, es) ||
                memcmp(z + (GUARD + cnt + i) * (int64_t)es, nan_bits, es);
        char *dst = b == 0 ? r->state[0] : b == 1 ? NULL : r->state[b - 1];
        if (dst) memcpy(dst + off * (int64_t)es, ptr[b], (size_t)cnt * es);
    }
    return bad;
}

/* The pipeline's first step on the large variable: its values and slots. */
static int reference(cf_ctx *c, optim_dtype dt, run *ref, char *why, size_t n)
{
    if (start(c, ref, dt, why, n)) return 1;
    optim_destroy(ref->opt);
    optim__cf_problem_free(&ref->p);
    if (create_plain(c, &ref->opt, why, n) ||
        optim__cf_problem_init(&ref->p, dt, 1u << CF_LARGE, c->seed))
        return 1;
    if (optim__cf_step_dense(ref->opt, &ref->p, 0))
        return snprintf(why, n, "step: %s", optim_errmsg(ref->opt)), 1;
    optim_var *var = ref->p.vars[0];
    size_t bytes = (size_t)optim_var_numel(var) * optim_dtype_size(dt);
    memcpy(ref->state[0], optim_var_cdata(var), bytes);
    const char *names[OPTIM_MAX_SLOTS * 4];
    size_t ns = optim_get_slot_names(ref->opt, names, OPTIM_MAX_SLOTS * 4);
    for (size_t s = 0, k = 0; s < ns && k < (size_t)ref->nslots; s++) {
        optim_var *slot = optim_get_slot(ref->opt, var, names[s]);
        if (slot) memcpy(ref->state[1 + k++], optim_var_cdata(slot), bytes);
    }
    return 0;
}

/* 0 ok, 1 result differs, 2 a guard was written. */
static int chunked(cf_ctx *c, optim_dtype dt, const run *ref, int64_t size, char *why, size_t n)
{
    run r;
    if (start(c, &r, dt, why, n)) return finish(&r), 1;
    int64_t numel = optim_var_numel(r.p.vars[0]), csize = size ? size : numel;
    size_t es = optim_dtype_size(dt);
    char *buf = malloc((size_t)(csize + 2 * GUARD) * es * (size_t)(r.nslots + 2));
    int bad = buf ? 0 : 1;
    for (int64_t off = 0; !bad && off < numel; off += csize) {
        int64_t cnt = numel - off < csize ? numel - off : csize;
        if (chunk(c, &r, dt, off, cnt, buf)) {
            snprintf(why, n,
                     "%s, chunks of %lld: the chunk at %lld wrote into the guard zone around it",
                     optim_dtype_name(dt), (long long)csize, (long long)off);
            bad = 2;
        }
    }
    for (int b = 0; !bad && b <= r.nslots; b++)
        for (int64_t i = 0; i < numel && !bad; i++) {
            if (!memcmp((char *)r.state[b] + i * (int64_t)es,
                        (char *)ref->state[b] + i * (int64_t)es, es))
                continue;
            double got = optim__cf_get(r.state[b], dt, i),
                   want = optim__cf_get(ref->state[b], dt, i);
            snprintf(
                why, n,
                "%s, chunks of %lld: %s element %lld is %.17g, the pipeline's step gives %.17g%s",
                optim_dtype_name(dt), (long long)csize, b ? "slot" : "variable", (long long)i, got,
                want, isnan(got) ? " (NaN: read from the guard zone outside the chunk)" : "");
            bad = isnan(got) ? 2 : 1;
        }
    free(buf);
    finish(&r);
    return bad;
}

void optim__cf_check_chunks(cf_ctx *c)
{
    const char *e1 =
        "apply_dense on chunks of 1, 7, 1000 and all elements gives the pipeline's step bit for bit (f32, f64)";
    const char *e2 =
        "apply_dense neither writes nor reads outside its chunk (NaN guard zones around each chunk)";
    if (!(c->cls->flags & OPTIM_CLASS_ELEMENTWISE)) {
        optim__cf_report(c, "elementwise.chunking", -1, e1, "not OPTIM_CLASS_ELEMENTWISE: skipped");
        optim__cf_report(c, "elementwise.guards", -1, e2, "not OPTIM_CLASS_ELEMENTWISE: skipped");
        return;
    }
    static const int64_t sizes[] = {1, 7, 1000, 0};
    char why_chunk[CF_TEXT] = "", why_guard[CF_TEXT] = "";
    for (int d = 0; d < 2; d++) {
        optim_dtype dt = d ? OPTIM_F64 : OPTIM_F32;
        run ref;
        char why[CF_TEXT];
        int rc = reference(c, dt, &ref, why, sizeof why);
        for (size_t s = 0; !rc && s < sizeof sizes / sizeof *sizes; s++) {
            int r = chunked(c, dt, &ref, sizes[s], why, sizeof why);
            if (r == 2 && !why_guard[0]) snprintf(why_guard, sizeof why_guard, "%s", why);
            if (r == 1 && !why_chunk[0]) snprintf(why_chunk, sizeof why_chunk, "%s", why);
        }
        if (rc && !why_chunk[0]) snprintf(why_chunk, sizeof why_chunk, "%s", why);
        finish(&ref);
    }
    optim__cf_report(c, "elementwise.chunking", !why_chunk[0], e1, "%s",
                     why_chunk[0] ? why_chunk : "identical");
    optim__cf_report(c, "elementwise.guards", !why_guard[0], e2, "%s",
                     why_guard[0] ? why_guard : "guards intact");
}
