#include "io/gguf.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "io/file.h"

namespace nabla::gguf {

namespace {

// GGUF's value types and ggml's tensor types (gguf.h, ggml.h).
enum : uint32_t {
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
};
constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1;
constexpr uint64_t kAlignment = 32;

template <class T>
void put(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // GGUF is little-endian, as every machine nabla runs on
  out.append(b, sizeof(T));
}

void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}

uint64_t padded(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

void Writer::key(const std::string& k, uint32_t type) {
  if (k.empty()) throw ValueError("gguf::Writer: a metadata key must not be empty");
  if (std::find(keys_.begin(), keys_.end(), k) != keys_.end())
    throw ValueError("gguf::Writer: metadata key '" + k + "' was added twice");
  keys_.push_back(k);
  put_string(kv_, k);
  put<uint32_t>(kv_, type);
  ++num_kv_;
}

void Writer::add_u32(const std::string& k, uint32_t v) {
  key(k, kU32);
  put<uint32_t>(kv_, v);
}
void Writer::add_i32(const std::string& k, int32_t v) {
  key(k, kI32);
  put<int32_t>(kv_, v);
}
void Writer::add_f32(const std::string& k, float v) {
  key(k, kF32);
  put<float>(kv_, v);
}
void Writer::add_bool(const std::string& k, bool v) {
  key(k, kBool);
  put<uint8_t>(kv_, v ? 1 : 0);
}
void Writer::add_string(const std::string& k, const std::string& v) {
  key(k, kString);
  put_string(kv_, v);
}
void Writer::add_strings(const std::string& k, const std::vector<std::string>& v) {
  key(k, kArray);
  put<uint32_t>(kv_, kString);
  put<uint64_t>(kv_, v.size());
  for (const std::string& s : v) put_string(kv_, s);
}
void Writer::add_i32s(const std::string& k, const std::vector<int32_t>& v) {
  key(k, kArray);
  put<uint32_t>(kv_, kI32);
  put<uint64_t>(kv_, v.size());
  for (int32_t x : v) put<int32_t>(kv_, x);
}
void Writer::add_f32s(const std::string& k, const std::vector<float>& v) {
  key(k, kArray);
  put<uint32_t>(kv_, kF32);
  put<uint64_t>(kv_, v.size());
  for (float x : v) put<float>(kv_, x);
}

void Writer::add_bpe_vocab(const BpeVocab& v) {
  const int64_t n = static_cast<int64_t>(v.tokens.size());
  if (n == 0 || v.token_types.size() != v.tokens.size())
    throw ValueError(internal::str("gguf::Writer::add_bpe_vocab: ", v.tokens.size(), " tokens but ",
                                   v.token_types.size(), " token types (one each, and at least one token)"));
  for (int32_t id : {v.bos_id, v.eos_id})
    if (id < -1 || id >= n)
      throw ValueError(internal::str("gguf::Writer::add_bpe_vocab: special id ", id, " is outside the ", n, " tokens"));
  add_string("tokenizer.ggml.model", "gpt2");
  add_string("tokenizer.ggml.pre", "gpt-2");
  add_strings("tokenizer.ggml.tokens", v.tokens);
  add_i32s("tokenizer.ggml.token_type", v.token_types);
  add_strings("tokenizer.ggml.merges", v.merges);
  if (v.bos_id >= 0) add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
  if (v.eos_id >= 0) add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
}

void Writer::add_tensor(const std::string& name, const Tensor& t) {
  if (name.empty()) throw ValueError("gguf::Writer::add_tensor: a tensor name must not be empty");
  for (const Entry& e : tensors_)
    if (e.name == name) throw ValueError("gguf::Writer::add_tensor: tensor '" + name + "' was added twice");
  if (t.dtype() != kFloat32 && t.dtype() != kFloat16)
    throw DTypeError(internal::str("gguf::Writer::add_tensor: tensor '", name, "' is ", t.dtype(),
                                   "; GGUF tensors are written as float32 or float16 (convert with .to(kFloat32))"));
  if (t.dim() > 4 || t.dim() == 0)
    throw ShapeError(internal::str("gguf::Writer::add_tensor: tensor '", name, "' has shape ", t.sizes(),
                                   "; ggml tensors have 1 to 4 dimensions"));
  tensors_.push_back({name, t.detach().cpu().contiguous().clone()});
}

std::vector<char> Writer::serialize() const {
  std::string head;
  head += "GGUF";
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, num_kv_);
  head += kv_;
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const Entry& e : tensors_) {
    put_string(head, e.name);
    put<uint32_t>(head, static_cast<uint32_t>(e.data.dim()));
    for (int64_t d = e.data.dim() - 1; d >= 0; --d) put<uint64_t>(head, static_cast<uint64_t>(e.data.size(d)));
    put<uint32_t>(head, e.data.dtype() == kFloat32 ? kGgmlF32 : kGgmlF16);
    put<uint64_t>(head, offset);
    offsets.push_back(offset);
    offset = padded(offset + e.data.nbytes());
  }
  std::vector<char> out(padded(head.size()) + offset, 0);
  std::memcpy(out.data(), head.data(), head.size());
  const size_t data = padded(head.size());
  for (size_t i = 0; i < tensors_.size(); ++i)
    std::memcpy(out.data() + data + offsets[i], tensors_[i].data.data_ptr(), tensors_[i].data.nbytes());
  return out;
}

void Writer::save(const std::string& path) const {
  const std::vector<char> bytes = serialize();
  io::atomic_write(path, [&](std::FILE* f) { io::write_all(f, bytes.data(), bytes.size(), path); });
}

}  // namespace nabla::gguf
