// What logging to TensorBoard costs a training loop (Google Benchmark): the time of one
// SummaryWriter::add_scalar call with PyTorch's defaults (the event is encoded and queued; the
// writer thread writes it), from one thread and from two at once, an add_histogram of a layer's
// weights, and the CRC-32C every record carries (SSE4.2 instruction and the portable table).
//
//   build/bench/tensorboard_writer                      # all
//   build/bench/tensorboard_writer --benchmark_filter=AddScalar
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "nabla.h"
#include "tensorboard/crc32c.h"

namespace tb = nabla::tensorboard;
namespace fs = std::filesystem;

namespace {

fs::path bench_dir() { return fs::temp_directory_path() / ("nabla_tb_bench_" + std::to_string(::getpid())); }

std::unique_ptr<tb::SummaryWriter> g_writer;

void setup(const benchmark::State&) { g_writer = std::make_unique<tb::SummaryWriter>(bench_dir().string()); }
void teardown(const benchmark::State&) {
  g_writer.reset();  // flushes and closes: the writing is paid here, outside the timed loop, as in training
  fs::remove_all(bench_dir());
}

// One scalar per call, as a training loop logging its loss every step.
void BM_AddScalar(benchmark::State& state) {
  int64_t step = state.thread_index() * (int64_t(1) << 40);
  for (auto _ : state) g_writer->add_scalar("train/loss", 0.25, step++);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AddScalar)->Setup(setup)->Teardown(teardown)->Threads(1)->Threads(2)->UseRealTime();

// A 256 x 784 weight matrix (an MLP's first layer) as a histogram with PyTorch's default bins.
void BM_AddHistogram(benchmark::State& state) {
  nabla::manual_seed(1);
  nabla::Tensor w = nabla::randn({256, 784}) * 0.05;
  int64_t step = 0;
  for (auto _ : state) g_writer->add_histogram("weights/fc1.weight", w, step++);
  state.SetItemsProcessed(state.iterations() * w.numel());
}
BENCHMARK(BM_AddHistogram)->Setup(setup)->Teardown(teardown)->Unit(benchmark::kMicrosecond);

void BM_Crc32c(benchmark::State& state) {
  std::string buf(static_cast<size_t>(state.range(0)), 'x');
  const bool portable = state.range(1) != 0;
  uint32_t crc = 0;
  for (auto _ : state) {
    crc = portable ? tb::crc32c_portable(buf.data(), buf.size(), crc) : tb::crc32c(buf.data(), buf.size(), crc);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  state.SetLabel(portable ? "slicing-by-8" : "crc32c() (SSE4.2 when available)");
}
BENCHMARK(BM_Crc32c)->Args({32, 0})->Args({32, 1})->Args({65536, 0})->Args({65536, 1});

}  // namespace

BENCHMARK_MAIN();
