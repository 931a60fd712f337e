// torch::autograd::Function with AutogradContext, IValue, and torch::save / torch::load.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "tests/common/value_helpers.h"

using nabla::testing::tensor_is;
using nabla::testing::throws_with;

namespace {
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// y = x * w + bias (bias may be undefined) with saved tensors and a trailing undefined gradient.
struct LinearFunction : torch::autograd::Function<LinearFunction> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor w, torch::Tensor bias) {
    ctx->save_for_backward({x, w, bias});
    torch::Tensor y = x.mm(w);
    return bias.defined() ? y + bias : y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    torch::Tensor g = grads[0];
    torch::Tensor gb = saved[2].defined() ? g.sum(0) : torch::Tensor();
    return {g.mm(saved[1].t()), saved[0].t().mm(g), gb, torch::Tensor()};
  }
};

// Returns (x * k, argmax-like indices); the indices are marked non-differentiable.
struct ScaleWithIndex : torch::autograd::Function<ScaleWithIndex> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor x, int64_t k) {
    ctx->saved_data["k"] = k;
    ctx->saved_data["note"] = "scaled";
    torch::Tensor idx = torch::arange(x.size(0), torch::kInt64);
    ctx->mark_non_differentiable({idx});
    return {x * static_cast<double>(k), idx};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    EXPECT_EQ(ctx->saved_data["note"].toStringRef(), "scaled");
    EXPECT_TRUE(ctx->needs_input_grad(0));
    return {grads[0] * static_cast<double>(ctx->saved_data["k"].toInt()), torch::Tensor()};
  }
};
// (x * 2, x * 3); backward records whether the second output's gradient arrived defined.
struct TwoOutputs : torch::autograd::Function<TwoOutputs> {
  static std::tuple<torch::Tensor, torch::Tensor> forward(AutogradContext* ctx, torch::Tensor x, bool materialize) {
    ctx->set_materialize_grads(materialize);
    return {x * 2, x * 3};
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    second_defined = grads[1].defined();
    if (second_defined) second_sum = grads[1].abs().sum().item<double>();
    return {grads[0] * 2 + (grads[1].defined() ? grads[1] * 3 : torch::zeros_like(grads[0])), torch::Tensor()};
  }
  static inline bool second_defined = false;
  static inline double second_sum = -1;
};
}  // namespace

TEST(TorchAutograd, UnusedOutputsGetZeroGradients) {
  torch::Tensor x = torch::ones({3}, torch::requires_grad());
  auto [a, b] = TwoOutputs::apply(x, true);
  EXPECT_EQ(a.grad_fn()->name(), std::string("TwoOutputsBackward"));
  a.sum().backward();
  EXPECT_TRUE(TwoOutputs::second_defined);
  EXPECT_EQ(TwoOutputs::second_sum, 0.0);
  EXPECT_TRUE(tensor_is(x.grad(), {3}, {2, 2, 2}));
  // set_materialize_grads(false) is accepted; the gradient is still zeros (computing the same).
  torch::Tensor y = torch::ones({3}, torch::requires_grad());
  auto [c, d] = TwoOutputs::apply(y, false);
  c.sum().backward();
  EXPECT_EQ(TwoOutputs::second_sum, 0.0);
  EXPECT_TRUE(tensor_is(y.grad(), {3}, {2, 2, 2}));
}

TEST(TorchAutograd, CustomFunctionGradientsMatchTheBuiltInOps) {
  auto opts = torch::dtype(torch::kFloat64).requires_grad(true);
  torch::Tensor x = torch::tensor({{1.0, 2.0}, {3.0, -1.0}}, opts), w = torch::tensor({{0.5}, {-2.0}}, opts);
  torch::Tensor b = torch::tensor({0.25}, opts);
  torch::Tensor y = LinearFunction::apply(x, w, b);
  EXPECT_EQ(y.grad_fn()->name(), std::string("LinearFunctionBackward"));
  y.pow(2).sum().backward();
  torch::Tensor x2 = x.detach().clone().requires_grad_(), w2 = w.detach().clone().requires_grad_();
  torch::Tensor b2 = b.detach().clone().requires_grad_();
  (x2.mm(w2) + b2).pow(2).sum().backward();
  EXPECT_TRUE(torch::allclose(x.grad(), x2.grad()));
  EXPECT_TRUE(torch::allclose(w.grad(), w2.grad()));
  EXPECT_TRUE(torch::allclose(b.grad(), b2.grad()));
  // Without a bias: the saved undefined tensor stays undefined, its gradient is none.
  torch::Tensor w3 = w.detach().clone().requires_grad_();
  LinearFunction::apply(x.detach(), w3, torch::Tensor()).sum().backward();
  EXPECT_TRUE(tensor_is(w3.grad(), {2, 1}, {4, 1}));
}

TEST(TorchAutograd, GradAndBackwardTakeLibtorchsArguments) {
  torch::Tensor x = torch::tensor({1.0, 2.0}, torch::dtype(torch::kFloat64).requires_grad(true));
  torch::Tensor y = (x * x * x).sum();
  // dy/dx = 3 x^2, with the graph kept for the second derivative 6 x.
  variable_list g = torch::autograd::grad({y}, {x}, /*grad_outputs=*/{}, /*retain_graph=*/true, /*create_graph=*/true);
  EXPECT_TRUE(tensor_is(g[0], {2}, {3, 12}));
  torch::autograd::backward({g[0].sum()});
  EXPECT_TRUE(tensor_is(x.grad(), {2}, {6, 12}));
  at::Tensor z = at::zeros({2}, at::kFloat);
  EXPECT_EQ(z.dtype(), torch::kFloat32);
  EXPECT_EQ(at::Reduction::Sum, 2);
}

TEST(TorchAutograd, SavedDataAndNonDifferentiableOutputs) {
  torch::Tensor x = torch::tensor({1.0, 2.0, 3.0}, torch::requires_grad());
  variable_list out = ScaleWithIndex::apply(x, int64_t{3});
  EXPECT_FALSE(out[1].requires_grad());
  EXPECT_TRUE(out[0].requires_grad());
  out[0].sum().backward();
  EXPECT_TRUE(tensor_is(x.grad(), {3}, {3, 3, 3}));
}

TEST(TorchAutograd, IValueReadsBackWhatWasStoredAndNamesAMismatch) {
  torch::IValue d = 2.5, i = 7, b = true, t = torch::ones({2}), list = std::vector<int64_t>{1, 2};
  EXPECT_DOUBLE_EQ(d.toDouble(), 2.5);
  EXPECT_EQ(i.toInt(), 7);
  EXPECT_TRUE(b.toBool());
  EXPECT_TRUE(torch::equal(t.toTensor(), torch::ones({2})));
  EXPECT_EQ(list.toIntVector(), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(torch::IValue().isNone());
  EXPECT_TRUE(throws_with<nabla::ValueError>([&] { i.toDouble(); }, {"expected Double but got Int"}));
}

TEST(TorchSerialize, TensorsModulesAndOptimizersRoundTrip) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("nabla_torch_serialize_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string tpath = (dir / "t.pt").string(), vpath = (dir / "v.pt").string();
  torch::Tensor t = torch::arange(6, torch::kFloat64).view({2, 3});
  torch::save(t, tpath);
  torch::Tensor back;
  torch::load(back, tpath);
  EXPECT_TRUE(torch::equal(back, t));
  torch::save(std::vector<torch::Tensor>{t, torch::ones({1})}, vpath);
  std::vector<torch::Tensor> list;
  torch::load(list, vpath);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_TRUE(torch::equal(list[1], torch::ones({1})));

  torch::nn::Linear a(3, 2), b(3, 2);
  const std::string mpath = (dir / "m.pt").string();
  torch::save(a, mpath);
  torch::load(b, mpath);
  EXPECT_TRUE(torch::equal(a->weight, b->weight));
  EXPECT_TRUE(torch::equal(a->bias, b->bias));

  torch::optim::Adam opt(a->parameters(), torch::optim::AdamOptions(0.1));
  a(torch::ones({1, 3})).sum().backward();
  opt.step();
  const std::string opath = (dir / "o.pt").string();
  torch::save(opt, opath);
  torch::optim::Adam opt2(b->parameters(), torch::optim::AdamOptions(0.5));
  torch::load(opt2, opath);
  EXPECT_DOUBLE_EQ(opt2.options(0).lr, 0.1);

  // A file of another kind, or not one of torch::save's, is refused with both named.
  EXPECT_TRUE(throws_with<nabla::ValueError>([&] { torch::load(b, tpath); }, {tpath, "a tensor", "not a module"}));
  const std::string junk = (dir / "junk.pt").string();
  std::ofstream(junk) << "PK\x03\x04 not a safetensors file";
  EXPECT_TRUE(throws_with<nabla::IOError>([&] { torch::load(back, junk); }, {junk, "TorchScript"}));
  fs::remove_all(dir);
}

TEST(TorchSerialize, ArchivesHoldModulesTensorsValuesAndNestedArchives) {
  namespace fs = std::filesystem;
  const std::string path = (fs::temp_directory_path() / ("nabla_torch_archive_" + std::to_string(getpid()))).string();
  torch::nn::Linear a(2, 3), b(2, 3);
  torch::serialize::OutputArchive archive, nested;
  archive << a;
  archive.write("epoch", torch::IValue(7));
  archive.write("lr", torch::IValue(0.25));
  nested.write("ema", torch::ones({2}));
  archive.write("extra", nested);
  archive.save_to(path);
  torch::serialize::InputArchive in;
  in.load_from(path);
  std::vector<std::string> keys = in.keys();  // (safetensors keeps no order of its own)
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"bias", "epoch", "extra.ema", "lr", "weight"}));
  torch::IValue epoch, lr;
  in.read("epoch", epoch);
  in.read("lr", lr);
  EXPECT_EQ(epoch.toInt(), 7);
  EXPECT_DOUBLE_EQ(lr.toDouble(), 0.25);
  torch::serialize::InputArchive extra;
  ASSERT_TRUE(in.try_read("extra", extra));
  torch::Tensor ema;
  extra.read("ema", ema);
  EXPECT_TRUE(torch::equal(ema, torch::ones({2})));
  torch::Tensor missing;
  EXPECT_FALSE(in.try_read("nothing", missing));
  EXPECT_TRUE(throws_with<nabla::IndexError>([&] { in.read("nothing", missing); }, {"no key 'nothing'", path}));
  // A module's archive loads into a module of the same structure, by torch::load too.
  torch::serialize::OutputArchive only_module;
  only_module << a;
  only_module.save_to(path);
  torch::load(b, path);
  EXPECT_TRUE(torch::equal(a->weight, b->weight));
  fs::remove(path);
}
