// Vision Transformer (vit_b_16), as torchvision.models.vision_transformer: state dict names such as
// class_token, conv_proj.weight, encoder.pos_embedding,
// encoder.layers.encoder_layer_0.self_attention.in_proj_weight, encoder.layers.encoder_layer_0.mlp.3.bias,
// encoder.ln.weight, heads.head.weight.
//
//   auto model = vision::vit_b_16();                       // x: (N, 3, 224, 224) -> (N, 1000)
//   auto small = vision::vit_b_16({.image_size = 32});     // the same weights' shapes but pos_embedding (1, 5, 768)
//
// The image size is fixed at construction (pos_embedding has one row per patch, plus the class
// token's), as in torchvision. Differences from torchvision: no conv stem (conv_stem_configs) and
// no pre-logits layer (representation_size), which none of torchvision's builders use.
#pragma once

#include <memory>

#include "../nn/attention.h"
#include "../nn/container.h"
#include "../nn/dropout.h"
#include "../nn/linear.h"
#include "../nn/module.h"
#include "layers.h"

namespace nabla::vision {

// torchvision's MLPBlock: a Sequential of Linear(in_dim, mlp_dim) "0", GELU "1", Dropout "2",
// Linear(mlp_dim, in_dim) "3", Dropout "4"; xavier_uniform_ weights, normal(std 1e-6) biases.
class MLPBlock : public MLP {
 public:
  MLPBlock(int64_t in_dim, int64_t mlp_dim, double dropout);
};

// Pre-norm transformer block: x + dropout(self_attention(ln_1(x))), then that + mlp(ln_2(that)).
// x: (N, L, hidden_dim); LayerNorms with eps 1e-6; batch-first MultiheadAttention.
class EncoderBlock : public nn::Module {
 public:
  EncoderBlock(int64_t num_heads, int64_t hidden_dim, int64_t mlp_dim, double dropout, double attention_dropout);
  Tensor forward(Tensor x) override;
  std::shared_ptr<nn::LayerNorm> ln_1;
  std::shared_ptr<nn::MultiheadAttention> self_attention;
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::LayerNorm> ln_2;
  std::shared_ptr<MLPBlock> mlp;
};

// pos_embedding (1, seq_length, hidden_dim) added, dropout, the blocks (named encoder_layer_0, ...),
// a final LayerNorm ln.
class VitEncoder : public nn::Module {
 public:
  VitEncoder(int64_t seq_length, int64_t num_layers, int64_t num_heads, int64_t hidden_dim, int64_t mlp_dim,
             double dropout, double attention_dropout);
  Tensor forward(Tensor x) override;
  Tensor pos_embedding;
  std::shared_ptr<nn::Dropout> dropout;
  std::shared_ptr<nn::Sequential> layers;
  std::shared_ptr<nn::LayerNorm> ln;
};

struct VisionTransformerOptions {
  int64_t image_size = 224;
  int64_t patch_size = 16;
  int64_t num_layers = 12;
  int64_t num_heads = 12;
  int64_t hidden_dim = 768;
  int64_t mlp_dim = 3072;
  double dropout = 0.0;
  double attention_dropout = 0.0;
  int64_t num_classes = 1000;
};

// conv_proj (a patch_size x patch_size convolution of stride patch_size) turns the image into
// (image_size / patch_size)^2 tokens; class_token (1, 1, hidden_dim) is put in front; the encoder
// runs; heads.head classifies the class token's output.
class VisionTransformer : public nn::Module {
 public:
  explicit VisionTransformer(VisionTransformerOptions options = {});
  Tensor forward(Tensor x) override;
  VisionTransformerOptions options;
  std::shared_ptr<nn::Conv2d> conv_proj;
  Tensor class_token;
  std::shared_ptr<VitEncoder> encoder;
  std::shared_ptr<nn::Sequential> heads;
};

// ViT-B/16: patch 16, 12 layers, 12 heads, hidden 768, MLP 3072 (options.patch_size, num_layers,
// num_heads, hidden_dim and mlp_dim are overwritten with these; image_size, dropout and num_classes kept).
std::shared_ptr<VisionTransformer> vit_b_16(VisionTransformerOptions options = {});

// torchvision renames the keys of ViT files saved before its MLPBlock became an MLP
// ("mlp.linear_1.weight" -> "mlp.0.weight", "mlp.linear_2.*" -> "mlp.3.*"), as the published
// vit_b_16 weights are; load_weights does the same.
nn::StateDict rename_legacy_vit_keys(const nn::StateDict& sd);

}  // namespace nabla::vision
