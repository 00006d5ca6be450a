/* The replica group object: single or MPI, its per-call scratch memory,
 * attaching optimizers (the gradient aggregator) and the calls that are
 * the same sharded or not. */
#include "distribute/internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

optim_group_options optim_group_defaults(void)
{
    optim_group_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.timeout_seconds = 30;
    return o;
}

int optim_mpi_available(void)
{
#ifdef OPTIM_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

void *optim__group_alloc(optim_group *g, size_t bytes)
{
    if (g->nscratch == g->cap_scratch) {
        size_t cap = g->cap_scratch ? 2 * g->cap_scratch : 64;
        void **s = realloc(g->scratch, cap * sizeof *s);
        if (!s) return NULL;
        g->scratch = s;
        g->cap_scratch = cap;
    }
    void *p = malloc(bytes ? bytes : 1);
    if (p) g->scratch[g->nscratch++] = p;
    return p;
}

void optim__group_scratch_free(optim_group *g)
{
    for (size_t i = 0; i < g->nscratch; i++) free(g->scratch[i]);
    g->nscratch = 0;
}

int optim__group_fail(optim_group *g, const optim_error *err)
{
    snprintf(g->errmsg, sizeof g->errmsg, "%s", err->msg);
    return err->code ? err->code : OPTIM_EINVAL;
}

static int group_err(optim_group *g, int code, const char *fmt, ...) OPTIM__PRINTF(3, 4);
static int group_err(optim_group *g, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->errmsg, sizeof g->errmsg, fmt, ap);
    va_end(ap);
    return code;
}

static int check_options(const optim_group_options *o, optim_error *err)
{
    if (o->size != sizeof *o)
        return optim__err(err, OPTIM_EVERSION,
                          "replica group: options size %u, expected %zu (use optim_group_defaults)",
                          (unsigned)o->size, sizeof *o);
    if (o->shard_optimizer_state != 0 && o->shard_optimizer_state != 1)
        return optim__err(err, OPTIM_EINVAL,
                          "replica group: shard_optimizer_state = %d, expected 0 or 1",
                          o->shard_optimizer_state);
    if (!(o->timeout_seconds > 0) || isinf(o->timeout_seconds))
        return optim__err(err, OPTIM_EINVAL,
                          "replica group: timeout_seconds = %g, expected a finite number > 0",
                          o->timeout_seconds);
    return OPTIM_OK;
}

static int group_new(optim_group **out, const optim_group_options *opts, optim_error *err)
{
    optim_group_options o = opts ? *opts : optim_group_defaults();
    int rc = check_options(&o, err);
    if (rc) return rc;
    optim_group *g = optim__calloc(1, sizeof *g);
    if (!g) return optim__err(err, OPTIM_ENOMEM, "replica group: out of memory");
    g->size = 1;
    g->sharded = o.shard_optimizer_state;
    g->timeout = o.timeout_seconds;
    *out = g;
    return OPTIM_OK;
}

int optim_group_create_single(optim_group **out, const optim_group_options *opts, optim_error *err)
{
    if (out) *out = NULL;
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_group_create_single: out is NULL");
    return group_new(out, opts, err);
}

#ifdef OPTIM_HAVE_MPI
/* MPI that the library initialised is finalised when the program exits
 * (after a failure, not at all: the other ranks may be gone). */
static int mpi_failed;
static void finalize_at_exit(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !mpi_failed) MPI_Finalize();
}
#endif

int optim_group_create_mpi(optim_group **out, const void *comm, const optim_group_options *opts,
                           optim_error *err)
{
    if (out) *out = NULL;
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_group_create_mpi: out is NULL");
#ifdef OPTIM_HAVE_MPI
    optim_group *g = NULL;
    int rc = group_new(&g, opts, err), inited = 0;
    if (rc) return rc;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (finalized ||
            MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            free(g);
            return optim__err(err, OPTIM_EIO, "optim_group_create_mpi: MPI_Init failed%s",
                              finalized ? " (MPI was already finalised)" : "");
        }
        atexit(finalize_at_exit);
    }
    MPI_Comm base = comm ? *(const MPI_Comm *)comm : MPI_COMM_WORLD;
    if (MPI_Comm_dup(base, &g->comm) != MPI_SUCCESS) {
        free(g);
        return optim__err(
            err, OPTIM_EIO,
            "optim_group_create_mpi: MPI_Comm_dup failed (is comm a valid communicator?)");
    }
    MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g->comm, &g->rank);
    MPI_Comm_size(g->comm, &g->size);
    g->is_mpi = 1;
    *out = g;
    return OPTIM_OK;
#else
    (void)comm, (void)opts;
    return optim__err(
        err, OPTIM_ENOTSUP,
        "optim_group_create_mpi: this optim was built without MPI (install "
        "libopenmpi-dev and rebuild, or configure with -DOPTIM_MPI=ON to require it)");
#endif
}

void optim_group_destroy(optim_group *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->natt; i++) {
        optim_set_gradient_aggregator(g->att[i]->opt, NULL, NULL);
        optim__shards_free(g->att[i]);
        free(g->att[i]);
    }
    free(g->att);
    optim__group_scratch_free(g);
    free(g->scratch);
#ifdef OPTIM_HAVE_MPI
    if (g->is_mpi) {
        if (!g->broken) MPI_Comm_free(&g->comm);
        else mpi_failed = 1;
    }
#endif
    free(g);
}

int optim_group_rank(const optim_group *g) { return g ? g->rank : -1; }
int optim_group_size(const optim_group *g) { return g ? g->size : 0; }
int optim_group_sharded(const optim_group *g) { return g ? g->sharded : 0; }
const char *optim_group_errmsg(const optim_group *g)
{
    return g ? g->errmsg : "replica group is NULL";
}

void optim_group_abort(optim_group *g, int code)
{
#ifdef OPTIM_HAVE_MPI
    if (g && g->is_mpi && g->size > 1) MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
#else
    (void)g, (void)code;
#endif
}

optim__attached *optim__attached_of(const optim_group *g, const optim_optimizer *opt)
{
    for (size_t i = 0; i < g->natt; i++)
        if (g->att[i]->opt == opt) return g->att[i];
    return NULL;
}

/* Replicas sum float32 and float64 gradients; a half-precision one
 * (docs/half-precision.md) is refused, on every rank. */
static int half_refused(const optim_grad_var *pairs, size_t n, optim_error *err)
{
    for (size_t i = 0; i < n; i++) {
        optim_dtype dt = pairs[i].var ? optim_var_dtype(pairs[i].var) : OPTIM_F32;
        if (pairs[i].grad.kind != OPTIM_GRAD_NONE && optim_compute_dtype(dt) != dt)
            return optim__err(err, OPTIM_ENOTSUP,
                              "replica group: variable '%s' is %s; replicas sum float32 "
                              "and float64 gradients only",
                              optim_var_name(pairs[i].var), optim_dtype_name(dt));
    }
    return OPTIM_OK;
}

/* The gradient aggregator: sparse gradients gathered, dense ones summed. */
static int aggregate(void *user, optim_grad_var *pairs, size_t n, optim_error *err)
{
    optim__attached *a = user;
    optim_group *g = a->g;
    a->aggregated = 1;
    if (g->sharded)
        return optim__err(err, OPTIM_ESTATE,
                          "the optimizer is attached to a sharded replica group: step it with "
                          "optim_group_apply_gradients");
    if (g->size == 1) return OPTIM_OK; /* the sum of one */
    optim__group_scratch_free(g);
    int rc = optim__agree(g, pairs, n, half_refused(pairs, n, err), err), sparse = 0;
    for (size_t i = 0; i < n; i++) sparse |= pairs[i].grad.kind == OPTIM_GRAD_SPARSE;
    if (!rc && sparse) rc = optim__gather_sparse(g, pairs, n, err);
    if (!rc) rc = optim__sum_dense(g, pairs, n, err);
    return rc;
}

int optim_group_attach(optim_group *g, optim_optimizer *opt)
{
    if (!g) return OPTIM_EINVAL;
    g->errmsg[0] = '\0';
    if (!opt) return group_err(g, OPTIM_EINVAL, "optim_group_attach: opt is NULL");
    if (optim__attached_of(g, opt))
        return group_err(g, OPTIM_EINVAL,
                         "optim_group_attach: optimizer '%s' is already attached to this group",
                         optim_name(opt));
    optim_error err;
    if (g->sharded && optim__check_shardable_class(opt, &err)) return optim__group_fail(g, &err);
    optim__attached **att = realloc(g->att, (g->natt + 1) * sizeof *att);
    if (!att) return group_err(g, OPTIM_ENOMEM, "optim_group_attach: out of memory");
    g->att = att;
    optim__attached *a = optim__calloc(1, sizeof *a);
    if (!a) return group_err(g, OPTIM_ENOMEM, "optim_group_attach: out of memory");
    a->g = g;
    a->opt = opt;
    g->att[g->natt++] = a;
    optim_set_gradient_aggregator(opt, aggregate, a);
    return OPTIM_OK;
}

int optim_group_detach(optim_group *g, optim_optimizer *opt)
{
    if (!g) return OPTIM_EINVAL;
    g->errmsg[0] = '\0';
    for (size_t i = 0; i < g->natt; i++)
        if (g->att[i]->opt == opt) {
            optim_set_gradient_aggregator(opt, NULL, NULL);
            optim__shards_free(g->att[i]);
            free(g->att[i]);
            g->att[i] = g->att[--g->natt];
            return OPTIM_OK;
        }
    return group_err(g, OPTIM_ENOTFOUND,
                     "optim_group_detach: optimizer '%s' is not attached to this group",
                     opt ? optim_name(opt) : "(NULL)");
}

static optim__attached *attached_or_fail(optim_group *g, const optim_optimizer *opt, const char *fn)
{
    if (!opt) {
        group_err(g, OPTIM_EINVAL, "%s: opt is NULL", fn);
        return NULL;
    }
    optim__attached *a = optim__attached_of(g, opt);
    if (!a)
        group_err(g, OPTIM_ENOTFOUND,
                  "%s: optimizer '%s' is not attached to this group (optim_group_attach)", fn,
                  optim_name(opt));
    return a;
}

int optim_group_apply_gradients(optim_group *g, optim_optimizer *opt, const optim_grad_var *pairs,
                                size_t n, uint32_t flags)
{
    if (!g) return OPTIM_EINVAL;
    g->errmsg[0] = '\0';
    optim__group_scratch_free(g);
    optim__attached *a = attached_or_fail(g, opt, "optim_group_apply_gradients");
    if (!a) return OPTIM_EINVAL;
    optim_error err;
    optim__err_clear(&err);
    if (!g->sharded) {
        a->aggregated = 0;
        int rc = optim_apply_gradients(opt, pairs, n, flags);
        if (!rc) return OPTIM_OK;
        group_err(g, rc, "%s", optim_errmsg(opt));
        /* Refused before the sum: tell the other ranks, which wait in it. */
        if (!a->aggregated && !(flags & OPTIM_APPLY_NO_AGGREGATE) &&
            optim__agree(g, NULL, 0, rc, &err) == OPTIM_EIO)
            optim__group_fail(g, &err);
        return rc;
    }
    int rc = half_refused(pairs, n, &err);
    if (rc) return group_err(g, rc, "%s", err.msg);
    rc = optim__shard_step(a, pairs, n, flags, &err);
    return rc ? optim__group_fail(g, &err) : OPTIM_OK;
}

int optim_group_sum(optim_group *g, double *values, size_t n)
{
    if (!g) return OPTIM_EINVAL;
    g->errmsg[0] = '\0';
    if (n && !values)
        return group_err(g, OPTIM_EINVAL, "optim_group_sum: values is NULL for n = %zu", n);
    optim__group_scratch_free(g);
    optim_error err;
    optim__err_clear(&err);
    double *all = optim__group_alloc(g, n * sizeof *all * (size_t)g->size);
    int64_t *fr = optim__group_alloc(g, OPTIM__FRAME * sizeof *fr * (size_t)g->size);
    if (!all || !fr) return group_err(g, OPTIM_ENOMEM, "optim_group_sum: out of memory");
    int rc = optim__frame(g, OPTIM__CALL_SUM, (int64_t)n, 0, 0, fr, &err);
    if (rc) return optim__group_fail(g, &err);
    for (int r = 0; r < g->size; r++)
        if (fr[OPTIM__FRAME * r + 2] != (int64_t)n)
            return group_err(g, OPTIM_EINVAL,
                             "optim_group_sum: rank %d sums %lld values, rank %d sums %zu; every "
                             "rank must pass the same n",
                             r, (long long)fr[OPTIM__FRAME * r + 2], g->rank, n);
    rc = optim__allgather(g, values, n * sizeof *values, all, &err);
    if (rc) return optim__group_fail(g, &err);
    for (size_t i = 0; i < n; i++) {
        double s = all[i];
        for (int r = 1; r < g->size; r++) s += all[(size_t)r * n + i];
        values[i] = s;
    }
    return OPTIM_OK;
}

int optim_group_check_same(optim_group *g, const char *const *names, const char *const *values,
                           size_t n)
{
    if (!g) return OPTIM_EINVAL;
    g->errmsg[0] = '\0';
    if (n && (!names || !values))
        return group_err(g, OPTIM_EINVAL, "optim_group_check_same: %s is NULL for n = %zu",
                         names ? "values" : "names", n);
    optim__group_scratch_free(g);
    optim_error err;
    optim__err_clear(&err);
    int rc = optim__check_same(g, names, values, n, &err);
    return rc ? optim__group_fail(g, &err) : OPTIM_OK;
}

int optim_group_get_weights(optim_group *g, optim_optimizer *opt, optim_tensor *out, size_t cap,
                            size_t *count)
{
    if (!g) return OPTIM_EINVAL;
    g->errmsg[0] = '\0';
    optim__group_scratch_free(g);
    optim__attached *a = attached_or_fail(g, opt, "optim_group_get_weights");
    if (!a) return OPTIM_EINVAL;
    if (!count) return group_err(g, OPTIM_EINVAL, "optim_group_get_weights: count is NULL");
    if (cap && !out)
        return group_err(g, OPTIM_EINVAL, "optim_group_get_weights: out is NULL for cap = %zu",
                         cap);
    if (!g->sharded) {
        *count = optim_get_weights(opt, out, cap);
        return OPTIM_OK;
    }
    optim_error err;
    optim__err_clear(&err);
    int rc = optim__shard_weights(a, out, cap, count, &err);
    return rc ? optim__group_fail(g, &err) : OPTIM_OK;
}

int optim_group_slot_bytes(optim_group *g, const optim_optimizer *opt, int64_t *bytes)
{
    if (!g) return OPTIM_EINVAL;
    g->errmsg[0] = '\0';
    if (!bytes) return group_err(g, OPTIM_EINVAL, "optim_group_slot_bytes: bytes is NULL");
    if (!attached_or_fail(g, opt, "optim_group_slot_bytes")) return OPTIM_EINVAL;
    size_t n = optim_weights_count(opt);
    optim_tensor *w = malloc((n ? n : 1) * sizeof *w);
    if (!w) return group_err(g, OPTIM_ENOMEM, "optim_group_slot_bytes: out of memory");
    optim_get_weights((optim_optimizer *)opt, w, n);
    int64_t b = 0;
    for (size_t i = 1; i < n; i++)
        b += optim_tensor_numel(&w[i]) * (int64_t)optim_dtype_size(w[i].dtype);
    free(w);
    *bytes = b;
    return OPTIM_OK;
}

int optim_group_build(optim_group *g, optim_optimizer *opt, optim_var *const *vars, size_t n)
{
    if (!g) return OPTIM_EINVAL;
    g->errmsg[0] = '\0';
    optim__group_scratch_free(g);
    optim__attached *a = attached_or_fail(g, opt, "optim_group_build");
    if (!a) return OPTIM_EINVAL;
    if (n && !vars)
        return group_err(g, OPTIM_EINVAL, "optim_group_build: vars is NULL for n = %zu", n);
    if (!g->sharded) {
        int rc = optim_build(opt, vars, n);
        return rc ? group_err(g, rc, "%s", optim_errmsg(opt)) : OPTIM_OK;
    }
    optim_error err;
    optim__err_clear(&err);
    int rc = optim__shard_build(a, vars, n, &err);
    return rc ? optim__group_fail(g, &err) : OPTIM_OK;
}

int optim_group_set_weights(optim_group *g, optim_optimizer *opt, const optim_tensor *weights,
                            size_t n)
{
    if (!g) return OPTIM_EINVAL;
    g->errmsg[0] = '\0';
    optim__group_scratch_free(g);
    optim__attached *a = attached_or_fail(g, opt, "optim_group_set_weights");
    if (!a) return OPTIM_EINVAL;
    if (n && !weights)
        return group_err(g, OPTIM_EINVAL, "optim_group_set_weights: weights is NULL for n = %zu",
                         n);
    if (!g->sharded) {
        int rc = optim_set_weights(opt, weights, n);
        return rc ? group_err(g, rc, "%s", optim_errmsg(opt)) : OPTIM_OK;
    }
    optim_error err;
    optim__err_clear(&err);
    int rc = optim__shard_set_weights(a, weights, n, &err);
    return rc ? optim__group_fail(g, &err) : OPTIM_OK;
}
