// TCPStore's client side, and FileStore. The wire protocol is in store_wire.h, the server in
// store_server.cpp.
//
// get and wait are polled by the client with a growing sleep (1 ms to 50 ms), so waiting costs the
// server nothing and every wait has the client's timeout.
#include "distributed/store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "distributed/heartbeat.h"
#include "distributed/sha256.h"
#include "distributed/store_wire.h"

namespace nabla::distributed {
namespace {

using namespace wire;
using Clock = std::chrono::steady_clock;

std::string errno_text(int e) { return std::strerror(e); }

void set_io_timeout(int fd, std::chrono::milliseconds t) {
  t = std::max(t, std::chrono::milliseconds(1));
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// One connection attempt to any address of host:port, bounded by `deadline`. Returns the socket or
// -1 with `err` set.
int try_connect(const std::string& host, uint16_t port, Clock::time_point deadline, std::string& err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    err = internal::str("cannot resolve '", host, "': ", gai_strerror(rc));
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

[[noreturn]] void lost(const std::string& where, int e) {
  throw DistributedError(internal::str("TCPStore: no reply from the store at ", where, ": ",
                                       e == EAGAIN || e == EWOULDBLOCK ? "timed out" : errno_text(e),
                                       " (did rank 0 exit?)"));
}

// Thrown by the handshake for what retrying cannot mend (a wrong secret, another program).
struct HandshakeRefused : DistributedError {
  using DistributedError::DistributedError;
};

}  // namespace

// ---- client ---------------------------------------------------------------------------------------

TCPStore::TCPStore(std::string host, uint16_t port, bool is_server, std::chrono::milliseconds timeout,
                   TCPStoreOptions options)
    : host_(std::move(host)), port_(port), options_(std::move(options)) {
  timeout_ = timeout;
  if (is_server) {
    server_ = std::make_unique<TCPStoreServer>(host_, port, options_);
    port_ = server_->port();
  }
  auto deadline = Clock::now() + timeout;
  std::string err;
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    fd_ = try_connect(host_, port_, deadline, err);
    if (fd_ >= 0) {
      try {
        handshake(deadline);
        break;
      } catch (const HandshakeRefused&) {
        ::close(fd_);
        fd_ = -1;
        throw;
      } catch (const DistributedError& e) {  // the server went away or is at capacity: try again
        ::close(fd_);
        fd_ = -1;
        err = e.what();
      }
    }
    if (Clock::now() + pause >= deadline)
      throw DistributedError(internal::str("TCPStore: could not reach the store at ", describe(), " within ",
                                           timeout.count(), " ms (", err,
                                           "); is rank 0 running, and are MASTER_ADDR and MASTER_PORT right? (rank 0's "
                                           "store listens only on the address MASTER_ADDR names on its machine unless "
                                           "NABLA_STORE_LISTEN_ALL=1 is set there)"));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
  // A reply that never comes (the server's host died without closing) must not hang a client.
  set_io_timeout(fd_, timeout);
}

void TCPStore::handshake(Clock::time_point deadline) {
  set_io_timeout(fd_, std::max<std::chrono::milliseconds>(
                          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                          std::chrono::seconds(1)));
  char hello[kHelloBytes];
  if (!read_all(fd_, hello, sizeof hello))
    throw DistributedError(
        internal::str("no greeting from the store: ", errno == EAGAIN ? "timed out" : errno_text(errno)));
  if (std::memcmp(hello, kMagic, 4) != 0 || static_cast<uint8_t>(hello[4]) != kVersion)
    throw HandshakeRefused(internal::str("TCPStore: what listens at ", describe(),
                                         " is not a nabla store of this version "
                                         "(its greeting differs): is MASTER_PORT used by another program?"));
  const auto mode = static_cast<uint8_t>(hello[5]);
  server_max_key_ = get_at<uint32_t>(hello + 8);
  server_max_value_ = get_at<uint64_t>(hello + 12);
  const auto* ns = reinterpret_cast<const uint8_t*>(hello + 20);
  const bool have = !options_.secret.empty();
  if (mode == kModeOpen) {
    if (have)
      throw HandshakeRefused(internal::str(
          "TCPStore: the store at ", describe(), " does not authenticate (its rank 0 has no secret) but this process ",
          "has one: give every rank the same secret (NABLA_STORE_SECRET or NABLA_STORE_SECRET_FILE; nabla-run sets it ",
          "for its workers), or none"));
    authenticated_ = false;
    return;
  }
  if (mode != kModeSecret)
    throw HandshakeRefused(
        internal::str("TCPStore: the store at ", describe(), " asks for an unknown handshake (", int(mode), ")"));
  if (!have)
    throw HandshakeRefused(internal::str(
        "TCPStore: the store at ", describe(), " requires the job's secret and this process has none: set ",
        "NABLA_STORE_SECRET (or NABLA_STORE_SECRET_FILE) to rank 0's, or pass InitOptions::store_secret ",
        "(nabla-run gives its workers one)"));
  uint8_t proof[kProofBytes];
  crypto::random_bytes(proof, kNonceBytes);
  crypto::Digest tag = crypto::hmac_sha256(options_.secret, proof_message(kClientLabel, ns, proof));
  std::memcpy(proof + kNonceBytes, tag.data(), kTagBytes);
  if (!write_all(fd_, proof, sizeof proof))
    throw DistributedError(internal::str("the store closed the connection during the handshake: ", errno_text(errno)));
  uint8_t ok = 0;
  if (!read_all(fd_, &ok, 1) || ok != 1)
    throw HandshakeRefused(internal::str(
        "TCPStore: the store at ", describe(), " refused this process's proof of the job's secret: its secret differs ",
        "from rank 0's (every rank needs the same NABLA_STORE_SECRET / NABLA_STORE_SECRET_FILE)"));
  uint8_t theirs[kTagBytes];
  if (!read_all(fd_, theirs, sizeof theirs))
    throw DistributedError(internal::str("the store closed the connection during the handshake: ", errno_text(errno)));
  crypto::Digest want = crypto::hmac_sha256(options_.secret, proof_message(kServerLabel, ns, proof));
  if (!crypto::constant_time_equal(want.data(), theirs, kTagBytes))
    throw HandshakeRefused(internal::str("TCPStore: the store at ", describe(),
                                         " did not prove it knows the job's secret (another job's store at this ",
                                         "address and port?)"));
  authenticated_ = true;
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

std::string TCPStore::describe() const { return internal::str("tcp://", host_, ":", port_); }

std::string TCPStore::local_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "127.0.0.1";
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  else ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
  return buf;
}

std::vector<char> TCPStore::request(uint8_t command, const std::vector<char>& body, const char* what,
                                    const std::string& key) {
  NABLA_CHECK(DistributedError, fd_ >= 0, "TCPStore::", what, ": the connection to ", describe(), " is closed");
  std::vector<char> m;
  put<uint8_t>(m, command);
  put<uint32_t>(m, static_cast<uint32_t>(body.size()));
  append(m, body.data(), body.size());
  if (!write_all(fd_, m.data(), m.size()))
    throw DistributedError(internal::str("TCPStore: lost the connection to the store at ", describe(), ": ",
                                         errno_text(errno), " (did rank 0 exit?)"));
  char header[kHeaderBytes];
  if (!read_all(fd_, header, sizeof header)) lost(describe(), errno);
  const uint32_t n = get_at<uint32_t>(header + 1);
  NABLA_CHECK(DistributedError, n <= server_max_value_ + 64 || header[0] != 0, "TCPStore: a reply of ", n,
              " bytes from ", describe(), " is over its own limits");
  std::vector<char> payload(std::min<size_t>(n, size_t(1) << 20));  // a refusal's text is short
  if (header[0] != 0 && n > payload.size()) lost(describe(), EPROTO);
  payload.resize(n);
  if (!read_all(fd_, payload.data(), n)) lost(describe(), errno);
  if (header[0] != 0)
    throw DistributedError(internal::str("TCPStore::", what, "('", key, "'): the store at ", describe(),
                                         " refused it: ", std::string(payload.begin(), payload.end())));
  return payload;
}

namespace {
void put_key(std::vector<char>& m, const std::string& k) {
  put<uint32_t>(m, static_cast<uint32_t>(k.size()));
  append(m, k.data(), k.size());
}
}  // namespace

void TCPStore::set(const std::string& key, const std::vector<char>& value) {
  NABLA_CHECK(ValueError, key.size() <= server_max_key_, "TCPStore::set: the key '", key.substr(0, 64),
              key.size() > 64 ? "..." : "", "' has ", key.size(), " bytes; the store at ", describe(),
              " takes keys of at most ", server_max_key_, " bytes");
  NABLA_CHECK(ValueError, value.size() <= server_max_value_, "TCPStore::set('", key, "'): the value has ", value.size(),
              " bytes; the store at ", describe(), " takes values of at most ", server_max_value_,
              " bytes (NABLA_STORE_MAX_VALUE_BYTES on rank 0 raises it)");
  std::vector<char> m;
  put_key(m, key);
  append(m, value.data(), value.size());
  std::lock_guard lock(mutex_);
  request(kSet, m, "set", key);
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  NABLA_CHECK(ValueError, key.size() <= server_max_key_, "TCPStore::add: the key has ", key.size(),
              " bytes; the store at ", describe(), " takes keys of at most ", server_max_key_, " bytes");
  std::vector<char> m;
  put<int64_t>(m, delta);
  append(m, key.data(), key.size());
  std::lock_guard lock(mutex_);
  auto r = request(kAdd, m, "add", key);
  NABLA_CHECK(DistributedError, r.size() == 8, "TCPStore::add: a reply of ", r.size(), " bytes from ", describe());
  return get_at<int64_t>(r.data());
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  std::vector<char> m;
  put<uint32_t>(m, static_cast<uint32_t>(keys.size()));
  for (auto& k : keys) put_key(m, k);
  std::lock_guard lock(mutex_);
  auto r = request(kCheck, m, "check", keys.empty() ? std::string() : keys.front());
  NABLA_CHECK(DistributedError, r.size() == 1, "TCPStore::check: a reply of ", r.size(), " bytes from ", describe());
  return r[0] != 0;
}

namespace {
std::string join_keys(const std::vector<std::string>& keys) {
  std::string s;
  for (auto& k : keys) s += (s.empty() ? "'" : ", '") + k + "'";
  return s;
}

// Polls store.check(keys) until they are all set or the timeout passes.
void poll_wait(Store& store, const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  heartbeat::Waiting waiting;  // what nabla-run's liveness check sees
  auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (!store.check(keys)) {
    if (Clock::now() >= deadline) {
      std::vector<std::string> missing;
      for (auto& k : keys)
        if (!store.check({k})) missing.push_back(k);
      throw DistributedError(internal::str("store wait: keys [", join_keys(missing), "] were not set at ",
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
  std::vector<char> m(key.begin(), key.end());
  std::lock_guard lock(mutex_);
  auto r = request(kGet, m, "get", key);
  NABLA_CHECK(DistributedError, !r.empty() && r[0] != 0, "TCPStore::get: key '", key, "' vanished from ", describe());
  return std::vector<char>(r.begin() + 1, r.end());
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
