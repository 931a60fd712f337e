// An event file: TFRecords (length, masked CRC-32C of the length, data, masked CRC-32C of the data)
// appended to `events.out.tfevents.<unix time>.<hostname>.<pid>.<n><suffix>` in a folder, written
// by a background thread.
//
// add() frames the record in memory under a short lock and returns: no system call. The thread
// writes the pending records when max_queue of them wait (or max_pending_bytes of them), when
// flush_secs have passed since the last write, on flush(), and on close() (or destruction), each time with write(2) calls of whole
// buffers, so the file only ever ends inside a record when the process is killed mid-write (the
// partial record TensorBoard skips). A write error (disk full) is rethrown by the next add(),
// flush() or close().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace nabla::tensorboard {

struct EventFileOptions {
  int64_t max_queue = 10;   // records that wake the writer thread
  double flush_secs = 120;  // the longest a record waits before it is written
  // Queued bytes that also wake the writer thread (a few large images reach it before max_queue
  // records do); add() waits while this much is queued, so memory stays bounded.
  size_t max_pending_bytes = size_t(64) << 20;
  std::string filename_suffix{};
};

class EventFile {
 public:
  // Creates `dir` (and its parents) when missing, opens a new event file there and queues the
  // first event, {wall_time, file_version: "brain.Event:2"}, writing it at once.
  explicit EventFile(std::string dir, EventFileOptions options = {});
  ~EventFile();  // close(), reporting (not throwing) a write error on stderr
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  // Queues one serialized Event. Thread-safe.
  void add(std::string_view event);
  // Writes every queued record before returning. Thread-safe.
  void flush();
  // Writes what is queued, stops the thread and closes the file; later calls do nothing. add()
  // after close() throws.
  void close();

  const std::string& dir() const { return dir_; }
  const std::string& path() const { return path_; }

  // The TFRecord framing of `data`, appended to `out` (for the tests and tools).
  static void frame(std::string_view data, std::string& out);

 private:
  void run();
  void write_pending(std::unique_lock<std::mutex>& queue_lock);  // holds file_mu_; releases queue_lock while writing
  void rethrow_error();
  bool queue_full() const { return pending_.size() >= options_.max_pending_bytes; }  // under mu_

  std::string dir_, path_;
  EventFileOptions options_;
  int fd_ = -1;

  std::mutex close_mu_;
  std::mutex file_mu_;  // serializes writes to fd_, in queue order (taken before mu_); guards writing_
  std::string writing_;
  std::mutex mu_;  // guards everything below
  std::condition_variable wake_, space_;
  std::string pending_;  // framed records not written yet
  int64_t pending_records_ = 0;
  bool closing_ = false, closed_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

// The name PyTorch gives an event file: events.out.tfevents.<%010d unix time>.<hostname>.<pid>.<n><suffix>,
// n counting the event files this process has opened.
std::string event_file_name(const std::string& suffix);
std::string hostname();

}  // namespace nabla::tensorboard
