// amp::GradScaler against PyTorch's GradScaler: a scripted run with injected infs and NaNs (scales,
// skipped steps and weights equal both a scalar transcription of PyTorch's algorithm and the values
// tests/optim/grad_scaler_reference.py prints from PyTorch's own GradScaler class), the fused unscale,
// clipping after unscale_, gradient accumulation, two optimizers, state dicts and training
// checkpoints, a disabled scaler, and each misuse's error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include "nabla.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
using nabla::testing::throws_with;
namespace fs = std::filesystem;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// PyTorch's GradScaler on 20 steps of SGD (lr 0.1, momentum 0.9) on 0.5 * sum((w - t)^2), with
// growth_interval 3, an inf in w.grad[1] at step 3 and a NaN in w.grad[2] at step 7:
// /usr/bin/python3 -O tests/optim/grad_scaler_reference.py (PyTorch 1.13's torch.cuda.amp.GradScaler).
const std::vector<double> kTorchScales = {65536.0,  65536.0,  32768.0,  32768.0,  32768.0,  65536.0,  32768.0,
                                          32768.0,  32768.0,  65536.0,  65536.0,  65536.0,  131072.0, 131072.0,
                                          131072.0, 262144.0, 262144.0, 262144.0, 524288.0, 524288.0};
const std::vector<int> kTorchStepped = {1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
const std::vector<double> kTorchWeights = {0.8292362093925476, -0.3415277898311615, 0.02458314038813114,
                                           0.4146181046962738};

const std::vector<float> kW0 = {0.5f, -1.0f, 2.0f, 0.25f}, kTarget = {1.0f, 0.0f, -1.0f, 0.5f};

// The scripted run's reference in plain scalar code, from PyTorch's documented algorithm
// (GradScaler.unscale_/step/update and torch._amp_update_scale_) and torch.optim.SGD's.
struct ScalarRun {
  std::vector<double> scales;
  std::vector<int> stepped;
  std::vector<float> w;
};
ScalarRun scalar_reference(int steps, int64_t growth_interval) {
  ScalarRun r;
  r.w = kW0;
  float scale = 65536.0f;
  int64_t tracker = 0;
  std::vector<float> buf(4, 0.0f);
  bool first = true;
  for (int step = 1; step <= steps; ++step) {
    std::vector<float> g(4);
    for (int i = 0; i < 4; ++i) g[i] = (r.w[i] - kTarget[i]) * scale;
    if (step == 3) g[1] = kInf;
    if (step == 7) g[2] = kNaN;
    const float inv = static_cast<float>(1.0 / static_cast<double>(scale));
    bool found_inf = false;
    for (float& v : g) {
      found_inf |= !std::isfinite(v);
      v *= inv;
    }
    if (!found_inf) {
      for (int i = 0; i < 4; ++i) {
        buf[i] = first ? g[i] : 0.9f * buf[i] + g[i];
        r.w[i] -= 0.1f * buf[i];
      }
      first = false;
    }
    r.stepped.push_back(found_inf ? 0 : 1);
    if (found_inf) {
      scale = static_cast<float>(scale * 0.5);
      tracker = 0;
    } else if (tracker + 1 == growth_interval) {
      float grown = static_cast<float>(scale * 2.0);
      if (std::isfinite(grown)) scale = grown;
      tracker = 0;
    } else {
      ++tracker;
    }
    r.scales.push_back(scale);
  }
  return r;
}

Tensor quadratic_loss(const Tensor& w) {
  Tensor d = w - tensor(kTarget);
  return (d * d).sum() * 0.5;
}

fs::path tmp_path(const std::string& name) {
  return fs::path(::testing::TempDir()) /
         ("nabla_grad_scaler_" + name + "_" + std::to_string(::getpid()) + ".safetensors");
}

}  // namespace

TEST(GradScaler, DefaultsAreTorchs) {
  amp::GradScaler s;
  EXPECT_TRUE(s.is_enabled());
  EXPECT_EQ(s.get_scale(), 65536.0);
  EXPECT_EQ(s.get_growth_factor(), 2.0);
  EXPECT_EQ(s.get_backoff_factor(), 0.5);
  EXPECT_EQ(s.get_growth_interval(), 2000);
  EXPECT_EQ(s.get_growth_tracker(), 0);
  s.set_growth_factor(4.0);
  s.set_backoff_factor(0.25);
  s.set_growth_interval(10);
  EXPECT_EQ(s.get_growth_factor(), 4.0);
  EXPECT_EQ(s.get_backoff_factor(), 0.25);
  EXPECT_EQ(s.get_growth_interval(), 10);
}

TEST(GradScaler, ScriptedRunWithInfAndNaNMatchesPyTorch) {
  Tensor w = tensor(kW0).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1, .momentum = 0.9});
  amp::GradScaler scaler({.growth_interval = 3});
  std::vector<double> scales;
  std::vector<int> stepped;
  for (int step = 1; step <= 20; ++step) {
    opt.zero_grad();
    Tensor scaled = scaler.scale(quadratic_loss(w));
    EXPECT_EQ(scaled.item<double>(), quadratic_loss(w).item<double>() * scaler.get_scale());
    scaled.backward();
    if (step == 3) w.grad().data_ptr<float>()[1] = kInf;
    if (step == 7) w.grad().data_ptr<float>()[2] = kNaN;
    bool did = scaler.step(opt);
    EXPECT_EQ(scaler.found_inf(opt), !did);
    stepped.push_back(did ? 1 : 0);
    scaler.update();
    scales.push_back(scaler.get_scale());
  }
  ScalarRun ref = scalar_reference(20, 3);
  EXPECT_EQ(scales, ref.scales);
  EXPECT_EQ(stepped, ref.stepped);
  EXPECT_EQ(scales, kTorchScales);
  EXPECT_EQ(stepped, kTorchStepped);
  std::vector<double> got = nabla::testing::values(w);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(got[i], ref.w[i], 1e-6) << i;
    EXPECT_NEAR(got[i], kTorchWeights[i], 1e-6) << i;
  }
  EXPECT_EQ(scaler.get_growth_tracker(), 1);
}

TEST(GradScaler, UpdateRulesOfAmpUpdateScale) {
  Tensor w = tensor(std::vector<float>{1.0f}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.0});
  auto iteration = [&](amp::GradScaler& s, bool inf) {
    opt.zero_grad();
    s.scale(w.sum()).backward();
    if (inf) w.grad().data_ptr<float>()[0] = kInf;
    s.step(opt);
    s.update();
  };
  // The scale never grows past float32's range: 2^127 * 2 is inf, so it stays, and the tracker resets.
  amp::GradScaler big({.init_scale = std::ldexp(1.0, 127), .growth_interval = 1});
  iteration(big, false);
  EXPECT_EQ(big.get_scale(), std::ldexp(1.0, 127));
  EXPECT_EQ(big.get_growth_tracker(), 0);
  // The scale is float32: 0.1 rounds, and backoff rounds once more.
  amp::GradScaler s({.init_scale = 0.1, .backoff_factor = 0.3, .growth_interval = 2});
  EXPECT_EQ(s.get_scale(), 0.1);  // init_scale itself until the first scale()
  iteration(s, false);
  EXPECT_EQ(s.get_scale(), static_cast<double>(0.1f));
  EXPECT_EQ(s.get_growth_tracker(), 1);
  iteration(s, true);
  EXPECT_EQ(s.get_scale(), static_cast<double>(static_cast<float>(static_cast<double>(0.1f) * 0.3)));
  EXPECT_EQ(s.get_growth_tracker(), 0);
  // update(new_scale) sets the scale and keeps the tracker.
  iteration(s, false);
  opt.zero_grad();
  s.scale(w.sum()).backward();
  s.step(opt);
  s.update(8.0);
  EXPECT_EQ(s.get_scale(), 8.0);
  EXPECT_EQ(s.get_growth_tracker(), 1);
}

TEST(GradScaler, UnscaleIsExactAndFindsEveryNonFinite) {
  // Big enough to be split over threads; float64, strided (a transposed gradient) and an inf in the
  // last element, where the last chunk is.
  const int64_t n = 200003;
  Tensor a = zeros({n}).requires_grad_();
  Tensor b = zeros({3, 5}, dtype(kFloat64)).requires_grad_();
  Tensor c = zeros({4, 6}).requires_grad_();
  Tensor ga = randn({n}) * 1024.0, gb = randn({3, 5}, dtype(kFloat64)) * 1024.0, gc = (randn({6, 4}) * 1024.0).t();
  ASSERT_FALSE(gc.is_contiguous());
  a.set_grad(ga.clone());
  b.set_grad(gb.clone());
  c.set_grad(gc);
  Tensor gc_before = gc.clone();
  optim::SGD opt({a, b, c}, {.lr = 0.1});
  amp::GradScaler scaler({.init_scale = 1024.0});
  scaler.scale(a.sum());
  scaler.unscale_(opt);
  EXPECT_FALSE(scaler.found_inf(opt));
  EXPECT_TRUE(a.grad().equal(ga / 1024.0));  // a power of two: exact
  EXPECT_TRUE(b.grad().equal(gb / 1024.0));
  EXPECT_TRUE(c.grad().equal(gc_before / 1024.0));
  scaler.step(opt);
  scaler.update();

  for (int64_t where : {int64_t{0}, n / 2, n - 1}) {
    for (float bad : {kInf, -kInf, kNaN}) {
      opt.zero_grad();
      a.set_grad(ones({n}));
      b.set_grad(ones({3, 5}, dtype(kFloat64)));
      c.set_grad(ones({4, 6}));
      a.grad().data_ptr<float>()[where] = bad;
      scaler.unscale_(opt);
      EXPECT_TRUE(scaler.found_inf(opt)) << where << " " << bad;
      EXPECT_FALSE(scaler.step(opt));
      scaler.update();
    }
  }
  // A NaN in the float64 gradient and one in the strided one.
  for (int which = 0; which < 2; ++which) {
    opt.zero_grad();
    a.set_grad(ones({n}));
    b.set_grad(ones({3, 5}, dtype(kFloat64)));
    c.set_grad(ones({6, 4}).t());
    if (which == 0) b.grad().data_ptr<double>()[7] = std::numeric_limits<double>::quiet_NaN();
    if (which == 1) c.grad().data_ptr<float>()[5] = kInf;
    scaler.unscale_(opt);
    EXPECT_TRUE(scaler.found_inf(opt)) << which;
    scaler.step(opt);
    scaler.update();
  }
}

TEST(GradScaler, ClippingAfterUnscaleSeesTheRealGradients) {
  auto run = [](bool scaled) {
    manual_seed(5);
    auto model = std::make_shared<nn::Linear>(4, 3);
    optim::SGD opt(model->parameters(), {.lr = 0.1});
    amp::GradScaler scaler({.init_scale = 4096.0, .enabled = scaled});
    Tensor x = randn({8, 4}), y = randn({8, 3});
    std::vector<double> norms;
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      Tensor loss = nn::functional::mse_loss(model->forward(x), y);
      scaler.scale(loss).backward();
      scaler.unscale_(opt);
      norms.push_back(nn::utils::clip_grad_norm_(model->parameters(), 0.05));
      EXPECT_TRUE(scaler.step(opt));
      scaler.update();
    }
    return std::make_pair(norms, nabla::testing::values(model->weight));
  };
  auto [norms, weights] = run(true);
  auto [plain_norms, plain_weights] = run(false);
  ASSERT_EQ(norms.size(), plain_norms.size());
  for (size_t i = 0; i < norms.size(); ++i) {
    EXPECT_NEAR(norms[i], plain_norms[i], 1e-6 * plain_norms[i]) << i;
    EXPECT_GT(norms[i], 0.05);  // so the clipping did act
  }
  for (size_t i = 0; i < weights.size(); ++i) EXPECT_NEAR(weights[i], plain_weights[i], 1e-6) << i;
}

TEST(GradScaler, GradientAccumulationScalesEachMicroBatchAndStepsOnce) {
  manual_seed(11);
  Tensor x = randn({6, 3}), y = randn({6, 1});
  auto run = [&](bool scaled) {
    manual_seed(3);
    auto model = std::make_shared<nn::Linear>(3, 1);
    optim::Adam opt(model->parameters(), {.lr = 0.01});
    amp::GradScaler scaler({.init_scale = 256.0, .growth_interval = 2, .enabled = scaled});
    for (int step = 0; step < 4; ++step) {
      opt.zero_grad();
      for (int micro = 0; micro < 3; ++micro) {  // 3 micro-batches of 2
        Tensor loss =
            nn::functional::mse_loss(model->forward(x.narrow(0, 2 * micro, 2)), y.narrow(0, 2 * micro, 2)) / 3.0;
        scaler.scale(loss).backward();
      }
      EXPECT_TRUE(scaler.step(opt));
      scaler.update();
    }
    EXPECT_EQ(scaler.get_scale(), scaled ? 1024.0 : 1.0);  // grew twice
    return nabla::testing::values(model->weight);
  };
  std::vector<double> got = run(true), want = run(false);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

TEST(GradScaler, TwoOptimizersEachWithItsOwnCheck) {
  Tensor w1 = tensor(std::vector<float>{1.0f, 2.0f}).requires_grad_();
  Tensor w2 = tensor(std::vector<float>{3.0f}).requires_grad_();
  optim::SGD opt1({w1}, {.lr = 0.5});
  optim::Adam opt2({w2}, {.lr = 0.1});
  amp::GradScaler scaler({.init_scale = 8.0, .growth_interval = 2});
  auto iteration = [&](bool inf_in_w2) {
    opt1.zero_grad();
    opt2.zero_grad();
    Tensor loss1 = (w1 * w1).sum(), loss2 = (w2 * w1.detach().sum()).sum();
    for (const Tensor& l : scaler.scale(std::vector<Tensor>{loss1, loss2})) l.backward();
    if (inf_in_w2) w2.grad().data_ptr<float>()[0] = kNaN;
    scaler.unscale_(opt1);  // one explicitly, the other inside step
    bool s1 = scaler.step(opt1), s2 = scaler.step(opt2);
    scaler.update();
    return std::make_pair(s1, s2);
  };
  // Step 1: both finite; w1 -= 0.5 * 2 w1 = 0.
  auto [a1, a2] = iteration(false);
  EXPECT_TRUE(a1 && a2);
  EXPECT_EQ(nabla::testing::values(w1), (std::vector<double>{0.0, 0.0}));
  EXPECT_NEAR(w2.item<double>(), 2.9, 1e-6);  // Adam's first step moves by lr
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 1);
  // Step 2: a NaN in opt2's gradient: opt1 steps, opt2 does not, the scale backs off for both.
  {
    autograd::NoGradGuard no_grad;
    w1.copy_(tensor(std::vector<float>{1.0f, 1.0f}));
  }
  auto [b1, b2] = iteration(true);
  EXPECT_TRUE(b1);
  EXPECT_FALSE(b2);
  EXPECT_EQ(nabla::testing::values(w1), (std::vector<double>{0.0, 0.0}));
  EXPECT_NEAR(w2.item<double>(), 2.9, 1e-6);
  EXPECT_EQ(scaler.get_scale(), 4.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 0);
}

TEST(GradScaler, StateDictRoundTripAndTrainingCheckpoint) {
  auto train = [](amp::GradScaler& scaler, nn::Linear& model, optim::Optimizer& opt, int steps, int inf_at) {
    Tensor x = ones({2, 2}), y = zeros({2, 1});
    for (int step = 0; step < steps; ++step) {
      opt.zero_grad();
      scaler.scale(nn::functional::mse_loss(model.forward(x), y)).backward();
      if (step == inf_at) model.weight.grad().data_ptr<float>()[0] = kInf;
      scaler.step(opt);
      scaler.update();
    }
  };
  manual_seed(1);
  auto model = std::make_shared<nn::Linear>(2, 1);
  optim::SGD opt(model->parameters(), {.lr = 0.01, .momentum = 0.5});
  amp::GradScaler scaler({.init_scale = 1024.0, .growth_factor = 4.0, .backoff_factor = 0.25, .growth_interval = 3});
  train(scaler, *model, opt, 6, 1);  // backoff at step 1, then 3 finite steps grow it, 1 more
  EXPECT_EQ(scaler.get_scale(), 1024.0);
  EXPECT_EQ(scaler.get_growth_tracker(), 1);

  nn::StateDict sd = scaler.state_dict();
  ASSERT_EQ(sd.size(), 5u);
  EXPECT_EQ(sd.find("scale")->item<double>(), 1024.0);
  EXPECT_EQ(sd.find("growth_factor")->item<double>(), 4.0);
  EXPECT_EQ(sd.find("backoff_factor")->item<double>(), 0.25);
  EXPECT_EQ(sd.find("growth_interval")->item<int64_t>(), 3);
  EXPECT_EQ(sd.find("_growth_tracker")->item<int64_t>(), 1);
  EXPECT_EQ(sd.find("growth_interval")->dtype(), kInt64);

  amp::GradScaler fresh;
  fresh.load_state_dict(sd);
  EXPECT_EQ(fresh.get_scale(), 1024.0);
  EXPECT_EQ(fresh.get_growth_tracker(), 1);
  EXPECT_EQ(fresh.get_growth_factor(), 4.0);
  EXPECT_EQ(fresh.get_growth_interval(), 3);

  // Through the training checkpoint: resuming continues as not stopping.
  const fs::path path = tmp_path("ckpt");
  optim::save_checkpoint(path.string(), {.model = model.get(), .optimizer = &opt, .scaler = &scaler, .step = 6});
  train(scaler, *model, opt, 4, 2);  // the run without stopping
  const double want_scale = scaler.get_scale();
  const int64_t want_tracker = scaler.get_growth_tracker();
  std::vector<double> want = nabla::testing::values(model->weight);

  manual_seed(99);
  auto model2 = std::make_shared<nn::Linear>(2, 1);
  optim::SGD opt2(model2->parameters(), {.lr = 0.01, .momentum = 0.5});
  amp::GradScaler scaler2;
  optim::Checkpoint ck{.model = model2.get(), .optimizer = &opt2, .scaler = &scaler2};
  optim::load_checkpoint(path.string(), ck);
  EXPECT_EQ(ck.step, 6);
  EXPECT_EQ(scaler2.get_scale(), 1024.0);
  train(scaler2, *model2, opt2, 4, 2);
  EXPECT_EQ(scaler2.get_scale(), want_scale);
  EXPECT_EQ(scaler2.get_growth_tracker(), want_tracker);
  EXPECT_EQ(nabla::testing::values(model2->weight), want);

  // A checkpoint without a scaler cannot fill one.
  const fs::path no_scaler = tmp_path("no_scaler");
  optim::save_checkpoint(no_scaler.string(), {.model = model.get()});
  optim::Checkpoint ck2{.model = model2.get(), .scaler = &scaler2};
  EXPECT_TRUE(
      throws_with<IOError>([&] { optim::load_checkpoint(no_scaler.string(), ck2); }, {"holds no scaler state"}));
  fs::remove(path);
  fs::remove(no_scaler);
}

TEST(GradScaler, LoadStateDictChecksEveryValueFirst) {
  amp::GradScaler s({.init_scale = 32.0});
  const nn::StateDict good = amp::GradScaler({.init_scale = 2.0, .growth_interval = 7}).state_dict();
  auto with = [&](const std::string& key, Tensor v) {
    nn::StateDict sd = good;
    sd.insert_or_assign(key, v);
    return sd;
  };
  auto f64 = [](double v) { return scalar_tensor(v, dtype(kFloat64)); };
  EXPECT_TRUE(throws_with<ValueError>([&] { s.load_state_dict(nn::StateDict{}); }, {"empty", "disabled"}));
  nn::StateDict missing;
  missing.insert("scale", f64(2.0));
  EXPECT_TRUE(throws_with<ValueError>([&] { s.load_state_dict(missing); }, {"missing key 'growth_factor'"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { s.load_state_dict(with("scale", f64(NAN))); }, {"'scale'", "finite"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { s.load_state_dict(with("scale", f64(-1))); }, {"'scale'", "positive"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { s.load_state_dict(with("scale", f64(1e300))); }, {"'scale'", "float32"}));
  EXPECT_TRUE(
      throws_with<ValueError>([&] { s.load_state_dict(with("growth_factor", f64(0.5))); }, {"'growth_factor'"}));
  EXPECT_TRUE(
      throws_with<ValueError>([&] { s.load_state_dict(with("backoff_factor", f64(1.5))); }, {"'backoff_factor'"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { s.load_state_dict(with("growth_interval", f64(2.5))); },
                                      {"'growth_interval'", "whole"}));
  EXPECT_TRUE(
      throws_with<ValueError>([&] { s.load_state_dict(with("_growth_tracker", f64(-1))); }, {"'_growth_tracker'"}));
  EXPECT_TRUE(
      throws_with<ValueError>([&] { s.load_state_dict(with("scale", zeros({2}, dtype(kFloat64)))); }, {"one number"}));
  EXPECT_EQ(s.get_scale(), 32.0);  // nothing changed
  EXPECT_EQ(s.get_growth_interval(), 2000);
  s.load_state_dict(good);
  EXPECT_EQ(s.get_scale(), 2.0);
  EXPECT_EQ(s.get_growth_interval(), 7);
}

TEST(GradScaler, DisabledIsAPassThrough) {
  Tensor w = tensor(std::vector<float>{2.0f}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.25});
  amp::GradScaler s({.enabled = false});
  EXPECT_FALSE(s.is_enabled());
  Tensor loss = (w * w).sum();
  Tensor out = s.scale(loss);
  EXPECT_EQ(out.impl(), loss.impl());  // the input itself, as PyTorch returns it
  out.backward();
  s.unscale_(opt);
  s.unscale_(opt);  // a no-op, even twice
  EXPECT_TRUE(s.step(opt));
  EXPECT_EQ(w.item<double>(), 1.0);  // 2 - 0.25 * 4
  s.update();
  EXPECT_EQ(s.get_scale(), 1.0);
  EXPECT_EQ(s.state_dict().size(), 0u);
  s.load_state_dict(nn::StateDict{});  // ignored
  // Options are not checked when disabled, as PyTorch's asserts are not.
  EXPECT_NO_THROW(amp::GradScaler({.growth_factor = 0.5, .enabled = false}));
}

TEST(GradScaler, LowPrecisionOutputsScaleInFloat32) {
  Tensor loss = full({}, 3.0, dtype(kFloat16));
  amp::GradScaler s;
  Tensor out = s.scale(loss);
  EXPECT_EQ(out.dtype(), kFloat32);
  EXPECT_EQ(out.item<double>(), 3.0 * 65536.0);  // 196608 overflows float16
  EXPECT_EQ(s.scale(full({}, 3.0, dtype(kFloat64))).dtype(), kFloat64);
}

TEST(GradScaler, ErrorsNameTheFix) {
  Tensor w = tensor(std::vector<float>{1.0f, 2.0f}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1});
  EXPECT_TRUE(
      throws_with<ValueError>([] { amp::GradScaler({.growth_factor = 1.0}); }, {"growth factor must be > 1.0"}));
  EXPECT_TRUE(
      throws_with<ValueError>([] { amp::GradScaler({.backoff_factor = 1.0}); }, {"backoff factor must be < 1.0"}));
  {
    amp::GradScaler s;  // step, unscale_ and update before any scale()
    EXPECT_TRUE(throws_with<ValueError>([&] { s.step(opt); }, {"attempted step", "scaler.scale(loss"}));
    EXPECT_TRUE(throws_with<ValueError>([&] { s.unscale_(opt); }, {"attempted unscale_", "scaler.scale(loss"}));
    EXPECT_TRUE(throws_with<ValueError>([&] { s.update(); }, {"attempted update", "scaler.scale(loss"}));
  }
  {
    amp::GradScaler s;  // scaled, but no backward: no gradient to check
    opt.zero_grad();
    s.scale((w * w).sum());
    EXPECT_TRUE(throws_with<ValueError>([&] { s.step(opt); },
                                        {"no inf checks were recorded for this optimizer", "backward()"}));
  }
  {
    amp::GradScaler s;
    EXPECT_TRUE(s.scale(ones({1})).defined());
    EXPECT_TRUE(throws_with<ValueError>([&] { s.update(); }, {"no inf checks were recorded prior to update"}));
  }
  {
    amp::GradScaler s;
    opt.zero_grad();
    s.scale((w * w).sum()).backward();
    s.unscale_(opt);
    EXPECT_TRUE(throws_with<ValueError>([&] { s.unscale_(opt); },
                                        {"unscale_() has already been called on this optimizer since the last update()",
                                         "once per optimizer per iteration"}));
    s.step(opt);
    EXPECT_TRUE(throws_with<ValueError>([&] { s.unscale_(opt); }, {"unscale_() is being called after step()"}));
    EXPECT_TRUE(throws_with<ValueError>([&] { s.step(opt); }, {"step() has already been called", "scaler.update()"}));
    s.update();
    opt.zero_grad();
    s.scale((w * w).sum()).backward();
    EXPECT_NO_THROW(s.unscale_(opt));  // a new iteration
  }
  {
    // float16 gradients are refused before any gradient is touched.
    Tensor h = zeros({3}, dtype(kFloat16)).requires_grad_();
    Tensor f = zeros({2}).requires_grad_();
    optim::SGD mixed({f, h}, {.lr = 0.1});
    f.set_grad(full({2}, 8.0));
    h.set_grad(full({3}, 8.0, dtype(kFloat16)));
    amp::GradScaler s({.init_scale = 8.0});
    s.scale(f.sum());
    EXPECT_TRUE(throws_with<ValueError>([&] { s.unscale_(mixed); },
                                        {"Attempting to unscale FP16 gradients", "parameter 1", "float32"}));
    EXPECT_TRUE(throws_with<ValueError>([&] { s.step(mixed); }, {"Attempting to unscale FP16 gradients"}));
    EXPECT_EQ(nabla::testing::values(f.grad()), (std::vector<double>{8.0, 8.0}));
  }
}
