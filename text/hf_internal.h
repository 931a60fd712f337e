// Internal to text/: what the source files of HfTokenizer (text/hf_tokenizer.h) share: UTF-8 and the
// character properties, the loader's error reporting, and the interfaces of the five component families
// with their parse functions. Each family is in its own file:
//   hf_unicode.cpp      UTF-8, Unicode normalization (NFC/NFD/NFKC/NFKD), lowercase, the flag table
//   hf_normalize.cpp    normalizers and pre-tokenizers
//   hf_models.cpp       the BPE and WordPiece models
//   hf_decoders.cpp     post-processors and decoders
//   hf_tokenizer.cpp    the added tokens, the pipeline, loading
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../core/error.h"
#include "unicode_norm_tables.h"
#include "utf8.h"

namespace nabla::text::hf {

using json = nlohmann::json;
namespace un = unicode_norm;

constexpr int kMaxComponentDepth = 16;
constexpr int kMaxJsonDepth = 64;

// ---- UTF-8 and character properties ---------------------------------------------------------

using utf8::cp_len;
using utf8::next_cp;
inline void append_utf8(std::string& out, uint32_t cp) { utf8::append(out, cp); }
// Valid UTF-8 with each maximal invalid subpart replaced by U+FFFD; false (out untouched) when `in` is
// already valid.
bool make_valid_utf8(std::string_view in, std::string& out);

// One byte of unicode_norm::Flag bits per code point, as a two-stage table.
struct FlagTable {
  std::vector<uint16_t> stage1;  // block of 256 code points -> index of its block in stage2
  std::vector<uint8_t> stage2;
};
const FlagTable& flag_table();
inline uint8_t flags_of(uint32_t cp) {
  static const FlagTable& t = flag_table();
  return t.stage2[size_t(t.stage1[cp >> 8]) * 256 + (cp & 255)];
}
inline bool is_space(uint32_t cp) { return flags_of(cp) & un::kSpace; }
inline bool is_word(uint32_t cp) { return flags_of(cp) & un::kWord; }
inline bool is_ascii_punct(uint32_t cp) {
  return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
         (cp >= 0x7B && cp <= 0x7E);
}
inline bool is_punct(uint32_t cp) { return is_ascii_punct(cp) || (flags_of(cp) & un::kPunct); }
inline bool is_numeric(uint32_t cp) { return flags_of(cp) & un::kNumeric; }

enum class Form { kNFC, kNFD, kNFKC, kNFKD };
std::string unicode_normalize(std::string_view s, Form form);
std::string lowercase(std::string_view s);                     // code point by code point, as Rust's to_lowercase
std::string remove_flagged(std::string_view s, uint8_t mask);  // drops the code points with any of the flags
void replace_all(std::string& s, std::string_view from, std::string_view to);
size_t leading_space(std::string_view s);         // bytes of white space at the start
size_t trailing_space_start(std::string_view s);  // where the white space at the end starts

// ---- loading ----------------------------------------------------------------------------------

struct Loader {
  std::string source;
  [[noreturn]] void fail(const std::string& what) const {
    NABLA_CHECK(IOError, false, "HfTokenizer: ", source, ": ", what);
    throw IOError(what);  // not reached
  }
  void require(bool ok, const std::string& what) const {
    if (!ok) fail(what);
  }
  const json& field(const json& obj, const char* key, const std::string& where) const {
    auto it = obj.find(key);
    require(it != obj.end(), where + " has no \"" + key + "\"");
    return *it;
  }
  std::string str(const json& obj, const char* key, const std::string& where, const std::string& dflt = "") const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return dflt;
    require(it->is_string(), where + ": \"" + key + "\" must be a string");
    return it->get<std::string>();
  }
  bool boolean(const json& obj, const char* key, const std::string& where, bool dflt) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return dflt;
    require(it->is_boolean(), where + ": \"" + key + "\" must be true or false");
    return it->get<bool>();
  }
  int64_t integer(const json& obj, const char* key, const std::string& where, int64_t dflt, int64_t lo,
                  int64_t hi) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return dflt;
    require(it->is_number_integer(), where + ": \"" + key + "\" must be an integer");
    const int64_t v = it->get<int64_t>();
    require(v >= lo && v <= hi, where + ": \"" + key + "\" is " + std::to_string(v) + ", outside [" +
                                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
  }
  std::string type_of(const json& obj, const std::string& where) const {
    require(obj.is_object(), where + " must be an object");
    return str(obj, "type", where, "");
  }
  [[noreturn]] void unsupported(const std::string& where, const std::string& type, const char* supported) const {
    fail(where + " type \"" + type + "\" is not supported (supported: " + supported + ")");
  }
};

// One code point of a string field (Metaspace's replacement, Strip's content).
uint32_t single_char(const Loader& L, const std::string& s, const std::string& where);
// A "pattern": {"String": "..."} or {"Regex": "..."} without metacharacters.
std::string string_pattern(const Loader& L, const json& p, const std::string& where);
// The deepest nesting of objects and arrays in a JSON text (strings skipped).
int json_depth(std::string_view s);

// ---- the component families --------------------------------------------------------------------

struct Normalizer {
  virtual ~Normalizer() = default;
  virtual void apply(std::string& s) const = 0;
};
using NormalizerPtr = std::unique_ptr<Normalizer>;
NormalizerPtr parse_normalizer(const Loader& L, const json& j, int depth);

struct Piece {
  std::string text;
  bool first = false;  // starts at offset 0 of the original text (Metaspace's prepend_scheme "first")
};
struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  virtual void split(std::vector<Piece>& pieces) const = 0;
};
using PreTokenizerPtr = std::unique_ptr<PreTokenizer>;
enum class Prepend { kAlways, kFirst, kNever };
PreTokenizerPtr parse_pre_tokenizer(const Loader& L, const json& j, int depth);
Prepend parse_prepend(const Loader& L, const json& j, const std::string& where);
// GPT-2's byte-to-unicode map: the UTF-8 of each byte's character.
const std::array<std::string, 256>& byte_chars();

// Token string <-> id, with string_view lookups.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

inline int32_t find_id(const TokenMap& m, std::string_view s) {
  auto it = m.find(s);
  return it == m.end() ? -1 : it->second;
}

struct Model {
  TokenMap vocab;
  virtual ~Model() = default;
  virtual void tokenize(std::string_view word, std::vector<int32_t>& out) const = 0;
};
// The id table (token by id, valid, special) the model block starts.
struct IdTable {
  std::vector<std::string>& id_to_token;
  std::vector<uint8_t>& id_valid;
  std::vector<uint8_t>& id_special;
};
std::unique_ptr<Model> parse_model(const Loader& L, const json& j, IdTable impl, size_t n_added);

struct Seq {
  std::vector<int32_t> ids, type_ids;
  std::vector<uint8_t> special;
  void add(const std::vector<int32_t>& v, int32_t type_id, uint8_t is_special) {
    ids.insert(ids.end(), v.begin(), v.end());
    type_ids.insert(type_ids.end(), v.size(), type_id);
    special.insert(special.end(), v.size(), is_special);
  }
};
struct PostProcessor {
  virtual ~PostProcessor() = default;
  // b == nullptr for a single sequence.
  virtual Seq process(const std::vector<int32_t>& a, const std::vector<int32_t>* b, bool add_special) const = 0;
};
using PostProcessorPtr = std::unique_ptr<PostProcessor>;
Seq default_process(const std::vector<int32_t>& a, const std::vector<int32_t>* b);
// The post_processor block (a Sequence of ByteLevel and at most one other); its special tokens must
// be ids that id_valid marks.
PostProcessorPtr parse_post_processor(const Loader& L, const json& j, const std::vector<uint8_t>& id_valid);

struct Decoder {
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};
using DecoderPtr = std::unique_ptr<Decoder>;
DecoderPtr parse_decoder(const Loader& L, const json& j, int depth);

}  // namespace nabla::text::hf
