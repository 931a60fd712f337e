// The plain tokenizers of text/tokenizers.h.
#include "text/tokenizers.h"

#include <regex>

#include "core/error.h"
#include "io/file.h"
#include "text/hf_internal.h"

namespace nabla::text {
namespace {

void check_utf8(std::string_view s, const char* op) {
  NABLA_CHECK(ValueError, utf8::is_valid(s), op, ": the text is not valid UTF-8: ", io::quote_name(std::string(s)));
}

bool is_python_space(uint32_t cp) { return (cp >= 0x1C && cp <= 0x1F) || hf::is_space(cp); }

std::vector<std::string> split_valid(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0, start = 0;
  bool in_token = false;
  while (i < s.size()) {
    const size_t at = i;
    const uint32_t cp = utf8::next_cp(s, i);
    if (is_python_space(cp)) {
      if (in_token) out.emplace_back(s.substr(start, at - start));
      in_token = false;
    } else if (!in_token) {
      start = at;
      in_token = true;
    }
  }
  if (in_token) out.emplace_back(s.substr(start));
  return out;
}

}  // namespace

std::vector<std::string> split_whitespace(std::string_view line) {
  check_utf8(line, "split_whitespace");
  return split_valid(line);
}

std::vector<std::string> basic_english_normalize(std::string_view line) {
  check_utf8(line, "basic_english_normalize");
  std::string s = hf::lowercase(line);
  // torchtext's substitutions, in its order (each pass sees the previous ones' output); the last
  // one, \s+ -> " ", is the split.
  static const std::pair<std::string_view, std::string_view> kRules[] = {
      {"'", " '  "}, {"\"", ""},   {".", " . "}, {"<br />", " "}, {",", " , "}, {"(", " ( "},
      {")", " ) "},  {"!", " ! "}, {"?", " ? "}, {";", " "},      {":", " "}};
  for (const auto& [from, to] : kRules) hf::replace_all(s, from, to);
  return split_valid(s);
}

Tokenizer get_tokenizer(const std::string& name, const std::string& language) {
  if (name == "basic_english") {
    NABLA_CHECK(ValueError, language == "en", "get_tokenizer: basic_english normalization only supports English (",
                "language 'en'), got '", language, "'");
    return [](std::string_view s) { return basic_english_normalize(s); };
  }
  if (name == "split" || name == "whitespace") return [](std::string_view s) { return split_whitespace(s); };
  NABLA_CHECK(ValueError, false, "get_tokenizer: unknown tokenizer '", name,
              "' (supported: basic_english, split, whitespace; BytePairTokenizer, HfTokenizer and "
              "SentencePieceTokenizer are classes of their own)");
  return {};
}

// ---- RegexTokenizer ---------------------------------------------------------------------------

struct RegexTokenizer::Impl {
  std::vector<std::regex> patterns;
  std::vector<std::string> formats;  // the replacements in std::regex_replace's $-syntax
};

namespace {
// RE2's rewrite string (\0..\9 groups, \\ a backslash) as an ECMAScript format string ($&, $1, $$).
std::string re2_rewrite_to_format(const std::string& rewrite) {
  std::string out;
  for (size_t i = 0; i < rewrite.size(); ++i) {
    const char c = rewrite[i];
    if (c == '$') {
      out += "$$";
    } else if (c == '\\') {
      NABLA_CHECK(ValueError, i + 1 < rewrite.size(), "RegexTokenizer: the replacement '", rewrite,
                  "' ends in a lone backslash (write \\\\ for a backslash)");
      const char d = rewrite[++i];
      if (d == '\\') out += '\\';
      else if (d == '0') out += "$&";
      else if (d >= '1' && d <= '9') out += std::string("$") + d;
      else
        NABLA_CHECK(ValueError, false, "RegexTokenizer: the replacement '", rewrite, "' has \\", d,
                    " (only \\0..\\9 and \\\\ are allowed)");
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

RegexTokenizer::RegexTokenizer(const RegexPatterns& patterns) {
  auto impl = std::make_shared<Impl>();
  for (const auto& [pattern, replacement] : patterns) {
    try {
      impl->patterns.emplace_back(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      NABLA_CHECK(ValueError, false, "RegexTokenizer: bad pattern '", pattern, "': ", e.what());
    }
    impl->formats.push_back(re2_rewrite_to_format(replacement));
  }
  impl_ = std::move(impl);
}

std::vector<std::string> RegexTokenizer::operator()(std::string_view line) const {
  check_utf8(line, "RegexTokenizer");
  std::string s(line);
  for (size_t i = 0; i < impl_->patterns.size(); ++i) s = std::regex_replace(s, impl_->patterns[i], impl_->formats[i]);
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(' ', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::vector<std::string> ngrams_iterator(const std::vector<std::string>& tokens, int64_t n) {
  NABLA_CHECK(ValueError, n >= 1, "ngrams_iterator: ngrams must be at least 1, got ", n);
  std::vector<std::string> out(tokens);
  const auto count = int64_t(tokens.size());
  for (int64_t k = 2; k <= n && k <= count; ++k) {
    for (int64_t i = 0; i + k <= count; ++i) {
      std::string g = tokens[size_t(i)];
      for (int64_t j = 1; j < k; ++j) (g += ' ') += tokens[size_t(i + j)];
      out.push_back(std::move(g));
    }
  }
  return out;
}

}  // namespace nabla::text
