// libFuzzer target: Hugging Face tokenizer.json files (text/hf_tokenizer.h) on arbitrary bytes. The
// first byte picks:
//   even: the rest is a tokenizer.json: loading may throw nabla::Error; a file that loads encodes and
//         decodes a probe text (single and pair, with and without special tokens);
//   odd:  the rest is text, encoded and decoded by three fixed tokenizers (BERT-style WordPiece with
//         BertNormalizer; byte-level BPE; Metaspace BPE with byte fallback): the ids must decode, and
//         the byte-level one must give the text back (after U+FFFD replacement of invalid UTF-8).
// Anything else (a crash, another exception, a hang) is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "text/hf_tokenizer.h"

using nabla::text::HfTokenizer;

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "hf_tokenizer_fuzzer finding: %s\n", what);
  std::abort();
}

void exercise(const HfTokenizer& tok, std::string_view text) {
  for (bool special : {true, false}) {
    const HfTokenizer::Encoding e = tok.encode(text, special);
    if (e.ids.size() != e.tokens.size() || e.ids.size() != e.type_ids.size()) finding("encoding fields differ in size");
    (void)tok.decode(e.ids, true);
    (void)tok.decode(e.ids, false);
    const HfTokenizer::Encoding p = tok.encode_pair(text, "and a second", special);
    (void)tok.decode(p.ids, !special);
  }
}

const char* kWordPiece = R"({"version":"1.0","added_tokens":[
  {"id":0,"content":"[UNK]","special":true,"normalized":false,"single_word":false,"lstrip":false,"rstrip":false},
  {"id":1,"content":"[CLS]","special":true,"normalized":false,"single_word":false,"lstrip":false,"rstrip":false},
  {"id":2,"content":"[SEP]","special":true,"normalized":false,"single_word":false,"lstrip":false,"rstrip":false},
  {"id":3,"content":"[MASK]","special":true,"normalized":false,"single_word":false,"lstrip":true,"rstrip":false}],
 "normalizer":{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true},
 "pre_tokenizer":{"type":"BertPreTokenizer"},
 "post_processor":{"type":"BertProcessing","sep":["[SEP]",2],"cls":["[CLS]",1]},
 "decoder":{"type":"WordPiece","prefix":"##","cleanup":true},
 "model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":100,
  "vocab":{"[UNK]":0,"[CLS]":1,"[SEP]":2,"[MASK]":3,"a":4,"b":5,"c":6,"##a":7,"##b":8,"##c":9,"ab":10,",":11,"!":12}}})";

const char* kByteLevel = R"({"version":"1.0","added_tokens":[
  {"id":262,"content":"<|endoftext|>","special":true,"normalized":false,"single_word":false,"lstrip":false,"rstrip":false}],
 "normalizer":null,
 "pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true},
 "post_processor":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true},
 "decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true},
 "model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":"","end_of_word_suffix":"",
  "fuse_unk":false,"byte_fallback":false,"vocab":VOCAB,"merges":["Ġ t","h e","Ġt he","i n"]}})";

const char* kMetaspace = R"({"version":"1.0","added_tokens":[],
 "normalizer":{"type":"Sequence","normalizers":[{"type":"NFKC"},{"type":"Replace","pattern":{"String":" "},"content":"▁"},
  {"type":"Prepend","prepend":"▁"}]},
 "pre_tokenizer":null,"post_processor":null,
 "decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},
  {"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]},
 "model":{"type":"BPE","dropout":null,"unk_token":"<unk>","continuing_subword_prefix":null,"end_of_word_suffix":null,
  "fuse_unk":true,"byte_fallback":true,"vocab":VOCAB,"merges":[]}})";

// The 256 byte tokens of byte-level BPE (GPT-2's byte-to-unicode spelling) and the merged ones.
std::string byte_level_json() {
  std::string vocab = "{";
  int id = 0;
  for (int b = 0; b < 256; ++b) {
    int cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) cp = 256 + id++;
    std::string u;
    if (cp < 0x80) {
      u = static_cast<char>(cp);
    } else {
      u += static_cast<char>(0xC0 | (cp >> 6));
      u += static_cast<char>(0x80 | (cp & 0x3F));
    }
    if (u == "\"" || u == "\\") u = "\\" + u;
    vocab += "\"" + u + "\":" + std::to_string(b) + ",";
  }
  vocab += R"("Ġt":256,"he":257,"Ġthe":258,"in":259,"unused1":260,"unused2":261})";
  std::string s = kByteLevel;
  return s.replace(s.find("VOCAB"), 5, vocab);
}

// <unk>, the 256 <0xAB> byte pieces and a few characters.
std::string metaspace_json() {
  std::string vocab = R"({"<unk>":0)";
  char buf[16];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    vocab += ",\"" + std::string(buf) + "\":" + std::to_string(b + 1);
  }
  vocab += R"(,"▁":257,"a":258,"b":259,"c":260})";
  std::string s = kMetaspace;
  return s.replace(s.find("VOCAB"), 5, vocab);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const HfTokenizer wordpiece = HfTokenizer::from_string(kWordPiece, "wordpiece.json");
  static const HfTokenizer byte_level = HfTokenizer::from_string(byte_level_json(), "byte_level.json");
  static const HfTokenizer metaspace = HfTokenizer::from_string(metaspace_json(), "metaspace.json");
  try {
    if (data[0] % 2 == 0) {
      const HfTokenizer tok = HfTokenizer::from_string(in, "fuzz.json");
      exercise(tok, "Hello, World! [CLS] caf\xc3\xa9 \xe4\xb8\xad 123 <|endoftext|> \xff");
      return 0;
    }
  } catch (const nabla::Error&) {
    return 0;  // a clear error is the right answer to a bad file
  }
  for (const HfTokenizer* tok : {&wordpiece, &byte_level, &metaspace}) exercise(*tok, in);
  // Byte-level BPE loses nothing but invalid UTF-8 (replaced before encoding).
  const HfTokenizer::Encoding e = byte_level.encode(in, false);
  const std::string back = byte_level.decode(e.ids, false);
  const HfTokenizer::Encoding again = byte_level.encode(back, false);
  if (byte_level.decode(again.ids, false) != back) finding("byte-level: decode(encode(x)) is not stable");
  bool valid = true;
  for (unsigned char c : in) valid = valid && c < 0x80;  // ASCII input must come back exactly
  if (valid && back != in) finding("byte-level: decode(encode(ascii)) != ascii");
  return 0;
}
