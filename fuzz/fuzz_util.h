// Shared by the fuzz targets: a scratch file for readers that take a path, and the rule every
// target enforces: a reader either succeeds or throws a nabla::Error whose message is not empty.
// Anything else (another exception type, such as std::out_of_range from map::at, or a crash, a
// sanitizer report, a hang, memory over -rss_limit_mb) is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/error.h"

namespace nabla_fuzz {

// A file in /dev/shm (or $TMPDIR, or /tmp) private to this process, rewritten for each input.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& name) {
    const char* dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                      : std::getenv("TMPDIR")         ? std::getenv("TMPDIR")
                                                      : "/tmp";
    path_ = std::string(dir) + "/nabla-fuzz-" + std::to_string(::getpid()) + "-" + name;
  }
  ~ScratchFile() { std::remove(path_.c_str()); }
  const std::string& write(const uint8_t* data, size_t size) {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
      std::perror(path_.c_str());
      std::abort();
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

[[noreturn]] inline void finding(const char* what, const char* message) {
  std::fprintf(stderr, "\n==== fuzz finding: %s: %s\n", what, message);
  std::abort();
}

// Runs f(); a nabla::Error is an expected outcome for a hostile input (its message must say
// something), anything else thrown is a finding. Returns the error message, or "" on success.
template <class F>
std::string expect_clean(F&& f) {
  try {
    f();
    return "";
  } catch (const nabla::Error& e) {
    if (!*e.what()) finding("a nabla::Error with an empty message", "");
    return e.what();
  } catch (const std::exception& e) { finding("an exception that is not a nabla::Error", e.what()); } catch (...) {
    finding("an exception that is not a std::exception", "?");
  }
}

}  // namespace nabla_fuzz
