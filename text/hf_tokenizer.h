// Hugging Face tokenizers: a `tokenizer.json` file (what `tokenizers.Tokenizer.save` writes and the
// Hub serves) loaded and run as the Rust `tokenizers` library runs it.
//
// How a text becomes ids (the pipeline of the Rust library, component by component):
//   1. Added tokens ("added_tokens" with normalized=false, usually the special ones such as "[CLS]" or
//      "<|endoftext|>") are cut out of the raw text: leftmost-longest matches, honouring single_word
//      (the match must not touch a \w character), lstrip / rstrip (the whitespace beside it is
//      swallowed).
//   2. Each remaining section is normalized (the "normalizer"), and the added tokens with
//      normalized=true are cut out of the normalized text (matched by their normalized content).
//   3. The pre-tokenizer splits each remaining piece into words; the model (BPE or WordPiece) turns
//      each word into tokens.
//   4. The post-processor adds the template's special tokens ("[CLS] $A [SEP] $B:1 [SEP]:1") and the
//      type ids, unless add_special_tokens is false.
//   decode(ids) maps ids to token strings (skipping special added tokens unless asked), runs the
//   decoder chain over them and concatenates the result.
//
// Components:
//   model          BPE (byte-level or not; continuing_subword_prefix, end_of_word_suffix, unk_token,
//                  fuse_unk, byte_fallback, ignore_merges; merges as "a b" strings or ["a", "b"]
//                  pairs), WordPiece (unk_token, continuing_subword_prefix, max_input_chars_per_word).
//   normalizer     BertNormalizer, Lowercase, StripAccents, NFC, NFD, NFKC, NFKD, Strip, Replace
//                  (a string pattern, or a regex without metacharacters), Prepend, Sequence.
//   pre_tokenizer  ByteLevel, Whitespace, WhitespaceSplit, BertPreTokenizer, Punctuation, Digits,
//                  Metaspace, Split (a string pattern, or exactly GPT-2's or cl100k's regex), Sequence.
//   post_processor TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence (of
//                  ByteLevel and at most one of the others).
//   decoder        ByteLevel, WordPiece, Metaspace, BPEDecoder, Replace (string pattern), Strip, Fuse,
//                  ByteFallback, Sequence.
// Anything else (Unigram and WordLevel models, Precompiled normalizers, other regexes, CTC, ...) is
// rejected when the file is loaded with an IOError naming the component, its type and the file. The
// "truncation" and "padding" blocks are ignored: encode never truncates or pads.
//
// A corrupt or hostile file gives an IOError naming the file, never a crash or a huge allocation: bad
// JSON, wrong field types, ids outside [0, 2 * entries + 65536), two tokens with one id, merges naming
// tokens that are not in the vocabulary, JSON nested deeper than 64 levels, Sequence components
// nested deeper than 16.
//
// A tokenizer is immutable after loading: encode and decode may be called from many threads at once.
//
// Example:
//   auto tok = nabla::text::HfTokenizer::from_file("bert-base-uncased/tokenizer.json");
//   auto enc = tok.encode("Hello, world!");      // ids {101, 7592, 1010, 2088, 999, 102}
//   auto pair = tok.encode_pair("a b", "c");      // type_ids {0, 0, 0, 0, 1, 1}
//   std::string text = tok.decode(enc.ids);       // "hello, world!"
//
// Differences from the Rust library, on purpose:
//   - Encoding has no offsets (alignments are not tracked through the normalizers).
//   - decode throws IndexError for an id that is not in the vocabulary (Rust drops it silently).
//   - Invalid UTF-8 in the input is replaced by U+FFFD (maximal subparts, as WHATWG) before step 1;
//     Rust takes only valid strings.
//   - Unicode data (normalization, lowercase, categories, \w) is text/unicode_norm_tables.h's
//     (kUnicodeVersion); the Rust crates each carry their own version (the BertNormalizer's
//     control-character test uses an older table there, so characters assigned since are kept here
//     and dropped there).
//   - An added token whose content is in the model's vocabulary must have the vocabulary's id (Rust
//     warns and uses the vocabulary's id); BPE dropout must be null or 0.
// Where the JavaScript port (@huggingface/tokenizers, tests/text's reference) differs from Rust, this
// follows Rust: single_word is honoured; Metaspace's split is honoured; Rust's Metaspace decoder drops
// every replacement character of the first token; Digits and Whitespace use Unicode digits and \w
// (JavaScript's \d and non-/u \w are ASCII); Punctuation isolates each character; RobertaProcessing's
// type ids are all 0; BertNormalizer finds Chinese characters outside the BMP; Lowercase has no
// final-sigma rule (Rust lowercases character by character); Prepend leaves an empty text empty;
// ByteFallback's decoder writes one U+FFFD per byte of an invalid sequence; BPE's
// continuing_subword_prefix is supported; ids come from the model, never from an added token that
// happens to have the same string.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nabla::text {

class HfTokenizer {
 public:
  struct Encoding {
    std::vector<int32_t> ids;
    std::vector<int32_t> type_ids;      // 0 for the first sequence, as the post-processor sets them
    std::vector<std::string> tokens;    // the vocabulary's strings ("Ġworld", "##ing", "[CLS]")
    std::vector<uint8_t> special_mask;  // 1 where the post-processor added the token
  };

  // Reads `path` (a tokenizer.json). Throws nabla::IOError naming the path when the file is missing,
  // corrupt, or uses a component this implementation does not support.
  static HfTokenizer from_file(const std::string& path);
  // The same from the file's contents; `source` names it in error messages.
  static HfTokenizer from_string(std::string_view json, const std::string& source = "tokenizer.json");

  HfTokenizer(HfTokenizer&&) noexcept;
  HfTokenizer& operator=(HfTokenizer&&) noexcept;
  ~HfTokenizer();

  // One text -> ids, tokens and type ids (all 0). add_special_tokens: run the post-processor's
  // template (added tokens found in the text are kept either way).
  Encoding encode(std::string_view text, bool add_special_tokens = true) const;
  // A pair of texts (BERT's "[CLS] a [SEP] b [SEP]"), with the template's type ids.
  Encoding encode_pair(std::string_view a, std::string_view b, bool add_special_tokens = true) const;
  // Ids -> text through the decoder. skip_special_tokens drops the added tokens marked special.
  // Throws IndexError for an id that is not in the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = true) const;

  // The normalizer alone (the text unchanged when there is none).
  std::string normalize(std::string_view text) const;
  // The pre-tokenizer alone, on an already normalized text (the text itself when there is none).
  std::vector<std::string> pre_tokenize(std::string_view text) const;

  // The id of a token string (model vocabulary or added token), or -1.
  int32_t token_to_id(std::string_view token) const;
  // The string of an id; throws IndexError for an unknown id.
  const std::string& id_to_token(int32_t id) const;
  // One more than the largest id (added tokens included).
  int32_t vocab_size() const;

 private:
  struct Impl;
  explicit HfTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nabla::text
