// nabla::text::SentencePieceTokenizer over Debian's libsentencepiece: models trained in memory (unigram,
// BPE, char, word), encoding and decoding on a 3,000-sentence corpus, the special ids, byte fallback,
// n-best and sampled segmentations, saving and loading, and hostile model files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "text/sentencepiece/sentencepiece.h"

namespace fs = std::filesystem;
using nabla::text::SentencePieceTokenizer;
using nabla::text::train_sentencepiece;

namespace {

// A deterministic corpus: sentences of common English words, 400 made-up words of 2-4 syllables,
// numbers, punctuation, accented and non-Latin words.
const std::vector<std::string>& corpus() {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> words = {
        "the",    "of",      "and",      "tokenizer", "model", "training", "sentence", "piece",  "unigram", "language",
        "neural", "network", "gradient", "tensor",    "is",    "a",        "to",       "in",     "with",    "for",
        "learns", "words",   "from",     "text",      "café",  "naïve",    "über",     "Москва", "東京",    "données",
        "2024",   "3.14",    "C++",      "don't",     "it's",  "hello,",   "world!",   "(yes)",  "e-mail",  "x86_64"};
    const std::vector<std::string> syllables = {"ka",  "lo",  "mi",  "ne", "ru",  "sta", "pri", "on", "el", "dor",
                                                "vin", "tes", "qua", "zu", "bre", "ish", "ent", "al", "ux", "gro"};
    std::mt19937 rng(7);
    for (int i = 0; i < 400; ++i) {
      std::string w;
      for (int k = 0, n = 2 + static_cast<int>(rng() % 3); k < n; ++k) w += syllables[rng() % syllables.size()];
      words.push_back(w);
    }
    std::vector<std::string> out;
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      const int n = 3 + static_cast<int>(rng() % 12);
      for (int w = 0; w < n; ++w) s += (w ? " " : "") + words[rng() % words.size()];
      out.push_back(s);
    }
    return out;
  }();
  return lines;
}

const SentencePieceTokenizer& unigram() {
  static const SentencePieceTokenizer t = train_sentencepiece(corpus(), {.vocab_size = 400, .character_coverage = 1.0});
  return t;
}

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("nabla_sentencepiece_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) { return e.what(); }
  return "";
}

}  // namespace

// Every sentence of the corpus round-trips (the default nmt_nfkc normalization leaves this text as it
// is), pieces and ids agree, and the special ids are SentencePiece's defaults.
TEST(SentencePiece, UnigramModelRoundTripsTheCorpus) {
  const SentencePieceTokenizer& sp = unigram();
  EXPECT_EQ(sp.vocab_size(), 400);
  EXPECT_EQ(sp.unk_id(), 0);
  EXPECT_EQ(sp.bos_id(), 1);
  EXPECT_EQ(sp.eos_id(), 2);
  EXPECT_EQ(sp.pad_id(), -1);
  EXPECT_EQ(sp.id_to_piece(0), "<unk>");
  EXPECT_EQ(sp.id_to_piece(1), "<s>");
  EXPECT_TRUE(sp.is_control(1));
  EXPECT_TRUE(sp.is_unknown(0));
  EXPECT_FALSE(sp.is_control(5));
  size_t tokens = 0;
  for (const std::string& line : corpus()) {
    const std::vector<int32_t> ids = sp.encode(line);
    const std::vector<std::string> pieces = sp.encode_pieces(line);
    ASSERT_EQ(ids.size(), pieces.size()) << line;
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_EQ(sp.id_to_piece(ids[i]), pieces[i]) << line;
      ASSERT_EQ(sp.piece_to_id(pieces[i]), ids[i]) << line;
      ASSERT_NE(ids[i], sp.unk_id()) << line << ": '" << pieces[i] << "'";
    }
    ASSERT_EQ(sp.decode(ids), line);
    ASSERT_EQ(sp.decode_pieces(pieces), line);
    tokens += ids.size();
  }
  std::printf("[sentencepiece] 3000 sentences -> %zu unigram tokens\n", tokens);
  // Frequent words are whole pieces, with the word-boundary mark U+2581.
  const std::vector<std::string> pieces = sp.encode_pieces("the tokenizer");
  EXPECT_EQ(pieces.front(), "\xe2\x96\x81the");
  EXPECT_EQ(sp.piece_to_id("no such piece"), sp.unk_id());
}

TEST(SentencePiece, BosEosAndReverseAsPythonsEncode) {
  const SentencePieceTokenizer& sp = unigram();
  const std::string s = "the neural network learns";
  const std::vector<int32_t> plain = sp.encode(s);
  std::vector<int32_t> want = plain;
  want.insert(want.begin(), 1);
  want.push_back(2);
  EXPECT_EQ(sp.encode(s, {.add_bos = true, .add_eos = true}), want);
  std::vector<int32_t> reversed(plain.rbegin(), plain.rend());
  EXPECT_EQ(sp.encode(s, {.reverse = true}), reversed);
  const std::vector<std::string> pieces = sp.encode_pieces(s, {.add_bos = true});
  EXPECT_EQ(pieces.front(), "<s>");
  // Control ids decode to nothing.
  EXPECT_EQ(sp.decode(want), s);
}

// The n-best list starts with the best segmentation; samples are seeded, valid segmentations of the
// same text, and (for a unigram model at alpha 0.1) not always the best one.
TEST(SentencePiece, NbestAndSampledSegmentations) {
  const SentencePieceTokenizer& sp = unigram();
  const std::string s = "training the language model with gradient";
  const std::vector<std::vector<int32_t>> nbest = sp.nbest_encode(s, 5);
  ASSERT_GE(nbest.size(), 2u);
  EXPECT_EQ(nbest[0], sp.encode(s));
  for (const auto& ids : nbest) EXPECT_EQ(sp.decode(ids), s);
  EXPECT_NE(nbest[0], nbest[1]);
  // The library draws from a generator of each thread, seeded when the thread first draws: a thread
  // started after set_sentencepiece_seed(11) draws the same segmentations as another one.
  auto draws = [&] {
    std::vector<std::vector<int32_t>> v;
    std::thread([&] {
      for (int i = 0; i < 40; ++i) v.push_back(sp.sample_encode(s, -1, 0.1f));
    }).join();
    return v;
  };
  nabla::text::set_sentencepiece_seed(11);
  const std::vector<std::vector<int32_t>> first = draws(), again = draws();
  EXPECT_EQ(first, again);
  std::set<std::vector<int32_t>> distinct(first.begin(), first.end());
  EXPECT_GT(distinct.size(), 1u);
  for (const auto& ids : first) EXPECT_EQ(sp.decode(ids), s);
  nabla::text::set_sentencepiece_seed(12);
  EXPECT_NE(draws(), first);
  EXPECT_THROW(sp.nbest_encode(s, 0), nabla::ValueError);
}

// BPE, char and word models; byte fallback turns unseen characters into byte pieces, not <unk>.
TEST(SentencePiece, OtherModelTypesAndByteFallback) {
  const SentencePieceTokenizer bpe = train_sentencepiece(corpus(), {.vocab_size = 600, .model_type = "bpe"});
  const SentencePieceTokenizer chars =
      train_sentencepiece(corpus(), {.vocab_size = 60, .model_type = "char", .character_coverage = 1.0});
  const SentencePieceTokenizer words = train_sentencepiece(corpus(), {.vocab_size = 100, .model_type = "word"});
  for (const std::string& line : {corpus()[0], corpus()[1], corpus()[2]}) {
    EXPECT_EQ(bpe.decode(bpe.encode(line)), line);
    EXPECT_EQ(chars.decode(chars.encode(line)), line);
  }
  // A word model has one piece per word: the 97 most frequent words, the rest <unk> (a run of unknown
  // words is one <unk>).
  const std::string w3 = words.id_to_piece(3).substr(3), w4 = words.id_to_piece(4).substr(3);  // without U+2581
  EXPECT_EQ(words.encode(w3 + " " + w4), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(words.encode(w3 + " qqqq zzzz"), (std::vector<int32_t>{3, words.unk_id()}));
  const std::string unseen = "the \xf0\x9f\x99\x82";  // an emoji the corpus never had
  const std::vector<int32_t> with_unk = unigram().encode(unseen);
  EXPECT_EQ(with_unk.back(), unigram().unk_id());
  const SentencePieceTokenizer fallback = train_sentencepiece(corpus(), {.vocab_size = 450, .byte_fallback = true});
  const std::vector<std::string> pieces = fallback.encode_pieces(unseen);
  ASSERT_GE(pieces.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(pieces.end() - 4, pieces.end()),
            (std::vector<std::string>{"<0xF0>", "<0x9F>", "<0x99>", "<0x82>"}));
  EXPECT_TRUE(fallback.is_byte(fallback.piece_to_id("<0xF0>")));
  EXPECT_EQ(fallback.decode(fallback.encode(unseen)), unseen);
  // User-defined symbols stay whole; split_digits cuts numbers into digits.
  const SentencePieceTokenizer sym = train_sentencepiece(
      corpus(), {.vocab_size = 400, .split_digits = true, .user_defined_symbols = {"<tool>", "[MASK]"}});
  const std::vector<std::string> p = sym.encode_pieces("the <tool> 2024");
  EXPECT_NE(std::find(p.begin(), p.end(), "<tool>"), p.end());
  EXPECT_NE(std::find(p.begin(), p.end(), "2"), p.end());
  EXPECT_NE(std::find(p.begin(), p.end(), "4"), p.end());
}

TEST(SentencePiece, SavesAndLoadsTheSameModel) {
  const fs::path d = temp_dir();
  const std::string path = (d / "m.model").string();
  unigram().save(path);
  const SentencePieceTokenizer back = SentencePieceTokenizer::from_file(path);
  EXPECT_EQ(back.vocab_size(), unigram().vocab_size());
  for (size_t i = 0; i < 300; ++i) ASSERT_EQ(back.encode(corpus()[i]), unigram().encode(corpus()[i]));
  for (int32_t id = 0; id < back.vocab_size(); ++id) ASSERT_EQ(back.score(id), unigram().score(id));
  EXPECT_EQ(back.serialized_model(), unigram().serialized_model());
  fs::remove_all(d);
}

// Bad input gets a clear error: missing, empty, garbage and truncated model files; ids outside the
// vocabulary (the library would abort on some); impossible training options.
TEST(SentencePiece, HostileFilesAndBadArgumentsGiveClearErrors) {
  const fs::path d = temp_dir();
  const std::string missing = error_of([&] { SentencePieceTokenizer::from_file((d / "none.model").string()); });
  EXPECT_NE(missing.find("none.model"), std::string::npos) << missing;
  std::ofstream(d / "garbage.model", std::ios::binary) << std::string(1000, '\xff');
  const std::string garbage = error_of([&] { SentencePieceTokenizer::from_file((d / "garbage.model").string()); });
  EXPECT_NE(garbage.find("cannot load the SentencePiece model '" + (d / "garbage.model").string()), std::string::npos)
      << garbage;
  std::ofstream(d / "empty.model").close();
  EXPECT_THROW(SentencePieceTokenizer::from_file((d / "empty.model").string()), nabla::IOError);
  const std::string proto = unigram().serialized_model();
  for (size_t cut : {proto.size() / 2, proto.size() - 1, size_t(3)}) {
    std::ofstream(d / "cut.model", std::ios::binary) << proto.substr(0, cut);
    EXPECT_THROW(SentencePieceTokenizer::from_file((d / "cut.model").string()), nabla::IOError) << cut;
  }
  const std::string bad_id = error_of([&] { unigram().decode(std::vector<int32_t>{5, 400}); });
  EXPECT_NE(bad_id.find("id 400 is outside the vocabulary of 400 pieces"), std::string::npos) << bad_id;
  EXPECT_THROW(unigram().decode(std::vector<int32_t>{-1}), nabla::IndexError);
  EXPECT_THROW(unigram().id_to_piece(1000), nabla::IndexError);
  const std::string big = error_of([&] { train_sentencepiece(corpus(), {.vocab_size = 100000}); });
  EXPECT_NE(big.find("train_sentencepiece"), std::string::npos) << big;
  EXPECT_NE(big.find("Vocabulary size"), std::string::npos) << big;
  EXPECT_THROW(train_sentencepiece({}, {}), nabla::ValueError);
  EXPECT_THROW(train_sentencepiece(corpus(), {.model_type = "trie"}), nabla::ValueError);
  EXPECT_THROW(train_sentencepiece(corpus(), {.user_defined_symbols = {"a,b"}}), nabla::ValueError);
  fs::remove_all(d);
}
