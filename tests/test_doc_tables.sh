#!/usr/bin/env bash
# docs/optimizers.md's parameter tables are what build/doc_tables
# (scripts/doc_tables.c) generates from the class tables. When this fails,
# regenerate them:
#   build/doc_tables docs/optimizers.md > /tmp/o.md && mv /tmp/o.md docs/optimizers.md
set -u
gen=$(dirname "$1")/doc_tables
doc=$(cd "$(dirname "$0")/.." && pwd)/docs/optimizers.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
[ -x "$gen" ] || fail "$gen is not built (cmake --build build --target doc_tables)"

# Every built-in optimizer section has a generated table: as many as the
# registry lines of OPTIM_BUILTIN_OPTIMIZERS (include/optim/optimizers.h).
reg=$(dirname "$doc")/../include/optim/optimizers.h
want=$(sed -n '/^#define OPTIM_BUILTIN_OPTIMIZERS/,/end of the list/p' "$reg" | grep -c 'X(optim_')
[ "$want" -ge 15 ] || fail "$reg: $want built-in optimizers read, expected 15 or more"
n=$(grep -c '^<!-- params: ' "$doc")
[ "$n" -eq "$want" ] || fail "$doc has $n generated tables, expected $want (one per optimizer section)"

"$gen" "$doc" >"$tmp/gen.md" 2>"$tmp/err" || fail "doc_tables failed: $(cat "$tmp/err")"
diff -u "$doc" "$tmp/gen.md" >"$tmp/diff" ||
    fail "docs/optimizers.md drifted from the class tables (regenerate: see the top of $0):
$(cat "$tmp/diff")"

# The check can fail: a changed default, a dropped row, an edited header
# and a stale row outside any region's generated lines are each caught.
check_caught() { # SED_SCRIPT WHAT
    sed "$1" "$doc" >"$tmp/bad.md"
    cmp -s "$tmp/bad.md" "$doc" && fail "the alteration '$2' changed nothing"
    "$gen" "$tmp/bad.md" >"$tmp/regen.md" 2>"$tmp/err" || fail "doc_tables failed on '$2': $(cat "$tmp/err")"
    cmp -s "$tmp/bad.md" "$tmp/regen.md" && fail "an altered copy ($2) was not caught"
    cmp -s "$tmp/regen.md" "$doc" || fail "regenerating the altered copy ($2) did not restore the doc"
}
check_caught 's/^| beta_2 | float | 0.999 |/| beta_2 | float | 0.99 |/' "changed default"
check_caught '/^| amsgrad |/d' "dropped row"
check_caught 's/^| key | type | default |/| key | kind | default |/' "edited header"
check_caught '0,/^<!-- end params -->/s//| stale | float | 1.0 | any |  |  |\n&/' "extra row"

# Bad regions are refused, naming the line.
printf '<!-- params: NoSuchClass -->\n<!-- end params -->\n' >"$tmp/unknown.md"
if "$gen" "$tmp/unknown.md" >/dev/null 2>"$tmp/err"; then fail "an unknown class was accepted"; fi
grep -q "unknown.md:1: class 'NoSuchClass'" "$tmp/err" || fail "unknown class: $(cat "$tmp/err")"
printf 'x\n<!-- params: Adam -->\n| old |\n' >"$tmp/open.md"
if "$gen" "$tmp/open.md" >/dev/null 2>"$tmp/err"; then fail "an unclosed region was accepted"; fi
grep -q "open.md:2: region opened here" "$tmp/err" || fail "unclosed region: $(cat "$tmp/err")"
echo "1 passed, 0 failed"
