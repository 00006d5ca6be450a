#!/usr/bin/env bash
# `optim new-plugin` writes a project that works as written: install optim
# into a fresh prefix, write the Madgrad project with the installed command,
# build it against the prefix (find_package(optim), optim_add_plugin, no
# build type given), run `optim conformance` (every check passes) and
# `optim bench` on it, and check reference.py against `optim replay`. Bad
# input is refused with a message naming it, and nothing is written: bad
# NAMEs, a DIR that exists and is not empty or is a file, a failed write.
# usage: new_plugin.sh BUILD_DIR
set -u
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/log" 2>&1 || fail "install: $(tail -5 "$tmp/log")"
optim=$prefix/bin/optim
[ -x "$optim" ] || fail "no $optim"

# ---- bad input: exit status, the value named, nothing written
for name in 1x Foo-bar 'a b' '' for None all adam LAMB optim_x "$(printf 'Y%.0s' {1..65})"; do
    "$optim" new-plugin "$name" "$tmp/bad" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" = 2 ] || fail "NAME '$name': exit status $rc, expected 2"
    [ -e "$tmp/bad" ] && fail "NAME '$name': $tmp/bad was created"
    grep -qF "NAME '${name:0:20}" "$tmp/err" || fail "NAME '$name': the message does not name it: $(cat "$tmp/err")"
    [ -s "$tmp/out" ] && fail "NAME '$name': wrote to stdout: $(cat "$tmp/out")"
done
mkdir "$tmp/full" && echo keep >"$tmp/full/notes.txt"
"$optim" new-plugin Madgrad "$tmp/full" >"$tmp/out" 2>"$tmp/err" && fail "a non-empty DIR was accepted"
grep -q "$tmp/full exists and is not empty" "$tmp/err" || fail "non-empty DIR: $(cat "$tmp/err")"
[ "$(ls -A "$tmp/full")" = notes.txt ] && [ "$(cat "$tmp/full/notes.txt")" = keep ] ||
    fail "a refused DIR was changed: $(ls -A "$tmp/full")"
touch "$tmp/file"
"$optim" new-plugin Madgrad "$tmp/file" 2>"$tmp/err" && fail "a file as DIR was accepted"
grep -q "$tmp/file exists and is not a directory" "$tmp/err" || fail "file DIR: $(cat "$tmp/err")"
"$optim" new-plugin Madgrad "$tmp/no/such" 2>"$tmp/err" && fail "a DIR without parent was accepted"
grep -q "$tmp/no/such: cannot create it" "$tmp/err" || fail "DIR without parent: $(cat "$tmp/err")"
"$optim" new-plugin Madgrad "$tmp/devfull" >/dev/full 2>"$tmp/err" && fail "exit 0 with stdout on /dev/full"
grep -q "cannot write standard output" "$tmp/err" || fail "/dev/full: $(cat "$tmp/err")"
"$optim" new-plugin --help >/dev/full 2>"$tmp/err" && fail "--help: exit 0 with stdout on /dev/full"
grep -q "cannot write standard output" "$tmp/err" || fail "--help on /dev/full: $(cat "$tmp/err")"
"$optim" new-plugin Madgrad 2>/dev/null && fail "one argument was accepted"
"$optim" new-plugin --force Madgrad "$tmp/x" 2>/dev/null && fail "an unknown option was accepted"
# A write that fails (EFBIG: the file size limit, SIGXFSZ ignored) is
# reported, and what was written is removed, DIR too when the run made it.
(trap '' XFSZ; ulimit -f 4; "$optim" new-plugin Madgrad "$tmp/big") >/dev/null 2>"$tmp/err" &&
    fail "a failed write was not reported"
grep -q "cannot write $tmp/big/Madgrad.c: " "$tmp/err" || fail "failed write: $(cat "$tmp/err")"
[ -e "$tmp/big" ] && fail "a failed run left $(ls -A "$tmp/big")"
if [ "$(id -u)" != 0 ]; then # root writes anywhere
    mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
    "$optim" new-plugin Madgrad "$tmp/ro" 2>"$tmp/err" && fail "an unwritable DIR was accepted"
    grep -q "cannot create $tmp/ro/Madgrad.c" "$tmp/err" || fail "unwritable DIR: $(cat "$tmp/err")"
    chmod 755 "$tmp/ro"
    [ -z "$(ls -A "$tmp/ro")" ] || fail "a failed run left files: $(ls -A "$tmp/ro")"
fi

# ---- the project: written (an existing empty DIR is fine), built, checked
mkdir "$tmp/Madgrad"
"$optim" new-plugin Madgrad "$tmp/Madgrad/" >"$tmp/out" 2>&1 || fail "new-plugin: $(cat "$tmp/out")"
for f in Madgrad.c CMakeLists.txt README.md reference.py; do
    [ -s "$tmp/Madgrad/$f" ] || fail "no $f: $(ls "$tmp/Madgrad")"
    grep -q "wrote $tmp/Madgrad/$f\$" "$tmp/out" || fail "not reported: $f: $(cat "$tmp/out")"
done
grep -rl TemplateName "$tmp/Madgrad" && fail "a placeholder is left"
grep -q 'optim_add_plugin(Madgrad ISA_SOURCES Madgrad.c)' "$tmp/Madgrad/CMakeLists.txt" ||
    fail "CMakeLists.txt: no optim_add_plugin(Madgrad ISA_SOURCES Madgrad.c)"
grep -q 'find_package(optim' "$tmp/Madgrad/CMakeLists.txt" || fail "CMakeLists.txt: no find_package(optim)"
grep -q -- '--plugin ./build/libMadgrad.so conformance Madgrad' "$tmp/Madgrad/README.md" || fail "README.md: no conformance line"

cmake -S "$tmp/Madgrad" -B "$tmp/Madgrad/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/log" 2>&1 ||
    fail "cmake configure: $(tail -5 "$tmp/log")"
cmake --build "$tmp/Madgrad/build" >"$tmp/log" 2>&1 || fail "cmake build: $(tail -20 "$tmp/log")"
flags=$(grep C_FLAGS "$tmp/Madgrad/build/CMakeFiles/Madgrad.dir/flags.make")
[[ $flags == *-O3* && $flags == *-fno-math-errno* ]] ||
    fail "built without -O3 -fno-math-errno (no build type given): $flags"
plugin=$tmp/Madgrad/build/libMadgrad.so
[ -f "$plugin" ] || fail "no $plugin: $(ls "$tmp/Madgrad/build")"
# One class table per x86-64 level, as the built-ins have.
if [ "$(uname -m)" = x86_64 ]; then
    for t in Madgrad_class Madgrad_class_avx2 Madgrad_class_avx512; do
        nm "$plugin" | grep -q " $t\$" || fail "no $t in $plugin: $(nm "$plugin" | grep -i class)"
    done
fi

for gen in keras3 legacy; do
    "$optim" --plugin "$plugin" conformance Madgrad --generation "$gen" >"$tmp/out" 2>&1 ||
        fail "conformance ($gen): $(grep -v '^PASS' "$tmp/out")"
    tail -n 1 "$tmp/out" | grep -qE '^[0-9]+ passed, 0 failed$' || fail "conformance ($gen): $(tail -n 1 "$tmp/out")"
    grep -q '^SKIP' "$tmp/out" && fail "conformance ($gen) skipped checks: $(grep '^SKIP' "$tmp/out")"
done
"$optim" --plugin "$plugin" bench --json --size 65536 --runs 3 '"Madgrad"' >"$tmp/out" 2>&1 ||
    fail "bench: $(cat "$tmp/out")"
grep -q '"class_name": "Madgrad".*"bytes_per_param": 28,' "$tmp/out" || fail "bench printed $(cat "$tmp/out")"

# reference.py is the plugin's rule: three f64 steps of `optim replay` give
# its w, m and v (relative 1e-12), where a python3 has numpy.
if command -v python3 >/dev/null; then
    python3 -m py_compile "$tmp/Madgrad/reference.py" 2>"$tmp/err" || fail "reference.py: $(cat "$tmp/err")"
fi
py=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import numpy' 2>/dev/null; then py=$p; break; fi
done
if [ -z "$py" ]; then
    echo "skipped the reference.py check: no python3 with numpy"
else
    cat >"$tmp/ref_check.py" <<'PY'
import importlib.util, json, struct, sys
import numpy as np
mode, d = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)
init = {"w": rng.standard_normal((3, 4))}
grads = [rng.standard_normal((3, 4)) for _ in range(3)]
def save(path, tensors):
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f8").tobytes()
        header[name] = {"dtype": "F64", "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
def load(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    out = {}
    for name, e in json.loads(data[8:8 + n]).items():
        if name != "__metadata__" and e["dtype"] == "F64":
            lo, hi = e["data_offsets"]
            out[name] = np.frombuffer(data[8 + n + lo:8 + n + hi], "<f8").reshape(e["shape"])
    return out
if mode == "write":
    save(d + "/init.st", init)
    save(d + "/grads.st", {"%d/w" % k: g for k, g in enumerate(grads)})
    sys.exit(0)
spec = importlib.util.spec_from_file_location("reference", sys.argv[3])
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
params, state = {"w": init["w"].copy()}, {}
for t, g in enumerate(grads, 1):
    ref.step(params, {"w": g}, state, t)
out = load(d + "/out.st")
for name, want in [("w", params["w"]), ("w/m", state["w/m"]), ("w/v", state["w/v"])]:
    err = np.max(np.abs(out[name] - want) / np.abs(want))
    if not err < 1e-12:
        sys.exit("%s: optim replay and reference.py differ by %g (relative)" % (name, err))
PY
    "$py" "$tmp/ref_check.py" write "$tmp" || fail "writing the reference inputs"
    printf '{"class_name": "Madgrad"}' >"$tmp/madgrad.json"
    "$optim" --plugin "$plugin" replay "$tmp/madgrad.json" "$tmp/init.st" "$tmp/grads.st" "$tmp/out.st" 2>"$tmp/err" ||
        fail "replay: $(cat "$tmp/err")"
    # Every level this CPU has gives the baseline's bits.
    for l in avx2 avx512; do
        OPTIM_ISA=$l "$optim" version >/dev/null 2>&1 || { echo "skipped level $l: not on this CPU"; continue; }
        for isa in sse2 "$l"; do
            OPTIM_ISA=$isa "$optim" --plugin "$plugin" replay "$tmp/madgrad.json" "$tmp/init.st" "$tmp/grads.st" \
                "$tmp/out_$isa.st" 2>"$tmp/err" || fail "replay at $isa: $(cat "$tmp/err")"
        done
        cmp -s "$tmp/out_sse2.st" "$tmp/out_$l.st" || fail "the $l level's replay differs from sse2's"
    done
    "$py" "$tmp/ref_check.py" check "$tmp" "$tmp/Madgrad/reference.py" 2>"$tmp/err" || fail "reference.py: $(cat "$tmp/err")"
    "$py" "$tmp/Madgrad/reference.py" >"$tmp/out" 2>&1 || fail "reference.py's smoke run: $(cat "$tmp/out")"
fi
echo "1 passed, 0 failed"
