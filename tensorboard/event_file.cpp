#include "tensorboard/event_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "tensorboard/crc32c.h"
#include "tensorboard/events.h"

namespace nabla::tensorboard {

namespace {

void put_u32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }  // little-endian, as TFRecord
void put_u64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }

}  // namespace

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

std::string event_file_name(const std::string& suffix) {
  static std::atomic<int64_t> counter{0};
  char t[32];
  std::snprintf(t, sizeof t, "%010lld", static_cast<long long>(wall_time()));
  return "events.out.tfevents." + std::string(t) + "." + hostname() + "." + std::to_string(::getpid()) + "." +
         std::to_string(counter.fetch_add(1)) + suffix;
}

void EventFile::frame(std::string_view data, std::string& out) {
  char head[12], foot[4];
  put_u64(head, data.size());
  put_u32(head + 8, mask_crc(crc32c(head, 8)));
  put_u32(foot, mask_crc(crc32c(data.data(), data.size())));
  out.append(head, 12);
  out.append(data);
  out.append(foot, 4);
}

EventFile::EventFile(std::string dir, EventFileOptions options) : dir_(std::move(dir)), options_(std::move(options)) {
  NABLA_CHECK(ValueError, options_.max_queue >= 1, "SummaryWriter: max_queue must be at least 1, got ",
              options_.max_queue);
  NABLA_CHECK(ValueError, options_.flush_secs > 0 && options_.flush_secs <= 1e9,
              "SummaryWriter: flush_secs must be positive (and at most 1e9), got ", options_.flush_secs);
  NABLA_CHECK(ValueError, !dir_.empty(), "SummaryWriter: the log folder name is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  NABLA_CHECK(IOError, !ec && std::filesystem::is_directory(dir_), "SummaryWriter: cannot create the log folder '",
              dir_, "': ", ec ? ec.message() : "it exists and is not a folder");
  path_ = (std::filesystem::path(dir_) / event_file_name(options_.filename_suffix)).string();
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  NABLA_CHECK(IOError, fd_ >= 0, "SummaryWriter: cannot create the event file '", path_, "': ", std::strerror(errno));
  try {
    std::string first;
    encode_file_version_event(first, wall_time(), std::nullopt, "brain.Event:2");
    add(first);
    flush();
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

EventFile::~EventFile() {
  try {
    close();
  } catch (const std::exception& e) { std::fprintf(stderr, "nabla: SummaryWriter: %s\n", e.what()); }
}

void EventFile::add(std::string_view event) {
  char head[12], foot[4];
  put_u64(head, event.size());
  put_u32(head + 8, mask_crc(crc32c(head, 8)));
  put_u32(foot, mask_crc(crc32c(event.data(), event.size())));
  std::unique_lock lk(mu_);
  if (queue_full()) {
    wake_.notify_one();  // the writer makes room
    space_.wait(lk, [&] { return !queue_full() || closing_ || error_; });
  }
  if (error_) rethrow_error();
  NABLA_CHECK(ValueError, !closing_, "SummaryWriter: the event file '", path_, "' was closed");
  pending_.append(head, 12);
  pending_.append(event);
  pending_.append(foot, 4);
  ++pending_records_;
  if (pending_records_ >= options_.max_queue || queue_full()) wake_.notify_one();
}

void EventFile::write_pending(std::unique_lock<std::mutex>& lk) {
  if (pending_.empty()) return;
  if (error_) {  // after a failed write the file's end is unknown: nothing more goes after it
    pending_.clear();
    pending_records_ = 0;
    space_.notify_all();
    return;
  }
  writing_.swap(pending_);
  pending_records_ = 0;
  space_.notify_all();
  lk.unlock();
  const char* p = writing_.data();
  size_t left = writing_.size();
  std::string failure;
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failure = "cannot write the event file '" + path_ + "': " + (n < 0 ? std::strerror(errno) : "no progress");
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  writing_.clear();
  lk.lock();
  if (!failure.empty() && !error_) error_ = std::make_exception_ptr(IOError("SummaryWriter: " + failure));
}

void EventFile::rethrow_error() { std::rethrow_exception(error_); }

void EventFile::run() {
  auto period = std::chrono::duration<double>(options_.flush_secs);
  for (;;) {
    {
      std::unique_lock lk(mu_);
      wake_.wait_for(lk, period, [&] { return closing_ || pending_records_ >= options_.max_queue || queue_full(); });
      if (closing_) return;  // close() writes the rest
    }
    std::unique_lock flk(file_mu_);
    std::unique_lock lk(mu_);
    write_pending(lk);
  }
}

void EventFile::flush() {
  std::unique_lock flk(file_mu_);
  std::unique_lock lk(mu_);
  write_pending(lk);
  if (error_) rethrow_error();
}

void EventFile::close() {
  std::lock_guard cl(close_mu_);
  {
    std::lock_guard lk(mu_);
    if (closed_) return;
    closing_ = true;
  }
  wake_.notify_all();
  space_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::exception_ptr err;
  {
    std::unique_lock flk(file_mu_);
    std::unique_lock lk(mu_);
    write_pending(lk);
    closed_ = true;
    err = error_;
  }
  if (fd_ >= 0 && ::close(fd_) != 0 && !err)
    err = std::make_exception_ptr(
        IOError("SummaryWriter: cannot close the event file '" + path_ + "': " + std::strerror(errno)));
  fd_ = -1;
  if (err) std::rethrow_exception(err);
}

}  // namespace nabla::tensorboard
