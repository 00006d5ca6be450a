#!/usr/bin/env bash
# optim train's weights are bitwise the same on 1, 2 and 3 threads (the
# GEMMs run over a fixed tile grid, src/tape/matmul.c), with Adam and with
# Muon (whose Newton-Schulz step is itself GEMMs).
set -u
optim=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
for cfg in adam muon; do
    for t in 1 2 3; do
        OMP_NUM_THREADS=$t "$optim" train --epochs 2 --limit 3000 --optimizer $cfg \
            --save-weights "$tmp/$cfg$t" >"$tmp/out" 2>"$tmp/err" || fail "train $cfg on $t threads: $(cat "$tmp/err")"
    done
    for t in 2 3; do
        cmp "$tmp/${cfg}1" "$tmp/$cfg$t" || fail "$cfg: 1 and $t threads gave different weights"
    done
done
echo "ok: the same weights on 1, 2 and 3 threads"
