#!/usr/bin/env bash
# Installs the Debian packages optim needs to build and test, if missing.
#   scripts/deps.sh [--fuzz]
set -euo pipefail
pkgs=(gcc libc6-dev make cmake pkg-config python3 libcjson-dev libcmocka-dev libcairo2-dev libopenblas-openmp-dev zlib1g-dev libopenmpi-dev openmpi-bin dataset-fashion-mnist python3-numpy python3-dev python3-pytest)
# --fuzz: also clang with libFuzzer, its OpenMP (with Archer, tests/tsan/run.sh) and
# clang-format (scripts/check_format.sh); CI uses it (tests/fuzz/run.sh).
if [ "${1:-}" = "--fuzz" ]; then pkgs+=(clang libclang-rt-dev libomp-dev clang-format); fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "optim: installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
