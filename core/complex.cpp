// Complex tensors: the reinterpreting views (view_as_real, view_as_complex), the parts, and the
// elementwise ops on complex operands, computed on the (real, imaginary) float pairs with the
// real ops, so that autograd differentiates them through those ops.
#include <cmath>
#include <numbers>

#include "core/autocast.h"
#include "core/impl.h"
#include "core/spectral.h"

namespace nabla {

using autograd::GradList;
using autograd::Node;

namespace {

// A view of base's memory with another dtype; it stays linked to base as other views are, so that
// in-place writes under autograd are refused (core/views.cpp, place_in_base) instead of being lost.
Tensor reinterpret_view(const Tensor& base, DType dt, Shape sizes, Shape strides, int64_t offset) {
  Tensor v = internal::make_view(base, std::move(sizes), std::move(strides), offset);
  TensorImpl* vi = v.impl();
  vi->dtype = dt;
  vi->refresh();
  TensorImpl* bi = base.impl();
  vi->view_base = bi->view_base ? bi->view_base : base.impl_ptr();
  vi->view_base_grad_fn = vi->view_base->grad_fn.get();
  vi->view_tracks_base = autograd::GradMode::is_enabled();
  return v;
}

// The parts of an operand: (re, im) of a complex tensor; (x, undefined) of a real one.
struct Parts {
  Tensor re, im;
};
Parts parts_of(const Tensor& t, DType real_dt) {
  if (!t.is_complex()) return {t.dtype() == real_dt ? t : t.to(real_dt), Tensor()};
  Tensor r = view_as_real(t);
  if (r.dtype() != real_dt) r = r.to(real_dt);
  return {r.select(-1, 0), r.select(-1, 1)};
}

// re + i im (im undefined: 0) as a new complex tensor, broadcasting the two.
Tensor from_parts(const Tensor& re, const Tensor& im) {
  if (!im.defined()) return from_parts(re, zeros_like(re));
  if (re.sizes() == im.sizes()) return view_as_complex(stack({re, im}, -1));
  auto b = broadcast_tensors({re, im});
  return view_as_complex(stack({b[0], b[1]}, -1));
}

Tensor neg_or_undef(const Tensor& t) { return t.defined() ? neg(t) : t; }
Tensor add_parts(const Tensor& a, const Tensor& b) { return !a.defined() ? b : !b.defined() ? a : add(a, b); }

[[noreturn]] void no_complex_form(const char* op, DType a, DType b) {
  throw NotImplemented(internal::str(op, ": not implemented for complex tensors (got ", a, " and ", b,
                                     "); complex tensors support add, sub, mul, div, pow, eq and ne"));
}

// |z| with PyTorch's gradient g * z / |z|, and 0 at z = 0 (where hypot's formula divides by zero).
Tensor complex_abs(const Tensor& z) {
  Tensor out;
  {
    autograd::NoGradGuard ng;
    Tensor r = view_as_real(z);
    out = hypot(r.select(-1, 0), r.select(-1, 1));
  }
  if (!autograd::needs_grad(z)) return out;
  autograd::record("AbsBackward", {&z}, {&out},
                   [zs = autograd::save(z), ys = autograd::save_output(out)](Node& n, GradList& grads) {
                     Tensor zz = zs.unpack(n), y = ys.unpack(n);
                     Tensor scale = where(eq(y, 0), zeros_like(y), grads[0] / y);  // g / |z|, 0 at z = 0
                     return GradList{zz * scale};
                   });
  return out;
}

}  // namespace

// ---- views and parts -------------------------------------------------------------------------------
Tensor view_as_real(const Tensor& z) {
  NABLA_CHECK(ValueError, z.defined(), "view_as_real: input tensor is undefined");
  NABLA_CHECK(DTypeError, z.is_complex(), "view_as_real: expected a complex tensor, got ", z.dtype(), " ", z.sizes());
  Shape sizes = z.sizes(), strides = z.strides();
  for (auto& s : strides) s *= 2;
  sizes.push_back(2);
  strides.push_back(1);
  Tensor out =
      reinterpret_view(z, to_real_dtype(z.dtype()), std::move(sizes), std::move(strides), z.storage_offset() * 2);
  if (autograd::needs_grad(z))
    autograd::record("ViewAsRealBackward", {&z}, {&out},
                     [](Node&, GradList& grads) { return GradList{view_as_complex(grads[0].contiguous())}; });
  return out;
}

Tensor view_as_complex(const Tensor& x) {
  NABLA_CHECK(ValueError, x.defined(), "view_as_complex: input tensor is undefined");
  if (auto ac = autocast_internal::cast<OpId::view_as_complex>(x)) [[unlikely]]
    return view_as_complex(ac[0]);
  NABLA_CHECK(DTypeError, x.dtype() == DType::f32 || x.dtype() == DType::f64,
              "view_as_complex: expected a float32 or float64 tensor, got ", x.dtype(), " ", x.sizes());
  NABLA_CHECK(ShapeError, x.dim() > 0 && x.sizes().back() == 2,
              "view_as_complex: the last dim must have size 2 (real, imaginary), got shape ", x.sizes());
  NABLA_CHECK(ShapeError, x.strides().back() == 1, "view_as_complex: the last dim must have stride 1, got strides ",
              x.strides(), " (call contiguous() first)");
  Shape sizes(x.sizes().begin(), x.sizes().end() - 1), strides(x.strides().begin(), x.strides().end() - 1);
  for (size_t i = 0; i < strides.size(); ++i)
    NABLA_CHECK(ShapeError, strides[i] % 2 == 0 || sizes[i] == 1,
                "view_as_complex: every stride but the last must be even, got strides ", x.strides(),
                " (call contiguous() first)");
  NABLA_CHECK(ShapeError, x.storage_offset() % 2 == 0, "view_as_complex: the storage offset must be even, got ",
              x.storage_offset(), " (call contiguous() first)");
  for (auto& s : strides) s /= 2;
  Tensor out =
      reinterpret_view(x, to_complex_dtype(x.dtype()), std::move(sizes), std::move(strides), x.storage_offset() / 2);
  if (autograd::needs_grad(x))
    autograd::record("ViewAsComplexBackward", {&x}, {&out},
                     [](Node&, GradList& grads) { return GradList{view_as_real(grads[0])}; });
  return out;
}

Tensor real(const Tensor& z) {
  NABLA_CHECK(ValueError, z.defined(), "real: input tensor is undefined");
  return z.is_complex() ? view_as_real(z).select(-1, 0) : z;
}

Tensor imag(const Tensor& z) {
  NABLA_CHECK(ValueError, z.defined(), "imag: input tensor is undefined");
  NABLA_CHECK(DTypeError, z.is_complex(), "imag: not defined for tensors of a real dtype, got ", z.dtype(),
              " (the imaginary part of a real tensor is zero: zeros_like(x))");
  return view_as_real(z).select(-1, 1);
}

Tensor conj(const Tensor& z) {
  NABLA_CHECK(ValueError, z.defined(), "conj: input tensor is undefined");
  if (!z.is_complex()) return z;
  Tensor r = view_as_real(z);
  return from_parts(r.select(-1, 0), neg(r.select(-1, 1)));
}

Tensor angle(const Tensor& z) {
  NABLA_CHECK(ValueError, z.defined(), "angle: input tensor is undefined");
  if (z.is_complex()) {
    Tensor r = view_as_real(z);
    return atan2(r.select(-1, 1), r.select(-1, 0));
  }
  NABLA_CHECK(DTypeError, z.dtype() != DType::boolean, "angle: not defined for bool tensors");
  Tensor x = is_floating(z.dtype()) ? z.detach() : z.to(DType::f32);
  // 0 or pi, NaN kept; no gradient flows to a real input (PyTorch's zeros).
  Tensor out = where(lt(x, 0), full_like(x, std::numbers::pi), zeros_like(x));
  out = where(isnan(x), x, out);
  if (autograd::needs_grad(z)) {
    autograd::record("AngleBackward", {&z}, {&out},
                     [](Node&, GradList& grads) { return GradList{zeros_like(grads[0])}; });
  }
  return out;
}

namespace {
void check_part_pair(const char* op, const Tensor& a, const Tensor& b, const char* an, const char* bn) {
  NABLA_CHECK(ValueError, a.defined() && b.defined(), op, ": input tensor is undefined");
  NABLA_CHECK(DTypeError, (a.dtype() == DType::f32 || a.dtype() == DType::f64) && a.dtype() == b.dtype(), op,
              ": expected ", an, " and ", bn, " of one dtype, float32 or float64, got ", a.dtype(), " and ", b.dtype());
}
}  // namespace

Tensor polar(const Tensor& abs, const Tensor& angle) {
  if (auto ac = autocast_internal::cast<OpId::polar>(abs, angle)) [[unlikely]]
    return polar(ac[0], ac[1]);
  check_part_pair("polar", abs, angle, "abs", "angle");
  return from_parts(abs * cos(angle), abs * sin(angle));
}

Tensor complex(const Tensor& re, const Tensor& im) {
  check_part_pair("complex", re, im, "real", "imag");
  return from_parts(re, im);
}

Tensor Tensor::real() const { return nabla::real(*this); }
Tensor Tensor::imag() const { return nabla::imag(*this); }
Tensor Tensor::conj() const { return nabla::conj(*this); }
Tensor Tensor::angle() const { return nabla::angle(*this); }

// ---- elementwise ops on complex operands -------------------------------------------------------
namespace internal {

Tensor complex_binary(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha) {
  const char* name = op_name(op);
  NABLA_CHECK(ValueError, a.defined() && b.defined(), name, ": input tensor is undefined");
  const DType out_dt = to_complex_dtype(result_type(a, b)), rdt = to_real_dtype(out_dt);
  Parts x = parts_of(a, rdt), y = parts_of(b, rdt);
  const bool scaled = alpha.to_double() != 1.0;
  switch (op) {
    case BinaryOp::add:
    case BinaryOp::sub: {
      Tensor yre = scaled ? y.re * alpha : y.re, yim = y.im.defined() && scaled ? y.im * alpha : y.im;
      if (op == BinaryOp::sub) yre = neg(yre), yim = neg_or_undef(yim);
      return from_parts(add(x.re, yre), add_parts(x.im, yim));
    }
    case BinaryOp::mul: {
      // (xr + i xi)(yr + i yi) = (xr yr - xi yi) + i (xr yi + xi yr)
      Tensor re = x.re * y.re, im;
      if (x.im.defined() && y.im.defined()) re = re - x.im * y.im;
      if (y.im.defined()) im = x.re * y.im;
      if (x.im.defined()) im = add_parts(im, x.im * y.re);
      return from_parts(re, im);
    }
    case BinaryOp::div: {
      if (!y.im.defined()) return from_parts(x.re / y.re, x.im.defined() ? x.im / y.re : Tensor());
      // x / y = x conj(y) / |y|^2
      Tensor d = y.re * y.re + y.im * y.im;
      Tensor re = x.re * y.re, im = neg(x.re * y.im);
      if (x.im.defined()) re = re + x.im * y.im, im = im + x.im * y.re;
      return from_parts(re / d, im / d);
    }
    case BinaryOp::pow: {
      // a^b = exp(b log a), with 0^b = 0 for b of positive real part and 0^0 = 1 (as PyTorch).
      Tensor za = a.is_complex() ? a : from_parts(x.re, Tensor());
      Tensor zb = b.is_complex() ? b : from_parts(y.re, Tensor());
      if (za.dtype() != out_dt) za = za.to(out_dt);
      if (zb.dtype() != out_dt) zb = zb.to(out_dt);
      Tensor r = complex_unary(UnaryOp::exp, complex_binary(BinaryOp::mul, zb, complex_unary(UnaryOp::log, za), 1));
      Tensor ra = view_as_real(za), rb = view_as_real(zb);
      Tensor a_zero = logical_and(eq(ra.select(-1, 0), 0), eq(ra.select(-1, 1), 0));
      Tensor b_zero = logical_and(eq(rb.select(-1, 0), 0), eq(rb.select(-1, 1), 0));
      Tensor rr = view_as_real(r);
      Tensor re =
          where(a_zero, where(b_zero, ones_like(rr.select(-1, 0)), zeros_like(rr.select(-1, 0))), rr.select(-1, 0));
      Tensor im = where(a_zero, zeros_like(rr.select(-1, 1)), rr.select(-1, 1));
      return from_parts(re, im);
    }
    case BinaryOp::eq:
    case BinaryOp::ne: {
      Tensor same = eq(x.re, y.re);
      Tensor zi = x.im.defined() ? x.im : zeros_like(x.re), wi = y.im.defined() ? y.im : zeros_like(y.re);
      same = logical_and(same, eq(zi, wi));
      return op == BinaryOp::eq ? same : logical_not(same);
    }
    default: no_complex_form(name, a.dtype(), b.dtype());
  }
}

Tensor complex_unary(UnaryOp op, const Tensor& z) {
  const char* name = op_name(op);
  Tensor r = view_as_real(z);
  Tensor re = r.select(-1, 0), im = r.select(-1, 1);
  switch (op) {
    case UnaryOp::neg: return from_parts(neg(re), neg(im));
    case UnaryOp::abs: return complex_abs(z);
    case UnaryOp::square: return complex_binary(BinaryOp::mul, z, z, 1);
    case UnaryOp::reciprocal: {
      Tensor d = re * re + im * im;
      return from_parts(re / d, neg(im) / d);
    }
    case UnaryOp::exp: {
      Tensor m = exp(re);
      return from_parts(m * cos(im), m * sin(im));
    }
    case UnaryOp::log: return from_parts(log(re * re + im * im) * 0.5, atan2(im, re));
    case UnaryOp::sqrt: {
      Tensor m = sqrt(complex_abs(z)), t = atan2(im, re) * 0.5;
      return from_parts(m * cos(t), m * sin(t));
    }
    case UnaryOp::rsqrt: return complex_unary(UnaryOp::reciprocal, complex_unary(UnaryOp::sqrt, z));
    case UnaryOp::sin: return from_parts(sin(re) * cosh(im), cos(re) * sinh(im));
    case UnaryOp::cos: return from_parts(cos(re) * cosh(im), neg(sin(re) * sinh(im)));
    case UnaryOp::sign: {
      // PyTorch's sgn: z / |z|, 0 at 0.
      Tensor m = complex_abs(z);
      Tensor inv = where(eq(m, 0), zeros_like(m), reciprocal(m));
      return from_parts(re * inv, im * inv);
    }
    case UnaryOp::isnan: return logical_or(isnan(re), isnan(im));
    case UnaryOp::isinf: return logical_or(isinf(re), isinf(im));
    case UnaryOp::isfinite: return logical_and(isfinite(re), isfinite(im));
    default: break;
  }
  throw NotImplemented(internal::str(name, ": not implemented for complex tensors (got ", z.dtype(), " ", z.sizes(),
                                     "); complex tensors support neg, abs, square, reciprocal, exp, log, sqrt, "
                                     "rsqrt, sin, cos, sign (z / |z|), isnan, isinf and isfinite"));
}

}  // namespace internal
}  // namespace nabla
