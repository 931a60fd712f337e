#!/usr/bin/env bash
# Fuzzes nabla's file readers with libFuzzer, under AddressSanitizer and UndefinedBehaviorSanitizer.
#
#   scripts/fuzz.sh TARGET SECONDS     fuzz one target (npy, safetensors, checkpoint, idx, image,
#                                      mnist, torch, bpe, hf_tokenizer) for SECONDS of wall time
#   scripts/fuzz.sh all SECONDS        every target, SECONDS each, JOBS (default: the cores) at a
#                                      time (what CI runs, with 30)
#   scripts/fuzz.sh TARGET FILE...     run the target once on each FILE (to reproduce a finding)
#
# Builds build-asan/ with clang (NABLA_SANITIZE=address,undefined, NABLA_FUZZ=ON: the same build
# scripts/test.sh makes), writes the seed corpora into build-asan/fuzz/seeds/<target>/ (fuzz/
# make_seeds.cpp, plus the hostile files of tests/hostile/<target>/) and keeps what the fuzzer
# learns in build-asan/fuzz/corpus/<target>/. Each run is one process with -rss_limit_mb=1024 and
# -timeout=10; a crash, a sanitizer report, a hang or more memory stops it with a reproducer in
# build-asan/fuzz/findings/<target>/. Findings become regression files in tests/hostile/ (see
# fuzz/README.md). Environment: JOBS (build parallelism), FUZZ_SEED (libFuzzer's -seed: a fixed
# seed makes a run's mutations reproducible; unset, each run draws its own), FUZZ_ARGS (more
# libFuzzer options).
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$NABLA_ROOT"

targets=(npy safetensors checkpoint idx image mnist torch bpe hf_tokenizer wav text)
if [ $# -lt 2 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,18p' "$0"
  [ $# -ge 1 ] && { [ "$1" = "-h" ] || [ "$1" = "--help" ]; } && exit 0
  exit 2
fi
target="${1#fuzz_}"
shift
if [ "$target" != all ] && [[ ! " ${targets[*]} " =~ " $target " ]]; then
  echo "unknown fuzz target '$target' (one of: ${targets[*]}, all)" >&2
  exit 2
fi

install_packages "${NABLA_BUILD_PACKAGES[@]}" "${NABLA_FUZZ_PACKAGES[@]}"
configure_asan_build
cmake --build build-asan -j "$(jobs)" --target fuzz_make_corpus $(printf 'fuzz_%s ' "${targets[@]}")

fuzz="build-asan/fuzz"
rm -rf "$fuzz/seeds"
build-asan/fuzz/fuzz_make_corpus seeds "$fuzz/seeds" >/dev/null
for t in "${targets[@]}"; do
  mkdir -p "$fuzz/seeds/$t" "$fuzz/corpus/$t" "$fuzz/findings/$t"
  if [ -d "tests/hostile/$t" ]; then
    find "tests/hostile/$t" -maxdepth 1 -type f ! -name '*.md' -exec cp {} "$fuzz/seeds/$t/" \;
  fi
done
cp tests/torch_files/*.pt "$fuzz/seeds/torch/"  # files torch.save wrote (tests/torch_files/make_fixtures.py)

# The sanitizers' settings: stop at the first report, with a stack trace.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

run_one() {  # TARGET SECONDS
  local t="$1" secs="$2" dict=()
  [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
  [ -n "${FUZZ_SEED:-}" ] && dict+=(-seed="$FUZZ_SEED")
  log "fuzzing $t for ${secs}s"
  # (-close_fd_mask=1: the targets' stdout, e.g. the mnist help text, is not shown)
  "build-asan/fuzz/fuzz_$t" -max_total_time="$secs" -rss_limit_mb=1024 -timeout=10 -print_final_stats=1 -close_fd_mask=1 \
    -artifact_prefix="$fuzz/findings/$t/" "${dict[@]}" ${FUZZ_ARGS:-} "$fuzz/corpus/$t" "$fuzz/seeds/$t"
}

# all: the targets split into JOBS lanes run side by side (each libFuzzer process uses one core),
# a lane's targets one after another; each target's output goes to build-asan/fuzz/<target>.log and
# is shown when its lane ends. A lane stops at its first failing target; the run then fails.
run_all() {  # SECONDS
  local secs="$1" lanes i t failed=0
  lanes="$(jobs)"
  local pids=()
  rm -f "$fuzz"/*.log
  for ((i = 0; i < lanes; i++)); do
    (
      for ((t = i; t < ${#targets[@]}; t += lanes)); do
        run_one "${targets[$t]}" "$secs" >"$fuzz/${targets[$t]}.log" 2>&1 || exit 1
      done
    ) &
    pids+=($!)
  done
  for ((i = 0; i < lanes; i++)); do
    wait "${pids[$i]}" || failed=1
    for ((t = i; t < ${#targets[@]}; t += lanes)); do
      [ -f "$fuzz/${targets[$t]}.log" ] && cat "$fuzz/${targets[$t]}.log"
    done
  done
  return "$failed"
}

if [ $# -eq 1 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
  if [ "$target" = all ]; then
    run_all "$1"
  else
    run_one "$target" "$1"
  fi
else
  [ "$target" = all ] && { echo "give one target to reproduce files with" >&2; exit 2; }
  "build-asan/fuzz/fuzz_$target" "$@"
fi
