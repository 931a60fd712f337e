// nn::functional over spatial dims, built from core ops (so autograd, CUDA and every dtype come with
// them): pad's non-constant modes, string padding for convolutions, transposed 1-d/3-d convolutions,
// unfold/fold, avg_pool2d's divisor_override, max_unpool, grid_sample and embedding_bag.
// Each becomes a few index_select / index_add / gather / scatter calls with index tensors computed
// once on the host from the shapes.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/autocast.h"
#include "core/error.h"
#include "core/trace.h"
#include "nn/functional.h"

namespace nabla::nn::functional {

namespace {

// `v` as n values: one value repeated, or exactly n.
template <size_t N>
std::array<int64_t, N> expand_arg(IntArrayRef v, const char* op, const char* what) {
  NABLA_CHECK(ValueError, v.size() == 1 || v.size() == N, op, ": ", what, " takes 1 or ", N, " values, got ", v);
  std::array<int64_t, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = v.size() == 1 ? v[0] : v[i];
  return out;
}

Tensor index_tensor(const std::vector<int64_t>& v, const Tensor& like) {
  return tensor(v, dtype(kInt64).device(like.device()));
}

}  // namespace

// ---- padding --------------------------------------------------------------------------------------

Tensor pad(const Tensor& x, IntArrayRef padding, std::string_view mode, double value) {
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::pad>(t, {x},
                                    {.padding = trace::ints(padding), .value = value, .mode = std::string(mode)},
                                    [&] { return pad(x, padding, mode, value); });
  if (mode == "constant") return nabla::pad(x, padding, value);
  // PyTorch's CPU float32 list holds reflection_pad1d/2d and replication_pad1d/2d/3d.
  if (autocast_internal::active()) [[unlikely]] {
    const bool fp32 = (mode == "reflect" && padding.size() <= 4) || mode == "replicate";
    if (auto ac = autocast_internal::cast_inputs_as(OpId::pad, fp32 ? CastPolicy::fp32 : CastPolicy::none,
                                                    CastPolicy::none, {&x}))
      return pad(ac[0], padding, mode, value);
  }
  const bool reflect = mode == "reflect", replicate = mode == "replicate", circular = mode == "circular";
  NABLA_CHECK(ValueError, reflect || replicate || circular, "pad: mode must be 'constant', 'reflect', 'replicate' or ",
              "'circular', got '", mode, "'");
  const int64_t k = static_cast<int64_t>(padding.size()) / 2;
  NABLA_CHECK(ValueError, padding.size() % 2 == 0 && k >= 1 && k <= 3, "pad: mode '", mode,
              "' takes 2, 4 or 6 padding values (the last 1, 2 or 3 dims), got ", padding);
  NABLA_CHECK(ShapeError, x.dim() == k + 1 || x.dim() == k + 2, "pad: mode '", mode, "' with ", padding.size(),
              " padding values expects a ", k + 1, "-D or ", k + 2, "-D input, got shape ", x.sizes());
  Tensor y = x;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t d = x.dim() - 1 - i, n = x.size(d);
    const int64_t before = padding[static_cast<size_t>(2 * i)], after = padding[static_cast<size_t>(2 * i + 1)];
    if (reflect)
      NABLA_CHECK(ValueError, before < n && after < n, "pad: reflect padding (", before, ", ", after,
                  ") must be smaller than the size ", n, " of dim ", d, " of input ", x.sizes());
    if (circular)
      NABLA_CHECK(ValueError, before <= n && after <= n, "pad: circular padding (", before, ", ", after,
                  ") must be at most the size ", n, " of dim ", d, " of input ", x.sizes());
    const int64_t out = n + before + after;
    NABLA_CHECK(ShapeError, n > 0 && out > 0, "pad: padding (", before, ", ", after, ") of dim ", d, " of input ",
                x.sizes(), " leaves ", out, " elements; mode '", mode, "' needs a non-empty input and output");
    if (before == 0 && after == 0) continue;
    std::vector<int64_t> idx(static_cast<size_t>(out));
    for (int64_t j = 0; j < out; ++j) {
      int64_t s = j - before;
      if (reflect) s = s < 0 ? -s : (s >= n ? 2 * (n - 1) - s : s);
      else if (replicate) s = std::clamp<int64_t>(s, 0, n - 1);
      else s = ((s % n) + n) % n;
      idx[static_cast<size_t>(j)] = s;
    }
    y = y.index_select(d, index_tensor(idx, x));
  }
  return y;
}

// ---- convolutions with string padding -------------------------------------------------------------

namespace {

// PyTorch's "same": total = dilation * (k - 1) per dim, `total / 2` on both sides by the convolution,
// the odd remainder as one more zero after, padded here.
template <size_t N, class Conv>
Tensor conv_string_padding(const char* op, const Tensor& x, const Tensor& weight, IntArrayRef stride,
                           std::string_view padding, IntArrayRef dilation, Conv conv) {
  if (padding == "valid") return conv(x, std::vector<int64_t>(N, 0));
  NABLA_CHECK(ValueError, padding == "same", op, ": padding must be 'same', 'valid' or numbers, got '", padding, "'");
  auto st = expand_arg<N>(stride, op, "stride");
  auto dil = expand_arg<N>(dilation, op, "dilation");
  NABLA_CHECK(ValueError, std::all_of(st.begin(), st.end(), [](int64_t s) { return s == 1; }), op,
              ": padding='same' needs stride 1, got ", stride);
  NABLA_CHECK(ShapeError, weight.dim() == static_cast<int64_t>(N) + 2, op, ": expected a ", N + 2,
              "-D weight, got shape ", weight.sizes());
  std::vector<int64_t> sym(N), extra;  // extra: (before, after) pairs, last dim first, for pad()
  bool asymmetric = false;
  for (size_t i = 0; i < N; ++i) {
    const int64_t total = dil[i] * (weight.size(static_cast<int64_t>(2 + i)) - 1);
    sym[i] = total / 2;
    asymmetric = asymmetric || total % 2 != 0;
  }
  if (!asymmetric) return conv(x, sym);
  for (size_t i = N; i-- > 0;) {
    extra.push_back(0);
    extra.push_back(dil[i] * (weight.size(static_cast<int64_t>(2 + i)) - 1) % 2);
  }
  return conv(nabla::pad(x, extra), sym);
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, const ConvPadding& padding,
              int64_t dilation, int64_t groups) {
  return conv_string_padding<1>("conv1d", x, weight, stride, padding.value, dilation,
                                [&](const Tensor& in, const std::vector<int64_t>& p) {
                                  return nabla::conv1d(in, weight, bias, stride, p[0], dilation, groups);
                                });
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, const ConvPadding& padding,
              IntArrayRef dilation, int64_t groups) {
  return conv_string_padding<2>("conv2d", x, weight, stride, padding.value, dilation,
                                [&](const Tensor& in, const std::vector<int64_t>& p) {
                                  return nabla::conv2d(in, weight, bias, stride, p, dilation, groups);
                                });
}

Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, const ConvPadding& padding,
              IntArrayRef dilation, int64_t groups) {
  return conv_string_padding<3>("conv3d", x, weight, stride, padding.value, dilation,
                                [&](const Tensor& in, const std::vector<int64_t>& p) {
                                  return nabla::conv3d(in, weight, bias, stride, p, dilation, groups);
                                });
}

// ---- transposed convolutions --------------------------------------------------------------------

Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
                        int64_t output_padding, int64_t groups, int64_t dilation) {
  if (auto ac = autocast_internal::cast<OpId::conv_transpose1d>(x, weight, bias)) [[unlikely]]
    return conv_transpose1d(ac[0], ac[1], ac[2], stride, padding, output_padding, groups, dilation);
  NABLA_CHECK(ShapeError, x.dim() == 2 || x.dim() == 3,
              "conv_transpose1d: expected input (N, C_in, L) or (C_in, L), got shape ", x.sizes());
  NABLA_CHECK(ShapeError, weight.dim() == 3, "conv_transpose1d: expected weight (C_in, C_out/groups, k), got shape ",
              weight.sizes());
  // As a 2-D transposed convolution with a unit height.
  Tensor y = nabla::conv_transpose2d(x.unsqueeze(-2), weight.unsqueeze(2), bias, {1, stride}, {0, padding},
                                     {0, output_padding}, groups, {1, dilation});
  return y.squeeze(-2);
}

Tensor conv_transpose3d(const Tensor& x_in, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                        IntArrayRef padding, IntArrayRef output_padding, int64_t groups, IntArrayRef dilation) {
  if (auto ac = autocast_internal::cast<OpId::conv_transpose3d>(x_in, weight, bias)) [[unlikely]]
    return conv_transpose3d(ac[0], ac[1], ac[2], stride, padding, output_padding, groups, dilation);
  const char* op = "conv_transpose3d";
  NABLA_CHECK(ShapeError, (x_in.dim() == 4 || x_in.dim() == 5) && weight.dim() == 5, op,
              ": expected input (N, C_in, D, H, W) or (C_in, D, H, W) and weight (C_in, C_out/groups, kD, kH, "
              "kW), got shapes ",
              x_in.sizes(), " and ", weight.sizes());
  Tensor x = x_in.dim() == 4 ? x_in.unsqueeze(0) : x_in;
  NABLA_CHECK(ShapeError, x.size(1) == weight.size(0), op, ": input has ", x.size(1), " channels but weight of shape ",
              weight.sizes(), " expects ", weight.size(0));
  NABLA_CHECK(ValueError, groups > 0 && weight.size(0) % groups == 0, op, ": groups ", groups, " must divide C_in ",
              weight.size(0));
  auto st = expand_arg<3>(stride, op, "stride"), pd = expand_arg<3>(padding, op, "padding");
  auto opd = expand_arg<3>(output_padding, op, "output_padding"), dil = expand_arg<3>(dilation, op, "dilation");
  ConvParams p;
  p.ndim = 3;
  p.groups = groups;
  std::vector<int64_t> size(3);
  for (size_t i = 0; i < 3; ++i) {
    NABLA_CHECK(ValueError, st[i] > 0 && dil[i] > 0 && pd[i] >= 0, op,
                ": stride and dilation must be positive and padding ", "non-negative, got ", stride, ", ", dilation,
                " and ", padding);
    NABLA_CHECK(ValueError, opd[i] >= 0 && opd[i] < std::max(st[i], dil[i]), op, ": output_padding ", output_padding,
                " must be smaller than stride or dilation");
    p.stride[i] = st[i];
    p.padding[i] = pd[i];
    p.dilation[i] = dil[i];
    size[i] = (x.size(static_cast<int64_t>(2 + i)) - 1) * st[i] - 2 * pd[i] +
              dil[i] * (weight.size(static_cast<int64_t>(2 + i)) - 1) + opd[i] + 1;
    NABLA_CHECK(ShapeError, size[i] > 0, op, ": the output size would be ", size[i], " along spatial dim ", i,
                " for input ", x_in.sizes());
  }
  // The transposed convolution is the input-gradient of the convolution whose weight it shares.
  Tensor y = nabla::conv_input_grad(x, weight, size, p);
  if (bias.defined()) y = y + bias.view({1, -1, 1, 1, 1});
  return x_in.dim() == 4 ? y.squeeze(0) : y;
}

// ---- sliding blocks -------------------------------------------------------------------------------

namespace {

struct Blocks {
  std::array<int64_t, 2> k, d, p, s, out;
  Tensor idx_h, idx_w;  // padded positions read by (ki, oi) and (kj, oj), row-major
};

Blocks plan_blocks(const char* op, const Tensor& like, int64_t h, int64_t w, IntArrayRef kernel_size,
                   IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride) {
  Blocks b;
  b.k = expand_arg<2>(kernel_size, op, "kernel_size");
  b.d = expand_arg<2>(dilation, op, "dilation");
  b.p = expand_arg<2>(padding, op, "padding");
  b.s = expand_arg<2>(stride, op, "stride");
  const int64_t in[2] = {h, w};
  std::vector<int64_t> idx[2];
  for (size_t i = 0; i < 2; ++i) {
    NABLA_CHECK(ValueError, b.k[i] > 0 && b.d[i] > 0 && b.s[i] > 0 && b.p[i] >= 0, op,
                ": kernel_size, dilation and stride ", "must be positive and padding non-negative, got ", kernel_size,
                ", ", dilation, ", ", stride, " and ", padding);
    const int64_t reach = b.d[i] * (b.k[i] - 1) + 1;
    b.out[i] = (in[i] + 2 * b.p[i] - reach) / b.s[i] + 1;
    NABLA_CHECK(ShapeError, in[i] + 2 * b.p[i] >= reach && b.out[i] > 0, op, ": a block of ",
                IntArrayRef(b.k.data(), 2), " (dilation ", IntArrayRef(b.d.data(), 2),
                ") does not fit the padded spatial size (", h + 2 * b.p[0], ", ", w + 2 * b.p[1], ")");
    for (int64_t ki = 0; ki < b.k[i]; ++ki)
      for (int64_t o = 0; o < b.out[i]; ++o) idx[i].push_back(ki * b.d[i] + o * b.s[i]);
  }
  b.idx_h = index_tensor(idx[0], like);
  b.idx_w = index_tensor(idx[1], like);
  return b;
}

}  // namespace

Tensor unfold(const Tensor& x_in, IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding,
              IntArrayRef stride) {
  NABLA_CHECK(ShapeError, x_in.dim() == 3 || x_in.dim() == 4,
              "unfold: expected input (N, C, H, W) or (C, H, W), got shape ", x_in.sizes());
  Tensor x = x_in.dim() == 3 ? x_in.unsqueeze(0) : x_in;
  const int64_t n = x.size(0), c = x.size(1);
  Blocks b = plan_blocks("unfold", x, x.size(2), x.size(3), kernel_size, dilation, padding, stride);
  Tensor xp = (b.p[0] || b.p[1]) ? nabla::pad(x, {b.p[1], b.p[1], b.p[0], b.p[0]}) : x;
  // (N, C, kH oH, kW oW) -> (N, C, kH, oH, kW, oW) -> (N, C, kH, kW, oH, oW)
  Tensor blocks = xp.index_select(2, b.idx_h).index_select(3, b.idx_w);
  Tensor y = blocks.view({n, c, b.k[0], b.out[0], b.k[1], b.out[1]})
                 .permute({0, 1, 2, 4, 3, 5})
                 .reshape({n, c * b.k[0] * b.k[1], b.out[0] * b.out[1]});
  return x_in.dim() == 3 ? y.squeeze(0) : y;
}

Tensor fold(const Tensor& x_in, IntArrayRef output_size, IntArrayRef kernel_size, IntArrayRef dilation,
            IntArrayRef padding, IntArrayRef stride) {
  NABLA_CHECK(ShapeError, x_in.dim() == 2 || x_in.dim() == 3,
              "fold: expected input (N, C kH kW, L) or (C kH kW, L), got shape ", x_in.sizes());
  Tensor x = x_in.dim() == 2 ? x_in.unsqueeze(0) : x_in;
  auto os = expand_arg<2>(output_size, "fold", "output_size");
  NABLA_CHECK(ValueError, os[0] > 0 && os[1] > 0, "fold: output_size must be positive, got ", output_size);
  Blocks b = plan_blocks("fold", x, os[0], os[1], kernel_size, dilation, padding, stride);
  const int64_t n = x.size(0), kk = b.k[0] * b.k[1];
  NABLA_CHECK(ShapeError, x.size(1) % kk == 0, "fold: expected dim 1 of input ", x_in.sizes(),
              " to be divisible by the ", "block size ", b.k[0], " * ", b.k[1]);
  NABLA_CHECK(ShapeError, x.size(2) == b.out[0] * b.out[1], "fold: input ", x_in.sizes(), " has ", x.size(2),
              " blocks, but output_size ", output_size, " with kernel ", IntArrayRef(b.k.data(), 2), " holds ",
              b.out[0], " * ", b.out[1], " = ", b.out[0] * b.out[1]);
  const int64_t c = x.size(1) / kk, hp = os[0] + 2 * b.p[0], wp = os[1] + 2 * b.p[1];
  Tensor cols = x.view({n, c, b.k[0], b.k[1], b.out[0], b.out[1]})
                    .permute({0, 1, 2, 4, 3, 5})
                    .reshape({n, c, b.k[0] * b.out[0], b.k[1] * b.out[1]});
  // unfold's two index_selects, transposed: sum the blocks back into the padded plane.
  Tensor rows =
      nabla::index_add(zeros({n, c, b.k[0] * b.out[0], wp}, dtype(x.dtype()).device(x.device())), 3, b.idx_w, cols);
  Tensor y = nabla::index_add(zeros({n, c, hp, wp}, dtype(x.dtype()).device(x.device())), 2, b.idx_h, rows);
  if (b.p[0] || b.p[1]) y = y.narrow(2, b.p[0], os[0]).narrow(3, b.p[1], os[1]);
  return x_in.dim() == 2 ? y.squeeze(0) : y;
}

// ---- pooling extras -------------------------------------------------------------------------------

Tensor avg_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  if (!divisor_override) return nabla::avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
  NABLA_CHECK(ValueError, *divisor_override != 0, "avg_pool2d: divisor_override must not be zero");
  // The mean with padding counted divides each window's sum by its size clipped to the padded input
  // (PyTorch's rule); multiplying by that size over divisor_override gives sum / divisor_override.
  Tensor y = nabla::avg_pool2d(x, kernel_size, stride, padding, ceil_mode, /*count_include_pad=*/true);
  NABLA_CHECK(ShapeError, x.dim() >= 3, "avg_pool2d: expected input (N, C, H, W) or (C, H, W), got shape ", x.sizes());
  auto k = expand_arg<2>(kernel_size, "avg_pool2d", "kernel_size");
  auto s = stride.empty() ? k : expand_arg<2>(stride, "avg_pool2d", "stride");
  auto p = expand_arg<2>(padding, "avg_pool2d", "padding");
  const int64_t in[2] = {x.size(-2), x.size(-1)}, out[2] = {y.size(-2), y.size(-1)};
  std::vector<double> size[2];
  for (size_t i = 0; i < 2; ++i)
    for (int64_t o = 0; o < out[i]; ++o) {
      const int64_t start = o * s[i] - p[i], end = std::min(start + k[i], in[i] + p[i]);
      size[i].push_back(static_cast<double>(end - start) / (i == 0 ? static_cast<double>(*divisor_override) : 1.0));
    }
  const TensorOptions opt = dtype(y.dtype()).device(y.device());
  return y * tensor(size[0], opt).view({out[0], 1}) * tensor(size[1], opt).view({1, out[1]});
}

namespace {
// The output size of max_unpool (PyTorch's _unpool_output_size): the default (in - 1) * stride -
// 2 padding + kernel per dim, or `requested`, which must lie strictly within one stride of it
// (outside, the flat indices max_pool gave would land at other positions than they came from).
template <size_t N>
std::array<int64_t, N> unpool_output_size(const char* op, const Tensor& x, const std::array<int64_t, N>& k,
                                          const std::array<int64_t, N>& s, const std::array<int64_t, N>& p,
                                          IntArrayRef requested) {
  std::array<int64_t, N> def{}, out{};
  for (size_t i = 0; i < N; ++i) def[i] = (x.size(x.dim() - static_cast<int64_t>(N - i)) - 1) * s[i] - 2 * p[i] + k[i];
  if (requested.empty()) return def;
  NABLA_CHECK(ValueError, requested.size() == N || requested.size() == N + 2, op, ": output_size should have ", N,
              " or ", N + 2, " elements, got ", requested);
  for (size_t i = 0; i < N; ++i) {
    out[i] = requested[requested.size() - N + i];
    NABLA_CHECK(ValueError, def[i] - s[i] < out[i] && out[i] < def[i] + s[i], op, ": invalid output_size ", requested,
                " (dim ", i, " must be between ", def[i] - s[i], " and ", def[i] + s[i], ", exclusive, for input ",
                x.sizes(), ")");
  }
  return out;
}

// x (N, C, H_in, W_in) or (C, H_in, W_in) with int64 indices of its shape (flat positions in each
// output plane) -> (N, C, H, W) or (C, H, W) for os = (H, W): zeros where no maximum came from.
Tensor unpool_plane(const char* op, const Tensor& x_in, const Tensor& indices_in, std::array<int64_t, 2> os) {
  NABLA_CHECK(DTypeError, indices_in.dtype() == kInt64, op, ": indices must be int64, got ", indices_in.dtype());
  NABLA_CHECK(ShapeError, os[0] > 0 && os[1] > 0, op, ": the output size would be ", IntArrayRef(os.data(), 2),
              " for input ", x_in.sizes());
  Tensor x = x_in.dim() == 3 ? x_in.unsqueeze(0) : x_in;
  Tensor indices = x_in.dim() == 3 ? indices_in.unsqueeze(0) : indices_in;
  const int64_t n = x.size(0), c = x.size(1), plane = os[0] * os[1];
  Tensor flat_idx = indices.reshape({n, c, -1});
  if (flat_idx.numel() > 0) {
    const int64_t lo = flat_idx.min().item<int64_t>(), hi = flat_idx.max().item<int64_t>();
    NABLA_CHECK(IndexError, lo >= 0 && hi < plane, op, ": found index ", lo < 0 ? lo : hi,
                " outside the output plane of ", os[0], " x ", os[1], " = ", plane, " positions");
  }
  Tensor y = zeros({n, c, plane}, dtype(x.dtype()).device(x.device())).scatter(2, flat_idx, x.reshape({n, c, -1}));
  y = y.view({n, c, os[0], os[1]});
  return x_in.dim() == 3 ? y.squeeze(0) : y;
}
}  // namespace

Tensor max_unpool2d(const Tensor& x_in, const Tensor& indices_in, IntArrayRef kernel_size, IntArrayRef stride,
                    IntArrayRef padding, IntArrayRef output_size) {
  if (auto ac = autocast_internal::cast<OpId::max_unpool2d>(x_in, indices_in)) [[unlikely]]
    return max_unpool2d(ac[0], ac[1], kernel_size, stride, padding, output_size);
  const char* op = "max_unpool2d";
  NABLA_CHECK(ShapeError, (x_in.dim() == 3 || x_in.dim() == 4) && indices_in.sizes() == x_in.sizes(), op,
              ": expected input (N, C, H, W) or (C, H, W) and indices of its shape, got ", x_in.sizes(), " and ",
              indices_in.sizes());
  auto k = expand_arg<2>(kernel_size, op, "kernel_size");
  auto s = stride.empty() ? k : expand_arg<2>(stride, op, "stride");
  auto p = expand_arg<2>(padding, op, "padding");
  return unpool_plane(op, x_in, indices_in, unpool_output_size<2>(op, x_in, k, s, p, output_size));
}

Tensor max_unpool1d(const Tensor& x, const Tensor& indices, int64_t kernel_size, std::optional<int64_t> stride,
                    int64_t padding, std::optional<int64_t> output_size) {
  if (auto ac = autocast_internal::cast<OpId::max_unpool1d>(x, indices)) [[unlikely]]
    return max_unpool1d(ac[0], ac[1], kernel_size, stride, padding, output_size);
  const char* op = "max_unpool1d";
  NABLA_CHECK(ShapeError, (x.dim() == 2 || x.dim() == 3) && indices.sizes() == x.sizes(), op,
              ": expected input (N, C, L) or (C, L) and indices of its shape, got ", x.sizes(), " and ",
              indices.sizes());
  const int64_t s = stride.value_or(kernel_size);
  const std::vector<int64_t> req = output_size ? std::vector<int64_t>{*output_size} : std::vector<int64_t>{};
  const int64_t len = unpool_output_size<1>(op, x, {kernel_size}, {s}, {padding}, req)[0];
  // With a unit height the flat positions of the 2-D plane are the 1-D positions.
  return unpool_plane(op, x.unsqueeze(-2), indices.unsqueeze(-2), {1, len}).squeeze(-2);
}

// ---- grid sampling ----------------------------------------------------------------------------------

namespace {

// PyTorch's reflect_coordinates: reflect `in` into [twice_low / 2, twice_high / 2].
Tensor reflect_coordinates(const Tensor& in, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return zeros_like(in);
  const double lo = static_cast<double>(twice_low) / 2, span = static_cast<double>(twice_high - twice_low) / 2;
  Tensor a = abs(in - lo);
  Tensor extra = fmod(a, span);
  Tensor flips = floor(a.detach() / span);
  Tensor even = fmod(flips, 2.0) == 0;
  return where(even, extra + lo, (span - extra) + lo);
}

// Pixel coordinates of grid values in [-1, 1] along a dim of `size` pixels.
Tensor unnormalized_coordinates(const Tensor& g, int64_t size, bool align_corners) {
  const double n = static_cast<double>(size);
  return align_corners ? (g + 1) * ((n - 1) / 2) : ((g + 1) * n - 1) / 2;
}

// Pixel coordinates `c` after the padding rule: border clamps them into the input, reflection
// mirrors them at its edges (at the pixel centres with align_corners, else at the outer edges); zeros
// leaves them (the samples outside read 0).
Tensor padded_coordinates(Tensor c, int64_t size, const GridSampleOptions& o) {
  const double n = static_cast<double>(size);
  if (o.padding_mode == "border") return clamp(c, 0.0, n - 1);
  if (o.padding_mode == "reflection") {
    c = o.align_corners ? reflect_coordinates(c, 0, 2 * (size - 1)) : reflect_coordinates(c, -1, 2 * size - 1);
    return clamp(c, 0.0, n - 1);
  }
  return c;
}

// Pixel coordinates of grid values along a dim of `size` pixels, after the padding rule.
Tensor source_coordinates(const Tensor& g, int64_t size, const GridSampleOptions& o) {
  return padded_coordinates(unnormalized_coordinates(g, size, o.align_corners), size, o);
}

// The four weights of bicubic convolution (Keys, A = -0.75, as PyTorch) for taps at -1, 0, 1, 2
// from a point at fraction t past tap 0.
std::array<Tensor, 4> cubic_weights(const Tensor& t) {
  constexpr double A = -0.75;
  auto near = [&](const Tensor& x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [&](const Tensor& x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };  // 1 < |x| < 2
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

}  // namespace

Tensor grid_sample(const Tensor& input, const Tensor& grid, const GridSampleOptions& o) {
  if (auto ac = autocast_internal::cast<OpId::grid_sample>(input, grid)) [[unlikely]]
    return grid_sample(ac[0], ac[1], o);
  if (trace::Tracer* t = trace::active()) [[unlikely]]
    return trace::traced<OpId::grid_sample>(
        t, {input, grid}, {.mode = o.mode, .padding_mode = o.padding_mode, .align_corners = o.align_corners},
        [&] { return grid_sample(input, grid, o); });
  const char* op = "grid_sample";
  const int64_t spatial = input.dim() - 2;  // 2: (N, C, H, W), 3: (N, C, D, H, W)
  NABLA_CHECK(ShapeError,
              (spatial == 2 || spatial == 3) && grid.dim() == input.dim() && grid.size(-1) == spatial &&
                  grid.size(0) == input.size(0),
              op, ": expected input (N, C, H, W) with grid (N, H_out, W_out, 2), or input (N, C, D, H, W) with ",
              "grid (N, D_out, H_out, W_out, 3), got shapes ", input.sizes(), " and ", grid.sizes());
  NABLA_CHECK(DTypeError, is_floating(input.dtype()) && input.dtype() == grid.dtype(), op,
              ": expected floating input and grid of one dtype, got ", input.dtype(), " and ", grid.dtype());
  NABLA_CHECK(DeviceError, input.device() == grid.device(), op, ": input is on ", input.device(), " but grid on ",
              grid.device());
  const bool nearest = o.mode == "nearest", bicubic = o.mode == "bicubic";
  NABLA_CHECK(ValueError, nearest || bicubic || o.mode == "bilinear", op,
              ": mode must be 'bilinear', 'nearest' or 'bicubic', got '", o.mode, "'");
  NABLA_CHECK(ValueError, !bicubic || spatial == 2, op, ": mode 'bicubic' needs a 4-D input (N, C, H, W), got shape ",
              input.sizes());
  NABLA_CHECK(ValueError, o.padding_mode == "zeros" || o.padding_mode == "border" || o.padding_mode == "reflection", op,
              ": padding_mode must be 'zeros', 'border' or 'reflection', got '", o.padding_mode, "'");
  const int64_t n = input.size(0), c = input.size(1);
  // grid's last dim is (x, y[, z]): x indexes the last input dim, y the one before, z the first.
  std::vector<int64_t> size(static_cast<size_t>(spatial)), stride(static_cast<size_t>(spatial));
  int64_t plane_size = 1;
  for (int64_t k = 0; k < spatial; ++k) {
    size[static_cast<size_t>(k)] = input.size(input.dim() - 1 - k);
    stride[static_cast<size_t>(k)] = plane_size;
    plane_size *= size[static_cast<size_t>(k)];
  }
  Shape out_spatial(grid.sizes().begin() + 1, grid.sizes().end() - 1);
  int64_t out_count = 1;
  for (int64_t v : out_spatial) out_count *= v;
  Shape out_shape{n, c};
  for (int64_t v : out_spatial) out_shape.push_back(v);
  std::vector<Tensor> pos;  // source pixel coordinates, (N, *out_spatial) each
  for (int64_t k = 0; k < spatial; ++k)
    pos.push_back(bicubic ? unnormalized_coordinates(grid.select(-1, k), size[static_cast<size_t>(k)], o.align_corners)
                          : source_coordinates(grid.select(-1, k), size[static_cast<size_t>(k)], o));
  Tensor plane = input.reshape({n, c, plane_size});
  Shape wshape{n, 1};
  for (int64_t v : out_spatial) wshape.push_back(v);
  // One corner: input at integer coordinates `at` weighted by `weight`, 0 where they lie outside.
  auto corner = [&](const std::vector<Tensor>& at, const Tensor& weight) {
    Tensor inside, flat;
    for (int64_t k = 0; k < spatial; ++k) {
      const double hi = static_cast<double>(size[static_cast<size_t>(k)] - 1);
      const Tensor& a = at[static_cast<size_t>(k)];
      Tensor in_k = logical_and(a >= 0, a <= hi);
      inside = inside.defined() ? logical_and(inside, in_k) : in_k;
      Tensor term = clamp(a, 0.0, hi) * static_cast<double>(stride[static_cast<size_t>(k)]);
      flat = flat.defined() ? flat + term : term;
    }
    Tensor idx = flat.to(kInt64).reshape({n, 1, out_count}).expand({n, c, out_count});
    Tensor v = plane.gather(2, idx).view(out_shape);
    return v * where(inside, weight, zeros_like(weight)).reshape(wshape);
  };
  if (nearest) {
    std::vector<Tensor> at;
    for (const Tensor& p : pos) at.push_back(round(p.detach()));  // ties to even, as PyTorch's nearbyint
    return corner(at, ones_like(pos[0]));
  }
  std::vector<Tensor> lo, frac;
  for (const Tensor& p : pos) {
    lo.push_back(floor(p.detach()));
    frac.push_back(p - lo.back());  // the fractions carry the gradient with respect to the grid
  }
  Tensor out;
  if (bicubic) {  // 4 x 4 taps around the point; the padding rule applies to each tap (as PyTorch)
    const std::array<Tensor, 4> wx = cubic_weights(frac[0]), wy = cubic_weights(frac[1]);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        std::vector<Tensor> at = {padded_coordinates(lo[0] + static_cast<double>(j - 1), size[0], o),
                                  padded_coordinates(lo[1] + static_cast<double>(i - 1), size[1], o)};
        Tensor term = corner(at, wx[static_cast<size_t>(j)] * wy[static_cast<size_t>(i)]);
        out = out.defined() ? out + term : term;
      }
    return out;
  }
  for (int64_t mask = 0; mask < (int64_t{1} << spatial); ++mask) {
    std::vector<Tensor> at;
    Tensor weight;
    for (int64_t k = 0; k < spatial; ++k) {
      const bool up = (mask >> k) & 1;
      const Tensor& f = frac[static_cast<size_t>(k)];
      at.push_back(up ? lo[static_cast<size_t>(k)] + 1 : lo[static_cast<size_t>(k)]);
      Tensor w = up ? f : 1 - f;
      weight = weight.defined() ? weight * w : w;
    }
    Tensor term = corner(at, weight);
    out = out.defined() ? out + term : term;
  }
  return out;
}

// ---- embedding bags ---------------------------------------------------------------------------------

Tensor embedding_bag(const Tensor& input, const Tensor& weight, const Tensor& offsets, const Tensor& per_sample_weights,
                     const EmbeddingBagOptions& o) {
  const char* op = "embedding_bag";
  const bool sum = o.mode == "sum", mean = o.mode == "mean", max = o.mode == "max";
  NABLA_CHECK(ValueError, sum || mean || max, op, ": mode must be 'sum', 'mean' or 'max', got '", o.mode, "'");
  NABLA_CHECK(ShapeError, weight.dim() == 2, op, ": expected weight (num_embeddings, embedding_dim), got shape ",
              weight.sizes());
  NABLA_CHECK(DTypeError, input.dtype() == kInt64 || input.dtype() == kInt32, op,
              ": indices must be int64 or int32, got ", input.dtype());
  const int64_t dim = weight.size(1), num = weight.size(0);
  // The bag of each index and each index's slot within its bag (host side: offsets are few).
  int64_t bags = 0, longest = 0;
  std::vector<int64_t> bag, slot;
  if (!offsets.defined()) {
    NABLA_CHECK(ShapeError, input.dim() == 2, op,
                ": without offsets, input must be 2-D (bags, indices per bag), got shape ", input.sizes());
    bags = input.size(0);
    longest = input.size(1);
    for (int64_t b = 0; b < bags; ++b)
      for (int64_t j = 0; j < longest; ++j) {
        bag.push_back(b);
        slot.push_back(j);
      }
  } else {
    NABLA_CHECK(ShapeError, input.dim() == 1 && offsets.dim() == 1, op,
                ": with offsets, input and offsets must be 1-D, got ", "shapes ", input.sizes(), " and ",
                offsets.sizes());
    Tensor off = offsets.to(kCPU).to(kInt64).contiguous();
    const int64_t* p = off.data_ptr<int64_t>();
    const int64_t m = off.numel(), total = input.numel();
    bags = o.include_last_offset ? std::max<int64_t>(m - 1, 0) : m;
    NABLA_CHECK(ValueError, m == 0 || p[0] == 0, op, ": offsets[0] must be 0, got ", m ? p[0] : 0);
    for (int64_t b = 0; b < bags; ++b) {
      const int64_t start = p[b], end = b + 1 < m ? p[b + 1] : total;
      NABLA_CHECK(ValueError, start <= end && end <= total, op,
                  ": offsets must be non-decreasing and at most the number of ", "indices ", total, "; bag ", b,
                  " spans [", start, ", ", end, ")");
      for (int64_t j = start; j < end; ++j) {
        bag.push_back(b);
        slot.push_back(j - start);
      }
      longest = std::max(longest, end - start);
    }
    NABLA_CHECK(ValueError, static_cast<int64_t>(bag.size()) == total, op, ": the bags cover ", bag.size(), " of the ",
                total, " indices (include_last_offset: the last offset must be the number of indices)");
  }
  const TensorOptions wopt = dtype(weight.dtype()).device(weight.device());
  if (bags == 0) return zeros({0, dim}, wopt);
  Tensor idx = input.reshape({-1}).to(kInt64);
  const int64_t count = idx.numel();
  Tensor rows = embedding(weight, idx);  // checks the index range
  Tensor keep = o.padding_idx ? (idx != (*o.padding_idx < 0 ? *o.padding_idx + num : *o.padding_idx)) : Tensor{};
  if (per_sample_weights.defined()) {
    NABLA_CHECK(ValueError, sum, op, ": per_sample_weights is only supported for mode 'sum', got mode '", o.mode, "'");
    NABLA_CHECK(ShapeError, per_sample_weights.sizes() == input.sizes(), op, ": per_sample_weights ",
                per_sample_weights.sizes(), " must have the indices' shape ", input.sizes());
    rows = rows * per_sample_weights.reshape({-1, 1});
  }
  if (keep.defined()) rows = where(keep.unsqueeze(1), rows, zeros_like(rows));
  Tensor bag_of = index_tensor(bag, weight);
  if (sum) return nabla::index_add(zeros({bags, dim}, wopt), 0, bag_of, rows);
  Tensor present = keep.defined() ? keep.to(weight.dtype()) : ones({count}, wopt);
  Tensor members = nabla::index_add(zeros({bags}, wopt), 0, bag_of, present).unsqueeze(1);  // per bag, padding left out
  if (mean) return nabla::index_add(zeros({bags, dim}, wopt), 0, bag_of, rows) / clamp_min(members, 1.0);
  // max: scatter each row into its (bag, slot) of a (bags * longest, dim) table of -inf, reduce the slots.
  std::vector<int64_t> dest(bag.size());
  for (size_t i = 0; i < bag.size(); ++i) dest[i] = bag[i] * longest + slot[i];
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (keep.defined()) rows = where(keep.unsqueeze(1), rows, full_like(rows, neg_inf));
  Tensor table = full({bags * longest, dim}, neg_inf, wopt)
                     .scatter(0, index_tensor(dest, weight).view({-1, 1}).expand({count, dim}), rows);
  Tensor best = std::get<0>(table.view({bags, longest, dim}).max(1));
  return where(members > 0, best, zeros_like(best));
}

}  // namespace nabla::nn::functional
