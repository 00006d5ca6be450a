#!/usr/bin/env bash
# Issue 21's targets in one run: every built-in optimizer on one float32
# variable of 16.7M parameters (Adam also with clipnorm and global_clipnorm;
# and bf16 Adam, and Adam on 10,000 variables
# of 1,000 against one of 10M), with the default build at each instruction-
# set level the CPU has (OPTIM_ISA=sse2, avx2, avx512) and, when given, an
# -DOPTIM_NATIVE=ON build, alternating the binaries round after round. Each
# `optim bench` call measures its own triad and takes the median of RUNS
# steps; per case and binary the table shows the median over ROUNDS of the
# ratio to the triad (at the class's declared bytes per parameter) and of
# the step time, and default/native, the native build's median ratio over
# the default build's (at the CPU's own level): the step-time ratio with
# each step normalised by the triad run just before it, which a machine
# whose bandwidth drifts from one call to the next leaves alone.
#   OMP_NUM_THREADS=2 bench/isa_levels.sh [ROUNDS [DEFAULT_OPTIM [NATIVE_OPTIM]]]
#   (cmake -S . -B build-native -DOPTIM_NATIVE=ON && cmake --build build-native)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
optim=${2:-build/optim}
native=${3:-}
threads=${OMP_NUM_THREADS:-2}
configs=(sgd '{"class_name":"SGD","config":{"momentum":0.9}}' adam adamw adamax nadam rmsprop
    adagrad adadelta ftrl lion lamb adafactor muon ScheduleFreeAdamW lazyadam
    '{"class_name":"Adam","config":{"clipnorm":1.0}}' '{"class_name":"Adam","config":{"global_clipnorm":1.0}}')
levels=()
for l in sse2 avx2 avx512; do
    OPTIM_ISA=$l "$optim" version >/dev/null 2>&1 && levels+=("$l")
done
echo "levels: ${levels[*]}; native: ${native:-none}; $rounds rounds, $threads threads" >&2
one() { # TAG OPTIM [ENV...] : the cases, as JSON lines tagged with TAG
    local tag=$1 bin=$2
    shift 2
    {
        env "$@" "$bin" bench --json --threads "$threads" --runs 7 "${configs[@]}"
        env "$@" "$bin" bench --json --threads "$threads" --runs 7 --dtype bf16 adam
        env "$@" "$bin" bench --json --threads "$threads" --runs 7 --size 10000000 adam
        env "$@" "$bin" bench --json --threads "$threads" --runs 7 --size 10000000 --tensors 10000 adam
    } | sed "s/^{/{\"tag\": \"$tag\", /"
}
for _ in $(seq "$rounds"); do
    for l in "${levels[@]}"; do one "$l" "$optim" OPTIM_ISA="$l"; done
    [ -z "$native" ] || one native "$native"
done | /usr/bin/python3 -c '
import json, sys, statistics
rows, tags = {}, []
for line in sys.stdin:
    m = json.loads(line)
    key = "%s %s %s x%d" % (m["config"][:40], m["dtype"], m["elements"], m["tensors"])
    rows.setdefault(key, {}).setdefault(m["tag"], []).append((m["ratio"], m["median_seconds"], m["bytes_per_param"]))
    if m["tag"] not in tags:
        tags.append(m["tag"])
top = ([t for t in tags if t != "native"] or ["native"])[-1]
print("%-60s %s" % ("case", "  ".join("%-17s" % t for t in tags)) + ("  default/native" if "native" in tags else ""))
for key, by in rows.items():
    cells, med = [], {}
    for t in tags:
        r = by.get(t, [])
        if not r:
            cells.append("%-17s" % "-")
            continue
        ratio = statistics.median(x[0] for x in r)
        med[t] = ratio
        ms = 1e3 * statistics.median(x[1] for x in r)
        cells.append("%.2f %6.2f ms %2.0fB" % (ratio, ms, r[0][2]))
    line = "%-60s %s" % (key, "  ".join(cells))
    if "native" in med and top in med:
        line += "  %.2f" % (med["native"] / med[top])
    print(line)
'
