#!/usr/bin/env bash
# A rank that is started late, or stopped (SIGSTOP) right after launch,
# while the others are inside MPI start-up: the job ends within
# --replica-timeout + 5 s (here 5 + 5) with a non-zero status and the
# message "replicas did not all start within 5 s" (docs/distributed.md).
# Before the watchdog, MPI_Init_thread waited forever. usage: startup.sh OPTIM
set -u
optim=$1
here=$(cd "$(dirname "$0")" && pwd)
. "$here/tinydata.sh"
tmp=$(mktemp -d)
job=
trap '[ -n "$job" ] && kill -9 "$job" 2>/dev/null; rm -rf "$tmp"' EXIT
tiny_data "$tmp"
c=(train --data "$tmp" --epochs 1 --hidden 16 --threads 1 --replica-timeout 5)
limit=10 # --replica-timeout + 5 s
fail=0

# ends NAME START: waits (up to 60 s) for $job, then checks how it ended.
ends() {
    for _ in $(seq 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$job" 2>/dev/null; then
        echo "FAIL: $1: the job still runs 60 s after launch"
        pkill -9 -P "$job"; kill -9 "$job" 2>/dev/null
        fail=$((fail + 1))
        return
    fi
    wait "$job"
    local rc=$? took=$(($(date +%s) - $2))
    job=
    grep -E "rank [0-9]|waited" "$tmp/out" | head -n 3
    echo "$1: exit status $rc after $took s"
    if [ "$rc" -eq 0 ]; then echo "FAIL: $1: exit status 0"; fail=$((fail + 1))
    elif [ "$took" -gt "$limit" ]; then echo "FAIL: $1: took $took s > $limit s"; fail=$((fail + 1))
    elif ! grep -qE "$3" "$tmp/out"; then
        echo "FAIL: $1: no message matching '$3'"; fail=$((fail + 1))
    else echo "ok: $1"; fi
}

# Rank 1 starts 1000 s late.
start=$(date +%s)
mpirun --allow-run-as-root --oversubscribe -np 1 "$optim" "${c[@]}" : \
    -np 1 sh -c 'sleep 1000; exec "$0" "$@"' "$optim" "${c[@]}" >"$tmp/out" 2>&1 &
job=$!
ends "late rank" "$start" "rank 0: replicas did not all start within 5 s"

# Rank 1 stopped as soon as it runs optim (inside MPI start-up, or, on a
# fast machine, just after: then the group's own timeout names the wait).
# Only a child that has exec'd optim is stopped: one stopped between
# mpirun's fork and exec hangs mpirun itself (it waits on the exec pipe),
# which no rank can end (CI, loaded machine, once).
start=$(date +%s)
mpirun --allow-run-as-root --oversubscribe -np 2 "$optim" "${c[@]}" >"$tmp/out" 2>&1 &
job=$!
bin=$(readlink -f "$optim")
ranks() { for p in $(pgrep -P "$job"); do [ "$(readlink -f /proc/$p/exe)" = "$bin" ] && echo "$p"; done; }
for _ in $(seq 1000); do [ "$(ranks | wc -l)" -ge 2 ] && break; sleep 0.01; done
victim=$(ranks | tail -n 1)
[ -n "$victim" ] || echo "FAIL: stopped rank: no rank running $bin within 10 s"
[ -n "$victim" ] && kill -STOP "$victim"
ends "stopped rank" "$start" "replicas did not all start within 5 s|waited more than 5 s"
echo "$((2 - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
