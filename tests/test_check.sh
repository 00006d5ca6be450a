#!/usr/bin/env bash
# optim check: prints the normalised config, or one stderr line and exit 1.
set -u
optim=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf '{"class_name": "adam", "config": {"learning_rate": {"class_name": "ExponentialDecay", "config": {"initial_learning_rate": 0.1, "decay_steps": 10, "decay_rate": 0.5}}}}' >"$tmp/ok.json"
"$optim" check "$tmp/ok.json" >"$tmp/out" 2>"$tmp/err" || fail "check failed: $(cat "$tmp/err")"
grep -q '^{"module":"keras.optimizers","class_name":"Adam","config":{"name":"adam","learning_rate":{"module":"keras.optimizers.schedules","class_name":"ExponentialDecay"' "$tmp/out" ||
    fail "unexpected output: $(cat "$tmp/out")"
grep -q '"beta_1":0.9,' "$tmp/out" || fail "defaults not filled in: $(cat "$tmp/out")"

printf '{"class_name": "SGD", "config": {"momentum": 3}}' >"$tmp/bad.json"
printf '{"class_name": ' >"$tmp/broken.json"
for args in "$tmp/bad.json" "$tmp/broken.json" "$tmp/missing.json" "$tmp"; do
    if "$optim" check "$args" >"$tmp/o" 2>"$tmp/e"; then fail "check $args succeeded"; fi
    [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "check $args: expected one stderr line: $(cat "$tmp/e")"
done
grep -q "momentum" <("$optim" check "$tmp/bad.json" 2>&1) || fail "the message does not name the key"
"$optim" check --help >"$tmp/o" 2>"$tmp/e" || fail "check --help failed: $(cat "$tmp/e")"
grep -q "usage: optim check CONFIG" "$tmp/o" || fail "check --help printed $(cat "$tmp/o")"
if "$optim" check --bogus >"$tmp/o" 2>"$tmp/e"; then fail "check --bogus succeeded"; fi
grep -q "usage" "$tmp/e" || fail "check --bogus was read as a file: $(cat "$tmp/e")"
# A Muon config of Keras 3.12 or older (no rms_rate) loads, with a note on
# stderr naming the difference; one with the key, or none of Muon, has none;
# a wrapper's inner Muon gets it too (issue 27, defect 6).
printf '{"class_name": "Muon", "config": {"learning_rate": 0.01}}' >"$tmp/muon_old.json"
printf '{"class_name": "Muon", "config": {"learning_rate": 0.01, "rms_rate": null}}' >"$tmp/muon_new.json"
printf '{"class_name": "MovingAverage", "config": {"optimizer": {"class_name": "Muon", "config": {}}}}' >"$tmp/muon_wrapped.json"
for f in muon_old muon_wrapped; do
    "$optim" check "$tmp/$f.json" >"$tmp/o" 2>"$tmp/e" || fail "$f: check failed: $(cat "$tmp/e")"
    [ "$(wc -l <"$tmp/o")" -eq 1 ] || fail "$f: stdout is not one line: $(cat "$tmp/o")"
    grep -q "^optim check: note: CONFIG $tmp/$f.json: a Muon config without 'rms_rate', as Keras 3.12 and older wrote it: .*sqrt(max(1, rows / cols))" "$tmp/e" ||
        fail "$f: no note: $(cat "$tmp/e")"
done
for f in muon_new ok; do
    "$optim" check "$tmp/$f.json" >"$tmp/o" 2>"$tmp/e" || fail "$f: check failed: $(cat "$tmp/e")"
    [ -s "$tmp/e" ] && fail "$f: unexpected stderr: $(cat "$tmp/e")"
done
echo "1 passed, 0 failed"
