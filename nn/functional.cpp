// nn::functional layers: bilinear, the normalizations, dropout, interpolate and the distances.
// Losses are in losses.cpp.
#include "nn/functional.h"
#include "core/autocast.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/graph.h"
#include "core/impl.h"
#include "core/trace.h"

namespace nabla::nn::functional {

using autograd::GradList;
using autograd::Node;

namespace {
std::string shape_str(const Tensor& t) { return t.defined() ? internal::str(t.sizes()) : std::string("(undefined)"); }
}  // namespace

// ---- bilinear -------------------------------------------------------------------------------------

Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias) {
  if (auto ac = autocast_internal::cast<OpId::bilinear>(x1, x2, weight, bias)) [[unlikely]]
    return bilinear(ac[0], ac[1], ac[2], ac[3]);
  NABLA_CHECK(ShapeError, weight.dim() == 3,
              "bilinear: weight must be (out_features, in1_features, in2_features), got ", weight.sizes());
  int64_t out = weight.size(0), in1 = weight.size(1), in2 = weight.size(2);
  NABLA_CHECK(ShapeError, x1.dim() >= 1 && x1.size(-1) == in1, "bilinear: expected input1 with last dim ", in1,
              ", got ", x1.sizes());
  NABLA_CHECK(ShapeError, x2.dim() >= 1 && x2.size(-1) == in2, "bilinear: expected input2 with last dim ", in2,
              ", got ", x2.sizes());
  NABLA_CHECK(ShapeError,
              Shape(x1.sizes().begin(), x1.sizes().end() - 1) == Shape(x2.sizes().begin(), x2.sizes().end() - 1),
              "bilinear: input1 ", x1.sizes(), " and input2 ", x2.sizes(), " must agree in all but the last dim");
  if (bias.defined())
    NABLA_CHECK(ShapeError, bias.dim() == 1 && bias.size(0) == out, "bilinear: bias must have shape [", out, "], got ",
                bias.sizes());
  // x1: (B, in1) @ W': (in1, out * in2) -> (B, out, in2), then contract in2 with x2: (B, 1, in2).
  Tensor a = x1.reshape({-1, in1}), b = x2.reshape({-1, in2});
  Tensor w = weight.permute({1, 0, 2}).reshape({in1, out * in2});
  Tensor y = (a.mm(w).view({-1, out, in2}) * b.unsqueeze(1)).sum({-1});  // (B, out)
  if (bias.defined()) y = y + bias;
  Shape s(x1.sizes().begin(), x1.sizes().end() - 1);
  s.push_back(out);
  return y.reshape(s);
}

// ---- resampling -------------------------------------------------------------------------------------

namespace {

enum class Resample { nearest, nearest_exact, linear, cubic, area };

// Resamples dim d of x from n_in to n_out positions (the 1-D step of interpolate, applied per spatial
// dim): out[j] = sum over taps t of w_t[j] * x[idx_t[j]], one index_select per tap. `inv_scale` maps
// output positions to input ones (in / out, or 1 / scale_factor).
Tensor resample_dim(const Tensor& x, int64_t d, int64_t n_out, double inv_scale, Resample mode, bool align_corners) {
  const int64_t n_in = x.size(d);
  const auto clamp_in = [n_in](int64_t i) { return std::clamp<int64_t>(i, 0, n_in - 1); };
  // Source position of output j for the linear and cubic modes (PyTorch's area_pixel_compute_source_index).
  const auto source = [&](int64_t j, bool cubic) {
    if (align_corners)
      return n_out > 1 ? static_cast<double>(j) * static_cast<double>(n_in - 1) / static_cast<double>(n_out - 1) : 0.0;
    const double s = (static_cast<double>(j) + 0.5) * inv_scale - 0.5;
    return cubic ? s : std::max(s, 0.0);
  };
  size_t taps = 1;
  if (mode == Resample::linear) taps = 2;
  if (mode == Resample::cubic) taps = 4;
  int64_t widest = 1;  // area: the longest window
  if (mode == Resample::area)
    for (int64_t j = 0; j < n_out; ++j)
      widest = std::max(widest, (((j + 1) * n_in + n_out - 1) / n_out) - (j * n_in) / n_out);
  if (mode == Resample::area) taps = static_cast<size_t>(widest);
  std::vector<std::vector<int64_t>> idx(taps, std::vector<int64_t>(static_cast<size_t>(n_out)));
  std::vector<std::vector<double>> wt(taps, std::vector<double>(static_cast<size_t>(n_out), 1.0));
  for (int64_t j = 0; j < n_out; ++j) {
    const size_t k = static_cast<size_t>(j);
    const double jd = static_cast<double>(j);
    switch (mode) {
      case Resample::nearest: idx[0][k] = std::min(static_cast<int64_t>(std::floor(jd * inv_scale)), n_in - 1); break;
      case Resample::nearest_exact:
        idx[0][k] = std::min(static_cast<int64_t>(std::floor((jd + 0.5) * inv_scale)), n_in - 1);
        break;
      case Resample::linear: {
        const double src = source(j, false);
        idx[0][k] = std::min(static_cast<int64_t>(std::floor(src)), n_in - 1);
        idx[1][k] = std::min(idx[0][k] + 1, n_in - 1);
        wt[1][k] = src - static_cast<double>(idx[0][k]);
        wt[0][k] = 1 - wt[1][k];
        break;
      }
      case Resample::cubic: {
        // Keys' cubic convolution with a = -0.75 (PyTorch's and OpenCV's), border pixels repeated.
        const double src = source(j, true), a = -0.75;
        const int64_t i0 = static_cast<int64_t>(std::floor(src));
        const double t = src - static_cast<double>(i0);
        const auto near = [a](double v) { return ((a + 2) * v - (a + 3)) * v * v + 1; };       // |v| <= 1
        const auto far = [a](double v) { return ((a * v - 5 * a) * v + 8 * a) * v - 4 * a; };  // 1 < |v| < 2
        const double w[4] = {far(t + 1), near(t), near(1 - t), far(2 - t)};
        for (size_t q = 0; q < 4; ++q) {
          idx[q][k] = clamp_in(i0 - 1 + static_cast<int64_t>(q));
          wt[q][k] = w[q];
        }
        break;
      }
      case Resample::area: {
        // Adaptive average pooling's window [floor(j n_in / n_out), ceil((j + 1) n_in / n_out)).
        const int64_t start = (j * n_in) / n_out, end = ((j + 1) * n_in + n_out - 1) / n_out;
        for (size_t q = 0; q < taps; ++q) {
          const int64_t i = start + static_cast<int64_t>(q);
          idx[q][k] = clamp_in(i);
          wt[q][k] = i < end ? 1.0 / static_cast<double>(end - start) : 0.0;
        }
        break;
      }
    }
  }
  const TensorOptions iopt = dtype(kInt64).device(x.device());
  if (taps == 1) return x.index_select(d, tensor(idx[0], iopt));
  // Weights shaped to broadcast along dim d.
  Shape wshape(static_cast<size_t>(x.dim()), 1);
  wshape[static_cast<size_t>(d)] = n_out;
  const TensorOptions wopt = dtype(x.dtype()).device(x.device());
  if (mode == Resample::linear) {  // lo + (hi - lo) * w1: one multiply fewer
    Tensor lo = x.index_select(d, tensor(idx[0], iopt)), hi = x.index_select(d, tensor(idx[1], iopt));
    return lo + (hi - lo) * tensor(wt[1], wopt).view(wshape);
  }
  Tensor out;
  for (size_t q = 0; q < taps; ++q) {
    Tensor term = x.index_select(d, tensor(idx[q], iopt)) * tensor(wt[q], wopt).view(wshape);
    out = out.defined() ? out + term : term;
  }
  return out;
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::interpolate>(x)) [[unlikely]]
    return interpolate(ac[0], o);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::interpolate>(t, {x},
                                            {.mode = o.mode,
                                             .size = o.size,
                                             .scale_factor = o.scale_factor,
                                             .align_corners = o.align_corners.value_or(false)},
                                            [&] { return interpolate(x, o); });
  NABLA_CHECK(ShapeError, x.dim() >= 3 && x.dim() <= 5,
              "interpolate: expected a 3-D (N, C, L), 4-D (N, C, H, W) or 5-D ", "(N, C, D, H, W) input, got shape ",
              x.sizes());
  NABLA_CHECK(DTypeError, is_floating(x.dtype()), "interpolate: expected a floating-point input, got ", x.dtype());
  const int64_t spatial = x.dim() - 2;
  static const char* linear_mode[] = {"linear", "bilinear", "trilinear"};
  Resample mode;
  if (o.mode == "nearest") {
    mode = Resample::nearest;
  } else if (o.mode == "nearest-exact") {
    mode = Resample::nearest_exact;
  } else if (o.mode == "area") {
    mode = Resample::area;
  } else if (o.mode == "bicubic") {
    NABLA_CHECK(ValueError, spatial == 2, "interpolate: mode 'bicubic' needs a 4-D (N, C, H, W) input, got shape ",
                x.sizes());
    mode = Resample::cubic;
  } else {
    NABLA_CHECK(ValueError, o.mode == linear_mode[spatial - 1], "interpolate: mode '", o.mode, "' does not fit a ",
                x.dim(), "-D input (use 'nearest', 'nearest-exact', 'area', '", linear_mode[spatial - 1], "'",
                spatial == 2 ? " or 'bicubic')" : ")");
    mode = Resample::linear;
  }
  const bool corners_apply = mode == Resample::linear || mode == Resample::cubic;
  NABLA_CHECK(ValueError, corners_apply || !o.align_corners.has_value(),
              "interpolate: align_corners only applies to the ", "linear and bicubic modes, not to '", o.mode, "'");
  NABLA_CHECK(ValueError, o.size.empty() != o.scale_factor.empty(),
              "interpolate: give exactly one of size and scale_factor");
  const size_t given = o.size.empty() ? o.scale_factor.size() : o.size.size();
  NABLA_CHECK(ValueError, given == 1 || static_cast<int64_t>(given) == spatial,
              "interpolate: ", o.size.empty() ? "scale_factor" : "size", " has ", given, " values for ", spatial,
              " spatial dims of input ", x.sizes());
  Tensor out = x;
  for (int64_t k = 0; k < spatial; ++k) {
    const int64_t d = 2 + k;
    const int64_t n_in = x.size(d);
    int64_t n_out;
    double inv_scale;
    if (!o.size.empty()) {
      n_out = o.size.size() == 1 ? o.size[0] : o.size[static_cast<size_t>(k)];
      inv_scale = n_out > 0 ? static_cast<double>(n_in) / static_cast<double>(n_out) : 0;
    } else {
      const double s = o.scale_factor.size() == 1 ? o.scale_factor[0] : o.scale_factor[static_cast<size_t>(k)];
      NABLA_CHECK(ValueError, s > 0, "interpolate: scale_factor must be positive, got ", s);
      n_out = static_cast<int64_t>(std::floor(static_cast<double>(n_in) * s));
      // area is adaptive pooling to the output size, whichever way the size was given (as PyTorch).
      inv_scale = mode == Resample::area ? static_cast<double>(n_in) / static_cast<double>(n_out) : 1.0 / s;
    }
    NABLA_CHECK(ShapeError, n_in > 0 && n_out > 0, "interpolate: input ", x.sizes(), " and output size ", n_out,
                " along dim ", d, " must both be non-empty");
    out = resample_dim(out, d, n_out, inv_scale, mode, o.align_corners.value_or(false));
  }
  return out;
}

// ---- distances --------------------------------------------------------------------------------------

Tensor normalize(const Tensor& x, double p, int64_t dim, double eps) {
  NABLA_CHECK(ShapeError, x.dim() > 0, "normalize: expected a tensor with at least one dim, got a 0-dim tensor");
  return x / clamp_min(x.norm(p, {dim}, /*keepdim=*/true), eps);
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  if (auto ac = autocast_internal::cast<OpId::cosine_similarity>(x1, x2)) [[unlikely]]
    return cosine_similarity(ac[0], ac[1], dim, eps);
  Shape shape = broadcast_shapes(x1.sizes(), x2.sizes(), "cosine_similarity");
  NABLA_CHECK(ShapeError, !shape.empty(), "cosine_similarity: expected tensors with at least one dim, got shapes ",
              x1.sizes(), " and ", x2.sizes());
  Tensor a = x1.expand(shape), b = x2.expand(shape);
  Tensor na = clamp_min(a.norm(2, {dim}), eps), nb = clamp_min(b.norm(2, {dim}), eps);
  return (a * b).sum({dim}) / (na * nb);
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  Shape shape = broadcast_shapes(x1.sizes(), x2.sizes(), "pairwise_distance");
  NABLA_CHECK(ShapeError, !shape.empty(), "pairwise_distance: expected tensors with at least one dim, got shapes ",
              x1.sizes(), " and ", x2.sizes());
  return (x1 - x2 + eps).norm(p, {-1}, keepdim);
}

// ---- normalization --------------------------------------------------------------------------------

namespace {

// xhat = (x - mean) * invstd over `dims` (keepdim statistics, biased variance), recorded as one
// node. Backward, with g the incoming gradient and means taken over `dims`:
//   dx = invstd * (g - mean(g) - xhat * mean(g * xhat))
// It saves x, mean and invstd; under create_graph the statistics are recomputed from x with
// differentiable ops, so second derivatives are exact.
Tensor normalize_impl(const Tensor& x, const Shape& dims, double eps, Tensor* mean_out, Tensor* var_out) {
  NABLA_CHECK(DTypeError, x.is_floating_point(), "normalize: input must be floating, got ", x.dtype());
  Tensor mean, var, invstd, y;
  {
    autograd::NoGradGuard ng;
    std::tie(var, mean) = var_mean(x, dims, /*correction=*/0, /*keepdim=*/true);
    invstd = rsqrt(var + eps);
    y = (x - mean) * invstd;
  }
  if (mean_out) *mean_out = mean;
  if (var_out) *var_out = var;
  if (autograd::needs_grad(x)) {
    autograd::record("NormalizeBackward", {&x}, {&y},
                     [sx = autograd::save(x), mean, invstd, dims, eps](Node& n, GradList& grads) {
                       Tensor xv = sx.unpack(n);
                       Tensor m = mean, is = invstd;
                       if (autograd::GradMode::is_enabled()) {  // create_graph: keep the dependence on x
                         auto [v, mu] = var_mean(xv, dims, 0, true);
                         m = mu;
                         is = rsqrt(v + eps);
                       }
                       Tensor xhat = (xv - m) * is;
                       const Tensor& gy = grads[0];
                       Tensor gx = (gy - gy.mean(dims, true) - xhat * (gy * xhat).mean(dims, true)) * is;
                       return GradList{gx};
                     });
  }
  return y;
}

// Shape (1, C, 1, ...) for per-channel tensors of an (N, C, *) input.
Shape channel_shape(int64_t ndim, int64_t c) {
  Shape s(static_cast<size_t>(ndim), 1);
  s[1] = c;
  return s;
}

Tensor affine(Tensor y, const Tensor& weight, const Tensor& bias, IntArrayRef shape) {
  if (weight.defined()) y = y * weight.view(shape);
  if (bias.defined()) y = y + bias.view(shape);
  return y;
}

}  // namespace

Tensor normalize_over(const Tensor& x, IntArrayRef dims, double eps) {
  Shape d;
  for (int64_t v : dims) d.push_back(wrap_dim(v, x.dim(), "normalize_over"));
  return normalize_impl(x, d, eps, nullptr, nullptr);
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  // The core op: fused kernels on the CPU and through cuDNN, Tensor ops for higher derivatives.
  return nabla::batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps);
}

Tensor rms_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight, std::optional<double> eps) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  NABLA_CHECK(DTypeError, x.defined() && is_floating(x.dtype()), "rms_norm: expected a floating input, got ",
              x.defined() ? internal::describe(x) : std::string("an undefined tensor"));
  const bool ok =
      k >= 1 && x.dim() >= k && std::equal(normalized_shape.begin(), normalized_shape.end(), x.sizes().end() - k);
  NABLA_CHECK(ShapeError, ok, "rms_norm: normalized_shape ", normalized_shape,
              " must match the trailing dims of the input, got input of shape ", x.sizes());
  if (weight.defined())
    NABLA_CHECK(ShapeError, weight.sizes() == normalized_shape.vec(), "rms_norm: weight must have shape ",
                normalized_shape, ", got ", weight.sizes());
  // torch.finfo(dtype).eps
  const double e = eps                        ? *eps
                   : x.dtype() == DType::f64  ? 2.220446049250313e-16
                   : x.dtype() == DType::f16  ? 0.0009765625
                   : x.dtype() == DType::bf16 ? 0.0078125
                                              : 1.1920928955078125e-07;
  NABLA_CHECK(ValueError, e >= 0, "rms_norm: eps must not be negative, got ", e);
  Shape dims;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  const Tensor xf = is_reduced_float(x.dtype()) ? x.to(DType::f32) : x;
  Tensor y = (xf * (xf * xf).mean(dims, /*keepdim=*/true).add(e).rsqrt()).to(x.dtype());
  return weight.defined() ? y * weight : y;
}

Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
  if (auto ac = autocast_internal::cast<OpId::layer_norm>(x, weight, bias)) [[unlikely]]
    return layer_norm(ac[0], normalized_shape, ac[1], ac[2], eps);
  int64_t k = static_cast<int64_t>(normalized_shape.size());
  bool ok = k >= 1 && x.dim() >= k && std::equal(normalized_shape.begin(), normalized_shape.end(), x.sizes().end() - k);
  NABLA_CHECK(ShapeError, ok, "layer_norm: normalized_shape ", normalized_shape,
              " must match the trailing dims of the input, got input of shape ", x.sizes());
  for (const Tensor* t : {&weight, &bias})
    if (t->defined())
      NABLA_CHECK(ShapeError, t->sizes() == normalized_shape.vec(), "layer_norm: weight and bias must have shape ",
                  normalized_shape, ", got ", t->sizes());
  // float16/bfloat16 input, float32 weight and bias: float32 inside, the input's dtype out (as PyTorch 2.x).
  if (internal::lowp_with_f32_params(x, {&weight, &bias}))
    return layer_norm(x.to(DType::f32), normalized_shape, weight, bias, eps).to(x.dtype());
  Shape dims;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) dims.push_back(d);
  Tensor y = normalize_impl(x, dims, eps, nullptr, nullptr);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  if (auto ac = autocast_internal::cast<OpId::group_norm>(x, weight, bias)) [[unlikely]]
    return group_norm(ac[0], num_groups, ac[1], ac[2], eps);
  NABLA_CHECK(ShapeError, x.dim() >= 2, "group_norm: expected input (N, C, *), got ", x.sizes());
  int64_t n = x.size(0), c = x.size(1);
  NABLA_CHECK(ValueError, num_groups > 0 && c % num_groups == 0, "group_norm: the number of channels (", c,
              ") must be divisible by num_groups (", num_groups, ")");
  for (const Tensor* t : {&weight, &bias})
    if (t->defined())
      NABLA_CHECK(ShapeError, t->dim() == 1 && t->size(0) == c, "group_norm: weight and bias must have shape [", c,
                  "], got ", shape_str(*t));
  if (internal::lowp_with_f32_params(x, {&weight, &bias}))
    return group_norm(x.to(DType::f32), num_groups, weight, bias, eps).to(x.dtype());
  Tensor y = normalize_impl(x.reshape({n, num_groups, -1}), Shape{2}, eps, nullptr, nullptr).view(x.sizes());
  return affine(y, weight, bias, channel_shape(x.dim(), c));
}

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool use_input_stats, double momentum, double eps) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::instance_norm>(
        t, {x, running_mean, running_var, weight, bias}, {.use_input_stats = use_input_stats, .eps = eps},
        [&] { return instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps); });
  NABLA_CHECK(ShapeError, x.dim() >= 3, "instance_norm: expected input (N, C, *) with a spatial dim, got ", x.sizes());
  const int64_t c = x.size(1);
  for (const Tensor* t : {&running_mean, &running_var})
    if (t->defined())
      NABLA_CHECK(ShapeError, t->dim() == 1 && t->size(0) == c,
                  "instance_norm: running_mean and running_var must have "
                  "shape [",
                  c, "], got ", shape_str(*t));
  if (!use_input_stats) {
    NABLA_CHECK(ValueError, running_mean.defined() && running_var.defined(),
                "instance_norm: use_input_stats=false needs running_mean and running_var");
    return functional::batch_norm(x, running_mean, running_var, weight, bias, /*training=*/false, momentum, eps);
  }
  // PyTorch's _verify_spatial_size: one value per instance normalizes to 0 (variance 0).
  int64_t spatial_numel = 1;
  for (int64_t d = 2; d < x.dim(); ++d) spatial_numel *= x.size(d);
  NABLA_CHECK(ValueError, spatial_numel != 1,
              "instance_norm: expected more than 1 spatial element when training (or "
              "use_input_stats), got input of shape ",
              x.sizes());
  if (running_mean.defined() || running_var.defined()) {
    autograd::NoGradGuard ng;
    Shape spatial;
    for (int64_t d = 2; d < x.dim(); ++d) spatial.push_back(d);
    Tensor xd = x.detach();
    Tensor rm = running_mean, rv = running_var;  // handles to the caller's buffers, updated in place
    if (rm.defined()) rm.mul_(1 - momentum).add_(xd.mean(spatial).mean({0}).to(rm.dtype()), momentum);
    if (rv.defined()) rv.mul_(1 - momentum).add_(xd.var(spatial, /*unbiased=*/true).mean({0}).to(rv.dtype()), momentum);
  }
  return group_norm(x, c, weight, bias, eps);  // one group per channel: statistics per (sample, channel)
}

Tensor pixel_shuffle(const Tensor& x, int64_t r) {
  NABLA_CHECK(ShapeError, x.dim() >= 3, "pixel_shuffle: expected input (*, C r^2, H, W), got ", x.sizes());
  NABLA_CHECK(ValueError, r > 0, "pixel_shuffle: upscale_factor must be positive, got ", r);
  const int64_t nd = x.dim(), c = x.size(nd - 3), h = x.size(nd - 2), w = x.size(nd - 1);
  NABLA_CHECK(ShapeError, c % (r * r) == 0, "pixel_shuffle: the channels (", c, ") of input ", x.sizes(),
              " must be divisible by upscale_factor^2 (", r * r, ")");
  Shape lead(x.sizes().begin(), x.sizes().end() - 3);
  Shape split = lead, perm, out = lead;
  for (int64_t v : {c / (r * r), r, r, h, w}) split.push_back(v);
  for (int64_t i = 0; i < static_cast<int64_t>(lead.size()); ++i) perm.push_back(i);
  const int64_t b = static_cast<int64_t>(lead.size());
  for (int64_t v : {b, b + 3, b + 1, b + 4, b + 2}) perm.push_back(v);  // (C, H, r, W, r)
  for (int64_t v : {c / (r * r), h * r, w * r}) out.push_back(v);
  return x.reshape(split).permute(perm).reshape(out);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t r) {
  NABLA_CHECK(ShapeError, x.dim() >= 3, "pixel_unshuffle: expected input (*, C, H r, W r), got ", x.sizes());
  NABLA_CHECK(ValueError, r > 0, "pixel_unshuffle: downscale_factor must be positive, got ", r);
  const int64_t nd = x.dim(), c = x.size(nd - 3), h = x.size(nd - 2), w = x.size(nd - 1);
  NABLA_CHECK(ShapeError, h % r == 0 && w % r == 0, "pixel_unshuffle: the height and width of input ", x.sizes(),
              " must be divisible by downscale_factor (", r, ")");
  Shape lead(x.sizes().begin(), x.sizes().end() - 3);
  Shape split = lead, perm, out = lead;
  for (int64_t v : {c, h / r, r, w / r, r}) split.push_back(v);
  for (int64_t i = 0; i < static_cast<int64_t>(lead.size()); ++i) perm.push_back(i);
  const int64_t b = static_cast<int64_t>(lead.size());
  for (int64_t v : {b, b + 2, b + 4, b + 1, b + 3}) perm.push_back(v);  // (C, r, r, H, W)
  for (int64_t v : {c * r * r, h / r, w / r}) out.push_back(v);
  return x.reshape(split).permute(perm).reshape(out);
}

Tensor affine_grid(const Tensor& theta, IntArrayRef size, bool align_corners) {
  NABLA_CHECK(DTypeError, theta.is_floating_point(), "affine_grid: theta must be floating, got ", theta.dtype());
  const int64_t k = static_cast<int64_t>(size.size()) - 2;  // spatial dims: 2 or 3
  NABLA_CHECK(ShapeError, k == 2 || k == 3, "affine_grid: size must be (N, C, H, W) or (N, C, D, H, W), got ", size);
  NABLA_CHECK(ShapeError, theta.dim() == 3 && theta.size(0) == size[0] && theta.size(1) == k && theta.size(2) == k + 1,
              "affine_grid: expected theta of shape (", size[0], ", ", k, ", ", k + 1, ") for size ", size, ", got ",
              theta.sizes());
  for (int64_t i = 2; i < k + 2; ++i)
    NABLA_CHECK(ValueError, size[i] > 0, "affine_grid: spatial sizes must be positive, got ", size);
  // Coordinates along one dim of n points.
  auto coords = [&](int64_t n) {
    Tensor t = linspace(-1, 1, n, TensorOptions().dtype(theta.dtype()).device(theta.device()));
    return (align_corners || n == 1) ? (n == 1 ? t * 0.0 : t) : t * (static_cast<double>(n - 1) / n);
  };
  // The base grid (spatial..., k + 1): x (the last dim) first, then y (and z), then 1.
  Shape spatial(size.begin() + 2, size.end());
  std::vector<Tensor> cols;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t dim = k - 1 - j;  // x varies along the last spatial dim
    Shape view(static_cast<size_t>(k), 1);
    view[static_cast<size_t>(dim)] = spatial[static_cast<size_t>(dim)];
    cols.push_back(coords(spatial[static_cast<size_t>(dim)]).view(view).expand(spatial));
  }
  cols.push_back(ones(spatial, TensorOptions().dtype(theta.dtype()).device(theta.device())));
  Tensor base = stack(cols, -1).reshape({1, -1, k + 1});  // (1, prod(spatial), k + 1)
  Tensor grid = matmul(base, theta.transpose(1, 2));      // (N, prod(spatial), k)
  Shape out{size[0]};
  for (int64_t v : spatial) out.push_back(v);
  out.push_back(k);
  return grid.reshape(out);
}

// ---- 1-d pooling ------------------------------------------------------------------------------------

namespace {
// f applied to x (N, C, L) or (C, L) seen as images of height 1.
template <class F>
Tensor pool1d(const Tensor& x, const char* op, F&& f) {
  NABLA_CHECK(ShapeError, x.dim() == 2 || x.dim() == 3, op, ": expected input (N, C, L) or (C, L), got ", x.sizes());
  return f(x.unsqueeze(-2)).squeeze(-2);
}
}  // namespace

Tensor max_pool1d(const Tensor& x, int64_t k, std::optional<int64_t> stride, int64_t padding, int64_t dilation,
                  bool ceil_mode) {
  return pool1d(x, "max_pool1d", [&](const Tensor& x2) {
    return nabla::max_pool2d(x2, {1, k}, {1, stride.value_or(k)}, {0, padding}, {1, dilation}, ceil_mode);
  });
}

Tensor avg_pool1d(const Tensor& x, int64_t k, std::optional<int64_t> stride, int64_t padding, bool ceil_mode,
                  bool count_include_pad) {
  return pool1d(x, "avg_pool1d", [&](const Tensor& x2) {
    return nabla::avg_pool2d(x2, {1, k}, {1, stride.value_or(k)}, {0, padding}, ceil_mode, count_include_pad);
  });
}

Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size) {
  return pool1d(x, "adaptive_avg_pool1d", [&](const Tensor& x2) {
    return nabla::adaptive_avg_pool2d(x2, {1, output_size});
  });
}

Tensor adaptive_max_pool1d(const Tensor& x, int64_t output_size) {
  return pool1d(x, "adaptive_max_pool1d", [&](const Tensor& x2) {
    return nabla::adaptive_max_pool2d(x2, {1, output_size});
  });
}

// ---- activations ----------------------------------------------------------------------------------

Tensor celu(const Tensor& x, double alpha) {
  NABLA_CHECK(ValueError, alpha != 0, "celu: alpha cannot be 0");
  return elu(x / alpha) * alpha;
}

Tensor tanhshrink(const Tensor& x) { return x - x.tanh(); }

Tensor threshold(const Tensor& x, double threshold, double value) { return x.masked_fill(x <= threshold, value); }

Tensor glu(const Tensor& x, int64_t dim) {
  NABLA_CHECK(IndexError, x.dim() > 0, "glu: expected a tensor with at least one dim, got a scalar");
  int64_t d = dim < 0 ? dim + x.dim() : dim;
  NABLA_CHECK(IndexError, d >= 0 && d < x.dim(), "glu: dim ", dim, " is out of range for shape ", x.sizes());
  NABLA_CHECK(ShapeError, x.size(d) % 2 == 0, "glu: the halved dim must have an even size, but dim ", dim, " of shape ",
              x.sizes(), " has size ", x.size(d));
  int64_t half = x.size(d) / 2;
  return x.narrow(d, 0, half) * x.narrow(d, half, half).sigmoid();
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  if (auto ac = autocast_internal::cast<OpId::prelu>(x, weight)) [[unlikely]]
    return prelu(ac[0], ac[1]);
  const int64_t c = weight.numel();
  Tensor w = weight;
  if (c == 1) {
    w = weight.reshape({});
  } else {
    NABLA_CHECK(ShapeError, x.dim() >= 2 && x.size(1) == c, "prelu: weight has ", c,
                " elements (one per channel), but input of shape ", x.sizes(), " has ", x.dim() >= 2 ? x.size(1) : 1,
                " channels (dim 1)");
    Shape ws(static_cast<size_t>(x.dim() - 1), 1);
    ws[0] = c;
    w = weight.reshape(ws);
  }
  return where(x > 0, x, w * x);
}

Tensor softmin(const Tensor& x, int64_t dim) { return (-x).softmax(dim); }

// ---- dropout --------------------------------------------------------------------------------------

namespace {
Tensor dropout_with_mask_shape(const Tensor& x, double p, IntArrayRef mask_shape, const char* op) {
  NABLA_CHECK(ValueError, p >= 0 && p <= 1, op, ": probability must be in [0, 1], got ", p);
  NABLA_CHECK(DTypeError, x.is_floating_point(), op, ": input must be floating, got ", x.dtype());
  if (p == 1) return x * zeros(mask_shape, dtype(x.dtype()).device(x.device()));
  // The mask is drawn in float32 whatever x's dtype, so a seed gives the same mask in every dtype.
  Tensor mask = empty(mask_shape, dtype(kFloat32).device(x.device()));
  mask.bernoulli_(1 - p);
  mask = mask.to(x.dtype());
  mask.div_(1 - p);
  return x * mask;
}
}  // namespace

Tensor dropout(const Tensor& x, double p, bool training) {
  NABLA_CHECK(ValueError, p >= 0 && p <= 1, "dropout: probability must be in [0, 1], got ", p);
  if (!training || p == 0) return x;
  return dropout_with_mask_shape(x, p, x.sizes(), "dropout");
}

Tensor dropout2d(const Tensor& x, double p, bool training) {
  NABLA_CHECK(ShapeError, x.dim() == 3 || x.dim() == 4, "dropout2d: expected input (N, C, H, W) or (C, H, W), got ",
              x.sizes());
  NABLA_CHECK(ValueError, p >= 0 && p <= 1, "dropout2d: probability must be in [0, 1], got ", p);
  if (!training || p == 0) return x;
  Shape ms = x.sizes();
  ms[ms.size() - 1] = 1;
  ms[ms.size() - 2] = 1;
  return dropout_with_mask_shape(x, p, ms, "dropout2d");
}

}  // namespace nabla::nn::functional
