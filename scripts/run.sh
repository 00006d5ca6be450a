#!/usr/bin/env bash
# Quick start, part 1: install what is missing, build, run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
echo "== optim train: a 784-256-128-10 MLP on Fashion-MNIST with Adam"
./build/optim train "$@"
