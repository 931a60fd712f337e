// Writing GGUF files, the model format of llama.cpp and ggml (version 3: a header of typed key-value
// metadata, a table of tensors, then the tensors' data, each aligned to 32 bytes). nn::save_gpt2_gguf
// builds on it to hand a GPT-2 to llama.cpp.
//
//   gguf::Writer w;
//   w.add_string("general.architecture", "gpt2");
//   w.add_u32("gpt2.block_count", 12);
//   w.add_strings("tokenizer.ggml.tokens", tokens);
//   w.add_tensor("token_embd.weight", wte);   // (vocab, width): ggml's ne = {width, vocab}
//   w.save("model.gguf");                     // atomically
//
// Tensors are given in nabla's row-major shapes; GGUF lists dimensions innermost first (ggml's ne[0]
// is the contiguous one), so a (rows, cols) matrix is written with dims {cols, rows}, as llama.cpp's
// own converters write PyTorch tensors. float32 tensors are stored as F32, float16 as F16; other
// dtypes are refused (a DTypeError naming the tensor). Writing only: nabla does not read GGUF.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../core/tensor.h"

namespace nabla::gguf {

// A byte-level BPE tokenizer as GGUF carries it for llama.cpp (tokenizer.ggml.model "gpt2"): the
// tokens by id in GPT-2's byte-to-unicode spelling ("Ġworld"), their types (1: normal, 3: control,
// such as <|endoftext|>), the merges in rank order ("Ġ w"), and the bos/eos ids (-1: none).
// text::BytePairTokenizer::gguf_vocab() makes one.
struct BpeVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;
  int32_t bos_id = -1, eos_id = -1;
};

class Writer {
 public:
  void add_u32(const std::string& key, uint32_t value);
  void add_i32(const std::string& key, int32_t value);
  void add_f32(const std::string& key, float value);
  void add_bool(const std::string& key, bool value);
  void add_string(const std::string& key, const std::string& value);
  void add_strings(const std::string& key, const std::vector<std::string>& values);
  void add_i32s(const std::string& key, const std::vector<int32_t>& values);
  void add_f32s(const std::string& key, const std::vector<float>& values);
  // tokenizer.ggml.{model = "gpt2", pre = "gpt-2", tokens, token_type, merges, bos/eos_token_id}.
  // Throws ValueError when the arrays disagree in length or an id is outside the tokens.
  void add_bpe_vocab(const BpeVocab& vocab);
  // Keeps a contiguous CPU copy of `t` (float32 or float16, at most 4 dimensions) until save.
  void add_tensor(const std::string& name, const Tensor& t);

  // The whole file: to `path` atomically (a temporary file renamed over it), or as bytes.
  void save(const std::string& path) const;
  std::vector<char> serialize() const;

  size_t num_metadata() const { return num_kv_; }
  size_t num_tensors() const { return tensors_.size(); }

 private:
  void key(const std::string& k, uint32_t type);
  std::string kv_;  // the metadata section as it will be written
  size_t num_kv_ = 0;
  std::vector<std::string> keys_;
  struct Entry {
    std::string name;
    Tensor data;
  };
  std::vector<Entry> tensors_;
};

}  // namespace nabla::gguf
