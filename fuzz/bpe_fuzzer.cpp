// libFuzzer target: the byte-level BPE loaders and encoder on arbitrary bytes. The first byte picks:
//   0: GPT-2 / Hugging Face files: vocabulary JSON, a NUL byte, then merges text;
//   1: a tiktoken ranks file;
//   2: text encoded with a vocabulary trained on the text itself, both patterns, with and
//      without special tokens: decode(encode(x)) must equal x and the pieces must cover x.
// Loading may throw nabla::Error; anything else (a crash, another exception, a hang) is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "text/bpe.h"

using nabla::text::BytePairTokenizer;
using nabla::text::Pattern;

static void finding(const char* what) {
  std::fprintf(stderr, "bpe_fuzzer finding: %s\n", what);
  std::abort();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 3 == 0) {
      const size_t nul = in.find('\0');
      const std::string_view vocab = in.substr(0, nul);
      const std::string_view merges = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
      BytePairTokenizer tok = BytePairTokenizer::from_gpt2_strings(vocab, merges);
      const std::string probe = "Hello world's 123 \xff\xfe <|endoftext|>";
      if (tok.decode(tok.encode(probe)) != probe) finding("GPT-2 files: decode(encode(x)) != x");
    } else if (data[0] % 3 == 1) {
      BytePairTokenizer tok =
          BytePairTokenizer::from_tiktoken_string(in, Pattern::kCl100k, {{"<|endoftext|>", 100257}});
      const std::string probe = "Hello world's 123 \xff\xfe <|endoftext|>";
      if (tok.decode(tok.encode(probe)) != probe) finding("tiktoken ranks: decode(encode(x)) != x");
    } else {
      for (Pattern p : {Pattern::kGpt2, Pattern::kCl100k}) {
        std::string joined;
        for (std::string_view piece : nabla::text::pre_tokenize(in, p)) {
          if (piece.empty()) finding("empty piece");
          joined += piece;
        }
        if (joined != in) finding("pieces do not cover the text");
        BytePairTokenizer tok = nabla::text::train_bpe(in, 300, {.pattern = p, .special_tokens = {"<|x|>"}});
        if (tok.decode(tok.encode(in)) != in) finding("trained: decode(encode(x)) != x");
        nabla::text::EncodeOptions all{.allow_all_special = true};
        if (tok.decode(tok.encode(in, all)) != in) finding("trained, specials: decode(encode(x)) != x");
      }
    }
  } catch (const nabla::Error&) {}
  return 0;
}
