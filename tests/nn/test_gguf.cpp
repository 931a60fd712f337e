// GGUF: gguf::Writer's bytes read back field by field (the layout of ggml's gguf.h, version 3), its
// errors, and a GPT-2 written by nn::save_gpt2_gguf run in llama.cpp (npm's node-llama-cpp, its
// prebuilt CPU build), whose next-token probabilities must be nabla's at every position.
//
// The llama.cpp test needs node and node-llama-cpp 3.21.1 in $NABLA_LLAMA_CPP_NODE_MODULES, else
// <repo>/.deps/llama-cpp/node_modules (scripts/test.sh installs it there); without them it skips,
// unless NABLA_REQUIRE_LLAMA_CPP=1 makes it fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "io/gguf.h"
#include "nabla.h"

#ifndef NABLA_TESTS_DIR
#error "NABLA_TESTS_DIR must name the repository's tests/ folder"
#endif

using namespace nabla;
namespace fs = std::filesystem;

namespace {

// A reader of just what the tests need, written from the format's description (not from the writer).
struct Reader {
  const std::vector<char>& b;
  size_t at = 0;
  template <class T>
  T get() {
    T v;
    EXPECT_LE(at + sizeof(T), b.size());
    std::memcpy(&v, b.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::string str() {
    const uint64_t n = get<uint64_t>();
    std::string s(b.data() + at, n);
    at += n;
    return s;
  }
};

struct Parsed {
  std::map<std::string, std::string> strings;
  std::map<std::string, uint32_t> u32;
  std::map<std::string, float> f32;
  std::map<std::string, std::vector<std::string>> string_arrays;
  std::map<std::string, std::vector<int32_t>> i32_arrays;
  struct Info {
    std::vector<uint64_t> dims;
    uint32_t type;
    uint64_t offset;
  };
  std::map<std::string, Info> tensors;
  size_t data_start = 0;
};

Parsed parse(const std::vector<char>& bytes) {
  Parsed p;
  Reader r{bytes};
  EXPECT_EQ(std::string(bytes.data(), 4), "GGUF");
  r.at = 4;
  EXPECT_EQ(r.get<uint32_t>(), 3u);
  const uint64_t tensors = r.get<uint64_t>(), kvs = r.get<uint64_t>();
  for (uint64_t i = 0; i < kvs; ++i) {
    const std::string key = r.str();
    const uint32_t type = r.get<uint32_t>();
    if (type == 4) p.u32[key] = r.get<uint32_t>();
    else if (type == 6) p.f32[key] = r.get<float>();
    else if (type == 8) p.strings[key] = r.str();
    else if (type == 7) p.u32[key] = r.get<uint8_t>();
    else if (type == 9) {
      const uint32_t elem = r.get<uint32_t>();
      const uint64_t n = r.get<uint64_t>();
      for (uint64_t j = 0; j < n; ++j) {
        if (elem == 8) p.string_arrays[key].push_back(r.str());
        else if (elem == 5) p.i32_arrays[key].push_back(r.get<int32_t>());
        else ADD_FAILURE() << "array of type " << elem;
      }
    } else {
      ADD_FAILURE() << key << ": type " << type;
    }
  }
  for (uint64_t i = 0; i < tensors; ++i) {
    const std::string name = r.str();
    Parsed::Info info;
    const uint32_t n = r.get<uint32_t>();
    for (uint32_t d = 0; d < n; ++d) info.dims.push_back(r.get<uint64_t>());
    info.type = r.get<uint32_t>();
    info.offset = r.get<uint64_t>();
    p.tensors[name] = info;
  }
  p.data_start = (r.at + 31) / 32 * 32;
  return p;
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

}  // namespace

TEST(Gguf, WriterLayoutReadsBack) {
  gguf::Writer w;
  w.add_string("general.architecture", "gpt2");
  w.add_u32("gpt2.block_count", 3);
  w.add_f32("gpt2.attention.layer_norm_epsilon", 1e-5f);
  w.add_bool("flag", true);
  w.add_strings("names", {"a", "", "\xc4\xa0world"});
  w.add_i32s("types", {1, 3, -2});
  const Tensor m = arange(12, kFloat32).view({3, 4}), v = arange(5, kFloat32).to(kFloat16);
  w.add_tensor("m", m);
  w.add_tensor("v", v);
  w.add_tensor("t", m.t());  // a transposed view is written as its values, row-major
  EXPECT_EQ(w.num_metadata(), 6u);
  EXPECT_EQ(w.num_tensors(), 3u);
  const std::vector<char> bytes = w.serialize();
  const Parsed p = parse(bytes);
  EXPECT_EQ(p.strings.at("general.architecture"), "gpt2");
  EXPECT_EQ(p.u32.at("gpt2.block_count"), 3u);
  EXPECT_EQ(p.u32.at("flag"), 1u);
  EXPECT_FLOAT_EQ(p.f32.at("gpt2.attention.layer_norm_epsilon"), 1e-5f);
  EXPECT_EQ(p.string_arrays.at("names"), (std::vector<std::string>{"a", "", "\xc4\xa0world"}));
  EXPECT_EQ(p.i32_arrays.at("types"), (std::vector<int32_t>{1, 3, -2}));
  // Dimensions innermost first; F32 = 0, F16 = 1; offsets aligned to 32 from the aligned data start.
  EXPECT_EQ(p.tensors.at("m").dims, (std::vector<uint64_t>{4, 3}));
  EXPECT_EQ(p.tensors.at("m").type, 0u);
  EXPECT_EQ(p.tensors.at("v").dims, (std::vector<uint64_t>{5}));
  EXPECT_EQ(p.tensors.at("v").type, 1u);
  EXPECT_EQ(p.tensors.at("t").dims, (std::vector<uint64_t>{3, 4}));
  for (const auto& [name, info] : p.tensors) EXPECT_EQ(info.offset % 32, 0u) << name;
  auto floats = [&](const std::string& name, size_t n) {
    std::vector<float> f(n);
    std::memcpy(f.data(), bytes.data() + p.data_start + p.tensors.at(name).offset, n * 4);
    return f;
  };
  EXPECT_EQ(floats("m", 12), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(floats("t", 12), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  uint16_t half[5];
  std::memcpy(half, bytes.data() + p.data_start + p.tensors.at("v").offset, 10);
  EXPECT_EQ(half[0], 0x0000);
  EXPECT_EQ(half[1], 0x3C00);  // 1.0 in IEEE half
  EXPECT_EQ(half[4], 0x4400);  // 4.0
  EXPECT_EQ(bytes.size() % 32, 0u);
}

TEST(Gguf, ErrorsNameTheProblem) {
  gguf::Writer w;
  w.add_u32("k", 1);
  EXPECT_THROW(w.add_u32("k", 2), ValueError);
  w.add_tensor("x", ones({2}));
  EXPECT_THROW(w.add_tensor("x", ones({2})), ValueError);
  try {
    w.add_tensor("ids", arange(3, kInt64));
    FAIL() << "int64 accepted";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'ids' is int64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(w.add_tensor("big", ones({1, 1, 1, 1, 2})), ShapeError);
  EXPECT_THROW(w.add_bpe_vocab({.tokens = {"a", "b"}, .token_types = {1}}), ValueError);
  EXPECT_THROW(w.add_bpe_vocab({.tokens = {"a"}, .token_types = {1}, .eos_id = 4}), ValueError);
  nn::GPT2LMHeadModel gpt({.vocab_size = 10, .n_positions = 8, .n_embd = 8, .n_layer = 1, .n_head = 2});
  try {
    nn::save_gpt2_gguf(gpt, {.tokens = {"a"}, .token_types = {1}}, "/tmp/never.gguf");
    FAIL() << "a vocabulary of the wrong size accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("1 tokens but the model's vocab_size is 10"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists("/tmp/never.gguf"));
}

// BytePairTokenizer::gguf_vocab: one token per id in GPT-2's spelling, the special token as its text
// with type 3 (and as bos/eos), the merges in rank order; tiktoken ranks (no merge list) refused.
TEST(Gguf, BpeVocabOfATokenizer) {
  const text::BytePairTokenizer tok = text::train_bpe("hello world, hello there, hello world", 280,
                                                      {.special_tokens = {"<|endoftext|>"}, .min_frequency = 1});
  const gguf::BpeVocab v = tok.gguf_vocab();
  ASSERT_EQ(v.tokens.size(), static_cast<size_t>(tok.vocab_size()));
  ASSERT_EQ(v.token_types.size(), v.tokens.size());
  EXPECT_EQ(v.merges.size(), tok.num_merges());
  EXPECT_EQ(v.tokens[' '], "\xc4\xa0");  // byte 0x20 is U+0120 in GPT-2's map
  EXPECT_EQ(v.tokens['h'], "h");
  const int32_t eot = tok.special_tokens().at("<|endoftext|>");
  EXPECT_EQ(v.tokens[size_t(eot)], "<|endoftext|>");
  EXPECT_EQ(v.token_types[size_t(eot)], 3);
  EXPECT_EQ(v.token_types['h'], 1);
  EXPECT_EQ(v.bos_id, eot);
  EXPECT_EQ(v.eos_id, eot);
  // Each merge joins two tokens into a token of the vocabulary.
  for (const std::string& m : v.merges) {
    const size_t sp = m.find(' ');
    ASSERT_NE(sp, std::string::npos) << m;
    EXPECT_NE(std::find(v.tokens.begin(), v.tokens.end(), m.substr(0, sp) + m.substr(sp + 1)), v.tokens.end()) << m;
  }
  std::string ranks_file;  // a tiktoken ranks file of the 256 bytes ("base64 rank" lines)
  const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int b = 0; b < 256; ++b)
    ranks_file += std::string{b64[b >> 2], b64[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
  ranks_file += "aGk= 256\n";  // "hi": a merged token, and no merge list to say how
  const text::BytePairTokenizer ranks =
      text::BytePairTokenizer::from_tiktoken_string(ranks_file, text::Pattern::kGpt2, {});
  EXPECT_THROW(ranks.gguf_vocab(), ValueError);
}

// A GPT-2 with random weights and a BPE vocabulary trained here, written by save_gpt2_gguf, runs in
// llama.cpp: at every position of a 21-token text the next-token probabilities are nabla's (to the
// float16 of llama.cpp's KV cache and its GELU: 3e-3 relative for the tokens above 1e-3, 1e-5
// absolute), and the most likely token is the same.
TEST(Gguf, Gpt2RunsInLlamaCppWithNablasProbabilities) {
  const fs::path mods =
      env_or("NABLA_LLAMA_CPP_NODE_MODULES",
             (fs::path(NABLA_TESTS_DIR).parent_path() / ".deps" / "llama-cpp" / "node_modules").string());
  if (!fs::exists(mods / "node-llama-cpp" / "package.json")) {
    const std::string why = "node-llama-cpp not found in " + mods.string() + " (scripts/test.sh installs it)";
    if (env_or("NABLA_REQUIRE_LLAMA_CPP", "") == "1") FAIL() << why << " (NABLA_REQUIRE_LLAMA_CPP=1)";
    GTEST_SKIP() << why;
  }
  const fs::path dir = fs::temp_directory_path() / ("nabla_test_gguf_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog " + std::to_string(i) + ". ";
  const text::BytePairTokenizer tok = text::train_bpe(text, 400, {.special_tokens = {"<|endoftext|>"}});
  const nn::GPT2Config c{.vocab_size = tok.vocab_size(), .n_positions = 64, .n_embd = 64, .n_layer = 2, .n_head = 4};
  manual_seed(3);
  nn::GPT2LMHeadModel gpt(c);
  {
    NoGradGuard no_grad;
    for (Tensor& p : gpt.parameters())
      if (p.dim() >= 2) p.mul_(4.0);  // sharper distributions than the 0.02-std initialization gives
  }
  gpt.eval();
  nn::save_gpt2_gguf(gpt, tok.gguf_vocab(), (dir / "m.gguf").string());
  std::vector<int32_t> ids = tok.encode("the quick brown fox jumps over the lazy dog 17. the lazy dog 3. the fox 123.");
  ids.resize(std::min<size_t>(ids.size(), 40));
  std::ofstream(dir / "ids.json") << nlohmann::json(ids).dump();
  const std::string cmd = env_or("NABLA_NODE", "node") + " '" + NABLA_TESTS_DIR + "/nn/llama_cpp_probs.mjs' '" +
                          mods.string() + "' '" + (dir / "m.gguf").string() + "' " + std::to_string(c.vocab_size) +
                          " '" + (dir / "ids.json").string() + "' '" + (dir / "out.json").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir / "out.json");
  const auto probs = nlohmann::json::parse(in).at("probs").get<std::vector<std::vector<double>>>();
  ASSERT_EQ(probs.size(), ids.size());
  NoGradGuard no_grad;
  const Tensor x = tensor(std::vector<int64_t>(ids.begin(), ids.end()), kInt64).unsqueeze(0);
  const Tensor want = gpt.forward(x).squeeze(0).to(kFloat64).softmax(-1).contiguous();
  double max_abs = 0, max_rel = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    ASSERT_EQ(probs[t].size(), static_cast<size_t>(c.vocab_size));
    const double* w = want.data_ptr<double>() + t * static_cast<size_t>(c.vocab_size);
    int64_t best_nabla = 0, best_llama = 0;
    for (int64_t v = 0; v < c.vocab_size; ++v) {
      const double a = w[v], b = probs[t][size_t(v)];
      max_abs = std::max(max_abs, std::abs(a - b));
      if (a > 1e-3) max_rel = std::max(max_rel, std::abs(a - b) / a);
      if (a > w[best_nabla]) best_nabla = v;
      if (b > probs[t][size_t(best_llama)]) best_llama = v;
    }
    EXPECT_EQ(best_llama, best_nabla) << "position " << t;
  }
  std::printf("[gguf] llama.cpp vs nabla over %zu positions: max |dp| %.2e, max relative %.2e\n", ids.size(), max_abs,
              max_rel);
  EXPECT_LT(max_abs, 1e-4);
  EXPECT_LT(max_rel, 3e-3);
  fs::remove_all(dir);
}
