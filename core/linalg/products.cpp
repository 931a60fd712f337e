// Matrix products: mm and bmm are the primitives (with gradients), on the device's matmul kernel
// (core/backend.h: cuBLAS on CUDA, core/cpu/gemm.cpp on the CPU); matmul, mv, dot, outer, addmm
// and linear are built on them. (baddbmm and tensordot, composites of these, are in
// products_composite.cpp: this file holds the per-op hot path alone, which the compiler inlines
// best in a unit of its own; measured, mm of 4 x 4 matrices took 6% longer with them here.)
#include "core/autocast.h"
#include "core/impl.h"
#include "core/linalg/common.h"
#include "core/spectral.h"
#include "core/trace.h"

namespace nabla {

using autograd::GradList;
using autograd::Node;
using autograd::save;

namespace {

// A 3-D (batch, rows, cols) view of a 2-D or 3-D tensor for the kernel (no autograd).
Tensor as3d(const Tensor& t) {
  if (t.dim() == 3) return t;
  return internal::make_view(t, {1, t.sizes()[0], t.sizes()[1]}, {0, t.strides()[0], t.strides()[1]},
                             t.storage_offset());
}

void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  NABLA_CHECK(ValueError, a.defined() && b.defined(), op, ": input tensor is undefined");
  NABLA_CHECK(DTypeError, a.dtype() == b.dtype(), op, ": both operands must have the same dtype, got ", a.dtype(),
              " and ", b.dtype());
  internal::check_same_device(op, {&a, &b});
}

// Complex operands of one dtype: (ar + i ai)(br + i bi) from four real products of the parts, so
// autograd differentiates through them (the sums PyTorch's complex GEMM forms).
template <class F>
Tensor complex_product(const Tensor& a, const Tensor& b, F&& product) {
  const Tensor ar = real(a).contiguous(), ai = imag(a).contiguous();
  const Tensor br = real(b).contiguous(), bi = imag(b).contiguous();
  return complex(product(ar, br) - product(ai, bi), product(ar, bi) + product(ai, br));
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  if (auto ac = autocast_internal::cast<OpId::mm>(a, b)) [[unlikely]]
    return mm(ac[0], ac[1]);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::mm>(t, {a, b}, {}, [&] { return mm(a, b); });
  check_operands("mm", a, b);
  NABLA_CHECK(ShapeError, a.dim() == 2 && b.dim() == 2, "mm: expected 2-D matrices, got shapes ", a.sizes(), " and ",
              b.sizes());
  NABLA_CHECK(ShapeError, a.sizes()[1] == b.sizes()[0], "mm: inner dimensions differ: lhs ", a.sizes(), " rhs ",
              b.sizes());
  if (nabla::is_complex(a.dtype())) [[unlikely]]
    return complex_product(a, b, [](const Tensor& x, const Tensor& y) { return mm(x, y); });
  Tensor out = internal::make_empty({a.sizes()[0], b.sizes()[1]}, a.dtype(), a.device());
  backend_for(a.device()).matmul(as3d(a), as3d(b), as3d(out), 1.0, 0.0);
  if (autograd::needs_grad(a, b))
    autograd::record("MmBackward", {&a, &b}, {&out}, [sa = save(a), sb = save(b)](Node& n, GradList& grads) {
      GradList r(2);
      if (n.needs_input_grad(0)) r[0] = mm(grads[0], sb.unpack(n).t());
      if (n.needs_input_grad(1)) r[1] = mm(sa.unpack(n).t(), grads[0]);
      return r;
    });
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (auto ac = autocast_internal::cast<OpId::bmm>(a, b)) [[unlikely]]
    return bmm(ac[0], ac[1]);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::bmm>(t, {a, b}, {}, [&] { return bmm(a, b); });
  check_operands("bmm", a, b);
  NABLA_CHECK(ShapeError, a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D tensors, got shapes ", a.sizes(), " and ",
              b.sizes());
  NABLA_CHECK(ShapeError, a.sizes()[0] == b.sizes()[0], "bmm: batch sizes differ: lhs ", a.sizes(), " rhs ", b.sizes());
  NABLA_CHECK(ShapeError, a.sizes()[2] == b.sizes()[1], "bmm: inner dimensions differ: lhs ", a.sizes(), " rhs ",
              b.sizes());
  if (nabla::is_complex(a.dtype())) [[unlikely]]
    return complex_product(a, b, [](const Tensor& x, const Tensor& y) { return bmm(x, y); });
  Tensor out = internal::make_empty({a.sizes()[0], a.sizes()[1], b.sizes()[2]}, a.dtype(), a.device());
  backend_for(a.device()).matmul(a, b, out, 1.0, 0.0);
  if (autograd::needs_grad(a, b))
    autograd::record("BmmBackward", {&a, &b}, {&out}, [sa = save(a), sb = save(b)](Node& n, GradList& grads) {
      GradList r(2);
      if (n.needs_input_grad(0)) r[0] = bmm(grads[0], sb.unpack(n).mT());
      if (n.needs_input_grad(1)) r[1] = bmm(sa.unpack(n).mT(), grads[0]);
      return r;
    });
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (auto ac = autocast_internal::cast<OpId::matmul>(a, b)) [[unlikely]]
    return matmul(ac[0], ac[1]);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::matmul>(t, {a, b}, {}, [&] { return matmul(a, b); });
  NABLA_CHECK(ValueError, a.defined() && b.defined(), "matmul: input tensor is undefined");
  int64_t da = a.dim(), db = b.dim();
  NABLA_CHECK(ShapeError, da >= 1 && db >= 1, "matmul: both operands need at least 1 dim, got shapes ", a.sizes(),
              " and ", b.sizes());
  // Checked here so the message names the op the caller used, not the mm/mv/dot it becomes.
  NABLA_CHECK(ShapeError, a.sizes()[da - 1] == b.sizes()[db == 1 ? 0 : db - 2], "matmul: inner dimensions differ: lhs ",
              a.sizes(), " rhs ", b.sizes());
  NABLA_CHECK(DTypeError, a.dtype() == b.dtype(), "matmul: both operands must have the same dtype, got ", a.dtype(),
              " and ", b.dtype());
  if (da == 1 && db == 1) return dot(a, b);
  if (da == 2 && db == 2) return mm(a, b);
  if (da == 1 && db == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (da == 2 && db == 1) return mv(a, b);
  // Batched: prepend/append a dim to 1-D operands, broadcast the batch dims, multiply, undo.
  Tensor A = da == 1 ? a.unsqueeze(0) : a;
  Tensor B = db == 1 ? b.unsqueeze(1) : b;
  int64_t m = A.sizes()[A.dim() - 2], k = A.sizes()[A.dim() - 1];
  int64_t k2 = B.sizes()[B.dim() - 2], n = B.sizes()[B.dim() - 1];
  NABLA_CHECK(ShapeError, k == k2, "matmul: inner dimensions differ: lhs ", a.sizes(), " rhs ", b.sizes());
  Shape ba(A.sizes().begin(), A.sizes().end() - 2), bb(B.sizes().begin(), B.sizes().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "matmul");
  int64_t nb = shape_numel(batch);
  Shape ea = batch, eb = batch;
  ea.push_back(m);
  ea.push_back(k);
  eb.push_back(k);
  eb.push_back(n);
  Tensor A3, B3;
  if (bb.empty() && B.dim() == 2 && A.is_contiguous() && ba == batch) {
    // (..., m, k) @ (k, n): fold the batch into the rows for one big mm.
    Tensor r = mm(A.reshape({nb * m, k}), B);
    Shape os = batch;
    os.push_back(m);
    os.push_back(n);
    Tensor out = r.view(os);
    if (da == 1) out = out.squeeze(-2);
    if (db == 1) out = out.squeeze(-1);
    return out;
  }
  A3 = A.expand(ea).reshape({nb, m, k});
  B3 = B.expand(eb).reshape({nb, k, n});
  Tensor r = bmm(A3, B3);
  Shape os = batch;
  os.push_back(m);
  os.push_back(n);
  Tensor out = r.view(os);
  if (da == 1) out = out.squeeze(-2);
  if (db == 1) out = out.squeeze(-1);
  return out;
}

Tensor mv(const Tensor& a, const Tensor& v) {
  if (auto ac = autocast_internal::cast<OpId::mv>(a, v)) [[unlikely]]
    return mv(ac[0], ac[1]);
  // mv is one op to autocast, as PyTorch's kernel: the mm it is built from is not lowered again
  // (mm is on the CPU list, mv is not).
  autocast_internal::Suspend opaque;
  NABLA_CHECK(ShapeError, a.dim() == 2 && v.dim() == 1, "mv: expected a 2-D matrix and a 1-D vector, got shapes ",
              a.sizes(), " and ", v.sizes());
  NABLA_CHECK(ShapeError, a.sizes()[1] == v.sizes()[0], "mv: inner dimensions differ: lhs ", a.sizes(), " rhs ",
              v.sizes());
  return mm(a, v.unsqueeze(1)).squeeze(1);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  if (auto ac = autocast_internal::cast<OpId::dot>(a, b)) [[unlikely]]
    return dot(ac[0], ac[1]);
  NABLA_CHECK(ShapeError, a.dim() == 1 && b.dim() == 1, "dot: expected 1-D tensors, got shapes ", a.sizes(), " and ",
              b.sizes());
  NABLA_CHECK(ShapeError, a.numel() == b.numel(), "dot: tensors have different lengths ", a.numel(), " and ",
              b.numel());
  NABLA_CHECK(DTypeError, a.dtype() == b.dtype(), "dot: both operands must have the same dtype, got ", a.dtype(),
              " and ", b.dtype());
  // float16 / bfloat16: a (1, k) @ (k, 1) product, summed in float32 and rounded once.
  if (is_reduced_float(a.dtype())) return mm(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  return (a * b).sum();
}

Tensor outer(const Tensor& a, const Tensor& b) {
  NABLA_CHECK(ShapeError, a.dim() == 1 && b.dim() == 1, "outer: expected 1-D tensors, got shapes ", a.sizes(), " and ",
              b.sizes());
  return a.unsqueeze(1) * b.unsqueeze(0);
}

namespace linalg_internal {

// float16 / bfloat16 addmm (2-D a, b) and baddbmm (3-D) in one GEMM call: out = beta * input +
// alpha * a @ b, rounded once as PyTorch's (the float32 composite rounds the product, then the sum).
Tensor add_product_lowp(const char* op, const Tensor& input, const Tensor& a, const Tensor& b, double beta,
                        double alpha) {
  NABLA_CHECK(ValueError, input.defined(), op, ": input tensor is undefined");
  check_operands(op, a, b);
  const int64_t r = a.dim();
  NABLA_CHECK(ShapeError, (r == 2 || r == 3) && b.dim() == r, op, ": expected ",
              r == 3 ? "3-D tensors" : "2-D matrices", ", got shapes ", a.sizes(), " and ", b.sizes());
  NABLA_CHECK(ShapeError, r == 2 || a.sizes()[0] == b.sizes()[0], op, ": batch sizes differ: lhs ", a.sizes(), " rhs ",
              b.sizes());
  NABLA_CHECK(ShapeError, a.sizes()[r - 1] == b.sizes()[r - 2], op, ": inner dimensions differ: lhs ", a.sizes(),
              " rhs ", b.sizes());
  NABLA_CHECK(DTypeError, input.dtype() == a.dtype(), op, ": input dtype ", input.dtype(), " differs from ",
              r == 3 ? "batch1" : "mat1", " dtype ", a.dtype());
  internal::check_same_device(op, {&input, &a, &b});
  Shape os = r == 3 ? Shape{a.sizes()[0], a.sizes()[1], b.sizes()[2]} : Shape{a.sizes()[0], b.sizes()[1]};
  NABLA_CHECK(ShapeError, broadcast_shapes(input.sizes(), os, op) == os, op, ": input of shape ", input.sizes(),
              " cannot be broadcast to the product's shape ", os);
  Tensor out = internal::make_empty(os, a.dtype(), a.device());
  Backend& be = backend_for(a.device());
  if (beta != 0) be.copy(internal::broadcast_view(input, os), out, false);  // out = input; then beta*out + alpha*a@b
  be.matmul(as3d(a), as3d(b), as3d(out), alpha, beta);
  if (autograd::needs_grad(input, a, b)) {
    const bool batched = r == 3;
    autograd::record(batched ? "BaddbmmBackward" : "AddmmBackward", {&input, &a, &b}, {&out},
                     [sa = save(a), sb = save(b), is = Shape(input.sizes().begin(), input.sizes().end()), beta, alpha,
                      batched](Node& n, GradList& grads) {
                       GradList g(3);
                       const Tensor& go = grads[0];
                       auto prod = [&](const Tensor& x, const Tensor& y) { return batched ? bmm(x, y) : mm(x, y); };
                       if (n.needs_input_grad(0)) {
                         Tensor gi = autograd::sum_to(go, is);
                         g[0] = beta == 1 ? gi : gi * beta;
                       }
                       if (n.needs_input_grad(1)) {
                         Tensor ga = prod(go, sb.unpack(n).mT());
                         g[1] = alpha == 1 ? ga : ga * alpha;
                       }
                       if (n.needs_input_grad(2)) {
                         Tensor gb = prod(sa.unpack(n).mT(), go);
                         g[2] = alpha == 1 ? gb : gb * alpha;
                       }
                       return g;
                     });
  }
  return out;
}

}  // namespace linalg_internal

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  if (auto ac = autocast_internal::cast<OpId::addmm>(bias, a, b)) [[unlikely]]
    return addmm(ac[0], ac[1], ac[2], beta, alpha);
  // float16 / bfloat16 on the CPU: one GEMM call (its 16-bit elementwise ops are not all there). CUDA
  // and a tracer keep the composite (a tracer records its parts).
  if (a.defined() && is_reduced_float(a.dtype()) && a.device().is_cpu() && !trace::active())
    return linalg_internal::add_product_lowp("addmm", bias, a, b, beta.to_double(), alpha.to_double());
  Tensor p = mm(a, b);
  if (alpha.to_double() != 1) p = p * alpha;
  if (beta.to_double() == 0) return p;
  return beta.to_double() == 1 ? p + bias : p + bias * beta;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (auto ac = autocast_internal::cast<OpId::linear>(x, weight, bias)) [[unlikely]]
    return linear(ac[0], ac[1], ac[2]);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::linear>(t, {x, weight, bias}, {}, [&] { return linear(x, weight, bias); });
  NABLA_CHECK(ShapeError, weight.dim() == 2, "linear: weight must be 2-D (out_features, in_features), got shape ",
              weight.sizes());
  NABLA_CHECK(ShapeError, x.dim() >= 1 && x.sizes()[x.dim() - 1] == weight.sizes()[1], "linear: input of shape ",
              x.sizes(), " does not match weight of shape ", weight.sizes(), " (expected last dim ", weight.sizes()[1],
              ")");
  NABLA_CHECK(DTypeError, x.dtype() == weight.dtype(), "linear: input dtype ", x.dtype(), " differs from weight dtype ",
              weight.dtype());
  internal::check_same_device("linear", {&x, &weight, &bias});
  int64_t in = weight.sizes()[1], outf = weight.sizes()[0];
  Tensor x2 = x.dim() == 2 ? x : x.reshape({-1, in});
  int64_t rows = x2.sizes()[0];
  Tensor out = internal::make_empty({rows, outf}, x.dtype(), x.device());
  Backend& be = backend_for(x.device());
  Tensor wT = internal::make_view(weight, {1, in, outf}, {0, weight.strides()[1], weight.strides()[0]},
                                  weight.storage_offset());
  double beta = 0;
  if (bias.defined()) {
    NABLA_CHECK(ShapeError, bias.dim() == 1 && bias.sizes()[0] == outf, "linear: bias must have shape [", outf,
                "], got ", bias.sizes());
    be.copy(internal::broadcast_view(bias, out.sizes()), out, false);  // out = bias, then out += x @ w^T
    beta = 1;
  }
  be.matmul(as3d(x2), wT, as3d(out), 1.0, beta);
  Tensor result = out;
  if (autograd::needs_grad(x2, weight, bias)) {
    autograd::record("LinearBackward", {&x2, &weight, &bias}, {&result},
                     [sx = save(x2), sw = save(weight)](Node& n, GradList& grads) {
                       GradList r(3);
                       if (n.needs_input_grad(0)) r[0] = mm(grads[0], sw.unpack(n));
                       if (n.needs_input_grad(1)) r[1] = mm(grads[0].t(), sx.unpack(n));
                       if (n.needs_input_grad(2)) r[2] = grads[0].sum(0);
                       return r;
                     });
  }
  if (x.dim() == 2) return result;
  Shape s(x.sizes().begin(), x.sizes().end() - 1);
  s.push_back(outf);
  return result.view(s);
}

}  // namespace nabla
