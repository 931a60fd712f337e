// Every op of the registry (tests/ops/opinfo_*.cpp) run through nabla::compile: a sample's first
// input is the call's input, the others the module's parameters and buffers. The first call
// captures (or falls back, with a reason); the second, on other values of the same shapes, replays,
// and must give what eager gives on those values (within float32 rounding: NaN where NaN). An op
// whose output shape depends on the values, a random op or one compile cannot see must fall back
// rather than replay wrong.
#include <gtest/gtest.h>

#include <map>

#include "nabla.h"
#include "tests/ops/op_module.h"
#include "tests/ops/opinfo.h"

namespace nabla::testing {
namespace {

// Eager's result and the compiled one agree: same shape and dtype, equal values (NaN where NaN).
::testing::AssertionResult agree(const Tensor& want, const Tensor& got) {
  if (!want.defined() || !got.defined())
    return want.defined() == got.defined() ? ::testing::AssertionSuccess()
                                           : ::testing::AssertionFailure() << "one result is undefined";
  if (want.sizes() != got.sizes() || want.dtype() != got.dtype())
    return ::testing::AssertionFailure() << "eager " << want.sizes() << " " << want.dtype() << ", compiled "
                                         << got.sizes() << " " << got.dtype();
  if (want.numel() == 0) return ::testing::AssertionSuccess();
  if (!is_floating(want.dtype())) {
    if (want.equal(got)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "values differ";
  }
  // (Within float32 rounding: eager picks some kernels by whether autograd records, e.g. attention's
  // fused path, and the capture runs with its input requiring grad.)
  Tensor w = want.to(kFloat64), g = got.to(kFloat64);
  Tensor same = logical_or(isclose(w, g, 1e-5, 1e-6), logical_and(isnan(w), isnan(g)));
  if (same.all().item<bool>()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "values differ: eager " << want << " compiled " << got;
}

}  // namespace

TEST(CompileRegistry, EveryOpReplaysAsEagerOrFallsBackWithAReason) {
  int replayed = 0, fell_back = 0, samples = 0;
  std::map<std::string, int> reasons;
  for (const OpInfo& op : registry()) {
    for (size_t s = 0; s < op.samples.size(); ++s) {
      if (op.samples[s].args.empty()) continue;
      Inputs first = make_inputs(op.samples[s], kFloat32, kCPU, false, 2 * s + 1);
      Inputs second = make_inputs(op.samples[s], kFloat32, kCPU, false, 2 * s + 2);
      if (!first[0].defined()) continue;
      auto m = std::make_shared<OpModule>(op, first);
      CompileOptions o;
      o.warn = false;
      CompiledModule fast = compile(m, o);
      NoGradGuard ng;
      // Some samples are errors on purpose, or raise on the capture's grad-requiring input in
      // eager too: an error eager raises is the call's.
      Tensor want1;
      try {
        manual_seed(7);
        want1 = (*m)(first[0]);
      } catch (const Error&) { continue; }
      ++samples;
      manual_seed(7);
      Tensor got1 = fast(first[0]);
      EXPECT_TRUE(agree(want1, got1)) << op.name << " sample " << s << " (" << op.samples[s].desc << "), capture";
      Tensor want2;
      try {
        manual_seed(8);
        want2 = (*m)(second[0]);
      } catch (const Error&) {
        continue;  // data-dependent errors (an index out of range on the second values)
      }
      manual_seed(8);
      Tensor got2 = fast(second[0]);
      EXPECT_TRUE(agree(want2, got2)) << op.name << " sample " << s << " (" << op.samples[s].desc
                                      << "): " << fast.dump();
      if (fast.stats().replays == 1) {
        ++replayed;
      } else {
        ++fell_back;
        EXPECT_FALSE(fast.stats().last_fallback.empty()) << op.name;
        ++reasons[fast.stats().last_fallback.substr(0, 60)];
      }
    }
  }
  std::cout << samples << " samples: " << replayed << " replayed, " << fell_back << " ran eagerly\n";
  for (const auto& [why, n] : reasons) std::cout << "  " << n << " x " << why << "\n";
  // The share that compiles: a drop means an op lost its trace hook or replay rule.
  EXPECT_GT(replayed, samples / 2);
}

}  // namespace nabla::testing

namespace nabla::testing {

// The same with autograd: the first input requires grad, and the gradient of the output's sum
// (weighted, so every element counts differently) through the replay equals eager's.
TEST(CompileRegistry, ReplayedForwardsGiveEagersGradients) {
  int replayed = 0, samples = 0;
  for (const OpInfo& op : registry()) {
    if (!op.differentiable) continue;
    for (size_t s = 0; s < op.samples.size(); ++s) {
      if (op.samples[s].args.empty() || !op.samples[s].args[0].differentiable) continue;
      Inputs first = make_inputs(op.samples[s], kFloat32, kCPU, false, 2 * s + 1);
      Inputs second = make_inputs(op.samples[s], kFloat32, kCPU, false, 2 * s + 2);
      if (!first[0].defined() || !first[0].is_floating_point() || first[0].numel() == 0) continue;
      auto m = std::make_shared<OpModule>(op, first);
      CompileOptions o;
      o.warn = false;
      CompiledModule fast = compile(m, o);
      auto grad_of = [&](auto&& f, const Tensor& x0) -> Tensor {
        Tensor x = x0.detach().requires_grad_(true);
        manual_seed(9);
        Tensor y = f(x);
        if (!y.defined() || !y.requires_grad() || !is_floating(y.dtype())) return Tensor();
        Tensor w = arange(y.numel(), TensorOptions().dtype(y.dtype())).reshape(y.sizes()) * 0.01 + 1;
        (y * w).sum().backward();
        return x.grad();
      };
      auto eager_f = [&](const Tensor& x) { return (*m)(x); };
      auto fast_f = [&](const Tensor& x) { return fast(x); };
      Tensor want;
      try {
        want = grad_of(eager_f, first[0]);
        (void)grad_of(eager_f, second[0]);
      } catch (const Error&) { continue; }
      if (!want.defined()) continue;
      ++samples;
      (void)grad_of(fast_f, first[0]);  // the capture
      Tensor got = grad_of(fast_f, second[0]), want2 = grad_of(eager_f, second[0]);
      EXPECT_TRUE(agree(want2, got)) << op.name << " sample " << s << " (" << op.samples[s].desc << ")";
      if (fast.stats().replays == 1) ++replayed;
    }
  }
  std::cout << samples << " samples with gradients: " << replayed << " replayed\n";
  EXPECT_GT(replayed, samples / 2);
}

}  // namespace nabla::testing
