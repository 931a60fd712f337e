// Embedding: a lookup table of num_embeddings vectors of size embedding_dim.
#pragma once

#include <optional>

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

}  // namespace nabla::nn
