// SentencePiece models (LLaMA, T5, ALBERT, XLNet, mT5, ... ship a `tokenizer.model`): loading, encoding,
// decoding, subword sampling and training, through Debian's libsentencepiece (libsentencepiece-dev,
// Google's C++ library, the one Python's `sentencepiece` wraps), so the ids are the library's own.
// Its own library, nabla::sentencepiece, built when libsentencepiece is found.
//
//   auto sp = nabla::text::SentencePieceTokenizer::from_file("tokenizer.model");
//   std::vector<int32_t> ids = sp.encode("Hello world", {.add_bos = true});
//   std::string text = sp.decode(ids);                                // "Hello world"
//   std::vector<std::string> pieces = sp.encode_pieces("Hello world"); // {"▁Hello", "▁world"}
//
//   auto trained = nabla::text::train_sentencepiece(lines, {.vocab_size = 4000, .model_type = "bpe"});
//   trained.save("my.model");
//
// The spellings follow Python's `sentencepiece.SentencePieceProcessor` (encode, encode_as_pieces,
// decode, piece_to_id, id_to_piece, bos_id, ...). A tokenizer is immutable after loading: encode and
// decode may be called from many threads at once (sample_encode too).
//
// Errors: a missing, truncated or corrupt model file is an IOError naming the path and the library's
// reason; an id outside the vocabulary is an IndexError naming it and the vocabulary size (the library
// itself would abort on some of them); bad training options are a ValueError with the library's message.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nabla::text {

struct SentencePieceEncodeOptions {
  bool add_bos = false;  // prepend bos_id() (when the model has one)
  bool add_eos = false;  // append eos_id() (when the model has one)
  bool reverse = false;  // the pieces in reverse order (the library's "reverse" extra option)
};

class SentencePieceTokenizer {
 public:
  // A .model file (the serialized ModelProto). Throws IOError naming the path when it cannot be read
  // or parsed.
  static SentencePieceTokenizer from_file(const std::string& path);
  // The same from the file's bytes.
  static SentencePieceTokenizer from_serialized(std::string_view model_proto, const std::string& source = "<memory>");

  SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept;
  SentencePieceTokenizer& operator=(SentencePieceTokenizer&&) noexcept;
  ~SentencePieceTokenizer();

  // Text (UTF-8) -> ids, the most likely segmentation (Viterbi for unigram models, merges for BPE).
  std::vector<int32_t> encode(std::string_view text, const SentencePieceEncodeOptions& options = {}) const;
  // Text -> pieces ("▁Hello"; Python's encode_as_pieces).
  std::vector<std::string> encode_pieces(std::string_view text, const SentencePieceEncodeOptions& options = {}) const;
  // Subword regularization (Kudo 2018): one segmentation drawn from the model. Unigram models: from the
  // nbest_size best (-1: all, by forward filtering and backward sampling) with probabilities raised to
  // alpha; BPE models: BPE-dropout with merge dropout probability alpha (nbest_size is ignored).
  std::vector<int32_t> sample_encode(std::string_view text, int nbest_size, float alpha,
                                     const SentencePieceEncodeOptions& options = {}) const;
  // The nbest_size most likely segmentations, best first.
  std::vector<std::vector<int32_t>> nbest_encode(std::string_view text, int nbest_size) const;
  // Ids -> text. Control ids (bos, eos, pad) decode to nothing; unknown ids to the model's unk surface
  // (" ⁇ "). Throws IndexError for an id outside [0, vocab_size()).
  std::string decode(std::span<const int32_t> ids) const;
  std::string decode_pieces(const std::vector<std::string>& pieces) const;

  int32_t vocab_size() const;
  // The id of a piece, or unk_id() when the vocabulary has no such piece (as the library).
  int32_t piece_to_id(std::string_view piece) const;
  // Throw IndexError for an id outside the vocabulary.
  const std::string& id_to_piece(int32_t id) const;
  float score(int32_t id) const;
  bool is_control(int32_t id) const;
  bool is_unknown(int32_t id) const;
  bool is_byte(int32_t id) const;  // a <0xAB> byte-fallback piece
  // The special ids; -1 when the model has none (pad_id() is -1 unless it was trained with one).
  int32_t unk_id() const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t pad_id() const;

  // The serialized ModelProto (the .model file's bytes).
  std::string serialized_model() const;
  // Writes the .model file atomically (a temporary file renamed over `path`).
  void save(const std::string& path) const;

 private:
  struct Impl;
  explicit SentencePieceTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct SentencePieceTrainOptions {
  int32_t vocab_size = 8000;
  std::string model_type = "unigram";  // "unigram", "bpe", "char" or "word"
  double character_coverage = 0.9995;  // characters covering this share of the text are kept; 1.0 for small alphabets
  bool byte_fallback = false;          // unknown characters become <0x..> byte pieces instead of unk
  bool split_digits = false;           // every digit its own piece (as LLaMA's)
  std::vector<std::string> user_defined_symbols = {};       // pieces always kept whole
  int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;  // -1: none
  std::string normalization_rule_name = "nmt_nfkc";         // "identity" keeps the text as it is
  int32_t num_threads = 1;
  int64_t max_sentence_length = 4192;  // longer sentences (in bytes) are skipped, as the library does
};

// Trains a model on `sentences` (one string per sentence or line), in memory: no file is read or
// written. Throws ValueError with the library's message when the options or the text cannot make the
// vocabulary (e.g. vocab_size larger than the text allows).
SentencePieceTokenizer train_sentencepiece(std::span<const std::string> sentences,
                                           const SentencePieceTrainOptions& options = {});

// The seed of the library's random generators (sentencepiece::SetRandomGeneratorSeed; Python's
// spm.set_random_generator_seed). sample_encode draws from a generator of each thread (not nabla's
// manual_seed), which takes the seed when that thread first draws: set it before starting the
// threads that sample (tests/sentencepiece checks that two such threads draw the same).
void set_sentencepiece_seed(uint32_t seed);

}  // namespace nabla::text
