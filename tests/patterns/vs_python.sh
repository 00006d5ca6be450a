#!/usr/bin/env bash
# Name patterns match as Python's re does (src/core/pyre.c), checked against
# Python itself: random patterns built from the constructs Keras users write
# (escapes, classes, brackets, groups, anchors, lazy and counted repeats),
# each that Python compiles tried on ASCII names with re.search and
# re.fullmatch; optim must agree on every pair it accepts (it may refuse a
# construct it cannot express, with a message: test_patterns_python.c). The
# seed is fixed; OPTIM_PYRE_SEED and OPTIM_PYRE_PATTERNS change the draw.
#   tests/patterns/vs_python.sh DRIVER        (exit 77 without python3)
set -u
driver=$1
py=$(command -v python3 || true)
[ -n "$py" ] || { echo "skip: no python3 (Python's re is the reference)"; exit 77; }
"$py" - "$driver" <<'PY'
import os, random, re, subprocess, sys, warnings
warnings.simplefilter("ignore")
random.seed(int(os.environ.get("OPTIM_PYRE_SEED", "5")))
atoms = ["a", "b", "d", "_", "1", "2", "/", ".", r"\d", r"\w", r"\s", r"\D", r"\W", r"\S",
         r"\b", r"\.", "[a-c]", r"[\d_]", r"[^\d]", r"[\w.]", "[]a]", r"[\]]", "(?:a|b)",
         "(a|1)", "^", "$", r"\A", r"\Z", "x{,2}", "{", "}", "a{2}", " ", "é", r"[\-x]"]
quants = ["", "", "", "*", "+", "?", "*?", "+?", "??", "{1,2}", "{2}?"]
names = ["a", "ab", "a1/b", "d_12", "dense_1/kernel", "a.b", "b b", "", "aaa", "1", "__",
         "a]", "x{", "}", "x-"]
cases = []
for _ in range(int(os.environ.get("OPTIM_PYRE_PATTERNS", "20000"))):
    pat = "".join(random.choice(atoms) + random.choice(quants) for _ in range(random.randint(1, 5)))
    try:
        rx = re.compile(pat)
    except re.error:
        continue
    for name in random.sample(names, 3):
        cases.append((pat, name, int(bool(rx.search(name))), int(bool(rx.fullmatch(name)))))
stdin = "".join("%s\t%s\n" % (p, n) for p, n, _, _ in cases).encode()
run = subprocess.run([sys.argv[1]], input=stdin, capture_output=True)
out = run.stdout.decode().splitlines()
if run.returncode or len(out) != len(cases):
    sys.exit("FAIL: the driver exited %d with %d lines for %d cases: %s"
             % (run.returncode, len(out), len(cases), run.stderr.decode()))
refused = bad = 0
for (p, n, s, f), o in zip(cases, out):
    if o == "E":
        refused += 1
    elif o != "R %d %d" % (s, f):
        bad += 1
        if bad <= 10:
            print("FAIL: %r on %r: Python re.search %d, re.fullmatch %d; optim %s" % (p, n, s, f, o[2:]))
print("%d pattern/name pairs, %d refused, %d differ from Python %s" % (len(cases), refused, bad,
      sys.version.split()[0]))
if refused > len(cases) // 10:
    sys.exit("FAIL: optim refused %d of %d pairs, expected under a tenth" % (refused, len(cases)))
sys.exit(1 if bad else 0)
PY
rc=$?
[ "$rc" = 0 ] && echo "1 passed, 0 failed"
exit "$rc"
