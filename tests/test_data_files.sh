#!/usr/bin/env bash
# `optim train --data FILE` (tools/dataset_files.c, src/io/npy.c, npz.c,
# csv.c): NumPy writes the same small data set as IDX files, .npz (np.savez
# and np.savez_compressed), safetensors and CSV; each trains to the same
# weights as the IDX directory (cmp of --save-weights), and bad files are
# refused with a message naming the problem. Skipped (77) without
# python3 and NumPy.
#   tests/test_data_files.sh path/to/optim
set -u
optim="${1:?usage: test_data_files.sh OPTIM}"
py=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import numpy' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "skipped: no python3 with numpy"; exit 77; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$py" - "$dir" <<'EOF' || { echo "FAIL: the fixtures"; exit 1; }
import json, struct, sys, zipfile
import numpy as np
d = sys.argv[1]
rng = np.random.default_rng(7)
xt = rng.integers(0, 256, (300, 6, 6), dtype=np.uint8); yt = rng.integers(0, 10, 300)
xs = rng.integers(0, 256, (80, 6, 6), dtype=np.uint8); ys = rng.integers(0, 10, 80)
import os
os.mkdir(d + "/idx")
def idx(path, a):
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 8, a.ndim]) + b"".join(struct.pack(">I", n) for n in a.shape))
        f.write(a.astype(np.uint8).tobytes())
idx(d + "/idx/train-images-idx3-ubyte", xt); idx(d + "/idx/train-labels-idx1-ubyte", yt)
idx(d + "/idx/t10k-images-idx3-ubyte", xs); idx(d + "/idx/t10k-labels-idx1-ubyte", ys)
np.savez(d + "/d.npz", x_train=xt, y_train=yt, x_test=xs, y_test=ys)
np.savez_compressed(d + "/c.npz", x_train=xt, y_train=yt.astype(np.float32), x_test=xs,
                    y_test=ys.astype(np.int32))
# Floats as the command makes them from uint8: v * (1 / 255) in double, then float32.
f = lambda x: (x.astype(np.float64) * (1.0 / 255.0)).astype(np.float32)
np.savez(d + "/f.npz", x_train=f(xt), y_train=yt, x_test=f(xs), y_test=ys)
np.savez(d + "/be.npz", x_train=f(xt).astype(">f4"), y_train=yt.astype(">i8"), x_test=f(xs),
         y_test=ys)
def st(path, arrays):
    header, blobs, at = {}, [], 0
    for name, a in arrays.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": {"float32": "F32", "int64": "I64"}[str(a.dtype)],
                        "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b); at += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
st(d + "/d.safetensors", {"x_train": f(xt), "y_train": yt, "x_test": f(xs), "y_test": ys})
def csv(path, x, y, header, at=18):
    x = f(x).reshape(len(x), -1)
    with open(path, "w") as out:
        if header:
            out.write(",".join(["a%d" % i for i in range(18)] + ["label"] +
                              ["b%d" % i for i in range(18)]) + "\n")
        for r, l in zip(x, y):
            v = [repr(float(e)) for e in r]
            out.write(",".join(v[:at] + [str(l)] + v[at:]) + "\r\n")
csv(d + "/train.csv", xt, yt, True); csv(d + "/test.csv", xs, ys, True)
csv(d + "/last.csv", xt, yt, False, 36); csv(d + "/test18.csv", xs, ys, False)
# Bad files.
raw = open(d + "/d.npz", "rb").read()
open(d + "/truncated.npz", "wb").write(raw[:len(raw) // 2])
open(d + "/magic.npz", "wb").write(b"PK\x03\x04" + b"\0" * 60)
np.savez(d + "/fortran.npz", x_train=np.asfortranarray(f(xt).reshape(300, 36)), y_train=yt,
         x_test=xs, y_test=ys)
np.savez(d + "/rows.npz", x_train=xt, y_train=yt[:299], x_test=xs, y_test=ys)
np.savez(d + "/dtype.npz", x_train=xt.astype(np.complex64), y_train=yt, x_test=xs, y_test=ys)
np.savez(d + "/nox.npz", y_train=yt, x_test=xs, y_test=ys)
np.savez(d + "/notest.npz", x_train=xt, y_train=yt)
np.savez(d + "/range.npz", x_train=xt, y_train=yt + 5, x_test=xs, y_test=ys)
np.savez(d + "/whole.npz", x_train=xt, y_train=yt + 0.5, x_test=xs, y_test=ys)
np.savez(d + "/shape.npz", x_train=xt, y_train=yt, x_test=xs.reshape(80, 36), y_test=ys)
np.save(d + "/lone.npy", xt)
# The central directory's local-header offset of the first member (offset 42 of the entry).
cd = raw.rindex(b"PK\x01\x02", 0, raw.rindex(b"PK\x05\x06"))
first = raw.index(b"PK\x01\x02")
bad = bytearray(raw); bad[first + 42:first + 46] = struct.pack("<I", 0x7FFFFFF0)
open(d + "/offset.npz", "wb").write(bytes(bad))
bad = bytearray(raw); e = raw.rindex(b"PK\x05\x06"); bad[e + 16:e + 20] = struct.pack("<I", len(raw))
open(d + "/cdoffset.npz", "wb").write(bytes(bad))
bad = bytearray(raw); bad[first + 16] ^= 1  # CRC-32
open(d + "/crc.npz", "wb").write(bytes(bad))
open(d + "/text.csv", "w").write("a,b,label\n1,2,3\n1,x,2\n")
open(d + "/ragged.csv", "w").write("1,2,3\n1,2\n")
EOF

run() { # name, args...: trains one epoch, weights to $dir/NAME.st
    local name=$1
    shift
    "$optim" train --epochs 1 --hidden 16 --batch-size 32 --save-weights "$dir/$name.st" "$@" \
        >"$dir/$name.out" 2>"$dir/$name.err" || { fail "$name: $(cat "$dir/$name.err")"; return; }
    tail -n 1 "$dir/$name.out" | grep -q '^test_accuracy=0\.[0-9]*$' ||
        fail "$name: last line $(tail -n 1 "$dir/$name.out")"
}
same() { cmp -s "$dir/$1.st" "$dir/$2.st" || fail "$1 and $2 trained to different weights"; }

run idx --data "$dir/idx"
run npz --data "$dir/d.npz"
run npzc --data "$dir/c.npz"
run npzf --data "$dir/f.npz"
run npzbe --data "$dir/be.npz"
run st --data "$dir/d.safetensors"
run csv --data "$dir/train.csv" --test-data "$dir/test.csv"
run csvi --data "$dir/train.csv" --test-data "$dir/test18.csv" --label-column 18
run csvl --data "$dir/last.csv" --test-data "$dir/test.csv"
run split --data "$dir/notest.npz" --test-data "$dir/d.npz"
for n in npz npzc npzf npzbe st csv csvi csvl split; do same idx $n; done
grep -q "300 training, 0 validation and 80 test examples of 36 features" "$dir/npz.out" ||
    fail "npz: first line $(head -n 1 "$dir/npz.out")"
run limit --data "$dir/d.npz" --limit 100 --validation-split 0.2
grep -q "80 training, 20 validation and 80 test" "$dir/limit.out" ||
    fail "--limit 100 --validation-split 0.2: $(head -n 1 "$dir/limit.out")"

refused() { # file, pattern, [args...]: non-zero exit, message on stderr
    local file=$1 pattern=$2
    shift 2
    if "$optim" train --epochs 1 --hidden 4 --data "$dir/$file" "$@" >"$dir/out" 2>"$dir/err"; then
        fail "$file $*: accepted"
    elif ! grep -q -- "$pattern" "$dir/err"; then
        fail "$file $*: message '$(cat "$dir/err")' lacks '$pattern'"
    fi
}
refused truncated.npz "end of central directory record not found"
refused magic.npz "end of central directory record not found"
refused fortran.npz "fortran_order is True"
refused rows.npz "x_train has 300 rows (shape \[300, 6, 6\]), y_train has 299"
refused dtype.npz "descr '<c8' is not supported"
refused nox.npz "has y_train but no x_train"
refused notest.npz "has no test set (x_test, y_test): give --test-data"
refused range.npz "y_train\[[0-9]*\] is 1[0-4], expected a class from 0 to 9"
refused whole.npz "array 'y_train': element 0 is .*, expected a whole number"
refused shape.npz "test examples have shape \[36\], the training examples \[6, 6\]"
refused lone.npy "a .npy file holds one array"
refused offset.npz "no local header at offset 2147483632"
refused cdoffset.npz "central directory (offset"
refused crc.npz "CRC-32"
refused text.csv "line 3, column 2: 'x' is not a finite number" --test-data "$dir/test.csv"
refused ragged.csv "line 2 has 2 fields, expected 3" --test-data "$dir/test.csv"
refused train.csv "has no test set"
refused train.csv "--label-column 'nope': .* has no column of that name" --label-column nope \
    --test-data "$dir/test.csv"
refused d.npz "--label-column is for CSV files" --label-column 0
refused idx "--test-data is for a --data file" --test-data "$dir/d.npz"
refused missing.npz "--data '.*missing.npz': No such file"

[ $failures -eq 0 ] && echo "ok: --data .npz, safetensors, CSV and their refusals"
exit $((failures > 0))
