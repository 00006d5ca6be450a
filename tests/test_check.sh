#!/usr/bin/env bash
# optim check: prints the normalised config, or one stderr line and exit 1.
set -u
optim=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf '{"class_name": "adam", "config": {"learning_rate": {"class_name": "ExponentialDecay", "config": {"initial_learning_rate": 0.1, "decay_steps": 10, "decay_rate": 0.5}}}}' >"$tmp/ok.json"
"$optim" check "$tmp/ok.json" >"$tmp/out" 2>"$tmp/err" || fail "check failed: $(cat "$tmp/err")"
grep -q '^{"class_name":"Adam","config":{"name":"Adam","learning_rate":{"class_name":"ExponentialDecay"' "$tmp/out" ||
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
echo "1 passed, 0 failed"
