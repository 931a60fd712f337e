// torchtext.vocab.Vectors: word vectors read from GloVe or word2vec *text* files, looked up by token,
// and turned into an nn::Embedding for a Vocab.
//
//   text::Vectors glove = text::Vectors::load("glove.6B.100d.txt");   // or word2vec's .txt
//   Tensor v = glove.get_vecs_by_tokens({"the", "cat", "qwzx"});       // (3, 100); unknown -> zeros
//   auto emb = glove.embedding_for(vocab);   // nn::Embedding(vocab.size(), 100), row i = vocab's token i
//
// The formats: GloVe, one "word v1 ... vd" per line; word2vec text, the same after a header line
// "count dim". A line is the word up to its first space, then values separated by spaces or tabs (a
// trailing \r or white space is ignored). A file whose lines disagree on the dimension, a value that
// is not a number, a word without values, a header whose count or dim the rows do not match, or an
// empty file is an IOError naming the path and line. A word that appears twice keeps both rows, and
// lookups find the later one (torchtext's stoi). A first line of one value is read as word2vec's
// header, so 1-dimensional vectors cannot be read (nor can torchtext read them).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "../core/tensor.h"

namespace nabla::nn {
class Embedding;
}

namespace nabla::text {

class Vocab;

// What an unknown token's vector is: given a (dim) float32 tensor of zeros, the vector to use (e.g.
// [](Tensor z) { return nabla::randn(z.sizes()) * 0.1; }). Unset: the zeros (torchtext's zero_).
using UnkInit = std::function<Tensor(Tensor)>;

struct VectorsOptions {
  std::optional<int64_t> max_vectors;  // read only the first max_vectors rows (torchtext's max_vectors)
  UnkInit unk_init;
};

class Vectors {
 public:
  // itos: the words of the rows of `vectors` (N, dim) (float32; copied to a contiguous CPU tensor).
  Vectors(std::vector<std::string> itos, const Tensor& vectors, UnkInit unk_init = {});
  static Vectors load(const std::string& path, const VectorsOptions& options = {});

  int64_t dim() const { return dim_; }
  int64_t size() const { return int64_t(itos_.size()); }
  bool contains(const std::string& token) const { return stoi_.count(token) != 0; }
  const std::vector<std::string>& itos() const { return itos_; }
  const std::unordered_map<std::string, int64_t>& stoi() const { return stoi_; }
  const Tensor& vectors() const { return vectors_; }  // (N, dim) float32

  // (dim): the token's vector, or unk_init's for an unknown token.
  Tensor operator[](const std::string& token) const;
  // (len(tokens), dim); with lower_case_backup, a token not found is looked up lowercased as well.
  Tensor get_vecs_by_tokens(const std::vector<std::string>& tokens, bool lower_case_backup = false) const;
  // (vocab.size(), dim): row i is the vector of vocab.lookup_token(i) (get_vecs_by_tokens(itos)).
  Tensor weights_for(const Vocab& vocab, bool lower_case_backup = false) const;
  // An nn::Embedding(vocab.size(), dim) holding weights_for(vocab) (nn.Embedding.from_pretrained):
  // with freeze its weight needs no gradient; padding_idx as EmbeddingOptions.
  std::shared_ptr<nn::Embedding> embedding_for(const Vocab& vocab, bool freeze = true,
                                               std::optional<int64_t> padding_idx = std::nullopt,
                                               bool lower_case_backup = false) const;

 private:
  std::vector<std::string> itos_;
  std::unordered_map<std::string, int64_t> stoi_;
  Tensor vectors_;
  int64_t dim_ = 0;
  UnkInit unk_init_;
  Vectors() = default;
  void index();  // stoi_ and dim_ from itos_ and vectors_
  // Copies the vector of `token` (or unk_init's) to out[0..dim).
  void fill(const std::string& token, bool lower_case_backup, float* out) const;
};

}  // namespace nabla::text
