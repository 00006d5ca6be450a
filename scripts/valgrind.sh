#!/usr/bin/env bash
# The test suite under valgrind's memcheck (docs/reliability.md): builds a
# Debug tree without sanitizers in build-valgrind/, then runs every CTest test
# whose command is a test program (the shell tests only with TRACE_CHILDREN,
# see below) under memcheck. Exit status 1 if any test fails or memcheck reports
# an error: invalid reads or writes, uses of uninitialised values, invalid
# frees, or memory definitely lost. (libgomp and OpenBLAS keep their thread
# pools until exit: "possibly lost" and "still reachable" are not errors.)
#   scripts/valgrind.sh [CTEST_REGEX [EXCLUDE_REGEX]]   (default: every test)
# Set TRACE_CHILDREN=1 to follow the programs the tests start (the `optim`
# command of test_replay and the shell tests); slower. VALGRIND_JOBS=N runs
# N tests at once (default 1). Tests started by mpiexec are skipped: memcheck
# would check mpiexec, not the ranks (test_distribute runs the same code in
# one process).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind is not installed (apt-get install valgrind)"; exit 1; }
regex="${1:-.}"
exclude=()
[ -z "${2:-}" ] || exclude=(-E "$2")
b=build-valgrind
cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Debug -DOPTIM_SANITIZE=OFF >/dev/null
cmake --build "$b" -j"${JOBS:-2}" >/dev/null
logs="$b/valgrind"
rm -rf "$logs"
mkdir -p "$logs"
vg=(valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
    --show-leak-kinds=definite --track-origins=yes --num-callers=30 --trace-children="${TRACE_CHILDREN:+yes}")
[ -n "${TRACE_CHILDREN:-}" ] || vg[${#vg[@]}-1]=--trace-children=no
# Every test and its command, from CTest itself.
ctest --test-dir "$b" -R "$regex" "${exclude[@]}" --show-only=json-v1 | python3 -c '
import json, sys
for t in json.load(sys.stdin)["tests"]:
    env = [p["value"] for p in t.get("properties", []) if p["name"] == "ENVIRONMENT"]
    print("\x1f".join([t["name"], " ".join(env[0]) if env else ""] + t["command"]))
' >"$logs/tests.tsv"

# One test under memcheck: prints its line and leaves it in $logs/NAME.result.
run_one() {
    local name="$1" envs="$2" rc=0
    shift 2
    # shellcheck disable=SC2086
    env $envs OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" OPENBLAS_NUM_THREADS=1 \
        "${vg[@]}" --log-file="$logs/$name.log" "$@" >"$logs/$name.out" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "ok    $name" | tee "$logs/$name.result"
    else
        echo "FAIL  $name (exit $rc; see $logs/$name.log and $logs/$name.out)" | tee "$logs/$name.result"
    fi
}

count=0
# Fields separated by \x1f: tabs would merge when a test has no environment.
while IFS=$'\x1f' read -r name envs cmd; do
    IFS=$'\x1f' read -r -a argv <<<"$cmd"
    case "$(basename "${argv[0]}")" in
    bash) if [ -z "${TRACE_CHILDREN:-}" ]; then
        echo "skip  $name (a shell script: set TRACE_CHILDREN=1 to check the programs it runs)"
        continue
    fi ;;
    mpiexec | mpirun) echo "skip  $name (started by mpiexec: memcheck would check mpiexec, not the ranks)"
        continue ;;
    esac
    count=$((count + 1))
    while [ "$(jobs -rp | wc -l)" -ge "${VALGRIND_JOBS:-1}" ]; do wait -n || true; done
    run_one "$name" "$envs" "${argv[@]}" &
done <"$logs/tests.tsv"
wait
failed=$(cat "$logs"/*.result 2>/dev/null | grep -c '^FAIL' || true)
echo "valgrind.sh: $count tests, $failed failed"
[ "$failed" -eq 0 ]
