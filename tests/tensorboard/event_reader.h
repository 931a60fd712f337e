// A reader of TensorBoard event files for the tests, written from the formats' specifications
// (TFRecord framing, the protobuf wire format), independent of the writer's code: it splits a file
// into records checking both masked CRC-32Cs (with its own bitwise CRC), and decodes protobuf
// messages into fields.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tb_test {

// CRC-32C, one bit at a time (slow and obviously right).
inline uint32_t crc32c_bitwise(const std::string& s) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : s) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}
inline uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u; }

inline std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

struct Records {
  std::vector<std::string> records;
  size_t trailing = 0;  // bytes of an incomplete last record
  std::string error;    // a CRC mismatch or an absurd length, with its offset
};

inline Records read_records(const std::string& bytes) {
  Records r;
  size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 12) {
      r.trailing = bytes.size() - at;
      break;
    }
    uint64_t len;
    uint32_t len_crc;
    std::memcpy(&len, bytes.data() + at, 8);
    std::memcpy(&len_crc, bytes.data() + at + 8, 4);
    if (len_crc != masked(crc32c_bitwise(bytes.substr(at, 8)))) {
      r.error = "length CRC mismatch at offset " + std::to_string(at);
      break;
    }
    if (bytes.size() - at - 12 < len + 4) {
      r.trailing = bytes.size() - at;
      break;
    }
    std::string data = bytes.substr(at + 12, len);
    uint32_t data_crc;
    std::memcpy(&data_crc, bytes.data() + at + 12 + len, 4);
    if (data_crc != masked(crc32c_bitwise(data))) {
      r.error = "data CRC mismatch at offset " + std::to_string(at);
      break;
    }
    r.records.push_back(std::move(data));
    at += 12 + len + 4;
  }
  return r;
}

// A decoded message: every field occurrence in order.
struct Field {
  uint32_t number = 0, wire = 0;
  uint64_t v = 0;     // varint, fixed64 or fixed32 bits
  std::string bytes;  // length-delimited
  double f64() const {
    double d;
    std::memcpy(&d, &v, 8);
    return d;
  }
  float f32() const {
    uint32_t u = static_cast<uint32_t>(v);
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  int64_t i64() const { return static_cast<int64_t>(v); }
};

struct Msg {
  std::vector<Field> fields;
  const Field* get(uint32_t n) const {  // the last occurrence, as protobuf merges
    const Field* f = nullptr;
    for (const auto& x : fields)
      if (x.number == n) f = &x;
    return f;
  }
  std::vector<Field> all(uint32_t n) const {  // copies: safe on a temporary message
    std::vector<Field> v;
    for (const auto& x : fields)
      if (x.number == n) v.push_back(x);
    return v;
  }
  bool has(uint32_t n) const { return get(n) != nullptr; }
  int64_t i64(uint32_t n) const {
    auto f = get(n);
    return f ? f->i64() : 0;
  }
  double f64(uint32_t n) const {
    auto f = get(n);
    return f ? f->f64() : 0.0;
  }
  std::string str(uint32_t n) const {
    auto f = get(n);
    return f ? f->bytes : std::string();
  }
  inline Msg msg(uint32_t n) const;
};

inline uint64_t read_varint(const std::string& s, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (at >= s.size()) throw std::runtime_error("truncated varint");
    uint8_t b = static_cast<uint8_t>(s[at++]);
    v |= uint64_t(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("varint too long");
}

inline Msg parse(const std::string& s) {
  Msg m;
  size_t at = 0;
  while (at < s.size()) {
    uint64_t key = read_varint(s, at);
    Field f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<uint32_t>(key & 7);
    if (f.number == 0) throw std::runtime_error("field number 0");
    if (f.wire == 0) {
      f.v = read_varint(s, at);
    } else if (f.wire == 1 || f.wire == 5) {
      size_t n = f.wire == 1 ? 8 : 4;
      if (s.size() - at < n) throw std::runtime_error("truncated fixed field");
      std::memcpy(&f.v, s.data() + at, n);
      at += n;
    } else if (f.wire == 2) {
      uint64_t n = read_varint(s, at);
      if (s.size() - at < n) throw std::runtime_error("truncated bytes field");
      f.bytes = s.substr(at, n);
      at += n;
    } else {
      throw std::runtime_error("unexpected wire type " + std::to_string(f.wire));
    }
    m.fields.push_back(std::move(f));
  }
  return m;
}

inline Msg Msg::msg(uint32_t n) const {
  auto f = get(n);
  return f ? parse(f->bytes) : Msg{};
}

inline std::vector<double> packed_f64(const std::string& b) {
  std::vector<double> v(b.size() / 8);
  std::memcpy(v.data(), b.data(), v.size() * 8);
  return v;
}
inline std::vector<float> packed_f32(const std::string& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

// Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; SessionLog session_log = 7; }
// Summary { repeated Value value = 1; } Value { string tag = 1; ... }
struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::optional<std::string> file_version;
  std::optional<Msg> session_log;
  std::vector<Msg> values;  // the summary's values
};

inline Event decode_event(const std::string& record) {
  Msg m = parse(record);
  Event e;
  e.wall_time = m.f64(1);
  e.step = m.i64(2);
  if (m.has(3)) e.file_version = m.str(3);
  if (m.has(7)) e.session_log = m.msg(7);
  if (m.has(5))
    for (const Field& v : m.msg(5).all(1)) e.values.push_back(parse(v.bytes));
  return e;
}

// Every event of a file whose records must all be complete and valid.
inline std::vector<Event> read_events(const std::string& path) {
  Records r = read_records(file_bytes(path));
  if (!r.error.empty()) throw std::runtime_error(path + ": " + r.error);
  if (r.trailing) throw std::runtime_error(path + ": " + std::to_string(r.trailing) + " trailing bytes");
  std::vector<Event> out;
  for (const auto& rec : r.records) out.push_back(decode_event(rec));
  return out;
}

}  // namespace tb_test
