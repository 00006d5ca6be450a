/* Conformance-style drivers shared by the optimizer tests (test_opt_*.c,
 * test_sgd.c). A test describes an optimizer once, as a case: its config,
 * a reference step written in double precision from the published formula,
 * and its slot names. The drivers then run the same checks for every
 * optimizer: the dense trajectory (f32 and f64, slots included), sparse
 * gradients against the reference (dense-equivalent or rows only, as the
 * generation does it), sparse against dense bit for bit, one thread against
 * several bit for bit, the Keras test files' own checks (single step,
 * golden values, weight decay), and config round trips and refusals. */
#ifndef OPTIM_TEST_OPT_TABLE_H
#define OPTIM_TEST_OPT_TABLE_H

#include <cjson/cJSON.h>

#include "testutil.h"

#define OT_LEGACY "\"is_legacy_optimizer\": true"
#define OT_MAX_STATE 5

/* Reference step k (0-based) in double on n elements: updates w and the
 * state arrays st[0..nstate) in place with the gradient g. */
typedef void (*ot_ref_fn)(const void *hp, int k, double *w, double *const *st, const double *g,
                          int n);

/* A dense problem: an n-vector from init(i), gradient grad(k, i) at step k;
 * shape, if set, is the variable's shape (rank dimensions, n elements). */
typedef struct ot_dense {
    int n, steps;
    double (*init)(int i);
    double (*grad)(int k, int i);
    int32_t rank;
    const int64_t *shape;
} ot_dense;

/* A sparse problem: a rows x cols table from init(r, c); at step k, nidx
 * gradient rows index(k, j) (duplicates allowed) with values val(k, j, c).
 * cols 0: a vector of rows elements (rank 1, rows of one element); only
 * ot_run_sparse and the checks built on it take that form. */
typedef struct ot_sparse {
    int rows, cols, steps, nidx;
    int64_t (*index)(int k, int j);
    double (*val)(int k, int j, int c);
    double (*init)(int r, int c);
} ot_sparse;

/* The problems most tests share: a 7-vector over 25 steps, init 0.5 - 0.3 i,
 * gradient sin(0.7 k + 1.3 i) (1 + 0.1 i) - 0.05 k (both signs, drifting);
 * a 6 x 3 table, init 0.1 r - 0.2 c + 0.05, four steps of four rows with
 * duplicates ({1,4,1,1}, {0,4,5,4}, {2,2,3,1}, {4,0,4,1}; row 5 idle in
 * steps 3 and 4), values cos(1.1 k + 0.7 j + 0.3 c). */
extern const ot_dense OT_DENSE;
extern const ot_sparse OT_SPARSE;
/* 24 steps on the 6 x 3 table cycling {1,4,1,1}, {0,4,3,4}, {2,2,3,1} (row 5
 * never indexed), values cos(1.1 k + 0.7 j + 0.3 c) - 0.02 k. */
extern const ot_sparse OT_SPARSE_LONG;
/* Lion's and LAMB's: the 6 x 3 table, four steps of {1,4,1,1}, {0,4,2,4},
 * {2,2,3,1}, {0,0,4,3} (row 5 never indexed), values cos(1.1 k + 0.7 j + 0.3 c) + 0.05. */
extern const ot_sparse OT_SPARSE_IDLE5;
/* The Adam family's: a 9-vector whose gradients shrink over the steps, of
 * both signs (so that AMSGrad's vhat exceeds v), (sin(0.7 k + 1.3 i)
 * (1 + 0.1 i) - 0.03 (k mod 4)) exp(-0.15 k); a 7 x 3 table over 21 steps of
 * five rows cycling {1,4,1,1,0}, {0,4,5,4,2}, {2,2,3,1,5} (row 6 never
 * indexed), values cos(1.1 k + 0.7 j + 0.3 c) exp(-0.1 k). */
extern const ot_dense OT_DENSE_SHRINK;
extern const ot_sparse OT_SPARSE_ADAM;

/* The float32 operations of a generation, in its order: step k on n
 * floats, updating w and the state arrays st[0..nstate). */
typedef void (*ot_ref32_fn)(const void *hp, int k, float *w, float *const *st, const float *g,
                            int n);

/* One optimizer case. slots[i] names the optimizer slot that holds the
 * reference's state i (NULL: internal to the reference, not compared);
 * absent, if set, is a slot that must not exist. tol: f32 rtol, atol, f64
 * rtol, atol; all zero means 2e-5, 2e-6, 1e-12, 1e-13. round32: the f32
 * run's reference starts from the values an F32 variable holds and gets
 * the f32 gradients, with hp32 (if set) instead of hp. every_step: the
 * dense checks compare after every step, not only after the last. */
typedef struct ot_case {
    const char *json;
    ot_ref_fn ref;
    const void *hp;
    int nstate;
    const char *slots[OT_MAX_STATE];
    const char *absent;
    double tol[4];
    double state_atol[OT_MAX_STATE]; /* non-zero: this state's atol (both dtypes); OT_ATOL_0: 0 */
    int64_t state_n[OT_MAX_STATE]; /* non-zero: this state's elements (at most n; the first ones) */
    double state_init[OT_MAX_STATE]; /* the reference state's initial value */
    int exact_slots; /* the optimizer has exactly the named slots, in this order */
    /* Optional, for sparse references: step k on a row that got no
     * gradient (legacy Nadam decays its moments; legacy AdamW moves it
     * without weight decay). */
    void (*idle)(const void *hp, int k, double *w, double *const *st, int n);
    int round32, every_step;
    const void *hp32;
    ot_ref32_fn ref32; /* for ot_check_f32 */
} ot_case;
#define OT_ATOL_0 (-1.0)

/* printf into one of eight rotating buffers (the result lives until the
 * eighth ot_fmt or ot_gen call after this one). */
const char *ot_fmt(const char *fmt, ...);
/* json ({"class_name": ..., "config": {...}}) with OT_LEGACY added at the
 * end of its config when legacy is non-zero, else json itself (ot_fmt's
 * buffers). */
const char *ot_gen(const char *json, int legacy);

/* A hyperparameter callable (optim_set_hyper_fn) returning *(double *)user. */
double ot_value(void *user);

/* One apply_gradients call that must succeed (prints the message if not). */
void ot_step(optim_optimizer *opt, optim_grad_var *p, size_t n);
/* One dense step on w with the gradient g (doubles, rounded for F32). */
void ot_step_dense(optim_optimizer *opt, optim_var *w, const double *g);
/* A dense gradient of w's dtype and shape holding g (buf: scratch of
 * numel(w) doubles). */
optim_grad ot_grad_like(const optim_var *w, const double *g, void *buf);
/* One dense step of the gradient g everywhere on w must fail with code
 * (a hyperparameter out of range, say), the message naming needle, and
 * change nothing: w bit for bit, the iteration count. */
void ot_expect_step_refused(optim_optimizer *opt, optim_var *w, double g, int code,
                            const char *needle);
/* The value of a scalar variable of dtype dt holding w after one step of
 * json's optimizer with the gradient g. */
double ot_scalar_step(const char *json, optim_dtype dt, double w, double g);
/* One sparse step on w with a single gradient row: index row, values vals
 * (one row of w's trailing shape, doubles rounded to w's dtype). */
void ot_step_row(optim_optimizer *opt, optim_var *w, int64_t row, const double *vals);
/* rtol (which 0) or atol (which 1) of a case for dt. */
double ot_tol(const ot_case *c, optim_dtype dt, int which);

/* Runs the dense problem on a fresh variable "w" of dtype dt. */
optim_var *ot_run_dense(optim_optimizer *opt, const ot_dense *d, optim_dtype dt);
/* The reference of the dense problem: w[n], st[i * n + e]. */
void ot_ref_dense(const ot_dense *d, const ot_case *c, double *w, double *st);
/* The dense trajectory in f32 and f64: weights and slots against the
 * reference (after the last step, or every step). */
void ot_check_dense(const ot_dense *d, ot_case c);
/* Dynamic hyperparameters: `steps` steps of the dense problem d on one
 * variable "w" of dtype dt of opt; before step k, set(opt, hp, k) changes
 * what opt reads (callables pointing into hp, optim_set_hyper) and the
 * reference's hyperparameters (hp: c->hp, or c->hp32 for a round32 f32
 * run) alike. After every step w is compared with the reference (the
 * case's tolerances). Returns w. */
optim_var *ot_check_dynamic(optim_optimizer *opt, const ot_dense *d, int steps, const ot_case *c,
                            optim_dtype dt, void (*set)(optim_optimizer *opt, void *hp, int k));
/* Compares w and the case's slots of opt (of w's dtype) against the reference arrays. */
void ot_check_state(optim_optimizer *opt, optim_var *w, const ot_case *c, const double *ref_w,
                    const double *ref_st, int n);

/* `steps` steps of the dense problem on an F32 [n, 1] variable of the
 * case's optimizer, each gradient dense or (sparse) indexing every row,
 * against c->ref32 (state from state_init): the variable and the case's
 * slots bit for bit after every step. */
void ot_check_f32(const ot_dense *d, int steps, const ot_case *c, int sparse);

/* Runs the sparse problem on a fresh variable "table" of dtype dt (as_dense:
 * the dense equivalent, duplicates summed in order in the dtype). */
optim_var *ot_run_sparse(optim_optimizer *opt, const ot_sparse *s, optim_dtype dt, int as_dense);
/* The same, with a second variable extra (if not NULL) stepped in the same
 * calls with the dense gradient extra_g (its numel values) every step, on
 * a variable of this shape (shape[0] rows, the other dimensions cols
 * elements; shape NULL: [rows, cols], rank 2 or 1). */
optim_var *ot_run_sparse_with(optim_optimizer *opt, const ot_sparse *s, optim_dtype dt,
                              int as_dense, optim_var *extra, const double *extra_g, int32_t rank,
                              const int64_t *shape);
/* The reference of the sparse problem: duplicates summed; rows_only: only
 * the rows indexed at a step are updated (the lazy, row-wise rules), else
 * every row, untouched ones with a zero gradient. A case with an idle hook
 * steps the rows without a gradient through it instead, in both modes. */
void ot_ref_sparse(const ot_sparse *s, const ot_case *c, int rows_only, optim_dtype dt, double *w,
                   double *st);
/* The sparse problem in f32 and f64 against ot_ref_sparse; rows_only
 * without an idle hook: rows never indexed keep their bits, slots too. */
void ot_check_sparse(const ot_sparse *s, ot_case c, int rows_only);
/* The sparse problem equals its dense equivalent bit for bit (f32 and f64),
 * weights and the named slots (NULL-terminated list; a slot absent from
 * both runs is skipped, as in ot_check_threads). */
void ot_check_sparse_equals_dense(const ot_sparse *s, const char *json, const char *const *slots);

/* Rows a sparse step leaves out. json's optimizer on a [rows, cols] table
 * of dtype dt holding 1, 2, 3, ...: a first step, dense with the gradient
 * hist on every row or (hist NULL) sparse with ones on row 0; then a
 * sparse step of vals on row `row` only. Each rule compares the elements
 * of the variable (slot NULL) or a slot in some rows: OT_FIRST the first
 * step's rows after it, with the start (slots: 0); OT_LEFT the first
 * step's rows but `row` and OT_ROW row `row`, after the second step, with
 * their values before it; OT_NEVER the other rows, after it, with the
 * start. OT_SCALED: exactly the value times factor in the dtype (f32:
 * float operands); OT_CLOSE: that to 1e-14 (f64) or 1e-6 (f32); OT_IS:
 * exactly factor. */
enum { OT_FIRST, OT_LEFT, OT_ROW, OT_NEVER };
enum { OT_KEPT, OT_SCALED, OT_CLOSE, OT_LESS, OT_MOVED, OT_IS };
typedef struct ot_rule {
    int rows, what;
    const char *slot;
    double factor;
} ot_rule;
void ot_check_rows_left_out(const char *json, optim_dtype dt, int rows, int cols,
                            const double *hist, int row, const double *vals, const ot_rule *rules,
                            int nrules);

/* One thread against `threads` on 100003 F32 elements for `steps` steps of
 * cos(0.37 i + k) / (1 + shrink * k): weights and the named slots bit for bit. */
void ot_check_threads(const char *json, int threads, int steps, double shrink,
                      const char *const *slots);
/* The same (shrink 0) with two more variables in each call: 1000 F64
 * elements (gradient cos(0.11 i - k)) and three rows of a [500, 8] F32
 * table (sparse, a duplicate index); weights of all three bit for bit. */
void ot_check_threads_mixed(const char *json, int threads, int steps, const char *const *slots);

/* The tests every Keras optimizer test file has (keras/src/optimizers/NAME_test.py):
 * test_single_step: [1, 2, 3, 4] (F32) after one step of [1, 6, 7, 2] is
 * want, to 1e-4. */
void ot_check_keras_single_step(const char *json, const double *want);
/* test_correctness_with_golden: ten ones of dtype dt, a first step of 0.01
 * everywhere, then steps of 0.1 (i + 1); before each of those five steps
 * the values are golden[k * cols + i] (cols 10), or golden[k] everywhere
 * (cols 1), to 5e-4. */
void ot_check_keras_golden(const char *json, optim_dtype dt, const double *golden, int cols);
/* test_weight_decay: json has learning_rate 1 and weight_decay 0.004; zero
 * gradients on scalars of 2 (dtype dt). var1 decayed once by each of three
 * optimizers, and three times by one, is 2 * 0.996^3 = 1.9760959;
 * "exclude" (excluded by pattern) and var3 (excluded by variable) stay 2. */
void ot_check_keras_weight_decay(const char *json, optim_dtype dt);

/* The optimizer's slot names are exactly the given ones (NULL-terminated), in order. */
void ot_expect_slot_names(optim_optimizer *opt, ...);
/* optim_weight_name(opt, first + i) is the i-th given name (NULL-terminated). */
void ot_expect_weight_names(optim_optimizer *opt, int64_t first, ...);
/* get_config of opt, parsed. */
cJSON *ot_config(optim_optimizer *opt);
/* The config's keys are exactly keys[0..n), in that order. */
void ot_assert_keys(const cJSON *c, const char *const *keys, size_t n);
/* get_config of the optimizer made from json (then destroyed), parsed;
 * its name is name and its keys exactly keys[0..n) in order (NULL: either
 * not checked). OT_KEYS(array) passes a static array and its length. */
cJSON *ot_config_of(const char *json, const char *name, const char *const *keys, size_t n);
#define OT_KEYS(a) (a), sizeof(a) / sizeof *(a)
/* The number under key (fails if absent or not a number). */
double ot_num(const cJSON *c, const char *key);
/* The config's numbers: (key, value) pairs ending with NULL, each value a
 * double, compared exactly, e.g. ot_expect_numbers(c, "beta_1", 0.9, NULL). */
void ot_expect_numbers(const cJSON *c, ...);
/* The eleven keys every Keras 3 optimizer config starts with, in order. */
#define OT_KERAS3_BASE_KEYS                                                              \
    "name", "learning_rate", "weight_decay", "clipnorm", "global_clipnorm", "clipvalue", \
        "use_ema", "ema_momentum", "ema_overwrite_frequency", "loss_scale_factor",       \
        "gradient_accumulation_steps"
/* serialize, from_json, serialize again: the same string. */
void ot_check_round_trip(const char *json);
/* get_config of the optimizer made from json is exactly want, and json
 * round-trips (ot_check_round_trip). */
void ot_expect_config(const char *json, const char *want);
/* The optimizer made from json (a config as Keras writes it, envelope
 * included) is of generation gen and serializes back to json byte for byte. */
void ot_expect_serialized_as_given(const char *json, optim_generation gen);
/* get_config of the optimizer made from json contains needle. */
void ot_expect_config_has(const char *json, const char *needle);
/* The full serialisation (envelope included) of the legacy optimizer made
 * from json is exactly want, and want round-trips. */
void ot_expect_serialized(const char *json, const char *want);

/* Sum of squares in the order optim's phased classes document
 * (src/optimizers/sum_squares.inc): chunks of 8192 elements, element i of a
 * chunk into partial sum i % 4 in index order, the four added in order, the
 * chunks' sums in chunk order. */
double ot_sum_squares(const double *g, int64_t n);

/* Step k of the sparse problem s as apply_sparse gets it: duplicate rows
 * summed in order of appearance in dt (F32: float additions of the float
 * values), the unique indices ascending into order[], their summed rows
 * (cols elements each, 1 for a vector) into rows[]; returns how many. */
int ot_sparse_summed(const ot_sparse *s, int k, optim_dtype dt, int64_t *order, double *rows);
/* optim_from_json refuses json with code; the message holds each non-NULL needle. */
void ot_expect_refused(const char *json, int code, const char *needle1, const char *needle2);
/* ot_expect_refused of json in both generations (ot_gen). */
void ot_expect_refused_gens(const char *json, int code, const char *needle1, const char *needle2);

#endif
