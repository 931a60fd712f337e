// CountVectorizer and TfidfVectorizer (text/vectorizers.h), as scikit-learn 1.2 computes them.
#include "text/vectorizers.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "core/error.h"
#include "core/ops.h"
#include "text/hf_internal.h"

namespace nabla::text {
namespace {

// sklearn's default token_pattern r"(?u)\b\w\w+\b": the runs of word characters of two or more.
std::vector<std::string> default_tokens(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0, start = 0, run = 0;
  while (i < s.size()) {
    const size_t at = i;
    const uint32_t cp = utf8::next_cp(s, i);
    if (hf::is_word(cp)) {
      if (run++ == 0) start = at;
    } else {
      if (run >= 2) out.emplace_back(s.substr(start, at - start));
      run = 0;
    }
  }
  if (run >= 2) out.emplace_back(s.substr(start));
  return out;
}

// A df bound as a number of documents (sklearn compares counts with max_df * n_doc as a float).
double doc_bound(const DocFrequency& d, int64_t n_docs, const char* name) {
  if (d.is_count) {
    NABLA_CHECK(ValueError, d.value >= 0, "CountVectorizer: ", name, " must be a non-negative count or a proportion ",
                "in [0, 1], got ", int64_t(d.value));
    return d.value;
  }
  NABLA_CHECK(ValueError, d.value >= 0 && d.value <= 1, "CountVectorizer: ", name,
              " as a proportion must be in [0, 1], got ", d.value);
  return d.value * double(n_docs);
}

void check_options(const CountVectorizerOptions& o) {
  NABLA_CHECK(ValueError, o.ngram_range.first >= 1 && o.ngram_range.first <= o.ngram_range.second,
              "CountVectorizer: ngram_range must have 1 <= min_n <= max_n, got (", o.ngram_range.first, ", ",
              o.ngram_range.second, ")");
  NABLA_CHECK(ValueError, !o.max_features || *o.max_features > 0,
              "CountVectorizer: max_features must be positive, got ", o.max_features.value_or(0));
  doc_bound(o.min_df, 0, "min_df");
  doc_bound(o.max_df, 0, "max_df");
}

CountVectorizerOptions count_options(const TfidfVectorizerOptions& o) {
  return {.ngram_range = o.ngram_range,
          .min_df = o.min_df,
          .max_df = o.max_df,
          .max_features = o.max_features,
          .binary = o.binary,
          .lowercase = o.lowercase,
          .tokenizer = o.tokenizer};
}

}  // namespace

Tensor sparse_rows_to_dense(const std::vector<SparseRow>& rows, int64_t num_features) {
  Tensor out = zeros({int64_t(rows.size()), num_features}, kFloat32);
  float* o = out.data_ptr<float>();
  for (size_t r = 0; r < rows.size(); ++r)
    for (const auto& [j, v] : rows[r]) o[int64_t(r) * num_features + j] = float(v);
  return out;
}

EmbeddingBagInput sparse_rows_to_bags(const std::vector<SparseRow>& rows) {
  std::vector<int64_t> input, offsets;
  std::vector<float> weights;
  offsets.reserve(rows.size());
  for (const auto& row : rows) {
    offsets.push_back(int64_t(input.size()));
    for (const auto& [j, v] : row) {
      input.push_back(j);
      weights.push_back(float(v));
    }
  }
  return {tensor(input, kInt64), tensor(offsets, kInt64), tensor(weights, kFloat32)};
}

// ---- CountVectorizer --------------------------------------------------------------------------

CountVectorizer::CountVectorizer(CountVectorizerOptions options) : options_(std::move(options)) {
  check_options(options_);
}

std::vector<std::vector<std::string>> CountVectorizer::tokenize_all(const std::vector<std::string>& texts) const {
  std::vector<std::vector<std::string>> out;
  out.reserve(texts.size());
  for (const auto& t : texts) {
    NABLA_CHECK(ValueError, utf8::is_valid(t), "CountVectorizer: text ", out.size(), " is not valid UTF-8");
    const std::string s = options_.lowercase ? hf::lowercase(t) : t;
    out.push_back(options_.tokenizer ? options_.tokenizer(s) : default_tokens(s));
  }
  return out;
}

std::vector<std::string> CountVectorizer::analyze_tokens(const std::vector<std::string>& tokens) const {
  const auto [min_n, max_n] = options_.ngram_range;
  std::vector<std::string> out;
  const auto count = int64_t(tokens.size());
  for (int64_t n = min_n; n <= max_n && n <= count; ++n) {
    for (int64_t i = 0; i + n <= count; ++i) {
      std::string g = tokens[size_t(i)];
      for (int64_t k = 1; k < n; ++k) (g += ' ') += tokens[size_t(i + k)];
      out.push_back(std::move(g));
    }
  }
  return out;
}

std::vector<std::string> CountVectorizer::analyze(const std::string& text) const {
  return analyze_tokens(tokenize_all({text})[0]);
}

std::vector<SparseRow> CountVectorizer::fit_rows(const std::vector<std::vector<std::string>>& token_lists) {
  NABLA_CHECK(ValueError, !token_lists.empty(), "CountVectorizer::fit: no texts to fit on");
  const auto n_docs = int64_t(token_lists.size());
  const double max_docs = doc_bound(options_.max_df, n_docs, "max_df");
  const double min_docs = doc_bound(options_.min_df, n_docs, "min_df");
  NABLA_CHECK(ValueError, max_docs >= min_docs, "CountVectorizer::fit: max_df corresponds to < documents than min_df (",
              max_docs, " < ", min_docs, " of ", n_docs, " documents)");
  // Every term's total count and document frequency, the vocabulary sorted by bytes.
  std::map<std::string, std::pair<int64_t, int64_t>> stats;  // term -> (total count, documents)
  for (const auto& tokens : token_lists) {
    std::map<std::string, int64_t> doc;
    for (auto& term : analyze_tokens(tokens)) ++doc[std::move(term)];
    for (const auto& [term, c] : doc) {
      auto& s = stats[term];
      s.first += options_.binary ? 1 : c;
      s.second += 1;
    }
  }
  std::vector<const std::string*> kept;
  std::vector<int64_t> totals;
  for (const auto& [term, s] : stats) {
    if (double(s.second) <= max_docs && double(s.second) >= min_docs) {
      kept.push_back(&term);
      totals.push_back(s.first);
    }
  }
  if (options_.max_features && int64_t(kept.size()) > *options_.max_features) {
    std::vector<size_t> order(kept.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return totals[a] > totals[b]; });
    order.resize(size_t(*options_.max_features));
    std::sort(order.begin(), order.end());
    std::vector<const std::string*> top;
    for (size_t i : order) top.push_back(kept[i]);
    kept = std::move(top);
  }
  NABLA_CHECK(ValueError, !kept.empty(), "CountVectorizer::fit: after pruning, no terms remain (", stats.size(),
              " terms in ", n_docs, " documents). Try a lower min_df or a higher max_df.");
  features_.clear();
  vocabulary_.clear();
  for (const auto* t : kept) {
    vocabulary_.emplace(*t, int64_t(features_.size()));
    features_.push_back(*t);
  }
  return count_rows(token_lists);
}

void CountVectorizer::check_fitted(const char* op) const {
  NABLA_CHECK(ValueError, fitted(), op, ": the vectorizer is not fitted (call fit first)");
}

std::vector<SparseRow> CountVectorizer::count_rows(const std::vector<std::vector<std::string>>& token_lists) const {
  check_fitted("CountVectorizer::transform");
  std::vector<SparseRow> rows(token_lists.size());
  for (size_t r = 0; r < token_lists.size(); ++r) {
    std::map<int64_t, double> counts;
    for (const auto& term : analyze_tokens(token_lists[r])) {
      auto it = vocabulary_.find(term);
      if (it != vocabulary_.end()) counts[it->second] += 1;
    }
    rows[r].assign(counts.begin(), counts.end());
  }
  return rows;
}

CountVectorizer& CountVectorizer::fit(const std::vector<std::string>& texts) { return fit_tokens(tokenize_all(texts)); }
CountVectorizer& CountVectorizer::fit_tokens(const std::vector<std::vector<std::string>>& token_lists) {
  fit_rows(token_lists);
  return *this;
}
Tensor CountVectorizer::fit_transform(const std::vector<std::string>& texts) {
  fit(texts);
  return transform(texts);
}
Tensor CountVectorizer::transform(const std::vector<std::string>& texts) const {
  return transform_tokens(tokenize_all(texts));
}
Tensor CountVectorizer::transform_tokens(const std::vector<std::vector<std::string>>& token_lists) const {
  auto rows = count_rows(token_lists);
  if (options_.binary)
    for (auto& row : rows)
      for (auto& e : row) e.second = 1;
  return sparse_rows_to_dense(rows, num_features());
}
EmbeddingBagInput CountVectorizer::transform_bags(const std::vector<std::string>& texts) const {
  return transform_bags_tokens(tokenize_all(texts));
}
EmbeddingBagInput CountVectorizer::transform_bags_tokens(
    const std::vector<std::vector<std::string>>& token_lists) const {
  auto rows = count_rows(token_lists);
  if (options_.binary)
    for (auto& row : rows)
      for (auto& e : row) e.second = 1;
  return sparse_rows_to_bags(rows);
}

// ---- TfidfVectorizer --------------------------------------------------------------------------

TfidfVectorizer::TfidfVectorizer(TfidfVectorizerOptions options)
    : options_(std::move(options)), counts_(count_options(options_)) {
  NABLA_CHECK(ValueError, options_.norm == "l2" || options_.norm == "l1" || options_.norm == "none",
              "TfidfVectorizer: norm must be \"l2\", \"l1\" or \"none\", got \"", options_.norm, "\"");
}

TfidfVectorizer& TfidfVectorizer::fit(const std::vector<std::string>& texts) {
  return fit_tokens(counts_.tokenize_all(texts));
}

TfidfVectorizer& TfidfVectorizer::fit_tokens(const std::vector<std::vector<std::string>>& token_lists) {
  counts_.fit_tokens(token_lists);
  idf_.clear();
  if (!options_.use_idf) return *this;
  std::vector<int64_t> df(size_t(counts_.num_features()), 0);
  for (const auto& row : counts_.count_rows(token_lists))
    for (const auto& e : row) ++df[size_t(e.first)];
  const double smooth = options_.smooth_idf ? 1 : 0;
  const double n = double(token_lists.size()) + smooth;
  idf_.reserve(df.size());
  for (int64_t d : df) idf_.push_back(std::log(n / (double(d) + smooth)) + 1);
  return *this;
}

std::vector<SparseRow> TfidfVectorizer::transform_rows(const std::vector<std::vector<std::string>>& token_lists) const {
  auto rows = counts_.count_rows(token_lists);
  for (auto& row : rows) {
    for (auto& [j, v] : row) {
      if (options_.binary) v = 1;
      if (options_.sublinear_tf) v = 1 + std::log(v);
      if (options_.use_idf) v *= idf_[size_t(j)];
    }
    double norm = 0;
    if (options_.norm == "l2") {
      for (const auto& e : row) norm += e.second * e.second;
      norm = std::sqrt(norm);
    } else if (options_.norm == "l1") {
      for (const auto& e : row) norm += std::abs(e.second);
    }
    if (norm > 0)
      for (auto& e : row) e.second /= norm;
  }
  return rows;
}

Tensor TfidfVectorizer::fit_transform(const std::vector<std::string>& texts) {
  const auto tokens = counts_.tokenize_all(texts);
  fit_tokens(tokens);
  return transform_tokens(tokens);
}
Tensor TfidfVectorizer::transform(const std::vector<std::string>& texts) const {
  return transform_tokens(counts_.tokenize_all(texts));
}
Tensor TfidfVectorizer::transform_tokens(const std::vector<std::vector<std::string>>& token_lists) const {
  return sparse_rows_to_dense(transform_rows(token_lists), num_features());
}
EmbeddingBagInput TfidfVectorizer::transform_bags(const std::vector<std::string>& texts) const {
  return transform_bags_tokens(counts_.tokenize_all(texts));
}
EmbeddingBagInput TfidfVectorizer::transform_bags_tokens(
    const std::vector<std::vector<std::string>>& token_lists) const {
  return sparse_rows_to_bags(transform_rows(token_lists));
}

}  // namespace nabla::text
