// CountVectorizer and TfidfVectorizer: known values worked out by hand, and a corpus run through
// scikit-learn itself (Debian's python3-sklearn, by /usr/bin/python3) under seven option sets, whose
// features, idf and matrices (train and unseen texts) nabla must give.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/ops.h"
#include "nn/embedding.h"
#include "tests/common/python_torch.h"
#include "tests/common/value_helpers.h"
#include "text/vectorizers.h"

using namespace nabla;
using nabla::testing::tensor_is;
using nabla::testing::throws_with;
using nabla::testing::values;
namespace fs = std::filesystem;
using json = nlohmann::json;

TEST(TextVectorizers, CountsAndTfidfByHand) {
  const std::vector<std::string> docs = {"a b b", "b c", "Aa, bb! aa"};
  text::CountVectorizer cv;
  // Default tokens: runs of two or more word characters, lowercased.
  EXPECT_TRUE(tensor_is(cv.fit_transform(docs), {3, 2}, {0, 0, 0, 0, 2, 1}));
  EXPECT_EQ(cv.get_feature_names_out(), (std::vector<std::string>{"aa", "bb"}));
  text::CountVectorizer words({.tokenizer = text::get_tokenizer("split")});
  EXPECT_TRUE(tensor_is(words.fit_transform({"a b b", "b c"}), {2, 3}, {1, 2, 0, 0, 1, 1}));
  // idf (smooth): ln(3/2)+1 for a and c, ln(3/3)+1 = 1 for b; rows l2-normalised.
  text::TfidfVectorizer tf({.tokenizer = text::get_tokenizer("split")});
  Tensor x = tf.fit_transform({"a b b", "b c"});
  const double ia = std::log(1.5) + 1, n0 = std::sqrt(ia * ia + 4), n1 = std::sqrt(1 + ia * ia);
  EXPECT_TRUE(tensor_is(x, {2, 3}, {ia / n0, 2 / n0, 0, 0, 1 / n1, ia / n1}, 1e-6));
  EXPECT_TRUE(throws_with<ValueError>([] { text::TfidfVectorizer({.norm = "l3"}); }, {"norm", "l3"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [] {
        text::CountVectorizer({.ngram_range = {2, 1}});
      },
      {"ngram_range", "(2, 1)"}));
  EXPECT_TRUE(throws_with<ValueError>([] { text::CountVectorizer({.max_df = 1.5}); }, {"max_df", "1.5"}));
  EXPECT_TRUE(throws_with<ValueError>([] { text::CountVectorizer().transform(std::vector<std::string>{"x"}); },
                                      {"not fitted"}));
  EXPECT_TRUE(
      throws_with<ValueError>([] { text::CountVectorizer({.min_df = 5}).fit(std::vector<std::string>{"aa bb"}); },
                              {"max_df corresponds to < documents than min_df"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [] {
        text::CountVectorizer({.min_df = 0.9}).fit({"aa bb", "cc"});
      },
      {"no terms remain"}));
}

namespace {

// The script: sklearn's vectorizers on the corpus and option sets of the spec file.
constexpr const char* kScript = R"(import json, sys
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
spec = json.load(open(sys.argv[1]))
out = []
for c in spec["configs"]:
    kw = dict(c["options"])
    if "ngram_range" in kw: kw["ngram_range"] = tuple(kw["ngram_range"])
    if kw.pop("split", False): kw.update(tokenizer=str.split, token_pattern=None, lowercase=False)
    v = (TfidfVectorizer if c["kind"] == "tfidf" else CountVectorizer)(**kw).fit(spec["train"])
    r = {"features": list(v.get_feature_names_out()), "train": v.transform(spec["train"]).toarray().tolist(),
         "test": v.transform(spec["test"]).toarray().tolist()}
    if c["kind"] == "tfidf" and v.use_idf: r["idf"] = v.idf_.tolist()
    out.append(r)
json.dump(out, open(sys.argv[2], "w"))
)";

// The options nabla takes for one option set of the spec.
template <class O>
O options_from(const json& j) {
  O o;
  if (j.contains("ngram_range")) o.ngram_range = {j["ngram_range"][0], j["ngram_range"][1]};
  auto df = [](const json& v) {
    return v.is_number_integer() ? text::DocFrequency(v.get<int64_t>()) : text::DocFrequency(v.get<double>());
  };
  if (j.contains("min_df")) o.min_df = df(j["min_df"]);
  if (j.contains("max_df")) o.max_df = df(j["max_df"]);
  if (j.contains("max_features")) o.max_features = j["max_features"].get<int64_t>();
  if (j.contains("binary")) o.binary = j["binary"];
  if (j.value("split", false)) {
    o.tokenizer = text::get_tokenizer("split");
    o.lowercase = false;
  }
  if constexpr (std::is_same_v<O, text::TfidfVectorizerOptions>) {
    if (j.contains("norm")) o.norm = j["norm"].is_null() ? "none" : j["norm"].get<std::string>();
    if (j.contains("use_idf")) o.use_idf = j["use_idf"];
    if (j.contains("smooth_idf")) o.smooth_idf = j["smooth_idf"];
    if (j.contains("sublinear_tf")) o.sublinear_tf = j["sublinear_tf"];
  }
  return o;
}

std::vector<double> flat(const json& m) {
  std::vector<double> v;
  for (const auto& row : m)
    for (const auto& x : row) v.push_back(x);
  return v;
}

// The EmbeddingBag input of the rows gives back the dense rows through an identity weight (mode sum).
void expect_bags_match(const text::EmbeddingBagInput& bags, const Tensor& dense) {
  const int64_t F = dense.size(1);
  nn::EmbeddingBag bag(F, F, {.mode = "sum"});
  bag.weight.detach().copy_(eye(F));
  EXPECT_TRUE(tensor_is(bag.forward(bags.input, bags.offsets, bags.per_sample_weights), {dense.size(0), F},
                        values(dense), 1e-6));
}

template <class V>
void compare(V& v, const json& spec, const json& want, const std::string& what) {
  const auto train = spec["train"].get<std::vector<std::string>>();
  const auto test = spec["test"].get<std::vector<std::string>>();
  v.fit(train);
  EXPECT_EQ(v.get_feature_names_out(), want["features"].get<std::vector<std::string>>()) << what;
  const int64_t F = v.num_features();
  EXPECT_TRUE(tensor_is(v.transform(train), {int64_t(train.size()), F}, flat(want["train"]), 1e-6, 1e-6)) << what;
  Tensor dense_test = v.transform(test);
  EXPECT_TRUE(tensor_is(dense_test, {int64_t(test.size()), F}, flat(want["test"]), 1e-6, 1e-6)) << what;
  expect_bags_match(v.transform_bags(test), dense_test);
  if constexpr (std::is_same_v<V, text::TfidfVectorizer>) {
    if (want.contains("idf")) {
      const auto idf = want["idf"].get<std::vector<double>>();
      ASSERT_EQ(v.idf().size(), idf.size()) << what;
      for (size_t i = 0; i < idf.size(); ++i) EXPECT_NEAR(v.idf()[i], idf[i], 1e-12) << what << " idf " << i;
    }
  }
}

}  // namespace

TEST(TextVectorizers, MatchScikitLearn) {
  NABLA_NEEDS_PYTHON_MODULES("sklearn");
  const json spec = json::parse(R"({
    "train": ["The cat sat on the mat.", "The dog sat on the log!", "Cats and dogs: the cat, the dog, the end.",
              "A bird flew over the dog", "The mat was red; the log was brown.", "Dogs chase cats, cats chase birds",
              "I saw a cat", "x y z the"],
    "test": ["The cat and the bird", "unseen words only", "", "dog dog dog cat"],
    "configs": [
      {"kind": "tfidf", "options": {}},
      {"kind": "tfidf", "options": {"ngram_range": [1, 2], "min_df": 2, "sublinear_tf": true, "norm": "l1"}},
      {"kind": "tfidf", "options": {"max_df": 0.5, "smooth_idf": false, "norm": null}},
      {"kind": "tfidf", "options": {"max_features": 4, "use_idf": false}},
      {"kind": "tfidf", "options": {"split": true, "min_df": 0.2, "max_df": 3}},
      {"kind": "count", "options": {"ngram_range": [2, 3], "binary": true}},
      {"kind": "count", "options": {"max_df": 2}}]})");
  const fs::path dir = fs::temp_directory_path() / ("nabla_test_sklearn_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "spec.json") << spec.dump();
  std::ofstream(dir / "ref.py") << kScript;
  const std::string cmd = std::string("/usr/bin/python3 ") + (dir / "ref.py").string() + " " +
                          (dir / "spec.json").string() + " " + (dir / "out.json").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const json ref = json::parse(std::ifstream(dir / "out.json"));
  fs::remove_all(dir);
  ASSERT_EQ(ref.size(), spec["configs"].size());
  for (size_t i = 0; i < ref.size(); ++i) {
    const json& c = spec["configs"][i];
    const std::string what = "option set " + std::to_string(i) + ": " + c.dump();
    if (c["kind"] == "tfidf") {
      text::TfidfVectorizer v(options_from<text::TfidfVectorizerOptions>(c["options"]));
      compare(v, spec, ref[i], what);
    } else {
      text::CountVectorizer v(options_from<text::CountVectorizerOptions>(c["options"]));
      compare(v, spec, ref[i], what);
    }
  }
}
