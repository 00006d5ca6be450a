#!/usr/bin/env bash
# scripts/func_lengths.sh against C files whose answer is known: a function
# of 81 lines is listed, one of 80 is not, a long one with a
# "long-function:" reason is not (without a reason it is), braces and
# parentheses inside comments, strings, character constants and macros do
# not confuse it; a macro of 31 lines is listed, one of 30 is not, with the
# same "long-function:" reasons; .inc files are read; bad options are
# refused. (The argument, the command's path, is not used.)
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
script=$here/scripts/func_lengths.sh
tmp=$(mktemp -d)
mac=$(mktemp -d)
trap 'rm -rf "$tmp" "$mac"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# body N: N lines of statements.
body() { for ((i = 0; i < $1; i++)); do echo "    x += $i;"; done; }
{
    echo '/* a comment with { and ( that is not code */'
    echo '#define MACRO(a) do { if (a) { } } while (0)'
    echo '#define MULTI(a) \'
    echo '    { (a); }'
    echo 'static const char *s = "{ not a function ( }";'
    echo "static const char c = '{';"
    echo 'static const int table[] = {1, 2, 3};'
    echo 'struct point { int x, y; };'
    # long_81: name line + "{" + 78 statements + "}" = 81 lines
    echo 'static int long_81(int x)'
    echo '{'
    body 78
    echo '}'
    echo 'static int ok_80(int x)'
    echo '{'
    body 77
    echo '}'
    echo '/* long-function: a table of cases that reads best whole. */'
    echo 'static int excused(int x)'
    echo '{'
    body 100
    echo '}'
    echo '/* long-function: */'
    echo 'static int no_reason(int x)'
    echo '{'
    echo '    const char *t = "}"; /* } */ // }'
    body 100
    echo '}'
    echo 'int one_line(void) { return 0; }'
} >"$tmp/sample.c"

out=$(bash "$script" "$tmp" 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1: $out"
echo "$out" | grep -q "sample.c:9: long_81: 81 lines" || fail "long_81 not listed as 81 lines: $out"
echo "$out" | grep -q "no_reason: 104 lines" || fail "no_reason (marker without a reason) not listed: $out"
echo "$out" | grep -qE "ok_80|excused|one_line|MACRO|point" && fail "listed what it should not: $out"
[ "$(echo "$out" | grep -c ' lines$')" -eq 2 ] || fail "expected 2 functions listed: $out"

all=$(bash "$script" --all "$tmp") || fail "--all failed"
[ "$(echo "$all" | grep -vc '#define')" -eq 5 ] || fail "--all: expected 5 functions: $all"
echo "$all" | grep -q "^2 .*sample.c:3: #define MULTI$" || fail "--all: MULTI is a macro of 2 lines: $all"
echo "$all" | grep -q "^1 .*: one_line$" || fail "--all: one_line is 1 line: $all"

bash "$script" --max 200 "$tmp" >/dev/null || fail "--max 200 still lists something"
for bad in "--max x" "--bogus" "$tmp/none"; do
    # shellcheck disable=SC2086
    if bash "$script" $bad >/dev/null 2>&1; then fail "'$bad' accepted"; fi
done
# macro NAME N: a #define of N lines (the last one without a backslash).
macro() {
    echo "#define $1(x) \\"
    for ((i = 0; i < $2 - 2; i++)); do echo "    x += $i; \\"; done
    echo "    x += 0;"
}
{
    macro LONG_31 31
    macro OK_30 30
    echo '/* long-function: one rule per case, the cases read best whole. */'
    macro EXCUSED 40
    echo '/* long-function: */'
    macro NO_REASON 40
    echo '/* long-function: a reason for the next macro only. */'
    macro SHORT 3
    macro AFTER_SHORT 31
    echo '#define ONE_LINE 1'
} >"$mac/macros.h"
# A template include: its functions and macros are measured too.
{
    echo 'static int FN(long_inc)(T x)'
    echo '{'
    body 79
    echo '}'
    macro INC_31 31
} >"$mac/kernels.inc"
# listed PATTERN WHAT: a line of $out matches PATTERN.
listed() { echo "$out" | grep -q "$1" || fail "$2 not listed: $out"; }
out=$(bash "$script" "$mac" 2>&1) && fail "macros: exit 0, expected 1: $out"
listed "macros.h:1: #define LONG_31: 31 lines" "LONG_31 (31 lines)"
listed "#define NO_REASON: 40 lines" "NO_REASON (marker without a reason)"
listed "#define AFTER_SHORT: 31 lines" "AFTER_SHORT (SHORT's marker is not its)"
listed "kernels.inc:1: FN(long_inc): 82 lines" "the function of kernels.inc"
listed "kernels.inc:83: #define INC_31: 31 lines" "the macro of kernels.inc"
echo "$out" | grep -qE "OK_30|EXCUSED|ONE_LINE|#define SHORT" && fail "macros: listed what it should not: $out"
[ "$(echo "$out" | grep -c ' lines$')" -eq 5 ] || fail "macros: expected 5 listed: $out"
echo "$out" | tail -n 1 | grep -q "macro(s) over 30 lines" || fail "macros: the summary does not name the macro limit: $out"
all=$(bash "$script" --all "$mac") || fail "macros: --all failed"
echo "$all" | grep -q "^30 .*: #define OK_30$" || fail "--all: OK_30 is 30 lines: $all"
echo "$all" | grep -q "^1 .*: #define ONE_LINE$" || fail "--all: ONE_LINE is 1 line: $all"
out=$(bash "$script" --max 100 --max-macro 40 "$mac") || fail "--max-macro 40 still lists something: $out"
out=$(bash "$script" --max 100 --max-macro 39 "$mac")
[ "$(echo "$out" | grep -c ' lines$')" -eq 1 ] || fail "--max-macro 39: expected EXCUSED unlisted, NO_REASON only: $out"
if bash "$script" --max-macro x "$mac" >/dev/null 2>&1; then fail "'--max-macro x' accepted"; fi
echo "ok: func_lengths.sh"
