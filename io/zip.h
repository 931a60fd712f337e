// ZIP archives: what torch.save writes (and NumPy's .npz): a reader that trusts nothing, and a writer
// of stored (uncompressed) entries aligned for direct reads.
//
// The reader takes the central directory as the truth, as every zip tool does: it finds the end
// record (and the ZIP64 one when a size, an offset or the count needs 64 bits), checks that the
// directory, every local header and every entry's data lie inside the file before anything is
// allocated, refuses encryption, split archives, duplicate names, entries that overlap (each one's
// header and data must end before the next one's header) and compression methods other than
// stored (0) and deflate (8), and checks each entry's CRC-32 and exact size as it reads it.
// Every problem throws IOError naming the file (and the entry).
//
//   zip::Source file("model.pt");                     // or zip::Source(bytes, size, "name")
//   zip::Reader z(file);
//   const zip::Entry* e = z.find("model/data.pkl");
//   std::vector<char> pkl = z.read(*e, 1 << 30);      // refuses entries over 1 GiB
//   z.read_into(*z.find("model/data/0"), buffer);      // exactly e.size bytes, one read when stored
//
//   io::atomic_write(path, [&](std::FILE* f) {
//     zip::Writer w(f, path);
//     w.add("model/data.pkl", bytes.data(), bytes.size());
//     w.finish();
//   });
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nabla::zip {

struct Entry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint32_t crc32 = 0;
  uint64_t compressed_size = 0;  // bytes in the archive
  uint64_t size = 0;             // bytes once extracted
  uint64_t header_offset = 0;    // of the local header
};

// Bytes read by offset from a file (pread) or from memory, with every read checked against the size.
class Source {
 public:
  // Opens a regular file; throws IOError naming it.
  explicit Source(const std::string& path);
  // Memory that must outlive the source (not copied); `what` names it in errors.
  Source(const char* data, size_t size, std::string what);
  ~Source();
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;

  uint64_t size() const { return size_; }
  // How the file is named in errors: 'path'.
  const std::string& what() const { return what_; }
  // Exactly n bytes at `offset`, or IOError "<what>: <context>: ..." (past the end, or a short read).
  void read(void* dst, uint64_t n, uint64_t offset, const std::string& context) const;
  // The same n bytes without copying them where it can: the memory of an in-memory source, a copy
  // of a file's (not a mapping: a file truncated while mapped would end the process with SIGBUS).
  std::shared_ptr<const char> view(uint64_t n, uint64_t offset, const std::string& context) const;

 private:
  int fd_ = -1;
  const char* mem_ = nullptr;
  uint64_t size_ = 0;
  std::string what_;
};

class Reader {
 public:
  // Reads the central directory of an archive; `source` must outlive the reader.
  explicit Reader(const Source& source);
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(std::string_view name) const;
  const Source& source() const { return src_; }

  // The entry's bytes, exactly entry.size of them, written to dst; the CRC is checked unless
  // check_crc is false (a corrupt byte then goes unnoticed; sizes and offsets are checked anyway).
  void read_into(const Entry& e, void* dst, bool check_crc = true) const;
  // The same into a new buffer, refusing entries larger than max_bytes.
  std::vector<char> read(const Entry& e, uint64_t max_bytes) const;
  // Where a stored entry's bytes start in the file (after checking its local header).
  uint64_t data_offset(const Entry& e) const;
  // A stored entry's bytes without copying them (Source::view); its CRC is not checked: check_crc
  // does that, once they are used (or to tell corruption from another error).
  std::shared_ptr<const char> view(const Entry& e) const;
  void check_crc(const Entry& e, const void* data) const;

 private:
  void read_directory();
  [[noreturn]] void fail(const std::string& msg) const;

  const Source& src_;
  uint64_t directory_offset_ = 0;  // entries' data must end before the central directory
  std::vector<Entry> entries_;
  std::vector<uint64_t> end_limit_;  // per entry: the next local header's offset (or the directory's)
  std::unordered_map<std::string, size_t> index_;
};

// Writes an archive of stored entries to an open stream, sequentially. Each entry's data starts at a
// multiple of `alignment` bytes in the file (padding goes into the local header's extra field, as
// PyTorch does, so storages can be read or mapped in place). ZIP64 records are written when sizes or
// offsets need them (or always, with force_zip64, to test readers).
class Writer {
 public:
  Writer(std::FILE* f, std::string path, bool force_zip64 = false);
  // One entry from several pieces of memory (concatenated); alignment 0 or 1 means none.
  void add(const std::string& name, const std::vector<std::pair<const void*, size_t>>& pieces, size_t alignment = 64);
  void add(const std::string& name, const void* data, size_t size, size_t alignment = 64) {
    add(name, {{data, size}}, alignment);
  }
  // Writes the central directory and the end records; no entry may be added after.
  void finish();
  uint64_t bytes_written() const { return pos_; }

 private:
  void put(const void* data, size_t n);
  std::FILE* f_;
  std::string path_;
  bool force_zip64_;
  bool finished_ = false;
  uint64_t pos_ = 0;
  std::vector<Entry> entries_;
};

// CRC-32 of a buffer as zip stores it (zlib's crc32, continued from `crc`).
uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);

}  // namespace nabla::zip
