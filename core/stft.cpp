// Window functions and the short-time Fourier transforms (torch.stft / torch.istft), made of the
// differentiable FFT primitives, unfold and index_add.
#include <cmath>
#include <numbers>

#include "core/autocast.h"
#include "core/impl.h"
#include "core/special.h"
#include "core/spectral.h"

namespace nabla {

// ---- windows -----------------------------------------------------------------------------------
namespace {

// A window of n points from f(k, N) for k < n, N the symmetric window's length (n + 1 periodic).
template <class F>
Tensor make_window(const char* op, int64_t n, bool periodic, const TensorOptions& options, F f) {
  NABLA_CHECK(ValueError, n >= 0, op, ": window_length must be non-negative, got ", n);
  const DType dt = options.dtype_or(DType::f32);
  NABLA_CHECK(DTypeError, is_floating(dt), op, ": expected a floating dtype for the window, got ", dt);
  std::vector<double> w(static_cast<size_t>(n));
  if (n == 1) w[0] = 1.0;
  const double N = static_cast<double>(periodic ? n + 1 : n);
  if (n > 1)
    for (int64_t k = 0; k < n; ++k) w[k] = f(static_cast<double>(k), N);
  Tensor t = tensor(w, {n}, dtype(DType::f64)).to(dt);
  return options.device().is_cpu() ? t : t.to(options.device());
}

}  // namespace

Tensor hann_window(int64_t n, bool periodic, const TensorOptions& options) {
  return make_window("hann_window", n, periodic, options,
                     [](double k, double N) { return 0.5 - 0.5 * std::cos(2 * std::numbers::pi * k / (N - 1)); });
}
Tensor hamming_window(int64_t n, bool periodic, double alpha, double beta, const TensorOptions& options) {
  return make_window("hamming_window", n, periodic, options, [alpha, beta](double k, double N) {
    return alpha - beta * std::cos(2 * std::numbers::pi * k / (N - 1));
  });
}
Tensor blackman_window(int64_t n, bool periodic, const TensorOptions& options) {
  return make_window("blackman_window", n, periodic, options, [](double k, double N) {
    const double a = 2 * std::numbers::pi * k / (N - 1);
    return 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
  });
}
Tensor bartlett_window(int64_t n, bool periodic, const TensorOptions& options) {
  return make_window("bartlett_window", n, periodic, options,
                     [](double k, double N) { return 1 - std::abs(2 * k / (N - 1) - 1); });
}
Tensor kaiser_window(int64_t n, bool periodic, double beta, const TensorOptions& options) {
  const double i0b = bessel_i0(beta);
  return make_window("kaiser_window", n, periodic, options, [beta, i0b](double k, double N) {
    const double r = 2 * k / (N - 1) - 1;
    return bessel_i0(beta * std::sqrt(std::max(0.0, 1 - r * r))) / i0b;
  });
}

// ---- stft / istft --------------------------------------------------------------------------------
namespace {

// x (..., L) padded by p on both sides of its last dim, as F.pad's modes (PyTorch's stft pads
// with reflect by default). A gather of positions, so gradients flow back summed.
Tensor pad_signal(const Tensor& x, int64_t p, std::string_view mode) {
  const int64_t L = x.sizes().back();
  if (p == 0) return x;
  if (mode == "constant") {
    Tensor r = x.is_complex() ? view_as_real(x) : x;
    const int64_t d = x.is_complex() ? r.dim() - 2 : r.dim() - 1;
    Shape zs = r.sizes();
    zs[d] = p;
    Tensor z = zeros(zs, dtype(r.dtype()));
    Tensor out = cat({z, r, z}, d);
    return x.is_complex() ? view_as_complex(out) : out;
  }
  NABLA_CHECK(ValueError, mode == "reflect" || mode == "replicate" || mode == "circular",
              "stft: pad_mode must be \"constant\", \"reflect\", \"replicate\" or \"circular\", got \"", mode, "\"");
  NABLA_CHECK(ValueError, mode != "reflect" || p < L, "stft: reflect padding of ", p,
              " needs a signal longer than that, got length ", L, " (use pad_mode \"constant\" or center=false)");
  NABLA_CHECK(ValueError, mode != "circular" || p <= L, "stft: circular padding of ", p,
              " needs a signal at least that long, got length ", L);
  if (!x.is_complex()) {
    // Real signals: the two edges (p samples each, mirrored, repeated or wrapped) around x, joined
    // by one cat (row copies), instead of gathering every sample through an index.
    const int64_t d = x.dim() - 1;
    Shape edge = x.sizes();
    edge[d] = p;
    Tensor left, right;
    if (mode == "reflect") {
      left = x.narrow(d, 1, p).flip({d});
      right = x.narrow(d, L - 1 - p, p).flip({d});
    } else if (mode == "replicate") {
      left = x.narrow(d, 0, 1).expand(edge);
      right = x.narrow(d, L - 1, 1).expand(edge);
    } else {
      left = x.narrow(d, L - p, p);
      right = x.narrow(d, 0, p);
    }
    return cat({left, x, right}, d);
  }
  std::vector<int64_t> idx(static_cast<size_t>(L + 2 * p));
  for (int64_t i = 0; i < L + 2 * p; ++i) {
    int64_t j = i - p;
    if (mode == "reflect") j = j < 0 ? -j : j >= L ? 2 * (L - 1) - j : j;
    else if (mode == "replicate") j = std::clamp<int64_t>(j, 0, L - 1);
    else j = ((j % L) + L) % L;
    idx[i] = j;
  }
  Tensor index = tensor(idx, {L + 2 * p}, dtype(DType::i64));
  Tensor r = view_as_real(x);
  return view_as_complex(r.index_select(r.dim() - 2, index).contiguous());
}

// The window as n_fft points: a shorter one is centred between zeros; none is a rectangular one
// (undefined when it would be all ones).
Tensor full_window(const char* op, const Tensor& window, int64_t n_fft, int64_t win_length, DType dt) {
  NABLA_CHECK(ValueError, win_length >= 1 && win_length <= n_fft, op,
              ": expected 0 < win_length <= n_fft, but got win_length=", win_length, " and n_fft=", n_fft);
  if (window.defined()) {
    NABLA_CHECK(ShapeError, window.dim() == 1 && window.sizes()[0] == win_length, op,
                ": expected a 1-D window tensor of size equal to win_length=", win_length,
                ", but got window with size ", window.sizes());
  }
  if (win_length == n_fft) return window;
  const int64_t left = (n_fft - win_length) / 2;
  Tensor w = window.defined() ? window : ones({win_length}, dtype(dt));
  return pad(w, {left, n_fft - win_length - left});
}

}  // namespace

Tensor stft(const Tensor& x_in, int64_t n_fft, const StftOptions& o) {
  NABLA_CHECK(ValueError, x_in.defined(), "stft: input tensor is undefined");
  if (autocast_internal::active()) [[unlikely]] {
    const Tensor& w = o.window.defined() ? o.window : x_in;
    if (auto ac = autocast_internal::cast<OpId::stft>(x_in, w)) {
      StftOptions o2 = o;
      if (o.window.defined()) o2.window = ac[1];
      return stft(ac[0], n_fft, o2);
    }
  }
  NABLA_CHECK(ShapeError, x_in.dim() == 1 || x_in.dim() == 2,
              "stft: expected a 1-D (L) or 2-D (B, L) input, got shape ", x_in.sizes());
  const int64_t hop = o.hop_length.value_or(n_fft / 4), win_length = o.win_length.value_or(n_fft);
  NABLA_CHECK(ValueError, n_fft > 0, "stft: expected n_fft > 0, got ", n_fft);
  NABLA_CHECK(ValueError, hop > 0, "stft: expected hop_length > 0, got ", hop);
  Tensor x = x_in.dim() == 1 ? x_in.unsqueeze(0) : x_in;
  if (!x.is_complex() && !is_floating(x.dtype())) x = x.to(DType::f32);
  if (o.center) x = pad_signal(x, n_fft / 2, o.pad_mode);
  const int64_t L = x.sizes()[1];
  NABLA_CHECK(ValueError, n_fft <= L, "stft: expected 0 < n_fft <= ", L,
              " (the padded input's length), but got n_fft=", n_fft);
  Tensor window = full_window("stft", o.window, n_fft, win_length, to_real_dtype(x.dtype()));
  const bool complex_input = x.is_complex() || (window.defined() && window.is_complex());
  const bool onesided = o.onesided.value_or(!complex_input);
  NABLA_CHECK(ValueError, !(onesided && complex_input),
              "stft: onesided output is not possible for a complex input or window");
  // x (B, L) -> frames (B, n_frames, n_fft), windowed.
  Tensor frames;
  if (x.is_complex()) {
    Tensor r = view_as_real(x);  // (B, L, 2)
    frames = view_as_complex(r.unfold(1, n_fft, hop).transpose(-1, -2).contiguous());
  } else {
    frames = x.unfold(1, n_fft, hop);
  }
  if (window.defined()) frames = frames * window;
  const int64_t norm = o.normalized ? 1 : 0;
  Tensor spec =
      onesided ? fft_r2c(frames, {-1}, norm, true)
               : fft_c2c(frames.is_complex() ? frames : frames.to(to_complex_dtype(frames.dtype())), {-1}, norm, true);
  // (B, n_frames, n_freq) -> (B, n_freq, n_frames): a transposed view, strides (n_frames * n_freq,
  // 1, n_freq) as PyTorch's.
  Tensor out = view_as_complex(view_as_real(spec).transpose(1, 2));
  if (x_in.dim() == 1) out = out.squeeze(0);
  return o.return_complex ? out : view_as_real(out);
}

Tensor istft(const Tensor& x_in, int64_t n_fft, const IstftOptions& o) {
  NABLA_CHECK(ValueError, x_in.defined(), "istft: input tensor is undefined");
  NABLA_CHECK(DTypeError, x_in.is_complex(), "istft: expected a complex input (..., n_freq, n_frames), got ",
              x_in.dtype(), " (view_as_complex turns a (..., 2) real tensor into one)");
  NABLA_CHECK(ShapeError, x_in.dim() == 2 || x_in.dim() == 3,
              "istft: expected a 2-D (n_freq, n_frames) or 3-D (B, n_freq, n_frames) input, got shape ", x_in.sizes());
  const int64_t hop = o.hop_length.value_or(n_fft / 4), win_length = o.win_length.value_or(n_fft);
  NABLA_CHECK(ValueError, n_fft > 0 && hop > 0, "istft: expected n_fft > 0 and hop_length > 0, got ", n_fft, " and ",
              hop);
  Tensor x = x_in.dim() == 2 ? x_in.unsqueeze(0) : x_in;
  const int64_t n_freq = x.sizes()[1], n_frames = x.sizes()[2];
  const bool onesided = o.onesided.value_or(n_freq != n_fft);
  NABLA_CHECK(ShapeError, onesided ? n_freq == n_fft / 2 + 1 : n_freq == n_fft, "istft: expected ",
              onesided ? n_fft / 2 + 1 : n_fft, " frequencies for n_fft=", n_fft, (onesided ? " (onesided)" : ""),
              ", got ", n_freq);
  NABLA_CHECK(ValueError, n_frames > 0, "istft: the input has no frames");
  Tensor window = full_window("istft", o.window, n_fft, win_length, to_real_dtype(x.dtype()));
  // (B, n_freq, n_frames) -> frames (B, n_frames, n_fft)
  Tensor spec = view_as_complex(view_as_real(x).transpose(1, 2).contiguous());
  const int64_t norm = o.normalized ? 1 : 2;
  Tensor frames = onesided ? fft_c2r(spec, {-1}, norm, n_fft) : fft_c2c(spec, {-1}, norm, false);
  if (!o.return_complex && frames.is_complex()) frames = real(frames);
  Tensor w = window.defined() ? window : ones({n_fft}, dtype(to_real_dtype(x.dtype())));
  if (window.defined()) frames = frames * window;
  // Overlap-add of the frames and of the squared window.
  const int64_t total = n_fft + hop * (n_frames - 1);
  std::vector<int64_t> pos(static_cast<size_t>(n_frames * n_fft));
  for (int64_t t = 0; t < n_frames; ++t)
    for (int64_t i = 0; i < n_fft; ++i) pos[t * n_fft + i] = t * hop + i;
  Tensor index = tensor(pos, {n_frames * n_fft}, dtype(DType::i64));
  const int64_t B = x.sizes()[0];
  Tensor y;
  if (frames.is_complex()) {
    Tensor r = view_as_real(frames).reshape({B, n_frames * n_fft, 2});
    y = view_as_complex(index_add(zeros({B, total, 2}, dtype(r.dtype())), 1, index, r).contiguous());
  } else {
    y = index_add(zeros({B, total}, dtype(frames.dtype())), 1, index, frames.reshape({B, n_frames * n_fft}));
  }
  Tensor envelope;
  {
    autograd::NoGradGuard ng;
    Tensor w2 = (w * w).detach().reshape({1, n_fft}).expand({n_frames, n_fft}).reshape({n_frames * n_fft});
    envelope = index_add(zeros({total}, dtype(w2.dtype())), 0, index, w2);
  }
  const int64_t start = o.center ? n_fft / 2 : 0;
  int64_t end = o.length ? start + *o.length : o.center ? total - n_fft / 2 : total;
  const int64_t stop = std::min(end, total);
  NABLA_CHECK(ValueError, stop > start, "istft: the output would be empty (n_fft=", n_fft, ", hop_length=", hop,
              ", frames=", n_frames, ")");
  y = y.narrow(1, start, stop - start);
  envelope = envelope.narrow(0, start, stop - start);
  {
    autograd::NoGradGuard ng;
    NABLA_CHECK(ValueError, !(envelope.abs().min().item<double>() < 1e-11),
                "istft: window overlap add min: the window's squared sum is (nearly) zero inside the output; choose "
                "a window and hop_length that satisfy NOLA");
  }
  y = y / envelope;
  if (end > total) {
    Tensor r = y.is_complex() ? view_as_real(y) : y;
    Shape zs = r.sizes();
    zs[1] = end - total;
    Tensor padded = cat({r, zeros(zs, dtype(r.dtype()))}, 1);
    y = y.is_complex() ? view_as_complex(padded) : padded;
  }
  return x_in.dim() == 2 ? y.squeeze(0) : y;
}

}  // namespace nabla
