/* Replica groups. Run alone it uses a single group; CTest also runs it
 * under `mpirun -np 2` and `-np 3`, where every rank computes the same
 * references independently:
 *   - dense sums equal the float sum in rank order, bitwise, on every rank;
 *   - sparse gradients aggregate to the concatenation one process would
 *     have (Adagrad, so duplicate rows must be summed before the update);
 *   - global_clipnorm clips the aggregated gradients;
 *   - an Embedding model's fit under the group matches one process's fit;
 *   - sharded Adam equals unsharded Adam bitwise, keeps about 1/N of the
 *     slots, gathers its weights for a one-process checkpoint that resumes
 *     bit for bit;
 *   - refusals: non-element-wise classes and clipnorm when sharded,
 *     mismatched pairs across ranks, bad arguments;
 *   - settings that differ across ranks (optim_group_check_same) and calls
 *     out of step fail on every rank with a message saying so. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/distribute.h"
#include "optim/nn.h"
#include "optim/optim.h"

/* A float variable of zeros. */
static optim_var *zeros(const char *name, int32_t rank, const int64_t *shape)
{
    static const double z[1024];
    return optim_test_var(name, OPTIM_F32, rank, shape, z);
}

static optim_group *make_group(int sharded)
{
    optim_group_options o = optim_group_defaults();
    o.shard_optimizer_state = sharded;
    optim_group *g = NULL;
    optim_error err;
    int rc = getenv("OMPI_COMM_WORLD_SIZE") ? optim_group_create_mpi(&g, NULL, &o, &err)
                                            : optim_group_create_single(&g, &o, &err);
    assert_ok(rc, &err);
    return g;
}

/* Rank r's gradient element j of step k: not exactly representable, so the
 * order of the sum shows. */
static float grad_value(int r, int64_t j, int k)
{
    return (float)(sin(0.37 * (double)(j + 1) * (r + 1) + k) / 3.0);
}

/* The sum over ranks in rank order, in float (what the group must produce). */
static float grad_sum(int size, int64_t j, int k)
{
    float s = grad_value(0, j, k);
    for (int r = 1; r < size; r++) s += grad_value(r, j, k);
    return s;
}

/* A checksum of the bytes, summed over ranks: equal to size * mine only
 * when (with overwhelming likelihood) every rank holds the same bytes. */
static void assert_same_on_all_ranks(optim_group *g, const void *data, size_t bytes)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < bytes; i++) h = (h ^ ((const unsigned char *)data)[i]) * 16777619u;
    double v[2] = {(double)h, (double)h * (double)h};
    assert_ok(optim_group_sum(g, v, 2), g);
    assert_eq(v[0], (double)h * optim_group_size(g));
    assert_eq(v[1], (double)h * (double)h * optim_group_size(g));
}

OPTIM_TEST(test_dense_sum_rank_order)
{
    optim_group *g = make_group(0);
    int size = optim_group_size(g), rank = optim_group_rank(g);
    enum { N = 1000 };
    optim_var *w = zeros("w", 1, (int64_t[]){N});
    optim_optimizer *opt =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1.0}}");
    assert_ok(optim_group_attach(g, opt), g);
    float grad[N];
    for (int k = 0; k < 3; k++) {
        for (int64_t j = 0; j < N; j++) grad[j] = grad_value(rank, j, k);
        optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, grad, 1, (int64_t[]){N})),
                            w};
        int rc = optim_apply_gradients(opt, &p, 1, 0);
        assert_ok(rc, opt);
    }
    const float *x = optim_var_data(w);
    for (int64_t j = 0; j < N; j++) {
        float ref = 0;
        for (int k = 0; k < 3; k++) ref = ref - 1.0f * grad_sum(size, j, k);
        assert_eq(x[j], ref);
    }
    assert_same_on_all_ranks(g, x, sizeof(float) * N);
    /* OPTIM_APPLY_NO_AGGREGATE: this rank's gradient alone. */
    float before = x[0];
    for (int64_t j = 0; j < N; j++) grad[j] = (float)rank;
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, grad, 1, (int64_t[]){N})), w};
    assert_ok(optim_apply_gradients(opt, &p, 1, OPTIM_APPLY_NO_AGGREGATE), opt);
    assert_eq(x[0], before - (float)rank);
    optim_group_destroy(g);
    optim_destroy(opt);
    optim_var_destroy(w);
}

/* Rank r's sparse gradient: 3 + r indices into 6 rows, with duplicates. */
static int64_t sparse_rows(int r, int64_t *idx, float *vals, int k)
{
    int64_t n = 3 + r;
    for (int64_t i = 0; i < n; i++) {
        idx[i] = (i * 2 + r + k) % 6;
        for (int c = 0; c < 4; c++) vals[i * 4 + c] = grad_value(r, i * 4 + c, k);
    }
    return n;
}

OPTIM_TEST(test_sparse_gather_matches_concatenation)
{
    optim_group *g = make_group(0);
    int size = optim_group_size(g), rank = optim_group_rank(g);
    const char *cfg = "{\"class_name\": \"Adagrad\", \"config\": {\"learning_rate\": 0.5}}";
    double init[24];
    for (int i = 0; i < 24; i++) init[i] = 0.1 * i;
    optim_var *e = optim_test_var("emb", OPTIM_F32, 2, (int64_t[]){6, 4}, init);
    optim_var *ref = optim_test_var("emb", OPTIM_F32, 2, (int64_t[]){6, 4}, init);
    optim_optimizer *opt = optim_test_make(cfg), *ropt = optim_test_make(cfg);
    assert_ok(optim_group_attach(g, opt), g);
    int64_t idx[64], all_idx[256];
    float vals[256], all_vals[1024];
    for (int k = 0; k < 3; k++) {
        int64_t n = sparse_rows(rank, idx, vals, k), tot = 0;
        optim_grad_var p = {
            optim_grad_sparse(idx, n, optim_tensor_make(OPTIM_F32, vals, 2, (int64_t[]){n, 4})), e};
        int rc = optim_apply_gradients(opt, &p, 1, 0);
        assert_ok(rc, opt);
        for (int r = 0; r < size; r++) tot += sparse_rows(r, all_idx + tot, all_vals + tot * 4, k);
        optim_grad_var q = {
            optim_grad_sparse(all_idx, tot,
                              optim_tensor_make(OPTIM_F32, all_vals, 2, (int64_t[]){tot, 4})),
            ref};
        assert_ok(optim_apply_gradients(ropt, &q, 1, 0), ropt);
    }
    assert_memory_equal(optim_var_data(e), optim_var_data(ref), 24 * sizeof(float));
    assert_memory_equal(optim_var_data(optim_get_slot(opt, e, "accumulator")),
                        optim_var_data(optim_get_slot(ropt, ref, "accumulator")),
                        24 * sizeof(float));
    optim_group_destroy(g);
    optim_destroy(opt);
    optim_destroy(ropt);
    optim_var_destroy(e);
    optim_var_destroy(ref);
}

OPTIM_TEST(test_global_clipnorm_sees_the_sum)
{
    optim_group *g = make_group(0);
    int size = optim_group_size(g), rank = optim_group_rank(g);
    const char *cfg =
        "{\"class_name\": \"SGD\", \"config\": {\"learning_rate\": 1.0, \"global_clipnorm\": 0.5}}";
    enum { N = 300 };
    optim_var *a = zeros("a", 1, (int64_t[]){N});
    optim_var *b = zeros("b", 1, (int64_t[]){N});
    optim_optimizer *opt = optim_test_make(cfg);
    assert_ok(optim_group_attach(g, opt), g);
    float ga[N], gb[N];
    for (int64_t j = 0; j < N; j++)
        ga[j] = grad_value(rank, j, 0), gb[j] = grad_value(rank, j + N, 0);
    optim_grad_var p[2] = {
        {optim_grad_dense(optim_tensor_make(OPTIM_F32, ga, 1, (int64_t[]){N})), a},
        {optim_grad_dense(optim_tensor_make(OPTIM_F32, gb, 1, (int64_t[]){N})), b}};
    assert_ok(optim_apply_gradients(opt, p, 2, 0), opt);
    /* Reference in double: the global norm of the summed gradients. */
    double ss = 0;
    for (int64_t j = 0; j < 2 * N; j++) ss += (double)grad_sum(size, j, 0) * grad_sum(size, j, 0);
    double scale = 0.5 / fmax(sqrt(ss), 0.5);
    assert_gt(sqrt(ss), 0.5); /* the clip is active */
    const float *xa = optim_var_data(a), *xb = optim_var_data(b);
    double clipped = 0;
    for (int64_t j = 0; j < N; j++) {
        assert_close(xa[j], -grad_sum(size, j, 0) * scale, 1e-6, 1e-7);
        assert_close(xb[j], -grad_sum(size, j + N, 0) * scale, 1e-6, 1e-7);
        clipped += (double)xa[j] * xa[j] + (double)xb[j] * xb[j];
    }
    assert_close(sqrt(clipped), 0.5, 1e-6, 0);
    optim_group_destroy(g);
    optim_destroy(opt);
    optim_var_destroy(a);
    optim_var_destroy(b);
}

/* An Embedding model (sparse gradients) and a Dense head. */
static optim_model *embedding_model(optim_optimizer *opt)
{
    optim_error err;
    optim_model *m;
    optim_sequential_options so = optim_sequential_defaults();
    so.seed = 7;
    assert_ok(optim_sequential_create(&m, &so, &err), &err);
    optim_layer *l;
    assert_ok(
        optim_embedding_create(&l,
                               &(optim_embedding_options){.size = sizeof(optim_embedding_options),
                                                          .input_dim = 20,
                                                          .output_dim = 3,
                                                          .seed = 1},
                               &err),
        &err);
    assert_ok(optim_sequential_add(m, l), m);
    assert_ok(optim_flatten_create(&l, NULL, &err), &err);
    assert_ok(optim_sequential_add(m, l), m);
    optim_dense_options d = optim_dense_defaults(4);
    d.seed = 2;
    assert_ok(optim_dense_create(&l, &d, &err), &err);
    assert_ok(optim_sequential_add(m, l), m);
    optim_loss loss = optim_loss_sparse_categorical_crossentropy(1);
    assert_ok(optim_model_compile(m, opt, &loss, OPTIM_METRIC_ACCURACY), m);
    return m;
}

OPTIM_TEST(test_embedding_fit_matches_one_process)
{
    optim_group *g = make_group(0);
    enum { S = 70, T = 5 };
    int32_t x[S * T], y[S];
    for (int i = 0; i < S * T; i++) x[i] = (i * 7 + i / 3) % 20;
    for (int i = 0; i < S; i++) y[i] = (x[i * T] + x[i * T + 1]) % 4;
    optim_tensor xt = optim_tensor_make(OPTIM_I32, x, 2, (int64_t[]){S, T});
    optim_tensor yt = optim_tensor_make(OPTIM_I32, y, 1, (int64_t[]){S});
    const char *cfg = "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.05}}";
    optim_optimizer *opt = optim_test_make(cfg), *ropt = optim_test_make(cfg);
    optim_model *m = embedding_model(opt), *ref = embedding_model(ropt);
    assert_ok(optim_group_attach(g, opt), g);
    assert_ok(optim_model_distribute(m, g), m);
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = 3;
    fo.batch_size = 17; /* the last batch of 2 rows: none for one of 3 ranks */
    fo.verbose = 0;
    optim_history h, rh;
    int rc = optim_model_fit(m, &xt, &yt, &fo, &h);
    assert_ok(rc, m);
    assert_ok(optim_model_fit(ref, &xt, &yt, &fo, &rh), ref);
    optim_var *v[4], *rv[4];
    size_t nv = optim_model_variables(m, v, 4);
    assert_eq(nv, optim_model_variables(ref, rv, 4));
    for (size_t i = 0; i < nv; i++)
        for (int64_t j = 0; j < optim_var_numel(v[i]); j++)
            assert_close(optim_var_get(v[i], j), optim_var_get(rv[i], j), 1e-4, 1e-6);
    double loss, rloss;
    assert_ok(optim_logs_get(&h.logs[2], "loss", &loss), NULL);
    assert_ok(optim_logs_get(&rh.logs[2], "loss", &rloss), NULL);
    assert_close(loss, rloss, 1e-4, 0); /* totals summed over ranks */
    assert_ok(optim_logs_get(&h.logs[2], "accuracy", &loss), NULL);
    assert_ok(optim_logs_get(&rh.logs[2], "accuracy", &rloss), NULL);
    assert_close(loss, rloss, 0, 1e-9);
    assert_same_on_all_ranks(g, optim_var_data(v[0]),
                             (size_t)optim_var_numel(v[0]) * sizeof(float));
    optim_history_free(&h);
    optim_history_free(&rh);
    optim_model_destroy(m);
    optim_model_destroy(ref);
    optim_group_destroy(g);
    optim_destroy(opt);
    optim_destroy(ropt);
}

/* BatchNormalization(momentum 0.8) -> Dense(3) on 4 features. */
static optim_model *bn_model(optim_optimizer *opt)
{
    optim_error err;
    optim_model *m;
    optim_sequential_options so = optim_sequential_defaults();
    so.seed = 5;
    assert_ok(optim_sequential_create(&m, &so, &err), &err);
    optim_batch_normalization_options b = optim_batch_normalization_defaults();
    b.momentum = 0.8;
    optim_layer *l;
    assert_ok(optim_batch_normalization_create(&l, &b, &err), &err);
    assert_ok(optim_sequential_add(m, l), m);
    optim_dense_options d = optim_dense_defaults(3);
    assert_ok(optim_dense_create(&l, &d, &err), &err);
    assert_ok(optim_sequential_add(m, l), m);
    optim_loss loss = optim_loss_sparse_categorical_crossentropy(1);
    assert_ok(optim_model_compile(m, opt, &loss, OPTIM_METRIC_ACCURACY), m);
    return m;
}

/* The moving statistics the replicas agree on: per step, the
 * share-weighted mean over ranks of each rank's updated values, each rank
 * normalizing its own rows (the rows of nn/replicas.c's split). */
static void bn_expected(const float *x, int64_t S, int64_t F, int64_t bs, int size, int epochs,
                        double *mm, double *mv)
{
    for (int64_t c = 0; c < F; c++) mm[c] = 0, mv[c] = 1;
    for (int e = 0; e < epochs; e++)
        for (int64_t start = 0; start < S; start += bs) {
            int64_t n = S - start < bs ? S - start : bs;
            for (int64_t c = 0; c < F; c++) {
                double wm = 0, wv = 0, w = 0;
                for (int r = 0; r < size; r++) {
                    int64_t a = n / size * r + n % size * r / size;
                    int64_t b = n / size * (r + 1) + n % size * (r + 1) / size;
                    if (b == a) continue; /* share 0 */
                    double mean = 0, var = 0;
                    for (int64_t i = a; i < b; i++)
                        mean += x[(start + i) * F + c] / (double)(b - a);
                    for (int64_t i = a; i < b; i++) {
                        double d = x[(start + i) * F + c] - mean;
                        var += d * d / (double)(b - a);
                    }
                    double share = (double)(b - a) / (double)n;
                    wm += share * mean, wv += share * var, w += share;
                }
                mm[c] = 0.8 * mm[c] + 0.2 * wm / w;
                mv[c] = 0.8 * mv[c] + 0.2 * wv / w;
            }
        }
}

OPTIM_TEST(test_batch_norm_moving_statistics_agree)
{
    optim_group *g = make_group(0);
    enum { S = 70, F = 4 };
    float x[S * F];
    int32_t y[S];
    for (int i = 0; i < S * F; i++) x[i] = (float)(sin(0.37 * i + 0.1) * 2 + 1);
    for (int i = 0; i < S; i++) y[i] = (x[i * F] > 1) + (x[i * F + 1] > 2);
    optim_tensor xt = optim_tensor_make(OPTIM_F32, x, 2, (int64_t[]){S, F});
    optim_tensor yt = optim_tensor_make(OPTIM_I32, y, 1, (int64_t[]){S});
    optim_optimizer *opt = optim_test_make("\"sgd\"");
    optim_model *m = bn_model(opt);
    assert_ok(optim_group_attach(g, opt), g);
    assert_ok(optim_model_distribute(m, g), m);
    optim_fit_options fo = optim_fit_defaults();
    fo.epochs = 2, fo.batch_size = 17, fo.shuffle = 0, fo.verbose = 0;
    /* the last batch of 2 rows: none for one of 3 ranks */
    assert_ok(optim_model_fit(m, &xt, &yt, &fo, NULL), m);
    optim_var *v[6];
    assert_int_equal(optim_model_variables(m, v, 6), 6);
    double mm[F], mv[F];
    bn_expected(x, S, F, 17, optim_group_size(g), 2, mm, mv);
    for (int c = 0; c < F; c++) {
        assert_close(optim_var_get(v[2], c), mm[c], 1e-5, 1e-6);
        assert_close(optim_var_get(v[3], c), mv[c], 1e-5, 1e-6);
    }
    for (int i = 2; i < 4; i++)
        assert_same_on_all_ranks(g, optim_var_data(v[i]), (size_t)F * sizeof(float));
    optim_model_destroy(m);
    optim_group_destroy(g);
    optim_destroy(opt);
}

/* Sharded Adam on a matrix (dense), a table (sparse), a bias and a scalar
 * against unsharded Adam on the rank-order sums; then the gathered weights
 * resume in a one-process optimizer bit for bit. */
typedef struct sharded_case {
    optim_var *v[4], *r[4];
    float *g[4];
    int64_t n[4];
} sharded_case;

static void case_grads(sharded_case *c, int rank, int size, int k, optim_grad_var *mine,
                       optim_grad_var *sum, int64_t *idx, float *vals, int64_t *all_idx,
                       float *all_vals)
{
    for (int i = 0; i < 4; i++) {
        if (i == 1) continue;
        for (int64_t j = 0; j < c->n[i]; j++) c->g[i][j] = grad_value(rank, j + 100 * i, k);
        mine[i] = (optim_grad_var){optim_grad_dense(optim_var_tensor(c->v[i])), c->v[i]};
        mine[i].grad.dense.data = c->g[i];
        float *s = c->g[i] + c->n[i];
        for (int64_t j = 0; j < c->n[i]; j++) s[j] = grad_sum(size, j + 100 * i, k);
        sum[i] = (optim_grad_var){optim_grad_dense(optim_var_tensor(c->r[i])), c->r[i]};
        sum[i].grad.dense.data = s;
    }
    int64_t n = sparse_rows(rank, idx, vals, k), tot = 0;
    mine[1] = (optim_grad_var){
        optim_grad_sparse(idx, n, optim_tensor_make(OPTIM_F32, vals, 2, (int64_t[]){n, 4})),
        c->v[1]};
    for (int r = 0; r < size; r++) tot += sparse_rows(r, all_idx + tot, all_vals + tot * 4, k);
    sum[1] = (optim_grad_var){
        optim_grad_sparse(all_idx, tot,
                          optim_tensor_make(OPTIM_F32, all_vals, 2, (int64_t[]){tot, 4})),
        c->r[1]};
}

static void step_both(optim_group *g, optim_optimizer *opt, optim_optimizer *ropt, sharded_case *c,
                      int k)
{
    optim_grad_var mine[4], sum[4];
    int64_t idx[64], all_idx[256];
    float vals[256], all_vals[1024];
    case_grads(c, optim_group_rank(g), optim_group_size(g), k, mine, sum, idx, vals, all_idx,
               all_vals);
    int rc = optim_group_apply_gradients(g, opt, mine, 4, 0);
    assert_ok(rc, g);
    assert_ok(optim_apply_gradients(ropt, sum, 4, 0), ropt);
}

OPTIM_TEST(test_sharded_adam)
{
    optim_group *g = make_group(1);
    int size = optim_group_size(g);
    static const int64_t shapes[4][2] = {{7, 5}, {6, 4}, {9, 0}, {0, 0}};
    static const int32_t ranks[4] = {2, 2, 1, 0};
    static const char *names[4] = {"kernel", "table", "bias", "scale"};
    sharded_case c;
    for (int i = 0; i < 4; i++) {
        c.v[i] = zeros(names[i], ranks[i], shapes[i]);
        c.r[i] = zeros(names[i], ranks[i], shapes[i]);
        c.n[i] = optim_var_numel(c.v[i]);
        c.g[i] = malloc(2 * (size_t)c.n[i] * sizeof(float));
    }
    const char *cfg =
        "{\"class_name\": \"Adam\", \"config\": {\"learning_rate\": 0.1, \"amsgrad\": true}}";
    optim_optimizer *opt = optim_test_make(cfg), *ropt = optim_test_make(cfg);
    assert_ok(optim_group_attach(g, opt), g);
    for (int k = 0; k < 4; k++) step_both(g, opt, ropt, &c, k);
    for (int i = 0; i < 4; i++) {
        assert_memory_equal(optim_var_data(c.v[i]), optim_var_data(c.r[i]),
                            (size_t)c.n[i] * sizeof(float));
        assert_same_on_all_ranks(g, optim_var_data(c.v[i]), (size_t)c.n[i] * sizeof(float));
    }
    /* Slots: about 1/size here, and all ranks together hold one copy. */
    int64_t mine, full;
    assert_ok(optim_group_slot_bytes(g, opt, &mine), g);
    assert_ok(optim_group_attach(g, ropt), g); /* only to ask */
    assert_ok(optim_group_slot_bytes(g, ropt, &full), g);
    assert_int_equal(full, 3 * (35 + 24 + 9 + 1) * (int64_t)sizeof(float));
    double total = (double)mine;
    assert_ok(optim_group_sum(g, &total, 1), g);
    assert_eq(total, (double)full);
    assert_le(mine,
              full / size +
                  3 * (5 + 4 + 1 + 1) * (int64_t)sizeof(float)); /* at most a row more each */
    print_message("rank %d of %d: slot bytes %lld sharded, %lld unsharded\n", optim_group_rank(g),
                  size, (long long)mine, (long long)full);
    assert_ok(optim_group_detach(g, ropt), g);
    /* The gathered weights are the unsharded ones, names and bits. */
    size_t nw = 0;
    optim_tensor w[32], rw[32];
    assert_ok(optim_group_get_weights(g, opt, w, 32, &nw), g);
    assert_eq(nw, optim_get_weights(ropt, rw, 32));
    assert_int_equal(nw, 1 + 3 * 4);
    for (size_t i = 0; i < nw; i++) {
        assert_string_equal(optim_weight_name(opt, i), optim_weight_name(ropt, i));
        assert_int_equal(w[i].rank, rw[i].rank);
        assert_eq(optim_tensor_numel(&w[i]), optim_tensor_numel(&rw[i]));
        assert_memory_equal(w[i].data, rw[i].data,
                            (size_t)optim_tensor_numel(&w[i]) * optim_dtype_size(w[i].dtype));
    }
    /* A one-process optimizer resumes from them: the same next steps, bit for bit. */
    optim_optimizer *resumed = optim_test_make(cfg);
    optim_var *rv[4];
    for (int i = 0; i < 4; i++)
        rv[i] = zeros(names[i], ranks[i], shapes[i]),
        memcpy(optim_var_data(rv[i]), optim_var_data(c.v[i]), (size_t)c.n[i] * sizeof(float));
    assert_ok(optim_build(resumed, rv, 4), resumed);
    assert_ok(optim_set_weights(resumed, w, nw), resumed);
    optim_var *keep[4];
    memcpy(keep, c.r, sizeof keep);
    memcpy(c.r, rv, sizeof rv);
    for (int k = 4; k < 6; k++) step_both(g, opt, resumed, &c, k);
    for (int i = 0; i < 4; i++)
        assert_memory_equal(optim_var_data(c.v[i]), optim_var_data(rv[i]),
                            (size_t)c.n[i] * sizeof(float));
    /* And back: the one-process state loads into a fresh sharded optimizer. */
    optim_optimizer *back = optim_test_make(cfg);
    assert_ok(optim_group_attach(g, back), g);
    size_t rn = optim_get_weights(resumed, rw, 32);
    assert_status(optim_group_set_weights(g, back, rw, rn), OPTIM_EINVAL, g); /* no slots yet */
    assert_contains(optim_group_errmsg(g), "optim_group_build");
    assert_ok(optim_group_build(g, back, c.v, 4), g);
    optim_tensor wrong = rw[1];
    wrong.shape[0] -= 1;
    optim_tensor saved = rw[1];
    rw[1] = wrong;
    assert_status(optim_group_set_weights(g, back, rw, rn), OPTIM_ESHAPE, g);
    assert_contains(optim_group_errmsg(g), "expected float32 [7, 5]");
    rw[1] = saved;
    assert_ok(optim_group_set_weights(g, back, rw, rn), g);
    assert_ok(optim_group_get_weights(g, back, w, 32, &nw), g);
    assert_int_equal(nw, rn);
    for (size_t i = 0; i < nw; i++)
        assert_memory_equal(w[i].data, rw[i].data,
                            (size_t)optim_tensor_numel(&w[i]) * optim_dtype_size(w[i].dtype));
    optim_group_destroy(g);
    optim_destroy(back);
    optim_destroy(opt);
    optim_destroy(ropt);
    optim_destroy(resumed);
    for (int i = 0; i < 4; i++)
        optim_var_destroy(c.v[i]), optim_var_destroy(keep[i]), optim_var_destroy(rv[i]),
            free(c.g[i]);
}

OPTIM_TEST(test_sharded_refusals)
{
    optim_group *g = make_group(1);
    optim_var *w = zeros("w", 2, (int64_t[]){4, 3});
    float grad[12] = {1, 2, 3};
    optim_grad_var p = {optim_grad_dense(optim_var_tensor(w)), w};
    p.grad.dense.data = grad;
    optim_optimizer *lamb = optim_test_make("\"lamb\"");
    assert_status(optim_group_attach(g, lamb), OPTIM_ENOTSUP, g);
    assert_contains(optim_group_errmsg(g), "Lamb cannot shard its state");
    assert_status(optim_group_apply_gradients(g, lamb, &p, 1, 0), OPTIM_EINVAL,
                  g); /* not attached */
    optim_optimizer *clip =
        optim_test_make("{\"class_name\": \"SGD\", \"config\": {\"clipnorm\": 1.0}}");
    assert_ok(optim_group_attach(g, clip), g);
    assert_status(optim_group_apply_gradients(g, clip, &p, 1, 0), OPTIM_ENOTSUP, g);
    assert_contains(optim_group_errmsg(g), "clipnorm");
    /* Stepping a sharded optimizer directly names the right call. */
    assert_ne(optim_apply_gradients(clip, &p, 1, 0), 0);
    assert_contains(optim_errmsg(clip), "optim_group_apply_gradients");
    /* A bad gradient on one rank fails every rank; nothing moves. */
    optim_optimizer *sgd = optim_test_make("\"sgd\"");
    assert_ok(optim_group_attach(g, sgd), g);
    optim_grad_var bad = p;
    if (optim_group_rank(g) == optim_group_size(g) - 1) bad.grad.dense.shape[0] = 3;
    assert_ne(optim_group_apply_gradients(g, sgd, &bad, 1, 0), 0);
    print_message("rank %d: %s\n", optim_group_rank(g), optim_group_errmsg(g));
    for (int j = 0; j < 12; j++) assert_eq(optim_var_get(w, j), 0.0);
    assert_ok(optim_group_apply_gradients(g, sgd, &p, 1, 0), g); /* still usable */
    assert_close(optim_var_get(w, 0), -0.01 * optim_group_size(g), 1e-6, 0);
    /* OPTIM_APPLY_NO_AGGREGATE: the gradient is already the sum; each rank
     * updates its rows from it and all rows are gathered. */
    double prev[12];
    for (int j = 0; j < 12; j++) prev[j] = optim_var_get(w, j);
    assert_ok(optim_group_apply_gradients(g, sgd, &p, 1, OPTIM_APPLY_NO_AGGREGATE), g);
    for (int j = 0; j < 12; j++)
        assert_close(optim_var_get(w, j), prev[j] - 0.01 * grad[j], 1e-6, 1e-9);
    optim_group_destroy(g);
    optim_destroy(lamb);
    optim_destroy(clip);
    optim_destroy(sgd);
    optim_var_destroy(w);
}

OPTIM_TEST(test_mismatched_pairs_fail_everywhere)
{
    optim_group *g = make_group(0);
    optim_var *a = zeros("a", 1, (int64_t[]){5});
    optim_var *b = zeros("b", 1, (int64_t[]){5});
    float grad[5] = {1, 1, 1, 1, 1};
    optim_optimizer *opt = optim_test_make("\"sgd\"");
    assert_ok(optim_group_attach(g, opt), g);
    optim_grad_var p = {optim_grad_dense(optim_tensor_make(OPTIM_F32, grad, 1, (int64_t[]){5})),
                        optim_group_rank(g) == 1 ? b : a};
    int rc = optim_group_apply_gradients(g, opt, &p, 1, 0);
    if (optim_group_size(g) > 1) {
        assert_status(rc, OPTIM_EINVAL, g);
        assert_contains(optim_group_errmsg(g), "same variables in the same order");
        assert_eq(optim_var_get(a, 0), 0.0);
        assert_eq(optim_var_get(b, 0), 0.0);
    } else {
        assert_ok(rc, g);
    }
    /* A gradient the last rank's optimizer refuses: every rank fails at once. */
    optim_grad_var q = {optim_grad_dense(optim_tensor_make(OPTIM_F32, grad, 1, (int64_t[]){5})), a};
    int last = optim_group_rank(g) == optim_group_size(g) - 1;
    if (last) q.grad.dense.shape[0] = 4;
    double before = optim_var_get(a, 0);
    rc = optim_group_apply_gradients(g, opt, &q, 1, 0);
    assert_status(rc, last ? OPTIM_ESHAPE : OPTIM_EINVAL, g);
    print_message("rank %d: %s\n", optim_group_rank(g), optim_group_errmsg(g));
    if (!last) assert_contains(optim_group_errmsg(g), "refused its gradients");
    assert_eq(optim_var_get(a, 0), before);
    q.grad.dense.shape[0] = 5;
    assert_ok(optim_group_apply_gradients(g, opt, &q, 1, 0), g); /* in step again */
    assert_close(optim_var_get(a, 0), before - 0.01 * optim_group_size(g), 1e-6, 0);
    optim_group_destroy(g);
    optim_destroy(opt);
    optim_var_destroy(a);
    optim_var_destroy(b);
}

/* optim_group_check_same: equal settings pass; a differing one fails on
 * every rank with a message listing each rank's value, and the group stays
 * usable. A differing element count is reported against rank 0's value,
 * labelled rank 0. Calls out of step (a sum on rank 0, a settings check on
 * the others) fail as such on every rank instead of exchanging data. */
OPTIM_TEST(test_settings_and_frames)
{
    optim_group *g = make_group(0);
    int rank = optim_group_rank(g), size = optim_group_size(g);
    char seed[16];
    snprintf(seed, sizeof seed, "%d", rank > 0);
    const char *names[] = {"--epochs", "--seed"}, *same[] = {"2", "0"}, *differ[] = {"2", seed};
    assert_ok(optim_group_check_same(g, names, same, 2), g);
    int rc = optim_group_check_same(g, names, differ, 2);
    print_message("rank %d: %s\n", rank, optim_group_errmsg(g));
    if (size > 1) {
        assert_status(rc, OPTIM_EINVAL, g);
        assert_contains(optim_group_errmsg(g),
                        "replicas disagree: --seed is 0 on rank 0, 1 on rank 1");
        assert_null(strstr(optim_group_errmsg(g), "--epochs"));
    } else {
        assert_ok(rc, g);
    }
    double v = 1;
    assert_ok(optim_group_sum(g, &v, 1), g); /* still usable */
    assert_eq(v, (double)size);

    optim_var *a = zeros("a", 1, (int64_t[]){rank == size - 1 && size > 1 ? 4 : 5});
    float grad[5] = {1, 1, 1, 1, 1};
    optim_optimizer *opt = optim_test_make("\"sgd\"");
    assert_ok(optim_group_attach(g, opt), g);
    optim_grad_var p = {
        optim_grad_dense(optim_tensor_make(OPTIM_F32, grad, 1, (int64_t[]){optim_var_numel(a)})),
        a};
    rc = optim_group_apply_gradients(g, opt, &p, 1, 0);
    if (size > 1) {
        assert_status(rc, OPTIM_EINVAL, g);
        print_message("rank %d: %s\n", rank, optim_group_errmsg(g));
        char want[96];
        snprintf(want, sizeof want, "rank %d has element count 4, rank 0 has 5", size - 1);
        assert_contains(optim_group_errmsg(g), want);
    }
    if (size > 1) {
        rc = rank == 0 ? optim_group_sum(g, &v, 1) : optim_group_check_same(g, names, same, 2);
        print_message("rank %d: %s\n", rank, optim_group_errmsg(g));
        assert_status(rc, OPTIM_ESTATE, g);
        assert_contains(optim_group_errmsg(g), "calls are out of step");
        assert_contains(optim_group_errmsg(g), "optim_group_sum on rank");
    }
    optim_group_destroy(g);
    optim_destroy(opt);
    optim_var_destroy(a);
}

OPTIM_TEST(test_bad_arguments)
{
    optim_error err;
    optim_group *g = (optim_group *)1;
    optim_group_options o = optim_group_defaults();
    o.size = 3;
    assert_status(optim_group_create_single(&g, &o, &err), OPTIM_EVERSION, &err);
    assert_null(g);
    assert_contains(err.msg, "options size 3");
    o = optim_group_defaults();
    o.timeout_seconds = 0;
    assert_status(optim_group_create_single(&g, &o, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "timeout_seconds = 0");
    o = optim_group_defaults();
    o.shard_optimizer_state = 2;
    assert_status(optim_group_create_single(&g, &o, &err), OPTIM_EINVAL, &err);
    assert_contains(err.msg, "shard_optimizer_state = 2");
    assert_status(optim_group_create_single(NULL, NULL, &err), OPTIM_EINVAL, &err);
    if (!optim_mpi_available()) {
        assert_status(optim_group_create_mpi(&g, NULL, NULL, &err), OPTIM_ENOTSUP, &err);
        assert_contains(err.msg, "built without MPI");
    } else {
        o = optim_group_defaults();
        o.timeout_seconds = -1;
        assert_status(optim_group_create_mpi(&g, NULL, &o, &err), OPTIM_EINVAL, &err);
        assert_null(g);
    }
    assert_status(optim_group_create_mpi(NULL, NULL, NULL, &err), OPTIM_EINVAL, &err);
    assert_ok(optim_group_create_single(&g, NULL, &err), &err);
    assert_eq(optim_group_rank(g), 0);
    assert_eq(optim_group_size(g), 1);
    optim_optimizer *opt = optim_test_make("\"sgd\"");
    assert_status(optim_group_attach(g, NULL), OPTIM_EINVAL, g);
    assert_status(optim_group_apply_gradients(g, opt, NULL, 0, 0), OPTIM_EINVAL, g);
    assert_contains(optim_group_errmsg(g), "not attached");
    assert_status(optim_group_detach(g, opt), OPTIM_ENOTFOUND, g);
    assert_ok(optim_group_attach(g, opt), g);
    assert_status(optim_group_attach(g, opt), OPTIM_EINVAL, g);
    assert_contains(optim_group_errmsg(g), "already attached");
    assert_status(optim_group_sum(g, NULL, 2), OPTIM_EINVAL, g);
    size_t n;
    assert_status(optim_group_get_weights(g, opt, NULL, 0, NULL), OPTIM_EINVAL, g);
    assert_ok(optim_group_get_weights(g, opt, NULL, 0, &n), g);
    assert_int_equal(n, 1);
    assert_status(optim_group_slot_bytes(g, opt, NULL), OPTIM_EINVAL, g);
    assert_status(optim_group_build(g, opt, NULL, 2), OPTIM_EINVAL, g);
    assert_contains(optim_group_errmsg(g), "vars is NULL");
    assert_status(optim_group_set_weights(g, opt, NULL, 1), OPTIM_EINVAL, g);
    assert_contains(optim_group_errmsg(g), "weights is NULL");
    assert_status(optim_group_build(NULL, opt, NULL, 0), OPTIM_EINVAL, NULL);
    assert_status(optim_group_set_weights(NULL, opt, NULL, 0), OPTIM_EINVAL, NULL);
    assert_status(optim_group_detach(NULL, opt), OPTIM_EINVAL, NULL);
    assert_status(optim_group_sum(NULL, NULL, 0), OPTIM_EINVAL, NULL);
    assert_string_equal(optim_group_errmsg(NULL), "replica group is NULL");
    assert_status(optim_group_apply_gradients(NULL, opt, NULL, 0, 0), OPTIM_EINVAL, NULL);
    assert_status(optim_model_distribute(NULL, g), OPTIM_EINVAL, NULL);
    assert_eq(optim_group_rank(NULL), -1);
    assert_eq(optim_group_size(NULL), 0);
    optim_group_abort(g, 1); /* returns for one process */
    optim_group_destroy(g);
    optim_group_destroy(NULL);
    optim_destroy(opt);
}

int main(void) { return optim_test_run(); }
