// The byte-pair merge loop that text/bpe.cpp (BytePairTokenizer) and text/hf_tokenizer.cpp (the BPE
// model of tokenizer.json files) share. Internal to text/.
//
// merge_pairs(ids, n, rank, merged) merges ids[0..n) in place: the adjacent pair of lowest rank first
// (the leftmost of equal ranks), again and again until no adjacent pair has a rank, and returns the new
// length. rank(a, b) gives the rank of the pair (a, b), or kNoRank; merged(rank, a, b) the id that
// pair becomes. Up to kSmallMerge symbols it runs tiktoken's loop (the ranks of the adjacent pairs in
// an array on the stack, the lowest found by a scan, only the merged pair's two neighbours re-ranked:
// O(n * merges), all in one or two cache lines); beyond, a min-heap of (rank, position) candidates
// over a doubly linked list of symbols, a candidate being stale when either of its symbols has
// changed since it was pushed: O(n log n), so a hostile 1 MB piece cannot make it quadratic.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace nabla::text::detail {

inline constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();
inline constexpr size_t kSmallMerge = 64;

template <class Rank, class Merged>
size_t merge_pairs(int32_t* ids, size_t n, const Rank& rank, const Merged& merged) {
  if (n < 2) return n;
  if (n <= kSmallMerge) {
    int32_t ranks[kSmallMerge];
    for (size_t i = 0; i + 1 < n; ++i) ranks[i] = rank(ids[i], ids[i + 1]);
    size_t m = n;
    while (m > 1) {
      int32_t best = kNoRank;
      size_t at = 0;
      for (size_t i = 0; i + 1 < m; ++i) {
        if (ranks[i] < best) {
          best = ranks[i];
          at = i;
        }
      }
      if (best == kNoRank) break;
      ids[at] = merged(best, ids[at], ids[at + 1]);
      for (size_t i = at + 1; i + 1 < m; ++i) ids[i] = ids[i + 1];
      for (size_t i = at + 1; i + 2 < m; ++i) ranks[i] = ranks[i + 1];
      --m;
      if (at + 1 < m) ranks[at] = rank(ids[at], ids[at + 1]);
      if (at > 0) ranks[at - 1] = rank(ids[at - 1], ids[at]);
    }
    return m;
  }
  const int32_t end = static_cast<int32_t>(n);
  std::vector<int32_t> next(n), prev(n);
  for (size_t i = 0; i < n; ++i) {
    next[i] = static_cast<int32_t>(i + 1);
    prev[i] = static_cast<int32_t>(i) - 1;
  }
  struct Cand {
    int32_t rank, pos, left, right;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Cand> heap;
  heap.reserve(n);
  auto push = [&](int32_t pos) {
    const int32_t nx = next[size_t(pos)];
    if (nx >= end) return;
    const int32_t r = rank(ids[size_t(pos)], ids[size_t(nx)]);
    if (r == kNoRank) return;
    heap.push_back({r, pos, ids[size_t(pos)], ids[size_t(nx)]});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  std::vector<uint8_t> alive(n, 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Cand c = heap.back();
    heap.pop_back();
    const size_t pos = size_t(c.pos);
    if (!alive[pos] || ids[pos] != c.left) continue;
    const int32_t nx = next[pos];
    if (nx >= end || ids[size_t(nx)] != c.right) continue;
    ids[pos] = merged(c.rank, c.left, c.right);
    alive[size_t(nx)] = 0;
    next[pos] = next[size_t(nx)];
    if (next[pos] < end) prev[size_t(next[pos])] = static_cast<int32_t>(pos);
    push(static_cast<int32_t>(pos));
    if (prev[pos] >= 0) push(prev[pos]);
  }
  size_t k = 0;
  for (int32_t i = 0; i < end; i = next[size_t(i)]) ids[k++] = ids[size_t(i)];
  return k;
}

}  // namespace nabla::text::detail
