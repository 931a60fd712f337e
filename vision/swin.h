// Swin Transformer (swin_t), as torchvision.models.swin_transformer: state dict names such as
// features.0.0.weight (patch embedding), features.1.0.attn.relative_position_bias_table,
// features.1.0.attn.relative_position_index (an int64 buffer), features.1.0.attn.qkv.weight,
// features.1.1.mlp.3.bias, features.2.reduction.weight (PatchMerging), norm.weight, head.bias.
//
//   auto model = vision::swin_t();   // x: (N, 3, H, W) -> (N, 1000); any H, W >= 4 (windows are padded)
//
// Layout: the features are channels-last, (N, H, W, C), from the patch embedding to the final norm.
// Differences from torchvision: the V2 variants (cosine attention, continuous position bias) are
// not here; attention dropout applies in training mode only (torchvision's functional applies it
// whenever p > 0, which its builders never set); the stochastic depth masks come from nabla's generator.
#pragma once

#include <memory>
#include <vector>

#include "../nn/container.h"
#include "../nn/linear.h"
#include "../nn/module.h"
#include "../nn/normalization.h"
#include "layers.h"

namespace nabla::vision {

// torchvision's shifted_window_attention: windowed multi-head self-attention with a relative
// position bias. input (B, H, W, C) is padded at the bottom/right to multiples of window_size,
// rolled by -shift_size (each shift set to 0 where the window covers the padded size), split into
// windows of window_size[0] * window_size[1] tokens; each window attends within itself with
// softmax(q k^T / sqrt(C / num_heads) + relative_position_bias (1, num_heads, L, L) [+ the shifted
// windows' mask: -100 between tokens from different regions]); the output is projected, put back
// in place, rolled back and unpadded: (B, H, W, C). qkv_weight (3C, C), proj_weight (C, C), the
// biases optional (undefined: none). Dropouts apply when training.
Tensor shifted_window_attention(const Tensor& input, const Tensor& qkv_weight, const Tensor& proj_weight,
                                const Tensor& relative_position_bias, const std::vector<int64_t>& window_size,
                                int64_t num_heads, const std::vector<int64_t>& shift_size,
                                double attention_dropout = 0.0, double dropout = 0.0, const Tensor& qkv_bias = {},
                                const Tensor& proj_bias = {}, bool training = false);

// The mask of shifted windows for a padded (pad_h, pad_w) map: (num_windows, L, L), 0 where two
// tokens of a window come from the same region of the rolled map, -100 elsewhere (float32, CPU).
Tensor shifted_window_mask(int64_t pad_h, int64_t pad_w, const std::vector<int64_t>& window_size,
                           const std::vector<int64_t>& shift_size);

// The relative position index of a window: (L * L) int64, index into the bias table of
// (2 Wh - 1) * (2 Ww - 1) rows for each pair of tokens (torchvision's define_relative_position_index).
Tensor relative_position_index(const std::vector<int64_t>& window_size);

// ShiftedWindowAttention: parameter relative_position_bias_table ((2 Wh - 1)(2 Ww - 1), num_heads),
// buffer relative_position_index, children qkv (Linear(dim, 3 dim)) and proj (Linear(dim, dim)).
// x: (B, H, W, C) -> (B, H, W, C).
class ShiftedWindowAttention : public nn::Module {
 public:
  ShiftedWindowAttention(int64_t dim, std::vector<int64_t> window_size, std::vector<int64_t> shift_size,
                         int64_t num_heads, bool qkv_bias = true, bool proj_bias = true, double attention_dropout = 0.0,
                         double dropout = 0.0);
  Tensor forward(Tensor x) override;
  // (1, num_heads, L, L): the table's rows picked by the index.
  Tensor relative_position_bias() const;
  std::vector<int64_t> window_size, shift_size;
  int64_t num_heads;
  double attention_dropout, dropout;
  Tensor relative_position_bias_table, relative_position_index;
  std::shared_ptr<nn::Linear> qkv, proj;
};

// x + stochastic_depth(attn(norm1(x))), then that + stochastic_depth(mlp(norm2(that))); mlp is an
// MLP(dim, [dim * mlp_ratio, dim]) with GELU. x: (B, H, W, C).
class SwinTransformerBlock : public nn::Module {
 public:
  SwinTransformerBlock(int64_t dim, int64_t num_heads, std::vector<int64_t> window_size,
                       std::vector<int64_t> shift_size, double mlp_ratio = 4.0, double dropout = 0.0,
                       double attention_dropout = 0.0, double stochastic_depth_prob = 0.0, double norm_eps = 1e-5);
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::LayerNorm> norm1;
  std::shared_ptr<ShiftedWindowAttention> attn;
  std::shared_ptr<StochasticDepth> stochastic_depth;
  std::shared_ptr<nn::LayerNorm> norm2;
  std::shared_ptr<MLP> mlp;
};

// Halves H and W and doubles C: x (..., H, W, C) padded to even H and W, its four interleaved
// (H/2, W/2) sub-grids concatenated on channels (x[0::2, 0::2], x[1::2, 0::2], x[0::2, 1::2],
// x[1::2, 1::2]), norm (LayerNorm(4C)), reduction (Linear(4C, 2C), no bias).
class PatchMerging : public nn::Module {
 public:
  explicit PatchMerging(int64_t dim, double norm_eps = 1e-5);
  Tensor forward(Tensor x) override;
  int64_t dim;
  std::shared_ptr<nn::Linear> reduction;
  std::shared_ptr<nn::LayerNorm> norm;
};

struct SwinTransformerOptions {
  std::vector<int64_t> patch_size = {4, 4};
  int64_t embed_dim = 96;
  std::vector<int64_t> depths = {2, 2, 6, 2};
  std::vector<int64_t> num_heads = {3, 6, 12, 24};
  std::vector<int64_t> window_size = {7, 7};
  double mlp_ratio = 4.0;
  double dropout = 0.0;
  double attention_dropout = 0.0;
  double stochastic_depth_prob = 0.2;  // swin_t's (the class's own default is 0.1)
  int64_t num_classes = 1000;
};

// features: "0" patch embedding (Conv2d patch_size stride patch_size, Permute to channels last,
// LayerNorm), then per stage a Sequential of blocks (shift 0 and window / 2 alternating) and a
// PatchMerging between stages; norm, permute back, avgpool, flatten, head.
class SwinTransformer : public nn::Module {
 public:
  explicit SwinTransformer(SwinTransformerOptions options = {});
  Tensor forward(Tensor x) override;
  SwinTransformerOptions options;
  std::shared_ptr<nn::Sequential> features;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<Permute> permute;
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Flatten> flatten;
  std::shared_ptr<nn::Linear> head;
};

// Swin-T: embed 96, depths 2-2-6-2, heads 3-6-12-24, window 7 (options' architecture fields are
// overwritten; dropout, attention_dropout, stochastic_depth_prob and num_classes kept).
std::shared_ptr<SwinTransformer> swin_t(SwinTransformerOptions options = {});

}  // namespace nabla::vision
