// TCPStore: a tiny request/response protocol over one TCP connection per client.
//
//   request:  u8 command, then per command
//             set:   key, value           -> u8 0
//             get:   key                  -> u8 found, value (when found)
//             add:   key, i64 delta       -> i64 sum
//             check: u32 n, n keys        -> u8 all set
//   strings are u32 length + bytes; integers little-endian as the host stores them (every rank of
//   a job runs the same build, and the protocol never leaves it).
//
// The server answers each request at once; get and wait are polled by the client with a growing
// sleep (1 ms to 50 ms), so waiting costs the server nothing and every wait has the client's timeout.
#include "distributed/store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace nabla::distributed {
namespace {

enum Command : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4 };
using Clock = std::chrono::steady_clock;

std::string errno_text(int e) { return std::strerror(e); }

// Reads or writes exactly n bytes; false on EOF or error (errno says which).
bool read_all(int fd, void* p, size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::recv(fd, b, n, 0);
    if (r == 0) {
      errno = ECONNRESET;
      return false;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const void* p, size_t n) {
  auto* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t r = ::send(fd, b, n, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// (resize + memcpy: GCC 12's -Wstringop-overflow misreads vector::insert of a few bytes.)
void append(std::vector<char>& m, const void* p, size_t n) {
  size_t at = m.size();
  m.resize(at + n);
  if (n) std::memcpy(m.data() + at, p, n);
}
template <class T>
void put(std::vector<char>& m, T v) {
  append(m, &v, sizeof(T));
}
void put_bytes(std::vector<char>& m, const char* p, size_t n) {
  put<uint32_t>(m, static_cast<uint32_t>(n));
  append(m, p, n);
}

// Reading a framed request on the server: a string is at most 64 MiB (a rendezvous value is a few
// hundred bytes; the bound keeps a stray connection from making the server allocate gigabytes).
constexpr uint32_t kMaxString = 64u << 20;
bool read_string(int fd, std::string& s) {
  uint32_t n;
  if (!read_all(fd, &n, 4) || n > kMaxString) return false;
  s.resize(n);
  return read_all(fd, s.data(), n);
}

void set_recv_timeout(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// Answers one request from `fd`; false when the client has gone (or sent garbage).
bool serve_one(int fd, std::map<std::string, std::vector<char>>& kv) {
  uint8_t cmd;
  if (!read_all(fd, &cmd, 1)) return false;
  std::vector<char> reply;
  std::string key;
  switch (cmd) {
    case kSet: {
      std::string value;
      if (!read_string(fd, key) || !read_string(fd, value)) return false;
      kv[key] = std::vector<char>(value.begin(), value.end());
      put<uint8_t>(reply, 0);
      break;
    }
    case kGet: {
      if (!read_string(fd, key)) return false;
      auto it = kv.find(key);
      put<uint8_t>(reply, it != kv.end());
      if (it != kv.end()) put_bytes(reply, it->second.data(), it->second.size());
      break;
    }
    case kAdd: {
      int64_t delta;
      if (!read_string(fd, key) || !read_all(fd, &delta, 8)) return false;
      auto& v = kv[key];
      int64_t sum = delta;
      if (!v.empty()) sum += std::strtoll(std::string(v.begin(), v.end()).c_str(), nullptr, 10);
      std::string s = std::to_string(sum);
      v.assign(s.begin(), s.end());
      put<int64_t>(reply, sum);
      break;
    }
    case kCheck: {
      uint32_t n;
      if (!read_all(fd, &n, 4) || n > 1u << 20) return false;
      bool all = true;
      for (uint32_t i = 0; i < n; ++i) {
        if (!read_string(fd, key)) return false;
        all = all && kv.count(key);
      }
      put<uint8_t>(reply, all);
      break;
    }
    default:
      return false;
  }
  return write_all(fd, reply.data(), reply.size());
}

}  // namespace

// ---- server ---------------------------------------------------------------------------------------

TCPStoreServer::TCPStoreServer(uint16_t port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  nabla::check<DistributedError>(listen_fd_ >= 0, "TCPStore: socket: ", errno_text(errno));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(port);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 512) != 0) {
    int e = errno;
    ::close(listen_fd_);
    throw DistributedError(detail::str("TCPStore: rank 0 cannot listen on port ", port, ": ", errno_text(e),
                                       e == EADDRINUSE ? " (another job or store uses it: choose another MASTER_PORT)" : ""));
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(listen_fd_);
    throw DistributedError(detail::str("TCPStore: pipe: ", errno_text(e)));
  }
  thread_ = std::thread([this] { run(); });
}

TCPStoreServer::~TCPStoreServer() {
  char c = 0;
  [[maybe_unused]] ssize_t r = ::write(wake_pipe_[1], &c, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

void TCPStoreServer::run() {
  std::map<std::string, std::vector<char>> kv;
  std::vector<pollfd> fds{{wake_pipe_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents) break;  // shutting down
    if (fds[1].revents & POLLIN) {
      int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        int one = 1;
        ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        // A client writes each request whole; a half-written one must not stall the server.
        set_recv_timeout(c, std::chrono::seconds(10));
        fds.push_back({c, POLLIN, 0});
        ++clients_;
      }
    }
    for (size_t i = 2; i < fds.size();) {
      if (fds[i].revents && !serve_one(fds[i].fd, kv)) {
        ::close(fds[i].fd);
        --clients_;
        fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      fds[i].revents = 0;
      ++i;
    }
  }
  for (size_t i = 2; i < fds.size(); ++i) ::close(fds[i].fd);
}

void TCPStoreServer::wait_for_clients_to_leave(std::chrono::milliseconds max) const {
  auto deadline = Clock::now() + max;
  while (clients_.load() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// ---- client ---------------------------------------------------------------------------------------

namespace {

// One connection attempt to any address of host:port, bounded by `deadline`. Returns the socket or
// -1 with `err` set.
int try_connect(const std::string& host, uint16_t port, Clock::time_point deadline, std::string& err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    err = detail::str("cannot resolve '", host, "': ", gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (s < 0) {
      err = errno_text(errno);
      continue;
    }
    int r = ::connect(s, a->ai_addr, a->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd p{s, POLLOUT, 0};
      r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 1)));
      if (r == 0) {
        err = "connection attempt timed out";
        r = -1;
      } else if (r > 0) {
        int so = 0;
        socklen_t len = sizeof so;
        ::getsockopt(s, SOL_SOCKET, SO_ERROR, &so, &len);
        if (so != 0) err = errno_text(so);
        r = so == 0 ? 0 : -1;
      } else {
        err = errno_text(errno);
      }
    } else if (r != 0) {
      err = errno_text(errno);
    }
    if (r == 0) {
      fd = s;
    } else {
      ::close(s);
    }
  }
  ::freeaddrinfo(res);
  if (fd >= 0) {
    int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

}  // namespace

TCPStore::TCPStore(std::string host, uint16_t port, bool is_server, std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port) {
  timeout_ = timeout;
  if (is_server) {
    server_ = std::make_unique<TCPStoreServer>(port);
    port_ = server_->port();
  }
  auto deadline = Clock::now() + timeout;
  std::string err;
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    fd_ = try_connect(host_, port_, deadline, err);
    if (fd_ >= 0) break;
    if (Clock::now() + pause >= deadline)
      throw DistributedError(detail::str("TCPStore: could not reach the store at ", describe(), " within ",
                                         timeout.count(), " ms (", err,
                                         "); is rank 0 running, and are MASTER_ADDR and MASTER_PORT right?"));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
  // A reply that never comes (the server's host died without closing) must not hang a client.
  set_recv_timeout(fd_, timeout);
}

TCPStore::~TCPStore() {
  if (fd_ >= 0) ::close(fd_);
}

void TCPStore::close_and_linger(std::chrono::milliseconds max) {
  std::lock_guard lock(mutex_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (server_) server_->wait_for_clients_to_leave(max);
}

std::string TCPStore::describe() const { return detail::str("tcp://", host_, ":", port_); }

std::string TCPStore::local_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "127.0.0.1";
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  else
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
  return buf;
}

void TCPStore::send_request(const std::vector<char>& msg) {
  if (!write_all(fd_, msg.data(), msg.size()))
    throw DistributedError(detail::str("TCPStore: lost the connection to the store at ", describe(), ": ",
                                       errno_text(errno), " (did rank 0 exit?)"));
}

namespace {
[[noreturn]] void lost(const std::string& where, int e) {
  throw DistributedError(detail::str("TCPStore: no reply from the store at ", where, ": ",
                                     e == EAGAIN || e == EWOULDBLOCK ? "timed out" : errno_text(e),
                                     " (did rank 0 exit?)"));
}
}  // namespace

void TCPStore::set(const std::string& key, const std::vector<char>& value) {
  std::vector<char> m;
  put<uint8_t>(m, kSet);
  put_bytes(m, key.data(), key.size());
  put_bytes(m, value.data(), value.size());
  std::lock_guard lock(mutex_);
  send_request(m);
  uint8_t ok;
  if (!read_all(fd_, &ok, 1)) lost(describe(), errno);
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  std::vector<char> m;
  put<uint8_t>(m, kAdd);
  put_bytes(m, key.data(), key.size());
  put<int64_t>(m, delta);
  std::lock_guard lock(mutex_);
  send_request(m);
  int64_t sum;
  if (!read_all(fd_, &sum, 8)) lost(describe(), errno);
  return sum;
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  std::vector<char> m;
  put<uint8_t>(m, kCheck);
  put<uint32_t>(m, static_cast<uint32_t>(keys.size()));
  for (auto& k : keys) put_bytes(m, k.data(), k.size());
  std::lock_guard lock(mutex_);
  send_request(m);
  uint8_t all;
  if (!read_all(fd_, &all, 1)) lost(describe(), errno);
  return all != 0;
}

namespace {
std::string join_keys(const std::vector<std::string>& keys) {
  std::string s;
  for (auto& k : keys) s += (s.empty() ? "'" : ", '") + k + "'";
  return s;
}

// Polls store.check(keys) until they are all set or the timeout passes.
void poll_wait(Store& store, const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (!store.check(keys)) {
    if (Clock::now() >= deadline) {
      std::vector<std::string> missing;
      for (auto& k : keys)
        if (!store.check({k})) missing.push_back(k);
      throw DistributedError(detail::str("store wait: keys [", join_keys(missing), "] were not set at ",
                                         store.describe(), " within ", timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}
}  // namespace

void TCPStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  poll_wait(*this, keys, timeout);
}

std::vector<char> TCPStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::vector<char> m;
  put<uint8_t>(m, kGet);
  put_bytes(m, key.data(), key.size());
  std::lock_guard lock(mutex_);
  send_request(m);
  uint8_t found;
  if (!read_all(fd_, &found, 1)) lost(describe(), errno);
  nabla::check<DistributedError>(found != 0, "TCPStore::get: key '", key, "' vanished from ", describe());
  uint32_t n;
  if (!read_all(fd_, &n, 4)) lost(describe(), errno);
  std::vector<char> value(n);
  if (!read_all(fd_, value.data(), n)) lost(describe(), errno);
  return value;
}

// ---- file store -----------------------------------------------------------------------------------

FileStore::FileStore(const std::string& path, std::chrono::milliseconds timeout) : path_(path), impl_(path) {
  timeout_ = timeout;
}

void FileStore::set(const std::string& key, const std::vector<char>& value) { impl_.set(key, value); }

std::vector<char> FileStore::get(const std::string& key) {
  wait({key}, timeout_);
  return impl_.get(key);
}

bool FileStore::check(const std::vector<std::string>& keys) { return impl_.check(keys); }

void FileStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  poll_wait(*this, keys, timeout);
}

}  // namespace nabla::distributed
