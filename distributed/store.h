// Key-value stores for the rendezvous: how the processes of a job find each other before any
// collective runs. Gloo's TCP transport asks a store for the addresses of its peers
// (gloo::rendezvous::Store: set / get / wait); nabla adds `check` (are these keys set, without
// waiting) and a description for error messages.
//
//   TCPStore  rank 0 hosts a small server (a thread) on MASTER_ADDR:MASTER_PORT; every rank, rank 0
//             included, is a client. As PyTorch's TCPStore: set / get / add / wait with timeouts.
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
class DistributedError : public Error { using Error::Error; };

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

// The server half of a TCPStore: a thread answering set/get/add/check requests; it never blocks on
// a request (waiting is the clients' polling), so one slow client cannot stall the others.
class TCPStoreServer {
 public:
  // Listens on every IPv4 interface at `port` (0: a free port, see port()).
  explicit TCPStoreServer(uint16_t port);
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;
  uint16_t port() const { return port_; }
  // Waits until no client is connected, or `max` has passed.
  void wait_for_clients_to_leave(std::chrono::milliseconds max) const;

 private:
  void run();
  std::atomic<int> clients_{0};
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  uint16_t port_ = 0;
  std::thread thread_;
};

class TCPStore : public Store {
 public:
  // is_server: host the server in this process (rank 0). Connecting retries until `timeout`
  // (the server may start after its clients) and then throws, naming host:port.
  TCPStore(std::string host, uint16_t port, bool is_server, std::chrono::milliseconds timeout);
  ~TCPStore() override;

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
  // Closes this client; on rank 0, keeps the server up until the other ranks have disconnected
  // (at most `max`), so that when init fails on rank 0 the others still read why they should fail.
  void close_and_linger(std::chrono::milliseconds max);

 private:
  void send_request(const std::vector<char>& msg);  // the caller holds mutex_
  std::string host_;
  uint16_t port_;
  std::unique_ptr<TCPStoreServer> server_;
  int fd_ = -1;
  std::mutex mutex_;  // one request at a time on the socket
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
    using gloo::rendezvous::FileStore::FileStore;
    using gloo::rendezvous::FileStore::check;  // protected in Gloo
  };
  std::string path_;
  Impl impl_;
};

}  // namespace nabla::distributed
