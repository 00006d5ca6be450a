#!/usr/bin/env bash
# optim train/compare --log FILE.jsonl --tensorboard DIR on a subset of
# Fashion-MNIST, decoded back by tests/step_log_check.py (the json module;
# TFRecords with their CRC-32C computed there bit by bit, Event protobufs
# read there): one JSON line per step with the step count of the epoch line,
# finite values whose batch-weighted mean loss is the epoch's loss, the same
# values as TensorBoard scalars, epoch_* scalars equal to the epoch line;
# compare writes every run into one file and DIR/LABEL per run; --resume
# appends with the steps continuing; the learning rate logged is the one
# the step used (a schedule's boundary); unwritable paths and a write error
# fail the run with a message naming the file.
set -u
optim=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 >/dev/null || fail "python3 is needed to decode the files"
check() { python3 "$here/step_log_check.py" "$@" || exit 1; }
common=(--limit 2000 --validation-split 0.2 --hidden 32)

"$optim" train "${common[@]}" --epochs 1 --log "$tmp/run.jsonl" --tensorboard "$tmp/tb" \
    >"$tmp/out1" 2>"$tmp/err" || fail "train: $(cat "$tmp/err")"
check "$tmp/out1" "$tmp/run.jsonl" "$tmp/tb" Adam 0 1

# compare: one JSON file with the label in each line, one event directory per run
"$optim" compare adam sgd "${common[@]}" --epochs 1 --log "$tmp/c.jsonl" --tensorboard "$tmp/tbc" \
    >"$tmp/out" 2>"$tmp/err" || fail "compare: $(cat "$tmp/err")"
grep ' training' "$tmp/out1" >"$tmp/count" # the same data as the train run's
for label in adam sgd; do
    { cat "$tmp/count"; awk -v l="== $label:" 'index($0, l) == 1 {on = 1; next} /^==|^$/ {on = 0} on' "$tmp/out"; } >"$tmp/o_$label"
    check "$tmp/o_$label" "$tmp/c.jsonl" "$tmp/tbc/$label" "$label" 0 1
done
[ "$(ls "$tmp/tbc")" = "$(printf 'adam\nsgd')" ] || fail "event dirs: $(ls "$tmp/tbc")"

# --resume appends, the steps going on from the checkpoint's
"$optim" train "${common[@]}" --epochs 1 --checkpoint "$tmp/D" --log "$tmp/r.jsonl" >"$tmp/o1" 2>"$tmp/err" ||
    fail "train --checkpoint: $(cat "$tmp/err")"
first=$(wc -l <"$tmp/r.jsonl")
"$optim" train --epochs 2 --resume "$tmp/D" --log "$tmp/r.jsonl" >"$tmp/o2" 2>"$tmp/err" ||
    fail "train --resume: $(cat "$tmp/err")"
check "$tmp/o1" "$tmp/r.jsonl" - Adam 0 1
check "$tmp/o2" "$tmp/r.jsonl" - Adam "$first" 2

# the learning rate a step used: PiecewiseConstantDecay at iterations 0..2 is 0.1, then 0.01
sched='{"class_name": "SGD", "config": {"learning_rate": {"class_name": "PiecewiseConstantDecay",
 "config": {"boundaries": [2], "values": [0.1, 0.01]}}}}'
"$optim" train "${common[@]}" --epochs 1 --optimizer "$sched" --log "$tmp/s.jsonl" >/dev/null 2>"$tmp/err" ||
    fail "train with a schedule: $(cat "$tmp/err")"
lrs=$(python3 -c 'import json,sys; print(*[json.loads(l)["learning_rate"] for l in open(sys.argv[1])][:5])' "$tmp/s.jsonl")
[ "$lrs" = "0.1 0.1 0.1 0.01 0.01" ] || fail "learning rates $lrs"
# a wrapper's is its inner optimizer's
la='{"class_name": "Lookahead", "config": {"optimizer": {"class_name": "SGD", "config": {"learning_rate": 0.05}}}}'
"$optim" train --limit 300 --epochs 1 --optimizer "$la" --log "$tmp/la.jsonl" >/dev/null 2>"$tmp/err" ||
    fail "train with Lookahead: $(cat "$tmp/err")"
grep -q '"learning_rate":0.05,' "$tmp/la.jsonl" || fail "Lookahead's rate: $(head -1 "$tmp/la.jsonl")"

# bad paths and write errors: exit 1, one message naming the file
refused() { # expected-text, args...
    local want=$1
    shift
    if "$optim" train "${common[@]}" --epochs 1 "$@" >/dev/null 2>"$tmp/e"; then fail "$* succeeded"; fi
    grep -qF -- "$want" "$tmp/e" || fail "$*: message $(cat "$tmp/e"), expected $want"
    [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "$*: more than one line: $(cat "$tmp/e")"
}
refused "--log $tmp/none/x.jsonl: directory $tmp/none does not exist" --log "$tmp/none/x.jsonl"
refused "--log $tmp: exists and is not a regular file" --log "$tmp"
touch "$tmp/file"
refused "--tensorboard $tmp/file/tb: cannot create directory $tmp/file" --tensorboard "$tmp/file/tb"
# a file size limit (KiB): the write that passes it fails with EFBIG
(trap '' XFSZ; ulimit -f 2; refused "--log $tmp/big.jsonl: write error: File too large" --log "$tmp/big.jsonl") || exit 1
(trap '' XFSZ; ulimit -f 1; refused "--tensorboard $tmp/tbig/events.out.tfevents." --tensorboard "$tmp/tbig") || exit 1
grep -q "write error: File too large" "$tmp/e" || fail "tensorboard write error: $(cat "$tmp/e")"
echo "ok"
