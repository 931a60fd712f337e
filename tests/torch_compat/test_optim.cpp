// torch::optim: builder options reach nabla's optimizers, param_groups() options write through.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <filesystem>
#include <string>

#include <unistd.h>

#include "tests/common/value_helpers.h"

using nabla::testing::tensor_is;
using nabla::testing::throws_with;

namespace {
// One step of `opt` on loss = sum(w * g) (so w.grad = g), from w = 1.
template <class Opt>
torch::Tensor step_once(Opt& opt, torch::Tensor& w, const torch::Tensor& g) {
  opt.zero_grad();
  (w * g).sum().backward();
  opt.step();
  return w.detach().clone();
}
}  // namespace

TEST(TorchOptim, SgdOptionsReachTheUpdate) {
  torch::Tensor w = torch::ones({2}, torch::requires_grad());
  torch::optim::SGD opt({w}, torch::optim::SGDOptions(0.1).momentum(0.5).weight_decay(0.0));
  EXPECT_DOUBLE_EQ(opt.options(0).momentum, 0.5);
  EXPECT_TRUE(tensor_is(step_once(opt, w, torch::tensor({1.0f, 2.0f})), {2}, {0.9, 0.8}));
  // momentum buffer b = 0.5 b + g: the second step moves by 0.1 * 1.5 g.
  EXPECT_TRUE(tensor_is(step_once(opt, w, torch::tensor({1.0f, 2.0f})), {2}, {0.75, 0.5}, 1e-6));
}

TEST(TorchOptim, ParamGroupOptionsAreBoundToTheOptimizer) {
  torch::Tensor a = torch::ones({1}, torch::requires_grad()), b = torch::ones({1}, torch::requires_grad());
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{a});
  groups.emplace_back(std::vector<torch::Tensor>{b}, std::make_unique<torch::optim::AdamOptions>(0.5));
  torch::optim::Adam opt(groups, torch::optim::AdamOptions(0.1).betas(std::make_tuple(0.5, 0.9)));
  EXPECT_DOUBLE_EQ(opt.options(0).lr, 0.1);
  EXPECT_DOUBLE_EQ(opt.options(1).lr, 0.5);
  EXPECT_DOUBLE_EQ(opt.options(0).betas.first, 0.5);
  auto& g = opt.param_groups();
  ASSERT_EQ(g.size(), 2u);
  EXPECT_DOUBLE_EQ(g[1].options().get_lr(), 0.5);
  static_cast<torch::optim::AdamOptions&>(g[0].options()).lr(0.01).eps(1e-3);
  g[1].options().set_lr(0.02);
  EXPECT_DOUBLE_EQ(opt.options(0).lr, 0.01);
  EXPECT_DOUBLE_EQ(opt.options(0).eps, 1e-3);
  EXPECT_DOUBLE_EQ(opt.options(1).lr, 0.02);
  EXPECT_TRUE(g[0].params()[0].is_same(a));
  // A copy of a group's options is the values, no longer bound.
  std::unique_ptr<torch::optim::OptimizerOptions> copy = g[0].options().clone();
  copy->set_lr(7);
  EXPECT_DOUBLE_EQ(opt.options(0).lr, 0.01);
  EXPECT_DOUBLE_EQ(copy->get_lr(), 7);
  // Another optimizer's options in a group are refused.
  std::vector<torch::optim::OptimizerParamGroup> wrong;
  wrong.emplace_back(std::vector<torch::Tensor>{a}, std::make_unique<torch::optim::SGDOptions>(0.1));
  EXPECT_TRUE(throws_with<nabla::ValueError>([&] { torch::optim::Adam bad(wrong, torch::optim::AdamOptions()); },
                                             {"another optimizer"}));
}

TEST(TorchOptim, EveryOptimizerTakesItsBuilder) {
  torch::Tensor g = torch::tensor({1.0f});
  torch::Tensor w1 = torch::ones({1}, torch::requires_grad());
  torch::optim::AdamW adamw({w1}, torch::optim::AdamWOptions(0.1).weight_decay(0.5));
  // decoupled decay first: w = 1 - 0.1 * 0.5 = 0.95, then Adam's first step moves by lr: 0.85.
  EXPECT_TRUE(tensor_is(step_once(adamw, w1, g), {1}, {0.85}, 1e-5));
  torch::Tensor w2 = torch::ones({1}, torch::requires_grad());
  torch::optim::RMSprop rms({w2}, torch::optim::RMSpropOptions(0.01).alpha(0.5));
  // v = 0.5 g^2 = 0.5; w = 1 - 0.01 g / (sqrt(0.5) + eps).
  EXPECT_TRUE(tensor_is(step_once(rms, w2, g), {1}, {1 - 0.01 / std::sqrt(0.5)}, 1e-5));
  torch::Tensor w3 = torch::ones({1}, torch::requires_grad());
  torch::optim::Adagrad ada({w3}, torch::optim::AdagradOptions(0.1).initial_accumulator_value(3.0));
  // sum = 3 + 1; w = 1 - 0.1 / sqrt(4).
  EXPECT_TRUE(tensor_is(step_once(ada, w3, g), {1}, {0.95}, 1e-5));
  // libtorch's StepLR: the first step() keeps the rate, then every step_size-th one decays it.
  torch::optim::StepLR sched(ada, /*step_size=*/2, /*gamma=*/0.5);
  std::vector<double> lrs;
  for (int i = 0; i < 5; ++i) {
    sched.step();
    lrs.push_back(ada.param_groups()[0].options().get_lr());
  }
  EXPECT_EQ(lrs, (std::vector<double>{0.1, 0.1, 0.05, 0.05, 0.025}));
}

TEST(TorchOptim, ImplicitOptionsParametersAndLbfgs) {
  torch::Tensor w = torch::tensor({3.0}, torch::requires_grad());
  torch::optim::SGD sgd({w}, 0.5);  // SGDOptions from the learning rate, as libtorch allows
  EXPECT_DOUBLE_EQ(sgd.options(0).lr, 0.5);
  ASSERT_EQ(sgd.parameters().size(), 1u);
  EXPECT_TRUE(sgd.parameters()[0].is_same(w));
  // L-BFGS minimizes (w - 1)^2 through a closure, as libtorch's.
  torch::Tensor v = torch::tensor({3.0}, torch::dtype(torch::kFloat64).requires_grad(true));
  torch::optim::LBFGS lbfgs({v}, torch::optim::LBFGSOptions(1).max_iter(50).line_search_fn("strong_wolfe"));
  auto closure = [&] {
    lbfgs.zero_grad();
    torch::Tensor loss = (v - 1).pow(2).sum();
    loss.backward();
    return loss;
  };
  lbfgs.step(closure);
  EXPECT_NEAR(v.item<double>(), 1.0, 1e-6);
  EXPECT_TRUE(throws_with<nabla::ValueError>([] { torch::optim::LBFGSOptions().line_search_fn("backtracking"); },
                                             {"strong_wolfe"}));
  EXPECT_EQ(TORCH_VERSION_MAJOR, 2);
}

namespace {
// libtorch's habit: a training step that takes the base class.
void halve_lr_and_step(torch::optim::Optimizer& optimizer, torch::Tensor& w) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(group.options().get_lr() / 2);
  optimizer.zero_grad();
  (w * 2).sum().backward();
  optimizer.step();
}
}  // namespace

TEST(TorchOptim, TheBaseClassReachesGroupsStepsAndSaves) {
  torch::Tensor w = torch::zeros({1}, torch::requires_grad());
  torch::optim::SGD sgd({w}, torch::optim::SGDOptions(0.5));
  halve_lr_and_step(sgd, w);  // lr 0.25, grad 2
  EXPECT_TRUE(tensor_is(w.detach(), {1}, {-0.5}));
  torch::optim::Optimizer& base = sgd;
  EXPECT_EQ(base.parameters().size(), 1u);
  EXPECT_DOUBLE_EQ(base.nabla_optimizer().lr(0), 0.25);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("nabla_torch_opt_" + std::to_string(getpid()))).string();
  torch::save(base, path);
  torch::optim::SGD other({torch::zeros({1}, torch::requires_grad())}, torch::optim::SGDOptions(0.9));
  torch::optim::Optimizer& other_base = other;
  torch::load(other_base, path);
  EXPECT_DOUBLE_EQ(other.options(0).lr, 0.25);
  std::filesystem::remove(path);
  torch::optim::StepLR schedule(base, 1, 0.1);
  schedule.step();
  schedule.step();
  EXPECT_DOUBLE_EQ(sgd.options(0).lr, 0.025);
}
