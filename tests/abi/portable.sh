#!/usr/bin/env bash
# A build with OPTIM_NATIVE off (the default) runs on any x86-64 machine:
# the library and the command hold no VEX or EVEX encoded instruction (AVX,
# AVX2, FMA, AVX-512: every such mnemonic starts with 'v'), which
# -march=native brings on a machine that has them, even on 128-bit
# registers when the CPU prefers them.
#   tests/abi/portable.sh FILE...   (exit 77: skipped, not x86-64 or no objdump)
set -u
if [ "$(uname -m)" != x86_64 ]; then echo "skip: $(uname -m) is not x86-64"; exit 77; fi
if ! command -v objdump >/dev/null; then echo "skip: objdump (binutils) is missing"; exit 77; fi
[ $# -gt 0 ] || { echo "usage: portable.sh FILE..." >&2; exit 2; }
failed=0
for f in "$@"; do
    if ! out=$(objdump -d --no-show-raw-insn "$f" 2>&1); then
        echo "FAIL: $f: objdump failed: $(echo "$out" | head -c 300)"
        failed=$((failed + 1))
        continue
    fi
    # "  1130:<TAB>vmovups (%rsi),%xmm1"; verr/verw are baseline (segment checks).
    vex=$(printf '%s\n' "$out" | awk -F'\t' '$2 ~ /^v[a-z0-9]+/ && $2 !~ /^ver[rw]/')
    n=$(printf '%s' "$vex" | grep -c .)
    if [ "$n" -eq 0 ]; then
        echo "ok: $(basename "$f"): no AVX, FMA or AVX-512 instruction"
    else
        echo "FAIL: $(basename "$f"): $n AVX/FMA/AVX-512 instructions (built with -march=native?), e.g."
        printf '%s\n' "$vex" | head -3
        failed=$((failed + 1))
    fi
done
echo "$(($# - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
