// torchaudio.transforms (see transforms.h): each forward is the functional form with the module's
// settings; what torchaudio precomputes (the resampling kernel, the mel filters) is a buffer.
#include "audio/transforms.h"

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "core/graph.h"
#include "core/ops.h"

namespace nabla::audio::transforms {

using internal::str;

namespace F = functional;

namespace {

std::string fmax_str(const std::optional<double>& f_max, int64_t sample_rate) {
  return str(f_max.value_or(static_cast<double>(sample_rate / 2)));
}

Tensor mel_filters(int64_t n_stft, int64_t n_mels, int64_t sample_rate, double f_min,
                   const std::optional<double>& f_max, const std::string& norm, const std::string& mel_scale,
                   const char* who) {
  const double fmax = f_max.value_or(static_cast<double>(sample_rate / 2));
  NABLA_CHECK(ValueError, f_min <= fmax, who, ": f_min ", f_min, " must not exceed f_max ", fmax);
  return F::melscale_fbanks(n_stft, f_min, fmax, n_mels, sample_rate, norm, mel_scale);
}

}  // namespace

// ---- Resample -------------------------------------------------------------------------------------
Resample::Resample(int64_t orig_freq, int64_t new_freq, const std::string& resampling_method,
                   int64_t lowpass_filter_width, double rolloff, std::optional<double> beta, std::optional<DType> dtype)
    : nn::Module("Resample"), orig_freq(orig_freq), new_freq(new_freq) {
  NABLA_CHECK(ValueError, orig_freq > 0 && new_freq > 0, "Resample: frequencies must be positive, got ", orig_freq,
              " and ", new_freq);
  if (orig_freq == new_freq) return;
  kernel_ = F::sinc_resample_kernel(orig_freq, new_freq, lowpass_filter_width, rolloff, resampling_method, beta, dtype);
  kernel_.kernel = register_buffer("kernel", kernel_.kernel);
}

Tensor Resample::forward(Tensor waveform) {
  if (orig_freq == new_freq) return waveform;
  return F::apply_resample_kernel(waveform, kernel_);
}

std::string Resample::extra_repr() const { return str("orig_freq=", orig_freq, ", new_freq=", new_freq); }

// ---- MelScale, InverseMelScale --------------------------------------------------------------------
MelScale::MelScale(MelScaleOptions o) : nn::Module("MelScale"), options(std::move(o)) {
  fb = register_buffer("fb", mel_filters(options.n_stft, options.n_mels, options.sample_rate, options.f_min,
                                         options.f_max, options.norm, options.mel_scale, "MelScale"));
}

Tensor MelScale::forward(Tensor specgram) {
  NABLA_CHECK(ShapeError, specgram.dim() >= 2 && specgram.size(-2) == options.n_stft, "MelScale: expected (..., ",
              options.n_stft, ", time) (n_stft frequency bins), got ", specgram.sizes());
  // (..., time, freq) @ (freq, n_mels) -> (..., n_mels, time)
  return matmul(specgram.transpose(-1, -2), fb).transpose(-1, -2);
}

std::string MelScale::extra_repr() const {
  return str("n_mels=", options.n_mels, ", sample_rate=", options.sample_rate, ", f_min=", options.f_min,
             ", f_max=", fmax_str(options.f_max, options.sample_rate), ", n_stft=", options.n_stft);
}

InverseMelScale::InverseMelScale(InverseMelScaleOptions o) : nn::Module("InverseMelScale"), options(std::move(o)) {
  NABLA_CHECK(ValueError, options.max_iter >= 0, "InverseMelScale: max_iter must be >= 0, got ", options.max_iter);
  fb = register_buffer("fb", mel_filters(options.n_stft, options.n_mels, options.sample_rate, options.f_min,
                                         options.f_max, options.norm, options.mel_scale, "InverseMelScale"));
}

Tensor InverseMelScale::forward(Tensor melspec) {
  NABLA_CHECK(ShapeError, melspec.dim() >= 2 && melspec.size(-2) == options.n_mels, "InverseMelScale: expected (..., ",
              options.n_mels, ", time) (n_mels mel bins), got ", melspec.sizes());
  NoGradGuard no_grad;
  const Shape shape = melspec.sizes();
  const int64_t time = shape.back(), freq = fb.size(0);
  Tensor mel = melspec.detach().reshape({-1, options.n_mels, time}).transpose(-1, -2);  // (B, time, n_mels)
  const Tensor fbank = fb.to(mel.dtype());
  Tensor spec = rand({mel.size(0), time, freq}, TensorOptions().dtype(mel.dtype()).device(mel.device()));
  Tensor velocity;
  const double count = static_cast<double>(mel.size(0) * time);
  double loss = INFINITY;
  for (int64_t i = 0; i < options.max_iter; ++i) {
    Tensor diff = mel - matmul(spec, fbank);  // (B, time, n_mels)
    const double new_loss = diff.pow(2).sum({-1}).mean().item<double>();
    Tensor grad = matmul(diff, fbank.t()) * (-2.0 / count);  // d loss / d spec
    // torch.optim.SGD with momentum (no dampening): v = momentum v + grad (v = grad at first)
    velocity = velocity.defined() ? velocity * options.momentum + grad : grad;
    spec = (spec - velocity * options.lr).clamp_min(0.0);
    if (new_loss < options.tolerance_loss || std::abs(loss - new_loss) < options.tolerance_change) break;
    loss = new_loss;
  }
  Shape out(shape.begin(), shape.end());
  out[out.size() - 2] = freq;
  return spec.clamp_min(0.0).transpose(-1, -2).reshape(out);
}

std::string InverseMelScale::extra_repr() const {
  return str("n_stft=", options.n_stft, ", n_mels=", options.n_mels, ", sample_rate=", options.sample_rate);
}

// ---- AmplitudeToDB, ComputeDeltas ---------------------------------------------------------------
AmplitudeToDB::AmplitudeToDB(const std::string& stype, std::optional<double> top_db)
    : nn::Module("AmplitudeToDB"), stype(stype), top_db(top_db) {
  NABLA_CHECK(ValueError, stype == "power" || stype == "magnitude",
              "AmplitudeToDB: stype must be \"power\" or \"magnitude\", got \"", stype, "\"");
  NABLA_CHECK(ValueError, !top_db || *top_db >= 0, "AmplitudeToDB: top_db must be positive, got ", top_db.value_or(0));
  multiplier = stype == "power" ? 10.0 : 20.0;
  db_multiplier = std::log10(std::max(amin, 1.0));
}

Tensor AmplitudeToDB::forward(Tensor x) { return F::amplitude_to_DB(x, multiplier, amin, db_multiplier, top_db); }

std::string AmplitudeToDB::extra_repr() const {
  return str("stype=", stype, top_db ? str(", top_db=", *top_db) : std::string());
}

ComputeDeltas::ComputeDeltas(int64_t win_length, const std::string& mode)
    : nn::Module("ComputeDeltas"), win_length(win_length), mode(mode) {
  NABLA_CHECK(ValueError, win_length >= 3, "ComputeDeltas: win_length must be at least 3, got ", win_length);
}

Tensor ComputeDeltas::forward(Tensor specgram) { return F::compute_deltas(specgram, win_length, mode); }

std::string ComputeDeltas::extra_repr() const { return str("win_length=", win_length, ", mode=", mode); }

// ---- masking ----------------------------------------------------------------------------------------
AxisMasking::AxisMasking(std::string name, int64_t mask_param, int64_t axis, bool iid_masks, double p)
    : nn::Module(std::move(name)), mask_param(mask_param), axis(axis), iid_masks(iid_masks), p(p) {
  NABLA_CHECK(ValueError, mask_param >= 0, this->name(), ": the mask parameter must be >= 0, got ", mask_param);
  NABLA_CHECK(ValueError, p >= 0.0 && p <= 1.0, this->name(), ": p must be in [0, 1], got ", p);
}

Tensor AxisMasking::forward(Tensor specgram, double mask_value) {
  if (iid_masks && specgram.dim() == 4) return F::mask_along_axis_iid(specgram, mask_param, mask_value, axis + 1, p);
  return F::mask_along_axis(specgram, mask_param, mask_value, axis, p);
}

std::string AxisMasking::extra_repr() const {
  return str("mask_param=", mask_param, ", iid_masks=", iid_masks ? "true" : "false", ", p=", p);
}

FrequencyMasking::FrequencyMasking(int64_t freq_mask_param, bool iid_masks)
    : AxisMasking("FrequencyMasking", freq_mask_param, 1, iid_masks, 1.0) {}

TimeMasking::TimeMasking(int64_t time_mask_param, bool iid_masks, double p)
    : AxisMasking("TimeMasking", time_mask_param, 2, iid_masks, p) {}

// ---- Vol, Fade -------------------------------------------------------------------------------------
Vol::Vol(double gain, const std::string& gain_type) : nn::Module("Vol"), gain(gain), gain_type(gain_type) {
  NABLA_CHECK(ValueError, gain_type == "amplitude" || gain_type == "power" || gain_type == "db",
              "Vol: gain_type must be \"amplitude\", \"power\" or \"db\", got \"", gain_type, "\"");
  NABLA_CHECK(ValueError, gain_type == "db" || gain >= 0, "Vol: with gain_type \"", gain_type,
              "\" the gain must be positive, got ", gain);
}

Tensor Vol::forward(Tensor waveform) {
  if (gain_type == "amplitude") waveform = waveform * gain;
  else if (gain_type == "db") waveform = F::gain(waveform, gain);
  else waveform = F::gain(waveform, 10 * std::log10(gain));
  return waveform.clamp(-1, 1);
}

std::string Vol::extra_repr() const { return str("gain=", gain, ", gain_type=", gain_type); }

Fade::Fade(int64_t fade_in_len, int64_t fade_out_len, const std::string& fade_shape)
    : nn::Module("Fade"), fade_in_len(fade_in_len), fade_out_len(fade_out_len), fade_shape(fade_shape) {
  NABLA_CHECK(ValueError, fade_in_len >= 0 && fade_out_len >= 0, "Fade: fade lengths must be >= 0, got ", fade_in_len,
              " and ", fade_out_len);
  NABLA_CHECK(ValueError,
              fade_shape == "linear" || fade_shape == "exponential" || fade_shape == "logarithmic" ||
                  fade_shape == "quarter_sine" || fade_shape == "half_sine",
              "Fade: fade_shape must be \"linear\", \"exponential\", \"logarithmic\", \"quarter_sine\" or "
              "\"half_sine\", got \"",
              fade_shape, "\"");
}

Tensor Fade::forward(Tensor waveform) {
  NABLA_CHECK(ShapeError, waveform.dim() >= 1, "Fade: the waveform must be (..., time), got ", waveform.sizes());
  const int64_t length = waveform.size(-1);
  NABLA_CHECK(ShapeError, fade_in_len <= length && fade_out_len <= length, "Fade: fade_in_len ", fade_in_len,
              " and fade_out_len ", fade_out_len, " must not exceed the waveform's ", length, " samples (shape ",
              waveform.sizes(), ")");
  constexpr double pi = std::numbers::pi;
  const TensorOptions opt = TensorOptions().device(waveform.device());
  Tensor in = linspace(0, 1, fade_in_len, opt), out = linspace(0, 1, fade_out_len, opt);
  if (fade_shape == "linear") {
    out = -out + 1;
  } else if (fade_shape == "exponential") {
    in = pow(2.0, in - 1) * in;
    out = pow(2.0, -out) * (1 - out);
  } else if (fade_shape == "logarithmic") {
    in = (0.1 + in).log10() + 1;
    out = (1.1 - out).log10() + 1;
  } else if (fade_shape == "quarter_sine") {
    in = (in * pi / 2).sin();
    out = (out * pi / 2 + pi / 2).sin();
  } else {
    in = (in * pi - pi / 2).sin() / 2 + 0.5;
    out = (out * pi + pi / 2).sin() / 2 + 0.5;
  }
  Tensor fade_in = cat({in, ones({length - fade_in_len}, opt)}).clamp(0, 1);
  Tensor fade_out = cat({ones({length - fade_out_len}, opt), out}).clamp(0, 1);
  return fade_in * fade_out * waveform;
}

std::string Fade::extra_repr() const {
  return str("fade_in_len=", fade_in_len, ", fade_out_len=", fade_out_len, ", fade_shape=", fade_shape);
}

}  // namespace nabla::audio::transforms
