#include "vision/vit.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "nn/activation.h"
#include "nn/init.h"

namespace nabla::vision {

MLPBlock::MLPBlock(int64_t in_dim, int64_t mlp_dim, double dropout)
    : MLP(in_dim, {mlp_dim, in_dim}, activation<nn::GELU>(), dropout) {
  for (const auto& l : {at<nn::Linear>(0), at<nn::Linear>(3)}) {
    nn::init::xavier_uniform_(l->weight);
    nn::init::normal_(l->bias, 0.0, 1e-6);
  }
}

EncoderBlock::EncoderBlock(int64_t num_heads, int64_t hidden_dim, int64_t mlp_dim, double p, double attention_dropout) {
  ln_1 = register_module(
      "ln_1", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{hidden_dim}, nn::LayerNormOptions{.eps = 1e-6}));
  self_attention = register_module(
      "self_attention",
      std::make_shared<nn::MultiheadAttention>(
          hidden_dim, num_heads, nn::MultiheadAttentionOptions{.dropout = attention_dropout, .batch_first = true}));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p));
  ln_2 = register_module(
      "ln_2", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{hidden_dim}, nn::LayerNormOptions{.eps = 1e-6}));
  mlp = register_module("mlp", std::make_shared<MLPBlock>(hidden_dim, mlp_dim, p));
}

Tensor EncoderBlock::forward(Tensor input) {
  NABLA_CHECK(ShapeError, input.dim() == 3, "EncoderBlock: expected (batch_size, seq_length, hidden_dim), got ",
              input.sizes());
  // input: (N, L, E)
  Tensor x = (*ln_1)(input);
  x = self_attention->forward_attention(x, x, x, {.need_weights = false}).output;
  x = (*dropout)(x) + input;
  return x + (*mlp)((*ln_2)(x));
}

VitEncoder::VitEncoder(int64_t seq_length, int64_t num_layers, int64_t num_heads, int64_t hidden_dim, int64_t mlp_dim,
                       double p, double attention_dropout) {
  pos_embedding = register_parameter("pos_embedding", nn::init::normal_(empty({1, seq_length, hidden_dim}), 0.0, 0.02));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p));
  layers = register_module("layers", std::make_shared<nn::Sequential>());
  for (int64_t i = 0; i < num_layers; ++i)
    layers->push_back("encoder_layer_" + std::to_string(i),
                      std::make_shared<EncoderBlock>(num_heads, hidden_dim, mlp_dim, p, attention_dropout));
  ln = register_module(
      "ln", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{hidden_dim}, nn::LayerNormOptions{.eps = 1e-6}));
}

Tensor VitEncoder::forward(Tensor x) {
  // x: (N, L, E); pos_embedding (1, L, E)
  NABLA_CHECK(ShapeError, x.dim() == 3 && x.size(1) == pos_embedding.size(1) && x.size(2) == pos_embedding.size(2),
              "VitEncoder: expected (batch_size, ", pos_embedding.size(1), ", ", pos_embedding.size(2), "), got ",
              x.sizes());
  return (*ln)((*layers)((*dropout)(x + pos_embedding)));
}

VisionTransformer::VisionTransformer(VisionTransformerOptions o) : options(o) {
  NABLA_CHECK(ValueError, o.image_size > 0 && o.patch_size > 0 && o.image_size % o.patch_size == 0,
              "VisionTransformer: image_size ", o.image_size, " is not a multiple of patch_size ", o.patch_size);
  NABLA_CHECK(ValueError, o.num_heads > 0 && o.hidden_dim % o.num_heads == 0, "VisionTransformer: hidden_dim ",
              o.hidden_dim, " is not divisible by num_heads ", o.num_heads);
  conv_proj = register_module("conv_proj", std::make_shared<nn::Conv2d>(3, o.hidden_dim, o.patch_size,
                                                                        nn::Conv2dOptions{.stride = o.patch_size}));
  class_token = register_parameter("class_token", zeros({1, 1, o.hidden_dim}));
  int64_t seq_length = (o.image_size / o.patch_size) * (o.image_size / o.patch_size) + 1;
  encoder = register_module("encoder", std::make_shared<VitEncoder>(seq_length, o.num_layers, o.num_heads, o.hidden_dim,
                                                                    o.mlp_dim, o.dropout, o.attention_dropout));
  heads = register_module("heads", std::make_shared<nn::Sequential>());
  auto head = std::make_shared<nn::Linear>(o.hidden_dim, o.num_classes);
  heads->push_back("head", head);
  // torchvision's initialisation: the patchify stem truncated normal with std sqrt(1 / fan_in), the head zero.
  double fan_in = 3.0 * static_cast<double>(o.patch_size * o.patch_size);
  nn::init::trunc_normal_(conv_proj->weight, 0.0, std::sqrt(1.0 / fan_in));
  nn::init::zeros_(conv_proj->bias);
  nn::init::zeros_(head->weight);
  nn::init::zeros_(head->bias);
}

Tensor VisionTransformer::forward(Tensor x) {
  const auto& o = options;
  NABLA_CHECK(ShapeError, x.dim() == 4 && x.size(1) == 3 && x.size(2) == o.image_size && x.size(3) == o.image_size,
              "VisionTransformer: expected input (N, 3, ", o.image_size, ", ", o.image_size, "), got ", x.sizes());
  int64_t n = x.size(0), p = o.patch_size;
  int64_t tokens = (x.size(2) / p) * (x.size(3) / p);
  // (N, 3, H, W) -> (N, E, H/p, W/p) -> (N, E, T) -> (N, T, E)
  Tensor t = (*conv_proj)(x).reshape({n, o.hidden_dim, tokens}).permute({0, 2, 1});
  // (N, 1 + T, E): the class token in front
  t = cat({class_token.expand({n, -1, -1}), t}, 1);
  t = (*encoder)(t);
  // the class token's output: (N, E) -> (N, num_classes)
  return (*heads)(t.select(1, 0));
}

std::shared_ptr<VisionTransformer> vit_b_16(VisionTransformerOptions o) {
  o.patch_size = 16;
  o.num_layers = 12;
  o.num_heads = 12;
  o.hidden_dim = 768;
  o.mlp_dim = 3072;
  return std::make_shared<VisionTransformer>(o);
}

nn::StateDict rename_legacy_vit_keys(const nn::StateDict& state) {
  // torchvision's MLPBlock._load_from_state_dict: "{prefix}linear_{i+1}.{type}" -> "{prefix}{3*i}.{type}"
  nn::StateDict out;
  for (const auto& [k, v] : state) {
    std::string key = k;
    for (const auto& [old_part, new_part] :
         {std::pair<std::string, std::string>{".mlp.linear_1.", ".mlp.0."}, {".mlp.linear_2.", ".mlp.3."}}) {
      auto pos = key.find(old_part);
      if (pos != std::string::npos) key.replace(pos, old_part.size(), new_part);
    }
    out.insert(key, v);
  }
  return out;
}

}  // namespace nabla::vision
