#!/usr/bin/env bash
# optim train's options on a subset of Fashion-MNIST: --epochs 1
# --checkpoint D then --epochs 2 --resume D gives bit for bit the weights of
# --epochs 2 (Adam, Nadam, Ftrl, Lookahead, use_ema, legacy Nadam with a
# schedule_decay its config must carry; with Dropout, a
# validation split and the LearningRateScheduler), the history and the plot
# cover every epoch, a checkpoint of another model or optimizer is refused,
# --steps and EarlyStopping stop early, the data may be uncompressed, a
# missing dataset names the package, bad options give one line, --threads
# does not change the weights.
set -u
optim=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { "$optim" train --limit 400 --batch-size 64 "$@" >"$tmp/out" 2>"$tmp/err" || fail "train $*: $(cat "$tmp/err")"; }

common=(--hidden 32,16 --dropout 0.2 --validation-split 0.25 --lr-decay 0.5)
for cfg in adam nadam ftrl \
    '{"class_name": "Lookahead", "config": {"optimizer": {"class_name": "SGD", "config": {"momentum": 0.9}}, "sync_period": 3}}' \
    '{"class_name": "Adam", "config": {"use_ema": true, "ema_overwrite_frequency": 5}}' \
    '{"class_name": "Nadam", "config": {"schedule_decay": 0.05, "is_legacy_optimizer": true}}'; do
    rm -rf "$tmp/D"
    run --epochs 2 --optimizer "$cfg" "${common[@]}" --save-weights "$tmp/A"
    tail -1 "$tmp/out" | grep -q '^test_accuracy=0\.[0-9]*$' || fail "last line: $(tail -1 "$tmp/out")"
    run --epochs 1 --optimizer "$cfg" "${common[@]}" --checkpoint "$tmp/D" --save-weights "$tmp/W1"
    run --epochs 2 --resume "$tmp/D" --save-weights "$tmp/B" --history "$tmp/h.csv" --plot "$tmp/h.png"
    cmp -s "$tmp/A" "$tmp/B" || fail "$cfg: resumed weights differ"
    cmp -s "$tmp/W1" "$tmp/B" && fail "$cfg: the resumed run did not train"
    grep -q "resuming $tmp/D after epoch 1" "$tmp/out" || fail "no resume line: $(cat "$tmp/out")"
    [ "$(tail -n +2 "$tmp/h.csv" | cut -d, -f2 | tr '\n' ' ')" = "1 2 " ] || fail "history: $(cat "$tmp/h.csv")"
    [ -s "$tmp/h.png" ] || fail "no plot"
done
# Refusals: another model, another optimizer, another seed, no checkpoint.
run --epochs 1 --optimizer adam --hidden 32 --checkpoint "$tmp/E"
for args in "--hidden 16" "--optimizer sgd" "--seed 5" "--dropout 0.5"; do
    # shellcheck disable=SC2086
    if "$optim" train --limit 400 --batch-size 64 --epochs 2 --resume "$tmp/E" $args >"$tmp/o" 2>"$tmp/e"; then
        fail "resume with $args succeeded"
    fi
    [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "resume $args: expected one stderr line: $(cat "$tmp/e")"
    grep -q -- "${args%% *}" "$tmp/e" || grep -q "optimizer" "$tmp/e" || fail "resume $args: $(cat "$tmp/e")"
done
"$optim" train --epochs 2 --resume "$tmp/none" 2>"$tmp/e" && fail "resume from nothing succeeded"
grep -q "holds no checkpoint" "$tmp/e" || fail "resume from nothing: $(cat "$tmp/e")"

# A resume with nothing left to train says so, then evaluates.
run --epochs 1 --resume "$tmp/E"
grep -q -- "--resume: 1 epochs done, --epochs 1 asks for no more" "$tmp/err" || fail "resume past --epochs: $(cat "$tmp/err")"

# --steps: 400 examples at 64 per batch are 7 steps an epoch; 9 steps end in
# epoch 2, whose line counts the 2 steps run. Not on a terminal: no redraws.
run --epochs 5 --hidden 16 --steps 9 --history "$tmp/s.csv"
[ "$(tail -n +2 "$tmp/s.csv" | wc -l)" -eq 2 ] || fail "--steps 9: $(cat "$tmp/s.csv")"
grep -q '^7/7 - ' "$tmp/out" && grep -q '^2/7 - ' "$tmp/out" || fail "--steps 9 epoch lines: $(cat "$tmp/out")"
grep -q $'\r' "$tmp/out" && fail "carriage returns in output to a file"
# EarlyStopping that never sees an improvement of 100 stops after epoch 2.
run --epochs 5 --hidden 16 --early-stopping 0 --monitor loss --min-delta 100 --history "$tmp/e.csv"
[ "$(tail -n +2 "$tmp/e.csv" | wc -l)" -eq 2 ] || fail "EarlyStopping: $(cat "$tmp/e.csv")"
grep -q "early stopping" "$tmp/out" || fail "EarlyStopping said nothing: $(cat "$tmp/out")"

# --threads (the optimizer step's) leaves the result as it is: Muon's
# products run inside the step, where the OpenMP build of OpenBLAS would
# take the step's thread count.
for cfg in muon adam; do
    run --epochs 1 --hidden 32,16 --optimizer $cfg --threads 1 --save-weights "$tmp/T1"
    run --epochs 1 --hidden 32,16 --optimizer $cfg --threads 2 --save-weights "$tmp/T2"
    cmp -s "$tmp/T1" "$tmp/T2" || fail "$cfg: --threads 1 and --threads 2 gave different weights"
done

# Uncompressed IDX files work as well as gzip'd ones, with the same result.
mkdir "$tmp/raw"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    gzip -dc "/usr/share/datasets/fashion-mnist/$f.gz" >"$tmp/raw/$f" || fail "cannot unpack $f"
done
run --epochs 1 --hidden 16
gz=$(tail -1 "$tmp/out")
run --epochs 1 --hidden 16 --data "$tmp/raw"
[ "$(tail -1 "$tmp/out")" = "$gz" ] || fail "uncompressed data gave $(tail -1 "$tmp/out"), gzip'd $gz"
rm "$tmp/raw/t10k-labels-idx1-ubyte"
"$optim" train --data "$tmp/raw" 2>"$tmp/e" && fail "train without t10k labels succeeded"
grep -q "apt-get install dataset-fashion-mnist" "$tmp/e" || fail "missing data: $(cat "$tmp/e")"

for args in "--epochs 0" "--bogus 1" "--hidden a" "--dropout 1" "--monitor val_loss --early-stopping 1" \
    "--min-delta 1" "--data /nonexistent" "--optimizer nosuch" "extra"; do
    # shellcheck disable=SC2086
    if "$optim" train --limit 100 $args >"$tmp/o" 2>"$tmp/e"; then fail "train $args succeeded"; fi
    [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "train $args: expected one stderr line: $(cat "$tmp/e")"
done
echo "1 passed, 0 failed"
