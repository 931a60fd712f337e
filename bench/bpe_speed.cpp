// Encoding speed of nabla::text::BytePairTokenizer on a corpus (one JSON string per line, as written
// by tests/text/make_corpus.py), single thread, in MB/s of UTF-8 input; bench/bpe_compare.js measures
// the npm references on the same corpus.
//
//   bpe_speed CORPUS.jsonl GPT2_ENCODER_JSON GPT2_VOCAB_BPE R50K.tiktoken CL100K.tiktoken [SECONDS]
//             [TOKENIZER.json ...]
//
// Each TOKENIZER.json (Hugging Face's format) is also measured through nabla::text::HfTokenizer
// (encode with add_special_tokens; bench/bpe_compare.js --hf measures @huggingface/tokenizers on the
// same files).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "text/bpe.h"
#include "text/hf_tokenizer.h"

using nabla::text::BytePairTokenizer;
using nabla::text::Pattern;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

template <class Tokenizer>
static void bench(const char* name, const Tokenizer& tok, const std::vector<std::string>& corpus, double min_seconds) {
  size_t bytes = 0, tokens = 0;
  for (const auto& s : corpus) bytes += s.size();
  // one warm-up pass, then whole passes until min_seconds
  auto count = [&](const std::string& s) {
    if constexpr (std::is_same_v<Tokenizer, BytePairTokenizer>) return tok.encode(s).size();
    else return tok.encode(s).ids.size();
  };
  for (const auto& s : corpus) tokens += count(s);
  int passes = 0;
  auto t0 = Clock::now();
  size_t sink = 0;
  do {
    for (const auto& s : corpus) sink += count(s);
    ++passes;
  } while (seconds_since(t0) < min_seconds);
  const double dt = seconds_since(t0);
  std::printf("%-22s %8.2f MB/s  (%d passes over %.2f MB, %zu tokens per pass, %.2f s)\n", name,
              double(bytes) * passes / dt / 1e6, passes, double(bytes) / 1e6, tokens, dt);
  if (sink == 42) std::puts("");
}

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: %s CORPUS.jsonl encoder.json vocab.bpe r50k_base.tiktoken cl100k_base.tiktoken [SECONDS]\n",
                 argv[0]);
    return 2;
  }
  const double min_seconds = argc > 6 ? std::atof(argv[6]) : 3.0;
  std::vector<std::string> corpus;
  std::ifstream in(argv[1]);
  for (std::string line; std::getline(in, line);) corpus.push_back(nlohmann::json::parse(line).get<std::string>());

  auto t = Clock::now();
  BytePairTokenizer gpt2 = BytePairTokenizer::from_gpt2_files(argv[2], argv[3]);
  std::printf("load gpt2 files       %8.3f s\n", seconds_since(t));
  t = Clock::now();
  BytePairTokenizer r50k = BytePairTokenizer::from_tiktoken_file(argv[4], Pattern::kGpt2, {{"<|endoftext|>", 50256}});
  std::printf("load r50k_base        %8.3f s\n", seconds_since(t));
  t = Clock::now();
  BytePairTokenizer cl100k =
      BytePairTokenizer::from_tiktoken_file(argv[5], Pattern::kCl100k, {{"<|endoftext|>", 100257}});
  std::printf("load cl100k_base      %8.3f s\n", seconds_since(t));

  for (Pattern p : {Pattern::kGpt2, Pattern::kCl100k}) {  // the pre-tokenizer alone
    size_t bytes = 0, pieces = 0;
    for (const auto& s : corpus) bytes += s.size();
    int passes = 0;
    auto t0 = Clock::now();
    do {
      for (const auto& s : corpus) pieces += nabla::text::pre_tokenize(s, p).size();
      ++passes;
    } while (seconds_since(t0) < min_seconds);
    std::printf("%-22s %8.2f MB/s  (pre-tokenizer only, %zu pieces per pass)\n",
                p == Pattern::kGpt2 ? "split gpt2 pattern" : "split cl100k pattern",
                double(bytes) * passes / seconds_since(t0) / 1e6, pieces / size_t(passes));
  }
  bench("nabla gpt2 files", gpt2, corpus, min_seconds);
  bench("nabla r50k_base", r50k, corpus, min_seconds);
  bench("nabla cl100k_base", cl100k, corpus, min_seconds);
  // One long document (the corpus joined by newlines) to show that speed does not fall with length.
  std::string all;
  for (const auto& s : corpus) all += s + "\n";
  std::vector<std::string> one{all};
  bench("nabla r50k one doc", r50k, one, min_seconds);
  bench("nabla cl100k one doc", cl100k, one, min_seconds);
  // The worst case for the merge loop: one 100 kB piece (a word of random lowercase letters), where a
  // quadratic merge loop (tiktoken's) slows down; here it takes the heap path.
  std::string word;
  uint32_t x = 1;
  for (int i = 0; i < 100000; ++i) {
    x = x * 1103515245u + 12345u;
    word += char('a' + (x >> 16) % 26);
  }
  std::vector<std::string> long_word{word};
  bench("nabla r50k 100kB word", r50k, long_word, min_seconds);
  for (int i = 7; i < argc; ++i) {
    const nabla::text::HfTokenizer hf = nabla::text::HfTokenizer::from_file(argv[i]);
    std::string name = std::filesystem::path(argv[i]).stem().string();
    bench(("nabla hf " + name).c_str(), hf, corpus, min_seconds);
  }
  return 0;
}
