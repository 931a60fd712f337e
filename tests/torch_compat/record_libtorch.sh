#!/usr/bin/env bash
# Records libtorch 1.13's output of each program in tests/torch_compat/programs/ as
# programs/<name>.expected: the reference tests/torch_compat/test_programs.cpp compares nabla's
# torch layer with where libtorch is not installed. Needs Debian's libtorch-dev and a configured
# build folder (default build/; BUILD=... for another).
#   tests/torch_compat/record_libtorch.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${BUILD:-$root/build}"
source "$root/scripts/common.sh"
install_packages libtorch-dev
cmake -S "$root" -B "$build" >/dev/null
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for src in "$root"/tests/torch_compat/programs/*.cpp; do
  name="$(basename "$src" .cpp)"
  cmake --build "$build" --target "libtorch_program_$name" -j"$(jobs)"
  (cd "$scratch" && "$build/tests/libtorch_program_$name") >"$root/tests/torch_compat/programs/$name.expected"
  log "recorded programs/$name.expected"
done
