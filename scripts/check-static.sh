#!/usr/bin/env bash
# A static libnabla with the CUDA backend, installed and used by a program outside the tree: builds
# the libraries in build-static/ (BUILD_SHARED_LIBS=OFF, NABLA_CUDA=ON; no tests, examples,
# benchmarks or tools), installs it into build-static/prefix and builds tests/install/consumer
# against it with find_package(nabla). The link must find CUDA's libraries through the installed
# package config (find_dependency(CUDAToolkit)), and the program must have the CUDA backend
# (has_backend(cuda), true without a GPU too): a static link used to drop the backend, whose
# registration nothing referred to. No GPU needed; about 10 minutes on 2 cores, so not part of
# scripts/test.sh.
#
#   scripts/check-static.sh
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$NABLA_ROOT"
case "${1:-}" in -h|--help) sed -n '2,11p' "$0"; exit 0 ;; esac
[ -x /usr/local/cuda/bin/nvcc ] || { echo "check-static.sh needs the CUDA toolkit at /usr/local/cuda" >&2; exit 2; }
install_packages "${NABLA_BUILD_PACKAGES[@]}"

log "static library with CUDA (build-static/)"
cmake -S . -B build-static -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DNABLA_CUDA=ON \
      -DNABLA_BUILD_TESTS=OFF -DNABLA_BUILD_EXAMPLES=OFF -DNABLA_BUILD_BENCH=OFF -DNABLA_BUILD_TOOLS=OFF
cmake --build build-static -j "$(jobs)"
rm -rf build-static/prefix build-static/consumer
cmake --install build-static --prefix build-static/prefix >/dev/null

log "a program linked against the installed static library"
cmake -S tests/install/consumer -B build-static/consumer -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build-static/prefix"
cmake --build build-static/consumer
NABLA_CONSUMER_EXPECT_CUDA=1 build-static/consumer/consumer
log "static build with CUDA: ok"
