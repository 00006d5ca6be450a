#!/usr/bin/env bash
# Formatting gate: every C source, header and .inc template tracked by git is
# as clang-format 14 writes it (.clang-format). Prints the files that differ
# and exits 1; exits 2 without clang-format 14 (other versions format
# differently). .ci/run runs it on the repository.
#     scripts/check_format.sh [GIT_DIR]      (fix: clang-format -i FILE...)
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
cf="${CLANG_FORMAT:-}"
if [ -z "$cf" ]; then
    cf=clang-format-14
    command -v "$cf" >/dev/null || cf=clang-format
fi
if ! command -v "$cf" >/dev/null; then
    echo "check_format: no clang-format (Debian: clang-format-14)" >&2
    exit 2
fi
ver="$("$cf" --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')"
if [ "$ver" != 14 ]; then
    echo "check_format: $cf is version ${ver:-unknown}, not 14 (set CLANG_FORMAT)" >&2
    exit 2
fi
files=()
while IFS= read -r -d '' f; do files+=("$f"); done < <(git ls-files -z '*.c' '*.h' '*.inc')
# --dry-run --Werror: one "FILE:LINE:COL: error: code should be clang-formatted"
# per difference, exit status 1 when there is any.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if printf '%s\0' "${files[@]}" | xargs -0 -r "$cf" --style=file --dry-run --Werror 2>"$log" >/dev/null; then
    echo "check_format: ${#files[@]} files formatted"
    exit 0
fi
bad="$(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' "$log" | sort -u)"
if [ -z "$bad" ]; then
    echo "check_format: $cf failed:" >&2
    cat "$log" >&2
    exit 2
fi
echo "check_format: these files differ from clang-format $ver's output (clang-format -i FILE):"
printf "%s\n" "$bad" | sed "s/^/  /"
exit 1
