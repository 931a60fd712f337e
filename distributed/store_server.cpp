// TCPStoreServer: one thread multiplexing every connection (poll, non-blocking sockets), so that
// no connection can stall another; every connection has a deadline (the handshake, then each
// request and reply), and what it may make the server hold is bounded (TCPStoreOptions). The wire
// protocol is in store_wire.h.
//
// Per connection: hello written -> (with a secret) the client's proof read and checked -> requests,
// each read whole (its size is in its header, checked against the limits and reserved from the
// in-flight budget before its body is read), answered, and the next read only once the reply is
// written. Values are held as shared immutable strings: a reply of a value refers to it instead of
// copying it (a value replaced while a reply still holds it stays counted until that reply is done).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <list>
#include <map>

#include "distributed/sha256.h"
#include "distributed/store.h"
#include "distributed/store_wire.h"

namespace nabla::distributed {

using namespace wire;
using Clock = std::chrono::steady_clock;

namespace {

std::string errno_text(int e) { return std::strerror(e); }

std::string address_text(const sockaddr* a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(a);
    ::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    return internal::str(buf, ":", ntohs(in->sin_port));
  }
  auto* in6 = reinterpret_cast<const sockaddr_in6*>(a);
  ::inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
  return internal::str("[", buf, "]:", ntohs(in6->sin6_port));
}

// 1 s more per MiB: a large value on a slow link is not a stalled one.
Clock::duration allowance(std::chrono::milliseconds base, size_t bytes) {
  return base + std::chrono::milliseconds(static_cast<int64_t>(bytes >> 20) * 1000);
}

struct Value {
  std::string data;
  bool retired = false;  // replaced or not counted in the store any more, still held by a reply
};
using ValuePtr = std::shared_ptr<Value>;

struct Conn {
  int fd = -1;
  enum Phase { kProof, kReady } phase = kProof;
  Clock::time_point accepted, started;  // started: of the current request or reply
  uint8_t nonce[kNonceBytes] = {};
  std::string in;       // the part of the current step read so far
  size_t need = 0;      // bytes `in` must reach for the current step
  size_t reserved = 0;  // in-flight bytes reserved for the current request's body
  size_t discard = 0;   // body bytes still to read and drop (the request was refused)
  std::string refusal;  // the reply to send once they are dropped
  std::string out;      // the reply (header and small payload) being written
  size_t out_at = 0;
  ValuePtr out_value;  // a value written after `out`
  size_t value_at = 0;
  bool close_after = false;
  std::string peer;  // "10.0.0.7:51234", for the warning about a failed proof
  bool authenticated() const { return phase == kReady; }
  bool writing() const { return out_at < out.size() || (out_value && value_at < out_value->data.size()); }
};

}  // namespace

struct TCPStoreServer::Impl {
  TCPStoreOptions o;
  std::map<std::string, ValuePtr> kv;
  size_t stored = 0, retired = 0, inflight = 0, authenticated = 0;
  std::list<Conn> conns;
  mutable std::mutex stats_mutex;
  Stats stats;
  char scratch[1 << 16];

  static size_t cost(const std::string& key, const Value& v) { return key.size() + v.data.size() + kEntryOverhead; }
  // Called after every change, before its reply goes out: what stats() says is never behind what
  // a client has been told.
  void sync_stats() {
    std::lock_guard lock(stats_mutex);
    stats.keys = kv.size();
    stats.stored_bytes = stored + retired;
    stats.inflight_bytes = inflight;
    stats.connections = conns.size();
    stats.authenticated = authenticated;
  }
  template <class F>
  void count(F f) {
    std::lock_guard lock(stats_mutex);
    f(stats);
  }

  void release_value(Conn& c) {
    if (c.out_value && c.out_value->retired && c.out_value.use_count() == 1) retired -= c.out_value->data.size();
    c.out_value.reset();
    c.value_at = 0;
  }
  void close(std::list<Conn>::iterator it) {
    ::close(it->fd);
    inflight -= it->reserved;
    if (it->authenticated()) --authenticated;
    release_value(*it);
    conns.erase(it);
    sync_stats();
  }

  void reply(Conn& c, uint8_t status, const std::vector<char>& payload, ValuePtr value = nullptr) {
    std::vector<char> m;
    put<uint8_t>(m, status);
    put<uint32_t>(m, static_cast<uint32_t>(payload.size() + (value ? value->data.size() : 0)));
    append(m, payload.data(), payload.size());
    c.out.assign(m.begin(), m.end());
    c.out_at = 0;
    c.out_value = std::move(value);
    c.value_at = 0;
    c.started = Clock::now();
  }
  void refuse(Conn& c, const std::string& why) {
    count([](Stats& s) { ++s.refused_requests; });
    reply(c, 1, std::vector<char>(why.begin(), why.end()));
  }

  // Replaces key's value; false (and the reason) when the store would exceed its total.
  bool store(const std::string& key, std::string data, std::string& why) {
    auto it = kv.find(key);
    size_t old = it == kv.end() ? 0 : cost(key, *it->second);
    size_t add = key.size() + data.size() + kEntryOverhead;
    size_t held = it != kv.end() && it->second.use_count() > 1 ? it->second->data.size() : 0;  // a reply holds it
    if (stored - old + add + retired + held > o.max_total_bytes) {
      why =
          internal::str("the store is full: it holds ", stored + retired, " bytes of keys and values and its limit is ",
                        o.max_total_bytes, " bytes (NABLA_STORE_MAX_BYTES on rank 0); this would add ", add, " bytes");
      return false;
    }
    if (it != kv.end()) {
      stored -= old;
      if (held) {
        it->second->retired = true;
        retired += held;
      }
    }
    auto v = std::make_shared<Value>();
    v->data = std::move(data);
    kv[key] = std::move(v);
    stored += add;
    return true;
  }

  // A whole request frame is in c.in; answers it. False: malformed (drop the connection).
  bool serve(Conn& c) {
    const char* p = c.in.data() + kHeaderBytes;
    const size_t n = c.in.size() - kHeaderBytes;
    const auto cmd = static_cast<uint8_t>(c.in[0]);
    std::vector<char> payload;
    switch (cmd) {
      case kSet: {
        if (n < 4) return false;
        uint32_t k = get_at<uint32_t>(p);
        if (k > n - 4 || k > o.max_key_bytes) return false;
        std::string why;
        if (n - 4 - k > o.max_value_bytes) {
          refuse(c, internal::str("a value of ", n - 4 - k, " bytes is over the store's limit of ", o.max_value_bytes,
                                  " bytes a value (NABLA_STORE_MAX_VALUE_BYTES on rank 0)"));
          return true;
        }
        if (!store(std::string(p + 4, k), std::string(p + 4 + k, n - 4 - k), why)) {
          refuse(c, why);
          return true;
        }
        break;
      }
      case kGet: {
        auto it = kv.find(std::string(p, n));
        put<uint8_t>(payload, it != kv.end());
        reply(c, 0, payload, it != kv.end() ? it->second : nullptr);
        return true;
      }
      case kAdd: {
        if (n < 8) return false;
        int64_t delta = get_at<int64_t>(p);
        std::string key(p + 8, n - 8);
        int64_t sum = delta;
        if (auto it = kv.find(key); it != kv.end()) sum += std::strtoll(it->second->data.c_str(), nullptr, 10);
        std::string why;
        if (!store(key, std::to_string(sum), why)) {
          refuse(c, why);
          return true;
        }
        put<int64_t>(payload, sum);
        break;
      }
      case kCheck: {
        if (n < 4) return false;
        uint32_t keys = get_at<uint32_t>(p);
        size_t at = 4;
        bool all = true;
        for (uint32_t i = 0; i < keys; ++i) {
          if (n - at < 4) return false;
          uint32_t k = get_at<uint32_t>(p + at);
          at += 4;
          if (k > n - at) return false;
          all = all && kv.count(std::string(p + at, k));
          at += k;
        }
        if (at != n) return false;
        put<uint8_t>(payload, all);
        break;
      }
      default: return false;
    }
    reply(c, 0, payload);
    return true;
  }

  // The body size a command may have.
  size_t max_body(uint8_t cmd) const {
    switch (cmd) {
      case kSet: return 4 + o.max_key_bytes + o.max_value_bytes;
      case kGet: return o.max_key_bytes;
      case kAdd: return 8 + o.max_key_bytes;
      case kCheck: return o.max_key_bytes + o.max_value_bytes;
      default: return 0;
    }
  }

  // A step of `in` is complete: acts on it. False: drop the connection.
  bool advance(Conn& c) {
    if (c.phase == Conn::kProof) {  // the client's nonce and proof
      const auto* nc = reinterpret_cast<const uint8_t*>(c.in.data());
      crypto::Digest want = crypto::hmac_sha256(o.secret, proof_message(kClientLabel, c.nonce, nc));
      bool ok = crypto::constant_time_equal(want.data(), nc + kNonceBytes, kTagBytes);
      std::vector<char> answer;
      put<uint8_t>(answer, ok ? 1 : 0);
      if (ok) {
        crypto::Digest mine = crypto::hmac_sha256(o.secret, proof_message(kServerLabel, c.nonce, nc));
        append(answer, mine.data(), mine.size());
        c.phase = Conn::kReady;
        ++authenticated;
        sync_stats();
      } else {
        size_t n = 0;
        count([&](Stats& s) { n = ++s.rejected; });
        if (n <= 5)  // a flood of them must not flood the log
          std::fprintf(stderr,
                       "nabla TCPStore: dropped a connection from %s that did not prove it knows the job's "
                       "secret%s\n",
                       c.peer.c_str(), n == 5 ? " (further ones are not reported)" : "");
        c.close_after = true;
      }
      c.out.assign(answer.begin(), answer.end());
      c.out_at = 0;
      c.started = Clock::now();
      c.in.clear();
      c.need = kHeaderBytes;
      return true;
    }
    if (c.in.size() == kHeaderBytes) {  // a request's header: check and reserve before its body
      const auto cmd = static_cast<uint8_t>(c.in[0]);
      const uint32_t body = get_at<uint32_t>(c.in.data() + 1);
      if (cmd < kSet || cmd > kCheck) return false;
      if (body > max_body(cmd)) {  // a client of this build checks first: a stray or hostile peer
        refuse(c, internal::str("a request of ", body, " bytes is over the store's limits (a key of at most ",
                                o.max_key_bytes, " bytes, a value of at most ", o.max_value_bytes,
                                " bytes: NABLA_STORE_MAX_VALUE_BYTES on rank 0)"));
        c.close_after = true;
        return true;
      }
      if (inflight + body > o.max_total_bytes) {  // many large requests at once: drop this one's body
        c.discard = body;
        c.refusal =
            internal::str("the store is busy: ", inflight, " bytes of requests are being received and its limit is ",
                          o.max_total_bytes, " bytes (NABLA_STORE_MAX_BYTES on rank 0)");
        c.in.clear();
        return true;
      }
      c.reserved = body;
      inflight += body;
      c.need = kHeaderBytes + body;
      sync_stats();
      if (body > 0) return true;
    }
    bool ok = serve(c);
    inflight -= c.reserved;
    c.reserved = 0;
    sync_stats();
    c.in.clear();
    c.need = kHeaderBytes;
    return ok;
  }

  // Reads what the connection has; false: drop it (closed, an error, or garbage).
  bool on_readable(Conn& c) {
    while (!c.writing() && !c.close_after) {
      if (c.discard > 0) {
        ssize_t r = ::recv(c.fd, scratch, std::min(c.discard, sizeof scratch), 0);
        if (r == 0) return false;
        if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        c.discard -= static_cast<size_t>(r);
        if (c.discard == 0) {
          count([](Stats& s) { ++s.refused_requests; });
          std::string why = std::move(c.refusal);
          reply(c, 1, std::vector<char>(why.begin(), why.end()));
          c.need = kHeaderBytes;
        }
        continue;
      }
      size_t want = c.need - c.in.size();
      size_t at = c.in.size();
      c.in.resize(c.need);
      ssize_t r = ::recv(c.fd, c.in.data() + at, want, 0);
      if (r <= 0) {
        c.in.resize(at);
        if (r == 0) return false;
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      }
      c.in.resize(at + static_cast<size_t>(r));
      if (at == 0 && c.phase == Conn::kReady) c.started = Clock::now();  // a request's first byte
      if (c.in.size() == c.need && !advance(c)) return false;
    }
    return true;
  }

  // Writes what it can of the reply; false: drop the connection (an error, or done and closing).
  bool on_writable(Conn& c) {
    while (c.out_at < c.out.size()) {
      ssize_t r = ::send(c.fd, c.out.data() + c.out_at, c.out.size() - c.out_at, MSG_NOSIGNAL);
      if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      c.out_at += static_cast<size_t>(r);
    }
    while (c.out_value && c.value_at < c.out_value->data.size()) {
      const std::string& d = c.out_value->data;
      ssize_t r = ::send(c.fd, d.data() + c.value_at, d.size() - c.value_at, MSG_NOSIGNAL);
      if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      c.value_at += static_cast<size_t>(r);
    }
    release_value(c);
    c.out.clear();
    c.out_at = 0;
    return !c.close_after;
  }

  // When the connection's current step must be done (max(): none, an idle authenticated one).
  Clock::time_point deadline(const Conn& c) const {
    if (c.phase == Conn::kProof) return c.accepted + o.handshake_timeout;
    if (c.writing())
      return c.started + allowance(o.request_timeout, c.out.size() + (c.out_value ? c.out_value->data.size() : 0));
    if (c.discard > 0 || !c.in.empty()) return c.started + allowance(o.request_timeout, c.need + c.discard);
    return Clock::time_point::max();
  }
};

// ---- listening ------------------------------------------------------------------------------------

TCPStoreServer::TCPStoreServer(const std::string& host, uint16_t port, TCPStoreOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  NABLA_CHECK(ValueError,
              options_.max_value_bytes <= (size_t(1) << 31) && options_.max_key_bytes <= (size_t(1) << 20) &&
                  options_.max_connections >= 1 && options_.max_pending >= 1 &&
                  options_.handshake_timeout.count() > 0 && options_.request_timeout.count() > 0,
              "TCPStoreServer: limits out of range: max_value_bytes ", options_.max_value_bytes,
              " (at most 2^31), max_key_bytes ", options_.max_key_bytes, " (at most 2^20), max_connections ",
              options_.max_connections, ", max_pending ", options_.max_pending, " (at least 1), timeouts ",
              options_.handshake_timeout.count(), " and ", options_.request_timeout.count(), " ms (positive)");
  impl_->o = options_;
  // Where to listen: every address the host name resolves to, or the wildcard addresses.
  std::vector<std::pair<sockaddr_storage, socklen_t>> where;
  std::string resolve_error;
  auto add_address = [&](const sockaddr* a, socklen_t len) {
    sockaddr_storage ss{};
    std::memcpy(&ss, a, len);
    for (auto& [w, wl] : where)
      if (wl == len && std::memcmp(&w, &ss, len) == 0) return;
    where.emplace_back(ss, len);
  };
  if (options_.listen_all) {
    sockaddr_in a4{};
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    add_address(reinterpret_cast<sockaddr*>(&a4), sizeof a4);
    sockaddr_in6 a6{};
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_any;
    add_address(reinterpret_cast<sockaddr*>(&a6), sizeof a6);
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0)
      throw DistributedError(internal::str("TCPStore: rank 0 cannot resolve the master address '", host,
                                           "' to listen on: ", gai_strerror(rc)));
    for (addrinfo* a = res; a; a = a->ai_next) add_address(a->ai_addr, a->ai_addrlen);
    ::freeaddrinfo(res);
  }
  std::string errors;
  bool in_use = false;
  for (auto& [ss, len] : where) {
    auto* sa = reinterpret_cast<sockaddr*>(&ss);
    if (sa->sa_family == AF_INET) reinterpret_cast<sockaddr_in*>(sa)->sin_port = htons(port_ ? port_ : port);
    else reinterpret_cast<sockaddr_in6*>(sa)->sin6_port = htons(port_ ? port_ : port);
    int fd = ::socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      errors += internal::str(errors.empty() ? "" : "; ", address_text(sa), ": ", errno_text(errno));
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (sa->sa_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (::bind(fd, sa, len) != 0 || ::listen(fd, 512) != 0) {
      int e = errno;
      in_use = in_use || e == EADDRINUSE;
      errors += internal::str(errors.empty() ? "" : "; ", address_text(sa), ": ", errno_text(e));
      ::close(fd);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t bl = sizeof bound;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bl);
    if (!port_)
      port_ = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                               : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
    listen_fds_.push_back(fd);
    addresses_.push_back(address_text(reinterpret_cast<sockaddr*>(&bound)));
  }
  if (listen_fds_.empty())
    throw DistributedError(internal::str(
        "TCPStore: rank 0 cannot listen on port ", port, " of ",
        options_.listen_all ? "any interface" : "'" + host + "'", ": ", errors.empty() ? "no address" : errors,
        in_use                ? " (another job or store uses it: choose another MASTER_PORT)"
        : options_.listen_all ? ""
                              : " (MASTER_ADDR must be an address of rank 0's machine; NABLA_STORE_LISTEN_ALL=1 "
                                "listens on every interface instead)"));
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    int e = errno;
    for (int fd : listen_fds_) ::close(fd);
    throw DistributedError(internal::str("TCPStore: pipe: ", errno_text(e)));
  }
  thread_ = std::thread([this] { run(); });
}

TCPStoreServer::~TCPStoreServer() {
  char c = 0;
  [[maybe_unused]] ssize_t r = ::write(wake_pipe_[1], &c, 1);
  thread_.join();
  for (int fd : listen_fds_) ::close(fd);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

TCPStoreServer::Stats TCPStoreServer::stats() const {
  std::lock_guard lock(impl_->stats_mutex);
  return impl_->stats;
}

void TCPStoreServer::wait_for_clients_to_leave(std::chrono::milliseconds max) const {
  auto deadline = Clock::now() + max;
  while (stats().authenticated > 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// ---- the loop -------------------------------------------------------------------------------------

void TCPStoreServer::run() {
  Impl& s = *impl_;
  const bool secret = !options_.secret.empty();
  auto accept_paused_until = Clock::time_point::min();
  std::vector<pollfd> fds;
  std::vector<std::list<Conn>::iterator> polled;
  for (;;) {
    auto now = Clock::now();
    auto next = now + std::chrono::seconds(1);
    fds.assign({{wake_pipe_[0], POLLIN, 0}});
    const bool accepting = now >= accept_paused_until;
    for (int fd : listen_fds_) fds.push_back({fd, static_cast<short>(accepting ? POLLIN : 0), 0});
    polled.clear();
    for (auto it = s.conns.begin(); it != s.conns.end(); ++it) {
      short ev = it->writing() ? POLLOUT : (it->close_after ? 0 : POLLIN);
      fds.push_back({it->fd, ev, 0});
      polled.push_back(it);
      next = std::min(next, s.deadline(*it));
    }
    if (!accepting) next = std::min(next, accept_paused_until);
    int wait_ms = static_cast<int>(
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1));
    if (::poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) break;
    if (fds[0].revents) break;  // shutting down

    const size_t first = 1 + listen_fds_.size();
    for (size_t i = 0; i < polled.size(); ++i) {
      auto it = polled[i];
      short re = fds[first + i].revents;
      if (!re) continue;
      bool keep = true;
      if (re & POLLOUT) keep = s.on_writable(*it);
      if (keep && (re & (POLLIN | POLLHUP | POLLERR)) && !it->writing()) keep = s.on_readable(*it);
      if (keep && it->writing()) keep = s.on_writable(*it);  // a reply just made: try it at once
      if (!keep) s.close(it);
    }
    // Deadlines: the handshake, a request or a reply that stopped moving.
    now = Clock::now();
    for (auto it = s.conns.begin(); it != s.conns.end();) {
      auto next_it = std::next(it);
      if (now >= s.deadline(*it)) {
        s.count([](Stats& st) { ++st.timed_out; });
        s.close(it);
      }
      it = next_it;
    }
    for (size_t l = 0; l < listen_fds_.size(); ++l) {
      if (!(fds[1 + l].revents & POLLIN)) continue;
      for (int k = 0; k < 64; ++k) {  // a burst, then back to serving
        sockaddr_storage peer{};
        socklen_t peer_len = sizeof peer;
        int c = ::accept4(listen_fds_[l], reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) {
          if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
            accept_paused_until = Clock::now() + std::chrono::milliseconds(100);  // out of descriptors
          break;
        }
        if (s.conns.size() >= options_.max_connections) {
          ::close(c);
          s.count([](Stats& st) { ++st.evicted; });
          continue;
        }
        // At most max_pending connections wait for their handshake: a new one pushes out the
        // oldest (a real client answers its hello within a round trip).
        size_t pending = 0;
        auto oldest = s.conns.end();
        for (auto it = s.conns.begin(); it != s.conns.end(); ++it)
          if (!it->authenticated()) {
            ++pending;
            if (oldest == s.conns.end()) oldest = it;
          }
        if (pending >= options_.max_pending && oldest != s.conns.end()) {
          s.count([](Stats& st) { ++st.evicted; });
          s.close(oldest);
        }
        int one = 1;
        ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        Conn conn;
        conn.fd = c;
        conn.peer = address_text(reinterpret_cast<sockaddr*>(&peer));
        conn.accepted = conn.started = Clock::now();
        crypto::random_bytes(conn.nonce, kNonceBytes);
        std::vector<char> hello;
        append(hello, kMagic, 4);
        put<uint8_t>(hello, kVersion);
        put<uint8_t>(hello, secret ? kModeSecret : kModeOpen);
        put<uint16_t>(hello, 0);
        put<uint32_t>(hello, static_cast<uint32_t>(options_.max_key_bytes));
        put<uint64_t>(hello, static_cast<uint64_t>(options_.max_value_bytes));
        append(hello, conn.nonce, kNonceBytes);
        conn.out.assign(hello.begin(), hello.end());
        if (secret) {
          conn.need = kProofBytes;
        } else {
          conn.phase = Conn::kReady;
          conn.need = kHeaderBytes;
          ++s.authenticated;
        }
        s.conns.push_back(std::move(conn));
        s.sync_stats();
        s.count([](Stats& st) { ++st.accepted; });
        if (!s.on_writable(s.conns.back())) s.close(std::prev(s.conns.end()));
      }
    }
    s.sync_stats();
  }
  while (!s.conns.empty()) s.close(s.conns.begin());
  s.sync_stats();
}

}  // namespace nabla::distributed
