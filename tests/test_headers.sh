#!/usr/bin/env bash
# Every public header compiles on its own, as the first include of a file, in
# strict ISO C99 and ISO C++11 (-pedantic-errors -Wall -Wextra -Werror): a user
# may include any one of them first, from C or C++. A repeated typedef, for
# one, is C11 but an error in C99.
# usage: test_headers.sh OPTIM (unused: the headers are the source tree's)
set -u
inc=$(cd "$(dirname "$0")/../include" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
cxx=$(command -v c++ || command -v g++ || command -v clang++ || true)
fail=0 n=0
for h in "$inc"/optim/*.h; do
    name=optim/$(basename "$h")
    # One declaration after the include: export.h alone holds only macros.
    printf '#include "%s"\ntypedef int optim_test_headers_unit;\n' "$name" >"$tmp/t.c"
    if ! "$cc" -std=c99 -pedantic-errors -Wall -Wextra -Werror -I"$inc" -fsyntax-only "$tmp/t.c" \
        2>"$tmp/err"; then
        echo "FAIL: $name alone is not strict C99:"; cat "$tmp/err"; fail=1
    fi
    if [ -n "$cxx" ] && ! "$cxx" -std=c++11 -pedantic-errors -Wall -Wextra -Werror -I"$inc" \
        -fsyntax-only -x c++ "$tmp/t.c" 2>"$tmp/err"; then
        echo "FAIL: $name alone is not strict C++11:"; cat "$tmp/err"; fail=1
    fi
    n=$((n + 1))
done
[ "$n" -gt 10 ] || { echo "FAIL: only $n headers under $inc"; exit 1; }
[ -n "$cxx" ] || echo "note: no C++ compiler: C99 only"
[ $fail = 0 ] && echo "ok: $n headers, strict C99${cxx:+ and C++11}"
exit $fail
