// Byte-level BPE: the pre-tokenizers, the merge loop, the vocabulary loaders and the trainer.
// See text/bpe.h for what each piece does and where it differs from the references.
#include "text/bpe.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/file.h"
#include "text/bpe_merge.h"
#include "text/unicode_tables.h"
#include "text/utf8.h"

namespace nabla::text {

namespace {

static_assert(unicode::kStage1[0] == 0, "ASCII's classes are the first block of stage 2");

// ---------------------------------------------------------------------------------------------
// UTF-8 and character classes.

enum CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

inline uint8_t class_of(uint32_t cp) {
  return unicode::kStage2[static_cast<size_t>(unicode::kStage1[cp >> 8]) * 256 + (cp & 255)];
}

struct Char {
  uint8_t cls;  // CharClass
  uint8_t len;  // bytes
};

// The character starting at s[i] (i < n). A byte that does not start a valid UTF-8 sequence
// (overlong, surrogate, > U+10FFFF, truncated) is one character of class "other".
Char char_at_slow(const uint8_t* s, size_t n, size_t i);

[[gnu::always_inline]] inline Char char_at(const uint8_t* s, size_t n, size_t i) {
  const uint8_t c = s[i];
  if (c < 0x80) [[likely]]
    return {unicode::kStage2[c], 1};  // block 0 is the first block of stage 2
  return char_at_slow(s, n, i);
}

Char char_at_slow(const uint8_t* s, size_t n, size_t i) {
  const uint8_t c = s[i];
  uint32_t cp;
  uint8_t len;
  if ((c & 0xE0) == 0xC0) {
    if (c < 0xC2 || i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return {kOther, 1};
    cp = (uint32_t(c & 0x1F) << 6) | (s[i + 1] & 0x3F);
    len = 2;
  } else if ((c & 0xF0) == 0xE0) {
    if (i + 2 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return {kOther, 1};
    cp = (uint32_t(c & 0x0F) << 12) | (uint32_t(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
    if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)) return {kOther, 1};
    len = 3;
  } else if ((c & 0xF8) == 0xF0) {
    if (i + 3 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
      return {kOther, 1};
    cp = (uint32_t(c & 0x07) << 18) | (uint32_t(s[i + 1] & 0x3F) << 12) | (uint32_t(s[i + 2] & 0x3F) << 6) |
         (s[i + 3] & 0x3F);
    if (cp < 0x10000 || cp > 0x10FFFF) return {kOther, 1};
    len = 4;
  } else {
    return {kOther, 1};
  }
  return {class_of(cp), len};
}

// End of the run of characters of class `cls` starting at i.
inline size_t run_end(const uint8_t* s, size_t n, size_t i, uint8_t cls) {
  while (i < n) {
    Char ch = char_at(s, n, i);
    if (ch.cls != cls) break;
    i += ch.len;
  }
  return i;
}

inline bool is_crlf(uint8_t c) { return c == '\r' || c == '\n'; }

// \s+(?!\S)|\s+ (and for cl100k \s*[\r\n]+ first) at a whitespace character s[i].
inline size_t match_space(const uint8_t* s, size_t n, size_t i, bool newline_rule) {
  size_t j = i, last_start = i, newline_end = 0;
  int count = 0;
  while (j < n) {
    Char ch = char_at(s, n, j);
    if (ch.cls != kSpace) break;
    last_start = j;
    j += ch.len;
    ++count;
    if (newline_rule && is_crlf(s[last_start])) newline_end = j;
  }
  if (newline_end) return newline_end;  // \s*[\r\n]+: up to the run's last \r or \n
  if (j == n) return n;                 // \s+(?!\S) at the end of the text
  return count >= 2 ? last_start : j;   // leave the last space for the next piece, or \s+
}

// One piece of GPT-2's pattern starting at i: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
// ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(const uint8_t* s, size_t n, size_t i) {
  const uint8_t c = s[i];
  if (c == '\'' && i + 1 < n) {
    const uint8_t c1 = s[i + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
    if (i + 2 < n) {
      const uint8_t c2 = s[i + 2];
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return i + 3;
    }
  }
  if (c == ' ' && i + 1 < n) {
    Char next = char_at(s, n, i + 1);
    if (next.cls != kSpace) return run_end(s, n, i + 1 + next.len, next.cls);
  }
  Char ch = char_at(s, n, i);
  if (ch.cls != kSpace) return run_end(s, n, i + ch.len, ch.cls);
  return match_space(s, n, i, /*newline_rule=*/false);
}

inline uint8_t ascii_lower(uint8_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// One piece of cl100k's pattern starting at i: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|
// \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_cl100k(const uint8_t* s, size_t n, size_t i) {
  const uint8_t c = s[i];
  if (c == '\'' && i + 1 < n) {
    const uint8_t c1 = ascii_lower(s[i + 1]);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
    if (i + 2 < n) {
      const uint8_t c2 = ascii_lower(s[i + 2]);
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return i + 3;
    }
  }
  Char ch = char_at(s, n, i);
  if (ch.cls == kLetter) return run_end(s, n, i + ch.len, kLetter);
  if (ch.cls != kNumber && !is_crlf(c) && i + ch.len < n) {  // [^\r\n\p{L}\p{N}]\p{L}+
    Char next = char_at(s, n, i + ch.len);
    if (next.cls == kLetter) return run_end(s, n, i + ch.len + next.len, kLetter);
  }
  if (ch.cls == kNumber) {  // \p{N}{1,3}
    size_t j = i + ch.len;
    for (int k = 1; k < 3 && j < n; ++k) {
      Char d = char_at(s, n, j);
      if (d.cls != kNumber) break;
      j += d.len;
    }
    return j;
  }
  size_t other_start = std::string_view::npos;  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  if (ch.cls == kOther) {
    other_start = i;
  } else if (c == ' ' && i + 1 < n && char_at(s, n, i + 1).cls == kOther) {
    other_start = i + 1;
  }
  if (other_start != std::string_view::npos) {
    size_t j = run_end(s, n, other_start, kOther);
    while (j < n && is_crlf(s[j])) ++j;
    return j;
  }
  return match_space(s, n, i, /*newline_rule=*/true);
}

template <class F>
inline void for_each_piece(std::string_view text, Pattern pattern, F&& f) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  if (pattern == Pattern::kGpt2) {
    while (i < n) {
      size_t j = match_gpt2(s, n, i);
      f(text.substr(i, j - i));
      i = j;
    }
  } else {
    while (i < n) {
      size_t j = match_cl100k(s, n, i);
      f(text.substr(i, j - i));
      i = j;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// GPT-2's byte <-> unicode map.

std::array<uint32_t, 256> make_byte_to_cp() {
  std::array<uint32_t, 256> map{};
  std::array<bool, 256> printable{};
  for (int b = '!'; b <= '~'; ++b) printable[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) map[b] = printable[b] ? uint32_t(b) : next++;
  return map;
}

const std::array<uint32_t, 256>& byte_to_cp() {
  static const std::array<uint32_t, 256> map = make_byte_to_cp();
  return map;
}

// The inverse map: code point (< 324) -> byte, or -1.
const std::array<int16_t, 324>& cp_to_byte() {
  static const std::array<int16_t, 324> map = [] {
    std::array<int16_t, 324> m;
    m.fill(-1);
    for (int b = 0; b < 256; ++b) m[byte_to_cp()[size_t(b)]] = int16_t(b);
    return m;
  }();
  return map;
}

// "Ġworld" -> " world". Returns false when a character is not in GPT-2's map.
bool unicode_to_bytes(std::string_view spelt, std::string& out) {
  out.clear();
  const auto* s = reinterpret_cast<const uint8_t*>(spelt.data());
  const size_t n = spelt.size();
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    if (s[i] < 0x80) {
      cp = s[i];
      i += 1;
    } else if ((s[i] & 0xE0) == 0xC0 && i + 1 < n && (s[i + 1] & 0xC0) == 0x80) {
      cp = (uint32_t(s[i] & 0x1F) << 6) | (s[i + 1] & 0x3F);
      i += 2;
    } else {
      return false;  // the map's code points are all below U+0800
    }
    if (cp >= cp_to_byte().size() || cp_to_byte()[cp] < 0) return false;
    out += char(cp_to_byte()[cp]);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// An open-addressing hash map from a pair of token ids to (rank, merged id): the merge loop's only
// lookup, so it is kept flat and small: one 8-byte slot per pair packs the two ids and the rank
// (21 bits each), and the merged id of a rank is in a side table.

class PairMap {
 public:
  static constexpr int kBits = 21;  // ids and ranks below 2^21 (2,097,152)
  static constexpr int32_t kLimit = int32_t(1) << kBits;
  static constexpr int32_t kNoRank = detail::kNoRank;

  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    slots_.assign(cap, kEmpty);
    mask_ = cap - 1;
    size_ = 0;
  }
  // Inserts or overwrites. The caller checks that a, b, rank and merged are in [0, kLimit).
  void put(int32_t a, int32_t b, int32_t rank, int32_t merged) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    insert(pack(a, b), rank);
    if (size_t(rank) >= merged_.size()) merged_.resize(size_t(rank) + 1, -1);
    merged_[size_t(rank)] = merged;
  }
  // The rank of (a, b), or kNoRank.
  int32_t rank(int32_t a, int32_t b) const {
    const uint64_t k = pack(a, b);
    size_t h = hash(k) & mask_;
    while (true) {
      const uint64_t slot = slots_[h];
      if ((slot >> kBits) == k) return int32_t(slot & (kLimit - 1));
      if (slot == kEmpty) return kNoRank;
      h = (h + 1) & mask_;
    }
  }
  // The id that the merge of this rank makes.
  int32_t merged(int32_t rank) const { return merged_[size_t(rank)]; }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);  // its key bits (all ones) are no pair's key
  static uint64_t pack(int32_t a, int32_t b) { return (uint64_t(a) << kBits) | uint64_t(b); }
  static size_t hash(uint64_t k) { return size_t((k * 0x9E3779B97F4A7C15ull) >> 20); }
  void insert(uint64_t k, int32_t rank) {
    size_t h = hash(k) & mask_;
    while (slots_[h] != kEmpty && (slots_[h] >> kBits) != k) h = (h + 1) & mask_;
    if (slots_[h] == kEmpty) ++size_;
    slots_[h] = (k << kBits) | uint64_t(rank);
  }
  void grow() {
    std::vector<uint64_t> old = std::move(slots_);
    reserve(std::max<size_t>(16, old.size()));
    for (uint64_t s : old)
      if (s != kEmpty) insert(s >> kBits, int32_t(s & (kLimit - 1)));
  }
  std::vector<uint64_t> slots_ = std::vector<uint64_t>(16, kEmpty);
  std::vector<int32_t> merged_;  // by rank
  size_t mask_ = 15;
  size_t size_ = 0;
};

// A flat hash set of token byte strings, answering "which id has exactly these bytes": slots hold
// (32-bit hash tag, id); the bytes are compared against the token table they index.
class PieceMap {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    slots_.assign(cap, kEmpty);
    mask_ = cap - 1;
  }
  static uint64_t hash(std::string_view s) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    if (i < s.size()) {
      uint64_t w = 0;
      std::memcpy(&w, s.data() + i, s.size() - i);
      h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    return h * 0x94D049BB133111EBull;
  }
  // Inserts `id` for tokens[id]; returns false if those bytes are already present.
  bool insert(const std::vector<std::string>& tokens, int32_t id) {
    if (2 * (size_ + 1) > slots_.size()) grow(tokens);
    const std::string& t = tokens[size_t(id)];
    const uint64_t h = hash(t);
    const uint32_t tag = uint32_t(h >> 32);
    size_t i = size_t(h) & mask_;
    while (slots_[i] != kEmpty) {
      if (uint32_t(slots_[i] >> 32) == tag && tokens[size_t(int32_t(slots_[i]))] == t) return false;
      i = (i + 1) & mask_;
    }
    slots_[i] = (uint64_t(tag) << 32) | uint32_t(id);
    ++size_;
    return true;
  }
  int32_t find(const std::vector<std::string>& tokens, std::string_view s) const {
    const uint64_t h = hash(s);
    const uint32_t tag = uint32_t(h >> 32);
    size_t i = size_t(h) & mask_;
    while (slots_[i] != kEmpty) {
      if (uint32_t(slots_[i] >> 32) == tag) {
        const int32_t id = int32_t(uint32_t(slots_[i]));
        if (tokens[size_t(id)] == s) return id;
      }
      i = (i + 1) & mask_;
    }
    return -1;
  }
  // Removes the entry of `id` (rebuilds without it).
  void erase(const std::vector<std::string>& tokens, int32_t id) {
    std::vector<uint64_t> old = std::move(slots_);
    reserve(size_ + 1);
    size_ = 0;
    for (uint64_t e : old)
      if (e != kEmpty && int32_t(uint32_t(e)) != id) insert(tokens, int32_t(uint32_t(e)));
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  void grow(const std::vector<std::string>& tokens) {
    std::vector<uint64_t> old = std::move(slots_);
    reserve(std::max<size_t>(16, old.size()));
    size_ = 0;
    for (uint64_t e : old)
      if (e != kEmpty) insert(tokens, int32_t(uint32_t(e)));
  }
  std::vector<uint64_t> slots_ = std::vector<uint64_t>(16, kEmpty);
  size_t mask_ = 15;
  size_t size_ = 0;
};

std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  NABLA_CHECK(IOError, f.good(), "BytePairTokenizer: cannot open ", what, " file '", path, "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  NABLA_CHECK(IOError, !f.bad(), "BytePairTokenizer: error reading ", what, " file '", path, "'");
  return ss.str();
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  if (in.size() % 4 != 0 || in.empty()) return false;
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else {
        if (pad) return false;
        v[k] = base64_value(c);
        if (v[k] < 0) return false;
      }
    }
    uint32_t x = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
    out += char(x >> 16);
    if (pad < 2) out += char((x >> 8) & 0xFF);
    if (pad < 1) out += char(x & 0xFF);
  }
  return true;
}

// Splits contents into lines (without "\n" or a trailing "\r").
std::vector<std::string_view> split_lines(std::string_view contents) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < contents.size()) {
    size_t end = contents.find('\n', start);
    if (end == std::string_view::npos) end = contents.size();
    std::string_view line = contents.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct BytePairTokenizer::Impl {
  Pattern pattern = Pattern::kGpt2;
  std::vector<std::string> id_to_bytes;  // raw bytes per id ("" for an unused id)
  std::vector<uint8_t> id_valid;
  PieceMap bytes_to_id;  // ordinary tokens (not special ones), by raw bytes
  std::array<int32_t, 256> byte_id{};
  PairMap pairs;
  // Merges in rank order (GPT-2 files, training); empty for tiktoken ranks.
  std::vector<std::pair<int32_t, int32_t>> merges;
  bool whole_piece_lookup = false;  // tiktoken: a piece that is a token is that token
  std::unordered_map<std::string, int32_t> special;
  std::vector<std::pair<std::string, int32_t>> special_sorted;  // longest first

  void set_token(int32_t id, std::string bytes) {
    if (size_t(id) >= id_to_bytes.size()) {
      id_to_bytes.resize(size_t(id) + 1);
      id_valid.resize(size_t(id) + 1, 0);
    }
    id_to_bytes[size_t(id)] = std::move(bytes);
    id_valid[size_t(id)] = 1;
  }

  void finish_bytes(const std::string& source) {
    for (int b = 0; b < 256; ++b) {
      const char c = char(b);
      const int32_t id = bytes_to_id.find(id_to_bytes, std::string_view(&c, 1));
      NABLA_CHECK(IOError, id >= 0, "BytePairTokenizer: vocabulary '", source, "' has no token for the byte 0x",
                  "0123456789abcdef"[b >> 4], "0123456789abcdef"[b & 15], " (a byte-level vocabulary needs all 256)");
      byte_id[size_t(b)] = id;
    }
  }

  void add_special(const std::string& text, int32_t id, const std::string& source) {
    NABLA_CHECK(ValueError, !text.empty(), "BytePairTokenizer: empty special token in '", source, "'");
    NABLA_CHECK(ValueError, id >= 0 && id < (1 << 24), "BytePairTokenizer: special token '", text, "' has id ", id,
                ", outside [0, 2^24)");
    if (size_t(id) < id_valid.size() && id_valid[size_t(id)]) {
      NABLA_CHECK(ValueError, id_to_bytes[size_t(id)] == text, "BytePairTokenizer: special token '", text, "' has id ",
                  id, " which is already the token '", id_to_bytes[size_t(id)], "'");
    }
    set_token(id, text);
    special[text] = id;
    special_sorted.assign(special.begin(), special.end());
    std::sort(special_sorted.begin(), special_sorted.end(), [](const auto& a, const auto& b) {
      return a.first.size() != b.first.size() ? a.first.size() > b.first.size() : a.first < b.first;
    });
  }

  int32_t lookup(std::string_view bytes) const { return bytes_to_id.find(id_to_bytes, bytes); }

  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
    const size_t n = piece.size();
    if (n == 0) return;
    const auto* p = reinterpret_cast<const uint8_t*>(piece.data());
    if (n == 1) {
      out.push_back(byte_id[p[0]]);
      return;
    }
    if (whole_piece_lookup) {
      const int32_t id = bytes_to_id.find(id_to_bytes, piece);
      if (id >= 0) {
        out.push_back(id);
        return;
      }
    }
    // The piece's bytes as byte tokens, merged in place at the end of `out`.
    const size_t at = out.size();
    for (size_t i = 0; i < n; ++i) out.push_back(byte_id[p[i]]);
    const size_t m = detail::merge_pairs(
        out.data() + at, n, [this](int32_t a, int32_t b) { return pairs.rank(a, b); },
        [this](int32_t rank, int32_t, int32_t) { return pairs.merged(rank); });
    out.resize(at + m);
  }

  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
    for_each_piece(text, pattern, [&](std::string_view piece) { encode_piece(piece, out); });
  }
};

BytePairTokenizer::BytePairTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BytePairTokenizer::BytePairTokenizer(BytePairTokenizer&&) noexcept = default;
BytePairTokenizer& BytePairTokenizer::operator=(BytePairTokenizer&&) noexcept = default;
BytePairTokenizer::~BytePairTokenizer() = default;

std::vector<std::string_view> pre_tokenize(std::string_view text, Pattern pattern) {
  std::vector<std::string_view> pieces;
  for_each_piece(text, pattern, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

std::string BytePairTokenizer::byte_to_unicode(uint8_t byte) {
  std::string s;
  utf8::append(s, byte_to_cp()[byte]);
  return s;
}

BytePairTokenizer BytePairTokenizer::from_gpt2_files(const std::string& vocab_json_path, const std::string& merges_path,
                                                     Pattern pattern) {
  std::string vocab = read_file(vocab_json_path, "vocabulary");
  std::string merges = read_file(merges_path, "merges");
  // Errors name both files: the JSON's errors carry the vocabulary path, the merges' their own.
  return from_gpt2_strings(vocab, merges, pattern, vocab_json_path + "' / '" + merges_path);
}

BytePairTokenizer BytePairTokenizer::from_gpt2_strings(std::string_view vocab_json, std::string_view merges_text,
                                                       Pattern pattern, const std::string& source) {
  auto impl = std::make_unique<Impl>();
  impl->pattern = pattern;
  // A vocabulary is one flat object; refuse deeper nesting before the parser builds it.
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < vocab_json.size(); ++i) {
    const char c = vocab_json[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  NABLA_CHECK(IOError, max_depth <= 1, "BytePairTokenizer: '", source,
              "': vocabulary must be a flat JSON object of token -> id, found nesting ", max_depth, " deep");
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(vocab_json.begin(), vocab_json.end());
  } catch (const nlohmann::json::parse_error& e) {
    NABLA_CHECK(IOError, false, "BytePairTokenizer: '", source, "': vocabulary is not valid JSON: ", e.what());
  }
  NABLA_CHECK(IOError, vocab.is_object(), "BytePairTokenizer: '", source,
              "': vocabulary must be a JSON object of token -> id, got ", vocab.type_name());
  // Ids are dense in every real vocabulary; a bound keeps a hostile id from allocating gigabytes.
  const int64_t id_limit = 2 * int64_t(vocab.size()) + 65536;
  std::string bytes;
  impl->bytes_to_id.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    NABLA_CHECK(IOError, it.value().is_number_integer(), "BytePairTokenizer: '", source, "': token '", it.key(),
                "' has a non-integer id ", it.value().dump());
    const int64_t id = it.value().get<int64_t>();
    NABLA_CHECK(IOError, id >= 0 && id < id_limit, "BytePairTokenizer: '", source, "': token '", it.key(), "' has id ",
                id, ", outside [0, ", id_limit, ") for a vocabulary of ", vocab.size(), " tokens");
    NABLA_CHECK(IOError, unicode_to_bytes(it.key(), bytes), "BytePairTokenizer: '", source, "': token '", it.key(),
                "' is not spelt with GPT-2's byte-to-unicode map");
    NABLA_CHECK(IOError, size_t(id) >= impl->id_valid.size() || !impl->id_valid[size_t(id)], "BytePairTokenizer: '",
                source, "': id ", id, " is given to two tokens ('", impl->id_to_bytes[size_t(id)], "' and '", bytes,
                "')");
    impl->set_token(int32_t(id), bytes);
    NABLA_CHECK(IOError, impl->bytes_to_id.insert(impl->id_to_bytes, int32_t(id)), "BytePairTokenizer: '", source,
                "': token '", it.key(), "' (id ", id, ") appears twice");
  }
  impl->finish_bytes(source);

  std::vector<std::string_view> lines = split_lines(merges_text);
  NABLA_CHECK(IOError, impl->id_to_bytes.size() <= size_t(PairMap::kLimit) && lines.size() <= size_t(PairMap::kLimit),
              "BytePairTokenizer: '", source, "': ", impl->id_to_bytes.size(), " ids and ", lines.size(),
              " merges: at most 2^21 of each are supported");
  impl->pairs.reserve(lines.size());
  std::vector<uint8_t> produced(impl->id_to_bytes.size(), 0);
  std::string left, right;
  int32_t rank = 0;
  for (size_t ln = 0; ln < lines.size(); ++ln) {
    std::string_view line = lines[ln];
    if (ln == 0 && line.starts_with("#version")) continue;
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    NABLA_CHECK(IOError,
                sp != std::string_view::npos && sp > 0 && sp + 1 < line.size() &&
                    line.find(' ', sp + 1) == std::string_view::npos,
                "BytePairTokenizer: '", source, "': merges line ", ln + 1, ": expected two tokens separated by ",
                "one space, got '", line, "'");
    std::string_view a = line.substr(0, sp), b = line.substr(sp + 1);
    NABLA_CHECK(IOError, unicode_to_bytes(a, left) && unicode_to_bytes(b, right), "BytePairTokenizer: '", source,
                "': merges line ", ln + 1, ": '", line, "' is not spelt with GPT-2's byte-to-unicode map");
    const int32_t ia = impl->lookup(left), ib = impl->lookup(right), im = impl->lookup(left + right);
    NABLA_CHECK(IOError, ia >= 0 && ib >= 0, "BytePairTokenizer: '", source, "': merges line ", ln + 1, ": '",
                ia < 0 ? a : b, "' is not in the vocabulary");
    NABLA_CHECK(IOError, im >= 0, "BytePairTokenizer: '", source, "': merges line ", ln + 1, ": the merged token '", a,
                b, "' is not in the vocabulary");
    impl->pairs.put(ia, ib, rank++, im);  // a repeated pair keeps its last rank, as GPT-2's dict does
    impl->merges.emplace_back(ia, ib);
    produced[size_t(im)] = 1;
  }
  // Tokens no merge makes and that are longer than one byte: special tokens ("<|endoftext|>").
  std::vector<std::pair<std::string, int32_t>> specials;
  for (size_t id = 0; id < impl->id_to_bytes.size(); ++id) {
    if (impl->id_valid[id] && !produced[id] && impl->id_to_bytes[id].size() > 1)
      specials.emplace_back(impl->id_to_bytes[id], int32_t(id));
  }
  for (auto& [text, id] : specials) {
    impl->bytes_to_id.erase(impl->id_to_bytes, id);
    impl->add_special(text, id, source);
  }
  return BytePairTokenizer(std::move(impl));
}

BytePairTokenizer BytePairTokenizer::from_tiktoken_file(
    const std::string& path, Pattern pattern, const std::vector<std::pair<std::string, int32_t>>& special_tokens) {
  return from_tiktoken_string(read_file(path, "tiktoken ranks"), pattern, special_tokens, path);
}

BytePairTokenizer BytePairTokenizer::from_tiktoken_string(
    std::string_view contents, Pattern pattern, const std::vector<std::pair<std::string, int32_t>>& special_tokens,
    const std::string& source) {
  auto impl = std::make_unique<Impl>();
  impl->pattern = pattern;
  impl->whole_piece_lookup = true;
  std::vector<std::string_view> lines = split_lines(contents);
  const int64_t rank_limit = 2 * int64_t(lines.size()) + 65536;  // ranks are dense (see from_gpt2_strings)
  std::string bytes;
  impl->bytes_to_id.reserve(lines.size());
  for (size_t ln = 0; ln < lines.size(); ++ln) {
    std::string_view line = lines[ln];
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    NABLA_CHECK(IOError, sp != std::string_view::npos, "BytePairTokenizer: '", source, "': line ", ln + 1,
                ": expected 'base64 rank', got ", io::quote_name(std::string(line)));
    NABLA_CHECK(IOError, base64_decode(line.substr(0, sp), bytes), "BytePairTokenizer: '", source, "': line ", ln + 1,
                ": invalid base64 ", io::quote_name(std::string(line.substr(0, sp))));
    std::string_view rank_text = line.substr(sp + 1);
    int64_t rank = 0;
    bool ok = !rank_text.empty() && rank_text.size() <= 10;  // at most 10 digits: no overflow
    for (size_t i = 0; ok && i < rank_text.size(); ++i) {
      const char c = rank_text[i];
      ok = c >= '0' && c <= '9';
      rank = rank * 10 + (c - '0');
    }
    NABLA_CHECK(IOError, ok, "BytePairTokenizer: '", source, "': line ", ln + 1, ": invalid rank ",
                io::quote_name(std::string(rank_text)));
    NABLA_CHECK(IOError, rank < rank_limit, "BytePairTokenizer: '", source, "': line ", ln + 1, ": rank ", rank,
                " is outside [0, ", rank_limit, ") for a file of ", lines.size(), " lines");
    NABLA_CHECK(IOError, size_t(rank) >= impl->id_valid.size() || !impl->id_valid[size_t(rank)], "BytePairTokenizer: '",
                source, "': line ", ln + 1, ": rank ", rank, " appears twice");
    impl->set_token(int32_t(rank), bytes);
    NABLA_CHECK(IOError, impl->bytes_to_id.insert(impl->id_to_bytes, int32_t(rank)), "BytePairTokenizer: '", source,
                "': line ", ln + 1, ": token appears twice");
  }
  impl->finish_bytes(source);
  // tiktoken merges two adjacent parts when their concatenation is a token, at that token's rank:
  // register every split of every token into two tokens.
  size_t n_pairs = 0;
  for (const std::string& tok : impl->id_to_bytes) n_pairs += tok.size() > 1 ? 2 : 0;
  NABLA_CHECK(IOError, impl->id_to_bytes.size() <= size_t(PairMap::kLimit), "BytePairTokenizer: '", source,
              "': ", impl->id_to_bytes.size(), " ranks: at most 2^21 are supported");
  impl->pairs.reserve(n_pairs);
  for (size_t i = 0; i < impl->id_to_bytes.size(); ++i) {
    if (!impl->id_valid[i]) continue;
    const std::string& tok = impl->id_to_bytes[i];
    const int32_t id = int32_t(i);
    for (size_t k = 1; k < tok.size(); ++k) {
      const int32_t a = impl->lookup(std::string_view(tok).substr(0, k));
      if (a < 0) continue;
      const int32_t b = impl->lookup(std::string_view(tok).substr(k));
      if (b >= 0) impl->pairs.put(a, b, id, id);
    }
  }
  for (const auto& [text, id] : special_tokens) impl->add_special(text, id, source);
  return BytePairTokenizer(std::move(impl));
}

BytePairTokenizer BytePairTokenizer::from_merges(std::vector<std::string> id_to_bytes,
                                                 const std::vector<std::pair<int32_t, int32_t>>& merges,
                                                 Pattern pattern,
                                                 const std::vector<std::pair<std::string, int32_t>>& special_tokens) {
  auto impl = std::make_unique<Impl>();
  impl->pattern = pattern;
  for (size_t id = 0; id < id_to_bytes.size(); ++id) {
    impl->set_token(int32_t(id), std::move(id_to_bytes[id]));
    NABLA_CHECK(ValueError, impl->bytes_to_id.insert(impl->id_to_bytes, int32_t(id)),
                "BytePairTokenizer::from_merges: token ", id, " repeats an earlier token");
  }
  impl->finish_bytes("<merges>");
  NABLA_CHECK(ValueError,
              impl->id_to_bytes.size() <= size_t(PairMap::kLimit) && merges.size() <= size_t(PairMap::kLimit),
              "BytePairTokenizer::from_merges: at most 2^21 tokens and merges are supported");
  impl->pairs.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    auto [a, b] = merges[r];
    NABLA_CHECK(ValueError,
                a >= 0 && b >= 0 && size_t(a) < impl->id_to_bytes.size() && size_t(b) < impl->id_to_bytes.size(),
                "BytePairTokenizer::from_merges: merge ", r, " (", a, ", ", b, ") has an unknown id");
    const int32_t m = impl->lookup(impl->id_to_bytes[size_t(a)] + impl->id_to_bytes[size_t(b)]);
    NABLA_CHECK(ValueError, m >= 0, "BytePairTokenizer::from_merges: merge ", r,
                " makes a token not in the vocabulary");
    impl->pairs.put(a, b, int32_t(r), m);
    impl->merges.emplace_back(a, b);
  }
  for (const auto& [text, id] : special_tokens) impl->add_special(text, id, "<merges>");
  return BytePairTokenizer(std::move(impl));
}

std::vector<int32_t> BytePairTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  impl_->encode_ordinary(text, out);
  return out;
}

std::vector<int32_t> BytePairTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<std::pair<std::string_view, int32_t>> allowed;  // longest first
  for (const auto& [tok, id] : impl_->special_sorted) {
    if (options.allow_all_special || options.allowed_special.count(tok)) allowed.emplace_back(tok, id);
  }
  for (const auto& name : options.allowed_special) {
    NABLA_CHECK(ValueError, impl_->special.count(name), "BytePairTokenizer::encode: '", name,
                "' in allowed_special is not a special token of this vocabulary");
  }
  if (allowed.empty()) return encode(text);
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  size_t start = 0;
  while (start < text.size()) {
    // The leftmost allowed special token at or after `start`; at one position the longest.
    size_t best = std::string_view::npos;
    size_t best_k = 0;
    for (size_t k = 0; k < allowed.size(); ++k) {
      size_t at = text.find(allowed[k].first, start);
      if (at < best) {
        best = at;
        best_k = k;
      }
    }
    if (best == std::string_view::npos) {
      impl_->encode_ordinary(text.substr(start), out);
      break;
    }
    impl_->encode_ordinary(text.substr(start, best - start), out);
    out.push_back(allowed[best_k].second);
    start = best + allowed[best_k].first.size();
  }
  return out;
}

void BytePairTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  impl_->encode_piece(piece, out);
}

std::string BytePairTokenizer::decode(std::span<const int32_t> ids) const {
  size_t bytes = 0;
  const size_t n = impl_->id_to_bytes.size();
  for (int32_t id : ids) {
    NABLA_CHECK(IndexError, id >= 0 && size_t(id) < n && impl_->id_valid[size_t(id)], "BytePairTokenizer::decode: id ",
                id, " is not in the vocabulary (vocabulary size ", n, ")");
    bytes += impl_->id_to_bytes[size_t(id)].size();
  }
  std::string out;
  out.reserve(bytes);
  for (int32_t id : ids) out += impl_->id_to_bytes[size_t(id)];
  return out;
}

std::string replace_invalid_utf8(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  const auto* s = reinterpret_cast<const uint8_t*>(in.data());
  for (size_t i = 0; i < in.size();) {
    const utf8::Step st = utf8::step(s, in.size(), i);
    if (st.valid) {
      out.append(in.substr(i, st.len));
    } else {
      out += "\xef\xbf\xbd";  // one U+FFFD per maximal invalid subpart
    }
    i += st.len;
  }
  return out;
}

std::string BytePairTokenizer::decode_text(std::span<const int32_t> ids) const {
  return replace_invalid_utf8(decode(ids));
}

int32_t BytePairTokenizer::vocab_size() const { return int32_t(impl_->id_to_bytes.size()); }
Pattern BytePairTokenizer::pattern() const { return impl_->pattern; }
size_t BytePairTokenizer::num_merges() const { return impl_->pairs.size(); }

const std::string& BytePairTokenizer::token_bytes(int32_t id) const {
  const size_t n = impl_->id_to_bytes.size();
  NABLA_CHECK(IndexError, id >= 0 && size_t(id) < n && impl_->id_valid[size_t(id)],
              "BytePairTokenizer::token_bytes: id ", id, " is not in the vocabulary (vocabulary size ", n, ")");
  return impl_->id_to_bytes[size_t(id)];
}

int32_t BytePairTokenizer::token_to_id(std::string_view bytes) const {
  int32_t id = impl_->lookup(bytes);
  if (id >= 0) return id;
  auto it = impl_->special.find(std::string(bytes));
  return it == impl_->special.end() ? -1 : it->second;
}

const std::unordered_map<std::string, int32_t>& BytePairTokenizer::special_tokens() const { return impl_->special; }

// Token bytes in GPT-2's byte-to-unicode spelling.
static std::string spell(const std::string& bytes) {
  std::string s;
  for (unsigned char c : bytes) utf8::append(s, byte_to_cp()[c]);
  return s;
}

gguf::BpeVocab BytePairTokenizer::gguf_vocab() const {
  NABLA_CHECK(ValueError, !impl_->merges.empty() || impl_->pairs.size() == 0,
              "BytePairTokenizer::gguf_vocab: this tokenizer was loaded from tiktoken ranks, which have no merge list");
  gguf::BpeVocab v;
  for (size_t id = 0; id < impl_->id_to_bytes.size(); ++id) {
    const std::string& b = impl_->id_to_bytes[id];
    const bool special = impl_->id_valid[id] && impl_->special.count(b);
    v.tokens.push_back(!impl_->id_valid[id] ? "[UNUSED_" + std::to_string(id) + "]" : special ? b : spell(b));
    v.token_types.push_back(special ? 3 : 1);
  }
  for (auto [a, b] : impl_->merges)
    v.merges.push_back(spell(impl_->id_to_bytes[size_t(a)]) + ' ' + spell(impl_->id_to_bytes[size_t(b)]));
  if (auto it = impl_->special.find("<|endoftext|>"); it != impl_->special.end()) v.bos_id = v.eos_id = it->second;
  return v;
}

void BytePairTokenizer::save(const std::string& vocab_json_path, const std::string& merges_path) const {
  NABLA_CHECK(ValueError, !impl_->merges.empty() || impl_->pairs.size() == 0,
              "BytePairTokenizer::save: this tokenizer was loaded from tiktoken ranks, which have no merge list");
  // {"token": id, ...} in id order, as Hugging Face writes it
  std::string vocab = "{";
  for (size_t id = 0; id < impl_->id_to_bytes.size(); ++id) {
    if (!impl_->id_valid[id]) continue;
    const std::string& b = impl_->id_to_bytes[id];
    if (vocab.size() > 1) vocab += ',';
    vocab += nlohmann::json(impl_->special.count(b) ? b : spell(b)).dump();
    vocab += ':' + std::to_string(id);
  }
  vocab += "}\n";
  std::string merges = "#version: 0.2\n";
  for (const std::string& m : gguf_vocab().merges) merges += m + '\n';
  // Each file through a temporary file renamed over it: a failed save never truncates a saved one.
  io::atomic_write(vocab_json_path,
                   [&](std::FILE* f) { io::write_all(f, vocab.data(), vocab.size(), vocab_json_path); });
  io::atomic_write(merges_path, [&](std::FILE* f) { io::write_all(f, merges.data(), merges.size(), merges_path); });
}

}  // namespace nabla::text
