#include "vision/swin.h"

#include <array>
#include <cmath>

#include "core/error.h"
#include "nn/activation.h"
#include "nn/functional.h"
#include "nn/init.h"

namespace nabla::vision {

namespace {
void check_window(const char* fn, const std::vector<int64_t>& window_size, const std::vector<int64_t>& shift_size) {
  NABLA_CHECK(ValueError, window_size.size() == 2 && shift_size.size() == 2, fn,
              ": window_size and shift_size must be of length 2, got ", window_size.size(), " and ", shift_size.size());
  NABLA_CHECK(ValueError, window_size[0] > 0 && window_size[1] > 0, fn, ": window_size must be positive, got [",
              window_size[0], ", ", window_size[1], "]");
  NABLA_CHECK(
      ValueError,
      shift_size[0] >= 0 && shift_size[1] >= 0 && shift_size[0] < window_size[0] && shift_size[1] < window_size[1], fn,
      ": shift_size [", shift_size[0], ", ", shift_size[1], "] must lie in [0, window_size)");
}
}  // namespace

Tensor shifted_window_mask(int64_t pad_h, int64_t pad_w, const std::vector<int64_t>& ws,
                           const std::vector<int64_t>& shift) {
  // The region of each pixel of the rolled map: rows [0, H - wh), [H - wh, H - sh), [H - sh, H)
  // times the same for columns (torchvision's h_slices and w_slices), numbered row-major.
  auto band = [](int64_t i, int64_t size, int64_t window, int64_t s) -> int64_t {
    if (i < size - window) return 0;
    return i < size - s ? 1 : 2;
  };
  const int64_t nh = pad_h / ws[0], nw = pad_w / ws[1], len = ws[0] * ws[1];
  // region of token t of window w: (num_windows, L)
  std::vector<int64_t> region(static_cast<size_t>(nh * nw * len));
  for (int64_t y = 0; y < pad_h; ++y)
    for (int64_t x = 0; x < pad_w; ++x) {
      int64_t w = (y / ws[0]) * nw + x / ws[1], t = (y % ws[0]) * ws[1] + x % ws[1];
      region[static_cast<size_t>(w * len + t)] = band(y, pad_h, ws[0], shift[0]) * 3 + band(x, pad_w, ws[1], shift[1]);
    }
  Tensor mask = zeros({nh * nw, len, len});
  float* m = mask.data_ptr<float>();
  for (int64_t w = 0; w < nh * nw; ++w)
    for (int64_t i = 0; i < len; ++i)
      for (int64_t j = 0; j < len; ++j)
        if (region[static_cast<size_t>(w * len + i)] != region[static_cast<size_t>(w * len + j)])
          m[(w * len + i) * len + j] = -100.0f;
  return mask;
}

Tensor relative_position_index(const std::vector<int64_t>& ws) {
  const int64_t len = ws[0] * ws[1];
  Tensor index = empty({len * len}, dtype(kInt64));
  int64_t* p = index.data_ptr<int64_t>();
  for (int64_t i = 0; i < len; ++i)
    for (int64_t j = 0; j < len; ++j) {
      // (dy + Wh - 1) * (2 Ww - 1) + (dx + Ww - 1), d = coords[i] - coords[j]
      int64_t dy = i / ws[1] - j / ws[1], dx = i % ws[1] - j % ws[1];
      p[i * len + j] = (dy + ws[0] - 1) * (2 * ws[1] - 1) + (dx + ws[1] - 1);
    }
  return index;
}

Tensor shifted_window_attention(const Tensor& input, const Tensor& qkv_weight, const Tensor& proj_weight,
                                const Tensor& relative_position_bias, const std::vector<int64_t>& window_size,
                                int64_t num_heads, const std::vector<int64_t>& shift_size_in, double attention_dropout,
                                double dropout, const Tensor& qkv_bias, const Tensor& proj_bias, bool training) {
  check_window("shifted_window_attention", window_size, shift_size_in);
  NABLA_CHECK(ShapeError, input.dim() == 4, "shifted_window_attention: expected input (B, H, W, C), got ",
              input.sizes());
  const int64_t b = input.size(0), h = input.size(1), w = input.size(2), c = input.size(3);
  NABLA_CHECK(ShapeError, num_heads > 0 && c % num_heads == 0, "shifted_window_attention: ", c,
              " channels do not split into ", num_heads, " heads");
  NABLA_CHECK(ShapeError, qkv_weight.dim() == 2 && qkv_weight.size(0) == 3 * c && qkv_weight.size(1) == c,
              "shifted_window_attention: qkv_weight should be [", 3 * c, ", ", c, "] for input ", input.sizes(),
              ", got ", qkv_weight.sizes());
  NABLA_CHECK(ShapeError, proj_weight.dim() == 2 && proj_weight.size(0) == c && proj_weight.size(1) == c,
              "shifted_window_attention: proj_weight should be [", c, ", ", c, "], got ", proj_weight.sizes());
  const int64_t wh = window_size[0], ww = window_size[1], len = wh * ww;
  NABLA_CHECK(ShapeError,
              relative_position_bias.dim() == 4 && relative_position_bias.size(1) == num_heads &&
                  relative_position_bias.size(2) == len && relative_position_bias.size(3) == len,
              "shifted_window_attention: relative_position_bias should be [1, ", num_heads, ", ", len, ", ", len,
              "], got ", relative_position_bias.sizes());
  // pad to multiples of the window: (B, pad_h, pad_w, C)
  const int64_t pad_r = (ww - w % ww) % ww, pad_b = (wh - h % wh) % wh;
  Tensor x = (pad_r || pad_b) ? pad(input, {0, 0, 0, pad_r, 0, pad_b}) : input;
  const int64_t pad_h = h + pad_b, pad_w = w + pad_r;
  // a window that covers the whole (padded) map needs no shift
  std::vector<int64_t> shift = shift_size_in;
  if (wh >= pad_h) shift[0] = 0;
  if (ww >= pad_w) shift[1] = 0;
  const bool shifted = shift[0] + shift[1] > 0;
  if (shifted) x = roll(x, {-shift[0], -shift[1]}, {1, 2});
  // partition: (B * nW, L, C)
  const int64_t nh = pad_h / wh, nw = pad_w / ww, num_windows = nh * nw;
  x = x.view({b, nh, wh, nw, ww, c}).permute({0, 1, 3, 2, 4, 5}).reshape({b * num_windows, len, c});
  // qkv: (3, B * nW, heads, L, C / heads)
  const int64_t head_dim = c / num_heads;
  Tensor qkv =
      linear(x, qkv_weight, qkv_bias).reshape({b * num_windows, len, 3, num_heads, head_dim}).permute({2, 0, 3, 1, 4});
  Tensor q = qkv.select(0, 0) * std::pow(static_cast<double>(head_dim), -0.5);
  Tensor k = qkv.select(0, 1), v = qkv.select(0, 2);
  // attn: (B * nW, heads, L, L)
  Tensor attn = q.matmul(k.transpose(-2, -1)) + relative_position_bias;
  if (shifted) {
    // mask: (nW, L, L) -> (1, nW, 1, L, L)
    Tensor mask = shifted_window_mask(pad_h, pad_w, window_size, shift).to(attn.device(), attn.dtype());
    attn = (attn.view({b, num_windows, num_heads, len, len}) + mask.unsqueeze(1).unsqueeze(0))
               .view({b * num_windows, num_heads, len, len});
  }
  attn = softmax(attn, -1);
  if (training && attention_dropout > 0) attn = nn::functional::dropout(attn, attention_dropout, true);
  // (B * nW, heads, L, hd) -> (B * nW, L, C)
  x = attn.matmul(v).transpose(1, 2).reshape({b * num_windows, len, c});
  x = linear(x, proj_weight, proj_bias);
  if (training && dropout > 0) x = nn::functional::dropout(x, dropout, true);
  // reverse the partition: (B, pad_h, pad_w, C)
  x = x.view({b, nh, nw, wh, ww, c}).permute({0, 1, 3, 2, 4, 5}).reshape({b, pad_h, pad_w, c});
  if (shifted) x = roll(x, {shift[0], shift[1]}, {1, 2});
  if (pad_r || pad_b) x = x.slice(1, 0, h).slice(2, 0, w).contiguous();
  return x;
}

ShiftedWindowAttention::ShiftedWindowAttention(int64_t dim, std::vector<int64_t> ws, std::vector<int64_t> ss,
                                               int64_t heads, bool qkv_bias, bool proj_bias, double attn_dropout,
                                               double dropout_)
    : window_size(std::move(ws)),
      shift_size(std::move(ss)),
      num_heads(heads),
      attention_dropout(attn_dropout),
      dropout(dropout_) {
  check_window("ShiftedWindowAttention", window_size, shift_size);
  NABLA_CHECK(ValueError, num_heads > 0 && dim % num_heads == 0, "ShiftedWindowAttention: dim ", dim,
              " is not divisible by num_heads ", num_heads);
  qkv = register_module("qkv", std::make_shared<nn::Linear>(dim, 3 * dim, nn::LinearOptions{.bias = qkv_bias}));
  proj = register_module("proj", std::make_shared<nn::Linear>(dim, dim, nn::LinearOptions{.bias = proj_bias}));
  relative_position_bias_table = register_parameter(
      "relative_position_bias_table",
      nn::init::trunc_normal_(zeros({(2 * window_size[0] - 1) * (2 * window_size[1] - 1), num_heads}), 0.0, 0.02));
  relative_position_index = register_buffer("relative_position_index", vision::relative_position_index(window_size));
}

Tensor ShiftedWindowAttention::relative_position_bias() const {
  // table[index]: (L * L, heads) -> (L, L, heads) -> (1, heads, L, L)
  const int64_t len = window_size[0] * window_size[1];
  return index_select(relative_position_bias_table, 0, relative_position_index)
      .view({len, len, -1})
      .permute({2, 0, 1})
      .contiguous()
      .unsqueeze(0);
}

Tensor ShiftedWindowAttention::forward(Tensor x) {
  return shifted_window_attention(x, qkv->weight, proj->weight, relative_position_bias(), window_size, num_heads,
                                  shift_size, attention_dropout, dropout, qkv->bias, proj->bias, is_training());
}

SwinTransformerBlock::SwinTransformerBlock(int64_t dim, int64_t num_heads, std::vector<int64_t> window_size,
                                           std::vector<int64_t> shift_size, double mlp_ratio, double dropout,
                                           double attention_dropout, double stochastic_depth_prob, double norm_eps) {
  norm1 = register_module(
      "norm1", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{dim}, nn::LayerNormOptions{.eps = norm_eps}));
  attn = register_module(
      "attn", std::make_shared<ShiftedWindowAttention>(dim, std::move(window_size), std::move(shift_size), num_heads,
                                                       true, true, attention_dropout, dropout));
  stochastic_depth =
      register_module("stochastic_depth", std::make_shared<StochasticDepth>(stochastic_depth_prob, "row"));
  norm2 = register_module(
      "norm2", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{dim}, nn::LayerNormOptions{.eps = norm_eps}));
  mlp = register_module(
      "mlp",
      std::make_shared<MLP>(dim, std::vector<int64_t>{static_cast<int64_t>(static_cast<double>(dim) * mlp_ratio), dim},
                            activation<nn::GELU>(), dropout));
  for (const auto& l : {mlp->at<nn::Linear>(0), mlp->at<nn::Linear>(3)}) {
    nn::init::xavier_uniform_(l->weight);
    nn::init::normal_(l->bias, 0.0, 1e-6);
  }
}

Tensor SwinTransformerBlock::forward(Tensor x) {
  // x: (B, H, W, C)
  x = x + (*stochastic_depth)((*attn)((*norm1)(x)));
  return x + (*stochastic_depth)((*mlp)((*norm2)(x)));
}

PatchMerging::PatchMerging(int64_t dim_, double norm_eps) : dim(dim_) {
  reduction =
      register_module("reduction", std::make_shared<nn::Linear>(4 * dim, 2 * dim, nn::LinearOptions{.bias = false}));
  norm = register_module(
      "norm", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{4 * dim}, nn::LayerNormOptions{.eps = norm_eps}));
}

Tensor PatchMerging::forward(Tensor x) {
  NABLA_CHECK(ShapeError, x.dim() >= 3 && x.size(-1) == dim, "PatchMerging: expected input (..., H, W, ", dim,
              "), got ", x.sizes());
  const int64_t h = x.size(-3), w = x.size(-2);
  if (h % 2 || w % 2) {
    // pad: (0, 0) on C, (0, W % 2) on W, (0, H % 2) on H
    x = pad(x, {0, 0, 0, w % 2, 0, h % 2});
  }
  // (..., H/2, W/2, C) each; -> (..., H/2, W/2, 4C)
  Tensor x0 = x.slice(-3, 0, std::nullopt, 2).slice(-2, 0, std::nullopt, 2);
  Tensor x1 = x.slice(-3, 1, std::nullopt, 2).slice(-2, 0, std::nullopt, 2);
  Tensor x2 = x.slice(-3, 0, std::nullopt, 2).slice(-2, 1, std::nullopt, 2);
  Tensor x3 = x.slice(-3, 1, std::nullopt, 2).slice(-2, 1, std::nullopt, 2);
  return (*reduction)((*norm)(cat({x0, x1, x2, x3}, -1)));
}

SwinTransformer::SwinTransformer(SwinTransformerOptions o) : options(o) {
  NABLA_CHECK(ValueError, o.patch_size.size() == 2 && o.patch_size[0] > 0 && o.patch_size[1] > 0,
              "SwinTransformer: patch_size must be two positive sizes");
  NABLA_CHECK(ValueError, !o.depths.empty() && o.depths.size() == o.num_heads.size(), "SwinTransformer: depths (",
              o.depths.size(), " stages) and num_heads (", o.num_heads.size(), ") must have one entry per stage");
  const double eps = 1e-5;
  features = register_module("features", std::make_shared<nn::Sequential>());
  features->push_back(std::make_shared<nn::Sequential>(
      std::make_shared<nn::Conv2d>(
          3, o.embed_dim, std::array<int64_t, 2>{o.patch_size[0], o.patch_size[1]},
          nn::Conv2dOptions{.stride = std::array<int64_t, 2>{o.patch_size[0], o.patch_size[1]}}),
      std::make_shared<Permute>(std::vector<int64_t>{0, 2, 3, 1}),
      std::make_shared<nn::LayerNorm>(std::vector<int64_t>{o.embed_dim}, nn::LayerNormOptions{.eps = eps})));
  int64_t total = 0, id = 0;
  for (int64_t d : o.depths) total += d;
  for (size_t s = 0; s < o.depths.size(); ++s) {
    const int64_t dim = o.embed_dim << s;
    auto stage = std::make_shared<nn::Sequential>();
    for (int64_t i = 0; i < o.depths[s]; ++i, ++id) {
      double sd_prob =
          total > 1 ? o.stochastic_depth_prob * static_cast<double>(id) / static_cast<double>(total - 1) : 0.0;
      std::vector<int64_t> shift =
          i % 2 == 0 ? std::vector<int64_t>{0, 0} : std::vector<int64_t>{o.window_size[0] / 2, o.window_size[1] / 2};
      stage->push_back(std::make_shared<SwinTransformerBlock>(dim, o.num_heads[s], o.window_size, shift, o.mlp_ratio,
                                                              o.dropout, o.attention_dropout, sd_prob, eps));
    }
    features->push_back(stage);
    if (s + 1 < o.depths.size()) features->push_back(std::make_shared<PatchMerging>(dim, eps));
  }
  const int64_t num_features = o.embed_dim << (o.depths.size() - 1);
  norm = register_module(
      "norm", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{num_features}, nn::LayerNormOptions{.eps = eps}));
  permute = register_module("permute", std::make_shared<Permute>(std::vector<int64_t>{0, 3, 1, 2}));
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1));
  flatten = register_module("flatten", std::make_shared<nn::Flatten>(1));
  head = register_module("head", std::make_shared<nn::Linear>(num_features, o.num_classes));
  // torchvision's initialisation: every Linear (the blocks' MLPs included) truncated normal 0.02, zero bias.
  for (const auto& m : modules())
    if (auto l = std::dynamic_pointer_cast<nn::Linear>(m)) {
      nn::init::trunc_normal_(l->weight, 0.0, 0.02);
      if (l->bias.defined()) nn::init::zeros_(l->bias);
    }
}

Tensor SwinTransformer::forward(Tensor x) {
  NABLA_CHECK(ShapeError, x.dim() == 4 && x.size(1) == 3, "SwinTransformer: expected input (N, 3, H, W), got ",
              x.sizes());
  NABLA_CHECK(ShapeError, x.size(2) >= options.patch_size[0] && x.size(3) >= options.patch_size[1],
              "SwinTransformer: input ", x.sizes(), " is smaller than a patch [", options.patch_size[0], ", ",
              options.patch_size[1], "]");
  // (N, 3, H, W) -> features (N, H/32, W/32, C) -> (N, C, H/32, W/32) -> (N, C) -> (N, num_classes)
  return (*head)((*flatten)((*avgpool)((*permute)((*norm)((*features)(x))))));
}

std::shared_ptr<SwinTransformer> swin_t(SwinTransformerOptions o) {
  o.patch_size = {4, 4};
  o.embed_dim = 96;
  o.depths = {2, 2, 6, 2};
  o.num_heads = {3, 6, 12, 24};
  o.window_size = {7, 7};
  return std::make_shared<SwinTransformer>(o);
}

}  // namespace nabla::vision
