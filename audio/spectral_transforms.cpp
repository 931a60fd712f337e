// The STFT-based torchaudio.transforms (see transforms.h): Spectrogram, InverseSpectrogram,
// GriffinLim, MelSpectrogram, MFCC, LFCC and TimeStretch, each the functional form with what
// torchaudio precomputes (windows, filters, DCT matrices) held as buffers of its names.
#include <algorithm>
#include <numbers>

#include "audio/transforms.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/spectral.h"

namespace nabla::audio::transforms {

using internal::str;

namespace F = functional;

namespace {

// window_fn(win_length), hann by default, checked to be the (win_length) window the STFT needs.
Tensor make_window(const WindowFn& fn, int64_t win_length, const char* who) {
  NABLA_CHECK(ValueError, win_length >= 1, who, ": win_length must be positive, got ", win_length);
  Tensor w = fn ? fn(win_length) : hann_window(win_length);
  NABLA_CHECK(ShapeError, w.defined() && w.dim() == 1 && w.size(0) == win_length, who, ": window_fn(", win_length,
              ") must return a (", win_length, ") window, got ",
              w.defined() ? str(w.sizes()) : std::string("an undefined tensor"));
  return w;
}

// torchaudio's defaults: win_length = n_fft, hop_length = win_length / 2.
template <class O>
void fill_lengths(O& o, const char* who) {
  NABLA_CHECK(ValueError, o.n_fft >= 1, who, ": n_fft must be positive, got ", o.n_fft);
  if (!o.win_length) o.win_length = o.n_fft;
  if (!o.hop_length) o.hop_length = std::max<int64_t>(*o.win_length / 2, 1);
  NABLA_CHECK(ValueError, *o.win_length <= o.n_fft && *o.hop_length >= 1, who, ": win_length ", *o.win_length,
              " must be at most n_fft ", o.n_fft, " and hop_length ", *o.hop_length, " positive");
}

template <class O>
std::string lengths_repr(const O& o) {
  return str("n_fft=", o.n_fft, ", win_length=", *o.win_length, ", hop_length=", *o.hop_length);
}

// x (..., freq, time) through a (freq, k) matrix -> (..., k, time).
Tensor apply_on_freq(const Tensor& x, const Tensor& m) { return matmul(x.transpose(-1, -2), m).transpose(-1, -2); }

Tensor log_offset(const Tensor& x) { return (x + 1e-6).log(); }

void check_dct(int64_t dct_type, const std::string& norm, const char* who) {
  NABLA_CHECK(ValueError, dct_type == 2, who, ": DCT type not supported: ", dct_type, " (only type 2 is)");
  NABLA_CHECK(ValueError, norm.empty() || norm == "ortho", who, ": norm must be \"ortho\" or \"\" (none), got \"", norm,
              "\"");
}

}  // namespace

// ---- Spectrogram, InverseSpectrogram, GriffinLim ----------------------------------------------------
Spectrogram::Spectrogram(SpectrogramOptions o) : nn::Module("Spectrogram"), options(std::move(o)) {
  fill_lengths(options, "Spectrogram");
  NABLA_CHECK(ValueError, options.pad >= 0, "Spectrogram: pad must be >= 0, got ", options.pad);
  window = register_buffer("window", make_window(options.window_fn, *options.win_length, "Spectrogram"));
}

Tensor Spectrogram::forward(Tensor waveform) {
  return F::spectrogram(waveform, options.pad, window, options.n_fft, *options.hop_length, *options.win_length,
                        options.power, options.normalized, options.center, options.pad_mode, options.onesided);
}

std::string Spectrogram::extra_repr() const {
  return str(lengths_repr(options), ", power=", options.power ? str(*options.power) : std::string("None"),
             ", normalized=", options.normalized.str());
}

InverseSpectrogram::InverseSpectrogram(InverseSpectrogramOptions o)
    : nn::Module("InverseSpectrogram"), options(std::move(o)) {
  fill_lengths(options, "InverseSpectrogram");
  NABLA_CHECK(ValueError, options.pad >= 0, "InverseSpectrogram: pad must be >= 0, got ", options.pad);
  window = register_buffer("window", make_window(options.window_fn, *options.win_length, "InverseSpectrogram"));
}

Tensor InverseSpectrogram::forward(Tensor spectrogram, std::optional<int64_t> length) {
  return F::inverse_spectrogram(spectrogram, length, options.pad, window, options.n_fft, *options.hop_length,
                                *options.win_length, options.normalized, options.center, options.pad_mode,
                                options.onesided);
}

std::string InverseSpectrogram::extra_repr() const {
  return str(lengths_repr(options), ", normalized=", options.normalized.str());
}

GriffinLim::GriffinLim(GriffinLimOptions o) : nn::Module("GriffinLim"), options(std::move(o)) {
  NABLA_CHECK(ValueError, options.momentum >= 0 && options.momentum < 1,
              "GriffinLim: momentum must be in the range [0, 1), got ", options.momentum);
  NABLA_CHECK(ValueError, options.n_iter >= 0, "GriffinLim: n_iter must be >= 0, got ", options.n_iter);
  fill_lengths(options, "GriffinLim");
  window = register_buffer("window", make_window(options.window_fn, *options.win_length, "GriffinLim"));
}

Tensor GriffinLim::forward(Tensor specgram) {
  return F::griffinlim(specgram, window, options.n_fft, *options.hop_length, *options.win_length, options.power,
                       options.n_iter, options.momentum, options.length, options.rand_init);
}

std::string GriffinLim::extra_repr() const {
  return str(lengths_repr(options), ", n_iter=", options.n_iter, ", power=", options.power,
             ", momentum=", options.momentum);
}

// ---- MelSpectrogram, MFCC, LFCC -------------------------------------------------------------------
MelSpectrogram::MelSpectrogram(MelSpectrogramOptions o) : nn::Module("MelSpectrogram"), options(std::move(o)) {
  fill_lengths(options, "MelSpectrogram");
  spectrogram = register_module("spectrogram", std::make_shared<Spectrogram>(SpectrogramOptions{
                                                   .n_fft = options.n_fft,
                                                   .win_length = options.win_length,
                                                   .hop_length = options.hop_length,
                                                   .pad = options.pad,
                                                   .window_fn = options.window_fn,
                                                   .power = options.power,
                                                   .normalized = options.normalized,
                                                   .center = options.center,
                                                   .pad_mode = options.pad_mode,
                                                   .onesided = options.onesided,
                                               }));
  mel_scale = register_module("mel_scale", std::make_shared<MelScale>(MelScaleOptions{
                                               .n_mels = options.n_mels,
                                               .sample_rate = options.sample_rate,
                                               .f_min = options.f_min,
                                               .f_max = options.f_max,
                                               .n_stft = options.n_fft / 2 + 1,
                                               .norm = options.norm,
                                               .mel_scale = options.mel_scale,
                                           }));
}

Tensor MelSpectrogram::forward(Tensor waveform) { return mel_scale->forward(spectrogram->forward(waveform)); }

std::string MelSpectrogram::extra_repr() const {
  return str("sample_rate=", options.sample_rate, ", ", lengths_repr(options), ", n_mels=", options.n_mels);
}

MFCC::MFCC(MFCCOptions o) : nn::Module("MFCC"), options(std::move(o)) {
  check_dct(options.dct_type, options.norm, "MFCC");
  const int64_t default_rate = MelSpectrogramOptions{}.sample_rate;
  NABLA_CHECK(ValueError,
              options.melkwargs.sample_rate == default_rate || options.melkwargs.sample_rate == options.sample_rate,
              "MFCC: melkwargs.sample_rate ", options.melkwargs.sample_rate, " differs from sample_rate ",
              options.sample_rate, " (set sample_rate only: it is passed to the mel spectrogram)");
  options.melkwargs.sample_rate = options.sample_rate;
  amplitude_to_DB = register_module("amplitude_to_DB", std::make_shared<AmplitudeToDB>("power", 80.0));
  mel_spectrogram = register_module("MelSpectrogram", std::make_shared<MelSpectrogram>(options.melkwargs));
  options.melkwargs = mel_spectrogram->options;
  NABLA_CHECK(ValueError, options.n_mfcc <= options.melkwargs.n_mels, "MFCC: cannot select more MFCC coefficients (",
              options.n_mfcc, ") than mel bins (", options.melkwargs.n_mels, ")");
  dct_mat = register_buffer("dct_mat", F::create_dct(options.n_mfcc, options.melkwargs.n_mels, options.norm));
}

Tensor MFCC::forward(Tensor waveform) {
  Tensor mel = mel_spectrogram->forward(waveform);
  mel = options.log_mels ? log_offset(mel) : amplitude_to_DB->forward(mel);
  return apply_on_freq(mel, dct_mat);
}

std::string MFCC::extra_repr() const {
  return str("sample_rate=", options.sample_rate, ", n_mfcc=", options.n_mfcc,
             ", log_mels=", options.log_mels ? "true" : "false");
}

LFCC::LFCC(LFCCOptions o) : nn::Module("LFCC"), options(std::move(o)) {
  check_dct(options.dct_type, options.norm, "LFCC");
  const double f_max = options.f_max.value_or(static_cast<double>(options.sample_rate / 2));
  NABLA_CHECK(ValueError, options.f_min <= f_max, "LFCC: f_min ", options.f_min, " must not exceed f_max ", f_max);
  amplitude_to_DB = register_module("amplitude_to_DB", std::make_shared<AmplitudeToDB>("power", 80.0));
  spectrogram = register_module("Spectrogram", std::make_shared<Spectrogram>(options.speckwargs));
  options.speckwargs = spectrogram->options;
  const int64_t n_fft = options.speckwargs.n_fft;
  NABLA_CHECK(ValueError, options.n_lfcc <= n_fft, "LFCC: cannot select more LFCC coefficients (", options.n_lfcc,
              ") than fft bins (n_fft ", n_fft, ")");
  filter_mat = register_buffer(
      "filter_mat", F::linear_fbanks(n_fft / 2 + 1, options.f_min, f_max, options.n_filter, options.sample_rate));
  dct_mat = register_buffer("dct_mat", F::create_dct(options.n_lfcc, options.n_filter, options.norm));
}

Tensor LFCC::forward(Tensor waveform) {
  Tensor spec = apply_on_freq(spectrogram->forward(waveform), filter_mat);
  spec = options.log_lf ? log_offset(spec) : amplitude_to_DB->forward(spec);
  return apply_on_freq(spec, dct_mat);
}

std::string LFCC::extra_repr() const {
  return str("sample_rate=", options.sample_rate, ", n_filter=", options.n_filter, ", n_lfcc=", options.n_lfcc,
             ", log_lf=", options.log_lf ? "true" : "false");
}

// ---- TimeStretch -----------------------------------------------------------------------------------
TimeStretch::TimeStretch(std::optional<int64_t> hop_length, int64_t n_freq, std::optional<double> fixed_rate)
    : nn::Module("TimeStretch"), fixed_rate(fixed_rate) {
  NABLA_CHECK(ValueError, n_freq >= 1, "TimeStretch: n_freq must be positive, got ", n_freq);
  NABLA_CHECK(ValueError, !fixed_rate || *fixed_rate > 0, "TimeStretch: fixed_rate must be positive, got ",
              fixed_rate.value_or(0));
  const int64_t n_fft = (n_freq - 1) * 2;
  const int64_t hop = hop_length.value_or(n_fft / 2);
  phase_advance =
      register_buffer("phase_advance", linspace(0, std::numbers::pi * static_cast<double>(hop), n_freq).unsqueeze(1));
}

Tensor TimeStretch::forward(Tensor complex_specgrams, std::optional<double> overriding_rate) {
  NABLA_CHECK(ValueError, overriding_rate || fixed_rate,
              "TimeStretch: no fixed_rate was given, so forward needs a rate: forward(spec, rate)");
  return F::phase_vocoder(complex_specgrams, overriding_rate.value_or(fixed_rate.value_or(1.0)), phase_advance);
}

std::string TimeStretch::extra_repr() const {
  return str("n_freq=", phase_advance.size(0), fixed_rate ? str(", fixed_rate=", *fixed_rate) : std::string());
}

}  // namespace nabla::audio::transforms
