/* TF Addons' name patterns (is_variable_matched_by_regexes: re.search on
 * var.name) against optim's variable names. TF's names carry the output
 * suffix ":0" ("dense/bias:0"), optim's do not: a pattern is searched in
 * NAME:0, or in NAME when it already ends in ":<digits>", so "bias$" does
 * not match "dense/bias" and "bias:0$" does, as in TF. Used by LAMB and the
 * decoupled weight decay of AdamW and SGDW. */
#ifndef OPTIM_OPTIMIZERS_TF_NAMES_H
#define OPTIM_OPTIMIZERS_TF_NAMES_H

#include <stdlib.h>
#include <string.h>

#include "optim/optimizer_class.h"

/* Whether any of p (NULL: none) is found in name as TF Addons finds it. */
static inline int optim__tf_name_matches(const optim_name_patterns *p, const char *name)
{
    const char *const *src = p ? optim_name_patterns_sources(p) : NULL;
    if (!src || !src[0]) return 0;
    size_t len = strlen(name), k = len;
    while (k > 0 && name[k - 1] >= '0' && name[k - 1] <= '9') k--;
    if (k < len && k > 0 && name[k - 1] == ':') return optim_name_patterns_match(p, name);
    char buf[512], *full = len + 3 > sizeof buf ? malloc(len + 3) : buf;
    if (!full) return optim_name_patterns_match(p, name);
    memcpy(full, name, len);
    memcpy(full + len, ":0", 3);
    int hit = optim_name_patterns_match(p, full);
    if (full != buf) free(full);
    return hit;
}

#endif
