/* Fuzz target: a structured driver of optim_apply_gradients.
 *
 * The input picks one config (every built-in class and wrapper, from
 * tests/replay_configs.inc), 1 to 3 variables, then up to 6 operations:
 * apply_gradients with dense, sparse or absent gradients (wrong shapes,
 * dtypes, out-of-range or repeated indices, NaN and Inf included),
 * set_weights with altered tensors, set_iterations and set_hyper with any
 * double. Promise checked: a call that fails changes nothing - variables,
 * weights (names, dtypes, shapes, bytes), iterations and config. */
#include <string.h>

#include "fuzz.h"
#include "optim/optim.h"

static const char *const configs[] = {
#include "../replay_configs.inc"
};
#define NCONFIGS (sizeof configs / sizeof *configs)
#define MAXV 3

typedef struct input {
    const uint8_t *p;
    size_t n;
} input;

static uint8_t take(input *in)
{
    if (!in->n) return 0;
    in->n--;
    return *in->p++;
}

static double take_value(input *in)
{
    static const double special[] = {0.0,   -0.0,      1e30,      -1e30,
                                     1e-40, 0.0 / 0.0, 1.0 / 0.0, -1.0 / 0.0};
    uint8_t b = take(in);
    if (b >= 248) return special[b - 248];
    return ((double)b - 124) / 16;
}

static double take_double(input *in)
{
    uint8_t b = take(in);
    if (b < 200) return take_value(in);
    double d;
    uint8_t raw[sizeof d];
    for (size_t i = 0; i < sizeof d; i++) raw[i] = take(in);
    memcpy(&d, raw, sizeof d);
    return d;
}

/* ---- snapshots: everything a failed call must leave as it was ----------- */

typedef struct snapshot {
    size_t len, cap;
    uint8_t *bytes;
} snapshot;

static void put(snapshot *s, const void *p, size_t n)
{
    if (s->len + n > s->cap) {
        s->cap = (s->len + n) * 2;
        s->bytes = realloc(s->bytes, s->cap);
        FUZZ_CHECK(s->bytes != NULL, "out of memory");
    }
    if (n) memcpy(s->bytes + s->len, p, n);
    s->len += n;
}

static void put_tensor(snapshot *s, const optim_tensor *t)
{
    put(s, &t->dtype, sizeof t->dtype);
    put(s, &t->rank, sizeof t->rank);
    put(s, t->shape, sizeof t->shape[0] * (size_t)t->rank);
    put(s, t->data, (size_t)optim_tensor_numel(t) * optim_dtype_size(t->dtype));
}

static snapshot take_snapshot(optim_optimizer *opt, optim_var **vars, size_t nv)
{
    snapshot s = {0, 0, NULL};
    for (size_t i = 0; i < nv; i++) {
        optim_tensor t = optim_var_tensor(vars[i]);
        put_tensor(&s, &t);
    }
    size_t nw = optim_weights_count(opt);
    put(&s, &nw, sizeof nw);
    optim_tensor *w = calloc(nw ? nw : 1, sizeof *w);
    FUZZ_CHECK(optim_get_weights(opt, w, nw) == nw, "weights count");
    for (size_t i = 0; i < nw; i++) {
        const char *name = optim_weight_name(opt, i);
        put(&s, name, strlen(name) + 1);
        put_tensor(&s, &w[i]);
    }
    free(w);
    int64_t it = optim_iterations(opt);
    put(&s, &it, sizeof it);
    char *cfg = optim_serialize(opt);
    FUZZ_CHECK(cfg != NULL, "serialize: %s", optim_errmsg(opt));
    put(&s, cfg, strlen(cfg) + 1);
    optim_free(cfg);
    return s;
}

static void check_unchanged(snapshot *before, optim_optimizer *opt, optim_var **vars, size_t nv,
                            const char *what, int rc)
{
    snapshot after = take_snapshot(opt, vars, nv);
    FUZZ_CHECK(after.len == before->len && memcmp(after.bytes, before->bytes, after.len) == 0,
               "%s failed (%d: %s) but changed the state", what, rc, optim_errmsg(opt));
    free(after.bytes);
}

/* ---- operations ---------------------------------------------------------- */

typedef struct grad_buf {
    double values[64];
    float values32[64];
    int64_t indices[8];
} grad_buf;

/* A tensor shaped like `like` (rank and dims possibly altered) with values
 * from the input, in f32 or f64. */
static optim_tensor make_tensor(input *in, grad_buf *b, int32_t rank, const int64_t *shape)
{
    uint8_t how = take(in);
    int64_t dims[OPTIM_MAX_RANK] = {0};
    memcpy(dims, shape, sizeof dims[0] * (size_t)rank);
    if (how & 0x40) rank = take(in) % 3;
    if (how & 0x20)
        for (int32_t i = 0; i < rank; i++) dims[i] = take(in) % 5;
    int64_t numel = 1;
    for (int32_t i = 0; i < rank; i++) numel *= dims[i];
    if (numel > 64) numel = 64, rank = 1, dims[0] = 64;
    for (int64_t i = 0; i < numel; i++) b->values32[i] = (float)(b->values[i] = take_value(in));
    optim_dtype dt = (how & 0x80) ? OPTIM_F32 : OPTIM_F64;
    void *p = dt == OPTIM_F32 ? (void *)b->values32 : (void *)b->values;
    if (numel == 0 && (how & 1)) p = NULL; /* no elements: NULL data is allowed */
    return optim_tensor_make(dt, p, rank, dims);
}

static optim_grad make_grad(input *in, grad_buf *b, optim_var *v)
{
    uint8_t kind = take(in) % 4;
    int32_t rank = optim_var_rank(v);
    const int64_t *shape = optim_var_shape(v);
    if (kind == 0) return optim_grad_none();
    if (kind <= 2 || rank == 0) {
        optim_tensor t = make_tensor(in, b, rank, shape);
        if (optim_var_dtype(v) == OPTIM_F32 && !(take(in) & 1))
            t.dtype = OPTIM_F32, t.data = b->values32;
        return optim_grad_dense(t);
    }
    int64_t n = take(in) % 5;
    for (int64_t i = 0; i < n; i++) b->indices[i] = (int8_t)take(in) % 6;
    int64_t row[OPTIM_MAX_RANK];
    row[0] = n;
    memcpy(row + 1, shape + 1, sizeof row[0] * (size_t)(rank - 1));
    optim_tensor values = make_tensor(in, b, rank, row);
    return optim_grad_sparse(b->indices, n, values);
}

static int op_apply(input *in, optim_optimizer *opt, optim_var **vars, size_t nv)
{
    optim_grad_var pairs[MAXV + 1];
    grad_buf bufs[MAXV + 1];
    size_t n = nv;
    for (size_t i = 0; i < nv; i++) {
        pairs[i].var = vars[i];
        pairs[i].grad = make_grad(in, &bufs[i], vars[i]);
    }
    uint8_t extra = take(in);
    if (extra % 8 == 1) { /* the same variable twice */
        pairs[n].var = vars[0];
        pairs[n++].grad = make_grad(in, &bufs[nv], vars[0]);
    }
    if (extra % 8 == 2) pairs[0].var = NULL;
    uint32_t flags = (extra & 0x10) ? OPTIM_APPLY_NO_AGGREGATE : 0;
    return optim_apply_gradients(opt, pairs, n, flags);
}

static int op_set_weights(input *in, optim_optimizer *opt)
{
    size_t nw = optim_weights_count(opt);
    optim_tensor *w = calloc(nw + 1, sizeof *w);
    optim_get_weights(opt, w, nw);
    void **copies = calloc(nw + 1, sizeof *copies);
    for (size_t i = 0; i < nw; i++) {
        size_t bytes = (size_t)optim_tensor_numel(&w[i]) * optim_dtype_size(w[i].dtype);
        copies[i] = malloc(bytes ? bytes : 1);
        memcpy(copies[i], w[i].data, bytes);
        w[i].data = copies[i];
    }
    uint8_t how = take(in);
    size_t pick = nw ? take(in) % nw : 0;
    int64_t big[] = {-1, 0, 7, INT64_MAX, OPTIM_ITERATIONS_MAX, INT64_MIN};
    if (nw && (how & 3) == 1 && w[pick].rank > 0) w[pick].shape[0] += 1;
    if (nw && (how & 3) == 2) w[pick].dtype = w[pick].dtype == OPTIM_F32 ? OPTIM_F64 : OPTIM_F32;
    if (nw && w[0].dtype == OPTIM_I64 && (how & 0x1c))
        *(int64_t *)w[0].data = big[((how >> 2) & 7) % 6];
    if (nw && (how & 0x20) && optim_tensor_numel(&w[pick]) > 0 && w[pick].dtype == OPTIM_F32)
        *(float *)w[pick].data = (float)take_value(in);
    size_t count = (how & 0xc0) == 0xc0 ? nw - 1 : nw;
    int rc = optim_set_weights(opt, w, count);
    for (size_t i = 0; i < nw; i++) free(copies[i]);
    free(copies);
    free(w);
    return rc;
}

static const char *const hypers[] = {"learning_rate",   "beta_1",       "beta_2",       "epsilon",
                                     "momentum",        "rho",          "clipnorm",     "clipvalue",
                                     "global_clipnorm", "weight_decay", "no_such_hyper"};

static int op_step(input *in, optim_optimizer *opt, optim_var **vars, size_t nv, const char **what)
{
    uint8_t op = take(in) % 8;
    if (op < 5) {
        *what = "apply_gradients";
        return op_apply(in, opt, vars, nv);
    }
    if (op == 5) {
        *what = "set_weights";
        return op_set_weights(in, opt);
    }
    if (op == 6) {
        int64_t values[] = {
            -1, 0, 3, 1000, INT64_MAX, OPTIM_ITERATIONS_MAX, OPTIM_ITERATIONS_MAX - 1, INT64_MIN};
        *what = "set_iterations";
        return optim_set_iterations(opt, values[take(in) % 8]);
    }
    *what = "set_hyper";
    const char *name = hypers[take(in) % (sizeof hypers / sizeof *hypers)];
    return optim_set_hyper(opt, name, take_double(in));
}

static optim_var *make_var(input *in, size_t i)
{
    uint8_t how = take(in);
    int32_t rank = how % 3;
    int64_t shape[2];
    double init[16];
    int64_t numel = 1;
    for (int32_t d = 0; d < rank; d++) numel *= shape[d] = 1 + take(in) % 4;
    for (int64_t j = 0; j < numel; j++) init[j] = take_value(in);
    float init32[16];
    for (int64_t j = 0; j < numel; j++) init32[j] = (float)init[j];
    char name[16];
    snprintf(name, sizeof name, "v%zu", i);
    optim_dtype dt = (how & 4) ? OPTIM_F64 : OPTIM_F32;
    optim_var *v = NULL;
    optim_error err;
    int rc = optim_var_create(&v, name, dt, rank, shape,
                              dt == OPTIM_F64 ? (void *)init : (void *)init32, &err);
    FUZZ_CHECK(rc == OPTIM_OK, "%s", err.msg);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input in = {data, size};
    optim_optimizer *opt = NULL;
    optim_error err;
    const char *config = configs[take(&in) % NCONFIGS];
    FUZZ_CHECK(optim_from_json(&opt, config, &err) == OPTIM_OK, "%s: %s", config, err.msg);
    optim_var *vars[MAXV];
    size_t nv = 1 + take(&in) % MAXV;
    for (size_t i = 0; i < nv; i++) vars[i] = make_var(&in, i);
    for (int step = 0; step < 6 && in.n; step++) {
        snapshot before = take_snapshot(opt, vars, nv);
        const char *what = "";
        int rc = op_step(&in, opt, vars, nv, &what);
        if (rc != OPTIM_OK) {
            FUZZ_CHECK(optim_errmsg(opt)[0] != '\0', "%s failed (%d) without a message", what, rc);
            check_unchanged(&before, opt, vars, nv, what, rc);
        }
        free(before.bytes);
    }
    optim_destroy(opt);
    for (size_t i = 0; i < nv; i++) optim_var_destroy(vars[i]);
    return 0;
}
