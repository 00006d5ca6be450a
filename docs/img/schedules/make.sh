#!/usr/bin/env bash
# Regenerates the curves of docs/schedules.md with the project's own
# `optim schedule-plot` (the library's schedule code draws them):
#     bash docs/img/schedules/make.sh [path/to/optim]    (default: build/optim)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
optim="${1:-$here/../../../build/optim}"
[ -x "$optim" ] || { echo "make.sh: $optim not found; build first (cmake --build build)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# plot IMAGE STEPS CLASS CONFIG: docs/img/schedules/IMAGE.png over steps 0..STEPS.
plot() {
    printf '{"class_name": "%s", "config": {%s}}\n' "$3" "$4" > "$tmp/$1.json"
    "$optim" schedule-plot "$tmp/$1.json" "$here/$1.png" "$2"
    echo "docs/img/schedules/$1.png"
}

plot ExponentialDecay 500 ExponentialDecay \
    '"initial_learning_rate": 0.1, "decay_steps": 100, "decay_rate": 0.5'
plot ExponentialDecay-staircase 500 ExponentialDecay \
    '"initial_learning_rate": 0.1, "decay_steps": 100, "decay_rate": 0.5, "staircase": true'
plot PiecewiseConstantDecay 500 PiecewiseConstantDecay \
    '"boundaries": [100, 250, 400], "values": [0.1, 0.05, 0.02, 0.005]'
plot PolynomialDecay 500 PolynomialDecay \
    '"initial_learning_rate": 0.1, "decay_steps": 300, "end_learning_rate": 0.01, "power": 2.0'
plot PolynomialDecay-cycle 500 PolynomialDecay \
    '"initial_learning_rate": 0.1, "decay_steps": 100, "end_learning_rate": 0.01, "power": 2.0, "cycle": true'
plot InverseTimeDecay 500 InverseTimeDecay \
    '"initial_learning_rate": 0.1, "decay_steps": 50, "decay_rate": 1.0'
plot InverseTimeDecay-staircase 500 InverseTimeDecay \
    '"initial_learning_rate": 0.1, "decay_steps": 50, "decay_rate": 1.0, "staircase": true'
plot CosineDecay 500 CosineDecay \
    '"initial_learning_rate": 0.1, "decay_steps": 400, "alpha": 0.1'
plot CosineDecay-warmup 500 CosineDecay \
    '"initial_learning_rate": 0.0, "decay_steps": 400, "warmup_target": 0.1, "warmup_steps": 50'
plot CosineDecayRestarts 750 CosineDecayRestarts \
    '"initial_learning_rate": 0.1, "first_decay_steps": 50, "t_mul": 2.0, "m_mul": 0.8, "alpha": 0.05'
plot Triangular2CyclicalLearningRate 500 Addons\>Triangular2CyclicalLearningRate \
    '"initial_learning_rate": 0.01, "maximal_learning_rate": 0.1, "step_size": 50'
plot ExponentialCyclicalLearningRate 500 Addons\>ExponentialCyclicalLearningRate \
    '"initial_learning_rate": 0.01, "maximal_learning_rate": 0.1, "step_size": 50, "gamma": 0.995'
