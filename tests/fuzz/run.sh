#!/usr/bin/env bash
# Builds the fuzz targets with clang's libFuzzer under ASan+UBSan (in
# build-fuzz/) and runs each for SECONDS, one after another:
#     tests/fuzz/run.sh SECONDS [TARGET...]      (targets: config safetensors idx npz apply checkpoint resume)
# Each run starts from the committed seeds (corpus/TARGET) plus the regression
# inputs (regressions/TARGET), grows a working corpus in build-fuzz/, and saves
# any failing input to build-fuzz/findings/ (add it to regressions/TARGET once
# fixed). Prints one line per target with its exec count. Without a clang that
# has libFuzzer it says so and exits 0 (skipped). Exit status 1 on a finding.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
secs="${1:?usage: tests/fuzz/run.sh SECONDS [TARGET...]}"
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config safetensors idx npz apply checkpoint resume)
cc="${FUZZ_CC:-clang}"
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' >"$probe/p.c"
if ! command -v "$cc" >/dev/null || ! "$cc" -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
    echo "fuzz: skipped (no clang with libFuzzer; scripts/deps.sh --fuzz installs it)"
    exit 0
fi
b="$root/build-fuzz"
CC="$cc" cmake -S "$root" -B "$b" -DCMAKE_BUILD_TYPE=Debug -DOPTIM_FUZZ=ON -DOPTIM_SANITIZE=ON \
    -DOPTIM_BUILD_TESTS=OFF -DOPTIM_BUILD_TOOLS=OFF -DOPTIM_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$b" -j"${FUZZ_JOBS:-2}" --target $(printf 'fuzz_%s ' "${targets[@]}") >/dev/null
mkdir -p "$b/findings"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
status=0
for t in "${targets[@]}"; do
    work="$b/corpus-$t"
    mkdir -p "$work"
    dict=()
    [ -f "$here/$t.dict" ] && dict=(-dict="$here/$t.dict")
    log="$b/fuzz-$t.log"
    seed=()
    [ -n "${OPTIM_FUZZ_SEED:-}" ] && seed=(-seed="$OPTIM_FUZZ_SEED")
    if "$b/fuzz_$t" "${seed[@]}" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$b/findings/$t-" "${dict[@]}" "$work" "$here/corpus/$t" \
        "$here/regressions/$t" >"$log" 2>&1; then
        runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
        echo "fuzz_$t: ${secs}s, ${runs:-?} execs, no finding"
    else
        echo "fuzz_$t: FINDING (see $log and $b/findings/)"
        tail -40 "$log"
        status=1
    fi
done
exit $status
