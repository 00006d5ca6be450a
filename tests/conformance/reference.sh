#!/usr/bin/env bash
# optim conformance --reference (issue 23): a reference written by
# tools/make_reference.py from its Keras 3 Adam example passes the built-in
# Adam and the plugin PluginAdam, in f32 and f64, dense and sparse, and
# fails BrokenAdamEps (epsilon inside the square root), one line per
# variable naming the element, both values and the tolerance; a class that
# crashes is one CRASH line; a bad REF is one message naming the tensor and a
# non-zero exit. Everything goes through a pipe into a file (lines flushed).
# Needs numpy (Debian's python3-numpy): without it the test is skipped (77).
# usage: reference.sh OPTIM BROKEN_SO SOURCE_DIR
set -u
optim=$1 broken=$2 src=$3
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "SKIP: numpy is not installed for $py (apt-get install python3-numpy); make_reference.py needs it"
    exit 77
fi
make_ref="$src/tools/make_reference.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out ref=$tmp/ref.safetensors
fail() { echo "FAIL: $*"; exit 1; }

# "optim ARGS" into $out through a pipe; sets rc to optim's exit status.
run() {
    "$optim" "$@" 2>&1 | cat >"$out"
    rc=${PIPESTATUS[0]}
}

for dtype in f32 f64; do
    for sparse in "" --sparse; do
        what="$dtype${sparse:+ sparse}"
        # A large epsilon: in the wrong place it moves every element (REF's
        # metadata carries the config to optim conformance).
        "$py" "$make_ref" "$ref" --example adam --dtype "$dtype" $sparse --config '{"epsilon": 0.001}' ||
            fail "$what: make_reference.py failed"
        for class in Adam PluginAdam; do
            run --plugin "$broken" conformance "$class" --reference "$ref"
            [ "$rc" -eq 0 ] || fail "$what: $class exit $rc: $(cat "$out")"
            [ "$(grep -c '^PASS reference\.\(matrix\|scalar\|vector\): ' "$out")" -eq 3 ] ||
                fail "$what: $class: $(cat "$out")"
            [ "$(tail -n 1 "$out")" = "3 passed, 0 failed" ] || fail "$what: $class summary: $(tail -n 1 "$out")"
        done
        run --plugin "$broken" conformance BrokenAdamEps --reference "$ref"
        [ "$rc" -eq 1 ] || fail "$what: BrokenAdamEps exit $rc: $(cat "$out")"
        grep -qE '^FAIL reference\.vector: expected element [0-9]+ = [-0-9.e]+ \(expect/vector\) within atol [0-9.e-]+ \+ rtol [0-9.e-]+ \* \|expected\| after 5 steps; seen [-0-9.e]+, [0-9]+ of 7 elements outside$' "$out" ||
            fail "$what: BrokenAdamEps not caught on the vector: $(cat "$out")"
        tail -n 1 "$out" | grep -qE '^[0-9]+ passed, [1-9][0-9]* failed$' || fail "$what: BrokenAdamEps summary: $(tail -n 1 "$out")"
        echo "ok: $what: Adam and PluginAdam pass, BrokenAdamEps fails"
    done
done

# The same REF with the default epsilon from --config: the flag overrides
# REF's config, and the rule no longer matches.
run conformance Adam --reference "$ref" --config '{"epsilon": 1e-7}'
[ "$rc" -eq 1 ] && grep -q '^FAIL reference\.' "$out" || fail "--config did not override REF's config: $(cat "$out")"
# --rtol and --atol override REF's: huge ones pass even the broken rule.
run --plugin "$broken" conformance BrokenAdamEps --reference "$ref" --rtol 1 --atol 1
[ "$rc" -eq 0 ] && grep -q '^PASS reference\.vector: .*atol 1 + rtol 1 ' "$out" || fail "--rtol/--atol: $(cat "$out")"
echo "ok: --config, --rtol and --atol override REF's metadata"

# A crash while stepping is one CRASH line, and the summary counts it
# (--config '{}': BrokenCrash has no epsilon).
run --plugin "$broken" conformance BrokenCrash --reference "$ref" --config '{}'
[ "$rc" -eq 1 ] || fail "BrokenCrash: exit $rc"
grep -qE '^CRASH reference \(SIG[A-Z]+\): while stepping along the reference trajectory' "$out" || fail "BrokenCrash: $(cat "$out")"
tail -n 1 "$out" | grep -qE '^0 passed, 0 failed, 1 crashed$' || fail "BrokenCrash summary: $(tail -n 1 "$out")"
echo "ok: a crash along the reference is reported as CRASH"

# Bad REFs: each a message on stderr naming what is wrong, exit non-zero.
"$py" - "$src/tools" "$ref" "$tmp" <<'PY' || fail "cannot write the bad REFs"
import json, struct, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from make_reference import save_safetensors
ref, tmp = sys.argv[2], sys.argv[3]
with open(ref, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
meta = header.pop("__metadata__")
t = {}
for name, e in header.items():
    a, b = e["data_offsets"]
    dt = {"F32": np.float32, "F64": np.float64, "I64": np.int64}[e["dtype"]]
    t[name] = np.frombuffer(data[a:b], dtype=dt).reshape(e["shape"])
def save(name, tensors, md=meta):
    save_safetensors(f"{tmp}/{name}.safetensors", tensors, md)
save("no_expect", {k: v for k, v in t.items() if k != "expect/vector"})
save("wrong_shape", dict(t, **{"expect/matrix": np.zeros((3, 4))}))
save("no_rtol", t, {k: v for k, v in meta.items() if k != "rtol"})
save("bad_rtol", t, dict(meta, rtol="tight"))
save("stray", dict(t, **{"other/x": np.zeros(2)}))
save("expect_unknown", dict(t, **{"expect/nothing": np.zeros(2)}))
save("no_grads", {k: v for k, v in t.items() if not k.startswith("grads/")})
save("int_expect", dict(t, **{"expect/vector": np.zeros(7, dtype=np.int64)}))
save("half_init", dict(t, **{"init/vector": t["init/vector"].astype(np.float16)}))
PY
while IFS='|' read -r case want; do
    "$optim" conformance Adam --reference "$tmp/$case.safetensors" >"$out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -ne 0 ] || fail "$case: exit 0"
    grep -qF -- "$want" "$tmp/err" || fail "$case: stderr '$(cat "$tmp/err")', expected '$want'"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "$case: $(cat "$tmp/err")"
    grep -q '^PASS' "$out" && fail "$case: a PASS line"
    echo "ok: $case: $(cat "$tmp/err")"
done <<'LIST'
no_expect|REF has no tensor 'expect/vector', expected the variable vector after the last step
wrong_shape|REF tensor 'expect/matrix' has shape [3, 4], expected [6, 4] (the shape of init/matrix)
no_rtol|__metadata__ has no "rtol" (a string such as "1e-6"), and no --rtol was given
bad_rtol|REF __metadata__ rtol 'tight': expected a finite number >= 0
stray|REF tensor 'other/x': expected a name under init/, grads/ or expect/
expect_unknown|REF tensor 'expect/nothing': no variable init/nothing in REF
no_grads|REF has no tensor under grads/, expected at least one step
int_expect|REF tensor 'expect/vector' has dtype
half_init|REF tensor 'init/vector' has dtype float16, expected F32 or F64
LIST
"$optim" conformance Adam --reference "$tmp/no_rtol.safetensors" --rtol 1e-5 >"$out" 2>&1 ||
    fail "no_rtol with --rtol: $(cat "$out")"
"$optim" conformance Adam --reference "$tmp/missing.safetensors" >"$out" 2>&1 && fail "a missing REF passed"
grep -q "REF .*missing.safetensors" "$out" || fail "missing REF: $(cat "$out")"
"$optim" conformance Adam --rtol 1e-5 >/dev/null 2>"$out" && fail "--rtol without --reference accepted"
grep -q -- "--rtol and --atol go with --reference" "$out" || fail "--rtol alone: $(cat "$out")"
echo "ok: bad REFs and options refused with a message"
echo "1 passed, 0 failed"
