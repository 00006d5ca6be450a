#!/usr/bin/env bash
# The checker passes a correct user class loaded as a plugin (the example
# AdaBelief), and catches each broken class of tests/conformance/broken.c
# with the check meant for it: exit status 1, a FAIL line for that check,
# and a summary line that counts it.
# usage: broken.sh OPTIM ADABELIEF_SO BROKEN_SO
set -u
optim=$1 good=$2 broken=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$optim" --plugin "$good" conformance AdaBelief >"$out" || fail "AdaBelief: $(grep -v '^PASS' "$out")"
tail -n 1 "$out" | grep -qE '^[0-9]+ passed, 0 failed$' || fail "AdaBelief: $(tail -n 1 "$out")"
grep -q '^PASS sparse.rule: .*seen lazy' "$out" || fail "AdaBelief's lazy sparse rule not recognised: $(grep sparse.rule "$out")"

while read -r class check; do
    "$optim" --plugin "$broken" conformance "$class" >"$out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] || fail "$class: exit status $rc, expected 1: $(tail -n 3 "$out")"
    grep -q "^FAIL $check: " "$out" || fail "$class: $check did not fail: $(grep -v '^PASS' "$out")"
    tail -n 1 "$out" | grep -qE '^[0-9]+ passed, [1-9][0-9]* failed$' || fail "$class: summary $(tail -n 1 "$out")"
    echo "ok: $class caught by $check"
done <<'LIST'
BrokenNoop update.changes_variable
BrokenZeroLr update.zero_learning_rate
BrokenWritesOutside elementwise.guards
BrokenReadsOutside elementwise.guards
BrokenByOffset elementwise.chunking
BrokenByThread threads.independent
BrokenSparseRows sparse.rule
BrokenDuplicates sparse.duplicates
BrokenResume slots.resume
BrokenRollback failure.hook
BrokenHyper hyper.changes_step
BrokenConfig config.round_trip
BrokenBadValues config.bad_values
LIST

# A key set_config takes but get_config drops, named.
"$optim" --plugin "$broken" conformance BrokenDropsKey --config '{"mode": 2}' >"$out" 2>&1 && fail "BrokenDropsKey passed"
grep -q "^FAIL config.keys_kept: .*key 'mode' set to 2 is missing from get_config" "$out" ||
    fail "BrokenDropsKey: $(grep -v '^PASS' "$out")"
echo "ok: BrokenDropsKey caught by config.keys_kept, naming the key"

# A slot short (min_slots 2, one slot added) and a slot added twice: the
# library refuses the step before the kernel reads a slot that is not there.
for case in "BrokenMissingSlot:declares min_slots 2" "BrokenSlotTwice:slot 'm' of '[^']*' added twice"; do
    class=${case%%:*} want=${case#*:}
    "$optim" --plugin "$broken" conformance "$class" >"$out" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] || fail "$class: exit status $rc, expected 1: $(tail -n 3 "$out")"
    grep -q "^FAIL update\.changes_variable: .*$want" "$out" || fail "$class: $(grep -v '^PASS' "$out")"
    echo "ok: $class refused before its kernel ran"
done

# State shared between kernel calls: caught on every one of 10 runs by the
# interruption of one call by another (deterministic, on one thread).
for run in $(seq 10); do
    "$optim" --plugin "$broken" conformance BrokenSharedScratch --group threads >"$out" 2>&1 &&
        fail "BrokenSharedScratch passed on run $run"
    grep -q "^FAIL threads.no_shared_state: .*one kernel call interrupted by another on other data: " "$out" ||
        fail "BrokenSharedScratch, run $run: $(grep -v '^PASS' "$out")"
done
echo "ok: BrokenSharedScratch caught by threads.no_shared_state on 10 runs of 10"

# A class that crashes: the groups before the crash keep their lines, the
# crashed group is one CRASH line naming the signal and what it was doing,
# the groups after it still run, and the summary counts the crash; all of it
# through a pipe into a file (each line flushed as printed).
"$optim" --plugin "$broken" conformance BrokenCrash 2>&1 | cat >"$out"
grep -q '^PASS class.table' "$out" || fail "BrokenCrash: the lines before the crash are lost: $(head -3 "$out")"
grep -qE '^CRASH update \(SIG[A-Z0-9]+\): while stepping each shape and dtype; the last check it reported: ' "$out" ||
    fail "BrokenCrash: no CRASH line for update: $(grep -v '^PASS' "$out")"
grep -qE '^(CRASH failure |[A-Z]+ failure\.)' "$out" || fail "BrokenCrash: the groups after the crash did not run"
tail -n 1 "$out" | grep -qE '^[0-9]+ passed, [0-9]+ failed, [1-9][0-9]* crashed$' || fail "BrokenCrash: summary $(tail -n 1 "$out")"
"$optim" --plugin "$broken" conformance BrokenCrash >/dev/null 2>&1 && fail "BrokenCrash: exit status 0"
echo "ok: BrokenCrash reported as CRASH, the other groups' lines kept"
"$optim" --plugin "$broken" conformance BrokenNoop --group update >"$out"
[ "$(grep -c '^[A-Z]* update\.' "$out")" -eq "$(grep -c '^[A-Z]' "$out")" ] || fail "--group update ran other groups: $(cut -c1-40 "$out")"
"$optim" conformance SGD --group nosuch >/dev/null 2>"$out" && fail "--group nosuch accepted"
grep -q "group 'nosuch', expected table" "$out" || fail "--group nosuch: $(cat "$out")"

# Bad use of the command: one line on stderr, exit status 2 (1 for an unknown class).
for args in "" "--generation" "SGD --generation keras2" "SGD --bogus" "SGD extra"; do
    # shellcheck disable=SC2086
    if "$optim" conformance $args >/dev/null 2>"$out"; then fail "conformance $args succeeded"; fi
    [ "$(wc -l <"$out")" -eq 1 ] || fail "conformance $args: $(cat "$out")"
done
"$optim" conformance NoSuchClass >/dev/null 2>"$out" && fail "an unknown class passed"
grep -q "no class named 'NoSuchClass'" "$out" || fail "unknown class: $(cat "$out")"
"$optim" conformance SGD --config '{"momentum": 7}' >/dev/null 2>"$out" && fail "a bad --config passed"
grep -q "momentum" "$out" || fail "bad --config: $(cat "$out")"
"$optim" conformance --help | grep -q "usage: optim" || fail "conformance --help"
echo "1 passed, 0 failed"
