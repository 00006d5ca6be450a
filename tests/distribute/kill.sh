#!/usr/bin/env bash
# A rank that dies (SIGKILL) or stops answering (SIGSTOP) mid-run: the job
# ends with a non-zero status and a message saying what happened, within
# 30 s. The stopped rank is caught by the group's own timeout
# (--replica-timeout 5), the dead one by mpirun. usage: kill.sh OPTIM
set -u
optim=$1
tmp=$(mktemp -d)
job=
trap '[ -n "$job" ] && kill -9 "$job" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0

# A small IDX data set (1024 random 28x28 images, labels 0-9), so that the
# ranks start at once even in a sanitizer build.
# shellcheck source=tinydata.sh
. "$(dirname "$0")/tinydata.sh"
tiny_data "$tmp"

# scenario SIGNAL PATTERN: start 2 ranks, send SIGNAL to one once training
# runs, expect the job to end within 30 s with PATTERN in its output.
scenario() {
    mpirun --allow-run-as-root --oversubscribe -np 2 "$optim" train --data "$tmp" --epochs 100000 --batch-size 64 --threads 1 \
        --replica-timeout 5 \
        >"$tmp/out" 2>&1 &
    job=$!
    for _ in $(seq 600); do
        grep -q "replicas=2" "$tmp/out" && [ "$(pgrep -P "$job" | wc -l)" -ge 2 ] && break
        sleep 0.1
    done
    sleep 1
    local victim
    victim=$(pgrep -P "$job" | tail -n 1)
    [ -n "$victim" ] || { echo "FAIL: $1: no rank process found"; fail=$((fail + 1)); return; }
    kill "-$1" "$victim"
    local start=$SECONDS
    for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$job" 2>/dev/null; then
        echo "FAIL: $1: the job still runs 30 s after it"
        kill -9 "$victim" "$job" 2>/dev/null
        fail=$((fail + 1))
        return
    fi
    wait "$job"
    local rc=$?
    job=
    tr '\r' '\n' <"$tmp/out" | grep -vE '^ *[0-9]+/[0-9]+ \[' | grep -v '^Fashion' | grep . | tail -n 8
    echo "$1: exit status $rc after $((SECONDS - start)) s"
    if [ "$rc" -eq 0 ]; then echo "FAIL: $1: exit status 0"; fail=$((fail + 1)); return; fi
    if ! grep -qE "$2" "$tmp/out"; then echo "FAIL: $1: no message matching '$2'"; fail=$((fail + 1)); return; fi
    echo "ok: $1"
}
scenario KILL "exited on signal 9"
scenario STOP "waited more than 5 s"
echo "$((2 - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
