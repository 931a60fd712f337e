#include "distributed/heartbeat.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace nabla::distributed::heartbeat {
namespace {

using Clock = std::chrono::steady_clock;

// Plain atomics with static storage: the detached thread may still read them while the process exits.
std::atomic<uint32_t> g_waiters{0};
std::atomic<int64_t> g_wait_start_ms{0};
std::atomic<uint64_t> g_waits_done{0};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

// "fd:dev:ino" -> the descriptor when it is that socket, else -1.
int socket_from_env(const char* text) {
  unsigned long long fd = 0, dev = 0, ino = 0;
  if (std::sscanf(text, "%llu:%llu:%llu", &fd, &dev, &ino) != 3 || fd > 1u << 20) return -1;
  struct stat st {};
  if (::fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_dev != dev || st.st_ino != ino)
    return -1;
  return static_cast<int>(fd);
}

void beat(int fd, std::chrono::milliseconds interval) {
  for (;;) {
    Record r = current();
    ssize_t n = ::send(fd, &r, sizeof r, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ENOBUFS)
      return;  // nabla-run left
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace

Record current() {
  Record r{kMagic, 1, g_waiters.load(), 0, g_waits_done.load()};
  if (r.waiting > 0) {
    int64_t ms = now_ms() - g_wait_start_ms.load();
    r.waiting_ms = static_cast<uint32_t>(std::clamp<int64_t>(ms, 0, UINT32_MAX));
  }
  return r;
}

Waiting::Waiting() {
  if (g_waiters.fetch_add(1) == 0) g_wait_start_ms.store(now_ms());
}

Waiting::~Waiting() {
  g_waits_done.fetch_add(1);
  g_waiters.fetch_sub(1);
}

bool start_from_env() {
  static std::once_flag once;
  static bool beating = false;
  std::call_once(once, [] {
    const char* text = std::getenv("NABLA_HEARTBEAT_FD");
    if (!text || !*text) return;
    int fd = socket_from_env(text);
    if (fd < 0) return;                // not ours (inherited by a program nabla-run did not start)
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // programs this one runs do not inherit it
    long ms = 1000;
    if (const char* i = std::getenv("NABLA_HEARTBEAT_INTERVAL_MS"))
      ms = std::clamp(std::strtol(i, nullptr, 10), 10L, 60000L);
    std::thread(beat, fd, std::chrono::milliseconds(ms)).detach();
    beating = true;
  });
  return beating;
}

}  // namespace nabla::distributed::heartbeat
