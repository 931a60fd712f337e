// text::Vectors (text/vectors.h): the GloVe / word2vec text reader and the lookups.
#include "text/vectors.h"

#include <charconv>
#include <cstring>

#include "core/error.h"
#include "core/graph.h"
#include "core/ops.h"
#include "io/file.h"
#include "nn/embedding.h"
#include "text/hf_internal.h"
#include "text/vocab.h"

namespace nabla::text {

Vectors::Vectors(std::vector<std::string> itos, const Tensor& vectors, UnkInit unk_init)
    : itos_(std::move(itos)), unk_init_(std::move(unk_init)) {
  NABLA_CHECK(ValueError, vectors.defined(), "Vectors: the vectors tensor is undefined");
  NABLA_CHECK(ShapeError, vectors.dim() == 2, "Vectors: vectors must be (N, dim), got ", vectors.sizes());
  NABLA_CHECK(ShapeError, vectors.size(0) == int64_t(itos_.size()), "Vectors: ", itos_.size(), " words but ",
              vectors.size(0), " rows");
  // A copy of its own: the caller's tensor may change later.
  vectors_ = vectors.detach().to(kCPU, kFloat32).contiguous().clone();
  index();
}

void Vectors::index() {
  dim_ = vectors_.size(1);
  stoi_.reserve(itos_.size());
  for (size_t i = 0; i < itos_.size(); ++i) stoi_[itos_[i]] = int64_t(i);  // a later duplicate wins
}

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

}  // namespace

Vectors Vectors::load(const std::string& path, const VectorsOptions& options) {
  const io::MappedFile file(path);
  const char* p = file.data();
  const char* const end = p + file.size();
  NABLA_CHECK(ValueError, !options.max_vectors || *options.max_vectors >= 0, "Vectors::load: max_vectors must be ",
              "non-negative, got ", *options.max_vectors);
  auto fail = [&](int64_t line, const std::string& what) {
    NABLA_CHECK(IOError, false, "Vectors::load: ", path, ":", line, ": ", what);
  };
  std::vector<std::string> words;
  std::vector<float> values;
  int64_t dim = -1, line = 0;
  std::optional<int64_t> declared_count;
  std::vector<std::string_view> fields;
  while (p < end && (!options.max_vectors || int64_t(words.size()) < *options.max_vectors)) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', size_t(end - p)));
    const char* e = nl ? nl : end;
    std::string_view l(p, size_t(e - p));
    p = nl ? nl + 1 : end;
    ++line;
    while (!l.empty() && is_blank(l.back())) l.remove_suffix(1);
    if (l.empty()) fail(line, "an empty line");
    // The word: up to the first space (or tab); the values after it.
    size_t cut = 0;
    while (cut < l.size() && l[cut] != ' ' && l[cut] != '\t') ++cut;
    const std::string_view word = l.substr(0, cut);
    fields.clear();
    for (size_t i = cut; i < l.size();) {
      while (i < l.size() && is_blank(l[i])) ++i;
      size_t j = i;
      while (j < l.size() && !is_blank(l[j])) ++j;
      if (j > i) fields.push_back(l.substr(i, j - i));
      i = j;
    }
    if (line == 1 && fields.size() == 1) {
      // word2vec's header "count dim".
      int64_t count = -1, d = -1;
      auto r1 = std::from_chars(word.data(), word.data() + word.size(), count);
      auto r2 = std::from_chars(fields[0].data(), fields[0].data() + fields[0].size(), d);
      if (r1.ec != std::errc() || r1.ptr != word.data() + word.size() || r2.ec != std::errc() ||
          r2.ptr != fields[0].data() + fields[0].size() || count < 0 || d < 1)
        fail(line, "a line of one value is only allowed as word2vec's header 'count dim' (positive integers), got " +
                       io::quote_name(std::string(l)));
      declared_count = count;
      dim = d;
      continue;
    }
    if (fields.empty()) fail(line, "the word " + io::quote_name(std::string(word)) + " has no vector");
    if (dim < 0) dim = int64_t(fields.size());
    if (int64_t(fields.size()) != dim)
      fail(line, "the vector of " + io::quote_name(std::string(word)) + " has " + std::to_string(fields.size()) +
                     " values, but " + (declared_count ? "the header declares " : "the first vector has ") +
                     std::to_string(dim));
    if (declared_count && int64_t(words.size()) >= *declared_count)
      fail(line, "more vectors than the " + std::to_string(*declared_count) + " the header declares");
    for (std::string_view f : fields) {
      float v = 0;
      auto [q, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
      if (ec != std::errc() || q != f.data() + f.size())
        fail(line, "not a number: " + io::quote_name(std::string(f)) + " in the vector of " +
                       io::quote_name(std::string(word)));
      values.push_back(v);
    }
    words.emplace_back(word);
  }
  const bool cut_short = options.max_vectors && int64_t(words.size()) == *options.max_vectors;
  if (declared_count && !cut_short && int64_t(words.size()) != *declared_count)
    fail(line + 1, "the file ends after " + std::to_string(words.size()) + " vectors, but the header declares " +
                       std::to_string(*declared_count));
  if (words.empty() && !cut_short) fail(line + 1, "no vectors in the file");
  const int64_t n = int64_t(words.size());
  Vectors v;
  v.itos_ = std::move(words);
  v.vectors_ = n ? tensor(values, {n, dim}, kFloat32) : zeros({0, std::max<int64_t>(dim, 0)}, kFloat32);
  v.unk_init_ = options.unk_init;
  v.index();
  return v;
}

void Vectors::fill(const std::string& token, bool lower_case_backup, float* out) const {
  auto it = stoi_.find(token);
  if (it == stoi_.end() && lower_case_backup && utf8::is_valid(token)) it = stoi_.find(hf::lowercase(token));
  if (it != stoi_.end()) {
    std::memcpy(out, vectors_.data_ptr<float>() + it->second * dim_, size_t(dim_) * sizeof(float));
    return;
  }
  if (!unk_init_) {
    std::fill(out, out + dim_, 0.0f);
    return;
  }
  Tensor v = unk_init_(zeros({dim_}, kFloat32));
  NABLA_CHECK(ValueError, v.defined(), "Vectors: unk_init returned an undefined tensor");
  NABLA_CHECK(ShapeError, v.numel() == dim_, "Vectors: unk_init must return ", dim_, " values, got ", v.sizes());
  v = v.detach().to(kCPU, kFloat32).contiguous();
  std::memcpy(out, v.data_ptr<float>(), size_t(dim_) * sizeof(float));
}

Tensor Vectors::operator[](const std::string& token) const {
  Tensor out = empty({dim_}, kFloat32);
  fill(token, false, out.data_ptr<float>());
  return out;
}

Tensor Vectors::get_vecs_by_tokens(const std::vector<std::string>& tokens, bool lower_case_backup) const {
  Tensor out = empty({int64_t(tokens.size()), dim_}, kFloat32);
  float* o = out.data_ptr<float>();
  for (size_t i = 0; i < tokens.size(); ++i) fill(tokens[i], lower_case_backup, o + int64_t(i) * dim_);
  return out;
}

Tensor Vectors::weights_for(const Vocab& vocab, bool lower_case_backup) const {
  return get_vecs_by_tokens(vocab.get_itos(), lower_case_backup);
}

std::shared_ptr<nn::Embedding> Vectors::embedding_for(const Vocab& vocab, bool freeze,
                                                      std::optional<int64_t> padding_idx,
                                                      bool lower_case_backup) const {
  NABLA_CHECK(ValueError, vocab.size() > 0, "Vectors::embedding_for: the vocabulary is empty");
  auto emb = std::make_shared<nn::Embedding>(vocab.size(), dim_, nn::EmbeddingOptions{.padding_idx = padding_idx});
  {
    NoGradGuard no_grad;
    emb->weight.copy_(weights_for(vocab, lower_case_backup));
  }
  emb->weight.requires_grad_(!freeze);
  return emb;
}

}  // namespace nabla::text
