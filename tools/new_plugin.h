/* `optim new-plugin` (internal to tools/): its templates and its NAME rule. */
#ifndef OPTIM_TOOLS_NEW_PLUGIN_H
#define OPTIM_TOOLS_NEW_PLUGIN_H

#include <stddef.h>

/* One file of the new project: its name and its lines (each with its '\n',
 * NULL-terminated), "TemplateName" standing for NAME in both. */
typedef struct optim_np_template {
    const char *file;
    const char *const *lines;
} optim_np_template;

/* Every file, ending with {NULL, NULL}: tools/templates, embedded at build
 * time by tools/templates/embed.cmake. */
extern const optim_np_template optim_np_templates[];

/* The placeholder the templates hold for NAME. */
#define OPTIM_NP_PLACEHOLDER "TemplateName"

/* 0 if name can name a plugin's class (a C identifier that is no keyword, a
 * Keras class name, a CMake target, not a registered class's name); else 1
 * with why filled ("'x-y' is not ...": the value and what was expected). */
int optim_np_name_problem(const char *name, char *why, size_t n);

#endif
