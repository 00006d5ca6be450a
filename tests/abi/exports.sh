#!/usr/bin/env bash
# The ABI is the headers: liboptim.so exports exactly the functions and
# classes that include/optim/*.h declare with OPTIM_API, and nothing
# internal (no optim__ symbol, nothing without the optim_ prefix).
set -u
lib=$1
include=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
check() { # name, condition-exit-status, message
    if [ "$2" -eq 0 ]; then echo "ok: $1"; else echo "FAIL: $1: $3"; failed=$((failed + 1)); fi
}

# Sanitizer builds add their own symbols (__odr_asan.*, __asan_*): not ours.
# Nor are the locks of OpenMP critical sections that clang's reductions
# export (.gomp_critical_user_NAME.var: one per name in the whole program, by
# the OpenMP standard; no C name can start with '.').
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDRBVC]$/ {print $3}' | grep -v '^__' |
    grep -v '^\.gomp_critical_user_' | sort -u >"$tmp/exported"
grep -hoE 'OPTIM_API [^;(]*\boptim_[a-z0-9_]+\(' "$include"/optim/*.h |
    grep -oE 'optim_[a-z0-9_]+\($' | tr -d '(' >"$tmp/declared"
# Classes declared through the registry X-macros.
grep -hoE 'X\(optim_[a-z0-9_]+_class\)' "$include"/optim/*.h | sed 's/X(\(.*\))/\1/' >>"$tmp/declared"
sort -u -o "$tmp/declared" "$tmp/declared"

internal=$(grep -E '^optim__' "$tmp/exported")
check "no optim__ symbol exported" "$([ -z "$internal" ]; echo $?)" "$(echo $internal | head -c 400)"
foreign=$(grep -vE '^optim_' "$tmp/exported" | grep -vE '^(_init|_fini|_edata|_end|__bss_start)$')
check "every exported symbol has the optim_ prefix" "$([ -z "$foreign" ]; echo $?)" "$(echo $foreign | head -c 400)"
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
check "every OPTIM_API declaration is exported" "$([ -z "$missing" ]; echo $?)" "$(echo $missing | head -c 400)"
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
check "nothing is exported that no header declares" "$([ -z "$extra" ]; echo $?)" "$(echo $extra | head -c 400)"
n=$(wc -l <"$tmp/declared")
check "the headers declare a public API ($n names)" "$([ "$n" -gt 100 ]; echo $?)" "only $n"

echo "$((5 - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
