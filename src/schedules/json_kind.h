/* The kind of a config value in the schedules' messages ("a number",
 * "a list", ...), for the classes that read keys through set_config. */
#ifndef OPTIM_SCHEDULES_JSON_KIND_H
#define OPTIM_SCHEDULES_JSON_KIND_H

#include <cjson/cJSON.h>

static inline const char *schedule_json_kind(const cJSON *v)
{
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "a list";
    return "an object";
}

#endif
