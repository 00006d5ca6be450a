/* Fuzz target: the IDX reader (optim_idx_read), plain and gzip'd.
 *
 * Any input must either be refused with a message, or give an array whose
 * element count matches its shape and whose elements all convert. */
#include <string.h>

#include "fuzz.h"
#include "optim/optim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_scratch_path("input.idx");
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f != NULL, "cannot create %s", path);
    FUZZ_CHECK(fwrite(data, 1, size, f) == size && fclose(f) == 0, "cannot write %s", path);
    optim_idx *x = NULL;
    optim_error err;
    int rc = optim_idx_read(path, &x, &err);
    if (rc != OPTIM_OK) {
        FUZZ_CHECK(x == NULL, "failed read left an array");
        FUZZ_CHECK(err.msg[0] != '\0', "failed read (%d) without a message", rc);
        return 0;
    }
    int32_t rank = optim_idx_rank(x);
    FUZZ_CHECK(rank >= 1 && rank <= OPTIM_MAX_RANK, "rank %d", (int)rank);
    int64_t numel = 1;
    for (int32_t i = 0; i < rank; i++) numel *= optim_idx_shape(x)[i];
    FUZZ_CHECK(numel == optim_idx_numel(x), "numel %lld, shape says %lld",
               (long long)optim_idx_numel(x), (long long)numel);
    FUZZ_CHECK(optim_idx_type_name(optim_idx_type_of(x)) != NULL, "unknown type");
    double *out = malloc((size_t)(numel ? numel : 1) * sizeof *out);
    FUZZ_CHECK(optim_idx_convert(x, OPTIM_F64, 1.0, out, &err) == OPTIM_OK, "%s", err.msg);
    for (int64_t i = 0; i < numel; i++) {
        double v = optim_idx_get(x, i);
        FUZZ_CHECK((v != v && out[i] != out[i]) || v == out[i], "element %lld", (long long)i);
    }
    FUZZ_CHECK(optim_idx_get(x, numel) != optim_idx_get(x, numel), "element past the end");
    free(out);
    optim_idx_free(x);
    return 0;
}
