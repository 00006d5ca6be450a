#!/usr/bin/env bash
# Plugins built by every documented recipe run at a built-in's speed (issues
# 21 and 23). From an installed prefix (cmake --install), tests/plugin/
# adam_copy.c ("PluginAdam": Keras 3's dense Adam rule, plain C) is built
#   cmake-isa   optim_add_plugin(NAME ISA_SOURCES adam_copy.c), no build type
#   cmake-once  optim_add_plugin(NAME adam_copy.c): baseline level only
#   pc-isa      optim-plugin.pc: three compiles (baseline, avx2_cflags,
#               avx512_cflags) and one link
#   pc-once     optim-plugin.pc: one compile (baseline level only)
# and `optim new-plugin`'s project (its placeholder rule, tf.keras's legacy
# Adam, against the built-in legacy Adam) is built as its README says; each,
# loaded in the installed command, is timed by `optim bench --json` beside
# the built-in in the same process (same rule, same 28 bytes per f32
# parameter), the *-once builds at the level they were built for: with
# OPTIM_ISA=sse2, where the library has levels (a baseline-only plugin on an
# AVX-512 CPU is as fast as the library's own SSE2 kernels, which for Adam's
# division and root is 1.5x slower than AVX-512 on an Intel Xeon; the docs
# say to use the per-level recipes for full speed).
# slowdown = built-in ratio / plugin ratio (each ratio is the
# step's bandwidth over a triad run just before it, so a shared machine's
# drifting bandwidth cancels); the median of ROUNDS rounds, the two configs'
# order alternating, must be at most BOUND.
#
# The issue's target is 1.2 (docs/performance.md has the measurement); this
# test checks 1.5 by default because CI machines are shared and noisy.
# usage: speed.sh BUILD_DIR SOURCE_DIR
# env: OPTIM_PLUGIN_SPEED_BOUND (1.5), OPTIM_PLUGIN_SPEED_ROUNDS (5),
#      OPTIM_PLUGIN_SPEED_SIZE (16777216 f32 elements), OPTIM_PLUGIN_SPEED_RUNS (15),
#      OPTIM_PLUGIN_SPEED_KEEP (a directory: keep the built plugins there)
set -u
unset CFLAGS OPTIM_PLUGINS
build=$1 src=$(cd "$2" && pwd)
bound=${OPTIM_PLUGIN_SPEED_BOUND:-1.5} rounds=${OPTIM_PLUGIN_SPEED_ROUNDS:-5}
size=${OPTIM_PLUGIN_SPEED_SIZE:-16777216} runs=${OPTIM_PLUGIN_SPEED_RUNS:-15}
tmp=$(mktemp -d)
trap '[ -n "${OPTIM_PLUGIN_SPEED_DEBUG:-}" ] || rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
prefix=$tmp/prefix
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
kernel=$src/tests/plugin/adam_copy.c

cmake --install "$build" --prefix "$prefix" >"$tmp/log" 2>&1 || fail "install: $(tail -5 "$tmp/log")"
optim=$prefix/bin/optim
libdir=$(dirname "$(find "$prefix" -name 'liboptim.so.0' | head -1)")

# The CMake recipe, both call forms, in a project with no build type.
mkdir "$tmp/cm"
cat >"$tmp/cm/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.18)
project(plugin_speed LANGUAGES C)
find_package(optim REQUIRED)
optim_add_plugin(cmake_isa ISA_SOURCES "$kernel")
optim_add_plugin(cmake_once "$kernel")
EOF
cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/log" 2>&1 ||
    fail "configure: $(tail -5 "$tmp/log")"
cmake --build "$tmp/cm/build" >"$tmp/log" 2>&1 || fail "optim_add_plugin build: $(tail -5 "$tmp/log")"

# The pkg-config recipe of docs/custom-optimizer.md.
export PKG_CONFIG_PATH=$libdir/pkgconfig
read -r -a cflags <<<"$(pkg-config --cflags optim-plugin)" || fail "pkg-config --cflags optim-plugin"
read -r -a libs <<<"$(pkg-config --libs optim-plugin)"
objs=()
for l in "" avx2 avx512; do
    read -r -a extra <<<"${l:+$(pkg-config --variable="${l}_cflags" optim-plugin)}"
    [ -n "$l" ] && [ "${#extra[@]}" -eq 0 ] && continue # not x86-64: no levels
    ${CC:-cc} -std=c11 "${cflags[@]}" "${extra[@]}" -c "$kernel" -o "$tmp/pa${l:+_$l}.o" 2>"$tmp/err" ||
        fail "pkg-config compile ${l:-baseline}: $(cat "$tmp/err")"
    objs+=("$tmp/pa${l:+_$l}.o")
done
${CC:-cc} -shared "${objs[@]}" -o "$tmp/libpc_isa.so" "${libs[@]}" 2>"$tmp/err" || fail "pc-isa link: $(cat "$tmp/err")"
${CC:-cc} -shared "$tmp/pa.o" -o "$tmp/libpc_once.so" "${libs[@]}" 2>"$tmp/err" || fail "pc-once link: $(cat "$tmp/err")"
# `optim new-plugin`'s project as its README builds it: its placeholder rule
# is tf.keras's legacy Adam, timed against the built-in legacy Adam.
"$optim" new-plugin SpeedAdam "$tmp/np" >"$tmp/log" 2>&1 || fail "new-plugin: $(cat "$tmp/log")"
cmake -S "$tmp/np" -B "$tmp/np/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/log" 2>&1 ||
    fail "new-plugin configure: $(tail -5 "$tmp/log")"
cmake --build "$tmp/np/build" >"$tmp/log" 2>&1 || fail "new-plugin build: $(tail -5 "$tmp/log")"
cp "$tmp/np/build/libSpeedAdam.so" "$tmp/libnew_plugin.so"

# Every recipe finds the prefix's liboptim.so.0 through the plugin's rpath.
for so in "$tmp"/cm/build/lib*.so "$tmp"/lib*.so; do
    found=$(env -u LD_LIBRARY_PATH ldd "$so" | awk '$1 == "liboptim.so.0" {print $3}')
    [ "$(readlink -f "$found")" = "$(readlink -f "$libdir/liboptim.so.0")" ] ||
        fail "$so does not find $libdir/liboptim.so.0 by itself: $(ldd "$so" | grep optim)"
done
if [ -n "${OPTIM_PLUGIN_SPEED_KEEP:-}" ]; then
    mkdir -p "$OPTIM_PLUGIN_SPEED_KEEP" && cp "$tmp"/cm/build/lib*.so "$tmp"/lib*.so "$OPTIM_PLUGIN_SPEED_KEEP/"
fi

echo "size $size f32, $runs runs per config, $rounds rounds, bound ${bound}x ($("$optim" bench --json --size 1024 --runs 1 '"adam"' | grep -o '"isa": *"[a-z0-9-]*"'))"
fails=0
baseline=()
OPTIM_ISA=sse2 "$optim" version >/dev/null 2>&1 && baseline=(OPTIM_ISA=sse2)
for build_name in cmake-isa cmake-once pc-isa pc-once new-plugin; do
    level=()
    [ "${build_name#*-}" = once ] && level=("${baseline[@]}")
    builtin='{"class_name": "Adam"}' plugin='{"class_name": "PluginAdam"}'
    if [ "$build_name" = new-plugin ]; then
        builtin='{"class_name": "Adam", "config": {"is_legacy_optimizer": true}}'
        plugin='{"class_name": "SpeedAdam"}'
    fi
    case $build_name in
        cmake-*) so=$tmp/cm/build/lib${build_name/-/_}.so ;;
        *) so=$tmp/lib${build_name/-/_}.so ;;
    esac
    [ -f "$so" ] || fail "$build_name: no $so"
    : >"$tmp/json"
    for ((r = 0; r < rounds; r++)); do
        if ((r % 2)); then set -- "$plugin" "$builtin"; else set -- "$builtin" "$plugin"; fi
        env "${level[@]}" "$optim" --plugin "$so" bench --json --size "$size" --runs "$runs" "$@" >>"$tmp/json" 2>"$tmp/err" ||
            fail "$build_name: bench: $(cat "$tmp/err")"
    done
    line=$("$py" - "$tmp/json" "$bound" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
b = [r['ratio'] for r in rows if r['class_name'] == 'Adam']
p = [r['ratio'] for r in rows if r['class_name'] != 'Adam']
assert len(b) == len(p) and b, 'bench printed %d built-in and %d plugin lines' % (len(b), len(p))
s = sorted(x / y for x, y in zip(b, p))
m = statistics.median(s)
print('%s %.3f built-in ratio %.3f plugin %.3f (per round: %s)' % (
    'ok' if m <= float(sys.argv[2]) else 'SLOW', m, statistics.median(b), statistics.median(p),
    ' '.join('%.3f' % x for x in s)))
PY
    ) || fail "$build_name: cannot read bench's JSON: $(head -3 "$tmp/json")"
    echo "$build_name${level[*]:+ (${level[*]})}: slowdown ${line#* }"
    [ "${line%% *}" = ok ] || fails=$((fails + 1))
done
[ "$fails" -eq 0 ] || fail "$fails plugin builds slower than ${bound}x the built-in"
echo "1 passed, 0 failed"
