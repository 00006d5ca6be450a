#!/usr/bin/env bash
# scripts/func_lengths.sh against C files whose answer is known: a function
# of 81 lines is listed, one of 80 is not, a long one with a
# "long-function:" reason is not (without a reason it is), braces and
# parentheses inside comments, strings, character constants and macros do
# not confuse it; bad options are refused. (The argument, the command's
# path, is not used.)
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
script=$here/scripts/func_lengths.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
[ "$(echo "$all" | wc -l)" -eq 5 ] || fail "--all: expected 5 functions: $all"
echo "$all" | grep -q "^1 .*: one_line$" || fail "--all: one_line is 1 line: $all"

bash "$script" --max 200 "$tmp" >/dev/null || fail "--max 200 still lists something"
for bad in "--max x" "--bogus" "$tmp/none"; do
    # shellcheck disable=SC2086
    if bash "$script" $bad >/dev/null 2>&1; then fail "'$bad' accepted"; fi
done
echo "ok: func_lengths.sh"
