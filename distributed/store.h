// Key-value stores for the rendezvous: how the processes of a job find each other before any
// collective runs. Gloo's TCP transport asks a store for the addresses of its peers
// (gloo::rendezvous::Store: set / get / wait); nabla adds `check` (are these keys set, without
// waiting) and a description for error messages.
//
//   TCPStore  rank 0 hosts a small server (a thread) on MASTER_ADDR:MASTER_PORT; every rank, rank 0
//             included, is a client. As PyTorch's TCPStore: set / get / add / wait with timeouts;
//             beyond it: it listens only where MASTER_ADDR points, authenticates its clients with
//             the job's secret, and bounds what a connection may cost it (TCPStoreOptions).
//   FileStore Gloo's FileStore: one file per key in a directory every rank can see (file:///path).
//
// Every call that waits takes a timeout and throws DistributedError naming the call, the store's
// address and the keys still missing; nothing waits forever.
#pragma once

#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/store.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../core/error.h"

namespace nabla::distributed {

// A collective, the rendezvous or the store failed: a peer died, timed out or disagrees.
class DistributedError : public Error {
  using Error::Error;
};

class Store : public gloo::rendezvous::Store {
 public:
  // True when every key is set now (no waiting).
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // "tcp://10.0.0.1:29500", "file:///shared/rdzv": for error messages.
  virtual std::string describe() const = 0;

  using gloo::rendezvous::Store::wait;
  // Gloo's one-argument wait: waits as long as the store's own timeout.
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout()); }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }

 protected:
  std::chrono::milliseconds timeout_{std::chrono::minutes(30)};
};

// How a TCPStore's server listens and whom it serves, and the bounds that keep a stray or hostile
// connection from stalling it or growing it (nabla goes beyond PyTorch's TCPStore here, which
// listens on every interface, serves one connection at a time and stores whatever it is sent).
struct TCPStoreOptions {
  // The server listens on the addresses its host name resolves to (MASTER_ADDR 127.0.0.1 or
  // localhost: loopback only); true: on every interface (0.0.0.0 and ::), as PyTorch's store does.
  bool listen_all = false;
  // The job's secret. Non-empty: a client must prove it knows it before the store reads any request,
  // and the server proves it back (HMAC-SHA256 over both sides' random nonces; the secret never
  // crosses the wire), so a client never talks to another job's store either. Empty: no
  // authentication, as PyTorch's TCPStore (a client with a secret refuses such a server).
  std::string secret;
  // Limits of the server. A key is at most max_key_bytes, a value at most max_value_bytes; the keys
  // and values held (64 bytes more per key) at most max_total_bytes, and the requests being received
  // at most max_total_bytes more. A request beyond them is refused with an error naming the limit.
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = size_t(16) << 20;
  size_t max_total_bytes = size_t(64) << 20;
  size_t max_connections = 4096;  // beyond: new connections are closed at once
  size_t max_pending = 128;       // not yet authenticated: a new one pushes out the oldest
  // A connection must finish its handshake within handshake_timeout of connecting, and each request
  // (and reply) within request_timeout of its first byte (plus 1 s per MiB), else it is dropped;
  // between requests an authenticated connection may stay idle (the ranks keep theirs all job).
  std::chrono::milliseconds handshake_timeout{10000};
  std::chrono::milliseconds request_timeout{10000};
};

// The server half of a TCPStore: one thread multiplexing every connection with poll() over
// non-blocking sockets: it never blocks on a client, so a slow or silent one cannot stall the others
// (waiting for keys is the clients' polling).
class TCPStoreServer {
 public:
  // Listens at `port` (0: a free port, see port()) on the addresses `host` resolves to, or on every
  // interface with options.listen_all. Throws DistributedError when it cannot listen.
  TCPStoreServer(const std::string& host, uint16_t port, TCPStoreOptions options = {});
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;
  uint16_t port() const { return port_; }
  // "127.0.0.1:29500", "[::1]:29500": where it listens.
  const std::vector<std::string>& listen_addresses() const { return addresses_; }
  // Waits until no authenticated client is connected, or `max` has passed.
  void wait_for_clients_to_leave(std::chrono::milliseconds max) const;

  struct Stats {
    size_t keys = 0, stored_bytes = 0, inflight_bytes = 0;  // inflight: requests being received
    size_t connections = 0, authenticated = 0;
    size_t accepted = 0;          // connections ever accepted
    size_t rejected = 0;          // failed the handshake (a wrong or no proof)
    size_t timed_out = 0;         // dropped for the handshake or request deadline
    size_t evicted = 0;           // closed for max_pending or max_connections
    size_t refused_requests = 0;  // answered with an error (a limit)
  };
  Stats stats() const;

 private:
  struct Impl;
  void run();
  TCPStoreOptions options_;
  std::vector<int> listen_fds_;
  std::vector<std::string> addresses_;
  int wake_pipe_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
};

class TCPStore : public Store {
 public:
  // is_server: host the server in this process (rank 0). Connecting retries until `timeout`
  // (the server may start after its clients) and then throws, naming host:port. With a secret, the
  // handshake proves both sides know it; a wrong secret (or a server without one) throws at once.
  TCPStore(std::string host, uint16_t port, bool is_server, std::chrono::milliseconds timeout,
           TCPStoreOptions options = {});
  ~TCPStore() override;

  // A key longer than the server's max_key_bytes or a value longer than its max_value_bytes is a
  // ValueError naming the limit (checked before sending); a store that is full answers with a
  // DistributedError naming its limit.
  void set(const std::string& key, const std::vector<char>& value) override;
  // Waits (up to the timeout) until the key is set.
  std::vector<char> get(const std::string& key) override;
  // Adds `delta` to the integer stored at key (0 when unset) and returns the sum, atomically.
  int64_t add(const std::string& key, int64_t delta);
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  using Store::wait;
  std::string describe() const override;
  uint16_t port() const { return port_; }
  // The local IP address of the connection to the server: the interface this host reaches the
  // master through, which is the one its peers can reach it on.
  std::string local_address() const;
  // Whether the handshake authenticated both sides (the job has a secret).
  bool authenticated() const { return authenticated_; }
  // Closes this client; on rank 0, keeps the server up until the other ranks have disconnected
  // (at most `max`), so that when init fails on rank 0 the others still read why they should fail.
  void close_and_linger(std::chrono::milliseconds max);
  // Rank 0's server (nullptr on the other ranks).
  const TCPStoreServer* server() const { return server_.get(); }

 private:
  // Sends one request frame and reads the reply's payload; throws on a lost connection or an error
  // reply. The caller holds mutex_.
  std::vector<char> request(uint8_t command, const std::vector<char>& body, const char* what, const std::string& key);
  void handshake(std::chrono::steady_clock::time_point deadline);
  std::string host_;
  uint16_t port_;
  TCPStoreOptions options_;
  std::unique_ptr<TCPStoreServer> server_;
  int fd_ = -1;
  bool authenticated_ = false;
  uint64_t server_max_key_ = 0, server_max_value_ = 0;  // from the server's hello
  std::mutex mutex_;                                    // one request at a time on the socket
};

// Gloo's FileStore with check() and a timeout that throws DistributedError.
class FileStore : public Store {
 public:
  FileStore(const std::string& path, std::chrono::milliseconds timeout);
  void set(const std::string& key, const std::vector<char>& value) override;
  std::vector<char> get(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  using Store::wait;
  std::string describe() const override { return "file://" + path_; }

 private:
  struct Impl : gloo::rendezvous::FileStore {
    using gloo::rendezvous::FileStore::check;  // protected in Gloo
    using gloo::rendezvous::FileStore::FileStore;
  };
  std::string path_;
  Impl impl_;
};

}  // namespace nabla::distributed
