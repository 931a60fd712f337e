#include "io/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>

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

// The pid in a temporary file name "<pid>.<n>" (what follows "<path>.tmp."), or -1.
pid_t temp_pid(const std::string& rest) {
  size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string::npos || dot > 9 || dot + 1 == rest.size() ||
      rest.find_first_not_of("0123456789.") != std::string::npos || rest.find('.', dot + 1) != std::string::npos)
    return -1;
  return static_cast<pid_t>(std::stol(rest.substr(0, dot)));
}

// Removes what earlier saves of `path` left behind when they were killed mid-write (SIGKILL, a
// power cut): files named <path>.tmp.<pid>.<n> whose process no longer exists and which nobody
// holds locked (a writer keeps its temporary file locked, so a live writer in another pid
// namespace or on another host sharing the folder is left alone). Best effort: errors are ignored.
void remove_stale_temps(const std::string& path) {
  const std::string dir = dir_of(path);
  const std::string prefix = path.substr(path.find_last_of('/') + 1) + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const pid_t pid = temp_pid(name.substr(prefix.size()));
    if (pid <= 0 || pid == ::getpid()) continue;          // not ours to judge, or this process's (another thread's)
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its writer may still run
    const std::string full = dir + "/" + name;
    int fd = ::open(full.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0) ::unlink(full.c_str());
    ::close(fd);
  }
  ::closedir(d);
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
  if (std::fwrite(data, 1, n, f) != n) throw IOError(internal::str("cannot write to '", path, "': ", errno_text()));
}

void atomic_write(const std::string& path, const std::function<void(std::FILE*)>& write) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  remove_stale_temps(path);
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rng() % 1000000000);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw IOError(internal::str("cannot create '", tmp, "' to save '", path, "': ", errno_text()));
  ::flock(fd, LOCK_EX | LOCK_NB);  // held until it is closed (or the process dies): see remove_stale_temps
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw IOError(internal::str("cannot open '", tmp, "': ", errno_text()));
  }
  try {
    write(f);
    if (std::fflush(f) != 0) throw IOError(internal::str("cannot write '", tmp, "': ", errno_text()));
    if (::fsync(::fileno(f)) != 0) throw IOError(internal::str("cannot sync '", tmp, "': ", errno_text()));
  } catch (...) {
    std::fclose(f);
    ::unlink(tmp.c_str());
    throw;
  }
  if (std::fclose(f) != 0) {
    ::unlink(tmp.c_str());
    throw IOError(internal::str("cannot close '", tmp, "': ", errno_text()));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = errno_text();
    ::unlink(tmp.c_str());
    throw IOError(internal::str("cannot rename '", tmp, "' to '", path, "': ", err));
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
  if (!f) throw IOError(internal::str("cannot open '", path, "': ", errno_text()));
  struct stat st {};
  if (::fstat(::fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fclose(f);
    throw IOError(internal::str("cannot read '", path, "': not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    std::fclose(f);
    throw IOError(internal::str("'", path, "' is ", st.st_size, " bytes, more than the limit of ", max_bytes));
  }
  std::vector<char> buf(static_cast<size_t>(st.st_size));
  size_t got = buf.empty() ? 0 : std::fread(buf.data(), 1, buf.size(), f);
  std::fclose(f);
  if (got != buf.size()) throw IOError(internal::str("cannot read '", path, "': short read"));
  return buf;
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IOError(internal::str("cannot open '", path, "': ", errno_text()));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string why = S_ISREG(st.st_mode) ? errno_text() : "not a regular file";
    ::close(fd);
    throw IOError(internal::str("cannot map '", path, "': ", why));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const std::string why = errno_text();
      ::close(fd);
      throw IOError(internal::str("cannot map '", path, "' (", size_, " bytes): ", why));
    }
    data_ = static_cast<const char*>(p);
  }
  ::close(fd);  // the mapping keeps the file
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() { unmap(); }

void MappedFile::unmap() noexcept {
  if (data_) ::munmap(const_cast<char*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace nabla::io
