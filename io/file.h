// File helpers shared by every writer in nabla (npy, safetensors, checkpoints): writes go to a
// temporary file in the same directory, are flushed and fsynced, and then renamed over the target,
// so a crash mid-save never leaves a truncated file in place of the previous one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace nabla::io {

// Calls write(fd-backed stream) on a temporary file next to `path` (<path>.tmp.<pid>.<n>, locked
// while it is written), then atomically replaces `path`. Throws IOError naming the path on any
// failure (and removes the temporary file). Temporary files of `path` that a killed save left
// behind (their process is gone and their lock free) are removed first.
void atomic_write(const std::string& path, const std::function<void(std::FILE*)>& write);

// Reads a whole file; throws IOError naming the path if it cannot. Refuses files over max_bytes.
std::vector<char> read_file(const std::string& path, uint64_t max_bytes = uint64_t(1) << 40);

// A name or string read from an untrusted file, for an error message: quoted, control characters
// escaped, and cut after 80 bytes (at a UTF-8 character boundary) with the full length noted, so a
// hostile file cannot flood or garble a message: 'fc1.weight', 'a\x0Ab', 'xxxx...' (1000000 bytes).
std::string quote_name(const std::string& s);

// Writes all bytes or throws IOError.
void write_all(std::FILE* f, const void* data, size_t n, const std::string& path);

// A whole file mapped read-only into memory (mmap), for data sets larger than one wants to read:
// pages are read from disk when first touched and shared with every process that maps the file.
//
//   io::MappedFile tokens("train.bin");
//   auto* ids = reinterpret_cast<const uint16_t*>(tokens.data());   // tokens.size() bytes
//
// Throws IOError naming the path when the file cannot be opened or mapped. An empty file maps to
// data() == nullptr, size() == 0. The mapping lives until the object is destroyed; the bytes must
// not be written (the file changing underneath is the caller's business, as with any mmap).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const char* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void unmap() noexcept;
  std::string path_;
  const char* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace nabla::io
