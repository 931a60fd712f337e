// torchaudio.transforms: Modules over audio/functional.h, with torchaudio 0.13's defaults.
//
//   audio::transforms::Resample resample(44100, 16000);                 // caches the sinc kernel
//   audio::transforms::MelScale mel({.n_mels = 64, .sample_rate = 16000, .n_stft = 201});
//   audio::transforms::AmplitudeToDB to_db("power", 80.0);
//   Tensor features = to_db(mel(power_spectrogram));                    // (..., 201, time) -> (..., 64, time)
//
//   audio::transforms::MelSpectrogram melspec({.sample_rate = 16000, .n_fft = 400, .hop_length = 160,
//                                              .n_mels = 64});
//   Tensor m = melspec(waveform);                                       // (..., 16000) -> (..., 64, 101)
//   audio::transforms::MFCC mfcc({.n_mfcc = 13, .melkwargs = {.n_fft = 400, .n_mels = 40}});
//
// Python's keyword arguments are the fields of an options struct, in torchaudio's order and with its
// defaults, so C++20's designated initializers read as the Python call does (melkwargs and
// speckwargs are the nested options structs; window_fn with its wkwargs is a function of the length).
// Buffers and submodules carry torchaudio's names, so state dicts match.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "../nn/module.h"
#include "functional.h"

namespace nabla::audio::transforms {

// A window of a length, as torchaudio's window_fn(win_length, **wkwargs); unset: hann_window (periodic,
// float32). E.g. `.window_fn = [](int64_t n) { return kaiser_window(n, true, 8.0); }`.
using WindowFn = std::function<Tensor(int64_t)>;

struct SpectrogramOptions {
  int64_t n_fft = 400;
  std::optional<int64_t> win_length;  // default n_fft
  std::optional<int64_t> hop_length;  // default win_length / 2
  int64_t pad = 0;                    // zeros on both sides of the waveform first
  WindowFn window_fn;
  std::optional<double> power = 2.0;  // nullopt: the complex spectrum; 1: magnitude; 2: power
  functional::SpecNorm normalized = false;
  bool center = true;
  std::string pad_mode = "reflect";
  bool onesided = true;
};

// (..., time) -> (..., n_fft / 2 + 1, frames): functional::spectrogram with the window made once
// (buffer "window"). Differentiable in the waveform.
class Spectrogram : public nn::Module {
 public:
  explicit Spectrogram(SpectrogramOptions options = {});
  Tensor forward(Tensor waveform) override;
  std::string extra_repr() const override;
  SpectrogramOptions options;  // win_length and hop_length filled in
  Tensor window;
};

struct InverseSpectrogramOptions {
  int64_t n_fft = 400;
  std::optional<int64_t> win_length;  // default n_fft
  std::optional<int64_t> hop_length;  // default win_length / 2
  int64_t pad = 0;
  WindowFn window_fn;
  functional::SpecNorm normalized = false;
  bool center = true;
  std::string pad_mode = "reflect";
  bool onesided = true;
};

// A complex spectrogram (..., freq, time) -> the waveform (..., time) (functional::
// inverse_spectrogram); forward(spec, length) trims or pads the result to `length`.
class InverseSpectrogram : public nn::Module {
 public:
  explicit InverseSpectrogram(InverseSpectrogramOptions options = {});
  using nn::Module::forward;
  Tensor forward(Tensor spectrogram) override { return forward(spectrogram, std::nullopt); }
  Tensor forward(Tensor spectrogram, std::optional<int64_t> length);
  std::string extra_repr() const override;
  InverseSpectrogramOptions options;
  Tensor window;
};

struct GriffinLimOptions {
  int64_t n_fft = 400;
  int64_t n_iter = 32;
  std::optional<int64_t> win_length;  // default n_fft
  std::optional<int64_t> hop_length;  // default win_length / 2
  WindowFn window_fn;
  double power = 2.0;
  double momentum = 0.99;  // in [0, 1)
  std::optional<int64_t> length;
  bool rand_init = true;  // random phases from nabla's default generator (not torchaudio's draws)
};

// A magnitude^power spectrogram (..., n_fft / 2 + 1, time) -> a waveform (functional::griffinlim).
class GriffinLim : public nn::Module {
 public:
  explicit GriffinLim(GriffinLimOptions options = {});
  Tensor forward(Tensor specgram) override;
  std::string extra_repr() const override;
  GriffinLimOptions options;
  Tensor window;
};

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

struct MelSpectrogramOptions {
  int64_t sample_rate = 16000;
  int64_t n_fft = 400;
  std::optional<int64_t> win_length;  // default n_fft
  std::optional<int64_t> hop_length;  // default win_length / 2
  double f_min = 0.0;
  std::optional<double> f_max;  // default sample_rate / 2 (integer division)
  int64_t pad = 0;
  int64_t n_mels = 128;
  WindowFn window_fn;
  double power = 2.0;
  functional::SpecNorm normalized = false;
  bool center = true;
  std::string pad_mode = "reflect";
  bool onesided = true;
  std::string norm;  // of the mel filters: "" or "slaney"
  std::string mel_scale = "htk";
};

// (..., time) -> (..., n_mels, frames): Spectrogram then MelScale (submodules "spectrogram" and
// "mel_scale", as torchaudio's). Differentiable in the waveform.
class MelSpectrogram : public nn::Module {
 public:
  explicit MelSpectrogram(MelSpectrogramOptions options = {});
  Tensor forward(Tensor waveform) override;
  std::string extra_repr() const override;
  MelSpectrogramOptions options;  // win_length and hop_length filled in
  std::shared_ptr<Spectrogram> spectrogram;
  std::shared_ptr<MelScale> mel_scale;
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

struct MFCCOptions {
  int64_t sample_rate = 16000;  // replaces melkwargs.sample_rate, as torchaudio passes it
  int64_t n_mfcc = 40;
  int64_t dct_type = 2;        // the only type torchaudio has
  std::string norm = "ortho";  // of the DCT: "ortho" or ""
  bool log_mels = false;       // log(mel + 1e-6) instead of decibels
  MelSpectrogramOptions melkwargs;
};

// (..., time) -> (..., n_mfcc, frames): the mel spectrogram in decibels (AmplitudeToDB("power",
// 80)) or log(mel + 1e-6), times the DCT matrix (buffer "dct_mat"; submodules "amplitude_to_DB" and
// "MelSpectrogram"). Differentiable in the waveform.
class MFCC : public nn::Module {
 public:
  explicit MFCC(MFCCOptions options = {});
  Tensor forward(Tensor waveform) override;
  std::string extra_repr() const override;
  MFCCOptions options;
  std::shared_ptr<AmplitudeToDB> amplitude_to_DB;
  std::shared_ptr<MelSpectrogram> mel_spectrogram;  // registered as "MelSpectrogram"
  Tensor dct_mat;                                   // (n_mels, n_mfcc)
};

struct LFCCOptions {
  int64_t sample_rate = 16000;
  int64_t n_filter = 128;
  double f_min = 0.0;
  std::optional<double> f_max;  // default sample_rate / 2 (integer division)
  int64_t n_lfcc = 40;
  int64_t dct_type = 2;
  std::string norm = "ortho";
  bool log_lf = false;  // log(x + 1e-6) instead of decibels
  SpectrogramOptions speckwargs;
};

// (..., time) -> (..., n_lfcc, frames): the spectrogram through linear-frequency triangular filters
// (buffer "filter_mat", functional::linear_fbanks), in decibels or log, times the DCT matrix
// ("dct_mat"; submodules "amplitude_to_DB" and "Spectrogram"). Differentiable in the waveform.
class LFCC : public nn::Module {
 public:
  explicit LFCC(LFCCOptions options = {});
  Tensor forward(Tensor waveform) override;
  std::string extra_repr() const override;
  LFCCOptions options;
  std::shared_ptr<AmplitudeToDB> amplitude_to_DB;
  std::shared_ptr<Spectrogram> spectrogram;  // registered as "Spectrogram"
  Tensor filter_mat, dct_mat;                // (n_fft / 2 + 1, n_filter), (n_filter, n_lfcc)
};

// Speeds complex spectrograms (..., n_freq, time) up by a rate without changing the pitch
// (functional::phase_vocoder); buffer "phase_advance" = linspace(0, pi * hop_length, n_freq), hop
// default (n_freq - 1) * 2 / 2. forward(spec, rate) overrides fixed_rate; without either it throws.
class TimeStretch : public nn::Module {
 public:
  explicit TimeStretch(std::optional<int64_t> hop_length = std::nullopt, int64_t n_freq = 201,
                       std::optional<double> fixed_rate = std::nullopt);
  using nn::Module::forward;
  Tensor forward(Tensor complex_specgrams) override { return forward(complex_specgrams, std::nullopt); }
  Tensor forward(Tensor complex_specgrams, std::optional<double> overriding_rate);
  std::string extra_repr() const override;
  std::optional<double> fixed_rate;
  Tensor phase_advance;  // (n_freq, 1)
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
