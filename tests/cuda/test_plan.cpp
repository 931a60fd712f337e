// The host-side planning of the CUDA kernels (cuda/iter.h, cuda/reduce_plan.h, cuda/gemm_plan.h,
// cuda/cudnn_plan.h, cuda/index_plan.h, cuda/deferred_checks.h):
// plain C++, so these tests run on every machine, with or without a GPU or a CUDA build. They pin
// down the index arithmetic the kernels rely on.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>

#include "core/impl.h"
#include "cuda/cudnn_plan.h"
#include "cuda/deferred_checks.h"
#include "cuda/driver_reason.h"
#include "cuda/gemm_plan.h"
#include "cuda/index_plan.h"
#include "cuda/iter.h"
#include "cuda/reduce_plan.h"
#include "nabla.h"

namespace nabla::cuda {
namespace {

TEST(CudaPlan, IntDividerMatchesDivision) {
  std::mt19937 rng(7);
  std::vector<uint32_t> divisors = {
      1, 2, 3, 5, 7, 10, 31, 32, 33, 255, 256, 1000, 65535, 65536, 1u << 20, (1u << 31) - 1, 1u << 31};
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + rng() % 100000);
  for (uint32_t d : divisors) {
    IntDivider div(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, d + 1, 2 * d - 1, (1u << 31) - 1, (1u << 31) - 2};
    for (int i = 0; i < 200; ++i) ns.push_back(rng() % (1u << 31));
    for (uint32_t n : ns) {
      if (n >= (1u << 31)) continue;
      ASSERT_EQ(div.div(n), n / d) << n << " / " << d;
    }
  }
}

// Visits every element of a plan the way the kernel does (Iter::pointers) and returns the byte
// offsets of operand k, in kernel order.
std::vector<int64_t> offsets(const IterPlan& plan, int k) {
  std::vector<int64_t> out;
  split_32bit(plan, [&](const IterPlan& piece) {
    Iter<2> it = make_iter<2>(piece);
    for (int64_t i = 0; i < piece.numel; ++i) {
      char* p[2];
      it.pointers(static_cast<uint32_t>(i), p);
      out.push_back(reinterpret_cast<intptr_t>(p[k]));
    }
  });
  return out;
}

TEST(CudaPlan, ContiguousTensorsBecomeOneDim) {
  Tensor a = zeros({4, 5, 6}), b = zeros({4, 5, 6});
  IterPlan p = plan_iter({&a, &b});
  ASSERT_EQ(p.sizes.size(), 1u);
  EXPECT_EQ(p.sizes[0], 120);
  EXPECT_EQ(p.strides[0][0], 4);
  EXPECT_EQ(p.strides[0][1], 4);
}

TEST(CudaPlan, StridedIterationVisitsEveryElementOnce) {
  // out contiguous (3, 4, 5); in = a permuted view: every out element must pair with the in element
  // of the same logical index.
  Tensor base = arange(60, kFloat32).view({5, 3, 4});
  Tensor in = base.permute({1, 2, 0});  // (3, 4, 5), strides (4, 1, 12)
  Tensor out = zeros({3, 4, 5});
  IterPlan p = plan_iter({&out, &in});
  std::vector<int64_t> o = offsets(p, 0);
  std::vector<int64_t> s = offsets(p, 1);
  ASSERT_EQ(o.size(), 60u);
  intptr_t ob = reinterpret_cast<intptr_t>(out.data_ptr());
  intptr_t ib = reinterpret_cast<intptr_t>(in.data_ptr());
  std::vector<int> seen(60, 0);
  for (size_t e = 0; e < o.size(); ++e) {
    int64_t oe = (o[e] - ob) / 4;
    ASSERT_GE(oe, 0);
    ASSERT_LT(oe, 60);
    ++seen[oe];
    int64_t i = oe / 20, j = (oe / 5) % 4, k = oe % 5;
    int64_t want = (i * 4 + j * 1 + k * 12) * 4;
    EXPECT_EQ(s[e] - ib, want);
  }
  for (int v : seen) EXPECT_EQ(v, 1);
}

TEST(CudaPlan, BroadcastOperandHasStrideZeroAndByValueOperandsNoPointer) {
  Tensor out = zeros({3, 4});
  Tensor row = zeros({4}).expand({3, 4});
  IterPlan p = plan_iter({&out, &row});
  ASSERT_EQ(p.sizes.size(), 2u);
  EXPECT_EQ(p.strides[1][1], 0);  // the outer (row) dim of the broadcast operand
  EXPECT_EQ(p.strides[0][1], 4);
  EXPECT_EQ(p.numel, 12);
  // A wrapped number (passed to the kernel by value): no pointer, stride 0 everywhere, and the
  // output alone decides the layout (one merged dim).
  Tensor number = internal::broadcast_view(scalar_tensor(2.0), out.sizes());
  IterPlan q = plan_iter({&out, &number}, 0b10);
  ASSERT_EQ(q.sizes.size(), 1u);
  EXPECT_EQ(q.base[1], nullptr);
  EXPECT_EQ(q.strides[0][1], 0);
}

TEST(CudaPlan, Split32bitCoversEverythingInOrder) {
  IterPlan p;
  p.nops = 1;
  p.sizes = {int64_t(1) << 20, 5000};  // 5.2e9 elements, innermost first
  p.strides.push_back({1, 0, 0, 0});
  p.strides.push_back({int64_t(1) << 20, 0, 0, 0});
  p.numel = (int64_t(1) << 20) * 5000;
  p.base[0] = reinterpret_cast<char*>(4096);
  int64_t total = 0, expect_base = 4096;
  split_32bit(p, [&](const IterPlan& piece) {
    EXPECT_LE(piece.numel, kMax32);
    EXPECT_EQ(reinterpret_cast<int64_t>(piece.base[0]), expect_base);
    expect_base += piece.numel;  // stride 1 byte per element, contiguous
    total += piece.numel;
  });
  EXPECT_EQ(total, p.numel);
}

TEST(CudaPlan, ReduceRowsAndColumns) {
  // Sum over the last (contiguous) dim: row mode.
  ReducePlan r = plan_reduce(IntArrayRef({64, 1000}), IntArrayRef({1000, 1}), IntArrayRef({1, 1}), {false, true}, 132);
  EXPECT_TRUE(r.row_mode);
  EXPECT_EQ(r.nout, 64);
  EXPECT_EQ(r.nred, 1000);
  EXPECT_EQ(r.bx % 32, 0);
  EXPECT_LE(r.bx * r.by, 512);
  EXPECT_EQ(r.grid_x * r.by >= r.nout, true);
  // Sum over the batch dim (a bias gradient): column mode.
  ReducePlan c = plan_reduce(IntArrayRef({1000, 64}), IntArrayRef({64, 1}), IntArrayRef({64, 1}), {true, false}, 132);
  EXPECT_FALSE(c.row_mode);
  EXPECT_EQ(c.nout, 64);
  EXPECT_GE(c.grid_x * c.bx, c.nout);
  EXPECT_LE(c.bx * c.by, 512);
}

TEST(CudaPlan, FullReductionSplitsAndChunksCoverTheInput) {
  ReducePlan p = plan_reduce(IntArrayRef({1 << 24}), IntArrayRef({1}), IntArrayRef({1}), {true}, 132);
  EXPECT_TRUE(p.row_mode);
  EXPECT_EQ(p.nout, 1);
  EXPECT_GT(p.splits, 1);
  EXPECT_LE(p.splits, 65535);
  EXPECT_GE(p.chunk * p.splits, p.nred);
  EXPECT_LT(p.chunk * (p.splits - 1), p.nred);  // no empty split
}

// Every (output offset, input offset) pair a set of reduction pieces visits, as the kernel walks them
// (kept dims innermost last, reduced dims likewise), sorted.
std::vector<std::pair<int64_t, int64_t>> visits(const std::vector<ReducePiece>& pieces) {
  std::vector<std::pair<int64_t, int64_t>> v;
  for (const ReducePiece& piece : pieces) {
    const ReducePlan& p = piece.plan;
    for (int64_t o = 0; o < p.nout; ++o) {
      int64_t xo = 0, oo = 0, rem = o;
      for (size_t d = p.kept.size.size(); d-- > 0;) {
        xo += (rem % p.kept.size[d]) * p.kept.xstride[d];
        oo += (rem % p.kept.size[d]) * p.kept.ostride[d];
        rem /= p.kept.size[d];
      }
      for (int64_t r = 0; r < p.nred; ++r) {
        int64_t ro = 0, q = r;
        for (size_t d = p.red.size.size(); d-- > 0;) {
          ro += (q % p.red.size[d]) * p.red.xstride[d];
          q /= p.red.size[d];
        }
        v.emplace_back(oo, piece.offset + xo + ro);
      }
    }
  }
  std::sort(v.begin(), v.end());
  return v;
}

// Reductions with more than 2^31 elements per output are cut on the host into pieces (here with a
// limit of a few elements, so that every case is small): together the pieces visit each element of
// each output exactly once, and each piece stays within the limit.
TEST(CudaPlan, ReducePiecesCoverEachOutputExactlyOnce) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 400; ++trial) {
    const int nd = 1 + static_cast<int>(rng() % 4);
    Shape sizes, xs, os;
    SmallVector<bool, 8> mask;
    for (int d = 0; d < nd; ++d) {
      sizes.push_back(1 + static_cast<int64_t>(rng() % 5));
      mask.push_back(rng() % 3 != 0);
    }
    // x contiguous or a transposed layout; out's keepdim strides contiguous over the kept dims.
    std::vector<int> perm(static_cast<size_t>(nd));
    for (int d = 0; d < nd; ++d) perm[static_cast<size_t>(d)] = d;
    if (rng() % 2) std::shuffle(perm.begin(), perm.end(), rng);
    xs.assign(static_cast<size_t>(nd), 0);
    int64_t st = 1;
    for (int k = nd; k-- > 0;) {
      xs[static_cast<size_t>(perm[static_cast<size_t>(k)])] = st;
      st *= sizes[static_cast<size_t>(perm[static_cast<size_t>(k)])];
    }
    os.assign(static_cast<size_t>(nd), 0);
    st = 1;
    for (int d = nd; d-- > 0;) {
      os[static_cast<size_t>(d)] = st;
      if (!mask[static_cast<size_t>(d)]) st *= sizes[static_cast<size_t>(d)];
    }
    const int64_t limit = 1 + static_cast<int64_t>(rng() % 7);
    std::vector<ReducePiece> pieces = plan_reduce_pieces(sizes, xs, os, mask, 132, limit);
    // The brute-force list of (output offset, input offset).
    std::vector<std::pair<int64_t, int64_t>> want;
    int64_t total = 1;
    for (int64_t s : sizes) total *= s;
    for (int64_t e = 0; e < total; ++e) {
      int64_t rem = e, xo = 0, oo = 0;
      for (int d = nd; d-- > 0;) {
        int64_t i = rem % sizes[static_cast<size_t>(d)];
        rem /= sizes[static_cast<size_t>(d)];
        xo += i * xs[static_cast<size_t>(d)];
        if (!mask[static_cast<size_t>(d)]) oo += i * os[static_cast<size_t>(d)];
      }
      want.emplace_back(oo, xo);
    }
    std::sort(want.begin(), want.end());
    ASSERT_EQ(visits(pieces), want) << "trial " << trial << " sizes " << sizes << " limit " << limit;
    int64_t nred = 1;
    for (int d = 0; d < nd; ++d)
      if (mask[static_cast<size_t>(d)]) nred *= sizes[static_cast<size_t>(d)];
    if (nred <= limit) EXPECT_EQ(pieces.size(), 1u);
    for (const ReducePiece& piece : pieces) {
      EXPECT_LE(piece.plan.nred, std::max<int64_t>(limit, 1));
      EXPECT_EQ(piece.plan.nout, pieces[0].plan.nout);
    }
  }
  // The real limit: a 1-D sum of 3 * 2^30 elements becomes two pieces, the second starting at 2^31 - 1.
  std::vector<ReducePiece> big =
      plan_reduce_pieces(IntArrayRef({3LL << 30}), IntArrayRef({1}), IntArrayRef({1}), {true}, 132);
  ASSERT_EQ(big.size(), 2u);
  EXPECT_EQ(big[1].offset, kMax32);
  EXPECT_EQ(big[0].plan.nred + big[1].plan.nred, 3LL << 30);
  EXPECT_THROW(plan_reduce(IntArrayRef({3LL << 30}), IntArrayRef({1}), IntArrayRef({1}), {true}, 132), NotImplemented);
}

TEST(CudaPlan, ReduceMergesContiguousDims) {
  // (2, 3, 4, 5) contiguous, reduce dims {1, 2}: the reduced dims merge into one of 12.
  ReducePlan p = plan_reduce(IntArrayRef({2, 3, 4, 5}), IntArrayRef({60, 20, 5, 1}), IntArrayRef({5, 5, 5, 1}),
                             {false, true, true, false}, 132);
  ASSERT_EQ(p.red.size.size(), 1u);
  EXPECT_EQ(p.red.size[0], 12);
  EXPECT_EQ(p.red.xstride[0], 5);
  EXPECT_EQ(p.nout, 10);
  EXPECT_FALSE(p.row_mode);  // the reduced dim is strided
}

TEST(CudaPlan, GemmOperandsWithoutCopies) {
  // Row-major A (3 x 4): its transpose is column-major, op N with ld 4.
  GemmOperand a = transposed_operand(3, 4, 4, 1);
  EXPECT_TRUE(a.ok);
  EXPECT_FALSE(a.trans);
  EXPECT_EQ(a.ld, 4);
  // A transposed view of a row-major (4 x 3) matrix: strides (1, 3) -> op T with ld 3.
  GemmOperand t = transposed_operand(3, 4, 1, 3);
  EXPECT_TRUE(t.ok);
  EXPECT_TRUE(t.trans);
  EXPECT_EQ(t.ld, 3);
  // A slice with row stride 10 of a wider matrix is fine (ld 10 >= 4).
  EXPECT_TRUE(transposed_operand(3, 4, 10, 1).ok);
  // Every other column: needs a copy.
  EXPECT_FALSE(transposed_operand(3, 4, 8, 2).ok);
  // Broadcast rows (stride 0): needs a copy.
  EXPECT_FALSE(transposed_operand(3, 4, 0, 1).ok);
  // Vectors: strides of size-1 dims do not matter.
  EXPECT_TRUE(transposed_operand(1, 5, 123, 1).ok);
  EXPECT_TRUE(transposed_operand(5, 1, 7, 99).ok);
  GemmOperand strided_row = transposed_operand(1, 5, 0, 5);  // one row, every 5th element
  EXPECT_TRUE(strided_row.ok);
  EXPECT_TRUE(strided_row.trans);
  EXPECT_EQ(strided_row.ld, 5);
  EXPECT_FALSE(transposed_operand(5, 1, 0, 1).ok);  // a broadcast column
  // Output: row-major only.
  EXPECT_TRUE(output_operand(3, 4, 4, 1).ok);
  EXPECT_FALSE(output_operand(3, 4, 1, 3).ok);
  EXPECT_TRUE(output_operand(1, 4, 0, 1).ok);
}

// ---- cuDNN convolution algorithm choice (cuda/cudnn_plan.h) ----------------------------------------
namespace ca = conv_algo;
constexpr int kFma = 1, kTensorOp = 2;

TEST(CudaPlan, ConvAlgoAcceptableKeepsCudnnOrderAndFilters) {
  std::vector<ca::Candidate> ranked = {{.algo = 6, .usable = false},
                                       {.algo = 1, .deterministic = false, .math = kFma},
                                       {.algo = 0, .math = kTensorOp},
                                       {.algo = 2, .math = kFma}};
  auto ids = [](const std::vector<ca::Candidate>& v) {
    std::vector<int> r;
    for (const auto& c : v) r.push_back(c.algo);
    return r;
  };
  EXPECT_EQ(ids(ca::acceptable(ranked, {})), (std::vector<int>{1, 0, 2}));
  EXPECT_EQ(ids(ca::acceptable(ranked, {.deterministic = true})), (std::vector<int>{0, 2}));
  // Strict math: the FMA-ranked ones first, then the others with FMA forced.
  auto strict = ca::acceptable(ranked, {.strict_math = true, .fma_math = kFma});
  EXPECT_EQ(ids(strict), (std::vector<int>{1, 2, 0}));
  for (const auto& c : strict) EXPECT_EQ(c.math, kFma) << c.algo;
  EXPECT_TRUE(ca::acceptable({{.algo = 3, .usable = false}}, {}).empty());
}

TEST(CudaPlan, ConvAlgoFallsBackToTheNextThatRuns) {
  std::vector<ca::Candidate> list = {{.algo = 7, .workspace = 100},
                                     {.algo = 5, .workspace = 1 << 30},
                                     {.algo = 4, .workspace = 200},
                                     {.algo = 3, .workspace = 50},
                                     {.algo = 1, .workspace = 0}};
  std::vector<int> tried;
  // 7 is not supported, 5's workspace is over the limit (never tried), 4 fails to run, 3's
  // workspace allocation fails, 1 runs.
  auto attempt = [&](const ca::Candidate& c) {
    tried.push_back(c.algo);
    switch (c.algo) {
      case 7: return ca::Outcome::not_supported;
      case 4: return ca::Outcome::execution_failed;
      case 3: return ca::Outcome::out_of_memory;
      default: return ca::Outcome::ran;
    }
  };
  EXPECT_EQ(ca::first_that_runs(list, 1 << 20, attempt, "conv"), 4u);
  EXPECT_EQ(tried, (std::vector<int>{7, 4, 3, 1}));
  // The first that runs wins at once.
  tried.clear();
  EXPECT_EQ(ca::first_that_runs(
                list, size_t(1) << 40,
                [&](const ca::Candidate& c) {
                  tried.push_back(c.algo);
                  return ca::Outcome::ran;
                },
                "conv"),
            0u);
  EXPECT_EQ(tried, (std::vector<int>{7}));
}

TEST(CudaPlan, ConvAlgoErrorSaysWhatHappenedToEach) {
  std::vector<ca::Candidate> list = {{.algo = 2, .workspace = 10}, {.algo = 0, .workspace = 4096}};
  try {
    ca::first_that_runs(
        list, 1000, [](const ca::Candidate&) { return ca::Outcome::not_supported; }, "conv_weight_grad");
    ADD_FAILURE() << "no error";
  } catch (const CudaError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("conv_weight_grad: no cuDNN convolution algorithm ran"), std::string::npos) << m;
    EXPECT_NE(m.find("algorithm 2 (workspace 10 bytes): not supported"), std::string::npos) << m;
    EXPECT_NE(m.find("algorithm 0 (workspace 4096 bytes): workspace larger than the memory available"),
              std::string::npos)
        << m;
  }
  EXPECT_THROW(ca::first_that_runs(
                   {}, 1000, [](const ca::Candidate&) { return ca::Outcome::ran; }, "conv"),
               CudaError);
}

// ---- why no GPU (cuda/driver_reason.h) -------------------------------------------------------------
TEST(CudaPlan, DriverTooOldIsExplainedWithVersions) {
  std::string r = device_count_failure("cudaErrorInsufficientDriver",
                                       "CUDA driver version is insufficient for CUDA runtime version", 12040, 13000);
  EXPECT_NE(r.find("the NVIDIA driver supports CUDA up to 12.4"), std::string::npos) << r;
  EXPECT_NE(r.find("built with the CUDA 13.0 runtime (CUDA 13 needs driver 580 or newer)"), std::string::npos) << r;
  EXPECT_NE(r.find("update the driver"), std::string::npos) << r;
  EXPECT_NE(r.find("(cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime version "
                   "(cudaErrorInsufficientDriver))"),
            std::string::npos)
      << r;
  // No driver at all: the runtime answers the same error, and the driver version 0.
  r = device_count_failure("cudaErrorInsufficientDriver", "CUDA driver version is insufficient", 0, 12080);
  EXPECT_EQ(r,
            "no NVIDIA driver is installed (cudaGetDeviceCount: CUDA driver version is insufficient "
            "(cudaErrorInsufficientDriver))");
  EXPECT_EQ(device_count_failure("cudaErrorNoDevice", "no CUDA-capable device is detected", 13000, 13000),
            "the CUDA driver reports no GPU");
  EXPECT_EQ(device_count_failure("cudaErrorUnknown", "unknown error", 13000, 13000),
            "cudaGetDeviceCount: unknown error (cudaErrorUnknown)");
  EXPECT_EQ(cuda_version_string(12080), "12.8");
}

TEST(CudaPlan, BatchNormGoesToCudnnWithinPytorchsLimits) {
  const double min_eps = 1e-5;
  EXPECT_TRUE(batch_norm_in_cudnn_limits(4, 32, 32 * 16 * 8 * 8, true, 1e-5, min_eps));
  EXPECT_FALSE(batch_norm_in_cudnn_limits(2, 32, 32 * 16, true, 1e-5, min_eps)) << "2-D inputs: composite";
  EXPECT_TRUE(batch_norm_in_cudnn_limits(3, 880801, 880801 * 2, true, 1e-5, min_eps));
  EXPECT_FALSE(batch_norm_in_cudnn_limits(3, 880802, 880802 * 2, true, 1e-5, min_eps));
  EXPECT_TRUE(batch_norm_in_cudnn_limits(3, 65535, 65535 * 2, false, 1e-5, min_eps));
  EXPECT_FALSE(batch_norm_in_cudnn_limits(3, 65536, 65536 * 2, false, 1e-5, min_eps)) << "eval batch > 65535";
  EXPECT_FALSE(batch_norm_in_cudnn_limits(4, 8, int64_t(1) << 31, true, 1e-5, min_eps)) << ">= 2^31 - 1 elements";
  EXPECT_FALSE(batch_norm_in_cudnn_limits(4, 8, 64, true, 1e-6, min_eps)) << "eps below cuDNN's minimum";
  EXPECT_FALSE(batch_norm_in_cudnn_limits(4, 0, 0, true, 1e-5, min_eps)) << "empty";
}

// cuDNN descriptors hold int: a convolution over more than 2^31 - 1 elements runs over slices of
// the batch, each as large as fits.
TEST(CudaPlan, ConvBatchChunkKeepsEachCallWithinInt) {
  const int64_t max_int = 2147483647;
  EXPECT_EQ(conv_batch_chunk(64, 1000, 2000), 64);            // fits: one call
  EXPECT_EQ(conv_batch_chunk(1025, 1 << 21, 1 << 21), 1023);  // 1025 * 2^21 > 2^31 - 1
  EXPECT_EQ(conv_batch_chunk(1025, 1 << 20, 1 << 21), 1023);  // the larger of input and output
  EXPECT_EQ(conv_batch_chunk(3, max_int, 1), 1);
  EXPECT_EQ(conv_batch_chunk(3, max_int + 1, 1), 0);  // one image too large: an error
  EXPECT_EQ(conv_batch_chunk(5, 0, 0), 5);
  std::mt19937_64 rng(9);
  for (int i = 0; i < 1000; ++i) {
    int64_t n = 1 + static_cast<int64_t>(rng() % 5000), a = 1 + static_cast<int64_t>(rng() % (int64_t(1) << 26)),
            b = 1 + static_cast<int64_t>(rng() % (int64_t(1) << 26));
    int64_t k = conv_batch_chunk(n, a, b);
    ASSERT_GE(k, 1);
    ASSERT_LE(k, n);
    ASSERT_LE(k * std::max(a, b), max_int);
    if (k < n) ASSERT_GT((k + 1) * std::max(a, b), max_int);  // as large as fits
  }
}

// The deterministic index_add/scatter_add find each destination's contributions as the run of its
// index in the stably sorted line: equal to std::equal_range, for every value present or absent,
// including out-of-range ones that must match nothing.
TEST(CudaPlan, OrderedAccumulationFindsEachDestinationsRun) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = 1 + rng() % 12, m = rng() % 40;
    std::vector<int64_t> raw(m);
    for (auto& v : raw) v = static_cast<int64_t>(rng() % (3 * n + 2)) - 2 * n - 1;  // [-2n-1, n]: some out of range
    std::vector<int64_t> sorted(m);
    for (int64_t j = 0; j < m; ++j) sorted[j] = wrapped_index(raw[j], n);
    std::vector<int64_t> order(m);
    for (int64_t j = 0; j < m; ++j) order[j] = j;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return sorted[a] < sorted[b]; });
    std::sort(sorted.begin(), sorted.end());
    for (int64_t v = -n - 2; v <= n + 1; ++v) {
      IndexRun r = equal_run(sorted.data(), m, v);
      auto [lo, hi] = std::equal_range(sorted.begin(), sorted.end(), v);
      ASSERT_EQ(r.lo, lo - sorted.begin()) << "v " << v << " m " << m;
      ASSERT_EQ(r.hi, hi - sorted.begin()) << "v " << v << " m " << m;
      if (v < 0 || v >= n) continue;
      // The run lists exactly the positions j whose index means v, in increasing j (the CPU's order).
      std::vector<int64_t> want, got(order.begin() + r.lo, order.begin() + r.hi);
      for (int64_t j = 0; j < m; ++j)
        if ((raw[j] >= 0 ? raw[j] : raw[j] + n) == v && raw[j] >= -n && raw[j] < n) want.push_back(j);
      ASSERT_EQ(got, want) << "v " << v;
    }
  }
}

TEST(CudaPlan, DeterministicSwitchIsOffByDefaultAndGlobal) {
  EXPECT_FALSE(are_deterministic_algorithms_enabled());
  use_deterministic_algorithms(true);
  EXPECT_TRUE(are_deterministic_algorithms_enabled());
  EXPECT_FALSE(cudnn::deterministic()) << "cuDNN's own switch is separate, as in PyTorch";
  std::thread other([] { EXPECT_TRUE(are_deterministic_algorithms_enabled()); });
  other.join();
  use_deterministic_algorithms(false);
  EXPECT_FALSE(are_deterministic_algorithms_enabled());
}

// Deferred index checks: slots, streams, order of reports, overflow (cuda/deferred_checks.h).
TEST(CudaPlan, DeferredChecksReportPerStreamInOrderAndFreeTheirSlots) {
  void* a = reinterpret_cast<void*>(0x10);
  void* b = reinterpret_cast<void*>(0x20);
  DeferredCheckBook book(4);
  std::vector<int64_t> records(4 * 4, 0);  // what the kernels would have written
  std::vector<std::string> ran;
  auto arm = [&](int slot, std::string name) {
    book.arm(slot, [&ran, name](const int64_t* r) {
      ran.push_back(name);
      if (r[0]) throw IndexError(name + ": index " + std::to_string(r[1]));
    });
  };
  int s0 = book.take_slot(a), s1 = book.take_slot(b), s2 = book.take_slot(a);
  EXPECT_EQ(s0, 0);
  EXPECT_EQ(s1, 1);
  EXPECT_EQ(s2, 2);
  arm(s0, "a0");
  arm(s1, "b1");
  arm(s2, "a2");
  EXPECT_EQ(book.pending(), 3u);
  EXPECT_EQ(book.streams(), (std::vector<void*>{a, b}));
  auto record = [&](int slot) { return records.data() + slot * 4; };
  // Finishing stream a runs a's reports in the order the checks were made, not b's.
  auto done = book.finish(a);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(slot_span(done), (std::pair<int, int>{0, 3}));
  run_reports(done, record);
  EXPECT_EQ(ran, (std::vector<std::string>{"a0", "a2"}));
  EXPECT_EQ(book.pending(), 1u);
  EXPECT_TRUE(book.finish(a).empty());
  // Freed slots are taken again; a full book says so (-1) instead of growing.
  int t0 = book.take_slot(a), t1 = book.take_slot(a), t2 = book.take_slot(b);
  EXPECT_GE(std::min({t0, t1, t2}), 0);
  EXPECT_EQ(book.pending(), 4u);
  EXPECT_EQ(book.take_slot(a), -1);
  arm(t0, "a-first");
  arm(t1, "a-second");
  // t2 is never armed (its op failed before its kernel): finished without a report.
  records[t0 * 4] = 1;
  records[t0 * 4 + 1] = 9;
  records[t1 * 4] = 1;
  records[t1 * 4 + 1] = 5;
  ran.clear();
  done = book.finish(nullptr, /*all_streams=*/true);
  EXPECT_EQ(done.size(), 4u);
  EXPECT_EQ(book.pending(), 0u);
  // The first bad check is the error; the reports after it do not run.
  try {
    run_reports(done, record);
    FAIL() << "expected an IndexError";
  } catch (const IndexError& e) { EXPECT_EQ(std::string(e.what()), "a-first: index 9"); }
  EXPECT_EQ(ran, (std::vector<std::string>{"b1", "a-first"}));
  EXPECT_TRUE(book.streams().empty());
  // Order survives slot reuse: a check made later in a lower slot reports later.
  DeferredCheckBook small(2);
  int x = small.take_slot(a), y = small.take_slot(a);
  small.finish(a);
  int z = small.take_slot(a);  // made first, in the higher slot
  int w = small.take_slot(a);
  EXPECT_NE(x, y);
  EXPECT_GT(z, w);
  small.arm(z, [&ran](const int64_t*) { ran.push_back("z"); });
  small.arm(w, [&ran](const int64_t*) { ran.push_back("w"); });
  ran.clear();
  run_reports(small.finish(a), record);
  EXPECT_EQ(ran, (std::vector<std::string>{"z", "w"}));
}

}  // namespace
}  // namespace nabla::cuda
