#!/usr/bin/env bash
# Every instruction-set level gives the same bits (optim/isa.h): under
# OPTIM_ISA=avx2 and avx512, where this CPU has them, the outputs must equal
# OPTIM_ISA=sse2's byte for byte:
#  - `optim replay` of every config in the replay set (test_replay_all keeps
#    each OUT with OPTIM_TEST_REPLAY_OUT), on 1 and 3 OpenMP threads;
#  - every built-in class and wrapper, dense and sparse, plain and with each
#    clipping, on 1, 2 and 3 threads (test_threads_bitwise's digest of its
#    tensors, OPTIM_TEST_DIGEST).
# A level the CPU lacks is skipped with a line that says so.
#   tests/isa/bitwise.sh OPTIM TEST_REPLAY_ALL TEST_THREADS_BITWISE
set -u
[ $# -eq 3 ] || { echo "usage: bitwise.sh OPTIM TEST_REPLAY_ALL TEST_THREADS_BITWISE" >&2; exit 2; }
cli=$1 replay=$2 threads=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# The level names are checked whatever the CPU: an unknown one is refused
# with a message that names it.
if out=$(OPTIM_ISA=sse3 "$cli" version 2>&1); then
    fail "OPTIM_ISA=sse3 was accepted: $out"
else
    case $out in *"OPTIM_ISA=sse3"*"expected sse2, avx2 or avx512"*) echo "ok: OPTIM_ISA=sse3 refused: $out" ;;
        *) fail "OPTIM_ISA=sse3: unexpected message: $out" ;; esac
fi
if ! OPTIM_ISA=sse2 "$cli" version --json | grep -q '"isa": "sse2"'; then
    echo "skip: this build has no run-time levels ($("$cli" version --json))"
    exit 77
fi

run_level() { # LEVEL: the outputs into $tmp/LEVEL
    local l=$1
    for t in 1 3; do
        mkdir -p "$tmp/$l/replay-$t"
        OPTIM_ISA=$l OMP_NUM_THREADS=$t OPTIM_TEST_REPLAY_OUT="$tmp/$l/replay-$t" "$replay" \
            >"$tmp/$l/replay-$t.log" 2>&1 || { fail "$l: test_replay_all failed on $t threads:"; tail -20 "$tmp/$l/replay-$t.log"; }
    done
    OPTIM_ISA=$l OPTIM_TEST_DIGEST="$tmp/$l/digest" "$threads" >"$tmp/$l/threads.log" 2>&1 ||
        { fail "$l: test_threads_bitwise failed:"; tail -20 "$tmp/$l/threads.log"; }
}

run_level sse2
nrows=$(ls "$tmp/sse2/replay-1" | wc -l)
ndig=$(wc -l <"$tmp/sse2/digest")
[ "$nrows" -gt 50 ] || fail "sse2: only $nrows replay outputs"
[ "$ndig" -gt 1000 ] || fail "sse2: only $ndig digest lines"
for l in avx2 avx512; do
    if ! msg=$(OPTIM_ISA=$l "$cli" version 2>&1); then
        echo "skip: level $l: $msg"
        continue
    fi
    before=$failed
    run_level "$l"
    for t in 1 3; do
        for f in "$tmp/sse2/replay-$t"/*.st; do
            cmp -s "$f" "$tmp/$l/replay-$t/$(basename "$f")" ||
                fail "$l: replay $(basename "$f") on $t threads differs from sse2's"
        done
    done
    if ! diff -q "$tmp/sse2/digest" "$tmp/$l/digest" >/dev/null; then
        fail "$l: tensors differ from sse2's:"
        diff "$tmp/sse2/digest" "$tmp/$l/digest" | head -6
    fi
    [ "$failed" -eq "$before" ] && echo "ok: $l equals sse2: $nrows replay configs on 1 and 3 threads, $ndig tensors of the thread cases"
done
echo "$failed failed"
[ "$failed" -eq 0 ]
