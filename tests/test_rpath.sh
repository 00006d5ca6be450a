#!/usr/bin/env bash
# No binary of the build tree or of an installed tree searches the current
# directory for its libraries: no RPATH/RUNPATH has an empty element (a
# leading or trailing ':' or '::', which the dynamic linker reads as "."),
# and `optim help` run in a directory that holds a fake copy of each library
# it needs loads none of them.
# usage: test_rpath.sh OPTIM (the build tree's command; its directory is the build tree)
set -u
build=$(cd "$(dirname "$1")" && pwd)
optim=$build/$(basename "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

# check_tree DIR: every ELF executable and shared object under DIR
check_tree() {
    local n=0 f path
    while IFS= read -r -d '' f; do
        [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
        n=$((n + 1))
        while IFS= read -r path; do
            case ":$path:" in
            *::*) fail "$f: rpath [$path] has an empty element (the current directory)" ;;
            esac
        done < <(readelf -d "$f" 2>/dev/null | sed -n 's/.*(R[UN]*PATH).*path: \[\(.*\)\]$/\1/p')
    done < <(find "$1" -path '*/CMakeFiles' -prune -o -type f \( -perm -u+x -o -name '*.so*' \) -print0)
    [ "$n" -gt 0 ] || fail "no ELF file under $1"
}

# check_hijack OPTIM: a fake copy of any library the command needs, put in
# the current directory, one at a time, is not loaded
check_hijack() {
    local dir=$tmp/cwd lib n=0
    mkdir -p "$dir"
    printf '#include <stdio.h>\n__attribute__((constructor)) static void pwn(void) { fputs("HIJACKED\\n", stderr); }\n' \
        >"$tmp/evil.c"
    ${CC:-cc} -shared -fPIC "$tmp/evil.c" -o "$tmp/evil.so" || { fail "cannot build a fake library"; return; }
    for lib in $( (readelf -d "$1"; readelf -d "$(dirname "$1")/../lib/liboptim.so.0" "$build/liboptim.so.0") 2>/dev/null |
        sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p' | sort -u); do
        case $lib in libc.so* | libm.so* | ld-linux*) continue ;; esac
        n=$((n + 1))
        cp "$tmp/evil.so" "$dir/$lib"
        (cd "$dir" && "$1" help) >"$tmp/out" 2>&1 || fail "$1 help with a fake $lib in the current directory: $(head -3 "$tmp/out")"
        grep -q HIJACKED "$tmp/out" && fail "$1 help loaded the fake $lib from the current directory"
        rm -f "$dir/$lib"
    done
    [ "$n" -ge 3 ] || fail "$1 needs only $n libraries?"
}

check_tree "$build"
check_hijack "$optim"
# An installed tree.
if cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/log" 2>&1; then
    check_tree "$tmp/prefix"
    check_hijack "$tmp/prefix/bin/optim"
else
    fail "cmake --install: $(tail -3 "$tmp/log")"
fi
[ "$failed" -eq 0 ] || exit 1
echo "1 passed, 0 failed"
