#!/usr/bin/env bash
# Damaged or hostile checkpoints get a message and a non-zero exit, never a
# crash, a hang or a silent resume (issue 22's reproducers D01, D02, D08,
# D10, D11): checkpoint.json entries of the wrong type, a FIFO or
# /dev/zero as checkpoint.json, a tensor file from another run or with one
# byte changed, numbers far out of range, and an --optimizer whose config
# differs from the checkpoint's; a second writer on a DIR in use (D05), and
# a dead writer's temporary file (D13f).
set -u
optim=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
args=(--limit 400 --batch-size 64 --hidden 16 --threads 1)
"$optim" train "${args[@]}" --epochs 1 --checkpoint run1 >/dev/null 2>&1 || fail "first run"
"$optim" train "${args[@]}" --epochs 1 --seed 5 --checkpoint run2 >/dev/null 2>&1 || fail "second run"
# refuse DIR PATTERN [ARGS]: resuming DIR exits 1 (not a crash) with PATTERN on stderr.
refuse() {
    local dir=$1 pat=$2
    shift 2
    timeout 60 "$optim" train "${args[@]}" --epochs 2 --resume "$dir" "$@" >/dev/null 2>err
    local rc=$?
    [ "$rc" -eq 1 ] || fail "$dir: exit $rc, expected 1: $(cat err)"
    grep -q -- "$pat" err || fail "$dir: expected '$pat' in: $(cat err)"
}
mutate() { # mutate NAME PYTHON-EXPRESSION-ON-j
    cp -r run1 "$1"
    python3 -c "import json,sys; p=sys.argv[1]+'/checkpoint.json'; j=json.load(open(p)); $2; json.dump(j, open(p,'w'))" "$1" ||
        fail "mutate $1"
}
mutate vars "j['variables']=[v['name'] for v in j['variables']]"
refuse vars 'an entry of "variables" is not an object'
mutate layers "j['layers']=[{'name': l} for l in j['layers']]"
refuse layers 'an entry of "layers" is not a string'
mutate weights "j['optimizer_weights']=[{'name': w} for w in j['optimizer_weights']]"
refuse weights 'an entry of "optimizer_weights" is not a string'
mutate batch "j['extra']['batch_size']=1e30"
refuse batch 'no valid "batch_size"'
mutate hidden "j['extra']['hidden']=[1e300]"
refuse hidden 'no valid "hidden"'
mutate steps "j['extra']['steps']=-1e300"
refuse steps '"steps" is'
# A huge generation: the next save starts again from 0 (no UB, no ckpt--N file).
mutate gen "j['generation']=1e300"
"$optim" train "${args[@]}" --epochs 1 --checkpoint gen >/dev/null 2>&1 || fail "save after a huge generation"
[ -f gen/ckpt-0.safetensors ] || fail "huge generation: $(ls gen)"
# Not a regular file: a FIFO (would hang), /dev/zero (would read forever), a directory.
mkdir fifo zero dir && mkfifo fifo/checkpoint.json && ln -s /dev/zero zero/checkpoint.json
mkdir dir/checkpoint.json
refuse fifo 'not a regular file'
refuse zero 'not a regular file'
refuse dir 'Is a directory'
# The tensor file from another run, and one byte changed.
cp -r run1 foreign && cp run2/ckpt-0.safetensors foreign/ckpt-0.safetensors
refuse foreign 'damaged or from another save'
cp -r run1 flipped && printf '\177' | dd of=flipped/ckpt-0.safetensors bs=1 seek=2000 conv=notrunc 2>/dev/null
refuse flipped 'damaged or from another save'
# An --optimizer of the same class with another setting.
refuse run1 "has learning_rate 0.001, --optimizer's is 0.5" --optimizer '{"class_name": "Adam", "config": {"learning_rate": 0.5}}'
# Two writers on one DIR: while one run holds it, a second is refused at
# once, naming the holder's PID, and DIR stays the first run's checkpoint.
"$optim" train "${args[@]}" --limit 2000 --epochs 3 --checkpoint busy >/dev/null 2>&1 &
holder=$!
for _ in $(seq 100); do [ -s busy/.lock ] && break; sleep 0.1; done
"$optim" train "${args[@]}" --epochs 1 --checkpoint busy >/dev/null 2>err && fail "second writer succeeded"
grep -q "in use by process $holder" err || fail "second writer: $(cat err)"
wait "$holder" || fail "the first writer failed"
"$optim" train "${args[@]}" --limit 2000 --epochs 3 --resume busy >out 2>err || fail "resume busy: $(cat err)"
grep -q "asks for no more" err || fail "busy is not the first run's 3 epochs: $(cat err)"
# A temporary file of a writer killed between link and rename is removed by the next save.
touch run1/.optim-999999-1.tmp
"$optim" train "${args[@]}" --epochs 2 --resume run1 --checkpoint run1 >/dev/null 2>&1 || fail "resume run1"
[ -e run1/.optim-999999-1.tmp ] && fail "stale temporary file kept"
# Outputs that cannot be written are refused before the run (D13d).
for o in "--save-weights /dev/full" "--plot $tmp/missing/x.png" "--history $tmp"; do
    # shellcheck disable=SC2086
    timeout 10 "$optim" train "${args[@]}" --epochs 1 $o >/dev/null 2>err && fail "$o accepted"
    grep -q -- "${o%% *} " err || fail "$o: $(cat err)"
done
echo "checkpoint guards: all refused"
