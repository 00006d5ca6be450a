#!/usr/bin/env bash
# optim bench: one JSON object per measurement with the documented keys,
# every built-in by default, and bad input refused with one stderr line.
set -u
optim=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$optim" bench --json --size 20000 --runs 3 '"sgd"' '{"class_name": "Adam", "config": {"amsgrad": true}}' \
    >"$tmp/out" 2>"$tmp/err" || fail "bench exited $?: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/out")" -eq 2 ] || fail "expected 2 JSON lines, got: $(cat "$tmp/out")"
for key in config class_name elements tensors dtype threads bytes_per_param median_seconds gb_per_s triad_gb_per_s ratio \
    cpu_median_seconds; do
    [ "$(grep -c "\"$key\": " "$tmp/out")" -eq 2 ] || fail "key $key missing: $(cat "$tmp/out")"
done
grep -q '"cpu_median_seconds": [0-9]' "$tmp/out" || fail "cpu time: $(cat "$tmp/out")"
grep -q '"class_name": "SGD".*"bytes_per_param": 12,' "$tmp/out" || fail "SGD moves 12 B/param: $(cat "$tmp/out")"
grep -q '"class_name": "Adam".*"bytes_per_param": 36,' "$tmp/out" || fail "Adam amsgrad moves 36 B/param: $(cat "$tmp/out")"

"$optim" bench --size 5000 --runs 1 >"$tmp/all" 2>"$tmp/err" || fail "default list failed: $(cat "$tmp/err")"
[ "$(grep -c 'x triad' "$tmp/all")" -ge 13 ] || fail "default list incomplete: $(cat "$tmp/all")"

# --tensors K: the size over K variables in one call; each class's passes count
# (optim_bytes_per_param: Lamb's second pass reads w, m and v again, Adafactor's two passes).
"$optim" bench --json --size 3001 --runs 1 --tensors 7 adam lamb adafactor >"$tmp/k" 2>"$tmp/err" || fail "--tensors: $(cat "$tmp/err")"
for cb in "Adam 28" "Lamb 40" "Adafactor 32"; do
    set -- $cb
    grep -q "\"class_name\": \"$1\", \"elements\": 3001, \"tensors\": 7,.*\"bytes_per_param\": $2," "$tmp/k" ||
        fail "--tensors 7: $1 moves $2 B/param: $(cat "$tmp/k")"
done
# A wrapper: its inner optimizer's count.
"$optim" bench --json --size 3001 --runs 1 '{"class_name": "Lookahead", "config": {"optimizer": "adam"}}' >"$tmp/la" 2>"$tmp/err" ||
    fail "a wrapper: $(cat "$tmp/err")"
grep -q '"bytes_per_param": 28,' "$tmp/la" || fail "Lookahead over Adam: $(cat "$tmp/la")"

# --iterations I: the step counter starts at I (reported); at OPTIM_ITERATIONS_MAX - 1 the
# warm-up step reaches the maximum and the timed step is refused, so the count reaches the optimizer.
"$optim" bench --json --size 3001 --runs 1 --iterations 20000 lamb >"$tmp/it" 2>"$tmp/err" || fail "--iterations: $(cat "$tmp/err")"
grep -q '"tensors": 1, "iterations": 20000,' "$tmp/it" || fail "--iterations 20000: $(cat "$tmp/it")"
if "$optim" bench --size 100 --runs 1 --iterations 4611686018427387903 adam >"$tmp/o" 2>"$tmp/err"; then
    fail "a step past OPTIM_ITERATIONS_MAX succeeded: $(cat "$tmp/o")"
fi
grep -q "OPTIM_ITERATIONS_MAX" "$tmp/err" || fail "--iterations near the maximum: $(cat "$tmp/err")"

"$optim" bench --size 2000 --runs 1 adam >"$tmp/bare" 2>"$tmp/err" || fail "a bare class name: $(cat "$tmp/err")"
grep -q '"adam"' "$tmp/bare" || fail "bare name not measured: $(cat "$tmp/bare")"

# --dtype: the bytes counted are the storage type's (half of f32 for f16 and bf16).
for spec in "f16 float16 14 6" "bf16 bfloat16 14 6" "f64 float64 56 24" "f32 float32 28 12"; do
    set -- $spec
    "$optim" bench --json --size 20000 --runs 3 --dtype "$1" adam sgd >"$tmp/dt" 2>"$tmp/err" ||
        fail "bench --dtype $1 exited $?: $(cat "$tmp/err")"
    grep -q "\"class_name\": \"Adam\".*\"dtype\": \"$2\".*\"bytes_per_param\": $3," "$tmp/dt" ||
        fail "--dtype $1: Adam moves $3 B/param: $(cat "$tmp/dt")"
    grep -q "\"class_name\": \"SGD\".*\"dtype\": \"$2\".*\"bytes_per_param\": $4," "$tmp/dt" ||
        fail "--dtype $1: SGD moves $4 B/param: $(cat "$tmp/dt")"
done
"$optim" bench --size 3000 --runs 1 --dtype bf16 >"$tmp/all16" 2>"$tmp/err" || fail "bf16 default list: $(cat "$tmp/err")"
[ "$(grep -c 'x triad' "$tmp/all16")" -ge 13 ] || fail "bf16 default list incomplete: $(cat "$tmp/all16")"
for bad in "--dtype" "--dtype f8" "--dtype float16"; do
    # shellcheck disable=SC2086
    if "$optim" bench $bad >"$tmp/o" 2>"$tmp/e"; then fail "bench $bad succeeded"; fi
    [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "bench $bad: expected one stderr line, got: $(cat "$tmp/e")"
done

# --sparse: today's keys plus rows, cols, indices, the dense step of the same table and the CPU time.
"$optim" bench --json --runs 3 --sparse 300 7 50 lazyadam '{"class_name": "Adam", "config": {"is_legacy_optimizer": false}}' \
    >"$tmp/sp" 2>"$tmp/err" || fail "bench --sparse exited $?: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/sp")" -eq 2 ] || fail "expected 2 JSON lines, got: $(cat "$tmp/sp")"
for key in config class_name elements dtype threads bytes_per_param median_seconds gb_per_s triad_gb_per_s ratio \
    rows cols indices dense_median_seconds cpu_median_seconds; do
    [ "$(grep -c "\"$key\": " "$tmp/sp")" -eq 2 ] || fail "key $key missing: $(cat "$tmp/sp")"
done
grep -q '"elements": 2100,.*"rows": 300, "cols": 7, "indices": 50,' "$tmp/sp" || fail "sizes: $(cat "$tmp/sp")"
grep -q '"cpu_median_seconds": [0-9]' "$tmp/sp" || fail "cpu time: $(cat "$tmp/sp")"
"$optim" bench --runs 1 --sparse 10 2 5 sgd >"$tmp/spt" 2>"$tmp/err" || fail "bench --sparse text: $(cat "$tmp/err")"
grep -q 'sparse/dense' "$tmp/spt" || fail "text line: $(cat "$tmp/spt")"

# --sparse --dtype bf16: a bfloat16 table (half the bytes of float32: 14 for LazyAdam's variable and two slots).
"$optim" bench --json --runs 1 --dtype bf16 --sparse 300 7 50 lazyadam >"$tmp/spb" 2>"$tmp/err" \
    || fail "bench --dtype bf16 --sparse exited $?: $(cat "$tmp/err")"
grep -q '"dtype": "bfloat16",.*"bytes_per_param": 14,' "$tmp/spb" || fail "bf16 sparse: $(cat "$tmp/spb")"

for bad in "--size x" "--size 0" "--runs" "--tensors 0" "--size 10 --tensors 11" "--bogus" "-x" '"nope"' '{"class_name": "SGD", "config": {"momentum": 2}}' \
    "--sparse" "--sparse 10 2" "--sparse 0 2 5" "--sparse 10 0 5" "--sparse 10 2 0" "--sparse 10 2 x" \
    "--sparse 4294967296 4294967296 1" "--sparse 10 2 5 lamb_nope" \
    "--iterations" "--iterations -1" "--iterations x" "--iterations 4611686018427387905" "--iterations 3 --sparse 10 2 5"; do
    # shellcheck disable=SC2086
    if eval "\"$optim\" bench $bad" >"$tmp/o" 2>"$tmp/e"; then fail "bench $bad succeeded"; fi
    [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "bench $bad: expected one stderr line, got: $(cat "$tmp/e")"
done
echo "1 passed, 0 failed"
