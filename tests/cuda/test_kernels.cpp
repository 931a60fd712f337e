// Targeted checks of the CUDA kernels beyond the registry's small samples: large and odd sizes
// that take the other code paths (split reductions, long rows, global-memory sorts, 32-bit
// splitting), NaN and tie semantics, index errors, deterministic scatter, random streams equal to
// the CPU's, cuBLAS layouts and TF32, cuDNN modes, half precision, fused optimizer updates, and
// autograd end to end.
#include <cmath>

#include "autograd/gradcheck.h"
#include "core/backend.h"
#include "cuda_test_util.h"
#include "optim/fused.h"

namespace nabla {
namespace {

using testing::close_on_host;

// Sets the index-check mode for one test and restores the previous one.
struct IndexCheckMode {
  cuda::IndexChecks prev = cuda::index_checks_mode();
  explicit IndexCheckMode(cuda::IndexChecks mode) { cuda::set_index_checks(mode); }
  ~IndexCheckMode() { cuda::set_index_checks(prev); }
};

Tensor rnd(IntArrayRef shape, DType dt = kFloat64, uint64_t seed = 1) {
  manual_seed(seed);
  return randn(shape, dtype(kFloat64)).to(dt);
}

// ---- elementwise ----------------------------------------------------------------------------------
TEST(CudaKernels, ElementwiseBroadcastPromotionAndInPlace) {
  NABLA_REQUIRE_CUDA();
  Tensor a = rnd({7, 1, 5}), b = rnd({1, 6, 5}, kFloat32, 2), i = arange(5, kInt64);
  Tensor ga = a.cuda(), gb = b.cuda(), gi = i.cuda();
  EXPECT_TRUE(close_on_host(ga + gb, a + b, 1e-6));
  EXPECT_TRUE(close_on_host(gi * 2.5, i * 2.5, 0));  // int tensor * float number -> float32
  EXPECT_EQ((gi * 2.5).dtype(), kFloat32);
  EXPECT_TRUE(close_on_host(gi + 3, i + 3, 0));  // stays int64
  EXPECT_TRUE(close_on_host(gi / 2, i / 2, 0));  // true division -> float
  EXPECT_TRUE(close_on_host(remainder(gi - 2, 3), remainder(i - 2, 3), 0));
  EXPECT_TRUE(
      close_on_host(floor_divide(gi - 2, full({5}, 3, kInt64).cuda()), floor_divide(i - 2, full({5}, 3, kInt64)), 0));
  EXPECT_TRUE(close_on_host(pow(gi, 3), pow(i, 3), 0));
  EXPECT_TRUE(close_on_host(ga.gt(0.1), a.gt(0.1), 0));
  // In place into a non-contiguous view.
  Tensor h = rnd({4, 6}, kFloat32, 3), g = h.cuda();
  h.t().add_(ones({6, 4}), 2);
  g.t().add_(ones({6, 4}, kCUDA), 2);
  EXPECT_TRUE(close_on_host(g, h, 1e-6));
  g.relu_();
  h.relu_();
  EXPECT_TRUE(close_on_host(g, h, 0));
  // Every unary op with a parameter, and clamp on integers with out-of-range bounds.
  EXPECT_TRUE(close_on_host(clamp(gi, -1e30, 2.5), clamp(i, -1e30, 2.5), 0));
  EXPECT_TRUE(close_on_host(clamp(ga, -0.5, 0.5), clamp(a, -0.5, 0.5), 0));
  EXPECT_TRUE(close_on_host(leaky_relu(ga, 0.2), leaky_relu(a, 0.2), 1e-12));
  // Bool arithmetic and logical ops.
  Tensor m1 = a > 0, m2 = a < 0.5;
  EXPECT_TRUE(close_on_host((m1.cuda() & m2.cuda()), m1 & m2, 0));
  EXPECT_TRUE(close_on_host(add(m1.cuda(), m2.cuda()), add(m1, m2), 0));
  EXPECT_TRUE(close_on_host(~m1.cuda(), ~m1, 0));
  // NaN and inf predicates.
  Tensor special = tensor({0.0, std::nan(""), INFINITY, -INFINITY, 1.0}, kFloat64);
  EXPECT_TRUE(close_on_host(isnan(special.cuda()), isnan(special), 0));
  EXPECT_TRUE(close_on_host(isinf(special.cuda()), isinf(special), 0));
  EXPECT_TRUE(close_on_host(isfinite(special.cuda()), isfinite(special), 0));
  EXPECT_TRUE(close_on_host(maximum(special.cuda(), zeros({5}, dtype(kFloat64).device(kCUDA))),
                            maximum(special, zeros({5}, kFloat64)), 0));
}

TEST(CudaKernels, HalfPrecisionArithmetic) {
  NABLA_REQUIRE_CUDA();
  Tensor a = rnd({64, 33}, kFloat32), b = rnd({64, 33}, kFloat32, 2);
  for (DType dt : {kFloat16, kBFloat16}) {
    Tensor ga = a.to(kCUDA, dt), gb = b.to(kCUDA, dt);
    double tol = dt == kFloat16 ? 2e-2 : 1e-1;
    EXPECT_EQ((ga * gb).dtype(), dt);
    EXPECT_TRUE(close_on_host((ga * gb + 1).to(kFloat32), a * b + 1, tol)) << dtype_name(dt);
    EXPECT_TRUE(close_on_host(exp(ga).to(kFloat32), exp(a), tol)) << dtype_name(dt);
    EXPECT_TRUE(close_on_host(ga.sum({1}).to(kFloat32), a.sum({1}), tol * 10)) << dtype_name(dt);
    EXPECT_TRUE(close_on_host(softmax(ga, 1).to(kFloat32), softmax(a, 1), tol)) << dtype_name(dt);
    EXPECT_TRUE(close_on_host(mm(ga, gb.t()).to(kFloat32), mm(a, b.t()), tol * 10)) << dtype_name(dt);
  }
}

TEST(CudaKernels, MoreThanTwoBillionElementsSplitInto32bitLaunches) {
  NABLA_REQUIRE_CUDA();
  if (cuda::mem_get_info().free_bytes < (size_t(5) << 30)) GTEST_SKIP() << "needs 5 GiB free on the GPU";
  int64_t n = (int64_t(1) << 31) + 1000;
  Tensor x = zeros({n}, dtype(kUInt8).device(kCUDA));
  x.add_(1);
  x.narrow(0, 0, 1).fill_(7);
  Tensor tail = x.narrow(0, n - 10, 10).cpu();
  EXPECT_TRUE(equal(tail, ones({10}, kUInt8)));
  Tensor seam = x.narrow(0, (int64_t(1) << 30) - 5, 10).cpu();
  EXPECT_TRUE(equal(seam, ones({10}, kUInt8)));
  EXPECT_EQ(x[0].item<int>(), 7);
  x = Tensor();
  cuda::empty_cache();
}

// ---- reductions -------------------------------------------------------------------------------------
TEST(CudaKernels, ReductionsOverEveryLayout) {
  NABLA_REQUIRE_CUDA();
  Tensor big = rnd({1 << 22});
  EXPECT_TRUE(close_on_host(big.cuda().sum(), big.sum(), 1e-9));  // split full reduction
  Tensor cols = rnd({8192, 48}, kFloat64, 2);
  EXPECT_TRUE(close_on_host(cols.cuda().sum({0}), cols.sum({0}), 1e-9));  // column mode with splits
  Tensor x = rnd({16, 33, 70}, kFloat64, 3).permute({2, 0, 1});           // strided input
  Tensor gx = x.cuda();
  EXPECT_TRUE(close_on_host(gx.sum({0, 2}), x.sum({0, 2}), 1e-9));
  EXPECT_TRUE(close_on_host(gx.amax({1}), x.amax({1}), 0));
  EXPECT_TRUE(close_on_host(gx.amin({0, 1}, true), x.amin({0, 1}, true), 0));
  EXPECT_TRUE(close_on_host(gx.mean({2}), x.mean({2}), 1e-9));
  EXPECT_TRUE(close_on_host(var(gx, {0}), var(x, {0}), 1e-9));
  EXPECT_TRUE(close_on_host((gx * 0.1 + 1).prod(1), (x * 0.1 + 1).prod(1), 1e-9));
  Tensor i = randint(-5, 6, {33, 65}, kInt64);
  EXPECT_TRUE(close_on_host(i.cuda().sum({1}), i.sum({1}), 0));
  EXPECT_TRUE(close_on_host(i.cuda().sum(), i.sum(), 0));
  EXPECT_TRUE(close_on_host((i.cuda() > 0).any(1), (i > 0).any(1), 0));
  EXPECT_TRUE(close_on_host((i.cuda() > -6).all(), (i > -6).all(), 0));
  EXPECT_TRUE(close_on_host(count_nonzero(i.cuda(), {0}), count_nonzero(i, {0}), 0));
  // NaN propagates through max/min; empty reductions give the identity.
  Tensor nan = tensor({1.0, std::nan(""), 3.0});
  EXPECT_TRUE(std::isnan(nan.cuda().max().item<double>()));
  EXPECT_EQ(zeros({0, 3}, kCUDA).sum().item<double>(), 0.0);
  EXPECT_EQ(zeros({0, 3}, kCUDA).prod(0).sum().item<double>(), 3.0);
  EXPECT_THROW(zeros({0}, kCUDA).max(), ValueError);
}

TEST(CudaKernels, ArgmaxTiesAndNan) {
  NABLA_REQUIRE_CUDA();
  Tensor t = tensor({{1.0, 3.0, 3.0, 0.0}, {2.0, std::nan(""), 5.0, std::nan("")}});
  auto [v, i] = t.cuda().max(1);
  EXPECT_TRUE(close_on_host(i, tensor({1, 1}, kInt64), 0));  // first of the ties; first NaN
  auto [v2, i2] = t.cuda().min(0);
  auto [cv2, ci2] = t.min(0);
  EXPECT_TRUE(close_on_host(i2, ci2, 0));
  Tensor big = rnd({3, 5000});
  EXPECT_TRUE(close_on_host(big.cuda().argmax(1), big.argmax(1), 0));
  EXPECT_TRUE(close_on_host(big.cuda().argmin(0), big.argmin(0), 0));
  EXPECT_TRUE(close_on_host(big.cuda().argmax(), big.argmax(), 0));
}

TEST(CudaKernels, CumsumAndCumprodLongAndStrided) {
  NABLA_REQUIRE_CUDA();
  Tensor x = rnd({3, 10000});
  EXPECT_TRUE(close_on_host(cumsum(x.cuda(), 1), cumsum(x, 1), 1e-9));
  EXPECT_TRUE(close_on_host(cumsum(x.cuda(), 0), cumsum(x, 0), 1e-9));
  Tensor y = rnd({50, 7}, kFloat64, 2) * 0.1 + 1;
  EXPECT_TRUE(close_on_host(cumprod(y.cuda(), 0), cumprod(y, 0), 1e-9));
  Tensor i = randint(0, 3, {4, 100}, kInt64);
  EXPECT_TRUE(close_on_host(cumsum(i.cuda(), 1), cumsum(i, 1), 0));
}

// ---- softmax ------------------------------------------------------------------------------------------
TEST(CudaKernels, SoftmaxRowsColumnsAndBackward) {
  NABLA_REQUIRE_CUDA();
  for (auto shape : {std::vector<int64_t>{64, 10}, std::vector<int64_t>{4, 5000}, std::vector<int64_t>{8, 7, 5}}) {
    Tensor x = rnd(shape) * 3;
    for (int64_t d : {int64_t(-1), int64_t(0), int64_t(1)}) {
      for (bool log : {false, true}) {
        Tensor xc = x.detach().requires_grad_(), xg = x.cuda().detach().requires_grad_();
        Tensor yc = log ? log_softmax(xc, d) : softmax(xc, d);
        Tensor yg = log ? log_softmax(xg, d) : softmax(xg, d);
        EXPECT_TRUE(close_on_host(yg, yc, 1e-9)) << "dim " << d << " log " << log;
        Tensor w = rnd(yc.sizes(), kFloat64, 9);
        (yc * w).sum().backward();
        (yg * w.cuda()).sum().backward();
        EXPECT_TRUE(close_on_host(xg.grad(), xc.grad(), 1e-9)) << "dim " << d << " log " << log;
      }
    }
  }
  // Rows of -inf do not produce NaN from inf - inf in the max step.
  Tensor ninf = full({2, 3}, -INFINITY);
  EXPECT_TRUE(close_on_host(softmax(ninf.cuda(), 1), softmax(ninf, 1), 0));
}

// ---- sorting ------------------------------------------------------------------------------------------
TEST(CudaKernels, SortAndTopkShortLongTiesNan) {
  NABLA_REQUIRE_CUDA();
  for (int64_t len : {1, 2, 5, 33, 1000, 4096, 4097, 20000}) {
    Tensor x = randint(0, 50, {3, len}, kInt64).to(kFloat32);  // many ties
    for (bool desc : {false, true}) {
      auto [v, i] = sort(x.cuda(), 1, desc);
      auto [cv, ci] = sort(x, 1, desc);
      EXPECT_TRUE(close_on_host(v, cv, 0)) << len << " desc " << desc;
      EXPECT_TRUE(close_on_host(i, ci, 0)) << len << " desc " << desc << ": ties must keep their order";
    }
    int64_t k = std::min<int64_t>(len, 7);
    auto [tv, ti] = topk(x.cuda(), k, 1);
    auto [ctv, cti] = topk(x, k, 1);
    EXPECT_TRUE(close_on_host(tv, ctv, 0)) << len;
    EXPECT_TRUE(close_on_host(ti, cti, 0)) << len;
    auto [sv, si] = topk(x.cuda(), k, 1, /*largest=*/false);
    auto [csv, csi] = topk(x, k, 1, false);
    EXPECT_TRUE(close_on_host(si, csi, 0)) << len;
  }
  Tensor n = tensor({3.0, std::nan(""), -1.0, 2.0, std::nan("")});
  auto [nv, ni] = sort(n.cuda());
  auto [cnv, cni] = sort(n);
  EXPECT_TRUE(close_on_host(ni, cni, 0));
  // Along dim 0 of a 3-D tensor (strided lines).
  Tensor y = rnd({9, 4, 3});
  auto [yv, yi] = sort(y.cuda(), 0, true);
  auto [cyv, cyi] = sort(y, 0, true);
  EXPECT_TRUE(close_on_host(yv, cyv, 0));
  EXPECT_TRUE(close_on_host(yi, cyi, 0));
  EXPECT_TRUE(close_on_host(argsort(y.cuda(), 1), argsort(y, 1), 0));
}

// ---- indexing -----------------------------------------------------------------------------------------
TEST(CudaKernels, OutOfRangeIndicesAreIndexErrors) {
  NABLA_REQUIRE_CUDA();
  IndexCheckMode immediate(cuda::IndexChecks::immediate);  // each op waits and throws itself
  Tensor x = rnd({4, 5}).cuda();
  Tensor bad = tensor({0, 7}, kInt64).cuda();
  EXPECT_THROW(x.index_select(0, bad), IndexError);
  EXPECT_THROW(x.gather(1, tensor({{0}, {9}, {1}, {2}}, kInt64).cuda()), IndexError);
  EXPECT_THROW(zeros({4, 5}, kCUDA).scatter_add(0, tensor({{4, 0, 0, 0, 0}}, kInt64).cuda(), ones({1, 5}, kCUDA)),
               IndexError);
  EXPECT_THROW(embedding(x, tensor({-5}, kInt64).cuda()), IndexError);
  try {
    x.index_select(0, bad);
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("index 7 is out of range for dim 0 of size 4"), std::string::npos) << e.what();
  }
  // Negative indices wrap, as on the CPU.
  EXPECT_TRUE(
      close_on_host(x.index_select(0, tensor({-1}, kInt64).cuda()), x.cpu().index_select(0, tensor({-1}, kInt64)), 0));
  // With checks off, out-of-range indices are skipped and nothing throws (or faults).
  cuda::set_index_checks(false);
  EXPECT_NO_THROW(x.index_select(0, bad));
  EXPECT_NO_THROW(cuda::synchronize());
  cuda::set_index_checks(cuda::IndexChecks::immediate);
  // The device is healthy afterwards.
  EXPECT_EQ(ones({3}, kCUDA).sum().item<double>(), 3.0);
}

TEST(CudaKernels, DeferredIndexErrorsSurfaceAtTheNextSynchronization) {
  NABLA_REQUIRE_CUDA();
  IndexCheckMode deferred(cuda::IndexChecks::deferred);
  cuda::synchronize();
  Tensor x = rnd({4, 5}).cuda();
  Tensor bad = tensor({0, 7}, kInt64).cuda(), good = tensor({3, 0, -1}, kInt64).cuda();
  auto message_of = [](auto&& sync) {
    try {
      sync();
    } catch (const IndexError& e) { return std::string(e.what()); }
    return std::string("no IndexError");
  };
  // The op does not wait; the copy to the host that follows reports it, once.
  Tensor y;
  EXPECT_NO_THROW(y = x.index_select(0, bad));
  std::string m = message_of([&] { (void)y.cpu(); });
  EXPECT_NE(m.find("index_select: index 7 is out of range for dim 0 of size 4"), std::string::npos) << m;
  EXPECT_NE(m.find("later synchronization"), std::string::npos) << m;
  EXPECT_NO_THROW((void)y.cpu());
  // cuda::synchronize() and item() (of an unrelated tensor on the same stream) report too.
  (void)x.gather(1, tensor({{0}, {9}, {1}, {2}}, kInt64).cuda());
  m = message_of([] { cuda::synchronize(); });
  EXPECT_NE(m.find("gather: index 9"), std::string::npos) << m;
  (void)embedding(x, tensor({-5}, kInt64).cuda());
  m = message_of([] { (void)ones({2}, kCUDA).sum().item<double>(); });
  EXPECT_NE(m.find("index -5"), std::string::npos) << m;
  // Of several bad ops, the first is reported and the rest dropped.
  (void)x.index_select(0, tensor({9}, kInt64).cuda());
  (void)x.index_select(1, tensor({6}, kInt64).cuda());
  m = message_of([] { cuda::synchronize(); });
  EXPECT_NE(m.find("index 9 is out of range for dim 0"), std::string::npos) << m;
  EXPECT_NO_THROW(cuda::synchronize());
  // More checks than records (1024 per device) without a synchronization: the oldest are waited
  // for and reported then, by the op that needs a record; none is lost.
  for (int i = 0; i < 2500; ++i) (void)x.index_select(0, good);
  EXPECT_NO_THROW(cuda::synchronize());
  m = message_of([&] {
    (void)x.index_select(0, bad);
    for (int i = 0; i < 1500; ++i) (void)x.index_select(0, good);
  });
  EXPECT_NE(m.find("index 7"), std::string::npos) << m;
  EXPECT_NO_THROW(cuda::synchronize());
  // A check made on a side stream is that stream's: the main stream's copy does not report it.
  cuda::Stream side = cuda::new_stream();
  {
    cuda::StreamGuard on_side(side);
    (void)x.index_select(0, bad);
  }
  EXPECT_NO_THROW((void)ones({2}, kCUDA).cpu());
  m = message_of([&] { side.synchronize(); });
  EXPECT_NE(m.find("index 7"), std::string::npos) << m;
  // Losses' and layers' range checks are deferred the same way.
  Tensor logits = rnd({3, 4}).cuda(), target = tensor({0, 9, 1}, kInt64).cuda();
  Tensor loss;
  EXPECT_NO_THROW(loss = nn::functional::cross_entropy(logits, target));
  m = message_of([&] { (void)loss.item<double>(); });
  EXPECT_NE(m.find("target 9 is out of bounds"), std::string::npos) << m;
  EXPECT_NEAR(nn::functional::cross_entropy(logits, tensor({0, 3, 1}, kInt64).cuda()).item<double>(),
              nn::functional::cross_entropy(logits.cpu(), tensor({0, 3, 1}, kInt64)).item<double>(), 1e-12);
  // Good indices: equal to the CPU, nothing reported.
  EXPECT_TRUE(close_on_host(x.index_select(0, good), x.cpu().index_select(0, good.cpu()), 0));
  EXPECT_NO_THROW(cuda::synchronize());
}

TEST(CudaKernels, ScatterIsDeterministicAndMatchesTheCpuWithDuplicates) {
  NABLA_REQUIRE_CUDA();
  Tensor idx = randint(0, 3, {200, 6}, kInt64);  // many writes to each of 3 rows
  Tensor src = rnd({200, 6});
  Tensor base = zeros({3, 6}, kFloat64);
  Tensor want = base.scatter(0, idx, src);  // the CPU: the last write in memory order wins
  for (int rep = 0; rep < 3; ++rep) {
    Tensor got = base.cuda().scatter(0, idx.cuda(), src.cuda());
    EXPECT_TRUE(close_on_host(got, want, 0));
  }
  EXPECT_TRUE(close_on_host(base.cuda().scatter_add(0, idx.cuda(), src.cuda()), base.scatter_add(0, idx, src), 1e-12));
  Tensor rows = randint(0, 10, {1000}, kInt64);
  Tensor vals = rnd({1000, 4});
  EXPECT_TRUE(close_on_host(index_add(zeros({10, 4}, dtype(kFloat64).device(kCUDA)), 0, rows.cuda(), vals.cuda()),
                            index_add(zeros({10, 4}, kFloat64), 0, rows, vals), 1e-12));
  // Integer and bool accumulation with atomics.
  Tensor ii = randint(0, 100, {1000, 4}, kInt64);
  EXPECT_TRUE(close_on_host(index_add(zeros({10, 4}, dtype(kInt64).device(kCUDA)), 0, rows.cuda(), ii.cuda()),
                            index_add(zeros({10, 4}, kInt64), 0, rows, ii), 0));
  Tensor u8 = randint(0, 3, {1000, 4}, kUInt8);
  EXPECT_TRUE(close_on_host(index_add(zeros({10, 4}, dtype(kUInt8).device(kCUDA)), 0, rows.cuda(), u8.cuda()),
                            index_add(zeros({10, 4}, kUInt8), 0, rows, u8), 0));
  // one_hot is a scatter of ones.
  Tensor labels = randint(0, 10, {64}, kInt64);
  EXPECT_TRUE(close_on_host(one_hot(labels.cuda(), 10), one_hot(labels, 10), 0));
}

// use_deterministic_algorithms(true): index_add, scatter_add and max_pool2d's backward add in index
// order without atomics, the CPU's order, so float32 and float16 results equal the CPU's bit for bit
// (the atomic default does not promise that) and repeat run to run.
TEST(CudaKernels, DeterministicAccumulationEqualsTheCpuBitForBit) {
  NABLA_REQUIRE_CUDA();
  IndexCheckMode immediate(cuda::IndexChecks::immediate);  // bad indices throw at the op, leaving `out` as it was
  struct Restore {
    ~Restore() { use_deterministic_algorithms(false); }
  } restore;
  use_deterministic_algorithms(true);
  // index_add along a middle dim, 3,000 contributions onto 10 rows.
  Tensor rows = randint(0, 10, {3000}, kInt64);
  Tensor vals = rnd({2, 3000, 5}, kFloat32);
  Tensor want = index_add(zeros({2, 10, 5}), 1, rows, vals);
  for (int rep = 0; rep < 2; ++rep)
    EXPECT_TRUE(close_on_host(index_add(zeros({2, 10, 5}, kCUDA), 1, rows.cuda(), vals.cuda()), want, 0));
  // scatter_add along dim 0 and 1, src larger than index, float16, a 1-D scatter of 10,000 values.
  Tensor idx = randint(0, 4, {300, 7}, kInt64), src = rnd({300, 7}, kFloat32, 2), base = rnd({4, 7}, kFloat32, 3);
  EXPECT_TRUE(close_on_host(base.cuda().scatter_add(0, idx.cuda(), src.cuda()), base.scatter_add(0, idx, src), 0));
  Tensor idx1 = randint(0, 3, {5, 400}, kInt64), src1 = rnd({6, 500}, kFloat32, 4);
  EXPECT_TRUE(close_on_host(zeros({5, 3}, kCUDA).scatter_add(1, idx1.cuda(), src1.cuda()),
                            zeros({5, 3}).scatter_add(1, idx1, src1), 0));
  Tensor h = src.to(kFloat16), hb = base.to(kFloat16);
  EXPECT_TRUE(close_on_host(hb.cuda().scatter_add(0, idx.cuda(), h.cuda()), hb.scatter_add(0, idx, h), 0));
  Tensor idx2 = randint(0, 5, {10000}, kInt64), src2 = rnd({10000}, kFloat32, 5);
  EXPECT_TRUE(close_on_host(zeros({5}, kCUDA).scatter_add(0, idx2.cuda(), src2.cuda()),
                            zeros({5}).scatter_add(0, idx2, src2), 0));
  // A non-contiguous destination (a transposed view), in place.
  Tensor t_cpu = rnd({7, 4}, kFloat32, 6), t_gpu = t_cpu.cuda();
  Tensor idx3 = randint(0, 4, {50, 7}, kInt64), src3 = rnd({50, 7}, kFloat32, 7);
  t_cpu.t().scatter_add_(0, idx3, src3);
  t_gpu.t().scatter_add_(0, idx3.cuda(), src3.cuda());
  EXPECT_TRUE(close_on_host(t_gpu, t_cpu, 0));
  // Out-of-range indices still throw, leaving the destination unchanged.
  Tensor keep = ones({3, 2}, kCUDA);
  EXPECT_THROW(keep.scatter_add_(0, tensor({0, 3}, kInt64).reshape({1, 2}).cuda(), ones({1, 2}, kCUDA)), IndexError);
  EXPECT_TRUE(close_on_host(keep, ones({3, 2}), 0));
  // max_pool2d's backward with overlapping windows (kernel 3, stride 1, dilation 2).
  Tensor x = rnd({2, 3, 11, 11}, kFloat32, 8), g = rnd({2, 3, 7, 7}, kFloat32, 9);
  Tensor xc = x.clone().requires_grad_(true), xg = x.cuda().requires_grad_(true);
  (max_pool2d(xc, {3, 3}, {1, 1}, 0, 2) * g).sum().backward();
  (max_pool2d(xg, {3, 3}, {1, 1}, 0, 2) * g.cuda()).sum().backward();
  EXPECT_TRUE(close_on_host(xg.grad(), xc.grad(), 0));
  // Convolutions pick deterministic cuDNN algorithms under the global switch too.
  Tensor cx = rnd({8, 16, 14, 14}, kFloat32).cuda(), cgy = rnd({8, 32, 14, 14}, kFloat32, 2).cuda();
  Tensor w1 = conv2d_weight_grad(cx, cgy, {3, 3}, Conv2dParams{{1, 1}, {1, 1}, {1, 1}, 1});
  Tensor w2 = conv2d_weight_grad(cx, cgy, {3, 3}, Conv2dParams{{1, 1}, {1, 1}, {1, 1}, 1});
  EXPECT_TRUE(close_on_host(w1, w2, 0));
}

// More than 2^31 elements per output: the reduction is cut on the host into pieces whose partial
// results the second pass combines (cuda/reduce_plan.h). Needs about 19 GB of GPU memory.
TEST(CudaKernels, ReductionsBeyond2Pow31ElementsPerOutput) {
  NABLA_REQUIRE_CUDA();
  const int64_t n = (int64_t(1) << 31) + 7;
  if (cuda::mem_get_info().free_bytes < size_t(20) << 30) GTEST_SKIP() << "needs 20 GB of free GPU memory";
  {
    Tensor b = zeros({n}, dtype(kBool).device(kCUDA));
    EXPECT_FALSE(b.any().item<bool>());
    b.narrow(0, n - 1, 1).fill_(true);  // only the last element, in the second piece
    EXPECT_TRUE(b.any().item<bool>());
    EXPECT_FALSE(b.all().item<bool>());
  }
  {
    Tensor ones64 = ones({n}, dtype(kInt64).device(kCUDA));
    EXPECT_EQ(ones64.sum().item<int64_t>(), n);
    // Two outputs of n / 2 + ... elements each are fine too: a (2, m) sum over dim 1.
    Tensor two = ones64.narrow(0, 0, n - 1).view({2, (n - 1) / 2});
    EXPECT_TRUE(close_on_host(two.sum(1), full({2}, (n - 1) / 2, dtype(kInt64)), 0));
  }
  cuda::empty_cache();
}

// A convolution over more than 2^31 - 1 elements (cuDNN's limit per tensor) runs over slices of the
// batch (cudnn_plan.h's conv_batch_chunk); the weight gradient adds the slices'. Needs ~30 GB.
TEST(CudaKernels, ConvolutionBeyond2Pow31ElementsSplitsTheBatch) {
  NABLA_REQUIRE_CUDA();
  if (cuda::mem_get_info().free_bytes < size_t(32) << 30) GTEST_SKIP() << "needs 32 GB of free GPU memory";
  {
    Tensor x = ones({1025, 1, 1024, 2048}, kCUDA);  // 2,149,580,800 elements
    Tensor w = full({1, 1, 1, 1}, 2.0, dtype(kFloat32).device(kCUDA));
    Tensor y = conv2d(x, w);
    EXPECT_EQ(y.min().item<float>(), 2.0f);
    EXPECT_EQ(y.max().item<float>(), 2.0f);
    y = Tensor();
    Tensor gx = conv2d_input_grad(x, w, {1024, 2048}, Conv2dParams{{1, 1}, {0, 0}, {1, 1}, 1});  // gy = ones
    EXPECT_EQ(gx.min().item<float>(), 2.0f);
    EXPECT_EQ(gx.max().item<float>(), 2.0f);
    gx = Tensor();
    Tensor gw = conv2d_weight_grad(x, x, {1, 1}, Conv2dParams{{1, 1}, {0, 0}, {1, 1}, 1});
    EXPECT_NEAR(gw.item<double>(), static_cast<double>(x.numel()), 1e-3 * static_cast<double>(x.numel()));
  }
  cuda::empty_cache();
}

TEST(CudaKernels, NonzeroAndMaskedSelectLarge) {
  NABLA_REQUIRE_CUDA();
  manual_seed(5);
  Tensor m = rand({301, 517}) > 0.7;
  EXPECT_TRUE(close_on_host(nonzero(m.cuda()), nonzero(m), 0));
  Tensor x = rnd({301, 517});
  EXPECT_TRUE(close_on_host(x.cuda().masked_select(m.cuda()), x.masked_select(m), 0));
  EXPECT_EQ(nonzero(zeros({5, 5}, kCUDA)).sizes(), Shape({0, 2}));
  EXPECT_EQ(nonzero(ones({}, kCUDA)).sizes(), Shape({1, 0}));
}

// ---- random -------------------------------------------------------------------------------------------
TEST(CudaKernels, RandomStreamsEqualTheCpuAfterTheSameSeed) {
  NABLA_REQUIRE_CUDA();
  for (int64_t n : {1, 3, 4, 5, 1001, 100003}) {
    manual_seed(42);
    Tensor c1 = rand({n}), c2 = rand({n}, kFloat64), c3 = randn({n}), c4 = randn({n}, kFloat64);
    Tensor c5 = randint(-7, 100, {n}), c6 = empty({n}).bernoulli_(0.3), c7 = empty({n}).uniform_(-2, 5);
    manual_seed(42);
    Tensor g1 = rand({n}, kCUDA), g2 = rand({n}, dtype(kFloat64).device(kCUDA)), g3 = randn({n}, kCUDA);
    Tensor g4 = randn({n}, dtype(kFloat64).device(kCUDA)), g5 = randint(-7, 100, {n}, kCUDA);
    Tensor g6 = empty({n}, kCUDA).bernoulli_(0.3), g7 = empty({n}, kCUDA).uniform_(-2, 5);
    EXPECT_TRUE(close_on_host(g1, c1, 0)) << n;
    EXPECT_TRUE(close_on_host(g2, c2, 0)) << n;
    EXPECT_TRUE(close_on_host(g3, c3, 1e-6)) << n;  // GPU log/sin/cos may differ from glibc's by an ulp
    EXPECT_TRUE(close_on_host(g4, c4, 1e-12)) << n;
    EXPECT_TRUE(close_on_host(g5, c5, 0)) << n;
    EXPECT_TRUE(close_on_host(g6, c6, 0)) << n;
    EXPECT_TRUE(close_on_host(g7, c7, 0)) << n;
  }
  // Same seed, same numbers, run to run; a dropout-style mask is reproducible.
  manual_seed(7);
  Tensor a = (rand({1000}, kCUDA) > 0.5).to(kFloat32);
  manual_seed(7);
  Tensor b = (rand({1000}, kCUDA) > 0.5).to(kFloat32);
  EXPECT_TRUE(close_on_host(a, b, 0));
  EXPECT_GT(a.sum().item<double>(), 400);
  EXPECT_LT(a.sum().item<double>(), 600);
  // Non-contiguous destinations.
  manual_seed(3);
  Tensor t = empty({8, 6}, kCUDA).t();
  t.uniform_();
  manual_seed(3);
  Tensor tc = empty({8, 6}).t();
  tc.uniform_();
  EXPECT_TRUE(close_on_host(t, tc, 0));
}

// ---- edge cases found by reading the kernels (each differed from the CPU) --------------------------
TEST(CudaKernels, EdgeCasesAgreeWithTheCpu) {
  NABLA_REQUIRE_CUDA();
  IndexCheckMode immediate(cuda::IndexChecks::immediate);  // index_add's check before it adds
  // log_softmax of large logits: (x - max) - log(sum), not x - (max + log(sum)), keeps float32 digits.
  Tensor big = tensor({1000.0f, 999.0f, 998.0f}).reshape({1, 3});
  Tensor want = log_softmax(big.to(kFloat64), 1);
  EXPECT_TRUE(close_on_host(log_softmax(big.cuda(), 1), want, 1e-6));
  EXPECT_TRUE(close_on_host(log_softmax(big.t().contiguous().cuda(), 0).t(), want, 1e-6));  // column kernel
  // A double too small for float32 is still nonzero, hence true.
  EXPECT_TRUE(tensor({1e-50}, kFloat64).cuda().to(kBool).cpu().item<bool>());
  EXPECT_TRUE(tensor({0.0, 1e-50}, kFloat64).cuda().any().item<bool>());
  // Indices are checked even when nothing is copied, and index_add checks before it adds.
  EXPECT_THROW(zeros({0, 4}, kCUDA).index_select(1, tensor({7}, kInt64).cuda()), IndexError);
  Tensor acc = zeros({3, 2}, kCUDA);
  EXPECT_THROW(acc.index_add_(0, tensor({0, 5}, kInt64).cuda(), ones({2, 2}, kCUDA)), IndexError);
  EXPECT_EQ(acc.abs().sum().item<double>(), 0.0);
  // scatter with an expanded index: the CPU's last write (the last row of src) wins, every time.
  Tensor idx = tensor({{2, 0, 1, 2}}, kInt64).expand({3, 4});
  Tensor src = rnd({3, 4});
  Tensor sc = zeros({3, 4}, kFloat64).scatter(0, idx, src);
  for (int rep = 0; rep < 3; ++rep)
    EXPECT_TRUE(close_on_host(zeros({3, 4}, dtype(kFloat64).device(kCUDA)).scatter(0, idx.cuda(), src.cuda()), sc, 0));
  // Training batch norm with only a running mean (cuDNN takes both or neither).
  Tensor x = rnd({4, 3, 5, 5});
  Tensor rmc = zeros({3}, kFloat64), rmg = rmc.cuda();
  Tensor yc = batch_norm(x, Tensor(), Tensor(), rmc, Tensor(), true, 0.1, 1e-5);
  Tensor yg = batch_norm(x.cuda(), Tensor(), Tensor(), rmg, Tensor(), true, 0.1, 1e-5);
  EXPECT_TRUE(close_on_host(yg, yc, 1e-9));
  EXPECT_TRUE(close_on_host(rmg, rmc, 1e-12));
  // float64 uniform with bounds takes the CPU's exact steps (no fused multiply-add on the GPU).
  manual_seed(11);
  Tensor uc = empty({1001}, kFloat64).uniform_(-0.1, 0.1);
  manual_seed(11);
  Tensor ug = empty({1001}, dtype(kFloat64).device(kCUDA)).uniform_(-0.1, 0.1);
  EXPECT_TRUE(close_on_host(ug, uc, 0));
  // 16-bit uniform stays below its upper bound after rounding.
  for (DType dt : {kFloat16, kBFloat16}) {
    Tensor h = empty({1 << 20}, dtype(dt).device(kCUDA)).uniform_();
    EXPECT_LT(h.to(kFloat32).max().item<float>(), 1.0f) << dtype_name(dt);
    EXPECT_GE(h.to(kFloat32).min().item<float>(), 0.0f) << dtype_name(dt);
  }
}

// ---- matmul (cuBLAS) ---------------------------------------------------------------------------------
TEST(CudaKernels, MatmulLayoutsWithoutCopiesAndWith) {
  NABLA_REQUIRE_CUDA();
  Tensor a = rnd({65, 33}), b = rnd({33, 17}, kFloat64, 2);
  Tensor ga = a.cuda(), gb = b.cuda();
  EXPECT_TRUE(close_on_host(mm(ga, gb), mm(a, b), 1e-10));
  EXPECT_TRUE(close_on_host(mm(gb.t(), ga.t()), mm(b.t(), a.t()), 1e-10));  // transposes
  EXPECT_TRUE(close_on_host(mm(ga.slice(1, 0, std::nullopt, 2), gb.slice(0, 0, std::nullopt, 2)),
                            mm(a.slice(1, 0, std::nullopt, 2), b.slice(0, 0, std::nullopt, 2)), 1e-10));  // copies
  Tensor x = rnd({4, 1, 8, 5}), y = rnd({3, 5, 6}, kFloat64, 3);
  EXPECT_TRUE(close_on_host(matmul(x.cuda(), y.cuda()), matmul(x, y), 1e-10));  // broadcast batch
  Tensor bias = rnd({17}, kFloat64, 4);
  EXPECT_TRUE(close_on_host(addmm(bias.cuda(), ga, gb, 0.5, 2), addmm(bias, a, b, 0.5, 2), 1e-10));
  EXPECT_TRUE(close_on_host(linear(ga, gb.t(), bias.cuda()), linear(a, b.t(), bias), 1e-10));
  EXPECT_TRUE(close_on_host(mm(zeros({3, 0}, kCUDA), zeros({0, 4}, kCUDA)), zeros({3, 4}), 0));  // k == 0
  Tensor ia = randint(-5, 5, {7, 9}, kInt64), ib = randint(-5, 5, {9, 4}, kInt64);
  EXPECT_TRUE(close_on_host(mm(ia.cuda(), ib.cuda()), mm(ia, ib), 0));  // integers
  Tensor big_a = rnd({512, 384}, kFloat32, 5), big_b = rnd({384, 256}, kFloat32, 6);
  Tensor ref = mm(big_a.to(kFloat64), big_b.to(kFloat64));
  EXPECT_TRUE(close_on_host(mm(big_a.cuda(), big_b.cuda()), ref, 1e-3));  // float32, no TF32
  cuda::set_allow_tf32(true);
  EXPECT_TRUE(close_on_host(mm(big_a.cuda(), big_b.cuda()), ref, 5e-2));  // TF32: ~3 digits
  cuda::set_allow_tf32(false);
  Tensor batched = rnd({10, 31, 29}, kFloat32, 7), bb = rnd({10, 29, 30}, kFloat32, 8);
  EXPECT_TRUE(close_on_host(bmm(batched.cuda(), bb.cuda().transpose(1, 2).contiguous().transpose(1, 2)),
                            bmm(batched, bb), 1e-4));
}

// ---- convolution (cuDNN) and pooling ---------------------------------------------------------------
TEST(CudaKernels, Conv2dConfigurationsAndGradientsMatchTheCpu) {
  NABLA_REQUIRE_CUDA();
  struct Case {
    std::vector<int64_t> x, w;
    std::vector<int64_t> stride, pad, dil;
    int64_t groups;
  };
  std::vector<Case> cases = {
      {{2, 3, 9, 9}, {4, 3, 3, 3}, {1}, {1}, {1}, 1},   {{2, 4, 11, 10}, {6, 2, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2},
      {{1, 8, 7, 7}, {8, 1, 3, 3}, {1}, {1}, {1}, 8},  // depthwise
      {{3, 5, 6, 6}, {2, 5, 1, 1}, {1}, {0}, {1}, 1},  // pointwise
      {{2, 2, 12, 12}, {3, 2, 5, 5}, {3}, {2}, {2}, 1},
  };
  for (const Case& c : cases) {
    Tensor x = rnd(c.x), w = rnd(c.w, kFloat64, 2), b = rnd({c.w[0]}, kFloat64, 3);
    Tensor xc = x.detach().requires_grad_(), wc = w.detach().requires_grad_(), bc = b.detach().requires_grad_();
    Tensor xg = x.cuda().detach().requires_grad_(), wg = w.cuda().detach().requires_grad_();
    Tensor bg = b.cuda().detach().requires_grad_();
    Tensor yc = conv2d(xc, wc, bc, c.stride, c.pad, c.dil, c.groups);
    Tensor yg = conv2d(xg, wg, bg, c.stride, c.pad, c.dil, c.groups);
    ASSERT_TRUE(close_on_host(yg, yc, 1e-9));
    Tensor gy = rnd(yc.sizes(), kFloat64, 4);
    yc.backward(gy);
    yg.backward(gy.cuda());
    EXPECT_TRUE(close_on_host(xg.grad(), xc.grad(), 1e-9));
    EXPECT_TRUE(close_on_host(wg.grad(), wc.grad(), 1e-9));
    EXPECT_TRUE(close_on_host(bg.grad(), bc.grad(), 1e-9));
    // float32, in benchmark mode and in deterministic mode.
    for (int mode = 0; mode < 2; ++mode) {
      cuda::cudnn::set_benchmark(mode == 0);
      cuda::cudnn::set_deterministic(mode == 1);
      Tensor y32 =
          conv2d(x.to(kCUDA, kFloat32), w.to(kCUDA, kFloat32), b.to(kCUDA, kFloat32), c.stride, c.pad, c.dil, c.groups);
      EXPECT_TRUE(close_on_host(y32, yc, 1e-3)) << "mode " << mode;
      Tensor gx32 = conv2d_input_grad(
          gy.to(kCUDA, kFloat32), w.to(kCUDA, kFloat32), {c.x[2], c.x[3]},
          Conv2dParams{{c.stride[0], c.stride.back()}, {c.pad[0], c.pad.back()}, {c.dil[0], c.dil.back()}, c.groups});
      EXPECT_TRUE(close_on_host(gx32, xc.grad(), 1e-3)) << "mode " << mode;
    }
    cuda::cudnn::set_benchmark(false);
    cuda::cudnn::set_deterministic(false);
  }
  // Deterministic mode gives bitwise-identical weight gradients run to run.
  cuda::cudnn::set_deterministic(true);
  Tensor x = rnd({8, 16, 14, 14}, kFloat32).cuda(), gy = rnd({8, 32, 14, 14}, kFloat32, 2).cuda();
  Tensor g1 = conv2d_weight_grad(x, gy, {3, 3}, Conv2dParams{{1, 1}, {1, 1}, {1, 1}, 1});
  Tensor g2 = conv2d_weight_grad(x, gy, {3, 3}, Conv2dParams{{1, 1}, {1, 1}, {1, 1}, 1});
  EXPECT_TRUE(close_on_host(g1, g2, 0));
  cuda::cudnn::set_deterministic(false);
  // Empty batch.
  Tensor e = conv2d(zeros({0, 3, 5, 5}, kCUDA), ones({2, 3, 3, 3}, kCUDA));
  EXPECT_EQ(e.sizes(), Shape({0, 2, 3, 3}));
  // No input channels (an empty x, a non-empty output): the bias alone, as on the CPU.
  Tensor b0 = rnd({2}, kFloat64, 5);
  Tensor want0 = conv2d(zeros({2, 0, 4, 4}, kFloat64), zeros({2, 0, 3, 3}, kFloat64), b0, {1}, {1});
  Tensor got0 = conv2d(zeros({2, 0, 4, 4}, dtype(kFloat64).device(kCUDA)),
                       zeros({2, 0, 3, 3}, dtype(kFloat64).device(kCUDA)), b0.cuda(), {1}, {1});
  EXPECT_TRUE(close_on_host(got0, want0, 0));
}

TEST(CudaKernels, PoolingForwardAndBackward) {
  NABLA_REQUIRE_CUDA();
  Tensor x = rnd({2, 3, 17, 13});
  for (bool ceil : {false, true}) {
    Tensor xc = x.detach().requires_grad_(), xg = x.cuda().detach().requires_grad_();
    auto [yc, ic] = max_pool2d_with_indices(xc, {3, 2}, {2, 2}, {1, 1}, {1, 1}, ceil);
    auto [yg, ig] = max_pool2d_with_indices(xg, {3, 2}, {2, 2}, {1, 1}, {1, 1}, ceil);
    EXPECT_TRUE(close_on_host(yg, yc, 0));
    EXPECT_TRUE(close_on_host(ig, ic, 0));
    Tensor ac = avg_pool2d(xc, {3, 3}, {2, 2}, {1, 1}, ceil, !ceil);
    Tensor ag = avg_pool2d(xg, {3, 3}, {2, 2}, {1, 1}, ceil, !ceil);
    EXPECT_TRUE(close_on_host(ag, ac, 1e-12));
    Tensor w1 = rnd(yc.sizes(), kFloat64, 2), w2 = rnd(ac.sizes(), kFloat64, 3);
    ((yc * w1).sum() + (ac * w2).sum()).backward();
    ((yg * w1.cuda()).sum() + (ag * w2.cuda()).sum()).backward();
    EXPECT_TRUE(close_on_host(xg.grad(), xc.grad(), 1e-12));
  }
  Tensor ad = rnd({2, 3, 10, 7});
  EXPECT_TRUE(close_on_host(adaptive_avg_pool2d(ad.cuda(), {3, 4}), adaptive_avg_pool2d(ad, {3, 4}), 1e-12));
}

// ---- batch norm (cuDNN) ---------------------------------------------------------------------------------
TEST(CudaKernels, BatchNormFusedMatchesTheCompositeAndDifferentiatesTwice) {
  NABLA_REQUIRE_CUDA();
  Tensor x = rnd({8, 5, 6, 7}) * 2 + 0.5, w = rnd({5}, kFloat64, 2), b = rnd({5}, kFloat64, 3);
  for (DType dt : {kFloat32, kFloat64}) {
    double tol = dt == kFloat32 ? 1e-4 : 1e-9;
    Tensor rmc = zeros({5}, dt), rvc = ones({5}, dt);
    Tensor rmg = rmc.cuda(), rvg = rvc.cuda();
    // Leaves of their own: x.to(kFloat64) is x itself, and x.requires_grad_() would make x.to(kCUDA)
    // a non-leaf without a .grad.
    Tensor xc = x.to(dt).detach().requires_grad_(), wc = w.to(dt).detach().requires_grad_();
    Tensor bc = b.to(dt).detach().requires_grad_();
    Tensor xg = x.to(kCUDA, dt).requires_grad_(), wg = w.to(kCUDA, dt).requires_grad_();
    Tensor bg = b.to(kCUDA, dt).requires_grad_();
    for (int step = 0; step < 3; ++step) {  // running statistics accumulate
      Tensor yc = batch_norm(xc, wc, bc, rmc, rvc, true, 0.1, 1e-5);
      Tensor yg = batch_norm(xg, wg, bg, rmg, rvg, true, 0.1, 1e-5);
      EXPECT_TRUE(close_on_host(yg, yc, tol)) << dtype_name(dt);
      if (step == 0) {
        Tensor gy = rnd(yc.sizes(), dt, 4);
        yc.backward(gy);
        yg.backward(gy.cuda());
        EXPECT_TRUE(close_on_host(xg.grad(), xc.grad(), tol * 10)) << dtype_name(dt);
        EXPECT_TRUE(close_on_host(wg.grad(), wc.grad(), tol * 10)) << dtype_name(dt);
        EXPECT_TRUE(close_on_host(bg.grad(), bc.grad(), tol * 10)) << dtype_name(dt);
      }
    }
    EXPECT_TRUE(close_on_host(rmg, rmc, tol)) << "running mean " << dtype_name(dt);
    EXPECT_TRUE(close_on_host(rvg, rvc, tol)) << "running variance (unbiased) " << dtype_name(dt);
    Tensor ec = batch_norm(xc, wc, bc, rmc, rvc, false), eg = batch_norm(xg, wg, bg, rmg, rvg, false);
    EXPECT_TRUE(close_on_host(eg, ec, tol)) << "evaluation " << dtype_name(dt);
  }
  // Second derivatives on CUDA (the create_graph path).
  auto f = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{batch_norm(in[0], in[1], in[2], Tensor(), Tensor(), true)};
  };
  manual_seed(5);
  std::vector<Tensor> in = {randn({4, 2, 3}, dtype(kFloat64).device(kCUDA)).requires_grad_(),
                            (rand({2}, dtype(kFloat64).device(kCUDA)) + 0.5).requires_grad_(),
                            randn({2}, dtype(kFloat64).device(kCUDA)).requires_grad_()};
  EXPECT_NO_THROW(autograd::gradcheck(f, in));
  EXPECT_NO_THROW(autograd::gradgradcheck(f, in));
}

// ---- fused optimizer updates ------------------------------------------------------------------------
// Runs `steps` updates of a parameter of n elements with fixed gradients (seeded, the same on both
// devices) and returns the parameter.
template <class Opt, class Options>
Tensor optimize(const Options& o, Device dev, DType dt, int64_t n, int steps = 4) {
  Tensor p = rnd({n}, dt, 3).to(dev).requires_grad_();
  Opt opt(std::vector<Tensor>{p}, o);
  for (int s = 0; s < steps; ++s) {
    p.mutable_grad() = rnd({n}, dt, 100 + s).to(dev);
    opt.step();
  }
  return p.detach();
}

TEST(CudaKernels, FusedOptimizerStepsFollowTheCpu) {
  NABLA_REQUIRE_CUDA();
  // The backend takes the fused kernel for contiguous tensors of one floating dtype, and declines
  // (writing nothing) otherwise.
  Tensor p = ones({5}, dtype(kFloat32).device(kCUDA)), g = ones({5}, dtype(kFloat32).device(kCUDA));
  const optim::FusedSteps& cuda_backend = optim::fused_steps(Device::cuda());
  EXPECT_TRUE(cuda_backend.sgd_step(p, g, Tensor(), {0.5, 0, 0, 0, false, false, false}));
  EXPECT_TRUE(close_on_host(p, full({5}, 0.5), 0));
  EXPECT_FALSE(cuda_backend.sgd_step(p, g.to(kFloat64), Tensor(), {0.5, 0, 0, 0, false, false, false}));
  EXPECT_FALSE(cuda_backend.sgd_step(p, g.cpu(), Tensor(), {0.5, 0, 0, 0, false, false, false}));
  EXPECT_TRUE(close_on_host(p, full({5}, 0.5), 0));

  // Sizes around the block and grid boundaries; every variant of each update.
  for (DType dt : {kFloat64, kFloat32}) {
    const double tol = dt == kFloat64 ? 1e-12 : 1e-5;
    for (int64_t n : {1, 255, 257, 100003}) {
      auto both_sgd = [&](optim::SGDOptions o, const char* what) {
        auto c = optimize<optim::SGD>(o, kCPU, dt, n), d = optimize<optim::SGD>(o, kCUDA, dt, n);
        EXPECT_TRUE(close_on_host(d, c, tol)) << what << " n=" << n << " " << dtype_name(dt);
      };
      both_sgd({.lr = 0.1}, "sgd");
      both_sgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, "sgd momentum");
      both_sgd({.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}, "sgd nesterov");
      both_sgd({.lr = 0.1, .momentum = 0.5, .maximize = true}, "sgd maximize");
      auto both = [&](auto o, auto tag, const char* what) {
        using Opt = typename decltype(tag)::type;
        auto c = optimize<Opt>(o, kCPU, dt, n), d = optimize<Opt>(o, kCUDA, dt, n);
        EXPECT_TRUE(close_on_host(d, c, tol)) << what << " n=" << n << " " << dtype_name(dt);
      };
      both(optim::AdamOptions{.lr = 0.01}, std::type_identity<optim::Adam>{}, "adam");
      both(optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1, .maximize = true}, std::type_identity<optim::Adam>{},
           "adam L2 maximize");
      both(optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1}, std::type_identity<optim::AdamW>{}, "adamw");
      both(optim::AdamOptions{.lr = 0.01, .betas = {0.9, 0.5}, .amsgrad = true}, std::type_identity<optim::Adam>{},
           "adam amsgrad");
      both(optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true}, std::type_identity<optim::AdamW>{},
           "adamw amsgrad");
      both(optim::RMSpropOptions{.lr = 0.01}, std::type_identity<optim::RMSprop>{}, "rmsprop");
      both(optim::RMSpropOptions{.lr = 0.01, .weight_decay = 0.1, .momentum = 0.9, .centered = true},
           std::type_identity<optim::RMSprop>{}, "rmsprop centered momentum");
      both(optim::RMSpropOptions{.lr = 0.01, .momentum = 0.5, .maximize = true}, std::type_identity<optim::RMSprop>{},
           "rmsprop momentum maximize");
      both(optim::AdagradOptions{.lr = 0.1}, std::type_identity<optim::Adagrad>{}, "adagrad");
      both(optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.1, .weight_decay = 0.1, .initial_accumulator_value = 0.1},
           std::type_identity<optim::Adagrad>{}, "adagrad decay");
      both(optim::AdadeltaOptions{.lr = 1.0}, std::type_identity<optim::Adadelta>{}, "adadelta");
      both(optim::AdadeltaOptions{.lr = 0.5, .rho = 0.5, .weight_decay = 0.1, .maximize = true},
           std::type_identity<optim::Adadelta>{}, "adadelta rho maximize");
    }
  }
}

// ---- autograd end to end ------------------------------------------------------------------------------
// The forward pass of the small network below, stage by stage, with and without a synchronization
// after each op (a difference only without it would be a missing stream dependency).
TEST(CudaKernels, ASmallNetworkForwardAgreesStageByStage) {
  NABLA_REQUIRE_CUDA();
  manual_seed(11);
  Tensor w1 = randn({16, 8}, kFloat64) * 0.3, b1 = zeros({16}, kFloat64);
  Tensor w2 = randn({4, 16}, kFloat64) * 0.3, b2 = zeros({4}, kFloat64);
  Tensor x = randn({32, 8}, kFloat64);
  Tensor labels = randint(0, 4, {32}, kInt64);
  auto stages = [&](Device dev, bool sync) {
    auto s = [&](Tensor t) {
      if (sync && dev.is_cuda()) cuda::synchronize();
      return t;
    };
    std::vector<std::pair<std::string, Tensor>> out;
    Tensor xd = s(x.to(dev)), ld = s(labels.to(dev));
    Tensor pre = s(linear(xd, s(w1.to(dev)), s(b1.to(dev))));
    out.emplace_back("linear 1", pre);
    Tensor h = s(relu(pre));
    out.emplace_back("relu", h);
    Tensor logits = s(linear(h, s(w2.to(dev)), s(b2.to(dev))));
    out.emplace_back("linear 2", logits);
    Tensor ls = s(log_softmax(logits, 1));
    out.emplace_back("log_softmax", ls);
    Tensor picked = s(ls.gather(1, ld.unsqueeze(1)));
    out.emplace_back("gather", picked);
    out.emplace_back("mean", s(-picked.mean()));
    return out;
  };
  auto cpu = stages(kCPU, false);
  for (bool sync : {true, false}) {
    auto gpu = stages(kCUDA, sync);
    for (size_t i = 0; i < cpu.size(); ++i)
      EXPECT_TRUE(close_on_host(gpu[i].second, cpu[i].second, 1e-12))
          << cpu[i].first << (sync ? " (synchronized after each op)" : " (no synchronization)");
  }
}

TEST(CudaKernels, ASmallNetworkTrainsIdenticallyOnCpuAndGpu) {
  NABLA_REQUIRE_CUDA();
  manual_seed(11);
  Tensor w1 = randn({16, 8}, kFloat64) * 0.3, b1 = zeros({16}, kFloat64);
  Tensor w2 = randn({4, 16}, kFloat64) * 0.3, b2 = zeros({4}, kFloat64);
  Tensor x = randn({32, 8}, kFloat64);
  Tensor labels = randint(0, 4, {32}, kInt64);
  auto train = [&](Device dev) {
    std::vector<Tensor> params = {w1.to(dev), b1.to(dev), w2.to(dev), b2.to(dev)};
    // A copy: on the CPU, w1.to(kCPU) is w1 itself, which the updates below would change for the
    // GPU's run.
    for (Tensor& p : params) p = p.detach().clone().requires_grad_();
    Tensor xd = x.to(dev), ld = labels.to(dev);
    std::vector<double> losses;
    for (int step = 0; step < 5; ++step) {
      Tensor h = relu(linear(xd, params[0], params[1]));
      Tensor logits = linear(h, params[2], params[3]);
      Tensor loss = -log_softmax(logits, 1).gather(1, ld.unsqueeze(1)).mean();
      for (Tensor& p : params) p.zero_grad();
      loss.backward();
      losses.push_back(loss.item<double>());
      autograd::NoGradGuard ng;
      for (Tensor& p : params) {
        EXPECT_EQ(p.grad().device(), dev);
        p.sub_(p.grad(), 0.5);
      }
    }
    return std::make_pair(losses, params);
  };
  auto [lc, pc] = train(kCPU);
  auto [lg, pg] = train(kCUDA);
  for (size_t i = 0; i < lc.size(); ++i) EXPECT_NEAR(lg[i], lc[i], 1e-10) << "step " << i;
  EXPECT_LT(lc.back(), lc.front());
  for (size_t i = 0; i < pc.size(); ++i) EXPECT_TRUE(close_on_host(pg[i], pc[i], 1e-9));
}

}  // namespace
}  // namespace nabla
