// text::Vocab and build_vocab_from_iterator: the orders are those of torchtext 0.14's
// build_vocab_from_iterator (vocab_factory.py: sorted by (-count, token), cut to max_tokens -
// len(specials) before the specials are taken out, then min_freq), worked out by hand for each corpus.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "tests/common/value_helpers.h"
#include "tests/text/file_helpers.h"
#include "text/vocab.h"

using namespace nabla;
using nabla::testing::throws_with;
using Tokens = std::vector<std::string>;
namespace fs = std::filesystem;

namespace {
const std::vector<Tokens> kDocs = {{"b", "a", "c", "a"}, {"c", "d", "b", "a"}, {"e"}};  // a:3 b:2 c:2 d:1 e:1

fs::path scratch(const std::string& name) { return text_files::scratch_dir("vocab") / name; }
void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }
}  // namespace

TEST(TextVocab, BuildOrdersByCountThenToken) {
  EXPECT_EQ(text::build_vocab_from_iterator(kDocs).get_itos(), (Tokens{"a", "b", "c", "d", "e"}));
  auto v = text::build_vocab_from_iterator(kDocs, {.specials = {"<unk>", "<pad>"}});
  EXPECT_EQ(v.get_itos(), (Tokens{"<unk>", "<pad>", "a", "b", "c", "d", "e"}));
  EXPECT_EQ(text::build_vocab_from_iterator(kDocs, {.specials = {"<unk>"}, .special_first = false}).get_itos(),
            (Tokens{"a", "b", "c", "d", "e", "<unk>"}));
  EXPECT_EQ(text::build_vocab_from_iterator(kDocs, {.min_freq = 2}).get_itos(), (Tokens{"a", "b", "c"}));
  EXPECT_EQ(text::build_vocab_from_iterator(kDocs, {.specials = {"<unk>", "<pad>"}, .max_tokens = 4}).get_itos(),
            (Tokens{"<unk>", "<pad>", "a", "b"}));
  // A special the corpus holds takes one of the max_tokens - len(specials) places before it is
  // taken out (torchtext's order of steps), so this vocabulary has 3 tokens, not 4.
  std::vector<Tokens> docs = kDocs;
  docs.push_back({"<unk>", "<unk>", "<unk>", "<unk>"});
  EXPECT_EQ(text::build_vocab_from_iterator(docs, {.specials = {"<unk>"}, .max_tokens = 4}).get_itos(),
            (Tokens{"<unk>", "a", "b"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [] {
        text::build_vocab_from_iterator(kDocs, {.specials = {"x", "y"}, .max_tokens = 2});
      },
      {"max_tokens = 2"}));
  EXPECT_EQ(text::build_vocab_from_iterator({}).size(), 0);
}

TEST(TextVocab, LookupsBothWaysAndTheDefaultIndex) {
  auto v = text::build_vocab_from_iterator(kDocs, {.specials = {"<unk>"}});
  EXPECT_EQ(v["a"], 1);
  EXPECT_EQ(v.size(), 6);
  EXPECT_TRUE(v.contains("e"));
  EXPECT_FALSE(v.contains("zz"));
  EXPECT_FALSE(v.get_default_index().has_value());
  EXPECT_TRUE(throws_with<ValueError>([&] { v["zz"]; }, {"'zz'", "default index is not set"}));
  v.set_default_index(v["<unk>"]);
  EXPECT_EQ(v.lookup_indices({"c", "zz", "a"}), (std::vector<int64_t>{3, 0, 1}));
  v.set_default_index(-1);
  EXPECT_EQ(v["zz"], -1);
  EXPECT_EQ(v.lookup_tokens({5, 0}), (Tokens{"e", "<unk>"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { v.lookup_token(6); }, {"lookup_token", "6", "size 6"}));
  EXPECT_EQ(v.get_stoi().at("d"), 4);
}

TEST(TextVocab, InsertAndAppendShiftIndices) {
  text::Vocab v(Tokens{"a", "b", "c"});
  v.insert_token("x", 1);
  EXPECT_EQ(v.get_itos(), (Tokens{"a", "x", "b", "c"}));
  EXPECT_EQ(v["c"], 3);
  EXPECT_EQ(v["x"], 1);
  v.insert_token("end", 4);
  v.append_token("last");
  EXPECT_EQ(v.get_itos(), (Tokens{"a", "x", "b", "c", "end", "last"}));
  for (int64_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[v.lookup_token(i)], i);
  EXPECT_TRUE(throws_with<ValueError>([&] { v.append_token("b"); }, {"'b'", "already exists", "index 2"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { v.insert_token("a", 0); }, {"'a'", "already exists"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { v.insert_token("q", 7); }, {"index 7", "size 6"}));
  EXPECT_TRUE(throws_with<ValueError>([] { text::Vocab(Tokens{"a", "a"}); }, {"'a'"}));
}

TEST(TextVocab, SaveLoadRoundTripsAnyBytes) {
  text::Vocab v(Tokens{"<unk>", "new\nline", "back\\slash", "tab\there", "caf\xC3\xA9", "", "\x01\x7F", "\\n"});
  v.set_default_index(0);
  const auto path = scratch("v.txt").string();
  v.save(path);
  const text::Vocab w = text::Vocab::load(path);
  EXPECT_EQ(w.get_itos(), v.get_itos());
  EXPECT_EQ(w.get_default_index(), std::optional<int64_t>(0));
  text::Vocab plain(Tokens{"a"});
  plain.save(path);
  EXPECT_FALSE(text::Vocab::load(path).get_default_index().has_value());
}

TEST(TextVocab, CorruptFilesGiveIOErrorsWithTheLine) {
  const auto path = scratch("bad.txt");
  const std::string p = path.string();
  auto expect = [&](const std::string& bytes, std::initializer_list<std::string> frags) {
    write(path, bytes);
    text_files::expect_io_error([](const std::string& f) { text::Vocab::load(f); }, p, frags);
  };
  expect("", {":1:", "ends before the header"});
  expect("not a vocab\n", {":1:", "not a nabla vocabulary"});
  expect("nabla-vocab 1\nsize x\n", {":2:", "token count", "'x'"});
  expect("nabla-vocab 1\nsize -3\ndefault none\n", {":2:", "negative"});
  // A huge declared size reserves no more than the file holds and fails at its end.
  expect("nabla-vocab 1\nsize 999999999999999\ndefault none\na\n", {":5:", "ends before token 1"});
  expect("nabla-vocab 1\nsize 99999999999999999999\n", {":2:", "token count"});
  expect("nabla-vocab 1\nsize 2\ndefault 0\na\na\n", {":5:", "'a' appears twice"});
  expect("nabla-vocab 1\nsize 1\ndefault zero\na\n", {":3:", "'zero'"});
  expect("nabla-vocab 1\nsize 1\ndefault none\nbad\\q\n", {":4:", "bad escape"});
  expect("nabla-vocab 1\nsize 1\ndefault none\nbad\\x4\n", {":4:", "bad escape"});
  expect("nabla-vocab 1\nsize 1\ndefault none\nend\\\n", {":4:", "lone backslash"});
  expect("nabla-vocab 1\nsize 1\ndefault none\nraw\rcr\n", {":4:", "control byte"});
  expect("nabla-vocab 1\nsize 1\ndefault none\na\nb\n", {":5:", "more lines"});
  EXPECT_TRUE(throws_with<IOError>([] { text::Vocab::load("/nonexistent/vocab.txt"); }, {"/nonexistent/vocab.txt"}));
}
