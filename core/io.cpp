#include "core/io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "core/error.h"

namespace nabla::io {

namespace {
std::string errno_text() { return std::strerror(errno); }

std::string dir_of(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}
}  // namespace

std::string quote_name(const std::string& s) {
  constexpr size_t kMax = 80;
  size_t n = s.size();
  if (n > kMax) {
    n = kMax;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // not inside a UTF-8 sequence
  }
  std::string out = "'";
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "'";
  if (n < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

void write_all(std::FILE* f, const void* data, size_t n, const std::string& path) {
  if (n == 0) return;
  if (std::fwrite(data, 1, n, f) != n)
    throw IOError(detail::str("cannot write to '", path, "': ", errno_text()));
}

void atomic_write(const std::string& path, const std::function<void(std::FILE*)>& write) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rng() % 1000000000);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw IOError(detail::str("cannot create '", tmp, "' to save '", path, "': ", errno_text()));
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw IOError(detail::str("cannot open '", tmp, "': ", errno_text()));
  }
  try {
    write(f);
    if (std::fflush(f) != 0) throw IOError(detail::str("cannot write '", tmp, "': ", errno_text()));
    if (::fsync(::fileno(f)) != 0) throw IOError(detail::str("cannot sync '", tmp, "': ", errno_text()));
  } catch (...) {
    std::fclose(f);
    ::unlink(tmp.c_str());
    throw;
  }
  if (std::fclose(f) != 0) {
    ::unlink(tmp.c_str());
    throw IOError(detail::str("cannot close '", tmp, "': ", errno_text()));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = errno_text();
    ::unlink(tmp.c_str());
    throw IOError(detail::str("cannot rename '", tmp, "' to '", path, "': ", err));
  }
  // Make the rename itself durable.
  int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::vector<char> read_file(const std::string& path, uint64_t max_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw IOError(detail::str("cannot open '", path, "': ", errno_text()));
  struct stat st {};
  if (::fstat(::fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fclose(f);
    throw IOError(detail::str("cannot read '", path, "': not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    std::fclose(f);
    throw IOError(detail::str("'", path, "' is ", st.st_size, " bytes, more than the limit of ", max_bytes));
  }
  std::vector<char> buf(static_cast<size_t>(st.st_size));
  size_t got = buf.empty() ? 0 : std::fread(buf.data(), 1, buf.size(), f);
  std::fclose(f);
  if (got != buf.size()) throw IOError(detail::str("cannot read '", path, "': short read"));
  return buf;
}

}  // namespace nabla::io
