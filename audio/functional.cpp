// torchaudio.functional as torchaudio 0.13 computes it (see functional.h): each function follows
// torchaudio's steps op by op, in the input's dtype, so the float results agree to rounding.
#include "audio/functional.h"

#include <cmath>
#include <numbers>
#include <numeric>

#include "core/error.h"
#include "core/ops.h"
#include "core/special.h"

namespace nabla::audio::functional {

using internal::str;

namespace {

constexpr double kPi = std::numbers::pi;

void check_mel_scale(const std::string& mel_scale, const char* who) {
  NABLA_CHECK(ValueError, mel_scale == "htk" || mel_scale == "slaney", who,
              ": mel_scale must be \"htk\" or \"slaney\", got \"", mel_scale, "\"");
}

// x (..., time) padded by n on both sides of the last dim (`shape`: the caller's, for messages).
Tensor pad_last(const Tensor& x, int64_t n, const std::string& mode, const char* who, IntArrayRef shape) {
  const int64_t t = x.size(-1);
  if (mode == "constant") return pad(x, {n, n});
  Shape edge = x.sizes();
  edge.back() = n;
  Tensor left, right;
  if (mode == "replicate") {
    NABLA_CHECK(ValueError, t > 0, who, ": replicate padding of an empty last dim ", shape);
    left = x.narrow(-1, 0, 1).expand(edge);
    right = x.narrow(-1, t - 1, 1).expand(edge);
  } else if (mode == "reflect") {
    NABLA_CHECK(ValueError, n < t, who, ": reflect padding of ", n, " needs more than ", n, " time steps, got ", shape);
    left = x.narrow(-1, 1, n).flip({-1});
    right = x.narrow(-1, t - 1 - n, n).flip({-1});
  } else if (mode == "circular") {
    NABLA_CHECK(ValueError, n <= t, who, ": circular padding of ", n, " needs at least ", n, " time steps, got ",
                shape);
    left = x.narrow(-1, t - n, n);
    right = x.narrow(-1, 0, n);
  } else {
    throw ValueError(
        str(who, ": mode must be \"replicate\", \"reflect\", \"circular\" or \"constant\", got \"", mode, "\""));
  }
  return cat({left, x, right}, -1);
}

int64_t mask_param_for(int64_t mask_param, double p, int64_t axis_length) {
  return p == 1.0 ? mask_param : std::min(mask_param, static_cast<int64_t>(static_cast<double>(axis_length) * p));
}

void check_p(double p, const char* who) {
  NABLA_CHECK(ValueError, p >= 0.0 && p <= 1.0, who, ": p must be in [0, 1], got ", p);
}

}  // namespace

ResampleKernel sinc_resample_kernel(int64_t orig_freq, int64_t new_freq, int64_t lowpass_filter_width, double rolloff,
                                    const std::string& resampling_method, std::optional<double> beta,
                                    std::optional<DType> dtype) {
  NABLA_CHECK(ValueError, orig_freq > 0 && new_freq > 0, "resample: frequencies must be positive, got orig_freq ",
              orig_freq, " and new_freq ", new_freq);
  NABLA_CHECK(ValueError, lowpass_filter_width > 0, "resample: lowpass_filter_width must be positive, got ",
              lowpass_filter_width);
  const bool hann = resampling_method == "sinc_interp_hann" || resampling_method == "sinc_interpolation";
  const bool kaiser = resampling_method == "sinc_interp_kaiser" || resampling_method == "kaiser_window";
  NABLA_CHECK(ValueError, hann || kaiser,
              "resample: resampling_method must be \"sinc_interp_hann\" or \"sinc_interp_kaiser\" (0.13: "
              "\"sinc_interpolation\", \"kaiser_window\"), got \"",
              resampling_method, "\"");
  NABLA_CHECK(DTypeError, !dtype || *dtype == kFloat32 || *dtype == kFloat64,
              "resample: the waveform must be float32 or float64, got ", dtype.value_or(kFloat32));
  const int64_t g = std::gcd(orig_freq, new_freq);
  const int64_t orig = orig_freq / g, next = new_freq / g;
  const double base_freq = static_cast<double>(std::min(orig, next)) * rolloff;
  const double w = static_cast<double>(lowpass_filter_width);
  const auto width = static_cast<int64_t>(std::ceil(w * static_cast<double>(orig) / base_freq));
  // t: (next, 1, 2 * width + orig), each output phase's taps in units of the lower rate's period.
  // Without a dtype (torchaudio's dtype=None) the taps are float64 and the phases float32 (an
  // int64 arange divided), the kernel rounded to float32 at the end.
  const DType dt = dtype.value_or(kFloat64);
  Tensor idx = arange(-width, width + orig, 1, TensorOptions().dtype(dt)).view({1, 1, -1}) / static_cast<double>(orig);
  Tensor phase = arange(0, -next, -1, TensorOptions().dtype(dtype.value_or(kFloat32))).view({next, 1, 1});
  Tensor t = phase / static_cast<double>(next) + idx;
  t = (t * base_freq).clamp(-w, w);
  Tensor window;
  if (hann) {
    window = (t * kPi / w / 2.0).cos().pow(2);
  } else {
    const double b = beta.value_or(14.769656459379492);
    const Tensor r = (1.0 - (t / w).pow(2)).sqrt().to(kFloat64).contiguous();
    Tensor win = empty(r.sizes(), TensorOptions().dtype(kFloat64));
    const double* rp = r.data_ptr<double>();
    double* wp = win.data_ptr<double>();
    const double i0b = bessel_i0(b);
    for (int64_t i = 0; i < r.numel(); ++i) wp[i] = bessel_i0(b * rp[i]) / i0b;
    window = win.to(dt);
  }
  t = t * kPi;
  const double scale = base_freq / static_cast<double>(orig);
  Tensor kernels = where(t == 0.0, ones_like(t), t.sin() / t);
  kernels = kernels * (window * scale);
  if (!dtype) kernels = kernels.to(kFloat32);
  return {kernels, width, orig, next};
}

Tensor apply_resample_kernel(const Tensor& waveform, const ResampleKernel& k) {
  NABLA_CHECK(DTypeError, waveform.is_floating_point(), "resample: the waveform must be floating, got ",
              waveform.dtype());
  NABLA_CHECK(ShapeError, waveform.dim() >= 1, "resample: the waveform must be (..., time), got ", waveform.sizes());
  const Shape shape = waveform.sizes();
  const int64_t length = shape.back();
  Tensor x = waveform.reshape({-1, length});
  const int64_t num_wavs = x.size(0);
  x = pad(x, {k.width, k.width + k.orig});
  Tensor y = conv1d(x.unsqueeze(1), k.kernel.to(waveform.dtype()), {}, k.orig);  // (num_wavs, next, frames)
  y = y.transpose(1, 2).reshape({num_wavs, -1});
  const int64_t target = (k.next * length + k.orig - 1) / k.orig;
  y = y.narrow(-1, 0, std::min(target, y.size(-1)));
  Shape out = shape;
  out.back() = y.size(-1);
  return y.reshape(out);
}

Tensor resample(const Tensor& waveform, int64_t orig_freq, int64_t new_freq, int64_t lowpass_filter_width,
                double rolloff, const std::string& resampling_method, std::optional<double> beta) {
  NABLA_CHECK(ValueError, orig_freq > 0 && new_freq > 0, "resample: frequencies must be positive, got orig_freq ",
              orig_freq, " and new_freq ", new_freq);
  if (orig_freq == new_freq) return waveform;
  NABLA_CHECK(DTypeError, waveform.is_floating_point(), "resample: the waveform must be floating, got ",
              waveform.dtype());
  return apply_resample_kernel(waveform, sinc_resample_kernel(orig_freq, new_freq, lowpass_filter_width, rolloff,
                                                              resampling_method, beta, waveform.dtype()));
}

double hz_to_mel(double freq, const std::string& mel_scale) {
  check_mel_scale(mel_scale, "hz_to_mel");
  if (mel_scale == "htk") return 2595.0 * std::log10(1.0 + freq / 700.0);
  const double f_sp = 200.0 / 3, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
  const double logstep = std::log(6.4) / 27.0;
  return freq >= min_log_hz ? min_log_mel + std::log(freq / min_log_hz) / logstep : freq / f_sp;
}

Tensor mel_to_hz(const Tensor& mels, const std::string& mel_scale) {
  check_mel_scale(mel_scale, "mel_to_hz");
  if (mel_scale == "htk") return 700.0 * (pow(10.0, mels / 2595.0) - 1.0);
  const double f_sp = 200.0 / 3, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
  const double logstep = std::log(6.4) / 27.0;
  return where(mels >= min_log_mel, min_log_hz * ((mels - min_log_mel) * logstep).exp(), mels * f_sp);
}

namespace {
// Filter m of (n_freqs, n_filter) rises from f_pts[m] to f_pts[m + 1] and falls to f_pts[m + 2], as
// torchaudio's _create_triangular_filterbank.
Tensor triangular_filterbank(const Tensor& all_freqs, const Tensor& f_pts) {
  const int64_t n_filter = f_pts.size(0) - 2;
  Tensor f_diff = f_pts.narrow(0, 1, n_filter + 1) - f_pts.narrow(0, 0, n_filter + 1);  // (n_filter + 1)
  Tensor slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1);                          // (n_freqs, n_filter + 2)
  Tensor down = (slopes.narrow(1, 0, n_filter) * -1.0) / f_diff.narrow(0, 0, n_filter);
  Tensor up = slopes.narrow(1, 2, n_filter) / f_diff.narrow(0, 1, n_filter);
  return maximum(zeros({1}), minimum(down, up));
}
}  // namespace

Tensor melscale_fbanks(int64_t n_freqs, double f_min, double f_max, int64_t n_mels, int64_t sample_rate,
                       const std::string& norm, const std::string& mel_scale) {
  NABLA_CHECK(ValueError, norm.empty() || norm == "slaney",
              "melscale_fbanks: norm must be \"\" (none) or \"slaney\", got \"", norm, "\"");
  check_mel_scale(mel_scale, "melscale_fbanks");
  NABLA_CHECK(ValueError, n_freqs >= 1 && n_mels >= 1 && sample_rate > 0, "melscale_fbanks: n_freqs ", n_freqs,
              ", n_mels ", n_mels, " and sample_rate ", sample_rate, " must be positive");
  Tensor all_freqs = linspace(0, static_cast<double>(sample_rate / 2), n_freqs);  // (n_freqs)
  Tensor m_pts = linspace(hz_to_mel(f_min, mel_scale), hz_to_mel(f_max, mel_scale), n_mels + 2);
  Tensor f_pts = mel_to_hz(m_pts, mel_scale);  // (n_mels + 2)
  Tensor fb = triangular_filterbank(all_freqs, f_pts);
  if (norm == "slaney") fb = fb * (2.0 / (f_pts.narrow(0, 2, n_mels) - f_pts.narrow(0, 0, n_mels))).unsqueeze(0);
  return fb;
}

Tensor linear_fbanks(int64_t n_freqs, double f_min, double f_max, int64_t n_filter, int64_t sample_rate) {
  NABLA_CHECK(ValueError, n_freqs >= 1 && n_filter >= 1 && sample_rate > 0, "linear_fbanks: n_freqs ", n_freqs,
              ", n_filter ", n_filter, " and sample_rate ", sample_rate, " must be positive");
  return triangular_filterbank(linspace(0, static_cast<double>(sample_rate / 2), n_freqs),
                               linspace(f_min, f_max, n_filter + 2));
}

Tensor create_dct(int64_t n_mfcc, int64_t n_mels, const std::string& norm) {
  NABLA_CHECK(ValueError, norm.empty() || norm == "ortho", "create_dct: norm must be \"\" (none) or \"ortho\", got \"",
              norm, "\"");
  NABLA_CHECK(ValueError, n_mfcc >= 1 && n_mels >= 1, "create_dct: n_mfcc ", n_mfcc, " and n_mels ", n_mels,
              " must be positive");
  Tensor n = arange(0.0, static_cast<double>(n_mels));
  Tensor k = arange(0.0, static_cast<double>(n_mfcc)).unsqueeze(1);
  Tensor dct = ((kPi / static_cast<double>(n_mels)) * (n + 0.5) * k).cos();  // (n_mfcc, n_mels)
  if (norm.empty()) {
    dct = dct * 2.0;
  } else {
    Tensor first = ones({n_mfcc, 1});
    first.narrow(0, 0, 1).fill_(1.0 / std::sqrt(2.0));
    dct = dct * first * std::sqrt(2.0 / static_cast<double>(n_mels));
  }
  return dct.t();
}

Tensor compute_deltas(const Tensor& specgram, int64_t win_length, const std::string& mode) {
  NABLA_CHECK(ValueError, win_length >= 3, "compute_deltas: win_length must be at least 3, got ", win_length);
  NABLA_CHECK(ShapeError, specgram.dim() >= 1, "compute_deltas: specgram must be (..., time), got ", specgram.sizes());
  const Shape shape = specgram.sizes();
  const int64_t t = shape.back(), n = (win_length - 1) / 2;
  const double denom = static_cast<double>(n * (n + 1) * (2 * n + 1)) / 3.0;
  Tensor x = pad_last(specgram.reshape({1, -1, t}), n, mode, "compute_deltas", shape);  // (1, rows, t + 2n)
  // The conv1d with kernel [-n, ..., n] that torchaudio runs, as a sum of shifted slices.
  Tensor acc;
  for (int64_t j = 0; j <= 2 * n; ++j) {
    if (j == n) continue;
    Tensor term = x.narrow(-1, j, t) * static_cast<double>(j - n);
    acc = acc.defined() ? acc + term : term;
  }
  return (acc / denom).reshape(shape);
}

Tensor amplitude_to_DB(const Tensor& x, double multiplier, double amin, double db_multiplier,
                       std::optional<double> top_db) {
  Tensor x_db = multiplier * x.clamp_min(amin).log10();
  x_db = x_db - multiplier * db_multiplier;
  if (top_db) {
    NABLA_CHECK(ShapeError, x_db.dim() >= 2, "amplitude_to_DB: with top_db the input must be (..., freq, time), got ",
                x.sizes());
    const Shape shape = x_db.sizes();
    const int64_t packed = x_db.dim() > 2 ? shape[shape.size() - 3] : 1;
    x_db = x_db.reshape({-1, packed, shape[shape.size() - 2], shape.back()});
    x_db = maximum(x_db, (x_db.amax({-3, -2, -1}) - *top_db).view({-1, 1, 1, 1}));
    x_db = x_db.reshape(shape);
  }
  return x_db;
}

Tensor DB_to_amplitude(const Tensor& x, double ref, double power) { return ref * pow(pow(10.0, 0.1 * x), power); }

Tensor mask_along_axis(const Tensor& specgram, int64_t mask_param, double mask_value, int64_t axis, double p) {
  NABLA_CHECK(ValueError, axis == 1 || axis == 2, "mask_along_axis: axis must be 1 (frequency) or 2 (time), got ",
              axis);
  check_p(p, "mask_along_axis");
  NABLA_CHECK(ShapeError, specgram.dim() >= 2, "mask_along_axis: specgram must be (..., freq, time), got ",
              specgram.sizes());
  const Shape shape = specgram.sizes();
  const int64_t size = shape[shape.size() - 3 + static_cast<size_t>(axis)];
  mask_param = mask_param_for(mask_param, p, size);
  if (mask_param < 1) return specgram;
  const double value = rand({1}).item<float>() * static_cast<double>(mask_param);
  const double min_value = rand({1}).item<float>() * (static_cast<double>(size) - value);
  const auto start = static_cast<int64_t>(min_value), end = start + static_cast<int64_t>(value);
  Tensor pos = arange(size);
  Tensor mask = logical_and(pos >= start, pos < end);  // (size)
  if (axis == 1) mask = mask.unsqueeze(-1);
  return specgram.masked_fill(mask, mask_value);
}

Tensor mask_along_axis_iid(const Tensor& specgrams, int64_t mask_param, double mask_value, int64_t axis, double p) {
  NABLA_CHECK(ValueError, axis == 2 || axis == 3, "mask_along_axis_iid: axis must be 2 (frequency) or 3 (time), got ",
              axis);
  check_p(p, "mask_along_axis_iid");
  NABLA_CHECK(ShapeError, specgrams.dim() == 4,
              "mask_along_axis_iid: specgrams must be (batch, channel, freq, time), got ", specgrams.sizes());
  const int64_t size = specgrams.size(axis);
  mask_param = mask_param_for(mask_param, p, size);
  if (mask_param < 1) return specgrams;
  const TensorOptions opt = TensorOptions().dtype(specgrams.is_floating_point() ? specgrams.dtype() : kFloat32);
  Tensor value = rand({specgrams.size(0), specgrams.size(1)}, opt) * static_cast<double>(mask_param);
  Tensor min_value = rand({specgrams.size(0), specgrams.size(1)}, opt) * (static_cast<double>(size) - value);
  Tensor start = min_value.to(kInt64).view({specgrams.size(0), specgrams.size(1), 1, 1});
  Tensor end = start + value.to(kInt64).view({specgrams.size(0), specgrams.size(1), 1, 1});
  Tensor pos = arange(size).view(axis == 2 ? Shape{1, 1, size, 1} : Shape{1, 1, 1, size});
  return specgrams.masked_fill(logical_and(pos >= start, pos < end), mask_value);
}

Tensor gain(const Tensor& waveform, double gain_db) {
  if (gain_db == 0) return waveform;
  return waveform * std::pow(10.0, gain_db / 20.0);
}

}  // namespace nabla::audio::functional
