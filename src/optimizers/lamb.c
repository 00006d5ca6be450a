/* LAMB: layer-wise adaptive moments for large batches.
 *
 * You et al., "Large Batch Optimization for Deep Learning: Training BERT in
 * 76 minutes" (ICLR 2020, arXiv:1904.00962). Not element-wise: the trust
 * ratio needs the norms of the whole variable, so apply_dense gets each
 * variable whole.
 *
 * Keras 3 (keras/src/optimizers/lamb.py, Lamb.update_step), t = iterations + 1,
 * beta^t = pow(cast(beta, dtype), cast(t, dtype)), 1 - beta computed from the
 * Python number and then cast:
 *
 *     m = m + (g - m) * (1 - beta_1)
 *     v = v + (g * g - v) * (1 - beta_2)
 *     u = (m / (1 - beta_1^t)) / (sqrt(v / (1 - beta_2^t)) + epsilon)
 *     r = ||w|| / ||u||   if ||w|| > 0 and ||u|| > 0, else 1
 *     w = w - (r * lr) * u
 *
 * with Keras 3's decoupled weight_decay (w = w - w * wd * lr) applied by the
 * base class before the update, so ||w|| is taken after it.
 *
 * Legacy (TF Addons tensorflow_addons/optimizers/lamb.py, LAMB, an
 * OptimizerV2), all constants in the variable's dtype, 1 - beta included:
 *
 *     m = m * beta_1 + g * (1 - beta_1)
 *     v = v * beta_2 + (g * g) * (1 - beta_2)
 *     u = (m / (1 - beta_1^t)) / (sqrt(v / (1 - beta_2^t)) + epsilon)
 *     u = u + weight_decay * w             unless the name matches exclude_from_weight_decay
 *     r = ||w|| / ||u|| (1 as above)       unless the name matches exclude_from_layer_adaptation (r = 1)
 *     w = w - (r * lr_t) * u               (lr_t with the legacy `decay`)
 *
 * TFA's `epsilon or backend.epsilon()` makes epsilon = 0 act as 1e-7.
 * Name patterns are Python regular expressions searched (re.search) in the
 * TF variable name, which carries the ":0" output suffix; here they are
 * searched in NAME + ":0" (or in NAME when it already ends in
 * ":<digits>"; core/pyre.c matches them as re does).
 * exclude_from_layer_adaptation that is None or empty falls
 * back to exclude_from_weight_decay, as in TFA.
 *
 * Norms: sums of squares accumulated in double precision over fixed chunks
 * of CHUNK elements: within a chunk, element i into partial sum i % 4 in
 * index order, the four added in a fixed order; the chunks' sums added in
 * chunk order. Square root in double, then rounded once to the variable's
 * dtype. The order depends only on the variable's size: not on threads, nor
 * on dense versus sparse. TF sums float32 squares in float32 with a tree
 * reduction; the two differ by rounding only. The update u is computed
 * twice from the same m, v and w (once for ||u||, once to apply it) rather
 * than stored, so a step makes two passes over memory and allocates
 * nothing proportional to the variable (a fixed 256-element stack block).
 *
 * Threads: the dense rule is phased (optim/optimizer_class.h): phase 0
 * updates m and v chunk by chunk on all threads and returns each chunk's
 * two sums; the reduction adds them in chunk order into the trust ratio;
 * phase 1 applies the update, again on all threads.
 *
 * Sparse gradients (duplicates summed first), both generations: the dense
 * equivalent. Keras 3 densifies the gradient; TFA's _resource_apply_sparse
 * decays m and v on every row (m.assign(m * beta_1), then a scatter-add of
 * g * (1 - beta_1) on the indexed rows) and updates every row of w with the
 * whole-variable trust ratio. Rows without an index: Keras 3 runs the dense
 * rule with g = 0; legacy sets m = m * beta_1, v = v * beta_2 exactly.
 *
 * Slots: "m", "v" (zeros), TFA's names; Keras 3 calls them "momentum" and
 * "velocity". */
#define _POSIX_C_SOURCE 200809L
#include "optim/isa.h"
#include "optim/optimizer_class.h"
#include "optim/optimizers.h"
#include "optimizers/tf_names.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { P_WEIGHT_DECAY, P_BETA_1, P_BETA_2, P_EPSILON_K3, P_EPSILON_LEGACY };

/* Keras 3 Lamb: beta_1, beta_2, epsilon (1e-7); TFA LAMB: weight_decay (a
 * hyper, in-update), beta_1, beta_2, epsilon (1e-6). Neither validates its
 * values; the ranges are optim's guards. */
static const optim_param lamb_params[] = {
    {"weight_decay", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC | OPTIM_PARAM_LEGACY_ONLY, 0.0, 0.0,
     INFINITY},
    {"beta_1", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.9, 0.0, 1.0},
    {"beta_2", OPTIM_PARAM_FLOAT, OPTIM_PARAM_DYNAMIC, 0.999, 0.0, 1.0},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_KERAS3_ONLY, 1e-7, 0.0, INFINITY},
    {"epsilon", OPTIM_PARAM_FLOAT, OPTIM_PARAM_LEGACY_ONLY, 1e-6, 0.0, INFINITY},
};

/* TFA's name patterns (legacy), read and written by the base; None by
 * default. exclude_from_layer_adaptation is kept as given (see
 * layer_adaptation_patterns). */
enum { PP_WD, PP_LA };
static const optim_param lamb_patterns[] = {
    {"exclude_from_weight_decay", OPTIM_PARAM_PATTERNS,
     OPTIM_PARAM_NULLABLE | OPTIM_PARAM_LEGACY_ONLY, NAN, 0, 0},
    {"exclude_from_layer_adaptation", OPTIM_PARAM_PATTERNS,
     OPTIM_PARAM_NULLABLE | OPTIM_PARAM_LEGACY_ONLY, NAN, 0, 0},
};

/* ---- name patterns (legacy) ------------------------------------------------- */

typedef optim_name_patterns patterns;

static size_t count(char *const *list)
{
    size_t n = 0;
    while (list && list[n]) n++;
    return n;
}

static size_t npatterns(const patterns *p)
{
    return p ? count((char *const *)optim_name_patterns_sources(p)) : 0;
}

/* TFA's exclude_from_layer_adaptation: the given list if non-empty, else
 * exclude_from_weight_decay. */
static const patterns *layer_adaptation_patterns(const optim_optimizer *opt)
{
    const patterns *la = optim_param_patterns(opt, PP_LA);
    return npatterns(la) ? la : optim_param_patterns(opt, PP_WD);
}

static int lamb_set_config(optim_optimizer *opt, const char *key, const char *json_value,
                           optim_error *err)
{
    if (optim_generation_of(opt) != OPTIM_LEGACY) return OPTIM_EKEY;
    if (strcmp(key, "weight_decay_rate") == 0) {
        /* TFA's deprecated alias of weight_decay (constructor kwarg). */
        char *end;
        double x = strtod(json_value, &end);
        if (end == json_value || *end)
            return optim_error_set(err, OPTIM_ETYPE, "Lamb: config key '%s' is not a number", key);
        int rc = optim_set_hyper(opt, "weight_decay", x);
        if (rc)
            return optim_error_set(err, rc, "%.400s (given as weight_decay_rate)",
                                   optim_errmsg(opt));
        return 0;
    }
    return OPTIM_EKEY;
}

static int lamb_get_config(optim_optimizer *opt, optim_config *cfg)
{
    if (optim_generation_of(opt) != OPTIM_LEGACY) return 0;
    /* TFA's LAMB.get_config: learning_rate, weight_decay, decay, beta_1, ... */
    int rc0 = optim_config_move_before(cfg, "weight_decay", "decay");
    if (rc0) return rc0;
    /* The base wrote both lists as given; TFA keeps the layer-adaptation
     * list it falls back to (rewritten in place). */
    const patterns *la = layer_adaptation_patterns(opt);
    return optim_config_put_strings(cfg, lamb_patterns[PP_LA].name,
                                    la ? optim_name_patterns_sources(la) : NULL);
}

/* ---- the update ---------------------------------------------------------------- */

typedef struct coef {
    int legacy;
    double lr, beta_1, beta_2;
    double c1, c2; /* 1 - beta_1, 1 - beta_2 (per generation, see prepare) */
    double bc1, bc2; /* 1 - beta_1^t, 1 - beta_2^t */
    double epsilon, weight_decay;
} coef;

static int create_slots(optim_optimizer *opt, optim_var *var, optim_error *err)
{
    (void)err;
    int rc = optim_add_slot(opt, var, "m", OPTIM_SLOT_ZEROS, 0);
    return rc ? rc : optim_add_slot(opt, var, "v", OPTIM_SLOT_ZEROS, 0);
}

static void prepare(optim_optimizer *opt, optim_dtype dtype, void *c)
{
    coef *k = c;
    const int legacy = optim_generation_of(opt) == OPTIM_LEGACY;
    double b1 = optim_param_value(opt, P_BETA_1), b2 = optim_param_value(opt, P_BETA_2);
    double eps = optim_param_value(opt, legacy ? P_EPSILON_LEGACY : P_EPSILON_K3);
    if (legacy && eps == 0) eps = 1e-7; /* `epsilon or backend_config.epsilon()` */
    double wd = legacy ? optim_param_value(opt, P_WEIGHT_DECAY) : 0.0;
    k->legacy = legacy;
    k->lr = optim_learning_rate(opt, dtype);
    if (dtype == OPTIM_F32) {
        const float f1 = (float)b1, f2 = (float)b2, t = (float)(optim_iterations(opt) + 1);
        k->beta_1 = f1;
        k->beta_2 = f2;
        /* Keras 3: `1 - self.beta_1` on the Python number, cast on use;
         * TFA: 1 - beta_1_t on the cast tensor. */
        k->c1 = legacy ? 1.0f - f1 : (float)(1.0 - b1);
        k->c2 = legacy ? 1.0f - f2 : (float)(1.0 - b2);
        k->bc1 = 1.0f - powf(f1, t);
        k->bc2 = 1.0f - powf(f2, t);
        k->epsilon = (float)eps;
        k->weight_decay = (float)wd;
    } else {
        const double t = (double)(optim_iterations(opt) + 1);
        k->beta_1 = b1;
        k->beta_2 = b2;
        k->c1 = 1.0 - b1;
        k->c2 = 1.0 - b2;
        k->bc1 = 1.0 - pow(b1, t);
        k->bc2 = 1.0 - pow(b2, t);
        k->epsilon = eps;
        k->weight_decay = wd;
    }
}

/* What an update needs besides the arrays. */
typedef struct rule {
    const coef *k;
    int use_wd; /* legacy: add weight_decay * w to u */
    int adapt; /* trust ratio on (else r = 1) */
} rule;

/* The two sums of squares: element i of the variable goes into partial sum
 * i % LANES, each partial sum adds in index order, and the partials are added
 * in lane order at the end. The order depends only on the variable's size, so
 * the dense rule, the sparse rule and any number of threads give the same
 * bits; the lanes let the additions overlap. */
#define LANES 4
#define BLOCK 256 /* elements of u held on the stack at a time */
#define CHUNK 8192 /* elements per chunk of the norms: whole LANES and BLOCKs */
typedef struct sums {
    double w[LANES], u[LANES];
} sums;

static double sums_total(const double *a)
{
    double t = a[0];
    for (int l = 1; l < LANES; l++) t += a[l];
    return t;
}

/* Four consecutive elements in lanes 0..3 as doubles, two lanes per register:
 * GCC's vector extensions (also Clang's), lowered to SSE2 by default (cvtps2pd,
 * mulpd, addpd), where the plain loop is left scalar. */
typedef double lamb_d2 __attribute__((vector_size(2 * sizeof(double))));
typedef double lamb_d4 __attribute__((vector_size(4 * sizeof(double))));
typedef float lamb_v4_float __attribute__((vector_size(4 * sizeof(float))));
typedef double lamb_v4_double __attribute__((vector_size(4 * sizeof(double))));

/* u, pass1 (with squares and accumulate), pass2 and scale per type
 * (lamb_kernels.inc). */
#define T float
#define SQRT sqrtf
#define SKIP 1
#include "lamb_kernels.inc"
#define T double
#define SQRT sqrt
#define SKIP 0
#include "lamb_kernels.inc"

static rule rule_for(const optim_optimizer *opt, const optim_var *var, const void *coef_)
{
    rule r = {coef_, 0, 1};
    if (optim_generation_of(opt) == OPTIM_LEGACY) {
        const char *name = optim_var_name(var);
        r.use_wd = !optim__tf_name_matches(optim_param_patterns(opt, PP_WD), name);
        r.adapt = !optim__tf_name_matches(layer_adaptation_patterns(opt), name);
    }
    return r;
}

/* One thread, the whole variable, chunk by chunk as the phases run them:
 * rows of row_size elements, row q with the gradient g + j * row_size when
 * idx[j] == q, without one otherwise (idx NULL: dense, g the whole
 * gradient). */
#define LAMB_SERIAL(T)                                                                  \
    static void serial_##T(T *w, T *m, T *v, int64_t n, const T *g, const int64_t *idx, \
                           int64_t nidx, int64_t rs, const rule *r)                     \
    {                                                                                   \
        double tw = 0, tu = 0;                                                          \
        int64_t j = 0;                                                                  \
        for (int64_t c0 = 0; c0 < n; c0 += CHUNK) {                                     \
            const int64_t c1 = n - c0 < CHUNK ? n : c0 + CHUNK;                         \
            sums s = {{0}, {0}};                                                        \
            for (int64_t a = c0, b; a < c1; a = b) {                                    \
                const T *ga = NULL;                                                     \
                b = c1;                                                                 \
                if (!idx) {                                                             \
                    ga = g + a;                                                         \
                } else {                                                                \
                    const int64_t q = a / rs;                                           \
                    b = (q + 1) * rs < c1 ? (q + 1) * rs : c1;                          \
                    while (j < nidx && idx[j] < q) j++;                                 \
                    ga = j < nidx && idx[j] == q ? g + j * rs + (a - q * rs) : NULL;    \
                }                                                                       \
                pass1_##T(w + a, ga, m + a, v + a, b - a, a, r, &s);                    \
            }                                                                           \
            tw += sums_total(s.w);                                                      \
            tu += sums_total(s.u);                                                      \
        }                                                                               \
        pass2_##T(w, m, v, n, r, scale_##T(r, tw, tu));                                 \
    }
LAMB_SERIAL(float)
LAMB_SERIAL(double)

static void apply_dense(const optim_dense_update *u)
{
    const rule r = rule_for(u->opt, u->var, u->coef);
    if (u->dtype == OPTIM_F32)
        serial_float(u->param, u->slots[0], u->slots[1], u->count, u->grad, NULL, 0, 1, &r);
    else serial_double(u->param, u->slots[0], u->slots[1], u->count, u->grad, NULL, 0, 1, &r);
}

/* Sparse, indices unique and ascending: every row, in order (each element
 * lands in the same partial sum, in the same order, as in the dense rule). */
static void apply_sparse(const optim_sparse_update *u)
{
    const rule r = rule_for(u->opt, u->var, u->coef);
    const int64_t n = u->rows * u->row_size;
    if (u->dtype == OPTIM_F32)
        serial_float(u->param, u->slots[0], u->slots[1], n, u->values, u->indices, u->n,
                     u->row_size, &r);
    else
        serial_double(u->param, u->slots[0], u->slots[1], n, u->values, u->indices, u->n,
                      u->row_size, &r);
}

/* ---- phases: 0 moments and the chunk's sums, 1 the update ------------------------ */

/* The name patterns are matched once per variable and step: the rule's two
 * flags travel as the plan's user word. */
static void phase_plan(const optim_optimizer *opt, const optim_var *var, optim_phase_plan *plan)
{
    const rule r = rule_for(opt, var, NULL);
    *plan = (optim_phase_plan){2, CHUNK, 2, 1, (uint64_t)r.use_wd | (uint64_t)r.adapt << 1};
}

static rule phase_rule(const optim_phase_update *pu)
{
    return (rule){pu->dense.coef, (int)(pu->user & 1), (int)(pu->user >> 1 & 1)};
}

static void apply_phase(const optim_phase_update *pu)
{
    const optim_dense_update *u = &pu->dense;
    const rule r = phase_rule(pu);
    const int64_t o = u->offset;
    sums s = {{0}, {0}};
    if (u->dtype == OPTIM_F32) {
        float *w = u->param, *m = u->slots[0], *v = u->slots[1];
        if (pu->phase == 0)
            pass1_float(w + o, (const float *)u->grad + o, m + o, v + o, u->count, o, &r, &s);
        else pass2_float(w + o, m + o, v + o, u->count, &r, (float)pu->shared[0]);
    } else {
        double *w = u->param, *m = u->slots[0], *v = u->slots[1];
        if (pu->phase == 0)
            pass1_double(w + o, (const double *)u->grad + o, m + o, v + o, u->count, o, &r, &s);
        else pass2_double(w + o, m + o, v + o, u->count, &r, pu->shared[0]);
    }
    if (pu->phase == 0) {
        pu->partial[0] = sums_total(s.w);
        pu->partial[1] = sums_total(s.u);
    }
}

/* After phase 0: the chunks' sums in chunk order, then r * lr. */
static void reduce_phase(const optim_phase_update *pu)
{
    if (pu->phase != 0) return;
    const optim_dense_update *u = &pu->dense;
    const rule r = phase_rule(pu);
    double tw = 0, tu = 0;
    for (int64_t k = 0; k < pu->chunk; k++) {
        tw += pu->partial[2 * k];
        tu += pu->partial[2 * k + 1];
    }
    pu->shared[0] =
        u->dtype == OPTIM_F32 ? (double)scale_float(&r, tw, tu) : scale_double(&r, tw, tu);
}

/* Pass 1 reads g, reads and writes m and v, and reads w for the norms (not
 * without the trust ratio); pass 2 reads w, m and v and writes w: 10
 * accesses (40 bytes in float32), 9 without the trust ratio. */
static double bytes_per_param(const optim_optimizer *opt, const optim_var *var)
{
    const rule r = rule_for(opt, var, NULL);
    return (double)optim_dtype_size(optim_var_dtype(var)) * (r.adapt ? 10.0 : 9.0);
}

const optim_class OPTIM_ISA_NAME(optim_lamb_class) = {
    .size = sizeof(optim_class),
    .version = OPTIM_CLASS_VERSION,
    .name = "Lamb",
    .min_slots = 2,
    .flags = 0, /* not element-wise: the trust ratio needs whole-variable norms (phased) */
    .default_learning_rate = 0.001,
    .params = lamb_params,
    .n_params = sizeof lamb_params / sizeof *lamb_params,
    .coef_size = sizeof(coef),
    .create_slots = create_slots,
    .prepare = prepare,
    .apply_dense = apply_dense,
    .apply_sparse = apply_sparse,
    .get_config = lamb_get_config,
    .set_config = lamb_set_config,
    .phase_plan = phase_plan,
    .apply_phase = apply_phase,
    .reduce_phase = reduce_phase,
    .keras3_module = "keras.optimizers",
    .tfa_name = "LAMB",
    .pattern_params = lamb_patterns,
    .n_pattern_params = sizeof lamb_patterns / sizeof *lamb_patterns,
    .nonnegative_slots = (const char *const[]){"v", NULL},
    .bytes_per_param = bytes_per_param,
};
