#!/usr/bin/env bash
# Installs what is missing, builds nabla, fetches MNIST and trains the default recipe.
# Extra arguments go to `mnist train` (try: scripts/mnist.sh --help).
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$NABLA_ROOT"

install_packages "${NABLA_BUILD_PACKAGES[@]}"
log "building (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(jobs)"
if [ ! -x build/examples/mnist ]; then
  echo "The MNIST program is not there yet (examples/mnist); nabla itself built fine."
  exit 0
fi
scripts/get-data.sh
log "training"
exec build/examples/mnist train "$@"
