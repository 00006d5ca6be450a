/* Embedding (keras/src/layers/core/embedding.py): rows of a table
 * [input_dim, output_dim] looked up by integer ids, through optim_gather, so
 * the table's gradient is sparse (the rows used, duplicates kept: Keras's
 * IndexedSlices). Table from RandomUniform(-0.05, 0.05), Keras's "uniform". */
#include "nn/internal.h"

#include <stdlib.h>
#include <string.h>

static int emb_output_shape(const optim_layer *l, int32_t rank, const int64_t *in,
                            int32_t *out_rank, int64_t *out, optim_error *err)
{
    if (rank >= OPTIM_MAX_RANK)
        return optim__err(err, OPTIM_ESHAPE, "layer \"%s\": ids of rank %d, expected at most %d",
                          l->name, (int)rank, OPTIM_MAX_RANK - 1);
    memcpy(out, in, (size_t)rank * sizeof *in);
    out[rank] = l->u.emb.output_dim;
    *out_rank = rank + 1;
    return OPTIM_OK;
}

static int emb_build(optim_layer *l, int32_t rank, const int64_t *in, optim_dtype dt,
                     optim_error *err)
{
    optim__embedding *e = &l->u.emb;
    int64_t n;
    if (optim__mul_overflow_i64(e->input_dim, e->output_dim, &n) ||
        (uint64_t)n > SIZE_MAX / sizeof(double))
        return optim__err(err, OPTIM_ESHAPE, "layer \"%s\": table [%lld, %lld] is too large",
                          l->name, (long long)e->input_dim, (long long)e->output_dim);
    double *init = malloc((size_t)n * sizeof *init);
    if (!init) return optim__err(err, OPTIM_ENOMEM, "layer \"%s\": out of memory", l->name);
    optim__rng r = optim__rng_make(l->eff_seed);
    for (int64_t i = 0; i < n; i++) init[i] = -0.05 + 0.1 * optim__rng_uniform(&r);
    int64_t shape[2] = {e->input_dim, e->output_dim};
    int rc = optim__layer_add_var(l, "embeddings", dt, 2, shape, init,
                                  e->has_constraint ? &e->constraint : NULL, err);
    free(init);
    return rc;
}

static int emb_call(optim_layer *l, optim_tape *t, optim_node *x, const optim_tensor *ids,
                    int training, optim_node **out, optim_error *err)
{
    optim__embedding *e = &l->u.emb;
    int64_t *idx;
    char what[OPTIM__NN_NAME_MAX + 16];
    snprintf(what, sizeof what, "%s: ids", l->name);
    int rc = optim__nn_ids(ids, e->input_dim, what, &idx, err);
    if (rc) return rc;
    int64_t n = optim_tensor_numel(ids);
    optim_node *h = optim_gather(t, optim_tape_var(t, l->vars[0]), idx, n); /* copies idx */
    free(idx);
    if (ids->rank != 1) {
        int64_t shape[OPTIM_MAX_RANK];
        memcpy(shape, ids->shape, (size_t)ids->rank * sizeof *shape);
        shape[ids->rank] = e->output_dim;
        h = optim_reshape(t, h, ids->rank + 1, shape);
    }
    if (!h) return optim__nn_tape_err(err, t, l->name);
    *out = h;
    return OPTIM_OK;
}

static const optim__layer_ops emb_ops = {
    "Embedding", "embedding", 1, emb_output_shape, emb_build, emb_call, NULL,
};

optim_embedding_options optim_embedding_defaults(int64_t input_dim, int64_t output_dim)
{
    optim_embedding_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.input_dim = input_dim;
    o.output_dim = output_dim;
    o.seed = OPTIM_SEED_AUTO;
    return o;
}

int optim_embedding_create(optim_layer **out, const optim_embedding_options *opts, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "Embedding: out is NULL");
    *out = NULL;
    if (!opts)
        return optim__err(err, OPTIM_EINVAL,
                          "Embedding: options are NULL (use optim_embedding_defaults)");
    if (opts->size != sizeof *opts)
        return optim__err(err, OPTIM_EVERSION,
                          "Embedding: options size %u, expected %zu (use optim_embedding_defaults)",
                          (unsigned)opts->size, sizeof *opts);
    if (opts->input_dim <= 0 || opts->output_dim <= 0)
        return optim__err(err, OPTIM_EINVAL,
                          "Embedding: both `input_dim` and `output_dim` should be positive, "
                          "Received input_dim = %lld and output_dim = %lld",
                          (long long)opts->input_dim, (long long)opts->output_dim);
    int rc = optim__check_constraint(opts->embeddings_constraint, 2,
                                     "Embedding embeddings_constraint", err);
    if (rc) return rc;
    optim_layer *l;
    if ((rc = optim__layer_new(&l, &emb_ops, opts->name, opts->seed, err))) return rc;
    l->u.emb.input_dim = opts->input_dim;
    l->u.emb.output_dim = opts->output_dim;
    if (opts->embeddings_constraint && opts->embeddings_constraint->kind != OPTIM_CONSTRAINT_NONE) {
        l->u.emb.has_constraint = 1;
        l->u.emb.constraint = *opts->embeddings_constraint;
    }
    *out = l;
    return OPTIM_OK;
}
