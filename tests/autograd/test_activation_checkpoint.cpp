// Activation checkpointing (autograd::checkpoint, nn::checkpoint_sequential): gradients equal those
// of the plain run (inputs and parameters, several inputs and outputs, inputs and outputs without
// grad, parameters shared with the rest of the graph, dropout with the random state replayed),
// gradcheck and gradgradcheck, autograd::grad, errors, and the memory it saves.
#include <gtest/gtest.h>

#include <functional>
#include <iostream>

#include "autograd/checkpoint.h"
#include "autograd/gradcheck.h"
#include "core/allocator.h"
#include "nn/checkpoint.h"
#include "tests/common/value_helpers.h"
#include "tests/cuda/cuda_test_util.h"

namespace nabla::testing {
namespace {

using autograd::checkpoint;
using autograd::CheckpointFn;
using TensorList = std::vector<Tensor>;

// float64 on both sides: the two runs do the same arithmetic, so they agree to rounding.
constexpr double kTol = 1e-12;

// Runs loss() with every leaf's .grad cleared and returns (copies of) the leaves' gradients.
TensorList grads_of(const std::function<Tensor()>& loss, const TensorList& leaves) {
  for (Tensor t : leaves) t.zero_grad();
  loss().backward();
  TensorList g;
  for (const Tensor& t : leaves) g.push_back(t.grad().defined() ? t.grad().detach().clone() : Tensor());
  return g;
}

::testing::AssertionResult all_near(const TensorList& got, const TensorList& want, double tol = kTol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " vs " << want.size() << " tensors";
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].defined() != want[i].defined())
      return ::testing::AssertionFailure()
             << "gradient " << i << (got[i].defined() ? " defined" : " undefined") << " but the reference's is not";
    if (!got[i].defined()) continue;
    if (auto r = tensor_near(got[i], want[i], tol, tol); !r) return r << " (gradient " << i << ")";
  }
  return ::testing::AssertionSuccess();
}

std::shared_ptr<nn::Sequential> linear_tanh_linear(int64_t in, int64_t hidden, int64_t out) {
  auto block = std::make_shared<nn::Sequential>(nn::Linear(in, hidden), nn::Tanh(), nn::Linear(hidden, out));
  block->to(kFloat64);
  return block;
}

TensorList with(TensorList a, const TensorList& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---- gradients equal the plain run's -------------------------------------------------------------
TEST(Checkpointing, LinearTanhLinearMatchesPlainRun) {
  manual_seed(1);
  auto block = linear_tanh_linear(6, 8, 4);
  Tensor x = lcg_tensor({5, 6}, 1).requires_grad_();
  TensorList leaves = with({x}, block->parameters());
  auto fn = [&](const Tensor& t) { return (*block)(t); };

  Tensor plain_y = fn(x);
  Tensor ckpt_y = checkpoint(fn, x);
  EXPECT_TRUE(tensor_near(ckpt_y, plain_y, 0, 0));  // the same forward, bit for bit
  EXPECT_STREQ(ckpt_y.grad_fn()->name(), "CheckpointBackward");

  TensorList want = grads_of([&] { return (fn(x) * fn(x)).sum(); }, leaves);
  TensorList got = grads_of(
      [&] {
        Tensor y = checkpoint(fn, x);
        return (y * y).sum();
      },
      leaves);
  ASSERT_EQ(got.size(), 5u);  // x, two weights, two biases
  EXPECT_TRUE(all_near(got, want));
}

TEST(Checkpointing, SeveralInputsAndOutputsAndNonTensorCaptures) {
  Tensor a = lcg_tensor({3, 4}, 2).requires_grad_(), b = lcg_tensor({3, 4}, 3).requires_grad_();
  Tensor w = lcg_tensor({4}, 4).requires_grad_();  // a leaf fn captures, like a parameter
  const double scale = 0.75;                       // a non-Tensor capture
  CheckpointFn fn = [&](const TensorList& in) {
    Tensor h = (in[0] * in[1] + w).tanh() * scale;
    return TensorList{h, (in[0] - in[1]).exp() * w, h.sum(1)};
  };
  auto loss = [&](const TensorList& o) { return (o[0] * o[1]).sum() + (o[2] * o[2]).sum() + o[1].mean(); };
  TensorList want = grads_of([&] { return loss(fn({a, b})); }, {a, b, w});
  TensorList got = grads_of([&] { return loss(checkpoint(fn, {a, b})); }, {a, b, w});
  EXPECT_TRUE(all_near(got, want));
}

TEST(Checkpointing, InputWithoutGradUnusedOutputAndIntegerOutput) {
  Tensor x = lcg_tensor({4, 3}, 5).requires_grad_();
  Tensor c = lcg_tensor({4, 3}, 6);  // does not require grad
  int calls = 0;
  CheckpointFn fn = [&](const TensorList& in) {
    ++calls;
    Tensor y = (in[0] * in[1]).sin();
    return TensorList{y, y.exp(), y.argmax(1)};
  };
  TensorList want = grads_of([&] { return fn({x, c})[0].pow(2).sum(); }, {x, c});
  calls = 0;
  TensorList outs;
  TensorList got = grads_of(
      [&] {
        outs = checkpoint(fn, {x, c});
        return outs[0].pow(2).sum();  // outs[1] is not used in the loss
      },
      {x, c});
  EXPECT_EQ(calls, 2);  // the forward and one recomputation
  EXPECT_TRUE(all_near(got, want));
  EXPECT_FALSE(got[1].defined());
  EXPECT_FALSE(c.requires_grad());
  EXPECT_TRUE(outs[1].requires_grad());
  EXPECT_FALSE(outs[2].requires_grad());
  EXPECT_EQ(outs[2].dtype(), kInt64);
  EXPECT_EQ(int_values(outs[2]), int_values(fn({x, c})[2]));
}

TEST(Checkpointing, ParametersGetGradientsWhenNoInputRequiresGrad) {
  // The first block of a network sees data that does not require grad; its weights still do.
  auto block = linear_tanh_linear(5, 7, 3);
  Tensor x = lcg_tensor({4, 5}, 7);
  auto fn = [&](const Tensor& t) { return (*block)(t); };
  TensorList want = grads_of([&] { return fn(x).pow(2).sum(); }, block->parameters());
  Tensor y = checkpoint(fn, x);
  ASSERT_TRUE(y.requires_grad());
  EXPECT_STREQ(y.grad_fn()->name(), "CheckpointBackward");
  TensorList got = grads_of([&] { return checkpoint(fn, x).pow(2).sum(); }, block->parameters());
  EXPECT_TRUE(all_near(got, want));
}

TEST(Checkpointing, ParameterUsedInsideAndOutsideAndCapturedHistory) {
  Tensor w = lcg_tensor({3, 3}, 8).requires_grad_();
  Tensor x = lcg_tensor({2, 3}, 9).requires_grad_();
  auto loss = [&](bool ckpt) {
    Tensor w2 = w * 2;  // has history: gradients reach w through it
    // fn runs again in backward, after this lambda returned: it captures w2 by value.
    CheckpointFn fn = [w2, &w](const TensorList& in) {
      return TensorList{matmul(in[0], w2).tanh() + matmul(in[0], w)};
    };
    Tensor h = matmul(x, w);  // w outside the block too
    Tensor y = ckpt ? checkpoint(fn, {h})[0] : fn({h})[0];
    return (y * matmul(y, w)).sum();
  };
  TensorList want = grads_of([&] { return loss(false); }, {w, x});
  TensorList got = grads_of([&] { return loss(true); }, {w, x});
  EXPECT_TRUE(all_near(got, want));
}

TEST(Checkpointing, OutputThatIsAnInputOrAParameter) {
  Tensor x = lcg_tensor({3}, 10).requires_grad_(), w = lcg_tensor({3}, 11).requires_grad_();
  CheckpointFn fn = [&](const TensorList& in) { return TensorList{in[0], w, in[0] * w}; };
  auto loss = [&](const TensorList& o) { return (o[0] * 3 + o[1] * o[1] + o[2]).sum(); };
  TensorList want = grads_of([&] { return loss(fn({x})); }, {x, w});
  TensorList got = grads_of([&] { return loss(checkpoint(fn, {x})); }, {x, w});
  EXPECT_TRUE(all_near(got, want));
  EXPECT_EQ(x.grad_fn(), nullptr);  // the input keeps its own history (none: a leaf)
}

TEST(Checkpointing, AutogradGradSeesInputsAndParametersAndLeavesGradAlone) {
  auto block = linear_tanh_linear(4, 6, 2);
  Tensor x = lcg_tensor({3, 4}, 12).requires_grad_();
  auto fn = [&](const Tensor& t) { return (*block)(t); };
  TensorList wrt = with({x}, block->parameters());
  TensorList want = autograd::grad({fn(x).pow(2).sum()}, wrt);
  TensorList got = autograd::grad({checkpoint(fn, x).pow(2).sum()}, wrt);
  EXPECT_TRUE(all_near(got, want));
  for (const Tensor& t : wrt) EXPECT_FALSE(t.grad().defined());
}

TEST(Checkpointing, CheckpointSequentialMatchesPlainRun) {
  auto net = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 7; ++i) {
    net->push_back(nn::Linear(5, 5));
    net->push_back(nn::Tanh());
  }
  net->to(kFloat64);
  Tensor x = lcg_tensor({3, 5}, 13).requires_grad_();
  TensorList leaves = with({x}, net->parameters());
  TensorList want = grads_of([&] { return (*net)(x).pow(2).sum(); }, leaves);
  for (int segments : {1, 3, 14}) {
    TensorList got = grads_of([&] { return nn::checkpoint_sequential(*net, segments, x).pow(2).sum(); }, leaves);
    EXPECT_TRUE(all_near(got, want)) << segments << " segments";
  }
  EXPECT_TRUE(throws_with<ValueError>([&] { nn::checkpoint_sequential(*net, 0, x); },
                                      {"checkpoint_sequential", "between 1 and the number of modules (14)", "got 0"}));
  EXPECT_THROW(nn::checkpoint_sequential(*net, 15, x), ValueError);
}

TEST(Checkpointing, NestedCheckpointsMatchPlainRun) {
  // The inner checkpoint's backward runs inside the outer one's recomputation pass.
  auto inner_block = linear_tanh_linear(4, 5, 4), outer_block = linear_tanh_linear(4, 6, 4);
  Tensor x = lcg_tensor({3, 4}, 26).requires_grad_();
  TensorList leaves = with(with({x}, inner_block->parameters()), outer_block->parameters());
  auto inner = [inner_block](const Tensor& t) { return (*inner_block)(t); };
  auto body = [=](bool ckpt) {
    return [=](const Tensor& t) {
      Tensor h = (*outer_block)(t);
      return (ckpt ? checkpoint(inner, h) : inner(h)) * h;
    };
  };
  TensorList want = grads_of([&] { return body(false)(x).pow(2).sum(); }, leaves);
  TensorList got = grads_of([&] { return checkpoint(body(true), x).pow(2).sum(); }, leaves);
  EXPECT_TRUE(all_near(got, want));
}

// ---- random state --------------------------------------------------------------------------------
TEST(Checkpointing, DropoutReplaysTheForwardsMasksAndKeepsTheRandomStream) {
  auto block = std::make_shared<nn::Sequential>(nn::Linear(8, 16), nn::Tanh(), nn::Dropout(0.5), nn::Linear(16, 4));
  block->to(kFloat64);
  block->train();
  Tensor x = lcg_tensor({6, 8}, 14).requires_grad_();
  TensorList leaves = with({x}, block->parameters());
  auto fn = [&](const Tensor& t) { return (*block)(t); };
  // Each run: seed, a draw before, the block, backward, a draw after.
  auto run = [&](std::function<Tensor(const Tensor&)> f, Tensor* after) {
    manual_seed(123);
    Tensor before = rand({2}, kFloat64);
    TensorList g = grads_of([&] { return (f(x) * (before.sum() + 1)).pow(2).sum(); }, leaves);
    *after = rand({5}, kFloat64);
    return g;
  };
  Tensor plain_after, ckpt_after, loose_after;
  TensorList want = run(fn, &plain_after);
  TensorList got = run([&](const Tensor& t) { return checkpoint(fn, t); }, &ckpt_after);
  EXPECT_TRUE(all_near(got, want));
  EXPECT_TRUE(tensor_near(ckpt_after, plain_after, 0, 0));  // the caller's stream is unchanged

  // Without preserve_rng_state the recomputation draws other masks: the gradients are wrong.
  TensorList loose =
      run([&](const Tensor& t) { return checkpoint(fn, t, {.preserve_rng_state = false}); }, &loose_after);
  EXPECT_FALSE(tensor_near(loose[1], want[1], 1e-6, 1e-6));
}

// ---- gradcheck, double backward ------------------------------------------------------------------
TEST(Checkpointing, Gradcheck) {
  Tensor a = lcg_tensor({3, 2}, 15).requires_grad_(), b = lcg_tensor({2, 4}, 16).requires_grad_();
  Tensor c = lcg_tensor({4}, 17);
  CheckpointFn inner = [&](const TensorList& in) {
    Tensor h = matmul(in[0], in[1]).tanh();
    return TensorList{h * c, (h * h).sum(0)};
  };
  auto f = [&](const TensorList& in) { return checkpoint(inner, in); };
  EXPECT_TRUE(autograd::gradcheck(f, {a, b}));
  EXPECT_TRUE(autograd::gradgradcheck(f, {a, b}));
}

TEST(Checkpointing, DoubleBackwardMatchesPlainRun) {
  Tensor x = lcg_tensor({4}, 18).requires_grad_(), w = lcg_tensor({4}, 19).requires_grad_();
  auto fn = [&](const Tensor& t) { return (t * w).sin() * t; };
  auto second = [&](bool ckpt) {
    Tensor y = (ckpt ? checkpoint(fn, x) : fn(x)).sum();
    TensorList g = autograd::grad({y}, {x, w}, {}, std::nullopt, /*create_graph=*/true);
    return autograd::grad({(g[0] * g[1]).sum()}, {x, w});
  };
  EXPECT_TRUE(all_near(second(true), second(false)));
}

// ---- modes, graph reuse, errors ------------------------------------------------------------------
TEST(Checkpointing, GradModeOffOrNothingRequiringGradJustRunsFn) {
  Tensor x = lcg_tensor({3}, 20);
  int calls = 0;
  auto fn = [&](const Tensor& t) {
    ++calls;
    return t.exp();
  };
  Tensor y = checkpoint(fn, x);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(tensor_near(y, x.exp(), 0, 0));
  Tensor xg = x.detach().requires_grad_();
  {
    autograd::NoGradGuard ng;
    Tensor z = checkpoint(fn, xg);
    EXPECT_FALSE(z.requires_grad());
  }
  EXPECT_EQ(calls, 2);
}

TEST(Checkpointing, RetainGraphAllowsASecondBackward) {
  Tensor x = lcg_tensor({3}, 21).requires_grad_();
  auto fn = [](const Tensor& t) { return t.pow(3).sum(); };
  Tensor y = checkpoint(fn, x);  // the checkpoint's node is the first to run
  y.backward({}, /*retain_graph=*/true);
  y.backward();
  EXPECT_TRUE(tensor_near(x.grad(), x.detach().pow(2) * 6, kTol, kTol));
  EXPECT_TRUE(throws_with<AutogradError>([&] { y.backward(); }, {"CheckpointBackward", "second time"}));
}

TEST(Checkpointing, ErrorsNameCheckpoint) {
  Tensor x = lcg_tensor({2, 3}, 22).requires_grad_();
  EXPECT_TRUE(throws_with<ValueError>([&] { checkpoint(CheckpointFn(), {x}); }, {"checkpoint", "function is empty"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { checkpoint([](const TensorList&) { return TensorList{}; }, {x}); },
                                      {"checkpoint", "returned no tensors"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { checkpoint([](const TensorList&) { return TensorList{Tensor()}; }, {x}); },
                                      {"checkpoint", "returned no tensors", "1 outputs"}));

  // A function that computes something else the second time.
  int calls = 0;
  auto changing = [&](const Tensor& t) { return ++calls == 1 ? t.sum(1) : t.sum(0); };
  Tensor y = checkpoint(changing, x);
  EXPECT_TRUE(throws_with<AutogradError>([&] { y.sum().backward(); },
                                         {"checkpoint", "output 0", "shape [2]", "shape [3]", "deterministic"}));
  calls = 0;
  Tensor w = lcg_tensor({3}, 23).requires_grad_();
  auto reaching = [&](const Tensor& t) { return ++calls == 1 ? t * 2 : t * w; };
  Tensor z = checkpoint(reaching, x);
  EXPECT_TRUE(throws_with<AutogradError>([&] { z.sum().backward(); }, {"checkpoint", "did not use", "deterministic"}));

  // An input modified in place between forward and backward.
  Tensor a = lcg_tensor({3}, 24).requires_grad_();
  Tensor h = a * 1;
  Tensor out = checkpoint([](const Tensor& t) { return t.exp(); }, h);
  h.add_(1);
  EXPECT_TRUE(
      throws_with<AutogradError>([&] { out.sum().backward(); }, {"modified by an in-place", "CheckpointBackward"}));
}

// ---- memory --------------------------------------------------------------------------------------
TEST(Checkpointing, ForwardOfA20LayerMlpKeepsFewerLiveBytes) {
  // 20 Linear(256, 256)-Tanh layers on a (64, 256) float32 batch: each layer keeps its input (for
  // Linear's weight gradient) and its output (for Tanh's), 64 KiB each.
  auto net = std::make_shared<nn::Sequential>();
  for (int i = 0; i < 20; ++i) {
    net->push_back(nn::Linear(256, 256));
    net->push_back(nn::Tanh());
  }
  Tensor x = randn({64, 256});
  auto live = [] { return cpu_memory_stats().allocated_bytes; };
  auto forward_bytes = [&](const std::function<Tensor()>& forward, TensorList* grads) {
    for (Tensor p : net->parameters()) p.zero_grad();
    size_t before = live();
    Tensor loss = forward().pow(2).mean();
    size_t kept = live() - before;  // after forward, before backward
    loss.backward();
    for (const Tensor& p : net->parameters()) grads->push_back(p.grad().clone());
    return kept;
  };
  TensorList plain_grads, ckpt_grads;
  size_t plain = forward_bytes([&] { return (*net)(x); }, &plain_grads);
  // Four checkpointed segments of five layers, the last one too: only the segment outputs remain.
  size_t ckpt = forward_bytes(
      [&] {
        Tensor h = x;
        for (int s = 0; s < 4; ++s)
          h = checkpoint(
              [&, s](const Tensor& t) {
                Tensor y = t;
                for (int i = 10 * s; i < 10 * (s + 1); ++i) y = (*(*net)[i])(y);
                return y;
              },
              h);
        return h;
      },
      &ckpt_grads);
  std::cout << "[ checkpoint ] live bytes after the forward of a 20-layer MLP: plain " << plain << ", checkpointed "
            << ckpt << "\n";
  RecordProperty("plain_forward_bytes", std::to_string(plain));
  RecordProperty("checkpointed_forward_bytes", std::to_string(ckpt));
  const size_t activation = 64 * 256 * sizeof(float);
  EXPECT_GE(plain, 20 * activation);  // one per layer: Linear saves its input, ReLU its output
  EXPECT_LE(ckpt, 6 * activation);    // four segment outputs, the loss and its scratch
  EXPECT_TRUE(all_near(ckpt_grads, plain_grads, 1e-6));
}

// ---- CUDA ----------------------------------------------------------------------------------------
TEST(Checkpointing, CudaDropoutReplaysTheCudaGenerator) {
  NABLA_REQUIRE_CUDA();
  Device gpu(DeviceType::cuda, 0);
  auto block = std::make_shared<nn::Sequential>(nn::Linear(8, 16), nn::Dropout(0.5), nn::Linear(16, 4));
  block->to(gpu, kFloat64);
  block->train();
  Tensor x = lcg_tensor({6, 8}, 25).to(gpu).requires_grad_();
  TensorList leaves = with({x}, block->parameters());
  auto fn = [&](const Tensor& t) { return (*block)(t); };
  auto run = [&](std::function<Tensor(const Tensor&)> f, Tensor* after) {
    manual_seed(321);
    TensorList g = grads_of([&] { return f(x).pow(2).sum(); }, leaves);
    *after = rand({5}, TensorOptions().dtype(kFloat64).device(gpu));
    return g;
  };
  Tensor plain_after, ckpt_after;
  TensorList want = run(fn, &plain_after);
  TensorList got = run([&](const Tensor& t) { return checkpoint(fn, t); }, &ckpt_after);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(close_on_host(got[i], want[i], kTol)) << "gradient " << i;
  EXPECT_TRUE(close_on_host(ckpt_after, plain_after, 0));
}

}  // namespace
}  // namespace nabla::testing
