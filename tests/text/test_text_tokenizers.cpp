// torchtext's plain tokenizers and n-grams: the expected tokens are what torchtext's Python code
// (torchtext/data/utils.py: _basic_english_normalize, ngrams_iterator; re.sub for the regex
// tokenizer) gives for the same strings under Python 3.11.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/common/value_helpers.h"
#include "text/tokenizers.h"

using namespace nabla;
using Tokens = std::vector<std::string>;

TEST(TextTokenizers, BasicEnglishIsTorchtexts) {
  auto tok = text::get_tokenizer("basic_english");
  EXPECT_EQ(tok("You can't stop (us)!"), (Tokens{"you", "can", "'", "t", "stop", "(", "us", ")", "!"}));
  EXPECT_EQ(tok("He said \"Hi.\" Then<br />left; ok: yes? no, 3.14"),
            (Tokens{"he", "said", "hi", ".", "then", "left", "ok", "yes", "?", "no", ",", "3", ".", "14"}));
  // The passes run in order: the quote is dropped before "<br />" is looked for.
  EXPECT_EQ(tok("<br \"/>x"), (Tokens{"x"}));
  EXPECT_EQ(tok("a.b,c(d)e!f?g;h:i'j"),
            (Tokens{"a", ".", "b", ",", "c", "(", "d", ")", "e", "!", "f", "?", "g", "h", "i", "'", "j"}));
  // Unicode lowercase and white space (no-break space, em space) as Python's str.lower / str.split.
  EXPECT_EQ(tok("\xC3\x80"
                "B Stra\xC3\x9F"
                "e \xC2\xA0tab\there\xE2\x80\x83"
                "end"),
            (Tokens{"\xC3\xA0"
                    "b",
                    "stra\xC3\x9F"
                    "e",
                    "tab", "here", "end"}));
  EXPECT_TRUE(tok("   ").empty());
  EXPECT_TRUE(nabla::testing::throws_with<ValueError>([] { text::get_tokenizer("basic_english", "de"); },
                                                      {"get_tokenizer", "'de'"}));
  EXPECT_TRUE(
      nabla::testing::throws_with<ValueError>([] { text::get_tokenizer("spacy"); }, {"'spacy'", "basic_english"}));
  EXPECT_TRUE(
      nabla::testing::throws_with<ValueError>([&] { tok("bad \xFF byte"); }, {"basic_english_normalize", "UTF-8"}));
}

TEST(TextTokenizers, SplitIsPythonsStrSplit) {
  auto tok = text::get_tokenizer("whitespace");
  EXPECT_EQ(tok("  a\tb\n\nc\x1f"
                "d \xE3\x80\x80"
                "e  "),
            (Tokens{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(text::get_tokenizer("split")("Keep CASE, and punct."), (Tokens{"Keep", "CASE,", "and", "punct."}));
  EXPECT_TRUE(tok("").empty());
}

TEST(TextTokenizers, RegexTokenizerReplacesInOrderThenSplitsAtSpaces) {
  text::RegexTokenizer re({{"(\\w+)@(\\w+)", "\\2 at \\1"}, {"[0-9]+", "<num>"}, {",", " "}});
  EXPECT_EQ(re("mail bob@site now, 42 times"), (Tokens{"mail", "site", "at", "bob", "now", "<num>", "times"}));
  // Only ' ' splits (torchtext's C++ getline(' ')): a tab stays inside a token.
  EXPECT_EQ(text::RegexTokenizer(text::RegexPatterns{})("a\tb  c"), (Tokens{"a\tb", "c"}));
  // \0 is the whole match, \\ a backslash, and a $ is literal.
  EXPECT_EQ(text::RegexTokenizer(text::RegexPatterns{{"b+", "[\\0\\\\$1]"}})("abbc"), (Tokens{"a[bb\\$1]c"}));
  EXPECT_TRUE(nabla::testing::throws_with<ValueError>(
      [] {
        text::RegexTokenizer(text::RegexPatterns{{"(", ""}});
      },
      {"RegexTokenizer", "'('"}));
  EXPECT_TRUE(nabla::testing::throws_with<ValueError>(
      [] {
        text::RegexTokenizer(text::RegexPatterns{{"a", "\\q"}});
      },
      {"\\q"}));
}

TEST(TextTokenizers, NgramsIteratorOrderIsTorchtexts) {
  EXPECT_EQ(text::ngrams_iterator({"a", "b", "c", "d"}, 3),
            (Tokens{"a", "b", "c", "d", "a b", "b c", "c d", "a b c", "b c d"}));
  EXPECT_EQ(text::ngrams_iterator({"a", "b"}, 1), (Tokens{"a", "b"}));
  EXPECT_EQ(text::ngrams_iterator({"a"}, 4), (Tokens{"a"}));
  EXPECT_TRUE(
      nabla::testing::throws_with<ValueError>([] { text::ngrams_iterator({"a"}, 0); }, {"ngrams_iterator", "0"}));
}
