// nabla::compile (compiler/): captured graphs replayed against eager on the same inputs (bit for bit
// where no pass reorders arithmetic, within float32 rounding where batch norms are folded), the
// passes on their own switches, the signature cache, re-specialization after parameters change,
// and every fallback with its reason.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "nabla.h"
#include "vision/vision.h"

using namespace nabla;

namespace {

// A module made of a function of its input.
struct Fn : nn::Module {
  explicit Fn(std::function<Tensor(Fn&, Tensor)> f) : nn::Module("Fn"), f_(std::move(f)) {}
  Tensor forward(Tensor x) override { return f_(*this, x); }
  std::function<Tensor(Fn&, Tensor)> f_;
};

CompileOptions quiet() {
  CompileOptions o;
  o.warn = false;
  return o;
}

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.sizes(), b.sizes());
  ASSERT_EQ(a.dtype(), b.dtype());
  EXPECT_TRUE(a.equal(b)) << "max difference " << (a - b).abs().max().item<double>();
}

double max_diff(const Tensor& a, const Tensor& b) {
  return (a.to(kFloat64) - b.to(kFloat64)).abs().max().item<double>();
}

std::shared_ptr<nn::Module> cnn() {
  manual_seed(0);
  auto m = std::make_shared<nn::Sequential>(nn::Conv2d(1, 8, 3, {.padding = 1}), nn::BatchNorm2d(8), nn::ReLU(),
                                            nn::MaxPool2d(2, 2), nn::Conv2d(8, 16, 3), nn::BatchNorm2d(16), nn::ReLU(),
                                            nn::Flatten(), nn::Linear(16 * 4 * 4, 10), nn::LogSoftmax(1));
  // Batch norms with statistics and affine parameters away from the identity.
  for (auto& [name, b] : m->named_buffers())
    if (name.find("running_var") != std::string::npos) b.copy_(rand(b.sizes()) + 0.5);
    else if (name.find("running_mean") != std::string::npos) b.copy_(randn(b.sizes()) * 0.1);
  {
    NoGradGuard ng;
    for (auto& [name, p] : m->named_parameters())
      if (name.find("1.") == 0 || name.find("5.") == 0) p.copy_(randn(p.sizes()) * 0.2 + 1);
  }
  m->eval();
  return m;
}

}  // namespace

TEST(Compile, MlpReplaysBitForBitAndCountsCalls) {
  manual_seed(1);
  auto m = nn::Sequential(nn::Linear(20, 32), nn::ReLU(), nn::Linear(32, 5), nn::Tanh());
  m->eval();
  auto fast = compile(m, quiet());
  InferenceMode guard;
  Tensor x = randn({4, 20});
  Tensor want = m(x);
  expect_same(fast(x), want);  // the capture's own (eager) result
  EXPECT_EQ(fast.stats().captures, 1);
  EXPECT_EQ(fast.stats().replays, 0);
  for (int i = 0; i < 3; ++i) {
    Tensor xi = randn({4, 20});
    expect_same(fast(xi), m(xi));
  }
  EXPECT_EQ(fast.stats().captures, 1);
  EXPECT_EQ(fast.stats().replays, 3);
  EXPECT_EQ(fast.stats().eager_calls, 0);
  EXPECT_EQ(fast.stats().cache_entries, 1u);
  const std::string d = fast.dump();
  EXPECT_NE(d.find("linear("), std::string::npos) << d;
  EXPECT_NE(d.find("fused[relu]"), std::string::npos) << d;
  EXPECT_NE(d.find("-> [4, 5] float32"), std::string::npos) << d;
}

TEST(Compile, CnnFoldsBatchNormsIntoConvolutions) {
  auto m = cnn();
  InferenceMode guard;
  Tensor x = randn({3, 1, 12, 12});
  Tensor want = (*m)(x);
  auto fast = compile(m, quiet());
  fast(x);
  Tensor got = fast(x);
  EXPECT_LT(max_diff(got, want), 1e-5);
  EXPECT_GT(max_diff(got, want), 0.0);  // folding rounds differently: the fold did happen
  const std::string d = fast.dump();
  const std::string compiled = d.substr(d.find("compiled ("));
  EXPECT_EQ(compiled.find("batch_norm"), std::string::npos) << d;
  EXPECT_NE(compiled.find("folded_weight"), std::string::npos) << d;
  // The ReLUs run after the pooling, on a quarter of the elements.
  EXPECT_LT(compiled.find("max_pool2d("), compiled.find("fused[relu]")) << d;
  EXPECT_LT(fast.stats().nodes_compiled, fast.stats().nodes_captured);
  EXPECT_GT(fast.stats().planned_peak_bytes, 0);

  // Without the fold the replay is the eager computation, bit for bit.
  CompileOptions no_fold = quiet();
  no_fold.fold_batch_norm = false;
  auto exact = compile(m, no_fold);
  exact(x);
  expect_same(exact(x), want);
  // With every pass off, too.
  CompileOptions none = quiet();
  none.fold_constants = none.fold_batch_norm = none.eliminate_common_subexpressions = none.eliminate_dead_code =
      none.fuse_elementwise = false;
  auto plain = compile(m, none);
  plain(x);
  expect_same(plain(x), want);
  EXPECT_EQ(plain.stats().nodes_compiled, plain.stats().nodes_captured);
}

TEST(Compile, ResNet18MatchesEager) {
  manual_seed(2);
  auto m = vision::resnet18({.num_classes = 7});
  m->eval();
  InferenceMode guard;
  Tensor x = randn({2, 3, 64, 64});
  Tensor want = (*m)(x);
  auto fast = compile(m, quiet());
  fast(x);
  Tensor got = fast(x);
  EXPECT_LT(max_diff(got, want), 1e-4 * (1 + want.abs().max().item<double>()));
  EXPECT_EQ(fast.stats().replays, 1);
  const std::string d = fast.dump();
  const std::string compiled = d.substr(d.find("compiled ("));
  EXPECT_EQ(compiled.find("batch_norm"), std::string::npos);
  // The residual add and its ReLU run as one pass.
  EXPECT_NE(compiled.find("fused[add, relu]"), std::string::npos) << compiled;
}

TEST(Compile, FusedElementwiseChainsGiveEagerBits) {
  auto m = std::make_shared<Fn>([](Fn& self, Tensor x) {
    Tensor bias = self.named_buffers()["bias"];
    Tensor y = (x * 2 + 1).relu() * sigmoid(x) - exp(x * 0.25) + bias;  // bias [8] over [5, 8]
    return (y.tanh() / (y.abs() + 1)).clamp(-0.5, 0.75) + pow(x, 2.0) + leaky_relu(x, 0.1);
  });
  m->register_buffer("bias", randn({8}));
  auto fast = compile(m, quiet());
  InferenceMode guard;
  Tensor x = randn({5, 8});
  fast(x);
  for (int i = 0; i < 2; ++i) {
    Tensor xi = randn({5, 8}) * 3;
    expect_same(fast(xi), (*m)(xi));
  }
  const std::string d = fast.dump();
  const std::string compiled = d.substr(d.find("compiled ("));
  EXPECT_EQ(fast.stats().nodes_compiled, 1) << d;  // one fused program
  // (The order of the ops inside follows the forward's, which C++ leaves to the compiler.)
  const size_t open = compiled.find("fused["), close = compiled.find("]", open);
  ASSERT_NE(open, std::string::npos) << d;
  const std::string ops = compiled.substr(open, close - open);
  for (const char* op :
       {"mul", "add", "relu", "sigmoid", "exp", "sub", "tanh", "abs", "div", "clamp", "pow_scalar", "leaky_relu"})
    EXPECT_NE(ops.find(op), std::string::npos) << op << " in " << ops;
  // Large enough to be threaded and to cross blocks unevenly.
  Tensor big = randn({3, 70001});
  auto g = std::make_shared<Fn>([](Fn&, Tensor x) { return (x * x - 1).relu() + x.exp() * 0.5; });
  auto fg = compile(g, quiet());
  fg(big);
  expect_same(fg(big), (*g)(big));
}

TEST(Compile, CommonSubexpressionsDeadCodeAndConstantsFold) {
  auto m = std::make_shared<Fn>([](Fn& self, Tensor x) {
    Tensor w = self.named_parameters()["w"];
    Tensor unused = x.cos() * 3;  // dead
    (void)unused;
    Tensor a = matmul(x, w.t()), b = matmul(x, w.t());  // one of them; w.t() folds to a constant
    return a + b;
  });
  m->register_parameter("w", randn({6, 4}));
  auto fast = compile(m, quiet());
  NoGradGuard ng;
  Tensor x = randn({3, 4});
  fast(x);
  expect_same(fast(x), (*m)(x));
  const std::string d = fast.dump();
  const std::string captured = d.substr(0, d.find("compiled ("));
  const std::string compiled = d.substr(d.find("compiled ("));
  EXPECT_NE(captured.find("cos("), std::string::npos) << d;
  EXPECT_EQ(compiled.find("cos("), std::string::npos) << d;
  EXPECT_EQ(compiled.find("permute("), std::string::npos) << d;  // folded: w.t() is w's transpose
  size_t matmuls = 0;
  for (size_t p = compiled.find("matmul("); p != std::string::npos; p = compiled.find("matmul(", p + 1)) ++matmuls;
  EXPECT_EQ(matmuls, 1u) << d;
}

TEST(Compile, SignaturesRecordAgainAndTheCacheIsBounded) {
  manual_seed(3);
  auto m = nn::Sequential(nn::Linear(4, 3), nn::ReLU());
  m->eval();
  CompileOptions o = quiet();
  o.cache_size = 2;
  auto fast = compile(m, o);
  InferenceMode guard;
  for (int64_t b : {1, 2, 1, 3, 1, 2}) {
    Tensor x = randn({b, 4});
    expect_same(fast(x), m(x));
  }
  // 1 (capture), 2 (capture), 1 (replay), 3 (capture, evicts 2), 1 (replay), 2 (capture again)
  EXPECT_EQ(fast.stats().captures, 4);
  EXPECT_EQ(fast.stats().replays, 2);
  EXPECT_EQ(fast.stats().cache_entries, 2u);
  // The training flag is part of the signature.
  m->train();
  Tensor x = randn({1, 4});
  expect_same(fast(x), m(x));
  EXPECT_EQ(fast.stats().captures, 5);
}

TEST(Compile, ChangedParametersAreSeen) {
  auto m = cnn();
  auto fast = compile(m, quiet());
  InferenceMode guard;
  Tensor x = randn({2, 1, 12, 12});
  fast(x);
  fast(x);
  EXPECT_EQ(fast.stats().specializations, 1);
  // Change a batch norm's statistics and a convolution's weight in place, as load_state_dict does.
  auto params = m->named_parameters();
  auto buffers = m->named_buffers();
  buffers["1.running_mean"].add_(0.5);
  params["0.weight"].mul_(-1);
  Tensor got = fast(x);
  EXPECT_LT(max_diff(got, (*m)(x)), 1e-5);
  EXPECT_EQ(fast.stats().specializations, 2);
  fast(x);
  EXPECT_EQ(fast.stats().specializations, 2);
}

TEST(Compile, FallsBackToEagerNamingTheReason) {
  InferenceMode guard;
  Tensor x = randn({3, 3}) + eye(3) * 3;
  struct Expect {
    std::function<Tensor(Fn&, Tensor)> f;
    const char* reason;
  };
  const std::vector<Expect> cases = {
      {[](Fn&, Tensor x) { return x * x.sum().item<double>(); }, "on the host (item)"},
      {[](Fn&, Tensor x) { return linalg::inv(x) + 1; }, "LinalgInvBackward"},
      {[](Fn&, Tensor x) { return x + randn_like(x); }, "random"},
      {[](Fn&, Tensor x) { return nonzero(x > 3).to(kFloat32).sum() + x; }, "depends on the values"},
      {[](Fn&, Tensor x) {
         Tensor y = x * 2;
         y.add_(1);
         return y.relu();
       },
       "modified in place"},
  };
  for (const Expect& c : cases) {
    auto m = std::make_shared<Fn>(c.f);
    auto fast = compile(m, quiet());
    manual_seed(5);
    Tensor want = (*m)(x);
    for (int i = 0; i < 2; ++i) {
      manual_seed(5);
      ASSERT_TRUE(fast(x).equal(want)) << c.reason;
    }
    EXPECT_NE(fast.stats().last_fallback.find(c.reason), std::string::npos)
        << c.reason << ": " << fast.stats().last_fallback << "\n"
        << fast.dump();
    EXPECT_EQ(fast.stats().captures, 1);
    EXPECT_EQ(fast.stats().eager_calls, 1);  // the second call: straight to eager
    EXPECT_EQ(fast.stats().replays, 0);
    EXPECT_NE(fast.dump().find("runs eagerly"), std::string::npos);
  }
}

TEST(Compile, CompiledForwardRecordsAutogradAsEager) {
  // Two copies of one model: one trained eagerly, one through compile; same data, same steps.
  auto make = [] {
    manual_seed(4);
    return std::make_shared<nn::Sequential>(nn::Linear(6, 16), nn::Tanh(), nn::Linear(16, 16), nn::ReLU(),
                                            nn::Linear(16, 3));
  };
  auto eager_model = make(), model = make();
  auto fast = compile(model, quiet());
  optim::SGD eager_opt(eager_model->parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  manual_seed(5);
  for (int step = 0; step < 5; ++step) {
    Tensor x = randn({8, 6}), t = randint(0, 3, {8});
    // The compiled forward inside a larger eager graph: the loss and backward are eager's.
    Tensor loss = nn::functional::cross_entropy(fast(x) * 2, t);
    Tensor want = nn::functional::cross_entropy((*eager_model)(x)*2, t);
    ASSERT_NE(loss.grad_fn(), nullptr);
    expect_same(loss, want);
    opt.zero_grad();
    eager_opt.zero_grad();
    loss.backward();
    want.backward();
    opt.step();
    eager_opt.step();
  }
  auto p = model->named_parameters(), q = eager_model->named_parameters();
  for (const auto& [name, t] : p) expect_same(t, q[name]);
  EXPECT_EQ(fast.stats().captures, 1);
  EXPECT_EQ(fast.stats().replays, 4);
  EXPECT_EQ(fast.stats().eager_calls, 0);
  // An input that requires grad gets its gradient through the replay.
  Tensor x = randn({2, 6}).requires_grad_(true), x2 = x.detach().requires_grad_(true);
  fast(x).sum().backward();  // a new signature (requires_grad): captured
  Tensor x3 = randn({2, 6}).requires_grad_(true), x4 = x3.detach().requires_grad_(true);
  fast(x3).square().sum().backward();  // replayed
  (*model)(x4).square().sum().backward();
  expect_same(x3.grad(), x4.grad());
  (void)x2;
  // Under autocast the call runs eagerly, saying so.
  {
    auto ac = autocast(kCPU, kBFloat16);
    NoGradGuard ng;
    fast(randn({2, 6}));
    EXPECT_NE(fast.stats().last_fallback.find("autocast"), std::string::npos);
  }
}

TEST(Compile, ReplayErrorsNameTheOp) {
  auto m = std::make_shared<Fn>([](Fn& self, Tensor x) { return embedding(self.named_parameters()["table"], x); });
  m->register_parameter("table", randn({4, 2}));
  auto fast = compile(m, quiet());
  NoGradGuard ng;
  fast(tensor({int64_t(0), int64_t(1)}));
  try {
    fast(tensor({int64_t(0), int64_t(9)}));
    FAIL() << "an index out of range must throw";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("compile: replaying op 'embedding'"), std::string::npos) << e.what();
  }
}

TEST(Compile, FunctionsOfTensors) {
  Tensor w = randn({4, 3});
  auto f = compile([w](const Tensor& x) { return gelu(matmul(x, w)) * 0.5 + 1; }, quiet());
  NoGradGuard ng;
  Tensor x = randn({2, 4});
  f(x);
  Tensor x2 = randn({2, 4});
  expect_same(f(x2), gelu(matmul(x2, w)) * 0.5 + 1);
  EXPECT_EQ(f.stats().replays, 1);
  // The captured tensor is read at each replay: a change shows.
  w.mul_(2);
  expect_same(f(x2), gelu(matmul(x2, w)) * 0.5 + 1);
  auto g = compile([](const Tensor& a, const Tensor& b) { return (a - b).abs().sum(1); }, quiet());
  Tensor a = randn({3, 5}), b = randn({3, 5});
  g(a, b);
  expect_same(g(b, a), (b - a).abs().sum(1));
  EXPECT_EQ(g.stats().replays, 1);
  EXPECT_THROW(g(a), ValueError);
}

TEST(Compile, CallsFromSeveralThreads) {
  auto m = cnn();
  auto fast = compile(m, quiet());
  Tensor x1 = randn({2, 1, 12, 12}), x2 = randn({3, 1, 12, 12});
  Tensor want1, want2;
  {
    InferenceMode guard;
    want1 = (*m)(x1);
    want2 = (*m)(x2);
  }
  std::atomic<int> bad{0};
  auto work = [&](const Tensor& x, const Tensor& want) {
    InferenceMode guard;
    for (int i = 0; i < 20; ++i)
      if (max_diff(fast(x), want) > 1e-5) ++bad;
  };
  std::thread a(work, x1, want1), b(work, x2, want2);  // two signatures, captured concurrently
  a.join();
  b.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(fast.stats().captures, 2);
  EXPECT_EQ(fast.stats().replays, 38);
}
