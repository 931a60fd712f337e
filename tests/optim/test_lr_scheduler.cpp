// LR schedulers: the learning rate after construction and after each step, against the closed
// forms in tests/optim/reference_values.py (and, for ReduceLROnPlateau, its rules replayed by hand),
// their state dicts, and combinations.
#include <gtest/gtest.h>

#include <cmath>

#include "nabla.h"

using namespace nabla;

namespace {

// lr at construction, then after each of `steps` steps.
template <class Make>
std::vector<double> lrs(Make make, int steps, double lr = 1.0) {
  Tensor p = zeros({1}, requires_grad());
  optim::SGD opt(std::vector<Tensor>{p}, {.lr = lr});
  auto s = make(opt);
  std::vector<double> out{opt.lr()};
  for (int i = 0; i < steps; ++i) {
    opt.step();
    s->step();
    out.push_back(opt.lr());
    EXPECT_DOUBLE_EQ(s->get_last_lr()[0], opt.lr());
  }
  return out;
}

void expect_seq(const std::vector<double>& got, const std::vector<double>& expect, const std::string& what,
                double tol = 1e-12) {
  ASSERT_EQ(got.size(), expect.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expect[i], tol) << what << " epoch " << i;
}

}  // namespace

TEST(Scheduler, StepMultiStepExponential) {
  expect_seq(lrs([](auto& o) { return std::make_unique<optim::StepLR>(o, 3, 0.5); }, 12),
             {1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125, 0.125, 0.125, 0.0625}, "StepLR");
  // Milestone 5 listed twice multiplies by gamma^2 there.
  expect_seq(lrs(
                 [](auto& o) {
                   return std::make_unique<optim::MultiStepLR>(o, std::vector<int64_t>{2, 5, 5}, 0.1);
                 },
                 12),
             {1.0, 1.0, 0.1, 0.1, 0.1, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3}, "MultiStepLR");
  std::vector<double> exp;
  for (int e = 0; e <= 12; ++e) exp.push_back(std::pow(0.9, e));
  expect_seq(lrs([](auto& o) { return std::make_unique<optim::ExponentialLR>(o, 0.9); }, 12), exp, "ExponentialLR");
}

TEST(Scheduler, CosineAnnealingIsPeriodic) {
  // eta_min + (1 - eta_min)(1 + cos(pi e / 5)) / 2, continuing with period 2 T_max past T_max.
  expect_seq(lrs([](auto& o) { return std::make_unique<optim::CosineAnnealingLR>(o, 5, 0.1); }, 15),
             {1.0, 0.9140576474687263, 0.6890576474687263, 0.41094235253127376, 0.18594235253127372, 0.1,
              0.1859423525312736, 0.41094235253127365, 0.6890576474687262, 0.9140576474687263, 1.0, 0.9140576474687266,
              0.6890576474687264, 0.41094235253127376, 0.18594235253127375, 0.1},
             "CosineAnnealingLR");
}

TEST(Scheduler, LinearAndLambda) {
  expect_seq(lrs([](auto& o) { return std::make_unique<optim::LinearLR>(o, 0.25, 1.0, 4); }, 6),
             {0.25, 0.4375, 0.625, 0.8125, 1.0, 1.0, 1.0}, "LinearLR");
  expect_seq(
      lrs([](auto& o) { return std::make_unique<optim::LambdaLR>(o, [](int64_t e) { return std::pow(0.95, e); }); }, 5),
      {1.0, 0.95, 0.9025, 0.8573749999999999, 0.8145062499999999, 0.7737809374999998}, "LambdaLR");
  EXPECT_THROW(lrs([](auto& o) { return std::make_unique<optim::LinearLR>(o, 0.0, 1.0, 4); }, 1), ValueError);
}

TEST(Scheduler, OneCycleCosineWithMomentum) {
  Tensor p = zeros({1}, requires_grad());
  optim::SGD opt(std::vector<Tensor>{p}, {.lr = 0.1, .momentum = 0.9});
  optim::OneCycleLR s(opt, 1.0, {.total_steps = 10});
  std::vector<double> lr{opt.lr()}, mom{opt.get_option(0, "momentum")};
  for (int i = 0; i < 10; ++i) {
    opt.step();
    s.step();
    lr.push_back(opt.lr());
    mom.push_back(opt.get_option(0, "momentum"));
  }
  // initial 1/25, max 1 at step 2 (= 0.3 * 10 - 1), min 4e-6 at step 9; step 10 extrapolates.
  expect_seq(lr,
             {0.04, 0.52, 1.0, 0.9504846320134737, 0.8117456539497631, 0.6112620219362893, 0.38874197806371075,
              0.18825834605023697, 0.049519367986526286, 4e-06, 0.04951936798652623},
             "OneCycle lr");
  expect_seq(mom,
             {0.95, 0.9, 0.85, 0.854951556604879, 0.8688255099070633, 0.8888739533021842, 0.9111260466978157,
              0.9311744900929366, 0.945048443395121, 0.95, 0.945048443395121},
             "OneCycle momentum");
  EXPECT_DOUBLE_EQ(*opt.initial_lr(0), 0.04);
  opt.step();
  EXPECT_THROW(s.step(), ValueError);  // past total_steps
}

TEST(Scheduler, OneCycleThreePhaseLinearWithBetas) {
  Tensor p = zeros({1}, requires_grad());
  optim::Adam opt(std::vector<Tensor>{p}, {.lr = 0.1});
  optim::OneCycleLR s(
      opt, 0.5, {.total_steps = 12, .anneal_strategy = optim::OneCycleOptions::Anneal::linear, .three_phase = true});
  std::vector<double> lr{opt.lr()}, beta1{opt.get_option(0, "beta1")};
  for (int i = 0; i < 11; ++i) {
    s.step();
    lr.push_back(opt.lr());
    beta1.push_back(opt.get_option(0, "beta1"));
  }
  expect_seq(lr,
             {0.02, 0.20461538461538464, 0.3892307692307693, 0.4261538461538461, 0.24153846153846148,
              0.0569230769230768, 0.01724165517241379, 0.013793724137931033, 0.010345793103448273, 0.006897862068965515,
              0.0034499310344827568, 1.9999999999985307e-06},
             "OneCycle3 lr");
  expect_seq(beta1,
             {0.95, 0.9115384615384615, 0.8730769230769231, 0.8653846153846154, 0.9038461538461539, 0.9423076923076923,
              0.95, 0.95, 0.95, 0.95, 0.95, 0.95},
             "OneCycle3 beta1");
  // Stepping once past the end would extrapolate below zero: clamped.
  s.step();
  EXPECT_EQ(opt.lr(), 0.0);
  optim::Adagrad no_momentum(std::vector<Tensor>{p});
  EXPECT_THROW(optim::OneCycleLR(no_momentum, 0.1, {.total_steps = 5}), ValueError);
  EXPECT_NO_THROW(optim::OneCycleLR(no_momentum, 0.1, {.epochs = 2, .steps_per_epoch = 3, .cycle_momentum = false}));
}

TEST(Scheduler, ReduceLROnPlateau) {
  Tensor p = zeros({1}, requires_grad());
  optim::SGD opt(std::vector<Tensor>{p}, {.lr = 1.0});
  optim::ReduceLROnPlateau s(opt, {.factor = 0.5, .patience = 2, .cooldown = 1, .min_lrs = {0.2}});
  // Epochs 1-2 improve (1.0, 0.9); 3-5 are bad (0.95): the third bad epoch exceeds patience 2, so
  // the lr halves at epoch 5 and a 1-epoch cooldown starts. Epoch 6 improves (0.8) and ends the
  // cooldown; 7-9 are bad (0.85): halved again at epoch 9; epoch 10's bad count is cleared by the
  // cooldown, 11-12 are bad epochs 1 and 2: no change.
  std::vector<double> metric = {1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85, 0.85};
  std::vector<double> lr{opt.lr()};
  for (double m : metric) {
    s.step(m);
    lr.push_back(opt.lr());
  }
  expect_seq(lr, {1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25}, "ReduceLROnPlateau");
  EXPECT_DOUBLE_EQ(s.best(), 0.8);
  // min_lr bounds it: 0.25 -> 0.2, then no further change.
  for (int i = 0; i < 8; ++i) s.step(1.0);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.2);
  EXPECT_THROW(s.step(), ValueError);
  // mode max with an absolute threshold.
  optim::SGD opt2(std::vector<Tensor>{zeros({1}, requires_grad())}, {.lr = 1.0});
  optim::ReduceLROnPlateau up(opt2, {.mode = optim::ReduceLROnPlateauOptions::Mode::max,
                                     .patience = 0,
                                     .threshold = 0.1,
                                     .threshold_mode = optim::ReduceLROnPlateauOptions::ThresholdMode::abs});
  up.step(0.5);   // better than -inf
  up.step(0.55);  // not better by 0.1: reduce (patience 0)
  EXPECT_DOUBLE_EQ(opt2.lr(), 0.1);
  up.step(0.7);  // better
  EXPECT_DOUBLE_EQ(opt2.lr(), 0.1);
}

TEST(Scheduler, SequentialWarmupThenCosine) {
  // LinearLR warm-up for 3 epochs (0.1, 0.4, 0.7), then the cosine restarted at its epoch 0.
  expect_seq(lrs(
                 [](auto& o) {
                   auto warm = std::make_shared<optim::LinearLR>(o, 0.1, 1.0, 3);
                   auto cos = std::make_shared<optim::CosineAnnealingLR>(o, 5);
                   return std::make_unique<optim::SequentialLR>(
                       o, std::vector<std::shared_ptr<optim::LRScheduler>>{warm, cos}, std::vector<int64_t>{3});
                 },
                 10),
             {0.1, 0.4, 0.7, 1.0, 0.9045084971874737, 0.6545084971874737, 0.34549150281252633, 0.09549150281252633, 0.0,
              0.09549150281252622, 0.3454915028125262},
             "SequentialLR");
  // The factors of chained schedulers multiply.
  expect_seq(lrs(
                 [](auto& o) {
                   return std::make_unique<optim::ChainedScheduler>(std::vector<std::shared_ptr<optim::LRScheduler>>{
                       std::make_shared<optim::ExponentialLR>(o, 0.9), std::make_shared<optim::StepLR>(o, 2, 0.5)});
                 },
                 6),
             {1.0, 0.9, 0.405, 0.36450000000000005, 0.164025, 0.14762250000000002, 0.066430125}, "ChainedScheduler");
  Tensor p = zeros({1}, requires_grad());
  optim::SGD a(std::vector<Tensor>{p}, {.lr = 1.0}), b(std::vector<Tensor>{zeros({1}, requires_grad())}, {.lr = 1.0});
  auto sa = std::make_shared<optim::StepLR>(a, 2);
  auto sb = std::make_shared<optim::StepLR>(b, 2);
  EXPECT_THROW(optim::SequentialLR(a, {sa, sb}, {2}), ValueError);  // another optimizer
  EXPECT_THROW(optim::SequentialLR(a, {sa}, {2}), ValueError);      // milestones count
}

TEST(Scheduler, StateDictResumesTheSchedule) {
  // Run 4 epochs, save optimizer and scheduler, rebuild both, load, and continue: the same
  // sequence as an uninterrupted run.
  auto build = [](optim::SGD& o) {
    auto warm = std::make_shared<optim::LinearLR>(o, 0.1, 1.0, 3);
    auto cos = std::make_shared<optim::CosineAnnealingLR>(o, 6, 0.01);
    return std::make_unique<optim::SequentialLR>(o, std::vector<std::shared_ptr<optim::LRScheduler>>{warm, cos},
                                                 std::vector<int64_t>{3});
  };
  Tensor p = zeros({1}, requires_grad());
  optim::SGD o1(std::vector<Tensor>{p}, {.lr = 0.5});
  auto s1 = build(o1);
  std::vector<double> full;
  for (int i = 0; i < 9; ++i) {
    s1->step();
    full.push_back(o1.lr());
  }
  optim::SGD o2(std::vector<Tensor>{p}, {.lr = 0.5});
  auto s2 = build(o2);
  std::vector<double> resumed;
  for (int i = 0; i < 4; ++i) {
    s2->step();
    resumed.push_back(o2.lr());
  }
  nn::StateDict osd = o2.state_dict(), ssd = s2->state_dict();
  EXPECT_TRUE(ssd.contains("schedulers.1.last_epoch"));
  optim::SGD o3(std::vector<Tensor>{p}, {.lr = 0.5});
  auto s3 = build(o3);
  o3.load_state_dict(osd);
  s3->load_state_dict(ssd);
  EXPECT_EQ(s3->last_epoch(), 4);
  for (int i = 0; i < 5; ++i) {
    s3->step();
    resumed.push_back(o3.lr());
  }
  EXPECT_EQ(resumed, full);  // bitwise

  // ReduceLROnPlateau keeps best, bad epochs and cooldown.
  optim::SGD o4(std::vector<Tensor>{p}, {.lr = 1.0});
  optim::ReduceLROnPlateau r4(o4, {.patience = 1});
  r4.step(1.0);
  r4.step(2.0);
  nn::StateDict rsd = r4.state_dict();
  EXPECT_EQ(rsd["num_bad_epochs"].item<int64_t>(), 1);
  optim::ReduceLROnPlateau r5(o4, {.patience = 1});
  r5.load_state_dict(rsd);
  EXPECT_DOUBLE_EQ(r5.best(), 1.0);
  EXPECT_EQ(r5.num_bad_epochs(), 1);
  r5.step(2.0);  // a second bad epoch: reduce
  EXPECT_DOUBLE_EQ(o4.lr(), 0.1);
  nn::StateDict broken = rsd;
  broken.erase("best");
  EXPECT_THROW(r5.load_state_dict(broken), ValueError);
}

TEST(Scheduler, InitialLrIsRecordedOnce) {
  Tensor p = zeros({1}, requires_grad());
  optim::SGD opt(std::vector<Tensor>{p}, {.lr = 0.3});
  optim::StepLR a(opt, 1, 0.5);
  a.step();                          // lr 0.15
  optim::ExponentialLR b(opt, 1.0);  // base lr is still the initial 0.3 (setdefault)
  EXPECT_DOUBLE_EQ(b.base_lrs()[0], 0.3);
  EXPECT_DOUBLE_EQ(*opt.initial_lr(0), 0.3);
  EXPECT_TRUE(opt.state_dict().contains("param_groups.0.initial_lr"));
}

TEST(Scheduler, ConstantPolynomialMultiplicative) {
  // Expected values: tests/optim/reference_values.py (sched_constant, sched_polynomial, sched_multiplicative).
  expect_seq(lrs([](auto& o) { return std::make_unique<optim::ConstantLR>(o, 0.25, 3); }, 5),
             {0.25, 0.25, 0.25, 1.0, 1.0, 1.0}, "ConstantLR");
  expect_seq(lrs([](auto& o) { return std::make_unique<optim::PolynomialLR>(o, 4, 2.0); }, 6),
             {1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0, 0.0}, "PolynomialLR");
  expect_seq(lrs(
                 [](auto& o) {
                   return std::make_unique<optim::MultiplicativeLR>(o, [](int64_t e) { return e % 2 ? 0.9 : 0.5; });
                 },
                 6),
             {1.0, 0.9, 0.45, 0.405, 0.2025, 0.18225000000000002, 0.09112500000000001}, "MultiplicativeLR");
  EXPECT_THROW(lrs([](auto& o) { return std::make_unique<optim::ConstantLR>(o, 1.5, 3); }, 1), ValueError);
  EXPECT_THROW(lrs([](auto& o) { return std::make_unique<optim::PolynomialLR>(o, 0); }, 1), ValueError);
  EXPECT_THROW(lrs([](auto& o) { return std::make_unique<optim::MultiplicativeLR>(o, nullptr); }, 1), ValueError);
  // PyTorch's documented warm-up: ConstantLR(0.1, 2) then ExponentialLR(0.9) from epoch 2.
  expect_seq(lrs(
                 [](auto& o) {
                   return std::make_unique<optim::SequentialLR>(
                       o,
                       std::vector<std::shared_ptr<optim::LRScheduler>>{std::make_shared<optim::ConstantLR>(o, 0.1, 2),
                                                                        std::make_shared<optim::ExponentialLR>(o, 0.9)},
                       std::vector<int64_t>{2});
                 },
                 4),
             {0.1, 0.1, 1.0, 0.9, 0.81}, "SequentialLR(ConstantLR, ExponentialLR)");
}

TEST(Scheduler, CosineAnnealingWarmRestarts) {
  // T_0 3, T_mult 2, eta_min 0.1: restarts at epochs 3 and 9 (tests/optim/reference_values.py, sched_sgdr).
  Tensor p = zeros({1}, requires_grad());
  optim::SGD opt(std::vector<Tensor>{p}, {.lr = 1.0});
  optim::CosineAnnealingWarmRestarts s(opt, 3, 2, 0.1);
  std::vector<double> got{opt.lr()};
  for (int i = 0; i < 11; ++i) {
    s.step();
    got.push_back(opt.lr());
  }
  expect_seq(got,
             {1.0, 0.775, 0.3250000000000001, 1.0, 0.9397114317029974, 0.775, 0.55, 0.3250000000000001,
              0.16028856829700258, 1.0, 0.9846666218300807, 0.9397114317029974},
             "CosineAnnealingWarmRestarts");
  EXPECT_EQ(s.T_i(), 12);
  EXPECT_EQ(s.T_cur(), 2);
  // Fractional epochs (annealing within an epoch), then step() goes on one epoch at a time from
  // there, as PyTorch's does.
  std::vector<double> frac;
  for (double e : {2.5, 3.25}) {
    s.step(e);
    frac.push_back(opt.lr());
  }
  EXPECT_EQ(s.last_epoch(), 3);
  EXPECT_DOUBLE_EQ(s.T_cur(), 0.25);
  nn::StateDict sd = s.state_dict();
  s.step();  // 4.25
  frac.push_back(opt.lr());
  s.step(9.0);
  frac.push_back(opt.lr());
  expect_seq(frac, {0.16028856829700258, 0.9961501876182147, 0.1 + 0.9 * (1 + std::cos(M_PI * 1.25 / 6)) / 2, 1.0},
             "fractional epochs");
  // The fraction is part of the state: a scheduler loaded from epoch 3.25 steps to 4.25.
  optim::SGD opt2(std::vector<Tensor>{p}, {.lr = 1.0});
  optim::CosineAnnealingWarmRestarts s2(opt2, 3, 2, 0.1);
  s2.load_state_dict(sd);
  s2.step();
  EXPECT_DOUBLE_EQ(opt2.lr(), frac[2]);
  EXPECT_THROW(s.step(-1.0), ValueError);
  EXPECT_THROW(optim::CosineAnnealingWarmRestarts(opt, 0), ValueError);
  EXPECT_THROW(optim::CosineAnnealingWarmRestarts(opt, 3, 0), ValueError);
  // T_mult 1: a plain period of T_0.
  optim::SGD opt3(std::vector<Tensor>{p}, {.lr = 1.0});
  optim::CosineAnnealingWarmRestarts s3(opt3, 4);
  for (int i = 0; i < 9; ++i) s3.step();
  EXPECT_DOUBLE_EQ(opt3.lr(), (1 + std::cos(M_PI / 4)) / 2);  // epoch 9 = 2 periods + 1
}

TEST(Scheduler, CyclicLRModesAndMomentum) {
  // base 0.1, max 1.0, 2 steps up, 4 down (tests/optim/reference_values.py, sched_cyclic_*).
  auto run = [](optim::CyclicLROptions o, const char* mom_option, bool adam) {
    Tensor p = zeros({1}, requires_grad());
    std::unique_ptr<optim::Optimizer> opt;
    if (adam) opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p}, optim::AdamOptions{.lr = 0.5});
    else opt = std::make_unique<optim::SGD>(std::vector<Tensor>{p}, optim::SGDOptions{.lr = 0.5, .momentum = 0.5});
    o.step_size_up = 2;
    o.step_size_down = 4;
    optim::CyclicLR s(*opt, 0.1, 1.0, o);
    std::vector<double> lr{opt->lr()}, mom;
    if (mom_option) mom.push_back(opt->get_option(0, mom_option));
    for (int i = 0; i < 13; ++i) {
      s.step();
      lr.push_back(opt->lr());
      if (mom_option) mom.push_back(opt->get_option(0, mom_option));
    }
    return std::pair{lr, mom};
  };
  using M = optim::CyclicLROptions::Mode;
  auto [tri, tri_mom] = run({}, "momentum", false);
  expect_seq(tri,
             {0.1, 0.5500000000000003, 0.9999999999999998, 0.7749999999999999, 0.5500000000000002, 0.3249999999999998,
              0.1, 0.5500000000000008, 0.9999999999999992, 0.7749999999999999, 0.5499999999999996, 0.3250000000000004,
              0.1, 0.5499999999999996},
             "CyclicLR triangular");
  std::vector<double> want_mom{0.9,
                               0.85,
                               0.8,
                               0.8250000000000001,
                               0.85,
                               0.875,
                               0.9,
                               0.85,
                               0.8,
                               0.8250000000000001,
                               0.8500000000000001,
                               0.875,
                               0.9,
                               0.8500000000000001};
  expect_seq(tri_mom, want_mom, "CyclicLR momentum");
  auto [tri2, beta1] = run({.mode = M::triangular2}, "beta1", true);  // Adam: beta1 cycles
  expect_seq(
      tri2,
      {0.1, 0.5500000000000003, 0.9999999999999998, 0.7749999999999999, 0.5500000000000002, 0.3249999999999998, 0.1,
       0.3250000000000004, 0.5499999999999996, 0.4375, 0.3249999999999998, 0.2125000000000002, 0.1, 0.2124999999999999},
      "CyclicLR triangular2");
  EXPECT_NEAR(beta1[2], 0.8, 1e-12);   // the peak of the first cycle
  EXPECT_NEAR(beta1[8], 0.85, 1e-12);  // the second cycle's amplitude is halved
  auto [expr, unused] = run({.mode = M::exp_range, .gamma = 0.9, .cycle_momentum = false}, nullptr, false);
  expect_seq(expr,
             {0.1, 0.5050000000000002, 0.8289999999999998, 0.592075, 0.39524500000000007, 0.23286024999999988, 0.1,
              0.3152336050000004, 0.4874204889999998, 0.361508830075, 0.2569052980449999, 0.17060738412025012, 0.1,
              0.21438396227480494},
             "CyclicLR exp_range");
  // A custom scale of the cycle number equal to triangular2's gives triangular2's rates.
  auto [custom, unused2] =
      run({.scale_fn = [](double c) { return 1.0 / std::pow(2.0, c - 1); }, .cycle_momentum = false}, nullptr, false);
  expect_seq(custom, tri2, "CyclicLR scale_fn");

  Tensor p = zeros({1}, requires_grad());
  optim::Adagrad no_momentum(std::vector<Tensor>{p});
  EXPECT_THROW(optim::CyclicLR(no_momentum, 0.1, 1.0), ValueError);
  EXPECT_NO_THROW(optim::CyclicLR(no_momentum, 0.1, 1.0, {.cycle_momentum = false}));
  EXPECT_THROW(optim::CyclicLR(no_momentum, 0.1, 1.0, {.step_size_up = 0, .cycle_momentum = false}), ValueError);
  EXPECT_THROW(optim::CyclicLR(no_momentum, {0.1, 0.2}, {1.0}, {.cycle_momentum = false}), ValueError);
}
