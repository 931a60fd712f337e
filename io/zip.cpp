#include "io/zip.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "io/file.h"

namespace nabla::zip {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50, kEnd64Sig = 0x06064b50,
                   kLocator64Sig = 0x07064b50;
constexpr size_t kLocalSize = 30, kCentralSize = 46, kEndSize = 22, kEnd64Size = 56, kLocator64Size = 20;
constexpr uint32_t kMax32 = 0xffffffffu;
constexpr uint16_t kMax16 = 0xffffu;
// Deflate cannot expand data more than 1032 to 1 (a run of one byte); more is a lie.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr size_t kChunk = size_t(1) << 20;  // compressed bytes read at a time

uint16_t u16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t u32(const unsigned char* p) {
  return static_cast<uint32_t>(u16(p)) | (static_cast<uint32_t>(u16(p + 2)) << 16);
}
uint64_t u64(const unsigned char* p) {
  return static_cast<uint64_t>(u32(p)) | (static_cast<uint64_t>(u32(p + 4)) << 32);
}

void put16(std::string& s, uint16_t v) {
  s.push_back(static_cast<char>(v & 0xff));
  s.push_back(static_cast<char>(v >> 8));
}
void put32(std::string& s, uint32_t v) {
  put16(s, static_cast<uint16_t>(v & 0xffff));
  put16(s, static_cast<uint16_t>(v >> 16));
}
void put64(std::string& s, uint64_t v) {
  put32(s, static_cast<uint32_t>(v & kMax32));
  put32(s, static_cast<uint32_t>(v >> 32));
}

std::string num(uint64_t v) { return std::to_string(v); }

}  // namespace

namespace {
uint32_t crc32_serial(const Bytef* p, size_t n, uint32_t crc) {
  while (n > 0) {  // zlib takes uInt lengths
    uInt k = static_cast<uInt>(std::min<size_t>(n, UINT_MAX));
    crc = static_cast<uint32_t>(::crc32(crc, p, k));
    p += k;
    n -= k;
  }
  return crc;
}
}  // namespace

uint32_t crc32(const void* data, size_t n, uint32_t crc) {
  auto* p = static_cast<const Bytef*>(data);
  // Large buffers: blocks on every core, joined with crc32_combine (CRC-32 runs at ~4 GB/s a core,
  // as fast as memory is copied from the page cache, so one core would halve a load's speed).
  constexpr size_t kBlock = size_t(1) << 20;
  if (n < 4 * kBlock || get_num_threads() == 1 || in_parallel_region()) return crc32_serial(p, n, crc);
  const int64_t blocks = static_cast<int64_t>((n + kBlock - 1) / kBlock);
  std::vector<uint32_t> part(static_cast<size_t>(blocks));
  parallel_for(0, blocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      size_t off = static_cast<size_t>(i) * kBlock;
      part[static_cast<size_t>(i)] = crc32_serial(p + off, std::min(kBlock, n - off), 0);
    }
  });
  for (int64_t i = 0; i < blocks; ++i) {
    size_t len = std::min(kBlock, n - static_cast<size_t>(i) * kBlock);
    crc = static_cast<uint32_t>(crc32_combine(crc, part[static_cast<size_t>(i)], static_cast<z_off_t>(len)));
  }
  return crc;
}

// ---- source ---------------------------------------------------------------------------------------

Source::Source(const std::string& path) : what_("'" + path + "'") {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw IOError(internal::str("cannot open ", what_, ": ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw IOError(internal::str("cannot read ", what_, ": not a regular file"));
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

Source::Source(const char* data, size_t size, std::string what) : mem_(data), size_(size), what_(std::move(what)) {}

Source::~Source() {
  if (fd_ >= 0) ::close(fd_);
}

void Source::read(void* dst, uint64_t n, uint64_t offset, const std::string& context) const {
  if (offset > size_ || n > size_ - offset)
    throw IOError(internal::str(what_, ": ", context, ": ", n, " bytes at offset ", offset,
                                " run past the end of the file (", size_, " bytes; truncated?)"));
  if (mem_) {
    if (n) std::memcpy(dst, mem_ + offset, n);
    return;
  }
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    ssize_t got = ::pread(fd_, p, std::min<uint64_t>(n, uint64_t(1) << 30), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw IOError(internal::str(what_, ": ", context, ": ", got < 0 ? std::strerror(errno) : "unexpected end of file",
                                  " (was the file changed while reading?)"));
    p += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
}

std::shared_ptr<const char> Source::view(uint64_t n, uint64_t offset, const std::string& context) const {
  if (offset > size_ || n > size_ - offset)
    throw IOError(internal::str(what_, ": ", context, ": ", n, " bytes at offset ", offset,
                                " run past the end of the file (", size_, " bytes; truncated?)"));
  if (mem_) return std::shared_ptr<const char>(mem_ + offset, [](const char*) {});
  // (Not mapped: a file truncated while mapped would end the process with SIGBUS.)
  std::shared_ptr<char> copy(new char[n ? n : 1], std::default_delete<char[]>());
  read(copy.get(), n, offset, context);
  return copy;
}

// ---- reader ---------------------------------------------------------------------------------------

Reader::Reader(const Source& source) : src_(source) { read_directory(); }

void Reader::fail(const std::string& msg) const { throw IOError(internal::str(src_.what(), ": ", msg)); }

void Reader::read_directory() {
  const uint64_t file_size = src_.size();
  if (file_size < kEndSize)
    fail(internal::str("not a zip archive: ", file_size, " bytes is too short for its end record"));
  // The end record is the last 22 bytes plus a comment of up to 65535 bytes: search backwards.
  uint64_t tail_len = std::min<uint64_t>(file_size, kEndSize + 65535);
  std::vector<unsigned char> tail(tail_len);
  src_.read(tail.data(), tail_len, file_size - tail_len, "reading the end of the archive");
  int64_t at = -1;
  for (int64_t i = static_cast<int64_t>(tail_len - kEndSize); i >= 0; --i) {
    const unsigned char* p = tail.data() + i;
    if (u32(p) == kEndSig && static_cast<uint64_t>(i) + kEndSize + u16(p + 20) <= tail_len) {
      at = i;
      break;
    }
  }
  if (at < 0) fail("not a zip archive (no end of central directory record; truncated?)");
  const unsigned char* end = tail.data() + at;
  uint64_t end_pos = file_size - tail_len + static_cast<uint64_t>(at);
  uint64_t disk = u16(end + 4), cd_disk = u16(end + 6), n_disk = u16(end + 8), n_total = u16(end + 10);
  uint64_t cd_size = u32(end + 12), cd_offset = u32(end + 16);
  uint64_t data_end = end_pos;  // where the central directory must end

  // ZIP64: a locator just before the end record points at the 64-bit end record.
  if (end_pos >= kLocator64Size) {
    unsigned char loc[kLocator64Size];
    src_.read(loc, kLocator64Size, end_pos - kLocator64Size, "reading the ZIP64 locator");
    if (u32(loc) == kLocator64Sig) {
      uint64_t rec = u64(loc + 8);
      if (u32(loc + 4) != 0 || u32(loc + 16) > 1) fail("split (multi-disk) archives are not supported");
      if (rec > end_pos - kLocator64Size || end_pos - kLocator64Size - rec < kEnd64Size)
        fail(internal::str("the ZIP64 end record offset ", rec, " is outside the file"));
      unsigned char e64[kEnd64Size];
      src_.read(e64, kEnd64Size, rec, "reading the ZIP64 end record");
      if (u32(e64) != kEnd64Sig) fail(internal::str("no ZIP64 end record at offset ", rec));
      disk = u32(e64 + 16);
      cd_disk = u32(e64 + 20);
      n_disk = u64(e64 + 24);
      n_total = u64(e64 + 32);
      cd_size = u64(e64 + 40);
      cd_offset = u64(e64 + 48);
      data_end = rec;
    } else if (n_total == kMax16 || cd_size == kMax32 || cd_offset == kMax32) {
      // Only a marker value: a plain archive may really hold 65535 entries; keep going.
    }
  }
  if (disk != 0 || cd_disk != 0 || n_disk != n_total) fail("split (multi-disk) archives are not supported");
  if (cd_offset > data_end || cd_size > data_end - cd_offset)
    fail(internal::str("the central directory (", cd_size, " bytes at offset ", cd_offset,
                       ") runs past the end of the archive (truncated file?)"));
  if (n_total > cd_size / kCentralSize)
    fail(internal::str("the end record claims ", n_total, " entries but the central directory holds only ", cd_size,
                       " bytes"));
  directory_offset_ = cd_offset;

  std::vector<unsigned char> cd(cd_size);
  src_.read(cd.data(), cd_size, cd_offset, "reading the central directory");
  entries_.reserve(n_total);
  uint64_t pos = 0;
  for (uint64_t k = 0; k < n_total; ++k) {
    if (cd_size - pos < kCentralSize) fail(internal::str("the central directory ends inside entry ", k));
    const unsigned char* h = cd.data() + pos;
    if (u32(h) != kCentralSig) fail(internal::str("central directory entry ", k, " has a bad signature"));
    uint16_t flags = u16(h + 8);
    Entry e;
    e.method = u16(h + 10);
    e.crc32 = u32(h + 16);
    e.compressed_size = u32(h + 20);
    e.size = u32(h + 24);
    uint64_t name_len = u16(h + 28), extra_len = u16(h + 30), comment_len = u16(h + 32);
    uint64_t disk_start = u16(h + 34);
    e.header_offset = u32(h + 42);
    if (cd_size - pos - kCentralSize < name_len + extra_len + comment_len)
      fail(internal::str("central directory entry ", k, " runs past the end of the directory"));
    e.name.assign(reinterpret_cast<const char*>(h + kCentralSize), name_len);
    std::string quoted = "entry '" + e.name + "'";
    if (e.name.empty() || e.name.find('\0') != std::string::npos)
      fail(internal::str("entry ", k, " has an invalid name"));
    // ZIP64 extra field: the 64-bit values of the fields that hold 0xffffffff, in this order.
    const unsigned char* x = h + kCentralSize + name_len;
    for (uint64_t xp = 0; xp + 4 <= extra_len;) {
      uint16_t id = u16(x + xp), len = u16(x + xp + 2);
      if (xp + 4 + len > extra_len) fail(quoted + ": malformed extra field");
      if (id == 0x0001) {
        const unsigned char* v = x + xp + 4;
        uint64_t left = len;
        auto take = [&](uint64_t& field) {
          if (left < 8) fail(quoted + ": ZIP64 extra field too short");
          field = u64(v);
          v += 8;
          left -= 8;
        };
        if (e.size == kMax32) take(e.size);
        if (e.compressed_size == kMax32) take(e.compressed_size);
        if (e.header_offset == kMax32) take(e.header_offset);
        if (disk_start == kMax16 && left >= 4) disk_start = u32(v);
      }
      xp += 4 + len;
    }
    pos += kCentralSize + name_len + extra_len + comment_len;
    if (flags & 0x41) fail(quoted + " is encrypted, which is not supported");
    if (disk_start != 0) fail("split (multi-disk) archives are not supported");
    if (e.method != 0 && e.method != 8)
      fail(internal::str(quoted, " uses compression method ", e.method, " (only stored and deflate are supported)"));
    if (e.method == 0 && e.compressed_size != e.size)
      fail(internal::str(quoted, " is stored but its sizes differ (", e.compressed_size, " and ", e.size, ")"));
    if (e.header_offset > cd_offset || cd_offset - e.header_offset < kLocalSize ||
        cd_offset - e.header_offset - kLocalSize < e.compressed_size)
      fail(internal::str(quoted, " claims ", e.compressed_size, " bytes at offset ", e.header_offset,
                         ", past the end of the archive's data (", cd_offset, " bytes; file is ", src_.size(),
                         " bytes)"));
    if (e.method == 8 && e.size / kMaxDeflateRatio > e.compressed_size + 1)
      fail(internal::str(quoted, " claims to inflate ", e.compressed_size, " bytes to ", e.size,
                         ", more than deflate can (a zip bomb?)"));
    if (!index_.emplace(e.name, entries_.size()).second) fail("duplicate " + quoted);
    entries_.push_back(std::move(e));
  }
  // Entries may not overlap: each one's header and data end before the next header in the file
  // (data_offset checks it again with the local header's own lengths). Otherwise records nested in
  // each other's data, each with a valid CRC, make a 4 MB file read as 1.6 GB.
  std::vector<size_t> order(entries_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return entries_[a].header_offset < entries_[b].header_offset; });
  end_limit_.assign(entries_.size(), cd_offset);
  for (size_t k = 0; k + 1 < order.size(); ++k) {
    const Entry &a = entries_[order[k]], &b = entries_[order[k + 1]];
    end_limit_[order[k]] = b.header_offset;
    if (b.header_offset - a.header_offset < kLocalSize + a.name.size() ||
        b.header_offset - a.header_offset - kLocalSize - a.name.size() < a.compressed_size)
      fail(internal::str("entries '", a.name, "' and '", b.name, "' overlap: '", a.name, "' (", a.compressed_size,
                         " bytes after its header at offset ", a.header_offset, ") reaches into '", b.name,
                         "' at offset ", b.header_offset, " (entries nested in each other: a zip bomb?)"));
  }
}

const Entry* Reader::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

uint64_t Reader::data_offset(const Entry& e) const {
  unsigned char h[kLocalSize];
  src_.read(h, kLocalSize, e.header_offset, "reading the local header of entry '" + e.name + "'");
  if (u32(h) != kLocalSig) fail("entry '" + e.name + "' has no local header at offset " + num(e.header_offset));
  uint64_t name_len = u16(h + 26), extra_len = u16(h + 28);
  uint64_t start = e.header_offset + kLocalSize + name_len + extra_len;
  // (e may be a copy of an entry: then it is found by name.)
  const bool own = &e >= entries_.data() && &e < entries_.data() + entries_.size();
  const Entry* mine = own ? &e : find(e.name);
  const uint64_t limit = mine ? end_limit_[static_cast<size_t>(mine - entries_.data())] : directory_offset_;
  if (start > limit || limit - start < e.compressed_size)
    fail(internal::str("entry '", e.name, "': its ", e.compressed_size, " bytes at offset ", start, " run into ",
                       limit == directory_offset_ ? "the central directory" : "the next entry", " (at ", limit, ")"));
  if (name_len != e.name.size()) fail("entry '" + e.name + "': the local header names another file");
  std::string local(name_len, '\0');
  src_.read(local.data(), name_len, e.header_offset + kLocalSize, "reading a local header");
  if (local != e.name) fail("entry '" + e.name + "': the local header names '" + local + "'");
  return start;
}

void Reader::read_into(const Entry& e, void* dst, bool check_crc) const {
  const uint64_t start = data_offset(e);
  auto* out = static_cast<unsigned char*>(dst);
  uint32_t crc = 0;
  if (e.method == 0) {
    src_.read(out, e.size, start, "reading entry '" + e.name + "'");
    if (check_crc) crc = crc32(out, e.size);
  } else {
    z_stream zs{};
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail("entry '" + e.name + "': cannot start zlib");
    std::vector<unsigned char> in(std::min<uint64_t>(kChunk, std::max<uint64_t>(e.compressed_size, 1)));
    uint64_t read = 0, produced = 0;
    int rc = Z_OK;
    unsigned char spill = 0;
    try {
      while (rc != Z_STREAM_END) {
        if (zs.avail_in == 0) {
          if (read == e.compressed_size)
            fail(internal::str("entry '", e.name, "': its deflate stream ends early (", produced, " of ", e.size,
                               " bytes; corrupt or truncated)"));
          uint64_t n = std::min<uint64_t>(in.size(), e.compressed_size - read);
          src_.read(in.data(), n, start + read, "reading entry '" + e.name + "'");
          read += n;
          zs.next_in = in.data();
          zs.avail_in = static_cast<uInt>(n);
        }
        // Space for one more byte than the header promises, to catch streams that inflate to more.
        bool full = produced == e.size;
        zs.next_out = full ? &spill : out + produced;
        zs.avail_out = full ? 1 : static_cast<uInt>(std::min<uint64_t>(e.size - produced, UINT_MAX));
        uInt before = zs.avail_out;
        rc = inflate(&zs, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
          fail(internal::str("entry '", e.name, "': corrupt deflate data (", zs.msg ? zs.msg : "zlib error", ")"));
        uInt wrote = before - zs.avail_out;
        if (full && wrote > 0)
          fail(internal::str("entry '", e.name, "' inflates to more than the ", e.size, " bytes its header says"));
        produced += wrote;
        if (rc == Z_BUF_ERROR && zs.avail_in != 0 && !full) fail("entry '" + e.name + "': corrupt deflate data");
      }
    } catch (...) {
      inflateEnd(&zs);
      throw;
    }
    inflateEnd(&zs);
    if (produced != e.size)
      fail(
          internal::str("entry '", e.name, "' inflates to ", produced, " bytes, not the ", e.size, " its header says"));
    if (check_crc) crc = crc32(out, e.size);
  }
  if (check_crc && crc != e.crc32)
    fail(internal::str("entry '", e.name, "' fails its CRC-32 check (the file is corrupt)"));
}

std::shared_ptr<const char> Reader::view(const Entry& e) const {
  if (e.method != 0) fail("entry '" + e.name + "' is compressed: it cannot be read in place");
  return src_.view(e.size, data_offset(e), "reading entry '" + e.name + "'");
}

void Reader::check_crc(const Entry& e, const void* data) const {
  if (crc32(data, e.size) != e.crc32)
    fail(internal::str("entry '", e.name, "' fails its CRC-32 check (the file is corrupt)"));
}

std::vector<char> Reader::read(const Entry& e, uint64_t max_bytes) const {
  if (e.size > max_bytes)
    fail(internal::str("entry '", e.name, "' is ", e.size, " bytes, more than the limit of ", max_bytes));
  std::vector<char> out(e.size);
  read_into(e, out.data());
  return out;
}

// ---- writer ---------------------------------------------------------------------------------------

Writer::Writer(std::FILE* f, std::string path, bool force_zip64)
    : f_(f), path_(std::move(path)), force_zip64_(force_zip64) {}

void Writer::put(const void* data, size_t n) {
  io::write_all(f_, data, n, path_);
  pos_ += n;
}

void Writer::add(const std::string& name, const std::vector<std::pair<const void*, size_t>>& pieces, size_t alignment) {
  NABLA_CHECK(ValueError, !finished_, "zip::Writer: add after finish");
  NABLA_CHECK(ValueError, !name.empty() && name.size() < kMax16, "zip::Writer: invalid entry name '", name, "'");
  Entry e;
  e.name = name;
  e.header_offset = pos_;
  for (const auto& [p, n] : pieces) {
    e.crc32 = crc32(p, n, e.crc32);
    e.size += n;
  }
  e.compressed_size = e.size;
  const bool zip64 = force_zip64_ || e.size >= kMax32;
  std::string extra;
  if (zip64) {
    put16(extra, 0x0001);
    put16(extra, 16);
    put64(extra, e.size);
    put64(extra, e.size);
  }
  if (alignment > 1) {  // padding field "FB", as PyTorch writes it
    uint64_t start = pos_ + kLocalSize + name.size() + extra.size() + 4;
    uint64_t pad = (alignment - start % alignment) % alignment;
    put16(extra, 0x4246);  // 'F', 'B'
    put16(extra, static_cast<uint16_t>(pad));
    extra.append(pad, 'Z');
  }
  std::string h;
  put32(h, kLocalSig);
  put16(h, zip64 ? 45 : 20);  // version needed
  put16(h, 0x0800);           // flags: names are UTF-8
  put16(h, 0);                // stored
  put16(h, 0);                // time 00:00
  put16(h, 0x21);             // date 1980-01-01
  put32(h, e.crc32);
  put32(h, zip64 ? kMax32 : static_cast<uint32_t>(e.size));
  put32(h, zip64 ? kMax32 : static_cast<uint32_t>(e.size));
  put16(h, static_cast<uint16_t>(name.size()));
  put16(h, static_cast<uint16_t>(extra.size()));
  h += name;
  h += extra;
  put(h.data(), h.size());
  for (const auto& [p, n] : pieces) put(p, n);
  entries_.push_back(std::move(e));
}

void Writer::finish() {
  NABLA_CHECK(ValueError, !finished_, "zip::Writer: finish called twice");
  finished_ = true;
  const uint64_t cd_offset = pos_;
  std::string cd;
  for (const Entry& e : entries_) {
    const bool big_size = force_zip64_ || e.size >= kMax32, big_offset = force_zip64_ || e.header_offset >= kMax32;
    std::string extra;
    if (big_size || big_offset) {
      put16(extra, 0x0001);
      put16(extra, static_cast<uint16_t>((big_size ? 16 : 0) + (big_offset ? 8 : 0)));
      if (big_size) {
        put64(extra, e.size);
        put64(extra, e.size);
      }
      if (big_offset) put64(extra, e.header_offset);
    }
    put32(cd, kCentralSig);
    put16(cd, 45);  // version made by
    put16(cd, big_size || big_offset ? 45 : 20);
    put16(cd, 0x0800);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0x21);
    put32(cd, e.crc32);
    put32(cd, big_size ? kMax32 : static_cast<uint32_t>(e.size));
    put32(cd, big_size ? kMax32 : static_cast<uint32_t>(e.size));
    put16(cd, static_cast<uint16_t>(e.name.size()));
    put16(cd, static_cast<uint16_t>(extra.size()));
    put16(cd, 0);  // comment
    put16(cd, 0);  // disk
    put16(cd, 0);  // internal attributes
    put32(cd, 0);  // external attributes
    put32(cd, big_offset ? kMax32 : static_cast<uint32_t>(e.header_offset));
    cd += e.name;
    cd += extra;
  }
  put(cd.data(), cd.size());
  const uint64_t n = entries_.size(), cd_size = cd.size();
  const bool zip64 = force_zip64_ || n >= kMax16 || cd_offset >= kMax32 || cd_size >= kMax32;
  std::string end;
  if (zip64) {
    const uint64_t rec = pos_;
    put32(end, kEnd64Sig);
    put64(end, kEnd64Size - 12);
    put16(end, 45);
    put16(end, 45);
    put32(end, 0);
    put32(end, 0);
    put64(end, n);
    put64(end, n);
    put64(end, cd_size);
    put64(end, cd_offset);
    put32(end, kLocator64Sig);
    put32(end, 0);
    put64(end, rec);
    put32(end, 1);
  }
  put32(end, kEndSig);
  put16(end, 0);
  put16(end, 0);
  put16(end, zip64 ? kMax16 : static_cast<uint16_t>(n));
  put16(end, zip64 ? kMax16 : static_cast<uint16_t>(n));
  put32(end, zip64 ? kMax32 : static_cast<uint32_t>(cd_size));
  put32(end, zip64 ? kMax32 : static_cast<uint32_t>(cd_offset));
  put16(end, 0);
  put(end.data(), end.size());
}

}  // namespace nabla::zip
