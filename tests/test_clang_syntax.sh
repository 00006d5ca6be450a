#!/usr/bin/env bash
# Every C file of the build compiles with clang, no warning (the build's own
# flags from compile_commands.json, -fsyntax-only -Werror): `CC=clang cmake`
# builds the default targets. Without clang, the compiler of the build without
# -fopenmp (which hides a missing _POSIX_C_SOURCE under gcc) and
# -Werror=implicit-function-declaration.
# usage: test_clang_syntax.sh OPTIM (its directory is the build tree)
set -u
build=$(cd "$(dirname "$1")" && pwd)
db=$build/compile_commands.json
[ -f "$db" ] || { echo "FAIL: no $db (CMAKE_EXPORT_COMPILE_COMMANDS)"; exit 1; }
clang=$(command -v clang || true)
/usr/bin/env python3 - "$db" "$clang" <<'PY'
import json, os, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
db, clang = sys.argv[1], sys.argv[2]
def command(e):
    words = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
    out, skip = [], False
    for w in words[1:]:
        if skip: skip = False; continue
        if w == "-o": skip = True; continue
        if w == "-c": continue
        if w.startswith("-fsanitize") or w.startswith("-fprofile"): continue
        if not clang and w.startswith("-fopenmp"): continue
        if clang and w.startswith("-mmemset-strategy"): continue  # GCC-only tuning (apply.c)
        out.append(w)
    extra = ["-Werror", "-Wno-unknown-warning-option"] if clang else ["-Werror=implicit-function-declaration"]
    return [clang or words[0]] + out + ["-fsyntax-only"] + extra
# One compiler run per 16 files with the same flags, two runs at a time.
groups = {}
for e in {e["file"]: e for e in json.load(open(db))}.values():
    words = command(e)
    key = (e["directory"], tuple(w for w in words if w != e["file"]))
    groups.setdefault(key, []).append(e["file"])
groups = {(k, i): fs[i:i + 16] for k, fs in groups.items() for i in range(0, len(fs), 16)}
def check(item):
    ((directory, words), _), files = item
    r = subprocess.run(list(words) + files, cwd=directory, capture_output=True, text=True)
    return files, r.returncode, r.stderr
failed = total = 0
with ThreadPoolExecutor(2) as ex:
    for files, rc, err in ex.map(check, groups.items()):
        total += len(files)
        if rc:
            failed += 1
            print(f"FAIL: {' '.join(os.path.relpath(f) for f in files)}:\n{err.strip()[:3000]}")
how = "clang" if clang else "the build compiler, no OpenMP"
print(f"{total} files in {len(groups)} compiler runs ({how}): {len(groups) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
