#!/usr/bin/env bash
# Runs `optim conformance` on one class: exit 0 only when the command exits
# 0, reports at least 10 passed checks, none failed, and ends with the
# summary line.  usage: run.sh OPTIM CLASS GENERATION [CONFIG]
set -u
optim=$1 class=$2 gen=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if [ $# -ge 4 ]; then "$optim" conformance "$class" --generation "$gen" --config "$4" >"$out"
else "$optim" conformance "$class" --generation "$gen" >"$out"; fi
rc=$?
cat "$out"
last=$(tail -n 1 "$out")
[[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]] || { echo "FAIL: last line '$last'"; exit 1; }
[ "$rc" -eq 0 ] && [ "${BASH_REMATCH[2]}" -eq 0 ] && [ "${BASH_REMATCH[1]}" -ge 10 ] ||
    { echo "FAIL: exit $rc, $last"; exit 1; }
