// Text classification data as torchtext's AG_NEWS / YelpReviewPolarity / DBpedia read them: CSV (or
// TSV) rows "label, title, text, ..." (RFC 4180: fields in double quotes may hold the delimiter,
// newlines and "" for a quote), each example (label, the other fields joined by a space), the label as
// written in the file (AG_NEWS's are 1-based: subtract 1 for cross_entropy). And the collate helpers
// that turn token ids into padded batches for Embedding + LSTM (packed) or EmbeddingBag models.
//
//   text::TextClassificationDataset train("ag_news/train.csv");
//   auto [label, text] = train.get(0);                 // 3, "Wall St. Bears Claw Back ... Reuters - ..."
//   auto batch = text::pad_token_ids({{5, 2, 9}, {7}}, /*padding_value=*/1);
//   // batch.padded (2, 3) int64 {{5, 2, 9}, {7, 1, 1}}; batch.lengths {3, 1}
//   auto packed = nn::utils::rnn::pack_padded_sequence(embedding->forward(batch.padded), batch.lengths,
//                                                      /*batch_first=*/true, /*enforce_sorted=*/false);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../core/tensor.h"

namespace nabla::text {

// RFC 4180 records of a CSV text: a quoted field may hold the delimiter, CR/LF and "" (a quote);
// records end at LF or CRLF; an unquoted field may not hold a quote. A quote left open, a stray quote
// or text after a closing quote is an IOError naming `source` and the line. Empty lines are skipped.
// record_lines, when given, receives the line each record starts on (1-based).
std::vector<std::vector<std::string>> parse_csv(std::string_view text, char delimiter = ',',
                                                const std::string& source = "<string>",
                                                std::vector<int64_t>* record_lines = nullptr);

struct TextClassificationOptions {
  char delimiter = ',';      // '\t' for TSV
  bool header = false;       // skip the first record
  int64_t label_column = 0;  // the label's field; every other field is text, joined with ' '
};

struct TextExample {
  int64_t label;
  std::string text;
};

// All the rows of one file, in memory. A row without a text field, or whose label is not an integer,
// is an IOError naming the path and line.
class TextClassificationDataset {
 public:
  explicit TextClassificationDataset(const std::string& path, TextClassificationOptions options = {});
  TextClassificationDataset(std::vector<int64_t> labels, std::vector<std::string> texts);

  int64_t size() const { return int64_t(texts_.size()); }
  TextExample get(int64_t index) const;  // IndexError outside [0, size)
  const std::vector<int64_t>& labels() const { return labels_; }
  const std::vector<std::string>& texts() const { return texts_; }
  std::vector<int64_t> classes() const;  // the distinct labels, sorted

 private:
  std::vector<int64_t> labels_;
  std::vector<std::string> texts_;
};

// torchtext.functional.to_tensor: the sequences padded with padding_value to the longest, (B, T)
// int64 (T = 0 when all are empty).
Tensor to_tensor(const std::vector<std::vector<int64_t>>& ids, int64_t padding_value = 0);

struct PaddedBatch {
  Tensor padded;          // (B, T) int64, or (T, B) without batch_first
  Tensor lengths;         // (B) int64 on the CPU, what pack_padded_sequence takes
  Tensor sorted_indices;  // (B) int64: the batch by decreasing length (stable), as pack_padded_sequence sorts
};

// Pads the sequences (each at least one id, as pack_padded_sequence needs; ValueError otherwise, naming
// the sequence) and returns their lengths and the order pack_padded_sequence(enforce_sorted=false)
// sorts them in. max_length, when given, truncates longer sequences first (torchtext's Truncate).
PaddedBatch pad_token_ids(const std::vector<std::vector<int64_t>>& ids, int64_t padding_value = 0,
                          bool batch_first = true, std::optional<int64_t> max_length = std::nullopt);

// EmbeddingBag's flat input of the course's collate: the ids concatenated (N) int64 and each
// sequence's start (B) int64 (an empty sequence is an empty bag).
struct BagBatch {
  Tensor input, offsets;
};
BagBatch bag_token_ids(const std::vector<std::vector<int64_t>>& ids);

}  // namespace nabla::text
