// train_bpe: learns byte-level BPE merges from a text (see text/bpe.h).
//
// Each distinct piece of the pre-tokenized text is one "word" of symbol ids, weighted by how often
// the piece occurs. Pair counts over all words sit in a hash map, and a max-heap of (count, pair)
// picks the next merge; a merge rewrites only the words that hold the pair (an index from pair to
// words) and adjusts the counts of the pairs it destroys and creates, so one merge costs time in
// proportion to where it occurs, not to the corpus. Heap entries go stale when a count falls; a
// popped entry whose count is no longer current is pushed again with the current count.
#include <algorithm>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "text/bpe.h"

namespace nabla::text {

namespace {
uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
}  // namespace

BytePairTokenizer train_bpe(std::string_view text, int32_t vocab_size, const TrainOptions& options) {
  const int32_t n_special = int32_t(options.special_tokens.size());
  NABLA_CHECK(ValueError, vocab_size >= 256 + n_special, "train_bpe: vocab_size ", vocab_size,
              " is smaller than the 256 byte tokens + ", n_special, " special tokens");
  NABLA_CHECK(ValueError, options.min_frequency >= 1, "train_bpe: min_frequency must be >= 1, got ",
              options.min_frequency);
  // Distinct pieces and their frequencies.
  std::unordered_map<std::string_view, int64_t> piece_count;
  for (std::string_view p : pre_tokenize(text, options.pattern)) ++piece_count[p];
  std::vector<std::pair<std::string_view, int64_t>> pieces(piece_count.begin(), piece_count.end());
  std::sort(pieces.begin(), pieces.end());  // a deterministic word order
  std::vector<std::vector<int32_t>> words(pieces.size());
  std::vector<int64_t> freq(pieces.size());
  for (size_t w = 0; w < pieces.size(); ++w) {
    for (unsigned char c : pieces[w].first) words[w].push_back(c);
    freq[w] = pieces[w].second;
  }
  // Pair counts and where each pair occurs.
  std::unordered_map<uint64_t, int64_t> count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  for (size_t w = 0; w < words.size(); ++w) {
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      uint64_t k = pair_key(words[w][i], words[w][i + 1]);
      count[k] += freq[w];
      auto& v = where[k];
      if (v.empty() || v.back() != int32_t(w)) v.push_back(int32_t(w));
    }
  }
  // Max-heap on (count, then the smaller pair first).
  struct Entry {
    int64_t count;
    uint64_t pair;
    bool operator<(const Entry& o) const { return count != o.count ? count < o.count : pair > o.pair; }
  };
  std::priority_queue<Entry> heap;
  for (auto& [k, c] : count) heap.push({c, k});

  std::vector<std::string> tokens(256);
  for (int b = 0; b < 256; ++b) tokens[size_t(b)] = std::string(1, char(b));
  std::vector<std::pair<int32_t, int32_t>> merges;
  std::unordered_map<std::string, int32_t> token_id;  // a merge may rebuild an existing token's bytes
  for (int b = 0; b < 256; ++b) token_id[tokens[size_t(b)]] = b;
  const size_t target_tokens = size_t(vocab_size - n_special);
  std::vector<int32_t> merged_word;
  std::vector<uint64_t> touched;
  while (tokens.size() < target_tokens && !heap.empty()) {
    Entry top = heap.top();
    heap.pop();
    auto cit = count.find(top.pair);
    const int64_t actual = cit == count.end() ? 0 : cit->second;
    if (actual != top.count) {  // stale: counts of old pairs only fall
      if (actual > 0) heap.push({actual, top.pair});
      continue;
    }
    if (top.count < options.min_frequency) break;
    const int32_t a = int32_t(top.pair >> 32), b = int32_t(top.pair & 0xFFFFFFFF);
    std::string ab_bytes = tokens[size_t(a)] + tokens[size_t(b)];
    auto [tid, is_new] = token_id.emplace(ab_bytes, int32_t(tokens.size()));
    const int32_t ab = tid->second;
    if (is_new) tokens.push_back(std::move(ab_bytes));
    merges.emplace_back(a, b);
    touched.clear();
    auto add = [&](int32_t x, int32_t y, int64_t delta, int32_t w) {
      const uint64_t k = pair_key(x, y);
      count[k] += delta;
      if (delta > 0) {
        auto& v = where[k];
        if (v.empty() || v.back() != w) v.push_back(w);
        touched.push_back(k);
      }
    };
    std::vector<int32_t> occ = std::move(where[top.pair]);
    where.erase(top.pair);
    for (int32_t w : occ) {
      std::vector<int32_t>& word = words[size_t(w)];
      const int64_t f = freq[size_t(w)];
      merged_word.clear();
      bool changed = false;
      for (size_t i = 0; i < word.size();) {
        if (i + 1 < word.size() && word[i] == a && word[i + 1] == b) {
          add(a, b, -f, w);
          if (!merged_word.empty()) {
            add(merged_word.back(), a, -f, w);
            add(merged_word.back(), ab, f, w);
          }
          if (i + 2 < word.size()) {
            add(b, word[i + 2], -f, w);
            add(ab, word[i + 2], f, w);
          }
          merged_word.push_back(ab);
          i += 2;
          changed = true;
        } else {
          merged_word.push_back(word[i]);
          ++i;
        }
      }
      if (changed) word.swap(merged_word);
    }
    count.erase(top.pair);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint64_t k : touched) {
      auto it = count.find(k);
      if (it != count.end() && it->second > 0) heap.push({it->second, k});
    }
  }
  std::vector<std::pair<std::string, int32_t>> specials;
  const int32_t first_special = int32_t(tokens.size());
  for (int32_t i = 0; i < n_special; ++i) specials.emplace_back(options.special_tokens[size_t(i)], first_special + i);
  return BytePairTokenizer::from_merges(std::move(tokens), merges, options.pattern, specials);
}

}  // namespace nabla::text
