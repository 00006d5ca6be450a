#!/usr/bin/env bash
# Plugins in every subcommand: the example plugin's AdaBelief class from a
# JSON config in replay, train, bench and check (through --plugin and
# OPTIM_PLUGINS), and each bad plugin refused with one stderr line that names
# the file and the reason.
# usage: commands.sh OPTIM ADABELIEF_SO NO_ENTRY_SO INIT_FAILS_SO DUPLICATE_SO SILENT_SO
set -u
optim=$1 plugin=$2 no_entry=$3 init_fails=$4 duplicate=$5 silent=$6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
unset OPTIM_PLUGINS

# A safetensors file with one F32 tensor NAME of 4 elements, each HEX (4 bytes LE).
st_write() { # file name hex
    local header="{\"$2\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}"
    local n=${#header} i
    {
        for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(((n >> (8 * i)) & 255)))"; done
        printf '%s' "$header"
        for i in 1 2 3 4; do printf "$3"; done
    } >"$1"
}
st_write "$tmp/init.st" w '\x00\x00\x80\x3f'  # 1.0
st_write "$tmp/grads.st" 0/w '\x00\x00\x00\x3f' # 0.5
printf '{"class_name": "AdaBelief", "config": {"learning_rate": 0.01, "beta_1": 0.8}}' >"$tmp/ab.json"

# Without the plugin the class is unknown; with it, every subcommand has it.
if "$optim" check "$tmp/ab.json" >/dev/null 2>&1; then fail "AdaBelief known without the plugin"; fi
"$optim" --plugin "$plugin" check "$tmp/ab.json" >"$tmp/out" 2>"$tmp/err" || fail "check: $(cat "$tmp/err")"
grep -q '"class_name":"AdaBelief".*"beta_1":0.8,"beta_2":0.999' "$tmp/out" || fail "check printed $(cat "$tmp/out")"
OPTIM_PLUGINS="/nonexistent-is-not-used:$plugin:" "$optim" check "$tmp/ab.json" >/dev/null 2>"$tmp/err" &&
    fail "a missing plugin in OPTIM_PLUGINS was ignored"
OPTIM_PLUGINS="::$plugin" "$optim" check "$tmp/ab.json" >/dev/null 2>"$tmp/err" ||
    fail "OPTIM_PLUGINS: $(cat "$tmp/err")"
"$optim" --plugin="$plugin" replay "$tmp/ab.json" "$tmp/init.st" "$tmp/grads.st" "$tmp/out.st" 2>"$tmp/err" ||
    fail "replay: $(cat "$tmp/err")"
for name in '"w"' '"w/m"' '"w/v"' '"iterations"'; do
    grep -aq "$name" "$tmp/out.st" || fail "replay output lacks $name"
done
"$optim" --plugin "$plugin" bench --json --size 5000 --runs 1 "$(cat "$tmp/ab.json")" >"$tmp/out" 2>"$tmp/err" ||
    fail "bench: $(cat "$tmp/err")"
grep -q '"class_name": "AdaBelief"' "$tmp/out" || fail "bench printed $(cat "$tmp/out")"

# The plugin's schedule, alone and inside the plugin's optimizer.
printf '{"class_name": "StepDecay", "config": {"initial_learning_rate": 0.5, "step_size": 3, "gamma": 0.5}}' >"$tmp/sched.json"
"$optim" --plugin "$plugin" schedule-plot "$tmp/sched.json" "$tmp/sched.png" 20 2>"$tmp/err" || fail "schedule-plot: $(cat "$tmp/err")"
[ -s "$tmp/sched.png" ] || fail "schedule-plot wrote no PNG"
printf '{"class_name": "AdaBelief", "config": {"learning_rate": %s}}' "$(cat "$tmp/sched.json")" >"$tmp/ab_sched.json"
"$optim" --plugin "$plugin" check "$tmp/ab_sched.json" >"$tmp/out" 2>"$tmp/err" || fail "check with the schedule: $(cat "$tmp/err")"
grep -q '"learning_rate":{"module":null,"class_name":"StepDecay","config":{"initial_learning_rate":0.5,"step_size":3,"gamma":0.5' "$tmp/out" ||
    fail "check printed $(cat "$tmp/out")"

# train on a tiny IDX data set (64 training and 32 test images).
be32() { local i; for i in 24 16 8 0; do printf "\\x$(printf %02x $(($1 >> i & 255)))"; done; }
mkdir "$tmp/data"
for set in train:64 t10k:32; do
    name=${set%:*} n=${set#*:}
    { printf '\x00\x00\x08\x03'; be32 "$n"; be32 28; be32 28; yes | head -c $((n * 784)); } |
        gzip -c >"$tmp/data/$name-images-idx3-ubyte.gz"
    { printf '\x00\x00\x08\x01'; be32 "$n"; head -c "$n" /dev/zero | tr '\0' '\3'; } |
        gzip -c >"$tmp/data/$name-labels-idx1-ubyte.gz"
done
"$optim" --plugin "$plugin" train --epochs 1 --batch-size 32 --data "$tmp/data" \
    --optimizer "$(cat "$tmp/ab.json")" >"$tmp/out" 2>"$tmp/err" || fail "train: $(cat "$tmp/err")"
tail -n 1 "$tmp/out" | grep -q 'test_accuracy=' || fail "train printed $(tail -n 3 "$tmp/out")"

# Bad plugins: non-zero exit, one stderr line naming the file and the reason.
printf 'not a library' >"$tmp/text.so"
bad() { # expected-reason plugin-args...
    local why=$1
    shift
    if "$optim" "$@" check "$tmp/ab.json" >"$tmp/o" 2>"$tmp/e"; then fail "$* accepted"; fi
    [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "$*: expected one stderr line, got: $(cat "$tmp/e")"
    grep -q -- "$why" "$tmp/e" || fail "$*: expected '$why' in: $(cat "$tmp/e")"
}
bad "plugin $tmp/missing.so: cannot open" --plugin "$tmp/missing.so"
bad "plugin $tmp/text.so: cannot open" --plugin "$tmp/text.so"
bad "plugin $no_entry: no entry point optim_plugin_init" --plugin "$no_entry"
bad "plugin $init_fails: optim_plugin_init failed (invalid argument): bad_plugin: refusing" --plugin "$init_fails"
bad "plugin $duplicate: .*'adam' is already registered" --plugin "$duplicate"
bad "plugin $silent: optim_plugin_init failed (invalid state): no message" --plugin "$silent"
bad "plugin $plugin: .*'AdaBelief' is already registered" --plugin "$plugin" --plugin "$plugin"
bad "plugin '': empty path" --plugin=
# A bare name is refused, not searched (here: the current directory, as an
# empty rpath element or LD_LIBRARY_PATH=. would find it).
cp "$plugin" "$tmp/libbare.so"
(cd "$tmp" && LD_LIBRARY_PATH=. bad "plugin libbare.so: give a path (./libbare.so or /abs/libbare.so); bare names are not searched" --plugin libbare.so) || exit 1
(cd "$tmp" && OPTIM_PLUGINS=libbare.so LD_LIBRARY_PATH=. bad "plugin libbare.so: give a path") || exit 1
(cd "$tmp" && "$optim" --plugin ./libbare.so check ab.json >/dev/null 2>"$tmp/e") || fail "--plugin ./libbare.so: $(cat "$tmp/e")"
"$optim" --plugin >/dev/null 2>"$tmp/e" && fail "--plugin without a PATH accepted"
grep -q "needs a PATH" "$tmp/e" || fail "--plugin without a PATH: $(cat "$tmp/e")"
OPTIM_PLUGINS="$no_entry" bad "plugin $no_entry: no entry point"
echo "1 passed, 0 failed"
