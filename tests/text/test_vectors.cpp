// text::Vectors: GloVe and word2vec text files, lookups (unknown -> zeros or unk_init, lowercase
// backup), the Embedding built for a Vocab, and hostile files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/ops.h"
#include "nn/embedding.h"
#include "tests/common/value_helpers.h"
#include "tests/text/file_helpers.h"
#include "text/vectors.h"
#include "text/vocab.h"

using namespace nabla;
using nabla::testing::tensor_is;
using nabla::testing::throws_with;
namespace fs = std::filesystem;

namespace {
std::string scratch_file(const std::string& name, const std::string& bytes) {
  return text_files::scratch_file("vectors", name, bytes);
}
}  // namespace

TEST(TextVectors, GloveFileLooksUpTokens) {
  const auto path = scratch_file("glove.txt", "the 0.5 -1 2\ncat 1e-1 0.25 3\r\nDog 7 8 9 \nthe 4 5 6\n");
  auto vec = text::Vectors::load(path);
  EXPECT_EQ(vec.dim(), 3);
  EXPECT_EQ(vec.size(), 4);
  // A word given twice keeps both rows; lookups find the later one (torchtext's stoi).
  EXPECT_TRUE(tensor_is(vec.get_vecs_by_tokens({"cat", "the", "zebra"}), {3, 3}, {0.1, 0.25, 3, 4, 5, 6, 0, 0, 0}));
  EXPECT_TRUE(tensor_is(vec["Dog"], {3}, {7, 8, 9}));
  EXPECT_TRUE(
      tensor_is(vec.get_vecs_by_tokens({"DOG", "CAT"}, /*lower_case_backup=*/true), {2, 3}, {0, 0, 0, 0.1, 0.25, 3}));
  auto limited = text::Vectors::load(path, {.max_vectors = 2});
  EXPECT_EQ(limited.itos(), (std::vector<std::string>{"the", "cat"}));
  EXPECT_TRUE(tensor_is(limited["the"], {3}, {0.5, -1, 2}));
}

TEST(TextVectors, Word2vecHeaderAndUnkInit) {
  const auto path = scratch_file("w2v.txt", "2 2\nhello 1 2\nworld 3 4\n");
  auto vec = text::Vectors::load(path, {.unk_init = [](Tensor z) { return z + 0.5; }});
  EXPECT_EQ(vec.size(), 2);
  EXPECT_TRUE(tensor_is(vec.get_vecs_by_tokens({"world", "?"}), {2, 2}, {3, 4, 0.5, 0.5}));
}

TEST(TextVectors, EmbeddingForAVocab) {
  const auto path = scratch_file("e.txt", "a 1 2\nb 3 4\n");
  text::Vectors vec = text::Vectors::load(path);
  text::Vocab vocab(std::vector<std::string>{"<pad>", "b", "zz", "a"});
  auto emb = vec.embedding_for(vocab);
  EXPECT_EQ(emb->num_embeddings, 4);
  EXPECT_FALSE(emb->weight.requires_grad());
  EXPECT_TRUE(tensor_is(emb->weight, {4, 2}, {0, 0, 3, 4, 0, 0, 1, 2}));
  EXPECT_TRUE(tensor_is(emb->forward(tensor(std::vector<int64_t>{3, 1}, kInt64)), {2, 2}, {1, 2, 3, 4}));
  auto trainable = vec.embedding_for(vocab, /*freeze=*/false, /*padding_idx=*/0);
  EXPECT_TRUE(trainable->weight.requires_grad());
  EXPECT_EQ(trainable->padding_idx, std::optional<int64_t>(0));
  // The constructor copies: changing the caller's tensor later changes nothing.
  Tensor rows = tensor(std::vector<float>{1, 2}, {1, 2});
  text::Vectors own({"x"}, rows);
  rows.fill_(9);
  EXPECT_TRUE(tensor_is(own["x"], {2}, {1, 2}));
}

TEST(TextVectors, HostileFilesGiveIOErrorsWithTheLine) {
  auto expect = [](const std::string& bytes, std::initializer_list<std::string> frags) {
    text_files::expect_io_error([](const std::string& p) { text::Vectors::load(p); }, scratch_file("bad.txt", bytes),
                                frags);
  };
  expect("a 1 2\nb 3\n", {":2:", "'b'", "has 1 values", "first vector has 2"});
  expect("a 1 2\nb 3 x\n", {":2:", "not a number", "'x'"});
  expect("a 1 2\nb 3 4 5\n", {":2:", "has 3 values"});
  expect("a 1 2\nlonely\n", {":2:", "'lonely' has no vector"});
  expect("a 1 2\n\nb 3 4\n", {":2:", "empty line"});
  expect("", {":1:", "no vectors"});
  expect("a 1 2\nword 1e999 3\n", {":2:", "not a number", "'1e999'"});
  // word2vec headers: a huge count is only checked against the rows, never allocated.
  expect("99999999999 2\na 1 2\n", {":3:", "ends after 1 vectors", "declares 99999999999"});
  expect("1 2\na 1 2\nb 3 4\n", {":3:", "more vectors than the 1"});
  expect("2 3\na 1 2\n", {":2:", "has 2 values", "header declares 3"});
  expect("x 2\n", {":1:", "word2vec's header"});
  expect("5 0\n", {":1:", "word2vec's header"});
  EXPECT_TRUE(throws_with<IOError>([] { text::Vectors::load("/nonexistent/glove.txt"); }, {"/nonexistent/glove.txt"}));
}
