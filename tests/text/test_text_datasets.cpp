// CSV text classification data (AG_NEWS's format and RFC 4180's quoting), hostile CSV files, and
// the collate helpers checked against pack_padded_sequence.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/ops.h"
#include "nn/rnn_utils.h"
#include "tests/common/value_helpers.h"
#include "tests/text/file_helpers.h"
#include "text/datasets.h"

using namespace nabla;
using nabla::testing::int_values;
using nabla::testing::tensor_is;
using nabla::testing::throws_with;
namespace fs = std::filesystem;
using Records = std::vector<std::vector<std::string>>;

namespace {
std::string scratch_file(const std::string& name, const std::string& bytes) {
  return text_files::scratch_file("text_data", name, bytes);
}
}  // namespace

TEST(TextDatasets, CsvQuotingIsRfc4180) {
  EXPECT_EQ(text::parse_csv("a,b\r\n\"c,d\",\"say \"\"hi\"\"\"\n\n\"multi\nline\",\n,x"),
            (Records{{"a", "b"}, {"c,d", "say \"hi\""}, {"multi\nline", ""}, {"", "x"}}));
  EXPECT_EQ(text::parse_csv("a\tb,c\n", '\t'), (Records{{"a", "b,c"}}));
}

TEST(TextDatasets, AgNewsRowsGiveLabelAndJoinedText) {
  const auto path = scratch_file(
      "train.csv",
      "\"3\",\"Wall St. Bears Claw Back (Reuters)\",\"Reuters - Short-sellers, Wall Street's \"\"dwindling\"\" band\"\n"
      "\"4\",\"Title\",\"line one\nline two\"\r\n"
      "\"1\",\"\",\"no title\"\n");
  text::TextClassificationDataset data(path);
  ASSERT_EQ(data.size(), 3);
  auto [label, body] = data.get(0);
  EXPECT_EQ(label, 3);
  EXPECT_EQ(body, "Wall St. Bears Claw Back (Reuters) Reuters - Short-sellers, Wall Street's \"dwindling\" band");
  EXPECT_EQ(data.get(1).text, "Title line one\nline two");
  EXPECT_EQ(data.get(2).text, " no title");  // torchtext's " ".join(row[1:]) keeps the empty title
  EXPECT_EQ(data.classes(), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_TRUE(throws_with<IndexError>([&] { data.get(3); }, {"index 3", "size 3"}));
  const auto tsv = scratch_file("t.tsv", "text\tlabel\nhello world\t0\nbye\t1\n");
  text::TextClassificationDataset t(tsv, {.delimiter = '\t', .header = true, .label_column = 1});
  EXPECT_EQ(t.labels(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(t.texts(), (std::vector<std::string>{"hello world", "bye"}));
}

TEST(TextDatasets, HostileCsvGivesIOErrorsWithTheLine) {
  auto expect = [](const std::string& bytes, std::initializer_list<std::string> frags) {
    text_files::expect_io_error([](const std::string& p) { text::TextClassificationDataset{p}; },
                                scratch_file("bad.csv", bytes), frags);
  };
  expect("1,ok\n2,\"never closed\n3,x\n", {":2:", "never closed"});
  expect("1,ok\n2,\"closed\"junk\n", {":2:", "after a closing quote"});
  expect("1,ok\n2,un\"quoted\n", {":2:", "quote inside an unquoted field"});
  expect("1,ok\n\"2\",\"multi\nline\"\nseven,text\n", {":4:", "not an integer", "'seven'"});
  expect("1,ok\n\n2\n", {":3:", "1 field(s)"});
  expect("99999999999999999999,x\n", {":1:", "not an integer"});
  EXPECT_TRUE(throws_with<IOError>([] { text::TextClassificationDataset("/nonexistent/train.csv"); },
                                   {"/nonexistent/train.csv"}));
}

TEST(TextDatasets, PaddedBatchPacksAsPackPaddedSequence) {
  const std::vector<std::vector<int64_t>> ids = {{5, 2}, {7, 8, 9}, {4}, {3, 6, 1}};
  EXPECT_TRUE(tensor_is(text::to_tensor(ids, 0), {4, 3}, {5, 2, 0, 7, 8, 9, 4, 0, 0, 3, 6, 1}));
  auto b = text::pad_token_ids(ids, /*padding_value=*/-1);
  EXPECT_TRUE(tensor_is(b.padded, {4, 3}, {5, 2, -1, 7, 8, 9, 4, -1, -1, 3, 6, 1}));
  EXPECT_EQ(int_values(b.lengths), (std::vector<int64_t>{2, 3, 1, 3}));
  EXPECT_EQ(int_values(b.sorted_indices), (std::vector<int64_t>{1, 3, 0, 2}));
  auto packed = nn::utils::rnn::pack_padded_sequence(b.padded, b.lengths, /*batch_first=*/true, false);
  EXPECT_EQ(int_values(packed.sorted_indices), int_values(b.sorted_indices));
  EXPECT_EQ(int_values(packed.data), (std::vector<int64_t>{7, 3, 5, 4, 8, 6, 2, 9, 1}));
  auto tb = text::pad_token_ids(ids, 0, /*batch_first=*/false, /*max_length=*/2);
  EXPECT_TRUE(tensor_is(tb.padded, {2, 4}, {5, 7, 4, 3, 2, 8, 0, 6}));
  EXPECT_EQ(int_values(tb.lengths), (std::vector<int64_t>{2, 2, 1, 2}));
  auto bag = text::bag_token_ids({{1, 2}, {}, {3}});
  EXPECT_EQ(int_values(bag.input), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(int_values(bag.offsets), (std::vector<int64_t>{0, 2, 2}));
  EXPECT_TRUE(throws_with<ValueError>([] { text::pad_token_ids({{1}, {}}); }, {"sequence 1 is empty"}));
  EXPECT_TRUE(throws_with<ValueError>([] { text::pad_token_ids({}); }, {"empty batch"}));
}
