// The normalizers and pre-tokenizers of tokenizer.json files (text/hf_internal.h).
#include "text/hf_internal.h"

#include <algorithm>
#include <string>
#include <vector>

#include "text/bpe.h"

namespace nabla::text::hf {

// ---------------------------------------------------------------------------------------------
// Normalizers.

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

}  // namespace nabla::text::hf
