#!/usr/bin/env bash
# The ThreadSanitizer stage of .ci/run: builds the library, the command and
# the threaded tests with clang under ThreadSanitizer (OPTIM_TSAN, in BUILD)
# and runs them with LLVM's Archer OpenMP tool, which tells TSan about
# libomp's barriers, locks and tasks (libomp itself is not instrumented).
#     tests/tsan/run.sh [BUILD]             (default build-tsan)
# First it runs tests/tsan/planted_race.c, a deliberate race, and fails
# unless TSan reports it with Archer active: a stage that cannot see races
# does not pass. Then any TSan report in a threaded test fails the stage.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
b="${1:-$root/build-tsan}"
# The tests that run steps, tapes and GEMMs on several threads (ctest sets
# OMP_NUM_THREADS=2 for each; test_train_threads runs the command on 1-3).
tests=(test_threads_bitwise test_pipeline test_phased test_matmul_tiles test_sparse_walk
    test_half_sparse test_opt_adam test_opt_muon test_wrappers_averaging test_train_threads)
cc="${TSAN_CC:-clang}"
llvm="$(dirname "$(readlink -f "$(command -v "$cc")")")/../lib"
archer="${ARCHER_LIB:-$llvm/libarcher.so}"
[ -f "$archer" ] || { echo "tsan: no Archer at $archer (Debian: libomp-14-dev)" >&2; exit 1; }

CC="$cc" cmake -S "$root" -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOPTIM_TSAN=ON \
    -DOPTIM_WERROR=ON -DOPTIM_MPI=OFF -DOPTIM_BUILD_EXAMPLES=OFF >/dev/null
targets=(tsan_planted_race optim_cli)
for t in "${tests[@]}"; do
    if [ -f "$root/tests/$t.c" ]; then targets+=("$t"); fi
done
cmake --build "$b" -j"$(nproc)" --target "${targets[@]}"

export OMP_TOOL_LIBRARIES="$archer"
# ignore_noninstrumented_modules: libomp's and OpenBLAS's own accesses are not
# ours to judge; exitcode 66 tells a report from any other failure.
export TSAN_OPTIONS="ignore_noninstrumented_modules=1:halt_on_error=1:exitcode=66:second_deadlock_stack=1"
log="$b/planted_race.log"
rc=0
ARCHER_OPTIONS=verbose=1 "$b/tsan_planted_race" >"$log" 2>&1 || rc=$?
if ! grep -q '^Archer detected OpenMP application with TSan' "$log"; then
    echo "tsan: FAIL: Archer did not start (OMP_TOOL_LIBRARIES=$archer):" >&2
    cat "$log" >&2
    exit 1
fi
if [ $rc -ne 66 ] || ! grep -q 'SUMMARY: ThreadSanitizer: data race .*planted_race\.c' "$log"; then
    echo "tsan: FAIL: the planted race was not reported (exit $rc, expected 66):" >&2
    cat "$log" >&2
    exit 1
fi
echo "tsan: the planted race is reported ($(grep -m1 'SUMMARY' "$log"))"
regex="^($(IFS='|'; echo "${tests[*]}"))\$"
n="$(ctest --test-dir "$b" -N -R "$regex" | sed -n 's/^Total Tests: //p')"
if [ "$n" != ${#tests[@]} ]; then
    echo "tsan: FAIL: ctest knows $n of the ${#tests[@]} tests ${tests[*]} (renamed?)" >&2
    exit 1
fi
ctest --test-dir "$b" --output-on-failure -j"$(nproc)" -R "$regex"
