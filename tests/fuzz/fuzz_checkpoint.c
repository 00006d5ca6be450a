/* fuzz_checkpoint: a checkpoint directory for optim_checkpoint_read and
 * optim_checkpoint_restore. Input: checkpoint.json's bytes, the line
 * "#SPLIT#", then ckpt-0.safetensors's bytes. When checkpoint.json has the
 * two integrity numbers, the target writes the tensor file's true CRC-32 and
 * size over them, so that inputs get past the CRC to the checks behind it.
 * Promises: no crash or sanitizer report; read and restore succeed or fail
 * with a message; a failed restore leaves the model (variables, layer call
 * counts) and the optimizer (weights, iterations, config) as they were.
 * FUZZ_CHECKPOINT_SEED=PATH: write a real checkpoint as a seed input, exit. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz.h"
#include "optim/checkpoint.h"
#include "optim/optim.h"

static const char SPLIT[] = "\n#SPLIT#\n";

static optim_model *make_model(void)
{
    optim_model *m;
    optim_layer *l;
    optim_error err;
    FUZZ_CHECK(optim_sequential_create(&m, NULL, &err) == 0, "%s", err.msg);
    optim_dense_options d = optim_dense_defaults(3);
    FUZZ_CHECK(optim_dense_create(&l, &d, &err) == 0 && optim_sequential_add(m, l) == 0, "dense");
    FUZZ_CHECK(optim_dropout_create(&l, 0.5, 1, NULL, &err) == 0 && optim_sequential_add(m, l) == 0,
               "dropout");
    d = optim_dense_defaults(2);
    FUZZ_CHECK(optim_dense_create(&l, &d, &err) == 0 && optim_sequential_add(m, l) == 0, "dense");
    FUZZ_CHECK(optim_model_build(m, 2, (int64_t[]){1, 4}) == 0, "%s", optim_model_errmsg(m));
    return m;
}

/* Everything restore may change, as bytes. */
static void snap_add(unsigned char **b, size_t *n, const void *p, size_t len)
{
    *b = realloc(*b, *n + len + 1);
    FUZZ_CHECK(*b != NULL, "out of memory");
    if (len) memcpy(*b + *n, p, len);
    *n += len;
}
static void snap_tensor(unsigned char **b, size_t *n, optim_tensor t)
{
    snap_add(b, n, &t.dtype, sizeof t.dtype);
    snap_add(b, n, t.shape, sizeof(int64_t) * (size_t)t.rank);
    snap_add(b, n, t.data, (size_t)optim_tensor_numel(&t) * optim_dtype_size(t.dtype));
}
static size_t snap(optim_model *m, optim_optimizer *o, unsigned char **b)
{
    size_t n = 0;
    optim_var *v[16];
    size_t nv = optim_model_variables(m, v, 16);
    for (size_t i = 0; i < nv; i++) snap_tensor(b, &n, optim_var_tensor(v[i]));
    for (size_t i = 0; i < optim_model_layer_count(m); i++) {
        uint64_t c = optim_layer_training_calls(optim_model_layer(m, i));
        snap_add(b, &n, &c, sizeof c);
    }
    size_t nw = optim_weights_count(o);
    optim_tensor *w = calloc(nw, sizeof *w);
    FUZZ_CHECK(w != NULL, "out of memory");
    optim_get_weights(o, w, nw);
    for (size_t i = 0; i < nw; i++) snap_tensor(b, &n, w[i]);
    free(w);
    char *cfg = optim_serialize(o);
    if (cfg) snap_add(b, &n, cfg, strlen(cfg));
    optim_free(cfg);
    return n;
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f && fwrite(p, 1, n, f) == n && fclose(f) == 0, "cannot write %s", path);
}

/* checkpoint.json with the tensor bytes' true CRC-32 and size, if it has both keys. */
static char *fix_crc(const uint8_t *json, size_t n, const uint8_t *st, size_t st_n)
{
    char *text = strndup((const char *)json, n);
    cJSON *r = text ? cJSON_Parse(text) : NULL;
    cJSON *crc = cJSON_GetObjectItemCaseSensitive(r, "tensors_crc32"),
          *size = cJSON_GetObjectItemCaseSensitive(r, "tensors_bytes");
    if (cJSON_IsNumber(crc) && cJSON_IsNumber(size)) {
        cJSON_SetNumberValue(crc, (double)crc32(crc32(0L, Z_NULL, 0), st, (uInt)st_n));
        cJSON_SetNumberValue(size, (double)st_n);
        char *fixed = cJSON_PrintUnformatted(r);
        if (fixed) free(text), text = fixed;
    }
    cJSON_Delete(r);
    return text;
}

static void write_seed(const char *dir, const char *out)
{
    optim_error err;
    optim_model *m = make_model();
    optim_optimizer *o;
    FUZZ_CHECK(optim_from_json(&o, "\"adam\"", &err) == 0, "%s", err.msg);
    optim_var *v[16];
    size_t n = optim_model_trainable_variables(m, v, 16);
    FUZZ_CHECK(optim_build(o, v, n) == 0 && optim_set_iterations(o, 3) == 0, "build");
    FUZZ_CHECK(optim_checkpoint_save(dir, m, o, 2, "{\"seed\": 0}", &err) == 0, "%s", err.msg);
    char cmd[9000];
    snprintf(cmd, sizeof cmd,
             "(cat %s/checkpoint.json; printf '\\n#SPLIT#\\n'; cat %s/ckpt-0.safetensors) > %s",
             dir, dir, out);
    FUZZ_CHECK(system(cmd) == 0, "%s", cmd);
    exit(0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *json_path = fuzz_scratch_path("checkpoint.json"),
               *st_path = fuzz_scratch_path("ckpt-0.safetensors");
    char dir[4200];
    snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(json_path, '/') - json_path), json_path);
    if (getenv("FUZZ_CHECKPOINT_SEED")) write_seed(dir, getenv("FUZZ_CHECKPOINT_SEED"));
    const uint8_t *sep = memmem(data, size, SPLIT, sizeof SPLIT - 1);
    size_t jl = sep ? (size_t)(sep - data) : size;
    const uint8_t *st = sep ? sep + sizeof SPLIT - 1 : data + size;
    size_t st_n = (size_t)(data + size - st);
    char *json = fix_crc(data, jl, st, st_n);
    if (!json) return 0;
    write_file(json_path, json, strlen(json));
    write_file(st_path, st, st_n);
    free(json);
    optim_error err;
    optim_checkpoint *c = NULL;
    if (optim_checkpoint_read(dir, &c, &err)) {
        FUZZ_CHECK(err.msg[0], "read failed without a message");
        return 0;
    }
    optim_model *m = make_model();
    optim_optimizer *o = NULL;
    if (optim_from_json(&o, optim_checkpoint_optimizer_json(c), &err))
        FUZZ_CHECK(optim_from_json(&o, "\"adam\"", &err) == 0, "%s", err.msg);
    unsigned char *before = NULL, *after = NULL;
    size_t nb = snap(m, o, &before);
    if (optim_checkpoint_restore(c, m, o, &err)) {
        FUZZ_CHECK(err.msg[0], "restore failed without a message");
        size_t na = snap(m, o, &after);
        FUZZ_CHECK(na == nb && memcmp(after, before, na) == 0,
                   "restore failed (%s) but changed the model or the optimizer", err.msg);
    }
    free(before), free(after);
    optim_model_destroy(m);
    optim_destroy(o);
    optim_checkpoint_free(c);
    return 0;
}
