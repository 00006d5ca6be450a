/* A half-precision optimizer beside its float32 reference (half_pair.h). */
#include "half_pair.h"

#include <stdlib.h>
#include <string.h>

#include "testutil.h"

int64_t half_vars_numel(const half_vars *vars, int v)
{
    int64_t n = 1;
    for (int d = 0; d < vars->ranks[v]; d++) n *= vars->shapes[v][d];
    return n;
}

/* Variable v in dtype dt and float32 (a and r's copies). */
static void make_var(half_pair *p, int v)
{
    const half_vars *hv = p->vars;
    const int64_t n = half_vars_numel(hv, v);
    float *f = malloc((size_t)n * sizeof *f + 1);
    uint16_t *h = malloc((size_t)n * sizeof *h + 1);
    assert_true(f && h);
    for (int64_t i = 0; i < n; i++) f[i] = (float)hv->init(v, i);
    assert_ok(optim_convert(h, p->dt, f, OPTIM_F32, n), NULL);
    optim_error err;
    assert_ok(
        optim_var_create(&p->va[v], hv->names[v], p->dt, hv->ranks[v], hv->shapes[v], h, &err),
        &err);
    assert_ok(
        optim_var_create(&p->vr[v], hv->names[v], OPTIM_F32, hv->ranks[v], hv->shapes[v], f, &err),
        &err);
    free(f);
    free(h);
}

void half_pair_make(half_pair *p, const half_vars *vars, const char *json, optim_dtype dt,
                    int threads)
{
    assert_in_range(vars->nv, 1, HALF_PAIR_MAX_VARS);
    p->vars = vars;
    p->dt = dt;
    p->a = optim_test_make(json);
    p->r = optim_test_make(json);
    if (threads > 0) assert_ok(optim_set_num_threads(p->a, threads), p->a);
    for (int v = 0; v < vars->nv; v++) make_var(p, v);
    assert_ok(optim_build(p->a, p->va, (size_t)vars->nv), p->a);
    assert_ok(optim_build(p->r, p->vr, (size_t)vars->nv), p->r);
}

void half_pair_free(half_pair *p)
{
    optim_destroy(p->a);
    optim_destroy(p->r);
    for (int v = 0; v < p->vars->nv; v++) {
        optim_var_destroy(p->va[v]);
        optim_var_destroy(p->vr[v]);
    }
}

/* A malloc'd copy of t's data in dtype `to` (converted when it differs). */
static void *converted(const optim_tensor *t, optim_dtype to)
{
    const int64_t m = optim_tensor_numel(t);
    void *c = malloc((size_t)m * optim_dtype_size(to) + 1);
    assert_non_null(c);
    if (t->dtype == to) memcpy(c, t->data, (size_t)m * optim_dtype_size(to)); /* iterations */
    else assert_ok(optim_convert(c, to, t->data, t->dtype, m), NULL);
    return c;
}

/* Both optimizers' weight views (freed by the caller); returns the count. */
static size_t weights_of(half_pair *p, optim_tensor **wa, optim_tensor **wr)
{
    const size_t n = optim_weights_count(p->a);
    if (n != optim_weights_count(p->r))
        fail_msg("weights: %zu vs %zu", n, optim_weights_count(p->r));
    *wa = calloc(n + 1, sizeof **wa);
    *wr = calloc(n + 1, sizeof **wr);
    assert_true(*wa && *wr);
    optim_get_weights(p->a, *wa, n);
    optim_get_weights(p->r, *wr, n);
    return n;
}

void half_pair_copy_state(half_pair *p)
{
    for (int v = 0; v < p->vars->nv; v++)
        assert_ok(optim_convert(optim_var_data(p->vr[v]), OPTIM_F32, optim_var_cdata(p->va[v]),
                                p->dt, half_vars_numel(p->vars, v)),
                  NULL);
    optim_tensor *wa, *wr;
    const size_t n = weights_of(p, &wa, &wr);
    for (size_t i = 0; i < n; i++) {
        assert_eq(optim_tensor_numel(&wa[i]), optim_tensor_numel(&wr[i]));
        wr[i].data = converted(&wa[i], wr[i].dtype);
    }
    assert_ok(optim_set_weights(p->r, wr, n), p->r);
    for (size_t i = 0; i < n; i++) free(wr[i].data);
    free(wa);
    free(wr);
}

/* a's variable v == r's rounded to a's type, bit for bit. */
static void compare_var(half_pair *p, const char *json, int k, int v)
{
    const int64_t m = half_vars_numel(p->vars, v);
    uint16_t *h = malloc((size_t)m * sizeof *h + 1);
    assert_non_null(h);
    assert_ok(optim_convert(h, p->dt, optim_var_cdata(p->vr[v]), OPTIM_F32, m), NULL);
    const uint16_t *got = optim_var_cdata(p->va[v]);
    for (int64_t i = 0; i < m; i++)
        if (h[i] != got[i])
            fail_msg("%s %s step %d: %s[%lld] is 0x%04x, the rounded float32 reference 0x%04x",
                     json, optim_dtype_name(p->dt), k, p->vars->names[v], (long long)i, got[i],
                     h[i]);
    free(h);
}

void half_pair_compare(half_pair *p, const char *json, int k)
{
    for (int v = 0; v < p->vars->nv; v++) compare_var(p, json, k, v);
    optim_tensor *wa, *wr;
    const size_t n = weights_of(p, &wa, &wr);
    for (size_t i = 0; i < n; i++) {
        void *c = converted(&wr[i], wa[i].dtype);
        if (memcmp(c, wa[i].data,
                   (size_t)optim_tensor_numel(&wa[i]) * optim_dtype_size(wa[i].dtype)))
            fail_msg("%s %s step %d: weight %zu differs from the rounded reference", json,
                     optim_dtype_name(p->dt), k, i);
        free(c);
    }
    free(wa);
    free(wr);
}

int64_t half_pair_steps(half_pair *p, const char *json, int steps,
                        int64_t (*step)(half_pair *p, int k))
{
    int64_t changed = 0;
    for (int k = 0; k < steps; k++) {
        half_pair_copy_state(p);
        changed += step(p, k);
        half_pair_compare(p, json, k);
    }
    return changed;
}
