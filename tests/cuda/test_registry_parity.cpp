// Device parity over the op registry (tests/ops/opinfo.h), in the spirit of ggml's backend tests: every
// op and sample computed on CUDA must match the CPU (atol = rtol = 1e-3 in float32, 1e-7 in
// float64), and float64 gradcheck must pass with the inputs on CUDA (so every backward formula
// runs on the GPU too). Without a GPU each case skips with the reason.
#include <algorithm>

#include "autograd/gradcheck.h"
#include "cuda_test_util.h"
#include "tests/ops/opinfo.h"

namespace nabla::testing {
namespace {

std::vector<std::string> all_ops() {
  std::vector<std::string> names;
  for (const OpInfo& op : registry()) names.push_back(op.name);
  return names;
}
std::vector<std::string> differentiable_ops() {
  std::vector<std::string> names;
  for (const OpInfo& op : registry())
    if (op.differentiable) names.push_back(op.name);
  return names;
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

class CudaParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!op().no_cuda.empty()) GTEST_SKIP() << op().name << " is not run on CUDA: " << op().no_cuda;
  }
  const OpInfo& op() const { return *find_op(GetParam()); }
};

void check_parity(const OpInfo& o, DType dt, double tol) {
  for (size_t i = 0; i < o.samples.size(); ++i) {
    const std::string what = o.name + " sample '" + o.samples[i].desc + "' " + dtype_name(dt);
    Inputs cpu_in = make_inputs(o.samples[i], dt, kCPU, false, i + 1);
    Inputs gpu_in = make_inputs(o.samples[i], dt, kCUDA, false, i + 1);
    for (size_t k = 0; k < cpu_in.size(); ++k)
      ASSERT_TRUE(close_on_host(gpu_in[k], cpu_in[k], 0)) << what << ": input " << k << " differs between devices";
    Outputs a, b;
    try {
      a = o.fn(cpu_in);
      b = o.fn(gpu_in);
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": " << e.what();
      continue;
    }
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_EQ(a[k].dtype(), b[k].dtype()) << what << " output " << k;
      EXPECT_TRUE(close_on_host(b[k], a[k], tol)) << what << " output " << k;
    }
  }
}

TEST_P(CudaParity, Float32MatchesCpu) {
  NABLA_REQUIRE_CUDA();
  if (!op().supports_float32) GTEST_SKIP() << op().name << " has no float32 samples";
  check_parity(op(), kFloat32, 1e-3);
}

TEST_P(CudaParity, Float64MatchesCpu) {
  NABLA_REQUIRE_CUDA();
  check_parity(op(), kFloat64, 1e-7);
}

// Gradients computed on the GPU equal the CPU's (all backward formulas run on CUDA).
TEST_P(CudaParity, Float64GradientsMatchCpu) {
  NABLA_REQUIRE_CUDA();
  const OpInfo& o = op();
  if (!o.differentiable) GTEST_SKIP() << o.name << " is not differentiable";
  for (size_t i = 0; i < o.samples.size(); ++i) {
    const std::string what = o.name + " sample '" + o.samples[i].desc + "'";
    Inputs ci = make_inputs(o.samples[i], kFloat64, kCPU, true, i + 1);
    Inputs gi = make_inputs(o.samples[i], kFloat64, kCUDA, true, i + 1);
    std::vector<Tensor> cdiff, gdiff;
    for (size_t k = 0; k < ci.size(); ++k)
      if (ci[k].requires_grad()) {
        cdiff.push_back(ci[k]);
        gdiff.push_back(gi[k]);
      }
    if (cdiff.empty()) continue;
    Outputs co = o.fn(ci), go = o.fn(gi);
    // A fixed, deterministic output gradient: sum of outputs weighted by (1 + element index) / n.
    auto loss = [](const Outputs& outs) {
      Tensor total;
      for (const Tensor& t : outs) {
        if (!t.defined() || !is_floating(t.dtype()) || !t.requires_grad() || t.numel() == 0) continue;
        Tensor w = (arange(t.numel(), dtype(kFloat64)) + 1) / static_cast<double>(t.numel());
        Tensor term = (t.reshape({-1}) * w.to(t.device())).sum();
        total = total.defined() ? total + term.to(kCPU) : term.to(kCPU);
      }
      return total;
    };
    Tensor lc = loss(co), lg = loss(go);
    if (!lc.defined()) continue;
    std::vector<Tensor> gc = autograd::grad({lc}, cdiff, {}, false, false, true);
    std::vector<Tensor> gg = autograd::grad({lg}, gdiff, {}, false, false, true);
    for (size_t k = 0; k < gc.size(); ++k) {
      if (!gc[k].defined()) {
        EXPECT_FALSE(gg[k].defined() && gg[k].abs().max().item<double>() != 0) << what << " grad " << k;
        continue;
      }
      ASSERT_TRUE(gg[k].defined()) << what << " grad " << k << " is undefined on CUDA";
      EXPECT_TRUE(gg[k].is_cuda()) << what << " grad " << k << " is not on the GPU";
      EXPECT_TRUE(close_on_host(gg[k], gc[k], 1e-7)) << what << " grad " << k;
    }
  }
}

class CudaGradcheck : public CudaParity {};

TEST_P(CudaGradcheck, GradcheckFloat64OnCuda) {
  NABLA_REQUIRE_CUDA();
  const OpInfo& o = op();
  for (size_t i = 0; i < o.samples.size(); ++i) {
    Inputs in = make_inputs(o.samples[i], kFloat64, kCUDA, true, i + 1);
    bool any_grad = std::any_of(in.begin(), in.end(), [](const Tensor& t) { return t.requires_grad(); });
    if (!any_grad) continue;
    autograd::GradcheckOptions opts;
    opts.atol = o.grad_atol;
    opts.rtol = o.grad_rtol;
    try {
      autograd::gradcheck(o.fn, in, opts);
    } catch (const std::exception& e) {
      ADD_FAILURE() << o.name << " sample '" << o.samples[i].desc << "' on CUDA: " << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaParity, ::testing::ValuesIn(all_ops()), param_name);
INSTANTIATE_TEST_SUITE_P(Ops, CudaGradcheck, ::testing::ValuesIn(differentiable_ops()), param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaParity);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaGradcheck);

}  // namespace
}  // namespace nabla::testing
