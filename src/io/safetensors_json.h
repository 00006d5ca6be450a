/* The safetensors reader with the usual header's one-pass reader off
 * (internal; safetensors.c): every header through cJSON. fuzz_safetensors
 * checks that both readers give the same result for any input. */
#ifndef OPTIM_IO_SAFETENSORS_JSON_H
#define OPTIM_IO_SAFETENSORS_JSON_H

#include "optim/safetensors.h"

int optim__st_parse_json(const void *buf, size_t len, optim_st_file **out, optim_error *err);

#endif
