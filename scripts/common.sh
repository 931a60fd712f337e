# Shared by the scripts in this folder: dependency installation and build helpers.
# Sourced, not run.

NABLA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian 12 packages nabla needs to build and test.
NABLA_BUILD_PACKAGES=(cmake ninja-build g++ pkg-config libgtest-dev zlib1g-dev nlohmann-json3-dev libstb-dev
                      python3 python3-numpy)
# What the test suite needs besides: PyTorch for the differential suite (tests/test_differential.cpp) and
# the PyTorch-file tests (tests/test_torch_file.cpp), torchvision for nabla-inspect on a resnet18.
NABLA_TEST_PACKAGES=(python3-torch python3-torchvision)

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
