// Helpers for the data/ tests: a temporary directory that cleans itself up, and raw file writers.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace nabla_test {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("nabla_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// An IDX file's bytes: magic 0x0000TTNN, big-endian dims, then `payload` as given.
inline std::vector<uint8_t> idx_bytes(uint8_t type, const std::vector<uint32_t>& dims,
                                      const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> b = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int k = 3; k >= 0; --k) b.push_back(static_cast<uint8_t>(d >> (8 * k)));
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

// A gzip file holding `plain` in uncompressed (stored) deflate blocks: lets tests build any .gz
// content, including lying IDX headers, without linking zlib.
inline std::vector<uint8_t> gzip_stored(const std::vector<uint8_t>& plain) {
  uint32_t table[256];
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
  uint32_t crc = 0xFFFFFFFFu;
  for (uint8_t b : plain) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  crc ^= 0xFFFFFFFFu;
  std::vector<uint8_t> out = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
  size_t pos = 0;
  do {
    size_t n = std::min<size_t>(plain.size() - pos, 65535);
    bool last = pos + n == plain.size();
    out.push_back(last ? 1 : 0);
    out.push_back(static_cast<uint8_t>(n));
    out.push_back(static_cast<uint8_t>(n >> 8));
    out.push_back(static_cast<uint8_t>(~n));
    out.push_back(static_cast<uint8_t>(~n >> 8));
    out.insert(out.end(), plain.begin() + static_cast<long>(pos), plain.begin() + static_cast<long>(pos + n));
    pos += n;
  } while (pos < plain.size());
  uint32_t size = static_cast<uint32_t>(plain.size());
  for (uint32_t v : {crc, size})
    for (int k = 0; k < 4; ++k) out.push_back(static_cast<uint8_t>(v >> (8 * k)));
  return out;
}

}  // namespace nabla_test
