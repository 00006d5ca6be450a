#!/usr/bin/env bash
# The installed package is enough to write a plugin: `cmake --install` into a
# fresh prefix, build examples/plugin against the installed headers twice
# (the documented pkg-config recipe, and optim_add_plugin from the CMake
# package), and load both in the installed command, which finds its
# liboptim.so through its rpath.
# usage: install.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/log" 2>&1 || fail "install: $(tail -5 "$tmp/log")"
optim=$prefix/bin/optim
[ -x "$optim" ] || fail "no $optim"
libdir=$(dirname "$(find "$prefix" -name 'liboptim.so.0' | head -1)")
loaded=$(ldd "$optim" | awk '$1 == "liboptim.so.0" {print $3}')
[ "$(readlink -f "$loaded")" = "$(readlink -f "$libdir/liboptim.so.0")" ] ||
    fail "installed optim does not load the installed liboptim: $(ldd "$optim" | grep optim)"

export PKG_CONFIG_PATH=$libdir/pkgconfig
cflags=$(pkg-config --cflags optim) || fail "pkg-config --cflags optim failed"
read -r -a words <<<"$cflags"
[ "${#words[@]}" -eq 1 ] && [ "$(readlink -f "${words[0]#-I}")" = "$(readlink -f "$prefix/include")" ] || fail "Cflags should be the installed include directory only: '$cflags'"
# shellcheck disable=SC2046
${CC:-cc} -std=c11 -shared -fPIC -fvisibility=hidden $(pkg-config --cflags optim) \
    "$src/examples/plugin/adabelief.c" -o "$tmp/libadabelief.so" $(pkg-config --libs optim) 2>"$tmp/err" ||
    fail "pkg-config recipe: $(cat "$tmp/err")"
nm -D --defined-only "$tmp/libadabelief.so" | awk '$2 == "T" {print $3}' >"$tmp/exports"
[ "$(cat "$tmp/exports")" = "optim_plugin_init" ] || fail "the plugin exports more than its entry point: $(cat "$tmp/exports")"

cmake -S "$src/examples/plugin" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release >"$tmp/log" 2>&1 || fail "find_package(optim): $(tail -5 "$tmp/log")"
cmake --build "$tmp/cmake-build" >"$tmp/log" 2>&1 || fail "optim_add_plugin build: $(tail -5 "$tmp/log")"

printf '{"class_name": "AdaBelief", "config": {"beta_1": 0.8}}' >"$tmp/ab.json"
for plugin in "$tmp/libadabelief.so" "$tmp/cmake-build/libadabelief.so"; do
    "$optim" --plugin "$plugin" check "$tmp/ab.json" >"$tmp/out" 2>"$tmp/err" || fail "check with $plugin: $(cat "$tmp/err")"
    grep -q '"class_name":"AdaBelief"' "$tmp/out" || fail "check printed $(cat "$tmp/out")"
    "$optim" --plugin "$plugin" conformance AdaBelief >"$tmp/out" 2>&1 ||
        fail "conformance with $plugin: $(grep -v '^PASS' "$tmp/out")"
    tail -n 1 "$tmp/out" | grep -qE '^[0-9]+ passed, 0 failed$' || fail "conformance: $(tail -n 1 "$tmp/out")"
done
echo "1 passed, 0 failed"
