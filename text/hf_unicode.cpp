// UTF-8, Unicode normalization and character properties for HfTokenizer (text/hf_internal.h).
#include "text/hf_internal.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>

#include "text/bpe.h"
#include "text/unicode_decomp_pool.h"
#include "text/unicode_decomp_tables.h"

namespace nabla::text::hf {

// ---------------------------------------------------------------------------------------------
// UTF-8.

// The flag of every code point as a two-stage table (blocks of 256 shared where equal), built once from
// the runs of unicode_norm_tables.h.
const FlagTable& flag_table() {
  static const FlagTable t = [] {
    FlagTable t;
    std::vector<uint8_t> flat(0x110000);
    const size_t n = std::size(un::kFlagRuns);
    for (size_t r = 0; r < n; ++r) {
      const uint32_t begin = un::kFlagRuns[r] >> 8, end = r + 1 < n ? un::kFlagRuns[r + 1] >> 8 : 0x110000;
      std::fill(flat.begin() + begin, flat.begin() + end, uint8_t(un::kFlagRuns[r] & 0xFF));
    }
    std::unordered_map<std::string, uint16_t> blocks;  // a block's 256 flags -> its index in stage2
    for (size_t b = 0; b < 0x110000 / 256; ++b) {
      std::string block(reinterpret_cast<const char*>(flat.data()) + b * 256, 256);
      auto [it, fresh] = blocks.try_emplace(block, uint16_t(blocks.size()));
      if (fresh) t.stage2.insert(t.stage2.end(), block.begin(), block.end());
      t.stage1.push_back(it->second);
    }
    return t;
  }();
  return t;
}

// Valid UTF-8 with each maximal invalid subpart replaced by U+FFFD (text::replace_invalid_utf8).
// Returns false (and leaves `out` alone) when `in` is already valid.
bool make_valid_utf8(std::string_view in, std::string& out) {
  if (utf8::is_valid(in)) return false;  // the usual case: no copy
  out = replace_invalid_utf8(in);
  return true;
}

uint8_t ccc_of(uint32_t cp) {
  if (!(flags_of(cp) & un::kNormQc)) return 0;
  const uint32_t* end = un::kCcc + std::size(un::kCcc);
  const uint32_t* it = std::lower_bound(un::kCcc, end, cp << 8);
  return it != end && (*it >> 8) == cp ? uint8_t(*it & 255) : 0;
}

// The decomposition of cp in a table of (cp << 24 | offset << 8 | length), or 0 (no code point decomposes
// at offset 0 with length 0).
uint64_t find_decomp(const uint64_t* begin, size_t n, uint32_t cp) {
  const uint64_t* end = begin + n;
  const uint64_t* it = std::lower_bound(begin, end, uint64_t(cp) << 24);
  return it != end && (*it >> 24) == cp ? *it : 0;
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
  uint64_t d = compat ? find_decomp(un::kCompatIndex, std::size(un::kCompatIndex), cp) : 0;
  if (!d) d = find_decomp(un::kCanonIndex, std::size(un::kCanonIndex), cp);
  if (!d) {
    out.push_back(cp);
    return;
  }
  const size_t offset = (d >> 8) & 0xFFFF, length = d & 0xFF;
  // A full compatibility decomposition may hold Hangul syllables (e.g. U+3200 PARENTHESIZED HANGUL).
  for (size_t k = 0; k < length; ++k) {
    const uint32_t c = un::kDecompPool[offset + k];
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

// To refuse hostile files before the parser recurses into them.
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

}  // namespace nabla::text::hf
