#!/usr/bin/env bash
# A build with OPTIM_NATIVE off (the default) runs on any x86-64 machine,
# and its AVX code is reachable only through the run-time dispatch
# (optim/isa.h):
#  - the command and every baseline object of the library hold no VEX or
#    EVEX encoded instruction (AVX, AVX2, FMA, AVX-512: every such mnemonic
#    starts with 'v'), which -march=native would bring;
#  - each per-level object (the AVX2 and AVX-512 builds of the kernel files)
#    defines only symbols named *_avx2 / *_avx512, and no baseline object
#    calls one of its functions by name: baseline code reaches them only
#    through a table (data) that optim_isa_pick or OPTIM__ISA_TABLE chose
#    for the level in use.
#   tests/abi/portable.sh --baseline FILE... [--variants OBJECT...]
#   (exit 77: skipped, not x86-64 or no objdump)
set -u
if [ "$(uname -m)" != x86_64 ]; then echo "skip: $(uname -m) is not x86-64"; exit 77; fi
if ! command -v objdump >/dev/null; then echo "skip: objdump (binutils) is missing"; exit 77; fi
usage() { echo "usage: portable.sh --baseline FILE... [--variants OBJECT...]" >&2; exit 2; }
[ "${1:-}" = --baseline ] || usage
shift
baseline=() variants=()
while [ $# -gt 0 ] && [ "$1" != --variants ]; do baseline+=("$1"); shift; done
[ $# -gt 0 ] && { shift; variants=("$@"); }
[ ${#baseline[@]} -gt 0 ] || usage
failed=0 n=0

# No VEX/EVEX instruction in f; "  1130:<TAB>vmovups (%rsi),%xmm1"; verr/verw
# are baseline (segment checks).
check_baseline() {
    local f=$1 out vex count
    if ! out=$(objdump -d --no-show-raw-insn "$f" 2>&1); then
        echo "FAIL: $f: objdump failed: $(echo "$out" | head -c 300)"
        return 1
    fi
    vex=$(printf '%s\n' "$out" | awk -F'\t' '$2 ~ /^v[a-z0-9]+/ && $2 !~ /^ver[rw]/')
    count=$(printf '%s' "$vex" | grep -c .)
    if [ "$count" -ne 0 ]; then
        echo "FAIL: $(basename "$f"): $count AVX/FMA/AVX-512 instructions outside the dispatch (built with -march=native?), e.g."
        printf '%s\n' "$vex" | head -3
        return 1
    fi
}

# Every global symbol f defines is named *_avx2 / *_avx512.
check_variant() {
    local f=$1 bad
    bad=$(nm -g --defined-only "$f" | awk '$3 !~ /_avx(2|512)$/')
    if [ -n "$bad" ]; then
        echo "FAIL: $(basename "$f"): per-level object defines symbols not named *_avx2/*_avx512:"
        printf '%s\n' "$bad" | head -5
        return 1
    fi
}

# No baseline object calls a per-level function by name: what they use of
# the per-level objects is tables (data).
check_no_direct_calls() {
    local funcs used
    funcs=$(nm -g --defined-only "${variants[@]}" | awk '$2 == "T" {print $3}' | sort -u)
    used=$(nm -u "${baseline[@]}" 2>/dev/null | awk '{print $NF}' | sort -u)
    bad=$(comm -12 <(printf '%s\n' "$funcs") <(printf '%s\n' "$used"))
    if [ -n "$bad" ]; then
        echo "FAIL: baseline code calls per-level functions directly: $(echo $bad | head -c 300)"
        return 1
    fi
    echo "variants: no baseline object calls a per-level function by name"
}

for f in "${baseline[@]}"; do
    n=$((n + 1))
    check_baseline "$f" || failed=$((failed + 1))
done
echo "baseline: ${#baseline[@]} files checked, no AVX, FMA or AVX-512 instruction outside the failures above"
for f in "${variants[@]}"; do
    n=$((n + 1))
    check_variant "$f" || failed=$((failed + 1))
done
if [ ${#variants[@]} -gt 0 ]; then
    echo "variants: ${#variants[@]} per-level objects define only *_avx2/*_avx512 symbols"
    n=$((n + 1))
    check_no_direct_calls || failed=$((failed + 1))
    # ...and they are what the dispatch is for: wide code.
    wide=$(objdump -d --no-show-raw-insn "${variants[@]}" | grep -cE $'\t'"v[a-z0-9]+ .*%[yz]mm")
    if [ "$wide" -eq 0 ]; then
        echo "FAIL: the per-level objects hold no instruction on ymm/zmm registers"
        failed=$((failed + 1))
    else
        echo "variants: $wide instructions on ymm/zmm registers"
    fi
fi
echo "$((n - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
