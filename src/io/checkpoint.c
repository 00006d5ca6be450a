/* Checkpoints of a training run (optim/checkpoint.h): a safetensors file of
 * the model's variables, the optimizer's weights and the layers' call
 * counters, described by checkpoint.json, which is replaced atomically and
 * is written only once the tensor file it names is on disk. */
#define _POSIX_C_SOURCE 200809L
#include "optim/checkpoint.h"
#include "optim/file.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/fd.h"
#include "core/internal.h"
#include "core/json.h"
#include "io/atomic_file.h"
#include "io/checkpoint_lock.h"
#include "optim/safetensors.h"
#include "optim/optimizer_class.h"
#include "optim/wrappers.h"

#define CK_FORMAT "optim.checkpoint"
#define CK_VERSION 1
#define CK_JSON "checkpoint.json"
#define CK_MAX_VARS 4096
#define CK_MAX_PATH 4096

struct optim_checkpoint {
    cJSON *root;
    optim_st_file *st;
    int64_t epoch;
    char *optimizer_json, *extra_json;
};

/* ---- writing ------------------------------------------------------------------ */

/* dir/name <- text, through the atomic writer that safetensors files use
 * (io/atomic_file.h): it appears complete or not at all. */
static int write_atomic(const char *dir, const char *name, const char *text, optim_error *err)
{
    char path[CK_MAX_PATH];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    optim__atomic_file f;
    const char *what = NULL;
    int rc = optim__atomic_open(&f, path, &what);
    if (!rc && optim__write_all(f.fd, text, strlen(text)) != 0) {
        int e = errno;
        optim__atomic_abort(&f);
        errno = e;
        rc = -1, what = "write error";
    }
    if (!rc) rc = optim__atomic_commit(&f, &what);
    if (rc && errno)
        return optim__err(err, OPTIM_EIO, "checkpoint: cannot write %s: %s: %s", path, what,
                          strerror(errno));
    if (rc) return optim__err(err, OPTIM_EIO, "checkpoint: cannot write %s: %s", path, what);
    return OPTIM_OK;
}

static char *read_text(const char *path);

/* The generation after the one dir's checkpoint.json names (0 if none). */
static int64_t next_generation(const char *dir)
{
    char path[CK_MAX_PATH];
    snprintf(path, sizeof path, "%s/%s", dir, CK_JSON);
    char *text = read_text(path);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "generation");
    /* Range-checked before the cast: a damaged number starts again at 0. */
    double v = cJSON_IsNumber(g) ? g->valuedouble : -1;
    int64_t next = v >= 0 && v < 9007199254740992.0 && v == (double)(int64_t)v ? (int64_t)v + 1 : 0;
    cJSON_Delete(root);
    free(text);
    return next;
}

/* Removes ckpt-*.safetensors files other than `keep`, and temporary files
 * .optim-PID-N.tmp of other processes (writers that died between link and
 * rename: under the lock no other writer is running). Best effort. */
static void remove_stale(const char *dir, const char *keep)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *ent;
    char path[CK_MAX_PATH], ours[64];
    snprintf(ours, sizeof ours, ".optim-%ld-", (long)getpid());
    while ((ent = readdir(d))) {
        const char *n = ent->d_name;
        size_t len = strlen(n);
        int tmp = strncmp(n, ".optim-", 7) == 0 && len > 4 && strcmp(n + len - 4, ".tmp") == 0 &&
            strncmp(n, ours, strlen(ours)) != 0;
        if (!tmp && (strncmp(n, "ckpt-", 5) != 0 || strcmp(n, keep) == 0)) continue;
        if (!tmp && (len < 12 || strcmp(n + len - 12, ".safetensors") != 0)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, n);
        unlink(path);
    }
    closedir(d);
}

/* CRC-32 (zlib's) and size of a whole file: checkpoint.json records them
 * for its tensor file, so a file from another run or a damaged one is
 * refused. -1 with errno set on a read error. */
static int file_crc(const char *path, uint32_t *crc, double *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    unsigned char buf[1 << 16];
    uLong c = crc32(0L, Z_NULL, 0);
    double total = 0;
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) != 0) {
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) break;
        c = crc32(c, buf, (uInt)r);
        total += (double)r;
    }
    int e = errno;
    close(fd);
    errno = e;
    *crc = (uint32_t)c, *size = total;
    return r < 0 ? -1 : 0;
}

static cJSON *shape_json(int32_t rank, const int64_t *shape)
{
    cJSON *a = cJSON_CreateArray();
    for (int32_t i = 0; a && i < rank; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)shape[i]));
    return a;
}

/* Index of the first element of t that is NaN or infinite, or -1. */
static int64_t first_nonfinite(const optim_tensor *t)
{
    int64_t n = optim_tensor_numel(t);
    for (int64_t k = 0; k < n; k++) {
        double v = t->dtype == OPTIM_F32 ? ((const float *)t->data)[k]
            : t->dtype == OPTIM_F64      ? ((const double *)t->data)[k]
                                         : 0; /* half types: checked as stored, skipped */
        if (!isfinite(v)) return k;
    }
    return -1;
}

/* A save refuses what restore would: a value that is NaN or infinite. */
static int saved_finite(const char *what, const char *name, const optim_tensor *t, optim_error *err)
{
    int64_t k = first_nonfinite(t);
    if (k < 0) return OPTIM_OK;
    return optim__err(err, OPTIM_ERANGE,
                      "checkpoint: %s %s element %lld is NaN or infinite; a checkpoint keeps "
                      "finite values only (restore refuses others), so nothing was saved",
                      what, name, (long long)k);
}

/* The model's layers and variables, into root and the writer. */
static int add_model(cJSON *root, optim_st_writer *w, optim_model *m, optim_error *err)
{
    optim_var *vars[CK_MAX_VARS];
    size_t n = optim_model_variables(m, vars, CK_MAX_VARS);
    if (n > CK_MAX_VARS)
        return optim__err(err, OPTIM_ENOTSUP, "checkpoint: more than %d variables", CK_MAX_VARS);
    cJSON *jv = cJSON_AddArrayToObject(root, "variables"),
          *jl = cJSON_AddArrayToObject(root, "layers");
    if (!jv || !jl) return optim__err(err, OPTIM_ENOMEM, "checkpoint: out of memory");
    char name[CK_MAX_PATH];
    int rc = OPTIM_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(jv, o);
        cJSON_AddStringToObject(o, "name", optim_var_name(vars[i]));
        cJSON_AddStringToObject(o, "dtype", optim_dtype_name(optim_var_dtype(vars[i])));
        cJSON_AddItemToObject(o, "shape",
                              shape_json(optim_var_rank(vars[i]), optim_var_shape(vars[i])));
        snprintf(name, sizeof name, "model/%s", optim_var_name(vars[i]));
        optim_tensor t = optim_var_tensor(vars[i]);
        rc = saved_finite("variable", optim_var_name(vars[i]), &t, err);
        if (!rc) rc = optim_st_writer_add(w, name, &t, err);
    }
    for (size_t i = 0; i < optim_model_layer_count(m) && !rc; i++) {
        optim_layer *l = optim_model_layer(m, i);
        cJSON_AddItemToArray(jl, cJSON_CreateString(optim_layer_name(l)));
        int64_t calls = (int64_t)optim_layer_training_calls(l);
        optim_tensor t = optim_tensor_make(OPTIM_I64, &calls, 0, NULL);
        snprintf(name, sizeof name, "layer_calls/%s", optim_layer_name(l));
        rc = optim_st_writer_add(w, name, &t, err);
    }
    return rc;
}

/* "Lookahead>Adam" style chain of class names, outermost first. */
static void class_chain(const optim_optimizer *opt, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (const optim_optimizer *o = opt; o && len < n; o = optim_wrapper_inner(o))
        len +=
            (size_t)snprintf(buf + len, n - len, "%s%s%s", len ? ">" : "", optim_class_of(o)->name,
                             optim_generation_of(o) == OPTIM_LEGACY ? "(legacy)" : "");
}

/* The optimizer's class chain, config and weights. */
static int add_optimizer(cJSON *root, optim_st_writer *w, optim_optimizer *opt, optim_error *err)
{
    char chain[512], name[CK_MAX_PATH];
    class_chain(opt, chain, sizeof chain);
    char *cfg = optim_serialize(opt);
    /* As written (cJSON's printer would round numbers to 15 digits and
     * write 1.0 as 1). */
    cJSON *c = cfg ? cJSON_CreateRaw(cfg) : NULL;
    optim_free(cfg);
    if (!c)
        return optim__err(err, OPTIM_ENOMEM, "checkpoint: cannot serialize the optimizer: %s",
                          optim_errmsg(opt));
    cJSON_AddItemToObject(root, "optimizer", c);
    cJSON_AddStringToObject(root, "optimizer_classes", chain);
    size_t n = optim_weights_count(opt);
    optim_tensor *ws = optim__calloc(n, sizeof *ws);
    cJSON *names = cJSON_AddArrayToObject(root, "optimizer_weights");
    if (!ws || !names) {
        free(ws);
        return optim__err(err, OPTIM_ENOMEM, "checkpoint: out of memory");
    }
    optim_get_weights(opt, ws, n);
    int rc = OPTIM_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        cJSON_AddItemToArray(names, cJSON_CreateString(optim_weight_name(opt, i)));
        snprintf(name, sizeof name, "optimizer/%s", optim_weight_name(opt, i));
        if (i > 0) rc = saved_finite("optimizer weight", optim_weight_name(opt, i), &ws[i], err);
        if (!rc) rc = optim_st_writer_add(w, name, &ws[i], err);
    }
    free(ws);
    return rc;
}

static int save_checks(const char *dir, optim_model *m, optim_optimizer *opt, int64_t epoch,
                       optim_error *err)
{
    if (!dir || !m || !opt)
        return optim__err(err, OPTIM_EINVAL, "optim_checkpoint_save: %s is NULL",
                          !dir     ? "dir"
                              : !m ? "model"
                                   : "opt");
    if (!dir[0] || strlen(dir) > CK_MAX_PATH - 64)
        return optim__err(err, OPTIM_EINVAL, "optim_checkpoint_save: dir '%s' is empty or too long",
                          dir);
    if (epoch < 0)
        return optim__err(err, OPTIM_EINVAL, "optim_checkpoint_save: epoch = %lld, expected >= 0",
                          (long long)epoch);
    if (!optim_model_built(m))
        return optim__err(err, OPTIM_EINVAL, "optim_checkpoint_save: model \"%s\" is not built yet",
                          optim_model_name(m));
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return optim__err(err, OPTIM_EIO, "checkpoint: cannot create directory %s: %s", dir,
                          strerror(errno));
    return OPTIM_OK;
}

static int save_locked(const char *dir, optim_model *m, optim_optimizer *opt, int64_t epoch,
                       const char *extra_json, optim_error *err);

int optim_checkpoint_save(const char *dir, optim_model *m, optim_optimizer *opt, int64_t epoch,
                          const char *extra_json, optim_error *err)
{
    int rc = save_checks(dir, m, opt, epoch, err);
    if (rc) return rc;
    int lock = optim__checkpoint_lock(dir, err);
    if (lock < 0 && lock != OPTIM__LOCK_OURS) return lock;
    rc = save_locked(dir, m, opt, epoch, extra_json, err);
    if (lock >= 0) close(lock);
    return rc;
}

static int save_locked(const char *dir, optim_model *m, optim_optimizer *opt, int64_t epoch,
                       const char *extra_json, optim_error *err)
{
    int rc = OPTIM_OK;
    cJSON *extra = cJSON_Parse(extra_json ? extra_json : "{}");
    if (!cJSON_IsObject(extra)) {
        cJSON_Delete(extra);
        return optim__err(err, OPTIM_EINVAL,
                          "optim_checkpoint_save: extra_json '%s' is not a JSON object",
                          extra_json);
    }
    cJSON *root = cJSON_CreateObject();
    optim_st_writer *w = NULL;
    char file[64], path[CK_MAX_PATH], *text = NULL;
    int64_t gen = next_generation(dir);
    snprintf(file, sizeof file, "ckpt-%lld.safetensors", (long long)gen);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (!root) rc = optim__err(err, OPTIM_ENOMEM, "checkpoint: out of memory");
    if (!rc) {
        cJSON_AddStringToObject(root, "format", CK_FORMAT);
        cJSON_AddNumberToObject(root, "version", CK_VERSION);
        cJSON_AddNumberToObject(root, "epoch", (double)epoch);
        cJSON_AddNumberToObject(root, "generation", (double)gen);
        cJSON_AddStringToObject(root, "tensors", file);
        cJSON_AddItemToObject(root, "extra", extra), extra = NULL;
        rc = optim_st_writer_create(&w, err);
    }
    if (!rc) rc = add_model(root, w, m, err);
    if (!rc) rc = add_optimizer(root, w, opt, err);
    if (!rc) rc = optim_st_writer_save(w, path, err);
    uint32_t crc = 0;
    double size = 0;
    if (!rc && file_crc(path, &crc, &size))
        rc = optim__err(err, OPTIM_EIO, "checkpoint: cannot read back %s: %s", path,
                        strerror(errno));
    if (!rc) {
        cJSON_AddNumberToObject(root, "tensors_crc32", (double)crc);
        cJSON_AddNumberToObject(root, "tensors_bytes", size);
    }
    if (!rc && !(text = cJSON_Print(root)))
        rc = optim__err(err, OPTIM_ENOMEM, "checkpoint: out of memory");
    if (!rc) rc = write_atomic(dir, CK_JSON, text, err);
    if (!rc) remove_stale(dir, file);
    else unlink(path);
    free(text);
    cJSON_Delete(extra);
    cJSON_Delete(root);
    optim_st_writer_destroy(w);
    return rc;
}

/* ---- reading ------------------------------------------------------------------ */

void optim_checkpoint_free(optim_checkpoint *c)
{
    if (!c) return;
    cJSON_Delete(c->root);
    optim_st_free(c->st);
    free(c->optimizer_json);
    free(c->extra_json);
    free(c);
}

int64_t optim_checkpoint_epoch(const optim_checkpoint *c) { return c ? c->epoch : -1; }
const char *optim_checkpoint_optimizer_json(const optim_checkpoint *c)
{
    return c ? c->optimizer_json : NULL;
}
const char *optim_checkpoint_extra_json(const optim_checkpoint *c)
{
    return c ? c->extra_json : NULL;
}

static const cJSON *item(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* Checks checkpoint.json's fields; fills epoch and the two JSON texts. */
static int parse_root(optim_checkpoint *c, const char *path, optim_error *err)
{
    const cJSON *r = c->root, *fmt = item(r, "format"), *ver = item(r, "version"),
                *ep = item(r, "epoch");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, CK_FORMAT) != 0)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: not an optim checkpoint (\"format\" is not \"%s\")", path,
                          CK_FORMAT);
    if (!cJSON_IsNumber(ver) || ver->valuedouble != CK_VERSION)
        return optim__err(err, OPTIM_EFORMAT, "%s: checkpoint version %g, expected %d", path,
                          cJSON_IsNumber(ver) ? ver->valuedouble : -1.0, CK_VERSION);
    if (!cJSON_IsNumber(ep) || !(ep->valuedouble >= 0 && ep->valuedouble <= 9007199254740992.0) ||
        ep->valuedouble != (double)(int64_t)ep->valuedouble) /* range first: then the cast */
        return optim__err(err, OPTIM_EFORMAT, "%s: \"epoch\" is not a whole number >= 0", path);
    c->epoch = (int64_t)ep->valuedouble;
    const char *keys[] = {"tensors", "optimizer_classes"};
    for (size_t i = 0; i < 2; i++)
        if (!cJSON_IsString(item(r, keys[i])))
            return optim__err(err, OPTIM_EFORMAT, "%s: \"%s\" is missing or not a string", path,
                              keys[i]);
    const char *arrays[] = {"variables", "layers", "optimizer_weights"};
    for (size_t i = 0; i < 3; i++)
        if (!cJSON_IsArray(item(r, arrays[i])))
            return optim__err(err, OPTIM_EFORMAT, "%s: \"%s\" is missing or not an array", path,
                              arrays[i]);
    if (!cJSON_IsObject(item(r, "optimizer")) || !cJSON_IsObject(item(r, "extra")))
        return optim__err(err, OPTIM_EFORMAT, "%s: \"optimizer\" or \"extra\" is not an object",
                          path);
    c->optimizer_json = optim__json_print_exact(item(r, "optimizer"));
    c->extra_json = cJSON_PrintUnformatted(item(r, "extra"));
    if (!c->optimizer_json || !c->extra_json)
        return optim__err(err, OPTIM_ENOMEM, "%s: out of memory", path);
    return OPTIM_OK;
}

/* Every name listed under `key` (objects with a "name" when `objects`, else
 * strings) has its tensor PREFIX/NAME in the file. */
static int check_listed(const optim_checkpoint *c, const char *key, int objects, const char *prefix,
                        const char *file, optim_error *err)
{
    const cJSON *e;
    char name[CK_MAX_PATH];
    optim_tensor t;
    cJSON_ArrayForEach(e, item(c->root, key))
    {
        const cJSON *n = !objects ? e : cJSON_IsObject(e) ? item(e, "name") : NULL;
        if (!cJSON_IsString(n))
            return optim__err(err, OPTIM_EFORMAT, "%s: an entry of \"%s\" is not %s", CK_JSON, key,
                              objects ? "an object with a string \"name\"" : "a string");
        snprintf(name, sizeof name, "%s/%s", prefix, n->valuestring);
        if (optim_st_get(c->st, name, &t))
            return optim__err(err, OPTIM_EFORMAT, "%s: tensor \"%s\" is missing", file, name);
    }
    return OPTIM_OK;
}

static int read_tensors(optim_checkpoint *c, const char *dir, optim_error *err)
{
    const char *file = item(c->root, "tensors")->valuestring;
    if (strchr(file, '/') || strncmp(file, "ckpt-", 5) != 0)
        return optim__err(err, OPTIM_EFORMAT, "%s/%s: \"tensors\" '%s' is not a ckpt-N file", dir,
                          CK_JSON, file);
    char path[CK_MAX_PATH];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    uint32_t crc;
    double size;
    const cJSON *want = item(c->root, "tensors_crc32"), *bytes = item(c->root, "tensors_bytes");
    if (!cJSON_IsNumber(want) || !cJSON_IsNumber(bytes))
        return optim__err(err, OPTIM_EFORMAT,
                          "%s/%s: \"tensors_crc32\" or \"tensors_bytes\" is "
                          "missing (a checkpoint of an older optim: save it again)",
                          dir, CK_JSON);
    if (file_crc(path, &crc, &size))
        return optim__err(err, OPTIM_EIO, "%s: cannot read: %s", path, strerror(errno));
    if ((double)crc != want->valuedouble || size != bytes->valuedouble)
        return optim__err(err, OPTIM_EFORMAT,
                          "%s: CRC-32 %u and %.0f bytes, %s/%s recorded %.0f and %.0f: the file "
                          "is damaged or from another save",
                          path, (unsigned)crc, size, dir, CK_JSON, want->valuedouble,
                          bytes->valuedouble);
    int rc = optim_st_read(path, &c->st, err);
    if (!rc) rc = check_listed(c, "variables", 1, "model", path, err);
    if (!rc) rc = check_listed(c, "layers", 0, "layer_calls", path, err);
    if (!rc) rc = check_listed(c, "optimizer_weights", 0, "optimizer", path, err);
    return rc;
}

#define CK_MAX_JSON ((size_t)64 << 20)

/* A whole regular file of at most CK_MAX_JSON bytes, NUL-terminated; NULL
 * with errno set on error (EISDIR, EINVAL for a FIFO or device, EFBIG). */
static char *read_text(const char *path)
{
    int64_t size;
    int fd = optim_file_open_regular(path, &size);
    if (fd < 0) return NULL;
    int e = (uint64_t)size > CK_MAX_JSON ? EFBIG : 0;
    size_t len = e ? 0 : (size_t)size, got = 0;
    char *buf = e ? NULL : malloc(len + 1);
    if (!e && !buf) e = ENOMEM;
    while (!e && got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) e = r < 0 ? errno : EIO; /* shorter than fstat said */
        else got += (size_t)r;
    }
    close(fd);
    if (e) {
        free(buf);
        errno = e;
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

static const char *read_reason(int e)
{
    return e == EINVAL ? "not a regular file" : e == EFBIG ? "larger than 64 MiB" : strerror(e);
}

int optim_checkpoint_read(const char *dir, optim_checkpoint **out, optim_error *err)
{
    if (!out) return optim__err(err, OPTIM_EINVAL, "optim_checkpoint_read: out is NULL");
    *out = NULL;
    if (!dir || !dir[0] || strlen(dir) > CK_MAX_PATH - 64)
        return optim__err(err, OPTIM_EINVAL,
                          "optim_checkpoint_read: dir is NULL, empty or too long");
    char path[CK_MAX_PATH];
    snprintf(path, sizeof path, "%s/%s", dir, CK_JSON);
    char *text = read_text(path);
    if (!text)
        return optim__err(err, OPTIM_EIO, "%s holds no checkpoint (%s: %s)", dir, path,
                          read_reason(errno));
    optim_checkpoint *c = optim__calloc(1, sizeof *c);
    int rc = c ? OPTIM_OK : optim__err(err, OPTIM_ENOMEM, "%s: out of memory", path);
    if (!rc && !cJSON_IsObject(c->root = optim__json_parse(text, NULL, 0)))
        rc = optim__err(err, OPTIM_EFORMAT, "%s: not a JSON object", path);
    free(text);
    if (!rc) rc = parse_root(c, path, err);
    if (!rc) rc = read_tensors(c, dir, err);
    if (rc) optim_checkpoint_free(c);
    else *out = c;
    return rc;
}

/* ---- restoring ------------------------------------------------------------------ */

static int same_shape(const optim_tensor *t, optim_dtype dt, int32_t rank, const int64_t *shape)
{
    if (t->dtype != dt || t->rank != rank) return 0;
    for (int32_t i = 0; i < rank; i++)
        if (t->shape[i] != shape[i]) return 0;
    return 1;
}

/* The values restore would write are in their domain: finite variables,
 * layer call counts that are I64 scalars >= 0. */
static int check_values(const optim_checkpoint *c, optim_var **vars, size_t n, size_t nl,
                        optim_error *err)
{
    char name[CK_MAX_PATH];
    optim_tensor t;
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "model/%s", optim_var_name(vars[i]));
        optim_st_get(c->st, name, &t);
        int64_t k = first_nonfinite(&t);
        if (k >= 0)
            return optim__err(err, OPTIM_EFORMAT,
                              "checkpoint: tensor %s element %lld is not finite", name,
                              (long long)k);
    }
    const cJSON *jl = item(c->root, "layers");
    for (size_t i = 0; i < nl; i++) {
        snprintf(name, sizeof name, "layer_calls/%s", cJSON_GetArrayItem(jl, (int)i)->valuestring);
        optim_st_get(c->st, name, &t);
        int64_t calls = 0;
        if (t.dtype == OPTIM_I64 && optim_tensor_numel(&t) == 1) memcpy(&calls, t.data, 8);
        if (t.dtype != OPTIM_I64 || optim_tensor_numel(&t) != 1 || calls < 0)
            return optim__err(err, OPTIM_EFORMAT,
                              "checkpoint: tensor %s is %s with %lld elements (value %lld), "
                              "expected one I64 >= 0",
                              name, optim_dtype_name(t.dtype), (long long)optim_tensor_numel(&t),
                              (long long)calls);
    }
    return OPTIM_OK;
}

/* The model has exactly the checkpoint's layers and variables. */
static int check_model(const optim_checkpoint *c, optim_model *m, optim_var **vars, size_t n,
                       optim_error *err)
{
    const cJSON *jv = item(c->root, "variables"), *jl = item(c->root, "layers");
    size_t nl = optim_model_layer_count(m);
    if ((size_t)cJSON_GetArraySize(jv) != n || (size_t)cJSON_GetArraySize(jl) != nl)
        return optim__err(
            err, OPTIM_ESTATE,
            "checkpoint is of a different model: it has %d variables in %d layers, model \"%s\" has "
            "%zu in %zu",
            cJSON_GetArraySize(jv), cJSON_GetArraySize(jl), optim_model_name(m), n, nl);
    char name[CK_MAX_PATH], want[128], have[128];
    for (size_t i = 0; i < n; i++) {
        const char *vn = item(cJSON_GetArrayItem(jv, (int)i), "name")->valuestring;
        optim_tensor t;
        snprintf(name, sizeof name, "model/%s", vn);
        optim_st_get(c->st, name, &t);
        if (strcmp(vn, optim_var_name(vars[i])) != 0 ||
            !same_shape(&t, optim_var_dtype(vars[i]), optim_var_rank(vars[i]),
                        optim_var_shape(vars[i])))
            return optim__err(
                err, OPTIM_ESTATE,
                "checkpoint is of a different model: its variable %zu is %s %s %s, the model's is "
                "%s %s %s",
                i, vn, optim_dtype_name(t.dtype),
                optim_shape_str(t.rank, t.shape, want, sizeof want), optim_var_name(vars[i]),
                optim_dtype_name(optim_var_dtype(vars[i])),
                optim_shape_str(optim_var_rank(vars[i]), optim_var_shape(vars[i]), have,
                                sizeof have));
    }
    for (size_t i = 0; i < nl; i++) {
        const cJSON *l = cJSON_GetArrayItem(jl, (int)i);
        if (strcmp(l->valuestring, optim_layer_name(optim_model_layer(m, i))) != 0)
            return optim__err(
                err, OPTIM_ESTATE,
                "checkpoint is of a different model: layer %zu is %s, the model's is %s", i,
                l->valuestring, optim_layer_name(optim_model_layer(m, i)));
    }
    return check_values(c, vars, n, nl, err);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int has_name(const char *const *sorted, size_t n, const char *name)
{
    return bsearch(&name, sorted, n, sizeof *sorted, cmp_str) != NULL;
}

/* The checkpoint's optimizer weights are the names of opt's (built), each
 * once, whatever their order: slots created in another order (a variable's
 * first gradient came later) restore by name. */
static int match_names(const optim_checkpoint *c, optim_optimizer *opt, size_t nw, optim_error *err)
{
    const cJSON *names = item(c->root, "optimizer_weights");
    size_t nc = (size_t)cJSON_GetArraySize(names);
    const char **ck = optim__calloc(nc + 1, sizeof *ck),
               **ours = optim__calloc(nw + 1, sizeof *ours);
    int rc = ck && ours ? OPTIM_OK : optim__err(err, OPTIM_ENOMEM, "checkpoint: out of memory");
    for (size_t i = 0; !rc && i < nc; i++) ck[i] = cJSON_GetArrayItem(names, (int)i)->valuestring;
    for (size_t i = 0; !rc && i < nw; i++)
        if (!(ours[i] = optim_weight_name(opt, i)))
            rc = optim__err(err, OPTIM_ENOMEM, "checkpoint: out of memory");
    if (!rc) qsort(ck, nc, sizeof *ck, cmp_str), qsort(ours, nw, sizeof *ours, cmp_str);
    for (size_t i = 1; !rc && i < nc; i++)
        if (strcmp(ck[i - 1], ck[i]) == 0)
            rc =
                optim__err(err, OPTIM_EFORMAT, "checkpoint lists optimizer weight %s twice", ck[i]);
    for (size_t i = 0; !rc && i < nw; i++)
        if (!has_name(ck, nc, ours[i]))
            rc = optim__err(err, OPTIM_ESTATE,
                            "checkpoint has no optimizer weight %s, which the optimizer has (it "
                            "has %zu weights, the optimizer %zu)",
                            ours[i], nc, nw);
    for (size_t i = 0; !rc && i < nc; i++)
        if (!has_name(ours, nw, ck[i]))
            rc = optim__err(err, OPTIM_ESTATE,
                            "checkpoint has optimizer weight %s, which the optimizer does not have "
                            "(it has %zu weights, the optimizer %zu)",
                            ck[i], nc, nw);
    free(ck);
    free(ours);
    return rc;
}

/* ws[i] <- the checkpoint's tensor of opt's weight i, by name. */
static int weights_by_name(const optim_checkpoint *c, optim_optimizer *opt, optim_tensor *ws,
                           size_t nw, optim_error *err)
{
    char name[CK_MAX_PATH];
    for (size_t i = 0; i < nw; i++) {
        snprintf(name, sizeof name, "optimizer/%s", optim_weight_name(opt, i));
        if (optim_st_get(c->st, name, &ws[i]))
            return optim__err(err, OPTIM_EFORMAT, "checkpoint: tensor \"%s\" is missing", name);
    }
    return OPTIM_OK;
}

/* Each of the checkpoint's weights (ck, in the order of the scratch
 * optimizer's weights `have`) has that weight's dtype and shape, finite. */
static int check_weight_tensors(optim_optimizer *scratch, const optim_tensor *have,
                                const optim_tensor *ck, size_t nw, optim_error *err)
{
    char a[128], b[128];
    for (size_t i = 0; i < nw; i++) {
        const char *wn = optim_weight_name(scratch, i);
        const optim_tensor *t = &ck[i];
        if (i > 0 && !same_shape(t, have[i].dtype, have[i].rank, have[i].shape))
            return optim__err(err, OPTIM_ESTATE,
                              "checkpoint's optimizer weight %s is %s %s, the optimizer's is %s %s",
                              wn, optim_dtype_name(t->dtype),
                              optim_shape_str(t->rank, t->shape, a, sizeof a),
                              optim_dtype_name(have[i].dtype),
                              optim_shape_str(have[i].rank, have[i].shape, b, sizeof b));
        int64_t k = i > 0 ? first_nonfinite(t) : -1;
        if (k >= 0)
            return optim__err(err, OPTIM_EFORMAT,
                              "checkpoint: optimizer weight %s element %lld is not finite", wn,
                              (long long)k);
    }
    return OPTIM_OK;
}

/* The weights opt will have once built for vars match the checkpoint's
 * (checked on a scratch copy, so opt itself stays untouched). */
static int check_optimizer(const optim_checkpoint *c, optim_optimizer *opt, optim_var *const *vars,
                           size_t n, int *build, optim_error *err)
{
    char chain[512];
    class_chain(opt, chain, sizeof chain);
    const char *want = item(c->root, "optimizer_classes")->valuestring;
    if (strcmp(chain, want) != 0)
        return optim__err(err, OPTIM_ESTATE,
                          "checkpoint was written with optimizer %s, this run's is %s", want,
                          chain);
    char *cfg = optim_serialize(opt);
    optim_optimizer *scratch = NULL;
    int rc = cfg ? optim_from_json(&scratch, cfg, err)
                 : optim__err(err, OPTIM_ENOMEM, "checkpoint: out of memory");
    optim_free(cfg);
    if (!rc &&
        (optim_iterations(opt) != 0 || optim_weights_count(opt) != optim_weights_count(scratch)))
        rc = optim__err(err, OPTIM_ESTATE,
                        "checkpoint: restore needs an optimizer that has not stepped yet");
    const cJSON *names = item(c->root, "optimizer_weights");
    /* A checkpoint taken before the first step has no slots: nothing to build. */
    *build = !rc && (size_t)cJSON_GetArraySize(names) != optim_weights_count(scratch);
    if (*build && (rc = optim_build(scratch, vars, n)))
        optim__err(err, rc, "checkpoint: %s", optim_errmsg(scratch));
    size_t nw = rc ? 0 : optim_weights_count(scratch);
    optim_tensor *have = nw ? optim__calloc(2 * nw, sizeof *have) : NULL,
                 *ws = have ? have + nw : NULL;
    if (!rc && !have) rc = optim__err(err, OPTIM_ENOMEM, "checkpoint: out of memory");
    if (!rc) rc = match_names(c, scratch, nw, err);
    if (!rc) optim_get_weights(scratch, have, nw);
    if (!rc) rc = weights_by_name(c, scratch, ws, nw, err);
    if (!rc) rc = check_weight_tensors(scratch, have, ws, nw, err);
    /* What set_weights refuses (iterations out of range, a slot outside
     * its class's domain), on the scratch copy. */
    if (!rc && optim_set_weights(scratch, ws, nw))
        rc = optim__err(err, OPTIM_EFORMAT, "checkpoint: %s", optim_errmsg(scratch));
    free(have);
    optim_destroy(scratch);
    return rc;
}

/* Sets opt's weights from the checkpoint, by name (after optim_build). */
static int set_optimizer(const optim_checkpoint *c, optim_optimizer *opt, optim_error *err)
{
    size_t nw = optim_weights_count(opt);
    optim_tensor *ws = optim__calloc(nw ? nw : 1, sizeof *ws);
    if (!ws) return optim__err(err, OPTIM_ENOMEM, "checkpoint: out of memory");
    int rc = weights_by_name(c, opt, ws, nw, err);
    if (!rc && optim_set_weights(opt, ws, nw))
        rc = optim__err(err, OPTIM_EFORMAT, "checkpoint: %s", optim_errmsg(opt));
    free(ws);
    return rc;
}

int optim_checkpoint_restore(const optim_checkpoint *c, optim_model *m, optim_optimizer *opt,
                             optim_error *err)
{
    if (!c || !m || !opt)
        return optim__err(err, OPTIM_EINVAL, "optim_checkpoint_restore: %s is NULL",
                          !c       ? "checkpoint"
                              : !m ? "model"
                                   : "opt");
    if (!optim_model_built(m))
        return optim__err(err, OPTIM_EINVAL,
                          "optim_checkpoint_restore: model \"%s\" is not built yet",
                          optim_model_name(m));
    optim_var *vars[CK_MAX_VARS], *train[CK_MAX_VARS];
    size_t n = optim_model_variables(m, vars, CK_MAX_VARS),
           nt = optim_model_trainable_variables(m, train, CK_MAX_VARS);
    if (n > CK_MAX_VARS)
        return optim__err(err, OPTIM_ENOTSUP, "checkpoint: more than %d variables", CK_MAX_VARS);
    int build = 0, rc = check_model(c, m, vars, n, err);
    if (!rc) rc = check_optimizer(c, opt, train, nt, &build, err);
    if (rc) return rc;
    if (build && (rc = optim_build(opt, train, nt)))
        return optim__err(err, rc, "checkpoint: %s", optim_errmsg(opt));
    if ((rc = set_optimizer(c, opt, err))) return rc;
    char name[CK_MAX_PATH];
    optim_tensor t;
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "model/%s", optim_var_name(vars[i]));
        optim_st_get(c->st, name, &t);
        optim_var_assign(vars[i], t.data, t.dtype, optim_tensor_numel(&t));
    }
    for (size_t i = 0; i < optim_model_layer_count(m); i++) {
        optim_layer *l = optim_model_layer(m, i);
        snprintf(name, sizeof name, "layer_calls/%s", optim_layer_name(l));
        optim_st_get(c->st, name, &t);
        int64_t calls;
        memcpy(&calls, t.data, sizeof calls);
        optim_layer_set_training_calls(l, (uint64_t)calls);
    }
    return OPTIM_OK;
}
