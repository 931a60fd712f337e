// The training set-ups the checkpoint fuzz target loads checkpoints into (make_seeds.cpp saves one
// checkpoint of each as a seed): a small model with every kind of module state (weights,
// BatchNorm's running statistics and int64 counter, Dropout's random masks) and, per set-up, a
// different optimizer and scheduler, so that every state-dict reader is reached.
#pragma once

#include <memory>
#include <string>

#include "nabla.h"

namespace nabla_fuzz {

struct CheckpointRun {
  static constexpr int kConfigs = 10;

  std::shared_ptr<nabla::nn::Sequential> model;
  std::unique_ptr<nabla::optim::Optimizer> opt;
  std::unique_ptr<nabla::optim::LRScheduler> sched;
  int config;

  explicit CheckpointRun(int c) : config(c % kConfigs) {
    using namespace nabla;
    manual_seed(7);
    model = std::make_shared<nn::Sequential>(nn::Linear(4, 8), nn::BatchNorm1d(8), nn::ReLU(), nn::Dropout(0.25),
                                             nn::Linear(8, 3));
    std::vector<Tensor> params = model->parameters();
    std::vector<Tensor> body(params.begin(), params.end() - 2), head(params.end() - 2, params.end());
    switch (config) {
      case 0:
        opt = std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = 1e-2, .amsgrad = true});
        sched = std::make_unique<optim::StepLR>(*opt, 2, 0.5);
        break;
      case 1:
        opt = std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
        sched = std::make_unique<optim::CosineAnnealingLR>(*opt, 10);
        break;
      case 2:
        opt = std::make_unique<optim::AdamW>(
            std::vector<optim::AdamW::ParamGroup>{{.params = body},
                                                  {.params = head, .options = optim::AdamWOptions{.lr = 5e-3}}},
            optim::AdamWOptions{.lr = 1e-2});
        sched = std::make_unique<optim::OneCycleLR>(*opt, 0.05, optim::OneCycleOptions{.total_steps = 20});
        break;
      case 3:
        opt = std::make_unique<optim::RMSprop>(params, optim::RMSpropOptions{.momentum = 0.5, .centered = true});
        sched = std::make_unique<optim::ReduceLROnPlateau>(*opt, optim::ReduceLROnPlateauOptions{.patience = 1});
        break;
      case 4:
        opt = std::make_unique<optim::Adagrad>(params);
        sched = std::make_unique<optim::CosineAnnealingWarmRestarts>(*opt, 3, 2);
        break;
      case 5: {
        opt = std::make_unique<optim::NAdam>(params);
        auto warm = std::make_shared<optim::LinearLR>(*opt, 0.5, 1.0, 2);
        auto decay = std::make_shared<optim::ExponentialLR>(*opt, 0.9);
        sched = std::make_unique<optim::SequentialLR>(
            *opt, std::vector<std::shared_ptr<optim::LRScheduler>>{warm, decay}, std::vector<int64_t>{2});
        break;
      }
      case 6:
        opt = std::make_unique<optim::RAdam>(params);
        sched = std::make_unique<optim::CyclicLR>(*opt, 1e-3, 1e-2, optim::CyclicLROptions{.step_size_up = 3});
        break;
      case 7:
        opt = std::make_unique<optim::Adamax>(params);
        sched = std::make_unique<optim::PolynomialLR>(*opt, 8, 2.0);
        break;
      case 8:
        opt = std::make_unique<optim::Adadelta>(params);
        sched = std::make_unique<optim::MultiStepLR>(*opt, std::vector<int64_t>{1, 3, 3});
        break;
      default:
        opt = std::make_unique<optim::LBFGS>(params, optim::LBFGSOptions{.max_iter = 3, .history_size = 4});
        sched = std::make_unique<optim::ConstantLR>(*opt, 0.5, 2);
        break;
    }
  }

  // One training step (and scheduler step) on a fixed batch.
  void step() {
    using namespace nabla;
    manual_seed(11);
    Tensor x = randn({6, 4}), y = randint(0, 3, {6});
    auto closure = [&] {
      opt->zero_grad();
      Tensor loss = nn::functional::cross_entropy((*model)(x), y);
      loss.backward();
      return loss;
    };
    Tensor loss = opt->step(closure);
    if (auto* plateau = dynamic_cast<optim::ReduceLROnPlateau*>(sched.get())) plateau->step(loss.item<double>());
    else sched->step();
  }

  // Whether a loaded L-BFGS set-up asks for more than 100 iterations or evaluations per step: valid
  // (up to a million, optim/lbfgs.cpp), but seconds under the sanitizers, so the fuzz target
  // does not step it.
  bool expensive_step() const {
    auto* lbfgs = dynamic_cast<nabla::optim::LBFGS*>(opt.get());
    return lbfgs && (lbfgs->options().max_iter > 100 || lbfgs->options().max_eval > 125);
  }

  nabla::optim::Checkpoint checkpoint(int64_t epoch = 0, int64_t step = 0) {
    return {.model = model.get(), .optimizer = opt.get(), .scheduler = sched.get(), .epoch = epoch, .step = step};
  }
};

}  // namespace nabla_fuzz
