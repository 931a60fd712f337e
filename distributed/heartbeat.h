// A worker's heartbeat to nabla-run, for its liveness check (tools/nabla-run.cpp).
//
// nabla-run gives each worker one end of a Unix socket pair and names it in NABLA_HEARTBEAT_FD
// ("fd:device:inode", so that a program it did not start, which inherited the variable but not the
// socket, never writes into whatever else has that number). init_process_group() starts a thread
// that sends a Record every NABLA_HEARTBEAT_INTERVAL_MS (1000 by default), saying whether a thread
// of this process is waiting for its peers (in a collective's wait() or a store wait) and since
// when. nabla-run ends the job when a worker's beats stop (a stopped or frozen process) or when a
// worker waits for peers after one of them has exited. Without nabla-run nothing is sent.
#pragma once

#include <cstdint>

namespace nabla::distributed::heartbeat {

// What each beat carries (24 bytes, one datagram). nabla-run reads the same layout.
struct Record {
  uint32_t magic;       // kMagic
  uint32_t version;     // 1
  uint32_t waiting;     // threads waiting for peers now
  uint32_t waiting_ms;  // how long some thread has been waiting without a pause (0 when none waits)
  uint64_t waits_done;  // waits finished so far
};
constexpr uint32_t kMagic = 0x4e424842;  // "NBHB"

// Starts the heartbeat thread when NABLA_HEARTBEAT_FD names a socket nabla-run gave this process;
// once per process (later calls return what the first found). True when it beats.
bool start_from_env();

// Marks the calling thread as waiting for peers while it lives.
class Waiting {
 public:
  Waiting();
  ~Waiting();
  Waiting(const Waiting&) = delete;
  Waiting& operator=(const Waiting&) = delete;
};

// This process's record now (what the next beat sends).
Record current();

}  // namespace nabla::distributed::heartbeat
