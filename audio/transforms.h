// torchaudio.transforms: Modules over audio/functional.h, with torchaudio 0.13's defaults.
//
//   audio::transforms::Resample resample(44100, 16000);                 // caches the sinc kernel
//   audio::transforms::MelScale mel({.n_mels = 64, .sample_rate = 16000, .n_stft = 201});
//   audio::transforms::AmplitudeToDB to_db("power", 80.0);
//   Tensor features = to_db(mel(power_spectrogram));                    // (..., 201, time) -> (..., 64, time)
//
// Spectrogram, MelSpectrogram, MFCC, LFCC, GriffinLim, InverseSpectrogram and TimeStretch need an
// STFT and come with nabla::stft.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "../nn/module.h"
#include "functional.h"

namespace nabla::audio::transforms {

// Resamples (..., time) from orig_freq to new_freq (functional::resample), with the kernel made
// once, in float64 and stored as float32 (torchaudio's dtype=None), or in `dtype`; registered as
// the buffer "kernel" (none when the rates are equal: forward returns its input).
class Resample : public nn::Module {
 public:
  explicit Resample(int64_t orig_freq = 16000, int64_t new_freq = 16000,
                    const std::string& resampling_method = "sinc_interp_hann", int64_t lowpass_filter_width = 6,
                    double rolloff = 0.99, std::optional<double> beta = std::nullopt,
                    std::optional<DType> dtype = std::nullopt);
  Tensor forward(Tensor waveform) override;
  std::string extra_repr() const override;
  int64_t orig_freq, new_freq;

 private:
  functional::ResampleKernel kernel_;
};

struct MelScaleOptions {
  int64_t n_mels = 128;
  int64_t sample_rate = 16000;
  double f_min = 0.0;
  std::optional<double> f_max;  // default sample_rate / 2 (integer division)
  int64_t n_stft = 201;         // frequency bins of the spectrogram: n_fft / 2 + 1
  std::string norm;             // "" or "slaney"
  std::string mel_scale = "htk";
};

// (..., n_stft, time) -> (..., n_mels, time): the spectrogram times the mel filters (buffer "fb",
// (n_stft, n_mels)). Differentiable in the spectrogram.
class MelScale : public nn::Module {
 public:
  explicit MelScale(MelScaleOptions options = {});
  Tensor forward(Tensor specgram) override;
  std::string extra_repr() const override;
  MelScaleOptions options;
  Tensor fb;  // (n_stft, n_mels)
};

struct InverseMelScaleOptions {
  int64_t n_stft = 201;
  int64_t n_mels = 128;
  int64_t sample_rate = 16000;
  double f_min = 0.0;
  std::optional<double> f_max;
  int64_t max_iter = 100000;
  double tolerance_loss = 1e-5;
  double tolerance_change = 1e-8;
  double lr = 0.1, momentum = 0.9;  // torchaudio's sgdargs
  std::string norm;
  std::string mel_scale = "htk";
};

// (..., n_mels, time) -> (..., n_stft, time): the non-negative spectrogram whose mel projection is
// closest to the input, found as torchaudio 0.13 does: SGD with momentum on
// mean over (batch, time) of sum over mels of (melspec - specgram @ fb)^2, from a uniform random
// start (nabla's default generator), clamped at 0 after each step, stopping at tolerance_loss,
// at a change below tolerance_change or after max_iter steps. The gradient is written out
// (-2 diff fb^T / (batch * time)) rather than taped. Not differentiable (torchaudio's neither).
class InverseMelScale : public nn::Module {
 public:
  explicit InverseMelScale(InverseMelScaleOptions options = {});
  Tensor forward(Tensor melspec) override;
  std::string extra_repr() const override;
  InverseMelScaleOptions options;
  Tensor fb;  // (n_stft, n_mels)
};

// Power ("power", 10 log10) or amplitude ("magnitude", 20 log10) to decibels, amin 1e-10, ref 1,
// optionally clipped top_db below each item's maximum (functional::amplitude_to_DB).
class AmplitudeToDB : public nn::Module {
 public:
  explicit AmplitudeToDB(const std::string& stype = "power", std::optional<double> top_db = std::nullopt);
  Tensor forward(Tensor x) override;
  std::string extra_repr() const override;
  std::string stype;
  std::optional<double> top_db;
  double multiplier, amin = 1e-10, db_multiplier = 0.0;
};

// functional::compute_deltas along the last dim.
class ComputeDeltas : public nn::Module {
 public:
  explicit ComputeDeltas(int64_t win_length = 5, const std::string& mode = "replicate");
  Tensor forward(Tensor specgram) override;
  std::string extra_repr() const override;
  int64_t win_length;
  std::string mode;
};

// FrequencyMasking / TimeMasking: one band of (..., freq, time) set to mask_value (0 by default);
// with iid_masks and a 4-D (batch, channel, freq, time) input, one band per item. Applied in
// training and evaluation alike, as torchaudio's.
class AxisMasking : public nn::Module {
 public:
  using nn::Module::forward;
  Tensor forward(Tensor specgram) override { return forward(specgram, 0.0); }
  Tensor forward(Tensor specgram, double mask_value);
  std::string extra_repr() const override;
  int64_t mask_param, axis;
  bool iid_masks;
  double p;

 protected:
  AxisMasking(std::string name, int64_t mask_param, int64_t axis, bool iid_masks, double p);
};
class FrequencyMasking : public AxisMasking {
 public:
  explicit FrequencyMasking(int64_t freq_mask_param, bool iid_masks = false);
};
class TimeMasking : public AxisMasking {
 public:
  explicit TimeMasking(int64_t time_mask_param, bool iid_masks = false, double p = 1.0);
};

// Scales a waveform by an amplitude ratio, a power ratio or decibels, then clamps to [-1, 1].
class Vol : public nn::Module {
 public:
  explicit Vol(double gain, const std::string& gain_type = "amplitude");
  Tensor forward(Tensor waveform) override;
  std::string extra_repr() const override;
  double gain;
  std::string gain_type;
};

// Fades the first fade_in_len and the last fade_out_len samples of (..., time) in and out;
// fade_shape: "linear", "exponential", "logarithmic", "quarter_sine", "half_sine" (the curves are
// float32, as torchaudio's).
class Fade : public nn::Module {
 public:
  explicit Fade(int64_t fade_in_len = 0, int64_t fade_out_len = 0, const std::string& fade_shape = "linear");
  Tensor forward(Tensor waveform) override;
  std::string extra_repr() const override;
  int64_t fade_in_len, fade_out_len;
  std::string fade_shape;
};

}  // namespace nabla::audio::transforms
