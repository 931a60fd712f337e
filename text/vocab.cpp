// text::Vocab and build_vocab_from_iterator (text/vocab.h).
#include "text/vocab.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "io/file.h"

namespace nabla::text {

Vocab::Vocab(std::vector<std::string> itos) {
  itos_.reserve(itos.size());
  stoi_.reserve(itos.size());
  for (auto& token : itos) append_token(token);
}

int64_t Vocab::operator[](const std::string& token) const {
  auto it = stoi_.find(token);
  if (it != stoi_.end()) return it->second;
  NABLA_CHECK(ValueError, default_index_.has_value(), "Vocab: token ", io::quote_name(token),
              " not found and default index is not set");
  return *default_index_;
}

std::vector<int64_t> Vocab::lookup_indices(const std::vector<std::string>& tokens) const {
  std::vector<int64_t> out;
  out.reserve(tokens.size());
  for (const auto& t : tokens) out.push_back((*this)[t]);
  return out;
}

const std::string& Vocab::lookup_token(int64_t index) const {
  NABLA_CHECK(IndexError, index >= 0 && index < size(), "Vocab::lookup_token: index ", index,
              " is out of bounds of the vocabulary of size ", size());
  return itos_[size_t(index)];
}

std::vector<std::string> Vocab::lookup_tokens(const std::vector<int64_t>& indices) const {
  std::vector<std::string> out;
  out.reserve(indices.size());
  for (int64_t i : indices) out.push_back(lookup_token(i));
  return out;
}

void Vocab::insert_token(const std::string& token, int64_t index) {
  NABLA_CHECK(IndexError, index >= 0 && index <= size(), "Vocab::insert_token: index ", index,
              " is out of bounds for a vocabulary of size ", size());
  auto it = stoi_.find(token);
  NABLA_CHECK(ValueError, it == stoi_.end(), "Vocab::insert_token: token ", io::quote_name(token),
              " already exists in the Vocab with index ", it == stoi_.end() ? -1 : it->second);
  for (size_t i = size_t(index); i < itos_.size(); ++i) ++stoi_[itos_[i]];
  itos_.insert(itos_.begin() + index, token);
  stoi_.emplace(token, index);
}

void Vocab::append_token(const std::string& token) {
  auto it = stoi_.find(token);
  NABLA_CHECK(ValueError, it == stoi_.end(), "Vocab::append_token: token ", io::quote_name(token),
              " already exists in the Vocab with index ", it == stoi_.end() ? -1 : it->second);
  stoi_.emplace(token, size());
  itos_.push_back(token);
}

// ---- save / load ------------------------------------------------------------------------------

namespace {

constexpr const char* kMagic = "nabla-vocab 1";

std::string escape(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7F) (((out += "\\x") += hex[c >> 4]) += hex[c & 15]);
    else out += char(c);
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

struct LineReader {
  const std::string& path;
  const std::vector<char>& bytes;
  size_t pos = 0;
  int64_t line = 0;

  bool next(std::string_view& out) {
    if (pos >= bytes.size()) return false;
    const char* begin = bytes.data() + pos;
    const void* nl = std::memchr(begin, '\n', bytes.size() - pos);
    const size_t len = nl ? size_t(static_cast<const char*>(nl) - begin) : bytes.size() - pos;
    out = std::string_view(begin, len);
    pos += len + (nl ? 1 : 0);
    ++line;
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    NABLA_CHECK(IOError, false, "Vocab::load: ", path, ":", line, ": ", what);
    throw IOError(what);  // not reached
  }
  std::string_view expect_line(const char* what) {
    std::string_view l;
    if (!next(l)) {
      ++line;
      fail(std::string("the file ends before ") + what);
    }
    return l;
  }
};

std::string unescape(std::string_view s, LineReader& r) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\r' || (static_cast<unsigned char>(c) < 0x20) || c == 0x7F)
      r.fail("a raw control byte in a token (they are written escaped)");
    if (c != '\\') {
      out += c;
      continue;
    }
    if (i + 1 >= s.size()) r.fail("a token ends in a lone backslash");
    const char d = s[++i];
    if (d == '\\') out += '\\';
    else if (d == 'n') out += '\n';
    else if (d == 'r') out += '\r';
    else if (d == 'x' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += char(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      r.fail("a bad escape in a token (\\\\, \\n, \\r and \\xHH are allowed)");
    }
  }
  return out;
}

int64_t parse_int(std::string_view s, LineReader& r, const char* what) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty())
    r.fail(std::string("expected ") + what + ", got " + io::quote_name(std::string(s)));
  return v;
}

}  // namespace

void Vocab::save(const std::string& path) const {
  io::atomic_write(path, [&](std::FILE* f) {
    std::string head = std::string(kMagic) + "\nsize " + std::to_string(itos_.size()) + "\ndefault " +
                       (default_index_ ? std::to_string(*default_index_) : std::string("none")) + "\n";
    io::write_all(f, head.data(), head.size(), path);
    for (const auto& t : itos_) {
      const std::string line = escape(t) + "\n";
      io::write_all(f, line.data(), line.size(), path);
    }
  });
}

Vocab Vocab::load(const std::string& path) {
  const std::vector<char> bytes = io::read_file(path);
  LineReader r{path, bytes};
  if (r.expect_line("the header") != kMagic) r.fail(std::string("not a nabla vocabulary file (no '") + kMagic + "')");
  std::string_view l = r.expect_line("the size");
  if (!l.starts_with("size ")) r.fail("expected 'size N'");
  const int64_t n = parse_int(l.substr(5), r, "a token count");
  if (n < 0) r.fail("a negative token count " + std::to_string(n));
  l = r.expect_line("the default index");
  if (!l.starts_with("default ")) r.fail("expected 'default D' or 'default none'");
  std::optional<int64_t> def;
  if (l.substr(8) != "none") def = parse_int(l.substr(8), r, "a default index or 'none'");
  Vocab v;
  // Never more than the file can hold: each token takes at least its newline.
  const size_t room = std::min<uint64_t>(uint64_t(n), bytes.size() - r.pos);
  v.itos_.reserve(room);
  v.stoi_.reserve(room);
  for (int64_t i = 0; i < n; ++i) {
    l = r.expect_line(("token " + std::to_string(i) + " of " + std::to_string(n)).c_str());
    std::string token = unescape(l, r);
    if (v.contains(token))
      r.fail("the token " + io::quote_name(token) + " appears twice (first at index " + std::to_string(v.stoi_[token]) +
             ")");
    v.append_token(token);
  }
  if (r.next(l)) r.fail("more lines than the " + std::to_string(n) + " tokens the header declares");
  v.default_index_ = def;
  return v;
}

// ---- build_vocab_from_iterator ----------------------------------------------------------------

Vocab build_vocab_from_iterator(const std::vector<std::vector<std::string>>& iterator,
                                const BuildVocabOptions& options) {
  std::unordered_map<std::string, int64_t> counts;
  for (const auto& tokens : iterator)
    for (const auto& t : tokens) ++counts[t];
  std::vector<std::pair<const std::string*, int64_t>> order;
  order.reserve(counts.size());
  for (const auto& [token, count] : counts) order.emplace_back(&token, count);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : *a.first < *b.first;
  });
  const auto n_specials = int64_t(options.specials.size());
  if (options.max_tokens) {
    NABLA_CHECK(ValueError, n_specials < *options.max_tokens, "build_vocab_from_iterator: len(specials) = ", n_specials,
                " >= max_tokens = ", *options.max_tokens, ", so the vocab would be entirely special tokens");
    if (int64_t(order.size()) > *options.max_tokens - n_specials)
      order.resize(size_t(*options.max_tokens - n_specials));
  }
  std::unordered_map<std::string, int64_t> special_set;
  for (const auto& s : options.specials) special_set.emplace(s, 0);
  std::vector<std::string> itos;
  if (options.special_first) itos = options.specials;
  for (const auto& [token, count] : order)
    if (count >= options.min_freq && !special_set.count(*token)) itos.push_back(*token);
  if (!options.special_first) itos.insert(itos.end(), options.specials.begin(), options.specials.end());
  return Vocab(std::move(itos));
}

}  // namespace nabla::text
