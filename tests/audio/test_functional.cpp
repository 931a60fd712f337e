// audio::functional and audio::transforms: known values, errors, and float64 gradchecks of every
// differentiable one (torchaudio's own values are in test_torchaudio.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "autograd/gradcheck.h"
#include "nabla.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
using nabla::testing::throws_with;
using nabla::testing::values;
namespace AF = nabla::audio::functional;
namespace AT = nabla::audio::transforms;

namespace {

Tensor f64_input(IntArrayRef shape, double lo = -1, double hi = 1) {
  return (rand(shape, kFloat64) * (hi - lo) + lo).requires_grad_();
}

void check_grad(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  EXPECT_TRUE(autograd::gradcheck(autograd::single([&](const std::vector<Tensor>& in) { return f(in[0]); }), {x}));
}

}  // namespace

TEST(AudioResample, KeepsALowSineAndHasTorchaudiosLength) {
  // A 440 Hz sine at 16 kHz resampled to 8 kHz is the same sine at 8 kHz (away from the edges).
  const double pi = std::numbers::pi;
  Tensor t = arange(0, 1600, 1, kFloat64);
  Tensor x = (t * (2 * pi * 440 / 16000)).sin().unsqueeze(0);
  Tensor y = AF::resample(x, 16000, 8000);
  ASSERT_EQ(y.sizes(), Shape({1, 800}));
  Tensor want = (arange(0, 800, 1, kFloat64) * (2 * pi * 440 / 8000)).sin();
  const auto got = values(y.select(0, 0).narrow(0, 100, 600)), exp = values(want.narrow(0, 100, 600));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], exp[i], 2e-3) << i;
  // ceil(new * length / orig) samples; equal rates give the input back.
  EXPECT_EQ(AF::resample(zeros({3, 1001}), 44100, 16000).size(-1), 364);
  EXPECT_EQ(AF::resample(zeros({2, 5, 7}), 3, 5).sizes(), Shape({2, 5, 12}));
  Tensor same = zeros({4});
  EXPECT_TRUE(AF::resample(same, 100, 100).is_same(same));
  EXPECT_TRUE(throws_with<ValueError>([] { AF::resample(zeros({4}), 0, 5); }, {"orig_freq 0"}));
  EXPECT_TRUE(throws_with<ValueError>([] { AF::resample(zeros({4}), 2, 5, 6, 0.99, "linear"); }, {"\"linear\""}));
  EXPECT_TRUE(throws_with<DTypeError>([] { AF::resample(zeros({4}, kInt64), 2, 5); }, {"floating", "int64"}));
}

TEST(AudioResample, TransformCachesTheKernelAndIsDifferentiable) {
  AT::Resample r(48000, 32000);
  ASSERT_EQ(r.named_buffers().size(), 1u);
  const Tensor k = r.named_buffers()["kernel"];
  EXPECT_EQ(k.dtype(), kFloat32);
  EXPECT_EQ(k.sizes(), Shape({2, 1, 2 * 10 + 3}));  // gcd 16000: 3 -> 2, width ceil(6 * 3 / 1.98) = 10
  Tensor x = randn({2, 300});
  EXPECT_LE((r(x) - AF::resample(x, 48000, 32000)).abs().max().item<double>(), 1e-6);
  check_grad([](const Tensor& w) { return AF::resample(w, 5, 3, 3); }, f64_input({2, 17}));
  check_grad([](const Tensor& w) { return AF::resample(w, 2, 3, 4, 0.9, "sinc_interp_kaiser"); }, f64_input({9}));
}

TEST(AudioMel, FilterbankTrianglesAndScales) {
  EXPECT_NEAR(AF::hz_to_mel(700, "htk"), 2595 * std::log10(2.0), 1e-9);
  EXPECT_NEAR(AF::hz_to_mel(1000, "slaney"), 15.0, 1e-12);
  EXPECT_NEAR(AF::mel_to_hz(tensor({15.0, 30.0}, kFloat64), "slaney").select(0, 0).item<double>(), 1000.0, 1e-9);
  Tensor fb = AF::melscale_fbanks(201, 0, 8000, 40, 16000);
  ASSERT_EQ(fb.sizes(), Shape({201, 40}));
  EXPECT_GE(fb.min().item<double>(), 0.0);
  EXPECT_LE(fb.max().item<double>(), 1.0 + 1e-6);
  // Every filter is non-zero somewhere; slaney's normalisation gives each the area 2 / bandwidth.
  EXPECT_GT(fb.amax({0}).min().item<double>(), 0.0);
  EXPECT_TRUE(throws_with<ValueError>([] { AF::melscale_fbanks(201, 0, 8000, 40, 16000, "l2"); }, {"\"l2\""}));
  EXPECT_TRUE(throws_with<ValueError>([] { AF::melscale_fbanks(201, 0, 8000, 40, 16000, "", "mel"); }, {"\"mel\""}));
}

TEST(AudioMel, MelScaleMapsFrequencyBinsAndInverseMelScaleUndoesIt) {
  AT::MelScale mel({.n_mels = 8, .sample_rate = 8000, .n_stft = 33});
  Tensor spec = rand({2, 33, 5});
  Tensor m = mel(spec);
  ASSERT_EQ(m.sizes(), Shape({2, 8, 5}));
  EXPECT_LE((m - matmul(mel.fb.t(), spec)).abs().max().item<double>(), 1e-5);
  AT::MelScale small({.n_mels = 4, .sample_rate = 800, .n_stft = 9});
  small.to(kFloat64);
  check_grad([&](const Tensor& s) { return small(s); }, f64_input({2, 9, 3}));
  EXPECT_TRUE(throws_with<ShapeError>([&] { mel(rand({2, 32, 5})); }, {"33", "[2, 32, 5]"}));
  // The SGD reconstruction's mel projection comes close to the input.
  AT::InverseMelScale inv({.n_stft = 33, .n_mels = 8, .sample_rate = 8000, .max_iter = 2000});
  Tensor back = inv(m);
  ASSERT_EQ(back.sizes(), Shape({2, 33, 5}));
  EXPECT_GE(back.min().item<double>(), 0.0);
  EXPECT_LE((mel(back) - m).abs().max().item<double>(), 0.05 * m.abs().max().item<double>());
}

TEST(AudioDct, OrthoIsOrthonormalAndNoneIsTwiceTheUnnormalised) {
  Tensor d = AF::create_dct(16, 16, "ortho").to(kFloat64);  // (n_mels, n_mfcc)
  EXPECT_LE((matmul(d.t(), d) - eye(16, std::nullopt, kFloat64)).abs().max().item<double>(), 1e-5);
  Tensor n = AF::create_dct(3, 4, "");
  ASSERT_EQ(n.sizes(), Shape({4, 3}));
  EXPECT_NEAR(n.select(0, 1).select(0, 2).item<double>(), 2 * std::cos(std::numbers::pi / 4 * 1.5 * 2), 1e-6);
}

TEST(AudioDeltas, SlopeOfARampAndPaddingModes) {
  Tensor ramp = (arange(0, 12, 1, kFloat64) * 3.0).view({1, 12});
  const auto d = values(AF::compute_deltas(ramp, 5));
  for (int i = 2; i < 10; ++i) EXPECT_NEAR(d[i], 3.0, 1e-12) << i;
  // replicate: at t = 0 the window sees (0, 0, 0, 3, 6): (1*3 + 2*6 - 0 - 0) / 10.
  EXPECT_NEAR(d[0], 1.5, 1e-12);
  check_grad([](const Tensor& s) { return AF::compute_deltas(s, 5, "reflect"); }, f64_input({2, 3, 6}));
  check_grad([](const Tensor& s) { return AT::ComputeDeltas(3, "replicate")(s); }, f64_input({4, 5}));
  EXPECT_TRUE(throws_with<ValueError>([] { AF::compute_deltas(zeros({3, 4}), 2); }, {"at least 3", "2"}));
  EXPECT_TRUE(throws_with<ValueError>([] { AF::compute_deltas(zeros({3, 2}), 5, "reflect"); }, {"reflect", "[3, 2]"}));
}

TEST(AudioDecibels, AmplitudeToDBAndBack) {
  Tensor x = tensor({1.0, 100.0, 1e-12, 10.0}, kFloat64).view({1, 1, 4});
  const auto db = values(AF::amplitude_to_DB(x, 10, 1e-10, 0));
  EXPECT_NEAR(db[0], 0, 1e-12);
  EXPECT_NEAR(db[1], 20, 1e-12);
  EXPECT_NEAR(db[2], -100, 1e-9);  // amin
  // top_db 25: floored at max (20) - 25.
  EXPECT_NEAR(values(AF::amplitude_to_DB(x, 10, 1e-10, 0, 25.0))[2], -5, 1e-12);
  EXPECT_LE((AF::DB_to_amplitude(AF::amplitude_to_DB(x, 20, 1e-20, 0), 1, 0.5) - x).abs().max().item<double>(), 1e-12);
  check_grad([](const Tensor& s) { return AF::amplitude_to_DB(s, 10, 1e-10, 0, 3.0); }, f64_input({2, 3, 4}, 0.1, 5));
  check_grad([](const Tensor& s) { return AF::DB_to_amplitude(s, 2.0, 0.5); }, f64_input({5}, -10, 10));
  EXPECT_TRUE(throws_with<ValueError>([] { AT::AmplitudeToDB("power", -1.0); }, {"top_db"}));
  EXPECT_TRUE(throws_with<ValueError>([] { AT::AmplitudeToDB("energy"); }, {"\"energy\""}));
}

TEST(AudioMasking, OneBandNarrowerThanTheParameter) {
  manual_seed(3);
  for (int trial = 0; trial < 20; ++trial) {
    Tensor spec = ones({2, 16, 30});
    Tensor m = AT::TimeMasking(10)(spec);
    // The same columns are masked in both items; fewer than 10 of them, side by side.
    Tensor cols = (m.select(1, 0) == 0.0).to(kInt64);  // (2, 30)
    EXPECT_TRUE(equal(cols.select(0, 0), cols.select(0, 1)));
    const auto c = nabla::testing::int_values(cols.select(0, 0));
    int64_t n = 0, first = -1, last = -1;
    for (int64_t i = 0; i < 30; ++i)
      if (c[i]) {
        ++n;
        if (first < 0) first = i;
        last = i;
      }
    EXPECT_LT(n, 10);
    if (n) EXPECT_EQ(last - first + 1, n);
    EXPECT_EQ((m == 0.0).sum().item<int64_t>(), n * 2 * 16);
  }
  Tensor f = AT::FrequencyMasking(5).forward(ones({3, 8, 4}), 7.0);
  EXPECT_TRUE(equal(f.amax({2}), f.amin({2})));  // whole rows
  // iid: each (batch, channel) item has its own band.
  manual_seed(5);
  Tensor iid = AT::TimeMasking(30, true)(ones({4, 3, 2, 40}));
  Tensor per_item = (iid.select(2, 0) == 0.0).sum({-1});  // (4, 3)
  EXPECT_GT(per_item.amax().item<int64_t>() - per_item.amin().item<int64_t>(), 0);
  // p bounds the width: at most 0.1 * 40 = 4 columns.
  for (int trial = 0; trial < 10; ++trial)
    EXPECT_LT((AT::TimeMasking(30, false, 0.1)(ones({1, 40})) == 0.0).sum().item<int64_t>(), 4);
  // The same mask for every evaluation gradcheck makes: the generator reseeded.
  check_grad(
      [](const Tensor& s) {
        manual_seed(11);
        return AF::mask_along_axis(s, 3, 0.0, 2);
      },
      f64_input({2, 3, 5}));
  EXPECT_TRUE(throws_with<ValueError>([] { AF::mask_along_axis(ones({2, 3}), 2, 0, 3); }, {"axis", "3"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { AF::mask_along_axis_iid(ones({2, 3, 4}), 2, 0, 2); }, {"[2, 3, 4]"}));
}

TEST(AudioVolFade, GainsClampAndFadeCurves) {
  Tensor x = tensor({0.25, -0.5, 0.9}, kFloat64);
  EXPECT_TRUE(nabla::testing::values_near(values(AT::Vol(2.0)(x)), {0.5, -1.0, 1.0}, 1e-12, 0));
  EXPECT_TRUE(nabla::testing::values_near(values(AT::Vol(20.0, "db")(x)), {1.0, -1.0, 1.0}, 1e-12, 0));
  EXPECT_TRUE(nabla::testing::values_near(values(AT::Vol(0.01, "power")(x)), {0.025, -0.05, 0.09}, 1e-12, 0));
  EXPECT_TRUE(throws_with<ValueError>([] { AT::Vol(-1.0); }, {"positive"}));
  // Linear: 0, 1/3, 2/3, 1 in, then 1, 0 out over the last two.
  const auto lin = values(AT::Fade(4, 2)(ones({8}, kFloat64)));
  EXPECT_TRUE(nabla::testing::values_near(lin, {0, 1.0 / 3, 2.0 / 3, 1, 1, 1, 1, 0}, 1e-6, 0));
  const auto half = values(AT::Fade(3, 0, "half_sine")(ones({4})));
  EXPECT_TRUE(nabla::testing::values_near(half, {0, 0.5, 1, 1}, 1e-6, 0));
  check_grad([](const Tensor& s) { return AT::Fade(3, 2, "quarter_sine")(s); }, f64_input({2, 7}));
  check_grad([](const Tensor& s) { return AT::Vol(0.5)(s); }, f64_input({6}));
  check_grad([](const Tensor& s) { return AF::gain(s, -6.0); }, f64_input({6}));
  EXPECT_TRUE(throws_with<ShapeError>([] { AT::Fade(10, 0)(ones({4})); }, {"fade_in_len 10", "[4]"}));
  EXPECT_TRUE(throws_with<ValueError>([] { AT::Fade(1, 1, "cubic"); }, {"\"cubic\""}));
}
