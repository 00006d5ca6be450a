#!/usr/bin/env bash
# The command's own reads and writes (docs/reliability.md): a CONFIG that is
# a FIFO is refused at once (it used to block forever), every subcommand
# that prints exits non-zero with a line on stderr when standard output
# cannot be written (`optim check cfg > /dev/full` used to exit 0).
#   tests/test_cli_io.sh path/to/optim
set -u
optim="${1:?usage: test_cli_io.sh OPTIM}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# 1. CONFIG is a FIFO (nobody writes to it): refused within the timeout.
mkfifo "$dir/fifo"
timeout 10 "$optim" check "$dir/fifo" 2>"$dir/err"
rc=$?
[ $rc -eq 124 ] && fail "optim check FIFO hung"
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "optim check FIFO exited $rc"
grep -q "not a regular file" "$dir/err" || fail "optim check FIFO: $(cat "$dir/err")"
printf '"sgd"' >"$dir/init.json"
timeout 10 "$optim" replay "$dir/fifo" "$dir/init.json" "$dir/init.json" "$dir/out" 2>"$dir/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "optim replay CONFIG=FIFO exited $rc"
[ -e "$dir/out" ] && fail "optim replay CONFIG=FIFO created OUT"

# 9. Standard output that cannot be written: /dev/full.
if [ -w /dev/full ]; then
    printf '"adam"' >"$dir/adam.json"
    "$optim" check "$dir/adam.json" >/dev/null || fail "optim check on a good config failed"
    for cmd in "check $dir/adam.json" "bench --size 1000 --runs 1 sgd" "bench --help" version help \
        "train --help" "compare --help" "conformance --help"; do
        # shellcheck disable=SC2086
        "$optim" $cmd >/dev/full 2>"$dir/err"
        rc=$?
        [ $rc -ne 0 ] || fail "optim $cmd > /dev/full exited 0"
        grep -q "cannot write standard output" "$dir/err" || fail "optim $cmd > /dev/full: $(cat "$dir/err")"
    done
else
    echo "skipped the /dev/full checks: no writable /dev/full"
fi

[ $failures -eq 0 ] && echo "test_cli_io: all passed"
exit $((failures > 0))
