#include "nn/embedding.h"

#include "core/graph.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "nn/value_checks.h"

namespace nabla::nn {

Embedding::Embedding(int64_t n, int64_t dim, EmbeddingOptions o) : num_embeddings(n), embedding_dim(dim) {
  NABLA_CHECK(ValueError, n > 0 && dim > 0, "Embedding: num_embeddings and embedding_dim must be positive, got ", n,
              " and ", dim);
  if (o.padding_idx) {
    int64_t p = *o.padding_idx;
    NABLA_CHECK(IndexError, p >= -n && p < n, "Embedding: padding_idx ", p, " must be within num_embeddings (", n, ")");
    padding_idx = p < 0 ? p + n : p;
  }
  weight = register_parameter("weight", empty({n, dim}));
  reset_parameters();
}

void Embedding::reset_parameters() {
  init::normal_(weight);
  if (padding_idx) {
    autograd::NoGradGuard ng;
    weight[*padding_idx].fill_(0);
  }
}

Tensor Embedding::forward(Tensor indices) {
  NABLA_CHECK(DTypeError, indices.dtype() == kInt64 || indices.dtype() == kInt32,
              "Embedding: indices must be int64 (or int32), got ", indices.dtype());
  // On a GPU, reported at the next synchronization (see nn/value_checks.h).
  value_checks::check_min_max<int64_t>(indices, [n = num_embeddings](int64_t lo, int64_t hi) {
    NABLA_CHECK(IndexError, lo >= 0 && hi < n, "Embedding: index ", lo < 0 ? lo : hi,
                " is out of range for a table of ", n, " rows");
  });
  return F::embedding(weight, indices, padding_idx);
}

std::string Embedding::extra_repr() const {
  std::string s = internal::str(num_embeddings, ", ", embedding_dim);
  if (padding_idx) s += internal::str(", padding_idx=", *padding_idx);
  return s;
}

EmbeddingBag::EmbeddingBag(int64_t n, int64_t dim, EmbeddingBagOptions o)
    : num_embeddings(n), embedding_dim(dim), options(std::move(o)) {
  NABLA_CHECK(ValueError, n > 0 && dim > 0, "EmbeddingBag: num_embeddings and embedding_dim must be positive, got ", n,
              " and ", dim);
  NABLA_CHECK(ValueError, options.mode == "sum" || options.mode == "mean" || options.mode == "max",
              "EmbeddingBag: mode must be 'sum', 'mean' or 'max', got '", options.mode, "'");
  if (options.padding_idx) {
    int64_t p = *options.padding_idx;
    NABLA_CHECK(IndexError, p >= -n && p < n, "EmbeddingBag: padding_idx ", p, " must be within num_embeddings (", n,
                ")");
    options.padding_idx = p < 0 ? p + n : p;
  }
  weight = register_parameter("weight", empty({n, dim}));
  reset_parameters();
}

void EmbeddingBag::reset_parameters() {
  init::normal_(weight);
  if (options.padding_idx) {
    autograd::NoGradGuard ng;
    weight[*options.padding_idx].fill_(0);
  }
}

Tensor EmbeddingBag::forward(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights) {
  return F::embedding_bag(
      input, weight, offsets, per_sample_weights,
      {.mode = options.mode, .include_last_offset = options.include_last_offset, .padding_idx = options.padding_idx});
}

std::string EmbeddingBag::extra_repr() const {
  std::string s = internal::str(num_embeddings, ", ", embedding_dim, ", mode='", options.mode, "'");
  if (options.padding_idx) s += internal::str(", padding_idx=", *options.padding_idx);
  return s;
}

}  // namespace nabla::nn
