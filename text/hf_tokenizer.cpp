// Hugging Face tokenizer.json: loading (one parse_... function per component family), the added-token
// matcher, the normalizers, pre-tokenizers, models, post-processors and decoders. See
// text/hf_tokenizer.h for the pipeline and the differences from the references.
#include "text/hf_tokenizer.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "text/bpe.h"
#include "text/bpe_merge.h"
#include "text/unicode_norm_tables.h"

namespace nabla::text {

namespace {

using json = nlohmann::json;
namespace un = unicode_norm;

constexpr int kMaxComponentDepth = 16;
constexpr int kMaxJsonDepth = 64;

// ---------------------------------------------------------------------------------------------
// UTF-8 and character properties.

// Decodes the code point at s[i] of valid UTF-8 and advances i.
inline uint32_t next_cp(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const uint8_t c = p[i];
  if (c < 0x80) {
    ++i;
    return c;
  }
  if (c < 0xE0) {
    const uint32_t cp = (uint32_t(c & 0x1F) << 6) | (p[i + 1] & 0x3F);
    i += 2;
    return cp;
  }
  if (c < 0xF0) {
    const uint32_t cp = (uint32_t(c & 0x0F) << 12) | (uint32_t(p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F);
    i += 3;
    return cp;
  }
  const uint32_t cp = (uint32_t(c & 0x07) << 18) | (uint32_t(p[i + 1] & 0x3F) << 12) |
                      (uint32_t(p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
  i += 4;
  return cp;
}

inline size_t cp_len(uint8_t lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// Valid UTF-8 with each maximal invalid subpart replaced by U+FFFD (text::replace_invalid_utf8).
// Returns false (and leaves `out` alone) when `in` is already valid.
bool make_valid_utf8(std::string_view in, std::string& out) {
  std::string fixed = replace_invalid_utf8(in);
  if (fixed == in) return false;
  out = std::move(fixed);
  return true;
}

inline uint8_t flags_of(uint32_t cp) { return un::kStage2[size_t(un::kStage1[cp >> 8]) * 256 + (cp & 255)]; }
inline bool is_space(uint32_t cp) { return flags_of(cp) & un::kSpace; }
inline bool is_word(uint32_t cp) { return flags_of(cp) & un::kWord; }
inline bool is_ascii_punct(uint32_t cp) {
  return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
         (cp >= 0x7B && cp <= 0x7E);
}
inline bool is_punct(uint32_t cp) { return is_ascii_punct(cp) || (flags_of(cp) & un::kPunct); }
inline bool is_numeric(uint32_t cp) { return flags_of(cp) & un::kNumeric; }

uint8_t ccc_of(uint32_t cp) {
  if (!(flags_of(cp) & un::kNormQc)) return 0;
  const uint32_t* end = un::kCcc + std::size(un::kCcc);
  const uint32_t* it = std::lower_bound(un::kCcc, end, cp << 8);
  return it != end && (*it >> 8) == cp ? uint8_t(*it & 255) : 0;
}

const un::Decomp* find_decomp(const un::Decomp* begin, size_t n, uint32_t cp) {
  const un::Decomp* end = begin + n;
  const un::Decomp* it = std::lower_bound(begin, end, cp, [](const un::Decomp& d, uint32_t c) { return d.cp < c; });
  return it != end && it->cp == cp ? it : nullptr;
}

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kSCount = kLCount * kVCount * kTCount;

void decompose_cp(uint32_t cp, bool compat, std::vector<uint32_t>& out) {
  if (!(flags_of(cp) & un::kNormQc)) {
    out.push_back(cp);
    return;
  }
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / (kVCount * kTCount));
    out.push_back(kVBase + (s % (kVCount * kTCount)) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  const un::Decomp* d = compat ? find_decomp(un::kCompatIndex, std::size(un::kCompatIndex), cp) : nullptr;
  if (!d) d = find_decomp(un::kCanonIndex, std::size(un::kCanonIndex), cp);
  if (!d) {
    out.push_back(cp);
    return;
  }
  // A full compatibility decomposition may hold Hangul syllables (e.g. U+3200 PARENTHESIZED HANGUL).
  for (size_t k = 0; k < d->length; ++k) {
    const uint32_t c = un::kDecompPool[d->offset + k];
    if (c >= kSBase && c < kSBase + kSCount) {
      decompose_cp(c, compat, out);
    } else {
      out.push_back(c);
    }
  }
}

uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const uint64_t key = (uint64_t(a) << 21) | b;
  const un::Compose* end = un::kCompose + std::size(un::kCompose);
  const un::Compose* it =
      std::lower_bound(un::kCompose, end, key, [](const un::Compose& c, uint64_t k) { return c.key < k; });
  return it != end && it->key == key ? it->composite : 0;
}

enum class Form { kNFC, kNFD, kNFKC, kNFKD };

// Unicode normalization (UAX #15): full decomposition, canonical ordering, then canonical composition
// for the C forms.
std::string unicode_normalize(std::string_view s, Form form) {
  bool needed = false;
  for (size_t i = 0; i < s.size() && !needed;) {
    if (uint8_t(s[i]) < 0x80) {
      ++i;
      continue;
    }
    needed = flags_of(next_cp(s, i)) & un::kNormQc;
  }
  if (!needed) return std::string(s);
  const bool compat = form == Form::kNFKC || form == Form::kNFKD;
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  for (size_t i = 0; i < s.size();) decompose_cp(next_cp(s, i), compat, cps);
  // Canonical ordering: a stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < cps.size();) {
    if (ccc_of(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && ccc_of(cps[j]) != 0) ++j;
    if (j - i > 1)
      std::stable_sort(cps.begin() + i, cps.begin() + j, [](uint32_t a, uint32_t b) { return ccc_of(a) < ccc_of(b); });
    i = j;
  }
  if (form == Form::kNFC || form == Form::kNFKC) {
    std::vector<uint32_t> out;
    out.reserve(cps.size());
    size_t starter = std::string::npos;
    uint8_t prev_ccc = 0;
    for (uint32_t c : cps) {
      const uint8_t cc = ccc_of(c);
      if (starter != std::string::npos) {
        const bool adjacent = out.size() - 1 == starter;
        if (adjacent || (prev_ccc != 0 && prev_ccc < cc)) {
          if (const uint32_t comp = compose_pair(out[starter], c)) {
            out[starter] = comp;
            continue;
          }
        }
      }
      if (cc == 0) starter = out.size();
      out.push_back(c);
      prev_ccc = cc;
    }
    cps.swap(out);
  }
  std::string res;
  res.reserve(s.size() + s.size() / 2);
  for (uint32_t c : cps) append_utf8(res, c);
  return res;
}

uint32_t lower_cp(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  const uint64_t* end = un::kLower + std::size(un::kLower);
  const uint64_t* it = std::lower_bound(un::kLower, end, uint64_t(cp) << 32);
  return it != end && (*it >> 32) == cp ? uint32_t(*it) : cp;
}

// Rust's char-by-char to_lowercase (no final-sigma rule).
std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = uint8_t(s[i]);
    if (c < 0x80) {
      out += char((c >= 'A' && c <= 'Z') ? c + 32 : c);
      ++i;
      continue;
    }
    const uint32_t cp = next_cp(s, i);
    if (cp == 0x130) {
      out += "i\xcc\x87";  // U+0130 -> "i" U+0307
    } else {
      append_utf8(out, lower_cp(cp));
    }
  }
  return out;
}

// Drops the code points whose flags have `mask` (after NFD when `nfd`).
std::string remove_flagged(std::string_view s, uint8_t mask) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const uint32_t cp = next_cp(s, i);
    if (!(flags_of(cp) & mask)) out.append(s.substr(start, i - start));
  }
  return out;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty() || s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    const size_t at = s.find(from, pos);
    if (at == std::string::npos) break;
    out.append(s, pos, at - pos);
    out.append(to);
    pos = at + from.size();
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

// Leading / trailing White_Space lengths in bytes.
size_t leading_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_space(next_cp(s, j))) break;
    i = j;
  }
  return i;
}
size_t trailing_space_start(std::string_view s) {
  size_t start = s.size();
  size_t i = s.size();
  while (i > 0) {
    size_t b = i - 1;
    while (b > 0 && (uint8_t(s[b]) & 0xC0) == 0x80) --b;
    size_t j = b;
    if (!is_space(next_cp(s, j))) break;
    start = b;
    i = b;
  }
  return start;
}

// ---------------------------------------------------------------------------------------------
// Errors while loading.

struct Loader {
  std::string source;
  [[noreturn]] void fail(const std::string& what) const {
    NABLA_CHECK(IOError, false, "HfTokenizer: ", source, ": ", what);
    throw IOError(what);  // not reached
  }
  void require(bool ok, const std::string& what) const {
    if (!ok) fail(what);
  }
  const json& field(const json& obj, const char* key, const std::string& where) const {
    auto it = obj.find(key);
    require(it != obj.end(), where + " has no \"" + key + "\"");
    return *it;
  }
  std::string str(const json& obj, const char* key, const std::string& where, const std::string& dflt = "") const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return dflt;
    require(it->is_string(), where + ": \"" + key + "\" must be a string");
    return it->get<std::string>();
  }
  bool boolean(const json& obj, const char* key, const std::string& where, bool dflt) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return dflt;
    require(it->is_boolean(), where + ": \"" + key + "\" must be true or false");
    return it->get<bool>();
  }
  int64_t integer(const json& obj, const char* key, const std::string& where, int64_t dflt, int64_t lo,
                  int64_t hi) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return dflt;
    require(it->is_number_integer(), where + ": \"" + key + "\" must be an integer");
    const int64_t v = it->get<int64_t>();
    require(v >= lo && v <= hi, where + ": \"" + key + "\" is " + std::to_string(v) + ", outside [" +
                                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
  }
  std::string type_of(const json& obj, const std::string& where) const {
    require(obj.is_object(), where + " must be an object");
    return str(obj, "type", where, "");
  }
  [[noreturn]] void unsupported(const std::string& where, const std::string& type, const char* supported) const {
    fail(where + " type \"" + type + "\" is not supported (supported: " + supported + ")");
  }
};

// One code point of a string field (Metaspace's replacement, Strip's content).
uint32_t single_char(const Loader& L, const std::string& s, const std::string& where) {
  size_t i = 0;
  L.require(!s.empty() && cp_len(uint8_t(s[0])) == s.size(), where + " must be one character, got \"" + s + "\"");
  return next_cp(s, i);
}

// A "pattern": {"String": "..."} or {"Regex": "..."}; a regex is accepted when it has no metacharacter
// (then it is a string).
std::string string_pattern(const Loader& L, const json& p, const std::string& where) {
  L.require(p.is_object(), where + ": \"pattern\" must be an object");
  if (auto it = p.find("String"); it != p.end() && it->is_string()) return it->get<std::string>();
  if (auto it = p.find("Regex"); it != p.end() && it->is_string()) {
    const std::string r = it->get<std::string>();
    L.require(r.find_first_of("\\^$.|?*+()[]{}") == std::string::npos,
              where + ": regex pattern \"" + r + "\" is not supported (only string patterns)");
    return r;
  }
  L.fail(where + ": \"pattern\" must hold \"String\" or \"Regex\"");
}

// ---------------------------------------------------------------------------------------------
// Normalizers.

struct Normalizer {
  virtual ~Normalizer() = default;
  virtual void apply(std::string& s) const = 0;
};
using NormalizerPtr = std::unique_ptr<Normalizer>;

struct BertNormalizer final : Normalizer {
  bool clean_text = true, chinese = true, strip_accents = true, lower = true;
  static bool is_chinese(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
  }
  void apply(std::string& s) const override {
    if (clean_text || chinese) {
      std::string out;
      out.reserve(s.size() + 8);
      for (size_t i = 0; i < s.size();) {
        const size_t start = i;
        const uint32_t cp = next_cp(s, i);
        if (clean_text) {
          const bool tab_nl = cp == '\t' || cp == '\n' || cp == '\r';
          if (cp == 0 || cp == 0xFFFD || (!tab_nl && (flags_of(cp) & un::kOther))) continue;
          if (tab_nl || is_space(cp)) {
            out += ' ';
            continue;
          }
        }
        if (chinese && cp >= 0x3400 && is_chinese(cp)) {
          out += ' ';
          out.append(s, start, i - start);
          out += ' ';
          continue;
        }
        out.append(s, start, i - start);
      }
      s.swap(out);
    }
    if (strip_accents) s = remove_flagged(unicode_normalize(s, Form::kNFD), un::kMn);
    if (lower) s = lowercase(s);
  }
};

struct LowercaseNormalizer final : Normalizer {
  void apply(std::string& s) const override { s = lowercase(s); }
};
struct StripAccentsNormalizer final : Normalizer {
  void apply(std::string& s) const override { s = remove_flagged(s, un::kMark); }
};
struct UnicodeNormalizer final : Normalizer {
  Form form;
  explicit UnicodeNormalizer(Form f) : form(f) {}
  void apply(std::string& s) const override { s = unicode_normalize(s, form); }
};
struct StripNormalizer final : Normalizer {
  bool left = true, right = true;
  void apply(std::string& s) const override {
    if (right) s.resize(trailing_space_start(s));
    if (left) s.erase(0, leading_space(s));
  }
};
struct ReplaceNormalizer final : Normalizer {
  std::string pattern, content;
  void apply(std::string& s) const override { replace_all(s, pattern, content); }
};
struct PrependNormalizer final : Normalizer {
  std::string prepend;
  void apply(std::string& s) const override {
    if (!s.empty()) s.insert(0, prepend);
  }
};
struct SequenceNormalizer final : Normalizer {
  std::vector<NormalizerPtr> parts;
  void apply(std::string& s) const override {
    for (const auto& n : parts) n->apply(s);
  }
};

NormalizerPtr parse_normalizer(const Loader& L, const json& j, int depth) {
  if (j.is_null()) return nullptr;
  const std::string where = "normalizer";
  L.require(depth <= kMaxComponentDepth,
            "normalizer Sequence nested deeper than " + std::to_string(kMaxComponentDepth) + " levels");
  const std::string type = L.type_of(j, where);
  if (type == "BertNormalizer") {
    auto n = std::make_unique<BertNormalizer>();
    n->clean_text = L.boolean(j, "clean_text", where, true);
    n->chinese = L.boolean(j, "handle_chinese_chars", where, true);
    n->lower = L.boolean(j, "lowercase", where, true);
    n->strip_accents = L.boolean(j, "strip_accents", where, n->lower);  // null: follow lowercase
    return n;
  }
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(Form::kNFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(Form::kNFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(Form::kNFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(Form::kNFKD);
  if (type == "Strip") {
    auto n = std::make_unique<StripNormalizer>();
    n->left = L.boolean(j, "strip_left", where, true);
    n->right = L.boolean(j, "strip_right", where, true);
    return n;
  }
  if (type == "Replace") {
    auto n = std::make_unique<ReplaceNormalizer>();
    n->pattern = string_pattern(L, L.field(j, "pattern", where), "normalizer Replace");
    L.require(!n->pattern.empty(), "normalizer Replace: empty pattern");
    n->content = L.str(j, "content", where);
    return n;
  }
  if (type == "Prepend") {
    auto n = std::make_unique<PrependNormalizer>();
    n->prepend = L.str(j, "prepend", where);
    return n;
  }
  if (type == "Sequence") {
    auto n = std::make_unique<SequenceNormalizer>();
    const json& list = L.field(j, "normalizers", where);
    L.require(list.is_array(), "normalizer Sequence: \"normalizers\" must be an array");
    for (const json& x : list)
      if (auto p = parse_normalizer(L, x, depth + 1)) n->parts.push_back(std::move(p));
    return n;
  }
  L.unsupported(where, type,
                "BertNormalizer, Lowercase, StripAccents, NFC, NFD, NFKC, NFKD, Strip, Replace, Prepend, Sequence");
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers: each maps the list of pieces to a new list (empty pieces are dropped).

struct Piece {
  std::string text;
  bool first = false;  // starts at offset 0 of the original text (Metaspace's prepend_scheme "first")
};

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const Loader& L, const json& j, const std::string& where, Behavior dflt) {
  const std::string b = L.str(j, "behavior", where, "");
  if (b.empty()) return dflt;
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  L.fail(where + ": unknown behavior \"" + b + "\"");
}

// Splits `p` around the delimiter `matches` (ordered, non-overlapping byte ranges) as Rust's
// NormalizedString::split does for `behavior`, appending the non-empty parts to `out`.
void split_by(const Piece& p, const std::vector<std::pair<size_t, size_t>>& matches, Behavior behavior,
              std::vector<Piece>& out) {
  struct Seg {
    size_t begin, end;
    bool match;
  };
  std::vector<Seg> segs;
  segs.reserve(2 * matches.size() + 1);
  size_t pos = 0;
  for (auto [b, e] : matches) {
    if (b > pos) segs.push_back({pos, b, false});
    if (e > b) segs.push_back({b, e, true});
    pos = e;
  }
  if (pos < p.text.size()) segs.push_back({pos, p.text.size(), false});
  std::vector<Seg> res;
  res.reserve(segs.size());
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Seg& s : segs)
        if (!s.match) res.push_back(s);
      break;
    case Behavior::kIsolated: res = segs; break;
    case Behavior::kContiguous: {
      bool prev = false;
      for (const Seg& s : segs) {
        if (!res.empty() && s.match == prev) {
          res.back().end = s.end;
        } else {
          res.push_back(s);
        }
        prev = s.match;
      }
      break;
    }
    case Behavior::kMergedWithPrevious: {
      bool prev = false;
      for (const Seg& s : segs) {
        if (s.match && !prev && !res.empty()) {
          res.back().end = s.end;
        } else {
          res.push_back(s);
        }
        prev = s.match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool prev = false;
      for (size_t k = segs.size(); k-- > 0;) {
        const Seg& s = segs[k];
        if (s.match && !prev && !res.empty()) {
          res.back().begin = s.begin;
        } else {
          res.push_back(s);
        }
        prev = s.match;
      }
      std::reverse(res.begin(), res.end());
      break;
    }
  }
  for (const Seg& s : res) {
    if (s.end > s.begin) out.push_back({p.text.substr(s.begin, s.end - s.begin), p.first && s.begin == 0});
  }
}

// Each code point for which pred holds is one delimiter.
template <class Pred>
void split_chars(const Piece& p, Pred pred, Behavior behavior, std::vector<Piece>& out) {
  std::vector<std::pair<size_t, size_t>> m;
  const std::string& s = p.text;
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    if (pred(next_cp(s, i))) m.emplace_back(start, i);
  }
  split_by(p, m, behavior, out);
}

struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  virtual void split(std::vector<Piece>& pieces) const = 0;
};
using PreTokenizerPtr = std::unique_ptr<PreTokenizer>;

const std::array<std::string, 256>& byte_chars() {
  static const std::array<std::string, 256> t = [] {
    std::array<std::string, 256> a;
    for (int b = 0; b < 256; ++b) a[size_t(b)] = BytePairTokenizer::byte_to_unicode(uint8_t(b));
    return a;
  }();
  return t;
}

struct ByteLevelPre final : PreTokenizer {
  bool add_prefix_space = true, use_regex = true;
  void split(std::vector<Piece>& pieces) const override {
    const auto& bc = byte_chars();
    std::vector<Piece> out;
    out.reserve(pieces.size() * 2);
    std::string buf;
    for (Piece& p : pieces) {
      if (add_prefix_space && !p.text.empty() && p.text[0] != ' ') p.text.insert(0, 1, ' ');
      auto emit = [&](std::string_view part, bool first) {
        buf.clear();
        for (unsigned char c : part) buf += bc[c];
        out.push_back({buf, first});
      };
      if (use_regex) {
        bool first = p.first;
        for (std::string_view part : text::pre_tokenize(p.text, Pattern::kGpt2)) {
          emit(part, first);
          first = false;
        }
      } else if (!p.text.empty()) {
        emit(p.text, p.first);
      }
    }
    pieces.swap(out);
  }
};

// Whitespace: \w+|[^\w\s]+ (Rust's regex: Unicode \w and \s).
struct WhitespacePre final : PreTokenizer {
  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const Piece& p : pieces) {
      const std::string& s = p.text;
      size_t i = 0;
      int run = -1;  // 0 word, 1 other
      size_t run_start = 0;
      auto flush = [&](size_t end) {
        if (run >= 0 && end > run_start) out.push_back({s.substr(run_start, end - run_start), p.first && !run_start});
        run = -1;
      };
      while (i < s.size()) {
        const size_t start = i;
        const uint32_t cp = next_cp(s, i);
        const int cls = is_word(cp) ? 0 : is_space(cp) ? 2 : 1;
        if (cls == 2) {
          flush(start);
        } else if (cls != run) {
          flush(start);
          run = cls;
          run_start = start;
        }
      }
      flush(s.size());
    }
    pieces.swap(out);
  }
};

struct WhitespaceSplitPre final : PreTokenizer {
  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const Piece& p : pieces) split_chars(p, is_space, Behavior::kRemoved, out);
    pieces.swap(out);
  }
};

struct BertPre final : PreTokenizer {
  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> mid, out;
    for (const Piece& p : pieces) split_chars(p, is_space, Behavior::kRemoved, mid);
    for (const Piece& p : mid) split_chars(p, is_punct, Behavior::kIsolated, out);
    pieces.swap(out);
  }
};

struct PunctuationPre final : PreTokenizer {
  Behavior behavior = Behavior::kIsolated;
  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const Piece& p : pieces) split_chars(p, is_punct, behavior, out);
    pieces.swap(out);
  }
};

struct DigitsPre final : PreTokenizer {
  bool individual = false;
  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const Piece& p : pieces)
      split_chars(p, is_numeric, individual ? Behavior::kIsolated : Behavior::kContiguous, out);
    pieces.swap(out);
  }
};

enum class Prepend { kAlways, kFirst, kNever };

struct MetaspacePre final : PreTokenizer {
  std::string replacement = "\xe2\x96\x81";  // U+2581
  Prepend prepend = Prepend::kAlways;
  bool split_words = true;
  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (Piece& p : pieces) {
      replace_all(p.text, " ", replacement);
      if (!p.text.empty() && !p.text.starts_with(replacement) &&
          (prepend == Prepend::kAlways || (prepend == Prepend::kFirst && p.first)))
        p.text.insert(0, replacement);
      if (!split_words) {
        if (!p.text.empty()) out.push_back(std::move(p));
        continue;
      }
      std::vector<std::pair<size_t, size_t>> m;
      for (size_t at = p.text.find(replacement); at != std::string::npos;
           at = p.text.find(replacement, at + replacement.size()))
        m.emplace_back(at, at + replacement.size());
      split_by(p, m, Behavior::kMergedWithNext, out);
    }
    pieces.swap(out);
  }
};

constexpr std::string_view kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kCl100kRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct SplitPre final : PreTokenizer {
  std::string pattern;           // a string pattern, or
  std::optional<Pattern> regex;  // one of the hand-written regexes
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    std::vector<std::pair<size_t, size_t>> m;
    for (const Piece& p : pieces) {
      m.clear();
      if (regex) {
        // These patterns match every character, so the matches cover the piece.
        size_t pos = 0;
        for (std::string_view part : text::pre_tokenize(p.text, *regex)) {
          m.emplace_back(pos, pos + part.size());
          pos += part.size();
        }
      } else {
        for (size_t at = p.text.find(pattern); at != std::string::npos; at = p.text.find(pattern, at + pattern.size()))
          m.emplace_back(at, at + pattern.size());
      }
      if (invert) {  // the matches are the pieces: the gaps between them are the delimiters
        std::vector<std::pair<size_t, size_t>> gaps;
        size_t pos = 0;
        for (auto [b, e] : m) {
          if (b > pos) gaps.emplace_back(pos, b);
          pos = e;
        }
        if (pos < p.text.size()) gaps.emplace_back(pos, p.text.size());
        m.swap(gaps);
      }
      split_by(p, m, behavior, out);
    }
    pieces.swap(out);
  }
};

struct SequencePre final : PreTokenizer {
  std::vector<PreTokenizerPtr> parts;
  void split(std::vector<Piece>& pieces) const override {
    for (const auto& p : parts) p->split(pieces);
  }
};

Prepend parse_prepend(const Loader& L, const json& j, const std::string& where) {
  Prepend scheme = Prepend::kAlways;
  const std::string s = L.str(j, "prepend_scheme", where, "");
  if (s == "first") {
    scheme = Prepend::kFirst;
  } else if (s == "never") {
    scheme = Prepend::kNever;
  } else {
    L.require(s.empty() || s == "always", where + ": unknown prepend_scheme \"" + s + "\"");
  }
  auto aps = j.find("add_prefix_space");
  if (aps != j.end() && aps->is_boolean() && !aps->get<bool>()) {
    L.require(s.empty() || scheme == Prepend::kNever, where + ": add_prefix_space false contradicts prepend_scheme");
    scheme = Prepend::kNever;
  }
  return scheme;
}

PreTokenizerPtr parse_pre_tokenizer(const Loader& L, const json& j, int depth) {
  if (j.is_null()) return nullptr;
  const std::string where = "pre_tokenizer";
  L.require(depth <= kMaxComponentDepth,
            "pre_tokenizer Sequence nested deeper than " + std::to_string(kMaxComponentDepth) + " levels");
  const std::string type = L.type_of(j, where);
  if (type == "ByteLevel") {
    auto p = std::make_unique<ByteLevelPre>();
    p->add_prefix_space = L.boolean(j, "add_prefix_space", where, true);
    p->use_regex = L.boolean(j, "use_regex", where, true);
    return p;
  }
  if (type == "Whitespace") return std::make_unique<WhitespacePre>();
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplitPre>();
  if (type == "BertPreTokenizer") return std::make_unique<BertPre>();
  if (type == "Punctuation") {
    auto p = std::make_unique<PunctuationPre>();
    p->behavior = parse_behavior(L, j, "pre_tokenizer Punctuation", Behavior::kIsolated);
    return p;
  }
  if (type == "Digits") {
    auto p = std::make_unique<DigitsPre>();
    p->individual = L.boolean(j, "individual_digits", where, false);
    return p;
  }
  if (type == "Metaspace") {
    auto p = std::make_unique<MetaspacePre>();
    p->replacement = L.str(j, "replacement", where, p->replacement);
    single_char(L, p->replacement, "pre_tokenizer Metaspace: \"replacement\"");
    p->prepend = parse_prepend(L, j, "pre_tokenizer Metaspace");
    p->split_words = L.boolean(j, "split", where, true);
    return p;
  }
  if (type == "Split") {
    auto p = std::make_unique<SplitPre>();
    const json& pat = L.field(j, "pattern", where);
    L.require(pat.is_object(), "pre_tokenizer Split: \"pattern\" must be an object");
    if (auto r = pat.find("Regex"); r != pat.end() && r->is_string()) {
      const std::string re = r->get<std::string>();
      if (re == kGpt2Regex) {
        p->regex = Pattern::kGpt2;
      } else if (re == kCl100kRegex) {
        p->regex = Pattern::kCl100k;
      } else {
        p->pattern = string_pattern(L, pat, "pre_tokenizer Split");
      }
    } else {
      p->pattern = string_pattern(L, pat, "pre_tokenizer Split");
    }
    L.require(p->regex || !p->pattern.empty(), "pre_tokenizer Split: empty pattern");
    p->behavior = parse_behavior(L, j, "pre_tokenizer Split", Behavior::kIsolated);
    p->invert = L.boolean(j, "invert", where, false);
    return p;
  }
  if (type == "Sequence") {
    auto p = std::make_unique<SequencePre>();
    const json& list = L.field(j, "pretokenizers", where);
    L.require(list.is_array(), "pre_tokenizer Sequence: \"pretokenizers\" must be an array");
    for (const json& x : list)
      if (auto q = parse_pre_tokenizer(L, x, depth + 1)) p->parts.push_back(std::move(q));
    return p;
  }
  L.unsupported(where, type,
                "ByteLevel, Whitespace, WhitespaceSplit, BertPreTokenizer, Punctuation, Digits, Metaspace, Split, "
                "Sequence");
}

// ---------------------------------------------------------------------------------------------
// Vocabulary: token string <-> id, with string_view lookups.

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

inline int32_t find_id(const TokenMap& m, std::string_view s) {
  auto it = m.find(s);
  return it == m.end() ? -1 : it->second;
}

// ---------------------------------------------------------------------------------------------
// Models.

struct Model {
  TokenMap vocab;
  virtual ~Model() = default;
  virtual void tokenize(std::string_view word, std::vector<int32_t>& out) const = 0;
};

// The pair map of BPE: (left id, right id) -> (rank, merged id).
struct MergeMap {
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> map;
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  const std::pair<int32_t, int32_t>* find(int32_t a, int32_t b) const {
    auto it = map.find(key(a, b));
    return it == map.end() ? nullptr : &it->second;
  }
};

using detail::kNoRank;

struct BpeModel final : Model {
  MergeMap merges;
  int32_t unk_id = -1;
  std::string prefix, suffix;  // continuing_subword_prefix, end_of_word_suffix
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  std::array<int32_t, 256> byte_ids{};  // "<0xAB>" ids for byte_fallback (-1 where missing)

  int32_t rank(int32_t a, int32_t b) const {
    const auto* r = merges.find(a, b);
    return r ? r->first : kNoRank;
  }

  void tokenize(std::string_view w, std::vector<int32_t>& out) const override {
    if (w.empty()) return;
    if (ignore_merges) {
      if (int32_t id = find_id(vocab, w); id >= 0) {
        out.push_back(id);
        return;
      }
    }
    // The symbols of the word: one per character (with the prefix / suffix), unknown ones as
    // byte-fallback tokens or unk (fused when fuse_unk), as Rust's BPE::merge_word.
    std::vector<int32_t> sym;
    sym.reserve(w.size());
    std::string buf;
    bool pending_unk = false;
    for (size_t i = 0; i < w.size();) {
      const size_t start = i;
      i += cp_len(uint8_t(w[i]));
      i = std::min(i, w.size());
      std::string_view ch = w.substr(start, i - start);
      int32_t id;
      if (prefix.empty() && suffix.empty()) {
        id = find_id(vocab, ch);
      } else {
        buf.clear();
        if (start > 0) buf += prefix;
        buf += ch;
        if (i == w.size()) buf += suffix;
        id = find_id(vocab, buf);
      }
      if (id >= 0) {
        if (pending_unk) sym.push_back(unk_id);
        pending_unk = false;
        sym.push_back(id);
        continue;
      }
      if (byte_fallback) {
        std::string_view s = (prefix.empty() && suffix.empty()) ? ch : std::string_view(buf);
        bool all = true;
        for (unsigned char c : s) all = all && byte_ids[c] >= 0;
        if (all) {
          // Rust keeps a pending unk across byte tokens and emits it later; keep that order.
          for (unsigned char c : s) sym.push_back(byte_ids[c]);
          continue;
        }
      }
      if (unk_id >= 0) {
        if (pending_unk && !fuse_unk) sym.push_back(unk_id);
        pending_unk = true;
      }
    }
    if (pending_unk) sym.push_back(unk_id);
    merge(sym);
    out.insert(out.end(), sym.begin(), sym.end());
  }

  // Repeatedly merges the adjacent pair of lowest rank (leftmost on ties): text/bpe_merge.h.
  void merge(std::vector<int32_t>& s) const {
    s.resize(detail::merge_pairs(
        s.data(), s.size(), [this](int32_t a, int32_t b) { return rank(a, b); },
        [this](int32_t, int32_t a, int32_t b) { return merges.find(a, b)->second; }));
  }
};

struct WordPieceModel final : Model {
  int32_t unk_id = -1;
  std::string unk_token = "[UNK]";
  std::string prefix = "##";
  int64_t max_chars = 100;

  int32_t unk() const {
    NABLA_CHECK(ValueError, unk_id >= 0, "HfTokenizer: WordPiece: the unk_token '", unk_token,
                "' is not in the vocabulary, and a word needs it");
    return unk_id;
  }

  void tokenize(std::string_view w, std::vector<int32_t>& out) const override {
    if (w.empty()) return;
    size_t chars = 0;
    for (unsigned char c : w) chars += (c & 0xC0) != 0x80;
    if (int64_t(chars) > max_chars) {
      out.push_back(unk());
      return;
    }
    const size_t mark = out.size();
    std::string buf;
    size_t start = 0;
    while (start < w.size()) {
      size_t end = w.size();
      int32_t found = -1;
      while (start < end) {
        std::string_view sub = w.substr(start, end - start);
        if (start > 0) {
          buf.assign(prefix);
          buf += sub;
          found = find_id(vocab, buf);
        } else {
          found = find_id(vocab, sub);
        }
        if (found >= 0) break;
        --end;
        while (end > start && (uint8_t(w[end]) & 0xC0) == 0x80) --end;  // back one character
      }
      if (found < 0) {
        out.resize(mark);
        out.push_back(unk());
        return;
      }
      out.push_back(found);
      start = end;
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Added tokens: a byte trie with leftmost-longest, non-overlapping matches.

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

class Trie {
 public:
  void add(std::string_view s, int32_t value) {
    if (s.empty()) return;
    first_[uint8_t(s[0])] = 1;
    int32_t node = 0;
    for (unsigned char c : s) {
      auto& kids = nodes_[size_t(node)].kids;
      auto it = std::lower_bound(kids.begin(), kids.end(), c, [](const auto& k, uint8_t v) { return k.first < v; });
      if (it != kids.end() && it->first == c) {
        node = it->second;
      } else {
        const int32_t nn = int32_t(nodes_.size());
        kids.insert(it, {c, nn});
        nodes_.push_back({});
        node = nn;
      }
    }
    if (nodes_[size_t(node)].value < 0) nodes_[size_t(node)].value = value;
  }
  bool empty() const { return nodes_.size() == 1; }
  // The longest pattern starting at s[i]: (end, value) or (i, -1).
  std::pair<size_t, int32_t> longest(std::string_view s, size_t i) const {
    std::pair<size_t, int32_t> best{i, -1};
    if (!first_[uint8_t(s[i])]) return best;
    int32_t node = 0;
    for (size_t k = i; k < s.size(); ++k) {
      const auto& kids = nodes_[size_t(node)].kids;
      const uint8_t c = uint8_t(s[k]);
      auto it = std::lower_bound(kids.begin(), kids.end(), c, [](const auto& kk, uint8_t v) { return kk.first < v; });
      if (it == kids.end() || it->first != c) break;
      node = it->second;
      if (nodes_[size_t(node)].value >= 0) best = {k + 1, nodes_[size_t(node)].value};
    }
    return best;
  }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> kids;
    int32_t value = -1;
  };
  std::vector<Node> nodes_ = std::vector<Node>(1);
  std::array<uint8_t, 256> first_{};
};

// ---------------------------------------------------------------------------------------------
// Post-processors: they wrap the sequences' ids with special tokens and set the type ids.

struct Seq {
  std::vector<int32_t> ids, type_ids;
  std::vector<uint8_t> special;
  void add(const std::vector<int32_t>& v, int32_t type_id, uint8_t is_special) {
    ids.insert(ids.end(), v.begin(), v.end());
    type_ids.insert(type_ids.end(), v.size(), type_id);
    special.insert(special.end(), v.size(), is_special);
  }
};

struct PostProcessor {
  virtual ~PostProcessor() = default;
  // b == nullptr for a single sequence.
  virtual Seq process(const std::vector<int32_t>& a, const std::vector<int32_t>* b, bool add_special) const = 0;
};
using PostProcessorPtr = std::unique_ptr<PostProcessor>;

Seq default_process(const std::vector<int32_t>& a, const std::vector<int32_t>* b) {
  Seq s;
  s.add(a, 0, 0);
  if (b) s.add(*b, 1, 0);
  return s;
}

struct TemplateProcessor final : PostProcessor {
  struct Item {
    bool is_sequence;
    int which;                 // 0 for $A, 1 for $B
    std::vector<int32_t> ids;  // the special token's ids
    int32_t type_id;
  };
  std::vector<Item> single, pair;
  Seq process(const std::vector<int32_t>& a, const std::vector<int32_t>* b, bool add_special) const override {
    NABLA_CHECK(ValueError, !b || !pair.empty(), "HfTokenizer::encode_pair: the TemplateProcessing post-processor ",
                "has no pair template");
    Seq s;
    for (const Item& it : b ? pair : single) {
      if (it.is_sequence) {
        s.add(it.which == 0 ? a : *b, it.type_id, 0);
      } else if (add_special) {
        s.add(it.ids, it.type_id, 1);
      }
    }
    return s;
  }
};

struct BertProcessor final : PostProcessor {
  int32_t cls = -1, sep = -1;
  bool roberta = false;
  Seq process(const std::vector<int32_t>& a, const std::vector<int32_t>* b, bool add_special) const override {
    const int32_t pair_type = roberta ? 0 : 1;  // RoBERTa: every type id is 0
    Seq s;
    if (!add_special) {
      s.add(a, 0, 0);
      if (b) s.add(*b, pair_type, 0);
      return s;
    }
    s.add({cls}, 0, 1);
    s.add(a, 0, 0);
    s.add({sep}, 0, 1);
    if (b) {
      if (roberta) s.add({sep}, 0, 1);
      s.add(*b, pair_type, 0);
      s.add({sep}, pair_type, 1);
    }
    return s;
  }
};

// ---------------------------------------------------------------------------------------------
// Decoders: each maps the list of token strings to a new list; decode concatenates the last one.

struct Decoder {
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};
using DecoderPtr = std::unique_ptr<Decoder>;

std::string lossy_utf8(std::string s) {
  std::string fixed;
  return make_valid_utf8(s, fixed) ? fixed : s;
}

struct ByteLevelDecoder final : Decoder {
  void decode_chain(std::vector<std::string>& tokens) const override {
    static const std::unordered_map<uint32_t, uint8_t> to_byte = [] {
      std::unordered_map<uint32_t, uint8_t> m;
      for (int b = 0; b < 256; ++b) {
        size_t i = 0;
        m[next_cp(byte_chars()[size_t(b)], i)] = uint8_t(b);
      }
      return m;
    }();
    std::string bytes, tok;
    for (const std::string& t : tokens) {
      tok.clear();
      bool all = true;
      for (size_t i = 0; i < t.size() && all;) {
        auto it = to_byte.find(next_cp(t, i));
        if (it == to_byte.end()) {
          all = false;
        } else {
          tok += char(it->second);
        }
      }
      bytes += all ? tok : t;
    }
    tokens.assign(1, lossy_utf8(std::move(bytes)));
  }
};

std::string cleanup_tokenization(std::string s) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},   {" ?", "?"},           {" !", "!"},   {" ,", ","},     {" ' ", "'"},   {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (auto [from, to] : kRules) replace_all(s, from, to);
  return s;
}

struct WordPieceDecoder final : Decoder {
  std::string prefix = "##";
  bool cleanup = true;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (t.starts_with(prefix)) {
          t.erase(0, prefix.size());
        } else {
          t.insert(0, 1, ' ');
        }
      }
      if (cleanup) t = cleanup_tokenization(std::move(t));
    }
  }
};

struct MetaspaceDecoder final : Decoder {
  std::string replacement = "\xe2\x96\x81";
  Prepend prepend = Prepend::kAlways;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i)
      replace_all(tokens[i], replacement, i == 0 && prepend != Prepend::kNever ? "" : " ");
  }
};

struct BpeDecoder final : Decoder {
  std::string suffix = "</w>";
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) replace_all(tokens[i], suffix, i + 1 == tokens.size() ? "" : " ");
  }
};

struct ReplaceDecoder final : Decoder {
  std::string pattern, content;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) replace_all(t, pattern, content);
  }
};

struct StripDecoder final : Decoder {
  uint32_t content = ' ';
  size_t start = 0, stop = 0;
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<uint32_t> cps;
    for (std::string& t : tokens) {
      cps.clear();
      for (size_t i = 0; i < t.size();) cps.push_back(next_cp(t, i));
      size_t b = 0, e = cps.size();
      for (size_t i = 0; i < start && i < cps.size() && cps[i] == content; ++i) b = i + 1;
      for (size_t i = 0; i < stop && i < cps.size(); ++i) {
        const size_t at = cps.size() - i - 1;
        if (cps[at] != content) break;
        e = at;
      }
      std::string out;
      for (size_t i = b; i < e; ++i) append_utf8(out, cps[i]);
      t.swap(out);
    }
  }
};

struct FuseDecoder final : Decoder {
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

struct ByteFallbackDecoder final : Decoder {
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      std::string fixed;
      if (make_valid_utf8(bytes, fixed)) {
        for (size_t k = 0; k < bytes.size(); ++k) out.emplace_back("\xef\xbf\xbd");  // one U+FFFD per byte
      } else {
        out.push_back(bytes);
      }
      bytes.clear();
    };
    for (std::string& t : tokens) {
      if (t.size() == 6 && t.starts_with("<0x") && t.back() == '>' && hex(t[3]) >= 0 && hex(t[4]) >= 0) {
        bytes += char(hex(t[3]) * 16 + hex(t[4]));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens.swap(out);
  }
};

struct SequenceDecoder final : Decoder {
  std::vector<DecoderPtr> parts;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : parts) d->decode_chain(tokens);
  }
};

DecoderPtr parse_decoder(const Loader& L, const json& j, int depth) {
  if (j.is_null()) return nullptr;
  const std::string where = "decoder";
  L.require(depth <= kMaxComponentDepth,
            "decoder Sequence nested deeper than " + std::to_string(kMaxComponentDepth) + " levels");
  const std::string type = L.type_of(j, where);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "WordPiece") {
    auto d = std::make_unique<WordPieceDecoder>();
    d->prefix = L.str(j, "prefix", where, "##");
    d->cleanup = L.boolean(j, "cleanup", where, true);
    return d;
  }
  if (type == "Metaspace") {
    auto d = std::make_unique<MetaspaceDecoder>();
    d->replacement = L.str(j, "replacement", where, d->replacement);
    single_char(L, d->replacement, "decoder Metaspace: \"replacement\"");
    d->prepend = parse_prepend(L, j, "decoder Metaspace");
    return d;
  }
  if (type == "BPEDecoder") {
    auto d = std::make_unique<BpeDecoder>();
    d->suffix = L.str(j, "suffix", where, "</w>");
    return d;
  }
  if (type == "Replace") {
    auto d = std::make_unique<ReplaceDecoder>();
    d->pattern = string_pattern(L, L.field(j, "pattern", where), "decoder Replace");
    L.require(!d->pattern.empty(), "decoder Replace: empty pattern");
    d->content = L.str(j, "content", where);
    return d;
  }
  if (type == "Strip") {
    auto d = std::make_unique<StripDecoder>();
    d->content = single_char(L, L.str(j, "content", where, " "), "decoder Strip: \"content\"");
    d->start = size_t(L.integer(j, "start", where, 0, 0, 1 << 20));
    d->stop = size_t(L.integer(j, "stop", where, 0, 0, 1 << 20));
    return d;
  }
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Sequence") {
    auto d = std::make_unique<SequenceDecoder>();
    const json& list = L.field(j, "decoders", where);
    L.require(list.is_array(), "decoder Sequence: \"decoders\" must be an array");
    for (const json& x : list)
      if (auto q = parse_decoder(L, x, depth + 1)) d->parts.push_back(std::move(q));
    return d;
  }
  L.unsupported(where, type,
                "ByteLevel, WordPiece, Metaspace, BPEDecoder, Replace, Strip, Fuse, ByteFallback, Sequence");
}

// The deepest nesting of objects and arrays in a JSON text (strings skipped), to refuse hostile
// files before the parser recurses into them.
int json_depth(std::string_view s) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > kMaxJsonDepth) return max_depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct HfTokenizer::Impl {
  std::string source;
  NormalizerPtr normalizer;
  PreTokenizerPtr pre_tokenizer;
  std::unique_ptr<Model> model;
  PostProcessorPtr post_processor;
  DecoderPtr decoder;
  std::vector<AddedToken> added;   // in file order
  TokenMap added_ids;              // content -> id
  Trie raw_trie, normalized_trie;  // values index `added`
  std::vector<std::string> id_to_token;
  std::vector<uint8_t> id_valid, id_special;

  void normalize(std::string& s) const {
    if (normalizer) normalizer->apply(s);
  }

  // Leftmost-longest matches of `trie` in `s`, as Rust's AddedVocabulary::find_matches: appends
  // (text, -1) sections and (content, added index) tokens to `out`.
  void split_added(const Trie& trie, std::string_view s, bool first,
                   std::vector<std::pair<Piece, int32_t>>& out) const {
    if (trie.empty()) {
      out.push_back({{std::string(s), first}, -1});
      return;
    }
    size_t start_offset = 0;
    size_t i = 0;
    while (i < s.size()) {
      auto [end, k] = trie.longest(s, i);
      if (k < 0) {
        ++i;
        continue;
      }
      const AddedToken& t = added[size_t(k)];
      size_t start = i, stop = end;
      i = end;  // the search resumes after the match, kept or not
      if (t.single_word) {
        bool before_word = false, after_word = false;
        if (start > 0) {
          size_t b = start - 1;
          while (b > 0 && (uint8_t(s[b]) & 0xC0) == 0x80) --b;
          size_t q = b;
          before_word = is_word(next_cp(s, q));
        }
        if (stop < s.size()) {
          size_t q = stop;
          after_word = is_word(next_cp(s, q));
        }
        if (before_word || after_word) continue;
      }
      if (t.lstrip) start = std::max(trailing_space_start(s.substr(0, start)), start_offset);
      if (t.rstrip) {
        stop += leading_space(s.substr(stop));
        i = stop;
      }
      if (start_offset < start)
        out.push_back({{std::string(s.substr(start_offset, start - start_offset)), first && start_offset == 0}, -1});
      out.push_back({{std::string(), false}, k});
      start_offset = stop;
    }
    if (start_offset < s.size()) out.push_back({{std::string(s.substr(start_offset)), first && start_offset == 0}, -1});
  }

  std::vector<int32_t> encode_sequence(std::string_view text) const {
    std::string fixed;
    if (make_valid_utf8(text, fixed)) text = fixed;
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    std::vector<std::pair<Piece, int32_t>> sections, subs;
    split_added(raw_trie, text, true, sections);
    std::vector<Piece> pieces;
    for (auto& [sec, k] : sections) {
      if (k >= 0) {
        ids.push_back(added[size_t(k)].id);
        continue;
      }
      normalize(sec.text);
      subs.clear();
      split_added(normalized_trie, sec.text, sec.first, subs);
      for (auto& [sub, kk] : subs) {
        if (kk >= 0) {
          ids.push_back(added[size_t(kk)].id);
          continue;
        }
        if (sub.text.empty()) continue;
        pieces.clear();
        pieces.push_back(std::move(sub));
        if (pre_tokenizer) pre_tokenizer->split(pieces);
        for (const Piece& p : pieces) model->tokenize(p.text, ids);
      }
    }
    return ids;
  }

  Encoding finish(Seq s) const {
    Encoding e;
    e.ids = std::move(s.ids);
    e.type_ids = std::move(s.type_ids);
    e.special_mask = std::move(s.special);
    e.tokens.reserve(e.ids.size());
    for (int32_t id : e.ids) e.tokens.push_back(id_to_token[size_t(id)]);
    return e;
  }
};

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfTokenizer::HfTokenizer(HfTokenizer&&) noexcept = default;
HfTokenizer& HfTokenizer::operator=(HfTokenizer&&) noexcept = default;
HfTokenizer::~HfTokenizer() = default;

HfTokenizer HfTokenizer::from_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  NABLA_CHECK(IOError, f.good(), "HfTokenizer: cannot open '", path, "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  NABLA_CHECK(IOError, !f.bad(), "HfTokenizer: error reading '", path, "'");
  return from_string(ss.str(), path);
}

namespace {

// Reads the model block: the model, and the id table (token by id, valid, special) it starts.
struct IdTable {
  std::vector<std::string>& id_to_token;
  std::vector<uint8_t>& id_valid;
  std::vector<uint8_t>& id_special;
};
std::unique_ptr<Model> parse_model(const Loader& L, const json& j, IdTable impl, size_t n_added);

}  // namespace

HfTokenizer HfTokenizer::from_string(std::string_view text, const std::string& source) {
  Loader L{source};
  const int depth = json_depth(text);
  L.require(depth <= kMaxJsonDepth, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) { L.fail(std::string("invalid JSON: ") + e.what()); }
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  try {
    L.require(root.is_object(), "the top level must be an object");
    auto get = [&](const char* key) -> const json& {
      static const json null_value;
      auto it = root.find(key);
      return it == root.end() ? null_value : *it;
    };
    const json& added = get("added_tokens");
    L.require(added.is_null() || added.is_array(), "\"added_tokens\" must be an array");
    impl->normalizer = parse_normalizer(L, get("normalizer"), 0);
    impl->pre_tokenizer = parse_pre_tokenizer(L, get("pre_tokenizer"), 0);
    L.require(!get("model").is_null(), "no \"model\"");
    impl->model = parse_model(L, get("model"), {impl->id_to_token, impl->id_valid, impl->id_special},
                              added.is_array() ? added.size() : 0);
    impl->decoder = parse_decoder(L, get("decoder"), 0);

    // Added tokens: ids consistent with the model's vocabulary, then the two tries.
    if (added.is_array()) {
      for (const json& a : added) {
        const std::string where = "added token";
        L.require(a.is_object(), "each of \"added_tokens\" must be an object");
        AddedToken t;
        t.content = L.str(a, "content", where);
        const int64_t limit = int64_t(impl->id_to_token.size());
        t.id = int32_t(L.integer(a, "id", "added token \"" + t.content + "\"", -1, 0, limit - 1));
        L.require(t.id >= 0, "added token \"" + t.content + "\" has no \"id\"");
        t.single_word = L.boolean(a, "single_word", where, false);
        t.lstrip = L.boolean(a, "lstrip", where, false);
        t.rstrip = L.boolean(a, "rstrip", where, false);
        t.special = L.boolean(a, "special", where, false);
        t.normalized = L.boolean(a, "normalized", where, !t.special);
        const int32_t in_vocab = find_id(impl->model->vocab, t.content);
        L.require(in_vocab < 0 || in_vocab == t.id, "added token \"" + t.content + "\" has id " + std::to_string(t.id) +
                                                        " but the vocabulary gives it " + std::to_string(in_vocab));
        const size_t id = size_t(t.id);
        L.require(!impl->id_valid[id] || impl->id_to_token[id] == t.content,
                  "added token \"" + t.content + "\" has id " + std::to_string(t.id) + ", which is already \"" +
                      impl->id_to_token[id] + "\"");
        if (impl->added_ids.count(t.content)) continue;  // a repeated token: the first one counts
        impl->id_to_token[id] = t.content;
        impl->id_valid[id] = 1;
        impl->id_special[id] = t.special;
        impl->added_ids.emplace(t.content, t.id);
        impl->added.push_back(std::move(t));
      }
    }
    // The highest id is now known: trim the id table to it.
    size_t top = impl->id_valid.size();
    while (top > 0 && !impl->id_valid[top - 1]) --top;
    impl->id_to_token.resize(top);
    impl->id_valid.resize(top);
    impl->id_special.resize(top);
    for (size_t k = 0; k < impl->added.size(); ++k) {
      const AddedToken& t = impl->added[k];
      if (t.normalized) {
        std::string c = t.content;
        impl->normalize(c);
        impl->normalized_trie.add(c, int32_t(k));
      } else {
        impl->raw_trie.add(t.content, int32_t(k));
      }
    }

    // The post-processor last: its special tokens must have ids.
    const json& pp = get("post_processor");
    auto parse_pp = [&](const json& j) -> PostProcessorPtr {
      const std::string where = "post_processor";
      const std::string type = L.type_of(j, where);
      auto check_id = [&](int64_t id, const std::string& what) {
        L.require(id >= 0 && size_t(id) < impl->id_valid.size() && impl->id_valid[size_t(id)],
                  "post_processor " + type + ": " + what + " has id " + std::to_string(id) +
                      ", which is not in the vocabulary");
        return int32_t(id);
      };
      if (type == "TemplateProcessing") {
        auto p = std::make_unique<TemplateProcessor>();
        const json& specials = L.field(j, "special_tokens", "post_processor TemplateProcessing");
        L.require(specials.is_object(), "post_processor TemplateProcessing: \"special_tokens\" must be an object");
        auto parse_items = [&](const char* key, std::vector<TemplateProcessor::Item>& items) {
          const json& list = L.field(j, key, "post_processor TemplateProcessing");
          L.require(list.is_array(),
                    std::string("post_processor TemplateProcessing: \"") + key + "\" must be an array");
          for (const json& x : list) {
            L.require(x.is_object() && x.size() == 1, "post_processor TemplateProcessing: bad template item");
            TemplateProcessor::Item item{};
            if (auto s = x.find("Sequence"); s != x.end()) {
              item.is_sequence = true;
              const std::string id = L.str(*s, "id", "template Sequence", "A");
              L.require(id == "A" || id == "B",
                        "post_processor TemplateProcessing: sequence id \"" + id + "\" (expected A or B)");
              item.which = id == "A" ? 0 : 1;
              item.type_id = int32_t(L.integer(*s, "type_id", "template Sequence", 0, 0, 1 << 20));
            } else if (auto t = x.find("SpecialToken"); t != x.end()) {
              item.is_sequence = false;
              const std::string id = L.str(*t, "id", "template SpecialToken");
              item.type_id = int32_t(L.integer(*t, "type_id", "template SpecialToken", 0, 0, 1 << 20));
              auto st = specials.find(id);
              L.require(st != specials.end(),
                        "post_processor TemplateProcessing: special token \"" + id + "\" is not in \"special_tokens\"");
              const json& ids = L.field(*st, "ids", "special token \"" + id + "\"");
              L.require(ids.is_array(), "special token \"" + id + "\": \"ids\" must be an array");
              for (const json& v : ids) {
                L.require(v.is_number_integer(), "special token \"" + id + "\": ids must be integers");
                item.ids.push_back(check_id(v.get<int64_t>(), "special token \"" + id + "\""));
              }
            } else {
              L.fail("post_processor TemplateProcessing: a template item must be Sequence or SpecialToken");
            }
            items.push_back(std::move(item));
          }
        };
        parse_items("single", p->single);
        parse_items("pair", p->pair);
        bool has_b = false;
        for (const auto& it : p->pair) has_b = has_b || (it.is_sequence && it.which == 1);
        L.require(has_b || p->pair.empty(), "post_processor TemplateProcessing: the pair template has no $B");
        for (const auto& it : p->single)
          L.require(!it.is_sequence || it.which == 0, "post_processor TemplateProcessing: the single template uses $B");
        return p;
      }
      if (type == "BertProcessing" || type == "RobertaProcessing") {
        auto p = std::make_unique<BertProcessor>();
        p->roberta = type == "RobertaProcessing";
        auto pair_id = [&](const char* key) {
          const json& v = L.field(j, key, "post_processor " + type);
          L.require(v.is_array() && v.size() == 2 && v[1].is_number_integer(),
                    "post_processor " + type + ": \"" + key + "\" must be [token, id]");
          return check_id(v[1].get<int64_t>(), std::string("\"") + key + "\"");
        };
        p->cls = pair_id("cls");
        p->sep = pair_id("sep");
        return p;
      }
      if (type == "ByteLevel") return nullptr;
      L.unsupported(where, type, "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence");
    };
    if (!pp.is_null()) {
      if (L.type_of(pp, "post_processor") == "Sequence") {
        const json& list = L.field(pp, "processors", "post_processor Sequence");
        L.require(list.is_array(), "post_processor Sequence: \"processors\" must be an array");
        for (const json& x : list) {
          L.require(!x.is_object() || L.str(x, "type", "post_processor") != "Sequence",
                    "post_processor Sequence inside a Sequence is not supported");
          if (auto p = parse_pp(x)) {
            L.require(!impl->post_processor,
                      "post_processor Sequence with more than one processor besides ByteLevel is not supported");
            impl->post_processor = std::move(p);
          }
        }
      } else {
        impl->post_processor = parse_pp(pp);
      }
    }
  } catch (const json::exception& e) { L.fail(std::string("unexpected JSON structure: ") + e.what()); }
  return HfTokenizer(std::move(impl));
}

namespace {

std::unique_ptr<Model> parse_model(const Loader& L, const json& j, IdTable impl, size_t n_added) {
  std::string type = L.type_of(j, "model");
  if (type.empty() && j.contains("merges")) type = "BPE";  // old files have no type
  if (type.empty() && j.contains("vocab") && j.contains("continuing_subword_prefix")) type = "WordPiece";
  const std::string where = "model " + type;
  std::unique_ptr<Model> model;
  if (type == "BPE") {
    model = std::make_unique<BpeModel>();
  } else if (type == "WordPiece") {
    model = std::make_unique<WordPieceModel>();
  } else {
    L.unsupported("model", type, "BPE, WordPiece");
  }
  const json& vocab = L.field(j, "vocab", where);
  L.require(vocab.is_object(), where + ": \"vocab\" must be an object of token -> id");
  // Ids must be dense enough that the id table stays proportional to the file.
  const int64_t limit = 2 * int64_t(vocab.size() + n_added) + 65536;
  impl.id_to_token.assign(size_t(limit), std::string());
  impl.id_valid.assign(size_t(limit), 0);
  impl.id_special.assign(size_t(limit), 0);
  model->vocab.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    L.require(it->is_number_integer(), where + ": the id of \"" + it.key() + "\" must be an integer");
    const int64_t id = it->get<int64_t>();
    L.require(id >= 0 && id < limit, where + ": token \"" + it.key() + "\" has id " + std::to_string(id) +
                                         ", outside [0, " + std::to_string(limit) + ") for a vocabulary of " +
                                         std::to_string(vocab.size()) + " tokens");
    L.require(!impl.id_valid[size_t(id)], where + ": id " + std::to_string(id) + " is given to both \"" +
                                              impl.id_to_token[size_t(id)] + "\" and \"" + it.key() + "\"");
    impl.id_to_token[size_t(id)] = it.key();
    impl.id_valid[size_t(id)] = 1;
    model->vocab.emplace(it.key(), int32_t(id));
  }
  if (type == "WordPiece") {
    auto* wp = static_cast<WordPieceModel*>(model.get());
    wp->unk_token = L.str(j, "unk_token", where, "[UNK]");
    wp->unk_id = find_id(wp->vocab, wp->unk_token);
    wp->prefix = L.str(j, "continuing_subword_prefix", where, "##");
    wp->max_chars = L.integer(j, "max_input_chars_per_word", where, 100, 0, std::numeric_limits<int64_t>::max());
    return model;
  }
  auto* bpe = static_cast<BpeModel*>(model.get());
  const std::string unk = L.str(j, "unk_token", where, "");
  if (!unk.empty()) {
    bpe->unk_id = find_id(bpe->vocab, unk);
    L.require(bpe->unk_id >= 0, where + ": unk_token \"" + unk + "\" is not in the vocabulary");
  }
  bpe->prefix = L.str(j, "continuing_subword_prefix", where, "");
  bpe->suffix = L.str(j, "end_of_word_suffix", where, "");
  bpe->fuse_unk = L.boolean(j, "fuse_unk", where, false);
  bpe->byte_fallback = L.boolean(j, "byte_fallback", where, false);
  bpe->ignore_merges = L.boolean(j, "ignore_merges", where, false);
  if (auto d = j.find("dropout"); d != j.end() && !d->is_null()) {
    L.require(d->is_number() && d->get<double>() == 0.0, where + ": dropout is not supported (it must be null or 0)");
  }
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[7] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
    bpe->byte_ids[size_t(b)] = find_id(bpe->vocab, name);
  }
  const json& merges = L.field(j, "merges", where);
  L.require(merges.is_array(), where + ": \"merges\" must be an array");
  bpe->merges.map.reserve(merges.size());
  std::string merged;
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& m = merges[r];
    std::string a, b;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      L.require(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
                where + ": merge " + std::to_string(r) + " \"" + s + "\" is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      L.require(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                where + ": merge " + std::to_string(r) + " must be \"a b\" or [\"a\", \"b\"]");
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    }
    const int32_t ia = find_id(bpe->vocab, a), ib = find_id(bpe->vocab, b);
    L.require(ia >= 0, where + ": merge " + std::to_string(r) + " names \"" + a + "\", which is not in the vocabulary");
    L.require(ib >= 0, where + ": merge " + std::to_string(r) + " names \"" + b + "\", which is not in the vocabulary");
    merged = a;
    merged += std::string_view(b).substr(
        !bpe->prefix.empty() && std::string_view(b).starts_with(bpe->prefix) ? bpe->prefix.size() : 0);
    const int32_t im = find_id(bpe->vocab, merged);
    L.require(im >= 0,
              where + ": merge " + std::to_string(r) + " makes \"" + merged + "\", which is not in the vocabulary");
    bpe->merges.map[MergeMap::key(ia, ib)] = {int32_t(r), im};  // a repeated pair keeps its last rank
  }
  return model;
}

}  // namespace

HfTokenizer::Encoding HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> a = impl_->encode_sequence(text);
  Seq s = impl_->post_processor ? impl_->post_processor->process(a, nullptr, add_special_tokens)
                                : default_process(a, nullptr);
  return impl_->finish(std::move(s));
}

HfTokenizer::Encoding HfTokenizer::encode_pair(std::string_view a, std::string_view b, bool add_special_tokens) const {
  std::vector<int32_t> ia = impl_->encode_sequence(a), ib = impl_->encode_sequence(b);
  Seq s =
      impl_->post_processor ? impl_->post_processor->process(ia, &ib, add_special_tokens) : default_process(ia, &ib);
  return impl_->finish(std::move(s));
}

std::string HfTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  const size_t n = impl_->id_valid.size();
  for (int32_t id : ids) {
    NABLA_CHECK(IndexError, id >= 0 && size_t(id) < n && impl_->id_valid[size_t(id)], "HfTokenizer::decode: id ", id,
                " is not in the vocabulary (vocabulary size ", n, ")");
    if (skip_special_tokens && impl_->id_special[size_t(id)]) continue;
    tokens.push_back(impl_->id_to_token[size_t(id)]);
  }
  if (!impl_->decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  impl_->decoder->decode_chain(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::string HfTokenizer::normalize(std::string_view text) const {
  std::string s;
  if (!make_valid_utf8(text, s)) s = std::string(text);
  impl_->normalize(s);
  return s;
}

std::vector<std::string> HfTokenizer::pre_tokenize(std::string_view text) const {
  std::string s;
  if (!make_valid_utf8(text, s)) s = std::string(text);
  std::vector<Piece> pieces;
  if (!s.empty()) pieces.push_back({std::move(s), true});
  if (impl_->pre_tokenizer) impl_->pre_tokenizer->split(pieces);
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (Piece& p : pieces) out.push_back(std::move(p.text));
  return out;
}

int32_t HfTokenizer::token_to_id(std::string_view token) const {
  if (int32_t id = find_id(impl_->added_ids, token); id >= 0) return id;
  return find_id(impl_->model->vocab, token);
}

const std::string& HfTokenizer::id_to_token(int32_t id) const {
  const size_t n = impl_->id_valid.size();
  NABLA_CHECK(IndexError, id >= 0 && size_t(id) < n && impl_->id_valid[size_t(id)], "HfTokenizer::id_to_token: id ", id,
              " is not in the vocabulary (vocabulary size ", n, ")");
  return impl_->id_to_token[size_t(id)];
}

int32_t HfTokenizer::vocab_size() const { return int32_t(impl_->id_valid.size()); }

}  // namespace nabla::text
