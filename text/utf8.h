// UTF-8 helpers the tokenizers of text/ share (internal to text/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nabla::text::utf8 {

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

// The length of a valid sequence from its lead byte.
inline size_t cp_len(uint8_t lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

inline void append(std::string& out, uint32_t cp) {
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

// One step of WHATWG's UTF-8 decoder at s[i] (i < n): the bytes it takes and whether they are a valid
// sequence. An invalid step is one maximal subpart (the lead byte and the continuation bytes that were
// still possible), which a lossy decoder replaces by one U+FFFD.
struct Step {
  size_t len;
  bool valid;
};
inline Step step(const uint8_t* s, size_t n, size_t i) {
  const uint8_t c = s[i];
  if (c < 0x80) return {1, true};
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return {1, false};
  }
  size_t j = i + 1, seen = 0;
  while (seen < need && j < n && s[j] >= lo && s[j] <= hi) {
    lo = 0x80;
    hi = 0xBF;
    ++j;
    ++seen;
  }
  return {j - i, seen == need};
}

inline bool is_valid(std::string_view in) {
  const auto* s = reinterpret_cast<const uint8_t*>(in.data());
  for (size_t i = 0; i < in.size();) {
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    const Step st = step(s, in.size(), i);
    if (!st.valid) return false;
    i += st.len;
  }
  return true;
}

}  // namespace nabla::text::utf8
