/* The Adam and AdamW references (ref_adam.h). */
#include "ref_adam.h"

#include <math.h>
#include <string.h>

#define MAX_N 64 /* elements of the float32 problems (OT_DENSE_SHRINK, OT_SPARSE_ADAM) */

void ref_adam_step(const ref_adam *r, int k, double b1, double wd, double *w, double *m, double *v,
                   double *vh, const double *g, const int *decay_row, int n)
{
    double t = k + 1, lr = r->lr / (1.0 + r->decay * k);
    double a = lr * sqrt(1 - pow(r->b2, t)) / (1 - pow(b1, t));
    for (int i = 0; i < n; i++) {
        if (wd != 0 && (!decay_row || decay_row[i])) w[i] -= r->legacy ? wd * w[i] : w[i] * wd * lr;
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = r->b2 * v[i] + (1 - r->b2) * g[i] * g[i];
        vh[i] = fmax(vh[i], v[i]);
        w[i] -= a * m[i] / (sqrt(r->ams ? vh[i] : v[i]) + r->eps);
    }
}

/* The drivers' form; state m, v, vhat. */
static void ref_table(const void *r_, int k, double *w, double *const *st, const double *g, int n)
{
    const ref_adam *r = r_;
    ref_adam_step(r, k, r->b1, r->wd, w, st[0], st[1], st[2], g, NULL, n);
}

/* Legacy sparse: a row without a gradient is not decayed, Adam still moves it. */
static void ref_idle(const void *r_, int k, double *w, double *const *st, int n)
{
    static const double zero[MAX_N];
    const ref_adam *r = r_;
    ref_adam_step(r, k, r->b1, 0.0, w, st[0], st[1], st[2], zero, NULL, n);
}

ot_case ref_adam_case(const char *json, const ref_adam *r)
{
    return (ot_case){json,
                     ref_table,
                     r,
                     3,
                     {"m", "v", r->ams ? "vhat" : NULL},
                     r->ams ? NULL : "vhat",
                     .tol = {2e-5, 2e-6, 1e-12, 1e-14},
                     .idle = r->legacy ? ref_idle : NULL};
}

/* Keras 3 (base decay w - (w * wd) * lr, then Adam.update_step) and legacy
 * dense (w - wd * w, then ApplyAdam), emulated in float: the other
 * difference is 1 - beta: Python double arithmetic cast to float32 in
 * Keras 3, float32 arithmetic in TF's kernel. */
static void emul_dense_f32(const void *r_, int k, float *w, float *const *st, const float *g, int n)
{
    const ref_adam *r = r_;
    float t = (float)(k + 1), fb1 = (float)r->b1, fb2 = (float)r->b2, l = (float)r->lr,
          fwd = (float)r->wd;
    float p1 = powf(fb1, t), p2 = powf(fb2, t);
    float alpha = l * sqrtf(1.0f - p2) / (1.0f - p1);
    float c1 = r->legacy ? 1.0f - fb1 : (float)(1.0 - r->b1),
          c2 = r->legacy ? 1.0f - fb2 : (float)(1.0 - r->b2);
    float e = (float)r->eps, *m = st[0], *v = st[1], *vh = st[2];
    for (int i = 0; i < n; i++) {
        if (r->wd != 0) w[i] = r->legacy ? w[i] - fwd * w[i] : w[i] - w[i] * fwd * l;
        m[i] += (g[i] - m[i]) * c1;
        v[i] += (g[i] * g[i] - v[i]) * c2;
        float d = v[i];
        if (r->ams) d = vh[i] = fmaxf(vh[i], v[i]);
        w[i] -= (m[i] * alpha) / (sqrtf(d) + e);
    }
}

/* Legacy Adam._resource_apply_sparse in float (after AdamW's decay of the
 * indexed rows): all rows decay, indexed rows get the scaled gradient
 * added, every row of w moves. */
static void emul_legacy_sparse_f32(int ams, float *w, float *m, float *v, float *vh, int rows,
                                   int cols, const int *touched, const float *g, int k, double lr,
                                   double b1, double b2, double eps, double wd)
{
    float t = (float)(k + 1), fb1 = (float)b1, fb2 = (float)b2, l = (float)lr, fwd = (float)wd;
    float p1 = powf(fb1, t), p2 = powf(fb2, t);
    float lr_t = l * (sqrtf(1.0f - p2) / (1.0f - p1));
    float c1 = 1.0f - fb1, c2 = 1.0f - fb2, e = (float)eps;
    for (int i = 0; i < rows * cols; i++) {
        if (wd != 0 && touched[i / cols]) w[i] = w[i] + (-fwd * w[i]);
        m[i] = m[i] * fb1;
        v[i] = v[i] * fb2;
        if (touched[i / cols]) {
            m[i] = m[i] + g[i] * c1;
            v[i] = v[i] + (g[i] * g[i]) * c2;
        }
        float d = v[i];
        if (ams) d = vh[i] = fmaxf(vh[i], v[i]);
        w[i] = w[i] - lr_t * m[i] / (sqrtf(d) + e);
    }
}

/* opt's weights and slots equal the emulation's bit for bit. */
static void assert_f32_state(optim_optimizer *opt, optim_var *x, const float *w, const float *m,
                             const float *v, const float *vh, int ams, int n)
{
    assert_var_floats(x, w, n);
    assert_var_floats(optim_get_slot(opt, x, "m"), m, n);
    assert_var_floats(optim_get_slot(opt, x, "v"), v, n);
    if (ams) assert_var_floats(optim_get_slot(opt, x, "vhat"), vh, n);
}

void ref_adam_check_dense_f32(const char *json, int legacy, int ams, double lr, double wd,
                              float *last_w)
{
    const ot_dense *d = &OT_DENSE_SHRINK;
    ref_adam r = {lr, 0.9, 0.999, 1e-7, wd, 0, ams, legacy};
    ot_case c = ref_adam_case(json, &r);
    c.ref32 = emul_dense_f32;
    ot_check_f32(d, d->steps, &c, 0);
    if (!last_w) return;
    optim_optimizer *opt = optim_test_make(json);
    optim_var *x = ot_run_dense(opt, d, OPTIM_F32);
    memcpy(last_w, optim_var_data(x), (size_t)d->n * sizeof *last_w);
    optim_test_free(opt, x);
}

void ref_adam_check_legacy_sparse_f32(const char *json, int ams, double lr, double wd)
{
    const ot_sparse *s = &OT_SPARSE_ADAM;
    const int n = s->rows * s->cols;
    assert_in_range(n, 1, MAX_N);
    optim_optimizer *opt = optim_test_make(json);
    optim_var *x = ot_run_sparse(opt, s, OPTIM_F32, 0);
    float w[MAX_N], m[MAX_N] = {0}, v[MAX_N] = {0}, vh[MAX_N] = {0};
    for (int i = 0; i < n; i++) w[i] = (float)s->init(i / s->cols, i % s->cols);
    for (int k = 0; k < s->steps; k++) {
        float g[MAX_N] = {0};
        int touched[MAX_N] = {0};
        for (int j = 0; j < s->nidx; j++) {
            touched[s->index(k, j)] = 1;
            for (int c = 0; c < s->cols; c++)
                g[s->index(k, j) * s->cols + c] += (float)s->val(k, j, c);
        }
        emul_legacy_sparse_f32(ams, w, m, v, vh, s->rows, s->cols, touched, g, k, lr, 0.9, 0.999,
                               1e-7, wd);
    }
    assert_f32_state(opt, x, w, m, v, vh, ams, n);
    optim_test_free(opt, x);
}

void ref_adam_check_tfa(const char *json, int sparse, double wd, double eps, const double *i0,
                        const double *i1, int n, const int64_t *idx, int nidx)
{
    const double gv[2] = {0.1, 0.01};
    int64_t len = n, ni = nidx;
    OPTIM_FOR_DTYPES(dt)
    {
        optim_optimizer *opt = optim_test_make(json);
        optim_var *var[2] = {optim_test_var("var0", dt, 1, &len, i0),
                             optim_test_var("var1", dt, 1, &len, i1)};
        double gd[2][MAX_N], p[2][MAX_N], m[2] = {0}, v[2] = {0};
        float gf[2][MAX_N];
        int touched[MAX_N] = {0};
        memcpy(p[0], i0, n * sizeof *i0);
        memcpy(p[1], i1, n * sizeof *i1);
        for (int i = 0; i < nidx; i++) {
            touched[idx[i]] = 1;
            for (int j = 0; j < 2; j++) gd[j][i] = gv[j], gf[j][i] = (float)gv[j];
        }
        for (int t = 1; t <= 3; t++) {
            optim_grad_var pg[2];
            for (int j = 0; j < 2; j++) {
                optim_tensor g =
                    optim_tensor_make(dt, dt == OPTIM_F64 ? (void *)gd[j] : (void *)gf[j], 1, &ni);
                pg[j] = (optim_grad_var){
                    sparse ? optim_grad_sparse(idx, nidx, g) : optim_grad_dense(g), var[j]};
            }
            ot_step(opt, pg, 2);
            double lr_t = 0.001 * sqrt(1 - pow(0.999, t)) / (1 - pow(0.9, t));
            for (int j = 0; j < 2; j++) {
                m[j] = 0.9 * m[j] + 0.1 * gv[j];
                v[j] = 0.999 * v[j] + 0.001 * gv[j] * gv[j];
                for (int i = 0; i < n; i++) {
                    if (!touched[i]) {
                        assert_eq(optim_var_get(var[j], i),
                                  dt == OPTIM_F32 ? (float)p[j][i] : p[j][i]);
                        continue;
                    }
                    p[j][i] = p[j][i] * (1 - wd) - lr_t * m[j] / (sqrt(v[j]) + eps);
                    /* assert_allclose_according_to_type: 1e-6 for float32 */
                    double tol = dt == OPTIM_F64 ? 1e-12 : 1e-6;
                    assert_close(optim_var_get(var[j], i), p[j][i], tol, tol);
                }
            }
        }
        optim_test_free(opt, var[0], var[1]);
    }
}
