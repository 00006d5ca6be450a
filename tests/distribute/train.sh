#!/usr/bin/env bash
# optim train under mpirun -np N (N = $3, default 2), with and without
# --shard-optimizer-state, ends with the weights one process reaches on the
# same global batches (relative difference < 1e-4); the first line says
# replicas=N, the output (to a file) has one line per epoch and the sharded
# run reports about 1/N of the slot bytes.
# usage: train.sh OPTIM ST_COMPARE [N]
set -u
optim=$1
compare=$2
np=${3:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run=(mpirun --allow-run-as-root --oversubscribe -np "$np")
fail=0 total=0
check() {
    total=$((total + 1))
    if [ "$1" -eq 0 ]; then echo "ok: $2"; else echo "FAIL: $2"; fail=$((fail + 1)); fi
}

"$optim" train --steps 50 --threads 1 --save-weights "$tmp/one.st" >"$tmp/one.out" 2>&1
check $? "one process trains 50 steps"
for mode in plain sharded; do
    extra=()
    [ "$mode" = sharded ] && extra=(--shard-optimizer-state)
    "${run[@]}" "$optim" train --steps 50 --threads 1 --replica-timeout 300 "${extra[@]}" --save-weights "$tmp/$mode.st" \
        >"$tmp/$mode.out" 2>&1
    check $? "$np ranks ($mode) train 50 steps"
    head -n 1 "$tmp/$mode.out" | grep -q "replicas=$np"
    check $? "$mode: the first line says replicas=$np"
    "$compare" "$tmp/$mode.st" "$tmp/one.st" 1e-4 | tail -n 1
    check "${PIPESTATUS[0]}" "$mode: weights equal one process's (relative difference < 1e-4)"
    [ "$(grep -c '^test_accuracy=' "$tmp/$mode.out")" -eq 1 ]
    check $? "$mode: only rank 0 prints the result"
    ! grep -q $'\r' "$tmp/$mode.out"
    check $? "$mode: output to a file has no carriage-return redraws"
done
# Slot bytes: sharded per rank about 1/np of unsharded (plus at most a row per variable).
plain=$(sed -n 's/^optimizer slot bytes per rank: \([0-9]*\) on rank 0.*/\1/p' "$tmp/plain.out")
sharded=$(sed -n 's/^optimizer slot bytes per rank: \([0-9]*\) on rank 0.*/\1/p' "$tmp/sharded.out")
echo "slot bytes on rank 0: $plain unsharded, $sharded sharded over $np"
[ -n "$plain" ] && [ -n "$sharded" ] && [ $((sharded * np)) -le $((plain + plain / 100)) ] &&
    [ $((sharded * np)) -ge $((plain - plain / 100)) ]
check $? "sharded slot bytes are 1/$np of unsharded (within 1%)"
cat "$tmp"/*.out | grep -iE "error|fail" | head -5
echo "$((total - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
