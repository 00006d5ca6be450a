/* The run's context: reporting a check, and creating optimizers of the
 * checked class from the run's config. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "conformance/harness.h"

void optim__cf_report(cf_ctx *c, const char *check, int passed, const char *expected,
                      const char *seen_fmt, ...)
{
    char seen[CF_TEXT];
    va_list ap;
    va_start(ap, seen_fmt);
    vsnprintf(seen, sizeof seen, seen_fmt, ap);
    va_end(ap);
    if (passed > 0) c->passed++;
    if (passed == 0) c->failed++;
    if (c->report) {
        optim_conformance_result r = {check, passed, expected, seen};
        c->report(c->user, &r);
    }
}

/* base's keys with extra's on top, as compact JSON (malloc'd), or NULL. */
static char *merge(const char *base, const char *extra)
{
    cJSON *b = cJSON_Parse(base), *e = extra ? cJSON_Parse(extra) : NULL;
    char *out = NULL;
    if (b && (!extra || cJSON_IsObject(e))) {
        for (cJSON *it = e ? e->child : NULL; it; it = it->next) {
            cJSON *copy = cJSON_Duplicate(it, 1);
            if (!copy) goto done;
            if (cJSON_GetObjectItemCaseSensitive(b, it->string))
                cJSON_ReplaceItemInObjectCaseSensitive(b, it->string, copy);
            else cJSON_AddItemToObject(b, it->string, copy);
        }
        out = cJSON_PrintUnformatted(b);
    }
done:
    cJSON_Delete(b);
    cJSON_Delete(e);
    return out;
}

int optim__cf_create(const cf_ctx *c, const char *class_name, const char *extra_json,
                     optim_optimizer **out, char *why, size_t n)
{
    *out = NULL;
    char *cfg = merge(c->config, extra_json);
    if (!cfg) {
        snprintf(why, n, "cannot merge config keys %s", extra_json ? extra_json : "");
        return OPTIM_ENOMEM;
    }
    optim_error err = {0};
    int rc = optim_from_config(out, class_name ? class_name : c->cls->name, cfg, &err);
    if (rc) snprintf(why, n, "from_config(%s) failed: %s", cfg, err.msg);
    /* One thread unless a check asks for more (threads.independent): a
     * busy machine makes OpenMP's waiting threads the slowest part. */
    else optim_set_num_threads(*out, 1);
    cJSON_free(cfg);
    return rc;
}
