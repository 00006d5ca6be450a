/* optim new-plugin: which NAMEs can name a plugin's class. NAME is the C
 * prefix of the class file's identifiers, the Keras class name (a Python
 * identifier), the CMake target and the file names (libNAME.so, NAME.c). */
#include <stdio.h>
#include <string.h>

#include "new_plugin.h"
#include "optim/optim.h"

/* Longer is legal but no optimizer is called so: file and target names. */
#define NP_NAME_MAX 64

/* C11's keywords (those starting with '_' fail the letter rule), Python's,
 * and the target names CMake reserves. */
static const char *const C_WORDS[] = {
    "auto",    "break",  "case",     "char",   "const",    "continue", "default",
    "do",      "double", "else",     "enum",   "extern",   "float",    "for",
    "goto",    "if",     "inline",   "int",    "long",     "register", "restrict",
    "return",  "short",  "signed",   "sizeof", "static",   "struct",   "switch",
    "typedef", "union",  "unsigned", "void",   "volatile", "while",    NULL};
static const char *const PYTHON_WORDS[] = {
    "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
    "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
    "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
    "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield",    NULL};
static const char *const CMAKE_WORDS[] = {
    "all",     "clean",          "depend",        "edit_cache", "help",      "install",
    "package", "package_source", "rebuild_cache", "test",       "ALL_BUILD", "INSTALL",
    "PACKAGE", "RUN_TESTS",      "ZERO_CHECK",    NULL};

static int listed(const char *const *list, const char *name)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(list[i], name) == 0) return 1;
    return 0;
}

static int is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

int optim_np_name_problem(const char *name, char *why, size_t n)
{
    const size_t len = strlen(name);
    int ok = len > 0 && is_letter(name[0]);
    for (size_t i = 1; ok && i < len; i++)
        ok = is_letter(name[i]) || (name[i] >= '0' && name[i] <= '9') || name[i] == '_';
    if (!ok) {
        snprintf(why, n,
                 "'%s' is not a C identifier and Keras class name: expected a letter, then "
                 "letters, digits or '_' (as Yogi or Adam_v2)",
                 name);
        return 1;
    }
    if (len > NP_NAME_MAX) {
        snprintf(why, n, "'%.20s...' has %zu characters, expected at most %d", name, len,
                 NP_NAME_MAX);
        return 1;
    }
    const char *word = listed(C_WORDS, name) ? "a C keyword"
        : listed(PYTHON_WORDS, name)         ? "a Python keyword (Keras class names are "
                                               "Python identifiers)"
        : listed(CMAKE_WORDS, name)          ? "a target name CMake reserves"
                                             : NULL;
    if (word) {
        snprintf(why, n, "'%s' is %s, expected another name", name, word);
        return 1;
    }
    if (strcmp(name, "optim") == 0 || strcmp(name, "OPTIM") == 0 ||
        strncmp(name, "optim_", 6) == 0 || strncmp(name, "OPTIM_", 6) == 0) {
        snprintf(why, n, "'%s' would make names in optim's own C namespace (optim_*)", name);
        return 1;
    }
    const optim_class *taken = optim_find_class(name);
    if (taken) {
        snprintf(why, n, "'%s' is taken: optim has the class '%s' (names ignore case)", name,
                 taken->name);
        return 1;
    }
    return 0;
}
