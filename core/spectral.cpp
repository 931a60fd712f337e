// The FFT primitives with their backward (core/spectral.h), torch.fft's functions on top of them,
// the window functions, and stft / istft.
#include "core/spectral.h"

#include <cmath>
#include <numbers>

#include "core/autocast.h"
#include "core/impl.h"

namespace nabla {

using autograd::GradList;
using autograd::Node;

namespace {

// norm: 0 none, 1 1/sqrt(n), 2 1/n; n the product of the signal's lengths along dims.
double norm_scale(int64_t norm, const Shape& signal, IntArrayRef dims) {
  if (norm == 0) return 1.0;
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(signal[d]);
  return norm == 1 ? 1.0 / std::sqrt(n) : 1.0 / n;
}

// Scales a fresh tensor in place (no autograd: the primitives record their own backward).
void scale_(Tensor& t, double s) {
  if (s == 1.0) return;
  autograd::NoGradGuard ng;
  Tensor r = t.is_complex() ? view_as_real(t) : t;
  r.mul_(s);
}

Shape wrap_dims(const char* op, IntArrayRef dims, int64_t nd) {
  Shape out;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, nd, op);
    for (int64_t o : out) NABLA_CHECK(ValueError, o != w, op, ": dim ", d, " is given twice in ", dims);
    out.push_back(w);
  }
  return out;
}

void check_fft_input(const char* op, const Tensor& x, IntArrayRef dims) {
  NABLA_CHECK(ValueError, x.defined(), op, ": input tensor is undefined");
  NABLA_CHECK(DeviceError, x.is_cpu(), op, ": the FFTs run on the CPU only for now (cuFFT is not wired in yet); got a ",
              "tensor on ", x.device(), " (move it with .to(kCPU))");
  for (int64_t d : dims)
    NABLA_CHECK(ValueError, x.sizes()[d] > 0, op, ": invalid number of data points (0) along dim ", d, " of shape ",
                x.sizes());
}

// One kernel call along `dim` into a new contiguous tensor of `out_shape` and `dt`.
Tensor run_fft(const Tensor& x, int64_t dim, FftKind kind, bool forward, Shape out_shape, DType dt) {
  Tensor xc = x.contiguous();
  Tensor out = internal::make_empty(out_shape, dt, x.device());
  backend_for(x.device()).fft(xc, dim, kind, forward, out);
  return out;
}

Tensor c2c_raw(const Tensor& x, IntArrayRef dims, int64_t norm, bool forward) {
  Tensor y = x;
  for (int64_t d : dims) y = run_fft(y, d, FftKind::c2c, forward, x.sizes(), x.dtype());
  if (dims.empty()) y = x.clone();
  scale_(y, norm_scale(norm, x.sizes(), dims));
  return y;
}

// Zero-pads (or narrows) dim d of x to n, complex or real.
Tensor resize_dim(const Tensor& x, int64_t d, int64_t n) {
  const int64_t len = x.sizes()[d];
  if (n == len) return x;
  if (n < len) return x.narrow(d, 0, n);
  Tensor r = x.is_complex() ? view_as_real(x) : x;
  Shape zs = r.sizes();
  zs[d] = n - len;
  Tensor padded = cat({r, zeros(zs, dtype(r.dtype()).device(r.device()))}, d);
  return x.is_complex() ? view_as_complex(padded) : padded;
}

}  // namespace

// ---- the primitives ------------------------------------------------------------------------------
Tensor fft_c2c(const Tensor& x, IntArrayRef dims_in, int64_t norm, bool forward) {
  NABLA_CHECK(DTypeError, x.defined() && x.is_complex(), "fft_c2c: expected a complex tensor, got ",
              x.defined() ? dtype_name(x.dtype()) : "undefined");
  Shape dims = wrap_dims("fft_c2c", dims_in, x.dim());
  check_fft_input("fft_c2c", x, dims);
  Tensor out = c2c_raw(x, dims, norm, forward);
  if (autograd::needs_grad(x))
    autograd::record("FftC2CBackward", {&x}, {&out}, [dims, norm, forward](Node&, GradList& grads) {
      return GradList{fft_c2c(grads[0], dims, norm, !forward)};
    });
  return out;
}

Tensor fft_r2c(const Tensor& x, IntArrayRef dims_in, int64_t norm, bool onesided) {
  if (auto ac = autocast_internal::cast<OpId::fft_r2c>(x)) [[unlikely]]
    return fft_r2c(ac[0], dims_in, norm, onesided);
  NABLA_CHECK(DTypeError, x.defined() && (x.dtype() == DType::f32 || x.dtype() == DType::f64),
              "fft_r2c: expected a float32 or float64 tensor, got ", x.defined() ? dtype_name(x.dtype()) : "undefined");
  Shape dims = wrap_dims("fft_r2c", dims_in, x.dim());
  NABLA_CHECK(ValueError, !dims.empty(), "fft_r2c: needs at least one dim");
  check_fft_input("fft_r2c", x, dims);
  const int64_t last = dims.back(), n = x.sizes()[last];
  const DType cdt = to_complex_dtype(x.dtype());
  Shape half = x.sizes();
  half[last] = n / 2 + 1;
  Tensor out;
  {
    autograd::NoGradGuard ng;
    out = run_fft(x, last, FftKind::r2c, true, half, cdt);
    Shape rest(dims.begin(), dims.end() - 1);
    if (!rest.empty()) out = c2c_raw(out, rest, 0, true);
    scale_(out, norm_scale(norm, x.sizes(), dims));
    if (!onesided && n / 2 + 1 < n) {
      // X_(n-k) = conj(X_k) of the whole transform: the other coefficients, flipped and conjugated
      // along every transformed dim (index (n - k) mod n).
      Tensor tail = conj(view_as_complex(view_as_real(out.narrow(last, 1, n - (n / 2 + 1))).flip({last}).contiguous()));
      for (int64_t d : rest) tail = view_as_complex(view_as_real(tail).flip({d}).roll({1}, {d}).contiguous());
      out = view_as_complex(cat({view_as_real(out), view_as_real(tail)}, last).contiguous());
    }
  }
  if (autograd::needs_grad(x))
    autograd::record("FftR2CBackward", {&x}, {&out}, [dims, norm, onesided, n](Node&, GradList& grads) {
      Tensor g = grads[0];
      const int64_t last = dims.back();
      if (onesided) g = resize_dim(g, last, n);  // the other coefficients got no gradient
      return GradList{real(fft_c2c(g, dims, norm, false)).contiguous()};
    });
  return out;
}

Tensor fft_c2r(const Tensor& x, IntArrayRef dims_in, int64_t norm, int64_t last_dim_size) {
  NABLA_CHECK(DTypeError, x.defined() && x.is_complex(), "fft_c2r: expected a complex tensor, got ",
              x.defined() ? dtype_name(x.dtype()) : "undefined");
  Shape dims = wrap_dims("fft_c2r", dims_in, x.dim());
  NABLA_CHECK(ValueError, !dims.empty(), "fft_c2r: needs at least one dim");
  check_fft_input("fft_c2r", x, dims);
  const int64_t last = dims.back();
  NABLA_CHECK(ValueError, last_dim_size >= 1, "fft_c2r: invalid number of data points (", last_dim_size, ") specified");
  NABLA_CHECK(ShapeError, x.sizes()[last] == last_dim_size / 2 + 1, "fft_c2r: the last transformed dim holds ",
              x.sizes()[last], " coefficients, but an output of ", last_dim_size, " points needs ",
              last_dim_size / 2 + 1);
  Shape full = x.sizes();
  full[last] = last_dim_size;
  Tensor out;
  {
    autograd::NoGradGuard ng;
    Shape rest(dims.begin(), dims.end() - 1);
    Tensor y = rest.empty() ? x : c2c_raw(x, rest, 0, false);
    out = run_fft(y, last, FftKind::c2r, false, full, to_real_dtype(x.dtype()));
    scale_(out, norm_scale(norm, full, dims));
  }
  if (autograd::needs_grad(x))
    autograd::record("FftC2RBackward", {&x}, {&out}, [dims, norm, last_dim_size](Node&, GradList& grads) {
      // The r2c of the gradient, with the coefficients that stand for two (k and n - k) doubled.
      Tensor gi = fft_r2c(grads[0], dims, norm, true);
      const int64_t last = dims.back(), h = last_dim_size / 2 + 1, twice = last_dim_size - h;
      if (twice <= 0) return GradList{gi};
      Tensor w = ones({h}, dtype(to_real_dtype(gi.dtype())));
      {
        autograd::NoGradGuard ng;
        w.narrow(0, 1, twice).fill_(2);
      }
      Shape ws(gi.dim(), 1);
      ws[last] = h;
      return GradList{gi * w.reshape(ws)};
    });
  return out;
}

// ---- torch.fft -----------------------------------------------------------------------------------
namespace fft {
namespace {

// PyTorch's norm_from_string: "backward" (or none) scales the inverse by 1/n, "forward" the forward
// one, "ortho" both by 1/sqrt(n).
int64_t norm_mode(const char* op, Norm norm, bool forward) {
  if (!norm || *norm == "backward") return forward ? 0 : 2;
  if (*norm == "forward") return forward ? 2 : 0;
  if (*norm == "ortho") return 1;
  throw ValueError(internal::str(op, ": invalid normalization mode \"", *norm,
                                 "\" (expected \"backward\", \"forward\" or \"ortho\")"));
}

Tensor promote_complex(const Tensor& x) {
  if (x.is_complex()) return x;
  return x.to(to_complex_dtype(x.dtype()));
}
Tensor promote_real(const char* op, const Tensor& x) {
  NABLA_CHECK(DTypeError, !x.is_complex(), op, " expects a real input tensor, but got ", x.dtype());
  return x.dtype() == DType::f64 || x.dtype() == DType::f32 ? x : x.to(DType::f32);
}

// The dims and lengths of an n-dimensional transform from PyTorch's (s, dim), with x resized to
// them (all but the last dim for the inverse real transforms, whose last length is the output's).
struct Plan {
  Shape dims, lengths;
};
Plan canonical(const char* op, const Tensor& x, const std::vector<int64_t>& s, const std::vector<int64_t>& dim,
               bool dim_given) {
  NABLA_CHECK(ValueError, x.defined(), op, ": input tensor is undefined");
  Plan p;
  if (!dim.empty() || dim_given) {
    p.dims = wrap_dims(op, dim, x.dim());
    NABLA_CHECK(ValueError, s.empty() || s.size() == dim.size(), op,
                ": when given, s and dim must have one length, got ", s.size(), " and ", dim.size());
  } else {
    const int64_t k = s.empty() ? x.dim() : static_cast<int64_t>(s.size());
    NABLA_CHECK(ValueError, k <= x.dim(), op, ": got shape s of ", k, " dims for a tensor of ", x.dim(), " dims");
    for (int64_t i = x.dim() - k; i < x.dim(); ++i) p.dims.push_back(i);
  }
  for (size_t i = 0; i < p.dims.size(); ++i) {
    int64_t n = s.empty() || s[i] == -1 ? x.sizes()[p.dims[i]] : s[i];
    NABLA_CHECK(ValueError, n >= 1, op, ": invalid number of data points (", n, ") specified");
    p.lengths.push_back(n);
  }
  return p;
}
Tensor resized(const Tensor& x, const Plan& p, size_t count) {
  Tensor y = x;
  for (size_t i = 0; i < count; ++i) y = resize_dim(y, p.dims[i], p.lengths[i]);
  return y;
}

Tensor c2c_n(const char* op, const Tensor& x, const std::vector<int64_t>& s, const std::vector<int64_t>& dim,
             bool dim_given, Norm norm, bool forward) {
  Plan p = canonical(op, x, s, dim, dim_given);
  Tensor y = promote_complex(resized(x, p, p.dims.size()));
  return fft_c2c(y, p.dims, norm_mode(op, norm, forward), forward);
}
Tensor r2c_n(const char* op, const Tensor& x, const std::vector<int64_t>& s, const std::vector<int64_t>& dim,
             bool dim_given, Norm norm) {
  Tensor xr = promote_real(op, x);
  Plan p = canonical(op, xr, s, dim, dim_given);
  NABLA_CHECK(ValueError, !p.dims.empty(), op, ": needs at least one dim to transform");
  return fft_r2c(resized(xr, p, p.dims.size()), p.dims, norm_mode(op, norm, true), true);
}
Tensor c2r_n(const char* op, const Tensor& x, const std::vector<int64_t>& s, const std::vector<int64_t>& dim,
             bool dim_given, Norm norm) {
  Plan p = canonical(op, x, s, dim, dim_given);
  NABLA_CHECK(ValueError, !p.dims.empty(), op, ": needs at least one dim to transform");
  // The last length is the output's: default 2 (m - 1) for m coefficients.
  const int64_t last = p.dims.back();
  const int64_t out_len = s.empty() || s.back() == -1 ? 2 * (x.sizes()[last] - 1) : s.back();
  NABLA_CHECK(ValueError, out_len >= 1, op, ": invalid number of data points (", out_len, ") specified");
  p.lengths.back() = out_len / 2 + 1;
  Tensor y = promote_complex(resized(x, p, p.dims.size()));
  return fft_c2r(y, p.dims, norm_mode(op, norm, false), out_len);
}

std::vector<int64_t> one(std::optional<int64_t> n) { return n ? std::vector<int64_t>{*n} : std::vector<int64_t>{}; }

}  // namespace

Tensor fft(const Tensor& x, std::optional<int64_t> n, int64_t dim, Norm norm) {
  return c2c_n("fft", x, one(n), {dim}, true, norm, true);
}
Tensor ifft(const Tensor& x, std::optional<int64_t> n, int64_t dim, Norm norm) {
  return c2c_n("ifft", x, one(n), {dim}, true, norm, false);
}
Tensor rfft(const Tensor& x, std::optional<int64_t> n, int64_t dim, Norm norm) {
  return r2c_n("rfft", x, one(n), {dim}, true, norm);
}
Tensor irfft(const Tensor& x, std::optional<int64_t> n, int64_t dim, Norm norm) {
  return c2r_n("irfft", x, one(n), {dim}, true, norm);
}
Tensor hfft(const Tensor& x, std::optional<int64_t> n, int64_t dim, Norm norm) {
  // The real signal whose spectrum is Hermitian with first half x: c2r of conj(x), scaled as a
  // forward transform.
  NABLA_CHECK(ValueError, x.defined(), "hfft: input tensor is undefined");
  const int64_t d = wrap_dim(dim, x.dim(), "hfft");
  const int64_t out_len = n.value_or(2 * (x.sizes()[d] - 1));
  NABLA_CHECK(ValueError, out_len >= 1, "hfft: invalid number of data points (", out_len, ") specified");
  Tensor y = promote_complex(resize_dim(x, d, out_len / 2 + 1));
  return fft_c2r(conj(y), {d}, norm_mode("hfft", norm, true), out_len);
}
Tensor ihfft(const Tensor& x, std::optional<int64_t> n, int64_t dim, Norm norm) {
  Tensor xr = promote_real("ihfft", x);
  const int64_t d = wrap_dim(dim, xr.dim(), "ihfft");
  Tensor y = n ? resize_dim(xr, d, *n) : xr;
  NABLA_CHECK(ValueError, !n || *n >= 1, "ihfft: invalid number of data points (", n.value_or(0), ") specified");
  return conj(fft_r2c(y, {d}, norm_mode("ihfft", norm, false), true));
}

Tensor fft2(const Tensor& x, std::vector<int64_t> s, std::vector<int64_t> dim, Norm norm) {
  return c2c_n("fft2", x, s, dim, true, norm, true);
}
Tensor ifft2(const Tensor& x, std::vector<int64_t> s, std::vector<int64_t> dim, Norm norm) {
  return c2c_n("ifft2", x, s, dim, true, norm, false);
}
Tensor rfft2(const Tensor& x, std::vector<int64_t> s, std::vector<int64_t> dim, Norm norm) {
  return r2c_n("rfft2", x, s, dim, true, norm);
}
Tensor irfft2(const Tensor& x, std::vector<int64_t> s, std::vector<int64_t> dim, Norm norm) {
  return c2r_n("irfft2", x, s, dim, true, norm);
}
Tensor fftn(const Tensor& x, std::vector<int64_t> s, std::vector<int64_t> dim, Norm norm) {
  return c2c_n("fftn", x, s, dim, false, norm, true);
}
Tensor ifftn(const Tensor& x, std::vector<int64_t> s, std::vector<int64_t> dim, Norm norm) {
  return c2c_n("ifftn", x, s, dim, false, norm, false);
}
Tensor rfftn(const Tensor& x, std::vector<int64_t> s, std::vector<int64_t> dim, Norm norm) {
  return r2c_n("rfftn", x, s, dim, false, norm);
}
Tensor irfftn(const Tensor& x, std::vector<int64_t> s, std::vector<int64_t> dim, Norm norm) {
  return c2r_n("irfftn", x, s, dim, false, norm);
}

Tensor fftfreq(int64_t n, double d, const TensorOptions& options) {
  NABLA_CHECK(ValueError, n >= 0, "fftfreq: n must be non-negative, got ", n);
  Tensor k = cat({arange(0, (n - 1) / 2 + 1, 1, dtype(DType::f64)), arange(-(n / 2), 0, 1, dtype(DType::f64))});
  Tensor out = k / (d * static_cast<double>(n));
  return out.to(options.dtype_or(DType::f32)).to(options.device());
}
Tensor rfftfreq(int64_t n, double d, const TensorOptions& options) {
  NABLA_CHECK(ValueError, n >= 0, "rfftfreq: n must be non-negative, got ", n);
  Tensor out = arange(0, n / 2 + 1, 1, dtype(DType::f64)) / (d * static_cast<double>(n));
  return out.to(options.dtype_or(DType::f32)).to(options.device());
}

namespace {
Tensor shift(const char* op, const Tensor& x, std::vector<int64_t> dim, bool inverse) {
  NABLA_CHECK(ValueError, x.defined(), op, ": input tensor is undefined");
  if (dim.empty())
    for (int64_t i = 0; i < x.dim(); ++i) dim.push_back(i);
  Shape dims = wrap_dims(op, dim, x.dim()), shifts;
  for (int64_t d : dims) shifts.push_back(inverse ? (x.sizes()[d] + 1) / 2 : x.sizes()[d] / 2);
  if (dims.empty()) return x.clone();
  if (!x.is_complex()) return roll(x, shifts, dims);
  return view_as_complex(roll(view_as_real(x), shifts, dims).contiguous());
}
}  // namespace
Tensor fftshift(const Tensor& x, std::vector<int64_t> dim) { return shift("fftshift", x, std::move(dim), false); }
Tensor ifftshift(const Tensor& x, std::vector<int64_t> dim) { return shift("ifftshift", x, std::move(dim), true); }

}  // namespace fft
}  // namespace nabla
