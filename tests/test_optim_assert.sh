#!/usr/bin/env bash
# OPTIM_ASSERT (src/core/internal.h): a false invariant prints FILE:LINE, the
# function and the condition and aborts where NDEBUG is not defined or
# OPTIM_DEBUG_ASSERTS is; with NDEBUG alone it is compiled out (and does not
# evaluate its condition). Then the built library: its messages are in
# liboptim.so exactly when this build checks invariants (Debug, or a
# sanitizer build, or OPTIM_DEBUG_ASSERTS).
set -u
optim=$1
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cc="${CC:-cc}"
cat >"$tmp/a.c" <<'C'
#include "core/internal.h"
static int calls;
static int one(void) { return ++calls, 1; }
int main(void)
{
    int x = 2;
    OPTIM_ASSERT(one() == 1);
    OPTIM_ASSERT(x == 1);
    return calls == 0 ? 0 : 3; /* 0: compiled out; 3: checked, and x == 1 passed */
}
C
build() { "$cc" -std=c11 -Wall -Wextra -Werror -I"$root/src" -I"$root/include" "$@" "$tmp/a.c" -o "$tmp/a" ||
    fail "compile $*"; }
fires() { # the flags: must abort naming a.c:8 and the condition
    build "$@"
    "$tmp/a" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 134 ] || fail "$*: exit $rc, expected 134 (SIGABRT): $(cat "$tmp/err")"
    grep -q 'a\.c:8: main: internal invariant failed: x == 1$' "$tmp/err" || fail "$*: stderr $(cat "$tmp/err")"
}
fires -UNDEBUG
fires -DNDEBUG -DOPTIM_DEBUG_ASSERTS
build -DNDEBUG
"$tmp/a" 2>"$tmp/err" || fail "-DNDEBUG: exit $? (compiled out, expected 0): $(cat "$tmp/err")"
[ ! -s "$tmp/err" ] || fail "-DNDEBUG printed $(cat "$tmp/err")"

bdir="$(dirname "$optim")"
lib="$bdir/liboptim.so"
cache="$bdir/CMakeCache.txt"
if [ -f "$lib" ] && [ -f "$cache" ] && command -v strings >/dev/null; then
    type="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")"
    want=0
    case "$type" in Release | RelWithDebInfo | MinSizeRel) ;; *) want=1 ;; esac
    grep -Eq '^OPTIM_(SANITIZE|TSAN|DEBUG_ASSERTS):BOOL=ON$' "$cache" && want=1
    has=0
    strings "$lib" | grep -q 'internal invariant failed' && has=1
    [ $has -eq $want ] || fail "liboptim.so ($type build): invariant checks present=$has, expected $want"
fi
echo "1 passed, 0 failed"
