/* Fuzz target: the safetensors reader (optim_st_parse).
 *
 * Any input must either be refused with a message, or give tensors that the
 * writer accepts as they are; written to a file and read back, they must
 * come back with the same names, dtypes, shapes and bytes. The reader with
 * its one-pass header reader off (every header through cJSON) must give the
 * same result: the same status and message, or the same tensors. */
#include <string.h>

#include "fuzz.h"
#include "io/safetensors_json.h"
#include "optim/optim.h"

static void check_same(const optim_st_file *a, const optim_st_file *b)
{
    size_t n = optim_st_count(a);
    FUZZ_CHECK(optim_st_count(b) == n, "count %zu, reread %zu", n, optim_st_count(b));
    for (size_t i = 0; i < n; i++) {
        const char *name = optim_st_name(a, i);
        FUZZ_CHECK(strcmp(name, optim_st_name(b, i)) == 0, "name %zu differs", i);
        optim_tensor x, y;
        FUZZ_CHECK(optim_st_get(a, name, &x) == OPTIM_OK, "get '%s'", name);
        FUZZ_CHECK(optim_st_get(b, name, &y) == OPTIM_OK, "reread get '%s'", name);
        FUZZ_CHECK(x.dtype == y.dtype && x.rank == y.rank, "'%s' dtype or rank differs", name);
        FUZZ_CHECK(memcmp(x.shape, y.shape, sizeof x.shape[0] * (size_t)x.rank) == 0,
                   "'%s' shape differs", name);
        size_t bytes = (size_t)optim_tensor_numel(&x) * optim_dtype_size(x.dtype);
        FUZZ_CHECK(bytes == 0 || memcmp(x.data, y.data, bytes) == 0, "'%s' data differs", name);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    optim_st_file *f = NULL, *j = NULL;
    optim_error err, jerr;
    int rc = optim_st_parse(data, size, &f, &err),
        jrc = optim__st_parse_json(data, size, &j, &jerr);
    FUZZ_CHECK(rc == jrc, "status %d, through cJSON alone %d", rc, jrc);
    FUZZ_CHECK(rc == OPTIM_OK || strcmp(err.msg, jerr.msg) == 0,
               "message '%s', through cJSON alone '%s'", err.msg, jerr.msg);
    if (j) check_same(f, j);
    optim_st_free(j);
    if (rc != OPTIM_OK) {
        FUZZ_CHECK(f == NULL, "failed parse left a file");
        FUZZ_CHECK(err.msg[0] != '\0', "failed parse (%d) without a message", rc);
        return 0;
    }
    optim_st_writer *w;
    FUZZ_CHECK(optim_st_writer_create(&w, &err) == OPTIM_OK, "%s", err.msg);
    for (size_t i = 0; i < optim_st_count(f); i++) {
        const char *name = optim_st_name(f, i);
        optim_tensor t;
        FUZZ_CHECK(optim_st_get(f, name, &t) == OPTIM_OK, "get '%s'", name);
        rc = optim_st_writer_add(w, name, &t, &err);
        FUZZ_CHECK(rc == OPTIM_OK, "the writer refuses what the reader accepted: %s", err.msg);
    }
    const char *path = fuzz_scratch_path("reread.safetensors");
    FUZZ_CHECK(optim_st_writer_save(w, path, &err) == OPTIM_OK, "%s", err.msg);
    optim_st_writer_destroy(w);
    optim_st_file *back = NULL;
    FUZZ_CHECK(optim_st_read(path, &back, &err) == OPTIM_OK, "own output refused: %s", err.msg);
    check_same(f, back);
    optim_st_free(back);
    optim_st_free(f);
    return 0;
}
