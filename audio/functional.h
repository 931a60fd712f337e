// torchaudio.functional: the functions behind audio/transforms.h, as torchaudio 0.13 computes
// them (the same float steps in the input's dtype where torchaudio has them), written with
// differentiable Tensor ops, so gradients flow where torchaudio's do.
//
//   Tensor y = audio::functional::resample(x, 44100, 16000);               // (..., time) -> (..., time')
//   Tensor fb = audio::functional::melscale_fbanks(201, 0, 8000, 64, 16000);  // (201, 64)
//   Tensor db = audio::functional::amplitude_to_DB(power, 10, 1e-10, 0, 80);
//
//   Tensor power = audio::functional::spectrogram(x, 0, hann_window(400), 400, 200, 400, 2.0, false);
//
// Spectrograms are (..., freq, time), as torchaudio's; the FFT-based functions (spectrogram,
// inverse_spectrogram, griffinlim, phase_vocoder) are made of nabla::stft / istft and complex ops.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "../core/tensor.h"

namespace nabla::audio::functional {

// torchaudio's `normalized` argument of the spectrograms, which is a bool or a string: false (or "")
// none; true or "window": divide by the window's L2 norm sqrt(sum(window^2)); "frame_length": by
// sqrt(n_fft) (stft's normalized). Any other string is a ValueError.
class SpecNorm {
 public:
  SpecNorm(bool normalized = false) : window(normalized) {}      // NOLINT: converts as Python's bool does
  SpecNorm(const char* mode);                                    // NOLINT: converts as Python's str does
  SpecNorm(const std::string& mode) : SpecNorm(mode.c_str()) {}  // NOLINT
  bool window = false, frame_length = false;
  std::string str() const;  // "False", "window" or "frame_length"
};

// torchaudio.functional.spectrogram: waveform (..., time), floating, zero-padded by `pad` on both
// sides, -> stft with the window (win_length, zero-padded to n_fft) every hop_length samples ->
// (..., n_fft / 2 + 1, frames) when onesided. power nullopt: the complex STFT; 1: its magnitude;
// p: the magnitude to the p (2: power). Differentiable in waveform.
Tensor spectrogram(const Tensor& waveform, int64_t pad, const Tensor& window, int64_t n_fft, int64_t hop_length,
                   int64_t win_length, std::optional<double> power, SpecNorm normalized, bool center = true,
                   const std::string& pad_mode = "reflect", bool onesided = true);
// torchaudio.functional.inverse_spectrogram: a complex spectrogram (..., freq, time) back to
// (..., time) by istft (length: the waveform's, before `pad` is removed from both ends). pad_mode
// is accepted for symmetry and unused, as torchaudio's. Differentiable.
Tensor inverse_spectrogram(const Tensor& spectrogram, std::optional<int64_t> length, int64_t pad, const Tensor& window,
                           int64_t n_fft, int64_t hop_length, int64_t win_length, SpecNorm normalized,
                           bool center = true, const std::string& pad_mode = "reflect", bool onesided = true);
// torchaudio.functional.griffinlim: a waveform (..., time) whose spectrogram's magnitude^power is
// specgram (..., n_fft / 2 + 1, frames), by n_iter rounds of the fast Griffin-Lim algorithm
// (Perraudin et al. 2013; momentum in [0, 1)). rand_init: the phases start from uniform random
// complex numbers drawn from nabla's default generator (so they differ from torchaudio's draws),
// else from 1. Differentiable in specgram, as torchaudio's.
Tensor griffinlim(const Tensor& specgram, const Tensor& window, int64_t n_fft, int64_t hop_length, int64_t win_length,
                  double power, int64_t n_iter, double momentum, std::optional<int64_t> length, bool rand_init);
// torchaudio.functional.phase_vocoder: speeds complex spectrograms (..., freq, time) up by `rate`
// (slows down for rate < 1) without changing the pitch: frames at 0, rate, 2 rate, ... with
// magnitudes interpolated linearly and phases advanced by phase_advance (freq, 1) (linspace(0,
// pi * hop_length, freq)) plus the measured deviation. Differentiable in complex_specgrams.
Tensor phase_vocoder(const Tensor& complex_specgrams, double rate, const Tensor& phase_advance);

// torchaudio.functional.resample: band-limited interpolation by a windowed sinc kernel, applied as
// a strided conv1d after dividing both rates by their gcd. waveform (..., time), floating; the
// kernel is computed in its dtype. resampling_method: "sinc_interp_hann" (torchaudio 0.13 spelling:
// "sinc_interpolation") or "sinc_interp_kaiser" ("kaiser_window", with beta, default 14.769656459379492).
// Rates must be positive whole numbers. Differentiable in waveform. Differs from torchaudio: the
// Kaiser window is divided by I0(beta) exactly; torchaudio computes it on a float32 tensor (about
// 2e-7 relative off) even for float64 waveforms.
Tensor resample(const Tensor& waveform, int64_t orig_freq, int64_t new_freq, int64_t lowpass_filter_width = 6,
                double rolloff = 0.99, const std::string& resampling_method = "sinc_interp_hann",
                std::optional<double> beta = std::nullopt);

// The kernel resample convolves with: (new_freq / g, 1, 2 * width + orig_freq / g) computed in
// `dtype`, or without one as torchaudio's dtype=None (float64 taps, stored as float32); and width.
// Exposed for transforms::Resample, which caches it.
struct ResampleKernel {
  Tensor kernel;
  int64_t width = 0;
  int64_t orig = 0, next = 0;  // the rates divided by their gcd
};
ResampleKernel sinc_resample_kernel(int64_t orig_freq, int64_t new_freq, int64_t lowpass_filter_width, double rolloff,
                                    const std::string& resampling_method, std::optional<double> beta,
                                    std::optional<DType> dtype);
// Applies a kernel made by sinc_resample_kernel to waveform (..., time).
Tensor apply_resample_kernel(const Tensor& waveform, const ResampleKernel& k);

// Triangular mel filters (n_freqs, n_mels), float32: filter m rises from mel point m to m + 1 and
// falls to m + 2, n_mels + 2 points evenly spaced in mel between f_min and f_max; the frequency
// bins are linspace(0, sample_rate / 2 (integer division), n_freqs). norm: "" or "slaney" (area
// normalisation); mel_scale: "htk" or "slaney".
Tensor melscale_fbanks(int64_t n_freqs, double f_min, double f_max, int64_t n_mels, int64_t sample_rate,
                       const std::string& norm = "", const std::string& mel_scale = "htk");
// Triangular filters (n_freqs, n_filter), float32, with centres evenly spaced in Hz (not mel)
// between f_min and f_max: LFCC's filter bank.
Tensor linear_fbanks(int64_t n_freqs, double f_min, double f_max, int64_t n_filter, int64_t sample_rate);
// The DCT-II matrix (n_mels, n_mfcc), float32; norm "" (scaled by 2) or "ortho".
Tensor create_dct(int64_t n_mfcc, int64_t n_mels, const std::string& norm = "ortho");
// Delta coefficients along the last dim: sum_k k (x[t + k] - x[t - k]) / (2 sum_k k^2), k = 1..n,
// n = (win_length - 1) / 2, the edges padded by mode ("replicate", "reflect", "circular",
// "constant"). specgram (..., time), win_length >= 3.
Tensor compute_deltas(const Tensor& specgram, int64_t win_length = 5, const std::string& mode = "replicate");
// multiplier * log10(max(x, amin)) - multiplier * db_multiplier; with top_db, floored at (the
// maximum over the last three dims (two for 2-D inputs) of each item) - top_db.
Tensor amplitude_to_DB(const Tensor& x, double multiplier, double amin, double db_multiplier,
                       std::optional<double> top_db = std::nullopt);
// ref * (10^(0.1 x))^power: the inverse of amplitude_to_DB (power 1 for power, 0.5 for amplitude).
Tensor DB_to_amplitude(const Tensor& x, double ref, double power);
// One band of `axis` (1: frequency, 2: time, of the input seen as (batch, freq, time)) set to
// mask_value, the same for every item: width v ~ U[0, mask_param) and start ~ U[0, size - v),
// drawn from nabla's default generator (with p < 1, mask_param is at most p * size).
Tensor mask_along_axis(const Tensor& specgram, int64_t mask_param, double mask_value, int64_t axis, double p = 1.0);
// As mask_along_axis but one band per (batch, channel) item of specgrams (batch, channel, freq,
// time); axis 2: frequency, 3: time.
Tensor mask_along_axis_iid(const Tensor& specgrams, int64_t mask_param, double mask_value, int64_t axis,
                           double p = 1.0);
// waveform * 10^(gain_db / 20).
Tensor gain(const Tensor& waveform, double gain_db = 1.0);

// Hz <-> mel, as torchaudio's _hz_to_mel / _mel_to_hz ("htk" or "slaney").
double hz_to_mel(double freq, const std::string& mel_scale = "htk");
Tensor mel_to_hz(const Tensor& mels, const std::string& mel_scale = "htk");

}  // namespace nabla::audio::functional
