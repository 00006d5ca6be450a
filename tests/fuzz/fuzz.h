/* Shared by the fuzz targets (tests/fuzz/README.md): the libFuzzer entry
 * point and a check that stops the run with a message when a promise breaks. */
#ifndef OPTIM_FUZZ_H
#define OPTIM_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise: print what and where, then abort so that libFuzzer (or
 * the standalone runner) saves and reports the input. */
#define FUZZ_CHECK(cond, ...)                                                        \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            abort();                                                                 \
        }                                                                            \
    } while (0)

/* A scratch file for targets whose entry point takes a path: one per
 * process, under $TMPDIR (default /tmp), removed at exit. */
const char *fuzz_scratch_path(const char *suffix);

#endif
