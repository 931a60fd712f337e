// A small protocol-buffer encoder for the few messages TensorBoard reads (Event, Summary,
// HistogramProto, TensorProto, the plugins' data): it appends fields to a std::string in the wire
// format, with no descriptors and no allocation beyond the string's own growth.
//
//   std::string out;
//   ProtoWriter w(out);
//   w.f64(1, wall_time);                       // Event.wall_time
//   w.message(5, [&] { w.message(1, [&] {     // Event.summary, Summary.value
//     w.str(1, "loss");                        // Summary.Value.tag
//     w.f32_always(2, 0.25f);                  // Summary.Value.simple_value (a oneof: written even if 0)
//   }); });
//
// Like proto3, the plain setters skip a field that holds its default (0, "", empty); the `_always`
// forms write it anyway, as proto3 does for a member of a oneof.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace nabla::tensorboard {

class ProtoWriter {
 public:
  enum Wire : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

  explicit ProtoWriter(std::string& out) : out_(out) {}

  void varint(uint64_t v) {
    char buf[10];
    size_t n = encode_varint(v, buf);
    out_.append(buf, n);
  }
  void key(uint32_t field, Wire wire) { varint((uint64_t{field} << 3) | wire); }

  // int32, int64, uint32, uint64, enum and bool fields (negative values take ten bytes, as protobuf's).
  void int64(uint32_t field, int64_t v) {
    if (v != 0) int64_always(field, v);
  }
  void int64_always(uint32_t field, int64_t v) {
    key(field, kVarint);
    varint(static_cast<uint64_t>(v));
  }
  void boolean(uint32_t field, bool v) { int64(field, v ? 1 : 0); }
  void f64(uint32_t field, double v) {
    if (v != 0 || std::signbit(v)) f64_always(field, v);
  }
  void f64_always(uint32_t field, double v) {
    key(field, kFixed64);
    fixed(v);
  }
  void f32_always(uint32_t field, float v) {
    key(field, kFixed32);
    fixed(v);
  }
  void str(uint32_t field, std::string_view s) {
    if (!s.empty()) str_always(field, s);
  }
  void str_always(uint32_t field, std::string_view s) {
    key(field, kBytes);
    varint(s.size());
    out_.append(s);
  }
  // A packed repeated double / float field.
  void packed_f64(uint32_t field, std::span<const double> v) {
    if (v.empty()) return;
    key(field, kBytes);
    varint(v.size() * 8);
    for (double d : v) fixed(d);
  }
  void packed_f32(uint32_t field, std::span<const float> v) {
    if (v.empty()) return;
    key(field, kBytes);
    varint(v.size() * 4);
    for (float f : v) fixed(f);
  }
  // An embedded message: body() writes its fields through this writer; the length goes in front
  // once it is known. Written even when empty (what a set oneof member or repeated entry needs).
  template <class Body>
  void message(uint32_t field, Body&& body) {
    key(field, kBytes);
    size_t start = out_.size();
    body();
    char buf[10];
    size_t n = encode_varint(out_.size() - start, buf);
    out_.insert(start, buf, n);
  }

  static size_t encode_varint(uint64_t v, char* buf) {
    size_t n = 0;
    while (v >= 0x80) {
      buf[n++] = static_cast<char>((v & 0x7F) | 0x80);
      v >>= 7;
    }
    buf[n++] = static_cast<char>(v);
    return n;
  }

 private:
  template <class T>
  void fixed(T v) {  // little-endian, as the wire format (x86-64, ARM64)
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    out_.append(buf, sizeof(T));
  }
  std::string& out_;
};

}  // namespace nabla::tensorboard
