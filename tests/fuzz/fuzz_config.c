/* Fuzz target: the JSON config loader (optim_from_json).
 *
 * Any input must either be refused with a message or give an optimizer whose
 * serialization loads back and serializes again to the same bytes
 * (serialize -> reload -> serialize is a fixed point). One exception follows
 * Keras: legacy Nadam reads `decay` from `schedule_decay` (default 0.004) and
 * drops a given `decay`, so tf.keras itself does not reload its own Nadam
 * config unchanged; there the fixed point must hold from the second round. */
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "optim/optim.h"

/* Loads json (which must load) and returns its serialization. */
static char *reload(const char *json, int *legacy_nadam)
{
    optim_optimizer *opt = NULL;
    optim_error err;
    int rc = optim_from_json(&opt, json, &err);
    FUZZ_CHECK(rc == OPTIM_OK, "own serialization refused: %s\n  %s", err.msg, json);
    char *out = optim_serialize(opt);
    FUZZ_CHECK(out != NULL, "serialize failed: %s", optim_errmsg(opt));
    *legacy_nadam = strcasecmp(optim_class_of(opt)->name, "Nadam") == 0 &&
        optim_generation_of(opt) == OPTIM_LEGACY;
    optim_destroy(opt);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) return 0; /* configs are small; keep the run fast */
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    optim_optimizer *opt = NULL;
    optim_error err;
    int rc = optim_from_json(&opt, text, &err);
    free(text);
    if (rc != OPTIM_OK) {
        FUZZ_CHECK(opt == NULL, "failed load left an optimizer");
        FUZZ_CHECK(err.msg[0] != '\0', "failed load (%d) without a message", rc);
        return 0;
    }
    char *first = optim_serialize(opt);
    FUZZ_CHECK(first != NULL, "serialize failed: %s", optim_errmsg(opt));
    optim_destroy(opt);
    int nadam = 0;
    char *second = reload(first, &nadam);
    if (nadam) { /* the Keras exception: compare the next round instead */
        optim_free(first);
        first = second;
        second = reload(first, &nadam);
    }
    FUZZ_CHECK(strcmp(first, second) == 0, "serialization changed on reload:\n  %s\n  %s", first,
               second);
    optim_free(first);
    optim_free(second);
    return 0;
}
