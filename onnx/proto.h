// A protobuf wire-format writer, as much of it as ONNX's ModelProto needs: varints, 32-bit floats,
// length-delimited fields (strings, bytes, nested messages) and packed int64 lists. Field numbers
// are onnx.proto's (ONNX 1.12, IR version 8); onnx/export.cpp names each where it writes it.
//
//   proto::Writer dim;
//   dim.int64(1, 28);                 // TensorShapeProto.Dimension.dim_value = 28
//   shape.message(1, dim);            // TensorShapeProto.dim += dim
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace nabla::onnx::proto {

class Writer {
 public:
  // Wire type 0: int32, int64, enums, bools (negative values take ten bytes, as protobuf writes them).
  void int64(int field, int64_t v) {
    key(field, 0);
    varint(static_cast<uint64_t>(v));
  }
  // Wire type 5: float.
  void float32(int field, float v) {
    key(field, 5);
    char b[4];
    std::memcpy(b, &v, 4);  // little-endian hosts only (x86-64, AArch64)
    buf_.append(b, 4);
  }
  // Wire type 2: strings, bytes and nested messages.
  void bytes(int field, std::string_view s) {
    key(field, 2);
    varint(s.size());
    buf_.append(s.data(), s.size());
  }
  void message(int field, const Writer& m) { bytes(field, m.buf_); }
  // A packed repeated int64 (one length-delimited field).
  void packed_int64(int field, const std::vector<int64_t>& v) {
    Writer p;
    for (int64_t x : v) p.varint(static_cast<uint64_t>(x));
    bytes(field, p.buf_);
  }
  // A packed repeated float.
  void packed_float(int field, const std::vector<float>& v) {
    std::string s(v.size() * 4, '\0');
    if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
    bytes(field, s);
  }

  const std::string& data() const { return buf_; }
  size_t size() const { return buf_.size(); }

 private:
  void key(int field, int wire_type) { varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type)); }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      buf_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    buf_.push_back(static_cast<char>(v));
  }
  std::string buf_;
};

}  // namespace nabla::onnx::proto
