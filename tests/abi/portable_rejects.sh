#!/usr/bin/env bash
# tests/abi/portable.sh itself: it must refuse AVX code in a baseline
# object, a per-level object that defines a symbol not named *_avx2 /
# *_avx512, and a baseline object that calls a per-level function by name;
# and it must accept a correct pair.
#   tests/abi/portable_rejects.sh PORTABLE_SH CC   (exit 77: not x86-64)
set -u
[ $# -eq 2 ] || { echo "usage: portable_rejects.sh PORTABLE_SH CC" >&2; exit 2; }
script=$1 cc=$2
if [ "$(uname -m)" != x86_64 ]; then echo "skip: $(uname -m) is not x86-64"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
compile() { # NAME FLAGS... < source
    "$cc" -c -O3 -x c - -o "$tmp/$1.o" "${@:2}" || { echo "FAIL: cannot compile $1"; exit 1; }
}
expect() { # WANT(0|1) WHAT ARGS...
    local want=$1 what=$2 out rc
    shift 2
    out=$(bash "$script" "$@" 2>&1)
    rc=$?
    if [ $((rc != 0)) -ne "$want" ]; then
        echo "FAIL: $what: exit $rc"
        printf '%s\n' "$out" | tail -5
        failed=$((failed + 1))
    else
        echo "ok: $what ($(printf '%s\n' "$out" | grep -m1 FAIL || echo accepted))"
    fi
}
loop='void f(float *restrict a, const float *restrict b, int n) { for (int i = 0; i < n; i++) a[i] += b[i] * 2.0f; }'
echo "$loop" | compile plain
echo "$loop" | compile avx -mavx2
echo "$loop" | sed 's/void f(/void f_avx2(/' | compile func_avx2 -mavx2
echo 'void f_avx2(float *, const float *, int); void g(float *a) { f_avx2(a, a, 4); }' | compile caller
echo "$loop const struct { void (*f)(float *restrict, const float *restrict, int); } t_avx2 = {f};" |
    sed 's/^void f(/static void f(/' | compile table_avx2 -mavx2
echo 'extern const struct { void (*f)(float *, const float *, int); } t_avx2; void h(float *a) { t_avx2.f(a, a, 4); }' |
    compile table_user
expect 1 "AVX code in a baseline object" --baseline "$tmp/avx.o"
expect 1 "a per-level object defining 'f'" --baseline "$tmp/plain.o" --variants "$tmp/avx.o"
expect 1 "a baseline object calling f_avx2 by name" --baseline "$tmp/caller.o" --variants "$tmp/func_avx2.o"
expect 0 "a table reached by a baseline object" --baseline "$tmp/table_user.o" --variants "$tmp/table_avx2.o"
echo "$failed failed"
[ "$failed" -eq 0 ]
