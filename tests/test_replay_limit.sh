#!/usr/bin/env bash
# optim replay refuses an OUT whose safetensors header would pass the limit
# (100,000,000 bytes) before the first step, not after the whole run (issue
# 22, D13e): 300 Adam (amsgrad) variables with 100,000-byte names make an
# OUT header of about 120 MB. The message names the limit, the size and
# what to do; OUT is not created. A small replay still works.
set -u
optim=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
cat >gen.py <<'PY'
import json, struct, sys
def st(path, tensors):
    hdr, off, data = {}, 0, b''
    for name, vals in tensors:
        b = struct.pack('<%df' % len(vals), *vals)
        hdr[name] = {"dtype": "F32", "shape": [len(vals)], "data_offsets": [off, off + len(b)]}
        off += len(b)
        data += b
    h = json.dumps(hdr, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(h)) + h + data)
n, length, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
names = ['v%05d_' % i + 'x' * length for i in range(n)]
st('init.safetensors', [(m, [1.0, 2.0]) for m in names])
st('grads.safetensors', [('%d/%s' % (k, m), [0.5, -0.25]) for k in range(steps) for m in names])
cfg = {"class_name": "Adam", "config": {"learning_rate": 0.01, "amsgrad": True}}
json.dump(cfg, open('cfg.json', 'w'))
PY
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" gen.py 300 100000 3 || fail "cannot write the inputs"
timeout 60 "$optim" replay cfg.json init.safetensors grads.safetensors out.safetensors 2>err
rc=$?
[ "$rc" -eq 1 ] || fail "replay of a too large OUT exited $rc, expected 1: $(cat err)"
[ -e out.safetensors ] && fail "replay created OUT"
for pat in "before any step" "limit of 100000000" "header of at least 120" "shorter names"; do
    grep -q "$pat" err || fail "expected '$pat' in: $(cat err)"
done
"$py" gen.py 3 10 2 || fail "cannot write the small inputs"
"$optim" replay cfg.json init.safetensors grads.safetensors out.safetensors 2>err ||
    fail "small replay: $(cat err)"
[ -s out.safetensors ] || fail "small replay wrote no OUT"
echo "PASS"
