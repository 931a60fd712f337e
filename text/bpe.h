// Byte-level byte-pair-encoding (BPE) tokenizers: GPT-2's (tiktoken "r50k_base" / "gpt2") and
// GPT-3.5/4's ("cl100k_base"), and training a new vocabulary on a text.
//
// How a text becomes token ids (the same in GPT-2, tiktoken and Hugging Face's ByteLevel BPE):
//   1. Special tokens such as "<|endoftext|>" are cut out of the text, but only those the caller
//      allows (EncodeOptions::allowed_special); by default a special token's characters are plain
//      text, as in gpt-3-encoder (tiktoken's default would raise instead).
//   2. A pre-tokenizer splits each stretch of text into pieces with a fixed pattern (Pattern::kGpt2
//      or Pattern::kCl100k below): "Hello world's" -> "Hello", " world", "'s". It is written by hand
//      over UTF-8 (no std::regex), with the Unicode classes of text/unicode_tables.h.
//   3. Each piece's UTF-8 bytes start as one token per byte (all 256 bytes are in every vocabulary, so
//      any byte string, even invalid UTF-8, can be encoded), and the adjacent pair of tokens with the
//      lowest merge rank is merged again and again until no adjacent pair has a rank. Ties go to the
//      leftmost pair. Long pieces use a heap over a linked list, so a piece of n bytes costs
//      O(n log n), not O(n^2).
//   decode(ids) concatenates the tokens' bytes; it returns bytes, which are valid UTF-8 whenever the
//   ids came from encode of valid UTF-8 (a slice of ids may end inside a character).
//
// Vocabulary files:
//   - GPT-2 / Hugging Face: encoder.json or vocab.json (token -> id, tokens spelt with GPT-2's
//     byte-to-unicode map, e.g. "Ġworld" for " world") and vocab.bpe or merges.txt (one merge "a b"
//     per line, in rank order; a first line "#version..." is skipped).
//   - tiktoken: a .tiktoken ranks file, one "base64(token bytes) rank" per line; ids are the ranks.
//
// A tokenizer is immutable after loading: encode and decode may be called from many threads at once.
//
// Example:
//   auto tok = nabla::text::BytePairTokenizer::from_gpt2_files("encoder.json", "vocab.bpe");
//   std::vector<int32_t> ids = tok.encode("Hello world");   // {15496, 995}
//   std::string text = tok.decode(ids);                     // "Hello world"
//
// Differences from the references, on purpose:
//   - `\s` is Unicode's White_Space, as in tiktoken (Rust's regex): U+0085 is whitespace and U+FEFF
//     is not. JavaScript's `\s` (gpt-3-encoder, js-tiktoken) has it the other way round.
//   - Letters and numbers follow the Unicode version of text/unicode_tables.h (see kUnicodeVersion);
//     characters assigned in later versions are "other" here.
//   - cl100k's case-insensitive contractions match ASCII case only ('S, 'Ll); Rust's (?i) also lets
//     U+017F (long s) match 's'.
//   - A byte that is not part of valid UTF-8 is one "other" character (tiktoken takes only valid
//     strings; its Python API replaces such bytes before they reach the tokenizer).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../io/gguf.h"

namespace nabla::text {

// The pre-tokenizer's pattern.
enum class Pattern {
  // GPT-2, r50k_base, p50k_base:
  //   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // cl100k_base (GPT-3.5 / GPT-4):
  //   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  //   \s*[\r\n]+|\s+(?!\S)|\s+
  kCl100k,
};

// Splits `text` into the pattern's pieces (views into `text`); concatenated they give `text` back.
std::vector<std::string_view> pre_tokenize(std::string_view text, Pattern pattern);

struct EncodeOptions {
  // Special tokens recognised in the text, by their text ("<|endoftext|>"); others are plain text.
  std::unordered_set<std::string> allowed_special = {};
  bool allow_all_special = false;  // every special token is recognised (tiktoken's allowed_special="all")
};

struct TrainOptions {
  Pattern pattern = Pattern::kGpt2;
  // Special tokens appended after the learned tokens, in this order (e.g. {"<|endoftext|>"}).
  std::vector<std::string> special_tokens = {};
  // A pair is merged only if it occurs at least this often (weighted by piece frequency).
  int64_t min_frequency = 2;
};

class BytePairTokenizer {
 public:
  // GPT-2's encoder.json + vocab.bpe, or Hugging Face's vocab.json + merges.txt (the same formats).
  // Tokens of the vocabulary that no merge produces and that are not single bytes (GPT-2's
  // "<|endoftext|>") become special tokens. Throws nabla::IOError naming the path (and line) when a
  // file is missing or corrupt.
  static BytePairTokenizer from_gpt2_files(const std::string& vocab_json_path, const std::string& merges_path,
                                           Pattern pattern = Pattern::kGpt2);
  // The same from the files' contents.
  static BytePairTokenizer from_gpt2_strings(std::string_view vocab_json, std::string_view merges,
                                             Pattern pattern = Pattern::kGpt2, const std::string& source = "<memory>");
  // A tiktoken ranks file ("base64 rank" per line) with its pattern and special tokens, e.g.
  //   from_tiktoken_file("cl100k_base.tiktoken", Pattern::kCl100k, {{"<|endoftext|>", 100257}, ...}).
  static BytePairTokenizer from_tiktoken_file(const std::string& path, Pattern pattern,
                                              const std::vector<std::pair<std::string, int32_t>>& special_tokens);
  static BytePairTokenizer from_tiktoken_string(std::string_view contents, Pattern pattern,
                                                const std::vector<std::pair<std::string, int32_t>>& special_tokens,
                                                const std::string& source = "<memory>");
  // From token bytes by id (all 256 single bytes among them) and a merge list in rank order: merge r
  // joins the tokens (a, b) into the token whose bytes are theirs concatenated, which must be in
  // id_to_bytes. Used by train_bpe.
  static BytePairTokenizer from_merges(std::vector<std::string> id_to_bytes,
                                       const std::vector<std::pair<int32_t, int32_t>>& merges, Pattern pattern,
                                       const std::vector<std::pair<std::string, int32_t>>& special_tokens);

  BytePairTokenizer(BytePairTokenizer&&) noexcept;
  BytePairTokenizer& operator=(BytePairTokenizer&&) noexcept;
  ~BytePairTokenizer();

  // Text (UTF-8, or any bytes) -> ids. Special tokens only where `options` allow them.
  std::vector<int32_t> encode(std::string_view text) const;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const;
  // Appends the ids of one piece (no pre-tokenization, no special tokens) to `out`.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  // Ids -> bytes. Throws nabla::IndexError naming the id and the vocabulary size for an unknown id.
  std::string decode(std::span<const int32_t> ids) const;
  // Ids -> text as the references' decode returns it (tiktoken's decode(errors="replace"),
  // js-tiktoken's and gpt-3-encoder's TextDecoder): valid UTF-8, with each maximal invalid
  // subsequence of the bytes replaced by U+FFFD, as the WHATWG UTF-8 decoder does.
  std::string decode_text(std::span<const int32_t> ids) const;

  // One more than the largest id (special tokens included).
  int32_t vocab_size() const;
  Pattern pattern() const;
  // The raw bytes of a token; throws IndexError for an unknown id.
  const std::string& token_bytes(int32_t id) const;
  // The id of a token given by its raw bytes, or -1.
  int32_t token_to_id(std::string_view bytes) const;
  // The special tokens, text -> id.
  const std::unordered_map<std::string, int32_t>& special_tokens() const;
  // Number of mergeable id pairs: the merge lines for GPT-2 files; for tiktoken ranks every split of
  // a token into two tokens (r50k_base: 108,299; cl100k_base: 233,378).
  size_t num_merges() const;

  // The tokenizer as a GGUF file carries it for llama.cpp (io/gguf.h): every id from 0 to
  // vocab_size() - 1 in GPT-2's byte-to-unicode spelling (special tokens as their text, type 3;
  // an id no token has as "[UNUSED_<id>]"), the merges in rank order, and eos (and bos) the id of
  // "<|endoftext|>" when there is one. Throws ValueError for tokenizers loaded from tiktoken ranks,
  // which have no merge list.
  gguf::BpeVocab gguf_vocab() const;

  // Writes Hugging Face / GPT-2 files: vocab.json (byte-to-unicode spelt token -> id, special tokens
  // included) and merges.txt ("#version: 0.2" then one merge per line, in rank order). Reading them
  // back with from_gpt2_files gives a tokenizer that encodes the same.
  void save(const std::string& vocab_json_path, const std::string& merges_path) const;

  // GPT-2's byte -> unicode map ("bytes_to_unicode"): printable bytes map to themselves, the rest to
  // U+0100.. in order, so that every token is a printable string. Returns the code point's UTF-8.
  static std::string byte_to_unicode(uint8_t byte);

 private:
  struct Impl;
  explicit BytePairTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `bytes` as valid UTF-8: each maximal invalid subsequence replaced by U+FFFD, as WHATWG's UTF-8
// decoder (TextDecoder with fatal=false), Python's errors="replace" and Rust's from_utf8_lossy do.
// Valid UTF-8 comes back unchanged.
std::string replace_invalid_utf8(std::string_view bytes);

// Learns a byte-level BPE vocabulary of `vocab_size` tokens (256 bytes + merges + special tokens)
// from `text`: pre-tokenizes with options.pattern, counts each distinct piece once weighted by its
// frequency, and repeatedly merges the most frequent adjacent pair (ties: the smaller pair of ids,
// as Hugging Face's BpeTrainer; byte tokens have the byte's value as id), updating pair counts
// incrementally in the pieces that hold the pair (never a pass over the whole corpus per merge). Stops early when no pair occurs min_frequency times. Throws ValueError when vocab_size is
// smaller than 256 + the number of special tokens.
BytePairTokenizer train_bpe(std::string_view text, int32_t vocab_size, const TrainOptions& options = {});

}  // namespace nabla::text
