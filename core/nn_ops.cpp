// Convolution and pooling front-ends (NCHW and NCDHW; unbatched inputs are accepted too), and their
// gradients. A convolution, its input gradient and its weight gradient are each other's
// derivatives, so convolutions are differentiable to any order (2-D and 3-D alike).
#include <algorithm>
#include <cmath>

#include "core/autocast.h"
#include "core/impl.h"
#include "core/trace.h"

namespace nabla {

using autograd::GradList;
using autograd::Node;
using autograd::save;

namespace {

std::array<int64_t, 2> pair_of(IntArrayRef v, const char* op, const char* what) {
  NABLA_CHECK(ValueError, v.size() == 1 || v.size() == 2, op, ": ", what, " must have 1 or 2 values, got ", v);
  return {v[0], v.size() == 2 ? v[1] : v[0]};
}

// One value per spatial dim from 1 or n values.
std::array<int64_t, 3> per_dim(IntArrayRef v, int64_t n, const char* op, const char* what) {
  NABLA_CHECK(ValueError, v.size() == 1 || static_cast<int64_t>(v.size()) == n, op, ": ", what, " must have 1 or ", n,
              " values, got ", v);
  std::array<int64_t, 3> r{1, 1, 1};
  for (int64_t i = 0; i < n; ++i) r[i] = v.size() == 1 ? v[0] : v[i];
  return r;
}

ConvParams conv_params(IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t groups, int64_t ndim,
                       const char* op) {
  ConvParams p;
  p.ndim = ndim;
  p.stride = per_dim(stride, ndim, op, "stride");
  p.padding = per_dim(padding, ndim, op, "padding");
  p.dilation = per_dim(dilation, ndim, op, "dilation");
  p.groups = groups;
  for (int64_t i = 0; i < ndim; ++i) {
    NABLA_CHECK(ValueError, p.stride[i] > 0, op, ": stride must be positive, got ", stride);
    NABLA_CHECK(ValueError, p.padding[i] >= 0, op, ": padding must be non-negative, got ", padding);
    NABLA_CHECK(ValueError, p.dilation[i] > 0, op, ": dilation must be positive, got ", dilation);
  }
  NABLA_CHECK(ValueError, groups > 0, op, ": groups must be positive, got ", groups);
  return p;
}

// Division rounding toward negative infinity (PyTorch's div_rtn): a negative numerator means the
// kernel does not fit, and must not round up to an output of size 1.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

int64_t conv_out(int64_t in, int64_t k, const ConvParams& p, int64_t i) {
  return floor_div(in + 2 * p.padding[i] - p.dilation[i] * (k - 1) - 1, p.stride[i]) + 1;
}

const char* conv_name(const ConvParams& p) { return p.ndim == 3 ? "conv3d" : p.ndim == 1 ? "conv1d" : "conv2d"; }

void check_conv(const Tensor& x, const Tensor& w, const ConvParams& p, const char* op) {
  const int64_t nd = 2 + p.ndim;
  NABLA_CHECK(ShapeError, x.dim() == nd, op, ": expected input (N, C, ", p.ndim == 3 ? "D, H, W" : "H, W",
              "), got shape ", x.sizes());
  NABLA_CHECK(ShapeError, w.dim() == nd, op, ": expected weight (C_out, C_in/groups, ",
              p.ndim == 3 ? "kD, kH, kW" : "kH, kW", "), got shape ", w.sizes());
  NABLA_CHECK(DTypeError, x.dtype() == w.dtype(), op, ": input dtype ", x.dtype(), " differs from weight dtype ",
              w.dtype());
  NABLA_CHECK(ShapeError, x.sizes()[1] == w.sizes()[1] * p.groups, op, ": input has ", x.sizes()[1],
              " channels but weight of shape ", w.sizes(), " with groups=", p.groups, " expects ",
              w.sizes()[1] * p.groups);
  NABLA_CHECK(ShapeError, w.sizes()[0] % p.groups == 0, op, ": out channels (", w.sizes()[0],
              ") must be divisible by groups (", p.groups, ")");
  internal::check_same_device(op, {&x, &w});
}

// The spatial sizes of t (dims 2...).
Shape spatial(const Tensor& t) { return Shape(t.sizes().begin() + 2, t.sizes().end()); }

Tensor conv_core(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p);

Tensor input_grad_core(const Tensor& gy, const Tensor& w, const Shape& x_shape, const ConvParams& p) {
  Tensor gx = internal::make_empty(x_shape, gy.dtype(), gy.device());
  backend_for(gy.device()).conv_input_grad(gy, w, p, gx);
  if (autograd::needs_grad(gy, w))
    autograd::record(p.ndim == 3 ? "Conv3dInputGradBackward" : "Conv2dInputGradBackward", {&gy, &w}, {&gx},
                     [sg = save(gy), sw = save(w), p](Node& n, GradList& grads) {
                       // gx = T(gy, w) is linear in both: d/dgy = conv(g, w), d/dw = weight_grad(g, gy).
                       GradList r(2);
                       Tensor wv = sw.unpack(n);
                       if (n.needs_input_grad(0)) r[0] = conv_core(grads[0], wv, Tensor(), p);
                       if (n.needs_input_grad(1)) r[1] = conv_weight_grad(grads[0], sg.unpack(n), spatial(wv), p);
                       return r;
                     });
  return gx;
}

Tensor weight_grad_core(const Tensor& x, const Tensor& gy, const Shape& w_shape, const ConvParams& p) {
  Tensor gw = internal::make_empty(w_shape, gy.dtype(), gy.device());
  backend_for(gy.device()).conv_weight_grad(x, gy, p, gw);
  if (autograd::needs_grad(x, gy))
    autograd::record(p.ndim == 3 ? "Conv3dWeightGradBackward" : "Conv2dWeightGradBackward", {&x, &gy}, {&gw},
                     [sx = save(x), sg = save(gy), p](Node& n, GradList& grads) {
                       // gw = W(x, gy): d/dx = input_grad(gy, g), d/dgy = conv(x, g).
                       GradList r(2);
                       Tensor xv = sx.unpack(n);
                       if (n.needs_input_grad(0)) r[0] = input_grad_core(sg.unpack(n), grads[0], xv.sizes(), p);
                       if (n.needs_input_grad(1)) r[1] = conv_core(xv, grads[0], Tensor(), p);
                       return r;
                     });
  return gw;
}

Tensor conv_core(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p) {
  const char* op = conv_name(p);
  check_conv(x, w, p, op);
  Shape out_shape{x.sizes()[0], w.sizes()[0]};
  bool fits = true;
  for (int64_t i = 0; i < p.ndim; ++i) {
    out_shape.push_back(conv_out(x.sizes()[2 + i], w.sizes()[2 + i], p, i));
    fits = fits && out_shape.back() > 0;
  }
  NABLA_CHECK(ShapeError, fits, op, ": input of shape ", x.sizes(), " is too small for a kernel of shape ", spatial(w),
              " with padding ", IntArrayRef(p.padding.data(), p.ndim), " and dilation ",
              IntArrayRef(p.dilation.data(), p.ndim));
  if (b.defined())
    NABLA_CHECK(ShapeError, b.dim() == 1 && b.sizes()[0] == w.sizes()[0], op, ": bias must have shape [", w.sizes()[0],
                "], got ", b.sizes());
  Tensor out = internal::make_empty(out_shape, x.dtype(), x.device());
  backend_for(x.device()).conv(x, w, b, p, out);
  if (autograd::needs_grad(x, w, b))
    autograd::record(p.ndim == 3 ? "Conv3dBackward" : "Conv2dBackward", {&x, &w, &b}, {&out},
                     [sx = save(x), sw = save(w), p](Node& n, GradList& grads) {
                       GradList r(3);
                       Tensor xv = sx.unpack(n), wv = sw.unpack(n);
                       // Both gradient kernels want gy contiguous (e.g. the expanded gradient of a sum):
                       // copy it once.
                       Tensor gy = n.needs_input_grad(0) && n.needs_input_grad(1) ? grads[0].contiguous() : grads[0];
                       if (n.needs_input_grad(0)) r[0] = input_grad_core(gy, wv, xv.sizes(), p);
                       if (n.needs_input_grad(1)) r[1] = weight_grad_core(xv, gy, wv.sizes(), p);
                       if (n.needs_input_grad(2)) {
                         Shape dims{0};
                         for (int64_t i = 0; i < p.ndim; ++i) dims.push_back(2 + i);
                         r[2] = grads[0].sum(dims);
                       }
                       return r;
                     });
  return out;
}

// conv_core for a batched or unbatched input (one dim fewer).
Tensor conv_any_batch(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvParams& p) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced(
        t,
        p.ndim == 1   ? OpId::conv1d
        : p.ndim == 2 ? OpId::conv2d
                      : OpId::conv3d,
        {x, weight, bias},
        ConvAttrs{trace::ints(IntArrayRef(p.stride.data(), p.ndim)), trace::ints(IntArrayRef(p.padding.data(), p.ndim)),
                  trace::ints(IntArrayRef(p.dilation.data(), p.ndim)), p.groups},
        [&] { return conv_any_batch(x, weight, bias, p); });
  if (x.dim() == 1 + p.ndim) return conv_core(x.unsqueeze(0), weight, bias, p).squeeze(0);
  return conv_core(x, weight, bias, p);
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, IntArrayRef padding,
              IntArrayRef dilation, int64_t groups) {
  if (auto ac = autocast_internal::cast<OpId::conv2d>(x, weight, bias)) [[unlikely]]
    return conv2d(ac[0], ac[1], ac[2], stride, padding, dilation, groups);
  return conv_any_batch(x, weight, bias, conv_params(stride, padding, dilation, groups, 2, "conv2d"));
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, IntArrayRef padding,
              IntArrayRef dilation, int64_t groups) {
  if (auto ac = autocast_internal::cast<OpId::conv3d>(x, weight, bias)) [[unlikely]]
    return conv3d(ac[0], ac[1], ac[2], stride, padding, dilation, groups);
  return conv_any_batch(x, weight, bias, conv_params(stride, padding, dilation, groups, 3, "conv3d"));
}

Tensor conv_input_grad(const Tensor& grad_out, const Tensor& weight, IntArrayRef input_size, const ConvParams& p) {
  NABLA_CHECK(
      ShapeError,
      grad_out.dim() == 2 + p.ndim && weight.dim() == 2 + p.ndim && static_cast<int64_t>(input_size.size()) == p.ndim,
      conv_name(p), "_input_grad: expected grad_out and weight with ", 2 + p.ndim, " dims and ", p.ndim,
      " input sizes, got shapes ", grad_out.sizes(), ", ", weight.sizes(), " and ", input_size);
  Shape xs{grad_out.sizes()[0], weight.sizes()[1] * p.groups};
  for (int64_t v : input_size) xs.push_back(v);
  return input_grad_core(grad_out, weight, xs, p);
}

Tensor conv_weight_grad(const Tensor& x, const Tensor& grad_out, IntArrayRef kernel_size, const ConvParams& p) {
  NABLA_CHECK(
      ShapeError,
      x.dim() == 2 + p.ndim && grad_out.dim() == 2 + p.ndim && static_cast<int64_t>(kernel_size.size()) == p.ndim,
      conv_name(p), "_weight_grad: expected input and grad_out with ", 2 + p.ndim, " dims and ", p.ndim,
      " kernel sizes, got shapes ", x.sizes(), ", ", grad_out.sizes(), " and ", kernel_size);
  Shape ws{grad_out.sizes()[1], x.sizes()[1] / p.groups};
  for (int64_t v : kernel_size) ws.push_back(v);
  return weight_grad_core(x, grad_out, ws, p);
}

Tensor conv2d_input_grad(const Tensor& grad_out, const Tensor& weight, IntArrayRef input_hw, const ConvParams& p) {
  NABLA_CHECK(ValueError, p.ndim == 2, "conv2d_input_grad: the parameters are for ", p.ndim, " spatial dims");
  return conv_input_grad(grad_out, weight, input_hw, p);
}

Tensor conv2d_weight_grad(const Tensor& x, const Tensor& grad_out, IntArrayRef kernel_hw, const ConvParams& p) {
  NABLA_CHECK(ValueError, p.ndim == 2, "conv2d_weight_grad: the parameters are for ", p.ndim, " spatial dims");
  return conv_weight_grad(x, grad_out, kernel_hw, p);
}

Tensor conv_transpose2d(const Tensor& x_in, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                        IntArrayRef padding, IntArrayRef output_padding, int64_t groups, IntArrayRef dilation) {
  if (auto ac = autocast_internal::cast<OpId::conv_transpose2d>(x_in, weight, bias)) [[unlikely]]
    return conv_transpose2d(ac[0], ac[1], ac[2], stride, padding, output_padding, groups, dilation);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::conv_transpose2d>(
        t, {x_in, weight, bias},
        {.stride = trace::ints(stride),
         .padding = trace::ints(padding),
         .output_padding = trace::ints(output_padding),
         .dilation = trace::ints(dilation),
         .groups = groups},
        [&] { return conv_transpose2d(x_in, weight, bias, stride, padding, output_padding, groups, dilation); });
  Tensor x = x_in.dim() == 3 ? x_in.unsqueeze(0) : x_in;
  ConvParams p = conv_params(stride, padding, dilation, groups, 2, "conv_transpose2d");
  auto op = pair_of(output_padding, "conv_transpose2d", "output_padding");
  NABLA_CHECK(ShapeError, x.dim() == 4 && weight.dim() == 4,
              "conv_transpose2d: expected input (N, C_in, H, W) and weight "
              "(C_in, C_out/groups, kH, kW), got shapes ",
              x.sizes(), " and ", weight.sizes());
  NABLA_CHECK(ShapeError, x.sizes()[1] == weight.sizes()[0], "conv_transpose2d: input has ", x.sizes()[1],
              " channels but weight of shape ", weight.sizes(), " expects ", weight.sizes()[0]);
  for (int i = 0; i < 2; ++i)
    NABLA_CHECK(ValueError, op[i] < std::max(p.stride[i], p.dilation[i]), "conv_transpose2d: output_padding ",
                output_padding, " must be smaller than stride or dilation");
  int64_t h = (x.sizes()[2] - 1) * p.stride[0] - 2 * p.padding[0] + p.dilation[0] * (weight.sizes()[2] - 1) + op[0] + 1;
  int64_t w = (x.sizes()[3] - 1) * p.stride[1] - 2 * p.padding[1] + p.dilation[1] * (weight.sizes()[3] - 1) + op[1] + 1;
  NABLA_CHECK(ShapeError, h > 0 && w > 0, "conv_transpose2d: the output size would be ", h, "x", w);
  // A transposed convolution is the input-gradient of the convolution whose weight it shares.
  Tensor y = conv_input_grad(x, weight, {h, w}, p);
  if (bias.defined()) y = y + bias.view({1, -1, 1, 1});
  return x_in.dim() == 3 ? y.squeeze(0) : y;
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  if (auto ac = autocast_internal::cast<OpId::conv1d>(x, weight, bias)) [[unlikely]]
    return conv1d(ac[0], ac[1], ac[2], stride, padding, dilation, groups);
  NABLA_CHECK(ShapeError, x.dim() == 3 || x.dim() == 2, "conv1d: expected input (N, C, L) or (C, L), got shape ",
              x.sizes());
  NABLA_CHECK(ShapeError, weight.dim() == 3, "conv1d: expected weight (C_out, C_in/groups, k), got shape ",
              weight.sizes());
  // As a 2-D convolution with a unit height, which the 2-D kernels run fast.
  Tensor x3 = x.dim() == 2 ? x.unsqueeze(0) : x;
  Tensor y =
      conv2d(x3.unsqueeze(2), weight.unsqueeze(2), bias, {1, stride}, {0, padding}, {1, dilation}, groups).squeeze(2);
  return x.dim() == 2 ? y.squeeze(0) : y;
}

// ---- pooling ------------------------------------------------------------------------------------
namespace {

Pool2dParams pool_params(IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                         bool ceil_mode, const char* op) {
  Pool2dParams p;
  p.kernel = pair_of(kernel, op, "kernel_size");
  p.stride = stride.empty() ? p.kernel : pair_of(stride, op, "stride");
  p.padding = pair_of(padding, op, "padding");
  p.dilation = pair_of(dilation, op, "dilation");
  p.ceil_mode = ceil_mode;
  for (int i = 0; i < 2; ++i) {
    NABLA_CHECK(ValueError, p.kernel[i] > 0 && p.stride[i] > 0 && p.dilation[i] > 0, op,
                ": kernel_size, stride and dilation must be positive");
    NABLA_CHECK(ValueError, p.padding[i] >= 0 && p.padding[i] * 2 <= p.kernel[i], op, ": padding ", padding,
                " must be at most half the kernel size ", kernel);
  }
  return p;
}

int64_t pool_out(int64_t in, const Pool2dParams& p, int i) {
  int64_t eff = p.dilation[i] * (p.kernel[i] - 1) + 1;
  int64_t num = in + 2 * p.padding[i] - eff + (p.ceil_mode ? p.stride[i] - 1 : 0);
  int64_t out = floor_div(num, p.stride[i]) + 1;
  // The last window must start inside the input or its left padding.
  if (p.ceil_mode && (out - 1) * p.stride[i] >= in + p.padding[i]) --out;
  return out;
}

Shape pool_shape(const Tensor& x, const Pool2dParams& p, const char* op) {
  NABLA_CHECK(ShapeError, x.dim() == 3 || x.dim() == 4, op, ": expected input (N, C, H, W) or (C, H, W), got shape ",
              x.sizes());
  int64_t nd = x.dim();
  int64_t ho = pool_out(x.sizes()[nd - 2], p, 0), wo = pool_out(x.sizes()[nd - 1], p, 1);
  NABLA_CHECK(ShapeError, ho > 0 && wo > 0, op, ": input of shape ", x.sizes(), " is too small for kernel [",
              p.kernel[0], ", ", p.kernel[1], "]");
  Shape s = x.sizes();
  s[nd - 2] = ho;
  s[nd - 1] = wo;
  return s;
}

Tensor max_pool_backward(const Tensor& g, const Tensor& indices, const Shape& x_shape) {
  Tensor gx = internal::make_empty(x_shape, g.dtype(), g.device());
  backend_for(g.device()).max_pool2d_backward(g, indices, gx);
  if (autograd::needs_grad(g))
    autograd::record("MaxPool2dBackwardBackward", {&g}, {&gx}, [indices](Node&, GradList& grads) {
      // gx scatters g to the argmax positions; its adjoint gathers them back.
      int64_t nd = grads[0].dim();
      Tensor flat = grads[0].flatten(nd - 2);
      Tensor idx = indices.flatten(nd - 2);
      return GradList{flat.gather(nd - 2, idx).view(indices.sizes())};
    });
  return gx;
}

Tensor avg_pool_backward(const Tensor& g, const Pool2dParams& p, const Shape& x_shape) {
  Tensor gx = internal::make_empty(x_shape, g.dtype(), g.device());
  backend_for(g.device()).avg_pool2d_backward(g, p, gx);
  if (autograd::needs_grad(g))
    autograd::record("AvgPool2dBackwardBackward", {&g}, {&gx}, [p](Node&, GradList& grads) {
      // avg_pool2d is linear, and this backward is its adjoint: the adjoint of that is avg_pool2d.
      Pool2dParams q = p;
      return GradList{avg_pool2d(grads[0], {q.kernel[0], q.kernel[1]}, {q.stride[0], q.stride[1]},
                                 {q.padding[0], q.padding[1]}, q.ceil_mode, q.count_include_pad)};
    });
  return gx;
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride,
                                                   IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  Pool2dParams p = pool_params(kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d");
  Shape s = pool_shape(x, p, "max_pool2d");
  Tensor out = internal::make_empty(s, x.dtype(), x.device());
  Tensor idx = internal::make_empty(s, DType::i64, x.device());
  backend_for(x.device()).max_pool2d(x, p, out, idx);
  if (autograd::needs_grad(x))
    autograd::record("MaxPool2dBackward", {&x}, {&out}, [idx, xs = x.sizes()](Node&, GradList& grads) {
      return GradList{max_pool_backward(grads[0], idx, xs)};
    });
  return {out, idx};
}

Tensor max_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::max_pool2d>(
        t, {x},
        {.kernel = trace::ints(kernel_size),
         .stride = trace::ints(stride),
         .padding = trace::ints(padding),
         .dilation = trace::ints(dilation),
         .ceil_mode = ceil_mode},
        [&] { return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode); });
  if (x.is_cpu() && !autograd::needs_grad(x)) {  // no backward: the CPU kernel skips the indices
    Pool2dParams p = pool_params(kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d");
    Tensor out = internal::make_empty(pool_shape(x, p, "max_pool2d"), x.dtype(), x.device());
    backend_for(x.device()).max_pool2d(x, p, out, Tensor());
    return out;
  }
  return std::get<0>(max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                  bool count_include_pad) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::avg_pool2d>(
        t, {x},
        {.kernel = trace::ints(kernel_size),
         .stride = trace::ints(stride),
         .padding = trace::ints(padding),
         .ceil_mode = ceil_mode,
         .count_include_pad = count_include_pad},
        [&] { return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad); });
  Pool2dParams p = pool_params(kernel_size, stride, padding, 1, ceil_mode, "avg_pool2d");
  p.count_include_pad = count_include_pad;
  Shape s = pool_shape(x, p, "avg_pool2d");
  Tensor out = internal::make_empty(s, x.dtype(), x.device());
  backend_for(x.device()).avg_pool2d(x, p, out);
  if (autograd::needs_grad(x))
    autograd::record("AvgPool2dBackward", {&x}, {&out}, [p, xs = x.sizes()](Node&, GradList& grads) {
      return GradList{avg_pool_backward(grads[0], p, xs)};
    });
  return out;
}

namespace {
// Adaptive pooling: output cell i covers input [floor(i*in/out), ceil((i+1)*in/out)).
Tensor adaptive_pool(const Tensor& x, IntArrayRef output_size, bool is_max, const char* op) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced(t, is_max ? OpId::adaptive_max_pool2d : OpId::adaptive_avg_pool2d, {x},
                         AdaptivePoolAttrs{trace::ints(output_size)},
                         [&] { return adaptive_pool(x, output_size, is_max, op); });
  NABLA_CHECK(ShapeError, x.dim() == 3 || x.dim() == 4, op, ": expected input (N, C, H, W) or (C, H, W), got shape ",
              x.sizes());
  auto os = pair_of(output_size, op, "output_size");
  int64_t nd = x.dim(), H = x.sizes()[nd - 2], W = x.sizes()[nd - 1];
  NABLA_CHECK(ShapeError, os[0] > 0 && os[1] > 0, op, ": output_size must be positive, got ", output_size);
  if (H % os[0] == 0 && W % os[1] == 0) {
    int64_t kh = H / os[0], kw = W / os[1];
    return is_max ? max_pool2d(x, {kh, kw}) : avg_pool2d(x, {kh, kw});
  }
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < os[0]; ++i) {
    int64_t h0 = i * H / os[0], h1 = ((i + 1) * H + os[0] - 1) / os[0];
    std::vector<Tensor> cols;
    for (int64_t j = 0; j < os[1]; ++j) {
      int64_t w0 = j * W / os[1], w1 = ((j + 1) * W + os[1] - 1) / os[1];
      Tensor cell = x.narrow(nd - 2, h0, h1 - h0).narrow(nd - 1, w0, w1 - w0);
      cols.push_back(is_max ? amax(cell, {nd - 2, nd - 1}) : mean(cell, {nd - 2, nd - 1}));
    }
    rows.push_back(stack(cols, -1));
  }
  return stack(rows, -2);
}
}  // namespace

// ---- batch normalization ------------------------------------------------------------------------
namespace {

// The dims batch norm reduces over: all but the channels (1).
Shape bn_dims(const Tensor& x) {
  Shape d{0};
  for (int64_t i = 2; i < x.dim(); ++i) d.push_back(i);
  return d;
}

// A per-channel (C) tensor viewed to broadcast against x: (1, C, 1, ...).
Tensor per_channel(const Tensor& p, int64_t ndim) {
  Shape s(static_cast<size_t>(ndim), 1);
  s[1] = p.numel();
  return p.reshape(s);
}

// Batch norm from Tensor ops: differentiable to any order, used wherever the backend has no fused
// kernel (the CPU) and for gradients of gradients.
Tensor batch_norm_composite(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rm, const Tensor& rv,
                            bool training, double momentum, double eps, int64_t count) {
  const int64_t nd = x.dim();
  Shape dims = bn_dims(x);
  Tensor mean, var;
  if (training) {
    mean = x.mean(dims, true);
    var = nabla::var(x, dims, 0, true);
    autograd::NoGradGuard ng;
    double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
    Tensor r = rm, v = rv;  // handles to the caller's buffers, updated in place
    if (r.defined()) r.mul_(1 - momentum).add_(mean.detach().reshape({-1}).to(r.dtype()), momentum);
    if (v.defined()) v.mul_(1 - momentum).add_((var.detach() * unbias).reshape({-1}).to(v.dtype()), momentum);
  } else {
    mean = per_channel(rm, nd);
    var = per_channel(rv, nd);
  }
  Tensor y = (x - mean) * rsqrt(var + eps);
  if (w.defined()) y = y * per_channel(w, nd);
  if (b.defined()) y = y + per_channel(b, nd);
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::batch_norm>(
        t, {x, weight, bias, running_mean, running_var}, {.training = training, .momentum = momentum, .eps = eps},
        [&] { return batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps); });
  if (!x.defined() || x.dim() < 2) [[unlikely]]  // (the message is built only when it is needed)
    throw ShapeError(internal::str("batch_norm: expected input (N, C, ...) with at least 2 dims, got ",
                                   x.defined() ? internal::describe(x) : std::string("an undefined tensor")));
  NABLA_CHECK(DTypeError, is_floating(x.dtype()), "batch_norm: expected a floating input, got ", x.dtype());
  const int64_t C = x.sizes()[1];
  for (const Tensor* p : {&weight, &bias, &running_mean, &running_var}) {
    if (!p->defined()) continue;
    NABLA_CHECK(ShapeError, p->dim() == 1 && p->sizes()[0] == C, "batch_norm: per-channel tensors must have shape [", C,
                "] for an input of shape ", x.sizes(), ", got ", p->sizes());
  }
  internal::check_same_device("batch_norm", {&x, &weight, &bias, &running_mean, &running_var});
  NABLA_CHECK(ValueError, training || (running_mean.defined() && running_var.defined()),
              "batch_norm: evaluation mode (training=false) needs running_mean and running_var");
  NABLA_CHECK(ValueError, eps >= 0, "batch_norm: eps must be non-negative, got ", eps);
  const int64_t count = C == 0 ? 0 : x.numel() / C;
  if (training)
    NABLA_CHECK(ValueError, count > 1,
                "batch_norm: expected more than 1 value per channel when training, got input of shape ", x.sizes());

  // A float16/bfloat16 input with float32 parameters and statistics (a float32 module under autocast,
  // or a model whose norms stay in float32): computed in float32, the output in the input's dtype, as
  // PyTorch's mixed-dtype batch norm.
  if (internal::lowp_with_f32_params(x, {&weight, &bias, &running_mean, &running_var}))
    return batch_norm(x.to(DType::f32), weight, bias, running_mean, running_var, training, momentum, eps).to(x.dtype());
  Backend& be = backend_for(x.device());
  bool same_dtype = true;
  for (const Tensor* p : {&weight, &bias, &running_mean, &running_var})
    same_dtype = same_dtype && (!p->defined() || p->dtype() == x.dtype());
  // Gradients with respect to the running statistics (evaluation mode) come from the composition.
  if (!same_dtype || x.numel() == 0 || !be.has_fused_batch_norm(x, training, eps) ||
      autograd::needs_grad(running_mean, running_var))
    return batch_norm_composite(x, weight, bias, running_mean, running_var, training, momentum, eps, count);

  Tensor out = internal::make_empty(x.sizes(), x.dtype(), x.device());
  Tensor save_mean, save_invstd;
  if (training) {
    save_mean = internal::make_empty({C}, x.dtype(), x.device());
    save_invstd = internal::make_empty({C}, x.dtype(), x.device());
  }
  {
    autograd::NoGradGuard ng;
    be.batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps, out, save_mean, save_invstd);
  }
  if ((training && (running_mean.defined() || running_var.defined()))) {
    if (running_mean.defined()) internal::bump_version(running_mean);
    if (running_var.defined()) internal::bump_version(running_var);
  }
  if (!autograd::needs_grad(x, weight, bias)) return out;
  if (!training) {
    // Evaluation: an affine map per channel. Its gradient is elementwise (and differentiable).
    Tensor invstd = rsqrt(running_var.detach() + eps), rm = running_mean.detach().clone();
    autograd::record("BatchNormBackward", {&x, &weight, &bias}, {&out},
                     [sx = save(x), sw = save(weight), invstd, rm](Node& n, GradList& grads) {
                       Tensor xv = sx.unpack(n), wv = sw.unpack(n);
                       int64_t nd = xv.dim();
                       Shape dims = bn_dims(xv);
                       Tensor scale = per_channel(invstd, nd);
                       GradList r(3);
                       if (n.needs_input_grad(0))
                         r[0] = grads[0] * (wv.defined() ? scale * per_channel(wv, nd) : scale);
                       if (n.needs_input_grad(1)) r[1] = (grads[0] * (xv - per_channel(rm, nd)) * scale).sum(dims);
                       if (n.needs_input_grad(2)) r[2] = grads[0].sum(dims);
                       return r;
                     });
    return out;
  }
  autograd::record(
      "BatchNormBackward", {&x, &weight, &bias}, {&out},
      [sx = save(x), sw = save(weight), save_mean, save_invstd, eps](Node& n, GradList& grads) {
        Tensor xv = sx.unpack(n), wv = sw.unpack(n);
        GradList r(3);
        if (autograd::GradMode::is_enabled()) {
          // Building a graph (create_graph): the gradient as Tensor ops of x, so that it
          // is itself differentiable (the batch statistics depend on x).
          int64_t nd = xv.dim();
          Shape dims = bn_dims(xv);
          double m = static_cast<double>(xv.numel() / xv.sizes()[1]);
          Tensor mean = xv.mean(dims, true);
          Tensor invstd = rsqrt(nabla::var(xv, dims, 0, true) + eps);
          Tensor xhat = (xv - mean) * invstd;
          Tensor sum_g = grads[0].sum(dims, true), sum_gx = (grads[0] * xhat).sum(dims, true);
          Tensor scale = wv.defined() ? invstd * per_channel(wv, nd) : invstd;
          if (n.needs_input_grad(0)) r[0] = scale / m * (grads[0] * m - sum_g - xhat * sum_gx);
          if (n.needs_input_grad(1)) r[1] = sum_gx.reshape({-1});
          if (n.needs_input_grad(2)) r[2] = sum_g.reshape({-1});
          return r;
        }
        Tensor gx = internal::make_empty(xv.sizes(), xv.dtype(), xv.device());
        int64_t C = xv.sizes()[1];
        Tensor gw = n.needs_input_grad(1) ? internal::make_empty({C}, xv.dtype(), xv.device()) : Tensor();
        Tensor gb = n.needs_input_grad(2) ? internal::make_empty({C}, xv.dtype(), xv.device()) : Tensor();
        backend_for(xv.device()).batch_norm_backward(grads[0], xv, wv, save_mean, save_invstd, eps, gx, gw, gb);
        if (n.needs_input_grad(0)) r[0] = gx;
        r[1] = gw;
        r[2] = gb;
        return r;
      });
  return out;
}

Tensor adaptive_avg_pool2d(const Tensor& x, IntArrayRef output_size) {
  return adaptive_pool(x, output_size, false, "adaptive_avg_pool2d");
}
Tensor adaptive_max_pool2d(const Tensor& x, IntArrayRef output_size) {
  return adaptive_pool(x, output_size, true, "adaptive_max_pool2d");
}

}  // namespace nabla
