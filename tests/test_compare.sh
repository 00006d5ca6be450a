#!/usr/bin/env bash
# optim compare on a subset of Fashion-MNIST: one CSV row per optimizer per
# epoch, a PNG of 800x500, and a table whose numbers are the CSV's (final
# train loss, test loss and accuracy = the last validation on the test set,
# best epoch and its time); a config that does not load is reported before
# any training; bad arguments are refused with one line.
set -u
optim=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$optim" compare adam sgd rmsprop --epochs 3 --plot "$tmp/c.png" --history "$tmp/c.csv" --limit 600 \
    >"$tmp/out" 2>"$tmp/err" || fail "compare failed: $(cat "$tmp/err")"
[ "$(head -1 "$tmp/c.csv")" = "optimizer,epoch,loss,accuracy,val_loss,val_accuracy,seconds" ] || fail "CSV header: $(head -1 "$tmp/c.csv")"
[ "$(tail -n +2 "$tmp/c.csv" | wc -l)" -eq 9 ] || fail "expected 9 CSV rows: $(cat "$tmp/c.csv")"
for o in adam sgd rmsprop; do
    [ "$(grep -c "^$o,[123]," "$tmp/c.csv")" -eq 3 ] || fail "expected epochs 1-3 of $o: $(cat "$tmp/c.csv")"
done
# PNG signature and IHDR size 800x500.
[ "$(head -c 8 "$tmp/c.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "c.png is not a PNG"
[ "$(od -An -tu1 -j16 -N8 "$tmp/c.png" | tr -s ' ')" = " 0 0 3 32 0 0 1 244" ] || fail "c.png is not 800x500"

# The table's numbers, recomputed from the CSV with the table's rounding.
awk -F, 'NR == FNR {
        if (FNR == 1) next
        o = $1; last_loss[o] = $3; last_vl[o] = $5; last_va[o] = $6
        if (!(o in best) || $6 > best[o]) { best[o] = $6; be[o] = $2; bs[o] = $7 }
        next
    }
    /^(adam|sgd|rmsprop) / {
        split($0, f, " +")
        o = f[1]; seen++
        want = sprintf("%.4f %.4f %.4f %d %.2f", last_loss[o], last_vl[o], last_va[o], be[o], bs[o])
        got = f[2] " " f[3] " " f[4] " " f[5] " " f[6]
        if (want != got) { print "table row " o ": " got ", CSV gives " want; bad = 1 }
        if (f[7] <= 0) { print "step_ms of " o ": " f[7]; bad = 1 }
    }
    END { if (seen != 3) { print "table has " seen " rows"; bad = 1 } exit bad }' "$tmp/c.csv" "$tmp/out" ||
    fail "the table is not the CSV's: $(cat "$tmp/out")"
grep -q "^== adam: {\"class_name\":\"Adam\"" "$tmp/out" || fail "no header line for adam"

# A config that fails to load is reported before any training.
if "$optim" compare adam '{"class_name": "SGD", "config": {"momentum": 3}}' nosuch --limit 100 >"$tmp/o" 2>"$tmp/e"; then
    fail "compare with bad configs succeeded"
fi
grep -q "^== " "$tmp/o" && fail "trained before reporting the bad configs: $(cat "$tmp/o")"
grep -q "momentum" "$tmp/e" || fail "the bad momentum is not named: $(cat "$tmp/e")"
grep -q "nosuch" "$tmp/e" || fail "the unknown name is not named: $(cat "$tmp/e")"
grep -q "2 of 3 configs did not load" "$tmp/e" || fail "no summary: $(cat "$tmp/e")"

for args in "adam" "adam sgd --epochs 0" "adam sgd --bogus 1" "adam sgd --hidden 1,,2" "adam sgd --limit" \
    "adam sgd --monitor speed --early-stopping 1" "adam sgd --validation-split 1.5"; do
    # shellcheck disable=SC2086
    if "$optim" compare $args >"$tmp/o" 2>"$tmp/e"; then fail "compare $args succeeded"; fi
    [ "$(wc -l <"$tmp/e")" -eq 1 ] || fail "compare $args: expected one stderr line: $(cat "$tmp/e")"
done
"$optim" compare --help | grep -q -- "--history CSV" || fail "--help does not list --history"
echo "1 passed, 0 failed"
