// The FFT-based parts of torchaudio.functional (see functional.h): spectrogram,
// inverse_spectrogram, griffinlim and phase_vocoder, step for step as torchaudio 0.13 computes
// them, on nabla::stft / istft and complex tensor ops (so autograd flows through each).
#include <cmath>
#include <numbers>

#include "audio/functional.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/spectral.h"

namespace nabla::audio::functional {

using internal::str;

SpecNorm::SpecNorm(const char* mode) {
  const std::string m = mode ? mode : "";
  NABLA_CHECK(ValueError, m.empty() || m == "window" || m == "frame_length",
              "spectrogram: normalized must be false, true, \"window\" or \"frame_length\", got \"", m, "\"");
  window = m == "window";
  frame_length = m == "frame_length";
}

std::string SpecNorm::str() const { return window ? "window" : frame_length ? "frame_length" : "False"; }

namespace {

// The checks the spectrogram functions share: sizes that stft would also refuse, but named here
// with the caller's arguments.
void check_frames(const char* who, const Tensor& window, int64_t n_fft, int64_t hop_length, int64_t win_length) {
  NABLA_CHECK(ValueError, n_fft >= 1 && hop_length >= 1 && win_length >= 1 && win_length <= n_fft, who, ": n_fft ",
              n_fft, ", hop_length ", hop_length, " and win_length ", win_length,
              " must be positive with win_length <= n_fft");
  NABLA_CHECK(ShapeError, window.defined() && window.dim() == 1 && window.size(0) == win_length, who,
              ": the window must be (win_length) = (", win_length, "), got ",
              window.defined() ? str(window.sizes()) : std::string("an undefined tensor"));
}

// The first `keep` dims of `shape` followed by the last `tail` dims of `from`.
Shape joined(const Shape& shape, size_t keep, const Shape& from, size_t tail) {
  Shape out(shape.begin(), shape.begin() + keep);
  for (size_t i = from.size() - tail; i < from.size(); ++i) out.push_back(from[i]);
  return out;
}

}  // namespace

Tensor spectrogram(const Tensor& waveform, int64_t pad, const Tensor& window, int64_t n_fft, int64_t hop_length,
                   int64_t win_length, std::optional<double> power, SpecNorm normalized, bool center,
                   const std::string& pad_mode, bool onesided) {
  NABLA_CHECK(ValueError, waveform.defined(), "spectrogram: the waveform is undefined");
  NABLA_CHECK(DTypeError, is_floating(waveform.dtype()), "spectrogram: the waveform must be floating, got ",
              waveform.dtype(), " ", waveform.sizes());
  NABLA_CHECK(ShapeError, waveform.dim() >= 1, "spectrogram: the waveform must be (..., time), got a scalar");
  NABLA_CHECK(ValueError, pad >= 0, "spectrogram: pad must be >= 0, got ", pad);
  NABLA_CHECK(ValueError, !power || *power > 0,
              "spectrogram: power must be positive (or none for the complex "
              "spectrum), got ",
              power.value_or(0));
  check_frames("spectrogram", window, n_fft, hop_length, win_length);
  Tensor x = pad > 0 ? nabla::pad(waveform, {pad, pad}) : waveform;
  const Shape shape = x.sizes();
  x = x.reshape({-1, shape.back()});
  Tensor spec = stft(x, n_fft,
                     {.hop_length = hop_length,
                      .win_length = win_length,
                      .window = window,
                      .center = center,
                      .pad_mode = pad_mode,
                      .normalized = normalized.frame_length,
                      .onesided = onesided,
                      .return_complex = true});
  spec = spec.reshape(joined(shape, shape.size() - 1, spec.sizes(), 2));
  if (normalized.window) spec = spec / window.pow(2.0).sum().sqrt();
  if (!power) return spec;
  if (*power == 1.0) return spec.abs();
  return spec.abs().pow(*power);
}

Tensor inverse_spectrogram(const Tensor& spectrogram, std::optional<int64_t> length, int64_t pad, const Tensor& window,
                           int64_t n_fft, int64_t hop_length, int64_t win_length, SpecNorm normalized, bool center,
                           const std::string& /*pad_mode*/, bool onesided) {
  NABLA_CHECK(ValueError, spectrogram.defined(), "inverse_spectrogram: the spectrogram is undefined");
  NABLA_CHECK(DTypeError, spectrogram.is_complex(),
              "inverse_spectrogram: expected a complex spectrogram (..., freq, time), got ", spectrogram.dtype(), " ",
              spectrogram.sizes());
  NABLA_CHECK(ShapeError, spectrogram.dim() >= 2, "inverse_spectrogram: expected (..., freq, time), got ",
              spectrogram.sizes());
  NABLA_CHECK(ValueError, pad >= 0, "inverse_spectrogram: pad must be >= 0, got ", pad);
  NABLA_CHECK(ValueError, !length || *length >= 0, "inverse_spectrogram: length must be >= 0, got ",
              length.value_or(0));
  check_frames("inverse_spectrogram", window, n_fft, hop_length, win_length);
  Tensor spec = normalized.window ? spectrogram * window.pow(2.0).sum().sqrt() : spectrogram;
  const Shape shape = spec.sizes();
  spec = spec.reshape({-1, shape[shape.size() - 2], shape.back()});
  std::optional<int64_t> padded_length;
  if (length) padded_length = *length + 2 * pad;
  Tensor waveform = istft(spec, n_fft,
                          {.hop_length = hop_length,
                           .win_length = win_length,
                           .window = window,
                           .center = center,
                           .normalized = normalized.frame_length,
                           .onesided = onesided,
                           .length = padded_length,
                           .return_complex = false});
  if (length && pad > 0) waveform = waveform.narrow(1, pad, waveform.size(1) - 2 * pad);
  return waveform.reshape(joined(shape, shape.size() - 2, waveform.sizes(), 1));
}

Tensor griffinlim(const Tensor& specgram, const Tensor& window, int64_t n_fft, int64_t hop_length, int64_t win_length,
                  double power, int64_t n_iter, double momentum, std::optional<int64_t> length, bool rand_init) {
  NABLA_CHECK(ValueError, specgram.defined(), "griffinlim: the spectrogram is undefined");
  NABLA_CHECK(DTypeError, is_floating(specgram.dtype()),
              "griffinlim: expected a real (magnitude or power) spectrogram, got ", specgram.dtype(), " ",
              specgram.sizes());
  NABLA_CHECK(ShapeError, specgram.dim() >= 2 && specgram.size(-2) == n_fft / 2 + 1,
              "griffinlim: expected (..., n_fft / 2 + 1, time) = (..., ", n_fft / 2 + 1, ", time), got ",
              specgram.sizes());
  NABLA_CHECK(ValueError, momentum >= 0 && momentum < 1, "griffinlim: momentum must be in [0, 1), got ", momentum);
  NABLA_CHECK(ValueError, power > 0, "griffinlim: power must be positive, got ", power);
  NABLA_CHECK(ValueError, n_iter >= 0, "griffinlim: n_iter must be >= 0, got ", n_iter);
  check_frames("griffinlim", window, n_fft, hop_length, win_length);
  const double m = momentum / (1 + momentum);
  const Shape shape = specgram.sizes();
  Tensor spec = specgram.reshape({-1, shape[shape.size() - 2], shape.back()}).pow(1.0 / power);
  const TensorOptions real_opts = TensorOptions().dtype(spec.dtype()).device(spec.device());
  // torch.rand of a complex dtype: uniform real and imaginary parts, side by side in memory.
  Shape pairs = spec.sizes();
  pairs.push_back(2);
  Tensor angles = rand_init ? view_as_complex(rand(pairs, real_opts))
                            : ones(spec.sizes(), TensorOptions(real_opts).dtype(to_complex_dtype(spec.dtype())));
  const IstftOptions inverse{
      .hop_length = hop_length, .win_length = win_length, .window = window, .center = true, .length = length};
  const StftOptions forward{.hop_length = hop_length,
                            .win_length = win_length,
                            .window = window,
                            .center = true,
                            .pad_mode = "reflect",
                            .normalized = false,
                            .onesided = true,
                            .return_complex = true};
  Tensor tprev;
  for (int64_t i = 0; i < n_iter; ++i) {
    Tensor rebuilt = stft(istft(spec * angles, n_fft, inverse), n_fft, forward);
    angles = m != 0 && tprev.defined() ? rebuilt - tprev * m : rebuilt;
    angles = angles / (angles.abs() + 1e-16);
    tprev = rebuilt;
  }
  Tensor waveform = istft(spec * angles, n_fft, inverse);
  return waveform.reshape(joined(shape, shape.size() - 2, waveform.sizes(), 1));
}

Tensor phase_vocoder(const Tensor& complex_specgrams, double rate, const Tensor& phase_advance) {
  NABLA_CHECK(ValueError, complex_specgrams.defined() && phase_advance.defined(),
              "phase_vocoder: an input tensor is undefined");
  NABLA_CHECK(DTypeError, complex_specgrams.is_complex(),
              "phase_vocoder: expected complex spectrograms (..., freq, time), got ", complex_specgrams.dtype(), " ",
              complex_specgrams.sizes());
  NABLA_CHECK(ShapeError, complex_specgrams.dim() >= 2, "phase_vocoder: expected (..., freq, time), got ",
              complex_specgrams.sizes());
  NABLA_CHECK(ValueError, rate > 0 && std::isfinite(rate), "phase_vocoder: rate must be positive, got ", rate);
  if (rate == 1.0) return complex_specgrams;
  const Shape shape = complex_specgrams.sizes();
  const int64_t freq = shape[shape.size() - 2], time = shape.back();
  NABLA_CHECK(ShapeError, phase_advance.numel() == freq && phase_advance.size(0) == freq,
              "phase_vocoder: phase_advance must be (freq, 1) = (", freq, ", 1), got ", phase_advance.sizes());
  const Tensor z = complex_specgrams.reshape({-1, freq, time});
  const DType real_dtype = to_real_dtype(z.dtype());
  const TensorOptions real_opts = TensorOptions().dtype(real_dtype).device(z.device());
  Tensor time_steps = arange(0.0, static_cast<double>(time), rate, real_opts);
  Tensor alphas = fmod(time_steps, 1.0);
  Tensor phase_0 = angle(z.narrow(-1, 0, 1));
  // Two zero frames appended, then the frames at floor(t) and floor(t) + 1, gathered on the real
  // view (B, freq, time + 2, 2).
  Tensor padded = pad(view_as_real(z), {0, 0, 0, 2});
  Tensor idx = time_steps.to(kInt64);
  Tensor z0 = view_as_complex(index_select(padded, 2, idx));
  Tensor z1 = view_as_complex(index_select(padded, 2, idx + 1));
  Tensor pa = phase_advance.reshape({freq, 1}).to(real_dtype);
  constexpr double two_pi = 2 * std::numbers::pi;
  Tensor phase = angle(z1) - angle(z0) - pa;
  phase = phase - two_pi * round(phase / two_pi);
  phase = phase + pa;
  phase = cat({phase_0, phase.narrow(-1, 0, phase.size(-1) - 1)}, -1);
  Tensor phase_acc = cumsum(phase, -1);
  Tensor mag = alphas * z1.abs() + (1 - alphas) * z0.abs();
  Tensor out = polar(mag, phase_acc);
  return out.reshape(joined(shape, shape.size() - 2, out.sizes(), 2));
}

}  // namespace nabla::audio::functional
