// torchtext.vocab: Vocab (tokens <-> indices, with an optional default index for unknown tokens) and
// build_vocab_from_iterator, with torchtext 0.14's ordering.
//
//   std::vector<std::vector<std::string>> docs = ...;             // tokenized texts
//   text::Vocab vocab = text::build_vocab_from_iterator(docs, {.specials = {"<unk>"}});
//   vocab.set_default_index(vocab["<unk>"]);
//   std::vector<int64_t> ids = vocab.lookup_indices(tokenize("hello world"));
//   vocab.save("vocab.txt");  auto again = text::Vocab::load("vocab.txt");
//
// Errors follow torchtext's cases: an unknown token with no default index, an index out of range, a
// token inserted twice are ValueError / IndexError naming the method and what was passed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace nabla::text {

class Vocab {
 public:
  Vocab() = default;
  // The tokens in index order; a token given twice is a ValueError.
  explicit Vocab(std::vector<std::string> itos);

  int64_t size() const { return int64_t(itos_.size()); }
  bool contains(const std::string& token) const { return stoi_.count(token) != 0; }
  // The token's index, else the default index, else ValueError (torchtext's RuntimeError).
  int64_t operator[](const std::string& token) const;
  std::vector<int64_t> lookup_indices(const std::vector<std::string>& tokens) const;
  const std::string& lookup_token(int64_t index) const;  // IndexError outside [0, size)
  std::vector<std::string> lookup_tokens(const std::vector<int64_t>& indices) const;

  // The index unknown tokens map to (any value, as torchtext: -1 is allowed); nullopt unsets it.
  void set_default_index(std::optional<int64_t> index) { default_index_ = index; }
  std::optional<int64_t> get_default_index() const { return default_index_; }

  // Inserts at `index` (0 <= index <= size), shifting the later tokens up by one; appends at the end.
  // A token already present is a ValueError.
  void insert_token(const std::string& token, int64_t index);
  void append_token(const std::string& token);

  const std::vector<std::string>& get_itos() const { return itos_; }
  const std::unordered_map<std::string, int64_t>& get_stoi() const { return stoi_; }

  // A text file of nabla's own (written atomically): "nabla-vocab 1", "size N", "default D" or
  // "default none", then one token per line with \\, \n, \r and other control bytes escaped as
  // \\, \n, \r, \xHH. load() reports a bad file as IOError naming the path and line.
  void save(const std::string& path) const;
  static Vocab load(const std::string& path);

 private:
  std::vector<std::string> itos_;
  std::unordered_map<std::string, int64_t> stoi_;
  std::optional<int64_t> default_index_;
};

struct BuildVocabOptions {
  int64_t min_freq = 1;               // tokens seen fewer times are left out
  std::vector<std::string> specials;  // added in this order, whether or not the corpus has them
  bool special_first = true;          // specials at indices 0.. (else after the other tokens)
  std::optional<int64_t> max_tokens;  // at most this many tokens, specials included
};

// torchtext's build_vocab_from_iterator: counts every token, orders them by descending count and ties
// lexicographically (by bytes, as Python orders str), keeps the first max_tokens - len(specials) of
// that order (before the specials are taken out of it and before min_freq, exactly as torchtext),
// drops the specials and the tokens counted fewer than min_freq times, and puts the specials first
// or last. max_tokens <= len(specials) is a ValueError (torchtext's assertion).
Vocab build_vocab_from_iterator(const std::vector<std::vector<std::string>>& iterator,
                                const BuildVocabOptions& options = {});

}  // namespace nabla::text
