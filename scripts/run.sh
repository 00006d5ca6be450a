#!/usr/bin/env bash
# Quick start, part 1: install what is missing, build, run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
echo "== examples/quickstart: SGD with momentum fits a line"
./build/example_quickstart
echo "== examples/custom_optimizer: a user-written optimizer through the same pipeline"
./build/example_custom_optimizer
