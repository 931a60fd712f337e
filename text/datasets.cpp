// CSV text classification data and the collate helpers (text/datasets.h).
#include "text/datasets.h"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <set>

#include "core/error.h"
#include "core/ops.h"
#include "io/file.h"

namespace nabla::text {

std::vector<std::vector<std::string>> parse_csv(std::string_view text, char delimiter, const std::string& source,
                                                std::vector<int64_t>* record_lines) {
  NABLA_CHECK(ValueError, delimiter != '"' && delimiter != '\n' && delimiter != '\r',
              "parse_csv: the delimiter cannot be a quote or a line break");
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  int64_t line = 1, record_line = 1;
  size_t i = 0;
  const size_t n = text.size();
  auto fail = [&](int64_t at, const std::string& what) {
    NABLA_CHECK(IOError, false, "parse_csv: ", source, ":", at, ": ", what);
  };
  bool field_started = false;  // the record has a field in progress (so an empty line is not a record)
  while (i < n) {
    const char c = text[i];
    if (c == '"') {
      if (!field.empty()) fail(line, "a quote inside an unquoted field (quote the whole field and write \"\")");
      const int64_t open_line = line;
      ++i;
      for (;;) {
        if (i >= n) fail(open_line, "a quoted field is never closed");
        const char q = text[i++];
        if (q == '"') {
          if (i < n && text[i] == '"') {
            field += '"';
            ++i;
            continue;
          }
          break;
        }
        if (q == '\n') ++line;
        field += q;
      }
      if (i < n && text[i] != delimiter && text[i] != '\n' && !(text[i] == '\r' && i + 1 < n && text[i + 1] == '\n') &&
          !(text[i] == '\r' && i + 1 == n))
        fail(line, "text after a closing quote");
      field_started = true;
      continue;
    }
    if (c == delimiter) {
      record.push_back(std::move(field));
      field.clear();
      field_started = true;
      ++i;
      continue;
    }
    if (c == '\n' || (c == '\r' && (i + 1 == n || text[i + 1] == '\n'))) {
      i += c == '\r' ? (i + 1 < n ? 2 : 1) : 1;
      if (field_started || !field.empty()) {
        record.push_back(std::move(field));
        records.push_back(std::move(record));
        if (record_lines) record_lines->push_back(record_line);
      }
      field.clear();
      record.clear();
      field_started = false;
      record_line = ++line;
      continue;
    }
    field += c;
    ++i;
  }
  if (field_started || !field.empty()) {
    record.push_back(std::move(field));
    records.push_back(std::move(record));
    if (record_lines) record_lines->push_back(record_line);
  }
  return records;
}

// ---- TextClassificationDataset ----------------------------------------------------------------

TextClassificationDataset::TextClassificationDataset(const std::string& path, TextClassificationOptions options) {
  const std::vector<char> bytes = io::read_file(path);
  const std::string_view text(bytes.data(), bytes.size());
  std::vector<int64_t> lines;
  const auto records = parse_csv(text, options.delimiter, path, &lines);
  NABLA_CHECK(ValueError, options.label_column >= 0, "TextClassificationDataset: label_column must be ",
              "non-negative, got ", options.label_column);
  const size_t first = options.header ? 1 : 0;
  labels_.reserve(records.size());
  texts_.reserve(records.size());
  for (size_t r = first; r < records.size(); ++r) {
    const auto& rec = records[r];
    NABLA_CHECK(IOError, rec.size() >= 2 && int64_t(rec.size()) > options.label_column,
                "TextClassificationDataset: ", path, ":", lines[r], ": the record has ", rec.size(),
                " field(s); it needs a label (field ", options.label_column + 1, ") and a text");
    const std::string& l = rec[size_t(options.label_column)];
    int64_t label = 0;
    auto [p, ec] = std::from_chars(l.data(), l.data() + l.size(), label);
    NABLA_CHECK(IOError, ec == std::errc() && p == l.data() + l.size() && !l.empty(),
                "TextClassificationDataset: ", path, ":", lines[r],
                ": the label is not an integer: ", io::quote_name(l));
    std::string joined;  // torchtext's " ".join(row[1:]), empty fields included
    bool first_field = true;
    for (size_t f = 0; f < rec.size(); ++f) {
      if (int64_t(f) == options.label_column) continue;
      if (!first_field) joined += ' ';
      first_field = false;
      joined += rec[f];
    }
    labels_.push_back(label);
    texts_.push_back(std::move(joined));
  }
}

TextClassificationDataset::TextClassificationDataset(std::vector<int64_t> labels, std::vector<std::string> texts)
    : labels_(std::move(labels)), texts_(std::move(texts)) {
  NABLA_CHECK(ValueError, labels_.size() == texts_.size(), "TextClassificationDataset: ", labels_.size(),
              " labels but ", texts_.size(), " texts");
}

TextExample TextClassificationDataset::get(int64_t index) const {
  NABLA_CHECK(IndexError, index >= 0 && index < size(), "TextClassificationDataset::get: index ", index,
              " is out of range for a dataset of size ", size());
  return {labels_[size_t(index)], texts_[size_t(index)]};
}

std::vector<int64_t> TextClassificationDataset::classes() const {
  const std::set<int64_t> s(labels_.begin(), labels_.end());
  return {s.begin(), s.end()};
}

// ---- collate helpers --------------------------------------------------------------------------

Tensor to_tensor(const std::vector<std::vector<int64_t>>& ids, int64_t padding_value) {
  size_t t = 0;
  for (const auto& s : ids) t = std::max(t, s.size());
  std::vector<int64_t> flat(ids.size() * t, padding_value);
  for (size_t b = 0; b < ids.size(); ++b) std::copy(ids[b].begin(), ids[b].end(), flat.begin() + b * t);
  return tensor(flat, {int64_t(ids.size()), int64_t(t)}, kInt64);
}

PaddedBatch pad_token_ids(const std::vector<std::vector<int64_t>>& ids, int64_t padding_value, bool batch_first,
                          std::optional<int64_t> max_length) {
  NABLA_CHECK(ValueError, !ids.empty(), "pad_token_ids: an empty batch");
  NABLA_CHECK(ValueError, !max_length || *max_length >= 1, "pad_token_ids: max_length must be positive, got ",
              max_length.value_or(0));
  const auto B = int64_t(ids.size());
  std::vector<int64_t> lengths(ids.size());
  int64_t T = 0;
  for (size_t b = 0; b < ids.size(); ++b) {
    NABLA_CHECK(ValueError, !ids[b].empty(), "pad_token_ids: sequence ", b,
                " is empty (pack_padded_sequence needs at least one step per sequence)");
    lengths[b] = max_length ? std::min<int64_t>(int64_t(ids[b].size()), *max_length) : int64_t(ids[b].size());
    T = std::max(T, lengths[b]);
  }
  std::vector<int64_t> flat(size_t(B * T), padding_value);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < lengths[size_t(b)]; ++t)
      flat[size_t(batch_first ? b * T + t : t * B + b)] = ids[size_t(b)][size_t(t)];
  std::vector<int64_t> order(ids.size());
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lengths[size_t(a)] > lengths[size_t(b)]; });
  Tensor padded = batch_first ? tensor(flat, {B, T}, kInt64) : tensor(flat, {T, B}, kInt64);
  return {padded, tensor(lengths, kInt64), tensor(order, kInt64)};
}

BagBatch bag_token_ids(const std::vector<std::vector<int64_t>>& ids) {
  std::vector<int64_t> input, offsets;
  offsets.reserve(ids.size());
  for (const auto& s : ids) {
    offsets.push_back(int64_t(input.size()));
    input.insert(input.end(), s.begin(), s.end());
  }
  return {tensor(input, kInt64), tensor(offsets, kInt64)};
}

}  // namespace nabla::text
