/* optim check CONFIG: loads an optimizer config (a JSON file) exactly as
 * replay and train do, and prints its normalised Keras serialization (every
 * key with its default filled in) on one line, or one line on stderr saying
 * what is wrong; and on stderr a "note:" line for each part of a config
 * that loads but may not train as its writer's Keras did. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "commands.h"
#include "optim/optim.h"

/* Each Muon config within node (wrappers included) without rms_rate: Keras
 * 3.12 and older wrote neither rms_rate nor adam_weight_decay and scaled
 * the Muon step by sqrt(max(1, rows / cols)); today's defaults (Keras 3.13+,
 * and optim) scale it by rms_rate * sqrt(max(rows, cols)) and decay the
 * AdamW variables by adam_weight_decay. */
static void muon_notes(const cJSON *node, const char *file)
{
    if (!cJSON_IsObject(node) && !cJSON_IsArray(node)) return;
    const cJSON *cn = cJSON_GetObjectItemCaseSensitive(node, "class_name");
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(node, "config");
    if (cJSON_IsString(cn) && strcasecmp(cn->valuestring, "Muon") == 0 && cJSON_IsObject(cfg) &&
        !cJSON_HasObjectItem(cfg, "rms_rate"))
        fprintf(stderr,
                "optim check: note: CONFIG %s: a Muon config without 'rms_rate', as Keras 3.12 "
                "and older wrote it: those scaled the Muon step by sqrt(max(1, rows / cols)) and "
                "wrote no adam_weight_decay; it loads with today's defaults (rms_rate 0.2: "
                "0.2 * sqrt(max(rows, cols)); adam_weight_decay 0.004), which train differently. "
                "Set both keys to say which you mean.\n",
                file);
    const cJSON *child;
    cJSON_ArrayForEach(child, node) muon_notes(child, file);
}

int optim_cmd_check(int argc, char **argv)
{
    if (argc == 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        if (printf(
                "usage: optim check CONFIG\n\nLoads an optimizer config (a JSON file) and prints it with "
                "every default filled in; notes on stderr where it may not train as the Keras\n"
                "that wrote it did (a Muon config of Keras 3.12 or older).\n") < 0)
            return 1;
        return 0;
    }
    if (argc != 1 || argv[0][0] == '-') {
        fprintf(stderr, "usage: optim check CONFIG (a JSON file; see optim check --help)\n");
        return 2;
    }
    optim_error err;
    char *text = optim_tool_read_text(argv[0], &err);
    if (!text) {
        fprintf(stderr, "optim check: CONFIG %s\n", err.msg);
        return 1;
    }
    optim_optimizer *opt;
    int rc = optim_from_json(&opt, text, &err);
    cJSON *root = rc ? NULL : cJSON_Parse(text);
    free(text);
    if (rc) {
        fprintf(stderr, "optim check: CONFIG %s: %s\n", argv[0], err.msg);
        return 1;
    }
    muon_notes(root, argv[0]);
    cJSON_Delete(root);
    char *out = optim_serialize(opt);
    if (!out) {
        fprintf(stderr, "optim check: %s\n", optim_errmsg(opt));
        optim_destroy(opt);
        return 1;
    }
    printf("%s\n", out);
    optim_free(out);
    optim_destroy(opt);
    return optim_tool_finish_stdout("check", 0);
}
