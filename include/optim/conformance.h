/*
 * optim/conformance.h - checks a registered optimizer class against the
 * contract of optim/optimizer_class.h, for a class writer's own tests (the
 * command's `optim conformance CLASS_NAME` prints the same report).
 *
 * With seeded random data, in float32 and float64, on variables shaped as a
 * scalar, a vector, a matrix, a vector longer than one element-wise chunk
 * and an empty matrix, it checks that:
 *   - the class table is well formed (size, version, names, params, their
 *     defaults and ranges) and get_config writes every declared key;
 *   - get_config -> from_config gives the same config text and the same next
 *     step, bit for bit; unknown keys and bad values are refused;
 *   - a step does not depend on the number of threads (1, 2, 3), and, for an
 *     OPTIM_CLASS_ELEMENTWISE class, on how a variable is chunked; its
 *     apply_dense, run on chunks inside guard zones, neither reads nor
 *     writes outside its chunk;
 *   - sparse gradients (when the class takes them) follow one of the two
 *     rules of docs/custom-optimizer.md section 5, recognised from the
 *     result: lazy (unindexed rows keep their bits in the variable and every
 *     slot, indexed rows get the dense rule) or dense-equivalent (the dense
 *     step with zero rows); duplicate indices act as their sum;
 *   - slots are created on the first step, once per variable, with the
 *     variable's dtype (and shape, for element-wise classes), in a fixed
 *     order; get_weights -> fresh optimizer -> set_weights resumes bit for bit;
 *   - learning_rate and every OPTIM_PARAM_DYNAMIC param give the same step as
 *     a number, a variable, a callable and a schedule, and changing the
 *     value changes the step;
 *   - a failed step (a bad pair, a hyperparameter that turns non-finite, a
 *     create_slots hook that fails) changes nothing: variables, slots,
 *     iterations, and the next step;
 *   - a step changes every element of a variable with a non-zero gradient
 *     (TensorFlow issue 33227, the silent no-op), and a zero learning rate,
 *     where the class accepts it, leaves the variables alone;
 *   - with options.reference, the maths: a few steps follow the author's
 *     own rule, computed in double precision (see reference below; the
 *     command's --reference compares with a file instead).
 * Checks that do not apply to the class (sparse for a class without a sparse
 * hook, chunking for a class that is not element-wise) are reported skipped.
 *
 * To make a create_slots hook fail, the checker registers, once per class, a
 * copy named "<NAME>.conformance_probe" whose create_slots runs the class's
 * own and then fails for a variable named "conformance/fail".
 *
 *     static void print(void *user, const optim_conformance_result *r) {
 *         const char *tag = r->passed > 0 ? "PASS" : r->passed == 0 ? "FAIL" : "SKIP";
 *         printf("%s %s: expected %s; seen %s\n", tag, r->check, r->expected, r->seen);
 *         fflush(stdout);
 *     }
 *     optim_conformance_options o = optim_conformance_defaults();
 *     o.report = print;
 *     int passed, failed;
 *     if (optim_conformance_check("AdaBelief", &o, &passed, &failed, &err) || failed)
 *         ...
 *
 * A reference rule in C (the "reference" group), Adam as Keras 3 states it
 * with its default hyperparameters, m and v as its two numbers of state:
 *
 *     static int adam(void *user, double *w, const double *g, double *s, int64_t n,
 *                     int64_t t) {
 *         double *m = s, *v = s + n;
 *         double step = 0.001 * sqrt(1 - pow(0.999, t)) / (1 - pow(0.9, t));
 *         for (int64_t i = 0; i < n; i++) {
 *             m[i] += (g[i] - m[i]) * (1 - 0.9);
 *             v[i] += (g[i] * g[i] - v[i]) * (1 - 0.999);
 *             w[i] -= step * m[i] / (sqrt(v[i]) + 1e-7);
 *         }
 *         return 0;
 *     }
 *     o.reference = adam;
 *     o.reference_state = 2;
 *     o.group = "reference"; (only the maths; NULL for every check)
 *
 * Not thread-safe (it registers the probe class); it uses OpenMP threads.
 * The checks run in the calling process: a class that crashes crashes it.
 * `optim conformance` isolates each group in a process and reports a crash
 * as a line of its own.
 */
#ifndef OPTIM_CONFORMANCE_H
#define OPTIM_CONFORMANCE_H

#include "optim/optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One check's outcome. The strings are valid during the report call. */
typedef struct optim_conformance_result {
    const char *check; /* "config.round_trip", "sparse.rule", ... */
    int passed; /* 1 passed, 0 failed, -1 skipped (does not apply) */
    const char *expected; /* what the contract says */
    const char *seen; /* what the class did */
} optim_conformance_result;

typedef void (*optim_conformance_report_fn)(void *user, const optim_conformance_result *r);

/* The author's update rule, in double precision, for the "reference" group:
 * one step t (1, 2, ...: the step counter after it, Keras's iterations + 1)
 * of one variable of n elements: value[i] from value[i] and grad[i], with
 * state[s * n + i] (s < reference_state) the rule's own numbers for element
 * i (its slots), zero before step 1 and kept between steps. The
 * hyperparameters are the rule's own: the same as those of `config`. Returns
 * 0, or non-zero to stop the check (reported as failed). */
typedef int (*optim_conformance_reference_fn)(void *user, double *value, const double *grad,
                                              double *state, int64_t n, int64_t t);

#define OPTIM_CONFORMANCE_AUTO (-1) /* Keras 3, unless the class is legacy-only */

typedef struct optim_conformance_options {
    uint32_t size; /* sizeof(optim_conformance_options) */
    int generation; /* OPTIM_KERAS3, OPTIM_LEGACY or OPTIM_CONFORMANCE_AUTO */
    const char *config; /* JSON object of config keys for every optimizer the
                           checker creates ({"momentum": 0.9}, a wrapper's inner
                           optimizer...), or NULL for the defaults */
    uint64_t seed; /* of the random data */
    optim_conformance_report_fn report; /* called once per check; may be NULL */
    void *user;
    /* Run only this group of checks (a name of optim_conformance_groups), or
     * every group when NULL. `optim conformance` runs each group in a
     * process of its own, so that a class that crashes one group still gets
     * the others' report. */
    const char *group;
    /* The "reference" group (options of an older size end before these):
     * with reference set, the class steps a scalar, a vector and a matrix
     * (seeded values and dense gradients, f32 and f64) reference_steps times
     * (0: 5), reference steps the same numbers in double, and each
     * variable's values after the last step must agree within atol + rtol *
     * |expected| (0: 1e-5 and 1e-6 in f32, 1e-12 and 1e-14 in f64), one
     * line per dtype and variable ("reference.f32.vector"). Without it the
     * group reports nothing. */
    optim_conformance_reference_fn reference;
    void *reference_user; /* passed to reference */
    int reference_state; /* doubles of state per element, 0..64 */
    int reference_steps;
    double rtol, atol;
} optim_conformance_options;

/* AUTO generation, no config, seed 1, no report function, every group, no
 * reference. */
OPTIM_API optim_conformance_options optim_conformance_defaults(void);

/* The groups of checks, in the order they run: {"table", "config", ...,
 * NULL}. optim_conformance_group_doing(name) says what a group does, for a
 * report of a crash inside it ("stepping each shape and dtype once"); NULL
 * for an unknown name. */
OPTIM_API const char *const *optim_conformance_groups(void);
OPTIM_API const char *optim_conformance_group_doing(const char *group);

/* Runs every check on the registered class `class_name` and counts them in
 * *passed and *failed (skipped checks count in neither). Returns 0 when the
 * checks ran, whatever their outcome; OPTIM_ENOTFOUND for an unknown class,
 * OPTIM_EINVAL / OPTIM_EPARSE / the creation error for bad options or a
 * config the class refuses, OPTIM_ENOMEM; err (if not NULL) says why. */
OPTIM_API int optim_conformance_check(const char *class_name, const optim_conformance_options *opts,
                                      int *passed, int *failed, optim_error *err);

#ifdef __cplusplus
}
#endif
#endif
