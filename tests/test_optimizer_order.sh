#!/usr/bin/env bash
# src/optimizer/impl.h's dependency order is true: it lists every .c file of
# src/optimizer once, and no file calls a function defined in a file listed
# below it (read from the build's object files with nm), except along the
# cycles impl.h names ("The cycle: a.c <-> b.c"). Then the same check on an
# impl.h with its order reversed must fail (the check can fail).
# usage: test_optimizer_order.sh OPTIM (its directory is the build tree)
set -u
build=$(cd "$(dirname "$1")" && pwd)
src=$(cd "$(dirname "$0")/../src/optimizer" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
objdir=$(find "$build" -type d -path '*optim_obj.dir/src/optimizer' | head -n 1)
[ -n "$objdir" ] || { echo "FAIL: no optim_obj.dir/src/optimizer under $build"; exit 1; }

check() { # check IMPL_H: prints what is wrong, exits 1 if anything is
    /usr/bin/env python3 - "$1" "$src" "$objdir" <<'PY'
import glob, os, re, subprocess, sys
impl, src, objdir = sys.argv[1:4]
text = open(impl).read()
order = re.findall(r"^ \*   (\w+\.c) ", text, re.M)
cycles = {frozenset(p) for p in re.findall(r"The cycle: (\w+\.c) <-> (\w+\.c)", text)}
files = sorted(os.path.basename(f) for f in glob.glob(os.path.join(src, "*.c")))
bad = []
for f in files:
    if order.count(f) != 1:
        bad.append(f"{f} is listed {order.count(f)} times in impl.h's order, expected once")
for f in set(order) - set(files):
    bad.append(f"impl.h lists {f}, which is not in src/optimizer")
defs, uses = {}, {}
for f in files:
    obj = os.path.join(objdir, f + ".o")
    if not os.path.exists(obj):
        bad.append(f"no object file {obj}")
        continue
    for line in subprocess.run(["nm", obj], capture_output=True, text=True).stdout.splitlines():
        w = line.split()
        if len(w) == 3 and w[1] in "TDRBV":
            defs[w[2]] = f
        elif len(w) == 2 and w[0] == "U":
            uses.setdefault(f, set()).add(w[1])
pos = {f: i for i, f in enumerate(order)}
for f, syms in sorted(uses.items()):
    for s in sorted(syms):
        g = defs.get(s)
        if not g or g == f or f not in pos or g not in pos:
            continue
        if pos[g] > pos[f] and frozenset((f, g)) not in cycles:
            bad.append(f"{f} calls {s} of {g}, listed below it")
for line in bad:
    print("  " + line)
sys.exit(1 if bad else 0)
PY
}

failed=0
if ! check "$src/impl.h"; then
    echo "FAIL: src/optimizer/impl.h's order is not true (above)"
    failed=1
fi
# The order reversed: every call now goes to a file below.
/usr/bin/env python3 - "$src/impl.h" "$tmp/impl.h" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
lines = text.split("\n")
idx = [i for i, l in enumerate(lines) if re.match(r"^ \*   \w+\.c ", l)]
names = [lines[i] for i in idx]
for i, l in zip(idx, reversed(names)):
    lines[i] = l
open(sys.argv[2], "w").write("\n".join(lines))
PY
if check "$tmp/impl.h" >/dev/null; then
    echo "FAIL: an impl.h with its order reversed passes the check"
    failed=1
fi
[ "$failed" = 0 ] && echo "ok: src/optimizer/impl.h's order holds"
exit "$failed"
