#!/usr/bin/env bash
# Ranks started with different settings (mpirun's MPMD syntax, one command
# per rank) are refused before the first step: every rank exits non-zero
# with "replicas disagree: SETTING is A on rank 0, B on rank 1", nothing is
# trained, nothing crashes (docs/distributed.md). Before the check, seeds,
# optimizers and learning rates that differed trained diverged replicas and
# exited 0, --shard-optimizer-state on one rank crashed inside Open MPI and
# a different --batch-size printed a garbage status. (The ranks' stderr may
# interleave: the message is counted, not the lines.) usage: mismatch.sh OPTIM
set -u
optim=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/tinydata.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tiny_data "$tmp"
c=(train --data "$tmp" --epochs 1 --hidden 16 --threads 1 --replica-timeout 20)
fail=0 total=0

# case NAME PATTERN -- RANK0-OPTIONS -- RANK1-OPTIONS
case_() {
    local name=$1 pattern=$2 a=() b=()
    shift 3
    while [ "$1" != -- ]; do a+=("$1"); shift; done
    shift
    b=("$@")
    total=$((total + 1))
    timeout 60 mpirun --allow-run-as-root --oversubscribe -np 1 "$optim" "${c[@]}" "${a[@]}" : \
        -np 1 "$optim" "${c[@]}" "${b[@]}" >"$tmp/out" 2>&1
    local rc=$? why=
    if [ "$rc" -eq 0 ]; then why="exit status 0"
    elif [ "$rc" -eq 124 ]; then why="still running after 60 s"
    elif [ "$(grep -o -- "replicas disagree: $pattern" "$tmp/out" | wc -l)" -ne 2 ]; then
        why="not both ranks printed 'replicas disagree: $pattern'"
    elif grep -qE 'test_accuracy|loss: |/[0-9]+ \[' "$tmp/out"; then why="it trained"
    elif grep -qiE 'segmentation|signal|corruption|core dumped|status [0-9]{6}' "$tmp/out"; then
        why="it crashed or printed a garbage status"
    fi
    if [ -z "$why" ]; then echo "ok: $name: $(grep -m1 disagree "$tmp/out")"; return; fi
    echo "FAIL: $name: $why (exit status $rc)"
    tail -n 12 "$tmp/out"
    fail=$((fail + 1))
}
case_ seed "--seed is 0 on rank 0, 1 on rank 1" -- --seed 0 -- --seed 1
case_ optimizer "--optimizer is .* on rank 0, .*SGD.* on rank 1" -- --optimizer adam -- --optimizer sgd
case_ "learning rate" "--optimizer is .*learning_rate\":0.01.* on rank 0, .*learning_rate\":0.001.* on rank 1" \
    -- --optimizer '{"class_name": "Adam", "config": {"learning_rate": 0.01}}' -- --optimizer adam
case_ batch-size "--batch-size is 128 on rank 0, 64 on rank 1" -- --batch-size 128 -- --batch-size 64
case_ steps "--steps is 0 on rank 0, 3 on rank 1" -- -- --steps 3
case_ shard "--shard-optimizer-state is not given on rank 0, given on rank 1" -- -- --shard-optimizer-state
case_ "two settings" "--seed is 0 on rank 0, 2 on rank 1; --hidden is 16 on rank 0, 8 on rank 1" \
    -- -- --seed 2 --hidden 8
echo "$((total - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
