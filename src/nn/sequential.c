/* Sequential (keras/src/models/sequential.py): a stack of layers whose
 * variables are created on the first call, when the input shape is known;
 * compile, variables, weights, summary. fit / evaluate / predict: fit.c. */
#include "nn/internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int optim__model_fail(optim_model *m, const optim_error *err)
{
    snprintf(m->errmsg, sizeof m->errmsg, "%s", err->msg);
    return err->code;
}

int optim__model_err(optim_model *m, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->errmsg, sizeof m->errmsg, fmt, ap);
    va_end(ap);
    return code;
}

optim_sequential_options optim_sequential_defaults(void)
{
    optim_sequential_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.dtype = OPTIM_F32;
    return o;
}

int optim_sequential_create(optim_model **out, const optim_sequential_options *opts,
                            optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "Sequential: out is NULL");
    *out = NULL;
    optim_sequential_options o = opts ? *opts : optim_sequential_defaults();
    if (o.size != sizeof o)
        return optim__err(
            err, OPTIM_EVERSION,
            "Sequential: options size %u, expected %zu (use optim_sequential_defaults)",
            (unsigned)o.size, sizeof o);
    if (o.dtype != OPTIM_F32 && o.dtype != OPTIM_F64)
        return optim__err(err, OPTIM_EDTYPE, "Sequential: dtype %s, expected float32 or float64",
                          optim_dtype_name(o.dtype));
    const char *name = o.name ? o.name : "sequential";
    if (!*name || strlen(name) >= OPTIM__NN_NAME_MAX || strchr(name, '/'))
        return optim__err(err, OPTIM_EINVAL,
                          "Sequential: name '%s' must be 1 to %d characters without '/'", name,
                          OPTIM__NN_NAME_MAX - 1);
    optim_model *m = calloc(1, sizeof *m);
    if (!m) return optim__err(err, OPTIM_ENOMEM, "Sequential: out of memory");
    snprintf(m->name, sizeof m->name, "%s", name);
    m->dtype = o.dtype;
    m->seed = o.seed;
    *out = m;
    return OPTIM_OK;
}

void optim_model_destroy(optim_model *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n_layers; i++) optim_layer_destroy(m->layers[i]);
    free(m->layers);
    free(m->train_vars);
    optim_tape_destroy(m->tape);
    free(m);
}

const char *optim_model_errmsg(const optim_model *m) { return m ? m->errmsg : ""; }
const char *optim_model_name(const optim_model *m) { return m ? m->name : NULL; }
size_t optim_model_layer_count(const optim_model *m) { return m ? m->n_layers : 0; }
optim_layer *optim_model_layer(const optim_model *m, size_t i)
{
    return m && i < m->n_layers ? m->layers[i] : NULL;
}
int optim_model_built(const optim_model *m) { return m && m->built; }
optim_optimizer *optim_model_optimizer(const optim_model *m) { return m ? m->opt : NULL; }
void optim_model_stop_training(optim_model *m)
{
    if (m) m->stop_training = 1;
}

static int has_layer_named(const optim_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_layers; i++)
        if (strcmp(m->layers[i]->name, name) == 0) return 1;
    return 0;
}

int optim_sequential_add(optim_model *m, optim_layer *l)
{
    if (!m) return OPTIM_EINVAL;
    m->errmsg[0] = '\0';
    if (!l) return optim__model_err(m, OPTIM_EINVAL, "Sequential.add: the layer is NULL");
    if (l->owner)
        return optim__model_err(m, OPTIM_ESTATE,
                                "Sequential.add: layer \"%s\" already belongs to model \"%s\"",
                                l->name, l->owner->name);
    if (m->built)
        return optim__model_err(
            m, OPTIM_ESTATE,
            "Sequential.add: model \"%s\" is already built; add layers before its first call",
            m->name);
    if (l->built && l->dtype != m->dtype)
        return optim__model_err(m, OPTIM_EDTYPE,
                                "Sequential.add: layer \"%s\" was built for %s, the model is %s",
                                l->name, optim_dtype_name(l->dtype), optim_dtype_name(m->dtype));
    char name[OPTIM__NN_NAME_MAX];
    snprintf(name, sizeof name, "%s", l->name);
    if (has_layer_named(m, name)) {
        if (!l->auto_name || l->built)
            return optim__model_err(
                m, OPTIM_EINVAL,
                "All layers added to a Sequential model should have unique names. "
                "Name \"%s\" is already the name of a layer in this model. Update "
                "the `name` argument to pass a unique name.",
                name);
        for (int k = 1;; k++) {
            snprintf(name, sizeof name, "%s_%d", l->ops->base_name, k);
            if (!has_layer_named(m, name)) break;
        }
    }
    if (m->n_layers == m->cap_layers) {
        size_t cap = m->cap_layers ? 2 * m->cap_layers : 8;
        optim_layer **p = realloc(m->layers, cap * sizeof *p);
        if (!p) return optim__model_err(m, OPTIM_ENOMEM, "Sequential.add: out of memory");
        m->layers = p;
        m->cap_layers = cap;
    }
    snprintf(l->name, sizeof l->name, "%s", name);
    if (l->seed == OPTIM_SEED_AUTO) l->eff_seed = optim__seed_mix(m->seed, (uint64_t)m->n_layers);
    l->owner = m;
    m->layers[m->n_layers++] = l;
    return OPTIM_OK;
}

/* Builds for a full input shape (batch first). On error, layers built here
 * are unbuilt again. */
static int model_build_full(optim_model *m, int32_t rank, const int64_t *shape, optim_error *err)
{
    if (m->built) return OPTIM_OK;
    if (m->n_layers == 0)
        return optim__err(err, OPTIM_ESTATE,
                          "model \"%s\" has no layers: add some before calling it", m->name);
    if (rank < 1)
        return optim__err(err, OPTIM_ESHAPE, "model \"%s\": inputs need a batch axis (rank >= 1)",
                          m->name);
    int32_t r = rank;
    int64_t cur[OPTIM_MAX_RANK], next[OPTIM_MAX_RANK];
    memcpy(cur, shape, (size_t)rank * sizeof *shape);
    size_t built_here = 0;
    unsigned char *was = calloc(m->n_layers, 1);
    if (!was) return optim__err(err, OPTIM_ENOMEM, "model \"%s\": out of memory", m->name);
    int rc = OPTIM_OK;
    for (size_t i = 0; i < m->n_layers && !rc; i++) {
        optim_layer *l = m->layers[i];
        was[i] = (unsigned char)l->built;
        if (l->ops->takes_ids && i > 0) {
            rc = optim__err(
                err, OPTIM_EINVAL,
                "layer \"%s\": an %s takes integer ids, so it must be the model's first layer",
                l->name, l->ops->class_name);
            break;
        }
        int32_t nr;
        rc = optim__layer_build(l, r, cur, m->dtype, err);
        if (!rc) rc = l->ops->output_shape(l, r, cur, &nr, next, err);
        if (!rc) {
            if (!was[i]) l->built_by_model = 1;
            built_here = i + 1;
            r = nr;
            memcpy(cur, next, (size_t)nr * sizeof *next);
        }
    }
    size_t nt = 0;
    if (!rc) {
        for (size_t i = 0; i < m->n_layers; i++)
            for (size_t j = 0; j < m->layers[i]->nvars; j++)
                nt += optim_var_trainable(m->layers[i]->vars[j]) != 0;
        free(m->train_vars);
        m->train_vars = malloc((nt ? nt : 1) * sizeof *m->train_vars);
        if (!m->train_vars)
            rc = optim__err(err, OPTIM_ENOMEM, "model \"%s\": out of memory", m->name);
    }
    if (rc) {
        for (size_t i = 0; i < built_here; i++)
            if (!was[i]) {
                optim__layer_unbuild(m->layers[i]);
                m->layers[i]->built_by_model = 0;
            }
        free(was);
        return rc;
    }
    free(was);
    m->n_train_vars = 0;
    for (size_t i = 0; i < m->n_layers; i++)
        for (size_t j = 0; j < m->layers[i]->nvars; j++)
            if (optim_var_trainable(m->layers[i]->vars[j]))
                m->train_vars[m->n_train_vars++] = m->layers[i]->vars[j];
    m->in_rank = rank - 1;
    memcpy(m->in_shape, shape + 1, (size_t)(rank - 1) * sizeof *shape);
    m->built = 1;
    return OPTIM_OK;
}

static int check_shape_arg(int32_t rank, const int64_t *shape, int with_batch, optim_error *err)
{
    int32_t max = with_batch ? OPTIM_MAX_RANK : OPTIM_MAX_RANK - 1;
    if (rank < 0 || rank > max)
        return optim__err(err, OPTIM_ESHAPE, "input rank %d, expected 0..%d", (int)rank, (int)max);
    if (rank > 0 && !shape) return optim__err(err, OPTIM_EINVAL, "input shape is NULL");
    for (int32_t i = 0; i < rank; i++)
        if (shape[i] < 0)
            return optim__err(err, OPTIM_ESHAPE, "input shape[%d] = %lld, expected >= 0", (int)i,
                              (long long)shape[i]);
    return OPTIM_OK;
}

int optim_model_build(optim_model *m, int32_t rank, const int64_t *input_shape)
{
    if (!m) return OPTIM_EINVAL;
    m->errmsg[0] = '\0';
    optim_error e;
    optim__err_clear(&e);
    int rc = check_shape_arg(rank, input_shape, 0, &e);
    if (rc) return optim__model_fail(m, &e);
    int64_t full[OPTIM_MAX_RANK];
    full[0] = 1;
    if (rank) memcpy(full + 1, input_shape, (size_t)rank * sizeof *full);
    if (m->built) {
        if (rank != m->in_rank ||
            (rank && memcmp(input_shape, m->in_shape, (size_t)rank * sizeof *full)))
            return optim__model_err(m, OPTIM_ESTATE,
                                    "model \"%s\" is already built for other inputs", m->name);
        return OPTIM_OK;
    }
    rc = model_build_full(m, rank + 1, full, &e);
    return rc ? optim__model_fail(m, &e) : OPTIM_OK;
}

int optim__model_output_shape(const optim_model *m, int32_t rank, const int64_t *shape,
                              int32_t *out_rank, int64_t *out_shape, optim_error *err)
{
    int32_t r = rank;
    int64_t cur[OPTIM_MAX_RANK], next[OPTIM_MAX_RANK];
    if (rank) memcpy(cur, shape, (size_t)rank * sizeof *cur);
    for (size_t i = 0; i < m->n_layers; i++) {
        int32_t nr;
        int rc = m->layers[i]->ops->output_shape(m->layers[i], r, cur, &nr, next, err);
        if (rc) return rc;
        r = nr;
        memcpy(cur, next, (size_t)nr * sizeof *next);
    }
    *out_rank = r;
    memcpy(out_shape, cur, (size_t)r * sizeof *cur);
    return OPTIM_OK;
}

int optim_model_output_shape(optim_model *m, int32_t rank, const int64_t *input_shape,
                             int32_t *out_rank, int64_t *out_shape)
{
    if (!m) return OPTIM_EINVAL;
    m->errmsg[0] = '\0';
    optim_error e;
    optim__err_clear(&e);
    if (!out_rank || !out_shape)
        return optim__model_err(m, OPTIM_EINVAL, "output_shape: out is NULL");
    int rc = check_shape_arg(rank, input_shape, 1, &e);
    if (rc) return optim__model_fail(m, &e);
    if (!m->built)
        return optim__model_err(m, OPTIM_ESTATE, "model \"%s\" is not built yet", m->name);
    if ((rc = optim__model_output_shape(m, rank, input_shape, out_rank, out_shape, &e)))
        return optim__model_fail(m, &e);
    return OPTIM_OK;
}

/* Builds for a full input shape (for fit / evaluate / predict). */
int optim__model_build(optim_model *m, int32_t rank, const int64_t *shape, optim_error *err)
{
    return model_build_full(m, rank, shape, err);
}

/* Undoes what the model's build did. */
void optim__model_unbuild(optim_model *m)
{
    for (size_t i = 0; i < m->n_layers; i++)
        if (m->layers[i]->built_by_model)
            optim__layer_unbuild(m->layers[i]), m->layers[i]->built_by_model = 0;
    m->built = 0;
    m->n_train_vars = 0;
}

int optim__model_call(optim_model *m, optim_tape *t, const optim_tensor *x, int training,
                      int borrow, optim_node **out, optim_error *err)
{
    unsigned any = OPTIM__FLOAT_MASK | OPTIM__MASK(OPTIM_I32) | OPTIM__MASK(OPTIM_I64);
    int rc = optim__tensor_check(x, any, "x", err);
    if (rc) return rc;
    int fresh = !m->built;
    if (fresh && (rc = model_build_full(m, x->rank, x->shape, err))) return rc;
    optim_node *h = NULL;
    if (!m->layers[0]->ops->takes_ids && !(h = optim__nn_input(t, x, m->dtype, borrow, err)))
        rc = err->code;
    for (size_t i = 0; i < m->n_layers && !rc; i++)
        rc = optim__layer_forward(m->layers[i], t, h, i == 0 && !h ? x : NULL, training, &h, err);
    if (rc && fresh) optim__model_unbuild(m);
    if (!rc) *out = h;
    return rc;
}

int optim_model_call(optim_model *m, optim_tape *t, const optim_tensor *x, int training,
                     optim_node **out)
{
    if (!m) return OPTIM_EINVAL;
    m->errmsg[0] = '\0';
    optim_error e;
    optim__err_clear(&e);
    if (!out) return optim__model_err(m, OPTIM_EINVAL, "model call: out is NULL");
    *out = NULL;
    if (!t) return optim__model_err(m, OPTIM_EINVAL, "model call: the tape is NULL");
    if (!x) return optim__model_err(m, OPTIM_EINVAL, "model call: x is NULL");
    int rc = optim__model_call(m, t, x, training, 0, out, &e);
    return rc ? optim__model_fail(m, &e) : OPTIM_OK;
}

size_t optim_model_variables(const optim_model *m, optim_var **vars, size_t cap)
{
    if (!m) return 0;
    size_t n = 0;
    for (size_t i = 0; i < m->n_layers; i++)
        for (size_t j = 0; j < m->layers[i]->nvars; j++, n++)
            if (vars && n < cap) vars[n] = m->layers[i]->vars[j];
    return n;
}

size_t optim_model_trainable_variables(const optim_model *m, optim_var **vars, size_t cap)
{
    if (!m) return 0;
    size_t n = 0;
    for (size_t i = 0; i < m->n_layers; i++)
        for (size_t j = 0; j < m->layers[i]->nvars; j++)
            if (optim_var_trainable(m->layers[i]->vars[j])) {
                if (vars && n < cap) vars[n] = m->layers[i]->vars[j];
                n++;
            }
    return n;
}

int64_t optim_model_count_params(const optim_model *m)
{
    if (!m) return 0;
    int64_t n = 0;
    for (size_t i = 0; i < m->n_layers; i++)
        for (size_t j = 0; j < m->layers[i]->nvars; j++)
            n += optim_var_numel(m->layers[i]->vars[j]);
    return n;
}

int optim_model_compile(optim_model *m, optim_optimizer *opt, const optim_loss *loss,
                        optim_metric_kind metric)
{
    if (!m) return OPTIM_EINVAL;
    m->errmsg[0] = '\0';
    optim_error e;
    optim__err_clear(&e);
    if (!opt) return optim__model_err(m, OPTIM_EINVAL, "compile: the optimizer is NULL");
    int rc = optim__loss_validate(loss, &e);
    if (rc) return optim__model_fail(m, &e);
    if (loss->reduction == OPTIM_REDUCTION_NONE)
        return optim__model_err(
            m, OPTIM_EINVAL,
            "compile: %s with reduction NONE gives per-sample losses; training needs a "
            "scalar (use SUM_OVER_BATCH_SIZE or SUM)",
            optim_loss_name(loss));
    if (metric != OPTIM_METRIC_NONE && !optim__metric_name(metric))
        return optim__model_err(m, OPTIM_EINVAL,
                                "compile: metric = %d, expected an optim_metric_kind", (int)metric);
    m->opt = opt;
    m->loss = *loss;
    m->metric = metric;
    m->compiled = 1;
    return OPTIM_OK;
}

int optim__model_tape(optim_model *m, optim_tape **t)
{
    if (!m->tape) {
        optim_error e;
        optim__err_clear(&e);
        if (optim_tape_create(&m->tape, &e)) {
            m->tape = NULL;
            return optim__model_fail(m, &e);
        }
    }
    *t = m->tape;
    return OPTIM_OK;
}

int optim__model_get_weights(const optim_model *m, optim__weights *w)
{
    memset(w, 0, sizeof *w);
    size_t n = optim_model_variables(m, NULL, 0);
    w->data = calloc(n ? n : 1, sizeof *w->data);
    w->bytes = calloc(n ? n : 1, sizeof *w->bytes);
    if (!w->data || !w->bytes) goto oom;
    for (size_t i = 0, k = 0; i < m->n_layers; i++)
        for (size_t j = 0; j < m->layers[i]->nvars; j++, k++) {
            optim_var *v = m->layers[i]->vars[j];
            size_t b = (size_t)optim_var_numel(v) * optim_dtype_size(optim_var_dtype(v));
            w->data[k] = malloc(b ? b : 1);
            w->n = k + 1;
            if (!w->data[k]) goto oom;
            memcpy(w->data[k], optim_var_cdata(v), b);
            w->bytes[k] = b;
        }
    return OPTIM_OK;
oom:
    optim__weights_free(w);
    return OPTIM_ENOMEM;
}

void optim__model_set_weights(optim_model *m, const optim__weights *w)
{
    for (size_t i = 0, k = 0; i < m->n_layers; i++)
        for (size_t j = 0; j < m->layers[i]->nvars && k < w->n; j++, k++)
            memcpy(optim_var_data(m->layers[i]->vars[j]), w->data[k], w->bytes[k]);
}

void optim__weights_free(optim__weights *w)
{
    for (size_t i = 0; i < w->n; i++) free(w->data[i]);
    free(w->data);
    free(w->bytes);
    memset(w, 0, sizeof *w);
}

/* Keras 3's readable_memory_size (keras/src/utils/summary_utils.py): "B"
 * where tf-keras 2 wrote "Byte". */
static void readable_size(double bytes, char *buf, size_t n)
{
    static const char *const units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    size_t u = 0;
    while (bytes >= 1024 && u + 1 < sizeof units / sizeof *units) bytes /= 1024, u++;
    snprintf(buf, n, "%.2f %s", bytes, units[u]);
}

int optim_model_summary(optim_model *m, FILE *out)
{
    if (!m) return OPTIM_EINVAL;
    m->errmsg[0] = '\0';
    if (!out) return optim__model_err(m, OPTIM_EINVAL, "summary: the output stream is NULL");
    const char *rule = "_________________________________________________________________";
    const char *dbl = "=================================================================";
    fprintf(out, "Model: \"%s\"\n%s\n %-28s%-26s%-9s\n%s\n", m->name, rule, "Layer (type)",
            "Output Shape", "Param #", dbl);
    int32_t r = m->in_rank + 1;
    int64_t cur[OPTIM_MAX_RANK], next[OPTIM_MAX_RANK];
    cur[0] = 1;
    memcpy(cur + 1, m->in_shape, (size_t)m->in_rank * sizeof *cur);
    int64_t total = 0, trainable = 0;
    double bytes_total = 0, bytes_train = 0;
    for (size_t i = 0; i < m->n_layers; i++) {
        optim_layer *l = m->layers[i];
        char shape[96] = "(unbuilt)", col[96];
        if (m->built) {
            optim_error e;
            int32_t nr;
            if (l->ops->output_shape(l, r, cur, &nr, next, &e) == OPTIM_OK) {
                size_t p = (size_t)snprintf(shape, sizeof shape, "(None");
                for (int32_t d = 1; d < nr && p < sizeof shape; d++)
                    p +=
                        (size_t)snprintf(shape + p, sizeof shape - p, ", %lld", (long long)next[d]);
                if (p < sizeof shape) snprintf(shape + p, sizeof shape - p, ")");
                r = nr;
                memcpy(cur, next, (size_t)nr * sizeof *next);
            }
        }
        int64_t params = 0;
        for (size_t j = 0; j < l->nvars; j++) {
            int64_t n = optim_var_numel(l->vars[j]);
            double b = (double)n * (double)optim_dtype_size(optim_var_dtype(l->vars[j]));
            params += n;
            bytes_total += b;
            if (optim_var_trainable(l->vars[j])) trainable += n, bytes_train += b;
        }
        total += params;
        snprintf(col, sizeof col, "%s (%s)", l->name, l->ops->class_name);
        fprintf(out, " %-28s%-26s%-9lld\n", col, shape, (long long)params);
        if (i + 1 < m->n_layers) fprintf(out, "\n");
    }
    char b1[32], b2[32], b3[32];
    readable_size(bytes_total, b1, sizeof b1);
    readable_size(bytes_train, b2, sizeof b2);
    readable_size(bytes_total - bytes_train, b3, sizeof b3);
    fprintf(
        out,
        "%s\nTotal params: %lld (%s)\nTrainable params: %lld (%s)\nNon-trainable params: %lld (%s)\n%s\n",
        dbl, (long long)total, b1, (long long)trainable, b2, (long long)(total - trainable), b3,
        rule);
    return ferror(out) ? optim__model_err(m, OPTIM_EIO, "summary: write error") : OPTIM_OK;
}
