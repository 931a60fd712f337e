# Shared by the scripts in this folder: dependency installation and build helpers.
# Sourced, not run.

NABLA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian 12 packages nabla needs to build and test (libgloo-dev: Gloo's collectives for distributed/;
# libsentencepiece-dev: SentencePiece models for text/sentencepiece).
NABLA_BUILD_PACKAGES=(cmake ninja-build g++ pkg-config libgtest-dev zlib1g-dev nlohmann-json3-dev libstb-dev
                      libjpeg62-turbo-dev libpng-dev libgloo-dev libopenblas-dev libsentencepiece-dev python3 python3-numpy)
# What the test suite needs besides: PyTorch for the differential suite (tests/ops/test_differential.cpp) and
# the PyTorch-file tests (tests/io/test_torch_file.cpp), torchvision for nabla-inspect on a resnet18, and
# protobuf's Python runtime and compiler for reading TensorBoard event files (tests/tensorboard/test_summary_writer.cpp),
# ONNX's Python package, whose checker validates every exported model (tests/onnx/), clang-format,
# which checks that the sources keep .clang-format's style (tests/format_check.py), and libtorch's C++
# headers, against which tests/torch_compat builds its libtorch-style programs a second time (5 s to
# install beside python3-torch's libtorch1.13); torchaudio for tests/audio's references, and
# libsndfile's Python binding and sox, whose WAV files tests/io/test_wav.cpp reads.
NABLA_TEST_PACKAGES=(python3-torch python3-torchvision python3-protobuf protobuf-compiler python3-onnx clang-format
                     libtorch-dev python3-torchaudio python3-soundfile sox)

# scikit-learn, whose CountVectorizer/TfidfVectorizer tests/text/test_vectorizers.cpp compares with.
NABLA_TEST_PACKAGES+=(python3-sklearn)
# espeak-ng, which speaks the words of examples/audio_classify's data (made by its make_data.sh with sox).
NABLA_TEST_PACKAGES+=(espeak-ng)
# What the sanitizer build and the fuzz targets add: clang and its runtimes (ASan, UBSan, libFuzzer).
NABLA_FUZZ_PACKAGES=(clang libclang-rt-14-dev)

log() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# Installs the Debian packages given as arguments that are not installed yet.
install_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
      echo "error: missing packages ${missing[*]} and not root (install them, or run as root)" >&2
      return 1
    fi
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

jobs() { echo "${JOBS:-$(nproc)}"; }

# Configures build-asan/: clang with AddressSanitizer and UndefinedBehaviorSanitizer, no CUDA, and
# the libFuzzer targets (fuzz/). scripts/test.sh runs the test suite and each fuzz target there,
# scripts/fuzz.sh fuzzes longer; its vision tests copy the release build's torchvision references when
# they are current. NABLA_CMAKE_ARGS adds options (e.g. a compiler launcher).
configure_asan_build() {
  # shellcheck disable=SC2086
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
        -DNABLA_SANITIZE=address,undefined -DNABLA_FUZZ=ON -DNABLA_CUDA=OFF \
        -DNABLA_BUILD_BENCH=OFF -DNABLA_BUILD_EXAMPLES=OFF \
        -DNABLA_VISION_REFERENCES_FROM="$NABLA_ROOT/build/tests/vision-references" ${NABLA_CMAKE_ARGS:-}
}
