#!/usr/bin/env bash
# scripts/check_format.sh (the formatting gate of .ci/run) can fail: in a
# scratch repository with the project's .clang-format it names a misformatted
# .c and .inc file, exits 1, and passes once they are formatted.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
check="$here/../scripts/check_format.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cf=clang-format-14
command -v $cf >/dev/null || cf=clang-format
if ! $cf --version 2>/dev/null | grep -q 'version 14\.'; then
    echo "skipped: no clang-format 14"
    exit 0
fi
cp "$here/../.clang-format" "$tmp/"
printf 'int f(int x) { return x; }\n' >"$tmp/good.c"
printf 'int  g( int x ){return x;}\n' >"$tmp/bad.c"
printf '#define T float\nstatic T h(T x) {  return x; }\n' >"$tmp/bad.inc"
git -C "$tmp" init -q && git -C "$tmp" add . || fail "git init"
bash "$check" "$tmp" >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "exit $rc on misformatted files, expected 1: $(cat "$tmp/out")"
grep -q '^  bad\.c$' "$tmp/out" || fail "bad.c not named: $(cat "$tmp/out")"
grep -q '^  bad\.inc$' "$tmp/out" || fail "bad.inc not named: $(cat "$tmp/out")"
! grep -q 'good\.c' "$tmp/out" || fail "good.c named: $(cat "$tmp/out")"
(cd "$tmp" && $cf -i bad.c bad.inc) || fail "clang-format -i"
bash "$check" "$tmp" >"$tmp/out" 2>&1 || fail "exit $? once formatted: $(cat "$tmp/out")"
echo "1 passed, 0 failed"
