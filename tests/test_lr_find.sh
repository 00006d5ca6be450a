#!/usr/bin/env bash
# optim lr-find on 2000 Fashion-MNIST images: Adam's steepest-descent
# suggestion lies in the range docs/training.md documents (1e-4 to 1e-2),
# SGD's is over ten times Adam's (the sweep reaches the optimizer), one
# line per step with the sweep's learning rates, a wrapper's inner
# optimizer is swept, a huge --end-lr stops early on divergence, bad
# inputs give one line on stderr, and --plot writes an 800x500 PNG that
# decodes and holds the curve and both markers in their colours.
set -u
optim=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { "$optim" lr-find --limit 2000 "$@" >"$tmp/out" 2>"$tmp/err" || fail "lr-find $*: $(cat "$tmp/err")"; }
# The value after NAME= on the `suggested` line.
suggested() { sed -n "s|^suggested .*$1=\([^ ]*\).*|\1|p" "$tmp/out"; }
between() { python3 -c "import sys; sys.exit(not ($2 <= float('$1') <= $3))" || fail "$4: $1 not in [$2, $3]"; }

# Adam (the default), with the plot.
run --plot "$tmp/a.png"
grep -q '^suggested learning_rate=[0-9.e+-]* (steepest) minimum/10=[0-9.e+-]*$' "$tmp/out" ||
    fail "no suggested line: $(tail -3 "$tmp/out")"
adam=$(suggested learning_rate)
between "$adam" 1e-4 1e-2 "Adam's steepest"
between "$(suggested minimum/10)" 1e-5 1e-1 "Adam's minimum/10"
# A line per step, at start * (end / start)^(i / 100), until it stopped.
steps=$(grep -c '^step [0-9]*/100 learning_rate=' "$tmp/out")
grep -q '^step 1/100 learning_rate=1.0000e-07 loss=' "$tmp/out" || fail "step 1: $(sed -n 2p "$tmp/out")"
grep -q '^step 51/100 learning_rate=1.0000e-03 loss=' "$tmp/out" || fail "step 51: $(grep '^step 51/' "$tmp/out")"
grep -q '^step 76/100 learning_rate=1.0000e-01 loss=' "$tmp/out" || fail "step 76: $(grep '^step 76/' "$tmp/out")"
if grep -q '^stopped at step' "$tmp/out"; then
    grep -q "^stopped at step $steps of 100: smoothed loss .* exceeds 4x its best" "$tmp/out" ||
        fail "stop line vs $steps steps: $(grep stopped "$tmp/out")"
else
    [ "$steps" -eq 100 ] || fail "$steps step lines, no stop line"
fi
grep -q $'\r' "$tmp/out" && fail "carriage returns in output to a file"
grep -E '^step ' "$tmp/out" | grep -qE 'loss=(nan|inf|-nan)' && fail "non-finite loss before the stop"

# The plot: a PNG of 800x500 whose pixels show the curve (blue) and the
# steepest (orange) and minimum (green) markers, on white.
python3 - "$tmp/a.png" <<'EOF' || fail "plot: see above"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, ihdr = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
    assert zlib.crc32(kind + body) == crc, "bad CRC in %s" % kind
    if kind == b"IHDR": ihdr = struct.unpack(">IIBBBBB", body)
    if kind == b"IDAT": idat += body
    pos += 12 + n
w, h, depth, ctype = ihdr[:4]
assert (w, h) == (800, 500), "size %dx%d" % (w, h)
assert depth == 8 and ctype in (2, 6), "depth %d colour type %d" % (depth, ctype)
bpp = 3 if ctype == 2 else 4
raw, stride, prev, rows = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        p = a + b - c
        pred = [0, a, b, (a + b) // 2, a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c][f]
        line[i] = (line[i] + pred) & 255
    rows.append(line)
    prev = line
px = [tuple(r[i:i + 3]) for r in rows for i in range(0, stride, bpp)]
ink = sum(p != (255, 255, 255) for p in px)
assert 0.01 * w * h < ink < 0.5 * w * h, "%d non-white pixels" % ink
near = lambda p, q: all(abs(x - y) <= 12 for x, y in zip(p, q))
for name, rgb in (("curve", (31, 120, 181)), ("steepest", (255, 128, 13)), ("minimum", (43, 161, 43))):
    count = sum(near(p, rgb) for p in px)
    assert count > 50, "%s colour %s: %d pixels" % (name, rgb, count)
EOF

# SGD's suggestion is much higher than Adam's: the sweep drives its rate.
run --optimizer sgd
between "$(suggested learning_rate)" "$adam * 10" 10 "SGD's steepest against Adam's $adam"
# A wrapper: the inner optimizer's rate is swept (it diverges before 10).
run --optimizer '{"class_name": "Lookahead", "config": {"optimizer": {"class_name": "Adam", "config": {}}}}' --steps 60
grep -q '^suggested learning_rate=' "$tmp/out" || fail "Lookahead: $(tail -2 "$tmp/out")"
# A huge end: the loss diverges within a few steps of the sweep.
run --end-lr 1e8 --steps 100
stop=$(sed -n 's/^stopped at step \([0-9]*\) of 100: .*diverging.*/\1/p' "$tmp/out")
[ -n "$stop" ] && [ "$stop" -lt 100 ] || fail "--end-lr 1e8 did not stop: $(tail -2 "$tmp/out")"
[ "$(grep -c '^step ' "$tmp/out")" -eq "$stop" ] || fail "step lines after the stop"
grep -q '^suggested learning_rate=' "$tmp/out" || fail "no suggestion after the stop"

# Bad inputs: one line on stderr naming the option, exit 1.
bad() {
    local want=$1
    shift
    "$optim" lr-find --limit 200 "$@" >"$tmp/o" 2>"$tmp/e" && fail "lr-find $* succeeded"
    [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "lr-find $*: expected one stderr line: $(cat "$tmp/e")"
    grep -q -- "$want" "$tmp/e" || fail "lr-find $*: $(cat "$tmp/e")"
}
bad "expected start < end" --start-lr 1 --end-lr 1
bad "expected start < end" --start-lr 1e-2 --end-lr 1e-3
bad "--steps '1'" --steps 1
bad "--start-lr '0'" --start-lr 0
bad "unknown argument '--bogus'" --bogus
bad "unknown argument '--epochs'" --epochs 3
bad "--plot" --plot "$tmp/no/such/dir/x.png"
bad "COCOB cannot take a learning rate" --optimizer cocob
bad "holds several optimizers" --optimizer '{"class_name": "MultiOptimizer", "config": {"optimizer_map": {"module": "keras.optimizers", "class_name": "OptimizerMap", "config": {"default_optimizer": {"class_name": "SGD", "config": {}}, "optimizer_map": {"^dense/.*": {"class_name": "Adam", "config": {}}}}, "registered_name": null}}}'
"$optim" lr-find --help | grep -q -- '--start-lr' || fail "--help"
exit 0
