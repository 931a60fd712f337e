// The generic suites over the op registry (see opinfo.h).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "autograd/function.h"
#include "autograd/gradcheck.h"
#include "core/elementwise_ops.h"
#include "opinfo.h"

namespace nabla::testing {

namespace {

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

std::vector<std::string> op_names(bool (*pred)(const OpInfo&)) {
  std::vector<std::string> names;
  for (const OpInfo& op : registry())
    if (pred(op)) names.push_back(op.name);
  return names;
}

class OpTest : public ::testing::TestWithParam<std::string> {
 protected:
  const OpInfo& op() const { return *find_op(GetParam()); }
};

// A strided copy with the same values: each tensor becomes every other element of a bigger one.
Tensor noncontiguous_copy(const Tensor& t) {
  if (t.dim() == 0 || t.numel() == 0) return t;
  autograd::NoGradGuard ng;
  Shape big = t.sizes();
  big.back() *= 2;
  Tensor b = zeros(big, dtype(t.dtype()).device(t.device()));
  Tensor v = b.slice(-1, 0, std::nullopt, 2);
  v.copy_(t);
  return v;
}

void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  if (a.numel() == 0) return;
  Tensor x = a.detach().to(kCPU, kFloat64), y = b.detach().to(kCPU, kFloat64);
  if (!is_floating(a.dtype()) || !is_floating(b.dtype())) {
    EXPECT_TRUE(equal(x, y)) << what << "\n" << a << "\n" << b;
    return;
  }
  EXPECT_TRUE(allclose(x, y, tol, tol, /*equal_nan=*/true)) << what << "\n" << a << "\nvs\n" << b;
}

}  // namespace

int64_t input_elements(const Inputs& in) {
  int64_t total = 0;
  for (const Tensor& t : in) total += t.numel();
  return total;
}

// Whether the gradcheck suites run on a sample: some input requires grad and, for gradgradcheck,
// the inputs hold at most kMaxGradGradElements elements in all.
bool sample_is_checked(const Inputs& in, bool second_order) {
  bool any_grad = std::any_of(in.begin(), in.end(), [](const Tensor& t) { return t.requires_grad(); });
  return any_grad && (!second_order || input_elements(in) <= kMaxGradGradElements);
}

// Whether a set of samples gives gradcheck (or gradgradcheck) something to check: one sample with
// elements it runs on, or, for an op whose samples are all empty (sum_empty), one it runs on.
struct Coverage {
  size_t ran = 0, ran_nonempty = 0;
  bool all_empty = true;
  void add(const Inputs& in, bool second_order) {
    bool empty = input_elements(in) == 0;
    all_empty = all_empty && empty;
    if (!sample_is_checked(in, second_order)) return;
    ++ran;
    ran_nonempty += !empty;
  }
  bool enough() const { return ran_nonempty > 0 || (all_empty && ran > 0); }
};

// Runs gradcheck (or gradgradcheck) on every sample it applies to, and fails when that leaves
// nothing checked: an op whose samples are all too big for gradgradcheck would otherwise pass
// having checked nothing.
void run_gradchecks(const OpInfo& o, bool second_order) {
  ASSERT_FALSE(o.samples.empty()) << o.name << " has no samples";
  Coverage cov;
  for (size_t i = 0; i < o.samples.size(); ++i) {
    Inputs in = make_inputs(o.samples[i], kFloat64, kCPU, true, i + 1);
    cov.add(in, second_order);
    if (!sample_is_checked(in, second_order)) continue;
    autograd::GradcheckOptions opts;
    opts.atol = o.grad_atol;
    opts.rtol = o.grad_rtol;
    try {
      if (second_order) autograd::gradgradcheck(o.fn, in, opts);
      else autograd::gradcheck(o.fn, in, opts);
    } catch (const std::exception& e) {
      ADD_FAILURE() << o.name << " sample '" << o.samples[i].desc << "': " << e.what();
    }
  }
  if (!cov.enough()) {
    if (second_order)
      ADD_FAILURE() << o.name << ": no sample was checked by gradgradcheck; add a non-empty sample with an input "
                    << "that requires grad and at most " << kMaxGradGradElements << " input elements in all";
    else
      ADD_FAILURE() << o.name << ": no sample was checked by gradcheck; add a non-empty one with an input that "
                    << "requires grad";
  }
}

class GradTest : public OpTest {};
class GradGradTest : public OpTest {};

TEST_P(GradTest, Gradcheck) { run_gradchecks(op(), false); }
TEST_P(GradGradTest, Gradgradcheck) { run_gradchecks(op(), true); }

TEST_P(OpTest, Noncontiguous) {
  const OpInfo& o = op();
  for (size_t i = 0; i < o.samples.size(); ++i) {
    Inputs in = make_inputs(o.samples[i], kFloat64, kCPU, false, i + 1);
    Inputs strided;
    for (const Tensor& t : in) strided.push_back(noncontiguous_copy(t));
    Outputs a = o.fn(in), b = o.fn(strided);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k)
      expect_close(a[k], b[k], 1e-12, o.name + " sample '" + o.samples[i].desc + "' output " + std::to_string(k));
  }
}

TEST_P(OpTest, Float32MatchesFloat64) {
  const OpInfo& o = op();
  if (!o.supports_float32) GTEST_SKIP() << o.name << " has no float32 samples (its results depend on the dtype)";
  for (size_t i = 0; i < o.samples.size(); ++i) {
    Inputs in64 = make_inputs(o.samples[i], kFloat64, kCPU, false, i + 1);
    Inputs in32 = make_inputs(o.samples[i], kFloat32, kCPU, false, i + 1);
    Outputs a = o.fn(in64), b = o.fn(in32);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      if (is_floating(b[k].dtype())) EXPECT_EQ(b[k].dtype(), kFloat32) << o.name << " output " << k;
      expect_close(b[k], a[k], o.f32_tol,
                   o.name + " sample '" + o.samples[i].desc + "' float32 output " + std::to_string(k));
    }
  }
}

class RefTest : public OpTest {};

// Outputs equal the reference's, with autograd off (in-place kernels write in place) and on (in-place
// ops compute out of place and copy back, through CopySlices for views).
TEST_P(RefTest, MatchesReference) {
  const OpInfo& o = op();
  for (bool grad : {false, true}) {
    for (size_t i = 0; i < o.samples.size(); ++i) {
      Inputs in = make_inputs(o.samples[i], kFloat64, kCPU, grad, i + 1);
      Outputs a = o.fn(in), b = o.ref(in);
      ASSERT_EQ(a.size(), b.size()) << o.name;
      for (size_t k = 0; k < a.size(); ++k)
        expect_close(a[k], b[k], 1e-12,
                     o.name + " sample '" + o.samples[i].desc + "' output " + std::to_string(k) +
                         (grad ? " (autograd on)" : " (autograd off)") + " vs reference");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTest, ::testing::ValuesIn(op_names([](const OpInfo&) { return true; })), param_name);
INSTANTIATE_TEST_SUITE_P(Ops, GradTest, ::testing::ValuesIn(op_names([](const OpInfo& o) { return o.differentiable; })),
                         param_name);
INSTANTIATE_TEST_SUITE_P(Ops, GradGradTest, ::testing::ValuesIn(op_names([](const OpInfo& o) {
                           return o.differentiable && o.twice_differentiable;
                         })),
                         param_name);
INSTANTIATE_TEST_SUITE_P(Ops, RefTest, ::testing::ValuesIn(op_names([](const OpInfo& o) { return bool(o.ref); })),
                         param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OpTest);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RefTest);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GradTest);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GradGradTest);

// Every differentiable op of the schema (core/op_schema.h, core/elementwise_ops.h) has an entry
// that exercises it with gradcheck samples.
TEST(OpRegistry, EveryDifferentiableOpHasGradcheckSamples) {
  std::vector<bool> covered(kOpCount, false);
  for (const OpInfo& op : registry())
    if (!op.samples.empty() && op.differentiable)
      for (OpId id : op.ops) covered[static_cast<size_t>(id)] = true;
  std::string missing;
  for (size_t i = 0; i < kOpCount; ++i)
    if (op_row(static_cast<OpId>(i)).differentiable() && !covered[i])
      missing += std::string(" ") + op_name(static_cast<OpId>(i));
  EXPECT_TRUE(missing.empty()) << "differentiable ops without an entry with gradcheck samples in the registry "
                                  "(tests/opinfo_*.cpp; an entry names its ops with .ops or by its name):"
                               << missing;
}

// Forward checking lives in the registry: every op of the elementwise op lists is compared with a
// scalar <cmath> reference (RefTest, no PyTorch needed), and every other op has a reference, a
// PyTorch twin (the differential suite) or the reason it has none (checked below).
TEST(OpRegistry, EveryElementwiseOpHasAScalarReference) {
  std::vector<std::string> names;
#define NABLA_ELEMENTWISE_NAME(name, ...) names.push_back(#name);
  NABLA_UNARY_FLOAT_OPS(NABLA_ELEMENTWISE_NAME)
  NABLA_UNARY_SAME_OPS(NABLA_ELEMENTWISE_NAME)
  NABLA_UNARY_PARAM_OPS(NABLA_ELEMENTWISE_NAME)
  NABLA_BINARY_ARITH_OPS(NABLA_ELEMENTWISE_NAME)
#undef NABLA_ELEMENTWISE_NAME
  std::string missing;
  for (const std::string& n : names) {
    const OpInfo* op = find_op(n);
    if (!op || !op->ref) missing += " " + n;
  }
  EXPECT_TRUE(missing.empty()) << "elementwise ops without a scalar reference (scalar_ref in opinfo.h):" << missing;
}

// The same rule as run_gradchecks, over the whole registry at once: every twice-differentiable op
// has a sample that gradgradcheck runs on (and every differentiable op one that gradcheck runs on).
TEST(OpRegistry, EveryOpHasASampleItsGradchecksRunOn) {
  std::string no_first, no_second;
  for (const OpInfo& op : registry()) {
    if (!op.differentiable) continue;
    Coverage first, second;
    for (size_t i = 0; i < op.samples.size(); ++i) {
      Inputs in = make_inputs(op.samples[i], kFloat64, kCPU, true, i + 1);
      first.add(in, false);
      second.add(in, true);
    }
    if (!first.enough()) no_first += " " + op.name;
    if (op.twice_differentiable && !second.enough()) no_second += " " + op.name;
  }
  EXPECT_TRUE(no_first.empty()) << "differentiable ops without a sample gradcheck runs on:" << no_first;
  EXPECT_TRUE(no_second.empty()) << "twice-differentiable ops without a sample of at most " << kMaxGradGradElements
                                 << " input elements for gradgradcheck:" << no_second;
}

// run_gradchecks itself: an op whose samples are all too big for gradgradcheck fails it (and
// still passes gradcheck), and a wrong backward is caught at both orders.
TEST(OpRegistry, RunGradchecksFailsWhenItChecksNothingOrAWrongGradient) {
  OpInfo big{.name = "test.big_only",
             .fn = [](const Inputs& x) { return Outputs{x[0] * x[0]}; },
             .samples = {{{arg({7, 6})}, "42_elements"}}};
  EXPECT_NONFATAL_FAILURE(run_gradchecks(big, true), "test.big_only: no sample was checked by gradgradcheck");
  run_gradchecks(big, false);  // gradcheck has no size limit: passes

  OpInfo small = big;
  small.samples.push_back({{arg({2, 3})}, "6_elements"});
  run_gradchecks(small, true);  // one small sample is enough

  OpInfo big_and_empty = big;  // an empty sample checks nothing, so it is not enough
  big_and_empty.samples.push_back({{arg({0, 3})}, "empty"});
  EXPECT_NONFATAL_FAILURE(run_gradchecks(big_and_empty, true), "no sample was checked by gradgradcheck");
  OpInfo only_empty = big;  // unless the op is about empty tensors (sum_empty)
  only_empty.samples = {{{arg({0, 3})}, "empty"}};
  run_gradchecks(only_empty, true);

  OpInfo no_grad = big;
  no_grad.samples = {{{fixed_arg({2}, {1, 2}, /*differentiable=*/false)}, "constant"}};
  EXPECT_NONFATAL_FAILURE(run_gradchecks(no_grad, false), "no sample was checked by gradcheck");

  // x * x with a backward of g * x (half the true gradient) fails gradcheck; a second derivative
  // of zero (x.detach() in the backward) fails only gradgradcheck.
  struct HalfGrad : autograd::Function<HalfGrad> {
    static Tensor forward(autograd::Context& ctx, const Tensor& x) {
      ctx.save_for_backward({x});
      return x * x;
    }
    static autograd::GradList backward(autograd::Context& ctx, autograd::GradList g) { return {g[0] * ctx.saved()[0]}; }
  };
  struct DetachedGrad : autograd::Function<DetachedGrad> {
    static Tensor forward(autograd::Context& ctx, const Tensor& x) {
      ctx.save_for_backward({x});
      return x * x;
    }
    static autograd::GradList backward(autograd::Context& ctx, autograd::GradList g) {
      return {g[0] * ctx.saved()[0].detach() * 2};
    }
  };
  OpInfo half{.name = "test.half_grad",
              .fn = [](const Inputs& x) { return Outputs{HalfGrad::apply(x[0])}; },
              .samples = {{{arg({2, 2})}, "2d"}}};
  EXPECT_NONFATAL_FAILURE(run_gradchecks(half, false), "test.half_grad sample '2d'");
  OpInfo detached{.name = "test.detached_grad",
                  .fn = [](const Inputs& x) { return Outputs{DetachedGrad::apply(x[0])}; },
                  .samples = {{{arg({2, 2})}, "2d"}}};
  run_gradchecks(detached, false);
  EXPECT_NONFATAL_FAILURE(run_gradchecks(detached, true), "test.detached_grad sample '2d'");
}

TEST(OpRegistry, NamesAreUnique) {
  std::set<std::string> seen;
  for (const OpInfo& op : registry()) EXPECT_TRUE(seen.insert(op.name).second) << "duplicate op " << op.name;
}

TEST(OpRegistry, ReportCounts) {
  size_t ops = 0, samples = 0, twice = 0;
  for (const OpInfo& op : registry()) {
    if (!op.differentiable) continue;
    ++ops;
    samples += op.samples.size();
    twice += op.twice_differentiable;
  }
  std::printf("op registry: %zu differentiable ops, %zu samples, %zu twice-differentiable\n", ops, samples, twice);
  EXPECT_GT(ops, 60u);
}

}  // namespace nabla::testing
