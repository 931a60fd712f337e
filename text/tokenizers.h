// torchtext's plain tokenizers and n-grams (torchtext.data.utils, torchtext.transforms.RegexTokenizer):
// a string in, its tokens out as std::vector<std::string>.
//
//   auto tokenize = text::get_tokenizer("basic_english");
//   tokenize("You can't stop (us)!");   // {"you", "can", "'", "t", "stop", "(", "us", ")", "!"}
//   text::RegexTokenizer re({{"\\s+", " "}, {"[0-9]+", "<num>"}});
//   text::ngrams_iterator({"a", "b", "c"}, 2);   // {"a", "b", "c", "a b", "b c"}
//
// Text is UTF-8; invalid UTF-8 is a ValueError naming the tokenizer (Python's strings cannot hold it).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nabla::text {

using Tokenizer = std::function<std::vector<std::string>(std::string_view)>;

// torchtext's _basic_english_normalize: lowercase (Unicode, as Python's str.lower), then in order
// ' -> " '  ", drop ", . -> " . ", "<br />" -> " ", , -> " , ", ( ) ! ? -> the same with spaces around,
// ; : -> " ", and split at white space (Python's str.split()).
std::vector<std::string> basic_english_normalize(std::string_view line);

// Python's str.split(): the runs between white space (Unicode White_Space and \x1c-\x1f), none empty.
std::vector<std::string> split_whitespace(std::string_view line);

// torchtext.data.get_tokenizer: "basic_english" (language "en" only, as torchtext), and "split" or
// "whitespace" for str.split() (torchtext's get_tokenizer(None)). Other names (spacy, moses, ...)
// are a ValueError listing the supported ones.
Tokenizer get_tokenizer(const std::string& name, const std::string& language = "en");

// torchtext.transforms.RegexTokenizer: each (pattern, replacement) replaces every match in turn, in the
// given order, then the text is split at the ASCII space ' ' only (empty pieces dropped), as torchtext's
// C++ does. Patterns are ECMAScript regular expressions (std::regex; RE2's common syntax: classes,
// \s \d \w, alternation, groups, quantifiers); a replacement's \0..\9 name groups and \\ is a
// backslash, as in RE2's rewrite strings. A bad pattern is a ValueError naming it.
using RegexPatterns = std::vector<std::pair<std::string, std::string>>;  // (pattern, replacement)
class RegexTokenizer {
 public:
  // One pair alone is best spelled RegexTokenizer(RegexPatterns{{"a+", "b"}}): a bare {{"a+", "b"}}
  // is ambiguous in C++ (a vector's range constructor from two const char*).
  explicit RegexTokenizer(const RegexPatterns& patterns);
  std::vector<std::string> operator()(std::string_view line) const;
  std::vector<std::string> forward(std::string_view line) const { return (*this)(line); }

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// torchtext.data.utils.ngrams_iterator: the tokens, then every 2-gram, 3-gram, ... up to n-grams,
// each joined with a space, in order of position within each n (n >= 1, else ValueError).
std::vector<std::string> ngrams_iterator(const std::vector<std::string>& tokens, int64_t n);

}  // namespace nabla::text
