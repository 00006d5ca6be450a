/* `optim replay CONFIG INIT GRADS OUT` (docs/command.md), end to end.
 *
 * Each test builds CONFIG, INIT and GRADS in a directory of its own with the
 * library's safetensors writer, runs the built `optim` binary with
 * optim_test_capture (stderr captured, no shell), and reads OUT back with
 * optim_st_read. Expected values come from the Keras SGD recurrences computed
 * here independently in double precision:
 *
 *     momentum == 0:  w -= lr * g
 *     otherwise:      m = momentum * m - lr * g
 *                     w += m                              (nesterov false)
 *                     w += momentum * m - lr * g          (nesterov true)
 *     legacy decay:   lr_t = lr / (1 + decay * t), t the 0-based step
 *
 * The bad-input tests check the contract: a non-zero exit status (not a
 * crash), exactly one line on stderr saying what is wrong, and no OUT (nor a
 * stray temporary file next to it); an OUT that already existed is left as
 * it was. */
#define _POSIX_C_SOURCE 200809L

#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/types.h>
#include <unistd.h>

#include "optim/safetensors.h"
#include "optim/tensor.h"

#ifndef OPTIM_CLI_PATH
#error "the build must define OPTIM_CLI_PATH"
#endif

#define RTOL_F32 1e-6
#define ATOL_F32 1e-6
#define RTOL_F64 1e-12
#define ATOL_F64 1e-12

/* ---- Test-owned resources ------------------------------------------------------
 *
 * A failed cmocka assertion leaves the test by longjmp, so everything a test
 * allocates is registered here and freed by the teardown, keeping the
 * sanitizer build's leak report about the library alone. */

enum { K_MEM, K_FILE, K_WRITER };
#define MAX_KEPT 256
static void *kept[MAX_KEPT];
static int kept_kind[MAX_KEPT];
static int nkept;

static void *keep(int kind, void *p)
{
    assert_non_null(p);
    assert_lt(nkept, MAX_KEPT);
    kept[nkept] = p;
    kept_kind[nkept++] = kind;
    return p;
}

static void release(int i)
{
    if (kept_kind[i] == K_FILE) optim_st_free(kept[i]);
    else if (kept_kind[i] == K_WRITER) optim_st_writer_destroy(kept[i]);
    else free(kept[i]);
    kept[i] = kept[--nkept];
    kept_kind[i] = kept_kind[nkept];
}

/* Frees p (registered with keep) now. */
static void drop(void *p)
{
    for (int i = 0; i < nkept; i++)
        if (kept[i] == p) {
            release(i);
            return;
        }
    fail_msg("drop: %p was not kept", p);
}

static int teardown(void **state)
{
    (void)state;
    while (nkept) release(nkept - 1);
    return 0;
}

/* ---- Files of one test ------------------------------------------------------ */

typedef struct paths {
    char dir[512];
    char config[1024], init[1024], grads[1024], out[1024];
} paths;

/* A fresh directory for test `tag` with the four paths in it (nothing created
 * but the directory). */
static void mkpaths(paths *p, const char *tag)
{
    snprintf(p->dir, sizeof p->dir, "%s", optim_test_tmpfile(tag));
    assert_int_equal(mkdir(p->dir, 0700), 0);
    snprintf(p->config, sizeof p->config, "%s/config.json", p->dir);
    snprintf(p->init, sizeof p->init, "%s/init.safetensors", p->dir);
    snprintf(p->grads, sizeof p->grads, "%s/grads.safetensors", p->dir);
    snprintf(p->out, sizeof p->out, "%s/out.safetensors", p->dir);
}

static void write_text(const char *path, const char *text)
{
    assert_int_equal(optim_test_write_file(path, text, strlen(text)), 0);
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_ge(n, 0);
    assert_int_equal(fseek(f, 0, SEEK_SET), 0);
    unsigned char *b = keep(K_MEM, malloc((size_t)n + 1));
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    b[n] = 0;
    *len = (size_t)n;
    return b;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* ---- Building safetensors files --------------------------------------------- */

static optim_st_writer *st_new(void)
{
    optim_st_writer *w = NULL;
    optim_error err;
    assert_int_equal(optim_st_writer_create(&w, &err), OPTIM_OK);
    return keep(K_WRITER, w);
}

static void st_add_raw(optim_st_writer *w, const char *name, optim_dtype dt, const void *data,
                       int rank, const int64_t *shape)
{
    int64_t dims[OPTIM_MAX_RANK] = {0};
    for (int i = 0; i < rank; i++) dims[i] = shape[i];
    optim_tensor t = optim_tensor_make(dt, (void *)data, rank, dims);
    optim_error err;
    int rc = optim_st_writer_add(w, name, &t, &err);
    if (rc) print_error("optim_st_writer_add(%s): %s\n", name, err.msg);
    assert_int_equal(rc, OPTIM_OK);
}

static int64_t numel_of(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    return n;
}

/* Adds `vals` (doubles) as a float tensor of dtype dt (F32 or F64). */
static void st_add_f(optim_st_writer *w, const char *name, optim_dtype dt, const double *vals,
                     int rank, const int64_t *shape)
{
    int64_t n = numel_of(rank, shape);
    if (dt == OPTIM_F64) {
        st_add_raw(w, name, dt, vals, rank, shape);
        return;
    }
    assert_int_equal(dt, OPTIM_F32);
    float *buf = keep(K_MEM, malloc((size_t)(n ? n : 1) * sizeof *buf));
    for (int64_t i = 0; i < n; i++) buf[i] = (float)vals[i];
    st_add_raw(w, name, dt, buf, rank, shape);
    drop(buf);
}

/* Adds a rank-1 integer tensor of dtype dt (I32 or I64). */
static void st_add_idx(optim_st_writer *w, const char *name, optim_dtype dt, const int64_t *idx,
                       int64_t n)
{
    int64_t shape[1] = {n};
    if (dt == OPTIM_I64) {
        st_add_raw(w, name, dt, idx, 1, shape);
        return;
    }
    assert_int_equal(dt, OPTIM_I32);
    int32_t *buf = keep(K_MEM, malloc((size_t)(n ? n : 1) * sizeof *buf));
    for (int64_t i = 0; i < n; i++) buf[i] = (int32_t)idx[i];
    st_add_raw(w, name, dt, buf, 1, shape);
    drop(buf);
}

static void st_save(optim_st_writer *w, const char *path)
{
    optim_error err;
    int rc = optim_st_writer_save(w, path, &err);
    if (rc) print_error("optim_st_writer_save(%s): %s\n", path, err.msg);
    assert_int_equal(rc, OPTIM_OK);
    drop(w);
}

/* Rounds values through the dtype, so the reference starts from exactly what
 * the file holds. */
static void round_to(optim_dtype dt, double *v, size_t n)
{
    if (dt == OPTIM_F32)
        for (size_t i = 0; i < n; i++) v[i] = (double)(float)v[i];
}

/* ---- Running the CLI ---------------------------------------------------------- */

/* Runs OPTIM_CLI_PATH with args (NULL-terminated, without argv[0]), its
 * output in *r. */
static void run_cli(const char *const *args, optim_test_proc *r)
{
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)OPTIM_CLI_PATH;
    for (; args[n - 1]; n++) {
        assert_lt(n, 15);
        argv[n] = (char *)args[n - 1];
    }
    argv[n] = NULL;
    optim_test_capture(argv, r);
}

static void run_replay(const paths *p, optim_test_proc *r)
{
    const char *args[] = {"replay", p->config, p->init, p->grads, p->out, NULL};
    run_cli(args, r);
}

/* Runs the replay with `config` (written to CONFIG first unless NULL); it
 * must succeed silently. Returns OUT, read back. */
static optim_st_file *replay_ok(const paths *p, const char *config)
{
    if (config) write_text(p->config, config);
    optim_test_proc r;
    run_replay(p, &r);
    if (r.status != 0 || r.err_len != 0)
        print_error("optim replay exited with %d, stderr:\n%s\n", r.status, r.err);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.err_len, 0);
    optim_st_file *f = NULL;
    optim_error err;
    int rc = optim_st_read(p->out, &f, &err);
    if (rc) print_error("reading OUT: %s\n", err.msg);
    assert_int_equal(rc, OPTIM_OK);
    return keep(K_FILE, f);
}

/* Number of entries of dir whose name starts with prefix. */
static int count_prefixed(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

/* The failure contract: non-zero exit (not a signal), exactly one non-empty
 * line on stderr that mentions `needle` (if not NULL), no OUT. */
static void check_failed(const optim_test_proc *r, const char *dir, const char *out,
                         const char *needle)
{
    if (getenv("OPTIM_TEST_VERBOSE")) fprintf(stderr, "    [exit %d] %s", r->status, r->err);
    int ok = r->status != 0 && r->status < 1000;
    if (!ok)
        print_error("expected a non-zero exit status, got %d%s; stderr:\n%s\n", r->status,
                    r->status >= 1000 ? " (killed by a signal)" : "", r->err);
    assert_true(ok);
    int lines = 0;
    for (size_t i = 0; i < r->err_len && i < sizeof r->err; i++) lines += r->err[i] == '\n';
    ok = r->err_len > 1 && r->err_len < sizeof r->err && lines == 1 &&
        r->err[r->err_len - 1] == '\n';
    if (!ok)
        print_error("expected exactly one line on stderr, got %zu bytes, %d newlines:\n%s\n",
                    r->err_len, lines, r->err);
    assert_true(ok);
    if (needle && !strstr(r->err, needle)) {
        print_error("stderr does not mention '%s':\n%s", needle, r->err);
        fail();
    }
    if (out) {
        if (exists(out)) print_error("OUT %s was created; stderr: %s", out, r->err);
        assert_false(exists(out));
    }
    if (dir) assert_int_equal(count_prefixed(dir, "out.safetensors"), 0);
    if (dir) assert_int_equal(count_prefixed(dir, ".optim-"), 0); /* no temporary file */
}

static void expect_fail(const paths *p, const char *config, const char *needle)
{
    if (config) write_text(p->config, config);
    optim_test_proc r;
    run_replay(p, &r);
    check_failed(&r, p->dir, p->out, needle);
}

/* ---- Reading OUT -------------------------------------------------------------- */

/* Tensor `name` of f must have dtype dt and this shape; its values go to dst
 * as doubles. */
static void get_f(const optim_st_file *f, const char *name, optim_dtype dt, int rank,
                  const int64_t *shape, double *dst)
{
    optim_tensor t;
    int rc = optim_st_get(f, name, &t);
    if (rc) print_error("OUT has no tensor '%s'\n", name);
    assert_int_equal(rc, OPTIM_OK);
    if (t.dtype != dt) print_error("OUT '%s' has dtype %s\n", name, optim_dtype_name(t.dtype));
    assert_int_equal(t.dtype, dt);
    assert_int_equal(t.rank, rank);
    for (int i = 0; i < rank; i++) assert_int_equal(t.shape[i], shape[i]);
    int64_t n = numel_of(rank, shape);
    for (int64_t i = 0; i < n; i++)
        dst[i] = dt == OPTIM_F32 ? (double)((const float *)t.data)[i] : ((const double *)t.data)[i];
}

/* Tensor `name` must equal `expect` within the dtype's tolerance. */
static void check_f(const optim_st_file *f, const char *name, optim_dtype dt, int rank,
                    const int64_t *shape, const double *expect)
{
    int64_t n = numel_of(rank, shape);
    double *got = keep(K_MEM, malloc((size_t)(n ? n : 1) * sizeof *got));
    get_f(f, name, dt, rank, shape, got);
    double rtol = dt == OPTIM_F32 ? RTOL_F32 : RTOL_F64,
           atol = dt == OPTIM_F32 ? ATOL_F32 : ATOL_F64;
    for (int64_t i = 0; i < n; i++) {
        if (!(fabs(got[i] - expect[i]) <= atol + rtol * fabs(expect[i])))
            print_error("OUT '%s'[%lld] differs from the reference\n", name, (long long)i);
        assert_close(got[i], expect[i], rtol, atol);
    }
    drop(got);
}

static void check_iterations(const optim_st_file *f, int64_t steps)
{
    optim_tensor t;
    assert_int_equal(optim_st_get(f, "iterations", &t), OPTIM_OK);
    assert_int_equal(t.dtype, OPTIM_I64);
    assert_int_equal(t.rank, 0);
    assert_int_equal(((const int64_t *)t.data)[0], steps);
}

/* OUT must hold exactly these names (NULL-terminated list). */
static void check_names(const optim_st_file *f, const char *const *names)
{
    size_t n = 0;
    for (; names[n]; n++) {
        optim_tensor t;
        if (optim_st_get(f, names[n], &t) != OPTIM_OK) {
            print_error("OUT has no tensor '%s'\n", names[n]);
            fail();
        }
    }
    if (optim_st_count(f) != n) {
        for (size_t i = 0; i < optim_st_count(f); i++)
            print_error("OUT has '%s'\n", optim_st_name(f, i));
    }
    assert_int_equal(optim_st_count(f), n);
}

/* ---- The reference ---------------------------------------------------------------- */

typedef struct ropts {
    double lr, momentum;
    int nesterov;
    int legacy;
    double decay; /* legacy only; 0: none */
    double clipnorm, clipvalue, global; /* 0: none */
} ropts;

static ropts ropts_sgd(double lr, double momentum, int nesterov)
{
    ropts o = {lr, momentum, nesterov, 0, 0.0, 0.0, 0.0, 0.0};
    return o;
}

/* The Keras JSON config for o. */
static void config_of(const ropts *o, char *buf, size_t n)
{
    int u = snprintf(buf, n,
                     "{\"class_name\": \"SGD\", \"config\": {\"name\": \"SGD\", \"learning_rate\": "
                     "%.17g, \"momentum\": %.17g, \"nesterov\": %s",
                     o->lr, o->momentum, o->nesterov ? "true" : "false");
    if (o->legacy) u += snprintf(buf + u, n - (size_t)u, ", \"is_legacy_optimizer\": true");
    if (o->decay > 0) u += snprintf(buf + u, n - (size_t)u, ", \"decay\": %.17g", o->decay);
    if (o->clipnorm > 0)
        u += snprintf(buf + u, n - (size_t)u, ", \"clipnorm\": %.17g", o->clipnorm);
    if (o->clipvalue > 0)
        u += snprintf(buf + u, n - (size_t)u, ", \"clipvalue\": %.17g", o->clipvalue);
    if (o->global > 0)
        u += snprintf(buf + u, n - (size_t)u, ", \"global_clipnorm\": %.17g", o->global);
    snprintf(buf + u, n - (size_t)u, "}}");
}

/* One SGD update of n elements; m is NULL without momentum. */
static void ref_sgd(double *w, double *m, const double *g, int64_t n, double lr, double mu,
                    int nesterov)
{
    for (int64_t i = 0; i < n; i++) {
        if (!m) {
            w[i] -= lr * g[i];
        } else {
            m[i] = mu * m[i] - lr * g[i];
            w[i] += nesterov ? mu * m[i] - lr * g[i] : m[i];
        }
    }
}

/* The learning rate of 0-based step t. */
static double ref_lr(const ropts *o, int t)
{
    return o->legacy && o->decay > 0 ? o->lr / (1.0 + o->decay * t) : o->lr;
}

/* clipvalue, then clipnorm (per gradient) or global_clipnorm, in place over
 * the step's nv gradients (g[v] has n[v] elements; NULL: no gradient). */
static void ref_clip(const ropts *o, double *const *g, const int64_t *n, int nv)
{
    for (int v = 0; v < nv; v++)
        if (g[v] && o->clipvalue > 0)
            for (int64_t i = 0; i < n[v]; i++)
                g[v][i] = fmin(fmax(g[v][i], -o->clipvalue), o->clipvalue);
    if (o->clipnorm > 0) {
        for (int v = 0; v < nv; v++) {
            if (!g[v]) continue;
            double s = 0;
            for (int64_t i = 0; i < n[v]; i++) s += g[v][i] * g[v][i];
            double norm = sqrt(s);
            for (int64_t i = 0; i < n[v]; i++)
                g[v][i] = g[v][i] * o->clipnorm / fmax(norm, o->clipnorm);
        }
    } else if (o->global > 0) {
        double s = 0;
        for (int v = 0; v < nv; v++)
            if (g[v])
                for (int64_t i = 0; i < n[v]; i++) s += g[v][i] * g[v][i];
        double norm = sqrt(s);
        for (int v = 0; v < nv; v++)
            if (g[v])
                for (int64_t i = 0; i < n[v]; i++)
                    g[v][i] = g[v][i] * o->global / fmax(norm, o->global);
    }
}

/* Deterministic data: initial values and gradients of order 1; step 0's
 * gradients are small (below the clip norms used here), later ones larger. */
static double gen_init(int var, int64_t i)
{
    return 0.5 * cos(0.9 * (double)i + 1.7 * var) + 0.1 * var;
}

static double gen_grad(int step, int var, int64_t i)
{
    double amp = step == 0 ? 0.2 : 1.0 + 0.8 * step;
    return amp * sin(1.3 * step + 0.7 * (double)i + 0.3 * var + 0.1);
}

/* ---- Dense replays ------------------------------------------------------------------ */

typedef struct vdesc {
    const char *name;
    int rank;
    int64_t shape[2];
} vdesc;

static const vdesc DENSE_VARS[2] = {{"dense/kernel", 2, {3, 2}}, {"dense/bias", 1, {2, 0}}};

#define DENSE_STEPS 4
#define MAXN 16

/* Two variables, DENSE_STEPS steps, every variable every step; OUT checked
 * against the reference for every variable, slot and the counter. */
static void check_dense(optim_dtype dt, const ropts *o, const char *tag)
{
    paths p;
    mkpaths(&p, tag);
    double w[2][MAXN], m[2][MAXN], g[2][MAXN];
    int64_t n[2];
    memset(m, 0, sizeof m);
    optim_st_writer *wi = st_new(), *wg = st_new();
    for (int v = 0; v < 2; v++) {
        n[v] = numel_of(DENSE_VARS[v].rank, DENSE_VARS[v].shape);
        for (int64_t i = 0; i < n[v]; i++) w[v][i] = gen_init(v, i);
        round_to(dt, w[v], (size_t)n[v]);
        st_add_f(wi, DENSE_VARS[v].name, dt, w[v], DENSE_VARS[v].rank, DENSE_VARS[v].shape);
    }
    for (int k = 0; k < DENSE_STEPS; k++) {
        double *gp[2];
        for (int v = 0; v < 2; v++) {
            for (int64_t i = 0; i < n[v]; i++) g[v][i] = gen_grad(k, v, i);
            round_to(dt, g[v], (size_t)n[v]);
            char name[128];
            snprintf(name, sizeof name, "%d/%s", k, DENSE_VARS[v].name);
            st_add_f(wg, name, dt, g[v], DENSE_VARS[v].rank, DENSE_VARS[v].shape);
            gp[v] = g[v];
        }
        ref_clip(o, gp, n, 2);
        for (int v = 0; v < 2; v++)
            ref_sgd(w[v], o->momentum > 0 ? m[v] : NULL, g[v], n[v], ref_lr(o, k), o->momentum,
                    o->nesterov);
    }
    st_save(wi, p.init);
    st_save(wg, p.grads);
    char cfg[1024];
    config_of(o, cfg, sizeof cfg);
    optim_st_file *f = replay_ok(&p, cfg);
    if (o->momentum > 0) {
        const char *names[] = {"dense/kernel",        "dense/bias", "dense/kernel/momentum",
                               "dense/bias/momentum", "iterations", NULL};
        check_names(f, names);
    } else {
        const char *names[] = {"dense/kernel", "dense/bias", "iterations", NULL};
        check_names(f, names);
    }
    for (int v = 0; v < 2; v++) {
        check_f(f, DENSE_VARS[v].name, dt, DENSE_VARS[v].rank, DENSE_VARS[v].shape, w[v]);
        if (o->momentum > 0) {
            char name[128];
            snprintf(name, sizeof name, "%s/momentum", DENSE_VARS[v].name);
            check_f(f, name, dt, DENSE_VARS[v].rank, DENSE_VARS[v].shape, m[v]);
        }
    }
    check_iterations(f, DENSE_STEPS);
    drop(f);
}

/* ---- Variables without a gradient at some steps -------------------------------------- */

/* "a" every step, "b" at steps 0 and 2 (skipped in between: neither it nor
 * its momentum moves at step 1), "d" first at step 2 (its slot appears
 * then), "c" never (unchanged, no slot). */
static void check_missing(optim_dtype dt, const char *tag)
{
    enum { NV = 4, STEPS = 3 };
    static const char *const names[NV] = {"a", "b", "c", "d"};
    static const int64_t shapes[NV] = {3, 2, 2, 4};
    static const int has[NV][STEPS] = {{1, 1, 1}, {1, 0, 1}, {0, 0, 0}, {0, 0, 1}};
    const double lr = 0.1, mu = 0.9;
    paths p;
    mkpaths(&p, tag);
    double w[NV][MAXN], m[NV][MAXN], g[MAXN];
    memset(m, 0, sizeof m);
    optim_st_writer *wi = st_new(), *wg = st_new();
    for (int v = 0; v < NV; v++) {
        for (int64_t i = 0; i < shapes[v]; i++) w[v][i] = gen_init(v, i);
        round_to(dt, w[v], (size_t)shapes[v]);
        st_add_f(wi, names[v], dt, w[v], 1, &shapes[v]);
    }
    double init_c[MAXN];
    memcpy(init_c, w[2], sizeof init_c);
    for (int k = 0; k < STEPS; k++)
        for (int v = 0; v < NV; v++) {
            if (!has[v][k]) continue;
            for (int64_t i = 0; i < shapes[v]; i++) g[i] = gen_grad(k, v, i);
            round_to(dt, g, (size_t)shapes[v]);
            char name[64];
            snprintf(name, sizeof name, "%d/%s", k, names[v]);
            st_add_f(wg, name, dt, g, 1, &shapes[v]);
            ref_sgd(w[v], m[v], g, shapes[v], lr, mu, 0);
        }
    st_save(wi, p.init);
    st_save(wg, p.grads);
    optim_st_file *f = replay_ok(
        &p, "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9}}");
    const char *expect[] = {"a",          "b",          "c",          "d", "a/momentum",
                            "b/momentum", "d/momentum", "iterations", NULL};
    check_names(f, expect);
    for (int v = 0; v < NV; v++) {
        check_f(f, names[v], dt, 1, &shapes[v], w[v]);
        if (v == 2) continue;
        char name[64];
        snprintf(name, sizeof name, "%s/momentum", names[v]);
        check_f(f, name, dt, 1, &shapes[v], m[v]);
    }
    /* "c" bit for bit as it was. */
    double got[MAXN];
    get_f(f, "c", dt, 1, &shapes[2], got);
    for (int64_t i = 0; i < shapes[2]; i++) assert_eq(got[i], init_c[i]);
    check_iterations(f, STEPS);
    drop(f);
}

/* One f32 vector and one f64 scalar in the same replay, Nesterov: each slot
 * has its variable's dtype and shape. */
OPTIM_TEST_WITH(test_mixed_dtypes_and_scalar, NULL, teardown)
{
    paths p;
    mkpaths(&p, "mixed");
    const double lr = 0.05, mu = 0.5;
    int64_t sa[1] = {2}, ss[1] = {0};
    double a[2] = {0.25, -1.5}, ma[2] = {0, 0}, b[1] = {2.0}, mb[1] = {0};
    optim_st_writer *wi = st_new(), *wg = st_new();
    st_add_f(wi, "a", OPTIM_F32, a, 1, sa);
    st_add_f(wi, "b", OPTIM_F64, b, 0, ss);
    for (int k = 0; k < 3; k++) {
        double ga[2] = {gen_grad(k, 0, 0), gen_grad(k, 0, 1)}, gb[1] = {gen_grad(k, 1, 0)};
        round_to(OPTIM_F32, ga, 2);
        char name[32];
        snprintf(name, sizeof name, "%d/a", k);
        st_add_f(wg, name, OPTIM_F32, ga, 1, sa);
        snprintf(name, sizeof name, "%d/b", k);
        st_add_f(wg, name, OPTIM_F64, gb, 0, ss);
        ref_sgd(a, ma, ga, 2, lr, mu, 1);
        ref_sgd(b, mb, gb, 1, lr, mu, 1);
    }
    st_save(wi, p.init);
    st_save(wg, p.grads);
    optim_st_file *f = replay_ok(&p,
                                 "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.05, "
                                 "\"momentum\": 0.5, \"nesterov\": true}}");
    const char *names[] = {"a", "b", "a/momentum", "b/momentum", "iterations", NULL};
    check_names(f, names);
    check_f(f, "a", OPTIM_F32, 1, sa, a);
    check_f(f, "a/momentum", OPTIM_F32, 1, sa, ma);
    check_f(f, "b", OPTIM_F64, 0, ss, b);
    check_f(f, "b/momentum", OPTIM_F64, 0, ss, mb);
    check_iterations(f, 3);
    drop(f);
}

/* Steps are numbers, not strings: "10/w" comes after "9/w" although it sorts
 * before "2/w" by name. 12 steps of legacy SGD with decay and momentum,
 * where the order of the gradients matters. */
OPTIM_TEST_WITH(test_many_steps_numeric_order, NULL, teardown)
{
    enum { STEPS = 12 };
    paths p;
    mkpaths(&p, "many_steps");
    ropts o = ropts_sgd(0.1, 0.9, 0);
    o.legacy = 1;
    o.decay = 0.3;
    const int64_t s[1] = {3};
    double w[3] = {0.5, -0.25, 1.0}, m[3] = {0}, g[3];
    optim_st_writer *wi = st_new(), *wg = st_new();
    st_add_f(wi, "w", OPTIM_F64, w, 1, s);
    for (int k = 0; k < STEPS; k++) {
        for (int i = 0; i < 3; i++) g[i] = gen_grad(k, 0, i) * (k % 2 ? -1 : 1);
        char name[32];
        snprintf(name, sizeof name, "%d/w", k);
        st_add_f(wg, name, OPTIM_F64, g, 1, s);
        ref_sgd(w, m, g, 3, ref_lr(&o, k), o.momentum, 0);
    }
    st_save(wi, p.init);
    st_save(wg, p.grads);
    char cfg[1024];
    config_of(&o, cfg, sizeof cfg);
    optim_st_file *f = replay_ok(&p, cfg);
    check_f(f, "w", OPTIM_F64, 1, s, w);
    check_f(f, "w/momentum", OPTIM_F64, 1, s, m);
    check_iterations(f, STEPS);
    drop(f);
}

/* A bare class name as CONFIG gives Keras's defaults (lr 0.01, no momentum). */
OPTIM_TEST_WITH(test_bare_class_name_config, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bare_name");
    int64_t s[1] = {3};
    double w[3] = {1, 2, 3}, g[3] = {0.5, -1, 2};
    optim_st_writer *wi = st_new(), *wg = st_new();
    st_add_f(wi, "w", OPTIM_F64, w, 1, s);
    st_add_f(wg, "0/w", OPTIM_F64, g, 1, s);
    st_save(wi, p.init);
    st_save(wg, p.grads);
    ref_sgd(w, NULL, g, 3, 0.01, 0, 0);
    optim_st_file *f = replay_ok(&p, "\"sgd\"");
    const char *names[] = {"w", "iterations", NULL};
    check_names(f, names);
    check_f(f, "w", OPTIM_F64, 1, s, w);
    check_iterations(f, 1);
    drop(f);
}

/* ---- Sparse gradients ------------------------------------------------------------------- */

#define SP_ROWS 5
#define SP_COLS 3
#define SP_STEPS 3

/* Indices per step, with duplicates. Row 2 is never indexed; row 4 only at
 * step 1, row 0 at steps 0 and 2: these tell the dense-equivalent (Keras 3)
 * rule from the row-only (legacy) one. */
static const int64_t SP_IDX[SP_STEPS][5] = {{3, 0, 3, 1}, {4, 4}, {1, 3, 1, 1, 0}};
static const int64_t SP_N[SP_STEPS] = {4, 2, 5};

static optim_dtype other_idx_dtype(optim_dtype it)
{
    return it == OPTIM_I32 ? OPTIM_I64 : OPTIM_I32;
}

/* Writes INIT ("emb" [5, 3] and "bias" [3]) and GRADS (sparse for emb, dense
 * for bias; indices of dtype `it` at even steps and the other at odd ones)
 * and computes the reference. `dense_grads` (if not NULL) also gets a GRADS
 * file with the dense equivalent of each sparse gradient, summed in dt. */
static void build_sparse(const paths *p, optim_dtype dt, optim_dtype it, const ropts *o,
                         double *emb, double *emb_m, double *bias, double *bias_m,
                         const char *dense_grads)
{
    const int64_t es[2] = {SP_ROWS, SP_COLS}, bs[1] = {SP_COLS};
    optim_st_writer *wi = st_new(), *wg = st_new(), *wd = dense_grads ? st_new() : NULL;
    for (int64_t i = 0; i < SP_ROWS * SP_COLS; i++) emb[i] = gen_init(0, i);
    for (int64_t i = 0; i < SP_COLS; i++) bias[i] = gen_init(1, i);
    round_to(dt, emb, SP_ROWS * SP_COLS);
    round_to(dt, bias, SP_COLS);
    memset(emb_m, 0, SP_ROWS * SP_COLS * sizeof *emb_m);
    memset(bias_m, 0, SP_COLS * sizeof *bias_m);
    st_add_f(wi, "emb", dt, emb, 2, es);
    st_add_f(wi, "bias", dt, bias, 1, bs);
    double *mom_e = o->momentum > 0 ? emb_m : NULL, *mom_b = o->momentum > 0 ? bias_m : NULL;
    for (int k = 0; k < SP_STEPS; k++) {
        int64_t n = SP_N[k];
        double vals[5 * SP_COLS], gsum[SP_ROWS * SP_COLS] = {0}, gb[SP_COLS];
        float gsum32[SP_ROWS * SP_COLS] = {0};
        int touched[SP_ROWS] = {0};
        for (int64_t j = 0; j < n * SP_COLS; j++) vals[j] = gen_grad(k, 2, j);
        round_to(dt, vals, (size_t)(n * SP_COLS));
        for (int c = 0; c < SP_COLS; c++) gb[c] = gen_grad(k, 1, c);
        round_to(dt, gb, SP_COLS);
        char name[64];
        const int64_t vs[2] = {n, SP_COLS};
        snprintf(name, sizeof name, "%d/emb/indices", k);
        st_add_idx(wg, name, k % 2 ? other_idx_dtype(it) : it, SP_IDX[k], n);
        snprintf(name, sizeof name, "%d/emb/values", k);
        st_add_f(wg, name, dt, vals, 2, vs);
        snprintf(name, sizeof name, "%d/bias", k);
        st_add_f(wg, name, dt, gb, 1, bs);
        /* Clipping sees the rows as given, duplicates not yet summed (as
         * tf.clip_by_norm / clip_by_value / clip_by_global_norm treat an
         * IndexedSlices: on its .values); then duplicates are summed. */
        double *gp[2] = {vals, gb};
        const int64_t gn[2] = {n * SP_COLS, SP_COLS};
        ref_clip(o, gp, gn, 2);
        for (int64_t j = 0; j < n; j++) {
            int64_t r = SP_IDX[k][j];
            touched[r] = 1;
            for (int c = 0; c < SP_COLS; c++) {
                gsum[r * SP_COLS + c] += vals[j * SP_COLS + c];
                gsum32[r * SP_COLS + c] += (float)vals[j * SP_COLS + c];
            }
        }
        if (wd) {
            double dense[SP_ROWS * SP_COLS];
            for (int i = 0; i < SP_ROWS * SP_COLS; i++)
                dense[i] = dt == OPTIM_F32 ? (double)gsum32[i] : gsum[i];
            assert_eq(o->clipnorm, 0);
            assert_eq(o->clipvalue, 0);
            assert_eq(o->global, 0);
            snprintf(name, sizeof name, "%d/bias", k);
            st_add_f(wd, name, dt, gb, 1, bs);
            snprintf(name, sizeof name, "%d/emb", k);
            st_add_f(wd, name, dt, dense, 2, es);
        }
        double lr = ref_lr(o, k);
        if (o->legacy) {
            /* Only the indexed rows, duplicates summed. */
            for (int r = 0; r < SP_ROWS; r++)
                if (touched[r])
                    ref_sgd(emb + r * SP_COLS, mom_e ? mom_e + r * SP_COLS : NULL,
                            gsum + r * SP_COLS, SP_COLS, lr, o->momentum, o->nesterov);
        } else {
            /* The dense equivalent. */
            ref_sgd(emb, mom_e, gsum, SP_ROWS * SP_COLS, lr, o->momentum, o->nesterov);
        }
        ref_sgd(bias, mom_b, gb, SP_COLS, lr, o->momentum, o->nesterov);
    }
    st_save(wi, p->init);
    st_save(wg, p->grads);
    if (wd) st_save(wd, dense_grads);
}

static void check_sparse(optim_dtype dt, optim_dtype it, const ropts *o, const char *tag)
{
    paths p;
    mkpaths(&p, tag);
    double emb[SP_ROWS * SP_COLS], emb_m[SP_ROWS * SP_COLS], bias[SP_COLS], bias_m[SP_COLS];
    double emb0[SP_ROWS * SP_COLS];
    build_sparse(&p, dt, it, o, emb, emb_m, bias, bias_m, NULL);
    for (int64_t i = 0; i < SP_ROWS * SP_COLS; i++) emb0[i] = gen_init(0, i);
    round_to(dt, emb0, SP_ROWS * SP_COLS);
    char cfg[1024];
    config_of(o, cfg, sizeof cfg);
    optim_st_file *f = replay_ok(&p, cfg);
    const int64_t es[2] = {SP_ROWS, SP_COLS}, bs[1] = {SP_COLS};
    if (o->momentum > 0) {
        const char *names[] = {"emb", "bias", "emb/momentum", "bias/momentum", "iterations", NULL};
        check_names(f, names);
        check_f(f, "emb/momentum", dt, 2, es, emb_m);
        check_f(f, "bias/momentum", dt, 1, bs, bias_m);
    } else {
        const char *names[] = {"emb", "bias", "iterations", NULL};
        check_names(f, names);
    }
    check_f(f, "emb", dt, 2, es, emb);
    check_f(f, "bias", dt, 1, bs, bias);
    /* Row 2 is never indexed: under either rule it never moves (its
     * momentum stays zero), bit for bit. */
    double got[SP_ROWS * SP_COLS];
    get_f(f, "emb", dt, 2, es, got);
    for (int c = 0; c < SP_COLS; c++) assert_eq(got[2 * SP_COLS + c], emb0[2 * SP_COLS + c]);
    check_iterations(f, SP_STEPS);
    drop(f);
}

/* ---- The trajectories: one table ------------------------------------------------------ */

/* Each row is a case (registered in main, named by the row, its files in a
 * directory of that name): an SGD replay checked against the reference.
 * DENSE: check_dense; SPARSE: check_sparse with index dtype it; MISSING:
 * check_missing (its own SGD config; o unused). o's fields not given are 0:
 * no momentum, Keras 3, no decay, no clipping. */
enum { DENSE, SPARSE, MISSING };
/* clang-format off */
static const struct trajectory {
    const char *name;
    int kind;
    optim_dtype dt, it;
    ropts o;
} TRAJECTORIES[] = {
    {"test_dense_f32_momentum", DENSE, OPTIM_F32, 0, {.lr = 0.1, .momentum = 0.9}},
    {"test_dense_f64_momentum", DENSE, OPTIM_F64, 0, {.lr = 0.1, .momentum = 0.9}},
    {"test_dense_f32_nesterov", DENSE, OPTIM_F32, 0, {.lr = 0.05, .momentum = 0.8, .nesterov = 1}},
    {"test_dense_f64_nesterov", DENSE, OPTIM_F64, 0, {.lr = 0.05, .momentum = 0.8, .nesterov = 1}},
    /* No momentum: plain w -= lr * g and no slot in OUT. */
    {"test_dense_f32_plain", DENSE, OPTIM_F32, 0, {.lr = 0.3}},
    {"test_dense_f64_plain", DENSE, OPTIM_F64, 0, {.lr = 0.3}},
    /* The same rules under the legacy generation (tf.keras OptimizerV2). */
    {"test_dense_f64_legacy_momentum", DENSE, OPTIM_F64, 0,
     {.lr = 0.1, .momentum = 0.9, .legacy = 1}},
    {"test_legacy_decay_f32", DENSE, OPTIM_F32, 0,
     {.lr = 0.1, .momentum = 0.9, .legacy = 1, .decay = 0.5}},
    {"test_legacy_decay_f64_nesterov", DENSE, OPTIM_F64, 0,
     {.lr = 0.2, .momentum = 0.7, .nesterov = 1, .legacy = 1, .decay = 0.25}},
    {"test_legacy_decay_f64_plain", DENSE, OPTIM_F64, 0, {.lr = 0.2, .legacy = 1, .decay = 1.0}},
    {"test_clipnorm_f32", DENSE, OPTIM_F32, 0, {.lr = 0.1, .momentum = 0.9, .clipnorm = 1.0}},
    {"test_clipnorm_f64", DENSE, OPTIM_F64, 0, {.lr = 0.1, .clipnorm = 1.0}},
    {"test_clipnorm_f64_legacy", DENSE, OPTIM_F64, 0,
     {.lr = 0.1, .momentum = 0.9, .nesterov = 1, .legacy = 1, .clipnorm = 1.5}},
    {"test_clipvalue_f32", DENSE, OPTIM_F32, 0, {.lr = 0.1, .momentum = 0.9, .clipvalue = 0.5}},
    {"test_clipvalue_f64", DENSE, OPTIM_F64, 0, {.lr = 0.1, .clipvalue = 0.5}},
    {"test_global_clipnorm_f64", DENSE, OPTIM_F64, 0, {.lr = 0.1, .momentum = 0.9, .global = 1.5}},
    /* check_missing: some variables without a gradient at some steps. */
    {"test_missing_f64", MISSING, OPTIM_F64, 0, {.lr = 0.1}},
    {"test_missing_f32", MISSING, OPTIM_F32, 0, {.lr = 0.1}},
    /* Keras 3: the dense equivalent (duplicates summed; every row of the
     * momentum decays and every row moves by it). */
    {"test_sparse_keras3_f32_i32_momentum", SPARSE, OPTIM_F32, OPTIM_I32,
     {.lr = 0.1, .momentum = 0.9}},
    {"test_sparse_keras3_f64_i64_momentum", SPARSE, OPTIM_F64, OPTIM_I64,
     {.lr = 0.1, .momentum = 0.9}},
    {"test_sparse_keras3_f64_i32_nesterov", SPARSE, OPTIM_F64, OPTIM_I32,
     {.lr = 0.1, .momentum = 0.6, .nesterov = 1}},
    {"test_sparse_keras3_f64_plain", SPARSE, OPTIM_F64, OPTIM_I64, {.lr = 0.1}},
    /* Legacy with momentum: only the indexed rows of the variable and of its
     * momentum change. */
    {"test_sparse_legacy_f32_i64_momentum", SPARSE, OPTIM_F32, OPTIM_I64,
     {.lr = 0.1, .momentum = 0.9, .legacy = 1}},
    {"test_sparse_legacy_f64_i32_momentum", SPARSE, OPTIM_F64, OPTIM_I32,
     {.lr = 0.1, .momentum = 0.9, .legacy = 1}},
    {"test_sparse_legacy_f64_nesterov", SPARSE, OPTIM_F64, OPTIM_I64,
     {.lr = 0.1, .momentum = 0.6, .nesterov = 1, .legacy = 1}},
    /* Legacy without momentum: a scatter-add of -lr * g, duplicates included. */
    {"test_sparse_legacy_f64_plain", SPARSE, OPTIM_F64, OPTIM_I32, {.lr = 0.1, .legacy = 1}},
    /* Legacy decay applies to sparse steps too. */
    {"test_sparse_legacy_decay", SPARSE, OPTIM_F64, OPTIM_I64,
     {.lr = 0.1, .momentum = 0.9, .legacy = 1, .decay = 0.5}},
    /* Clipping a sparse gradient with duplicate indices: the norm and the
     * value clip apply to the rows as given (tf.clip_by_norm etc. on
     * IndexedSlices.values, in both generations), and the clipped rows are then
     * summed. Step 0's rows for index 3 (0.2*sin...) are small; later steps are
     * clipped. */
    {"test_sparse_legacy_clipnorm_duplicates", SPARSE, OPTIM_F64, OPTIM_I64,
     {.lr = 0.1, .momentum = 0.9, .legacy = 1, .clipnorm = 1.0}},
    {"test_sparse_legacy_clipnorm_duplicates_plain", SPARSE, OPTIM_F64, OPTIM_I32,
     {.lr = 0.1, .legacy = 1, .clipnorm = 1.0}},
    {"test_sparse_legacy_clipvalue_duplicates", SPARSE, OPTIM_F64, OPTIM_I64,
     {.lr = 0.1, .momentum = 0.9, .legacy = 1, .clipvalue = 0.5}},
    {"test_sparse_legacy_clipvalue_duplicates_plain", SPARSE, OPTIM_F64, OPTIM_I64,
     {.lr = 0.1, .legacy = 1, .clipvalue = 0.5}},
    {"test_sparse_legacy_global_clipnorm_duplicates", SPARSE, OPTIM_F64, OPTIM_I64,
     {.lr = 0.1, .momentum = 0.9, .legacy = 1, .global = 1.5}},
    /* Keras 3 on TensorFlow: clipnorm is tf.clip_by_norm on the IndexedSlices. */
    {"test_sparse_keras3_clipnorm_duplicates", SPARSE, OPTIM_F32, OPTIM_I32,
     {.lr = 0.1, .momentum = 0.9, .clipnorm = 1.0}},
};
/* clang-format on */

static void check_trajectory(void **state)
{
    const struct trajectory *t = *state;
    if (t->kind == DENSE) check_dense(t->dt, &t->o, t->name);
    else if (t->kind == SPARSE) check_sparse(t->dt, t->it, &t->o, t->name);
    else check_missing(t->dt, t->name);
}

/* Keras 3: replaying the sparse gradients gives what replaying their dense
 * equivalents (rows summed in f32, in order of appearance) gives. */
OPTIM_TEST_WITH(test_sparse_keras3_equals_dense_replay, NULL, teardown)
{
    paths p;
    mkpaths(&p, "sparse_vs_dense");
    ropts o = ropts_sgd(0.1, 0.9, 0);
    double emb[SP_ROWS * SP_COLS], emb_m[SP_ROWS * SP_COLS], bias[SP_COLS], bias_m[SP_COLS];
    char dense_grads[1024], dense_out[1024];
    snprintf(dense_grads, sizeof dense_grads, "%s/dense_grads.safetensors", p.dir);
    snprintf(dense_out, sizeof dense_out, "%s/dense_out.safetensors", p.dir);
    build_sparse(&p, OPTIM_F32, OPTIM_I32, &o, emb, emb_m, bias, bias_m, dense_grads);
    char cfg[1024];
    config_of(&o, cfg, sizeof cfg);
    optim_st_file *fs = replay_ok(&p, cfg);
    paths q = p;
    snprintf(q.grads, sizeof q.grads, "%s", dense_grads);
    snprintf(q.out, sizeof q.out, "%s", dense_out);
    optim_st_file *fd = replay_ok(&q, NULL);
    assert_int_equal(optim_st_count(fs), optim_st_count(fd));
    for (size_t i = 0; i < optim_st_count(fs); i++) {
        const char *name = optim_st_name(fs, i);
        assert_string_equal(name, optim_st_name(fd, i));
        if (strcmp(name, "iterations") == 0) continue;
        optim_tensor a, b;
        assert_int_equal(optim_st_get(fs, name, &a), OPTIM_OK);
        assert_int_equal(optim_st_get(fd, name, &b), OPTIM_OK);
        assert_int_equal(a.dtype, OPTIM_F32);
        assert_int_equal(b.dtype, OPTIM_F32);
        assert_int_equal(a.rank, b.rank);
        int64_t n = numel_of(a.rank, a.shape);
        assert_int_equal(n, numel_of(b.rank, b.shape));
        for (int64_t j = 0; j < n; j++) {
            double x = ((const float *)a.data)[j], y = ((const float *)b.data)[j];
            if (!(fabs(x - y) <= ATOL_F32 + RTOL_F32 * fabs(y)))
                print_error("'%s'[%lld]: sparse replay vs dense replay\n", name, (long long)j);
            assert_close(x, y, RTOL_F32, ATOL_F32);
        }
    }
    check_iterations(fs, SP_STEPS);
    check_iterations(fd, SP_STEPS);
    drop(fs);
    drop(fd);
}

/* An empty sparse gradient (no rows) still counts as a gradient: under
 * Keras 3 with momentum the momentum decays and the variable moves by it. */
OPTIM_TEST_WITH(test_sparse_empty_rows_keras3, NULL, teardown)
{
    paths p;
    mkpaths(&p, "sparse_empty");
    const int64_t es[2] = {3, 2}, vs0[2] = {2, 2}, vs1[2] = {0, 2};
    double w[6] = {1, 2, 3, 4, 5, 6}, m[6] = {0}, g0[6] = {0}, v0[4] = {0.5, -0.25, 1.0, 2.0},
           g1[6] = {0};
    const int64_t i0[2] = {2, 0}, i1[1] = {0};
    g0[4] = 0.5, g0[5] = -0.25, g0[0] = 1.0, g0[1] = 2.0;
    optim_st_writer *wi = st_new(), *wg = st_new();
    st_add_f(wi, "e", OPTIM_F64, w, 2, es);
    st_add_idx(wg, "0/e/indices", OPTIM_I64, i0, 2);
    st_add_f(wg, "0/e/values", OPTIM_F64, v0, 2, vs0);
    st_add_idx(wg, "1/e/indices", OPTIM_I64, i1, 0);
    st_add_f(wg, "1/e/values", OPTIM_F64, v0, 2, vs1);
    st_save(wi, p.init);
    st_save(wg, p.grads);
    ref_sgd(w, m, g0, 6, 0.1, 0.9, 0);
    ref_sgd(w, m, g1, 6, 0.1, 0.9, 0);
    optim_st_file *f = replay_ok(
        &p, "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9}}");
    check_f(f, "e", OPTIM_F64, 2, es, w);
    check_f(f, "e/momentum", OPTIM_F64, 2, es, m);
    check_iterations(f, 2);
    drop(f);
}

/* ---- Bad inputs --------------------------------------------------------------------------- */

static const char *const SGD_CFG =
    "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"momentum\": 0.9}}";

/* A valid replay: INIT "layer/w" f32 [3] and "emb" f32 [4, 2]; GRADS a dense
 * step 0 for layer/w; CONFIG SGD_CFG. Extra GRADS tensors come from
 * `more` (may be NULL), called with the GRADS writer. */
typedef void (*grads_fn)(optim_st_writer *w);

static void valid_files(const paths *p, grads_fn more)
{
    const int64_t s[1] = {3}, es[2] = {4, 2};
    const double w[3] = {1, 2, 3}, e[8] = {1, 2, 3, 4, 5, 6, 7, 8}, g[3] = {0.5, -0.5, 1};
    optim_st_writer *wi = st_new(), *wg = st_new();
    st_add_f(wi, "layer/w", OPTIM_F32, w, 1, s);
    st_add_f(wi, "emb", OPTIM_F32, e, 2, es);
    st_add_f(wg, "0/layer/w", OPTIM_F32, g, 1, s);
    if (more) more(wg);
    st_save(wi, p->init);
    st_save(wg, p->grads);
    write_text(p->config, SGD_CFG);
}

/* The files above really are valid. */
OPTIM_TEST_WITH(test_valid_files_ok, NULL, teardown)
{
    paths p;
    mkpaths(&p, "valid");
    valid_files(&p, NULL);
    optim_st_file *f = replay_ok(&p, NULL);
    const char *names[] = {"layer/w", "emb", "layer/w/momentum", "iterations", NULL};
    check_names(f, names);
    check_iterations(f, 1);
    drop(f);
}

OPTIM_TEST_WITH(test_bad_arg_count, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_args");
    valid_files(&p, NULL);
    const char *none[] = {"replay", NULL};
    const char *three[] = {"replay", p.config, p.init, p.grads, NULL};
    const char *five[] = {"replay", p.config, p.init, p.grads, p.out, p.out, NULL};
    const char *const *cases[] = {none, three, five};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        optim_test_proc r;
        run_cli(cases[i], &r);
        check_failed(&r, p.dir, p.out, "replay");
    }
}

OPTIM_TEST_WITH(test_bad_missing_config, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_missing_config");
    valid_files(&p, NULL);
    assert_int_equal(unlink(p.config), 0);
    expect_fail(&p, NULL, "config.json");
}

OPTIM_TEST_WITH(test_bad_missing_init, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_missing_init");
    valid_files(&p, NULL);
    assert_int_equal(unlink(p.init), 0);
    expect_fail(&p, NULL, "init.safetensors");
}

OPTIM_TEST_WITH(test_bad_missing_grads, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_missing_grads");
    valid_files(&p, NULL);
    assert_int_equal(unlink(p.grads), 0);
    expect_fail(&p, NULL, "grads.safetensors");
}

/* A directory where a file is expected. */
OPTIM_TEST_WITH(test_bad_config_is_directory, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_config_dir");
    valid_files(&p, NULL);
    assert_int_equal(unlink(p.config), 0);
    assert_int_equal(mkdir(p.config, 0700), 0);
    expect_fail(&p, NULL, "config.json");
}

OPTIM_TEST_WITH(test_bad_config_json, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_json");
    valid_files(&p, NULL);
    static const char *const bad[] = {
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1,",
        "",
        "   ",
        "{\"class_name\": \"SGD\", \"config\": {}} trailing",
        "{'class_name': 'SGD'}",
        "[\"SGD\"]",
        "42",
        "{\"class_name\": \"SGD\", \"config\": [1, 2]}",
        "{\"config\": {\"learning_rate\": 0.1}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect_fail(&p, bad[i], NULL);
}

OPTIM_TEST_WITH(test_bad_unknown_class, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_class");
    valid_files(&p, NULL);
    expect_fail(&p, "{\"class_name\": \"Bogus\", \"config\": {\"learning_rate\": 0.1}}", "Bogus");
    expect_fail(&p, "\"bogus\"", "bogus");
}

OPTIM_TEST_WITH(test_bad_unknown_key, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_key");
    valid_files(&p, NULL);
    expect_fail(&p,
                "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"bogus_key\": 1}}",
                "bogus_key");
    /* A config that mixes the generations' keys is refused, naming them. */
    expect_fail(&p,
                "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 0.1, \"lr\": 0.5, "
                "\"use_ema\": false}}",
                "lr");
}

OPTIM_TEST_WITH(test_bad_hyperparameter_values, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_values");
    valid_files(&p, NULL);
    expect_fail(&p, "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": -0.1}}",
                "learning_rate");
    expect_fail(&p, "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": \"0.1\"}}",
                "learning_rate");
    expect_fail(&p, "{\"class_name\": \"SGD\", \"config\": {\"momentum\": 1.5}}", "momentum");
    expect_fail(&p, "{\"class_name\": \"SGD\", \"config\": {\"momentum\": -0.5}}", "momentum");
    expect_fail(&p, "{\"class_name\": \"SGD\", \"config\": {\"nesterov\": 1}}", "nesterov");
    expect_fail(&p, "{\"class_name\": \"SGD\", \"config\": {\"clipnorm\": -1.0}}", "clipnorm");
    expect_fail(&p, "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1e999}}", NULL);
}

OPTIM_TEST_WITH(test_bad_init_truncated, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_init_trunc");
    valid_files(&p, NULL);
    size_t len;
    unsigned char *b = slurp(p.init, &len);
    assert_gt(len, 8);
    assert_int_equal(optim_test_write_file(p.init, b, len - 4), 0);
    expect_fail(&p, NULL, "init.safetensors");
    /* Cut inside the 8-byte size, then empty. */
    assert_int_equal(optim_test_write_file(p.init, b, 5), 0);
    expect_fail(&p, NULL, "init.safetensors");
    assert_int_equal(optim_test_write_file(p.init, b, 0), 0);
    expect_fail(&p, NULL, "init.safetensors");
    drop(b);
}

OPTIM_TEST_WITH(test_bad_init_header_past_end, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_init_hdr");
    valid_files(&p, NULL);
    size_t len;
    unsigned char *b = slurp(p.init, &len);
    uint64_t n = (uint64_t)len; /* > len - 8: the header runs past the end */
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(n >> (8 * i));
    assert_int_equal(optim_test_write_file(p.init, b, len), 0);
    expect_fail(&p, NULL, "init.safetensors");
    /* An absurd size. */
    for (int i = 0; i < 8; i++) b[i] = 0xff;
    assert_int_equal(optim_test_write_file(p.init, b, len), 0);
    expect_fail(&p, NULL, "init.safetensors");
    drop(b);
}

OPTIM_TEST_WITH(test_bad_init_not_safetensors, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_init_text");
    valid_files(&p, NULL);
    write_text(p.init, "this is not a safetensors file at all\n");
    expect_fail(&p, NULL, "init.safetensors");
}

OPTIM_TEST_WITH(test_bad_grads_corrupt, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_grads_corrupt");
    valid_files(&p, NULL);
    size_t len;
    unsigned char *b = slurp(p.grads, &len);
    assert_int_equal(optim_test_write_file(p.grads, b, len - 1), 0);
    expect_fail(&p, NULL, "grads.safetensors");
    drop(b);
}

OPTIM_TEST_WITH(test_bad_init_empty, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_init_empty");
    valid_files(&p, NULL);
    st_save(st_new(), p.init);
    expect_fail(&p, NULL, "INIT");
}

OPTIM_TEST_WITH(test_bad_init_int_dtype, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_init_i32");
    valid_files(&p, NULL);
    const int64_t s[1] = {3}, es[2] = {4, 2};
    const double w[3] = {1, 2, 3}, e[8] = {0};
    const int32_t c32[2] = {1, 2};
    const int64_t c64[2] = {1, 2}, cs[1] = {2};
    optim_st_writer *wi = st_new();
    st_add_f(wi, "layer/w", OPTIM_F32, w, 1, s);
    st_add_f(wi, "emb", OPTIM_F32, e, 2, es);
    st_add_raw(wi, "count", OPTIM_I32, c32, 1, cs);
    st_save(wi, p.init);
    expect_fail(&p, NULL, "count");
    wi = st_new();
    st_add_f(wi, "layer/w", OPTIM_F32, w, 1, s);
    st_add_raw(wi, "step", OPTIM_I64, c64, 1, cs);
    st_save(wi, p.init);
    expect_fail(&p, NULL, "step");
}

static void add_unknown_var(optim_st_writer *w)
{
    const double g[2] = {1, 2};
    const int64_t s[1] = {2};
    st_add_f(w, "1/nope", OPTIM_F32, g, 1, s);
}

OPTIM_TEST_WITH(test_bad_grads_unknown_variable, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_unknown_var");
    valid_files(&p, add_unknown_var);
    expect_fail(&p, NULL, "nope");
}

static void add_unknown_sparse(optim_st_writer *w)
{
    const double v[2] = {1, 2};
    const int64_t vs[2] = {1, 2}, idx[1] = {0};
    st_add_idx(w, "0/nope/indices", OPTIM_I64, idx, 1);
    st_add_f(w, "0/nope/values", OPTIM_F32, v, 2, vs);
}

OPTIM_TEST_WITH(test_bad_grads_unknown_sparse_variable, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_unknown_sparse");
    valid_files(&p, add_unknown_sparse);
    expect_fail(&p, NULL, "nope");
}

/* GRADS names that do not start with a step number. */
OPTIM_TEST_WITH(test_bad_grads_name_without_step, NULL, teardown)
{
    static const char *const bad[] = {
        "layer/w",    "x/layer/w", "-1/layer/w", "+1/layer/w", " 1/layer/w",
        "1x/layer/w", "/layer/w",  "1",          "1/",         "99999999999999999999/layer/w"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char tag[64];
        snprintf(tag, sizeof tag, "bad_name_%zu", i);
        paths p;
        mkpaths(&p, tag);
        valid_files(&p, NULL);
        const double g[3] = {1, 2, 3};
        const int64_t s[1] = {3};
        optim_st_writer *wg = st_new();
        st_add_f(wg, "0/layer/w", OPTIM_F32, g, 1, s);
        st_add_f(wg, bad[i], OPTIM_F32, g, 1, s);
        st_save(wg, p.grads);
        expect_fail(&p, NULL, NULL);
    }
}

/* Two spellings of step 0 for the same variable: one of the gradients would
 * be silently dropped. */
static void add_step_00(optim_st_writer *w)
{
    const double g[3] = {100, 200, 300};
    const int64_t s[1] = {3};
    st_add_f(w, "00/layer/w", OPTIM_F32, g, 1, s);
}

OPTIM_TEST_WITH(test_bad_grads_same_step_twice, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_step_twice");
    valid_files(&p, add_step_00);
    expect_fail(&p, NULL, "layer/w");
}

static void add_gap(optim_st_writer *w)
{
    const double g[3] = {1, 2, 3};
    const int64_t s[1] = {3};
    st_add_f(w, "2/layer/w", OPTIM_F32, g, 1, s);
}

/* Steps run from 0 to the largest K; a step with no gradient at all is
 * refused (Keras: "No gradients provided for any variable"). */
OPTIM_TEST_WITH(test_bad_grads_step_without_any_gradient, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_gap");
    valid_files(&p, add_gap);
    expect_fail(&p, NULL, "1");
}

OPTIM_TEST_WITH(test_bad_grads_empty, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_grads_empty");
    valid_files(&p, NULL);
    st_save(st_new(), p.grads);
    expect_fail(&p, NULL, "GRADS");
}

/* A gradient of the wrong shape: another length, another rank, a scalar. */
OPTIM_TEST_WITH(test_bad_grad_shape, NULL, teardown)
{
    const double g[4] = {1, 2, 3, 4};
    const int64_t s4[1] = {4}, s31[2] = {3, 1}, s0[1] = {0};
    struct {
        int rank;
        const int64_t *shape;
    } cases[] = {{1, s4}, {2, s31}, {0, s0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char tag[64];
        snprintf(tag, sizeof tag, "bad_shape_%zu", i);
        paths p;
        mkpaths(&p, tag);
        valid_files(&p, NULL);
        optim_st_writer *wg = st_new();
        st_add_f(wg, "0/layer/w", OPTIM_F32, g, cases[i].rank, cases[i].shape);
        st_save(wg, p.grads);
        expect_fail(&p, NULL, "layer/w");
    }
}

/* An F64 (or integer) gradient for an F32 variable. */
OPTIM_TEST_WITH(test_bad_grad_dtype, NULL, teardown)
{
    const double g[3] = {1, 2, 3};
    const int64_t gi[3] = {1, 2, 3}, s[1] = {3};
    paths p;
    mkpaths(&p, "bad_dtype");
    valid_files(&p, NULL);
    optim_st_writer *wg = st_new();
    st_add_f(wg, "0/layer/w", OPTIM_F64, g, 1, s);
    st_save(wg, p.grads);
    expect_fail(&p, NULL, "layer/w");
    wg = st_new();
    st_add_raw(wg, "0/layer/w", OPTIM_I64, gi, 1, s);
    st_save(wg, p.grads);
    expect_fail(&p, NULL, "layer/w");
}

/* A sparse gradient for "emb" [4, 2] at step `step` (plus the dense step 0
 * for layer/w from valid_files). */
static void sparse_grads(const paths *p, int step, optim_dtype it, const int64_t *idx, int64_t n,
                         optim_dtype vt, int vrank, const int64_t *vshape, int with_idx,
                         int with_vals)
{
    const double g[3] = {0.5, -0.5, 1};
    const int64_t s[1] = {3};
    double vals[64];
    for (int i = 0; i < 64; i++) vals[i] = 0.25 * (i + 1);
    optim_st_writer *wg = st_new();
    st_add_f(wg, "0/layer/w", OPTIM_F32, g, 1, s);
    char name[64];
    if (with_idx) {
        snprintf(name, sizeof name, "%d/emb/indices", step);
        st_add_idx(wg, name, it, idx, n);
    }
    if (with_vals) {
        snprintf(name, sizeof name, "%d/emb/values", step);
        st_add_f(wg, name, vt, vals, vrank, vshape);
    }
    st_save(wg, p->grads);
}

OPTIM_TEST_WITH(test_bad_sparse_index_out_of_range, NULL, teardown)
{
    const int64_t vs[2] = {2, 2};
    const int64_t idx_hi[2] = {1, 4}, idx_huge[2] = {0, (int64_t)1 << 40};
    paths p;
    mkpaths(&p, "bad_index_range");
    valid_files(&p, NULL);
    sparse_grads(&p, 0, OPTIM_I32, idx_hi, 2, OPTIM_F32, 2, vs, 1, 1);
    expect_fail(&p, NULL, "emb");
    sparse_grads(&p, 0, OPTIM_I64, idx_hi, 2, OPTIM_F32, 2, vs, 1, 1);
    expect_fail(&p, NULL, "emb");
    sparse_grads(&p, 0, OPTIM_I64, idx_huge, 2, OPTIM_F32, 2, vs, 1, 1);
    expect_fail(&p, NULL, "emb");
}

OPTIM_TEST_WITH(test_bad_sparse_index_negative, NULL, teardown)
{
    const int64_t vs[2] = {2, 2};
    const int64_t idx[2] = {0, -1}, idx_min[2] = {INT64_MIN, 0};
    paths p;
    mkpaths(&p, "bad_index_negative");
    valid_files(&p, NULL);
    sparse_grads(&p, 0, OPTIM_I32, idx, 2, OPTIM_F32, 2, vs, 1, 1);
    expect_fail(&p, NULL, "emb");
    sparse_grads(&p, 0, OPTIM_I64, idx, 2, OPTIM_F32, 2, vs, 1, 1);
    expect_fail(&p, NULL, "emb");
    sparse_grads(&p, 0, OPTIM_I64, idx_min, 2, OPTIM_F32, 2, vs, 1, 1);
    expect_fail(&p, NULL, "emb");
}

OPTIM_TEST_WITH(test_bad_sparse_indices_without_values, NULL, teardown)
{
    const int64_t vs[2] = {2, 2}, idx[2] = {0, 1};
    paths p;
    mkpaths(&p, "bad_no_values");
    valid_files(&p, NULL);
    sparse_grads(&p, 0, OPTIM_I64, idx, 2, OPTIM_F32, 2, vs, 1, 0);
    expect_fail(&p, NULL, "emb");
    /* And the other way round. */
    sparse_grads(&p, 0, OPTIM_I64, idx, 2, OPTIM_F32, 2, vs, 0, 1);
    expect_fail(&p, NULL, "emb");
}

/* values must have one row per index, and the variable's row shape. */
OPTIM_TEST_WITH(test_bad_sparse_count_mismatch, NULL, teardown)
{
    const int64_t idx[3] = {0, 1, 2};
    const int64_t fewer[2] = {2, 2}, more[2] = {4, 2}, wide[2] = {3, 3}, flat[1] = {3};
    paths p;
    mkpaths(&p, "bad_count");
    valid_files(&p, NULL);
    sparse_grads(&p, 0, OPTIM_I32, idx, 3, OPTIM_F32, 2, fewer, 1, 1);
    expect_fail(&p, NULL, "emb");
    sparse_grads(&p, 0, OPTIM_I64, idx, 3, OPTIM_F32, 2, more, 1, 1);
    expect_fail(&p, NULL, "emb");
    sparse_grads(&p, 0, OPTIM_I64, idx, 3, OPTIM_F32, 2, wide, 1, 1);
    expect_fail(&p, NULL, "emb");
    sparse_grads(&p, 0, OPTIM_I64, idx, 3, OPTIM_F32, 1, flat, 1, 1);
    expect_fail(&p, NULL, "emb");
}

OPTIM_TEST_WITH(test_bad_sparse_values_dtype, NULL, teardown)
{
    const int64_t idx[2] = {0, 1}, vs[2] = {2, 2};
    paths p;
    mkpaths(&p, "bad_values_dtype");
    valid_files(&p, NULL);
    sparse_grads(&p, 0, OPTIM_I64, idx, 2, OPTIM_F64, 2, vs, 1, 1);
    expect_fail(&p, NULL, "emb");
}

OPTIM_TEST_WITH(test_bad_sparse_indices_dtype, NULL, teardown)
{
    const double g[3] = {0.5, -0.5, 1}, v[4] = {1, 2, 3, 4}, fidx[2] = {0, 1};
    const int64_t s[1] = {3}, vs[2] = {2, 2}, is[1] = {2}, is2[2] = {2, 1}, idx[2] = {0, 1};
    paths p;
    mkpaths(&p, "bad_indices_dtype");
    valid_files(&p, NULL);
    optim_st_writer *wg = st_new();
    st_add_f(wg, "0/layer/w", OPTIM_F32, g, 1, s);
    st_add_f(wg, "0/emb/indices", OPTIM_F32, fidx, 1, is);
    st_add_f(wg, "0/emb/values", OPTIM_F32, v, 2, vs);
    st_save(wg, p.grads);
    expect_fail(&p, NULL, "indices");
    /* F64 indices, and I64 indices of rank 2. */
    wg = st_new();
    st_add_f(wg, "0/layer/w", OPTIM_F32, g, 1, s);
    st_add_f(wg, "0/emb/indices", OPTIM_F64, fidx, 1, is);
    st_add_f(wg, "0/emb/values", OPTIM_F32, v, 2, vs);
    st_save(wg, p.grads);
    expect_fail(&p, NULL, "indices");
    wg = st_new();
    st_add_f(wg, "0/layer/w", OPTIM_F32, g, 1, s);
    st_add_raw(wg, "0/emb/indices", OPTIM_I64, idx, 2, is2);
    st_add_f(wg, "0/emb/values", OPTIM_F32, v, 2, vs);
    st_save(wg, p.grads);
    expect_fail(&p, NULL, "indices");
}

/* A dense and a sparse gradient for the same variable in one step. */
OPTIM_TEST_WITH(test_bad_dense_and_sparse_same_step, NULL, teardown)
{
    const double e[8] = {0}, v[2] = {1, 2};
    const int64_t es[2] = {4, 2}, vs[2] = {1, 2}, idx[1] = {3};
    paths p;
    mkpaths(&p, "bad_dense_and_sparse");
    valid_files(&p, NULL);
    optim_st_writer *wg = st_new();
    st_add_f(wg, "0/emb", OPTIM_F32, e, 2, es);
    st_add_idx(wg, "0/emb/indices", OPTIM_I64, idx, 1);
    st_add_f(wg, "0/emb/values", OPTIM_F32, v, 2, vs);
    st_save(wg, p.grads);
    expect_fail(&p, NULL, "emb");
}

/* Rows of a scalar variable make no sense. */
OPTIM_TEST_WITH(test_bad_sparse_for_scalar, NULL, teardown)
{
    const double w[1] = {1}, v[1] = {1};
    const int64_t s0[1] = {0}, vs[1] = {1}, idx[1] = {0};
    paths p;
    mkpaths(&p, "bad_sparse_scalar");
    write_text(p.config, SGD_CFG);
    optim_st_writer *wi = st_new(), *wg = st_new();
    st_add_f(wi, "scalar", OPTIM_F64, w, 0, s0);
    st_add_idx(wg, "0/scalar/indices", OPTIM_I64, idx, 1);
    st_add_f(wg, "0/scalar/values", OPTIM_F64, v, 1, vs);
    st_save(wi, p.init);
    st_save(wg, p.grads);
    expect_fail(&p, NULL, "scalar");
}

/* An INIT variable whose name OUT needs for something else ("iterations",
 * or another variable's slot): OUT cannot hold both, so the replay fails. */
OPTIM_TEST_WITH(test_bad_init_name_collides_with_out, NULL, teardown)
{
    const double w[3] = {1, 2, 3};
    const int64_t s[1] = {3};
    static const char *const clash[][2] = {{"iterations", "0/iterations"},
                                           {"layer/w/momentum", "0/layer/w"}};
    for (size_t i = 0; i < 2; i++) {
        char tag[64];
        snprintf(tag, sizeof tag, "bad_collide_%zu", i);
        paths p;
        mkpaths(&p, tag);
        write_text(p.config, SGD_CFG);
        optim_st_writer *wi = st_new(), *wg = st_new();
        st_add_f(wi, "layer/w", OPTIM_F32, w, 1, s);
        st_add_f(wi, clash[i][0], OPTIM_F32, w, 1, s);
        st_add_f(wg, clash[i][1], OPTIM_F32, w, 1, s);
        st_save(wi, p.init);
        st_save(wg, p.grads);
        expect_fail(&p, NULL, clash[i][0]);
    }
}

/* OUT cannot be written: the failure is reported like any other. */
OPTIM_TEST_WITH(test_bad_out_unwritable, NULL, teardown)
{
    paths p;
    mkpaths(&p, "bad_out");
    valid_files(&p, NULL);
    snprintf(p.out, sizeof p.out, "%s/no/such/dir/out.safetensors", p.dir);
    expect_fail(&p, NULL, "out.safetensors");
}

/* ---- A failed replay leaves an existing OUT as it was ------------------------------------- */

static void add_bad_step2(optim_st_writer *w)
{
    const double g[3] = {1, 2, 3}, v[2] = {1, 2};
    const int64_t s[1] = {3}, vs[2] = {1, 2}, idx[1] = {9};
    st_add_f(w, "1/layer/w", OPTIM_F32, g, 1, s);
    st_add_f(w, "2/layer/w", OPTIM_F32, g, 1, s);
    st_add_idx(w, "2/emb/indices", OPTIM_I32, idx, 1);
    st_add_f(w, "2/emb/values", OPTIM_F32, v, 2, vs);
}

OPTIM_TEST_WITH(test_failure_keeps_existing_out, NULL, teardown)
{
    paths p;
    mkpaths(&p, "keep_out");
    valid_files(&p, NULL);
    /* A real OUT from a successful replay. */
    optim_st_file *f = replay_ok(&p, NULL);
    drop(f);
    size_t len0;
    unsigned char *before = slurp(p.out, &len0);

    /* Fails early (CONFIG), late (step 2, after two good steps), and on INIT. */
    optim_test_proc r;
    write_text(p.config, "{\"class_name\": \"Bogus\"}");
    run_replay(&p, &r);
    check_failed(&r, NULL, NULL, "Bogus");

    write_text(p.config, SGD_CFG);
    valid_files(&p, add_bad_step2);
    run_replay(&p, &r);
    check_failed(&r, NULL, NULL, "emb");

    write_text(p.init, "garbage");
    run_replay(&p, &r);
    check_failed(&r, NULL, NULL, "init.safetensors");

    size_t len1;
    unsigned char *after = slurp(p.out, &len1);
    assert_int_equal(len1, len0);
    assert_memory_equal(after, before, len0);
    /* Only OUT itself: no temporary file left beside it. */
    assert_int_equal(count_prefixed(p.dir, "out.safetensors"), 1);
    drop(before);
    drop(after);
}


/* ---- OUT: what replay refuses to replace, long names, signals, scale ------------------------ */

/* An OUT that exists and is not a regular file is refused and left as it was
 * (as root, `optim replay ... /dev/null` once replaced /dev/null). */
OPTIM_TEST_WITH(test_bad_out_not_regular, NULL, teardown)
{
    paths p;
    mkpaths(&p, "out_not_regular");
    valid_files(&p, NULL);
    char target[1100], link[1100], fifo[1100], dir[1100];
    snprintf(target, sizeof target, "%s/target", p.dir);
    snprintf(link, sizeof link, "%s/link", p.dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", p.dir);
    snprintf(dir, sizeof dir, "%s/dir", p.dir);
    write_text(target, "keep me");
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(mkdir(dir, 0700), 0);
    const char *outs[] = {link, fifo, dir, "/dev/null"};
    const char *kinds[] = {"symbolic link", "FIFO", "directory", "device"};
    for (size_t i = 0; i < 4; i++) {
        const char *args[] = {"replay", p.config, p.init, p.grads, outs[i], NULL};
        optim_test_proc r;
        run_cli(args, &r);
        check_failed(&r, p.dir, NULL, kinds[i]);
        assert_non_null(strstr(r.err, "not a regular file"));
    }
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(lstat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(stat("/dev/null", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    size_t len;
    unsigned char *t = slurp(target, &len);
    assert_string_equal((const char *)t, "keep me");
    drop(t);
}

/* An OUT name of 250 bytes (NAME_MAX is 255) works: the temporary file's
 * name does not grow with OUT's. */
OPTIM_TEST_WITH(test_out_long_name, NULL, teardown)
{
    paths p;
    mkpaths(&p, "out_long");
    valid_files(&p, NULL);
    char name[251];
    memset(name, 'o', 250);
    name[250] = '\0';
    snprintf(p.out, sizeof p.out, "%s/%s", p.dir, name);
    optim_st_file *f = replay_ok(&p, NULL);
    check_iterations(f, 1);
    drop(f);
    /* and once more over the existing file (the rename path) */
    f = replay_ok(&p, NULL);
    check_iterations(f, 1);
    drop(f);
    assert_int_equal(count_prefixed(p.dir, ".optim-"), 0);
}

/* Whether dir has an entry other than the test's input files. */
static int has_new_entry(const char *dir)
{
    static const char *const inputs[] = {
        "config.json", "init.safetensors", "grads.safetensors", "stderr.txt", ".", ".."};
    DIR *d = opendir(dir);
    assert_non_null(d);
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        found = 1;
        for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++)
            if (strcmp(e->d_name, inputs[i]) == 0) found = 0;
    }
    closedir(d);
    return found;
}

/* Runs a replay that writes a 32 MB OUT and sends it `sig` as soon as any
 * new entry appears in its directory. */
static void kill_during_write(const paths *p, int sig)
{
    char *argv[] = {OPTIM_CLI_PATH, "replay", (char *)p->config, (char *)p->init, (char *)p->grads,
                    (char *)p->out, NULL};
    int pid = optim_test_start(argv, 1);
    while (optim_test_wait(pid, 0) < 0) {
        if (has_new_entry(p->dir)) {
            kill(pid, sig);
            optim_test_wait(pid, 1);
            break;
        }
        nanosleep(&(struct timespec){0, 100000}, NULL);
    }
}

/* SIGINT or SIGTERM while OUT is written leave no temporary file: either
 * nothing new, or OUT complete. */
OPTIM_TEST_WITH(test_out_signal_leaves_nothing, NULL, teardown)
{
    paths p;
    mkpaths(&p, "out_signal");
    const int64_t rows = (int64_t)8 << 20, shape[2] = {rows, 1}, one = 1;
    float *w = keep(K_MEM, calloc((size_t)rows, sizeof *w));
    assert_non_null(w);
    const float g = 1;
    const int64_t idx = 5;
    optim_st_writer *wi = st_new(), *wg = st_new();
    st_add_raw(wi, "emb", OPTIM_F32, w, 2, shape);
    const int64_t gs[2] = {1, 1};
    st_add_raw(wg, "0/emb/values", OPTIM_F32, &g, 2, gs);
    st_add_raw(wg, "0/emb/indices", OPTIM_I64, &idx, 1, &one);
    st_save(wi, p.init);
    st_save(wg, p.grads);
    drop(w);
    write_text(p.config, SGD_CFG);
    const int sigs[] = {SIGTERM, SIGINT, SIGTERM, SIGINT};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        unlink(p.out);
        kill_during_write(&p, sigs[i]);
        assert_int_equal(count_prefixed(p.dir, ".optim-"), 0);
        assert_int_equal(count_prefixed(p.dir, "out.safetensors"), exists(p.out));
        assert_false(has_new_entry(p.dir) && !exists(p.out));
        if (exists(p.out)) { /* killed after the publish: OUT is whole */
            optim_st_file *f = NULL;
            optim_error err;
            assert_int_equal(optim_st_read(p.out, &f, &err), OPTIM_OK);
            optim_st_free(f);
        }
    }
}

/* 50,000 variables in one step: variables are found by name in log time and
 * new slots ordered in n log n (a linear scan and an insertion sort made
 * this 28.5 s). A generous CPU-time limit, for sanitizer builds. */
OPTIM_TEST_WITH(test_many_variables_one_step, NULL, teardown)
{
    paths p;
    mkpaths(&p, "many_vars");
    enum { NV = 50000 };
    const float v = 1;
    optim_st_writer *wi = st_new(), *wg = st_new();
    for (int i = 0; i < NV; i++) {
        char name[32];
        snprintf(name, sizeof name, "v%05d", i);
        st_add_raw(wi, name, OPTIM_F32, &v, 0, NULL);
        snprintf(name, sizeof name, "0/v%05d", i);
        st_add_raw(wg, name, OPTIM_F32, &v, 0, NULL);
    }
    st_save(wi, p.init);
    st_save(wg, p.grads);
    write_text(p.config, "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.5}}");
    /* CPU time of the child (user + system): the machine may be shared. */
    struct rusage r0, r1;
    getrusage(RUSAGE_CHILDREN, &r0);
    optim_st_file *f = replay_ok(&p, NULL);
    getrusage(RUSAGE_CHILDREN, &r1);
    double secs = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec -
                           r0.ru_stime.tv_sec) +
        1e-6 *
            (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec -
                     r0.ru_stime.tv_usec);
    assert_int_equal(optim_st_count(f), 3 * NV + 1); /* each variable, its m and v; iterations */
    optim_tensor t;
    assert_int_equal(optim_st_get(f, "v49999", &t), OPTIM_OK);
    assert_lt(*(const float *)t.data, 1); /* Adam moved it by about lr */
    drop(f);
    if (secs > 10) print_error("replay of %d variables took %.2f s of CPU\n", NV, secs);
    assert_le(secs, 10);
}

int main(void)
{
    for (size_t i = 0; i < sizeof TRAJECTORIES / sizeof *TRAJECTORIES; i++)
        optim_test_add((struct CMUnitTest){TRAJECTORIES[i].name, check_trajectory, NULL, teardown,
                                           (void *)&TRAJECTORIES[i]});
    return optim_test_run();
}
