// Elementwise op front-ends: type promotion, broadcasting, output allocation, kernel dispatch, and
// the backward formula of each op (generated from core/elementwise_ops.h for unary ops).
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <string>

#include "core/autocast.h"
#include "core/impl.h"
#include "core/trace.h"

namespace nabla {

using autograd::GradList;
using autograd::Node;
using autograd::save;
using autograd::save_output;
using autograd::sum_to;

const char* op_name(UnaryOp op) {
  switch (op) {
#define NABLA_NAME(name, ...) \
  case UnaryOp::name: return #name;
    NABLA_UNARY_FLOAT_OPS(NABLA_NAME)
    NABLA_UNARY_SAME_OPS(NABLA_NAME)
    NABLA_UNARY_PARAM_OPS(NABLA_NAME)
    NABLA_UNARY_BOOL_OPS(NABLA_NAME)
#undef NABLA_NAME
    case UnaryOp::clamp: return "clamp";
  }
  return "unary";
}

const char* op_name(BinaryOp op) {
  switch (op) {
#define NABLA_NAME(name, ...) \
  case BinaryOp::name: return #name;
    NABLA_BINARY_ARITH_OPS(NABLA_NAME)
    NABLA_BINARY_BOOL_OPS(NABLA_NAME)
#undef NABLA_NAME
  }
  return "binary";
}

namespace internal {

// "leaky_relu" -> "LeakyReluBackward"; computed once per op.
const char* backward_name(const char* op) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<std::string>> names;
  std::lock_guard lock(mu);
  std::string s;
  bool up = true;
  for (const char* c = op; *c; ++c) {
    if (*c == '_') {
      up = true;
      continue;
    }
    s += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(*c))) : *c;
    up = false;
  }
  s += "Backward";
  for (auto& n : names)
    if (*n == s) return n->c_str();
  names.push_back(std::make_unique<std::string>(s));
  return names.back()->c_str();
}

// A stride-0 view of t broadcast to `shape` (no autograd; kernels read it).
Tensor broadcast_view(const Tensor& t, IntList shape) {
  if (IntList(t.sizes()).size() == shape.size() && std::equal(shape.begin(), shape.end(), t.sizes().begin())) return t;
  size_t nd = shape.size(), td = t.sizes().size();
  Shape strides(nd, 0);
  for (size_t i = 0; i < td; ++i) {
    size_t j = nd - td + i;
    strides[j] = t.sizes()[i] == 1 ? 0 : t.strides()[i];
  }
  Tensor v = make_view(t, Shape(shape.begin(), shape.end()), std::move(strides), t.storage_offset());
  v.impl()->is_wrapped_number = t.impl()->is_wrapped_number;
  return v;
}

// Converts an operand to the compute dtype and, when the output lives on a GPU, moves a 0-dim
// CPU operand there (wrapped numbers stay: the CUDA backend reads them on the host).
static Tensor prepare_operand(const Tensor& t, DType dt, Device dev) {
  if (t.impl()->is_wrapped_number) {
    if (t.dtype() == dt) return t;
    Tensor w = wrap_scalar(t.item(), dt);
    return w;
  }
  if (t.dtype() == dt && t.device() == dev) return t;  // the common case: no guard, no copy
  autograd::NoGradGuard ng;
  Tensor r = t.dtype() == dt ? t : t.to(dt);
  if (r.device() != dev) r = r.to(dev);
  return r;
}

static Device output_device(const char* op, const Tensor& a, const Tensor& b) {
  const Tensor* pick = a.impl()->is_wrapped_number ? &b : &a;
  const Tensor* other = pick == &a ? &b : &a;
  if (!other->impl()->is_wrapped_number && other->device() != pick->device()) {
    // A 0-dim CPU tensor may join a tensor on another device, as in PyTorch.
    if (other->dim() == 0 && other->is_cpu()) return pick->device();
    if (pick->dim() == 0 && pick->is_cpu()) return other->device();
    check_same_device(op, {&a, &b});
  }
  return pick->device();
}

Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha, DType compute) {
  const char* name = op_name(op);
  Device dev = output_device(name, a, b);
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  DType out_dt = is_bool_result(op) ? DType::boolean : compute;
  Tensor out = make_empty(shape, out_dt, dev);
  Tensor ac = prepare_operand(a, compute, dev), bc = prepare_operand(b, compute, dev);
  backend_for(dev).binary(op, broadcast_view(ac, shape), broadcast_view(bc, shape), out, alpha);
  return out;
}

// The `kind` column of NABLA_BINARY_ARITH_OPS.
enum class BinaryKind { arith, to_float, float_only, intdiv, predicate };
static BinaryKind binary_kind(BinaryOp op) {
  switch (op) {
#define NABLA_KIND(name, kind, ...) \
  case BinaryOp::name: return BinaryKind::kind;
    NABLA_BINARY_ARITH_OPS(NABLA_KIND)
#undef NABLA_KIND
    default: return BinaryKind::predicate;
  }
}

static DType compute_dtype(BinaryOp op, const Tensor& a, const Tensor& b) {
  DType dt = result_type(a, b);
  if (binary_kind(op) == BinaryKind::to_float && !is_floating(dt)) dt = DType::f32;
  return dt;
}

}  // namespace internal

namespace {

using internal::binary_kernel;
using internal::make_empty;

// ---- unary front-ends ---------------------------------------------------------------------------
enum class UnaryKind { floating, same, predicate };
// What a same-dtype op does with a bool input (the last column of NABLA_UNARY_SAME_OPS).
enum class OnBool { reject, keep, int64 };

// What a float op does with an integer or bool input (the last column of NABLA_UNARY_FLOAT_OPS).
enum class OnInt { promote, reject, ints };

Tensor unary_kernel(UnaryOp op, const Tensor& x, UnaryKind kind, double p0 = 0, double p1 = 0,
                    OnInt on_int = OnInt::promote) {
  const char* name = op_name(op);
  if (autocast_internal::active()) [[unlikely]]
    if (auto ac = autocast_internal::cast_inputs(op_id(op), {&x})) return unary_kernel(op, ac[0], kind, p0, p1, on_int);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced(t, op_id(op), {x}, UnaryAttrs{p0, p1},
                         [&] { return unary_kernel(op, x, kind, p0, p1, on_int); });
  NABLA_CHECK(ValueError, x.defined(), name, ": input tensor is undefined");
  DType dt = x.dtype();
  if (kind == UnaryKind::floating && !is_floating(dt)) {
    NABLA_CHECK(
        DTypeError, on_int == OnInt::promote || (on_int == OnInt::ints && dt != DType::boolean), name,
        on_int == OnInt::ints ? ": not defined for bool tensors, got " : ": defined for floating tensors only, got ",
        dt, " (convert with .to(kFloat32) first)");
    dt = DType::f32;
  }
  if (kind == UnaryKind::same && dt == DType::boolean)
    throw DTypeError(internal::str(name,
                                   ": not supported for bool tensors (use logical_not for masks, or convert "
                                   "with .to(kInt64) first)"));
  Tensor xin = x;
  if (dt != x.dtype() && kind != UnaryKind::predicate) {
    autograd::NoGradGuard ng;
    xin = x.to(dt);
  }
  Tensor out = make_empty(x.sizes(), kind == UnaryKind::predicate ? DType::boolean : dt, x.device());
  backend_for(x.device()).unary(op, xin, out, p0, p1);
  return out;
}

// A same-dtype op on a bool tensor, as PyTorch: sign returns the input, square computes in int64.
Tensor unary_on_bool(UnaryOp op, const Tensor& x, OnBool on_bool, Tensor (*f)(const Tensor&)) {
  if (on_bool == OnBool::keep) return x.clone();
  if (on_bool == OnBool::int64) return f(x.to(DType::i64));
  return unary_kernel(op, x, UnaryKind::same);  // throws the error
}

Tensor gelu_tanh_grad(const Tensor& x, const Tensor& g) {
  // d/dx 0.5 x (1 + tanh(u)), u = k (x + c x^3)
  const double k = 0.7978845608028654, c = 0.044715;
  Tensor u = (x + x * x * x * c) * k;
  Tensor t = tanh(u);
  return g * ((t + 1) * 0.5 + x * 0.5 * (1 - t * t) * (x * x * (3 * c) + 1) * k);
}

Tensor mish_grad(const Tensor& x, const Tensor& g) {
  // d/dx x tanh(softplus(x)) = tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2)
  Tensor t = tanh(softplus(x));
  return g * (t + x * sigmoid(x) * (1 - t * t));
}

template <class... A>
void ignore_unused(const A&...) {}

// What a unary op's backward reads (the `saves` column of the op lists).
enum class Saves { x, y, none };

// The one tensor a unary op saves for its backward: its input, its output, or nothing.
autograd::SavedTensor save_for(Saves what, const Tensor& x, const Tensor& y) {
  if (what == Saves::x) return save(x);
  if (what == Saves::y) return save_output(y);
  return {};
}

}  // namespace

// The backward of a generated unary op: `x` or `y` holds the saved tensor (the other is undefined).
// The trailing arguments are extra captures (the parameters p0, p1).
#define NABLA_UNARY_BACKWARD(name, saves, bwd, ...)                                                \
  if (autograd::needs_grad(x)) {                                                                   \
    static const char* bname = internal::backward_name(#name);                                     \
    auto s = save_for(Saves::saves, x, y);                                                         \
    autograd::record(bname, {&x}, {&y}, [s __VA_OPT__(, ) __VA_ARGS__](Node& n, GradList& grads) { \
      __VA_OPT__(ignore_unused(__VA_ARGS__);)                                                      \
      Tensor x, y;                                                                                 \
      if (Saves::saves == Saves::x) x = s.unpack(n);                                               \
      if (Saves::saves == Saves::y) y = s.unpack(n);                                               \
      const Tensor& g = grads[0];                                                                  \
      return GradList{bwd};                                                                        \
    });                                                                                            \
  }

#define NABLA_DEFINE_FLOAT(name, fwd, saves, bwd, on_int, ...)                           \
  Tensor name(const Tensor& x) {                                                         \
    if (x.defined() && x.is_complex()) return internal::complex_unary(UnaryOp::name, x); \
    Tensor y = unary_kernel(UnaryOp::name, x, UnaryKind::floating, 0, 0, OnInt::on_int); \
    NABLA_UNARY_BACKWARD(name, saves, bwd, )                                             \
    return y;                                                                            \
  }
#define NABLA_DEFINE_SAME(name, fwd, saves, bwd, on_bool, ...)                                                     \
  Tensor name(const Tensor& x) {                                                                                   \
    if (x.defined() && x.dtype() == DType::boolean) return unary_on_bool(UnaryOp::name, x, OnBool::on_bool, name); \
    if (x.defined() && x.is_complex()) return internal::complex_unary(UnaryOp::name, x);                           \
    Tensor y = unary_kernel(UnaryOp::name, x, UnaryKind::same);                                                    \
    NABLA_UNARY_BACKWARD(name, saves, bwd, )                                                                       \
    return y;                                                                                                      \
  }
NABLA_UNARY_FLOAT_OPS(NABLA_DEFINE_FLOAT)
NABLA_UNARY_SAME_OPS(NABLA_DEFINE_SAME)
#undef NABLA_DEFINE_FLOAT
#undef NABLA_DEFINE_SAME

namespace internal {
#define NABLA_DEFINE_PARAM(name, fwd, saves, bwd, on_int, ...)                             \
  Tensor name(const Tensor& x, double p0, double p1) {                                     \
    Tensor y = unary_kernel(UnaryOp::name, x, UnaryKind::floating, p0, p1, OnInt::on_int); \
    NABLA_UNARY_BACKWARD(name, saves, bwd, p0, p1)                                         \
    return y;                                                                              \
  }
NABLA_UNARY_PARAM_OPS(NABLA_DEFINE_PARAM)
#undef NABLA_DEFINE_PARAM
}  // namespace internal
#undef NABLA_UNARY_BACKWARD

#define NABLA_DEFINE_PREDICATE(name, fwd, ...)                                           \
  Tensor name(const Tensor& x) {                                                         \
    if (x.defined() && x.is_complex()) return internal::complex_unary(UnaryOp::name, x); \
    return unary_kernel(UnaryOp::name, x, UnaryKind::predicate);                         \
  }
NABLA_UNARY_BOOL_OPS(NABLA_DEFINE_PREDICATE)
#undef NABLA_DEFINE_PREDICATE

Tensor leaky_relu(const Tensor& x, double slope) { return internal::leaky_relu(x, slope, 0); }
Tensor elu(const Tensor& x, double alpha) { return internal::elu(x, alpha, 0); }
Tensor softplus(const Tensor& x, double beta, double threshold) {
  NABLA_CHECK(ValueError, beta != 0, "softplus: beta must be nonzero");
  return internal::softplus(x, beta, threshold);
}
Tensor hardtanh(const Tensor& x, double lo, double hi) {
  NABLA_CHECK(ValueError, lo <= hi, "hardtanh: min_val (", lo, ") must not exceed max_val (", hi, ")");
  // On integer tensors hardtanh is clamp, as in PyTorch (integral bounds keep the dtype).
  if (x.defined() && is_integral(x.dtype()) && x.dtype() != DType::boolean) {
    if (lo == std::trunc(lo) && hi == std::trunc(hi) && std::abs(lo) < 9e18 && std::abs(hi) < 9e18)
      return clamp(x, Scalar(static_cast<int64_t>(lo)), Scalar(static_cast<int64_t>(hi)));
    return clamp(x, lo, hi);
  }
  return internal::hardtanh(x, lo, hi);
}
Tensor relu6(const Tensor& x) { return hardtanh(x, 0, 6); }
Tensor gelu(const Tensor& x, const std::string& approximate) {
  if (approximate == "none") return gelu(x);
  if (approximate == "tanh") return gelu_tanh(x);
  throw ValueError(internal::str("gelu: approximate must be 'none' or 'tanh', got '", approximate, "'"));
}

Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  NABLA_CHECK(ValueError, lo || hi, "clamp: at least one of min and max must be given");
  DType dt = x.dtype();
  if (lo) dt = internal::promote_with_scalar(dt, *lo);
  if (hi) dt = internal::promote_with_scalar(dt, *hi);
  const double inf = std::numeric_limits<double>::infinity();
  double p0 = lo ? lo->to_double() : -inf, p1 = hi ? hi->to_double() : inf;
  Tensor xin = x;
  if (dt != x.dtype()) xin = x.to(dt);
  Tensor y;
  if (std::isnan(p0) || std::isnan(p1)) {
    // A NaN bound makes every element NaN (and every gradient 0), as PyTorch.
    y = full(x.sizes(), std::numeric_limits<double>::quiet_NaN(), dtype(dt).device(x.device()));
  } else {
    y = unary_kernel(UnaryOp::clamp, xin, UnaryKind::same, p0, p1);
  }
  if (autograd::needs_grad(xin)) {
    autograd::record("ClampBackward", {&xin}, {&y}, [sx = save(xin), p0, p1](Node& n, GradList& grads) {
      Tensor x = sx.unpack(n);
      return GradList{where(logical_and(x >= p0, x <= p1), grads[0], zeros_like(grads[0]))};
    });
  }
  return y;
}
Tensor clamp_min(const Tensor& x, Scalar lo) { return clamp(x, lo, std::nullopt); }
Tensor clamp_max(const Tensor& x, Scalar hi) { return clamp(x, std::nullopt, hi); }

// A composite of where(): the selections below are PyTorch's clamp_backward / clamp_backward_min_max
// conditions, so each element's gradient goes to the operand whose value it took.
Tensor clamp(const Tensor& x, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  const bool has_lo = lo && lo->defined(), has_hi = hi && hi->defined();
  NABLA_CHECK(ValueError, has_lo || has_hi, "clamp: at least one of min and max must be given");
  Tensor y;
  if (has_lo && has_hi) {
    const Tensor &a = *lo, &b = *hi;
    y = where(logical_or(x > b, b < a), b, where(logical_and(x < a, a < b), a, x));
  } else if (has_lo) {
    y = where(x < *lo, *lo, x);
  } else {
    y = where(x > *hi, *hi, x);
  }
  if (is_floating(y.dtype())) {  // NaN anywhere in x, min or max propagates, as in PyTorch
    Tensor nan = isnan(x);
    if (has_lo) nan = logical_or(nan, isnan(*lo));
    if (has_hi) nan = logical_or(nan, isnan(*hi));
    y = where(nan, std::numeric_limits<double>::quiet_NaN(), y);
  }
  return y;
}
Tensor clamp_min(const Tensor& x, const Tensor& lo) { return clamp(x, lo, std::nullopt); }
Tensor clamp_max(const Tensor& x, const Tensor& hi) { return clamp(x, std::nullopt, hi); }

// ---- binary front-ends --------------------------------------------------------------------------
namespace {

// Gradient for an operand: summed over broadcast dims and cast back to its dtype.
Tensor grad_for(const Tensor& g, const Shape& shape, DType dtype) {
  Tensor r = sum_to(g, shape);
  return r.dtype() == dtype ? r : r.to(dtype);
}

// add/sub's alpha must fit the result's category, as in PyTorch: no floating alpha for an integer
// result (it would be truncated), no bool alpha for a non-bool one.
void check_alpha(BinaryOp op, DType dt, Scalar alpha) {
  NABLA_CHECK(ValueError, !(is_integral(dt) && alpha.is_floating()), op_name(op), ": alpha ", alpha.to_double(),
              " is a floating-point number but the result is ", dt, "; for integer tensors alpha must be an integer");
  NABLA_CHECK(ValueError, !(alpha.is_bool() && dt != DType::boolean), op_name(op),
              ": a bool alpha is only allowed for bool results, got ", dt);
}

// An op whose `bool` column is reject_operand (sub) takes no bool operand, as in PyTorch (it is
// usually a mask inversion). `b` is the dtype of a Scalar operand too, before it is wrapped.
void check_bool_operands(BinaryOp op, DType a, DType b) {
  if (bool_rule(op) != BoolRule::reject_operand) return;
  NABLA_CHECK(DTypeError, a != DType::boolean && b != DType::boolean, op_name(op),
              ": not supported with a bool operand (", a, ", ", b,
              "); to invert a mask use ~mask or logical_not(mask)");
}

// The checks every binary op makes before computing: undefined operands, alpha, bool operands of
// an op that rejects them (sub), integer division by zero.
DType check_binary(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha) {
  const char* name = op_name(op);
  NABLA_CHECK(ValueError, a.defined() && b.defined(), name, ": input tensor is undefined");
  DType dt = internal::compute_dtype(op, a, b);
  check_alpha(op, dt, alpha);
  check_bool_operands(op, a.dtype(), b.dtype());
  NABLA_CHECK(DTypeError, internal::binary_kind(op) != internal::BinaryKind::float_only || is_floating(dt), name,
              ": defined for floating tensors only, got ", a.dtype(), " and ", b.dtype(),
              " (convert with .to(kFloat32) first)");
  if (internal::binary_kind(op) == internal::BinaryKind::intdiv && is_integral(dt) && b.numel() > 0) {
    autograd::NoGradGuard ng;
    NABLA_CHECK(ValueError, !any(eq(b, 0)).item<bool>(), name, ": integer division by zero");
  }
  return dt;
}

// What a binary op's gradient formulas read (the reads_a / reads_b columns), as bits.
namespace reads {
enum : uint8_t { none = 0, a = 1, b = 2, y = 4, ab = 3, ay = 5, by = 6, aby = 7 };
}

// Whether the gradients of a binary op read its first operand's value (the reads_a / reads_b
// columns; ops outside the arithmetic list answer yes).
constexpr bool grads_read_a(BinaryOp op) {
  switch (op) {
#define NABLA_BINARY_READS_A(name, kind, fwd, rule, reads_a, reads_b, grad_a, grad_b, ...) \
  case BinaryOp::name: return ((reads::reads_a | reads::reads_b) & reads::a) != 0;
    NABLA_BINARY_ARITH_OPS(NABLA_BINARY_READS_A)
#undef NABLA_BINARY_READS_A
    default: return true;
  }
}

// Records the backward of a generated binary op: the gradient formulas of its list line, summed
// over broadcast dims and cast to each operand's dtype. Only what the needed gradients read is
// saved, so an in-place change of a tensor the backward will not read is no error.
#define NABLA_BINARY_RECORD(name, kind, fwd, rule, reads_a, reads_b, grad_a, grad_b, ...)                         \
  case BinaryOp::name: {                                                                                          \
    const uint8_t keep =                                                                                          \
        (autograd::needs_grad(a_in) ? reads::reads_a : 0) | (autograd::needs_grad(b_in) ? reads::reads_b : 0);    \
    static const char* bname = internal::backward_name(#name);                                                    \
    autograd::record(bname, {&a_in, &b_in}, {&out},                                                               \
                     [sa, da, sb, db, alpha, xa = keep & reads::a ? save(a_in) : autograd::SavedTensor{},         \
                      xb = keep & reads::b ? save(b_in) : autograd::SavedTensor{},                                \
                      xy = keep & reads::y ? save_output(out) : autograd::SavedTensor{}](Node& n, GradList& gl) { \
                       Tensor a, b, y;                                                                            \
                       if (xa.defined()) a = xa.unpack(n);                                                        \
                       if (xb.defined()) b = xb.unpack(n);                                                        \
                       if (xy.defined()) y = xy.unpack(n);                                                        \
                       const Tensor& g = gl[0];                                                                   \
                       ignore_unused(alpha);                                                                      \
                       GradList r(2);                                                                             \
                       if (n.needs_input_grad(0)) r[0] = grad_for(grad_a, sa, da);                                \
                       if (n.needs_input_grad(1)) r[1] = grad_for(grad_b, sb, db);                                \
                       return r;                                                                                  \
                     });                                                                                          \
    break;                                                                                                        \
  }

// Every binary op: checks, type promotion, broadcasting, the kernel, and the backward from the op
// list (core/elementwise_ops.h).
Tensor binary(BinaryOp op, const Tensor& a_in, const Tensor& b_in, Scalar alpha_s = 1) {
  if (autocast_internal::active()) [[unlikely]]
    if (auto ac = autocast_internal::cast_inputs(op_id(op), {&a_in, &b_in})) return binary(op, ac[0], ac[1], alpha_s);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced(t, op_id(op), {a_in, b_in}, BinaryAttrs{alpha_s.to_double()},
                         [&] { return binary(op, a_in, b_in, alpha_s); });
  if ((a_in.defined() && a_in.is_complex()) || (b_in.defined() && b_in.is_complex())) [[unlikely]]
    return internal::complex_binary(op, a_in, b_in, alpha_s);
  DType dt = check_binary(op, a_in, b_in, alpha_s);
  Tensor out = binary_kernel(op, a_in, b_in, alpha_s, dt);
  if (is_bool_result(op) || !autograd::needs_grad(a_in, b_in)) return out;
  NABLA_CHECK(AutogradError, is_floating(dt), op_name(op), ": gradients need a floating dtype, got ", dt);
  const Shape sa = a_in.sizes(), sb = b_in.sizes();
  const DType da = a_in.dtype(), db = b_in.dtype();
  const double alpha = alpha_s.to_double();
  switch (op) {
    NABLA_BINARY_ARITH_OPS(NABLA_BINARY_RECORD)
    default: break;
  }
  return out;
}
#undef NABLA_BINARY_RECORD

Tensor scalar_operand(const Tensor& t, Scalar s) {
  return internal::wrap_scalar(s, internal::promote_with_scalar(t.dtype(), s));
}

// In place: self = op(self, other). The result is computed in the promoted dtype and must be
// representable in self's dtype (no float into an int tensor), as in PyTorch.
Tensor& binary_(BinaryOp op, Tensor& self, const Tensor& other, Scalar alpha = 1) {
  const char* name = op_name(op);
  if ((self.defined() && self.is_complex()) || (other.defined() && other.is_complex())) [[unlikely]] {
    NABLA_CHECK(DTypeError, self.is_complex(), name, "_: result type ", promote_types(self.dtype(), other.dtype()),
                " cannot be stored in a tensor of dtype ", self.dtype());
    internal::check_inplace(self, name);
    self.copy_(internal::complex_binary(op, self, other, alpha));
    return self;
  }
  DType dt = check_binary(op, self, other, alpha);
  internal::check_inplace(self, name);
  NABLA_CHECK(DTypeError,
              !(is_floating(dt) && !is_floating(self.dtype())) && !(is_integral(dt) && self.dtype() == DType::boolean),
              name, "_: result type ", dt, " cannot be stored in a tensor of dtype ", self.dtype());
  Shape shape = broadcast_shapes(self.sizes(), other.sizes(), name);
  NABLA_CHECK(ShapeError, shape == self.sizes(), name, "_: the result of shape ", shape,
              " does not fit the in-place destination of shape ", self.sizes());
  bool grad = autograd::needs_grad(self, other);
  if (!grad && dt == self.dtype() && !self.impl()->is_wrapped_number) {
    Device dev = internal::output_device(name, self, other);
    NABLA_CHECK(DeviceError, dev == self.device(), name, "_: cannot write a result on ", dev, " into a tensor on ",
                self.device());
    Tensor oc = internal::broadcast_view(internal::prepare_operand(other, dt, dev), shape);
    if (internal::partial_overlap(self, oc)) {  // e.g. x[1:] += x[:-1]: read a copy of the old values
      autograd::NoGradGuard ng;
      oc = oc.clone();
    }
    backend_for(dev).binary(op, self, oc, self, alpha);
    internal::bump_version(self);
    return self;
  }
  // Compute out of place, then copy back; copy_ records the in-place history for autograd. A
  // backward formula that reads self's old value reads a clone, not the overwritten memory.
  Tensor original = grads_read_a(op) ? self.clone() : self;
  Tensor result = binary(op, original, other, alpha);
  self.copy_(result);
  return self;
}

}  // namespace

// The two-tensor form of every arithmetic op in the list: hypot(a, b), atan2(a, b), ...
#define NABLA_DEFINE_BINARY(name, ...) \
  Tensor name(const Tensor& a, const Tensor& b) { return binary(BinaryOp::name, a, b); }
NABLA_BINARY_ARITH_OPS(NABLA_DEFINE_BINARY)
#undef NABLA_DEFINE_BINARY

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) { return binary(BinaryOp::add, a, b, alpha); }
Tensor add(const Tensor& a, Scalar b, Scalar alpha) { return binary(BinaryOp::add, a, scalar_operand(a, b), alpha); }
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) { return binary(BinaryOp::sub, a, b, alpha); }
Tensor sub(const Tensor& a, Scalar b, Scalar alpha) {
  check_bool_operands(BinaryOp::sub, a.dtype(), b.dtype());
  return binary(BinaryOp::sub, a, scalar_operand(a, b), alpha);
}
Tensor sub(Scalar a, const Tensor& b) {
  check_bool_operands(BinaryOp::sub, a.dtype(), b.dtype());
  return binary(BinaryOp::sub, scalar_operand(b, a), b);
}
Tensor mul(const Tensor& a, Scalar b) { return binary(BinaryOp::mul, a, scalar_operand(a, b)); }
Tensor div(const Tensor& a, Scalar b) { return binary(BinaryOp::div, a, scalar_operand(a, b)); }
Tensor div(Scalar a, const Tensor& b) { return binary(BinaryOp::div, scalar_operand(b, a), b); }
// An integer tensor to a negative integer (scalar) power is an error, as in PyTorch.
static void check_integer_power(DType base, Scalar e) {
  NABLA_CHECK(ValueError, !(is_integral(base) && base != DType::boolean && e.is_integral() && e.to_double() < 0),
              "pow: ", base, " tensor to the negative integer power ", e.to_double(),
              ": integers to negative integer powers are not allowed (convert the base with .to(kFloat32))");
}
Tensor pow(const Tensor& a, Scalar e) {
  if (auto ac = autocast_internal::cast<OpId::pow_scalar>(a)) [[unlikely]]
    return pow(ac[0], e);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::pow_scalar>(t, {a}, {.value = e.to_double()}, [&] { return pow(a, e); });
  if (a.defined() && a.is_complex()) [[unlikely]]
    return internal::complex_binary(BinaryOp::pow, a, internal::wrap_scalar(e, a.dtype()), 1);
  DType dt = internal::promote_with_scalar(a.dtype(), e);
  check_integer_power(dt, e);
  // Shortcuts only where they keep the result dtype (int ** 2.0 is float32, bool ** 2 int64).
  if ((e.is_floating() || e.is_integral()) && dt == a.dtype() && dt != DType::boolean) {
    double v = e.to_double();
    if (v == 1) return a * 1;
    if (v == 2 && !autograd::needs_grad(a)) return square(a);
  }
  Tensor ac = a.dtype() == dt ? a : a.to(dt);
  Tensor y = binary_kernel(BinaryOp::pow, ac, internal::wrap_scalar(e, dt), 1, dt);
  if (autograd::needs_grad(ac)) {
    double ev = e.to_double();
    autograd::record("PowBackward", {&ac}, {&y}, [sx = save(ac), ev](Node& n, GradList& grads) {
      if (ev == 0) return GradList{zeros_like(grads[0])};
      return GradList{grads[0] * ev * pow(sx.unpack(n), ev - 1)};
    });
  }
  return y;
}
Tensor pow(Scalar base, const Tensor& e) { return binary(BinaryOp::pow, scalar_operand(e, base), e); }
Tensor remainder(const Tensor& a, Scalar b) { return binary(BinaryOp::remainder, a, scalar_operand(a, b)); }
Tensor fmod(const Tensor& a, Scalar b) { return binary(BinaryOp::fmod, a, scalar_operand(a, b)); }

#define NABLA_DEFINE_COMPARE(name, f)                                                    \
  Tensor name(const Tensor& a, const Tensor& b) { return binary(BinaryOp::name, a, b); } \
  Tensor name(const Tensor& a, Scalar b) { return binary(BinaryOp::name, a, scalar_operand(a, b)); }
NABLA_DEFINE_COMPARE(eq, _)
NABLA_DEFINE_COMPARE(ne, _)
NABLA_DEFINE_COMPARE(lt, _)
NABLA_DEFINE_COMPARE(le, _)
NABLA_DEFINE_COMPARE(gt, _)
NABLA_DEFINE_COMPARE(ge, _)
#undef NABLA_DEFINE_COMPARE
Tensor logical_and(const Tensor& a, const Tensor& b) { return binary(BinaryOp::logical_and, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return binary(BinaryOp::logical_or, a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return binary(BinaryOp::logical_xor, a, b); }

static void check_bool_operands(const char* op, const Tensor& a, const Tensor& b) {
  NABLA_CHECK(DTypeError, a.dtype() == DType::boolean && b.dtype() == DType::boolean, "operator", op,
              ": defined for bool tensors (masks) only, got ", a.dtype(), " and ", b.dtype(),
              "; use logical_and/logical_or/logical_xor for other dtypes");
}
Tensor operator&(const Tensor& a, const Tensor& b) {
  check_bool_operands("&", a, b);
  return logical_and(a, b);
}
Tensor operator|(const Tensor& a, const Tensor& b) {
  check_bool_operands("|", a, b);
  return logical_or(a, b);
}
Tensor operator^(const Tensor& a, const Tensor& b) {
  check_bool_operands("^", a, b);
  return logical_xor(a, b);
}
Tensor operator~(const Tensor& a) {
  NABLA_CHECK(DTypeError, a.dtype() == DType::boolean, "operator~: defined for bool tensors (masks) only, got ",
              a.dtype());
  return logical_not(a);
}

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  autograd::NoGradGuard ng;
  DType dt = promote_types(a.dtype(), b.dtype());
  if (!is_floating(dt)) return eq(a, b);
  Tensor af = a.to(dt), bf = b.to(dt);
  // |a - b| <= atol + rtol |b| with a finite difference (so -inf and inf are not close), or equal
  // (equal infinities are), as PyTorch.
  Tensor diff = abs(af - bf);
  Tensor close = logical_and(le(diff, abs(bf) * rtol + atol), isfinite(diff));
  close = logical_or(close, eq(af, bf));
  if (equal_nan) close = logical_or(close, logical_and(isnan(af), isnan(bf)));
  return close;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return all(isclose(a, b, rtol, atol, equal_nan)).item<bool>();
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  autograd::NoGradGuard ng;
  // The CPU has no 16-bit float comparisons: compare the exact float32 values instead (as
  // torch.equal, which accepts float16/bfloat16 on any device).
  auto cpu_half = [](const Tensor& t) { return t.is_cpu() && is_reduced_float(t.dtype()); };
  if (cpu_half(a) || cpu_half(b)) {
    auto up = [&](const Tensor& t) { return cpu_half(t) ? t.to(DType::f32) : t; };
    return all(eq(up(a), up(b))).item<bool>();
  }
  return all(eq(a, b)).item<bool>();
}

// ---- where and composites -----------------------------------------------------------------------
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::where>(t, {cond, a, b}, {}, [&] { return where(cond, a, b); });
  NABLA_CHECK(DTypeError, cond.dtype() == DType::boolean, "where: condition must be a bool tensor, got ", cond.dtype());
  DType dt = internal::result_type(a, b);
  Device dev = internal::output_device("where", a, b);
  Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor out = make_empty(shape, dt, dev);
  Tensor cc = cond.device() == dev ? cond : cond.to(dev);
  Tensor ac = internal::prepare_operand(a, dt, dev), bc = internal::prepare_operand(b, dt, dev);
  if (ac.impl()->is_wrapped_number && dev.is_cuda()) ac = ac.to(dev);
  if (bc.impl()->is_wrapped_number && dev.is_cuda()) bc = bc.to(dev);
  backend_for(dev).where(internal::broadcast_view(cc, shape), internal::broadcast_view(ac, shape),
                         internal::broadcast_view(bc, shape), out);
  if (autograd::needs_grad(a, b)) {
    autograd::record(
        "WhereBackward", {&a, &b}, {&out},
        [c = save(cond), sa = a.sizes(), da = a.dtype(), sb = b.sizes(), db = b.dtype()](Node& n, GradList& grads) {
          Tensor cv = c.unpack(n), zero = zeros_like(grads[0]);
          GradList r(2);
          if (n.needs_input_grad(0)) r[0] = grad_for(where(cv, grads[0], zero), sa, da);
          if (n.needs_input_grad(1)) r[1] = grad_for(where(cv, zero, grads[0]), sb, db);
          return r;
        });
  }
  return out;
}
Tensor where(const Tensor& cond, const Tensor& a, Scalar b) { return where(cond, a, scalar_operand(a, b)); }
Tensor where(const Tensor& cond, Scalar a, const Tensor& b) { return where(cond, scalar_operand(b, a), b); }
Tensor where(const Tensor& cond, Scalar a, Scalar b) {
  DType dt = promote_types(a.dtype(), b.dtype());
  return where(cond, full({}, a, dtype(dt).device(cond.device())), full({}, b, dtype(dt).device(cond.device())));
}

Tensor lerp(const Tensor& x, const Tensor& y, Scalar w) { return x + (y - x) * w; }
Tensor addcmul(const Tensor& x, const Tensor& a, const Tensor& b, Scalar v) {
  if (auto ac = autocast_internal::cast<OpId::addcmul>(x, a, b)) [[unlikely]]
    return addcmul(ac[0], ac[1], ac[2], v);
  return x + a * b * v;
}
Tensor addcdiv(const Tensor& x, const Tensor& a, const Tensor& b, Scalar v) {
  if (auto ac = autocast_internal::cast<OpId::addcdiv>(x, a, b)) [[unlikely]]
    return addcdiv(ac[0], ac[1], ac[2], v);
  return x + a / b * v;
}

// ---- in-place Tensor methods --------------------------------------------------------------------
Tensor& Tensor::add_(const Tensor& o, Scalar alpha) { return binary_(BinaryOp::add, *this, o, alpha); }
Tensor& Tensor::add_(Scalar o, Scalar alpha) { return binary_(BinaryOp::add, *this, scalar_operand(*this, o), alpha); }
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) { return binary_(BinaryOp::sub, *this, o, alpha); }
Tensor& Tensor::sub_(Scalar o, Scalar alpha) {
  check_bool_operands(BinaryOp::sub, dtype(), o.dtype());
  return binary_(BinaryOp::sub, *this, scalar_operand(*this, o), alpha);
}
Tensor& Tensor::mul_(const Tensor& o) { return binary_(BinaryOp::mul, *this, o); }
Tensor& Tensor::mul_(Scalar o) { return binary_(BinaryOp::mul, *this, scalar_operand(*this, o)); }
Tensor& Tensor::div_(const Tensor& o) { return binary_(BinaryOp::div, *this, o); }
Tensor& Tensor::div_(Scalar o) { return binary_(BinaryOp::div, *this, scalar_operand(*this, o)); }
Tensor& Tensor::pow_(Scalar e) {
  check_integer_power(dtype(), e);
  return binary_(BinaryOp::pow, *this, scalar_operand(*this, e));
}

Tensor& Tensor::fill_(Scalar v) {
  internal::check_inplace(*this, "fill_");
  if (autograd::needs_grad(*this)) return copy_(full_like(*this, v).detach());
  backend_for(device()).fill(*this, v);
  internal::bump_version(*this);
  return *this;
}
Tensor& Tensor::fill_(const Tensor& v) {
  NABLA_CHECK(ShapeError, v.dim() == 0, "fill_: the value must be a 0-dim tensor, got shape ", v.sizes());
  return copy_(v.expand(sizes()));
}
Tensor& Tensor::zero_() { return fill_(0); }

namespace {
// Applies an out-of-place unary op and writes the result back in place.
Tensor& unary_inplace(Tensor& self, const char* name, Tensor result) {
  internal::check_inplace(self, name);
  NABLA_CHECK(DTypeError, result.dtype() == self.dtype(), name, ": result dtype ", result.dtype(),
              " cannot be stored in a tensor of dtype ", self.dtype());
  return self.copy_(result);
}
}  // namespace
// With autograd on, the op reads a clone: its backward may need the value being overwritten.
static Tensor original(const Tensor& self) { return autograd::needs_grad(self) ? self.clone() : self; }
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  return unary_inplace(*this, "clamp_", nabla::clamp(original(*this), lo, hi));
}
Tensor& Tensor::relu_() {
  if (!autograd::needs_grad(*this)) {
    internal::check_inplace(*this, "relu_");
    backend_for(device()).unary(UnaryOp::relu, *this, *this, 0, 0);
    internal::bump_version(*this);
    return *this;
  }
  return unary_inplace(*this, "relu_", nabla::relu(original(*this)));
}
Tensor& Tensor::neg_() { return unary_inplace(*this, "neg_", nabla::neg(original(*this))); }
Tensor& Tensor::exp_() { return unary_inplace(*this, "exp_", nabla::exp(original(*this))); }
Tensor& Tensor::sqrt_() { return unary_inplace(*this, "sqrt_", nabla::sqrt(original(*this))); }

}  // namespace nabla
