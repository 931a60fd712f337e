// Bag-of-words and TF-IDF features as scikit-learn's CountVectorizer and TfidfVectorizer: fit the
// vocabulary (and the idf) on a training set, then transform texts to a dense (N, F) float32 tensor
// or to nn::EmbeddingBag's input (flat feature indices, bag offsets, per-sample weights).
//
//   text::TfidfVectorizer tfidf({.ngram_range = {1, 2}, .min_df = 2, .sublinear_tf = true});
//   Tensor x_train = tfidf.fit_transform(train_texts);          // (N, F), rows of unit l2 norm
//   auto bags = tfidf.transform_bags(test_texts);               // for EmbeddingBag(F, D, {.mode = "sum"})
//   Tensor y = bag->forward(bags.input, bags.offsets, bags.per_sample_weights);
//
// Features are sklearn's: the vocabulary sorted by bytes (Python's str order), ngram_range's n-grams
// of each text's tokens joined by a space, min_df / max_df as a count (an integer) or a proportion
// (a double), then the max_features terms of highest total count (ties: the earlier feature, where
// numpy's argsort leaves the order of ties unspecified for more than 16 terms). The default tokenizer
// is sklearn's token_pattern r"(?u)\b\w\w+\b" after lowercasing (\w: Unicode's word characters as Rust's
// regex defines them, which differ from Python's on combining marks and a few number signs); any
// Tokenizer (e.g. get_tokenizer("basic_english")) may replace it, and texts given as token lists (the
// *_tokens methods) are used as they are (no lowercasing).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../core/tensor.h"
#include "tokenizers.h"

namespace nabla::text {

// sklearn's min_df / max_df: an integer is a number of documents, a double a proportion in [0, 1].
struct DocFrequency {
  DocFrequency(int count) : DocFrequency(int64_t(count)) {}
  DocFrequency(int64_t count) : is_count(true), value(double(count)) {}
  DocFrequency(double proportion) : is_count(false), value(proportion) {}
  bool is_count;
  double value;
};

struct CountVectorizerOptions {
  std::pair<int64_t, int64_t> ngram_range{1, 1};  // (min_n, max_n), 1 <= min_n <= max_n
  DocFrequency min_df = 1;
  DocFrequency max_df = 1.0;
  std::optional<int64_t> max_features;
  bool binary = false;    // counts become 1
  bool lowercase = true;  // lowercase texts before tokenizing
  Tokenizer tokenizer{};  // unset: sklearn's default token pattern
};

struct TfidfVectorizerOptions {
  std::pair<int64_t, int64_t> ngram_range{1, 1};
  DocFrequency min_df = 1;
  DocFrequency max_df = 1.0;
  std::optional<int64_t> max_features;
  bool binary = false;
  bool lowercase = true;
  Tokenizer tokenizer{};
  std::string norm = "l2";  // "l2", "l1" or "none" (sklearn's None)
  bool use_idf = true;      // idf = ln((1 + n) / (1 + df)) + 1 with smooth_idf, ln(n / df) + 1 without
  bool smooth_idf = true;
  bool sublinear_tf = false;  // tf -> 1 + ln(tf)
};

// What nn::EmbeddingBag's forward(input, offsets, per_sample_weights) takes: the nonzero features of
// each text in feature order, input (nnz) int64, offsets (N) int64 (where each text's features start;
// a text without known terms is an empty bag) and per_sample_weights (nnz) float32 (the values).
struct EmbeddingBagInput {
  Tensor input, offsets, per_sample_weights;
};

// One text's features: (feature index, value), by feature index.
using SparseRow = std::vector<std::pair<int64_t, double>>;

class CountVectorizer {
 public:
  explicit CountVectorizer(CountVectorizerOptions options = {});

  CountVectorizer& fit(const std::vector<std::string>& texts);
  CountVectorizer& fit_tokens(const std::vector<std::vector<std::string>>& token_lists);
  Tensor fit_transform(const std::vector<std::string>& texts);  // (N, F) float32 counts
  Tensor transform(const std::vector<std::string>& texts) const;
  Tensor transform_tokens(const std::vector<std::vector<std::string>>& token_lists) const;
  EmbeddingBagInput transform_bags(const std::vector<std::string>& texts) const;
  EmbeddingBagInput transform_bags_tokens(const std::vector<std::vector<std::string>>& token_lists) const;

  // The terms (tokens and n-grams) a text turns into: its tokens, then its n-grams of ngram_range.
  std::vector<std::string> analyze(const std::string& text) const;
  std::vector<std::string> analyze_tokens(const std::vector<std::string>& tokens) const;
  // Counts of the fitted features (before binary), one row per text.
  std::vector<SparseRow> count_rows(const std::vector<std::vector<std::string>>& token_lists) const;
  std::vector<std::vector<std::string>> tokenize_all(const std::vector<std::string>& texts) const;

  bool fitted() const { return !features_.empty(); }
  int64_t num_features() const { return int64_t(features_.size()); }
  const std::vector<std::string>& get_feature_names_out() const { return features_; }
  const std::unordered_map<std::string, int64_t>& vocabulary() const { return vocabulary_; }
  const CountVectorizerOptions& options() const { return options_; }

 private:
  CountVectorizerOptions options_;
  std::vector<std::string> features_;
  std::unordered_map<std::string, int64_t> vocabulary_;
  std::vector<SparseRow> fit_rows(const std::vector<std::vector<std::string>>& token_lists);
  void check_fitted(const char* op) const;
};

class TfidfVectorizer {
 public:
  explicit TfidfVectorizer(TfidfVectorizerOptions options = {});

  TfidfVectorizer& fit(const std::vector<std::string>& texts);
  TfidfVectorizer& fit_tokens(const std::vector<std::vector<std::string>>& token_lists);
  Tensor fit_transform(const std::vector<std::string>& texts);  // (N, F) float32
  Tensor transform(const std::vector<std::string>& texts) const;
  Tensor transform_tokens(const std::vector<std::vector<std::string>>& token_lists) const;
  EmbeddingBagInput transform_bags(const std::vector<std::string>& texts) const;
  EmbeddingBagInput transform_bags_tokens(const std::vector<std::vector<std::string>>& token_lists) const;
  // The weighted rows transform() and transform_bags() are made of.
  std::vector<SparseRow> transform_rows(const std::vector<std::vector<std::string>>& token_lists) const;

  int64_t num_features() const { return counts_.num_features(); }
  const std::vector<std::string>& get_feature_names_out() const { return counts_.get_feature_names_out(); }
  const std::unordered_map<std::string, int64_t>& vocabulary() const { return counts_.vocabulary(); }
  const std::vector<double>& idf() const { return idf_; }  // (F); empty without use_idf
  const CountVectorizer& count_vectorizer() const { return counts_; }

 private:
  TfidfVectorizerOptions options_;
  CountVectorizer counts_;
  std::vector<double> idf_;
};

// The dense (rows, num_features) float32 tensor and the EmbeddingBag input of sparse rows.
Tensor sparse_rows_to_dense(const std::vector<SparseRow>& rows, int64_t num_features);
EmbeddingBagInput sparse_rows_to_bags(const std::vector<SparseRow>& rows);

}  // namespace nabla::text
