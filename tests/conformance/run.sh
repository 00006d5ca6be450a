#!/usr/bin/env bash
# Runs `optim conformance` on one class: exit 0 only when the command exits
# 0, reports at least 10 passed checks, none failed, and ends with the
# summary line.  usage: run.sh OPTIM CLASS GENERATION [CONFIG]
# A check a class fails by design (its rule breaks the check's premise) is
# listed in BY_DESIGN below with the reason; that FAIL line alone (exit 1,
# one failure) still passes.
set -u
optim=$1 class=$2 gen=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# CLASS CHECK: why
BY_DESIGN='
ConditionalGradient update.zero_learning_rate: w = lr * w - (1 - lr) * lambda_ * s, so learning_rate 0 moves w to -lambda_ * s
'
if [ $# -ge 4 ]; then "$optim" conformance "$class" --generation "$gen" --config "$4" >"$out"
else "$optim" conformance "$class" --generation "$gen" >"$out"; fi
rc=$?
cat "$out"
last=$(tail -n 1 "$out")
[[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]] || { echo "FAIL: last line '$last'"; exit 1; }
passed=${BASH_REMATCH[1]} failed=${BASH_REMATCH[2]}
expected=0
while read -r c check; do
    [ "$c" = "$class" ] && grep -q "^FAIL ${check%:}: " "$out" && expected=$((expected + 1))
done <<<"$(echo "$BY_DESIGN" | grep -v '^$' | cut -d' ' -f1,2)"
[ "$expected" -gt 0 ] && [ "$rc" -eq 1 ] && [ "$failed" -eq "$expected" ] && rc=0 failed=0 &&
    echo "(failed by design: $expected, see tests/conformance/run.sh)"
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$passed" -ge 10 ] ||
    { echo "FAIL: exit $rc, $last"; exit 1; }
