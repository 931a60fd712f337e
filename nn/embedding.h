// Embedding: a lookup table of num_embeddings vectors of size embedding_dim; EmbeddingBag: reduced per bag.
#pragma once

#include <optional>
#include <string>

#include "module.h"

namespace nabla::nn {

struct EmbeddingOptions {
  // This row starts at zero and receives no gradient (e.g. for padding tokens); may be negative.
  std::optional<int64_t> padding_idx{};
};

// indices: int64 (*) -> (*, embedding_dim). weight starts as N(0, 1) (padding row zero).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, EmbeddingOptions options = {});
  Tensor forward(Tensor indices) override;
  void reset_parameters() override;
  std::string extra_repr() const override;
  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx{};  // normalized to [0, num_embeddings)
  Tensor weight;
};

// EmbeddingBag: per bag, the sum, mean or max of its rows (F::embedding_bag), without materialising
// the (indices, embedding_dim) rows of each lookup for the caller. forward(input) takes (B, L) bags;
// forward(input, offsets) a 1-D input and the bags' start offsets; per_sample_weights (mode "sum").
struct EmbeddingBagOptions {
  std::string mode = "mean";
  bool include_last_offset = false;
  std::optional<int64_t> padding_idx{};  // this row starts at zero and is left out of its bags
};

class EmbeddingBag : public Module {
 public:
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, EmbeddingBagOptions options = {});
  Tensor forward(Tensor input) override { return forward(input, Tensor{}, Tensor{}); }
  Tensor forward(Tensor input, Tensor offsets) override { return forward(input, offsets, Tensor{}); }
  Tensor forward(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights);
  void reset_parameters() override;
  std::string extra_repr() const override;
  int64_t num_embeddings, embedding_dim;
  EmbeddingBagOptions options;  // padding_idx normalized to [0, num_embeddings)
  Tensor weight;
};

}  // namespace nabla::nn
