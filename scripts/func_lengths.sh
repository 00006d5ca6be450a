#!/usr/bin/env bash
# Lists the C functions longer than a limit (default 80 lines, from the line
# of the function's name to its closing brace) and the macros whose
# definition is longer than another (default 30 lines, from `#define` to its
# last continued line) in the .c, .h and .inc files under the given
# directories (default: src), and exits 1 if there is any.
#   scripts/func_lengths.sh [--max N] [--max-macro N] [--all] [DIR...]
# --all lists every function and macro with its length (longest first), and
# exits 0.
#
# A function or macro may be longer when the comment just above it (between
# the end of the previous definition, declaration or directive and it) says
# why, starting with "long-function:", e.g.
#   /* long-function: one switch over the 40 opcodes reads best whole. */
# A marker without a reason does not count. A long macro is better a
# template include (a .inc file included once per type, as
# src/optimizers/adafactor_kernels.inc).
#
# The scanner is a brace matcher (awk, no compiler needed): comments,
# strings, character constants and preprocessor lines (with their
# continuations) are skipped; a `{` at file level that follows `)` opens a
# function, named by the identifier before the first top-level `(` since the
# previous declaration (FN(x) where that is FN(x)(...), as in template
# includes).
set -euo pipefail
max=80
maxm=30
all=0
dirs=()
while [ $# -gt 0 ]; do
    case $1 in
    --max) max=$2; shift 2 ;;
    --max-macro) maxm=$2; shift 2 ;;
    --all) all=1; shift ;;
    -h | --help) sed -n '2,24p' "$0"; exit 0 ;;
    -*) echo "func_lengths.sh: unknown option '$1' (expected --max N, --max-macro N, --all)" >&2; exit 2 ;;
    *) dirs+=("$1"); shift ;;
    esac
done
[ ${#dirs[@]} -gt 0 ] || dirs=(src)
case $max in '' | *[!0-9]*) echo "func_lengths.sh: --max '$max' is not a number" >&2; exit 2 ;; esac
case $maxm in '' | *[!0-9]*) echo "func_lengths.sh: --max-macro '$maxm' is not a number" >&2; exit 2 ;; esac
for d in "${dirs[@]}"; do
    [ -d "$d" ] || { echo "func_lengths.sh: '$d' is not a directory" >&2; exit 2; }
done

files=$(find "${dirs[@]}" -type f \( -name '*.c' -o -name '*.h' -o -name '*.inc' \) | LC_ALL=C sort)
[ -n "$files" ] || { echo "func_lengths.sh: no C files under ${dirs[*]}" >&2; exit 2; }

# shellcheck disable=SC2086
out=$(awk -v max="$max" -v maxm="$maxm" -v all="$all" '
FNR == 1 { depth = 0; incom = 0; ppcont = 0; ppend = 0; last = ""; name = ""; pdepth = 0; ident = ""
           topend = 0; marker = 0; namel = 0; mname = "" }
function top_end() { last = ""; name = ""; ident = ""; pdepth = 0; topend = FNR; groups = 0; arg1 = "" }
# The end of a preprocessor directive (this line): a #define is measured.
function pp_end() {
    if (mname != "") {
        len = FNR - mstart + 1
        if (all) printf "%d %s:%d: #define %s\n", len, FILENAME, mstart, mname
        else if (len > maxm && !mexempt)
            printf "%s:%d: #define %s: %d lines\n", FILENAME, mstart, mname, len
    }
    mname = ""; ppend = FNR
}
{
    line = $0
    if (ppcont) { ppcont = (line ~ /\\$/); if (!ppcont) pp_end(); next }
    if (!incom && line ~ /^[ \t]*#/) {
        if (match(line, /^[ \t]*#[ \t]*define[ \t]+[A-Za-z_][A-Za-z0-9_]*/)) {
            mname = substr(line, RSTART, RLENGTH); sub(/.*[ \t]/, "", mname)
            mstart = FNR; mexempt = marker > topend && marker > ppend
        }
        ppcont = (line ~ /\\$/); if (!ppcont) pp_end(); next
    }
    n = length(line); i = 1; com = ""; inident = 0
    while (i <= n) {
        c = substr(line, i, 1); c2 = substr(line, i, 2)
        if (incom) {
            if (c2 == "*/") { incom = 0; i += 2; continue }
            com = com c; i++; continue
        }
        if (c2 == "/*") { incom = 1; i += 2; continue }
        if (c2 == "//") { com = com substr(line, i + 2); break }
        if (c == "\"" || c == "\047") {
            q = c; i++
            while (i <= n && substr(line, i, 1) != q) i += (substr(line, i, 1) == "\\") ? 2 : 1
            i++; last = q; ident = ""; continue
        }
        if (c ~ /[A-Za-z0-9_]/) {
            if (!inident) { ident = ""; identl = FNR }
            ident = ident c; inident = 1; idlast = 1; i++; continue
        }
        inident = 0
        if (depth == 0) {
            if (c == "(") {
                if (pdepth == 0 && name == "" && ident != "") { name = ident; namel = identl; groups = 0 }
                else if (pdepth == 0 && groups == 1 && last == ")" && !idlast && arg1 != "")
                    name = name "(" arg1 ")" # FN(name)(...) in a template include
                pdepth++
            } else if (c == ")") {
                if (pdepth == 1 && name != "" && groups == 0) arg1 = ident
                if (--pdepth == 0) groups++
            }
            else if (c == ";") { top_end(); i++; continue }
        }
        if (c == "{") {
            if (depth == 0 && last == ")" && pdepth == 0) {
                fname = name == "" ? "?" : name; fstart = namel ? namel : FNR
                exempt = marker > topend
            }
            depth++
        } else if (c == "}") {
            depth--
            if (depth == 0) {
                if (fname != "") {
                    len = FNR - fstart + 1
                    if (all) printf "%d %s:%d: %s\n", len, FILENAME, fstart, fname
                    else if (len > max && !exempt) printf "%s:%d: %s: %d lines\n", FILENAME, fstart, fname, len
                    fname = ""
                }
                top_end()
            }
        }
        if (c !~ /[ \t]/) { last = c; idlast = 0; if (c !~ /[A-Za-z0-9_]/) ident = "" }
        i++
    }
    if (depth == 0 && com ~ /long-function:[ \t]*[A-Za-z]/) marker = FNR
}
' $files)

if [ "$all" = 1 ]; then
    printf '%s\n' "$out" | sort -k1,1nr -k2
    exit 0
fi
if [ -n "$out" ]; then
    printf '%s\n' "$out"
    echo "func_lengths.sh: $(printf '%s\n' "$out" | wc -l) function(s) over $max lines or macro(s) over $maxm lines without a 'long-function:' comment saying why"
    exit 1
fi
echo "func_lengths.sh: no function over $max lines nor macro over $maxm lines in ${dirs[*]} (that lacks a 'long-function:' comment)"
