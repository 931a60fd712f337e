// Hostile PyTorch files (shared subtrees, a deep shared key, millions of empty dicts, nested zip
// records, an expanded view), built byte by byte: the generator that writes the
// small ones into tests/hostile/torch/ (fuzz_make_corpus hostile, and from there into the fuzz
// corpus) and that the tests call at full size into a temporary folder (files of megabytes are not
// committed). Each function returns the whole file; sizes are parameters so that one shape of
// attack comes in a committed size and in the size that was reported.
//
//   billion_laughs     a dict of two 4 KB keys whose values are the dict one level down, 20 levels:
//                      a 9 KB file with 2^20 leaves whose dotted names are 80 KB each (80 GB)
//   deep_shared_key    dicts nested 990 deep, each {K: the next}, K one memoized 1 MB string: one
//                      leaf named by a 990 MB path, which flatten used to build quadratically
//   empty_dicts        a list of 9.9 M empty dicts, one pickle byte each (inside max_objects)
//   nested_records     400 stored zip records, each one's data holding the next record (header and
//                      data), with valid CRCs: 1.57 GB of storages from a 4.3 MB file
//   zero_stride_view   a tensor of 5e8 elements with stride 0 over a storage of one float, as
//                      torch.save writes torch.zeros(1).expand(500000000): legal, it must load
//
// Only the standard library and zlib (CRC-32 and deflate), so the tests and make_corpus.cpp can
// both include it.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nabla_fuzz::torch_hostile {

using Bytes = std::vector<uint8_t>;

// ---- pickle (protocol 2) ------------------------------------------------------------------------
struct Pickle {
  std::string s = "\x80\x02";
  void op(char c) { s.push_back(c); }
  void u32(uint32_t v) {
    for (int k = 0; k < 4; ++k) s.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
  }
  void str(std::string_view x) {
    op('X');  // BINUNICODE
    u32(static_cast<uint32_t>(x.size()));
    s.append(x);
  }
  void put(uint32_t i) { op('r'), u32(i); }  // LONG_BINPUT
  void get(uint32_t i) { op('j'), u32(i); }  // LONG_BINGET
  void global(std::string_view module, std::string_view name) {
    op('c');
    s.append(module), op('\n');
    s.append(name), op('\n');
  }
  void integer(int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');  // BININT
      u32(static_cast<uint32_t>(v));
    } else {
      op('\x8a'), op(8);  // LONG1, 8 bytes
      for (int k = 0; k < 8; ++k) s.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * k)) & 0xff));
    }
  }
  void ordered_dict() { global("collections", "OrderedDict"), op(')'), op('R'); }
  // torch._utils._rebuild_tensor_v2(storage `key` of `numel` elements, 0, sizes, strides, False, OrderedDict())
  void tensor(std::string_view storage_class, std::string_view key, int64_t numel, const std::vector<int64_t>& sizes,
              const std::vector<int64_t>& strides) {
    global("torch._utils", "_rebuild_tensor_v2");
    op('(');
    op('('), str("storage"), global("torch", storage_class), str(key), str("cpu"), integer(numel), op('t'), op('Q');
    integer(0);
    op('(');
    for (int64_t d : sizes) integer(d);
    op('t');
    op('(');
    for (int64_t d : strides) integer(d);
    op('t');
    op('\x89');  // NEWFALSE: requires_grad
    ordered_dict();
    op('t'), op('R');
  }
  void stop() { op('.'); }
};

// ---- zip ------------------------------------------------------------------------------------------
inline void put16(Bytes& b, uint32_t v) {
  b.push_back(static_cast<uint8_t>(v & 0xff));
  b.push_back(static_cast<uint8_t>((v >> 8) & 0xff));
}
inline void put32(Bytes& b, uint32_t v) { put16(b, v & 0xffff), put16(b, v >> 16); }

inline uint32_t crc(const void* p, size_t n) {
  return static_cast<uint32_t>(::crc32(0, static_cast<const Bytef*>(p), static_cast<uInt>(n)));
}

inline Bytes raw_deflate(std::string_view data) {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  Bytes out(deflateBound(&zs, static_cast<uLong>(data.size())) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

struct ZipEntry {
  std::string name;
  uint32_t crc = 0, csize = 0, size = 0, offset = 0;
  uint16_t method = 0;
};

inline void local_header(Bytes& b, const ZipEntry& e) {
  put32(b, 0x04034b50), put16(b, 20), put16(b, 0), put16(b, e.method), put16(b, 0), put16(b, 0x21);
  put32(b, e.crc), put32(b, e.csize), put32(b, e.size), put16(b, static_cast<uint32_t>(e.name.size())), put16(b, 0);
  b.insert(b.end(), e.name.begin(), e.name.end());
}

inline void finish_zip(Bytes& b, const std::vector<ZipEntry>& entries) {
  const uint32_t cd = static_cast<uint32_t>(b.size());
  for (const ZipEntry& e : entries) {
    put32(b, 0x02014b50), put16(b, 20), put16(b, 20), put16(b, 0), put16(b, e.method), put16(b, 0), put16(b, 0x21);
    put32(b, e.crc), put32(b, e.csize), put32(b, e.size), put16(b, static_cast<uint32_t>(e.name.size()));
    put16(b, 0), put16(b, 0), put16(b, 0), put16(b, 0), put32(b, 0), put32(b, e.offset);
    b.insert(b.end(), e.name.begin(), e.name.end());
  }
  const uint32_t cd_size = static_cast<uint32_t>(b.size()) - cd;
  put32(b, 0x06054b50), put16(b, 0), put16(b, 0), put16(b, static_cast<uint32_t>(entries.size()));
  put16(b, static_cast<uint32_t>(entries.size())), put32(b, cd_size), put32(b, cd), put16(b, 0);
}

// A torch.save-like archive: archive/data.pkl (deflated when asked), the storages, archive/version.
inline Bytes archive(const std::string& pkl, const std::vector<std::pair<std::string, std::string>>& storages,
                     bool deflate_pkl = false) {
  Bytes b;
  std::vector<ZipEntry> entries;
  auto add = [&](const std::string& name, std::string_view data, bool deflate) {
    ZipEntry e;
    e.name = name;
    e.crc = crc(data.data(), data.size());
    e.size = static_cast<uint32_t>(data.size());
    e.offset = static_cast<uint32_t>(b.size());
    Bytes packed = deflate ? raw_deflate(data) : Bytes(data.begin(), data.end());
    e.method = deflate ? 8 : 0;
    e.csize = static_cast<uint32_t>(packed.size());
    local_header(b, e);
    b.insert(b.end(), packed.begin(), packed.end());
    entries.push_back(e);
  };
  add("archive/data.pkl", pkl, deflate_pkl);
  for (const auto& [key, data] : storages) add("archive/data/" + key, data, false);
  add("archive/version", "3\n", false);
  finish_zip(b, entries);
  return b;
}

// ---- the files ------------------------------------------------------------------------------------

// {A: d, B: d} with d the same dict one level down, `levels` levels, A and B keys of `key_bytes`.
inline Bytes billion_laughs(int levels = 20, size_t key_bytes = 4096, bool deflate = false) {
  Pickle p;
  p.op('N'), p.put(0);  // the bottom: None
  p.str(std::string(key_bytes, 'A')), p.put(1);
  p.str(std::string(key_bytes, 'B')), p.put(2);
  p.op('0'), p.op('0'), p.op('0');  // POP the three
  for (int l = 0; l < levels; ++l) {
    p.op('}'), p.op('(');
    p.get(1), p.get(static_cast<uint32_t>(l == 0 ? 0 : 2 + l));
    p.get(2), p.get(static_cast<uint32_t>(l == 0 ? 0 : 2 + l));
    p.op('u'), p.put(static_cast<uint32_t>(3 + l));
    if (l + 1 < levels) p.op('0');
  }
  p.stop();
  return archive(p.s, {}, deflate);
}

// {K: {K: ... {K: None}}} nested `depth` deep, K one string of `key_bytes` memoized once.
inline Bytes deep_shared_key(int depth = 990, size_t key_bytes = size_t(1) << 20, bool deflate = false) {
  Pickle p;
  for (int l = 0; l < depth; ++l) {
    p.op('}');
    if (l == 0) p.str(std::string(key_bytes, 'K')), p.put(0);
    else p.get(0);
  }
  p.op('N');
  for (int l = 0; l < depth; ++l) p.op('s');  // SETITEM, innermost first
  p.stop();
  return archive(p.s, {}, deflate);
}

// [{}, {}, ...]: `n` empty dicts, one pickle byte each.
inline Bytes empty_dicts(size_t n = 9'900'000, bool deflate = false) {
  Pickle p;
  p.op(']'), p.op('(');
  p.s.append(n, '}');
  p.op('e');  // APPENDS
  p.stop();
  return archive(p.s, {}, deflate);
}

// `records` stored uint8 storages data/000, data/001, ... each holding the next one's local header
// and data; the innermost holds `inner_bytes` bytes. Every CRC is right (computed inside out).
inline Bytes nested_records(int records = 400, size_t inner_bytes = size_t(4) << 20) {
  auto key = [](int k) {
    std::string s = std::to_string(k);
    return std::string(3 - std::min<size_t>(3, s.size()), '0') + s;
  };
  // The sizes, inside out: each record's data is the next record's header and data.
  std::vector<ZipEntry> rec(static_cast<size_t>(records));
  for (int k = records; k-- > 0;) {
    ZipEntry& e = rec[static_cast<size_t>(k)];
    e.name = "archive/data/" + key(k);
    e.size = e.csize = k + 1 == records ? static_cast<uint32_t>(inner_bytes)
                                        : static_cast<uint32_t>(30 + rec[static_cast<size_t>(k) + 1].name.size() +
                                                                rec[static_cast<size_t>(k) + 1].size);
  }
  Pickle p;
  p.ordered_dict(), p.op('(');
  for (int k = 0; k < records; ++k) {
    const ZipEntry& e = rec[static_cast<size_t>(k)];
    p.str("t" + key(k));
    p.tensor("ByteStorage", key(k), e.size, {static_cast<int64_t>(e.size)}, {1});
  }
  p.op('u'), p.stop();
  Bytes b;
  std::vector<ZipEntry> entries;
  ZipEntry pkl{"archive/data.pkl",
               crc(p.s.data(), p.s.size()),
               static_cast<uint32_t>(p.s.size()),
               static_cast<uint32_t>(p.s.size()),
               0,
               0};
  local_header(b, pkl);
  b.insert(b.end(), p.s.begin(), p.s.end());
  entries.push_back(pkl);
  // The headers one after another (each inside the previous record's data), then the innermost data.
  const size_t first = b.size();
  for (ZipEntry& e : rec) {
    e.offset = static_cast<uint32_t>(b.size());
    local_header(b, e);  // CRCs are patched in below
  }
  const size_t inner = b.size();
  for (size_t i = 0; i < inner_bytes; ++i) b.push_back(static_cast<uint8_t>(i * 131 + 7));
  // CRC of record k = CRC of the bytes from its data start to the end of the innermost data,
  // combined inside out so that the whole takes one pass.
  uint32_t c = crc(b.data() + inner, inner_bytes);
  uint64_t len = inner_bytes;
  for (int k = records; k-- > 0;) {
    ZipEntry& e = rec[static_cast<size_t>(k)];
    if (k + 1 < records) {
      const ZipEntry& next = rec[static_cast<size_t>(k) + 1];
      const size_t h = next.offset, hn = 30 + next.name.size();
      c = static_cast<uint32_t>(::crc32_combine(crc(b.data() + h, hn), c, static_cast<z_off_t>(len)));
      len += hn;
    }
    e.crc = c;
    for (int q = 0; q < 4; ++q) b[e.offset + 14 + static_cast<size_t>(q)] = static_cast<uint8_t>(c >> (8 * q));
  }
  (void)first;
  entries.insert(entries.end(), rec.begin(), rec.end());
  ZipEntry version{"archive/version", crc("3\n", 2), 2, 2, static_cast<uint32_t>(b.size()), 0};
  local_header(b, version);
  b.push_back('3'), b.push_back('\n');
  entries.push_back(version);
  finish_zip(b, entries);
  return b;
}

// OrderedDict {'expanded': tensor of [n] with stride [0] over a storage of one float (2.5)}.
inline Bytes zero_stride_view(int64_t n = 500'000'000) {
  Pickle p;
  p.ordered_dict(), p.op('(');
  p.str("expanded");
  p.tensor("FloatStorage", "0", 1, {n}, {0});
  p.op('u'), p.stop();
  const float v = 2.5f;
  return archive(p.s, {{"0", std::string(reinterpret_cast<const char*>(&v), 4)}});
}

}  // namespace nabla_fuzz::torch_hostile
