// nabla::autocast (core/autocast.h): the op lists by output dtype, nesting, the per-thread state,
// the weight-cast cache, backward outside and inside a region, checkpointing, and the errors.
#include <gtest/gtest.h>

#include <thread>

#include "nabla.h"
#include "tests/common/value_helpers.h"

namespace nabla::testing {
namespace {
namespace F = nn::functional;

// Under autocast(kCPU, kBFloat16), as PyTorch 2.x's CPU lists: the products and convolutions in
// bfloat16, the losses in float32, cat in the widest input dtype, the rest in the inputs' dtype.
TEST(Autocast, CpuListsByOutputDtype) {
  Tensor a = randn({4, 5}), b = randn({5, 3}), x = randn({2, 3, 8, 8}), w = randn({4, 3, 3, 3});
  Tensor t = tensor(std::vector<int64_t>{1, 0, 2, 1});
  auto guard = autocast(kCPU, kBFloat16);
  EXPECT_TRUE(is_autocast_enabled(DeviceType::cpu));
  EXPECT_EQ(autocast_dtype(DeviceType::cpu), kBFloat16);
  EXPECT_EQ(mm(a, b).dtype(), kBFloat16);
  EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
  EXPECT_EQ(linear(a, b.t(), Tensor()).dtype(), kBFloat16);
  EXPECT_EQ(addmm(randn({3}), a, b).dtype(), kBFloat16);
  EXPECT_EQ(conv2d(x, w).dtype(), kBFloat16);
  EXPECT_EQ(F::conv2d(x, w).dtype(), kBFloat16);
  Tensor logits = mm(a, b);  // bfloat16
  EXPECT_EQ(F::cross_entropy(logits, t).dtype(), kFloat32);
  EXPECT_EQ(F::mse_loss(logits, zeros({4, 3})).dtype(), kFloat32);
  EXPECT_EQ(cat({logits, zeros({1, 3})}).dtype(), kFloat32);
  EXPECT_EQ(stack({logits, zeros({4, 3})}).dtype(), kFloat32);
  // Not on the CPU's lists: the inputs' dtype.
  EXPECT_EQ(softmax(logits, 1).dtype(), kBFloat16);
  EXPECT_EQ(exp(a).dtype(), kFloat32);
  EXPECT_EQ(sum(logits).dtype(), kBFloat16);
  EXPECT_EQ(relu(logits).dtype(), kBFloat16);
  // float64 is never cast.
  EXPECT_EQ(mm(a.to(kFloat64), b.to(kFloat64)).dtype(), kFloat64);
  // Values: the bfloat16 product of the rounded inputs.
  EXPECT_EQ(values(mm(a, b)), values(mm(a.to(kBFloat16), b.to(kBFloat16))));
}

TEST(Autocast, CpuFloat16AndTheListsAsData) {
  auto guard = autocast(kCPU, kHalf);
  EXPECT_EQ(mm(randn({2, 2}), randn({2, 2})).dtype(), kHalf);
  EXPECT_EQ(autocast_policy(OpId::conv2d, DeviceType::cpu), CastPolicy::lower);
  EXPECT_EQ(autocast_policy(OpId::softmax, DeviceType::cpu), CastPolicy::none);
  EXPECT_EQ(autocast_policy(OpId::softmax, DeviceType::cuda), CastPolicy::fp32);
  EXPECT_EQ(autocast_policy(OpId::exp, DeviceType::cuda), CastPolicy::fp32);
  EXPECT_EQ(autocast_policy(OpId::addcmul, DeviceType::cuda), CastPolicy::promote);
  EXPECT_EQ(autocast_policy(OpId::binary_cross_entropy, DeviceType::cuda), CastPolicy::banned);
  EXPECT_EQ(autocast_policy(OpId::binary_cross_entropy, DeviceType::cpu), CastPolicy::fp32);
  EXPECT_EQ(autocast_policy(OpId::linalg_inv, DeviceType::cpu), CastPolicy::fp32);
}

TEST(Autocast, NestingRestoresAndDisabledRegions) {
  Tensor a = randn({3, 3});
  EXPECT_EQ(mm(a, a).dtype(), kFloat32);
  {
    auto outer = autocast(kCPU);
    EXPECT_EQ(mm(a, a).dtype(), kBFloat16);
    {
      auto off = autocast(kCPU, /*enabled=*/false);
      EXPECT_FALSE(is_autocast_enabled(DeviceType::cpu));
      EXPECT_EQ(mm(a, a).dtype(), kFloat32);
      {
        auto half = autocast(kCPU, kHalf);
        EXPECT_EQ(mm(a, a).dtype(), kHalf);
      }
      EXPECT_EQ(mm(a, a).dtype(), kFloat32);
    }
    EXPECT_EQ(mm(a, a).dtype(), kBFloat16);
  }
  EXPECT_FALSE(is_autocast_enabled(DeviceType::cpu));
  EXPECT_EQ(mm(a, a).dtype(), kFloat32);
}

TEST(Autocast, StateIsPerThread) {
  auto guard = autocast(kCPU);
  DType other = kFloat64;
  std::thread([&] { other = mm(randn({2, 2}), randn({2, 2})).dtype(); }).join();
  EXPECT_EQ(other, kFloat32);
  EXPECT_EQ(mm(randn({2, 2}), randn({2, 2})).dtype(), kBFloat16);
}

// A weight used twice in a region is cast once (the cache); the gradient reaches the float32 weight
// through both uses; a weight changed in place since its cast is cast again.
TEST(Autocast, WeightCastsAreCachedAndDifferentiable) {
  Tensor w = randn({4, 3}, requires_grad()), x = randn({2, 3});
  Tensor y;
  {
    auto guard = autocast(kCPU);
    Tensor y1 = linear(x, w, Tensor()), y2 = linear(x, w, Tensor());
    EXPECT_EQ(y1.dtype(), kBFloat16);
    y = (y1.to(kFloat32) + y2.to(kFloat32)).sum();
    {
      autograd::NoGradGuard ng;
      w.mul_(2);
    }
    Tensor y3 = linear(x, w, Tensor());
    EXPECT_EQ(values(y3), values(linear(x.to(kBFloat16), w.detach().to(kBFloat16), Tensor())));
  }
  y.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  // d/dw of 2 * sum(x w^T) = 2 * (column sums of x) for every row, in bfloat16's rounding of x.
  Tensor want = (x.to(kBFloat16).to(kFloat32).sum(0) * 2).expand({4, 3});
  EXPECT_TRUE(values_near(values(w.grad()), values(want), 2e-2, 2e-2));
}

// Backward runs with autocast off: gradients have the forward's dtypes, inside a region or not.
TEST(Autocast, BackwardRunsInTheForwardsDtypes) {
  for (bool inside : {false, true}) {
    Tensor w = randn({3, 3}, requires_grad()), x = randn({5, 3}, requires_grad());
    std::optional<AutocastGuard> guard;
    guard.emplace(autocast(kCPU));
    Tensor loss = F::cross_entropy(linear(x, w, Tensor()), tensor(std::vector<int64_t>{0, 1, 2, 0, 1}));
    EXPECT_EQ(loss.dtype(), kFloat32);
    if (!inside) guard.reset();
    loss.backward();
    EXPECT_EQ(w.grad().dtype(), kFloat32);
    EXPECT_EQ(x.grad().dtype(), kFloat32);
  }
}

// A checkpointed segment recomputes under the forward's autocast state, not the engine's.
TEST(Autocast, CheckpointRecomputesUnderTheForwardsState) {
  Tensor w = randn({3, 3}, requires_grad()), x = randn({4, 3});
  Tensor ref_grad;
  for (bool ckpt : {false, true}) {
    w.mutable_grad() = Tensor();
    Tensor y;
    {
      auto guard = autocast(kCPU);
      auto f = [&](const Tensor& in) { return relu(linear(in, w, Tensor())); };
      y = ckpt ? autograd::checkpoint(f, x) : f(x);
      EXPECT_EQ(y.dtype(), kBFloat16);
    }
    y.to(kFloat32).sum().backward();
    if (!ckpt) ref_grad = w.grad().clone();
    else EXPECT_EQ(values(w.grad()), values(ref_grad));
  }
}

// pad's list depends on its mode, as PyTorch's CPU list names reflection_pad1d/2d and
// replication_pad1d/2d/3d: those run in float32, the other modes in the input's dtype.
TEST(Autocast, PadModesFollowTheCpuList) {
  Tensor x1 = randn({2, 3, 6}).to(kBFloat16), x3 = randn({1, 2, 4, 4, 4}).to(kBFloat16);
  auto guard = autocast(kCPU);
  EXPECT_EQ(F::pad(x1, {1, 2}, "reflect").dtype(), kFloat32);
  EXPECT_EQ(F::pad(x1, {1, 2}, "replicate").dtype(), kFloat32);
  EXPECT_EQ(F::pad(x3, {1, 1, 1, 1, 1, 1}, "replicate").dtype(), kFloat32);
  EXPECT_EQ(F::pad(x3, {1, 1, 1, 1, 1, 1}, "reflect").dtype(), kBFloat16);  // reflection_pad3d: on no list
  EXPECT_EQ(F::pad(x1, {1, 2}, "circular").dtype(), kBFloat16);
  EXPECT_EQ(F::pad(x1, {1, 2}).dtype(), kBFloat16);
  EXPECT_EQ(values(F::pad(x1, {1, 2}, "reflect")), values(F::pad(x1.to(kFloat32), {1, 2}, "reflect")));
}

// The recurrent layers run every step in the region's dtype (PyTorch's mkldnn_rnn_layer on the
// CPU, _cudnn_rnn on CUDA), plain and packed; their float32 weights get float32 gradients.
TEST(Autocast, RecurrentLayersRunInTheRegionsDtype) {
  manual_seed(3);
  nn::LSTM lstm(4, 6, nn::LSTMOptions{.num_layers = 2, .bidirectional = true});
  nn::GRU gru(4, 6);
  Tensor x = randn({5, 3, 4});
  auto [ref_out, ref_h, ref_c] = lstm.forward_with_state(x);
  Tensor out, h, c, g;
  {
    auto guard = autocast(kCPU);
    nn::LSTMOutput r = lstm.forward_with_state(x);
    out = r.output, h = r.h_n, c = r.c_n;
    EXPECT_EQ(out.dtype(), kBFloat16);
    EXPECT_EQ(h.dtype(), kBFloat16);
    EXPECT_EQ(c.dtype(), kBFloat16);
    g = gru.forward(x);
    EXPECT_EQ(g.dtype(), kBFloat16);
    using namespace nn::utils::rnn;
    auto packed = lstm.forward_with_state(pack_padded_sequence(x, {5, 3, 2}, false, false));
    EXPECT_EQ(packed.output.data.dtype(), kBFloat16);
  }
  EXPECT_TRUE(values_near(values(out), values(ref_out), 3e-2, 3e-2));
  EXPECT_TRUE(values_near(values(c), values(ref_c), 3e-2, 3e-2));
  (out.to(kFloat32).sum() + g.to(kFloat32).sum()).backward();
  for (const Tensor& p : lstm.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().dtype(), kFloat32);
  }
}

// scaled_dot_product_attention is on both lists: query, key, value and a float mask are lowered.
TEST(Autocast, AttentionRunsInTheRegionsDtype) {
  Tensor q = randn({2, 3, 5, 8}), k = randn({2, 3, 7, 8}), v = randn({2, 3, 7, 4}), m = randn({5, 7});
  Tensor ref = F::scaled_dot_product_attention(q, k, v, {.attn_mask = m});
  auto guard = autocast(kCPU);
  Tensor y = F::scaled_dot_product_attention(q, k, v, {.attn_mask = m});
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_TRUE(values_near(values(y), values(ref), 3e-2, 3e-2));
  EXPECT_EQ(F::scaled_dot_product_attention(q, k, v, {.is_causal = true}).dtype(), kBFloat16);
}

TEST(Autocast, ErrorsNameTheFix) {
  EXPECT_TRUE(
      throws_with<ValueError>([] { (void)autocast(kCPU, kFloat32); }, {"autocast", "float32", "kBFloat16", "kHalf"}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)autocast(kCPU, kFloat64); }, {"autocast", "float64"}));
}

// A bfloat16/float16 input to the norms with float32 parameters: normalised in float32, the output
// in the input's dtype (PyTorch 2.x's mixed-dtype norms), gradients in each tensor's dtype.
TEST(Autocast, NormsKeepALowPrecisionInputsDtype) {
  manual_seed(0);
  for (DType lp : {kBFloat16, kFloat16}) {
    Tensor x32 = randn({4, 6, 5}).to(lp).to(kFloat32);  // exactly representable in lp
    Tensor x = x32.to(lp).requires_grad_(true);
    Tensor w = randn({6}).requires_grad_(true), b = randn({6}).requires_grad_(true);
    Tensor rm = zeros({6}), rv = ones({6});
    Tensor bn = F::batch_norm(x, rm, rv, w, b, /*training=*/true);
    Tensor bn_ref = F::batch_norm(x32, zeros({6}), ones({6}), w, b, true);
    Tensor gn = F::group_norm(x, 3, w, b), gn_ref = F::group_norm(x32, 3, w, b);
    Tensor lw = randn({5}), lb = randn({5});
    Tensor ln = F::layer_norm(x, {5}, lw, lb), ln_ref = F::layer_norm(x32, {5}, lw, lb);
    for (const Tensor* y : {&bn, &gn, &ln}) EXPECT_EQ(y->dtype(), lp);
    // One rounding of the float32 result.
    const double tol = lp == kBFloat16 ? 0.04 : 0.005;
    EXPECT_TRUE(tensor_near(bn.to(kFloat32), bn_ref.detach(), tol, tol));
    EXPECT_TRUE(tensor_near(gn.to(kFloat32), gn_ref.detach(), tol, tol));
    EXPECT_TRUE(tensor_near(ln.to(kFloat32), ln_ref.detach(), tol, tol));
    EXPECT_TRUE(tensor_near(rm, mean(x32, {0, 2}) * 0.1, 1e-5, 1e-5));  // the float32 statistics move
    (bn.to(kFloat32).sum() + gn.to(kFloat32).sum()).backward();
    EXPECT_EQ(x.grad().dtype(), lp);
    EXPECT_EQ(w.grad().dtype(), kFloat32);
  }
  auto guard = autocast(kCPU);  // mv is on no CPU list, though it is built on mm
  EXPECT_EQ(mv(randn({3, 4}), randn({4})).dtype(), kFloat32);
}

// A small convolutional classifier trains under autocast: bfloat16 forward, float32 loss and
// gradients, and the loss falls.
TEST(Autocast, ConvNetTrainsUnderBFloat16) {
  manual_seed(0);
  nn::Sequential net(nn::Conv2d(1, 8, 3, nn::Conv2dOptions{.padding = 1}), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
                     nn::Linear(8 * 4 * 4, 3));
  optim::SGD opt(net->parameters(), optim::SGDOptions{.lr = 0.1});
  Tensor x = randn({12, 1, 8, 8}), y = randint(0, 3, {12});
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    opt.zero_grad();
    Tensor loss;
    {
      auto guard = autocast(kCPU);
      loss = F::cross_entropy(net->forward(x), y);
    }
    loss.backward();
    for (const Tensor& p : net->parameters()) ASSERT_EQ(p.grad().dtype(), kFloat32);
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first * 0.5);
}

}  // namespace
}  // namespace nabla::testing
