#!/usr/bin/env bash
# A plugin builds like a built-in (issues 21 and 23), from the installed
# package, by both documented recipes:
#  - optim_add_plugin in a project with no build type compiles with the
#    library's flags (-O3 -fno-math-errno -ffp-contract=off); a build type
#    or an -O in CMAKE_C_FLAGS keeps the user's level;
#  - ISA_SOURCES: the baseline object holds no AVX (tests/abi/portable.sh)
#    and, on x86-64, AVX2 and AVX-512 objects are linked in;
#  - the pkg-config recipe (optim-plugin.pc: flags, per-level flags, rpath);
#  - at each level this CPU runs (OPTIM_ISA), both plugins pass
#    `optim conformance AdaBelief` and `optim replay` writes sse2's bytes.
# usage: isa.sh BUILD_DIR SOURCE_DIR
set -u
unset CFLAGS OPTIM_PLUGINS # the flags checked are optim_add_plugin's alone
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
prefix=$tmp/prefix
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3

cmake --install "$build" --prefix "$prefix" >"$tmp/log" 2>&1 || fail "install: $(tail -5 "$tmp/log")"
optim=$prefix/bin/optim
libdir=$(dirname "$(find "$prefix" -name 'liboptim.so.0' | head -1)")
levels=0 # per-level objects expected: x86-64 and a compiler with -march=x86-64-v4
if [ "$(uname -m)" = x86_64 ] && ${CC:-cc} -march=x86-64-v4 -x c -c -o /dev/null - </dev/null 2>/dev/null; then
    levels=1
fi

# configure NAME ARGS...: examples/plugin in $tmp/NAME; its compile commands.
configure() {
    local dir=$tmp/$1
    shift
    cmake -S "$src/examples/plugin" -B "$dir" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "$@" >"$tmp/log" 2>&1 || fail "configure $*: $(tail -5 "$tmp/log")"
    grep '"command"' "$dir/compile_commands.json"
}
has() { case " $1 " in *" $2 "*) return 0 ;; esac; return 1; }

# No build type: every compile has the library's flags.
configure plain >"$tmp/cmds"
[ "$(wc -l <"$tmp/cmds")" -eq $((1 + 2 * levels)) ] || fail "expected $((1 + 2 * levels)) compiles: $(cat "$tmp/cmds")"
while read -r cmd; do
    for flag in -O3 -DNDEBUG -fno-math-errno -ffp-contract=off -fvisibility=hidden; do
        has "$cmd" "$flag" || fail "no $flag in: $cmd"
    done
done <"$tmp/cmds"
if [ "$levels" -eq 1 ]; then
    grep -q -- '-DOPTIM_ISA_BUILD=1 -march=x86-64-v3 ' "$tmp/cmds" || fail "no AVX2 compile: $(cat "$tmp/cmds")"
    grep -q -- '-DOPTIM_ISA_BUILD=2 -march=x86-64-v4 -mprefer-vector-width=512 ' "$tmp/cmds" ||
        fail "no AVX-512 compile: $(cat "$tmp/cmds")"
fi
echo "ok: no build type: -O3 -DNDEBUG -fno-math-errno -ffp-contract=off on $(wc -l <"$tmp/cmds") compiles"
# The user's choice wins.
configure debug -DCMAKE_BUILD_TYPE=Debug >"$tmp/cmds"
grep -q -- ' -O3 ' "$tmp/cmds" && fail "Debug build compiled with -O3: $(head -1 "$tmp/cmds")"
grep -q -- '-fno-math-errno -ffp-contract=off' "$tmp/cmds" || fail "Debug build lacks the numerics flags"
configure o1 -DCMAKE_C_FLAGS=-O1 >"$tmp/cmds"
grep -q -- ' -O3 ' "$tmp/cmds" && fail "CMAKE_C_FLAGS=-O1 overridden by -O3: $(head -1 "$tmp/cmds")"
echo "ok: Debug and CMAKE_C_FLAGS=-O1 keep their level"

cmake --build "$tmp/plain" >"$tmp/log" 2>&1 || fail "optim_add_plugin build: $(tail -5 "$tmp/log")"
base=$(find "$tmp/plain/CMakeFiles/adabelief.dir" -name '*.o')
variants=$(find "$tmp/plain/CMakeFiles" -path '*adabelief_avx*' -name '*.o' | sort)
[ -n "$base" ] || fail "no baseline object"
[ "$(echo "$variants" | grep -c .)" -eq $((2 * levels)) ] || fail "per-level objects: [$variants]"
if [ "$levels" -eq 1 ]; then
    # shellcheck disable=SC2086
    bash "$src/tests/abi/portable.sh" --baseline $base --variants $variants >"$tmp/log" 2>&1 ||
        fail "portable.sh: $(cat "$tmp/log")"
    nm "$tmp/plain/libadabelief.so" | grep -qE ' [rRdD] adabelief_class_avx512$' ||
        fail "adabelief_class_avx512 not linked in: $(nm "$tmp/plain/libadabelief.so" | grep adabelief_class)"
    echo "ok: baseline object without AVX, AVX2 and AVX-512 objects linked in"
fi

# pkg-config: three compiles of the kernel file (one where there are no levels), one link.
export PKG_CONFIG_PATH=$libdir/pkgconfig
read -r -a cflags <<<"$(pkg-config --cflags optim-plugin)" || fail "pkg-config --cflags optim-plugin"
read -r -a libs <<<"$(pkg-config --libs optim-plugin)"
has "${cflags[*]}" -O3 && has "${cflags[*]}" -ffp-contract=off || fail "optim-plugin Cflags: ${cflags[*]}"
[ "$(pkg-config --variable=cflags optim-plugin)" = "-O3 -DNDEBUG -fno-math-errno -ffp-contract=off" ] ||
    fail "optim-plugin's cflags variable: $(pkg-config --variable=cflags optim-plugin)"
rpath=$(printf '%s\n' "${libs[@]}" | sed -n 's/^-Wl,-rpath,//p')
[ -n "$rpath" ] && [ "$(readlink -f "$rpath")" = "$(readlink -f "$libdir")" ] ||
    fail "optim-plugin Libs lack -Wl,-rpath,$libdir: ${libs[*]}"
mkdir "$tmp/pc"
objs=()
for l in "" avx2 avx512; do
    [ -n "$l" ] && [ "$levels" -eq 0 ] && continue
    read -r -a extra <<<"${l:+$(pkg-config --variable="${l}_cflags" optim-plugin)}"
    ${CC:-cc} -std=c11 "${cflags[@]}" "${extra[@]}" -c "$src/examples/plugin/adabelief.c" \
        -o "$tmp/pc/adabelief${l:+_$l}.o" 2>"$tmp/err" || fail "pkg-config compile ${l:-baseline}: $(cat "$tmp/err")"
    objs+=("$tmp/pc/adabelief${l:+_$l}.o")
done
${CC:-cc} -shared "${objs[@]}" -o "$tmp/pc/libadabelief.so" "${libs[@]}" 2>"$tmp/err" ||
    fail "pkg-config link: $(cat "$tmp/err")"
[ "$(nm -D --defined-only "$tmp/pc/libadabelief.so" | awk '$2 == "T" {print $3}')" = optim_plugin_init ] ||
    fail "the pkg-config plugin exports more than its entry point"
echo "ok: pkg-config recipe (${#objs[@]} compiles)"

# Inputs for replay: w f32 [37, 29], d f64 [301], e f32 [9, 35] with sparse gradients.
cat >"$tmp/gen.py" <<'PY'
import json, math, struct
def st(path, tensors):
    header, data = {}, b''
    for name, dtype, shape, values in tensors:
        fmt = {'F32': 'f', 'F64': 'd', 'I64': 'q'}[dtype]
        raw = struct.pack('<%d%s' % (len(values), fmt), *values)
        header[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    open(path, 'wb').write(struct.pack('<Q', len(h)) + h + data)
def vals(n, a):
    return [math.sin(a + 0.37 * i) * (1 + (i % 7)) for i in range(n)]
st('init.st', [('w', 'F32', [37, 29], vals(37 * 29, 0.1)), ('d', 'F64', [301], vals(301, 0.2)),
               ('e', 'F32', [9, 35], vals(9 * 35, 0.3))])
grads = []
for k in range(5):
    grads += [('%d/w' % k, 'F32', [37, 29], vals(37 * 29, 1.0 + k)), ('%d/d' % k, 'F64', [301], vals(301, 2.0 + k)),
              ('%d/e/indices' % k, 'I64', [4], [k % 9, 8, 2, k % 9]),
              ('%d/e/values' % k, 'F32', [4, 35], vals(4 * 35, 3.0 + k))]
st('grads.st', grads)
PY
(cd "$tmp" && "$py" gen.py) || fail "cannot write the replay inputs"
printf '{"class_name": "AdaBelief", "config": {"learning_rate": 0.01, "beta_1": 0.8}}' >"$tmp/ab.json"

# at LEVEL CMD...: CMD under OPTIM_ISA=LEVEL ("built-in": a library of one level)
at() { if [ "$1" = built-in ]; then "${@:2}"; else OPTIM_ISA=$1 "${@:2}"; fi; }
runs="sse2 avx2 avx512"
OPTIM_ISA=sse2 "$optim" version >/dev/null 2>&1 || runs=built-in
first=${runs%% *}
n=0
for l in $runs; do
    if ! msg=$(at "$l" "$optim" version 2>&1); then
        echo "skip: level $l: $msg"
        continue
    fi
    for p in plain/libadabelief.so pc/libadabelief.so; do
        tag=$l-${p%%/*}
        at "$l" "$optim" --plugin "$tmp/$p" conformance AdaBelief >"$tmp/out" 2>&1 ||
            fail "$tag: conformance: $(grep -v '^PASS' "$tmp/out")"
        tail -n 1 "$tmp/out" | grep -qE '^[0-9]+ passed, 0 failed$' || fail "$tag: conformance: $(tail -n 1 "$tmp/out")"
        at "$l" "$optim" --plugin "$tmp/$p" replay "$tmp/ab.json" "$tmp/init.st" "$tmp/grads.st" \
            "$tmp/$tag.st" 2>"$tmp/err" || fail "$tag: replay: $(cat "$tmp/err")"
        cmp -s "$tmp/$tag.st" "$tmp/$first-plain.st" || fail "$tag: replay output differs from $first's"
    done
    n=$((n + 1))
    echo "ok: $l: conformance passes and replay gives sse2's bytes (CMake and pkg-config builds)"
done
[ "$n" -gt 0 ] || fail "no level ran"
echo "1 passed, 0 failed"
