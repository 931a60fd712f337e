// The STFT-based audio::functional and audio::transforms (Spectrogram, InverseSpectrogram,
// GriffinLim, MelSpectrogram, MFCC, LFCC, TimeStretch, phase_vocoder, linear_fbanks) against
// torchaudio 0.13, forward and gradients: torchaudio_spectral_reference.py writes the inputs,
// torchaudio's outputs and the gradients of sum(output * weight) in one Python process.
#include <gtest/gtest.h>

#include <cstdio>
#include <numbers>
#include <string>

#include "nabla.h"
#include "tests/audio/torchaudio_refs.h"
#include "tests/common/python_torch.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
namespace AF = nabla::audio::functional;
namespace AT = nabla::audio::transforms;

using nabla_test::TorchaudioRefs;

namespace {

Tensor as_complex(const Tensor& pairs) { return view_as_complex(pairs.contiguous()); }

// The gradient of sum(f(x) * weight) at x (complex outputs weighted through their real view),
// weight = ref[name + "_w"]; compared with torchaudio's ref[name + "_grad"].
template <class Fn>
void expect_grad(const TorchaudioRefs& ref, const std::string& name, const Tensor& input, Fn f, double tol) {
  Tensor x = input.detach().clone().requires_grad_(true);
  Tensor y = f(x);
  if (y.is_complex()) y = view_as_real(y);
  (y * ref[name + "_w"]).sum().backward();
  ASSERT_TRUE(x.grad().defined()) << name;
  ref.expect_scaled(name + "_grad", x.grad(), tol);
}

Tensor hann64(int64_t n) { return hann_window(n, true, TensorOptions().dtype(kFloat64)); }

}  // namespace

TEST(AudioTorchaudioSpectral, TransformsMatchTorchaudio) {
  NABLA_NEEDS_PYTHON_MODULES("torch, torchaudio");
  nabla_test::TempDir dir;
  TorchaudioRefs ref(dir);
  if (!ref.run("audio/torchaudio_spectral_reference.py")) return;
  const Tensor wave = ref["wave"], wave64 = ref["wave64"];  // (2, 3, 1601) float32, (2, 997) float64

  // float32 results are compared relative to their largest value (powers reach ~1e4).
  ref.expect_scaled("Spectrogram_default", AT::Spectrogram()(wave), 2e-6);
  ref.expect_scaled(
      "Spectrogram_511_w300_h77_pad5_mag_window",
      AT::Spectrogram({.n_fft = 511, .win_length = 300, .hop_length = 77, .pad = 5, .power = 1.0, .normalized = true})(
          wave),
      2e-6);
  ref.expect_scaled("Spectrogram_256_complex_frame_hamming_nocenter",
                    AT::Spectrogram({.n_fft = 256,
                                     .window_fn = [](int64_t n) { return hamming_window(n); },
                                     .power = std::nullopt,
                                     .normalized = "frame_length",
                                     .center = false})(wave),
                    2e-6);
  ref.expect_scaled(
      "Spectrogram_200_p1.5_constant_twosided",
      AT::Spectrogram({.n_fft = 200, .hop_length = 50, .power = 1.5, .pad_mode = "constant", .onesided = false})(wave),
      2e-6);
  const Tensor kaiser = kaiser_window(128, true, 8.0, TensorOptions().dtype(kFloat64));
  ref.expect_scaled("spectrogram_f64_kaiser", AF::spectrogram(wave64, 3, kaiser, 128, 32, 128, 2.0, false), 1e-13);

  const Tensor spec_c = as_complex(ref["spec_c"]);
  AT::InverseSpectrogram inverse({.n_fft = 256, .hop_length = 64});
  ref.expect("InverseSpectrogram_256_len1601", inverse.forward(spec_c, 1601), 2e-6);
  ref.expect("InverseSpectrogram_256_nolen", inverse(spec_c), 2e-6);
  // nabla's own round trip: Spectrogram then InverseSpectrogram gives the waveform back.
  Tensor round_trip =
      inverse.forward(AT::Spectrogram({.n_fft = 256, .hop_length = 64, .power = std::nullopt})(wave), 1601);
  EXPECT_LT((round_trip - wave).abs().max().item<double>(), 2e-6);
  ref.expect("inverse_spectrogram_f64_pad7_window",
             AF::inverse_spectrogram(as_complex(ref["spec_c64"]), 997, 7, hann64(120), 160, 40, 120, true), 1e-13);

  // Griffin-Lim's iterations amplify rounding: float64 agrees to 1e-10, float32 to ~1e-5.
  const Tensor power64 = ref["power64"];
  ref.expect("griffinlim_f64_8", AF::griffinlim(power64, hann64(128), 128, 32, 128, 2.0, 8, 0.99, 997, false), 1e-10);
  ref.expect("griffinlim_f64_nomomentum",
             AF::griffinlim(power64, hann64(128), 128, 32, 128, 2.0, 4, 0.0, std::nullopt, false), 1e-10);
  ref.expect_scaled(
      "GriffinLim_256_f32",
      AT::GriffinLim({.n_fft = 256, .n_iter = 4, .hop_length = 64, .rand_init = false})(spec_c.abs().pow(2.0)), 5e-5);

  ref.expect_scaled("MelSpectrogram_400_160_64",
                    AT::MelSpectrogram({.sample_rate = 16000, .n_fft = 400, .hop_length = 160, .n_mels = 64})(wave),
                    5e-6);
  ref.expect_scaled("MelSpectrogram_slaney",
                    AT::MelSpectrogram({.sample_rate = 22050,
                                        .n_fft = 512,
                                        .win_length = 400,
                                        .hop_length = 128,
                                        .f_min = 30.0,
                                        .f_max = 9000.0,
                                        .n_mels = 40,
                                        .power = 1.0,
                                        .norm = "slaney",
                                        .mel_scale = "slaney"})(wave),
                    5e-6);
  // Decibels of float32 powers: log10 near the 80 dB floor is where float32 differs most.
  ref.expect_scaled("MFCC_13",
                    AT::MFCC({.n_mfcc = 13, .melkwargs = {.n_fft = 400, .hop_length = 160, .n_mels = 40}})(wave), 2e-5);
  ref.expect_scaled(
      "MFCC_log_8000",
      AT::MFCC(
          {.sample_rate = 8000, .n_mfcc = 20, .norm = "", .log_mels = true, .melkwargs = {.n_fft = 256, .n_mels = 32}})(
          wave),
      2e-5);
  ref.expect_scaled("LFCC_default", AT::LFCC()(wave), 2e-5);
  ref.expect_scaled("LFCC_64_20_log",
                    AT::LFCC({.sample_rate = 8000,
                              .n_filter = 64,
                              .f_min = 100.0,
                              .f_max = 3500.0,
                              .n_lfcc = 20,
                              .log_lf = true,
                              .speckwargs = {.n_fft = 512, .hop_length = 128}})(wave),
                    2e-5);
  ref.expect("linear_fbanks_257_64", AF::linear_fbanks(257, 50.0, 7000.0, 64, 16000), 1e-5);

  const Tensor spec201 = as_complex(ref["spec201"]);
  // float32 phases accumulate to ~1e4 rad, where a float32 ulp is 1e-3 rad: an ulp apart in one
  // angle() is 1e-4 in the output. The float64 case below is the tight one.
  ref.expect_scaled("TimeStretch_1.3", AT::TimeStretch(100, 201, 1.3)(spec201), 2e-3);
  ref.expect_scaled("TimeStretch_0.7", AT::TimeStretch(std::nullopt, 201).forward(spec201, 0.7), 2e-3);
  const Tensor advance = linspace(0, std::numbers::pi * 64, 129, TensorOptions().dtype(kFloat64)).unsqueeze(1);
  ref.expect_scaled("phase_vocoder_f64_1.7", AF::phase_vocoder(as_complex(ref["spec_c64_129"]), 1.7, advance), 1e-12);

  // Gradients, in float64.
  const Tensor x64 = ref["x64"];
  AT::MelSpectrogram mel({.n_fft = 128, .hop_length = 32, .n_mels = 16});
  AT::MFCC mfcc({.n_mfcc = 8, .log_mels = true, .melkwargs = {.n_fft = 128, .n_mels = 16}});
  AT::LFCC lfcc({.n_filter = 16, .n_lfcc = 8, .speckwargs = {.n_fft = 64}});
  AT::Spectrogram spec({.n_fft = 100, .hop_length = 25, .window_fn = hann64, .power = std::nullopt});
  AT::TimeStretch stretch(32, 65, 1.25);
  AT::InverseSpectrogram inv({.n_fft = 128, .hop_length = 32, .window_fn = hann64});
  for (nn::Module* m : std::initializer_list<nn::Module*>{&mel, &mfcc, &lfcc, &stretch}) m->to(kFloat64);
  // These three hold float32 windows and filters made as torchaudio's, then converted: the float32
  // values of nabla's and PyTorch's hann_window / linspace differ by an ulp at times (nabla rounds
  // from float64), which is the 1e-7 seen here; the gradients' formulas are checked by the others.
  expect_grad(
      ref, "MelSpectrogram", x64, [&](const Tensor& x) { return mel(x); }, 1e-6);
  expect_grad(
      ref, "MFCC", x64, [&](const Tensor& x) { return mfcc(x); }, 1e-6);
  expect_grad(
      ref, "LFCC", x64, [&](const Tensor& x) { return lfcc(x); }, 1e-6);
  expect_grad(
      ref, "Spectrogram_complex", x64, [&](const Tensor& x) { return spec(x); }, 1e-12);
  const Tensor s64 = as_complex(ref["s64"]);
  expect_grad(
      ref, "TimeStretch", s64, [&](const Tensor& s) { return stretch(s); }, 1e-12);
  expect_grad(
      ref, "InverseSpectrogram", s64, [&](const Tensor& s) { return inv.forward(s, 640); }, 1e-12);
  expect_grad(
      ref, "GriffinLim", ref["p64"],
      [&](const Tensor& p) { return AF::griffinlim(p, hann64(128), 128, 32, 128, 2.0, 3, 0.5, 640, false); }, 1e-9);
}

TEST(AudioSpectral, ModulesHoldTorchaudiosBuffersAndCheckTheirArguments) {
  AT::MFCC mfcc({.n_mfcc = 13, .melkwargs = {.n_fft = 256, .n_mels = 40}});
  std::vector<std::string> names;
  for (const auto& [name, t] : mfcc.named_buffers()) names.push_back(name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"dct_mat", "MelSpectrogram.spectrogram.window", "MelSpectrogram.mel_scale.fb"}));
  EXPECT_EQ(mfcc.dct_mat.sizes(), (Shape{40, 13}));
  EXPECT_EQ(mfcc.options.melkwargs.hop_length, 128);  // win_length / 2, filled in
  AT::LFCC lfcc;
  names.clear();
  for (const auto& [name, t] : lfcc.named_buffers()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"filter_mat", "dct_mat", "Spectrogram.window"}));
  EXPECT_EQ(lfcc.filter_mat.sizes(), (Shape{201, 128}));

  // A one-second clip at 16 kHz: 101 frames of hop 160.
  AT::MelSpectrogram melspec({.sample_rate = 16000, .n_fft = 400, .hop_length = 160, .n_mels = 64});
  EXPECT_EQ(melspec(randn({2, 16000})).sizes(), (Shape{2, 64, 101}));
  EXPECT_EQ(melspec(randn({16000})).sizes(), (Shape{64, 101}));

  using nabla::testing::throws_with;
  EXPECT_TRUE(
      throws_with<ValueError>([] { AT::MFCC({.n_mfcc = 50, .melkwargs = {.n_mels = 40}}); }, {"MFCC", "50", "40"}));
  EXPECT_TRUE(throws_with<ValueError>([] { AT::MFCC({.dct_type = 3}); }, {"DCT type", "3"}));
  EXPECT_TRUE(throws_with<ValueError>([] { AT::MFCC({.sample_rate = 8000, .melkwargs = {.sample_rate = 22050}}); },
                                      {"melkwargs.sample_rate", "22050", "8000"}));
  EXPECT_TRUE(throws_with<ValueError>([] { AT::GriffinLim({.momentum = 1.0}); }, {"GriffinLim", "momentum"}));
  EXPECT_TRUE(throws_with<ValueError>([] { AT::Spectrogram({.n_fft = 100, .win_length = 200}); },
                                      {"Spectrogram", "win_length 200", "n_fft 100"}));
  EXPECT_TRUE(
      throws_with<ShapeError>([] { AT::Spectrogram({.n_fft = 64, .window_fn = [](int64_t) { return ones({3}); }}); },
                              {"window_fn(64)", "[3]"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [] {
        AT::TimeStretch()(zeros({201, 10}, TensorOptions().dtype(kComplex64)));
      },
      {"TimeStretch", "rate"}));
  EXPECT_TRUE(throws_with<DTypeError>(
      [] {
        AT::InverseSpectrogram()(zeros({201, 10}));
      },
      {"inverse_spectrogram", "complex", "float32"}));
  EXPECT_TRUE(throws_with<ShapeError>([] { AT::GriffinLim()(zeros({100, 10})); }, {"griffinlim", "201", "[100, 10]"}));
  EXPECT_TRUE(throws_with<ValueError>([] { AF::SpecNorm("energy"); }, {"normalized", "energy"}));
  EXPECT_TRUE(throws_with<DTypeError>([] { AT::Spectrogram()(zeros({1000}, TensorOptions().dtype(kInt64))); },
                                      {"spectrogram", "int64"}));

  // GriffinLim with random phases (nabla's generator): reproducible under a seed, and it recovers
  // a waveform whose spectrogram is close to the target.
  manual_seed(3);
  Tensor x = sin(arange(0.0, 4000.0) * 0.05) * 0.5;
  AT::Spectrogram power({.n_fft = 256, .hop_length = 64});
  Tensor target = power(x);
  AT::GriffinLim gl({.n_fft = 256, .n_iter = 32, .hop_length = 64, .length = 4000});
  manual_seed(7);
  Tensor y1 = gl(target);
  manual_seed(7);
  Tensor y2 = gl(target);
  EXPECT_TRUE(equal(y1, y2));
  auto distance = [&](const Tensor& y) {
    return ((power(y) - target).abs().sum() / target.abs().sum()).item<double>();
  };
  AT::GriffinLim start({.n_fft = 256, .n_iter = 0, .hop_length = 64, .length = 4000});  // random phases only
  const double before = distance(start(target)), after = distance(y1);
  std::printf("  GriffinLim spectral distance: %.3f with random phases, %.3f after 32 iterations\n", before, after);
  EXPECT_LT(after, 0.3 * before);
}
